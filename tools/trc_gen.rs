//! `trc_gen`: writes a generated snapshot, with its truth, for testing
//! decoders.
//!
//! ```text
//! trc_gen -protocol etmv4 -seed 7 -out DIR [-length N] [-unformatted]
//! trc_gen -protocol ptm -opt retstack=1 -opt isa=t32 -seed 7 -out DIR
//! trc_gen -protocol etmv4m -opt all=1 -opt bb=0 -seed 7 -out DIR
//! trc_gen -protocol ete -opt tme=1 -opt sessions=3 -unformatted -seed 7 -out DIR
//! ```
//! `-opt NAME=VALUE` sets a protocol option (PTM: isa, retstack,
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
//! `-tarmac FILE -elf ELF` encodes a real execution instead of a random
//! program: the Tarmac trace's instructions, with the ELF's loadable
//! segments as memory (`-protocol` etmv4 or ete for AArch64; etmv4, ptm or
//! etmv3 for AArch32); `truth.txt` then holds the trace's decoded truth.
//! DIR gets a complete snapshot (snapshot.ini, device files, trace.ini, the
//! buffer, the memory image) and `truth.txt`: the executed instruction
//! ranges (or software messages) in order, one a line; with several
//! sessions, each buffer's items follow a `session N` line.

use std::path::PathBuf;
use std::process::ExitCode;

use coresight_generator::etmv4::{self, Etmv4Options};
use coresight_generator::execution::{elf_images, generate_from_execution, insns_from_tarmac, ExecProtocol};
use coresight_generator::{generate, BufferLayout, GenOptions, GenProtocol, Generated};
use coresight_decode::tarmac::Reader;

fn usage() -> &'static str {
    "usage: trc_gen -protocol etmv4|etmv4m|ete|stm|itm|ptm|etmv3|tc2 -seed N -out DIR [-length N] [-unformatted] [-opt NAME=VALUE]...\n       trc_gen -protocol etmv4|ete|ptm|etmv3 -tarmac FILE -elf ELF -seed N -out DIR [-unformatted]\n"
}

/// A real execution (a Tarmac trace and its ELF) as trace.
fn from_execution(tarmac: &std::path::Path, elf: &std::path::Path, protocol: &str, opts: &GenOptions) -> Result<Generated, String> {
    let p = ExecProtocol::from_name(protocol).ok_or_else(|| format!("-protocol {protocol} cannot encode an execution (etmv4, ete, ptm, etmv3)"))?;
    let f = std::fs::File::open(tarmac).map_err(|e| format!("{}: {e}", tarmac.display()))?;
    let mut r = Reader::new(std::io::BufReader::new(f));
    let insns = insns_from_tarmac(&mut r).map_err(|e| format!("{}: {e}", tarmac.display()))?;
    let data = std::fs::read(elf).map_err(|e| format!("{}: {e}", elf.display()))?;
    let images = elf_images(&data).map_err(|e| format!("{}: {e}", elf.display()))?;
    generate_from_execution(&insns, &images, p, opts.seed, opts.layout)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = GenOptions::default();
    let mut etmv4_opts = Etmv4Options::default();
    let mut out: Option<PathBuf> = None;
    let mut tarmac: Option<PathBuf> = None;
    let mut elf: Option<PathBuf> = None;
    let mut protocol_name = String::from("etmv4");
    let mut i = 0;
    while i < args.len() {
        let val = |i: usize| args.get(i + 1).cloned();
        match args[i].as_str() {
            "-protocol" => match val(i).as_deref().and_then(GenProtocol::from_name) {
                Some(p) => {
                    opts.protocol = p;
                    protocol_name = val(i).unwrap_or_default();
                }
                None => {
                    eprintln!("trc_gen: -protocol needs one of: etmv4, etmv4m, ete, stm, itm, ptm, etmv3, tc2");
                    return ExitCode::from(2);
                }
            },
            "-seed" => match val(i).and_then(|v| v.parse().ok()) {
                Some(s) => opts.seed = s,
                None => {
                    eprintln!("trc_gen: -seed needs a number");
                    return ExitCode::from(2);
                }
            },
            "-length" => match val(i).and_then(|v| v.parse().ok()) {
                Some(n) => opts.length = n,
                None => {
                    eprintln!("trc_gen: -length needs a number");
                    return ExitCode::from(2);
                }
            },
            "-out" => out = val(i).map(PathBuf::from),
            "-tarmac" => tarmac = val(i).map(PathBuf::from),
            "-elf" => elf = val(i).map(PathBuf::from),
            "-opt" => {
                let v = val(i).unwrap_or_default();
                let (name, value) = v.split_once('=').unwrap_or((&v, "1"));
                let set = match opts.protocol {
                    GenProtocol::Etmv4 | GenProtocol::Etmv4M => etmv4_opts.set_value(name, value),
                    _ => opts.protocol.set_option(name, value),
                };
                if let Err(e) = set {
                    eprintln!("trc_gen: -opt {v}: {e} (give -protocol first)");
                    return ExitCode::from(2);
                }
            }
            "-unformatted" => {
                opts.layout = BufferLayout::Unformatted;
                i += 1;
                continue;
            }
            "-help" | "--help" | "-h" => {
                print!("{}", usage());
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("trc_gen: unknown option {other}\n{}", usage());
                return ExitCode::from(2);
            }
        }
        i += 2;
    }
    let Some(dir) = out else {
        eprint!("trc_gen: -out DIR is required\n{}", usage());
        return ExitCode::from(2);
    };
    let g = match (&tarmac, &elf) {
        (Some(t), Some(e)) => match from_execution(t, e, &protocol_name, &opts) {
            Ok(g) => g,
            Err(msg) => {
                eprintln!("trc_gen: {msg}");
                return ExitCode::from(2);
            }
        },
        (None, None) => match opts.protocol {
            GenProtocol::Etmv4 | GenProtocol::Etmv4M => etmv4::generate_with(&opts, &etmv4_opts),
            _ => generate(&opts),
        },
        _ => {
            eprintln!("trc_gen: -tarmac and -elf go together");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = g.spec.write_to(&dir) {
        eprintln!("trc_gen: {e}");
        return ExitCode::FAILURE;
    }
    let truth = dir.join("truth.txt");
    if let Err(e) = std::fs::write(&truth, g.truth_text()) {
        eprintln!("trc_gen: {}: {e}", truth.display());
        return ExitCode::FAILURE;
    }
    println!("{}: {} {} items of truth ({})", dir.display(), g.truth.len(), opts.protocol.name(), g.spec.description);
    ExitCode::SUCCESS
}
