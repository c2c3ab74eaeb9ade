//! Decode throughput: `cargo bench --bench decode`.
//!
//! Full decode (packets to generic elements, memory walked) of a snapshot
//! made by the generator for each protocol, and of the OpenCSD corpus's
//! `bugfix-exact-match` (1 MiB of ETMv4 from six cores) when `../shared`
//! is beside the project. Loading the snapshot and building the tree are
//! outside the measured time; the throughput is bytes of trace per
//! second.

use std::path::{Path, PathBuf};

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::TrcDataIn;
use coresight_decode::parallel::{ParallelOptions, ParallelSink, WorkerSetup, decode_parallel};
use coresight_decode::snapshot::Snapshot;
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

/// A snapshot loaded with its first buffer's bytes.
struct Loaded {
    snapshot: Snapshot,
    buffer: String,
    data: Vec<u8>,
}

fn load(dir: &Path) -> Loaded {
    let snapshot = Snapshot::load(dir).unwrap();
    let buffer = snapshot.buffer_names()[0].to_string();
    let info = snapshot.buffer(&buffer).unwrap().clone();
    let data = snapshot
        .buffer_paths(&info)
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect();
    Loaded { snapshot, buffer, data }
}

fn tree(l: &Loaded) -> DecodeTree {
    let mut t = l
        .snapshot
        .build_tree(&l.buffer, DecodeMode::FullDecode, |_| {})
        .unwrap();
    t.set_gen_elem_out(Box::new(Count(0)));
    t
}

fn decode(mut t: DecodeTree, data: &[u8]) -> DecodeTree {
    let mut at = 0;
    while at < data.len() {
        let (r, used) = t.trace_data_in(DatapathOp::Data, at as TrcIndex, &data[at..]);
        assert!(!r.is_fatal());
        at += used;
    }
    t.trace_data_in(DatapathOp::Eot, 0, &[]);
    t
}

fn generated(protocol: &str) -> Loaded {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-{protocol}"));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = GenOptions {
        seed: 7,
        protocol: GenProtocol::from_name(protocol).unwrap(),
        layout: BufferLayout::Formatted,
        length: 20_000,
    };
    generate(&opts).spec.write_to(&dir).unwrap();
    load(&dir)
}

#[divan::bench(args = ["etmv4", "ete", "ptm", "etmv3", "stm", "itm"], sample_count = 20)]
fn generated_snapshot(bencher: Bencher, protocol: &str) {
    let l = generated(protocol);
    bencher
        .counter(BytesCount::new(l.data.len()))
        .with_inputs(|| tree(&l))
        .bench_local_values(|t| decode(t, &l.data));
}

fn bugfix() -> Loaded {
    load(bugfix_dir())
}

/// bugfix-exact-match on this thread.
#[divan::bench(sample_count = 10, ignore = no_shared())]
fn bugfix_exact_match(bencher: Bencher) {
    let l = bugfix();
    bencher
        .counter(BytesCount::new(l.data.len()))
        .with_inputs(|| tree(&l))
        .bench_local_values(|t| decode(t, &l.data));
}

/// Building the tree a worker decodes with (what the parallel decode does
/// on each worker before it starts).
#[divan::bench(sample_count = 10, ignore = no_shared())]
fn bugfix_exact_match_tree_build(bencher: Bencher) {
    let l = bugfix();
    bencher.bench_local(|| tree(&l));
}

/// bugfix-exact-match with its six trace IDs shared among worker threads:
/// elements counted on the workers (`deliver_elements: false`), or
/// delivered in the serial order to a counting sink on this thread.
#[divan::bench(args = [(1, false), (2, false), (2, true)], sample_count = 10, ignore = no_shared())]
fn bugfix_exact_match_parallel(bencher: Bencher, (threads, deliver): (usize, bool)) {
    let l = bugfix();
    parallel(bencher, &l, threads, deliver);
}

/// Measures the parallel decode of `l` on `threads` workers.
fn parallel(bencher: Bencher, l: &Loaded, threads: usize, deliver: bool) {
    let ids: Vec<u8> = tree(l).elements().map(|(id, _)| id).collect();
    let format = tree(l).format();
    let build = |_: &WorkerSetup| Ok(tree(l));
    bencher.counter(BytesCount::new(l.data.len())).bench_local(|| {
        let mut sink = CountSink(0);
        let options = ParallelOptions {
            threads,
            deliver_elements: deliver,
            ..ParallelOptions::default()
        };
        let o = decode_parallel(options, format, &ids, &mut l.data.as_slice(), &build, &mut sink).unwrap();
        assert!(!o.resp.is_fatal());
        sink.0
    });
}

/// A generated capture of three cores (PTM and two ETMv3) in one
/// formatted buffer, decoded with its trace IDs shared among threads.
#[divan::bench(args = [(1, false), (2, false), (2, true)], sample_count = 10)]
fn three_cores_parallel(bencher: Bencher, (threads, deliver): (usize, bool)) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-three-cores");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = GenOptions {
        seed: 7,
        protocol: GenProtocol::Tc2,
        layout: BufferLayout::Formatted,
        length: 60_000,
    };
    generate(&opts).spec.write_to(&dir).unwrap();
    parallel(bencher, &load(&dir), threads, deliver);
}

struct CountSink(u64);

impl ParallelSink for CountSink {
    fn text(&mut self, _text: &str) {}
    fn element(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0 += elem.num_instr_range as u64 + 1;
        DatapathResp::Cont
    }
}

/// The same generated snapshots through the pull API (`Decoder::decode`,
/// typed elements out of a bounded queue): compare with
/// `generated_snapshot` for the cost of the iterator over the push sink.
#[divan::bench(args = ["etmv4", "stm"], sample_count = 20)]
fn generated_snapshot_pull(bencher: Bencher, protocol: &str) {
    use coresight_decode::{Decoder, Element};
    let l = generated(protocol);
    bencher
        .counter(BytesCount::new(l.data.len()))
        .with_inputs(|| Decoder::new(tree(&l)))
        .bench_local_values(|mut d| {
            let mut n = 0u64;
            for item in d.decode(&l.data) {
                n += match item.unwrap().element {
                    Element::InstrRange { num_instr, .. } => num_instr as u64 + 1,
                    _ => 1,
                };
            }
            (d, n)
        });
}
