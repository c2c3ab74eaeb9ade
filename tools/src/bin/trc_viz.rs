//! `trc_viz`: pictures of a trace: flame and icicle graphs (SVG), call
//! timelines (Trace Event Format JSON for Perfetto / chrome://tracing /
//! speedscope, or speedscope's own format), folded stacks, and a one-file
//! HTML report.
//!
//! ```text
//! trc_viz flamegraph|icicle|folded|report INPUT [options] [-o FILE]
//! trc_viz timeline --format chrome|speedscope INPUT [options] [-o FILE]
//! ```
//! INPUT is a snapshot directory (CoreSight or RISC-V trace; `--raw FILE`
//! decodes FILE with its configuration), a perf.data file, or a Tarmac
//! trace. Exit status: 0 done, 1 failed, 2 bad usage.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::decode::{DecodeOptions, Event, RecordingDecoder};
use coresight_perf_data::memory::Model;
use coresight_perf_data::{MappedFile, Recording};
use coresight_tarmac::calls::CallAnalyzer;
use coresight_tarmac::symbols::Symbols;
use coresight_tarmac::{Reader, ReaderOptions};
use coresight_tools::cli::{self, ImageArg, Progress};
use coresight_viz::elements::ElementStacks;
use coresight_viz::folded::{FlameOptions, flamegraph_svg, folded_lines};
use coresight_viz::input::{Capture, SnapshotInput, SourceInfo, decode_snapshot};
use coresight_viz::profile::{Limits, Profile};
use coresight_viz::report::{ReportOptions, write_report};
use coresight_viz::symbols::Symbolizer;
use coresight_viz::timeline::{Timeline, write_speedscope, write_trace_events};

const PROGRAM: &str = "trc_viz";

#[derive(Parser)]
#[command(
    name = "trc_viz",
    version,
    about = "Flame graphs, call timelines and a one-file HTML report of a trace (snapshot, raw buffer, perf.data, Tarmac)",
    after_help = "INPUT: a snapshot directory (CoreSight or RISC-V trace), a perf.data file, or a Tarmac trace.\n\
                  The time axis is the trace's timestamps, else its cycle counts, else instructions executed \
                  (Tarmac: its time column); each output says which.\n\
                  Exit status: 0 done; 1 failed (input not found or unreadable, nothing decodable); 2 bad usage."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// SVG flame graph (inferno): callers below, callees above.
    Flamegraph(Common),
    /// SVG icicle graph: the flame graph upside down.
    Icicle(Common),
    /// Folded stacks (`frame;frame;frame weight`), the flame graph's input.
    Folded(Common),
    /// Call timeline: Trace Event Format (chrome) or speedscope's format.
    Timeline {
        /// Output format.
        #[arg(long, value_enum, default_value_t = TimelineFormat::Chrome)]
        format: TimelineFormat,
        #[command(flatten)]
        common: Common,
    },
    /// One self-contained HTML file: summary, errors and gaps, hottest
    /// functions, flame graph, timeline of the busiest context.
    Report(Common),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TimelineFormat {
    /// Trace Event Format JSON (Perfetto UI, chrome://tracing, speedscope).
    Chrome,
    /// speedscope's file format (evented profiles).
    Speedscope,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// Guess: a directory is a snapshot, PERFILE2 a perf.data, else Tarmac.
    Auto,
    Snapshot,
    Perf,
    Tarmac,
}

