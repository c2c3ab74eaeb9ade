//! `trc_cov`: command-line behaviour, and its commands agreeing with each
//! other on a committed snapshot.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn trc_cov(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trc_cov")).args(args).output().unwrap()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trc_cov_test_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_version_and_usage_errors() {
    let o = trc_cov(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    for sub in ["dump", "export", "coverage", "lcov"] {
        assert!(text(&o.stdout).contains(sub), "{}", text(&o.stdout));
    }
    let o = trc_cov(&["--version"]);
    assert_eq!(
        (o.status.code(), text(&o.stdout).trim()),
        (Some(0), concat!("trc_cov ", env!("CARGO_PKG_VERSION")))
    );
    let o = trc_cov(&["coverage", "--bogus"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty() && text(&o.stderr).contains("--bogus"));
    let o = trc_cov(&[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bad_inputs_name_the_file_and_byte() {
    let snap = repo().join("snapshots/etmv4-a64");
    let trace = tmp("good.trace");
    let o = trc_cov(&[
        "export",
        "--snapshot",
        snap.to_str().unwrap(),
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let bytes = std::fs::read(&trace).unwrap();
    // Truncated: the last entry runs past the end of the file.
    let cut = tmp("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
    let o = trc_cov(&["dump", cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let want = format!(
        "trc_cov: {}: byte {}: execution entry runs past the end of the file (11 of 16 bytes)\n",
        cut.display(),
        bytes.len() - 16
    );
    assert_eq!(text(&o.stderr), want);
    // Wrong magic.
    let mut bad = bytes.clone();
    bad[0] = b'!';
    std::fs::write(&cut, &bad).unwrap();
    let o = trc_cov(&["dump", cut.to_str().unwrap()]);
    assert_eq!(
        text(&o.stderr),
        format!(
            "trc_cov: {}: byte 0: bad magic (expected \"#QEMU-Traces\")\n",
            cut.display()
        )
    );
    // An ELF that is not an ELF.
    let notelf = tmp("not.elf");
    std::fs::write(&notelf, b"#!/bin/sh\n").unwrap();
    let o = trc_cov(&["coverage", "--elf", notelf.to_str().unwrap(), trace.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "trc_cov: {}: byte 0: not an ELF file (expected the magic 7f 45 4c 46)\n",
            notelf.display()
        )
    );
    // Unknown routine.
    let o = trc_cov(&["coverage", "--snapshot", snap.to_str().unwrap(), "--routines", "nosuch"]);
    assert_eq!(
        (o.status.code(), text(&o.stderr)),
        (Some(1), "trc_cov: no routine named nosuch\n".to_string())
    );
}

/// Coverage of the snapshot, of its exported trace, and the dump of that
/// trace agree.
#[test]
fn export_then_coverage_matches_snapshot_coverage() {
    let snap = repo().join("snapshots/etmv4-a64");
    let s = snap.to_str().unwrap();
    let trace = tmp("a64.trace");
    assert!(
        trc_cov(&["export", "--snapshot", s, "-o", trace.to_str().unwrap()])
            .status
            .success()
    );
    let direct = trc_cov(&["coverage", "--snapshot", s]);
    assert!(direct.status.success(), "{}", text(&direct.stderr));
    // The memory image comes from the snapshot; the evidence from the file.
    let via_file = trc_cov(&["coverage", "--snapshot", s, trace.to_str().unwrap()]);
    let direct_text = text(&direct.stdout);
    assert!(direct_text.ends_with("249 instructions analyzed:\n  83 covered\n  166 not executed\n18 conditional branches analyzed:\n  2 fully covered\n  5 partially covered\n  11 not executed\n"), "{direct_text}");
    // Snapshot and file together: the same evidence twice is the same coverage.
    assert_eq!(text(&via_file.stdout), direct_text);
    let routines = tmp("routines.txt");
    std::fs::write(&routines, "# handlers\nmem_ffffffc000010800\n").unwrap();
    let arg = format!("@{}", routines.display());
    let one = trc_cov(&["coverage", "--snapshot", s, "--routines", &arg, "--summary"]);
    let one_text = text(&one.stdout);
    assert!(
        one_text.starts_with("mem_ffffffc000010800 +:\n12 instructions analyzed:\n  12 covered\n"),
        "{one_text}"
    );
    let dump = trc_cov(&["dump", trace.to_str().unwrap()]);
    let d = text(&dump.stdout);
    assert!(
        d.starts_with("Kind: FLAT\n\nTag  : DATE_TIME (Date)\nLen  : 8\n"),
        "{d}"
    );
    assert!(d.contains("\nTraces:\nffffffc000080000-ffffffc000080013 ?: 11 ---t block\nffffffc0000800a8-ffffffc0000800bf ?: 11 ---t block\nffffffc00008010c-ffffffc000080127 ?: 20 ---- fault\n"), "{d}");
}
