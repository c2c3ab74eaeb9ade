//! `tarmac`: read, profile and compare Tarmac instruction traces.
//!
//! ```text
//! tarmac profile TRACE [--image ELF]
//! tarmac calltree TRACE [--image ELF] [--debug-calls]
//! tarmac flamegraph TRACE [--image ELF] [-o OUT]
//! tarmac compare A B [-w N] [--skip-time] [--start ADDR] [--boot N] [--skip-remainder] [--stop-first]
//! tarmac decode SNAPSHOT_DIR [-o OUT] [--flow] [--exceptions] [--trace-matcher]
//! tarmac dump TRACE [--events]
//! ```
//! Exit status: 0 done, 1 failed (a file that could not be read or
//! written), 2 bad usage; `compare`, as diff(1): 0 same, 1 different, 2
//! trouble.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use coresight_tarmac::calls::CallAnalyzer;
use coresight_tarmac::compare::{self, CompareOptions};
use coresight_tarmac::events::EventPrinter;
use coresight_tarmac::symbols::Symbols;
use coresight_tarmac::writer::{WriterOptions, snapshot_to_tarmac_with_registry};
use coresight_tarmac::{Iset, Reader, ReaderOptions};

#[derive(Parser)]
#[command(
    name = "tarmac",
    version,
    about = "Read, profile and compare Tarmac instruction traces",
    after_help = "Exit status: 0 done; 1 failed (a file that could not be read or written, a trace that \
                  could not be parsed or decoded); 2 bad usage. compare, as diff: 0 same, 1 different, 2 trouble."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args)]
struct Input {
    /// Tarmac trace file, or a snapshot directory (decoded, with the link
    /// register written at each call).
    trace: PathBuf,
    /// Assume T32 where a line gives no instruction set state.
    #[arg(long)]
    implicit_thumb: bool,
}

#[derive(Args)]
struct Image {
    /// ELF image of the traced program, for function names.
    #[arg(long)]
    image: Option<PathBuf>,
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
    /// Compare the instruction streams of two traces (exit 0 same, 1 different).
    Compare {
        /// Tarmac file or snapshot directory.
        a: PathBuf,
        /// Tarmac file or snapshot directory.
        b: PathBuf,
        /// Window: records up to N apart may match out of order.
        #[arg(short, long, default_value_t = 1)]
        window: usize,
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
        /// Records of context around the first difference.
        #[arg(long, default_value_t = 3)]
        context: usize,
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

fn parse_hex(s: &str) -> Result<u64, String> {
    let t = s.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(t, 16).map_err(|e| format!("{s}: not a hex address ({e})"))
}

/// A Tarmac file, or a snapshot directory decoded to Tarmac in memory.
fn open(path: &Path, implicit_thumb: bool) -> Result<Reader<Box<dyn BufRead>>, String> {
    let opts = ReaderOptions {
        implicit_iset: implicit_thumb.then_some(Iset::Thumb),
    };
    if path.is_dir() {
        let mut text = Vec::new();
        let wopts = WriterOptions {
            link_register_lines: true,
            ..Default::default()
        };
        snapshot_to_tarmac_with_registry(path, riscv_trace::registry(), &mut text, wopts)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(Reader::with_options(Box::new(std::io::Cursor::new(text)), opts));
    }
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Reader::with_options(
        Box::new(BufReader::with_capacity(1 << 16, f)),
        opts,
    ))
}

fn analyse(input: &Input, log: bool) -> Result<CallAnalyzer, String> {
    let mut r = open(&input.trace, input.implicit_thumb)?;
    let mut a = if log {
        CallAnalyzer::new().with_log()
    } else {
        CallAnalyzer::new()
    };
    while let Some(rec) = r.next_record().map_err(|e| format!("{}: {e}", input.trace.display()))? {
        a.feed(&rec);
    }
    Ok(a)
}

fn symbols(image: &Image) -> Result<Option<Symbols>, String> {
    image.image.as_deref().map(Symbols::from_elf_file).transpose()
}

fn write_out(text: &str, output: Option<&Path>) -> Result<(), String> {
    match output {
        Some(p) => std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display())),
        None => {
            let mut so = std::io::stdout().lock();
            so.write_all(text.as_bytes())
                .and_then(|_| so.flush())
                .map_err(|e| format!("standard output: {e}"))
        }
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
    match cli.cmd {
        Cmd::Profile { input, image } => {
            let syms = symbols(&image)?;
            let a = analyse(&input, false)?;
            write_out(&a.finish().profile_text(syms.as_ref()), None)?;
        }
        Cmd::Calltree {
            input,
            image,
            debug_calls,
        } => {
            let syms = symbols(&image)?;
            let a = analyse(&input, debug_calls)?;
            let mut text = a.log().unwrap_or("").to_string();
            text.push_str(&a.finish().calltree_text(syms.as_ref()));
            write_out(&text, None)?;
        }
        Cmd::Flamegraph { input, image, output } => {
            let syms = symbols(&image)?;
            let a = analyse(&input, false)?;
            write_out(&a.finish().flamegraph_text(syms.as_ref()), output.as_deref())?;
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
            implicit_thumb,
        } => {
            let opts = CompareOptions {
                window,
                skip_time,
                ignore_effect: ignore_ccfail,
                start_addr: start,
                boot_size: boot,
                skip_remainder,
                stop_at_first: stop_first,
                context,
            };
            // Trouble is exit status 2 here: 1 says the traces differ.
            let trouble = |m: String| Failed(m, 2);
            let mut ra = open(&a, implicit_thumb).map_err(trouble)?;
            let mut rb = open(&b, implicit_thumb).map_err(trouble)?;
            let mut ia = compare::insns_of(&mut ra);
            let mut ib = compare::insns_of(&mut rb);
            let rep = compare::compare(&mut ia, &mut ib, &opts).map_err(|e| trouble(format!("{e}")))?;
            let (na, nb) = (a.display().to_string(), b.display().to_string());
            write_out(&rep.text(&na, &nb), None).map_err(trouble)?;
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
            let mut r = open(&input.trace, input.implicit_thumb)?;
            let mut printer = EventPrinter::new();
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut text = String::new();
            while let Some(rec) = r.next_record().map_err(|e| format!("{}: {e}", input.trace.display()))? {
                text.clear();
                if events {
                    printer.write(&rec, &mut text);
                } else {
                    text = format!("{} t={} {:?}\n", rec.line, rec.time, rec.kind);
                }
                out.write_all(text.as_bytes())
                    .map_err(|e| format!("standard output: {e}"))?;
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
