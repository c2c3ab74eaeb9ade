//! The HTML report against plain decode, on `bugfix-exact-match` (1 MiB
//! of ETMv4 from OpenCSD's tests, when ../shared is beside the
//! repository) and on a generated ETMv4 capture of the same size (always).
//!
//! `cargo bench -p coresight-viz --bench report`

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use coresight_decode::decoder::DecoderRegistry;
use coresight_decode::memory::MemAccMapper;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};
use coresight_viz::elements::ElementStacks;
use coresight_viz::input::{SnapshotInput, decode_snapshot};
use coresight_viz::profile::{Limits, Profile};
use coresight_viz::report::{ReportOptions, write_report};
use coresight_viz::symbols::Symbolizer;
use divan::Bencher;
use divan::counter::BytesCount;

fn main() {
    divan::main();
}

fn bugfix() -> Option<PathBuf> {
    let d =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/opencsd-1.8.0/snapshots/bugfix-exact-match");
    d.is_dir().then_some(d)
}

/// A generated single-source ETMv4 snapshot of about 1 MiB.
fn generated() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-viz-etmv4");
        let _ = std::fs::remove_dir_all(&dir);
        let g = generate(&GenOptions {
            seed: 5,
            protocol: GenProtocol::Etmv4,
            layout: BufferLayout::Formatted,
            length: 120_000,
        });
        g.spec.write_to(&dir).unwrap();
        dir
    })
}

fn trace_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name().to_string_lossy().ends_with(".bin") && e.file_name().to_string_lossy().contains("trace")
        })
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

fn decode(dir: &Path) -> (Profile, coresight_viz::input::Capture, coresight_viz::elements::Counts) {
    let mut s = ElementStacks::new(Symbolizer::new(), Limits::default());
    let map = |_: &mut MemAccMapper| Ok(());
    let cap = decode_snapshot(
        SnapshotInput {
            dir,
            source: None,
            raw_buffer: None,
            registry: std::sync::Arc::new(DecoderRegistry::builtin()),
            map_images: &map,
            progress: &mut |_, _| {},
        },
        &mut s,
    )
    .unwrap();
    (s.profile, cap, s.counts)
}

/// Decode into call stacks, then the report.
fn report(dir: &Path) -> usize {
    let (p, cap, counts) = decode(dir);
    let mut out = Vec::new();
    write_report(&p, &cap, Some(&counts), &ReportOptions::default(), &mut out).unwrap();
    out.len()
}

#[divan::bench(sample_count = 10)]
fn bugfix_call_stacks(b: Bencher) {
    let Some(d) = bugfix() else { return };
    b.counter(BytesCount::new(trace_bytes(&d))).bench(|| decode(&d));
}

#[divan::bench(sample_count = 10)]
fn bugfix_report(b: Bencher) {
    let Some(d) = bugfix() else { return };
    b.counter(BytesCount::new(trace_bytes(&d))).bench(|| report(&d));
}

#[divan::bench(sample_count = 10)]
fn generated_call_stacks(b: Bencher) {
    let d = generated();
    b.counter(BytesCount::new(trace_bytes(d))).bench(|| decode(d));
}

#[divan::bench(sample_count = 10)]
fn generated_report(b: Bencher) {
    let d = generated();
    b.counter(BytesCount::new(trace_bytes(d))).bench(|| report(d));
}
