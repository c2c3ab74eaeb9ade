//! Unit tests of the trace format, dump and export on traces made here.

use super::dump::dump;
use super::export::{ExecSignature, FlatTraceBuilder, Merge, crc32};
use super::format::*;
use coresight_decode::arch::{InstrType, Isa};
use coresight_decode::element::{ElemType, TraceElement};

fn sample(pc: PcSize, endian: Endian) -> TraceFile<'static> {
    let mut t = TraceFile::new_flat(pc, endian, if pc == PcSize::Bits64 { EM_AARCH64 } else { EM_ARM });
    t.infos = vec![
        InfoEntry::new(
            InfoKind::DateTime,
            DateTime {
                year: 2026,
                month: 3,
                day: 24,
                hour: 14,
                min: 59,
                sec: 38,
            }
            .to_bytes(endian)
            .to_vec(),
        ),
        InfoEntry::new(InfoKind::ExecFileName, b"obj/prog".to_vec()),
        InfoEntry::new(InfoKind::CoverageOptions, b"insn".to_vec()),
        InfoEntry::new(InfoKind::UserData, b"tag\x01".to_vec()),
        InfoEntry::new(InfoKind::KernelFileName, b"kernel".to_vec()),
        InfoEntry::number(InfoKind::ExecFileSize, 19104),
        InfoEntry::new(InfoKind::ExecFileTimeStamp, b"2026-03-24 14:59:38".to_vec()),
        InfoEntry::number(InfoKind::ExecFileCrc32, 3643145681),
        InfoEntry::new(InfoKind::CoverageContext, b"ctx".to_vec()),
        InfoEntry::number(InfoKind::ExecCodeSize, 4096),
    ];
    t.records = vec![
        Record::Exec(Entry::new(0x1000, 8, Op::BLOCK | Op::BR0)),
        Record::LoadAddr { offset: 0x800 },
        Record::Exec(Entry::new(0x1008, 0, Op::FAULT)),
        Record::LoadSharedObject {
            base: 0x4000,
            infos: vec![
                InfoEntry::new(InfoKind::ExecFileName, b"libx.so".to_vec()),
                InfoEntry::number(InfoKind::ExecCodeSize, 0x100),
            ],
        },
        Record::Exec(Entry::new(0x4010, 4, Op::BLOCK)),
        Record::UnloadSharedObject { base: 0x4000 },
        Record::Exec(Entry::new(0xfffc, 6, Op::BLOCK | Op::BR1)),
    ];
    t
}

#[test]
fn round_trips_all_forms() {
    for pc in [PcSize::Bits32, PcSize::Bits64] {
        for endian in [Endian::Little, Endian::Big] {
            let t = sample(pc, endian);
            let bytes = t.to_bytes();
            let back = TraceFile::parse(&bytes).unwrap();
            assert_eq!(back, t, "{pc:?} {endian:?}");
            assert_eq!(back.to_bytes(), bytes);
            // Fields land where the layout says.
            assert_eq!(&bytes[..12], MAGIC);
            assert_eq!(bytes[13], 2);
            assert_eq!(bytes[15], (endian == Endian::Big) as u8);
            let v = back.info(InfoKind::ExecFileSize).unwrap().value(endian);
            assert_eq!(v, InfoValue::Number(19104));
            let d = back.info(InfoKind::DateTime).unwrap().value(endian);
            assert_eq!(
                d,
                InfoValue::DateTime(DateTime {
                    year: 2026,
                    month: 3,
                    day: 24,
                    hour: 14,
                    min: 59,
                    sec: 38
                })
            );
            assert!(matches!(
                back.info(InfoKind::ExecFileTimeStamp).unwrap().value(endian),
                InfoValue::TimeStamp(_)
            ));
        }
    }
}

