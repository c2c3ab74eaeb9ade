//! `trc_cov`: code coverage from hardware trace, in GNATcoverage's terms.
//!
//! ```text
//! trc_cov dump TRACE [--raw]
//! trc_cov export (--snapshot DIR | --tarmac FILE [--implicit-thumb]) [--elf ELF] [--per-id] -o OUT
//! trc_cov coverage --elf ELF [--routines NAMES|@FILE] [--snapshot DIR]... [--tarmac FILE]... [TRACE]...
//! trc_cov lcov --elf ELF [--snapshot DIR]... [--tarmac FILE]... [TRACE]... [-o OUT.info]
//! ```
//!
//! Exit status: 0 done, 1 the input could not be processed, 2 bad usage.

use coresight_tools::lcov;

use coresight_decode::shared::Lock;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use coresight_decode::arch::Isa;
use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::interfaces::TrcDataIn;
use coresight_decode::snapshot::Snapshot;
use coresight_gnatcov::coverage::{CodeImage, Coverage, Execution};
use coresight_gnatcov::dump::dump;
use coresight_gnatcov::export::{ExecSignature, FlatTraceBuilder, Merge, SharedBuilder};
use coresight_gnatcov::format::{DateTime, Endian, Entry, read_file};
use coresight_tarmac::ranges::trace_elements;
use coresight_tarmac::{Iset, Reader, ReaderOptions};

#[derive(Parser)]
#[command(
    name = "trc_cov",
    version,
    about = "Code coverage from CoreSight trace: gnatcov trace files, object coverage, lcov line coverage",
    after_help = "Exit status: 0 done; 1 the input could not be processed (a file that could not be read \
                  or parsed, a snapshot that could not be decoded); 2 bad usage."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print a gnatcov trace file as `gnatcov dump-trace` does.
    Dump {
        /// The gnatcov trace file.
        trace: PathBuf,
        /// Addresses as recorded (no shared-object or kernel relocation).
        #[arg(long)]
        raw: bool,
    },
    /// Decode a snapshot's trace (or read a Tarmac trace) into gnatcov flat
    /// trace file(s).
    Export {
        /// Snapshot directory.
        #[arg(long, required_unless_present = "tarmac", conflicts_with = "tarmac")]
        snapshot: Option<PathBuf>,
        /// Tarmac trace (instead of a snapshot).
        #[arg(long)]
        tarmac: Option<PathBuf>,
        /// Tarmac lines that give no instruction set state are T32
        /// (Cortex-M traces).
        #[arg(long)]
        implicit_thumb: bool,
        /// Trace buffer to decode, by its name in the snapshot (default:
        /// the first). `--buffer` is the old name.
        #[arg(long = "source", visible_alias = "buffer", value_name = "NAME")]
        buffer: Option<String>,
        /// The executable the trace ran, named in the Info section with its
        /// size, time stamp and CRC32 (and giving the machine).
        #[arg(long)]
        elf: Option<PathBuf>,
        /// One file per trace ID (OUT with `-<id>` before the extension).
        #[arg(long)]
        per_id: bool,
        /// Write big-endian fields.
        #[arg(long)]
        big_endian: bool,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Object coverage: per routine and total instruction and conditional
    /// branch coverage, with an annotated disassembly.
    Coverage {
        #[command(flatten)]
        input: Inputs,
        /// Routines to report: names separated by commas, or @FILE with one
        /// name a line.
        #[arg(long)]
        routines: Option<String>,
        /// Summaries only, no disassembly.
        #[arg(long)]
        summary: bool,
    },
    /// Source line coverage as an lcov tracefile, from the ELF's DWARF
    /// line tables.
    Lcov {
        #[command(flatten)]
        input: Inputs,
        /// Output file (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Test name (`TN:` line).
        #[arg(long, default_value = "")]
        test_name: String,
    },
}

#[derive(Args)]
struct Inputs {
    /// The executable (ELF). Without one, a snapshot's memory dumps are the
    /// routines (one per dump), in the instruction set --isa gives.
    #[arg(long)]
    elf: Option<PathBuf>,
    /// Snapshot directories whose trace is decoded.
    #[arg(long)]
    snapshot: Vec<PathBuf>,
    /// Tarmac traces: their executed instructions (`IS`: condition failed).
    #[arg(long)]
    tarmac: Vec<PathBuf>,
    /// Tarmac lines that give no instruction set state are T32 (Cortex-M
    /// traces).
    #[arg(long)]
    implicit_thumb: bool,
    /// Instruction set of memory dumps when there is no ELF: a64, a32, t32,
    /// rv64, rv32.
    #[arg(long, default_value = "a64")]
    isa: String,
    /// Go on when --elf does not match what a gnatcov trace's header says
    /// of its executable (file size, CRC32, machine): a warning, not an error.
    #[arg(long)]
    allow_mismatch: bool,
    /// gnatcov trace files.
    traces: Vec<PathBuf>,
}

