//! `trc_perf`: CoreSight trace in Linux perf / Android simpleperf `perf.data` recordings.
//!
//! ```text
//! trc_perf info     [-i perf.data]
//! trc_perf autofdo  [FILE…] [-i FILE[,FILE…]] [-i @LIST] [--symdir DIR]… [--binary REGEX]
//!                   [--output autofdo|branch-list] [-o FILE]
//! trc_perf script   [-i perf.data] [--itrace ib] [-F FIELDS] [--symdir DIR]…
//! trc_perf decode   [-i perf.data] [--symdir DIR]… [--format json|text|tarmac]
//! trc_perf coverage [-i perf.data] [--symdir DIR]… -o DIR [--format gnatcov|lcov|both]
//! trc_perf dump     [-i perf.data] [--as-perf-6.1]   (packets of each AUX buffer)
//! ```
//! Kernel code: `--vmlinux FILE` (relocated by the KASLR offset the recording gives),
//! `--kallsyms FILE` (symbols only); modules are found as other binaries.
//! Exit status: 0 done, 1 failed (a file missing or unreadable, not a CoreSight recording),
//! 2 bad usage.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::interfaces::TrcGenElemIn;
use coresight_decode::logger::MsgLogger;
use coresight_decode::printers;
use coresight_decode::shared::{Shared, shared};
use coresight_gnatcov::coverage::{CodeImage, Coverage, Execution};
use coresight_gnatcov::export::{ExecSignature, FlatTraceBuilder, Merge};
use coresight_gnatcov::format::{DateTime, Endian, Entry, Record as TraceRecord};
use coresight_perf_data::autofdo::{AutoFdoProfile, add_recording};
use coresight_perf_data::binaries::{Kallsyms, SymbolSearch};
use coresight_perf_data::branch_list::BranchList;
use coresight_perf_data::decode::ElementInfo;
use coresight_perf_data::decode::{DecodeOptions, Event, RecordingDecoder, describe_cpus};
use coresight_perf_data::memory::{Model, ProcessMemory};
use coresight_perf_data::script::{
    Fields, Itrace, PerfOrder, ScriptWriter, event_modifier, event_names, event_samples, is_timeless, perf_sample_time,
    write_in_perf_order,
};
use coresight_perf_data::stream::{Opened, PipeStream, open_stream};
use coresight_perf_data::{AuxFormat, MappedFile, Recording};
use coresight_tarmac::writer::{TarmacWriter, WriterOptions as TarmacOptions};
use coresight_tools::cli::{self, Progress};

const PROGRAM: &str = "trc_perf";

#[derive(Parser)]
#[command(
    name = "trc_perf",
    version,
    about = "Decode the CoreSight trace of perf.data recordings (Linux perf `-e cs_etm//`, simpleperf `-e cs-etm`): \
             AutoFDO profiles, perf script lines, elements, packet dumps",
    after_help = "Exit status: 0 done; 1 failed (file missing or unreadable, not a CoreSight recording, \
                  output not writable); 2 bad usage.\n\
                  Binaries are found by build id, then by path, under each --symdir folder (searched \
                  recursively), in perf's build-id cache (~/.debug) and at their recorded path."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What the recording holds: CPUs and their trace units, trace IDs, AUX buffers, maps,
    /// warnings.
    Info(OneInput),
    /// An AutoFDO text profile, as `simpleperf inject --output autofdo` writes it (for
    /// create_llvm_prof, create_gcov or llvm-profgen --unsymbolized-profile).
    Autofdo(AutofdoArgs),
    /// Instruction and branch samples as `perf script --itrace=… -F …` prints them.
    Script(ScriptArgs),
    /// The decoded trace elements: JSON Lines (with CPU, process and thread), the element
    /// listing, or Tarmac (one line per instruction).
    Decode(DecodeArgs),
    /// Code coverage of each traced binary: gnatcov flat trace files and lcov tracefiles
    /// (source lines from the binary's DWARF), at the addresses of the binaries' files.
    Coverage(CoverageArgs),
    /// The packets of each AUX buffer, as `perf report -D` lists them.
    ///
    /// For each AUXTRACE record, in file order: a blank line, the record's line, a blank line,
    /// the `CoreSight DECODER Trace data` line and a tab-indented line per packet (`Idx:` its
    /// offset in the CPU's AUX area; decoder errors among them where they arise), each as `perf
    /// report -D` prints it. perf also dumps the other records and every record's bytes in
    /// hex: those lines are not printed. Packets are described in OpenCSD 1.8's words
    /// (--as-perf-6.1: in 1.3.3's, as Debian's perf 6.1).
    Dump(DumpArgs),
    /// The trace replaced by its samples, as `perf inject --itrace=… -o FILE` writes it:
    /// with `l`, instruction samples carry the last branches taken (a branch stack), for
    /// AutoFDO's `create_llvm_prof --profiler=perf` and `create_gcov`.
    Inject(InjectArgs),
}

#[derive(Args)]
struct InjectArgs {
    #[command(flatten)]
    input: Input,
    /// Samples to make, in perf's spelling: i or iPERIODi (an instruction sample every PERIOD
    /// instructions, default 100000), b (branch samples), lN (a branch stack of the last N
    /// branches in each instruction sample, default 64).
    #[arg(long, value_name = "OPTS", default_value = "il64")]
    itrace: String,
    /// The perf.data file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: PathBuf,
    /// Make the samples `perf inject` 6.1 makes (see `script --as-perf-6.1`).
    #[arg(long = "as-perf-6.1")]
    as_perf_61: bool,
    /// Start each branch stack with a hardware index, as perf 5.7 and later write it
    /// (AutoFDO's create_llvm_prof and create_gcov cannot read that layout).
    #[arg(long)]
    hw_index: bool,
    #[command(flatten)]
    symbols: Symbols,
}

#[derive(Args)]
struct DumpArgs {
    #[command(flatten)]
    input: Input,
    /// Print what Linux perf 6.1 (built with OpenCSD 1.3.3, as Debian's) prints: 1.3.3's
    /// packet descriptions, and raw (TRBE) buffers decoded with the first CPU's trace unit
    /// configuration and labelled with its trace ID (a perf bug, fixed in 6.7).
    #[arg(long = "as-perf-6.1")]
    as_perf_61: bool,
}

#[derive(Args)]
struct OneInput {
    #[command(flatten)]
    input: Input,
}

/// The recording: a positional FILE as the other tools take it, or perf's `-i FILE`; `-` is
/// standard input; perf.data when neither is given.
#[derive(Args, Clone)]
struct Input {
    /// The recording (`-`: standard input) [default: perf.data].
    #[arg(value_name = "FILE", conflicts_with = "input_opt")]
    file: Option<PathBuf>,
    /// The recording, in perf's spelling.
    #[arg(short = 'i', long = "input", value_name = "FILE", id = "input_opt")]
    input_opt: Option<PathBuf>,
}

impl Input {
    fn path(&self) -> &Path {
        self.file
            .as_deref()
            .or(self.input_opt.as_deref())
            .unwrap_or(Path::new("perf.data"))
    }
}

