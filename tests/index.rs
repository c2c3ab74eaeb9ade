//! Trace indexes: counts and positions against the packet listing on the
//! OpenCSD corpus, window decode against the full decode, one stream split
//! over threads, and the saved index format.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use coresight_decode::datapath::{DatapathOp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::index::{Capture, Element, check_capture, element_time, from_bytes, to_bytes};
use coresight_decode::index::{
    CaptureIndex, EntryKind, IndexFileError, IndexOptions, Window, WindowNote, decode_split, decode_split_ids,
    decode_window,
};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::shared::{Shared, shared};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/opencsd-1.8.0");

/// The corpus; the tests using it are `#[ignore]`d, so it must be there.
fn corpus() -> PathBuf {
    let p = PathBuf::from(CORPUS);
    assert!(
        p.join("cases.tsv").exists(),
        "{CORPUS}: not present (these tests need ../shared)"
    );
    p
}

/// Per-ID counts and packet positions from a listing.
#[derive(Default, Debug)]
struct Listed {
    syncs: u64,
    timestamps: u64,
    events: u64,
    idx: HashSet<u64>,
}

/// Reads the packet lines (`Idx:N; ID:H; [raw bytes ];\tNAME...`) of a
/// listing by trace ID.
fn listed_packets(text: &str) -> BTreeMap<u8, Listed> {
    let mut out: BTreeMap<u8, Listed> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("Idx:") else {
            continue;
        };
        let Some((idx, rest)) = rest.split_once("; ID:") else {
            continue;
        };
        // With the raw bytes (a packet monitor) or without (packet sink).
        let (id, desc) = if let Some((id, rest)) = rest.split_once("; [") {
            let Some((_, desc)) = rest.split_once("];\t") else {
                continue;
            };
            (id, desc)
        } else {
            let Some((id, desc)) = rest.split_once(";\t") else {
                continue;
            };
            (id, desc)
        };
        let (Ok(idx), Ok(id)) = (idx.parse::<u64>(), u8::from_str_radix(id, 16)) else {
            continue;
        };
        let name = desc.split([':', ' ']).next().unwrap_or("");
        let l = out.entry(id).or_default();
        l.idx.insert(idx);
        match name {
            "I_ASYNC" | "ASYNC" | "A_SYNC" | "ITM_ASYNC" => l.syncs += 1,
            "I_TIMESTAMP" | "TIMESTAMP" | "ITM_GTS_1" | "ITM_GTS_2" => l.timestamps += 1,
            "I_EVENT" | "TRIGGER" => l.events += 1,
            n => {
                // STM: TRIG, FLAG and data packets take `M` / `TS` suffixes.
                let base = n.trim_end_matches("TS").trim_end_matches('M');
                if matches!(base, "TRIG" | "FLAG" | "D4" | "D8" | "D16" | "D32" | "D64") {
                    if n.ends_with("TS") {
                        l.timestamps += 1;
                    }
                    if base == "TRIG" {
                        l.events += 1;
                    }
                }
            }
        }
    }
    out
}

#[test]
#[ignore = "needs ../shared/corpus/opencsd-1.8.0 (OpenCSD's snapshots); .ci/run runs it with --ignored"]
fn corpus_index_counts_equal_the_packet_listing() {
    let root = corpus();
    let cases = std::fs::read_to_string(root.join("cases.tsv")).unwrap();
    let mut checked = 0;
    let mut positions = 0usize;
    for line in cases.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let mut words = line.split('\t');
        let name = words.next().unwrap();
        let args: Vec<&str> = words.next().unwrap().split_whitespace().collect();
        let dir = args[args.iter().position(|a| *a == "-ss_dir").unwrap() + 1];
        let mut xz = String::new();
        let file = std::fs::File::open(root.join("expected").join(format!("{name}.ppl.xz"))).unwrap();
        lzma_rust2::XzReader::new(file, true).read_to_string(&mut xz).unwrap();
        let listed = listed_packets(&xz);

        // With -multi_session the lister lists every buffer of the
        // snapshot, else the first.
        let first = Capture::load(&root.join(dir), None).unwrap();
        let buffers: Vec<String> = if args.contains(&"-multi_session") {
            first.snapshot.buffer_names().iter().map(|s| s.to_string()).collect()
        } else {
            vec![first.buffer.clone()]
        };
        let mut streams: BTreeMap<u8, coresight_decode::index::StreamIndex> = BTreeMap::new();
        for b in &buffers {
            // A DSTREAM capture's footers are left out by the loader.
            let cap = Capture::load(&root.join(dir), Some(b)).unwrap();
            let ix = cap.index(&IndexOptions::default()).unwrap();
            assert!(!ix.streams.is_empty(), "{name}: nothing indexed");
            for s in ix.streams {
                streams
                    .entry(s.id)
                    .or_insert_with(|| coresight_decode::index::StreamIndex {
                        id: s.id,
                        ..Default::default()
                    })
                    .entries
                    .extend(s.entries);
            }
        }
        // A single-source capture's packets are listed under ID 0, its
        // elements (and its stream index) under the source's trace ID.
        let single = first
            .tree(DecodeMode::PacketsOnly, |_| {})
            .unwrap()
            .deformatter()
            .is_none();
        let listed_id = |id: u8| if single { 0 } else { id };
        for s in streams.values() {
            let c = s.counts();
            let Some(l) = listed.get(&listed_id(s.id)) else {
                assert!(
                    s.entries.is_empty(),
                    "{name}: ID {:#x} lists no packet but has index entries",
                    s.id
                );
                continue;
            };
            assert_eq!(
                (c.syncs(), c.timestamps(), c.events()),
                (l.syncs, l.timestamps, l.events),
                "{name}: ID {:#x} (syncs, timestamps, events)",
                s.id
            );
            for e in &s.entries {
                assert!(
                    l.idx.contains(&e.index),
                    "{name}: ID {:#x} {:?} at {} is no packet's Idx",
                    s.id,
                    e.kind,
                    e.index
                );
                positions += 1;
            }
        }
        for id in listed.keys() {
            assert!(
                streams.keys().any(|&s| listed_id(s) == *id),
                "{name}: listed ID {id:#x} has no stream index"
            );
        }
        checked += 1;
    }
    assert!(checked >= 48, "{checked} cases checked");
    assert!(positions > 5_000, "{positions} positions checked");
}