/// An error for exit status 1.
struct Fail(String);

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail(e.to_string())
    }
}

fn main() -> ExitCode {
    // Snapshot warnings (a missing memory dump...) on stderr.
    coresight_tools::cli::init_logging("trc_cov", "warn");
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(e)) => {
            eprintln!("trc_cov: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Fail> {
    match cli.cmd {
        Cmd::Dump { trace, raw } => {
            let t = read_file(&trace)?;
            print!("{}", dump(&t, raw));
        }
        Cmd::Export {
            snapshot,
            tarmac,
            implicit_thumb,
            buffer,
            elf,
            per_id,
            big_endian,
            output,
        } => {
            let merge = if per_id { Merge::PerTraceId } else { Merge::All };
            let (b, source) = match (&snapshot, &tarmac) {
                (Some(dir), _) => (decode_snapshot(dir, buffer.as_deref(), merge)?, dir),
                (None, Some(file)) => (read_tarmac(file, merge, implicit_thumb)?, file),
                (None, None) => return Err(Fail("give --snapshot DIR or --tarmac FILE".into())),
            };
            let (sig, machine) = match &elf {
                Some(p) => {
                    let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
                    let img = load_elf(p, &bytes)?;
                    (
                        Some(ExecSignature::of_file(p).map_err(|e| format!("{}: {e}", p.display()))?),
                        Some(img.machine),
                    )
                }
                None => (None, None),
            };
            let endian = if big_endian { Endian::Big } else { Endian::Little };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let streams = b.streams();
            if streams.is_empty() {
                return Err(Fail(format!("{}: no instructions were traced", source.display())));
            }
            for id in streams {
                let path = match id {
                    Some(id) => per_id_path(&output, id),
                    None => output.clone(),
                };
                let t = b.trace_file(id, machine, endian, sig.as_ref(), Some(DateTime::from_unix(now)));
                std::fs::write(&path, t.to_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
                eprintln!("trc_cov: wrote {} ({} entries)", path.display(), t.records.len());
            }
        }
        Cmd::Coverage {
            input,
            routines,
            summary,
        } => {
            let (mut img, entries, digits) = gather(&input)?;
            let xlen = if digits > 8 { 64 } else { 32 };
            if let Some(r) = routines {
                img.restrict(&routine_names(&r)?)?;
            }
            let x = Execution::from_entries(&img, &entries);
            let cov = Coverage::compute(&img, &x);
            if summary {
                for r in &cov.routines {
                    println!("{} {}:", r.routine.name, r.mark());
                    print!("{}", r.summary);
                    println!();
                }
                print!("{}", cov.total);
            } else {
                let mut text = disassembler(xlen);
                print!("{}", cov.report(digits, &mut text));
            }
        }
        Cmd::Lcov {
            input,
            output,
            test_name,
        } => {
            let Some(elf) = &input.elf else {
                return Err(Fail("lcov needs --elf (the DWARF line tables)".into()));
            };
            let bytes = std::fs::read(elf).map_err(|e| format!("{}: {e}", elf.display()))?;
            let (img, entries, _) = gather(&input)?;
            let x = Execution::from_entries(&img, &entries);
            let cov = Coverage::compute(&img, &x);
            let lines = lcov::LineTable::from_elf(&bytes).map_err(|e| format!("{}: {e}", elf.display()))?;
            let text = lcov::tracefile(&test_name, &cov, &lines);
            match output {
                Some(p) => std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?,
                None => print!("{text}"),
            }
        }
    }
    Ok(())
}

fn per_id_path(out: &Path, id: u8) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match out.extension() {
        Some(e) => format!("{stem}-{id:02x}.{}", e.to_string_lossy()),
        None => format!("{stem}-{id:02x}"),
    };
    out.with_file_name(name)
}

fn routine_names(arg: &str) -> Result<Vec<String>, Fail> {
    let text = match arg.strip_prefix('@') {
        Some(f) => std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"))?,
        None => arg.replace(',', "\n"),
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}

fn load_elf(path: &Path, bytes: &[u8]) -> Result<CodeImage, Fail> {
    if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err(Fail(format!(
            "{}: byte 0: not an ELF file (expected the magic 7f 45 4c 46)",
            path.display()
        )));
    }
    CodeImage::from_elf(bytes).map_err(|e| Fail(format!("{}: {e}", path.display())))
}

/// The image, all entries from traces and snapshots, and the address width.
fn gather(input: &Inputs) -> Result<(CodeImage, Vec<Entry>, usize), Fail> {
    let mut entries = Vec::new();
    let mut digits = 8;
    // The executable is read and checked once, before the traces are held
    // against it: a file that is not an ELF is refused as such.
    let elf = match &input.elf {
        Some(p) => {
            let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let img = load_elf(p, &bytes)?;
            Some((bytes, img))
        }
        None => None,
    };
    let elf_bytes = elf.as_ref().map(|(bytes, _)| bytes);
    let mut mismatched = false;
    for t in &input.traces {
        let f = read_file(t)?;
        if let (Some(elf), Some(bytes)) = (&input.elf, elf_bytes)
            && let Some(why) = exec_mismatch(&f, bytes)
        {
            // gnatcov's words, and what differs.
            eprintln!(
                "trc_cov: warning: executable file {} does not seem to match trace file {} ({why})",
                elf.display(),
                t.display()
            );
            mismatched = true;
        }
        digits = digits.max(f.header.pc_size.hex_digits());
        entries.extend(f.entries().copied());
    }
    for s in &input.snapshot {
        let b = decode_snapshot(s, None, Merge::All)?;
        entries.extend_from_slice(b.entries(None));
    }
    for t in &input.tarmac {
        let b = read_tarmac(t, Merge::All, input.implicit_thumb)?;
        entries.extend_from_slice(b.entries(None));
    }
    if mismatched && !input.allow_mismatch {
        return Err(Fail(
            "the executable does not match the trace (--allow-mismatch to go on)".into(),
        ));
    }
    if input.traces.is_empty() && input.snapshot.is_empty() && input.tarmac.is_empty() {
        return Err(Fail(
            "no trace given (gnatcov trace files, --snapshot or --tarmac)".into(),
        ));
    }
    let img = match elf {
        Some((_, img)) => img,
        None => {
            let Some(dir) = input.snapshot.first() else {
                return Err(Fail(
                    "no --elf: give one, or a --snapshot whose memory dumps stand for it".into(),
                ));
            };
            let isa = match input.isa.to_ascii_lowercase().as_str() {
                "a64" | "aarch64" => Isa::Aarch64,
                "a32" | "arm" => Isa::Arm,
                "t32" | "thumb" => Isa::Thumb2,
                "rv64" | "riscv64" => {
                    digits = 16;
                    Isa::RiscV
                }
                "rv32" | "riscv32" => Isa::RiscV,
                v => {
                    return Err(Fail(format!(
                        "--isa: unknown instruction set '{v}' (a64, a32, t32, rv64 or rv32)"
                    )));
                }
            };
            CodeImage::from_regions(snapshot_regions(dir)?, isa)
        }
    };
    if img.machine == coresight_gnatcov::format::EM_AARCH64 {
        digits = 16;
    }
    // RISC-V: addresses as wide as the ELF class (RV64: ELFCLASS64).
    if let Some(p) = &input.elf
        && img.machine == coresight_gnatcov::format::EM_RISCV
    {
        let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        digits = if bytes.get(4) == Some(&2) { 16 } else { 8 };
    }
    Ok((img, entries, digits))
}

/// What differs between an executable and what a gnatcov trace's header
/// says of it (the Info section's file size and CRC32, the header's ELF
/// machine), or `None` when nothing the trace says differs.
fn exec_mismatch(f: &coresight_gnatcov::format::TraceFile, elf: &[u8]) -> Option<String> {
    use coresight_gnatcov::format::{InfoKind, InfoValue};
    let endian = f.info_header.as_ref().map_or(f.header.endian, |h| h.endian);
    let number = |k| match f.info(k).map(|i| i.value(endian)) {
        Some(InfoValue::Number(n)) => Some(n),
        _ => None,
    };
    let mut why = Vec::new();
    if let Some(size) = number(InfoKind::ExecFileSize)
        && size != elf.len() as u64
    {
        why.push(format!("size {size} in the trace, {} in the file", elf.len()));
    }
    if let Some(crc) = number(InfoKind::ExecFileCrc32) {
        let have = coresight_gnatcov::export::crc32(elf) as u64;
        if crc != have {
            why.push(format!("CRC32 {crc} in the trace, {have} of the file"));
        }
    }
    // e_machine at byte 18, in the ELF's byte order (byte 5: 1 little, 2 big).
    if let (Some(m), Some(&order)) = (elf.get(18..20), elf.get(5)) {
        let machine = if order == 2 {
            u16::from_be_bytes([m[0], m[1]])
        } else {
            u16::from_le_bytes([m[0], m[1]])
        };
        if f.header.machine != 0 && machine != f.header.machine {
            why.push(format!(
                "machine {} in the trace, {machine} in the file",
                f.header.machine
            ));
        }
    }
    (!why.is_empty()).then(|| why.join(", "))
}

fn snapshot_regions(dir: &Path) -> Result<Vec<(u64, Vec<u8>)>, Fail> {
    let ss = Snapshot::load(dir)?;
    let mut out = Vec::new();
    for d in ss.devices.iter().filter(|d| d.is_core()) {
        for m in &d.dumps {
            let p = ss.path_of(&m.file);
            let data = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let from = (m.offset as usize).min(data.len());
            let to = if m.length == 0 {
                data.len()
            } else {
                (from + m.length as usize).min(data.len())
            };
            out.push((m.address, data[from..to].to_vec()));
        }
    }
    Ok(out)
}

/// A Tarmac trace's executed instructions as flat-trace entries, through
/// the same builder decoded trace goes to.
fn read_tarmac(path: &Path, merge: Merge, implicit_thumb: bool) -> Result<FlatTraceBuilder, Fail> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let opts = ReaderOptions {
        implicit_iset: implicit_thumb.then_some(Iset::Thumb),
    };
    let mut r = Reader::with_options(std::io::BufReader::new(f), opts);
    let mut b = FlatTraceBuilder::new(merge);
    trace_elements(&mut r, &mut b).map_err(|e| format!("{}: {e}", path.display()))?;
    b.finish();
    Ok(b)
}

