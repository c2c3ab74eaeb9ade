//! `tarmac`'s options shared with upstream's tools: --demangle, --li/--bi,
//! -v, -q and the progress bar, run as a user runs them on the fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../formats/tarmac/tests/fixtures")
}

fn path(rel: &str) -> String {
    fixtures().join(rel).to_str().unwrap().to_string()
}

fn tarmac(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tarmac")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Upstream's call tree of the AArch64 program with the names the mangled
/// image gives (`fixtures/demangle/make.sh`); a call tree line ends with
/// `: NAME`, so replacing those ends is exact.
fn calltree_named(names: &[(&str, &str)]) -> String {
    let mut t = std::fs::read_to_string(fixtures().join("calls/a64-fm.calltree")).unwrap();
    for (from, to) in names {
        t = t.replace(&format!(": {from}\n"), &format!(": {to}\n"));
        t = t.replace(&format!(": {from}@"), &format!(": {to}@"));
    }
    t
}

#[test]
fn demangle_names_cpp_and_rust_functions_only_when_asked() {
    let (trace, elf) = (path("calls/a64-fm.tarmac"), path("demangle/a64-mangled.elf"));
    let (code, out, err) = tarmac(&["calltree", &trace, "--image", &elf]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        out,
        calltree_named(&[
            ("fib", "_ZN4demo3fibEi"),
            ("helper", "_ZL6helperi"),
            ("other", "_ZN7mycrate5other17h0123456789abcdefE")
        ])
    );
    let (code, out, err) = tarmac(&["calltree", &trace, "--image", &elf, "--demangle"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let want = calltree_named(&[
        ("fib", "demo::fib(int)"),
        ("helper", "helper(int)"),
        ("other", "mycrate::other"),
    ]);
    assert!(want.contains(": helper(int)@0x4001e0\n") && want.contains(": demo::fib(int)\n"));
    assert_eq!(out, want);
    // Nothing to demangle without an image.
    let (code, _, err) = tarmac(&["calltree", &trace, "--demangle"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--image"), "{err}");
}

/// `dump --events` in either byte order equals upstream's parser's events
/// (`fixtures/endian`, its `#` comment lines left out).
#[test]
fn li_and_bi_choose_the_byte_order_of_memory_events() {
    let dir = std::env::temp_dir().join(format!("tarmac-endian-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::fs::read_to_string(fixtures().join("endian/endian.txt")).unwrap();
    let trace = dir.join("endian.tarmac");
    let body: String = src
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&trace, body).unwrap();
    let events = |golden: &str| -> String {
        std::fs::read_to_string(fixtures().join("endian").join(golden))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("--- Tarmac line"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let t = trace.to_str().unwrap();
    for (opt, golden) in [
        (None, "endian-li.ref"),
        (Some("--li"), "endian-li.ref"),
        (Some("--bi"), "endian-bi.ref"),
    ] {
        let mut args = vec!["dump", "--events", t];
        args.extend(opt);
        let (code, out, err) = tarmac(&args);
        assert_eq!((code, err.as_str()), (Some(0), ""), "{opt:?}");
        assert_eq!(out, events(golden), "{opt:?}");
    }
    assert_ne!(events("endian-li.ref"), events("endian-bi.ref"));
    let (code, _, err) = tarmac(&["dump", "--events", t, "--li", "--bi"]);
    assert_eq!(code, Some(2), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_endianness_other_than_the_images_is_warned_of() {
    let (trace, elf) = (path("calls/a64-fm.tarmac"), path("calls/a64.elf"));
    let golden = std::fs::read_to_string(fixtures().join("calls/a64-fm.profile")).unwrap();
    let (code, out, err) = tarmac(&["profile", &trace, "--image", &elf, "--bi"]);
    assert_eq!((code, out.as_str()), (Some(0), golden.as_str()));
    assert_eq!(
        err,
        format!("tarmac: warning: {elf}: the image is little-endian but --bi says the trace is big-endian\n")
    );
    let (code, out, err) = tarmac(&["profile", &trace, "--image", &elf, "--bi", "-q"]);
    assert_eq!((code, out.as_str(), err.as_str()), (Some(0), golden.as_str(), ""));
    let (code, _, err) = tarmac(&["profile", &trace, "--image", &elf, "--li"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
}

#[test]
fn verbose_says_what_was_read() {
    let (trace, elf) = (path("calls/a64-fm.tarmac"), path("calls/a64.elf"));
    let (code, out, err) = tarmac(&["-v", "profile", &trace, "--image", &elf]);
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        std::fs::read_to_string(fixtures().join("calls/a64-fm.profile")).unwrap()
    );
    assert_eq!(
        err,
        format!(
            "tarmac: {elf}: 16 symbols, ELF machine 183, little-endian\n\
             tarmac: {trace}: 326 lines, 326 records, 168 instructions\n\
             tarmac: {trace}: 13 calls found, 3 deep at most\n"
        )
    );
    let (code, _, err) = tarmac(&["profile", &trace, "-v", "-q"]);
    assert_eq!(code, Some(2), "{err}");
}

/// No progress bar when standard error is not a terminal, even when asked
/// for always: a log file gets no animation.
#[test]
fn no_progress_bar_unless_stderr_is_a_terminal() {
    let trace = path("calls/a64-fm.tarmac");
    let (code, _, err) = tarmac(&["--progress", "always", "profile", &trace]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
}

/// On a terminal (`script` gives one), `--progress always` draws the bar
/// with the bytes read (14.62 KiB: the whole trace) and clears it at the
/// end; `never` draws nothing. Needs util-linux's `script`.
#[test]
#[ignore]
fn progress_bar_on_a_terminal() {
    let trace = path("calls/a64-fm.tarmac");
    let run = |when: &str| {
        let cmd = format!(
            "{} --progress {when} profile {trace} > /dev/null",
            env!("CARGO_BIN_EXE_tarmac")
        );
        let out = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = run("always");
    assert!(shown.contains("14.62 KiB/14.62 KiB"), "{shown:?}");
    assert!(
        shown.ends_with("\r\u{1b}[2K"),
        "the bar is cleared at the end: {shown:?}"
    );
    assert_eq!(run("never"), "");
}