#[test]
fn big_endian_fields_are_big_endian() {
    let t = sample(PcSize::Bits32, Endian::Big);
    let b = t.to_bytes();
    // First info entry: kind 4 (Date_Time), length 8, year 2026 big endian.
    assert_eq!(&b[20..28], &[0, 0, 0, 4, 0, 0, 0, 8]);
    assert_eq!(&b[28..30], &2026u16.to_be_bytes());
    let flat = b.len() - 7 * 8 - 3 * 8 - 8 - 12 - 20; // not used: find the second header instead
    let _ = flat;
    let second = b.windows(12).skip(1).position(|w| w == MAGIC).unwrap() + 1;
    let e = &b[second + 20..second + 28];
    assert_eq!(e, &[0, 0, 0x10, 0, 0, 8, 0x11, 0]);
}

#[test]
fn dump_is_gnatcov_form() {
    let mut t = sample(PcSize::Bits32, Endian::Little);
    t.infos.truncate(4);
    let d = dump(&t, false);
    let want = "Kind: FLAT\n\n\
Tag  : DATE_TIME (Date)\nLen  : 8\nData : ea 07 03 18 0e 3b 26 00\n       2026-03-24 14:59:38 UTC\n\n\
Tag  : EXEC_FILE_NAME\nLen  : 8\nData : obj/prog\n\n\
Tag  : COVERAGE_OPTIONS\nLen  : 4\nData : insn\n\n\
Tag  : USER_DATA (User_Tag)\nLen  : 4\nData : 74 61 67 01\n\n\
Traces:\n\
00001000-00001007 ?: 11 ---t block\n\
00001008-00001007 ?: 20 ---- fault\n\
Loading shared object libx.so\n   at 00004000 .. 000040ff\n\
00000010-00000013 ?: 10 ---- block\n\
0000fffc-00010001 ?: 12 --t- block\n";
    assert_eq!(d, want);
    let raw = dump(&t, true);
    assert!(raw.contains("\n00004010-00004013 ?: 10 ---- block\n"), "{raw}");
}

#[test]
fn dump_with_kernel_skips_entries_before_load_address() {
    let t = sample(PcSize::Bits64, Endian::Little);
    let d = dump(&t, false);
    assert!(d.contains("Kernel was loaded at: 0000000000000800\n"), "{d}");
    assert!(!d.contains("0000000000001000-"), "{d}");
    assert!(
        d.contains("\n0000000000000808-0000000000000807 ?: 20 ---- fault\n"),
        "{d}"
    );
}

fn err(bytes: &[u8]) -> ParseError {
    TraceFile::parse(bytes).unwrap_err()
}

#[test]
fn errors_name_the_byte() {
    let good = sample(PcSize::Bits32, Endian::Little).to_bytes();
    // Wrong magic.
    let mut b = good.clone();
    b[3] = b'X';
    assert_eq!(err(&b).offset, 0);
    assert_eq!(err(&b).kind, FormatError::BadMagic);
    assert_eq!(err(b"ELF").kind, FormatError::BadMagic);
    // Truncated header.
    let e = err(&good[..15]);
    assert_eq!(
        (e.offset, &e.kind),
        (
            0,
            &FormatError::Truncated {
                what: "header",
                need: 20,
                have: 15
            }
        )
    );
    // Entry past the end of the file.
    let e = err(&good[..good.len() - 3]);
    assert_eq!(e.offset, good.len() - 8);
    assert_eq!(e.kind, FormatError::EntryPastEnd { need: 8, have: 5 });
    // Info entry longer than the file.
    let mut b = good.clone();
    b[27] = 0x7f;
    let e = err(&b);
    assert_eq!(e.offset, 20);
    assert!(matches!(e.kind, FormatError::InfoPastEnd { .. }));
    // Bad version, kind, endianness, pc size.
    for (at, v, want) in [
        (12, 2, FormatError::BadVersion(2)),
        (13, 9, FormatError::BadKind(9)),
        (15, 7, FormatError::BadEndian(7)),
    ] {
        let mut b = good.clone();
        b[at] = v;
        assert_eq!(err(&b).kind, want);
        assert_eq!(err(&b).offset, at);
    }
    let e = err(&[b"#QEMU-Traces".as_slice(), &[1, 0, 5, 0, 0, 40, 0, 0]].concat());
    assert_eq!((e.offset, e.kind), (14, FormatError::BadPcSize(5)));
    let shown = err(&good[..15]).in_file("x.trace").to_string();
    assert_eq!(shown, "x.trace: byte 0: file truncated: header needs 20 bytes, 15 left");
}

