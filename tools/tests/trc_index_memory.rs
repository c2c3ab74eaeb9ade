//! `trc_index count` loads of the index only what its split decode reads:
//! the memory it allocates (anonymous, not the mapped capture's page
//! cache) stays under a fixed ceiling on a 256 MiB capture, where loading
//! the whole index (an entry per sync point, timestamp and context, a
//! source block per 4 KiB) took 690 MB. Ignored by default (it writes
//! 256 MiB and reads /proc); .ci/run runs it.

mod anon_memory;

use std::process::Command;

use anon_memory::{peak_anon_kib, snapshot};

/// Allocated memory `trc_index count` may use on any capture.
const CEILING_KIB: u64 = 16 * 1024;

#[test]
#[ignore = "writes a 256 MiB capture and its index and reads /proc; run by .ci/run"]
fn trc_index_count_holds_no_whole_index() {
    let dir = std::env::temp_dir().join(format!("trc_index_memory_{}", std::process::id()));
    snapshot(&dir, 256 << 20);
    let trc_index = env!("CARGO_BIN_EXE_trc_index");
    let built = Command::new(trc_index).arg("build").arg(&dir).output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let mut peaks = Vec::new();
    for pieces in ["2", "64"] {
        peaks.push(peak_anon_kib(Command::new(trc_index).arg("count").arg(&dir).args([
            "--threads",
            "2",
            "--pieces",
            pieces,
        ])));
    }
    std::fs::remove_dir_all(&dir).ok();
    for (pieces, peak) in [2, 64].iter().zip(peaks) {
        assert!(
            peak <= CEILING_KIB,
            "trc_index count --pieces {pieces} allocated up to {peak} KiB on a 256 MiB capture, over the {CEILING_KIB} KiB ceiling"
        );
    }
}
