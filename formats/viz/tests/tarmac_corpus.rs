//! On the Tarmac corpus (Arm's Tarmac Trace Utilities' test traces, in
//! ../shared when present): the folded stacks behind our flame graph equal
//! `tarmac-flamegraph`'s output (and the Tarmac crate's own), and the
//! timeline's call nesting equals `tarmac-calltree`'s.

use std::path::{Path, PathBuf};

use coresight_tarmac::Reader;
use coresight_tarmac::calls::{CallAnalyzer, CallTree, Naming};
use coresight_tarmac::symbols::Symbols;
use coresight_viz::folded::folded_lines;
use coresight_viz::profile::{Axis, EventKind, Limits};
use coresight_viz::tarmac::profile_from_calltree;
use coresight_viz::timeline::Timeline;

/// The corpus; the tests using it are `#[ignore]`d, so it must be there.
fn corpus() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tarmac");
    assert!(p.is_dir(), "{}: not present (these tests need ../shared)", p.display());
    p
}

fn tree(path: &Path) -> CallTree {
    let f = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut r = Reader::new(f);
    let mut a = CallAnalyzer::new();
    while let Some(rec) = r.next_record().unwrap() {
        a.feed(&rec);
    }
    a.finish()
}

fn folded_text(lines: &[(String, u64)]) -> String {
    lines.iter().map(|(p, w)| format!("{p} {w}\n")).collect()
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn quicksort_folded_equals_tarmac_flamegraph() {
    let dir = corpus();
    let t = tree(&dir.join("quicksort.tarmac"));
    let syms = Symbols::from_elf_file(&dir.join("quicksort.elf")).unwrap();
    let p = profile_from_calltree(&t, Some(&syms), false, Limits::default());
    assert_eq!(p.axis(), Axis::TarmacTime);
    let ours = folded_text(&folded_lines(&p, p.axis()));
    let reference = std::fs::read_to_string(dir.join("flamegraph-quicksort-symbols.ref")).unwrap();
    assert_eq!(ours, reference);
    assert_eq!(ours, t.flamegraph_text(Some(&syms)));
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn every_corpus_trace_folds_as_the_tarmac_crate_does() {
    let dir = corpus();
    for (trace, elf) in [
        ("quicksort.tarmac", Some("quicksort.elf")),
        ("quicksort.tarmac", None),
        ("calltest32.tarmac", Some("calltest32.elf")),
        ("calltest64.tarmac", Some("calltest64.elf")),
        ("indextest.tarmac", None),
    ] {
        let t = tree(&dir.join(trace));
        let syms = elf.map(|e| Symbols::from_elf_file(&dir.join(e)).unwrap());
        for no_offsets in [false, true] {
            let p = profile_from_calltree(&t, syms.as_ref(), no_offsets, Limits::default());
            let ours = folded_text(&folded_lines(&p, p.axis()));
            let mut theirs = Vec::new();
            let naming = Naming {
                symbols: syms.as_ref(),
                no_offsets,
            };
            t.write_flamegraph(&mut theirs, naming).unwrap();
            assert_eq!(
                ours,
                String::from_utf8(theirs).unwrap(),
                "{trace} {elf:?} no_offsets={no_offsets}"
            );
        }
    }
}

/// The timeline's calls, as `tarmac-calltree` lists them: depth, entry
/// time, exit time and name.
#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn quicksort_timeline_nesting_equals_tarmac_calltree() {
    let dir = corpus();
    let t = tree(&dir.join("quicksort.tarmac"));
    let syms = Symbols::from_elf_file(&dir.join("quicksort.elf")).unwrap();
    let p = profile_from_calltree(&t, Some(&syms), false, Limits::default());
    let tl = Timeline::all(&p);
    let k = p.axis().slot();
    // (depth, entry time, exit time, name) from the timeline's events.
    let mut ours = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for e in &tl.events {
        match e.kind {
            EventKind::Open => {
                open.push(ours.len());
                let name = p.frames.name(p.nodes[e.node as usize].frame).to_string();
                ours.push((open.len() - 1, e.t[k], 0u64, name));
            }
            EventKind::Close => {
                let i = open.pop().expect("balanced");
                ours[i].2 = e.t[k];
            }
            EventKind::Gap => panic!("no gap in a Tarmac trace"),
        }
    }
    assert!(open.is_empty());
    // The same from the reference call tree's `o` lines.
    let reference = std::fs::read_to_string(dir.join("calltree-quicksort-symbols.ref")).unwrap();
    let mut theirs = Vec::new();
    for line in reference.lines() {
        let indent = line.len() - line.trim_start().len();
        let Some(rest) = line.trim_start().strip_prefix("o ") else {
            continue;
        };
        let time = |s: &str| s.trim_start_matches("t:").parse::<u64>().unwrap();
        let f: Vec<&str> = rest.split_whitespace().collect();
        let name = rest.rsplit_once(" : ").map_or("", |x| x.1).to_string();
        theirs.push((indent / 4, time(f[0]), time(f[4]), name));
    }
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours, theirs);
}
