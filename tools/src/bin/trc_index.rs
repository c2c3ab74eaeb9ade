//! `trc_index`: builds, shows and searches the trace indexes of a
//! snapshot's capture, and decodes from them.
//!
//! ```text
//! trc_index build SNAPSHOT [--source NAME] [-o FILE] [--granularity N] [--limit BYTES]
//! trc_index show SNAPSHOT [--index FILE]
//! trc_index query SNAPSHOT syncs --id 0x10 [--at BYTE]
//! trc_index query SNAPSHOT time --id 0x10 --from-ts T --to-ts T
//! trc_index query SNAPSHOT events | counts | ids --from B --to B
//! trc_index decode SNAPSHOT --id 0x10 (--from B --to B | --from-ts T --to-ts T)
//! trc_index correlate SNAPSHOT --ids 0x10,0x11
//! trc_index count SNAPSHOT [--ids 0x10,0x11] [--threads N] [--pieces N]
//! ```
//!
//! The index is saved beside the buffer's first file (`FILE.csidx`)
//! unless `-o` / `--index` says where. Exit status: 0 done, 1 failure
//! (unreadable or stale index, bad snapshot...), 2 bad usage.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use coresight_decode::TrcIndex;
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::index::Capture;
use coresight_decode::index::{
    CaptureIndex, EntryKind, IndexOptions, IndexedFormat, Window, correlate_partial, decode_split_ids_partial,
    decode_window,
};

#[derive(Parser)]
#[command(
    name = "trc_index",
    version,
    about = "Trace indexes of a CoreSight capture: build, show, query, and decode from them",
    after_help = "Exit status: 0 done; 1 failed (a snapshot, trace or index file that could not be read \
                  or written, a fatal decode error); 2 bad usage."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args)]
struct Target {
    /// Snapshot directory.
    snapshot: PathBuf,
    /// Trace buffer, by its name in the snapshot (default: the first).
    /// `--buffer` is another name for it.
    #[arg(long = "source", visible_alias = "buffer", value_name = "NAME")]
    buffer: Option<String>,
    /// Index file (default: beside the buffer's first file, `.csidx` added).
    #[arg(long = "index", short = 'o')]
    index: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Index the capture (packet level: no memory walk) and save the index.
    Build {
        #[command(flatten)]
        target: Target,
        /// Source index block size in bytes.
        #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(16..))]
        granularity: u32,
        /// Index only the first BYTES bytes.
        #[arg(long, value_parser = parse_num)]
        limit: Option<u64>,
    },
    /// A readable summary: trace IDs, sync points, timestamps, events.
    Show {
        #[command(flatten)]
        target: Target,
    },
    /// Search the index.
    Query {
        #[command(flatten)]
        target: Target,
        #[command(subcommand)]
        what: Query,
    },
    /// Decode one trace ID's byte or time window from the nearest indexed
    /// sync point, printing elements as trc_pkt_lister does.
    Decode {
        #[command(flatten)]
        target: Target,
        /// The trace ID to decode.
        #[arg(long, value_parser = parse_id)]
        id: u8,
        #[command(flatten)]
        window: WindowArgs,
    },
    /// Merge the elements of several trace IDs in timestamp order.
    Correlate {
        #[command(flatten)]
        target: Target,
        /// Trace IDs, comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = parse_id, required = true)]
        ids: Vec<u8>,
    },
    /// Count the elements, instruction ranges and instructions of trace
    /// IDs, each ID's stream split at indexed sync points where no
    /// speculation is pending and the pieces decoded on worker threads.
    /// Each piece's decoder starts one sync point early, so it has the
    /// serial decode's state by the piece's start: the counts are the
    /// serial decode's.
    Count {
        #[command(flatten)]
        target: Target,
        /// Trace IDs, comma-separated (default: every ID with a sync point).
        #[arg(long, value_delimiter = ',', value_parser = parse_id)]
        ids: Vec<u8>,
        /// Worker threads, 1 to 1024 (default: one per core).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
        threads: Option<u16>,
        /// Pieces per trace ID, 1 to 1024 (default: the number of threads).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
        pieces: Option<u16>,
    },
}

