//! `trc_decode`: decodes the trace of an Arm snapshot and writes its
//! elements as text (the lister's element lines), JSON Lines or Tarmac.
//!
//! ```text
//! trc_decode SNAPSHOT [--source NAME] [--id ID]... [--format text|json|tarmac]
//!            [--elf FILE[@ADDR]]... [--threads N] [--disasm] [-o FILE]
//! ```
//! Run with `--help` for every option. Exit status: 0 decoded, 1 failed
//! (snapshot or file not found or unreadable, fatal decode error), 2 bad
//! usage.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::error::{ErrCode, Error};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::{MsgLogger, Shared, shared};
use coresight_decode::memory::{MemAccMapper, MemSpace};
use coresight_decode::parallel::{ParallelOptions, ParallelSink, WorkerSetup, decode_parallel};
use coresight_decode::snapshot::{Snapshot, WarningKind};
use coresight_decode::tree::{DecodeTree, SourceFormat};
use coresight_tarmac::writer::{TarmacWriter, WriterOptions};
use coresight_tools::cli::{self, FileSequence, ImageArg, Progress, ProgressReader};
use coresight_tools::json;

const PROGRAM: &str = "trc_decode";

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// One line per element, as trc_pkt_lister -decode prints them:
    /// `Idx:INDEX; ID:TRACE_ID; ELEMENT`.
    Text,
    /// JSON Lines: one object per element (index, trace_id, type and the
    /// fields of that type; addresses as hex strings).
    Json,
    /// Tarmac: one line per executed instruction.
    Tarmac,
}

#[derive(Parser)]
#[command(
    name = "trc_decode",
    version,
    about = "Decode the trace of an Arm (DS-5) snapshot and print its elements as text, JSON Lines or Tarmac",
    after_help = "Exit status: 0 decoded; 1 failed (snapshot, trace or image file not found or unreadable, \
                  no decodable trace source, fatal decode error); 2 bad usage.\n\
                  Decoder errors that the decode recovers from are written to stderr.\n\
                  The options of earlier versions (-ss_dir, -src_name, -id, -disasm, -max_instr) are still accepted."
)]
struct Cli {
    /// Snapshot directory (the folder holding snapshot.ini).
    #[arg(
        value_name = "SNAPSHOT",
        required_unless_present = "snapshot_dir",
        conflicts_with = "snapshot_dir"
    )]
    snapshot: Option<PathBuf>,
    /// Snapshot directory, as an option (same as SNAPSHOT).
    #[arg(long = "snapshot", value_name = "DIR")]
    snapshot_dir: Option<PathBuf>,
    /// Trace buffer to decode, by its name in the snapshot's trace.ini
    /// (default: the first).
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
    /// Decode only this trace ID (0x1 to 0x6f, decimal or hex); repeat for
    /// more IDs (default: all).
    #[arg(long = "id", value_name = "ID", value_parser = cli::parse_trace_id)]
    ids: Vec<u8>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Memory image of the traced program, besides the snapshot's memory
    /// dumps: FILE is an ELF file (its loadable segments are mapped at
    /// their addresses), FILE@ADDR a raw binary loaded at ADDR. Repeat for
    /// more images.
    #[arg(long = "elf", value_name = "FILE[@ADDR]")]
    images: Vec<ImageArg>,
    /// Decode the trace IDs of a formatted buffer on N threads (default:
    /// one per core; 1: no worker threads). The output is the same.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Disassemble: text, the instructions of each range after it (at most
    /// --max-instr); tarmac, the instruction text on each line. Needs the
    /// `disasm` feature.
    #[arg(long)]
    disasm: bool,
    /// Instructions disassembled per range at most (text with --disasm).
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_instr: usize,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Progress bar on stderr: auto shows it when stderr is a terminal and
    /// the trace is 1 MiB or more.
    #[arg(long, value_enum, default_value_t = Progress::Auto, value_name = "WHEN")]
    progress: Progress,
}

/// Options of the single-dash style this program had, and their names now.
const RENAMED: &[(&str, &str)] = &[
    ("-ss_dir", "--snapshot"),
    ("-src_name", "--source"),
    ("-id", "--id"),
    ("-disasm", "--disasm"),
    ("-max_instr", "--max-instr"),
    ("-help", "--help"),
];

/// A failure: its message (empty: already reported) and exit status.
struct Failure(String, u8);

fn failure(msg: impl std::fmt::Display) -> Failure {
    Failure(msg.to_string(), cli::EXIT_FAILURE)
}

/// Bytes the Tarmac writer wrote, taken after each element.
#[derive(Clone, Default)]
struct TarmacBuf(Shared<Vec<u8>>);

