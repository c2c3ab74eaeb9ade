//! AutoFDO profiles of the real simpleperf recordings in ../shared/corpus/simpleperf (not in
//! the repository), compared with what `simpleperf inject` wrote for them.

use std::path::PathBuf;

use coresight_perf_data::autofdo::{AutoFdoProfile, add_recording};
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::decode::DecodeOptions;
use coresight_perf_data::{MappedFile, Recording};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/simpleperf")
}

fn profile(files: &[&str], filter: Option<&str>) -> String {
    let mut p = AutoFdoProfile::new(filter.map(|f| regex::Regex::new(f).unwrap()));
    for f in files {
        let m = MappedFile::open(dir().join(f)).unwrap_or_else(|e| panic!("{e}"));
        let rec = Recording::parse(m.bytes()).unwrap();
        let mut search = SymbolSearch::new();
        search.recorded_paths = false;
        search.add_symdir(&dir()).unwrap();
        let r = add_recording(&rec, search, DecodeOptions::default(), &mut p, &mut |_| {}).unwrap();
        eprintln!("{f}: {:?} {:?} missing {:?}", r.summary, r.warnings, r.missing);
    }
    p.to_text()
}

fn expected() -> String {
    std::fs::read_to_string(dir().join("perf_inject.data")).unwrap()
}

#[test]
#[ignore = "needs ../shared/corpus/simpleperf; .ci/run runs it with --ignored"]
fn formatted_etr_recording_matches_simpleperf() {
    assert_eq!(profile(&["perf_etm.data"], None), expected());
}

#[test]
#[ignore = "needs ../shared/corpus/simpleperf; .ci/run runs it with --ignored"]
fn unformatted_trbe_recording_matches_simpleperf() {
    assert_eq!(profile(&["perf_with_unformatted_trace.data"], None), expected());
}

#[test]
#[ignore = "needs ../shared/corpus/simpleperf; .ci/run runs it with --ignored"]
fn both_recordings_add_up() {
    let text = profile(&["perf_etm.data", "perf_with_unformatted_trace.data"], None);
    assert!(text.contains("106c->1074:200\n"), "{text}");
}

#[test]
#[ignore = "needs ../shared/corpus/simpleperf; .ci/run runs it with --ignored"]
fn binary_filter() {
    let kept = profile(&["perf_etm.data"], Some("etm_t.*_loop"));
    assert_eq!(kept, expected());
    let dropped = profile(&["perf_etm.data"], Some("no_etm_test_loop"));
    assert!(!dropped.contains("etm_test_loop"), "{dropped}");
}

/// simpleperf's fleet route: each recording to a branch list file, the files merged, then
/// AutoFDO text from the merged lists (walking the binary's code): the same text as the
/// direct route, as simpleperf's own tests require (`output_option`), and the two
/// recordings add up through their branch lists too.
#[test]
#[ignore = "needs ../shared/corpus/simpleperf; .ci/run runs it with --ignored"]
fn branch_lists_give_the_same_profile() {
    use coresight_perf_data::branch_list::{self, BranchList};
    let search = || {
        let mut s = SymbolSearch::new();
        s.recorded_paths = false;
        s.add_symdir(&dir()).unwrap();
        s
    };
    let list_of = |f: &str| {
        let m = MappedFile::open(dir().join(f)).unwrap();
        let rec = Recording::parse(m.bytes()).unwrap();
        let mut l = BranchList::default();
        branch_list::add_recording(&rec, search(), DecodeOptions::default(), &mut l, |_| true, &mut |_| {}).unwrap();
        // Through the file's bytes, as it travels.
        BranchList::parse(&l.to_bytes()).unwrap()
    };
    let text = |l: &BranchList| {
        let mut p = AutoFdoProfile::new(None);
        assert!(l.add_to_profile(&search(), &mut p).is_empty());
        p.to_text()
    };
    let a = list_of("perf_etm.data");
    let b = list_of("perf_with_unformatted_trace.data");
    assert_eq!(text(&a), expected());
    assert_eq!(text(&b), expected());
    let mut merged = a.clone();
    merged.merge(&b);
    assert!(text(&merged).contains("106c->1074:200\n"));
    assert_eq!(
        text(&merged),
        profile(&["perf_etm.data", "perf_with_unformatted_trace.data"], None)
    );
}
