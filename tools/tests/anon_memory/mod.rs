//! What the memory tests share: a program's peak anonymous memory, and a
//! generated snapshot of a given size.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// The most anonymous memory (RssAnon, KiB) seen while `cmd` runs,
/// sampled every few milliseconds: what the tests look for (a copy of the
/// capture, an index loaded whole) is held for the whole run, so sampling
/// cannot miss it.
pub fn peak_anon_kib(cmd: &mut Command) -> u64 {
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
pub fn snapshot(dir: &Path, bytes: u64) {
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
