//! `trc_gen`: writes a generated snapshot, with its truth, for testing
//! decoders.
//!
//! ```text
//! trc_gen --protocol etmv4 --seed 7 --out DIR [--length N] [--unformatted]
//! trc_gen --protocol ptm --opt retstack=1 --opt isa=t32 --seed 7 --out DIR
//! trc_gen --protocol etmv4m --opt all=1 --opt bb=0 --seed 7 --out DIR
//! trc_gen --protocol ete --opt tme=1 --opt sessions=3 --unformatted --seed 7 --out DIR
//! ```
//! (The single-dash spellings of earlier versions, `-protocol` and so on,
//! are still accepted.) `--opt NAME=VALUE` sets a protocol option (PTM: isa, retstack,
//! bbroadcast, cycleacc, timestamps, ctxid, exceptions, filter, pft10;
//! ETMv3: isa, cycleacc, timestamps, ctxid, exceptions, aborts, filter,
//! altbranch; ETMv4 (`etmv4`, and `etmv4m` for an M-profile core): cc, ts,
//! rs, bb, exc, ctxt, match, f45, all, and rs_implied (off unless set: an
//! exception at an indirect branch's target implies that target with the
//! return stack on, valid trace OpenCSD 1.8.0 mis-decodes)); ETE (`ete`,
//! an Armv9 core): ETMv4's options and tsmark (timestamp markers), tme
//! (transactions), ite (instrumentation), rme (Realm and Root states), wfx
//! (WFI/WFE/WFIT/WFET as waypoints), multi (several sessions, decoded with
//! `-multi_session`) or sessions=N, all; values 1, 0 or random (ISA: a32,
//! t32, mixed). `tc2` puts PTMs and ETMv3s in one buffer.
//! `--tarmac FILE --elf ELF` encodes a real execution instead of a random
//! program: the Tarmac trace's instructions, with the ELF's loadable
//! segments as memory (`--protocol` etmv4 or ete for AArch64; etmv4, ptm or
//! etmv3 for AArch32); `truth.txt` then holds the trace's decoded truth.
//! DIR gets a complete snapshot (snapshot.ini, device files, trace.ini, the
//! buffer, the memory image) and `truth.txt`: the executed instruction
//! ranges (or software messages) in order, one a line; with several
//! sessions, each buffer's items follow a `session N` line. `--no-truth`
//! leaves the truth out, `--truth-gz` writes it gzip-compressed as
//! `truth.txt.gz`. ETMv4 and ETE snapshots (without `--tarmac`) are written
//! as they are made, in memory bounded by the program rather than the trace.
//!
//! ```text
//! trc_gen --protocol etmv4 --seed 7 --perf-data FILE [--cpus N] [--unformatted] [--size 64M] [--per-thread] [--untimed]
//!         [--space user|kernel|module]
//! ```
//! writes the generated executions as a Linux `perf.data` (what `perf record -e cs_etm//u -a`
//! writes on an Arm64 machine: ETMv4 or ETE, formatted ETR frames interleaving every CPU's
//! trace or, with `--unformatted`, one raw TRBE stream per CPU), the ELF executable the
//! programs run in as `FILE.elf` (recorded in the MMAP2 and build-id records by its absolute
//! path, or `--elf-path`), and each CPU's truth as `FILE.cpuN.truth.txt` (one copy of the
//! trace: with `--size` each AUX buffer holds whole copies of it). With `--tarmac FILE --elf
//! ELF` the recording is of that real execution (A64 code, one CPU) and `FILE.elf` is a copy
//! of ELF.

//!
//! Exit status: 0 written, 1 failed (a file that could not be read or
//! written), 2 bad usage.
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use coresight_generator::etmv4::{self, Etmv4Options};
use coresight_generator::execution::{ExecInsn, ExecProtocol, elf_images, generate_from_execution, insns_from_tarmac};
use coresight_generator::perf_data::{
    PerfOptions, PerfProtocol, PerfSpace, generate_perf_data, generate_perf_data_from_execution,
};
use coresight_generator::stream::{Streamed, write_ete, write_etmv4};
use coresight_generator::truth_file::{TRUTH_FILE, TRUTH_FILE_GZ, TruthFile, remove_truth};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Generated, generate};
use coresight_tarmac::Reader;
use coresight_tools::cli;

const PROGRAM: &str = "trc_gen";