#[derive(Args, Clone)]
struct Symbols {
    /// A folder searched (recursively) for the recorded binaries, by build id or by name;
    /// repeat for more.
    /// `--symfs DIR` (perf's spelling) is taken the same way: a binary recorded as
    /// /data/local/tmp/prog is found at DIR/data/local/tmp/prog.
    #[arg(long = "symdir", visible_alias = "symfs", value_name = "DIR")]
    symdirs: Vec<PathBuf>,
    /// perf's build-id cache folder (default: ~/.debug, when it exists).
    #[arg(long = "buildid-dir", value_name = "DIR")]
    buildid_dir: Option<PathBuf>,
    /// Do not look for binaries at their recorded paths on this machine.
    #[arg(long)]
    no_recorded_paths: bool,
    /// The kernel image (ELF with symbols) for the recording's `[kernel.kallsyms]` maps: at
    /// its link addresses, or relocated by the KASLR offset the recording gives.
    #[arg(long, value_name = "FILE")]
    vmlinux: Option<PathBuf>,
    /// /proc/kallsyms text: kernel symbols when there is no kernel image (kernel code is then
    /// not available: its trace is skipped and counted as missing).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<PathBuf>,
    /// perf's `--kcore` folder (`kcore_dir`: kcore, kallsyms, modules; found by default beside
    /// the recording, as perf finds it: DIR/kcore_dir for DIR/data, or FILE.kcore_dir): kernel
    /// and module code
    /// from its kcore, as it ran, and kernel symbols from its kallsyms unless --kallsyms is
    /// given.
    #[arg(long, value_name = "DIR")]
    kcore: Option<PathBuf>,
    /// Progress bar on stderr: auto shows it when stderr is a terminal and there is 1 MiB of
    /// trace or more.
    #[arg(long, value_enum, default_value_t = Progress::Auto, value_name = "WHEN")]
    progress: Progress,
}

#[derive(Args)]
struct AutofdoArgs {
    /// Recordings: repeat, or separate with commas; @FILE reads a list of names (separated by
    /// white space) from FILE.
    #[arg(short = 'i', long = "input", value_name = "FILE[,FILE…]")]
    inputs: Vec<String>,
    /// Recordings, as positional arguments (the same forms as -i) [default: perf.data].
    #[arg(value_name = "FILE")]
    files: Vec<String>,
    /// Keep only binaries whose recorded path matches this regular expression.
    #[arg(long = "binary", value_name = "REGEX")]
    binary: Option<String>,
    /// Write to FILE (default: standard output; a branch list only to a file).
    #[arg(short = 'o', long = "output-file", value_name = "FILE")]
    output: Option<PathBuf>,
    /// What to write, in simpleperf inject's spelling: the AutoFDO text, or simpleperf's
    /// branch list (ETMBranchList protocol buffer), compact, for merging many later.
    #[arg(long = "output", value_enum, default_value_t = AutofdoOutput::Autofdo, value_name = "KIND")]
    kind: AutofdoOutput,
    #[command(flatten)]
    symbols: Symbols,
}

/// What `autofdo` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum AutofdoOutput {
    /// AutoFDO's text profile.
    Autofdo,
    /// simpleperf's branch list file.
    BranchList,
}

#[derive(Args)]
struct ScriptArgs {
    #[command(flatten)]
    input: Input,
    /// Samples to make, in perf's spelling: i or iPERIOD (an instruction sample every PERIOD
    /// instructions, default 100000), b (branch samples).
    #[arg(long, value_name = "OPTS", default_value = "ib")]
    itrace: String,
    /// Fields, in perf's spelling: comm,pid,tid,cpu,time,period,event,flags,ip,sym,symoff,
    /// dso,addr,insn,srcline,callindent (replacing the defaults), or +FIELD / -FIELD to change
    /// them.
    #[arg(short = 'F', long = "fields", value_name = "FIELDS", allow_hyphen_values = true)]
    fields: Option<String>,
    /// Write to FILE (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Reproduce Linux perf 6.1's known decoding bugs, to compare with its output: raw
    /// (TRBE) buffers decoded with the first CPU's trace unit configuration and labelled with
    /// its CPU; the branches the decoder still holds at a buffer's end dropped.
    #[arg(long = "as-perf-6.1")]
    as_perf_61: bool,
    /// Show C++ and Rust symbol names as the binary has them (perf demangles by default:
    /// `_ZN1AC2Ev` is shown `A::A`).
    #[arg(long)]
    no_demangle: bool,
    #[command(flatten)]
    symbols: Symbols,
}

/// What `decode` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum DecodeFormat {
    /// JSON Lines: each element's object, with its buffer, CPU, process and thread first.
    Json,
    /// The element listing (`Idx:…; ID:…; ` and the element), as trc_decode writes it.
    Text,
    /// Tarmac: one line per executed instruction, opcodes read from the binaries.
    Tarmac,
}

#[derive(Args)]
struct DecodeArgs {
    #[command(flatten)]
    input: Input,
    /// Write to FILE (default: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DecodeFormat::Json)]
    format: DecodeFormat,
    #[command(flatten)]
    symbols: Symbols,
}

/// What `coverage` writes for each binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CoverageFormat {
    /// gnatcov flat trace files (NAME.trace).
    Gnatcov,
    /// lcov tracefiles (NAME.info): needs the binaries' DWARF line tables.
    Lcov,
    /// Both.
    Both,
}

#[derive(Args)]
struct CoverageArgs {
    #[command(flatten)]
    input: Input,
    /// The folder the files go to (created if needed): one per binary and format, named
    /// after the binary's file.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
    output_dir: PathBuf,
    /// Which files.
    #[arg(long, value_enum, default_value_t = CoverageFormat::Both)]
    format: CoverageFormat,
    /// Test name of the lcov records (`TN:`).
    #[arg(long, default_value = "")]
    test_name: String,
    #[command(flatten)]
    symbols: Symbols,
}

/// A failure: its message (empty: already reported, or a closed pipe) and exit status.
struct Failure(String, u8);

fn failure(msg: impl std::fmt::Display) -> Failure {
    Failure(msg.to_string(), cli::EXIT_FAILURE)
}

fn usage(msg: impl std::fmt::Display) -> Failure {
    Failure(msg.to_string(), cli::EXIT_USAGE)
}

fn output_error(e: io::Error, name: &str) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure(String::new(), cli::EXIT_OK)
    } else {
        failure(format!("{name}: {e}"))
    }
}

/// The recording's bytes: mapped, or read whole from standard input for `-`.
fn open(path: &Path) -> Result<MappedFile, Failure> {
    if path == Path::new("-") {
        use std::io::Read;
        let mut v = Vec::new();
        io::stdin()
            .lock()
            .read_to_end(&mut v)
            .map_err(|e| failure(format!("standard input: {e}")))?;
        return Ok(MappedFile::from_bytes(v));
    }
    MappedFile::open(path).map_err(failure)
}

fn parse<'a>(path: &Path, f: &'a MappedFile) -> Result<Recording<'a>, Failure> {
    Recording::parse(f.bytes()).map_err(|e| failure(format!("{}: {e}", shown(path))))
}

