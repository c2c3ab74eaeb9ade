//! Trace indexes: `cargo bench --bench index`.
//!
//! Index build throughput (packet level, no memory walk) next to full
//! decode throughput, on `bugfix-exact-match` (when `../shared` is beside
//! the project) and on a generated multi-megabyte single-ID ETMv4
//! capture; and that capture's one stream decoded serially and split at
//! indexed sync points over 2 threads, and `bugfix-exact-match` (whose
//! trace is all on one ID) the same way. Loading and index building for
//! the splits are outside the measured time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::elem::{ElemType, TraceElement};
use coresight_generator::{generate, BufferLayout, GenOptions, GenProtocol};
use coresight_decode::index::build::Capture;
use coresight_decode::index::decode::Element;
use coresight_decode::index::{decode_split, decode_split_ids, CaptureIndex, IndexOptions};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use divan::counter::BytesCount;
use divan::Bencher;

fn main() {
    divan::main();
}

struct Count(u64);

impl TrcGenElemIn for Count {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0 += elem.num_instr_range as u64 + 1;
        DatapathResp::Cont
    }
}

fn full_decode(cap: &Capture) {
    let mut t = cap.tree(DecodeMode::FullDecode, |_| {}).unwrap();
    t.set_gen_elem_out(Box::new(Count(0)));
    let mut at = 0;
    while at < cap.data.len() {
        let (r, used) = t.trace_data_in(DatapathOp::Data, at as TrcIndex, &cap.data[at..]);
        assert!(!r.is_fatal());
        at += used;
    }
    t.trace_data_in(DatapathOp::Eot, 0, &[]);
}

fn bugfix() -> Option<Capture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/opencsd-1.8.0/snapshots/bugfix-exact-match");
    if !dir.is_dir() {
        eprintln!("bugfix-exact-match: ../shared not present, nothing measured");
        return None;
    }
    Some(Capture::load(&dir, None).unwrap())
}

/// A generated single-ID ETMv4 capture of several megabytes, with its
/// index.
fn long_etmv4() -> &'static (Capture, CaptureIndex) {
    static LONG: OnceLock<(Capture, CaptureIndex)> = OnceLock::new();
    LONG.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-index-etmv4");
        let _ = std::fs::remove_dir_all(&dir);
        let opts = GenOptions { seed: 5, protocol: GenProtocol::Etmv4, layout: BufferLayout::Formatted, length: 600_000 };
        generate(&opts).spec.write_to(&dir).unwrap();
        let cap = Capture::load(&dir, None).unwrap();
        let ix = cap.index(&IndexOptions::default()).unwrap();
        (cap, ix)
    })
}

#[divan::bench(sample_count = 10)]
fn bugfix_full_decode(bencher: Bencher) {
    let Some(cap) = bugfix() else { return };
    bencher.counter(BytesCount::new(cap.data.len())).bench_local(|| full_decode(&cap));
}

#[divan::bench(sample_count = 10)]
fn bugfix_index_build(bencher: Bencher) {
    let Some(cap) = bugfix() else { return };
    bencher.counter(BytesCount::new(cap.data.len())).bench_local(|| cap.index(&IndexOptions::default()).unwrap());
}

#[divan::bench(sample_count = 10)]
fn etmv4_long_full_decode(bencher: Bencher) {
    let (cap, _) = long_etmv4();
    bencher.counter(BytesCount::new(cap.data.len())).bench_local(|| full_decode(cap));
}

#[divan::bench(sample_count = 10)]
fn etmv4_long_index_build(bencher: Bencher) {
    let (cap, _) = long_etmv4();
    bencher.counter(BytesCount::new(cap.data.len())).bench_local(|| cap.index(&IndexOptions::default()).unwrap());
}

/// The one stream in `pieces` pieces split at indexed sync points, each on
/// its own thread, instructions counted per range address and joined.
#[divan::bench(args = [1, 2], sample_count = 10)]
fn etmv4_long_split(bencher: Bencher, pieces: usize) {
    let (cap, ix) = long_etmv4();
    let id = ix.streams[0].id;
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    let count = |acc: &mut HashMap<u64, u64>, e: &Element| {
        if e.2.elem_type == ElemType::InstrRange {
            *acc.entry(e.2.st_addr).or_default() += e.2.num_instr_range as u64;
        }
    };
    bencher.counter(BytesCount::new(cap.data.len())).bench_local(|| {
        let parts = decode_split(ix, &cap.data, id, pieces, &build, &count).unwrap();
        parts.into_iter().map(|p| p.len()).sum::<usize>()
    });
}

/// bugfix-exact-match (one trace ID with trace) decoded on `threads`
/// threads, its stream split at indexed sync points (index built outside
/// the measured time); each element counted as `bugfix_full_decode`'s
/// sink counts it, so the figures compare with that serial decode.
#[divan::bench(args = [1, 2], sample_count = 10)]
fn bugfix_split(bencher: Bencher, threads: usize) {
    let Some(cap) = bugfix() else { return };
    let ix = cap.index(&IndexOptions::default()).unwrap();
    let ids: Vec<u8> = ix.streams.iter().map(|s| s.id).collect();
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    let count = |acc: &mut u64, e: &Element| *acc += e.2.num_instr_range as u64 + 1;
    bencher.counter(BytesCount::new(cap.data.len())).bench_local(|| {
        let parts = decode_split_ids(&ix, &cap.data, &ids, threads, threads, &build, &count).unwrap();
        parts.iter().map(|p| p.1).sum::<u64>()
    });
}