const OPTIONS_HELP: &str = "\
Protocol options (--opt NAME=VALUE; VALUE 1, 0 or random; NAME alone is NAME=1):
  ptm     isa (a32, t32, mixed), retstack, bbroadcast, cycleacc, timestamps,
          ctxid, exceptions, filter, pft10
  etmv3   isa (a32, t32, mixed), cycleacc, timestamps, ctxid, exceptions,
          aborts, filter, altbranch
  etmv4, etmv4m (an M-profile core)
          cc, ts, rs, bb, exc, ctxt, match, f45, all, and rs_implied (off
          unless set: an exception at an indirect branch's target implies
          that target with the return stack on)
  ete     the etmv4 options and tsmark (timestamp markers), tme
          (transactions), ite (instrumentation), rme (Realm and Root states),
          wfx (WFI/WFE/WFIT/WFET as waypoints), multi (several sessions,
          decoded with trc_pkt_lister -multi_session) or sessions=N, all
  stm, itm, tc2 (PTMs and ETMv3s in one buffer): no options

The output directory gets a complete snapshot (snapshot.ini, device files,
trace.ini, the buffer, the memory image) and truth.txt: the executed
instruction ranges (or software messages) in order, one a line (with
--truth-gz: truth.txt.gz; with --no-truth: none). ETMv4 and ETE snapshots
are written as they are made: a capture of gigabytes needs a few megabytes.

Exit status: 0 written; 1 failed (a file that could not be read or written);
2 bad usage.";

#[derive(Parser)]
#[command(
    name = "trc_gen",
    version,
    about = "Write a generated trace snapshot, with its truth, for testing decoders",
    after_help = OPTIONS_HELP
)]
struct Cli {
    /// Protocol to generate: etmv4, etmv4m, ete, stm, itm, ptm, etmv3 or
    /// tc2 (with --tarmac: etmv4, ete, ptm or etmv3).
    #[arg(long, value_name = "NAME", default_value = "etmv4")]
    protocol: String,
    /// Seed of the random program and trace options: the same seed gives
    /// the same snapshot.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Directory to write the snapshot to (created if needed).
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "perf_data",
        conflicts_with = "perf_data"
    )]
    out: Option<PathBuf>,
    /// Write a Linux perf.data instead of a snapshot (etmv4 or ete): FILE, the ELF as
    /// FILE.elf and each CPU's truth as FILE.cpuN.truth.txt (with --tarmac: of that
    /// execution, FILE.elf a copy of --elf).
    #[arg(long, value_name = "FILE")]
    perf_data: Option<PathBuf>,
    /// With --perf-data: CPUs traced, each running its own program (default 1).
    #[arg(long, value_name = "N", requires = "perf_data")]
    cpus: Option<u32>,
    /// With --perf-data: at least this much AUX data (e.g. 64M), the trace repeated in
    /// whole copies.
    #[arg(long, value_name = "BYTES", requires = "perf_data", value_parser = parse_size)]
    size: Option<u64>,
    /// With --perf-data: a per-thread recording (one CPU, no CPU or time in samples).
    #[arg(long, requires = "perf_data")]
    per_thread: bool,
    /// With --perf-data: trace units without timestamps (as simpleperf records), so that
    /// perf decodes the CPUs' buffers one after the other, without time.
    #[arg(long, requires = "perf_data")]
    untimed: bool,
    /// With --perf-data: write pipe mode, as `perf record -o -` does (the same recording;
    /// `perf script -i FILE` and `trc_perf script FILE` or `- < FILE` read it).
    #[arg(long, requires = "perf_data")]
    pipe: bool,
    /// With --perf-data: the ELF's path as the recording gives it (default: the absolute
    /// path of FILE.elf).
    #[arg(long, value_name = "PATH", requires = "perf_data")]
    elf_path: Option<String>,
    /// With --perf-data: where the code runs: user (processes), kernel (the kernel image:
    /// FILE.elf is its vmlinux) or module (a loadable module: the module written beside FILE
    /// as kgen.ko, or under the file name of --elf-path, which the recording gives). Kernel
    /// recordings come with perf's --kcore folder FILE.kcore_dir (kcore, kallsyms, modules).
    #[arg(long, value_name = "SPACE", requires = "perf_data", conflicts_with = "tarmac", default_value = "user",
          value_parser = ["user", "kernel", "module"])]
    space: String,
    /// Approximate number of waypoints (branches) or messages.
    #[arg(long, value_name = "N", default_value_t = 200)]
    length: usize,
    /// Write the trace of the one source unformatted (no CoreSight frames).
    #[arg(long)]
    unformatted: bool,
    /// Write no truth file (a long trace's truth is some twenty times its size).
    #[arg(long, conflicts_with_all = ["truth_gz", "perf_data"])]
    no_truth: bool,
    /// Write the truth gzip-compressed, as truth.txt.gz.
    #[arg(long, conflicts_with = "perf_data")]
    truth_gz: bool,
    /// A protocol option, NAME=VALUE (see below); repeatable.
    #[arg(long = "opt", value_name = "NAME=VALUE")]
    opts: Vec<String>,
    /// Encode a real execution instead of a random program: this Tarmac
    /// trace's instructions (with --elf).
    #[arg(long, value_name = "FILE", requires = "elf")]
    tarmac: Option<PathBuf>,
    /// The ELF file the --tarmac trace ran: its loadable segments are the
    /// snapshot's memory.
    #[arg(long, value_name = "ELF", requires = "tarmac")]
    elf: Option<PathBuf>,
}

