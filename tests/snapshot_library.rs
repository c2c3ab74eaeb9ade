//! The project's own snapshot library (`snapshots/`, made by `trc_gen`):
//! every snapshot lists exactly as its recorded `expected.ppl`, and decodes
//! to its recorded truth.

use std::path::Path;

use coresight_decode::generator::check::decode_dir;
use coresight_decode::regress::main_with_args;

const LIBRARY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots");

#[test]
fn every_snapshot_matches_its_expected_listing() {
    let mut out = Vec::new();
    let status = main_with_args(&[LIBRARY.to_string(), "--diff".into(), "3".into()], &mut out);
    let text = String::from_utf8_lossy(&out);
    assert_eq!(status, 0, "{text}");
    let summary = text.lines().last().unwrap_or("");
    let passed: usize = summary.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(passed >= 4, "{text}");
    assert!(summary.ends_with(" passed, 0 failed"), "{text}");
}

#[test]
fn every_snapshot_decodes_to_its_truth() {
    let mut checked = 0;
    for entry in std::fs::read_dir(LIBRARY).unwrap() {
        let dir = entry.unwrap().path();
        let truth = dir.join("truth.txt");
        if !truth.exists() {
            continue;
        }
        let want = std::fs::read_to_string(&truth).unwrap();
        let got: String = decode_dir(Path::new(&dir)).unwrap().iter().map(|t| format!("{t}\n")).collect();
        assert_eq!(got, want, "{}", dir.display());
        checked += 1;
    }
    assert!(checked >= 4);
}
