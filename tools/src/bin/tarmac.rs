//! `tarmac`: read, profile and compare Tarmac instruction traces.
//!
//! ```text
//! tarmac profile TRACE [--image ELF [--load-offset OFF]] [--no-offsets]
//! tarmac calltree TRACE [--image ELF [--load-offset OFF]] [--no-offsets] [--debug-calls]
//! tarmac flamegraph TRACE [--image ELF [--load-offset OFF]] [--no-offsets] [-o OUT]
//! tarmac callinfo TRACE FUNCTION... [--image ELF [--load-offset OFF]] [--callers]
//! tarmac vcd TRACE [--image ELF] [-o OUT] [--no-date] [--use-tarmac-timestamps]
//! tarmac compare A B [-w N] [--skip-time] [--start ADDR] [--boot N] [--skip-remainder] [--stop-first]
//!                   [--registers] [--memory] [--context N] [--show N]
//! tarmac decode SNAPSHOT_DIR [-o OUT] [--flow] [--exceptions] [--trace-matcher]
//! tarmac dump TRACE [--events]
//! tarmac browse TRACE [--image ELF] [--index FILE]
//! ```
//! profile, calltree, flamegraph, vcd and browse take `--index[=FILE]`: the
//! trace's persistent index (default TRACE.tidx), built on the first run,
//! reused while the trace's size, modification time and first and last
//! 64 KiB are unchanged, rebuilt otherwise; `--only-index` builds it and
//! stops. browse always uses one.
//! Every command takes `-q` (no warnings), `-v` (what was read, on
//! standard error), `--li`/`--bi` (the traced system's byte order, else the
//! image's, else little-endian) and `--progress` (a bar on standard error
//! while a large trace file is read, when standard error is a terminal).
//! TRACE `-` is standard input. A trace whose last line is cut (no line
//! ending) and does not parse is read up to that line, with a warning, as
//! upstream does; a trace with no records is an error.
//!
//! Exit status: 0 done, 1 failed (a file that could not be read or
//! written), 2 bad usage; `compare`, as diff(1): 0 same, 1 different, 2
//! trouble.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use coresight_tarmac::callinfo::{Query, write_callinfo};
use coresight_tarmac::calls::{CallAnalyzer, CallTree, Naming};
use coresight_tarmac::compare::{self, CompareOptions};
use coresight_tarmac::events::EventPrinter;
use coresight_tarmac::index::{DEFAULT_STEP, Fingerprint, IndexBuilder, TraceIndex};
use coresight_tarmac::symbols::{EM_AARCH64, EM_ARM, Symbols};
use coresight_tarmac::vcd::{VcdOptions, VcdWriter, function_changes};
use coresight_tarmac::writer::{WriterOptions, snapshot_to_tarmac_with_registry};
use coresight_tarmac::{Iset, Reader, ReaderOptions};
use coresight_tools::cli::{Progress, ProgressReader};

#[path = "tarmac/browse.rs"]
mod browse;

#[derive(Parser)]
#[command(
    name = "tarmac",
    version,
    about = "Read, profile and compare Tarmac instruction traces",
    after_help = "Exit status: 0 done; 1 failed (a file that could not be read or written, a trace that \
                  could not be parsed or decoded); 2 bad usage. compare, as diff: 0 same, 1 different, 2 trouble."
)]
struct Cli {
    /// No warnings (a cut last line, an image of another architecture).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Say on standard error what was read: the image's symbols, the
    /// trace's lines, records and instructions, the calls found.
    #[arg(short, long, global = true)]
    verbose: bool,
    /// The trace is from a little-endian system (the default unless the
    /// image is big-endian): how memory contents written in memory order
    /// and load/store diagrams are read.
    #[arg(long, global = true, conflicts_with = "bi")]
    li: bool,
    /// The trace is from a big-endian system.
    #[arg(long, global = true)]
    bi: bool,
    /// Progress bar on standard error while a trace file is read: auto
    /// shows it for a file of 1 MiB or more when standard error is a
    /// terminal; always, whatever the size; never.
    #[arg(long, global = true, value_enum, default_value_t = Progress::Auto, value_name = "WHEN")]
    progress: Progress,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args)]