/// A byte count with an optional K, M or G (binary) suffix.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1u64 << 10),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1 << 20),
        Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a size (a number with an optional K, M or G)"))
}

/// `--perf-data`: the recording, its ELF and truths. Errors: the message and the exit status.
fn write_perf_data(a: &Cli, opts: &GenOptions, etmv4_opts: &Etmv4Options, file: &Path) -> Result<String, (String, u8)> {
    let protocol = PerfProtocol::from_name(&a.protocol).ok_or_else(|| {
        (
            format!(
                "--perf-data: --protocol {} is not traced by perf here (etmv4 or ete)",
                a.protocol
            ),
            cli::EXIT_USAGE,
        )
    })?;
    let failed = |m: String| (m, cli::EXIT_FAILURE);
    let mut elf_file = file.as_os_str().to_owned();
    elf_file.push(".elf");
    let elf_file = PathBuf::from(elf_file);
    let space = match a.space.as_str() {
        "kernel" => PerfSpace::Kernel,
        "module" => PerfSpace::Module,
        _ => PerfSpace::User,
    };
    let elf_path = match &a.elf_path {
        Some(p) => p.clone(),
        None => {
            // The absolute path, so that perf finds the ELF without --symfs.
            let dir = match file.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(d) => d.to_path_buf(),
                None => PathBuf::from("."),
            };
            let dir = std::fs::canonicalize(&dir).map_err(|e| failed(format!("cannot find {}: {e}", dir.display())))?;
            let name = match space {
                PerfSpace::Module => std::ffi::OsStr::new("kgen.ko"),
                _ => elf_file.file_name().unwrap_or_default(),
            };
            dir.join(name).to_string_lossy().into_owned()
        }
    };
    let etmv4 = match opts.protocol {
        GenProtocol::Ete(o) => o.etmv4,
        _ => *etmv4_opts,
    };
    let po = PerfOptions {
        seed: opts.seed,
        protocol,
        layout: opts.layout,
        cpus: a.cpus.unwrap_or(1),
        length: opts.length,
        etmv4,
        min_aux_bytes: a.size.unwrap_or(0),
        elf_path,
        per_thread: a.per_thread,
        untimed: a.untimed,
        pipe: a.pipe,
        space,
    };
    let r = match (&a.tarmac, &a.elf) {
        (Some(t), Some(e)) => {
            let (insns, data) = read_execution(t, e)?;
            generate_perf_data_from_execution(&po, &insns, &data)
                .map_err(|m| (format!("--perf-data --tarmac {}: {m}", t.display()), cli::EXIT_USAGE))?
        }
        _ => generate_perf_data(&po).map_err(|m| (format!("--perf-data: {m}"), cli::EXIT_USAGE))?,
    };
    let write =
        |p: &Path, b: &[u8]| std::fs::write(p, b).map_err(|e| failed(format!("cannot write {}: {e}", p.display())));
    write(file, &r.perf_data)?;
    write(&elf_file, &r.elf.bytes)?;
    if let Some(k) = &r.kernel {
        let mut d = file.as_os_str().to_owned();
        d.push(".kcore_dir");
        let d = PathBuf::from(d);
        std::fs::create_dir_all(&d).map_err(|e| failed(format!("cannot make {}: {e}", d.display())))?;
        write(&d.join("kcore"), &k.kcore)?;
        write(&d.join("kallsyms"), k.kallsyms.as_bytes())?;
        write(&d.join("modules"), k.modules.as_bytes())?;
        if let Some(m) = &k.module {
            let name = Path::new(&po.elf_path)
                .file_name()
                .unwrap_or(std::ffi::OsStr::new("kgen.ko"));
            let dir = file.parent().unwrap_or(Path::new(""));
            write(&dir.join(name), &m.bytes)?;
        }
    }
    for c in &r.cpus {
        let mut t = file.as_os_str().to_owned();
        t.push(format!(".cpu{}.truth.txt", c.cpu));
        let text: String = c.truth.iter().map(|t| format!("{t}\n")).collect();
        write(Path::new(&t), text.as_bytes())?;
    }
    let cpus: Vec<String> = r
        .cpus
        .iter()
        .map(|c| {
            format!(
                "cpu {} pid {} trace ID {:#x}: {} items ({})",
                c.cpu,
                c.pid,
                c.trace_id,
                c.truth.len(),
                c.description
            )
        })
        .collect();
    Ok(format!(
        "{}: {} {} perf.data, {} AUX bytes in {} buffers; {}",
        file.display(),
        protocol.name(),
        if opts.layout == BufferLayout::Unformatted {
            "unformatted"
        } else {
            "formatted"
        },
        r.aux_bytes(),
        r.buffers.len(),
        cpus.join("; ")
    ))
}