#[test]
fn crc32_is_ieee() {
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    assert_eq!(crc32(b""), 0);
    let s = ExecSignature::of_bytes("p".into(), b"123456789", DateTime::from_unix(0));
    assert_eq!(s.time_stamp.to_string(), "1970-01-01 00:00:00");
    let e = s.info_entries();
    assert_eq!(&*e[1].data, b" 9");
    assert_eq!(&*e[3].data, b" 3421780262");
    assert_eq!(DateTime::from_unix(1_774_364_378).to_string(), "2026-03-24 14:59:38");
    assert_eq!(DateTime::from_unix(951_782_400).to_string(), "2000-02-29 00:00:00");
}

fn range(st: u64, en: u64, ty: InstrType, cond: bool, exec: bool, isa: Isa) -> TraceElement {
    TraceElement {
        elem_type: ElemType::InstrRange,
        st_addr: st,
        en_addr: en,
        last_i_type: ty,
        last_instr_cond: cond,
        last_instr_exec: exec,
        isa,
        ..Default::default()
    }
}

#[test]
fn export_merges_per_block_and_outcome() {
    let mut b = FlatTraceBuilder::new(Merge::All);
    let exc = TraceElement {
        elem_type: ElemType::Exception,
        ..Default::default()
    };
    for _ in 0..3 {
        b.add(
            0x10,
            &range(0x1000, 0x1010, InstrType::Branch, true, true, Isa::Aarch64),
        );
        b.add(
            0x10,
            &range(0x1000, 0x1010, InstrType::Branch, true, false, Isa::Aarch64),
        );
        b.add(
            0x10,
            &range(0x2000, 0x2008, InstrType::BranchIndirect, false, true, Isa::Aarch64),
        );
        b.add(
            0x10,
            &range(0x3000, 0x300c, InstrType::Other, false, true, Isa::Aarch64),
        );
        b.add(0x10, &exc);
        b.add(0x11, &range(0x3000, 0x3008, InstrType::Isb, false, true, Isa::Aarch64));
    }
    b.finish();
    let got: Vec<_> = b.entries(None).to_vec();
    assert_eq!(
        got,
        vec![
            Entry::new(0x1000, 16, 0x11),
            Entry::new(0x1000, 16, 0x12),
            Entry::new(0x2000, 8, 0x11),
            Entry::new(0x3000, 12, 0x20),
            Entry::new(0x3000, 8, 0x10),
        ]
    );
    let t = b.trace_file(None, None, Endian::Little, None, None);
    assert_eq!(t.header.machine, EM_AARCH64);
    assert_eq!(t.header.pc_size, PcSize::Bits64);
    // Per trace ID.
    let mut p = FlatTraceBuilder::new(Merge::PerTraceId);
    p.add(1, &range(0x100, 0x104, InstrType::Branch, false, true, Isa::Arm));
    p.add(2, &range(0x200, 0x204, InstrType::Branch, false, true, Isa::Thumb2));
    p.add(1, &range(0x100, 0x104, InstrType::Branch, false, true, Isa::Arm));
    p.finish();
    assert_eq!(p.streams(), vec![Some(1), Some(2)]);
    assert_eq!(p.entries(Some(1)), &[Entry::new(0x100, 4, 0x11)]);
    let t = p.trace_file(Some(2), None, Endian::Big, None, None);
    assert_eq!((t.header.machine, t.header.pc_size), (EM_ARM, PcSize::Bits32));
    // Long ranges are split.
    let mut l = FlatTraceBuilder::new(Merge::All);
    l.add(0, &range(0x10000, 0x30000, InstrType::Branch, true, true, Isa::Aarch64));
    l.finish();
    let e = l.entries(None);
    assert_eq!(e.iter().map(|e| e.size as u64).sum::<u64>(), 0x20000);
    assert!(e[..e.len() - 1].iter().all(|e| e.op.0 == Op::BLOCK));
    assert_eq!(e.last().unwrap().op.0, 0x11);
}

