//! The HTML report against plain decode (a counting sink), on
//! `bugfix-exact-match` (1 MiB of ETMv4 from OpenCSD's tests, read from
//! ../shared when it is beside the repository) and on a 256 MiB generated
//! ETMv4 capture (a generated 1 MiB buffer repeated, made in the setup,
//! decoded as a raw buffer with its snapshot's configuration).
//!
//! The report's size is printed once per input on stderr.
//!
//! `cargo bench -p coresight-viz --bench report`

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{DecodeMode, DecoderRegistry};
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::memory::MemAccMapper;
use coresight_decode::shared::{Shared, shared};
use coresight_decode::snapshot::Snapshot;
use coresight_decode::tree::SourceFormat;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};
use coresight_viz::elements::ElementStacks;
use coresight_viz::input::{SnapshotInput, decode_snapshot};
use coresight_viz::profile::Limits;
use coresight_viz::report::{ReportOptions, write_report};
use coresight_viz::symbols::Symbolizer;
use divan::Bencher;
use divan::counter::BytesCount;

fn main() {
    if no_shared() {
        eprintln!("../shared is not beside the repository: the bugfix_* benches are (ignored)");
    }
    divan::main();
}

/// A snapshot and, when set, the raw buffer decoded in place of its own.
struct Input {
    dir: PathBuf,
    raw: Option<PathBuf>,
    bytes: u64,
}

/// OpenCSD's `bugfix-exact-match`, in `../shared` beside the repository.
const BUGFIX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/corpus/opencsd-1.8.0/snapshots/bugfix-exact-match"
);

/// True when `../shared` is not there: the `bugfix_*` benches are then
/// shown as `(ignored)`; with `-- --include-ignored` they fail saying why.
fn no_shared() -> bool {
    !Path::new(BUGFIX).join("cstrace.bin").is_file()
}

fn bugfix() -> &'static Input {
    static I: OnceLock<Input> = OnceLock::new();
    I.get_or_init(|| {
        assert!(
            !no_shared(),
            "{BUGFIX}: not present; the bugfix_* benches need ../shared"
        );
        let dir = PathBuf::from(BUGFIX);
        let bytes = std::fs::metadata(dir.join("cstrace.bin")).unwrap().len();
        Input { dir, raw: None, bytes }
    })
}

/// 256 MiB: a generated formatted ETMv4 buffer of about 1 MiB, repeated
/// (each copy starts with A-sync and trace info, so the decoder goes on).
fn big() -> &'static Input {
    static I: OnceLock<Input> = OnceLock::new();
    I.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-viz-etmv4");
        let _ = std::fs::remove_dir_all(&dir);
        let g = generate(&GenOptions {
            seed: 5,
            protocol: GenProtocol::Etmv4,
            layout: BufferLayout::Formatted,
            length: 120_000,
        });
        g.spec.write_to(&dir).unwrap();
        let one = &g.spec.buffers[0].data;
        assert_eq!(one.len() % 16, 0, "whole frames");
        const SIZE: usize = 256 << 20;
        let mut data = Vec::with_capacity(SIZE);
        while data.len() + one.len() <= SIZE {
            data.extend_from_slice(one);
        }
        // Fill up to 256 MiB exactly with the start of another copy.
        let rest = SIZE - data.len();
        data.extend_from_slice(&one[..rest]);
        let raw = dir.join("big.bin");
        std::fs::write(&raw, &data).unwrap();
        Input {
            dir,
            raw: Some(raw),
            bytes: SIZE as u64,
        }
    })
}

/// Counts elements: the sink of plain decode.
struct Count(Shared<u64>);

impl TrcGenElemIn for Count {
    fn trace_elem_in(&mut self, _: TrcIndex, _: u8, _: &TraceElement) -> DatapathResp {
        *self.0.borrow_mut() += 1;
        DatapathResp::Cont
    }
}

/// Plain decode: the same decode tree and reads as the report's, elements
/// counted. Returns the element count.
fn plain_decode(input: &Input) -> u64 {
    let ss = Snapshot::load(&input.dir).unwrap();
    let name = ss.buffer_names()[0].to_string();
    let mut tree = TreeBuilder::with_registry(&ss, Arc::new(DecoderRegistry::builtin()))
        .build(&name, DecodeMode::FullDecode, |_| {})
        .unwrap();
    if let SourceFormat::Formatted(mut cfg) = tree.format() {
        if !(cfg.fsyncs || cfg.hsyncs) {
            cfg.mem_aligned = true;
        }
        if let Some(d) = tree.deformatter_mut() {
            let _ = d.configure(cfg);
        }
    }
    let n = shared(0u64);
    tree.set_gen_elem_out(Box::new(Count(n.clone())));
    let files = match &input.raw {
        Some(r) => vec![r.clone()],
        None => ss.buffer_paths(ss.buffer(&name).unwrap()),
    };
    let mut block = vec![0u8; 64 * 1024];
    let mut index: TrcIndex = 0;
    for f in files {
        let mut file = std::fs::File::open(f).unwrap();
        loop {
            let mut got = 0;
            while got < block.len() {
                match file.read(&mut block[got..]).unwrap() {
                    0 => break,
                    k => got += k,
                }
            }
            if got == 0 {
                break;
            }
            let mut done = 0;
            let mut resp = DatapathResp::Cont;
            while done < got || resp.is_wait() {
                if resp.is_wait() {
                    resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
                } else {
                    let (r, used) = tree.trace_data_in(DatapathOp::Data, index, &block[done..got]);
                    resp = r;
                    done += used;
                    index += used as TrcIndex;
                }
                assert!(!resp.is_fatal());
            }
        }
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    *n.borrow()
}

/// Decode into call stacks, then the report. Returns its size.
fn report(input: &Input) -> usize {
    let mut s = ElementStacks::new(Symbolizer::new(), Limits::default());
    let map = |_: &mut MemAccMapper| Ok(());
    let cap = decode_snapshot(
        SnapshotInput {
            dir: &input.dir,
            source: None,
            raw_buffer: input.raw.clone(),
            registry: Arc::new(DecoderRegistry::builtin()),
            map_images: &map,
            progress: &mut |_, _| {},
        },
        &mut s,
    )
    .unwrap();
    let mut out = Vec::new();
    write_report(&s.profile, &cap, Some(&s.counts), &ReportOptions::default(), &mut out).unwrap();
    out.len()
}

fn say_size(what: &str, input: &Input, once: &OnceLock<()>) {
    once.get_or_init(|| {
        let n = report(input);
        eprintln!(
            "{what}: trace {} bytes, {} elements; report {n} bytes",
            input.bytes,
            plain_decode(input)
        );
    });
}

#[divan::bench(sample_count = 5, ignore = no_shared())]
fn bugfix_plain_decode(b: Bencher) {
    let i = bugfix();
    b.counter(BytesCount::new(i.bytes)).bench(|| plain_decode(i));
}

#[divan::bench(sample_count = 5, ignore = no_shared())]
fn bugfix_report(b: Bencher) {
    let i = bugfix();
    static ONCE: OnceLock<()> = OnceLock::new();
    say_size("bugfix-exact-match", i, &ONCE);
    b.counter(BytesCount::new(i.bytes)).bench(|| report(i));
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn generated_256mib_plain_decode(b: Bencher) {
    let i = big();
    b.counter(BytesCount::new(i.bytes)).bench(|| plain_decode(i));
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn generated_256mib_report(b: Bencher) {
    let i = big();
    static ONCE: OnceLock<()> = OnceLock::new();
    say_size("generated 256 MiB", i, &ONCE);
    b.counter(BytesCount::new(i.bytes)).bench(|| report(i));
}
