//! What the tests of trc_perf share about the fixtures of tools/tests/fixtures: their lists
//! and the recordings the fixture scripts make.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The lines of tools/tests/fixtures/FOLDER/NAME that are not blank or comments, split at
/// white space into the first word and the rest.
pub fn listed(folder: &str, name: &str) -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(folder);
    std::fs::read_to_string(dir.join(name))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((a, b)) => (a.to_string(), b.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// The recording of a fixture kind (`args`: its trc_gen options) as the fixture scripts make
/// it: seed 5, 40 waypoints, the ELF recorded as /trc_gen/prog.
pub fn fixture_recording(args: &str, data: &std::path::Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(args.split_whitespace())
        .args([
            "--seed",
            "5",
            "--length",
            "40",
            "--elf-path",
            "/trc_gen/prog",
            "--perf-data",
        ])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "trc_gen {args}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

pub fn unxz(path: &std::path::Path) -> String {
    use std::io::Read;
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = lzma_rust2::XzReader::new(f, false);
    let mut s = String::new();
    r.read_to_string(&mut s).unwrap();
    s
}