/// Collects every element of a decode.
struct Collect(Shared<Vec<Element>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> coresight_decode::DatapathResp {
        self.0.borrow_mut().push((index, trace_id, *elem));
        coresight_decode::DatapathResp::Cont
    }
}

/// The full decode's elements of one ID.
fn full_decode(cap: &Capture, id: u8) -> Vec<Element> {
    let mut tree = cap.tree(DecodeMode::FullDecode, |_| {}).unwrap();
    let out = shared(Vec::new());
    tree.set_gen_elem_out(Box::new(Collect(out.clone())));
    if matches!(tree.format(), coresight_decode::tree::SourceFormat::Formatted(_)) {
        tree.set_id_filter(Some(&[id])).unwrap();
    }
    let mut at = 0;
    while at < cap.data().unwrap().len() {
        let end = (at + 4096).min(cap.data().unwrap().len());
        let (r, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, &cap.data().unwrap()[at..end]);
        assert!(!r.is_fatal(), "fatal at {at}");
        at += used;
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    let v = std::mem::take(&mut *out.borrow_mut());
    v.into_iter().filter(|e| e.2.elem_type != ElemType::EoTrace).collect()
}

/// Asserts two element lists are equal, showing the first difference.
///
/// Elements compare as the listing prints them (index, trace ID and
/// OpenCSD's element text): fields an element type does not print are
/// the decoder's scratch (an instruction range's exception number, say).
fn assert_same(what: &str, got: &[Element], want: &[Element]) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| !same(&got[i], &want[i])) {
        panic!(
            "{what}: element {i} of {}/{} differs:\ngot  {:?}\nwant {:?}",
            got.len(),
            want.len(),
            got[i],
            want[i]
        );
    }
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
}

fn same(a: &Element, b: &Element) -> bool {
    a.0 == b.0 && a.1 == b.1 && a.2.to_string() == b.2.to_string()
}

/// Window decodes of a case: by bytes on the stream with the most sync
/// points (`bytes`), by time on the stream with the most timestamps
/// (`time`); each asked for must be possible.
fn check_windows(case: &Path, name: &str, bytes: bool, time: bool) {
    let cap = Capture::load(case, None).unwrap();
    let ix = cap
        .index(&IndexOptions {
            granularity: 1024,
            ..IndexOptions::default()
        })
        .unwrap();
    if bytes {
        let s = ix.streams.iter().max_by_key(|s| s.counts().syncs()).unwrap();
        let id = s.id;
        assert!(
            s.counts().syncs() >= 2,
            "{name}: ID {id:#x} has {} syncs",
            s.counts().syncs()
        );
        let full = full_decode(&cap, id);
        let (lo, hi) = (s.entries.first().unwrap().index, s.entries.last().unwrap().index);

        // By bytes: 35% to 70% of the stream, edges not on sync points.
        let from = lo + (hi - lo) * 35 / 100 + 1;
        let to = lo + (hi - lo) * 70 / 100;
        let w = decode_window(
            &ix,
            cap.data().unwrap(),
            id,
            Window::Bytes { from, to },
            cap.tree(DecodeMode::FullDecode, |_| {}).unwrap(),
        )
        .unwrap();
        assert!(w.window.start < from);
        let slice: Vec<Element> = full.iter().filter(|e| e.0 >= from && e.0 < to).copied().collect();
        assert!(slice.len() > 10, "{name}: {} elements in the slice", slice.len());
        // The decoder starts before the window: it is synchronised by then.
        assert_same(
            &format!(
                "{name}: byte window {from}..{to} of ID {id:#x} (from sync at {})",
                w.window.start
            ),
            &w.elements,
            &slice,
        );

        // By bytes, from a sync point itself: the decoder starts at the
        // sync point before it, so the window is the full decode's slice
        // exactly (before, it started at the sync point and differed up to
        // its first PE context).
        let sync = ix.syncs_from(id, from).next().unwrap().index;
        let w = decode_window(
            &ix,
            cap.data().unwrap(),
            id,
            Window::Bytes { from: sync, to: hi + 1 },
            cap.tree(DecodeMode::FullDecode, |_| {}).unwrap(),
        )
        .unwrap();
        assert!(w.window.start < sync);
        let slice: Vec<Element> = full.iter().filter(|e| e.0 >= sync && e.0 <= hi).copied().collect();
        assert_same(&format!("{name} from sync {sync}"), &w.elements, &slice);
    }
    if time {
        let s = ix.streams.iter().max_by_key(|s| s.counts().timestamps()).unwrap();
        let id = s.id;
        let ts: Vec<u64> = s.of_kind(EntryKind::Timestamp).map(|e| e.value).collect();
        assert!(ts.len() >= 4, "{name}: ID {id:#x} has {} timestamps", ts.len());
        let full = full_decode(&cap, id);
        let (t0, t1) = (ts[ts.len() / 3], ts[ts.len() * 2 / 3]);
        let w = decode_window(
            &ix,
            cap.data().unwrap(),
            id,
            Window::Time { from_ts: t0, to_ts: t1 },
            cap.tree(DecodeMode::FullDecode, |_| {}).unwrap(),
        )
        .unwrap();
        let mut now = None;
        let slice: Vec<Element> = full
            .iter()
            .filter(|e| {
                if let Some(t) = element_time(&e.2) {
                    now = Some(t);
                }
                now.is_some_and(|t| t >= t0 && t <= t1)
            })
            .copied()
            .collect();
        assert!(slice.len() > 4, "{name}: {} elements in {t0}..={t1}", slice.len());
        assert_same(
            &format!("{name}: time window {t0}..={t1} of ID {id:#x}"),
            &w.elements,
            &slice,
        );
    }
}

