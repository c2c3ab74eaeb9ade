//! Decoded RISC-V trace in the project's other outputs: Tarmac instruction
//! lines and gnatcov flat traces with object coverage, checked against
//! what QEMU ran (the `calls` fixture and the shipped `qemu-calls`
//! snapshot made from it) and against random RV32 executions.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::*;
use coresight_gnatcov::coverage::{CodeImage, Coverage, Execution};
use coresight_gnatcov::export::{FlatTraceBuilder, Merge};
use coresight_gnatcov::format::{EM_RISCV, Endian, Entry, Op, PcSize, TraceFile};
use coresight_tarmac::writer::{MemImage, TarmacWriter, WriterOptions, snapshot_to_tarmac_with_registry};
use riscv_trace::config::{CoreIsa, TraceReg};
use riscv_trace::instr::{Flow, classify};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn shipped_snapshot() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/qemu-calls")
}

/// The PCs QEMU executed running `calls` (the shipped snapshot's trace).
fn calls_pcs() -> Vec<u64> {
    let mut text = String::new();
    lzma_rust2::XzReader::new(std::fs::File::open(fixtures().join("calls.pcs.xz")).unwrap(), false)
        .read_to_string(&mut text)
        .unwrap();
    text.lines().map(|l| u64::from_str_radix(l, 16).unwrap()).collect()
}

/// One parsed instruction line: status (`IT`/`IS`), address, opcode
/// digits, instruction set letter, mode, and the text after the colon.
#[derive(Debug)]
struct Line {
    status: String,
    addr: u64,
    opcode: String,
    letter: String,
    mode: String,
    count: u64,
    /// The time and its unit (`clk`: instruction count, `tic`: timestamp).
    time: (u64, String),
}

fn parse(tarmac: &str) -> Vec<Line> {
    tarmac
        .lines()
        .map(|l| {
            // `TIME clk|tic IT (N) ADDR OPCODE R U : ...`
            let f: Vec<&str> = l.split(' ').collect();
            assert!(f[1] == "clk" || f[1] == "tic", "{l}");
            assert_eq!(f[8], ":", "{l}");
            let count: u64 = f[3].trim_start_matches('(').trim_end_matches(')').parse().unwrap();
            Line {
                status: f[2].to_string(),
                addr: u64::from_str_radix(f[4], 16).unwrap(),
                opcode: f[5].to_string(),
                letter: f[6].to_string(),
                mode: f[7].to_string(),
                count,
                time: (f[0].parse().unwrap(), f[1].to_string()),
            }
        })
        .collect()
}

/// The conditional branches of a PC run that fell through.
fn not_taken(p: &Program, pcs: &[u64]) -> usize {
    pcs.windows(2)
        .filter(|w| {
            let i = classify(p.isa, w[0], p.fetch(w[0]).unwrap()).unwrap();
            matches!(i.flow, Flow::Branch { .. }) && w[1] == w[0] + i.size as u64
        })
        .count()
}

#[test]
fn tarmac_of_the_shipped_snapshot_lists_the_pcs_qemu_ran() {
    let pcs = calls_pcs();
    let p = program_from_elf(&std::fs::read(fixtures().join("calls.elf")).unwrap());
    let mut out = Vec::new();
    let n = snapshot_to_tarmac_with_registry(
        &shipped_snapshot(),
        riscv_trace::registry(),
        &mut out,
        WriterOptions::default(),
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines = parse(&text);
    assert_eq!(n as usize, pcs.len());
    assert_eq!(
        lines.iter().map(|l| l.addr).collect::<Vec<_>>(),
        pcs,
        "the executed PCs, in order"
    );
    // The snapshot has a timestamp every 500 instructions (the count):
    // times are those, in order.
    let times: Vec<u64> = lines.iter().map(|l| l.time.0).collect();
    assert!(lines.iter().all(|l| l.time.1 == "tic"));
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let mut distinct = times.clone();
    distinct.dedup();
    assert_eq!(distinct, (0..pcs.len() as u64).step_by(500).collect::<Vec<_>>());
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l.count, i as u64 + 1);
        assert_eq!(l.letter, "R");
        // The program runs in user mode (qemu-user).
        assert_eq!(l.mode, "U", "{l:?}");
        // The opcode as fetched: 4 digits for a compressed instruction.
        let op = p.fetch(l.addr).unwrap();
        let want = if op & 3 == 3 {
            format!("{op:08x}")
        } else {
            format!("{op:04x}")
        };
        assert_eq!(l.opcode, want, "{l:?}");
    }
    // Both sizes occur (RV64GC code).
    assert!(lines.iter().any(|l| l.opcode.len() == 4) && lines.iter().any(|l| l.opcode.len() == 8));
    // Conditional branches that fell through are `IS`, all else `IT`.
    let is = lines.iter().filter(|l| l.status == "IS").count();
    assert_eq!(is, not_taken(&p, &pcs));
    assert!(is > 0);
    assert_eq!(is + lines.iter().filter(|l| l.status == "IT").count(), lines.len());

    // The project's Tarmac reader reads it back: RISC-V state, widths.
    use coresight_tarmac::{Effect, Iset, Reader, RecordKind};
    let mut r = Reader::new(std::io::Cursor::new(text.as_bytes()));
    let mut back = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        let RecordKind::Instruction(i) = rec.kind else {
            panic!("only instruction lines")
        };
        assert_eq!((i.iset, i.mode), (Iset::RiscV, Some("U")));
        assert_eq!(i.width as u64, p.size_at(i.addr) * 8);
        assert_eq!(i.encoding, Some(p.fetch(i.addr).unwrap() as u64));
        back.push((i.addr, i.effect == Effect::CcFail));
    }
    assert_eq!(back.iter().map(|b| b.0).collect::<Vec<_>>(), pcs);
    assert_eq!(back.iter().filter(|b| b.1).count(), is);
}

