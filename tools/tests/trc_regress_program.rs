//! `trc_regress` run as a user runs it, on the snapshots the project ships.

use std::path::Path;
use std::process::Command;

#[test]
fn trc_regress_passes_the_shipped_library() {
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_regress"))
        .arg(snapshots)
        .args(["--diff", "0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.trim_end().ends_with(" passed, 0 failed"), "{text}");
}

/// Runs trc_regress with `args`: (status, stdout, stderr).
fn trc_regress(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_trc_regress"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn help_version_and_errors_follow_the_conventions() {
    let (code, out, _) = trc_regress(&["--help"]);
    assert_eq!(code, Some(0));
    for opt in [
        "--cases",
        "--library",
        "--only",
        "--keep",
        "--diff",
        "--write",
        "--bless",
        "--summary-tsv",
        "--json",
        "--help",
        "--version",
    ] {
        assert!(out.contains(opt), "{opt}: {out}");
    }
    assert!(
        out.contains("Exit status: 0 every case passed; 1 a case failed"),
        "{out}"
    );
    let (code, out, _) = trc_regress(&["--version"]);
    assert_eq!(
        (code, out.trim()),
        (Some(0), concat!("trc_regress ", env!("CARGO_PKG_VERSION")))
    );
    // Bad usage: exit 2, the message on stderr.
    let (code, out, err) = trc_regress(&["--bogus"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty() && err.contains("unknown option --bogus"), "{out}{err}");
    // A folder that is not there: exit 1, named on stderr.
    let gone = std::env::temp_dir().join(format!("trc-regress-gone-{}", std::process::id()));
    let (code, out, err) = trc_regress(&[gone.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.is_empty() && err.contains(gone.to_str().unwrap()), "{out}{err}");
}
