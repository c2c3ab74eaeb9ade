//! Coverage of a real program: a small C program built for AArch64 and for
//! Arm Thumb (tests/fixtures/cov, rebuilt by its make.sh), whose executions
//! under qemu-user, one instruction per block, were turned into gnatcov
//! flat traces. The oracles come from binutils: addr2line's source line of
//! every executed instruction (our DWARF line mapping must agree for each,
//! and the lcov tracefile must mark exactly those lines hit), and marks and
//! per-routine summaries computed from objdump's listing and the executed
//! path (our object coverage must give the same, instruction by
//! instruction).

use coresight_tools::lcov;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cov")
        .join(name)
}

fn trc_cov(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_trc_cov")).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn path(name: &str) -> String {
    fixture(name).to_str().unwrap().to_string()
}

/// (address, line) per executed instruction, from addr2line.
fn oracle(arch: &str) -> Vec<(u64, u32)> {
    let text = std::fs::read_to_string(fixture(&format!("prog-{arch}.lines"))).unwrap();
    text.lines()
        .map(|l| {
            let (a, loc) = l.split_once('\t').unwrap();
            // `file:line`, sometimes followed by ` (discriminator N)`.
            let loc = loc.split(" (").next().unwrap();
            let (file, line) = loc.rsplit_once(':').unwrap();
            assert!(file.ends_with("prog.c"), "{l}");
            (
                u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap(),
                line.trim().parse().unwrap(),
            )
        })
        .collect()
}

fn line_of(src: &str, text: &str) -> u32 {
    src.lines()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("no `{text}` in prog.c")) as u32
        + 1
}

#[test]
fn every_executed_instruction_maps_to_its_line() {
    for arch in ["a64", "t32"] {
        let table = lcov::LineTable::from_elf(&std::fs::read(fixture(&format!("prog-{arch}.elf"))).unwrap()).unwrap();
        let executed = oracle(arch);
        assert!(executed.len() > 40, "{arch}: {}", executed.len());
        for (addr, line) in &executed {
            let (f, l) = table
                .lookup(*addr)
                .unwrap_or_else(|| panic!("{arch} {addr:#x}: no line"));
            assert_eq!(table.files[f], "prog.c");
            assert_eq!(l, *line, "{arch} {addr:#x}");
        }
    }
    // Not an ELF, and an ELF without DWARF.
    assert!(
        lcov::LineTable::from_elf(b"#!/bin/sh")
            .unwrap_err()
            .starts_with("not an ELF file")
    );
}

#[test]
fn lcov_tracefile_marks_the_lines_that_ran() {
    let info = trc_cov(&[
        "lcov",
        "--test-name",
        "qemu",
        "--elf",
        &path("prog-a64.elf"),
        &path("prog-a64.trace"),
    ]);
    assert!(info.starts_with("TN:qemu\nSF:prog.c\n"), "{info}");
    assert!(info.ends_with("end_of_record\n"));
    let hit: BTreeSet<u32> = info
        .lines()
        .filter_map(|l| l.strip_prefix("DA:")?.strip_suffix(",1")?.parse().ok())
        .collect();
    let missed: BTreeSet<u32> = info
        .lines()
        .filter_map(|l| l.strip_prefix("DA:")?.strip_suffix(",0")?.parse().ok())
        .collect();
    let want: BTreeSet<u32> = oracle("a64").iter().map(|x| x.1).collect();
    assert_eq!(hit, want, "lines hit = lines of executed instructions");
    assert!(hit.is_disjoint(&missed));
    let src = std::fs::read_to_string(fixture("prog.c")).unwrap();
    for never in ["return v * 3 + 1;", "a = never_called(a);"] {
        assert!(missed.contains(&line_of(&src, never)), "{never}");
    }
    assert!(
        info.contains("\nFNDA:0,never_called\n")
            && info.contains("\nFNDA:1,main\n")
            && info.contains("\nFNDA:1,classify\n")
    );
    assert!(info.contains("\nFNF:7\nFNH:6\n"), "{info}");
    // `if (v < 0)`: classify(5) and classify(-2) went both ways.
    let l = line_of(&src, "if (v < 0)");
    assert!(info.contains(&format!("\nBRDA:{l},0,0,1\nBRDA:{l},0,1,1\n")), "{info}");
    // `if (s > 100)` is false: the branch over its body was always taken.
    let l = line_of(&src, "if (s > 100)");
    assert!(info.contains(&format!("\nBRDA:{l},0,0,1\nBRDA:{l},0,1,0\n")), "{info}");
    assert!(
        info.contains(&format!("\nLF:{}\nLH:{}\n", hit.len() + missed.len(), want.len())),
        "{info}"
    );
}

