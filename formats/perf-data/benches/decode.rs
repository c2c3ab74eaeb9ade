//! Decode throughput of a perf.data recording against the same trace as a
//! snapshot.
//!
//! A recording of at least 64 MiB of AUX data is generated once (an ETMv4
//! program on one CPU, its trace repeated in whole copies; formatted ETR
//! frames and unformatted TRBE data), its ELF written to a symbol folder,
//! and the same bytes written as an Arm snapshot with the ELF's segments as
//! memory dumps. Each path decodes every byte into a counting sink:
//!
//! - `perf_data`: the file parsed, its memory model made from the MMAP
//!   records and the symbol folder, every AUXTRACE buffer decoded from a
//!   reset (`RecordingDecoder`), as `trc_perf` does;
//! - `snapshot`: the snapshot loaded, its tree built, the buffer file read
//!   and decoded, as `trc_pkt_lister -decode` does;
//! - `autofdo`: the recording's AutoFDO profile made, as `trc_perf autofdo`
//!   does (goal: within 10 % of `snapshot`);
//! - `script_branches` and `script_instructions`: `trc_perf script
//!   --itrace=b` and `--itrace=i100` lines written to nowhere (goal: 5 times
//!   fewer instructions than Debian's `perf script`).
//!
//! For instruction counts: `PERF_BENCH_MIB=8 PERF_BENCH_ONLY=autofdo
//! valgrind --tool=callgrind target/release/deps/decode-… --bench` (see
//! `PERF_BENCH_ONLY` below).
//!
//! `cargo bench -p coresight-perf-data --bench decode`. Throughput is in AUX
//! bytes per second.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::snapshot::Snapshot;
use coresight_generator::BufferLayout;
use coresight_generator::perf_data::{PerfOptions, generate_perf_data};
use coresight_generator::snapshot_writer::{BufferSpec, DeviceSpec, DumpSpec, SnapshotSpec};
use coresight_perf_data::Recording;
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::decode::{CpuStream, DecodeOptions, Event, RecordingDecoder};
use coresight_perf_data::memory::Model;
use divan::Bencher;
use divan::counter::BytesCount;

/// `PERF_BENCH_ONLY=NAME` runs only that bench's work once on the formatted
/// recording, outside divan, for a callgrind count of one path (with
/// `--toggle-collect='decode::NAME'` the generation is left out):
/// perf_data, snapshot, autofdo, script_branches or script_instructions.
fn main() {
    if let Ok(name) = std::env::var("PERF_BENCH_ONLY") {
        let c = case(BufferLayout::Formatted);
        let n = match name.as_str() {
            "perf_data" => decode_perf_data(c),
            "snapshot" => decode_snapshot(c),
            "autofdo" => autofdo(c) as u64,
            "script_branches" => script_lines(c, "b"),
            "script_instructions" => script_lines(c, "i100"),
            other => panic!("PERF_BENCH_ONLY={other}: not a bench"),
        };
        println!("{name}: {n}");
        return;
    }
    divan::main();
}

/// AUX data in each generated recording: 64 MiB, or `PERF_BENCH_MIB`
/// (smaller for a run under callgrind).
fn aux_bytes() -> u64 {
    std::env::var("PERF_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64u64)
        << 20
}

/// One layout's recording, symbol folder and snapshot.
struct Case {
    perf_data: Vec<u8>,
    symdir: PathBuf,
    snapshot: PathBuf,
    aux_bytes: u64,
    checked: OnceLock<()>,
}

fn case(layout: BufferLayout) -> &'static Case {
    static FORMATTED: OnceLock<Case> = OnceLock::new();
    static RAW: OnceLock<Case> = OnceLock::new();
    let cell = match layout {
        BufferLayout::Unformatted => &RAW,
        _ => &FORMATTED,
    };
    cell.get_or_init(|| make_case(layout))
}

/// The case of a bench argument: "raw" or "formatted".
fn case_named(layout: &str) -> &'static Case {
    case(if layout == "raw" {
        BufferLayout::Unformatted
    } else {
        BufferLayout::Formatted
    })
}