#[derive(Args, Clone)]
struct Common {
    /// The trace: snapshot directory, perf.data or Tarmac file.
    input: PathBuf,
    /// What INPUT is.
    #[arg(long, value_enum, default_value_t = Kind::Auto)]
    kind: Kind,
    /// Snapshot: the trace buffer to decode (default: the first).
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
    /// Snapshot: decode this raw trace capture with the snapshot's
    /// configuration instead of its own buffer files.
    #[arg(long, value_name = "FILE")]
    raw: Option<PathBuf>,
    /// The traced program: an ELF file (mapped at its addresses, and its
    /// symbols and DWARF name the functions) or FILE@ADDR (a raw binary).
    /// Tarmac: the image whose symbols name the functions. Repeat for more.
    #[arg(long = "elf", value_name = "FILE[@ADDR]")]
    images: Vec<ImageArg>,
    /// Tarmac: add this to the image's symbol addresses.
    #[arg(long, value_name = "OFFSET", value_parser = cli::parse_u64)]
    load_offset: Option<u64>,
    /// Tarmac: no ` + 0xPC` after functions entered past their start.
    #[arg(long)]
    no_offsets: bool,
    /// perf.data: folders searched for the recorded binaries.
    #[arg(long, value_name = "DIR")]
    symdir: Vec<PathBuf>,
    /// Title of the picture or report.
    #[arg(long)]
    title: Option<String>,
    /// Flame graphs: leave out frames narrower than this many pixels
    /// (default 0.1; the report uses 0.5).
    #[arg(long, value_name = "PX")]
    min_width: Option<f64>,
    /// Calls and returns kept for the timeline at most (memory bound).
    #[arg(long, value_name = "N", default_value_t = 2_000_000)]
    max_events: usize,
    /// Report: calls and returns drawn in its timeline at most.
    #[arg(long, value_name = "N", default_value_t = 4000)]
    report_events: usize,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Progress bar on stderr (auto: when stderr is a terminal and the
    /// trace is 1 MiB or more).
    #[arg(long, value_enum, default_value_t = Progress::Auto, value_name = "WHEN")]
    progress: Progress,
}

/// What an input gave.
struct Loaded {
    profile: Profile,
    capture: Capture,
    counts: Option<coresight_viz::elements::Counts>,
}

fn kind_of(c: &Common) -> Kind {
    if c.kind != Kind::Auto {
        return c.kind;
    }
    if c.input.is_dir() {
        return Kind::Snapshot;
    }
    let mut magic = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open(&c.input) {
        use std::io::Read;
        let _ = f.read_exact(&mut magic);
    }
    if &magic == b"PERFILE2" || &magic == b"2ELIFREP" {
        Kind::Perf
    } else {
        Kind::Tarmac
    }
}

fn symbolizer(c: &Common) -> Result<Symbolizer, String> {
    let mut s = Symbolizer::new();
    for img in c.images.iter().filter(|i| i.addr.is_none()) {
        s.add_elf_file(&img.path, 0)?;
    }
    Ok(s)
}

fn load(c: &Common) -> Result<Loaded, String> {
    let limits = Limits {
        max_events: c.max_events,
        ..Limits::default()
    };
    match kind_of(c) {
        Kind::Snapshot | Kind::Auto => {
            let mut stacks = ElementStacks::new(symbolizer(c)?, limits);
            let bar = cli::progress_bar(0, c.progress);
            let mut progress = |done: u64, total: u64| {
                if bar.length() != Some(total) {
                    bar.set_length(total);
                    if !cli::show_progress(total, c.progress, std::io::IsTerminal::is_terminal(&std::io::stderr())) {
                        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
                    }
                }
                bar.set_position(done);
            };
            let images = c.images.clone();
            let map = move |m: &mut coresight_decode::memory::MemAccMapper| -> Result<(), String> {
                for i in &images {
                    i.map_into(m, &mut |w| eprintln!("{PROGRAM}: warning: {w}"))?;
                }
                Ok(())
            };
            let cap = decode_snapshot(
                SnapshotInput {
                    dir: &c.input,
                    source: c.source.as_deref(),
                    raw_buffer: c.raw.clone(),
                    registry: riscv_trace::registry(),
                    map_images: &map,
                    progress: &mut progress,
                },
                &mut stacks,
            )?;
            bar.finish_and_clear();
            // Snapshot warnings say "warning:" themselves.
            for w in &cap.warnings {
                match w.contains(": warning: ") {
                    true => eprintln!("{PROGRAM}: {w}"),
                    false => eprintln!("{PROGRAM}: warning: {w}"),
                }
            }
            Ok(Loaded {
                profile: stacks.profile,
                capture: cap,
                counts: Some(stacks.counts),
            })
        }
        Kind::Perf => load_perf(c, limits),
        Kind::Tarmac => load_tarmac(c, limits),
    }
}

fn load_tarmac(c: &Common, limits: Limits) -> Result<Loaded, String> {
    let name = c.input.display().to_string();
    let f = std::fs::File::open(&c.input).map_err(|e| format!("{name}: {e}"))?;
    let total = f.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = cli::progress_bar(total, c.progress);
    let reader = cli::ProgressReader::new(io::BufReader::with_capacity(1 << 16, f), bar.clone());
    let mut r = Reader::with_options(io::BufReader::new(reader), ReaderOptions::default());
    let mut a = CallAnalyzer::new();
    let mut any = false;
    loop {
        let e = match r.next_record() {
            Ok(Some(rec)) => {
                any = true;
                a.feed(&rec);
                continue;
            }
            Ok(None) => break,
            Err(e) => e,
        };
        // A cut last line ends the trace, as `tarmac` takes it.
        if r.at_partial_line() && e.column > 0 {
            eprintln!("{PROGRAM}: warning: {name}: {e}; ignoring this partial last line");
            break;
        }
        return Err(format!("{name}: {e}"));
    }
    bar.finish_and_clear();
    if !any {
        return Err(format!("{name}: the trace contains no events"));
    }
    let syms = match c.images.first() {
        Some(img) => {
            let mut s = Symbols::from_elf_file(&img.path)?;
            if let Some(off) = c.load_offset {
                s.relocate(off);
            }
            Some(s)
        }
        None => None,
    };
    let tree = a.finish();
    let profile = coresight_viz::tarmac::profile_from_calltree(&tree, syms.as_ref(), c.no_offsets, limits);
    let (a64, a32) = a.instruction_sets();
    let capture = Capture {
        input: name,
        kind: "Tarmac trace".into(),
        sources: vec![SourceInfo {
            name: "tarmac".into(),
            protocol: match (a64, a32) {
                (true, true) => "Tarmac (A64, A32/T32)",
                (true, false) => "Tarmac (A64)",
                (false, true) => "Tarmac (A32/T32)",
                _ => "Tarmac",
            }
            .into(),
            trace_id: 0,
        }],
        bytes: total,
        ..Default::default()
    };
    Ok(Loaded {
        profile,
        capture,
        counts: None,
    })
}

fn load_perf(c: &Common, limits: Limits) -> Result<Loaded, String> {
    let name = c.input.display().to_string();
    let f = MappedFile::open(&c.input).map_err(|e| format!("{name}: {e}"))?;
    let rec = Recording::parse(f.bytes()).map_err(|e| format!("{name}: {e}"))?;
    let mut search = SymbolSearch::new();
    for d in &c.symdir {
        search
            .add_symdir(d)
            .map_err(|e| format!("--symdir {}: {e}", d.display()))?;
    }
    let model = Arc::new(Model::new(&rec, search));
    let mut dec =
        RecordingDecoder::new(&rec, model.clone(), DecodeOptions::default()).map_err(|e| format!("{name}: {e}"))?;
    let mut syms = symbolizer(c)?;
    // Names from the recording's maps: the binary mapped at the address in
    // that process, its function symbols.
    let m = model.clone();
    syms.set_resolver(Box::new(move |pid, addr| {
        let map = m.find_map(pid as i32, addr, u64::MAX)?;
        let mm = m.maps.get(map)?;
        let bin = m.binary(mm.binary)?;
        let named = m
            .vaddr_in_file(map, addr)
            .and_then(|vaddr| bin.image(&m.search)?.symbol_at(vaddr).map(|(s, _)| s.name.clone()));
        // Without its symbols (or its file) an address is still in a
        // binary: named by the binary and the offset in its file, as
        // symbolizers take it.
        named.or_else(|| {
            let name = bin
                .path
                .rsplit('/')
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or(&bin.path);
            Some(format!(
                "{name}+0x{:x}",
                addr.wrapping_sub(mm.start).wrapping_add(mm.pgoff)
            ))
        })
    }));
    let mut stacks = ElementStacks::new(syms, limits);
    stacks.contexts_from_elements = false;
    let mut cap = Capture {
        input: name.clone(),
        kind: "perf.data".into(),
        ..Default::default()
    };
    for w in &rec.warnings {
        cap.warnings.push(w.to_string());
    }
    let total: u64 = rec.buffers.iter().map(|b| b.data.len() as u64).sum();
    let bar = cli::progress_bar(total, c.progress);
    let mut base = 0u64;
    let summary = dec.run(&mut |ev| match ev {
        Event::BufferStart { aux, .. } => base = aux.data_offset,
        Event::Element(info, e) => {
            let cpu = info.cpu as u64;
            let tid = info.tid;
            stacks.symbols.set_space(info.pid as u32 as u64);
            stacks.set_context(
                cpu,
                || format!("cpu {cpu}"),
                tid as u32 as u128,
                || {
                    let comm = model.comm(tid).unwrap_or("?");
                    format!("cpu {cpu} {comm} tid {tid}")
                },
            );
            stacks.element(cpu, || format!("cpu {cpu}"), base + info.index, e);
        }
        Event::BufferEnd { buffer } => bar.inc(rec.buffers.get(buffer).map_or(0, |b| b.data.len() as u64)),
    });
    bar.finish_and_clear();
    stacks.finish();
    if let Some(cs) = &rec.cs_etm {
        for cpu in &cs.cpus {
            cap.sources.push(SourceInfo {
                name: format!("cpu {}", cpu.cpu),
                protocol: format!("{:?}", cpu.unit).split('(').next().unwrap_or("").to_string(),
                trace_id: cpu.trace_id(),
            });
        }
    }
    cap.bytes = summary.bytes;
    for w in &dec.warnings {
        cap.error(w.offset, w.to_string());
    }
    Ok(Loaded {
        profile: stacks.profile,
        capture: cap,
        counts: Some(stacks.counts),
    })
}

/// Writes the output: to standard output, or to a temporary file beside
/// `path` renamed to it once complete, so that a failure leaves no
/// partial file (and an earlier file stays as it was).
fn with_output(path: &Option<PathBuf>, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), String> {
    let Some(p) = path else {
        let mut w = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
        return match f(&mut w).and_then(|()| w.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(format!("standard output: {e}")),
        };
    };
    let mut tmp_name = p.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = TempFile(p.with_file_name(tmp_name));
    let file = std::fs::File::create(&tmp.0).map_err(|e| format!("cannot create {}: {e}", tmp.0.display()))?;
    let mut w = io::BufWriter::with_capacity(1 << 16, file);
    f(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| format!("{}: {e}", p.display()))?;
    drop(w);
    std::fs::rename(&tmp.0, p).map_err(|e| format!("cannot rename {} to {}: {e}", tmp.0.display(), p.display()))
}

/// A temporary output file, removed when dropped (after an error or a
/// panic; after the rename there is nothing left to remove).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn title(c: &Common, what: &str) -> String {
    c.title.clone().unwrap_or_else(|| {
        let n = Path::new(&c.input)
            .file_name()
            .map_or_else(|| c.input.display().to_string(), |n| n.to_string_lossy().into_owned());
        format!("{what}: {n}")
    })
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Flamegraph(c) => svg(&c, false)?,
        Cmd::Icicle(c) => svg(&c, true)?,
        Cmd::Folded(c) => {
            let l = load(&c)?;
            let axis = l.profile.axis();
            eprintln!("{PROGRAM}: weights: {}", axis.describe());
            let lines = folded_lines(&l.profile, axis);
            with_output(&c.output, |w| {
                for (p, n) in &lines {
                    writeln!(w, "{p} {n}")?;
                }
                Ok(())
            })?;
        }
        Cmd::Timeline { format, common: c } => {
            let l = load(&c)?;
            let axis = l.profile.axis();
            let t = Timeline::all(&l.profile);
            if let Some(n) = &t.note {
                eprintln!("{PROGRAM}: note: {n}");
            }
            eprintln!("{PROGRAM}: time axis: {}", axis.describe());
            let name = title(&c, "Timeline");
            with_output(&c.output, |w| match format {
                TimelineFormat::Chrome => write_trace_events(&l.profile, &t, axis, w),
                TimelineFormat::Speedscope => write_speedscope(&l.profile, &t, axis, &name, w),
            })?;
        }
        Cmd::Report(c) => {
            let l = load(&c)?;
            let mut o = ReportOptions {
                title: Some(title(&c, "Trace report")),
                timeline_events: c.report_events,
                ..ReportOptions::default()
            };
            if let Some(m) = c.min_width {
                o.min_width = m;
            }
            with_output(&c.output, |w| {
                write_report(&l.profile, &l.capture, l.counts.as_ref(), &o, w)
            })?;
        }
    }
    Ok(())
}

fn svg(c: &Common, icicle: bool) -> Result<(), String> {
    let l = load(c)?;
    let axis = l.profile.axis();
    let lines = folded_lines(&l.profile, axis);
    if lines.is_empty() {
        return Err(match l.counts.as_ref().map_or(0, |c| c.addr_nacc) {
            0 => "no call stacks to draw: the trace holds no instructions that were followed".to_string(),
            n => format!(
                "no call stacks to draw: the code the trace runs through is not mapped ({n} ADDR_NACC elements); give the program's images with --elf FILE"
            ),
        });
    }
    let o = FlameOptions {
        title: title(c, if icicle { "Icicle graph" } else { "Flame graph" }),
        subtitle: Some(axis.describe().to_string()),
        icicle,
        min_width: c.min_width.unwrap_or(0.1),
        count_name: axis.unit().to_string(),
        ..FlameOptions::default()
    };
    with_output(&c.output, |w| flamegraph_svg(&lines, &o, w))
}

fn main() -> ExitCode {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).try_init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("{PROGRAM}: {msg}");
            ExitCode::from(cli::EXIT_FAILURE)
        }
    }
}
