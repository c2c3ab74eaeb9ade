//! `trc_index count` loads of the index only what its split decode reads:
//! the memory it allocates (anonymous, not the mapped capture's page
//! cache) stays under a fixed ceiling on a 256 MiB capture, where loading
//! the whole index (an entry per sync point, timestamp and context, a
//! source block per 4 KiB) took 690 MB. Ignored by default (it writes
//! 256 MiB and reads /proc); .ci/run runs it.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Allocated memory `trc_index count` may use on any capture.
const CEILING_KIB: u64 = 16 * 1024;

/// The most anonymous memory (RssAnon, KiB) seen while `cmd` runs,
/// sampled every few milliseconds: an index loaded whole is held for the
/// whole decode, so sampling cannot miss it.
fn peak_anon_kib(cmd: &mut Command) -> u64 {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status_file)
            && let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    peak
}

/// A generated snapshot whose buffer is its trace repeated to `bytes`.
fn snapshot(dir: &Path, bytes: u64) {
    let _ = std::fs::remove_dir_all(dir);
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args([
            "--protocol",
            "etmv4",
            "--seed",
            "3",
            "--length",
            "20000",
            "--no-truth",
            "--out",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bin = dir.join("trace.bin");
    let one = std::fs::read(&bin).unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(&bin).unwrap());
    for _ in 0..bytes / one.len() as u64 {
        f.write_all(&one).unwrap();
    }
    f.flush().unwrap();
}

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
