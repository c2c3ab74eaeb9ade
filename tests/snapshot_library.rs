//! The project's own snapshot library (`snapshots/`, made by `trc_gen`):
//! every snapshot decodes to its recorded truth (that each lists exactly as
//! its recorded `expected.ppl` is checked by `trc_regress`'s tests,
//! `tools/tests/trc_regress_program.rs`).

use std::path::Path;

use coresight_generator::check::decode_dir;

const LIBRARY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots");

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
        let got: String = decode_dir(Path::new(&dir))
            .unwrap()
            .iter()
            .map(|t| format!("{t}\n"))
            .collect();
        assert_eq!(got, want, "{}", dir.display());
        checked += 1;
    }
    assert!(checked >= 4);
}