impl Write for TarmacBuf {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes elements in the chosen format.
struct Printer {
    format: Format,
    out: Box<dyn Write>,
    line: String,
    mem: Shared<MemAccMapper>,
    #[cfg(feature = "disasm")]
    dis: Option<coresight_decode::disasm::Disassembler>,
    code: Vec<u8>,
    max_instr: usize,
    tarmac: Option<(TarmacWriter<TarmacBuf, Shared<MemAccMapper>>, TarmacBuf)>,
    elements: u64,
}

impl Printer {
    fn element(&mut self, index: TrcIndex, trace_id: u8, e: &TraceElement) -> io::Result<()> {
        self.elements += 1;
        match self.format {
            Format::Text => {
                use std::fmt::Write as _;
                self.line.clear();
                let _ = write!(self.line, "Idx:{index}; ID:{trace_id:x}; ");
                e.write_to(&mut self.line);
                self.line.push('\n');
                #[cfg(feature = "disasm")]
                if let (Some(d), ElemType::InstrRange) = (self.dis.as_ref(), e.elem_type) {
                    let len = (e.en_addr.saturating_sub(e.st_addr) as usize).min(self.max_instr * 4);
                    self.code.resize(len, 0);
                    let n = self.mem.borrow_mut().read(e.st_addr, MemSpace::ANY, &mut self.code);
                    d.write(e.isa, e.st_addr, &self.code[..n], self.max_instr, &mut self.line);
                }
                #[cfg(not(feature = "disasm"))]
                let _ = (&self.mem, &mut self.code, self.max_instr, ElemType::InstrRange);
                self.out.write_all(self.line.as_bytes())
            }
            Format::Json => json::write_element(&mut self.out, index, trace_id, e),
            Format::Tarmac => {
                let Some((w, buf)) = self.tarmac.as_mut() else {
                    return Ok(());
                };
                w.trace_elem_in(index, trace_id, e);
                if let Some(err) = w.error() {
                    return Err(io::Error::other(err.to_string()));
                }
                let mut b = buf.0.borrow_mut();
                self.out.write_all(&b)?;
                b.clear();
                Ok(())
            }
        }
    }
}

/// The tree's element output: kept until the block is through, when
/// target memory is free to read for the printer.
struct Collect(Shared<Vec<(TrcIndex, u8, TraceElement)>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, trace_id, *elem));
        DatapathResp::Cont
    }
}

/// Builds a tree for `source` with the images mapped and the deformatter
/// set up as trc_pkt_lister sets it up.
fn build_tree(
    ss: &Snapshot,
    source: &str,
    images: &[ImageArg],
    errors: Shared<MsgLogger>,
) -> Result<DecodeTree, String> {
    // Plug-in protocols (RISC-V trace) decode like the built-in ones.
    let builder = TreeBuilder::with_registry(ss, riscv_trace::registry());
    let mut tree = builder
        .build(source, DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(errors.clone()))
        })
        .map_err(|e| match e {
            coresight_decode::Error::NoDecoder { .. } => {
                format!("no trace source of buffer {source} has a supported protocol")
            }
            e => e.to_string(),
        })?;
    if let SourceFormat::Formatted(mut cfg) = tree.format() {
        if !(cfg.fsyncs || cfg.hsyncs) {
            cfg.mem_aligned = true;
        }
        if let Some(d) = tree.deformatter_mut() {
            let _ = d.configure(cfg);
        }
    }
    if let Some(m) = tree.mem_mapper() {
        let mut m = m.borrow_mut();
        for img in images {
            img.map_into(&mut m)?;
        }
    }
    Ok(tree)
}

/// Writes what the decoders logged (errors they recovered from) to stderr.
fn report_logged(errors: &Shared<MsgLogger>, bar: &indicatif::ProgressBar) {
    let text = errors.borrow_mut().take_captured();
    if !text.is_empty() {
        bar.suspend(|| {
            let mut e = io::stderr().lock();
            let _ = e.write_all(text.as_bytes());
            if !text.ends_with('\n') {
                let _ = e.write_all(b"\n");
            }
        });
    }
}