/// The input as messages name it: `-` is standard input.
fn shown(path: &Path) -> String {
    if path == Path::new("-") {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}

fn warn(path: &Path, msg: impl std::fmt::Display) {
    eprintln!("{PROGRAM}: {}: warning: {msg}", shown(path));
}

/// The binaries' search of a command; `recording`: its recording's path, beside which perf's
/// kcore folder is found when `--kcore` is not given (as perf finds it).
fn search(s: &Symbols, recording: Option<&Path>) -> Result<SymbolSearch, Failure> {
    let mut search = SymbolSearch::new();
    search.recorded_paths = !s.no_recorded_paths;
    for d in &s.symdirs {
        search
            .add_symdir(d)
            .map_err(|e| failure(format!("--symdir {}: {e}", d.display())))?;
    }
    if let Some(v) = &s.vmlinux {
        if !v.is_file() {
            return Err(failure(format!("--vmlinux {}: not a file", v.display())));
        }
        search.vmlinux = Some(v.clone());
    }
    if let Some(k) = &s.kallsyms {
        let text = std::fs::read_to_string(k).map_err(|e| failure(format!("--kallsyms {}: {e}", k.display())))?;
        let syms = Kallsyms::parse(&text).map_err(|e| failure(format!("--kallsyms {}: {e}", k.display())))?;
        search.kallsyms = Some(Arc::new(syms));
    }
    let beside = recording
        .filter(|p| *p != Path::new("-"))
        .and_then(coresight_perf_data::binaries::KcoreDir::beside);
    if let Some(d) = s.kcore.as_ref().or(beside.as_ref()) {
        let dir = coresight_perf_data::binaries::KcoreDir::open(d)
            .map_err(|e| failure(format!("kcore folder {}: {e}", d.display())))?;
        search.use_kcore(&dir);
    }
    match &s.buildid_dir {
        Some(d) => search.add_build_id_cache(d),
        None => {
            if let Some(home) = std::env::var_os("HOME") {
                let d = PathBuf::from(home).join(".debug");
                if d.is_dir() {
                    search.add_build_id_cache(&d);
                }
            }
        }
    }
    Ok(search)
}

fn output(path: &Option<PathBuf>) -> Result<(Box<dyn Write>, String), Failure> {
    match path {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| failure(format!("cannot create {}: {e}", p.display())))?;
            Ok((Box::new(io::BufWriter::new(f)), p.display().to_string()))
        }
        None => Ok((
            Box::new(io::BufWriter::new(io::stdout().lock())),
            "standard output".to_string(),
        )),
    }
}

fn aux_bytes(rec: &Recording<'_>) -> u64 {
    rec.buffers.iter().map(|b| b.data.len() as u64).sum()
}

/// Expands `-i` values: commas, and `@FILE` lists.
fn input_list(values: &[String]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for v in values {
        for part in v.split(',').filter(|p| !p.is_empty()) {
            if let Some(list) = part.strip_prefix('@') {
                let text =
                    std::fs::read_to_string(list).map_err(|e| failure(format!("cannot read list file {list}: {e}")))?;
                out.extend(text.split_whitespace().map(PathBuf::from));
            } else {
                out.push(PathBuf::from(part));
            }
        }
    }
    Ok(out)
}

fn report_missing(path: &Path, missing: &[(String, u64, String)]) {
    for (bin, n, why) in missing {
        warn(
            path,
            format!("code of {bin} was needed {n} times and is not available ({why}): that trace was skipped"),
        );
    }
}

fn info(a: &OneInput) -> Result<(), Failure> {
    let f = open(a.input.path())?;
    let rec = parse(a.input.path(), &f)?;
    let mut out = io::stdout().lock();
    let mut s = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        s,
        "file: {} ({} bytes, {})",
        a.input.path().display(),
        f.bytes().len(),
        if rec.file.is_simpleperf() { "simpleperf" } else { "perf" }
    );
    let _ = writeln!(s, "records: {}, samples: {}", rec.records, rec.samples);
    match &rec.cs_etm {
        Some(cs) => {
            let _ = writeln!(
                s,
                "cs_etm: version {}, PMU type {}, {} CPUs{}",
                cs.version,
                cs.pmu_type,
                cs.cpus.len(),
                if cs.snapshot { ", snapshot mode" } else { "" }
            );
            s.push_str(&describe_cpus(&rec));
        }
        None => s.push_str("no CoreSight (cs_etm) AUXTRACE_INFO\n"),
    }
    let _ = writeln!(s, "AUX buffers: {} ({} bytes)", rec.buffers.len(), aux_bytes(&rec));
    for (i, b) in rec.buffers.iter().enumerate() {
        let _ = writeln!(
            s,
            "  buffer {i}: cpu {} tid {} aux offset {:#x} size {} at file offset {:#x}, {}{}",
            b.cpu.map_or("-".into(), |c| c.to_string()),
            b.tid.map_or("-".into(), |t| t.to_string()),
            b.aux_offset,
            b.size,
            b.data_offset,
            match b.format {
                AuxFormat::Formatted => "formatted",
                AuxFormat::Raw => "raw",
                AuxFormat::Unknown => "format unknown (decoded as formatted)",
            },
            if b.discontinuous { ", after a gap" } else { "" }
        );
    }
    let exec: Vec<_> = rec.maps.iter().filter(|m| m.executable).collect();
    let _ = writeln!(s, "maps: {} ({} executable)", rec.maps.len(), exec.len());
    for m in exec {
        let _ = writeln!(
            s,
            "  pid {} {:#x}-{:#x} pgoff {:#x} {}{}",
            m.pid,
            m.start,
            m.start.saturating_add(m.len),
            m.pgoff,
            m.filename,
            m.build_id.map(|b| format!(" (build id {b})")).unwrap_or_default()
        );
    }
    let _ = writeln!(
        s,
        "lost records: {}, truncated AUX records: {}",
        rec.lost, rec.truncated_aux
    );
    for w in &rec.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    out.write_all(s.as_bytes())
        .map_err(|e| output_error(e, "standard output"))
}