const RENAMED: &[(&str, &str)] = &[
    ("-protocol", "--protocol"),
    ("-seed", "--seed"),
    ("-out", "--out"),
    ("-length", "--length"),
    ("-unformatted", "--unformatted"),
    ("-opt", "--opt"),
    ("-tarmac", "--tarmac"),
    ("-elf", "--elf"),
    ("-help", "--help"),
];

/// The instructions of a Tarmac trace and the bytes of its ELF. Errors: the message and the
/// exit status.
fn read_execution(tarmac: &Path, elf: &Path) -> Result<(Vec<ExecInsn>, Vec<u8>), (String, u8)> {
    let failed = |m: String| (m, cli::EXIT_FAILURE);
    let f = std::fs::File::open(tarmac).map_err(|e| failed(format!("cannot read {}: {e}", tarmac.display())))?;
    let mut r = Reader::new(std::io::BufReader::new(f));
    let insns = insns_from_tarmac(&mut r).map_err(|e| failed(format!("{}: {e}", tarmac.display())))?;
    let data = std::fs::read(elf).map_err(|e| failed(format!("cannot read {}: {e}", elf.display())))?;
    Ok((insns, data))
}

/// A real execution (a Tarmac trace and its ELF) as trace. Errors: the
/// message and the exit status.
fn from_execution(
    tarmac: &std::path::Path,
    elf: &std::path::Path,
    protocol: &str,
    opts: &GenOptions,
) -> Result<Generated, (String, u8)> {
    let p = ExecProtocol::from_name(protocol).ok_or_else(|| {
        (
            format!("--protocol {protocol} cannot encode an execution (etmv4, ete, ptm, etmv3)"),
            cli::EXIT_USAGE,
        )
    })?;
    let failed = |m: String| (m, cli::EXIT_FAILURE);
    let (insns, data) = read_execution(tarmac, elf)?;
    let images = elf_images(&data).map_err(|e| failed(format!("{}: {e}", elf.display())))?;
    // What the protocol cannot encode (A32 code for ETE...) is a wrong
    // choice of protocol: bad usage.
    generate_from_execution(&insns, &images, p, opts.seed, opts.layout).map_err(|m| (m, cli::EXIT_USAGE))
}

