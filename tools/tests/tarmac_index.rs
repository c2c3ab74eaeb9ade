//! `tarmac --index`: the persistent index built once, reused, rebuilt when
//! the trace changes or the index is damaged, and giving the same outputs
//! as a run without it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tarmac/tests/fixtures")
        .join(rel)
}

fn tarmac(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tarmac")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory with a copy of the a64-fm trace.
fn setup(what: &str) -> (PathBuf, String, String) {
    let d = std::env::temp_dir().join(format!("tarmac-index-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let trace = d.join("t.tarmac");
    std::fs::copy(fixture("calls/a64-fm.tarmac"), &trace).unwrap();
    let t = trace.to_str().unwrap().to_string();
    let ix = format!("{t}.tidx");
    (d, t, ix)
}

#[test]
fn built_once_then_reused_with_the_same_outputs() {
    let (d, t, ix) = setup("reuse");
    let elf = fixture("calls/a64.elf");
    let elf = elf.to_str().unwrap();
    let golden = std::fs::read_to_string(fixture("calls/a64-fm.calltree")).unwrap();
    // --only-index: the index and nothing else.
    let (code, out, err) = tarmac(&["-v", "calltree", &t, "--only-index"]);
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");
    assert!(err.contains(&format!("tarmac: {ix}: index written")), "{err}");
    // Reused: no pass of the trace, the same call tree as upstream's.
    let (code, out, err) = tarmac(&["-v", "calltree", &t, "--image", elf, "--index"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, golden);
    assert!(err.contains(&format!("tarmac: {ix}: index up to date")), "{err}");
    assert!(!err.contains("records"), "the trace was read: {err}");
    for cmd in ["profile", "flamegraph"] {
        let with = tarmac(&[cmd, &t, "--image", elf, "--index"]);
        let without = tarmac(&[cmd, &t, "--image", elf]);
        assert_eq!(with, without, "{cmd}");
        assert_eq!(with.0, Some(0));
    }
    // vcd reads the trace once with the index, and writes the same VCD.
    let a = d.join("a.vcd");
    let b = d.join("b.vcd");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    assert_eq!(
        tarmac(&["vcd", &t, "--image", elf, "--no-date", "-o", a, "--index"]).0,
        Some(0)
    );
    assert_eq!(tarmac(&["vcd", &t, "--image", elf, "--no-date", "-o", b]).0, Some(0));
    assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn rebuilt_when_the_trace_changes() {
    let (d, t, ix) = setup("stale");
    let elf = fixture("calls/a64.elf");
    let elf = elf.to_str().unwrap();
    assert_eq!(tarmac(&["profile", &t, "--only-index"]).0, Some(0));
    // Only the first 60 lines (fewer calls): same name, other contents.
    let text = std::fs::read_to_string(&t).unwrap();
    let cut: String = text.lines().take(60).map(|l| format!("{l}\n")).collect();
    std::fs::write(&t, cut).unwrap();
    let (code, out, err) = tarmac(&["-v", "calltree", &t, "--image", elf, "--index"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("tarmac: {ix}: the trace has changed; rebuilding the index")),
        "{err}"
    );
    assert_eq!(out, tarmac(&["calltree", &t, "--image", elf]).1);
    let (_, _, err) = tarmac(&["-v", "calltree", &t, "--index"]);
    assert!(err.contains("index up to date"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_damaged_index_is_named_and_rebuilt() {
    let (d, t, ix) = setup("damaged");
    assert_eq!(tarmac(&["profile", &t, "--only-index"]).0, Some(0));
    let mut bytes = std::fs::read(&ix).unwrap();
    let n = bytes.len();
    bytes[40] ^= 0xff;
    std::fs::write(&ix, &bytes).unwrap();
    let (code, out, err) = tarmac(&["profile", &t, "--index"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        err,
        format!(
            "tarmac: warning: {ix}: byte {}: checksum does not match the contents (damaged index); rebuilding the index\n",
            n - 8
        )
    );
    assert_eq!(out, tarmac(&["profile", &t]).1);
    // Rebuilt: the next run takes it as it is.
    assert_eq!(tarmac(&["profile", &t, "--index"]).2, "");
    std::fs::write(&ix, b"TARMACIX").unwrap();
    let (_, _, err) = tarmac(&["profile", &t, "--index"]);
    assert_eq!(
        err,
        format!("tarmac: warning: {ix}: byte 8: file ends inside the version; rebuilding the index\n")
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_index_needs_a_file() {
    let (code, _, err) = tarmac(&["profile", "-", "--index"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "tarmac: -: an index needs a trace file, not standard input or a snapshot\n"
    );
}
