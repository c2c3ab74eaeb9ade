//! `trc_viz` on the shipped snapshots, the Tarmac corpus (when ../shared
//! is present) and bad inputs: every subcommand's output checked.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_trc_viz")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn snapshot(name: &str) -> String {
    root().join("snapshots").join(name).display().to_string()
}

#[test]
fn folded_of_a_snapshot() {
    let (code, out, err) = run(&["folded", &snapshot("etmv4-a64")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err,
        "trc_viz: weights: time in instructions executed (the trace has neither timestamps nor cycle counts)\n"
    );
    // Every line: a stack and a weight; the weights add up to the instructions.
    let total: u64 = out
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    let listing = std::fs::read_to_string(root().join("snapshots/etmv4-a64/truth.txt")).unwrap();
    let truth: u64 = listing
        .lines()
        .filter(|l| l.starts_with("range "))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, truth);
    let mut sorted: Vec<&str> = out.lines().collect();
    sorted.sort_by(|a, b| a.rsplit_once(' ').unwrap().0.cmp(b.rsplit_once(' ').unwrap().0));
    assert_eq!(sorted, out.lines().collect::<Vec<_>>());
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn tarmac_folded_equals_tarmac_flamegraph() {
    let dir = root().join("../shared/corpus/tarmac");
    assert!(
        dir.is_dir(),
        "{}: not present (this test needs ../shared)",
        dir.display()
    );
    let t = dir.join("quicksort.tarmac");
    let e = dir.join("quicksort.elf");
    let (code, out, err) = run(&["folded", &t.display().to_string(), "--elf", &e.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        std::fs::read_to_string(dir.join("flamegraph-quicksort-symbols.ref")).unwrap()
    );
    assert_eq!(err, "trc_viz: weights: time from the Tarmac trace's time column\n");
}

#[test]
fn flamegraph_and_icicle_svgs() {
    for cmd in ["flamegraph", "icicle"] {
        let (code, out, err) = run(&[cmd, &snapshot("etmv4-m55-t32"), "--title", "m55"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("<?xml"), "{cmd}");
        assert!(out.trim_end().ends_with("</svg>"), "{cmd}");
        assert!(out.contains(">m55<"), "{cmd}: the title");
        assert!(out.contains("0x10000200"), "{cmd}: the outermost function");
        assert!(out.contains(" timestamp ticks, "), "{cmd}: the axis");
    }
    let (_, flame, _) = run(&["flamegraph", &snapshot("etmv4-m55-t32")]);
    let (_, icicle, _) = run(&["icicle", &snapshot("etmv4-m55-t32")]);
    assert_ne!(flame, icicle);
}

/// B and E events balance per thread and nest: each E closes the last B.
#[test]
fn chrome_timeline_is_balanced() {
    let (code, out, err) = run(&["timeline", "--format", "chrome", &snapshot("etmv4-a64")]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["otherData"]["timeAxis"],
        "time in instructions executed (the trace has neither timestamps nor cycle counts)"
    );
    let ev = v["traceEvents"].as_array().unwrap();
    let mut stacks: std::collections::HashMap<(u64, u64), Vec<String>> = Default::default();
    let mut last_ts = 0;
    let mut calls = 0;
    for e in ev {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        match e["ph"].as_str().unwrap() {
            "B" => {
                calls += 1;
                stacks
                    .entry(key)
                    .or_default()
                    .push(e["name"].as_str().unwrap().to_string())
            }
            "E" => assert_eq!(
                stacks.get_mut(&key).unwrap().pop().unwrap(),
                e["name"].as_str().unwrap()
            ),
            "M" | "i" => continue,
            p => panic!("phase {p}"),
        }
        let ts = e["ts"].as_u64().unwrap();
        assert!(ts >= last_ts, "time goes forward");
        last_ts = ts;
    }
    assert!(stacks.values().all(Vec::is_empty));
    assert!(calls > 10);
}

#[test]
fn speedscope_file() {
    let (code, out, err) = run(&["timeline", "--format", "speedscope", &snapshot("etmv4-m55-t32")]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["$schema"], "https://www.speedscope.app/file-format-schema.json");
    let frames = v["shared"]["frames"].as_array().unwrap();
    let p = &v["profiles"][0];
    assert_eq!(p["type"], "evented");
    let mut open: Vec<u64> = Vec::new();
    let mut at = 0;
    for e in p["events"].as_array().unwrap() {
        let f = e["frame"].as_u64().unwrap();
        assert!((f as usize) < frames.len());
        assert!(e["at"].as_u64().unwrap() >= at);
        at = e["at"].as_u64().unwrap();
        match e["type"].as_str().unwrap() {
            "O" => open.push(f),
            "C" => assert_eq!(open.pop(), Some(f)),
            t => panic!("{t}"),
        }
    }
    assert!(open.is_empty());
    assert_eq!(p["endValue"].as_u64().unwrap(), at);
}

#[test]
fn report_is_one_offline_file() {
    let dir = std::env::temp_dir().join(format!("trc_viz_report_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("r.html");
    let (code, _, err) = run(&[
        "report",
        &snapshot("ptm-t32-retstack"),
        "-o",
        &out.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(h.starts_with("<!DOCTYPE html>"));
    for part in [
        "id=\"summary\"",
        "id=\"hottest\"",
        "<svg",
        "id=\"timeline\"",
        "var TL=",
        "ptm-t32-retstack",
    ] {
        assert!(h.contains(part), "{part}");
    }
    // Offline: nothing loaded from elsewhere.
    for bad in ["src=\"http", "href=\"http", "@import", "<link"] {
        assert!(!h.contains(bad), "{bad}");
    }
    // The hottest function (first row of the table) is on the page.
    let hot = h.split("<table id=\"hottest\">").nth(1).unwrap();
    let first = hot.split("<tr><td>").nth(1).unwrap().split("</td>").next().unwrap();
    assert!(h.matches(first).count() >= 2, "{first}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_inputs_fail_with_the_file_named() {
    let (code, _, err) = run(&["folded", "/nonexistent/trace.tarmac"]);
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/trace.tarmac"), "{err}");
    let (code, _, err) = run(&["report", &snapshot("ptm-t32-retstack"), "--source", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no trace buffer named nope"), "{err}");
    let (code, _, _) = run(&["timeline", "--format", "svg", &snapshot("ptm-t32-retstack")]);
    assert_eq!(code, 2);
    // A damaged raw buffer decodes with errors, never a crash.
    let dir = std::env::temp_dir().join(format!("trc_viz_raw_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let raw = dir.join("raw.bin");
    let mut data = std::fs::read(Path::new(&snapshot("ptm-t32-retstack")).join("trace.bin")).unwrap();
    for (i, b) in data.iter_mut().enumerate() {
        if i % 7 == 3 {
            *b ^= 0x5a;
        }
    }
    std::fs::write(&raw, &data).unwrap();
    let (code, out, err) = run(&[
        "folded",
        &snapshot("ptm-t32-retstack"),
        "--raw",
        &raw.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = out;
    std::fs::remove_dir_all(&dir).ok();
}

/// A perf.data (made by trc_gen): one stack per CPU and thread, functions
/// named from the recorded binary's symbols.
#[test]
fn perf_data_stacks_by_thread_with_symbols() {
    let dir = std::env::temp_dir().join(format!("trc_viz_perf_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("p.data");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["--protocol", "etmv4", "--seed", "7", "--cpus", "2", "--perf-data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, out, err) = run(&[
        "folded",
        &data.display().to_string(),
        "--symdir",
        &dir.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let mut threads: Vec<&str> = out.lines().map(|l| l.split(';').next().unwrap()).collect();
    threads.dedup();
    assert_eq!(threads, ["cpu 0 trc_gen_prog tid 4000", "cpu 1 trc_gen_prog tid 4001"]);
    // Each CPU runs its own program, whose functions are named cpuN_...
    for l in out.lines() {
        let mut f = l.split(';');
        let cpu = f.next().unwrap().split(' ').nth(1).unwrap();
        assert!(f.next().unwrap().starts_with(&format!("cpu{cpu}_")), "{l}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Sets the type of the ELF64 file's symbol tables to SHT_PROGBITS: the
/// file then has no symbols a reader looks for.
fn strip_symbols(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    assert_eq!(&b[..5], b"\x7fELF\x02", "an ELF64 file");
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum) = (u64_at(&b, 0x28), u16_at(&b, 0x3a), u16_at(&b, 0x3c));
    let mut stripped = 0;
    for i in 0..shnum {
        let t = shoff + i * shentsize + 4;
        // SHT_SYMTAB (2) and SHT_DYNSYM (11).
        if matches!(b[t], 2 | 11) && b[t + 1..t + 4] == [0, 0, 0] {
            b[t] = 1;
            stripped += 1;
        }
    }
    assert!(stripped > 0, "no symbol table in {}", path.display());
    std::fs::write(path, b).unwrap();
}

/// A perf.data whose binary has no symbols: each function is named by the
/// binary and the offset in its file.
#[test]
fn perf_data_without_symbols_names_binary_and_offset() {
    let dir = std::env::temp_dir().join(format!("trc_viz_perf_nosym_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("p.data");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["--protocol", "etmv4", "--seed", "7", "--perf-data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let elf = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "elf"))
        .expect("trc_gen writes the program's ELF beside the recording");
    strip_symbols(&elf);
    let (code, out, err) = run(&[
        "folded",
        &data.display().to_string(),
        "--symdir",
        &dir.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let name = elf.file_name().unwrap().to_string_lossy().into_owned();
    let frames: Vec<&str> = out
        .lines()
        .flat_map(|l| l.rsplit_once(' ').unwrap().0.split(';').skip(1))
        .collect();
    assert!(!frames.is_empty(), "{out}");
    for f in frames {
        let off = f
            .strip_prefix(&format!("{name}+0x"))
            .unwrap_or_else(|| panic!("{f} in {out}"));
        assert!(u64::from_str_radix(off, 16).is_ok(), "{f}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