struct Input {
    /// Tarmac trace file (`-` for standard input), or a snapshot directory
    /// (decoded, with the link register written at each call).
    trace: PathBuf,
    /// Assume T32 where a line gives no instruction set state.
    #[arg(long)]
    implicit_thumb: bool,
    /// Use the trace's persistent index (default FILE: TRACE.tidx): read
    /// it when it matches the trace, else build it in this run's one pass
    /// and save it. profile, calltree, flamegraph and vcd then need no
    /// pass of their own for the calls.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true)]
    index: Option<Option<PathBuf>>,
    /// Build (or bring up to date) the index and stop.
    #[arg(long)]
    only_index: bool,
}

#[derive(Args)]
struct Image {
    /// ELF image of the traced program, for function names.
    #[arg(long)]
    image: Option<PathBuf>,
    /// Where the image was loaded relative to its link address (hex, may
    /// be negative: `-0x1000`): position-independent code, shared libraries.
    #[arg(long, value_parser = parse_offset, allow_hyphen_values = true, requires = "image")]
    load_offset: Option<u64>,
    /// Name a function entered past its start by its symbol alone, without
    /// upstream's ` + 0xPC`.
    #[arg(long)]
    no_offsets: bool,
    /// Print C++ and Rust function names demangled (`demo::fib(int)` for
    /// `_ZN4demo3fibEi`); off by default, as upstream prints them mangled.
    #[arg(long, requires = "image")]
    demangle: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Per-function call count and time (including callees).
    Profile {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        image: Image,
    },
    /// The tree of calls and returns, with times and line numbers.
    Calltree {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        image: Image,
        /// Print each transfer of control and what it was taken for.
        #[arg(long)]
        debug_calls: bool,
    },
    /// Folded stacks for flamegraph.pl.
    Flamegraph {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        image: Image,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Every execution of functions or addresses, with time, line and byte
    /// offset (upstream's tarmac-callinfo).
    Callinfo {
        #[command(flatten)]
        input: Input,
        /// Function name (`name#N`: the Nth, from 0, of several of that
        /// name; needs --image) or hex address (`0x...`).
        #[arg(required = true, value_name = "FUNCTION")]
        functions: Vec<String>,
        #[command(flatten)]
        image: Image,
        /// After each execution, the call that entered the function there
        /// (`called from`) or the function it ran in (`in`).
        #[arg(long)]
        callers: bool,
    },
    /// Registers, instructions, functions and memory accesses over time as
    /// a Value Change Dump for GTKWave (upstream's tarmac-vcd).
    Vcd {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        image: Image,
        /// Write to this file (`-`: standard output); default TRACE.vcd.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// No `$date` in the header (the same output on every run).
        #[arg(long)]
        no_date: bool,
        /// Step at the instructions' timestamps rather than once per
        /// instruction.
        #[arg(long)]
        use_tarmac_timestamps: bool,
    },
    /// Compare two traces as Trace Matcher does (exit 0 same, 1 different, 2 trouble).
    ///
    /// Instructions are matched in order, or within a window (-w); with
    /// --registers and --memory, the register writes and memory accesses
    /// logged after each matched instruction must agree too. Each
    /// difference is shown where it happened, with the instructions around
    /// it in both traces.
    Compare {
        /// Tarmac file or snapshot directory.
        a: PathBuf,
        /// Tarmac file or snapshot directory.
        b: PathBuf,
        /// Window: an instruction matches an equal one at most N places
        /// from its own place in the other trace (0, the default: strictly
        /// in order; 1: neighbours may swap). One moved more than N places
        /// is a difference, reported where it was and where it went; a dropped
        /// or inserted one is one difference, and the traces line up again
        /// after it. (Where a loop repeats instructions, one moved by about a
        /// whole iteration is taken as dropped and inserted.)
        #[arg(short, long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..1 << 20))]
        window: u32,
        /// Records that differ only in time are the same.
        #[arg(long)]
        skip_time: bool,
        /// Condition-failed and executed are the same.
        #[arg(long)]
        ignore_ccfail: bool,
        /// Start each trace at its first instruction at this address (hex).
        #[arg(long, value_parser = parse_hex)]
        start: Option<u64>,
        /// Skip this many instructions (a boot section) at the start of each trace.
        #[arg(long, default_value_t = 0)]
        boot: usize,
        /// When one trace ends, ignore the rest of the other.
        #[arg(long)]
        skip_remainder: bool,
        /// Stop at the first difference.
        #[arg(long)]
        stop_first: bool,
        /// Instructions of context shown before and after a difference, from each trace.
        #[arg(long, default_value_t = 3)]
        context: usize,
        /// Show this many differences (the first ones); the rest are counted.
        #[arg(long, default_value_t = 1)]
        show: usize,
        /// Compare the register writes (R lines) of matched instructions: the
        /// same registers with the same values, in any order.
        #[arg(long)]
        registers: bool,
        /// Compare the memory accesses (MR/MW, LD/ST, MU lines) of matched
        /// instructions: direction, size, address and value, in any order.
        #[arg(long)]
        memory: bool,
        /// Assume T32 where a line gives no instruction set state.
        #[arg(long)]
        implicit_thumb: bool,
    },
    /// Decode a snapshot directory and write its instructions as Tarmac.
    Decode {
        /// Snapshot directory (snapshot.ini).
        snapshot: PathBuf,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// FD/FI/FR lines at branch targets.
        #[arg(long)]
        flow: bool,
        /// E lines for exceptions.
        #[arg(long)]
        exceptions: bool,
        /// Trace Matcher form (numeric CPU, mode without security).
        #[arg(long)]
        trace_matcher: bool,
        /// Leave out the disassembly.
        #[arg(long)]
        no_disasm: bool,
        /// The link register's new value after each call (R X30 / R r14).
        #[arg(long)]
        link_registers: bool,
    },
    /// Browse the trace in the terminal: step and jump through it with
    /// the registers at each instruction (upstream's tarmac-browser).
    ///
    /// Keys: j/Down next instruction, k/Up previous, g then a line number
    /// (or t and a time) and Enter, r the current call's return, n the
    /// function's next call, / then a hex address or symbol and Enter the
    /// next time it is executed, m then a hex address or symbol and Enter
    /// a memory window there (bytes the trace has not shown are --), f
    /// fold the current call into one line, u unfold it, q quit.
    Browse {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        image: Image,
    },
    /// Print the records read (or, with --events, the upstream parser's events).
    Dump {
        #[command(flatten)]
        input: Input,
        /// Print the events of Arm's tarmac-trace-utilities parser for each
        /// record instead of the records.
        #[arg(long)]
        events: bool,
    },
}

fn parse_offset(s: &str) -> Result<u64, String> {
    match s.strip_prefix('-') {
        Some(rest) => parse_hex(rest).map(u64::wrapping_neg),
        None => parse_hex(s.strip_prefix('+').unwrap_or(s)),
    }
}

fn parse_hex(s: &str) -> Result<u64, String> {
    let t = s.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(t, 16).map_err(|e| format!("{s}: not a hex address ({e})"))
}

/// How the whole run reports: warnings, what was read, progress, and the
/// byte order the trace's system was said to have.
#[derive(Clone, Copy)]
struct Report {
    quiet: bool,
    verbose: bool,
    progress: Progress,
    /// `--bi` (`Some(true)`) or `--li` (`Some(false)`).
    big_endian: Option<bool>,
}

impl Report {
    fn warn(&self, msg: std::fmt::Arguments) {
        if !self.quiet {
            eprintln!("tarmac: warning: {msg}");
        }
    }
    fn info(&self, msg: std::fmt::Arguments) {
        if self.verbose {
            eprintln!("tarmac: {msg}");
        }
    }
}

/// A Tarmac file, or a snapshot directory decoded to Tarmac in memory.
fn open(path: &Path, implicit_thumb: bool) -> Result<Reader<Box<dyn BufRead>>, String> {
    open_with_progress(path, implicit_thumb, Progress::Never).map(|(r, _)| r)
}

/// [`open`], with a progress bar over a trace file's bytes as `progress`
/// says (none for standard input or a snapshot).
fn open_with_progress(
    path: &Path,
    implicit_thumb: bool,
    progress: Progress,
) -> Result<(Reader<Box<dyn BufRead>>, indicatif::ProgressBar), String> {
    let hidden = indicatif::ProgressBar::hidden();
    let opts = ReaderOptions {
        implicit_iset: implicit_thumb.then_some(Iset::Thumb),
    };
    if path.as_os_str() == "-" {
        return Ok((
            Reader::with_options(Box::new(BufReader::with_capacity(1 << 16, std::io::stdin())), opts),
            hidden,
        ));
    }
    if path.is_dir() {
        let mut text = Vec::new();
        let wopts = WriterOptions {
            link_register_lines: true,
            ..Default::default()
        };
        snapshot_to_tarmac_with_registry(path, riscv_trace::registry(), &mut text, wopts)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok((Reader::with_options(Box::new(std::io::Cursor::new(text)), opts), hidden));
    }
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = coresight_tools::cli::progress_bar(len, progress);
    let src = BufReader::with_capacity(1 << 16, ProgressReader::new(f, bar.clone()));
    Ok((Reader::with_options(Box::new(src), opts), bar))
}

/// Reads every record of the trace into `f`. A parse error on a cut last
/// line ends the trace with a warning; a trace without records is an error.
/// `f` is given each record and the byte offset of its line.
fn read_trace(input: &Input, report: &Report, mut f: impl FnMut(&coresight_tarmac::Record, u64)) -> Result<(), String> {
    let name = input.trace.display();
    let (mut r, bar) = open_with_progress(&input.trace, input.implicit_thumb, report.progress)?;
    let (mut records, mut instructions) = (0u64, 0u64);
    let res = loop {
        let e = match r.next_record_with_offset() {
            Ok(Some((pos, rec))) => {
                records += 1;
                instructions += matches!(rec.kind, coresight_tarmac::RecordKind::Instruction(_)) as u64;
                f(&rec, pos);
                continue;
            }
            Ok(None) => break Ok(()),
            Err(e) => e,
        };
        // A read error (column 0) is never taken for a cut line.
        if r.at_partial_line() && e.column > 0 {
            bar.finish_and_clear();
            report.warn(format_args!(
                "{name}: {e}; ignoring this partial last line (trace truncated?)"
            ));
            break Ok(());
        }
        break Err(format!("{name}: {e}"));
    };
    bar.finish_and_clear();
    res?;
    report.info(format_args!(
        "{name}: {} lines, {records} records, {instructions} instructions",
        r.line_number()
    ));
    if records == 0 {
        return Err(format!("{name}: the trace contains no events"));
    }
    Ok(())
}

fn analyse(input: &Input, report: &Report, log: bool) -> Result<CallAnalyzer, String> {
    let a = if log {
        CallAnalyzer::new().with_log_to(Box::new(std::io::BufWriter::new(std::io::stdout())))
    } else {
        CallAnalyzer::new()
    };
    analyse_with(a, input, report)
}

fn analyse_with(mut a: CallAnalyzer, input: &Input, report: &Report) -> Result<CallAnalyzer, String> {
    read_trace(input, report, |rec, pos| a.feed_at(rec, pos))?;
    a.flush_log().map_err(|e| format!("standard output: {e}"))?;
    Ok(a)
}

fn symbols(image: &Image, report: &Report) -> Result<Option<Symbols>, String> {
    let Some(path) = image.image.as_deref() else {
        return Ok(None);
    };
    let mut s = Symbols::from_elf_file(path)?;
    if let Some(off) = image.load_offset {
        s.relocate(off);
    }
    if image.demangle {
        s.demangle();
    }
    let elf_be = s.big_endian().unwrap_or(false);
    if let Some(be) = report.big_endian
        && be != elf_be
    {
        // Upstream warns the same way; the option wins.
        report.warn(format_args!(
            "{}: the image is {}-endian but {} says the trace is {}-endian",
            path.display(),
            if elf_be { "big" } else { "little" },
            if be { "--bi" } else { "--li" },
            if be { "big" } else { "little" },
        ));
    }
    report.info(format_args!(
        "{}: {} symbols, ELF machine {}, {}-endian{}{}",
        path.display(),
        s.len(),
        s.machine().unwrap_or(0),
        if elf_be { "big" } else { "little" },
        match image.load_offset {
            Some(off) => format!(", loaded at offset {:#x}", off),
            None => String::new(),
        },
        if image.demangle { ", names demangled" } else { "" },
    ));
    Ok(Some(s))
}

/// Warns when the image is for another architecture than the trace's
/// instructions: its names would be of the wrong program.
fn check_architecture(image: &Image, syms: Option<&Symbols>, isets: (bool, bool), input: &Input, report: &Report) {
    let (Some(path), Some(machine)) = (&image.image, syms.and_then(Symbols::machine)) else {
        return;
    };
    let (a64, a32) = isets;
    let elf_arch = match machine {
        EM_AARCH64 => "AArch64",
        EM_ARM => "AArch32",
        _ => "neither AArch64 nor AArch32",
    };
    let mismatch = match machine {
        EM_AARCH64 => a32 && !a64,
        EM_ARM => a64 && !a32,
        _ => a64 || a32,
    };
    if mismatch {
        let trace_arch = if a64 { "A64" } else { "A32/T32" };
        report.warn(format_args!(
            "{}: the image is {elf_arch} (ELF machine {machine}) but {} holds {trace_arch} \
             instructions; function names may be wrong",
            path.display(),
            input.trace.display()
        ));
    }
}

/// Runs `f` on the output (a file or standard output), buffered, and
/// flushes it.
fn with_output(output: Option<&Path>, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    let (mut w, name): (Box<dyn Write>, String) = match output {
        Some(p) => (
            Box::new(std::io::BufWriter::with_capacity(
                1 << 16,
                File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
            )),
            p.display().to_string(),
        ),
        None => (
            Box::new(std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock())),
            "standard output".into(),
        ),
    };
    f(&mut *w).and_then(|_| w.flush()).map_err(|e| format!("{name}: {e}"))
}

