//! `tarmac` on awkward inputs: a cut last line, an empty trace, a huge
//! line, binary garbage, an image of another architecture; each checked
//! for its message and exit status.

use std::path::{Path, PathBuf};
use std::process::Command;

fn calls() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../formats/tarmac/tests/fixtures/calls")
}

fn tarmac(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tarmac")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

struct Tmp(PathBuf);
impl Tmp {
    fn new(tag: &str) -> Tmp {
        let d = std::env::temp_dir().join(format!("tarmac-in-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Tmp(d)
    }
    fn file(&self, name: &str, data: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    }
}
impl Drop for Tmp {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

#[test]
fn a_cut_last_line_warns_and_the_complete_lines_are_used() {
    let tmp = Tmp::new("cut");
    let full = std::fs::read_to_string(calls().join("a64-fm.tarmac")).unwrap();
    // Cut after the last register line's "R": no register name.
    let at = full.rfind(" clk R X").unwrap() + " clk R ".len();
    let cut = tmp.file("cut.tarmac", &full.as_bytes()[..at]);
    let (code, out, err) = tarmac(&["calltree", &cut]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("o t:1 l:33 pc:0x400174 - t:167 l:324 pc:0x4001d4 : \n"),
        "{out}"
    );
    let lines = full[..at].lines().count();
    assert_eq!(
        err,
        format!(
            "tarmac: warning: {cut}: line {lines}, column 11: expected a register name: \"167 clk R \"; \
             ignoring this partial last line (trace truncated?)\n"
        )
    );
    // -q: no warning.
    let (code, _, err) = tarmac(&["-q", "calltree", &cut]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // The same line with its line ending is an error.
    let whole = tmp.file("whole.tarmac", format!("{}\n", &full[..at]).as_bytes());
    let (code, out, err) = tarmac(&["calltree", &whole]);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    assert!(
        err.starts_with(&format!("tarmac: {whole}: line {lines}, column ")),
        "{err}"
    );
}

#[test]
fn a_cut_line_that_parses_is_used() {
    let tmp = Tmp::new("cutok");
    let full = std::fs::read_to_string(calls().join("a64-fm.tarmac")).unwrap();
    let cut = tmp.file("cut.tarmac", full.trim_end().as_bytes());
    let (code, out, err) = tarmac(&["calltree", &cut]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        out,
        std::fs::read_to_string(calls().join("a64-fm.calltree"))
            .unwrap()
            .replace(" : helper@0x400124", " : ")
            .replace(" : helper@0x4001e0", " : ")
            .replace(" : fib", " : ")
            .replace(" : _start", " : ")
            .replace(" : other", " : ")
            .replace(" : skip_fn + 0x40021c", " : ")
            .replace(" : skip_fn", " : ")
    );
}

#[test]
fn an_empty_trace_says_so() {
    let tmp = Tmp::new("empty");
    for (name, data) in [("empty.tarmac", ""), ("blank.tarmac", "\n  \n\n")] {
        let p = tmp.file(name, data.as_bytes());
        for cmd in ["profile", "calltree", "flamegraph", "dump"] {
            let (code, out, err) = tarmac(&[cmd, &p]);
            assert_eq!(code, Some(1), "{cmd} {name}");
            assert!(out.is_empty());
            assert_eq!(err, format!("tarmac: {p}: the trace contains no events\n"));
        }
    }
}

#[test]
fn a_huge_line_is_quoted_in_a_bounded_excerpt() {
    let tmp = Tmp::new("long");
    let mut line = b"1 clk IT (1) 00001000 d503201f O EL1h_n : NOP\n2 clk R X0 ".to_vec();
    line.extend(std::iter::repeat_n(b'0', 1 << 20));
    line.extend(b"zz\n3 clk IT (3) 00001004 d503201f O EL1h_n : NOP\n");
    let p = tmp.file("long.tarmac", &line);
    let (code, out, err) = tarmac(&["profile", &p]);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    assert_eq!(
        err,
        format!(
            "tarmac: {p}: line 2, column 12: expected register contents in hex: \
             \"2 clk R X0 0000000000000000000000000000000000000000...\"\n"
        )
    );
}

#[test]
fn garbage_is_quoted_escaped() {
    let tmp = Tmp::new("garbage");
    let p = tmp.file("garbage.tarmac", b"\x7fELF\x02\x01\x01\0\0\0\x1b[31m\xff\xfe\n");
    let (code, out, err) = tarmac(&["calltree", &p]);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    assert_eq!(
        err,
        format!(
            "tarmac: {p}: line 1, column 16: expected UTF-8 text: \"\\u{{7f}}ELF\\u{{2}}\\u{{1}}\\u{{1}}\\0\\0\\0\\u{{1b}}[31m\\xff\\xfe\"\n"
        )
    );
    // Text that is UTF-8 but not Tarmac: a record of unknown kind, no error.
    let p = tmp.file("text.tarmac", "héllo \"wörld\"\n".as_bytes());
    let (code, _, err) = tarmac(&["profile", &p]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
}

#[test]
fn an_image_of_another_architecture_warns() {
    let t = calls().join("a64-fm.tarmac");
    let e32 = calls().join("a32.elf");
    let (t, e32) = (t.to_str().unwrap(), e32.to_str().unwrap());
    let (code, _, err) = tarmac(&["profile", t, "--image", e32]);
    assert_eq!(code, Some(0));
    assert_eq!(
        err,
        format!(
            "tarmac: warning: {e32}: the image is AArch32 (ELF machine 40) but {t} holds A64 instructions; \
             function names may be wrong\n"
        )
    );
    let (code, _, err) = tarmac(&["-q", "profile", t, "--image", e32]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // The right image: no warning.
    let e64 = calls().join("a64.elf");
    let (code, _, err) = tarmac(&["profile", t, "--image", e64.to_str().unwrap()]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // An AArch64 image for an A32 trace.
    let t32 = calls().join("a32-fm.tarmac");
    let (code, _, err) = tarmac(&["calltree", t32.to_str().unwrap(), "--image", e64.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(
        err.contains("the image is AArch64 (ELF machine 183) but") && err.contains("holds A32/T32 instructions"),
        "{err}"
    );
}

#[test]
fn standard_input_and_load_offset() {
    use std::io::Write;
    use std::process::Stdio;
    let t = std::fs::read(calls().join("a64-fm.tarmac")).unwrap();
    let e = calls().join("a64.elf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tarmac"))
        .args(["profile", "-", "--image", e.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&t).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        std::fs::read_to_string(calls().join("a64-fm.profile")).unwrap()
    );
    // A zero offset (written negative) moves nothing; --no-offsets names
    // the call into skip_fn's middle by the symbol alone.
    let (code, out, _) = tarmac(&[
        "profile",
        calls().join("a64-fm.tarmac").to_str().unwrap(),
        "--image",
        e.to_str().unwrap(),
        "--load-offset",
        "-0x0",
        "--no-offsets",
    ]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("0x400218    1           3           skip_fn\n0x40021c    1           2           skip_fn\n"),
        "{out}"
    );
}