#[test]
#[ignore = "needs ../shared/corpus/opencsd-1.8.0 (OpenCSD's snapshots); .ci/run runs it with --ignored"]
fn window_decode_equals_the_full_decode_slice() {
    let root = corpus();
    // ETMv4 (no timestamps in this capture).
    check_windows(
        &root.join("snapshots/bugfix-exact-match"),
        "bugfix-exact-match",
        true,
        false,
    );
    // PTM, and PTM / ETMv3 with timestamps.
    check_windows(
        &root.join("snapshots/tc2-ptm-rstk-t32"),
        "tc2-ptm-rstk-t32",
        true,
        false,
    );
    check_windows(&root.join("snapshots/TC2"), "TC2", true, true);
    // ETE: sync points in one capture, timestamps in another.
    check_windows(
        &root.join("snapshots-ete/infrastructure"),
        "infrastructure",
        true,
        false,
    );
    check_windows(&root.join("snapshots-ete/ts_bit64_set"), "ts_bit64_set", false, true);
}

/// A generated single-ID ETMv4 capture of several megabytes.
fn long_etmv4(name: &str, length: usize) -> PathBuf {
    let dir = common::temp_dir(name);
    let g = generate(&GenOptions {
        seed: 5,
        protocol: GenProtocol::Etmv4,
        layout: BufferLayout::Formatted,
        length,
    });
    g.spec.write_to(&dir).unwrap();
    dir
}

/// Instructions per range start address (a split decode's fold).
fn count(acc: &mut HashMap<u64, u64>, _index: TrcIndex, e: &TraceElement) {
    if e.elem_type == ElemType::InstrRange {
        *acc.entry(e.st_addr).or_default() += e.num_instr_range as u64;
    }
}

#[test]
fn one_stream_split_over_threads_counts_the_same_instructions() {
    let dir = long_etmv4("index-split", 600_000);
    let cap = Capture::load(&dir, None).unwrap();
    assert!(
        cap.data().unwrap().len() > 2 << 20,
        "{} bytes",
        cap.data().unwrap().len()
    );
    let ix = cap.index(&IndexOptions::default()).unwrap();
    assert_eq!(ix.streams.len(), 1);
    let id = ix.streams[0].id;
    let mut serial = HashMap::new();
    for e in full_decode(&cap, id) {
        count(&mut serial, e.0, &e.2);
    }
    assert!(serial.values().sum::<u64>() > 1_000_000);
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    for pieces in [2, 3, 4] {
        assert!(ix.split_points(id, pieces).len() == pieces, "{pieces} split points");
        let parts: Vec<HashMap<u64, u64>> = decode_split(&ix, cap.data().unwrap(), id, pieces, &build, count).unwrap();
        let mut joined: HashMap<u64, u64> = HashMap::new();
        for p in parts {
            for (a, n) in p {
                *joined.entry(a).or_default() += n;
            }
        }
        assert!(
            joined == serial,
            "{pieces} pieces: {} vs {} instructions",
            joined.values().sum::<u64>(),
            serial.values().sum::<u64>()
        );
    }
}

/// Every piece's elements, in order (a split decode's fold).
fn keep(acc: &mut Vec<(TrcIndex, String)>, index: TrcIndex, e: &TraceElement) {
    acc.push((index, e.to_string()));
}