/// The index file of `input`: the one given, else TRACE.tidx.
fn index_path(input: &Input) -> PathBuf {
    match &input.index {
        Some(Some(p)) => p.clone(),
        _ => {
            let mut p = input.trace.clone().into_os_string();
            p.push(".tidx");
            p.into()
        }
    }
}

/// The trace's index: read from its file when that matches the trace,
/// else built in one pass and saved (a file that cannot be written is a
/// warning; the index built is used all the same).
fn load_or_build_index(input: &Input, report: &Report) -> Result<TraceIndex, String> {
    let name = input.trace.display();
    if input.trace.as_os_str() == "-" || input.trace.is_dir() {
        return Err(format!(
            "{name}: an index needs a trace file, not standard input or a snapshot"
        ));
    }
    let path = index_path(input);
    let fp = Fingerprint::of_file(&input.trace).map_err(|e| format!("{name}: {e}"))?;
    if path.exists() {
        match TraceIndex::read_file(&path) {
            Ok(ix) if ix.fingerprint == fp => {
                report.info(format_args!(
                    "{}: index up to date, {} calls",
                    path.display(),
                    ix.calls.acts.len()
                ));
                return Ok(ix);
            }
            Ok(_) => report.info(format_args!(
                "{}: the trace has changed; rebuilding the index",
                path.display()
            )),
            Err(e) => report.warn(format_args!("{e}; rebuilding the index")),
        }
    }
    let mut b = IndexBuilder::new(DEFAULT_STEP);
    read_trace(input, report, |rec, pos| b.feed_at(rec, pos))?;
    let ix = b.finish(fp);
    match ix.write_file(&path) {
        Ok(()) => report.info(format_args!("{}: index written", path.display())),
        Err(e) => report.warn(format_args!("{}: {e}; the index is not kept", path.display())),
    }
    Ok(ix)
}