fn make_case(layout: BufferLayout) -> Case {
    let name = if layout == BufferLayout::Unformatted {
        "raw"
    } else {
        "formatted"
    };
    let dir = std::env::temp_dir().join(format!("coresight-perf-bench-{}-{name}", std::process::id()));
    let symdir = dir.join("symbols");
    let snapshot = dir.join("snapshot");
    std::fs::create_dir_all(&symdir).unwrap();
    let opts = PerfOptions {
        seed: 11,
        layout,
        cpus: 1,
        length: 4000,
        min_aux_bytes: aux_bytes(),
        elf_path: "/data/local/tmp/bench_prog".into(),
        ..PerfOptions::default()
    };
    let r = generate_perf_data(&opts).unwrap();
    std::fs::write(symdir.join("bench_prog"), &r.elf.bytes).unwrap();
    let rec = Recording::parse(&r.perf_data).unwrap();
    write_snapshot(&rec, &r.elf.bytes, layout, &snapshot);
    Case {
        aux_bytes: r.aux_bytes(),
        perf_data: r.perf_data,
        symdir,
        snapshot,
        checked: OnceLock::new(),
    }
}

/// The recording's trace as a snapshot: its CPU's trace unit and core, the
/// ELF's loadable segments as the core's memory, all AUX data as one buffer.
fn write_snapshot(rec: &Recording<'_>, elf: &[u8], layout: BufferLayout, dir: &Path) {
    let cs = rec.cs_etm.as_ref().unwrap();
    let stream = CpuStream::from_config(&cs.cpus[0]);
    let mut core = DeviceSpec::core("cpu_0", "Cortex-A72");
    for (i, (address, data)) in coresight_generator::execution::elf_images(elf)
        .unwrap()
        .into_iter()
        .enumerate()
    {
        core.dumps.push(DumpSpec {
            file: format!("mem{i}.bin"),
            address,
            data,
            space: String::new(),
        });
    }
    let source = DeviceSpec::trace_source("etm_0", &stream.config.device_type, stream.config.regs.clone());
    let data: Vec<u8> = rec.buffers.iter().flat_map(|b| b.data.iter().copied()).collect();
    let format = if layout == BufferLayout::Unformatted {
        "source_data"
    } else {
        "coresight"
    };
    let spec = SnapshotSpec {
        description: "perf.data benchmark".into(),
        devices: vec![core, source],
        buffers: vec![BufferSpec {
            name: "AUX".into(),
            file: "aux.bin".into(),
            format: format.into(),
            data,
        }],
        source_buffers: vec![("etm_0".into(), "AUX".into())],
        core_trace_sources: vec![("cpu_0".into(), "etm_0".into())],
    };
    spec.write_to(dir).unwrap();
}

/// Counts the instructions of the elements, as a client that looks at
/// each would.
struct Count(Arc<AtomicU64>);

impl TrcGenElemIn for Count {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.fetch_add(elem.num_instr_range as u64, Ordering::Relaxed);
        DatapathResp::Cont
    }
}

/// Instructions decoded from the recording.
#[inline(never)]
fn decode_perf_data(c: &Case) -> u64 {
    let rec = Recording::parse(&c.perf_data).unwrap();
    let mut search = SymbolSearch::new();
    search.add_symdir(&c.symdir).unwrap();
    let model = Arc::new(Model::new(&rec, search));
    let mut dec = RecordingDecoder::new(&rec, model, DecodeOptions::default()).unwrap();
    let mut n = 0u64;
    dec.run(&mut |ev| {
        if let Event::Element(_, e) = ev {
            n += e.num_instr_range as u64;
        }
    });
    n
}

/// The recording's AutoFDO profile, as text.
#[inline(never)]
fn autofdo(c: &Case) -> usize {
    let rec = Recording::parse(&c.perf_data).unwrap();
    let mut search = SymbolSearch::new();
    search.add_symdir(&c.symdir).unwrap();
    let mut p = coresight_perf_data::autofdo::AutoFdoProfile::new(None);
    coresight_perf_data::autofdo::add_recording(&rec, search, DecodeOptions::default(), &mut p, &mut |_| {}).unwrap();
    p.binaries.values().map(|b| b.ranges.len()).sum()
}