/// Object coverage of the A64 and the T32 (Thumb, with an IT block and a
/// TBB table in the code) builds: every instruction's mark and every
/// routine's summary as the objdump-based oracle gives them.
#[test]
fn object_coverage_matches_the_oracle() {
    for arch in ["a64", "t32"] {
        let (elf, trace) = (path(&format!("prog-{arch}.elf")), path(&format!("prog-{arch}.trace")));
        let summary = trc_cov(&["coverage", "--summary", "--elf", &elf, &trace]);
        let want = std::fs::read_to_string(fixture(&format!("prog-{arch}.summary"))).unwrap();
        assert_eq!(summary, want, "{arch}");
        let report = trc_cov(&["coverage", "--elf", &elf, &trace]);
        let marks: Vec<String> = report
            .lines()
            .filter_map(|l| {
                let (addr, rest) = l.split_once(' ')?;
                let mark = rest.strip_suffix(':').or_else(|| rest.split_once(":  ").map(|x| x.0))?;
                (addr.len() >= 8 && u64::from_str_radix(addr, 16).is_ok() && mark.len() == 1)
                    .then(|| format!("{:x} {mark}", u64::from_str_radix(addr, 16).unwrap()))
            })
            .collect();
        let want: Vec<String> = std::fs::read_to_string(fixture(&format!("prog-{arch}.marks")))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(marks, want, "{arch}");
        for m in ["+", "-", ">", "v"] {
            assert!(want.iter().any(|w| w.ends_with(m)), "{arch}: the program shows no {m}");
        }
    }
    // Restricted to two routines, by name and from a file.
    let list = std::env::temp_dir().join(format!("trc_cov_routines_{}", std::process::id()));
    std::fs::write(&list, "classify\nnever_called\n").unwrap();
    let by_file = trc_cov(&[
        "coverage",
        "--summary",
        "--routines",
        &format!("@{}", list.display()),
        "--elf",
        &path("prog-t32.elf"),
        &path("prog-t32.trace"),
    ]);
    let by_name = trc_cov(&[
        "coverage",
        "--summary",
        "--routines",
        "classify,never_called",
        "--elf",
        &path("prog-t32.elf"),
        &path("prog-t32.trace"),
    ]);
    assert_eq!(by_file, by_name);
    assert!(
        by_name.starts_with("classify +:\n8 instructions analyzed:\n  8 covered\n"),
        "{by_name}"
    );
    assert!(by_name.ends_with("11 instructions analyzed:\n  8 covered\n  3 not executed\n1 conditional branches analyzed:\n  1 fully covered\n  0 partially covered\n  0 not executed\n"), "{by_name}");
}