#[test]
fn pieces_decoded_with_trees_built_beforehand_fold_only_their_own_elements() {
    let dir = long_etmv4("index-pieces", 20_000);
    let cap = Capture::load(&dir, None).unwrap();
    let ix = cap
        .index(&IndexOptions {
            granularity: 256,
            ..IndexOptions::default()
        })
        .unwrap();
    let id = ix.streams[0].id;
    let pieces = ix.split_pieces(id, 3);
    assert_eq!(pieces.len(), 3);
    assert_eq!(pieces[0].start, ix.split_points(id, 3)[0]);
    assert!(
        pieces
            .windows(2)
            .all(|w| w[0].end == w[1].start && w[0].start < w[0].end)
    );
    assert_eq!(pieces[2].end, ix.indexed.end);
    let trees = || {
        pieces
            .iter()
            .map(|_| cap.tree(DecodeMode::FullDecode, |_| {}).unwrap())
            .collect::<Vec<_>>()
    };
    let got = coresight_decode::index::decode_pieces(&ix, cap.data().unwrap(), &pieces, trees(), 2, keep).unwrap();
    // Each piece folds the elements of its own bytes, in decode order.
    for (p, els) in pieces.iter().zip(&got) {
        assert!(els.len() > 10, "{p:?}: {} elements", els.len());
        assert!(els.iter().all(|(i, _)| *i >= p.start && *i < p.end), "{p:?}");
    }
    // The same as with trees built on the workers, and the same on one
    // thread as on three.
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    assert_eq!(
        decode_split(&ix, cap.data().unwrap(), id, 3, &build, keep).unwrap(),
        got
    );
    assert_eq!(
        coresight_decode::index::decode_pieces(&ix, cap.data().unwrap(), &pieces, trees(), 1, keep).unwrap(),
        got
    );
    // After the first piece's first PE context, the joined pieces are the
    // full decode's elements from there on, less what the pieces' own
    // starts add (each decoder's NO_SYNC and its context until the first
    // PE context): compare the counts of instruction ranges.
    let full = full_decode(&cap, id);
    let ranges = |v: &[(TrcIndex, String)]| {
        v.iter()
            .filter(|(_, t)| t.contains("OCSD_GEN_TRC_ELEM_INSTR_RANGE"))
            .count()
    };
    let full_ranges = full
        .iter()
        .filter(|e| e.0 >= pieces[0].start && e.2.elem_type == ElemType::InstrRange)
        .count();
    assert_eq!(got.iter().map(|v| ranges(v)).sum::<usize>(), full_ranges);
    // One tree per piece.
    let mut two = trees();
    two.pop();
    let e = coresight_decode::index::decode_pieces(&ix, cap.data().unwrap(), &pieces, two, 2, keep).unwrap_err();
    assert!(e.to_string().contains("2 trees for 3 pieces"), "{e}");
    // A tree that cannot be built fails the decode with its error.
    let no_tree = || {
        Err(coresight_decode::Error::code(
            coresight_decode::ErrCode::Fail,
            "no tree today",
        ))
    };
    let e = decode_split(&ix, cap.data().unwrap(), id, 3, &no_tree, keep).unwrap_err();
    assert!(e.to_string().contains("no tree today"), "{e}");
}

fn small_index() -> (Capture, CaptureIndex) {
    let dir = long_etmv4("index-file", 3_000);
    let cap = Capture::load(&dir, None).unwrap();
    let ix = cap
        .index(&IndexOptions {
            granularity: 256,
            ..IndexOptions::default()
        })
        .unwrap();
    (cap, ix)
}

#[test]
fn saved_index_round_trips() {
    let (cap, ix) = small_index();
    assert!(ix.is_complete());
    assert!(ix.source.as_ref().unwrap().blocks.len() > 4);
    assert!(ix.streams[0].counts().syncs() > 2);
    let path = common::temp_dir("index-round-trip").join("trace.csidx");
    ix.save(&path).unwrap();
    let back = CaptureIndex::load(&path, cap.data().unwrap()).unwrap();
    assert_eq!(back, ix);
    assert_eq!(to_bytes(&back), std::fs::read(&path).unwrap());
}

#[test]
fn damaged_or_stale_index_files_are_refused_with_what_is_wrong() {
    let (cap, ix) = small_index();
    let bytes = to_bytes(&ix);
    // Every truncation is refused.
    for n in (0..bytes.len()).step_by(7) {
        let e = from_bytes(&bytes[..n]).unwrap_err();
        assert!(
            matches!(
                e,
                IndexFileError::BadMagic | IndexFileError::Truncated { .. } | IndexFileError::Checksum { .. }
            ),
            "cut at {n}: {e}"
        );
    }
    assert_eq!(
        from_bytes(&bytes[..30])
            .unwrap_err()
            .to_string()
            .split(':')
            .next()
            .unwrap(),
        "index corrupt"
    );
    // Every flipped byte is refused.
    for at in (0..bytes.len()).step_by(5) {
        let mut b = bytes.clone();
        b[at] ^= 0x24;
        assert!(from_bytes(&b).is_err(), "flip at {at} accepted");
    }
    let mut b = bytes.clone();
    b[40] ^= 1;
    assert!(
        from_bytes(&b)
            .unwrap_err()
            .to_string()
            .starts_with("index corrupt: checksum")
    );
    let mut b = bytes.clone();
    b[8] = 9;
    assert_eq!(
        from_bytes(&b).unwrap_err().to_string(),
        "index version 9 not supported (this library reads version 4)"
    );
    assert_eq!(from_bytes(b"hello").unwrap_err(), IndexFileError::BadMagic);
    // A changed capture: stale.
    let mut data = cap.data().unwrap().to_vec();
    data[100] ^= 0x10;
    let e = check_capture(&ix, &data).unwrap_err();
    assert!(e.to_string().starts_with("stale index: built for a capture of"), "{e}");
    let e = check_capture(&ix, &cap.data().unwrap()[..cap.data().unwrap().len() - 16]).unwrap_err();
    assert!(matches!(e, IndexFileError::Stale { size, .. } if size == cap.data().unwrap().len() as u64 - 16));
    check_capture(&ix, cap.data().unwrap()).unwrap();
}

#[test]
fn partial_index_covers_what_it_says() {
    let dir = long_etmv4("index-partial", 3_000);
    let cap = Capture::load(&dir, None).unwrap();
    let full = cap.index(&IndexOptions::default()).unwrap();
    let part = cap
        .index(&IndexOptions {
            limit: Some(cap.data().unwrap().len() as u64 / 2),
            ..IndexOptions::default()
        })
        .unwrap();
    assert!(!part.is_complete());
    assert_eq!(part.indexed.end % 16, 0);
    let s = &part.streams[0];
    assert!(s.entries.iter().all(|e| e.index < part.indexed.end));
    // What it has is what the full index has there (bar the last packet,
    // which the end of the part may have cut).
    let n = s.entries.len().saturating_sub(1);
    assert_eq!(&s.entries[..n], &full.streams[0].entries[..n]);
    assert_eq!(part.ids_in(0..part.indexed.end), full.ids_in(0..part.indexed.end));
}