/// `trc_perf script` lines of the recording, written to nowhere.
#[inline(never)]
fn script_lines(c: &Case, itrace: &str) -> u64 {
    use coresight_perf_data::script::{
        Fields, PerfOrder, ScriptWriter, event_names, is_timeless, perf_sample_time, write_in_perf_order,
    };
    let rec = Recording::parse(&c.perf_data).unwrap();
    let mut search = SymbolSearch::new();
    search.add_symdir(&c.symdir).unwrap();
    let model = Arc::new(Model::new(&rec, search));
    let mut dec = RecordingDecoder::new(&rec, model.clone(), DecodeOptions::default()).unwrap();
    let timeless = is_timeless(&rec);
    let mut w = ScriptWriter::new(
        &model,
        dec.cpus().len(),
        std::io::sink(),
        itrace.parse().unwrap(),
        Fields::default(),
        "u",
        &event_names(&rec),
        if timeless { None } else { perf_sample_time(&rec) },
    );
    let order = PerfOrder {
        timeless,
        ..Default::default()
    };
    write_in_perf_order(&mut dec, &mut w, order, &mut |_| {}).unwrap();
    w.lines
}

/// Instructions decoded from the snapshot.
#[inline(never)]
fn decode_snapshot(c: &Case) -> u64 {
    let ss = Snapshot::load(&c.snapshot).unwrap();
    let mut tree = ss.build_tree("AUX", DecodeMode::FullDecode, |_| {}).unwrap();
    let count = Arc::new(AtomicU64::new(0));
    tree.set_gen_elem_out(Box::new(Count(count.clone())));
    let data = std::fs::read(c.snapshot.join("aux.bin")).unwrap();
    let mut at = 0;
    while at < data.len() {
        let (resp, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, &data[at..]);
        assert_eq!(resp, DatapathResp::Cont);
        at += used;
    }
    tree.trace_data_in(DatapathOp::Eot, at as TrcIndex, &[]);
    count.load(Ordering::Relaxed)
}

/// Both paths see the same instructions, but for the seams between copies
/// of the trace: the recording decodes each buffer from a reset, the
/// snapshot runs on across them, and a copy's last uncommitted atoms are
/// dropped when the next copy's trace-info packet arrives (a few
/// instructions per seam, under 0.01 % in all).
fn check(c: &Case) {
    c.checked.get_or_init(|| {
        let (a, b) = (decode_perf_data(c), decode_snapshot(c));
        assert!(
            a > 0 && a.abs_diff(b) * 10_000 < a,
            "perf.data path {a} instructions, snapshot path {b}"
        );
    });
}

#[divan::bench(args = ["formatted", "raw"], sample_count = 3, sample_size = 1)]
fn perf_data(bencher: Bencher, layout: &str) {
    let c = case_named(layout);
    check(c);
    bencher
        .counter(BytesCount::new(c.aux_bytes))
        .bench(|| decode_perf_data(c));
}

#[divan::bench(args = ["formatted", "raw"], sample_count = 3, sample_size = 1)]
fn autofdo_profile(bencher: Bencher, layout: &str) {
    let c = case_named(layout);
    bencher.counter(BytesCount::new(c.aux_bytes)).bench(|| autofdo(c));
}

#[divan::bench(args = ["formatted", "raw"], sample_count = 3, sample_size = 1)]
fn script_branches(bencher: Bencher, layout: &str) {
    let c = case_named(layout);
    bencher
        .counter(BytesCount::new(c.aux_bytes))
        .bench(|| script_lines(c, "b"));
}

#[divan::bench(args = ["formatted", "raw"], sample_count = 3, sample_size = 1)]
fn script_instructions(bencher: Bencher, layout: &str) {
    let c = case_named(layout);
    bencher
        .counter(BytesCount::new(c.aux_bytes))
        .bench(|| script_lines(c, "i100"));
}

#[divan::bench(args = ["formatted", "raw"], sample_count = 3, sample_size = 1)]
fn snapshot(bencher: Bencher, layout: &str) {
    let c = case_named(layout);
    check(c);
    bencher
        .counter(BytesCount::new(c.aux_bytes))
        .bench(|| decode_snapshot(c));
}