/// The call tree of the trace, with the image's names.
fn tree_and_names(
    input: &Input,
    image: &Image,
    report: &Report,
    log: bool,
) -> Result<(CallTree, Option<Symbols>), String> {
    let syms = symbols(image, report)?;
    let tree = if input.index.is_some() && !log {
        let ix = load_or_build_index(input, report)?;
        check_architecture(image, syms.as_ref(), (ix.aarch64, ix.aarch32), input, report);
        ix.calls
    } else {
        let a = analyse(input, report, log)?;
        check_architecture(image, syms.as_ref(), a.instruction_sets(), input, report);
        a.finish()
    };
    report.info(format_args!(
        "{}: {} calls found, {} deep at most",
        input.trace.display(),
        tree.acts.len().saturating_sub(1),
        tree.acts.iter().map(|a| a.depth).max().unwrap_or(0)
    ));
    Ok((tree, syms))
}

/// The time now as C's asctime writes it (`Wed Nov 25 20:05:38 2026`), in
/// UTC, for the VCD's `$date`.
fn asctime_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {}{:3} {:02}:{:02}:{:02} {year}",
        WD[days.rem_euclid(7) as usize],
        MON[(month - 1) as usize],
        day,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A trace being compared: a cut last line ends it with a warning, as in
/// the other commands.
struct CompareInput<'n> {
    reader: Reader<Box<dyn BufRead>>,
    name: &'n str,
    quiet: bool,
}