fn autofdo(a: &AutofdoArgs) -> Result<(), Failure> {
    let filter = match &a.binary {
        Some(r) => Some(coresight_perf_data::autofdo::Regex::new(r).map_err(|e| usage(format!("--binary {r}: {e}")))?),
        None => None,
    };
    let mut given: Vec<String> = a.inputs.iter().chain(&a.files).cloned().collect();
    if given.is_empty() {
        given.push("perf.data".into());
    }
    let inputs = input_list(&given)?;
    let one = match inputs.as_slice() {
        [p] => Some(p.as_path()),
        _ => None,
    };
    let search = search(&a.symbols, one)?;
    let mut profile = AutoFdoProfile::new(filter.clone());
    // Branch lists given as inputs, and those made when writing branch lists.
    let mut lists = BranchList::default();
    let keep = |p: &str| filter.as_ref().is_none_or(|r| r.is_match(p));
    for path in &inputs {
        let f = match open_stdin_stream(path)? {
            Some(Opened::Pipe(stream)) if a.kind == AutofdoOutput::Autofdo => {
                autofdo_stream(path, &search, &mut profile, stream)?;
                continue;
            }
            Some(Opened::Pipe(_)) => {
                return Err(usage(
                    "--output branch-list takes a pipe-mode recording from a file, not from standard input",
                ));
            }
            Some(Opened::File(bytes)) => MappedFile::from_bytes(bytes),
            None => open(path)?,
        };
        if let Some(l) = BranchList::sniff(f.bytes()) {
            lists.merge(&l);
            continue;
        }
        let rec = parse(path, &f)?;
        for w in &rec.warnings {
            warn(path, w);
        }
        let bar = cli::progress_bar(aux_bytes(&rec), a.symbols.progress);
        let report = match a.kind {
            AutofdoOutput::Autofdo => {
                add_recording(&rec, search.clone(), DecodeOptions::default(), &mut profile, &mut |n| {
                    bar.inc(n)
                })
            }
            AutofdoOutput::BranchList => coresight_perf_data::branch_list::add_recording(
                &rec,
                search.clone(),
                DecodeOptions::default(),
                &mut lists,
                keep,
                &mut |n| bar.inc(n),
            ),
        }
        .map_err(|e| failure(format!("{}: {e}", path.display())))?;
        bar.finish_and_clear();
        for w in &report.warnings {
            warn(path, w);
        }
        report_missing(path, &report.missing);
    }
    let overflows = profile.overflows + lists.overflows;
    if a.kind == AutofdoOutput::BranchList {
        lists.retain(keep);
        if overflows > 0 {
            eprintln!("{PROGRAM}: warning: {overflows} counts reached 2^64-1 and were kept there (saturated)");
        }
        if lists.binaries.is_empty() {
            // As simpleperf: no file for no data.
            eprintln!("{PROGRAM}: warning: no branch list for any binary: no file written");
            return Ok(());
        }
        let Some(p) = &a.output else {
            return Err(usage("--output branch-list writes a binary file: name it with -o FILE"));
        };
        return std::fs::write(p, lists.to_bytes()).map_err(|e| failure(format!("cannot write {}: {e}", p.display())));
    }
    for (bin, why) in lists.add_to_profile(&search, &mut profile) {
        eprintln!("{PROGRAM}: warning: branch lists of {bin} not used: its code is needed ({why})");
    }
    if profile.overflows > 0 {
        eprintln!(
            "{PROGRAM}: warning: {} counts reached 2^64-1 and were kept there (saturated)",
            profile.overflows
        );
    }
    let (mut out, name) = output(&a.output)?;
    profile.write(&mut out).map_err(|e| output_error(e, &name))?;
    out.flush().map_err(|e| output_error(e, &name))
}

fn script(a: &ScriptArgs) -> Result<(), Failure> {
    let itrace: Itrace = a.itrace.parse().map_err(usage)?;
    let fields: Fields = match &a.fields {
        Some(f) => f.parse().map_err(usage)?,
        None => Fields::default(),
    };
    let f = match open_stdin_stream(a.input.path())? {
        Some(Opened::Pipe(stream)) => return script_stream(a, itrace, fields, stream),
        Some(Opened::File(bytes)) => MappedFile::from_bytes(bytes),
        None => open(a.input.path())?,
    };
    let rec = parse(a.input.path(), &f)?;
    for w in &rec.warnings {
        warn(a.input.path(), w);
    }
    // perf's synthesised events carry a time only when it decodes with time, and a CPU
    // when the recorded event samples it: a default field they lack is left out, a named
    // one refused (as perf script does).
    let timeless = itrace.timeless || is_timeless(&rec);
    // The modifier perf gives the synthesised events: from the recorded event's attribute.
    let modifier = rec.attrs().first().map(|a| event_modifier(a.flags)).unwrap_or_default();
    let suffix = if modifier.is_empty() {
        String::new()
    } else {
        format!(":{modifier}")
    };
    let names = event_names(&rec);
    // perf names the first event without the field: the recorded one, else the first
    // synthesised one.
    let synthesised = format!("{}{suffix}", if itrace.branches { "branches" } else { "instructions" });
    let recorded = names.first().cloned().unwrap_or_else(|| synthesised.clone());
    const PERF_SAMPLE_TIME: u64 = 1 << 2;
    const PERF_SAMPLE_CPU: u64 = 1 << 7;
    let no_time = if !event_samples(&rec, PERF_SAMPLE_TIME) {
        Some(recorded.as_str())
    } else if timeless {
        Some(synthesised.as_str())
    } else {
        None
    };
    let no_cpu = (!event_samples(&rec, PERF_SAMPLE_CPU)).then_some(recorded.as_str());
    let fields = fields.for_samples(no_time, no_cpu).map_err(usage)?;
    let model = Arc::new(Model::new(&rec, search(&a.symbols, Some(a.input.path()))?));
    let opts = DecodeOptions {
        raw_with_first_config: a.as_perf_61,
        opencsd_flow: a.as_perf_61,
        ..Default::default()
    };
    let mut dec = RecordingDecoder::new(&rec, model.clone(), opts)
        .map_err(|e| failure(format!("{}: {e}", a.input.path().display())))?;
    let (out, name) = output(&a.output)?;
    let mut w = ScriptWriter::new(
        &model,
        dec.cpus().len(),
        out,
        itrace,
        fields,
        &modifier,
        &names,
        if timeless { None } else { perf_sample_time(&rec) },
    );
    w.demangle = !a.no_demangle;
    let bar = cli::progress_bar(aux_bytes(&rec), a.symbols.progress);
    let order = PerfOrder {
        drop_held_at_buffer_end: a.as_perf_61,
        timeless,
        one_channel_when_timeless: a.as_perf_61,
    };
    let r = write_in_perf_order(&mut dec, &mut w, order, &mut |n| bar.inc(n));
    bar.finish_and_clear();
    r.map_err(|e| output_error(e, &name))?;
    for x in &dec.warnings {
        warn(a.input.path(), x);
    }
    report_missing(a.input.path(), &dec.missing_binaries());
    w.into_inner().flush().map_err(|e| output_error(e, &name))
}

fn inject(a: &InjectArgs) -> Result<(), Failure> {
    let itrace: Itrace = a.itrace.parse().map_err(usage)?;
    let f = open(a.input.path())?;
    let rec = parse(a.input.path(), &f)?;
    for w in &rec.warnings {
        warn(a.input.path(), w);
    }
    let model = Arc::new(Model::new(&rec, search(&a.symbols, Some(a.input.path()))?));
    let opts = DecodeOptions {
        raw_with_first_config: a.as_perf_61,
        opencsd_flow: a.as_perf_61,
        ..Default::default()
    };
    let in_error = |e: &dyn std::fmt::Display| failure(format!("{}: {e}", a.input.path().display()));
    let mut dec = RecordingDecoder::new(&rec, model, opts).map_err(|e| in_error(&e))?;
    let bar = cli::progress_bar(aux_bytes(&rec), a.symbols.progress);
    let order = PerfOrder {
        drop_held_at_buffer_end: a.as_perf_61,
        timeless: itrace.timeless,
        one_channel_when_timeless: a.as_perf_61,
    };
    let r = coresight_perf_data::script::inject(&mut dec, itrace, order, a.hw_index, &mut |n| bar.inc(n));
    bar.finish_and_clear();
    let (bytes, samples) = r.map_err(|e| in_error(&e))?;
    for x in &dec.warnings {
        warn(a.input.path(), x);
    }
    report_missing(a.input.path(), &dec.missing_binaries());
    if samples == 0 {
        eprintln!("{PROGRAM}: warning: no sample made (is the period longer than the trace?)");
    }
    let p = &a.output;
    std::fs::write(p, bytes).map_err(|e| failure(format!("cannot write {}: {e}", p.display())))
}

