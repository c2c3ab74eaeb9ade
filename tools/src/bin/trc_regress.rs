//! `trc_regress`: decodes a set of snapshots with the lister (in-process)
//! and compares each listing with its expected listing, as the conformance
//! runner does. Run with `--help` for the options. Exit status: 0 all
//! passed, 1 a case failed or the input could not be read, 2 bad usage;
//! errors on standard error. The work is done by
//! [`coresight_tools::regress`].

fn main() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).try_init();
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let status = coresight_tools::regress::main_with_streams(&args, &mut stdout.lock(), Some(&mut stderr.lock()));
    std::process::exit(status);
}