/// An output error: a closed pipe ends the decode quietly (as `| head`
/// expects), anything else is a failure.
fn output_error(e: io::Error, out_name: &str) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure(String::new(), cli::EXIT_OK)
    } else {
        failure(format!("{out_name}: {e}"))
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let dir = cli.snapshot.clone().or(cli.snapshot_dir.clone()).unwrap_or_default();
    if !dir.is_dir() {
        return Err(failure(format!("snapshot directory {} not found", dir.display())));
    }
    // The error names the file, the line and what was expected.
    let ss = Snapshot::load(&dir).map_err(failure)?;
    for w in ss.warnings() {
        eprintln!("{PROGRAM}: {w}");
    }
    let names: Vec<String> = ss.buffer_names().into_iter().map(str::to_string).collect();
    let source = match &cli.source {
        Some(n) if names.contains(n) => n.clone(),
        Some(n) => {
            return Err(failure(format!(
                "no trace buffer named {n} in {} (it has: {})",
                dir.display(),
                names.join(", ")
            )));
        }
        None => names
            .first()
            .cloned()
            .ok_or_else(|| failure(format!("the snapshot in {} names no trace buffer", dir.display())))?,
    };
    let buffer = ss
        .buffer(&source)
        .ok_or_else(|| failure(format!("no trace buffer named {source}")))?
        .clone();
    let errors = shared(MsgLogger::capture());
    let mut tree = build_tree(&ss, &source, &cli.images, errors.clone()).map_err(failure)?;
    // A memory dump that cannot be read was reported above in plain words;
    // the tree builder's OpenCSD-style line about it says no more.
    let dump_warned = ss.warnings().iter().any(|w| {
        matches!(
            w.kind,
            WarningKind::MissingDump { .. } | WarningKind::DumpOutsideFile { .. }
        )
    });
    if dump_warned {
        let text = errors.borrow_mut().take_captured();
        let kept: String = text
            .split_inclusive('\n')
            .filter(|l| !l.contains("Failed to create memory accessor for file"))
            .collect();
        errors.borrow_mut().log_msg(&kept);
    }
    let ids: Vec<u8> = tree
        .elements()
        .map(|(id, _)| id)
        .filter(|id| cli.ids.is_empty() || cli.ids.contains(id))
        .collect();
    if !cli.ids.is_empty() {
        // --id takes 0x1 to 0x6f only, so the filter cannot be refused.
        let _ = tree.set_id_filter(Some(&cli.ids));
    }
    let mem = tree
        .mem_mapper()
        .cloned()
        .ok_or_else(|| failure("full decode without a memory mapper"))?;

    #[cfg(not(feature = "disasm"))]
    if cli.disasm {
        return Err(Failure(
            format!("{PROGRAM} was built without the `disasm` feature: --disasm is not available"),
            cli::EXIT_USAGE,
        ));
    }
    let out_name = cli
        .output
        .as_ref()
        .map_or("standard output".to_string(), |p| p.display().to_string());
    let out: Box<dyn Write> = match &cli.output {
        Some(p) => Box::new(io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| failure(format!("cannot create {}: {e}", p.display())))?,
        )),
        None => Box::new(io::BufWriter::new(io::stdout().lock())),
    };
    let tarmac = (cli.format == Format::Tarmac).then(|| {
        let buf = TarmacBuf::default();
        let opts = WriterOptions {
            disassemble: cli.disasm,
            ..Default::default()
        };
        (TarmacWriter::new(buf.clone(), mem.clone(), opts), buf)
    });
    let mut printer = Printer {
        format: cli.format,
        out,
        line: String::new(),
        mem: mem.clone(),
        #[cfg(feature = "disasm")]
        dis: match (cli.disasm, cli.format) {
            (true, Format::Text) => Some(coresight_decode::disasm::Disassembler::new().map_err(failure)?),
            _ => None,
        },
        code: Vec::new(),
        max_instr: cli.max_instr,
        tarmac,
        elements: 0,
    };

    let files = ss.buffer_paths(&buffer);
    let input = FileSequence::new(files);
    if let Some(p) = input.problem() {
        return Err(failure(p));
    }
    let bar = cli::progress_bar(input.total_len(), cli.progress);
    let input = ProgressReader::new(input, bar.clone());
    // A DSTREAM capture's block footers are not trace.
    let mut input: Box<dyn Read> = if buffer.has_dstream_footers() {
        Box::new(coresight_decode::dstream::FooterReader::new(input))
    } else {
        Box::new(input)
    };

    let threads = cli.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n as usize,
    );
    let parallel = threads > 1 && ids.len() > 1 && matches!(tree.format(), SourceFormat::Formatted(_));
    let result = if parallel {
        decode_threads(&cli, &ss, &source, &tree, &ids, threads, &mut input, &mut printer, &bar)
    } else {
        decode_serial(&mut tree, &mut input, &mut printer, &errors, &bar)
    };
    report_logged(&errors, &bar);
    bar.finish_and_clear();
    let flushed = printer.out.flush();
    result?;
    flushed.map_err(|e| output_error(e, &out_name))
}

