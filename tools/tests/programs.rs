//! The command-line programs, run as a user runs them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots")
}

/// The listing after the command-line echo, which names local paths.
fn body(listing: &str) -> &str {
    let at = listing.find("Test Command Line:-\n").expect("a command-line header");
    let rest = &listing[at..];
    &rest[rest.find('\n').unwrap() + 1..]
}

#[test]
fn trc_pkt_lister_lists_a_shipped_snapshot_as_recorded() {
    let dir = snapshots().join("etmv4-a64");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_pkt_lister"))
        .current_dir(snapshots())
        .args(["-ss_dir", "./etmv4-a64", "-decode", "-no_time_print", "-logstdout"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let got = String::from_utf8(out.stdout).unwrap();
    let want = std::fs::read_to_string(dir.join("expected.ppl")).unwrap();
    let (got, want) = (body(&got), body(&want));
    // The command line itself is the next line; compare what follows it.
    let skip = |s: &str| s[s.find('\n').unwrap() + 1..].to_string();
    assert_eq!(skip(got), skip(want));
}

#[test]
fn trc_pkt_lister_decodes_the_riscv_plug_in_example() {
    // The RISC-V trace plug-in is registered by the program itself.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/riscv-trace/snapshots");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_pkt_lister"))
        .current_dir(&dir)
        .args(["-ss_dir", "./qemu-calls", "-no_time_print", "-decode", "-logstdout"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let got = String::from_utf8(out.stdout).unwrap();
    let want = std::fs::read_to_string(dir.join("qemu-calls/expected.ppl")).unwrap();
    let skip = |s: &str| s[s.find('\n').unwrap() + 1..].to_string();
    assert_eq!(skip(body(&got)), skip(body(&want)));
    assert!(
        got.contains("OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1043c:"),
        "{got}"
    );
}
