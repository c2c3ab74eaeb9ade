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
use coresight_decode::elem::TraceElement;
use coresight_decode::generator::{generate, BufferLayout, GenOptions, GenProtocol};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::snapshot::Snapshot;
use coresight_decode::tree::DecodeTree;
use divan::counter::BytesCount;
use divan::Bencher;

fn main() {
    divan::main();
}

/// Counts elements, as a client that looks at each would.
struct Count(u64);

impl TrcGenElemIn for Count {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0 += elem.num_instr_range as u64 + 1;
        DatapathResp::Cont
    }
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
    let data = snapshot.buffer_paths(&info).iter().flat_map(|p| std::fs::read(p).unwrap()).collect();
    Loaded { snapshot, buffer, data }
}

fn tree(l: &Loaded) -> DecodeTree {
    let mut t = l.snapshot.build_tree(&l.buffer, DecodeMode::FullDecode, |_| {}).unwrap().unwrap();
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

#[divan::bench(sample_count = 10)]
fn bugfix_exact_match(bencher: Bencher) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/opencsd-1.8.0/snapshots/bugfix-exact-match");
    if !dir.is_dir() {
        eprintln!("bugfix_exact_match: ../shared not present, nothing measured");
        return;
    }
    let l = load(&dir);
    bencher
        .counter(BytesCount::new(l.data.len()))
        .with_inputs(|| tree(&l))
        .bench_local_values(|t| decode(t, &l.data));
}
