//! `trc_perf script -F ...,srcline` against Debian perf's output (fixtures made by
//! tests/fixtures/perf_script_srcline/make.sh) on a trc_gen recording whose binary, prog.dbg,
//! has DWARF line tables for part of its code.

use std::path::PathBuf;
use std::process::Command;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf_script_srcline")
}

/// The recording make.sh made, again (trc_gen is deterministic), with prog.dbg at the recorded
/// path under the returned symbol folder.
fn recording() -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("trc_perf_srcline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("symfs/trc_gen")).unwrap();
    let data = dir.join("perf.data");
    let args = std::fs::read_to_string(fixtures().join("trace_args.txt")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(args.split_whitespace())
        .arg("--perf-data")
        .arg(&data)
        .output()
        .unwrap();
    assert!(o.status.success(), "trc_gen: {}", String::from_utf8_lossy(&o.stderr));
    std::fs::copy(fixtures().join("prog.dbg"), dir.join("symfs/trc_gen/prog")).unwrap();
    (data, dir.join("symfs"))
}

#[test]
fn srcline_is_what_debian_perf_prints() {
    let (data, symfs) = recording();
    let cases: Vec<(String, String)> = std::fs::read_to_string(fixtures().join("cases.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (a, b) = l.split_once(char::is_whitespace).unwrap();
            (a.to_string(), b.trim().to_string())
        })
        .collect();
    assert_eq!(cases.len(), 5);
    let mut lines_with_source = 0;
    for (n, (itrace, fields)) in cases.iter().enumerate() {
        let n = n + 1;
        let o = Command::new(env!("CARGO_BIN_EXE_trc_perf"))
            .args(["script", "--as-perf-6.1", "--no-recorded-paths"])
            .arg("-i")
            .arg(&data)
            .arg("--symfs")
            .arg(&symfs)
            .arg(format!("--itrace={itrace}"))
            .args(["-F", fields])
            .output()
            .unwrap();
        let what = format!("case {n} (--itrace={itrace} -F {fields})");
        let refusal = fixtures().join(format!("{n}.refused"));
        if refusal.exists() {
            let want = std::fs::read_to_string(&refusal).unwrap();
            assert_eq!(o.status.code(), Some(2), "{what}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains(want.trim()),
                "{what}: perf refuses with {want:?}; trc_perf: {err}"
            );
            continue;
        }
        assert!(o.status.success(), "{what}: {}", String::from_utf8_lossy(&o.stderr));
        let want = std::fs::read_to_string(fixtures().join(format!("{n}.txt"))).unwrap();
        let got = String::from_utf8_lossy(&o.stdout);
        assert_eq!(got, want, "{what}");
        lines_with_source += got
            .lines()
            .filter(|l| l.starts_with("  prog.c:") || l.starts_with("  helper.h:"))
            .count();
    }
    // Both source files, and samples with no line (past cpu0_func30, or ip 0), are in there.
    assert!(lines_with_source > 100, "{lines_with_source}");
    let one = std::fs::read_to_string(fixtures().join("1.txt")).unwrap();
    assert!(one.contains("\n  prog.c:13\n") && one.contains("\n  helper.h:"));
    assert!(
        one.contains("cpu0_func30\n           "),
        "a sample without a line is followed by the next sample"
    );
    let _ = std::fs::remove_dir_all(symfs.parent().unwrap());
}