/// The A64 program's real execution (qemu's path) carried through our
/// ETMv4 encoder into a snapshot whose memory is the ELF's code, decoded,
/// and exported: the coverage and the lcov tracefile are the same as from
/// the path itself.
#[test]
fn real_execution_through_etmv4_gives_the_same_coverage() {
    use coresight_decode::shared::Lock;
    use std::sync::Arc;

    use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrType, Isa};
    use coresight_decode::instr::ArmInstrDecoder;
    use coresight_decode::interfaces::InstrDecode;
    use coresight_generator::Generated;
    use coresight_generator::check::decode_into;
    use coresight_generator::etmv4::{Encoder, PktCtx};
    use coresight_generator::snapshot_writer::{BufferSpec, DeviceSpec, DumpSpec, SnapshotSpec};
    use coresight_gnatcov::coverage::{CodeImage, Coverage, Execution};
    use coresight_gnatcov::export::{FlatTraceBuilder, Merge, SharedBuilder};
    use coresight_gnatcov::format::read_file;

    let elf = std::fs::read(fixture("prog-a64.elf")).unwrap();
    let img = CodeImage::from_elf(&elf).unwrap();
    let pcs: Vec<u64> = std::fs::read_to_string(fixture("prog-a64.pcs"))
        .unwrap()
        .lines()
        .map(|l| u64::from_str_radix(l, 16).unwrap())
        .collect();

    // ETMv4: an atom for each branch (E taken, N not), an address after
    // each taken indirect branch, and the final SVC's exception.
    let mut enc = Encoder::new(1 << 20);
    enc.sync();
    enc.trace_on();
    // EL1 Non-secure AArch64; no context ID or VMID traced (TRCCONFIGR).
    enc.addr_ctx(
        pcs[0],
        0,
        &PktCtx {
            el: 1,
            ns: true,
            nse: false,
            sf: true,
            vmid: None,
            cid: None,
        },
    );
    let mut dec = ArmInstrDecoder::new();
    let (mut atoms, mut addresses) = (0, 0);
    for (i, &pc) in pcs.iter().enumerate() {
        let mut w = [0u8; 4];
        assert_eq!(img.read(pc, &mut w), 4);
        let mut info = InstrInfo {
            pe_type: ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA),
            isa: Isa::Aarch64,
            instr_addr: pc,
            opcode: u32::from_le_bytes(w),
            ..Default::default()
        };
        dec.decode_instruction(&mut info).unwrap();
        let next = pcs.get(i + 1).copied();
        match info.instr_type {
            InstrType::Branch | InstrType::BranchIndirect => {
                let taken = next != Some(pc + 4);
                enc.atom(taken);
                atoms += 1;
                if taken && info.instr_type == InstrType::BranchIndirect {
                    enc.address(next.unwrap());
                    addresses += 1;
                }
            }
            _ if next.is_none() => {
                // The program ends in SVC (exit): a Call exception after it.
                enc.exception(2, 1);
                enc.address(pc + 4);
            }
            _ => {}
        }
    }
    enc.flush_atoms();
    assert!(atoms > 20 && addresses > 5, "{atoms} atoms, {addresses} addresses");

    let mut core = DeviceSpec::core("cpu_0", "Cortex-A53");
    for (i, (addr, code)) in img.segments.iter().enumerate() {
        core.dumps.push(DumpSpec {
            file: format!("code{i}.bin"),
            address: *addr,
            data: code.clone(),
            space: String::new(),
        });
    }
    let regs = [
        ("TRCCONFIGR", 0x01),
        ("TRCTRACEIDR", 0x10),
        ("TRCIDR0", 0x2000_0861),
        ("TRCIDR1", 0x4100_f412),
        ("TRCIDR2", 0x0800_1088),
        ("TRCIDR8", 0),
        ("TRCIDR9", 0),
        ("TRCIDR10", 0),
        ("TRCIDR11", 0),
        ("TRCIDR12", 0),
        ("TRCIDR13", 0),
    ];
    let etm = DeviceSpec::trace_source(
        "etm_0",
        "ETM4.0",
        regs.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
    );
    let g = Generated {
        spec: SnapshotSpec {
            description: "prog-a64 under qemu, ETMv4".into(),
            devices: vec![core, etm],
            buffers: vec![BufferSpec {
                name: "ETB_0".into(),
                file: "trace.bin".into(),
                format: "source_data".into(),
                data: enc.out.clone(),
            }],
            source_buffers: vec![("etm_0".into(), "ETB_0".into())],
            core_trace_sources: vec![("cpu_0".into(), "etm_0".into())],
        },
        truth: Vec::new(),
    };
    let b = Arc::new(Lock::new(FlatTraceBuilder::new(Merge::All)));
    decode_into(&g, Box::new(SharedBuilder(b.clone())), |_| {}).unwrap();
    b.borrow_mut().finish();
    let b = b.borrow();
    assert!(
        b.entries(None).iter().any(|e| e.op.fault()),
        "the SVC's block is cut by the exception"
    );

    let via_etm = Coverage::compute(&img, &Execution::from_entries(&img, b.entries(None)));
    let qemu = read_file(fixture("prog-a64.trace")).unwrap();
    let direct = Coverage::compute(&img, &Execution::from_entries(&img, qemu.entries()));
    for (x, y) in via_etm.routines.iter().zip(&direct.routines) {
        assert_eq!(x, y, "{}", y.routine.name);
    }
    assert_eq!(via_etm, direct);
    let lines = lcov::LineTable::from_elf(&elf).unwrap();
    assert_eq!(
        lcov::tracefile("t", &via_etm, &lines),
        lcov::tracefile("t", &direct, &lines)
    );
}