impl compare::RecordSource for CompareInput<'_> {
    fn next_record(&mut self) -> Result<Option<coresight_tarmac::Record<'_>>, coresight_tarmac::TarmacError> {
        self.reader.next_record()
    }
    fn ends_at(&mut self, e: &coresight_tarmac::TarmacError) -> bool {
        // A read error (column 0) is never taken for a cut line.
        let cut = self.reader.at_partial_line() && e.column > 0;
        if cut && !self.quiet {
            eprintln!(
                "tarmac: warning: {}: {e}; ignoring this partial last line (trace truncated?)",
                self.name
            );
        }
        cut
    }
}

/// A failure: the message and the exit status.
struct Failed(String, u8);

impl From<String> for Failed {
    fn from(m: String) -> Failed {
        Failed(m, 1)
    }
}

fn run(cli: Cli) -> Result<ExitCode, Failed> {
    let report = Report {
        quiet: cli.quiet,
        verbose: cli.verbose,
        progress: if cli.quiet { Progress::Never } else { cli.progress },
        big_endian: if cli.bi {
            Some(true)
        } else if cli.li {
            Some(false)
        } else {
            None
        },
    };
    fn naming<'a>(syms: &'a Option<Symbols>, image: &Image) -> Naming<'a> {
        Naming {
            symbols: syms.as_ref(),
            no_offsets: image.no_offsets,
        }
    }
    // --only-index: build or refresh the index, and nothing else.
    if let Cmd::Profile { input, .. }
    | Cmd::Calltree { input, .. }
    | Cmd::Flamegraph { input, .. }
    | Cmd::Callinfo { input, .. }
    | Cmd::Vcd { input, .. }
    | Cmd::Browse { input, .. }
    | Cmd::Dump { input, .. } = &cli.cmd
        && input.only_index
    {
        load_or_build_index(input, &report)?;
        return Ok(ExitCode::SUCCESS);
    }
    match cli.cmd {
        Cmd::Browse { input, image } => {
            let syms = symbols(&image, &report)?;
            let ix = load_or_build_index(&input, &report)?;
            check_architecture(&image, syms.as_ref(), (ix.aarch64, ix.aarch32), &input, &report);
            browse::Browser::new(&input.trace, ix, syms)?.run()?;
        }
        Cmd::Profile { input, image } => {
            let (tree, syms) = tree_and_names(&input, &image, &report, false)?;
            with_output(None, |w| tree.write_profile(w, naming(&syms, &image)))?;
        }
        Cmd::Calltree {
            input,
            image,
            debug_calls,
        } => {
            let (tree, syms) = tree_and_names(&input, &image, &report, debug_calls)?;
            with_output(None, |w| tree.write_calltree(w, naming(&syms, &image)))?;
        }
        Cmd::Flamegraph { input, image, output } => {
            let (tree, syms) = tree_and_names(&input, &image, &report, false)?;
            with_output(output.as_deref(), |w| tree.write_flamegraph(w, naming(&syms, &image)))?;
        }
        Cmd::Callinfo {
            input,
            functions,
            image,
            callers,
        } => {
            let syms = symbols(&image, &report)?;
            let queries: Vec<Query> = functions.iter().map(|f| Query::parse(f)).collect();
            let watch = queries.iter().filter_map(|q| q.address(syms.as_ref()));
            let a = analyse_with(CallAnalyzer::new().with_watch(watch), &input, &report)?;
            check_architecture(&image, syms.as_ref(), a.instruction_sets(), &input, &report);
            let tree = callers.then(|| a.finish());
            let names = naming(&syms, &image);
            with_output(None, |w| {
                write_callinfo(w, &queries, syms.as_ref(), &a, tree.as_ref().map(|t| (t, names)))
            })?;
        }
        Cmd::Vcd {
            input,
            image,
            output,
            no_date,
            use_tarmac_timestamps,
        } => {
            if input.trace.as_os_str() == "-" {
                return Err(Failed(
                    "vcd reads the trace twice (the calls, then the signals): give a file, not standard input".into(),
                    2,
                ));
            }
            let syms = symbols(&image, &report)?;
            // With an index, the calls come from it: one pass of the trace
            // instead of two.
            let (tree, isets) = if input.index.is_some() {
                let ix = load_or_build_index(&input, &report)?;
                (ix.calls, (ix.aarch64, ix.aarch32))
            } else {
                let a = analyse(&input, &report, false)?;
                (a.finish(), a.instruction_sets())
            };
            check_architecture(&image, syms.as_ref(), isets, &input, &report);
            let functions = function_changes(&tree, naming(&syms, &image));
            let opts = VcdOptions {
                use_timestamps: use_tarmac_timestamps,
                date: (!no_date).then(asctime_now),
                version: concat!("tarmac ", env!("CARGO_PKG_VERSION")).into(),
                comment: "Generated by tarmac vcd.".into(),
                big_endian: report
                    .big_endian
                    .or_else(|| syms.as_ref().and_then(Symbols::big_endian))
                    .unwrap_or(false),
            };
            let out = output.unwrap_or_else(|| {
                let mut p = input.trace.clone().into_os_string();
                p.push(".vcd");
                p.into()
            });
            let out = (out.as_os_str() != "-").then_some(out);
            with_output(out.as_deref(), |w| {
                let mut v = VcdWriter::new(w, isets.0, functions, opts)?;
                let mut err = None;
                let read = read_trace(&input, &report, |rec, _| {
                    if err.is_none()
                        && let Err(e) = v.feed(rec)
                    {
                        err = Some(e);
                    }
                    for warning in v.take_warnings() {
                        report.warn(format_args!("{}: {warning}", input.trace.display()));
                    }
                });
                if let Some(e) = read.err().or(err) {
                    return Err(std::io::Error::other(e));
                }
                v.finish()
            })?;
        }
        Cmd::Compare {
            a,
            b,
            window,
            skip_time,
            ignore_ccfail,
            start,
            boot,
            skip_remainder,
            stop_first,
            context,
            show,
            registers,
            memory,
            implicit_thumb,
        } => {
            let opts = CompareOptions {
                window: window as usize,
                skip_time,
                ignore_effect: ignore_ccfail,
                start_addr: start,
                boot_size: boot,
                skip_remainder,
                stop_at_first: stop_first,
                context,
                show,
                registers,
                memory,
            };
            // Trouble is exit status 2 here: 1 says the traces differ.
            let trouble = |m: String| Failed(m, 2);
            let (na, nb) = (a.display().to_string(), b.display().to_string());
            let mut ra = CompareInput {
                reader: open(&a, implicit_thumb).map_err(trouble)?,
                name: &na,
                quiet: report.quiet,
            };
            let mut rb = CompareInput {
                reader: open(&b, implicit_thumb).map_err(trouble)?,
                name: &nb,
                quiet: report.quiet,
            };
            let rep = compare::compare(&mut ra, &mut rb, &opts).map_err(|e| {
                let name = if e.trace == 0 { &na } else { &nb };
                trouble(format!("{name}: {}", e.error))
            })?;
            with_output(None, |w| w.write_all(rep.text(&na, &nb).as_bytes())).map_err(trouble)?;
            return Ok(if rep.same() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        Cmd::Decode {
            snapshot,
            output,
            flow,
            exceptions,
            trace_matcher,
            no_disasm,
            link_registers,
        } => {
            let opts = WriterOptions {
                flow_lines: flow,
                exception_lines: exceptions,
                trace_matcher,
                cpu: 0,
                disassemble: !no_disasm,
                link_register_lines: link_registers,
            };
            let mut out: Box<dyn Write> = match &output {
                Some(p) => Box::new(std::io::BufWriter::new(
                    File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
                )),
                None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            };
            snapshot_to_tarmac_with_registry(&snapshot, riscv_trace::registry(), &mut out, opts)
                .map_err(|e| format!("{}: {e}", snapshot.display()))?;
            out.flush().map_err(|e| format!("output: {e}"))?;
        }
        Cmd::Dump { input, events } => {
            let mut printer = EventPrinter::new().with_big_endian(report.big_endian.unwrap_or(false));
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut text = String::new();
            let mut err = None;
            read_trace(&input, &report, |rec, _| {
                if err.is_some() {
                    return;
                }
                text.clear();
                if events {
                    printer.write(rec, &mut text);
                } else {
                    use std::fmt::Write as _;
                    let _ = writeln!(text, "{} t={} {:?}", rec.line, rec.time, rec.kind);
                }
                if let Err(e) = out.write_all(text.as_bytes()) {
                    err = Some(e);
                }
            })?;
            if let Some(e) = err {
                return Err(format!("standard output: {e}").into());
            }
            out.flush().map_err(|e| format!("standard output: {e}"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    // Snapshot warnings (a missing memory dump...) on stderr.
    coresight_tools::cli::init_logging("tarmac", "warn");
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(c) => c,
        Err(Failed(e, code)) => {
            eprintln!("tarmac: {e}");
            ExitCode::from(code)
        }
    }
}
