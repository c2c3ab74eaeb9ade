//! trc_gen writes a long capture as it makes it: its peak memory does not
//! grow with the trace. Ignored by default (it writes a few hundred
//! megabytes and measures with GNU time); .ci/run runs it.

use std::process::Command;

/// Peak resident set size (kB) of trc_gen writing an ETMv4 capture of
/// `length` waypoints without truth, and the size of its buffer.
fn peak_kb(length: u64, dir: &std::path::Path) -> (u64, u64) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "peak %M"])
        .arg(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["--protocol", "etmv4", "--seed", "1", "--no-truth", "--length"])
        .arg(length.to_string())
        .arg("--out")
        .arg(dir)
        .output()
        .expect("GNU time at /usr/bin/time");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let kb = err
        .lines()
        .find_map(|l| l.strip_prefix("peak "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {err}"));
    let bytes = std::fs::metadata(dir.join("trace.bin")).unwrap().len();
    assert!(!dir.join("truth.txt").exists());
    std::fs::remove_dir_all(dir).unwrap();
    (kb, bytes)
}

#[test]
#[ignore = "writes 300 MB and needs GNU time; run by .ci/run"]
fn peak_memory_does_not_grow_with_the_capture() {
    let dir = std::env::temp_dir().join(format!("trc_gen_memory_{}", std::process::id()));
    // Seed 1's default options make about 1.81 bytes of trace a waypoint:
    // 32 MiB, then 256 MiB.
    let (small_kb, small) = peak_kb(19_000_000, &dir.join("small"));
    let (big_kb, big) = peak_kb(150_000_000, &dir.join("big"));
    assert!(small >= 32 << 20 && big >= 256 << 20, "{small} and {big} bytes");
    println!("trc_gen peak RSS: {small_kb} kB for {small} bytes, {big_kb} kB for {big} bytes");
    assert!(
        big_kb * 10 <= small_kb * 11,
        "{big_kb} kB for {big} bytes, {small_kb} kB for {small} bytes: more than 10 % more"
    );
    std::fs::remove_dir_all(&dir).ok();
}
