//! `trc_pkt_lister`: lists and decodes the trace in an Arm snapshot.
//!
//! Takes OpenCSD's `trc_pkt_lister` options and writes its listing format
//! byte for byte, so existing scripts and reference listings work as they
//! are. Run with `-help` (or `--help`) for the options.
//!
//! Unlike OpenCSD's lister it also reports failures on standard error and
//! in its exit status: 0 listed, 1 failed (snapshot, source or trace file
//! not found or unreadable, no supported protocol, fatal decode error), 2
//! bad option value.
//!
//! Besides the built-in CoreSight protocols it registers the plug-in
//! protocols of this workspace (RISC-V trace), so their snapshots list and
//! decode too.

use coresight_decode::shared::shared;
use coresight_tools::lister;

/// Options that take a value (skipped when looking for `--version`).
const WITH_VALUE: &[&str] = &[
    "-ss_dir",
    "-id",
    "-src_name",
    "-threads",
    "-test_waits",
    "-macc_cache_p_size",
    "-macc_cache_p_num",
    "-logfilename",
];

/// Whether the command line asks for the version (`--version` or
/// `-version` as an option, not as another option's value).
fn wants_version(args: &[String]) -> bool {
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--version" | "-version" | "-V" => return true,
            a if WITH_VALUE.contains(&a) => i += 1,
            _ => {}
        }
        i += 1;
    }
    false
}

fn main() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).try_init();
    let argv: Vec<String> = std::env::args().collect();
    let args = argv.get(1..).unwrap_or(&[]);
    if wants_version(args) {
        println!("trc_pkt_lister (coresight-decode) {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    let out = match lister::output_for_args(args) {
        Ok(l) => shared(l),
        Err(msg) => {
            // OpenCSD's words on standard output, plain ones on stderr.
            print!("{msg}");
            eprintln!(
                "trc_pkt_lister: {}",
                msg.lines()
                    .next()
                    .unwrap_or("bad logging options")
                    .trim_start_matches("Trace Packet Lister : Error: ")
            );
            let usage = msg.starts_with("Bad logger");
            std::process::exit(if usage {
                lister::EXIT_USAGE
            } else {
                lister::EXIT_FAILURE
            });
        }
    };
    // When the listing itself goes to standard error, failures are not
    // written there twice.
    let listing_on_stderr = args.iter().any(|a| a == "-logstderr");
    let echo = |s: &str| {
        if !listing_on_stderr {
            eprint!("{s}");
        }
    };
    let status = lister::run_program(&argv, &|k| std::env::var(k).ok(), out, riscv_trace::registry, &echo);
    std::process::exit(status);
}