/// What `count` counts in a piece.
#[derive(Default)]
struct Counts {
    elements: u64,
    ranges: u64,
    instructions: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.elements += o.elements;
        self.ranges += o.ranges;
        self.instructions += o.instructions;
    }
}

fn count_elem(c: &mut Counts, _index: TrcIndex, e: &TraceElement) {
    c.elements += 1;
    if e.elem_type == ElemType::InstrRange {
        c.ranges += 1;
        c.instructions += e.num_instr_range as u64;
    }
}

#[derive(Args)]
struct WindowArgs {
    /// First byte of a byte window.
    #[arg(long, requires = "to", conflicts_with_all = ["from_ts", "to_ts"], value_parser = parse_num)]
    from: Option<u64>,
    /// End (exclusive) of a byte window.
    #[arg(long, requires = "from", value_parser = parse_num)]
    to: Option<u64>,
    /// First timestamp of a time window.
    #[arg(long, requires = "to_ts", value_parser = parse_num)]
    from_ts: Option<u64>,
    /// Last timestamp of a time window.
    #[arg(long, requires = "from_ts", value_parser = parse_num)]
    to_ts: Option<u64>,
}

#[derive(Subcommand)]
enum Query {
    /// Sync points of an ID at or after a byte.
    Syncs {
        /// The trace ID.
        #[arg(long, value_parser = parse_id)]
        id: u8,
        /// Byte of the capture to search from.
        #[arg(long, default_value_t = 0, value_parser = parse_num)]
        at: u64,
    },
    /// The byte window covering a timestamp interval of an ID.
    Time {
        /// The trace ID.
        #[arg(long, value_parser = parse_id)]
        id: u8,
        /// First timestamp of the interval.
        #[arg(long, value_parser = parse_num)]
        from_ts: u64,
        /// Last timestamp of the interval.
        #[arg(long, value_parser = parse_num)]
        to_ts: u64,
    },
    /// Events and triggers.
    Events,
    /// Trace IDs with data in a byte range.
    Ids {
        /// First byte of the range.
        #[arg(long, value_parser = parse_num)]
        from: u64,
        /// End (exclusive) of the range.
        #[arg(long, value_parser = parse_num)]
        to: u64,
    },
    /// Entry counts per trace ID.
    Counts,
}

/// A number, decimal or `0x` hexadecimal.
fn parse_num(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("'{s}' is not a number (decimal, or hexadecimal with 0x)"))
}

fn parse_id(s: &str) -> Result<u8, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u8::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("'{s}' is not a trace ID (0x00 to 0x7f)"))?;
    if v > 0x7f {
        return Err(format!("'{s}' is not a trace ID (0x00 to 0x7f)"));
    }
    Ok(v)
}

/// A failure, with what was done before it: decoded output is written
/// before the error that stopped the decode is reported.
struct Failed {
    out: String,
    error: String,
}

impl From<String> for Failed {
    fn from(error: String) -> Failed {
        Failed {
            out: String::new(),
            error,
        }
    }
}

impl From<&str> for Failed {
    fn from(error: &str) -> Failed {
        Failed::from(error.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (text, error) = match run(cli) {
        Ok(text) => (text, None),
        Err(f) => (f.out, Some(f.error)),
    };
    use std::io::Write as _;
    // A reader that stops early (`| head`) is not a failure.
    if let Err(e) = std::io::stdout().lock().write_all(text.as_bytes())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("trc_index: writing the output: {e}");
        return ExitCode::FAILURE;
    }
    match error {
        Some(e) => {
            eprintln!("trc_index: {e}");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}

fn load_capture(t: &Target) -> Result<(Capture, PathBuf), String> {
    let cap = Capture::load(&t.snapshot, t.buffer.as_deref()).map_err(|e| format!("{}: {e}", t.snapshot.display()))?;
    let path = t.index.clone().unwrap_or_else(|| cap.default_index_path());
    Ok((cap, path))
}

/// The capture's bytes, for the decodes that start anywhere in it: a
/// buffer in one file without DSTREAM footers is mapped (only the pages a
/// window decode touches are read), any other is read into memory.
fn capture_bytes(cap: &Capture) -> Result<Bytes<'_>, String> {
    let reader = cap.reader().map_err(|e| e.to_string())?;
    if let [path] = reader.paths()
        && !reader.strips_dstream_footers()
    {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: a read-only map of a file this process does not write; a
        // file changed under it can only give wrong bytes, which the
        // decoder checks like any other trace (and the index's hash check
        // has already read it once).
        if let Ok(map) = unsafe { memmap2::Mmap::map(&file) }
            && map.len() as u64 == cap.size()
        {
            return Ok(Bytes::Mapped(map));
        }
    }
    cap.data().map(Bytes::Read).map_err(|e| e.to_string())
}

/// A capture's bytes, mapped or in memory.
enum Bytes<'a> {
    Mapped(memmap2::Mmap),
    Read(&'a [u8]),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Read(d) => d,
        }
    }
}

