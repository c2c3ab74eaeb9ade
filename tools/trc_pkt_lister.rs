//! `trc_pkt_lister`: lists and decodes the trace in an Arm snapshot.
//!
//! Takes OpenCSD's `trc_pkt_lister` options and writes its listing format
//! byte for byte, so existing scripts and reference listings work as they
//! are. Run with `-help` for the options.
//!
//! Besides the built-in CoreSight protocols it registers the plug-in
//! protocols of this workspace (RISC-V trace), so their snapshots list and
//! decode too.

use coresight_decode::lister;
use coresight_decode::logger::shared;

fn main() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).try_init();
    let argv: Vec<String> = std::env::args().collect();
    let out = match lister::output_for_args(argv.get(1..).unwrap_or(&[])) {
        Ok(l) => shared(l),
        Err(msg) => {
            print!("{msg}");
            std::process::exit(2);
        }
    };
    let status = lister::run_with_registry_fn(&argv, &|k| std::env::var(k).ok(), out, riscv_trace::registry);
    std::process::exit(status);
}
