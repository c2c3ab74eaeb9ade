//! `trc_regress` run as a user runs it, on the snapshots the project ships.

use std::path::Path;
use std::process::Command;

#[test]
fn trc_regress_passes_the_shipped_library() {
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_regress")).arg(snapshots).args(["--diff", "0"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.trim_end().ends_with(" passed, 0 failed"), "{text}");
}
