//! The tools on snapshots that map their program already, miss it, or
//! carry small defects: `--elf` over an identical dump, a report without
//! mapped code, trace ID 0, a buffer ending inside a frame, help and
//! version of `trc_diff`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tarmac/tests/fixtures")
        .join(name)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tool(name: &str, args: &[&str]) -> Output {
    let exe = match name {
        "trc_decode" => env!("CARGO_BIN_EXE_trc_decode"),
        "trc_viz" => env!("CARGO_BIN_EXE_trc_viz"),
        "trc_diff" => env!("CARGO_BIN_EXE_trc_diff"),
        _ => env!("CARGO_BIN_EXE_trc_gen"),
    };
    Command::new(exe).args(args).output().unwrap()
}

/// A snapshot of a real execution (a Tarmac trace of the fixture
/// program): its dumps are the ELF file's loadable segments.
fn tarmac_snapshot(name: &str) -> (PathBuf, String) {
    let dir = tmp(name);
    let elf = fixture("prog64.elf").display().to_string();
    let out = tool(
        "trc_gen",
        &[
            "--protocol",
            "etmv4",
            "--tarmac",
            &fixture("prog64.tarmac").display().to_string(),
            "--elf",
            &elf,
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    (dir, elf)
}

#[test]
fn elf_over_the_identical_dump_gives_symbols() {
    let (dir, elf) = tarmac_snapshot("tools-elf-same");
    let d = dir.to_str().unwrap();
    let plain = tool("trc_decode", &[d]);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let out = tool("trc_decode", &[d, "--elf", &elf, "--symbols"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let listing = text(&out.stdout);
    assert!(listing.contains(" <_start>\n"), "{listing}");
    // The same elements as without --elf, each range with its function.
    let strip = |t: &str| -> Vec<String> { t.lines().map(|l| l.split(" <").next().unwrap().to_string()).collect() };
    assert_eq!(strip(&listing), strip(&text(&plain.stdout)));

    let out = tool("trc_viz", &["folded", d, "--elf", &elf]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).lines().any(|l| l.starts_with("_start;fib ")),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn elf_over_a_different_dump_warns_and_keeps_the_dump() {
    let (dir, elf) = tarmac_snapshot("tools-elf-differs");
    let d = dir.to_str().unwrap();
    let before = tool("trc_decode", &[d]);
    // One byte of the dump changed after the code the trace runs: the
    // snapshot's memory is still what is decoded.
    let dump = dir.join("mem0.bin");
    let mut bytes = std::fs::read(&dump).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&dump, bytes).unwrap();
    let out = tool("trc_decode", &[d, "--elf", &elf, "--symbols"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!("trc_decode: warning: {elf}: "))
            && err.contains(" overlap memory already mapped, which differs at 0x")
            && err.ends_with("; the memory already mapped is decoded, the file gives symbols only\n"),
        "{err}"
    );
    let strip = |t: &str| -> Vec<String> { t.lines().map(|l| l.split(" <").next().unwrap().to_string()).collect() };
    assert_eq!(strip(&text(&out.stdout)), strip(&text(&before.stdout)));
}

#[test]
fn report_without_mapped_code_says_so_and_is_whole() {
    let (dir, _) = tarmac_snapshot("tools-report-nomem");
    // The core's dumps left out: every address the trace reaches is
    // unmapped.
    let cpu = dir.join("cpu_0.ini");
    let ini = std::fs::read_to_string(&cpu).unwrap();
    std::fs::write(&cpu, &ini[..ini.find("[dump").unwrap()]).unwrap();
    let html = dir.join("report.html");
    let out = tool(
        "trc_viz",
        &["report", dir.to_str().unwrap(), "-o", html.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.trim_end().ends_with("</html>"),
        "{}",
        &page[page.len().saturating_sub(200)..]
    );
    assert!(
        page.contains(
            "<p id=\"missing-memory\">2 ADDR_NACC elements: the trace went to addresses no memory image holds"
        ),
        "{page}"
    );
    assert!(
        page.contains("<p class=\"note\" id=\"no-stacks\">No call stacks: the code the trace runs through is not mapped (see Errors and gaps).</p>"),
        "{page}"
    );
    // A flame graph has nothing to draw: an error, and no file.
    let svg = dir.join("flame.svg");
    let out = tool(
        "trc_viz",
        &["flamegraph", dir.to_str().unwrap(), "-o", svg.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "trc_viz: no call stacks to draw: the code the trace runs through is not mapped (2 ADDR_NACC elements); give the program's images with --elf FILE\n"
    );
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("flame.svg"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_failed_graph_leaves_the_earlier_file_as_it_was() {
    let (dir, _) = tarmac_snapshot("tools-graph-keep");
    let cpu = dir.join("cpu_0.ini");
    let ini = std::fs::read_to_string(&cpu).unwrap();
    std::fs::write(&cpu, &ini[..ini.find("[dump").unwrap()]).unwrap();
    let svg = dir.join("out.svg");
    std::fs::write(&svg, "earlier").unwrap();
    // Nothing to draw: a failure, and the file given is not touched.
    let out = tool(
        "trc_viz",
        &["flamegraph", dir.to_str().unwrap(), "-o", svg.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), "earlier");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn trace_id_zero_can_be_selected() {
    let dir = tmp("tools-id-zero");
    let d = dir.to_str().unwrap();
    let out = tool(
        "trc_gen",
        &[
            "--protocol",
            "etmv4",
            "--seed",
            "2",
            "--length",
            "100",
            "--unformatted",
            "--out",
            d,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A source with no trace ID set, alone in its buffer: its elements
    // are listed under ID 0.
    let etm = dir.join("etm_0.ini");
    let ini = std::fs::read_to_string(&etm).unwrap();
    let ini: String = ini
        .lines()
        .map(|l| {
            if l.starts_with("TRCTRACEIDR") {
                "TRCTRACEIDR=0x0\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&etm, ini).unwrap();
    let all = tool("trc_decode", &[d]);
    assert!(all.status.success(), "{}", text(&all.stderr));
    assert!(text(&all.stdout).lines().all(|l| l.contains("; ID:0; ")));
    let zero = tool("trc_decode", &[d, "--id", "0"]);
    assert_eq!(zero.status.code(), Some(0), "{}", text(&zero.stderr));
    assert_eq!(text(&zero.stdout), text(&all.stdout));
    let bad = tool("trc_decode", &[d, "--id", "0x70"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("trace ID 0x70 is out of range: trace IDs are 0x0 to 0x6f"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn a_buffer_ending_inside_a_frame_is_reported_once() {
    let dir = tmp("tools-partial-frame");
    let d = dir.to_str().unwrap();
    let out = tool(
        "trc_gen",
        &["--protocol", "tc2", "--seed", "3", "--length", "300", "--out", d],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bin = dir.join("trace.bin");
    let mut data = std::fs::read(&bin).unwrap();
    let whole = data.len();
    data.extend_from_slice(&[0; 8]);
    std::fs::write(&bin, data).unwrap();
    for threads in ["1", "2"] {
        let out = tool("trc_decode", &[d, "--threads", threads]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stderr),
            format!(
                "trc_decode: {}: warning: trace buffer ETB_0 ends with 8 bytes at byte {whole} that are not a whole 16-byte frame; the frames before them are decoded, these bytes are not\n",
                bin.display()
            ),
            "--threads {threads}"
        );
    }
    let out = tool("trc_viz", &["folded", d]);
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!("trc_viz: {}: warning: trace buffer ETB_0 ends", bin.display())),
        "{err}"
    );
}

#[test]
fn trc_diff_help_and_version_exit_zero() {
    let out = tool("trc_diff", &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("usage: trc_diff --opencsd PATH"),
        "{}",
        text(&out.stdout)
    );
    assert!(out.stderr.is_empty());
    let out = tool("trc_diff", &["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), format!("trc_diff {}\n", env!("CARGO_PKG_VERSION")));
    let out = tool("trc_diff", &["--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}