#[test]
fn reader_queries() {
    let (_, ix) = small_index();
    let s = &ix.streams[0];
    let syncs: Vec<u64> = s.of_kind(EntryKind::Sync).map(|e| e.index).collect();
    assert_eq!(ix.syncs_from(s.id, 0).map(|e| e.index).collect::<Vec<_>>(), syncs);
    assert_eq!(ix.syncs_from(s.id, syncs[1]).next().unwrap().index, syncs[1]);
    assert_eq!(
        ix.syncs_from(s.id, syncs[1] + 1).next().map(|e| e.index),
        syncs.get(2).copied()
    );
    assert_eq!(ix.sync_at_or_before(s.id, syncs[1] + 1), Some(syncs[1]));
    assert_eq!(ix.sync_at_or_before(s.id, syncs[0]), Some(syncs[0]));
    if syncs[0] > 0 {
        assert_eq!(ix.sync_at_or_before(s.id, syncs[0] - 1), None);
    }
    assert_eq!(ix.ids_in(0..ix.capture.size), vec![s.id]);
    assert_eq!(ix.ids_in(0..0), Vec::<u8>::new());
    if let Some((t0, t1)) = ix.timestamp_range(s.id) {
        let w = ix.time_window(s.id, t0, t1).unwrap();
        assert!(w.start <= w.from && w.from < w.end);
        assert!(ix.time_window(s.id, t1 + 1, u64::MAX).is_none());
    }
}

#[test]
fn unformatted_stream_windows_and_split() {
    let dir = common::temp_dir("index-unformatted");
    let g = generate(&GenOptions {
        seed: 8,
        protocol: GenProtocol::Etmv4,
        layout: BufferLayout::Unformatted,
        length: 40_000,
    });
    g.spec.write_to(&dir).unwrap();
    let cap = Capture::load(&dir, None).unwrap();
    let ix = cap.index(&IndexOptions::default()).unwrap();
    assert!(ix.source.is_none());
    assert_eq!(ix.format, coresight_decode::index::IndexedFormat::Single);
    assert_eq!(ix.streams.len(), 1);
    let s = &ix.streams[0];
    assert!(s.counts().syncs() > 4);
    // The stream keeps the trace ID its source's configuration gives (the
    // ID its elements carry), not the tree's slot 0.
    let tree = cap.tree(DecodeMode::PacketsOnly, |_| {}).unwrap();
    let configured: Vec<(u8, u8)> = tree.elements().map(|(slot, e)| (slot, e.config_trace_id)).collect();
    assert_eq!(configured, [(0, 0x2a)]);
    assert_eq!(s.id, 0x2a);
    assert_eq!(ix.stream(0), None);
    assert_eq!(ix.ids_in(0..16), vec![0x2a]);
    let full = full_decode(&cap, s.id);
    assert!(full.iter().all(|e| e.1 == 0x2a), "elements carry ID 0x2a");
    let (from, to) = (
        cap.data().unwrap().len() as u64 / 3,
        cap.data().unwrap().len() as u64 * 2 / 3,
    );
    let w = decode_window(
        &ix,
        cap.data().unwrap(),
        s.id,
        Window::Bytes { from, to },
        cap.tree(DecodeMode::FullDecode, |_| {}).unwrap(),
    )
    .unwrap();
    let slice: Vec<Element> = full.iter().filter(|e| e.0 >= from && e.0 < to).copied().collect();
    assert!(slice.len() > 100);
    assert_same("unformatted byte window", &w.elements, &slice);
    let mut serial = HashMap::new();
    for e in &full {
        count(&mut serial, e.0, &e.2);
    }
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    let parts: Vec<HashMap<u64, u64>> = decode_split(&ix, cap.data().unwrap(), s.id, 3, &build, count).unwrap();
    assert_eq!(parts.len(), 3);
    let mut joined: HashMap<u64, u64> = HashMap::new();
    for p in parts {
        for (a, n) in p {
            *joined.entry(a).or_default() += n;
        }
    }
    assert!(joined == serial);
}

#[test]
fn correlation_merges_ids_by_time_keeping_each_stream() {
    let dir = common::temp_dir("index-correlate");
    let g = generate(&GenOptions {
        seed: 4,
        protocol: GenProtocol::Tc2,
        layout: BufferLayout::Formatted,
        length: 4_000,
    });
    g.spec.write_to(&dir).unwrap();
    let cap = Capture::load(&dir, None).unwrap();
    let ix = cap.index(&IndexOptions::default()).unwrap();
    let ids: Vec<u8> = ix
        .streams
        .iter()
        .filter(|s| s.counts().timestamps() > 0)
        .map(|s| s.id)
        .collect();
    assert!(ids.len() >= 2, "{ids:?}");
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    let merged = coresight_decode::index::correlate(&ix, cap.data().unwrap(), &ids, &build).unwrap();
    assert!(merged.windows(2).all(|p| p[0].0 <= p[1].0), "not in time order");
    for &id in &ids {
        let first_sync = ix.syncs_from(id, 0).next().unwrap().index;
        let mine: Vec<Element> = merged
            .iter()
            .map(|m| m.1)
            .filter(|e| e.1 == id && e.0 >= first_sync && e.2.elem_type != ElemType::EoTrace)
            .collect();
        let full: Vec<Element> = full_decode(&cap, id)
            .into_iter()
            .filter(|e| e.0 >= first_sync)
            .collect();
        // The decoder starts at the stream's first sync point, as the full
        // decode does when nothing comes before it.
        assert_same(&format!("ID {id:#x} in the merge"), &mine, &full);
    }
    // Nothing else is in the merge.
    assert!(merged.iter().all(|m| ids.contains(&m.1.1)));
}

