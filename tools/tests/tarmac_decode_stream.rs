//! `tarmac decode` and `trc_decode --format tarmac` write the same Tarmac
//! (one writer, `coresight_tarmac::writer::TarmacWriter`, fed a chunk of
//! the capture at a time) on a generated capture of many chunks.

use std::process::Command;

#[test]
fn tarmac_decode_equals_trc_decode_on_a_capture_of_many_chunks() {
    let dir = std::env::temp_dir().join(format!("tarmac-decode-stream-{}", std::process::id()));
    let snap = dir.join("snap");
    let st = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["--protocol", "etmv4", "--seed", "3", "--length", "120000", "--out"])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(st.status.success());
    // More than one 64 KiB chunk.
    assert!(std::fs::metadata(snap.join("trace.bin")).unwrap().len() > 2 << 16);
    for (ours, theirs) in [(&["--no-disasm"][..], &[][..]), (&[][..], &["--disasm"][..])] {
        let a = Command::new(env!("CARGO_BIN_EXE_tarmac"))
            .arg("decode")
            .arg(&snap)
            .args(ours)
            .output()
            .unwrap();
        let b = Command::new(env!("CARGO_BIN_EXE_trc_decode"))
            .arg(&snap)
            .args(["--format", "tarmac"])
            .args(theirs)
            .output()
            .unwrap();
        assert!(a.status.success() && b.status.success());
        assert!(a.stdout.len() > 1 << 20);
        assert!(
            a.stdout == b.stdout,
            "tarmac decode {ours:?} differs from trc_decode {theirs:?}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
