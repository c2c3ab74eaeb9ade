//! trc_bench holds its capture once, mapped: the memory it allocates
//! (anonymous, not the mapped file's page cache) stays under a fixed
//! ceiling on a 256 MiB capture, where it used to hold two copies. Ignored
//! by default (it writes 256 MiB and reads /proc); .ci/run runs it.

mod anon_memory;

use std::process::Command;

use anon_memory::{peak_anon_kib, snapshot};

/// Allocated memory trc_bench may use on any capture: its decoder, not
/// the capture.
const CEILING_KIB: u64 = 32 * 1024;

#[test]
#[ignore = "writes a 256 MiB capture and reads /proc; run by .ci/run"]
fn trc_bench_holds_no_copy_of_the_capture() {
    let dir = std::env::temp_dir().join(format!("trc_bench_memory_{}", std::process::id()));
    snapshot(&dir, 256 << 20);
    let peak = peak_anon_kib(
        Command::new(env!("CARGO_BIN_EXE_trc_bench"))
            .arg(&dir)
            .args(["--iter", "1"]),
    );
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        peak <= CEILING_KIB,
        "trc_bench allocated up to {peak} KiB on a 256 MiB capture, over the {CEILING_KIB} KiB ceiling"
    );
}
