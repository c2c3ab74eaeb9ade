//! The RISC-V trace plug-in's shipped snapshot (`qemu-calls`: QEMU running
//! the `calls` fixture) through `tarmac decode` and `trc_cov`, which
//! register the plug-in themselves.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coresight_gnatcov::format::{EM_RISCV, InfoKind, PcSize, read_file};
use coresight_tarmac::writer::{WriterOptions, snapshot_to_tarmac_with_registry};

fn plugin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/riscv-trace")
}

fn run(exe: &str, args: &[&str]) -> Output {
    Command::new(exe).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("riscv_outputs_test_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn tarmac_decode_writes_riscv_instructions_with_disassembly() {
    let dir = plugin().join("snapshots/qemu-calls");
    let o = run(env!("CARGO_BIN_EXE_tarmac"), &["decode", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let got = text(&o.stdout);
    // What the library writes, with disassembly.
    let mut want = Vec::new();
    let opts = WriterOptions {
        disassemble: true,
        ..Default::default()
    };
    let n = snapshot_to_tarmac_with_registry(&dir, riscv_trace::registry(), &mut want, opts).unwrap();
    assert_eq!(got, text(&want));
    assert_eq!(got.lines().count() as u64, n);
    // Every instruction has its text, RV64 with C.
    assert!(
        got.lines()
            .all(|l| l.split(" : ").nth(1).is_some_and(|t| !t.is_empty())),
        "{got}"
    );
    let first = got.lines().next().unwrap();
    assert_eq!(first, FIRST_LINE);
    assert!(got.contains(" R U : c.") && got.contains(" R U : jal "), "{got}");

    // `tarmac compare` reads it back: the same as the snapshot decoded
    // again, and different once one PC is changed.
    let file = tmp("calls.tarmac");
    std::fs::write(&file, &got).unwrap();
    let o = run(
        env!("CARGO_BIN_EXE_tarmac"),
        &["compare", file.to_str().unwrap(), dir.to_str().unwrap(), "--skip-time"],
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
    let changed = tmp("changed.tarmac");
    std::fs::write(&changed, got.replacen(" 0001043e ", " 0001043a ", 1)).unwrap();
    let o = run(
        env!("CARGO_BIN_EXE_tarmac"),
        &[
            "compare",
            changed.to_str().unwrap(),
            dir.to_str().unwrap(),
            "--skip-time",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}{}", text(&o.stdout), text(&o.stderr));
}

/// QEMU's first instruction of `calls`, at the first timestamp (0).
const FIRST_LINE: &str = "0 tic IT (1) 0001043c 1141 R U : c.addi   sp, -0x10";

#[test]
fn trc_cov_exports_em_riscv_and_covers_the_stripped_elf() {
    let dir = plugin().join("snapshots/qemu-calls");
    let elf = plugin().join("fixtures/calls.elf");
    let out = tmp("calls.trace");
    let cov = env!("CARGO_BIN_EXE_trc_cov");
    let o = run(
        cov,
        &[
            "export",
            "--snapshot",
            dir.to_str().unwrap(),
            "--elf",
            elf.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let t = read_file(&out).unwrap();
    assert_eq!((t.header.machine, t.header.pc_size), (EM_RISCV, PcSize::Bits64));
    assert!(
        t.infos
            .iter()
            .any(|i| i.kind == InfoKind::ExecFileName && &*i.data == elf.to_str().unwrap().as_bytes())
    );

    // Coverage from the exported file and straight from the snapshot agree.
    let from_file = run(
        cov,
        &["coverage", "--elf", elf.to_str().unwrap(), out.to_str().unwrap()],
    );
    let from_snapshot = run(
        cov,
        &[
            "coverage",
            "--elf",
            elf.to_str().unwrap(),
            "--snapshot",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(from_file.status.code(), Some(0), "{}", text(&from_file.stderr));
    assert_eq!(text(&from_file.stdout), text(&from_snapshot.stdout));
    let report = text(&from_file.stdout);
    // One routine (the ELF is stripped): .text, 64-bit addresses, RISC-V
    // disassembly, conditional branches with their outcome marks.
    assert!(report.starts_with(".text "), "{report}");
    assert!(
        report.lines().nth(1).unwrap().starts_with("00000000000100e8 "),
        "{report}"
    );
    assert!(report.contains(":  41 11  c.addi sp, -0x10\n"), "{report}");
    // The loop's bne both ways, a bge only ever falling through.
    assert!(
        report.contains("\n0000000000010120 +:  e3 17 34 ff  bne s0, s3, -0x12\n"),
        "{report}"
    );
    assert!(
        report.contains("\n0000000000010168 v:  63 da a7 2a  bge a5, a0, 0x2b4\n"),
        "{report}"
    );
    // 280 instructions ran: as many as QEMU's PC log has distinct PCs
    // (checked against the log in the plug-in's tests/outputs.rs).
    assert!(
        report.ends_with("328 instructions analyzed:\n  280 covered\n  48 not executed\n25 conditional branches analyzed:\n  10 fully covered\n  10 partially covered\n  5 not executed\n"),
        "{report}"
    );
    // A file that is not an ELF is refused, with what was expected.
    let o = run(
        cov,
        &[
            "coverage",
            "--elf",
            dir.join("trace.bin").to_str().unwrap(),
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("not an ELF file"), "{}", text(&o.stderr));
}
