//! `tarmac` and `trc_gen -tarmac`, run as a user runs them, on the
//! qemu-made fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../formats/tarmac/tests/fixtures")
}

fn tarmac(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tarmac")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_version_and_usage_errors() {
    let (code, out, _) = tarmac(&["--help"]);
    assert_eq!(code, Some(0));
    for sub in [
        "profile",
        "calltree",
        "flamegraph",
        "callinfo",
        "vcd",
        "compare",
        "decode",
        "dump",
    ] {
        assert!(out.contains(sub), "{out}");
    }
    let (code, out, _) = tarmac(&["--version"]);
    assert_eq!(
        (code, out.trim()),
        (Some(0), concat!("tarmac ", env!("CARGO_PKG_VERSION")))
    );
    let (code, out, err) = tarmac(&["profile"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty() && err.contains("<TRACE>"), "{err}");
    let (code, _, err) = tarmac(&["profile", "/nonexistent.tarmac"]);
    assert_eq!(code, Some(1), "a file that cannot be read is a failure, not bad usage");
    assert!(err.starts_with("tarmac: /nonexistent.tarmac: "), "{err}");
}

#[test]
fn a_malformed_trace_is_an_error_naming_the_line() {
    let dir = std::env::temp_dir().join(format!("tarmac-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.tarmac");
    std::fs::write(&bad, "1 clk IT (1) 00001000 d503201f O EL1h_n : NOP\n2 clk R X0 zz\n").unwrap();
    let (code, _, err) = tarmac(&["profile", bad.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("bad.tarmac: line 2, column 12: expected register contents in hex"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn profile_and_compare_exit_statuses() {
    let t = fixtures().join("prog64.tarmac");
    let e = fixtures().join("prog64.elf");
    let (code, out, _) = tarmac(&["profile", t.to_str().unwrap(), "--image", e.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("Address     Count       Time        Function name\n"),
        "{out}"
    );
    // No register lines in the fixture: no calls are found, one activation.
    assert_eq!(out.lines().count(), 2, "{out}");
    let (code, out, _) = tarmac(&["compare", t.to_str().unwrap(), t.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (Some(0), "same: 555 instructions match\n"));
    let other = fixtures().join("prog32.tarmac");
    let (code, out, _) = tarmac(&["compare", t.to_str().unwrap(), other.to_str().unwrap(), "--stop-first"]);
    assert_eq!(code, Some(1));
    assert!(
        out.starts_with("different: stopped at the first difference (0 instructions matched)\n"),
        "{out}"
    );
}

#[test]
fn trc_gen_encodes_an_execution_and_tarmac_decode_gives_it_back() {
    let dir = std::env::temp_dir().join(format!("tarmac-rt-{}", std::process::id()));
    for (name, protocol) in [("prog64", "ete"), ("prog32", "etmv3")] {
        let t = fixtures().join(format!("{name}.tarmac"));
        let e = fixtures().join(format!("{name}.elf"));
        let snap = dir.join(protocol);
        let st = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
            .args([
                "-protocol",
                protocol,
                "-seed",
                "9",
                "-tarmac",
                t.to_str().unwrap(),
                "-elf",
                e.to_str().unwrap(),
                "-out",
                snap.to_str().unwrap(),
            ])
            .status()
            .unwrap();
        assert!(st.success());
        let back = dir.join(format!("{name}.back.tarmac"));
        let (code, _, err) = tarmac(&[
            "decode",
            snap.to_str().unwrap(),
            "-o",
            back.to_str().unwrap(),
            "--flow",
            "--exceptions",
        ]);
        assert_eq!(code, Some(0), "{err}");
        let (code, out, _) = tarmac(&["compare", t.to_str().unwrap(), back.to_str().unwrap(), "--skip-time"]);
        assert_eq!(code, Some(0), "{name} {protocol}: {out}");
    }
    // trc_gen refuses a protocol that cannot trace the execution.
    let t = fixtures().join("prog32.tarmac");
    let e = fixtures().join("prog32.elf");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args([
            "-protocol",
            "ete",
            "-tarmac",
            t.to_str().unwrap(),
            "-elf",
            e.to_str().unwrap(),
            "-out",
            dir.join("x").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ETE traces AArch64 code only"));
    std::fs::remove_dir_all(&dir).ok();
}