#[test]
fn tarmac_of_rv32_executions_has_the_executed_pcs_and_privileges() {
    let mut rng = Rng::new(0x7a7c);
    for compressed in [true, false] {
        let isa = CoreIsa { xlen: 32, compressed };
        let p = random_program(&mut rng, isa, 0x8000_0000, 300);
        // One hart, with traps, trap returns and interrupts.
        let steps = random_execution(&mut rng, &p, 2000, 1);
        let trace = TraceReg::SUPPORTED | TraceReg::EMIT_PC | TraceReg::EMIT_BRANCH | TraceReg::EMIT_PRIV;
        let enc = encode(&p, trace, 8192, &steps);
        let elems = decode(&enc, &p, 0, 64);
        assert_eq!(trouble(&elems), Vec::<String>::new());
        let mem = MemImage {
            regions: vec![(p.base, p.bytes.clone())],
        };
        let mut w = TarmacWriter::new(Vec::new(), mem, WriterOptions::default());
        for (i, e) in &elems {
            use coresight_decode::interfaces::TrcGenElemIn;
            assert!(w.trace_elem_in(*i, 0, e).is_cont(), "{:?}", w.error());
        }
        let text = String::from_utf8(w.into_inner()).unwrap();
        let lines = parse(&text);
        // No timestamps: the time is the instruction count.
        assert!(lines.iter().all(|l| l.time == (l.count, "clk".to_string())));
        let want: Vec<u64> = steps.iter().map(|s| s.pc).collect();
        assert_eq!(
            lines.iter().map(|l| l.addr).collect::<Vec<_>>(),
            want,
            "compressed={compressed}"
        );
        assert!(lines.iter().all(|l| l.letter == "R"));
        // Each instruction in the privilege it ran in; all of U, S and M occur.
        let modes: Vec<&str> = lines.iter().map(|l| l.mode.as_str()).collect();
        let want_modes: Vec<&str> = steps
            .iter()
            .map(|s| ["U", "S", "H", "M"][s.mode.prv as usize])
            .collect();
        assert_eq!(modes, want_modes);
        assert!(["U", "S", "M"].iter().all(|m| modes.contains(m)));
        assert_eq!(lines.iter().any(|l| l.opcode.len() == 4), compressed);
    }
}

/// Flat-trace entries from a run of PCs, as QEMU's gnatcov traces have
/// them: one block per straight run, ending where the PC jumped (`Br0`).
fn entries_from_pcs(p: &Program, pcs: &[u64]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut start = pcs[0];
    for (i, &pc) in pcs.iter().enumerate() {
        let end = pc + p.size_at(pc);
        match pcs.get(i + 1) {
            Some(&next) if next == end => {}
            Some(&next) => {
                out.push(Entry::new(start, (end - start) as u16, Op::BLOCK | Op::BR0));
                start = next;
            }
            None => out.push(Entry::new(start, (end - start) as u16, Op::BLOCK)),
        }
    }
    out
}

#[test]
fn gnatcov_export_of_the_shipped_snapshot_is_em_riscv_with_qemus_coverage() {
    use coresight_decode::builder::TreeBuilder;
    use coresight_decode::datapath::DatapathOp;
    use coresight_decode::interfaces::TrcDataIn;
    use coresight_decode::snapshot::Snapshot;
    let dir = shipped_snapshot();
    let ss = Snapshot::load(&dir).unwrap();
    let mut tree = TreeBuilder::with_registry(&ss, riscv_trace::registry())
        .build("tbuf", coresight_decode::decoder::DecodeMode::FullDecode, |_| {})
        .unwrap();
    let b = std::sync::Arc::new(coresight_decode::shared::Lock::new(FlatTraceBuilder::new(Merge::All)));
    tree.set_gen_elem_out(Box::new(coresight_gnatcov::export::SharedBuilder(b.clone())));
    let data = std::fs::read(dir.join("trace.bin")).unwrap();
    let (r, used) = tree.trace_data_in(DatapathOp::Data, 0, &data);
    assert!(r.is_cont() && used == data.len());
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    b.borrow_mut().finish();
    let b = b.borrow();

    let t = b.trace_file(None, None, Endian::Little, None, None);
    assert_eq!((t.header.machine, t.header.pc_size), (EM_RISCV, PcSize::Bits64));
    // It reads back as written.
    let bytes = t.to_bytes();
    let back = TraceFile::parse(&bytes).unwrap();
    assert_eq!(back.header.machine, EM_RISCV);
    let traced: Vec<Entry> = back.entries().copied().collect();
    assert_eq!(traced, b.entries(None));

    // Its coverage of the (stripped) ELF equals what QEMU's executed PCs give.
    let elf = std::fs::read(fixtures().join("calls.elf")).unwrap();
    let img = CodeImage::from_elf(&elf).unwrap();
    assert_eq!(img.machine, EM_RISCV);
    assert_eq!(img.routines.len(), 1);
    assert_eq!(img.routines[0].name, ".text");
    let from_trace = Coverage::compute(&img, &Execution::from_entries(&img, &traced));
    let p = program_from_elf(&elf);
    let pcs = calls_pcs();
    let from_qemu = Coverage::compute(&img, &Execution::from_entries(&img, &entries_from_pcs(&p, &pcs)));
    assert_eq!(from_trace, from_qemu);
    // ... and says something: instructions that ran and not, branches both
    // ways and one way.
    let s = from_trace.total;
    let distinct: std::collections::HashSet<u64> = pcs.iter().copied().collect();
    assert_eq!(s.covered, distinct.len());
    assert!(
        s.insns > s.covered && s.branches > 0 && s.fully > 0 && s.partially > 0,
        "{s:?}"
    );
}