#[test]
fn riscv_export_machine_and_pc_size_follow_the_hart() {
    let ctx = |bits64: bool| {
        let mut e = TraceElement {
            elem_type: ElemType::PeContext,
            isa: Isa::RiscV,
            ..Default::default()
        };
        e.context.bits64 = bits64;
        e
    };
    for (bits64, pc) in [(true, PcSize::Bits64), (false, PcSize::Bits32)] {
        let mut b = FlatTraceBuilder::new(Merge::All);
        b.add(0, &ctx(bits64));
        b.add(0, &range(0x1000, 0x100a, InstrType::Branch, true, false, Isa::RiscV));
        b.finish();
        assert_eq!(b.riscv(None), Some(bits64));
        assert_eq!(b.entries(None), &[Entry::new(0x1000, 10, 0x12)]);
        let t = b.trace_file(None, None, Endian::Little, None, None);
        assert_eq!((t.header.machine, t.header.pc_size), (EM_RISCV, pc), "bits64={bits64}");
        // An ELF's machine (EM_RISCV) keeps the hart's width.
        let t = b.trace_file(None, Some(EM_RISCV), Endian::Little, None, None);
        assert_eq!(t.header.pc_size, pc);
    }
}

#[test]
fn riscv_conditional_branches() {
    use super::coverage::riscv_cond_branch;
    // As the GNU assembler writes them.
    let yes = [
        0x00b50463u32,
        0xfe0718e3,
        0x00c5c463,
        0x00c5d463,
        0x00c5e463,
        0x00c5f463,
        0xc391,
        0xe391,
    ];
    // jal ra; ret; c.ret; c.j; c.addi; addi; funct3 2 and 3 under opcode 0x63 (reserved); lw.
    let no = [
        0x008000efu32,
        0x00008067,
        0x8082,
        0xa001,
        0x0505,
        0x00150513,
        0x00b52463,
        0x00b53463,
        0x00052503,
    ];
    for op in yes {
        assert!(riscv_cond_branch(op), "{op:#x}");
    }
    for op in no {
        assert!(!riscv_cond_branch(op), "{op:#x}");
    }
}

#[test]
fn riscv_code_image_classifies_each_instruction() {
    use super::coverage::{CodeImage, Coverage, Execution};
    // beq a0,a1,+6 (4 bytes); c.addi a0,1 (2); c.bnez a5,-6 (2); ret (4).
    let mut code = Vec::new();
    code.extend(0x00b50363u32.to_le_bytes());
    code.extend(0x0505u16.to_le_bytes());
    code.extend(0xffed_u16.to_le_bytes());
    code.extend(0x00008067u32.to_le_bytes());
    let img = CodeImage::from_regions(vec![(0x2000, code)], Isa::RiscV);
    assert_eq!(img.machine, EM_RISCV);
    // The beq both taken and not; the c.bnez only fell through.
    let entries = [Entry::new(0x2000, 4, 0x11), Entry::new(0x2000, 8, 0x12)];
    let cov = Coverage::compute(&img, &Execution::from_entries(&img, &entries));
    let got: Vec<(u64, u8, bool, char)> = cov.routines[0]
        .insns
        .iter()
        .map(|i| (i.insn.addr, i.insn.size, i.insn.cond_branch, i.state.mark()))
        .collect();
    assert_eq!(
        got,
        [
            (0x2000, 4, true, '+'),
            (0x2004, 2, false, '+'),
            (0x2006, 2, true, 'v'),
            (0x2008, 4, false, '-')
        ]
    );
}
