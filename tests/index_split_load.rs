//! An index loaded for one split decode (`Capture::load_index_for_split`)
//! keeps only the entries the split reads, and the split answers as with
//! the full index: the same pieces, each started, resumed and stopped at
//! the same places, and the same elements decoded, for every protocol the
//! generator writes and many piece counts.

mod common;

use coresight_decode::datapath::TrcIndex;
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::TraceElement;
use coresight_decode::index::{Capture, CaptureIndex, IndexOptions, decode_split_ids_partial};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};

/// Every piece's elements, in order.
fn keep(acc: &mut Vec<(TrcIndex, String)>, index: TrcIndex, e: &TraceElement) {
    acc.push((index, e.to_string()));
}

/// What a piece's decode reads of the index, piece by piece.
fn piece_reads(ix: &CaptureIndex, id: u8, pieces: usize) -> Vec<String> {
    ix.split_pieces(id, pieces)
        .iter()
        .map(|p| {
            let warm = ix.warm_start(id, p.start);
            let feed_end = ix.syncs_from(id, p.end).find(|e| e.index > p.end).map(|e| e.index);
            format!(
                "{p:?} warm {warm} resume {:?} first {:?} at start {:?} feed end {feed_end:?}",
                ix.resume_state(id, warm),
                ix.syncs_from(id, 0).next(),
                ix.syncs_from(id, p.start).next(),
            )
        })
        .collect()
}

#[test]
fn a_split_decode_answers_the_same_from_the_thin_index() {
    let (mut thinned, mut split, mut merged) = (0, 0, false);
    for (protocol, seed, length) in [
        ("etmv4", 5, 60_000),
        ("ete", 6, 20_000),
        ("tc2", 2, 20_000),
        ("ptm", 3, 20_000),
        ("etmv3", 4, 20_000),
        ("stm", 4, 3_000),
        ("itm", 7, 3_000),
    ] {
        let dir = common::temp_dir(&format!("split-load-{protocol}-{seed}"));
        generate(&GenOptions {
            seed,
            protocol: GenProtocol::from_name(protocol).unwrap(),
            layout: BufferLayout::Formatted,
            length,
        })
        .spec
        .write_to(&dir)
        .unwrap();
        let cap = Capture::load(&dir, None).unwrap();
        let path = dir.join("trace.csidx");
        // Blocks of 16 bytes: more than the thin index keeps, so it merges
        // them (its decoders start deformatting further back).
        let opts = IndexOptions {
            granularity: 16,
            ..IndexOptions::default()
        };
        cap.index_to_file(&opts, &path).unwrap();
        let full = cap.load_index(&path).unwrap();
        let blocks = full.source.as_ref().map_or(0, |s| s.blocks.len());
        let ids: Vec<u8> = full
            .streams
            .iter()
            .filter(|s| s.counts().syncs() > 0)
            .map(|s| s.id)
            .collect();
        assert!(!ids.is_empty(), "{protocol}: no stream with a sync point");
        let build = || cap.tree(DecodeMode::FullDecode, |_| {});
        let data = cap.data().unwrap();
        for pieces in [1, 2, 3, 5, 8, 13, 64] {
            let thin = cap.load_index_for_split(&path, pieces).unwrap();
            let kept = thin.source.as_ref().map_or(0, |s| s.blocks.len());
            assert!(kept <= 4096, "{protocol}: {kept} source blocks kept");
            merged |= kept < blocks;
            for &id in &ids {
                let (f, t) = (full.stream(id).unwrap(), thin.stream(id).unwrap());
                assert!(
                    t.entries.len() <= 10 * pieces + 10,
                    "{protocol} 0x{id:02x}: {} entries kept",
                    t.entries.len()
                );
                thinned += f.entries.len() - t.entries.len();
                split += full.split_pieces(id, pieces).len();
                assert_eq!(
                    piece_reads(&thin, id, pieces),
                    piece_reads(&full, id, pieces),
                    "{protocol} 0x{id:02x}, {pieces} pieces"
                );
            }
            let want = decode_split_ids_partial(&full, data, &ids, pieces, 2, &build, keep).unwrap();
            let got = decode_split_ids_partial(&thin, data, &ids, pieces, 2, &build, keep).unwrap();
            assert_eq!(got.len(), want.len(), "{protocol}, {pieces} pieces");
            for (g, w) in got.iter().zip(&want) {
                assert!(g.0 == w.0 && g.1 == w.1, "{protocol}, {pieces} pieces: elements differ");
                assert_eq!(g.2.as_ref().map(|e| e.to_string()), w.2.as_ref().map(|e| e.to_string()));
            }
        }
    }
    assert!(thinned > 100_000, "only {thinned} entries left out");
    assert!(split > 500, "only {split} pieces in all");
    assert!(merged, "no capture's source blocks merged");
}

/// A damaged index file is refused by the thin loader as by the full one.
#[test]
fn a_damaged_index_is_refused_by_the_thin_loader_with_the_same_words() {
    let dir = common::temp_dir("split-load-damaged");
    generate(&GenOptions {
        seed: 1,
        protocol: GenProtocol::Etmv4,
        layout: BufferLayout::Formatted,
        length: 500,
    })
    .spec
    .write_to(&dir)
    .unwrap();
    let cap = Capture::load(&dir, None).unwrap();
    let path = dir.join("trace.csidx");
    cap.index_to_file(&IndexOptions::default(), &path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let mut flipped = good.clone();
    flipped[60] ^= 0x40;
    for (what, bytes) in [("flipped", flipped), ("truncated", good[..good.len() - 3].to_vec())] {
        std::fs::write(&path, &bytes).unwrap();
        let full = cap.load_index(&path).unwrap_err().to_string();
        let thin = cap.load_index_for_split(&path, 4).unwrap_err().to_string();
        assert_eq!(thin, full, "{what}");
        assert!(full.contains("checksum"), "{what}: {full}");
    }
}
