//! `trc_gen`: writes a generated snapshot, with its truth, for testing
//! decoders.
//!
//! ```text
//! trc_gen -protocol etmv4 -seed 7 -out DIR [-length N] [-unformatted]
//!         [-etmv4-on LIST] [-etmv4-off LIST]
//! ```
//! ETMv4 options (`etmv4`, `etmv4m`) not listed are chosen from the seed;
//! LIST is comma-separated names: cc (cycle counting), ts (timestamps),
//! rs (return stack), bb (branch broadcast), exc (exceptions), ctxt
//! (context changes), match (exact-match addresses), f45 (atom formats 4
//! and 5), or `all`. `-etmv4-rs-implied` lets an exception at the target
//! of an indirect branch imply that target with the return stack on
//! (valid trace OpenCSD 1.8.0 mis-decodes).
//! DIR gets a complete snapshot (snapshot.ini, device files, trace.ini, the
//! buffer, the memory image) and `truth.txt`: the executed instruction
//! ranges (or software messages) in order, one a line.

use std::path::PathBuf;
use std::process::ExitCode;

use coresight_decode::generator::etmv4::{self, Choice, Etmv4Options, OPTION_NAMES};
use coresight_decode::generator::{generate, BufferLayout, GenOptions, GenProtocol};

fn usage() -> &'static str {
    "usage: trc_gen -protocol etmv4|etmv4m|stm|itm -seed N -out DIR [-length N] [-unformatted]\n\
     \x20                [-etmv4-on LIST] [-etmv4-off LIST] [-etmv4-rs-implied]\n\
     \x20                (LIST: all or cc,ts,rs,bb,exc,ctxt,match,f45)\n"
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = GenOptions::default();
    let mut etmv4_opts = Etmv4Options::default();
    let mut out: Option<PathBuf> = None;
    let mut i = 0;
    while i < args.len() {
        let val = |i: usize| args.get(i + 1).cloned();
        match args[i].as_str() {
            "-protocol" => match val(i).as_deref().and_then(GenProtocol::from_name) {
                Some(p) => opts.protocol = p,
                None => {
                    eprintln!("trc_gen: -protocol needs one of: etmv4, etmv4m, stm, itm");
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
            flag @ ("-etmv4-on" | "-etmv4-off") => {
                let c = if flag == "-etmv4-on" { Choice::On } else { Choice::Off };
                let Some(list) = val(i) else {
                    eprintln!("trc_gen: {flag} needs a list of options");
                    return ExitCode::from(2);
                };
                for name in list.split(',').filter(|n| !n.is_empty()) {
                    let names: &[&str] = if name == "all" { OPTION_NAMES } else { std::slice::from_ref(&name) };
                    for n in names {
                        if !etmv4_opts.set(n, c) {
                            eprintln!("trc_gen: unknown ETMv4 option {n} (one of: all, {})", OPTION_NAMES.join(", "));
                            return ExitCode::from(2);
                        }
                    }
                }
            }
            "-etmv4-rs-implied" => {
                etmv4_opts.implied_target_with_rs = true;
                i += 1;
                continue;
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
    let g = match opts.protocol {
        GenProtocol::Etmv4 | GenProtocol::Etmv4M => etmv4::generate_with(&opts, &etmv4_opts),
        _ => generate(&opts),
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
