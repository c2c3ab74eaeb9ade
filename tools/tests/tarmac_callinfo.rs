//! `tarmac callinfo`, run as a user runs it, against upstream's
//! `tarmac-callinfo` on the call fixtures (`fixtures/calls/callinfo.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn calls() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../formats/tarmac/tests/fixtures/calls")
}

fn path(rel: &str) -> String {
    calls().join(rel).to_str().unwrap().to_string()
}

fn tarmac(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tarmac")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(calls().join(name)).unwrap()
}

#[test]
fn callinfo_equals_upstream() {
    let (trace, elf) = (path("t32-gem5.tarmac"), path("t32.elf"));
    let args = [
        "callinfo", &trace, "--image", &elf, "_start", "fib", "helper", "helper#1", "helper#2", "other", "skip_fn",
        "nope", "0x1011e", "0x1", "0X10",
    ];
    let (code, out, err) = tarmac(&args);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(out, golden("t32-gem5.callinfo"));
    // Without an image, names are not looked up; addresses are.
    let (code, out, err) = tarmac(&["callinfo", &path("a64-fm.tarmac"), "fib", "0x400130"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(out, golden("a64-fm-noimage.callinfo"));
    // At least one function.
    let (code, _, err) = tarmac(&["callinfo", &trace]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("<FUNCTION>"), "{err}");
}

/// With --callers, each execution is followed by its call (from the call
/// tree: upstream's a64-fm.calltree has helper@0x4001e0 called twice from
/// other, at l:275 and l:284, and skip_fn twice from _start, the second
/// time one instruction in) or the function it ran in.
#[test]
fn callers_say_who_called() {
    let (trace, elf) = (path("a64-fm.tarmac"), path("a64.elf"));
    let (code, out, err) = tarmac(&[
        "callinfo",
        &trace,
        "--image",
        &elf,
        "--callers",
        "helper#1",
        "0x40021c",
        "_start",
    ]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        out,
        "\
Symbol 'helper#1' at 0x4001e0 (8 bytes) called from :
 - time: 142 (line:277, pos:12672)
   called from other at t:141 l:275 pc:0x4001f8
 - time: 147 (line:286, pos:13084)
   called from other at t:146 l:284 pc:0x400204
 - time: 157 (line:307, pos:14034)
   in skip_fn, entered at t:156 l:305
 - time: 163 (line:318, pos:14539)
   called from _start at t:162 l:316 pc:0x4001c8
Symbol '_start' at 0x400174 (108 bytes) called from :
 - time: 1 (line:33, pos:921)
   in _start, entered at t:1 l:33
"
    );
    let ct = golden("a64-fm.calltree");
    for l in [
        "  - t:162 l:316 pc:0x4001c8 - t:165 l:321 pc:0x4001cc\n    o t:163 l:318 pc:0x40021c",
        "      - t:141 l:275 pc:0x4001f8 - ",
        "      - t:146 l:284 pc:0x400204 - ",
    ] {
        assert!(ct.contains(l), "{l}");
    }
}