fn load_index(t: &Target) -> Result<(Capture, CaptureIndex), String> {
    load_index_with(t, |cap, path| cap.load_index(path))
}

/// [`load_index`] loading with `load` (the whole index, or what one use of
/// it needs).
fn load_index_with(
    t: &Target,
    load: impl FnOnce(&Capture, &Path) -> Result<CaptureIndex, coresight_decode::Error>,
) -> Result<(Capture, CaptureIndex), String> {
    let (cap, path) = load_capture(t)?;
    if !path.exists() {
        return Err(format!(
            "{}: no index (run `trc_index build {}` first)",
            path.display(),
            t.snapshot.display()
        ));
    }
    let ix = load(&cap, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((cap, ix))
}

fn run(cli: Cli) -> Result<String, Failed> {
    let mut out = String::new();
    match cli.cmd {
        Cmd::Build {
            target,
            granularity,
            limit,
        } => {
            let (cap, path) = load_capture(&target)?;
            let start = std::time::Instant::now();
            // Written as it is built: the index is never whole in memory.
            let ix = cap
                .index_to_file(
                    &IndexOptions {
                        granularity,
                        limit,
                        ..IndexOptions::default()
                    },
                    &path,
                )
                .map_err(|e| e.to_string())?;
            let secs = start.elapsed().as_secs_f64();
            let _ = writeln!(
                out,
                "{}: {} trace IDs, {} entries, {} of {} bytes indexed in {:.3} s",
                path.display(),
                ix.streams,
                ix.entries,
                ix.indexed.end - ix.indexed.start,
                ix.capture.size,
                secs
            );
        }
        Cmd::Show { target } => {
            let (cap, ix) = load_index(&target)?;
            show(&mut out, &cap, &ix);
        }
        Cmd::Query { target, what } => {
            let (_, ix) = load_index(&target)?;
            query(&mut out, &ix, what)?;
        }
        Cmd::Decode { target, id, window } => {
            let (cap, ix) = load_index(&target)?;
            let w = match (window.from, window.to, window.from_ts, window.to_ts) {
                (Some(from), Some(to), None, None) => Window::Bytes { from, to },
                (None, None, Some(from_ts), Some(to_ts)) => Window::Time { from_ts, to_ts },
                _ => return Err("decode needs --from and --to, or --from-ts and --to-ts".into()),
            };
            let tree = cap.tree(DecodeMode::FullDecode, |_| {}).map_err(|e| e.to_string())?;
            let d = decode_window(&ix, &capture_bytes(&cap)?, id, w, tree).map_err(|e| e.to_string())?;
            if let Some(note) = d.note {
                // An empty answer, not a failure: the reason goes to stderr.
                eprintln!(
                    "trc_index: ID 0x{id:02x}, bytes {}..{}: {note}",
                    d.window.from, d.window.end
                );
                return Ok(out);
            }
            let _ = writeln!(
                out,
                "# ID 0x{id:02x}: bytes {}..{}, decoded from the sync point at {}",
                d.window.from, d.window.end, d.window.start
            );
            for (index, id, e) in &d.elements {
                let _ = writeln!(out, "Idx:{index}; ID:{id:x}; {e}");
            }
            if let Some(e) = d.error {
                return Err(Failed { out, error: e });
            }
        }
        Cmd::Correlate { target, ids } => {
            let (cap, ix) = load_index(&target)?;
            let build = || cap.tree(DecodeMode::FullDecode, |_| {});
            let (merged, errors) =
                correlate_partial(&ix, &capture_bytes(&cap)?, &ids, &build).map_err(|e| e.to_string())?;
            for (ts, (index, id, e)) in merged {
                let _ = writeln!(out, "TS:{ts}; Idx:{index}; ID:{id:x}; {e}");
            }
            if !errors.is_empty() {
                let error = errors
                    .iter()
                    .map(|(id, e)| format!("trace ID 0x{id:02x}: {e}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(Failed { out, error });
            }
        }
        Cmd::Count {
            target,
            ids,
            threads,
            pieces,
        } => {
            let threads = threads.map_or_else(
                || std::thread::available_parallelism().map_or(1, |n| n.get()),
                usize::from,
            );
            let per_id = pieces.map_or(threads, usize::from);
            // Only the entries the split reads: the whole index has an
            // entry per sync point, timestamp and context, and grows with
            // the capture.
            let (cap, ix) = load_index_with(&target, |cap, path| cap.load_index_for_split(path, per_id))?;
            if let Err(error) = count(&mut out, &cap, &ix, ids, threads, per_id) {
                return Err(Failed { out, error });
            }
        }
    }
    Ok(out)
}

fn count(
    out: &mut String,
    cap: &Capture,
    ix: &CaptureIndex,
    ids: Vec<u8>,
    threads: usize,
    per_id: usize,
) -> Result<(), String> {
    let ids = if ids.is_empty() {
        ix.streams
            .iter()
            .filter(|s| s.counts().syncs() > 0)
            .map(|s| s.id)
            .collect()
    } else {
        ids
    };
    for &id in &ids {
        if ix.stream(id).is_none_or(|s| s.counts().syncs() == 0) {
            return Err(format!("trace ID 0x{id:02x} has no indexed sync point to decode from"));
        }
    }
    let build = || cap.tree(DecodeMode::FullDecode, |_| {});
    let start = std::time::Instant::now();
    let parts = decode_split_ids_partial(ix, &capture_bytes(cap)?, &ids, per_id, threads, &build, count_elem)
        .map_err(|e| e.to_string())?;
    let secs = start.elapsed().as_secs_f64();
    let line = |out: &mut String, what: String, c: &Counts| {
        let _ = writeln!(
            out,
            "{what}: {} elements, {} instruction ranges, {} instructions",
            c.elements, c.ranges, c.instructions
        );
    };
    let _ = writeln!(
        out,
        "# pieces: {}, threads: {threads}, decoded in {secs:.3} s",
        parts.len()
    );
    let mut all = Counts::default();
    // A piece stopped by a fatal error counts what came before it; the
    // errors follow the counts.
    let mut errors = Vec::new();
    for &id in &ids {
        let mut total = Counts::default();
        for (p, (_, c, e)) in ix
            .split_pieces(id, per_id)
            .iter()
            .zip(parts.iter().filter(|(i, _, _)| *i == id))
        {
            let stopped = if e.is_some() { " (stopped by a fatal error)" } else { "" };
            line(out, format!("0x{id:02x} bytes {}..{}{stopped}", p.start, p.end), c);
            total.add(c);
            if let Some(e) = e {
                errors.push(format!("trace ID 0x{id:02x}, bytes {}..{}: {e}", p.start, p.end));
            }
        }
        line(out, format!("0x{id:02x} total"), &total);
        all.add(&total);
    }
    if ids.len() > 1 {
        line(out, "total".into(), &all);
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(errors.join("\n")),
    }
}

fn show(out: &mut String, cap: &Capture, ix: &CaptureIndex) {
    let fmt = match ix.format {
        IndexedFormat::Single => "single unformatted source".to_string(),
        IndexedFormat::Formatted {
            mem_aligned,
            fsyncs,
            hsyncs,
        } => format!(
            "formatted frames ({})",
            if mem_aligned {
                "memory aligned"
            } else if hsyncs {
                "frame and half-frame syncs"
            } else if fsyncs {
                "frame syncs"
            } else {
                "?"
            }
        ),
    };
    let _ = writeln!(
        out,
        "Capture: {} ({} bytes, buffer {}), {fmt}",
        cap.path.display(),
        ix.capture.size,
        cap.buffer
    );
    let partial = if ix.is_complete() { "" } else { " (partial)" };
    let _ = writeln!(out, "Indexed: bytes {}..{}{partial}", ix.indexed.start, ix.indexed.end);
    if let Some(s) = &ix.source {
        let _ = writeln!(
            out,
            "Source index: {} blocks of {} bytes, {} frame syncs, {} formatter triggers",
            s.blocks.len(),
            s.granularity,
            s.frame_syncs.len(),
            s.triggers.len()
        );
    }
    let _ = writeln!(
        out,
        "{:<6} {:<8} {:>8} {:>8} {:>8} {:>10}  {:<24} timestamps",
        "ID", "protocol", "syncs", "ts", "events", "entries", "bytes (first..last entry)"
    );
    for s in &ix.streams {
        let c = s.counts();
        let span = match (s.entries.first(), s.entries.last()) {
            (Some(a), Some(b)) => format!("{}..{}", a.index, b.index),
            _ => "-".into(),
        };
        let ts = ix
            .timestamp_range(s.id)
            .map_or("-".to_string(), |(a, b)| format!("{a:#x}..{b:#x}"));
        let _ = writeln!(
            out,
            "0x{:02x}   {:<8} {:>8} {:>8} {:>8} {:>10}  {:<24} {ts}",
            s.id,
            s.protocol,
            c.syncs(),
            c.timestamps(),
            c.events(),
            s.entries.len(),
            span
        );
    }
    let events = ix.events();
    let _ = writeln!(out, "Events and triggers: {}", events.len());
    for h in events.iter().take(20) {
        let who = h.id.map_or("formatter".to_string(), |id| format!("ID 0x{id:02x}"));
        let _ = writeln!(
            out,
            "  Idx:{} {who} {} {:#x}",
            h.entry.index,
            h.entry.kind.name(),
            h.entry.value
        );
    }
    if events.len() > 20 {
        let _ = writeln!(
            out,
            "  ... {} more (trc_index query SNAPSHOT events)",
            events.len() - 20
        );
    }
}

fn query(out: &mut String, ix: &CaptureIndex, what: Query) -> Result<(), String> {
    let need = |id: u8| {
        ix.stream(id)
            .map(|_| ())
            .ok_or_else(|| format!("trace ID 0x{id:02x} is not in the index"))
    };
    match what {
        Query::Syncs { id, at } => {
            need(id)?;
            for e in ix.syncs_from(id, at) {
                let _ = writeln!(out, "{}", e.index);
            }
        }
        Query::Time { id, from_ts, to_ts } => {
            need(id)?;
            let w = ix.time_window(id, from_ts, to_ts).ok_or_else(|| {
                format!("trace ID 0x{id:02x}: no timestamp in {from_ts}..={to_ts} after a sync point")
            })?;
            let _ = writeln!(out, "start {} from {} end {}", w.start, w.from, w.end);
        }
        Query::Events => {
            for h in ix.events() {
                let who = h.id.map_or("formatter".to_string(), |id| format!("0x{id:02x}"));
                let _ = writeln!(
                    out,
                    "{} {who} {} {:#x}",
                    h.entry.index,
                    h.entry.kind.name(),
                    h.entry.value
                );
            }
        }
        Query::Ids { from, to } => {
            let ids: Vec<String> = ix.ids_in(from..to).iter().map(|i| format!("0x{i:02x}")).collect();
            let _ = writeln!(out, "{}", ids.join(" "));
        }
        Query::Counts => {
            for s in &ix.streams {
                let c = s.counts();
                let mut line = format!("0x{:02x} {}", s.id, s.protocol);
                for k in EntryKind::ALL {
                    if c.get(k) > 0 {
                        let _ = write!(line, " {}={}", k.name(), c.get(k));
                    }
                }
                let _ = writeln!(out, "{line}");
            }
        }
    }
    Ok(())
}