#[test]
#[ignore = "needs ../shared/corpus/opencsd-1.8.0 (OpenCSD's snapshots); .ci/run runs it with --ignored"]
fn every_id_of_a_capture_split_over_threads_counts_the_same_instructions() {
    let root = corpus();
    let cap = Capture::load(&root.join("snapshots/bugfix-exact-match"), None).unwrap();
    let ix = cap.index(&IndexOptions::default()).unwrap();
    // Six sources are configured; one has trace.
    let ids: Vec<u8> = ix
        .streams
        .iter()
        .filter(|s| s.counts().syncs() > 0)
        .map(|s| s.id)
        .collect();
    assert!(!ids.is_empty());
    // Serial: the whole capture in one tree.
    let mut tree = cap.tree(DecodeMode::FullDecode, |_| {}).unwrap();
    let out = shared(Vec::new());
    tree.set_gen_elem_out(Box::new(Collect(out.clone())));
    let mut at = 0;
    while at < cap.data().unwrap().len() {
        let (r, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, &cap.data().unwrap()[at..]);
        assert!(!r.is_fatal());
        at += used;
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    let mut serial: HashMap<(u8, u64), u64> = HashMap::new();
    for e in out.borrow().iter() {
        if e.2.elem_type == ElemType::InstrRange {
            *serial.entry((e.1, e.2.st_addr)).or_default() += e.2.num_instr_range as u64;
        }
    }
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    let parts = decode_split_ids(&ix, cap.data().unwrap(), &ids, 4, 2, &build, count).unwrap();
    assert!(parts.len() >= 4 * ids.len(), "{} pieces", parts.len());
    let mut joined: HashMap<(u8, u64), u64> = HashMap::new();
    for (id, p) in parts {
        for (a, n) in p {
            *joined.entry((id, a)).or_default() += n;
        }
    }
    assert!(
        joined == serial,
        "{} vs {} instructions",
        joined.values().sum::<u64>(),
        serial.values().sum::<u64>()
    );
}

#[test]
fn a_window_before_the_first_sync_point_is_empty_with_a_note() {
    // Two sources in one buffer: the later-starting one's first sync point
    // is well into the capture.
    let dir = common::temp_dir("index-before-sync");
    let g = generate(&GenOptions {
        seed: 4,
        protocol: GenProtocol::Tc2,
        layout: BufferLayout::Formatted,
        length: 2_000,
    });
    g.spec.write_to(&dir).unwrap();
    let cap = Capture::load(&dir, None).unwrap();
    let ix = cap.index(&IndexOptions::default()).unwrap();
    let (id, first) = ix
        .streams
        .iter()
        .filter_map(|s| Some((s.id, ix.syncs_from(s.id, 0).next()?.index)))
        .max_by_key(|p| p.1)
        .unwrap();
    assert!(first > 16, "first sync at {first}");
    let ids: Vec<String> = ix.streams.iter().map(|s| format!("0x{:02x}", s.id)).collect();
    let decode = |window| {
        decode_window(
            &ix,
            cap.data().unwrap(),
            id,
            window,
            cap.tree(DecodeMode::FullDecode, |_| {}).unwrap(),
        )
    };
    // Ending at or before the first sync point: nothing, and why.
    for (from, to) in [(0, first), (3, 9)] {
        let w = decode(Window::Bytes { from, to }).unwrap();
        assert!(w.elements.is_empty());
        assert_eq!(
            w.note,
            Some(WindowNote::BeforeFirstSync {
                first_sync: Some(first)
            })
        );
        assert_eq!((w.window.from, w.window.end), (from, to));
        assert_eq!(
            w.note.unwrap().to_string(),
            format!(
                "the window ends before the trace ID's first sync point (byte {first}): nothing there can be decoded"
            )
        );
    }
    // Reaching past it: decoded from it, no note.
    let w = decode(Window::Bytes { from: 0, to: first + 1 }).unwrap();
    assert_eq!(w.note, None);
    assert_eq!(w.window.start, first);
    // An ID that is not in the index is an error that says which are.
    let e = decode_window(
        &ix,
        cap.data().unwrap(),
        0x7f,
        Window::Bytes { from: 0, to: 100 },
        cap.tree(DecodeMode::FullDecode, |_| {}).unwrap(),
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "trace ID 0x7f is not in the index (its trace IDs: {})",
            ids.join(", ")
        )),
        "{e}"
    );
}