fn main() -> ExitCode {
    let args = cli::renamed_options(PROGRAM, std::env::args_os(), RENAMED);
    let a = Cli::parse_from(args);
    let Some(protocol) = GenProtocol::from_name(&a.protocol) else {
        return cli::usage_error(
            PROGRAM,
            format!(
                "unknown protocol '{}': one of etmv4, etmv4m, ete, stm, itm, ptm, etmv3, tc2",
                a.protocol
            ),
        );
    };
    let mut opts = GenOptions {
        seed: a.seed,
        protocol,
        length: a.length,
        ..GenOptions::default()
    };
    if a.unformatted {
        opts.layout = BufferLayout::Unformatted;
    }
    let mut etmv4_opts = Etmv4Options::default();
    for v in &a.opts {
        let (name, value) = v.split_once('=').unwrap_or((v, "1"));
        let set = match opts.protocol {
            GenProtocol::Etmv4 | GenProtocol::Etmv4M => etmv4_opts.set_value(name, value),
            _ => opts.protocol.set_option(name, value),
        };
        if let Err(e) = set {
            return cli::usage_error(PROGRAM, format!("--opt {v}: {e}"));
        }
    }
    if let Some(file) = &a.perf_data {
        return match write_perf_data(&a, &opts, &etmv4_opts, file) {
            Ok(msg) => {
                println!("{msg}");
                ExitCode::SUCCESS
            }
            Err((msg, code)) if code == cli::EXIT_USAGE => cli::usage_error(PROGRAM, msg),
            Err((msg, _)) => cli::fail(PROGRAM, msg),
        };
    }
    if a.cpus.is_some() || a.size.is_some() || a.per_thread || a.elf_path.is_some() {
        return cli::usage_error(
            PROGRAM,
            "--cpus, --size, --per-thread and --elf-path go with --perf-data FILE",
        );
    }
    let Some(dir) = &a.out else {
        return cli::usage_error(PROGRAM, "--out DIR or --perf-data FILE is needed");
    };
    let truth = if a.no_truth {
        None
    } else {
        Some(if a.truth_gz { TRUTH_FILE_GZ } else { TRUTH_FILE })
    };
    if a.tarmac.is_none()
        && matches!(
            opts.protocol,
            GenProtocol::Etmv4 | GenProtocol::Etmv4M | GenProtocol::Ete(_)
        )
    {
        // Written as it is made: memory bounded by the program, not the trace.
        return match write_streamed(dir, &opts, &etmv4_opts, a.truth_gz, truth.is_some()) {
            Ok(s) => {
                println!(
                    "{}: {} {} items of truth ({})",
                    dir.display(),
                    s.truth_items,
                    opts.protocol.name(),
                    s.description
                );
                ExitCode::SUCCESS
            }
            Err(e) => cli::fail(PROGRAM, format!("cannot write the snapshot to {}: {e}", dir.display())),
        };
    }
    let g = match (&a.tarmac, &a.elf) {
        (Some(t), Some(e)) => match from_execution(t, e, &a.protocol, &opts) {
            Ok(g) => g,
            Err((msg, code)) if code == cli::EXIT_USAGE => return cli::usage_error(PROGRAM, msg),
            Err((msg, _)) => return cli::fail(PROGRAM, msg),
        },
        _ => match opts.protocol {
            GenProtocol::Etmv4 | GenProtocol::Etmv4M => etmv4::generate_with(&opts, &etmv4_opts),
            _ => generate(&opts),
        },
    };
    if let Err(e) = g.spec.write_to(dir) {
        return cli::fail(PROGRAM, format!("cannot write the snapshot to {}: {e}", dir.display()));
    }
    let written = match truth {
        Some(_) => TruthFile::create(dir, a.truth_gz).and_then(|mut f| {
            for t in &g.truth {
                writeln!(f, "{t}")?;
            }
            f.finish()
        }),
        None => remove_truth(dir),
    };
    if let Err(e) = written {
        let name = truth.unwrap_or(TRUTH_FILE);
        return cli::fail(PROGRAM, format!("cannot write {}: {e}", dir.join(name).display()));
    }
    println!(
        "{}: {} {} items of truth ({})",
        dir.display(),
        g.truth.len(),
        opts.protocol.name(),
        g.spec.description
    );
    ExitCode::SUCCESS
}

/// An ETMv4 or ETE snapshot written as it is made, with its truth file
/// (`truth`; compressed: `gz`) or none.
fn write_streamed(
    dir: &Path,
    opts: &GenOptions,
    etmv4_opts: &Etmv4Options,
    gz: bool,
    truth: bool,
) -> std::io::Result<Streamed> {
    let write = |t: Option<&mut dyn std::io::Write>| match opts.protocol {
        GenProtocol::Ete(o) => write_ete(opts, &o, dir, t),
        _ => write_etmv4(opts, etmv4_opts, dir, t),
    };
    std::fs::create_dir_all(dir)?;
    if !truth {
        remove_truth(dir)?;
        return write(None);
    }
    let mut f = TruthFile::create(dir, gz)?;
    let s = write(Some(&mut f))?;
    f.finish()?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("M").is_err());
        assert!(parse_size("12x").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }
}
