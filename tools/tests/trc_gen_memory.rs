//! trc_gen writes a long capture as it makes it: its peak memory does not
//! grow with the trace (at most a fixed ceiling more for 8 times the trace). Ignored by default (it writes a few hundred
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

/// How much more the peak may be for 224 MiB more trace.
const GROWTH_CEILING_KB: u64 = 3 * 1024;

#[test]
#[ignore = "writes 300 MB and needs GNU time; run by .ci/run"]
fn peak_memory_does_not_grow_with_the_capture() {
    let dir = std::env::temp_dir().join(format!("trc_gen_memory_{}", std::process::id()));
    // Seed 1's default options make about 1.81 bytes of trace a waypoint:
    // 32 MiB, then 256 MiB.
    let (small_kb, small) = peak_kb(19_000_000, &dir.join("small"));
    let (big_kb, big) = peak_kb(150_000_000, &dir.join("big"));
    assert!(small >= 32 << 20 && big >= 256 << 20, "{small} and {big} bytes");
    let growth_kb = big_kb.saturating_sub(small_kb);
    let extra_mib = (big - small) >> 20;
    println!(
        "trc_gen peak RSS: {small_kb} kB for {small} bytes, {big_kb} kB for {big} bytes: \
         {growth_kb} kB more for {extra_mib} MiB more trace"
    );
    // A fixed ceiling on the growth, not a ratio of a peak of a few
    // megabytes: that moves by half a megabyte between runs on a loaded
    // machine (+16 % once) without anything growing. A writer that kept its
    // capture would grow by the 224 MiB of extra trace; one that kept a
    // byte in 64 of it, by 3.5 MiB.
    assert!(
        growth_kb <= GROWTH_CEILING_KB,
        "{big_kb} kB for {big} bytes, {small_kb} kB for {small} bytes: {growth_kb} kB more, \
         over the {GROWTH_CEILING_KB} kB ceiling"
    );
    std::fs::remove_dir_all(&dir).ok();
}
