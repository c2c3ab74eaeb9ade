//! `trc_decode`: decodes the trace of an Arm snapshot, or a raw trace
//! buffer with its configuration on the command line, and writes its
//! elements as text (the lister's element lines), JSON Lines or Tarmac.
//!
//! ```text
//! trc_decode SNAPSHOT [--source NAME] [--id ID]... [--format text|json|tarmac]
//!            [--elf FILE[@ADDR]]... [--symbols] [--threads N] [--disasm] [-o FILE]
//! trc_decode --raw FILE|- [--unformatted] --protocol P [--core TYPE] [--reg NAME=VALUE]...
//!            [--config FILE] [--memory ADDR:FILE]... [--id ID]... [options as above]
//! ```
//! Run with `--help` for every option. Exit status: 0 decoded, 1 failed
//! (snapshot or file not found or unreadable, fatal decode error), 2 bad
//! usage.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use coresight_decode::DecoderBuilder;
use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{DecodeMode, DecoderRegistry, SourceConfig};
use coresight_decode::deformatter::DeformatterConfig;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::error::{ErrCode, Error};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::MsgLogger;
use coresight_decode::memory::MemAccMapper;
#[cfg(feature = "disasm")]
use coresight_decode::memory::MemSpace;
use coresight_decode::parallel::{ParallelOptions, ParallelSink, WorkerSetup, decode_parallel};
use coresight_decode::shared::{Shared, shared};
use coresight_decode::snapshot::{Snapshot, WarningKind};
use coresight_decode::tree::{DecodeTree, SourceFormat};
use coresight_tarmac::writer::{TarmacWriter, WriterOptions};
use coresight_tools::cli::{self, FileSequence, ImageArg, Progress, ProgressReader};
use coresight_tools::elfsym::SymbolTable;
use coresight_tools::json;
use coresight_tools::rawcfg::{self, RawConfig};

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
    about = "Decode the trace of an Arm (DS-5) snapshot, or a raw trace buffer configured on the command line, \
             and print its elements as text, JSON Lines or Tarmac",
    after_help = "Without a snapshot, --raw FILE is decoded with the configuration given by --protocol, --core, \
                  --reg (one source) and --config FILE (any number of sources), e.g.\n  \
                  trc_decode --raw trace.bin --unformatted --protocol etmv4 --core Cortex-A57 --id 0x10 \\\n    \
                  --reg TRCCONFIGR=0xc1 --reg TRCIDR0=0x20000861 --reg TRCIDR2=0x08001088 \\\n    \
                  --memory 0x400000:code.bin\n\
                  A configuration file has KEY = VALUE lines: unformatted, memory (ADDR:FILE), then per source \
                  (a [source] line starts each) protocol, core, id, name and registers (NAME = VALUE).\n\
                  Exit status: 0 decoded; 1 failed (snapshot, trace or image file not found or unreadable, \
                  no decodable trace source, a trace ID given with --id that the trace does not have, \
                  fatal decode error); 2 bad usage.\n\
                  Decoder errors that the decode recovers from are written to stderr.\n\
                  The options of earlier versions (-ss_dir, -src_name, -id, -disasm, -max_instr) are still accepted."
)]
struct Cli {
    /// Snapshot directory (the folder holding snapshot.ini).
    #[arg(
        value_name = "SNAPSHOT",
        required_unless_present_any = ["snapshot_dir", "raw"],
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
    /// Decode only this trace ID (0x0 to 0x6f, decimal or hex); repeat for
    /// more IDs (default: all). An ID the trace does not have is an error.
    /// With --raw, also the trace ID of a source whose registers give none.
    #[arg(long = "id", value_name = "ID", value_parser = cli::parse_selected_id)]
    ids: Vec<u8>,
    /// Decode the trace bytes in FILE (`-`: standard input). With a
    /// snapshot, they replace its trace buffer's files; without, the
    /// options below give the configuration.
    #[arg(long, value_name = "FILE")]
    raw: Option<PathBuf>,
    /// --raw: the buffer holds one source's trace, not CoreSight frames
    /// (default: 16-byte frames, as ETB and ETR write them).
    #[arg(long, requires = "raw", conflicts_with_all = ["snapshot", "snapshot_dir"])]
    unformatted: bool,
    /// --raw: the protocol of a source: etmv4, ete, ptm, etmv3, stm, itm.
    #[arg(long, value_name = "P", requires = "raw", conflicts_with_all = ["snapshot", "snapshot_dir"])]
    protocol: Option<String>,
    /// --raw: the type of the traced core (Cortex-A53, Cortex-M55...),
    /// for PE trace (ETM, PTM, ETE).
    #[arg(long, value_name = "TYPE", requires = "raw", conflicts_with_all = ["snapshot", "snapshot_dir"])]
    core: Option<String>,
    /// --raw: a register of the source (TRCIDR0=0x28000ea1); repeatable.
    /// Optional registers take their defaults.
    #[arg(long = "reg", value_name = "NAME=VALUE", value_parser = rawcfg::parse_reg, requires = "raw", conflicts_with_all = ["snapshot", "snapshot_dir"])]
    regs: Vec<(String, u64)>,
    /// --raw: a configuration file (KEY = VALUE lines, see below).
    #[arg(long, value_name = "FILE", requires = "raw", conflicts_with_all = ["snapshot", "snapshot_dir"])]
    config: Option<PathBuf>,
    /// --raw: a raw binary of the traced program loaded at ADDR
    /// (0x400000:code.bin); repeatable.
    #[arg(long = "memory", value_name = "ADDR:FILE", value_parser = rawcfg::parse_memory, requires = "raw", conflicts_with_all = ["snapshot", "snapshot_dir"])]
    memory: Vec<(u64, PathBuf)>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Memory image of the traced program, besides the snapshot's memory
    /// dumps: FILE is an ELF file (its loadable segments are mapped at
    /// their addresses), FILE@ADDR a raw binary loaded at ADDR, or an ELF
    /// file loaded with its lowest segment at ADDR. Repeat for more images.
    #[arg(long = "elf", value_name = "FILE[@ADDR]")]
    images: Vec<ImageArg>,
    /// Name the function of each instruction range (`function+0xOFFSET`,
    /// C++ and Rust names demangled) from the symbols of the --elf files:
    /// text, after the element; JSON, a `symbol` field.
    #[arg(long)]
    symbols: bool,
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
    /// --symbols: the functions of the ELF files.
    symbols: Option<SymbolTable>,
    json: Vec<u8>,
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
                if let (Some(syms), ElemType::InstrRange) = (&self.symbols, e.elem_type) {
                    self.line.push_str(" <");
                    syms.write_location(e.st_addr, &mut self.line);
                    self.line.push('>');
                }
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
            Format::Json => match (&self.symbols, e.elem_type) {
                (Some(syms), ElemType::InstrRange) => {
                    // The element's object with a `symbol` field added last.
                    self.json.clear();
                    json::write_element(&mut self.json, index, trace_id, e)?;
                    self.line.clear();
                    syms.write_location(e.st_addr, &mut self.line);
                    let name = serde_json::to_string(&self.line).map_err(io::Error::from)?;
                    let body = self.json.trim_ascii_end().strip_suffix(b"}").unwrap_or(&self.json);
                    self.out.write_all(body)?;
                    writeln!(self.out, ",\"symbol\":{name}}}")
                }
                _ => json::write_element(&mut self.out, index, trace_id, e),
            },
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

/// Where a decode's configuration comes from.
enum Setup {
    /// A snapshot's trace buffer.
    Snapshot { ss: Snapshot, source: String },
    /// A raw buffer: its layout, the protocol and configuration of each
    /// source, and raw memory images.
    Raw {
        format: SourceFormat,
        sources: Vec<(String, SourceConfig)>,
        memory: Vec<(u64, PathBuf)>,
    },
}

impl Setup {
    /// Builds a tree with the images mapped and, for a snapshot, the
    /// deformatter set up as trc_pkt_lister sets it up.
    fn build_tree(&self, images: &[ImageArg], errors: Shared<MsgLogger>) -> Result<DecodeTree, String> {
        let tree = match self {
            Setup::Snapshot { ss, source } => {
                // Plug-in protocols (RISC-V trace) decode like the built-in ones.
                let builder = TreeBuilder::with_registry(ss, riscv_trace::registry());
                let mut tree = builder
                    .build(source, DecodeMode::FullDecode, |t| {
                        t.set_error_output(Some(errors.clone()))
                    })
                    .map_err(|e| match e {
                        coresight_decode::Error::NoDecoder { log, .. } if log.is_empty() => {
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
                tree
            }
            Setup::Raw {
                format,
                sources,
                memory,
            } => {
                let mut builder = DecoderBuilder::new(*format);
                for (protocol, cfg) in sources {
                    builder = builder.source(protocol, cfg.clone());
                }
                for (addr, path) in memory {
                    builder = builder.memory_file(path, *addr, 0, 0);
                }
                let mut tree = builder.build().map_err(|e| e.to_string())?.into_tree();
                tree.set_error_output(Some(errors));
                tree
            }
        };
        if let Some(m) = tree.mem_mapper() {
            let mut m = m.borrow_mut();
            for img in images {
                img.map_into(&mut m, &mut |w| eprintln!("{PROGRAM}: warning: {w}"))?;
            }
        }
        Ok(tree)
    }
}

/// The raw buffer's configuration from --config and the source options.
fn raw_setup(cli: &Cli) -> Result<Setup, Failure> {
    let mut cfg = match &cli.config {
        Some(p) => RawConfig::load(p).map_err(failure)?,
        None => RawConfig::default(),
    };
    cfg.unformatted |= cli.unformatted;
    cfg.memory.extend(cli.memory.iter().cloned());
    let given = cli.core.is_some() || !cli.regs.is_empty();
    match &cli.protocol {
        Some(p) => cfg.sources.push(rawcfg::RawSource {
            protocol: p.clone(),
            core: cli.core.clone(),
            regs: cli.regs.clone(),
            ..Default::default()
        }),
        // --core and --reg complete the one source of a --config file.
        None if given && cfg.sources.len() == 1 => {
            let s = &mut cfg.sources[0];
            s.core = cli.core.clone().or(s.core.take());
            s.regs
                .retain(|(n, _)| !cli.regs.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)));
            s.regs.extend(cli.regs.iter().cloned());
        }
        None if given => {
            return Err(usage(
                "--core and --reg describe the source given by --protocol (or the one source of --config)",
            ));
        }
        None => {}
    }
    if cfg.sources.is_empty() {
        return Err(usage(
            "--raw without a snapshot needs --protocol (or --config FILE) to say how to decode it",
        ));
    }
    if cfg.unformatted && cfg.sources.len() > 1 {
        return Err(usage(format!(
            "an unformatted buffer holds one source; {} are configured",
            cfg.sources.len()
        )));
    }
    for (_, path) in &cfg.memory {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() && m.len() > 0 => {}
            Ok(_) => {
                return Err(failure(format!(
                    "cannot read {}: not a regular file with contents",
                    path.display()
                )));
            }
            Err(e) => return Err(failure(format!("cannot read {}: {e}", path.display()))),
        }
    }
    let registry = DecoderRegistry::builtin();
    // ID 0 is no ID to give a source (it is what a source without one has).
    let default_id = match cli.ids.as_slice() {
        [id] if *id != 0 => Some(*id),
        _ => None,
    };
    let mut sources = Vec::new();
    for (i, src) in cfg.sources.iter().enumerate() {
        let factory = rawcfg::find_protocol(&registry, &src.protocol).map_err(usage)?;
        let resolved = src.resolve(i, factory.as_ref(), default_id).map_err(usage)?;
        sources.push((factory.protocol_name().to_string(), resolved));
    }
    let format = if cfg.unformatted {
        SourceFormat::Single
    } else {
        SourceFormat::Formatted(DeformatterConfig::mem_aligned())
    };
    Ok(Setup::Raw {
        format,
        sources,
        memory: cfg.memory,
    })
}

fn usage(msg: impl std::fmt::Display) -> Failure {
    Failure(msg.to_string(), cli::EXIT_USAGE)
}

/// Set when the snapshot's warnings said that the buffer ends inside a
/// frame: the deformatter's line saying it again is left out.
static PARTIAL_FRAME_WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes what the decoders logged (errors they recovered from) to stderr.
fn report_logged(errors: &Shared<MsgLogger>, bar: &indicatif::ProgressBar) {
    let mut text = errors.borrow_mut().take_captured();
    if PARTIAL_FRAME_WARNED.load(std::sync::atomic::Ordering::Relaxed) {
        text = text
            .split_inclusive('\n')
            .filter(|l| !l.contains("Incomplete frame at end of trace"))
            .collect();
    }
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

/// The trace to decode: its bytes and how to read them.
struct Input {
    reader: Box<dyn Read>,
    /// Size, when known (for the progress bar).
    len: u64,
}

/// The trace data: --raw FILE (`-`: standard input) or the buffer's files.
fn open_input(cli: &Cli, setup: &Setup) -> Result<Input, Failure> {
    let dstream = |input: Box<dyn Read>, yes: bool| -> Box<dyn Read> {
        // A DSTREAM capture's block footers are not trace.
        if yes {
            Box::new(coresight_decode::dstream::FooterReader::new(input))
        } else {
            input
        }
    };
    let footers = match setup {
        Setup::Snapshot { ss, source } => ss.buffer(source).is_some_and(|b| b.has_dstream_footers()),
        Setup::Raw { .. } => false,
    };
    match (&cli.raw, setup) {
        (Some(p), _) if p.as_os_str() == "-" => Ok(Input {
            reader: dstream(Box::new(io::stdin().lock()), footers),
            len: 0,
        }),
        (Some(p), _) => {
            let seq = FileSequence::new(vec![p.clone()]);
            if let Some(problem) = seq.problem() {
                return Err(failure(problem));
            }
            Ok(Input {
                len: seq.total_len(),
                reader: dstream(Box::new(seq), footers),
            })
        }
        (None, Setup::Snapshot { ss, source }) => {
            let buffer = ss
                .buffer(source)
                .ok_or_else(|| failure(format!("no trace buffer named {source}")))?;
            let seq = FileSequence::new(ss.buffer_paths(buffer));
            if let Some(problem) = seq.problem() {
                return Err(failure(problem));
            }
            Ok(Input {
                len: seq.total_len(),
                reader: dstream(Box::new(seq), footers),
            })
        }
        (None, Setup::Raw { .. }) => Err(usage("no trace to decode: give --raw FILE")),
    }
}

/// The snapshot's trace buffer to decode.
fn snapshot_setup(cli: &Cli, dir: &std::path::Path) -> Result<Setup, Failure> {
    if !dir.is_dir() {
        return Err(failure(format!("snapshot directory {} not found", dir.display())));
    }
    // The error names the file, the line and what was expected.
    let ss = Snapshot::load(dir).map_err(failure)?;
    for w in ss.warnings() {
        if matches!(w.kind, WarningKind::PartialFrame { .. }) {
            PARTIAL_FRAME_WARNED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
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
    Ok(Setup::Snapshot { ss, source })
}

/// Checks that the trace has every ID of --id; the error names those it has.
fn check_ids(tree: &DecodeTree, wanted: &[u8], what: &str) -> Result<(), Failure> {
    let present: Vec<u8> = tree.elements().map(|(_, e)| e.config_trace_id).collect();
    let missing: Vec<String> = wanted
        .iter()
        .filter(|id| !present.contains(id))
        .map(|id| format!("0x{id:x}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let has: Vec<String> = present.iter().map(|id| format!("0x{id:x}")).collect();
    Err(failure(format!(
        "no trace ID {} in {what} (its trace IDs: {})",
        missing.join(", "),
        if has.is_empty() {
            "none".to_string()
        } else {
            has.join(", ")
        }
    )))
}

fn run(cli: Cli) -> Result<(), Failure> {
    if cli.symbols && cli.format == Format::Tarmac {
        return Err(usage(
            "--symbols names functions in text and json output, not in tarmac",
        ));
    }
    let dir = cli.snapshot.clone().or(cli.snapshot_dir.clone());
    let setup = match &dir {
        Some(dir) => snapshot_setup(&cli, dir)?,
        None => raw_setup(&cli)?,
    };
    let errors = shared(MsgLogger::capture());
    let mut tree = setup.build_tree(&cli.images, errors.clone()).map_err(failure)?;
    // A memory dump that cannot be read was reported above in plain words;
    // the tree builder's OpenCSD-style line about it says no more.
    let dump_warned = match &setup {
        Setup::Snapshot { ss, .. } => ss.warnings().iter().any(|w| {
            matches!(
                w.kind,
                WarningKind::MissingDump { .. } | WarningKind::DumpOutsideFile { .. }
            )
        }),
        Setup::Raw { .. } => false,
    };
    if dump_warned {
        let text = errors.borrow_mut().take_captured();
        let kept: String = text
            .split_inclusive('\n')
            .filter(|l| !l.contains("Failed to create memory accessor for file"))
            .collect();
        errors.borrow_mut().log_msg(&kept);
    }
    let what = match (&setup, &dir) {
        (Setup::Snapshot { source, .. }, Some(d)) => format!("buffer {source} of {}", d.display()),
        _ => "the configured trace".to_string(),
    };
    check_ids(&tree, &cli.ids, &what)?;
    let ids: Vec<u8> = tree
        .elements()
        .map(|(id, _)| id)
        .filter(|id| cli.ids.is_empty() || cli.ids.contains(id))
        .collect();
    // One unformatted source has no IDs to filter (its decoder sits on 0).
    if !cli.ids.is_empty() && matches!(tree.format(), SourceFormat::Formatted(_)) {
        // --id takes 0x0 to 0x6f only, so the filter cannot be refused.
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
    let symbols = if cli.symbols {
        let mut table = SymbolTable::default();
        for img in &cli.images {
            match img.addr {
                None => {
                    table.add_elf_file(&img.path, None).map_err(failure)?;
                }
                // FILE@ADDR may be a raw binary, without symbols.
                Some(_) if !cli::is_elf(&img.path) => {}
                Some(a) => {
                    let _ = table.add_elf_file(&img.path, Some(a));
                }
            }
        }
        if table.is_empty() {
            return Err(usage(
                "--symbols needs an ELF file with symbols: give it with --elf FILE",
            ));
        }
        Some(table)
    } else {
        None
    };
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
        symbols,
        json: Vec::new(),
    };

    let input = open_input(&cli, &setup)?;
    let bar = cli::progress_bar(input.len, cli.progress);
    let mut input: Box<dyn Read> = Box::new(ProgressReader::new(input.reader, bar.clone()));

    let threads = cli.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n as usize,
    );
    let parallel = threads > 1 && ids.len() > 1 && matches!(tree.format(), SourceFormat::Formatted(_));
    let result = if parallel {
        decode_threads(&cli, &setup, &tree, &ids, threads, &mut input, &mut printer, &bar)
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
        let last = tree.error_logger().borrow().last_reason().map(|e| e.to_string());
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
        let last = tree.error_logger().borrow().last_reason().map(|e| e.to_string());
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
        if PARTIAL_FRAME_WARNED.load(std::sync::atomic::Ordering::Relaxed)
            && text.contains("Incomplete frame at end of trace")
        {
            let kept: String = text
                .split_inclusive('\n')
                .filter(|l| !l.contains("Incomplete frame at end of trace"))
                .collect();
            self.bar.suspend(|| eprint!("{kept}"));
            return;
        }
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
    setup: &Setup,
    tree: &DecodeTree,
    ids: &[u8],
    threads: usize,
    input: &mut dyn Read,
    printer: &mut Printer,
    bar: &indicatif::ProgressBar,
) -> Result<(), Failure> {
    let build = |w: &WorkerSetup| -> Result<DecodeTree, Error> {
        setup
            .build_tree(&cli.images, w.logger.clone())
            .map_err(|e| Error::code(ErrCode::Fail, e))
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
        return Err(fatal(outcome.processed, outcome.reason.as_deref()));
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
