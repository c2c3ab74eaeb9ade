//! Listing throughput: `cargo bench -p coresight-tools --bench listing`.
//!
//! `trc_pkt_lister -decode` (packets and elements as text, to a file) run
//! in-process on a generated snapshot of each protocol, and on the OpenCSD
//! corpus's `bugfix-exact-match` (265 MB of listing) when `../shared` is
//! beside the project; each with `-threads 1` (decode and formatting on
//! one thread) and `-threads 2` (formatting handed to another thread).
//! The throughput is bytes of listing written per second.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use coresight_decode::decoder::DecoderRegistry;
use coresight_decode::shared::shared;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};
use coresight_tools::lister;
use divan::Bencher;
use divan::counter::BytesCount;

fn main() {
    if no_shared() {
        eprintln!("../shared is not beside the project: the bugfix_exact_match benches are (ignored)");
    }
    divan::main();
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// Lists `dir` to `out` with `threads`; returns the listing's size.
fn list(dir: &Path, threads: usize, out: &Path) -> u64 {
    let argv: Vec<String> = [
        "trc_pkt_lister",
        "-ss_dir",
        dir.to_str().unwrap(),
        "-decode",
        "-no_time_print",
        "-threads",
        &threads.to_string(),
        "-logfilename",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let log = lister::output_for_args(&argv[1..]).unwrap();
    let status = lister::run_with_registry_fn(&argv, &|_| None, shared(log), || Arc::new(DecoderRegistry::builtin()));
    assert_eq!(status, 0);
    std::fs::metadata(out).unwrap().len()
}

fn generated(protocol: &str) -> PathBuf {
    let dir = tmp().join(format!("listing-bench-{protocol}"));
    if !dir.join("snapshot.ini").exists() {
        let opts = GenOptions {
            seed: 7,
            protocol: GenProtocol::from_name(protocol).unwrap(),
            layout: BufferLayout::Formatted,
            length: 100_000,
        };
        generate(&opts).spec.write_to(&dir).unwrap();
    }
    dir
}

fn bench_listing(b: Bencher, dir: &Path, threads: usize) {
    let out = tmp().join(format!("listing-bench-{threads}.ppl"));
    let size = list(dir, threads, &out);
    b.counter(BytesCount::new(size)).bench(|| list(dir, threads, &out));
}

#[divan::bench(args = ["etmv4", "ete", "ptm", "etmv3", "stm", "itm"], consts = [1, 2], sample_count = 10)]
fn generated_listing<const THREADS: usize>(b: Bencher, protocol: &str) {
    let dir = generated(protocol);
    bench_listing(b, &dir, THREADS);
}

/// OpenCSD's `bugfix-exact-match`, in `../shared` beside the project.
const BUGFIX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/corpus/opencsd-1.8.0/snapshots/bugfix-exact-match"
);

/// True when `../shared` is not there: `bugfix_exact_match` is then shown
/// as `(ignored)`; with `-- --include-ignored` it fails saying why.
fn no_shared() -> bool {
    !Path::new(BUGFIX).is_dir()
}

#[divan::bench(consts = [1, 2], sample_count = 5, ignore = no_shared())]
fn bugfix_exact_match<const THREADS: usize>(b: Bencher) {
    assert!(!no_shared(), "{BUGFIX}: not present; this bench needs ../shared");
    bench_listing(b, Path::new(BUGFIX), THREADS);
}