/// Bytes a Tarmac writer wrote, taken after each element.
#[derive(Clone, Default)]
struct Drain(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Drain {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes a decode's elements in the chosen format.
struct ElementWriter {
    format: DecodeFormat,
    mem: ProcessMemory,
    /// One Tarmac writer per stream (CPU), all writing to `drain`.
    tarmac: Vec<Option<TarmacWriter<Drain, ProcessMemory>>>,
    drain: Drain,
    /// File offset of the buffer being decoded.
    position: u64,
    line: String,
}

impl ElementWriter {
    fn new(format: DecodeFormat, model: Arc<Model>, streams: usize) -> Self {
        ElementWriter {
            format,
            mem: ProcessMemory::new(model),
            tarmac: (0..streams).map(|_| None).collect(),
            drain: Drain::default(),
            position: 0,
            line: String::with_capacity(256),
        }
    }

    fn element(&mut self, out: &mut dyn Write, info: &ElementInfo, e: &TraceElement) -> io::Result<()> {
        match self.format {
            DecodeFormat::Json => {
                self.line.clear();
                let mut buf = std::mem::take(&mut self.line).into_bytes();
                let r = coresight_tools::json::write_element(&mut buf, info.index, info.trace_id, e).and_then(|()| {
                    // The element's object, with where it came from first.
                    write!(
                        out,
                        "{{\"buffer\":{},\"cpu\":{},\"pid\":{},\"tid\":{},",
                        info.buffer, info.cpu, info.pid, info.tid
                    )?;
                    out.write_all(buf.get(1..).unwrap_or_default())
                });
                buf.clear();
                self.line = String::from_utf8(buf).unwrap_or_default();
                r
            }
            DecodeFormat::Text => {
                use std::fmt::Write as _;
                self.line.clear();
                let _ = write!(self.line, "Idx:{}; ID:{:x}; ", info.index, info.trace_id);
                e.write_to(&mut self.line);
                self.line.push('\n');
                out.write_all(self.line.as_bytes())
            }
            DecodeFormat::Tarmac => {
                let Some(slot) = self.tarmac.get_mut(info.stream) else {
                    return Ok(());
                };
                let w = slot.get_or_insert_with(|| {
                    let opts = TarmacOptions {
                        cpu: info.cpu,
                        ..Default::default()
                    };
                    TarmacWriter::new(self.drain.clone(), self.mem.clone(), opts)
                });
                self.mem.set(info.pid, self.position);
                w.trace_elem_in(info.index, info.trace_id, e);
                if let Some(err) = w.error() {
                    return Err(io::Error::other(err.to_string()));
                }
                let mut b = self.drain.0.lock().unwrap_or_else(|p| p.into_inner());
                out.write_all(&b)?;
                b.clear();
                Ok(())
            }
        }
    }
}

fn decode(a: &DecodeArgs) -> Result<(), Failure> {
    let f = open(a.input.path())?;
    let rec = parse(a.input.path(), &f)?;
    for w in &rec.warnings {
        warn(a.input.path(), w);
    }
    let model = Arc::new(Model::new(&rec, search(&a.symbols, Some(a.input.path()))?));
    let mut dec = RecordingDecoder::new(&rec, model.clone(), DecodeOptions::default())
        .map_err(|e| failure(format!("{}: {e}", a.input.path().display())))?;
    let (mut out, name) = output(&a.output)?;
    let bar = cli::progress_bar(aux_bytes(&rec), a.symbols.progress);
    let mut err: Option<io::Error> = None;
    let mut w = ElementWriter::new(a.format, model, dec.cpus().len());
    dec.run(&mut |ev| {
        if err.is_some() {
            return;
        }
        match ev {
            Event::Element(info, e) => {
                if let Err(e) = w.element(&mut out, info, e) {
                    err = Some(e);
                }
            }
            Event::BufferEnd { buffer } => bar.inc(rec.buffers.get(buffer).map_or(0, |b| b.data.len() as u64)),
            Event::BufferStart { aux, .. } => w.position = aux.record_offset,
        }
    });
    bar.finish_and_clear();
    if let Some(e) = err {
        return Err(output_error(e, &name));
    }
    for x in &dec.warnings {
        warn(a.input.path(), x);
    }
    report_missing(a.input.path(), &dec.missing_binaries());
    out.flush().map_err(|e| output_error(e, &name))
}

/// One binary's coverage: its flat-trace builder (a stream per trace ID) at the addresses of
/// its file.
struct BinaryCoverage {
    builder: FlatTraceBuilder,
    ranges: u64,
}

fn coverage(a: &CoverageArgs) -> Result<(), Failure> {
    let f = open(a.input.path())?;
    let rec = parse(a.input.path(), &f)?;
    for w in &rec.warnings {
        warn(a.input.path(), w);
    }
    let model = Arc::new(Model::new(&rec, search(&a.symbols, Some(a.input.path()))?));
    let mut dec = RecordingDecoder::new(&rec, model.clone(), DecodeOptions::default())
        .map_err(|e| failure(format!("{}: {e}", a.input.path().display())))?;
    let bar = cli::progress_bar(aux_bytes(&rec), a.symbols.progress);
    let mut bins: std::collections::BTreeMap<usize, BinaryCoverage> = std::collections::BTreeMap::new();
    // The binary of each stream's last range: the other elements of the stream go to it.
    let mut current: Vec<Option<usize>> = vec![None; dec.cpus().len()];
    let mut position = 0u64;
    let mut unmapped = 0u64;
    dec.run(&mut |ev| match ev {
        Event::BufferStart { aux, .. } => position = aux.record_offset,
        Event::BufferEnd { buffer } => bar.inc(rec.buffers.get(buffer).map_or(0, |b| b.data.len() as u64)),
        Event::Element(info, e) => {
            let Some(cur) = current.get_mut(info.stream) else {
                return;
            };
            if e.elem_type != ElemType::InstrRange {
                if let Some(b) = cur.and_then(|b| bins.get_mut(&b)) {
                    b.builder.add(info.trace_id, e);
                }
                return;
            }
            // The range at its binary's addresses (a map holds it whole: ranges do not cross
            // maps, the decoder reads code through one at a time).
            let target = model.find_map(info.pid, e.st_addr, position).and_then(|m| {
                let v = model.vaddr_in_file(m, e.st_addr)?;
                Some((model.maps[m].binary, v))
            });
            let Some((bin, vaddr)) = target else {
                unmapped += 1;
                if let Some(b) = cur.take().and_then(|b| bins.get_mut(&b)) {
                    b.builder.add(info.trace_id, &TraceElement::new(ElemType::NoSync));
                }
                return;
            };
            if *cur != Some(bin)
                && let Some(b) = cur.and_then(|b| bins.get_mut(&b))
            {
                b.builder.add(info.trace_id, &TraceElement::new(ElemType::NoSync));
            }
            *cur = Some(bin);
            let mut r = *e;
            r.st_addr = vaddr;
            r.en_addr = vaddr.wrapping_add(e.en_addr.wrapping_sub(e.st_addr));
            let b = bins.entry(bin).or_insert_with(|| BinaryCoverage {
                builder: FlatTraceBuilder::new(Merge::PerTraceId),
                ranges: 0,
            });
            b.builder.add(info.trace_id, &r);
            b.ranges += 1;
        }
    });
    bar.finish_and_clear();
    for x in &dec.warnings {
        warn(a.input.path(), x);
    }
    report_missing(a.input.path(), &dec.missing_binaries());
    if unmapped > 0 {
        warn(
            a.input.path(),
            format!("{unmapped} instruction ranges in no binary found: not in the coverage"),
        );
    }
    std::fs::create_dir_all(&a.output_dir)
        .map_err(|e| failure(format!("cannot create {}: {e}", a.output_dir.display())))?;
    let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (bin, mut c) in bins {
        c.builder.finish();
        let Some(b) = model.binary(bin) else { continue };
        let Some(img) = b.loaded() else { continue };
        let ids = c.builder.streams();
        let entries: Vec<Entry> = ids
            .iter()
            .flat_map(|&id| c.builder.entries(id).iter().copied())
            .collect();
        if entries.is_empty() {
            continue;
        }
        // The file name, made unique.
        let base = Path::new(b.dso_name())
            .file_name()
            .map_or_else(|| "binary".to_string(), |n| n.to_string_lossy().into_owned());
        let base = base.trim_matches(|c| c == '[' || c == ']').to_string();
        let mut stem = base.clone();
        let mut n = 1;
        while !used.insert(stem.clone()) {
            n += 1;
            stem = format!("{base}-{n}");
        }
        let code = CodeImage::from_elf(img.bytes());
        if matches!(a.format, CoverageFormat::Gnatcov | CoverageFormat::Both) {
            let sig =
                ExecSignature::of_file(img.path()).map_err(|e| failure(format!("{}: {e}", img.path().display())))?;
            let machine = code.as_ref().ok().map(|c| c.machine);
            let mut t = c.builder.trace_file(
                ids.first().copied().flatten(),
                machine,
                Endian::Little,
                Some(&sig),
                Some(DateTime::from_unix(now)),
            );
            t.records = entries.iter().map(|e| TraceRecord::Exec(*e)).collect();
            let path = a.output_dir.join(format!("{stem}.trace"));
            std::fs::write(&path, t.to_bytes()).map_err(|e| failure(format!("{}: {e}", path.display())))?;
            eprintln!(
                "{PROGRAM}: wrote {} ({} entries, {} ranges of {})",
                path.display(),
                entries.len(),
                c.ranges,
                b.path
            );
        }
        if matches!(a.format, CoverageFormat::Lcov | CoverageFormat::Both) {
            let lines = match coresight_tools::lcov::LineTable::from_elf(img.bytes()) {
                Ok(l) => l,
                Err(e) => {
                    warn(
                        a.input.path(),
                        format!("{} ({}): no lcov tracefile: {e}", b.path, img.path().display()),
                    );
                    continue;
                }
            };
            let code = code.map_err(|e| failure(format!("{}: {e}", img.path().display())))?;
            let x = Execution::from_entries(&code, &entries);
            let cov = Coverage::compute(&code, &x);
            let path = a.output_dir.join(format!("{stem}.info"));
            std::fs::write(&path, coresight_tools::lcov::tracefile(&a.test_name, &cov, &lines))
                .map_err(|e| failure(format!("{}: {e}", path.display())))?;
            eprintln!("{PROGRAM}: wrote {}", path.display());
        }
    }
    Ok(())
}

/// `dump`: the packets of each AUXTRACE buffer as `perf report -D` prints them, streamed.
///
/// perf's dump lists every record of the file, with each record's bytes in hex; the part
/// printed here, which equals perf's byte for byte, is what it prints for each AUXTRACE
/// record: a blank line, the record's line (`[CPU TIME ]OFFSET [SIZE]: PERF_RECORD_AUXTRACE
/// size: … cpu: …`), a blank line, `. ... CoreSight DECODER Trace data: size … bytes` and
/// one tab-indented line per packet (`Idx:` its offset in the CPU's AUX area, `ID:` its trace
/// ID), in file order, with the decoders' error messages among them where they arise (as perf
/// shows them). perf 6.1 is built with OpenCSD 1.3.3, whose packet descriptions differ from
/// 1.8's in places: 1.8's are printed, 1.3.3's with `--as-perf-6.1` (which also decodes raw
/// buffers as perf 6.1 does, with the first CPU's configuration and trace ID).
///
/// The packet printers' text goes out in pieces of at most about 64 KiB as it is made, and the
/// pages of each buffer are let go once it is decoded: memory stays small at any recording
/// size (a recording read from standard input is held whole).
fn dump(a: &DumpArgs) -> Result<(), Failure> {
    let path = a.input.path();
    let f = open(path)?;
    let rec = Recording::parse_mapped(&f).map_err(|e| failure(format!("{}: {e}", path.display())))?;
    for w in &rec.warnings {
        warn(path, w);
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let out = shared(DumpOut {
        out: io::BufWriter::with_capacity(64 << 10, io::stdout()),
        error: None,
        stop: stop.clone(),
        as_perf_61: a.as_perf_61,
        partial: Vec::new(),
    });
    let mut printer_text = MsgLogger::none();
    printer_text.set_writer(Some(Box::new(PacketLines(out.clone()))));
    let packets = shared(printer_text);
    let opts = DecodeOptions {
        packets_only: true,
        packet_out: Some(packets.clone()),
        index_at_aux_offset: true,
        errors_with_packets: true,
        raw_with_first_config: a.as_perf_61,
        stop: Some(stop),
        ..Default::default()
    };
    let model = Arc::new(Model::new(&rec, SymbolSearch::default()));
    let mut dec = RecordingDecoder::new(&rec, model, opts).map_err(|e| failure(format!("{}: {e}", path.display())))?;
    let names: Vec<&str> = dec.cpus().iter().map(|c| c.protocol).collect();
    let cpus: Vec<u32> = dec.cpus().iter().map(|c| c.cpu).collect();
    let prefix = perf_user_record_prefix(&rec);
    dec.run(&mut |ev| match ev {
        Event::BufferStart { aux, .. } => {
            // What the printers wrote before (the previous buffer's last lines) goes first.
            packets.borrow_mut().flush();
            // perf names the buffer after its decoder: for a raw buffer its CPU's (6.1: the
            // first CPU's); for formatted trace the last CPU's configuration it set up (the
            // CPUs of a recording have the same kind of trace unit).
            let own = aux.cpu.and_then(|c| cpus.iter().position(|&x| x == c));
            let decoder = match aux.format {
                AuxFormat::Raw if a.as_perf_61 => names.first(),
                AuxFormat::Raw => own.and_then(|i| names.get(i)).or(names.first()),
                _ => names.last(),
            };
            let mut o = out.borrow_mut();
            o.end_partial_line();
            let r = writeln!(
                o.out,
                "\n{prefix}{} [{}]: PERF_RECORD_AUXTRACE size: {}  offset: {}  ref: {}  idx: {}  tid: {}  cpu: {}\n\n\
                 . ... CoreSight {} Trace data: size {} bytes",
                CHex(aux.record_offset),
                CHex(aux.data_offset.saturating_sub(aux.record_offset)),
                CHex(aux.size),
                CHex(aux.aux_offset),
                CHex(aux.reference),
                aux.idx,
                aux.tid.map_or(-1, |t| t as i32),
                aux.cpu.map_or(-1, |c| c as i32),
                decoder.copied().unwrap_or("ETM"),
                CHex(aux.size),
            );
            o.keep(r);
        }
        Event::BufferEnd { buffer } => {
            packets.borrow_mut().flush();
            if let Some(b) = rec.buffers.get(buffer) {
                f.done_with(b.data_offset, b.data.len() as u64);
            }
        }
        Event::Element(..) => {}
    });
    packets.borrow_mut().flush();
    for x in &dec.warnings {
        warn(path, x);
    }
    let mut o = out.borrow_mut();
    o.end_partial_line();
    let r = o.out.flush();
    o.keep(r);
    match o.error.take() {
        Some(e) => Err(output_error(e, "standard output")),
        None => Ok(()),
    }
}

/// `dump`'s standard output, shared by the buffer headers and the packet lines; the first
/// write error is kept (and nothing more written).
struct DumpOut {
    out: io::BufWriter<io::Stdout>,
    error: Option<io::Error>,
    /// Set with the error: the decoding stops (nobody reads what it would print).
    stop: Arc<std::sync::atomic::AtomicBool>,
    as_perf_61: bool,
    /// The start of a line whose end is still to come (the printers write whole lines, so
    /// in practice nothing).
    partial: Vec<u8>,
}

impl DumpOut {
    /// Writes out the start of a line whose end never came (nothing, in practice).
    fn end_partial_line(&mut self) {
        if !self.partial.is_empty() && self.error.is_none() {
            let line = std::mem::take(&mut self.partial);
            let r = self.packet_line(&line);
            self.keep(r);
        }
        self.partial.clear();
    }

    fn keep(&mut self, r: io::Result<()>) {
        if let Err(e) = r
            && self.error.is_none()
        {
            self.error = Some(e);
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Writes the packet lines of `text` as perf does: each after a tab, in OpenCSD 1.3.3's
    /// words with --as-perf-6.1. The printers' notes of resets and ends of trace (`ID:…`
    /// lines) are left out: perf prints none.
    fn packet_text(&mut self, mut text: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if !self.partial.is_empty() {
            let Some(nl) = text.iter().position(|&b| b == b'\n') else {
                self.partial.extend_from_slice(text);
                return;
            };
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&text[..nl]);
            let r = self.packet_line(&line);
            self.keep(r);
            line.clear();
            self.partial = line;
            text = &text[nl + 1..];
        }
        let mut lines = text.split_inclusive(|&b| b == b'\n');
        for l in lines.by_ref() {
            let Some(line) = l.strip_suffix(b"\n") else {
                self.partial.extend_from_slice(l);
                break;
            };
            if let Err(e) = self.packet_line(line) {
                self.keep(Err(e));
                return;
            }
        }
    }

    fn packet_line(&mut self, line: &[u8]) -> io::Result<()> {
        if line.starts_with(b"ID:") {
            return Ok(());
        }
        self.out.write_all(b"\t")?;
        // 1.3.3's words where they differ (a new line only then).
        let as_1_3 = if self.as_perf_61 {
            std::str::from_utf8(line).ok().map(printers::opencsd_1_3_text)
        } else {
            None
        };
        match as_1_3 {
            Some(std::borrow::Cow::Owned(l)) => self.out.write_all(l.as_bytes())?,
            _ => self.out.write_all(line)?,
        }
        self.out.write_all(b"\n")
    }
}

/// The packet printers' writer: their text on to [`DumpOut`] as it comes.
struct PacketLines(Shared<DumpOut>);

impl Write for PacketLines {
    fn write(&mut self, text: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().packet_text(text);
        Ok(text.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A number as C's `%#x` prints it: `0x` and lower-case hex digits, 0 alone as `0`.
struct CHex(u64);

impl std::fmt::Display for CHex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == 0 {
            f.write_str("0")
        } else {
            write!(f, "{:#x}", self.0)
        }
    }
}

/// What perf's dump prints before the line of a record perf makes itself (AUXTRACE and the
/// other user records, which carry no sample fields): the CPU and the time of their empty
/// sample, `0 ` each, when the events' samples have them; `-1 -1 ` when records other than
/// samples carry no sample fields (`sample_id_all` off).
fn perf_user_record_prefix(rec: &Recording<'_>) -> &'static str {
    const SAMPLE_TIME: u64 = 1 << 2;
    const SAMPLE_CPU: u64 = 1 << 7;
    let attrs = rec.attrs();
    if attrs.first().is_some_and(|a| !a.sample_id_all()) {
        return "-1 -1 ";
    }
    let all = attrs.iter().fold(0, |t, a| t | a.sample_type);
    match (all & SAMPLE_CPU != 0, all & SAMPLE_TIME != 0) {
        (true, true) => "0 0 ",
        (true, false) | (false, true) => "0 ",
        (false, false) => "",
    }
}

/// Standard input (`-`): a pipe-mode recording to read as it arrives, else a file-mode one
/// read whole. None for a named file.
fn open_stdin_stream(path: &Path) -> Result<Option<Opened<io::StdinLock<'static>>>, Failure> {
    if path != Path::new("-") {
        return Ok(None);
    }
    open_stream(io::stdin().lock())
        .map(Some)
        .map_err(|e| failure(format!("standard input: {e}")))
}

/// Warnings of a stream's segments, each said once (the records kept before a buffer are
/// read again with every buffer); counts said at the end.
#[derive(Default)]
struct StreamWarnings {
    said: std::collections::HashSet<(u64, String)>,
    missing: std::collections::BTreeMap<(String, String), u64>,
    /// The AUX bytes of each buffer read, with its CPU: checked at the end against what the
    /// AUX records announce (a segment holds one buffer, so cannot check it).
    held: Vec<(Option<u32>, u64)>,
}

impl StreamWarnings {
    /// A segment's warnings, and its buffer counted.
    fn segment(&mut self, path: &Path, rec: &Recording<'_>) {
        for w in &rec.warnings {
            self.say(path, w);
        }
        self.held
            .extend(rec.buffers.iter().map(|b| (b.cpu, b.data.len() as u64)));
    }

    fn say(&mut self, path: &Path, w: &coresight_perf_data::Warning) {
        // Offset 0: the recording's totals (lost records, truncated AUX), said at the end.
        if w.offset != 0 && self.said.insert((w.offset, w.message.clone())) {
            warn(path, w);
        }
    }

    fn missing(&mut self, missing: &[(String, u64, String)]) {
        for (bin, n, why) in missing {
            *self.missing.entry((bin.clone(), why.clone())).or_default() += n;
        }
    }

    /// The end of the stream: its own warnings, the totals of everything kept, and the
    /// binaries that were missing.
    fn finish<R: io::Read>(self, path: &Path, stream: &PipeStream<R>) {
        for w in &stream.warnings {
            warn(path, w);
        }
        let kept = stream.kept();
        if let Ok(rec) = kept.recording() {
            for w in rec.warnings.iter().filter(|w| w.offset == 0) {
                warn(path, w);
            }
            for mut w in rec.missing_aux_data(&self.held) {
                w.offset = kept.stream_offset(w.offset);
                warn(path, &w);
            }
        }
        let missing: Vec<(String, u64, String)> =
            self.missing.into_iter().map(|((bin, why), n)| (bin, n, why)).collect();
        report_missing(path, &missing);
    }
}

/// Output shared by the script writers of a stream's queues.
#[derive(Clone)]
struct SharedOut(std::rc::Rc<std::cell::RefCell<Box<dyn Write>>>);

impl Write for SharedOut {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// What the script of a stream's segment is printed with: the same for every segment.
struct StreamScript {
    timeless: bool,
    modifier: String,
    names: Vec<String>,
    fields: Fields,
}

impl StreamScript {
    /// As script() decides for a whole recording.
    fn of(rec: &Recording<'_>, itrace: Itrace, fields: Fields) -> Result<Self, Failure> {
        let timeless = itrace.timeless || is_timeless(rec);
        let modifier = rec.attrs().first().map(|a| event_modifier(a.flags)).unwrap_or_default();
        let suffix = if modifier.is_empty() {
            String::new()
        } else {
            format!(":{modifier}")
        };
        let names = event_names(rec);
        let synthesised = format!("{}{suffix}", if itrace.branches { "branches" } else { "instructions" });
        let recorded = names.first().cloned().unwrap_or_else(|| synthesised.clone());
        const PERF_SAMPLE_TIME: u64 = 1 << 2;
        const PERF_SAMPLE_CPU: u64 = 1 << 7;
        let no_time = if !event_samples(rec, PERF_SAMPLE_TIME) {
            Some(recorded.as_str())
        } else if timeless {
            Some(synthesised.as_str())
        } else {
            None
        };
        let no_cpu = (!event_samples(rec, PERF_SAMPLE_CPU)).then_some(recorded.as_str());
        let fields = fields.for_samples(no_time, no_cpu).map_err(usage)?;
        Ok(StreamScript {
            timeless,
            modifier,
            names,
            fields,
        })
    }
}

/// `script -` on a pipe-mode recording: each AUXTRACE buffer decoded and printed when it
/// has arrived, holding one buffer. When timeless, each AUX queue keeps its script state from
/// one buffer to its next, as perf's queues do, while no map or thread event comes between
/// buffers (one that does rebuilds the memory model, and the queues start afresh): untimed
/// per-CPU recordings print what `script FILE` prints; per-thread ones lack the branch to 0
/// that a whole-file decode flushes where one buffer meets the next (each buffer's decoder
/// starts at trace index 0 here). With time, what only the end of the recording can say
/// differs: perf 6.1's sample time is the latest AUX record's of the whole recording (here:
/// of the stream so far), CPUs' buffers come in stream order rather than merged by time,
/// and each buffer is decoded on its own.
fn script_stream(
    a: &ScriptArgs,
    itrace: Itrace,
    fields: Fields,
    mut stream: PipeStream<io::StdinLock<'static>>,
) -> Result<(), Failure> {
    let path = a.input.path();
    let search = search(&a.symbols, None)?;
    let (out, name) = output(&a.output)?;
    let out = SharedOut(std::rc::Rc::new(std::cell::RefCell::new(out)));
    let mut said = StreamWarnings::default();
    let mut how: Option<StreamScript> = None;
    let opts = DecodeOptions {
        raw_with_first_config: a.as_perf_61,
        opencsd_flow: a.as_perf_61,
        ..Default::default()
    };
    let next = |stream: &mut PipeStream<_>| -> Result<Option<coresight_perf_data::stream::Segment>, Failure> {
        stream
            .next_segment()
            .transpose()
            .map_err(|e| failure(format!("standard input: {e}")))
    };
    // The maps and thread events a model was made from: more of them make a new model.
    let known = |rec: &Recording<'_>| (rec.maps.len(), rec.thread_events.len());
    let mut pending = next(&mut stream)?;
    // One model (and one script writer per AUX queue, when timeless) while no new map or
    // thread event arrives.
    while let Some(first) = pending.take() {
        let (model, model_of) = {
            let rec = first.recording().map_err(|e| failure(format!("standard input: {e}")))?;
            if how.is_none() {
                how = Some(StreamScript::of(&rec, itrace, fields)?);
            }
            (Arc::new(Model::new(&rec, search.clone())), known(&rec))
        };
        let how = how.as_ref().expect("set above");
        let mut writers: std::collections::HashMap<u32, ScriptWriter<'_, SharedOut>> = std::collections::HashMap::new();
        let mut seg = first;
        loop {
            let rec = seg.recording().map_err(|e| failure(format!("standard input: {e}")))?;
            if known(&rec) != model_of {
                drop(rec);
                pending = Some(seg);
                break;
            }
            said.segment(path, &rec);
            let mut dec = RecordingDecoder::new(&rec, model.clone(), opts.clone())
                .map_err(|e| failure(format!("standard input: {e}")))?;
            let new_writer = |dec: &RecordingDecoder<'_, '_>| {
                let mut w = ScriptWriter::new(
                    &model,
                    dec.cpus().len(),
                    out.clone(),
                    itrace,
                    how.fields,
                    &how.modifier,
                    &how.names,
                    if how.timeless { None } else { perf_sample_time(&rec) },
                );
                w.demangle = !a.no_demangle;
                w
            };
            let order = PerfOrder {
                drop_held_at_buffer_end: a.as_perf_61,
                timeless: how.timeless,
                one_channel_when_timeless: a.as_perf_61,
            };
            let queue = rec.buffers.first().map_or(0, |b| b.idx);
            let r = if how.timeless {
                let w = writers.entry(queue).or_insert_with(|| new_writer(&dec));
                write_in_perf_order(&mut dec, w, order, &mut |_| {})
            } else {
                let mut w = new_writer(&dec);
                write_in_perf_order(&mut dec, &mut w, order, &mut |_| {})
            };
            r.map_err(|e| output_error(e, &name))?;
            for x in &dec.warnings {
                said.say(path, x);
            }
            said.missing(&dec.missing_binaries());
            drop(dec);
            drop(rec);
            match next(&mut stream)? {
                Some(s) => seg = s,
                None => break,
            }
        }
    }
    said.finish(path, &stream);
    out.0.borrow_mut().flush().map_err(|e| output_error(e, &name))
}

/// `autofdo -` on a pipe-mode recording: each AUXTRACE buffer's counts added when it has
/// arrived, holding one buffer.
fn autofdo_stream(
    path: &Path,
    search: &SymbolSearch,
    profile: &mut AutoFdoProfile,
    mut stream: PipeStream<io::StdinLock<'static>>,
) -> Result<(), Failure> {
    let mut said = StreamWarnings::default();
    while let Some(seg) = stream.next_segment() {
        let seg = seg.map_err(|e| failure(format!("standard input: {e}")))?;
        let rec = seg.recording().map_err(|e| failure(format!("standard input: {e}")))?;
        said.segment(path, &rec);
        let report = add_recording(&rec, search.clone(), DecodeOptions::default(), profile, &mut |_| {})
            .map_err(|e| failure(format!("standard input: {e}")))?;
        for w in &report.warnings {
            said.say(path, w);
        }
        said.missing(&report.missing);
    }
    said.finish(path, &stream);
    Ok(())
}

fn main() -> ExitCode {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).try_init();
    let cli = Cli::parse();
    let r = match &cli.command {
        Command::Info(a) => info(a),
        Command::Autofdo(a) => autofdo(a),
        Command::Script(a) => script(a),
        Command::Decode(a) => decode(a),
        Command::Coverage(a) => coverage(a),
        Command::Dump(a) => dump(a),
        Command::Inject(a) => inject(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg, code)) => {
            if !msg.is_empty() {
                if code == cli::EXIT_USAGE {
                    eprintln!("{PROGRAM}: error: {msg}\n\nFor more information, try '--help'.");
                } else {
                    eprintln!("{PROGRAM}: {msg}");
                }
            }
            ExitCode::from(code)
        }
    }
}
