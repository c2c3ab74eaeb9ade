//! Trace indexes: `cargo bench --bench index`.
//!
//! Index build throughput (packet level, no memory walk) next to full
//! decode throughput, on `bugfix-exact-match` (when `../shared` is beside
//! the project) and on a generated multi-megabyte single-ID ETMv4
//! capture; and that capture's one stream decoded serially and split at
//! indexed sync points over 1 and 2 threads, and `bugfix-exact-match`
//! (whose trace is all on one ID) the same way.
//!
//! The decodes measure decoding alone: loading is outside the measured
//! time. For the serial decodes (`*_full_decode`) that is reading the
//! snapshot and building the decode tree; for the splits, reading the
//! snapshot, building the index and building one tree per piece. Dropping
//! the trees after a decode is inside. The serial and the split decodes
//! hand their elements to the same kind of counter, so their times
//! compare. On a machine shared with other work, two threads get two
//! cores only when it is otherwise idle: the `bugfix` benches take 30
//! samples, and their fastest and median are the figures to compare.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use coresight_decode::datapath::{DatapathOp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::index::Capture;
use coresight_decode::index::{CaptureIndex, IndexOptions, Piece, decode_pieces};
use coresight_decode::interfaces::TrcDataIn;
use coresight_decode::tree::DecodeTree;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};
use divan::Bencher;
use divan::counter::BytesCount;

mod common;
use common::{Count, bugfix_dir, no_shared};

fn main() {
    common::say_if_no_shared();
    divan::main();
}

fn tree(cap: &Capture) -> DecodeTree {
    cap.tree(DecodeMode::FullDecode, |_| {}).unwrap()
}

/// The serial decode of the whole capture with `t`, a fresh tree.
fn full_decode(cap: &Capture, mut t: DecodeTree) {
    t.set_gen_elem_out(Box::new(Count(0)));
    let mut at = 0;
    while at < cap.data().unwrap().len() {
        let (r, used) = t.trace_data_in(DatapathOp::Data, at as TrcIndex, &cap.data().unwrap()[at..]);
        assert!(!r.is_fatal());
        at += used;
    }
    t.trace_data_in(DatapathOp::Eot, 0, &[]);
}

fn bugfix() -> Capture {
    Capture::load(bugfix_dir(), None).unwrap()
}

/// A generated single-ID ETMv4 capture of several megabytes, with its
/// index.
fn long_etmv4() -> &'static (Capture, CaptureIndex) {
    static LONG: OnceLock<(Capture, CaptureIndex)> = OnceLock::new();
    LONG.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-index-etmv4");
        let _ = std::fs::remove_dir_all(&dir);
        let opts = GenOptions {
            seed: 5,
            protocol: GenProtocol::Etmv4,
            layout: BufferLayout::Formatted,
            length: 600_000,
        };
        generate(&opts).spec.write_to(&dir).unwrap();
        let cap = Capture::load(&dir, None).unwrap();
        let ix = cap.index(&IndexOptions::default()).unwrap();
        (cap, ix)
    })
}

#[divan::bench(sample_count = 30, ignore = no_shared())]
fn bugfix_full_decode(bencher: Bencher) {
    let cap = bugfix();
    bencher
        .counter(BytesCount::new(cap.data().unwrap().len()))
        .with_inputs(|| tree(&cap))
        .bench_local_values(|t| full_decode(&cap, t));
}

#[divan::bench(sample_count = 10, ignore = no_shared())]
fn bugfix_index_build(bencher: Bencher) {
    let cap = bugfix();
    bencher
        .counter(BytesCount::new(cap.data().unwrap().len()))
        .bench_local(|| cap.index(&IndexOptions::default()).unwrap());
}

#[divan::bench(sample_count = 10)]
fn etmv4_long_full_decode(bencher: Bencher) {
    let (cap, _) = long_etmv4();
    bencher
        .counter(BytesCount::new(cap.data().unwrap().len()))
        .with_inputs(|| tree(cap))
        .bench_local_values(|t| full_decode(cap, t));
}

#[divan::bench(sample_count = 10)]
fn etmv4_long_index_build(bencher: Bencher) {
    let (cap, _) = long_etmv4();
    bencher
        .counter(BytesCount::new(cap.data().unwrap().len()))
        .bench_local(|| cap.index(&IndexOptions::default()).unwrap());
}

/// Instructions per range address, as a split decode's fold.
fn per_address(acc: &mut HashMap<u64, u64>, _index: TrcIndex, e: &TraceElement) {
    if e.elem_type == ElemType::InstrRange {
        *acc.entry(e.st_addr).or_default() += e.num_instr_range as u64;
    }
}

/// `pieces` decoded on `threads` threads, with trees built (one per
/// piece) outside the measured time.
fn split<R, F>(
    bencher: Bencher,
    cap: &Capture,
    ix: &CaptureIndex,
    pieces: &[Piece],
    threads: usize,
    fold: F,
    total: fn(Vec<R>) -> u64,
) where
    R: Default + Send + 'static,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync + Clone + 'static,
{
    bencher
        .counter(BytesCount::new(cap.data().unwrap().len()))
        .with_inputs(|| pieces.iter().map(|_| tree(cap)).collect::<Vec<_>>())
        .bench_local_values(|trees| {
            total(decode_pieces(ix, cap.data().unwrap(), pieces, trees, threads, fold.clone()).unwrap())
        });
}

/// The one stream in `threads` pieces split at indexed sync points, each
/// on its own thread, instructions counted per range address (the
/// pieces' maps are not joined).
#[divan::bench(args = [1, 2], sample_count = 10)]
fn etmv4_long_split(bencher: Bencher, threads: usize) {
    let (cap, ix) = long_etmv4();
    let pieces = ix.split_pieces(ix.streams[0].id, threads);
    split(bencher, cap, ix, &pieces, threads, per_address, |parts| {
        parts.iter().map(|p| p.len() as u64).sum()
    });
}

/// bugfix-exact-match (one trace ID with trace) decoded on `threads`
/// threads, each ID's stream split in `threads` pieces at indexed sync
/// points; each element counted as `bugfix_full_decode`'s sink counts it,
/// so the figures compare with that serial decode.
#[divan::bench(args = [1, 2], sample_count = 30, ignore = no_shared())]
fn bugfix_split(bencher: Bencher, threads: usize) {
    let cap = bugfix();
    let ix = cap.index(&IndexOptions::default()).unwrap();
    let pieces: Vec<Piece> = ix.streams.iter().flat_map(|s| ix.split_pieces(s.id, threads)).collect();
    let count = |acc: &mut u64, _: TrcIndex, e: &TraceElement| *acc += e.num_instr_range as u64 + 1;
    split(bencher, &cap, &ix, &pieces, threads, count, |parts| parts.iter().sum());
}