/// Decodes one buffer of a snapshot into flat-trace entries.
fn decode_snapshot(dir: &Path, buffer: Option<&str>, merge: Merge) -> Result<FlatTraceBuilder, Fail> {
    let ss = Snapshot::load(dir)?;
    let names = ss.buffer_names();
    let Some(buf) = buffer.or(names.first().copied()).and_then(|n| ss.buffer(n)) else {
        return Err(Fail(format!(
            "{}: no such trace buffer (the snapshot has: {})",
            dir.display(),
            names.join(", ")
        )));
    };
    // Plug-in protocols (RISC-V trace) next to the built-in ones.
    let mut tree =
        match TreeBuilder::with_registry(&ss, riscv_trace::registry()).build(&buf.name, DecodeMode::FullDecode, |_| {})
        {
            Ok(t) => t,
            Err(coresight_decode::Error::NoDecoder { .. }) => {
                return Err(Fail(format!(
                    "{}: no decodable trace source in buffer {}",
                    dir.display(),
                    buf.name
                )));
            }
            Err(e) => return Err(e.into()),
        };
    let b = Arc::new(Lock::new(FlatTraceBuilder::new(merge)));
    tree.set_gen_elem_out(Box::new(SharedBuilder(b.clone())));
    // The buffer's files a chunk at a time (DSTREAM footers left out): the
    // capture is never whole in memory.
    let mut reader = coresight_decode::CaptureReader::open(ss.buffer_paths(buf), buf.has_dstream_footers())
        .map_err(|e| e.to_string())?;
    let mut chunk = vec![0u8; 1 << 20];
    let mut idx: TrcIndex = 0;
    'feed: loop {
        let n = std::io::Read::read(&mut reader, &mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        let mut at = 0;
        while at < n {
            let (r, used) = tree.trace_data_in(DatapathOp::Data, idx, &chunk[at..n]);
            if r.is_fatal() {
                return Err(Fail(format!("{}: decode stopped at trace byte {idx}", dir.display())));
            }
            if used == 0 && !r.is_wait() {
                break 'feed;
            }
            at += used;
            idx += used as TrcIndex;
        }
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    drop(tree);
    b.borrow_mut().finish();
    Ok(Arc::try_unwrap(b)
        .map(Lock::into_inner)
        .unwrap_or_else(|rc| std::mem::take(&mut *rc.borrow_mut())))
}

#[cfg(feature = "disasm")]
fn disassembler(riscv_xlen: u32) -> impl FnMut(&coresight_gnatcov::coverage::Insn) -> String {
    let mut d = coresight_decode::disasm::Disassembler::new().ok();
    if let Some(d) = d.as_mut() {
        d.set_riscv_xlen(riscv_xlen);
    }
    move |i| {
        d.as_ref()
            .and_then(|d| d.text(i.isa, i.addr, &i.bytes[..i.size as usize]))
            .unwrap_or_default()
    }
}

#[cfg(not(feature = "disasm"))]
fn disassembler(_riscv_xlen: u32) -> impl FnMut(&coresight_gnatcov::coverage::Insn) -> String {
    |_| String::new()
}