/// STM: 2 of the 7 ASYNC packets of `stm_only` start in the high nibble
/// of a byte. Both are indexed with where they start, and a split decode
/// from them loses nothing: for 1, 2, 4 and 8 pieces the joined pieces'
/// elements are the serial decode's from the first sync point, exactly
/// (the first piece's decoder adds its NO_SYNC there, as a decode from
/// the start adds one at its first packet). A window from such a sync
/// point is the serial slice exactly.
#[test]
#[ignore = "needs ../shared/corpus/opencsd-1.8.0 (OpenCSD's snapshots); .ci/run runs it with --ignored"]
fn stm_sync_points_in_a_high_nibble_split_and_window_exactly() {
    let cap = Capture::load(&corpus().join("snapshots/stm_only"), None).unwrap();
    let ix = cap.index(&IndexOptions::default()).unwrap();
    let s = ix.stream(0x20).unwrap();
    let syncs: Vec<(u64, u64)> = s.of_kind(EntryKind::Sync).map(|e| (e.index, e.value)).collect();
    assert_eq!(
        syncs,
        [
            (2859, 0),
            (7273, 0),
            (11698, 0),
            (16124, 0),
            (20542, 20541 << 1 | 1),
            (24963, 0),
            (29381, 29380 << 1 | 1)
        ]
    );
    let serial = full_decode(&cap, 0x20);
    let mut want: Vec<(TrcIndex, String)> = vec![(2859, "OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])".into())];
    want.extend(serial.iter().filter(|e| e.0 >= 2859).map(|e| (e.0, e.2.to_string())));
    // full_decode leaves out the end of trace; the last piece has it.
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    for pieces in [1, 2, 4, 8] {
        let parts = decode_split(&ix, cap.data().unwrap(), 0x20, pieces, &build, keep).unwrap();
        let mut joined: Vec<(TrcIndex, String)> = parts.into_iter().flatten().collect();
        let eot = joined.pop().unwrap();
        assert!(eot.1.contains("EO_TRACE"), "{eot:?}");
        assert_eq!(joined.len(), want.len(), "{pieces} pieces");
        if let Some(i) = (0..want.len()).find(|&i| joined[i] != want[i]) {
            panic!(
                "{pieces} pieces: element {i}: {:?} where the serial decode has {:?}",
                joined[i], want[i]
            );
        }
    }
    for (sync, _) in syncs.iter().filter(|s| s.1 != 0) {
        let w = decode_window(
            &ix,
            cap.data().unwrap(),
            0x20,
            Window::Bytes {
                from: *sync,
                to: cap.data().unwrap().len() as u64,
            },
            cap.tree(DecodeMode::FullDecode, |_| {}).unwrap(),
        )
        .unwrap();
        let slice: Vec<Element> = serial.iter().filter(|e| e.0 >= *sync).copied().collect();
        assert!(slice.len() > 700, "{} elements from {sync}", slice.len());
        assert_same(&format!("stm_only from the sync at {sync}"), &w.elements, &slice);
    }
}

/// A small deterministic generator (SplitMix64) for the random windows.
fn next_rand(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Every corpus case, every trace ID with sync points: 20 random byte
/// windows (from the second sync point on: before it a decoder has nothing
/// to start from but the first, see `index::decode`) and the split decode
/// in 1, 2, 4 and 8 pieces give exactly the serial decode's elements (which
/// the conformance gate checks against OpenCSD's listings). The pieces
/// joined are compared from the first sync point; the first piece's
/// decoder reports its NO_SYNC there, where the serial decoder reported it
/// at its first packet.
#[test]
#[ignore = "needs ../shared/corpus/opencsd-1.8.0 (OpenCSD's snapshots); .ci/run runs it with --ignored"]
fn corpus_random_windows_and_pieces_equal_the_serial_decode_exactly() {
    let root = corpus();
    let cases = std::fs::read_to_string(root.join("cases.tsv")).unwrap();
    let mut rng = 0x5eed_u64;
    let mut tally = Tally::default();
    let mut seen = HashSet::new();
    for line in cases.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let mut words = line.split('\t');
        let name = words.next().unwrap();
        let args: Vec<&str> = words.next().unwrap().split_whitespace().collect();
        let dir = args[args.iter().position(|a| *a == "-ss_dir").unwrap() + 1];
        // Several cases list the same snapshot with other options.
        if !seen.insert(dir.to_string()) {
            continue;
        }
        let cap = Capture::load(&root.join(dir), None).unwrap();
        random_windows_and_pieces(name, &cap, &mut rng, &mut tally);
    }
    tally.assert_exact();
    // 18 streams with two sync points or more, 50 with one or more.
    assert_eq!((tally.windows, tally.splits), (360, 200));
}

/// Windows and splits checked, and the differences found.
#[derive(Default)]
struct Tally {
    windows: usize,
    splits: usize,
    failures: Vec<String>,
}