/// Decodes on this thread.
fn decode_serial(
    tree: &mut DecodeTree,
    input: &mut dyn Read,
    printer: &mut Printer,
    errors: &Shared<MsgLogger>,
    bar: &indicatif::ProgressBar,
) -> Result<(), Failure> {
    let out_name = "output";
    let got = shared(Vec::new());
    tree.set_gen_elem_out(Box::new(Collect(got.clone())));
    let drain = |printer: &mut Printer| -> Result<(), Failure> {
        let items = std::mem::take(&mut *got.borrow_mut());
        for (index, id, e) in &items {
            printer.element(*index, *id, e).map_err(|e| output_error(e, out_name))?;
        }
        let mut v = items;
        v.clear();
        *got.borrow_mut() = v;
        Ok(())
    };
    let mut block = vec![0u8; 16 * 1024];
    let mut index: TrcIndex = 0;
    let mut resp = DatapathResp::Cont;
    loop {
        let n = read_full(input, &mut block).map_err(|e| failure(format!("cannot read trace file {e}")))?;
        if n == 0 {
            break;
        }
        let mut done = 0;
        while (done < n || resp.is_wait()) && !resp.is_fatal() {
            if resp.is_wait() {
                resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            } else {
                let (r, used) = tree.trace_data_in(DatapathOp::Data, index, &block[done..n]);
                resp = r;
                done += used;
                index += used as TrcIndex;
            }
            drain(printer)?;
        }
        report_logged(errors, bar);
        if resp.is_fatal() {
            break;
        }
    }
    if resp.is_fatal() {
        let last = tree.error_logger().borrow().last_error().map(|e| e.to_string());
        return Err(fatal(index, last.as_deref()));
    }
    let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
    while r.is_wait() {
        r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        if r.is_cont() {
            r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        }
    }
    drain(printer)?;
    if r.is_fatal() {
        let last = tree.error_logger().borrow().last_error().map(|e| e.to_string());
        return Err(fatal(index, last.as_deref()));
    }
    Ok(())
}

fn fatal(index: TrcIndex, last_error: Option<&str>) -> Failure {
    match last_error {
        Some(e) => failure(format!(
            "decode stopped by a fatal error after {index} bytes of trace: {e}"
        )),
        None => failure(format!("decode stopped by a fatal error after {index} bytes of trace")),
    }
}

/// Reads until `buf` is full or the input ends.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The merged output of a threaded decode.
struct Sink<'a> {
    printer: &'a mut Printer,
    bar: &'a indicatif::ProgressBar,
    failed: Option<Failure>,
}

impl ParallelSink for Sink<'_> {
    fn text(&mut self, text: &str) {
        self.bar.suspend(|| eprint!("{text}"));
    }
    fn element(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        if self.failed.is_some() {
            return DatapathResp::FatalSysErr;
        }
        match self.printer.element(index, trace_id, elem) {
            Ok(()) => DatapathResp::Cont,
            Err(e) => {
                self.failed = Some(output_error(e, "output"));
                DatapathResp::FatalSysErr
            }
        }
    }
}

/// Decodes the trace IDs on worker threads, each with its own tree.
#[allow(clippy::too_many_arguments)]
fn decode_threads(
    cli: &Cli,
    ss: &Snapshot,
    source: &str,
    tree: &DecodeTree,
    ids: &[u8],
    threads: usize,
    input: &mut dyn Read,
    printer: &mut Printer,
    bar: &indicatif::ProgressBar,
) -> Result<(), Failure> {
    let build = |w: &WorkerSetup| -> Result<DecodeTree, Error> {
        build_tree(ss, source, &cli.images, w.logger.clone()).map_err(|e| Error::code(ErrCode::Fail, e))
    };
    let format = match (tree.format(), tree.deformatter()) {
        (SourceFormat::Formatted(_), Some(d)) => SourceFormat::Formatted(d.config()),
        (f, _) => f,
    };
    let options = ParallelOptions {
        threads,
        deliver_elements: true,
        ..ParallelOptions::default()
    };
    let mut sink = Sink {
        printer,
        bar,
        failed: None,
    };
    let outcome = decode_parallel(options, format, ids, input, &build, &mut sink)
        .map_err(|e| failure(format!("decode failed: {e}")))?;
    if let Some(f) = sink.failed {
        return Err(f);
    }
    if outcome.resp.is_fatal() {
        return Err(fatal(outcome.processed, outcome.last_error.as_deref()));
    }
    Ok(())
}

fn main() -> ExitCode {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).try_init();
    let args = cli::renamed_options(PROGRAM, std::env::args_os(), RENAMED);
    let cli = Cli::parse_from(args);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg, code)) => {
            if !msg.is_empty() {
                eprintln!("{PROGRAM}: {msg}");
            }
            ExitCode::from(code)
        }
    }
}