impl Tally {
    fn assert_exact(&self) {
        assert!(
            self.failures.is_empty(),
            "{} differ:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// For every stream of `cap`: 20 random byte windows starting at or after
/// its second sync point, and its split into 1, 2, 4 and 8 pieces, each
/// compared exactly with the serial decode.
fn random_windows_and_pieces(name: &str, cap: &Capture, rng: &mut u64, tally: &mut Tally) {
    let ix = cap.index(&IndexOptions::default()).unwrap();
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    for s in &ix.streams {
        let syncs: Vec<TrcIndex> = s.of_kind(EntryKind::Sync).map(|e| e.index).collect();
        if syncs.is_empty() {
            continue;
        }
        let serial = full_decode(cap, s.id);
        let text = |v: &[Element]| -> Vec<(TrcIndex, String)> { v.iter().map(|e| (e.0, e.2.to_string())).collect() };
        let mut check = |what: String, got: Vec<(TrcIndex, String)>, want: Vec<(TrcIndex, String)>| {
            if got != want {
                let i = (0..got.len().min(want.len()))
                    .find(|&i| got[i] != want[i])
                    .unwrap_or(got.len().min(want.len()));
                tally.failures.push(format!(
                    "{name} ID {:#x} {what}: {} vs {} elements; first difference at {i}: {:?} vs {:?}",
                    s.id,
                    got.len(),
                    want.len(),
                    got.get(i),
                    want.get(i)
                ));
            }
        };
        if syncs.len() >= 2 {
            let end = ix.indexed.end;
            for _ in 0..20 {
                let from = syncs[1] + next_rand(rng) % (end - syncs[1]);
                let to = from + 1 + next_rand(rng) % (end - from);
                let w = decode_window(
                    &ix,
                    cap.data().unwrap(),
                    s.id,
                    Window::Bytes { from, to },
                    build().unwrap(),
                )
                .unwrap();
                let want: Vec<Element> = serial.iter().filter(|e| e.0 >= from && e.0 < to).copied().collect();
                check(format!("window {from}..{to}"), text(&w.elements), text(&want));
                tally.windows += 1;
            }
        }
        let first = syncs[0];
        let mut want = text(&serial.iter().filter(|e| e.0 >= first).copied().collect::<Vec<_>>());
        if serial
            .first()
            .is_some_and(|e| e.2.elem_type == ElemType::NoSync && e.0 < first)
        {
            want.insert(0, (first, serial[0].2.to_string()));
        }
        for pieces in [1, 2, 4, 8] {
            let parts = decode_split(&ix, cap.data().unwrap(), s.id, pieces, &build, keep).unwrap();
            let got: Vec<(TrcIndex, String)> = parts
                .into_iter()
                .flatten()
                .filter(|(_, t)| !t.contains("OCSD_GEN_TRC_ELEM_EO_TRACE"))
                .collect();
            check(format!("{pieces} pieces"), got, want.clone());
            tally.splits += 1;
        }
    }
}

/// The property test: generated captures (formatted and unformatted, PTMs
/// and ETMv3s interleaved as on a TC2, 16 interleaved ETMv4 sources with
/// timestamps, cycle counts and return stacks), 20 random windows per
/// stream and 1, 2, 4 and 8 pieces, all exactly the serial decode. Lone
/// PTM and ETMv3 sources with VMIDs given long before a window check the
/// index's resume state (the VMID, which their sync points do not repeat).
#[test]
fn generated_random_windows_and_pieces_equal_the_serial_decode_exactly() {
    use coresight_generator::etmv4::{Choice, Etmv4Options};
    let mut rng = 0xc0ffee_u64;
    let mut tally = Tally::default();
    // Seeds 1 to 3 of each, and 4 to 6 of the second PTM (seeds whose
    // configuration has VMIDs).
    let protocols = [
        GenProtocol::Etmv4,
        GenProtocol::Etmv4M,
        GenProtocol::Ete(Default::default()),
        GenProtocol::Ptm(Default::default()),
        // Context IDs and VMIDs: a VMID lasts from its packet on, past the
        // sync points, which do not repeat it.
        GenProtocol::Ptm(coresight_generator::ptm::PtmGenOptions {
            context_id: Some(true),
            ..Default::default()
        }),
        GenProtocol::Etmv3(Default::default()),
        GenProtocol::Tc2,
        GenProtocol::Stm,
        GenProtocol::Itm,
    ];
    for (i, p) in protocols.into_iter().enumerate() {
        let seeds = if i == 4 { 4..=6u64 } else { 1..=3u64 };
        for seed in seeds {
            let layout = if seed % 3 == 2 && !matches!(p, GenProtocol::Tc2) {
                BufferLayout::Unformatted
            } else {
                BufferLayout::Formatted
            };
            let g = generate(&GenOptions {
                seed,
                protocol: p,
                layout,
                length: 400,
            });
            let name = format!("{}-{seed}", p.name());
            let dir = common::temp_dir(&format!("index-prop-{name}"));
            g.spec.write_to(&dir).unwrap();
            random_windows_and_pieces(&name, &Capture::load(&dir, None).unwrap(), &mut rng, &mut tally);
        }
    }
    let o = Etmv4Options::default()
        .with("ts", Choice::On)
        .with("cc", Choice::On)
        .with("rs", Choice::On)
        .with("exc", Choice::On);
    for seed in 1..=2u64 {
        let (g, _) = coresight_generator::interleaved::generate(seed, 16, 200, &o).unwrap();
        let name = format!("etmv4x16-{seed}");
        let dir = common::temp_dir(&format!("index-prop-{name}"));
        g.spec.write_to(&dir).unwrap();
        random_windows_and_pieces(&name, &Capture::load(&dir, None).unwrap(), &mut rng, &mut tally);
    }
    tally.assert_exact();
    assert!(
        tally.windows >= 200 && tally.splits >= 100,
        "{} windows, {} splits",
        tally.windows,
        tally.splits
    );
}

#[test]
#[ignore = "needs ../shared/corpus/opencsd-1.8.0 (OpenCSD's snapshots); .ci/run runs it with --ignored"]
fn corpus_indexes_written_as_built_equal_those_saved_from_memory() {
    // Every corpus snapshot's index written as it is built (its lists set
    // aside in temporary files) is the file the index held in memory
    // saves: a DSTREAM capture's frame syncs included.
    let root = corpus();
    let cases = std::fs::read_to_string(root.join("cases.tsv")).unwrap();
    let mut dirs: Vec<&str> = cases
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.position(|a| a == "-ss_dir")?;
            w.next()
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("index-to-file");
    std::fs::create_dir_all(&out).unwrap();
    let mut frame_syncs = 0;
    for (n, dir) in dirs.iter().enumerate() {
        let c = Capture::load(&root.join(dir), None).unwrap();
        let held = c.index(&IndexOptions::default()).unwrap();
        frame_syncs += held.source.as_ref().map_or(0, |s| s.frame_syncs.len());
        let path = out.join(format!("{n}.csidx"));
        let w = c.index_to_file(&IndexOptions::default(), &path).unwrap();
        assert!(std::fs::read(&path).unwrap() == to_bytes(&held), "{dir}");
        assert_eq!(w.indexed, held.indexed, "{dir}");
    }
    assert!(dirs.len() >= 20, "only {} snapshots", dirs.len());
    assert!(frame_syncs > 0, "no corpus capture with frame syncs");
    let left = std::fs::read_dir(&out).unwrap().filter(|e| {
        e.as_ref()
            .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".part"))
    });
    assert_eq!(left.count(), 0, "temporary files left");
}
