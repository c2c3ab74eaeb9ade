//! `trc_index`, run as a user runs it: build, show, query, decode and
//! correlate on a generated snapshot; what it decodes from the index equals
//! trc_pkt_lister's full decode; bad usage and bad indexes fail clearly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A generated PTM + ETMv3 capture (two trace IDs, timestamps).
fn snapshot(name: &str) -> PathBuf {
    let dir = tmp(name);
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["-protocol", "tc2", "-seed", "3", "-length", "3000", "-out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trc_index"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The full decode's element lines of `id` with `from <= Idx < to`.
fn lister_elements(dir: &str, id: &str, from: u64, to: u64) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_trc_pkt_lister"))
        .args(["-ss_dir", dir, "-decode", "-no_time_print", "-logstdout"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("; ID:{id}; OCSD_GEN_TRC_ELEM_");
    text.lines()
        .filter(|l| l.contains(&prefix) && !l.contains("EO_TRACE"))
        .filter(|l| {
            let idx: u64 = l["Idx:".len()..l.find(';').unwrap()].parse().unwrap();
            idx >= from && idx < to
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn build_show_query_and_decode_from_the_index() {
    let dir = snapshot("trc-index-tool");
    let d = dir.to_str().unwrap();
    let built = ok(&["build", d]);
    assert!(
        built.starts_with(&format!("{}", dir.join("trace.bin.csidx").display())),
        "{built}"
    );
    assert!(dir.join("trace.bin.csidx").exists());

    let show = ok(&["show", d]);
    assert!(show.contains("formatted frames (memory aligned)"), "{show}");
    let rows: Vec<&str> = show.lines().filter(|l| l.starts_with("0x")).collect();
    assert_eq!(rows.len(), 2, "{show}");
    assert!(
        rows[0].starts_with("0x13   PTM") && rows[1].starts_with("0x3b   ETMV3"),
        "{show}"
    );

    let counts = ok(&["query", d, "counts"]);
    let ptm = counts.lines().find(|l| l.starts_with("0x13 PTM")).unwrap();
    let syncs: usize = ptm
        .split(' ')
        .find_map(|w| w.strip_prefix("sync="))
        .unwrap()
        .parse()
        .unwrap();
    let listed = ok(&["query", d, "syncs", "--id", "0x13"]);
    assert_eq!(listed.lines().count(), syncs);
    let at: Vec<u64> = listed.lines().map(|l| l.parse().unwrap()).collect();
    let from_third = ok(&["query", d, "syncs", "--id", "19", "--at", &(at[2] + 1).to_string()]);
    assert_eq!(from_third.lines().next().unwrap(), at[3].to_string());
    assert_eq!(
        ok(&["query", d, "ids", "--from", "0", "--to", "100000"]).trim(),
        "0x13 0x3b"
    );

    // A byte window equals the full decode's elements there.
    let got = ok(&["decode", d, "--id", "0x13", "--from", "2000", "--to", "4000"]);
    let got: Vec<&str> = got.lines().skip(1).collect();
    let want = lister_elements(d, "13", 2000, 4000);
    assert!(want.len() > 100, "{} elements", want.len());
    assert_eq!(got, want);

    // A time window: the byte window query and the decode agree.
    let window = ok(&[
        "query",
        d,
        "time",
        "--id",
        "0x13",
        "--from-ts",
        "0x82fa8a0000",
        "--to-ts",
        "0x82fa8b0000",
    ]);
    let w: Vec<u64> = window.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    assert_eq!(w.len(), 3, "{window}");
    let decoded = ok(&[
        "decode",
        d,
        "--id",
        "0x13",
        "--from-ts",
        "0x82fa8a0000",
        "--to-ts",
        "0x82fa8b0000",
    ]);
    assert!(
        decoded.starts_with(&format!(
            "# ID 0x13: bytes {}..{}, decoded from the sync point at {}\n",
            w[1], w[2], w[0]
        )),
        "{decoded}"
    );
    assert!(
        decoded.lines().nth(1).unwrap().contains("OCSD_GEN_TRC_ELEM_TIMESTAMP"),
        "{decoded}"
    );

    // Correlation: both IDs, in timestamp order.
    let merged = ok(&["correlate", d, "--ids", "0x13,0x3b"]);
    let ts: Vec<u64> = merged
        .lines()
        .map(|l| l["TS:".len()..l.find(';').unwrap()].parse().unwrap())
        .collect();
    assert!(ts.windows(2).all(|p| p[0] <= p[1]));
    assert!(merged.contains("; ID:13; ") && merged.contains("; ID:3b; "));

    // An index written where the user says.
    let elsewhere = tmp("trc-index-elsewhere.csidx");
    ok(&["build", d, "-o", elsewhere.to_str().unwrap(), "--granularity", "64"]);
    assert!(ok(&["show", d, "--index", elsewhere.to_str().unwrap()]).contains("blocks of 64 bytes"));
}

/// `(instruction ranges, instructions)` of the full decode, from the
/// lister's element lines.
fn lister_instructions(dir: &str) -> (u64, u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_trc_pkt_lister"))
        .args(["-ss_dir", dir, "-decode", "-no_time_print", "-logstdout"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let ranges: Vec<u64> = text
        .lines()
        .filter(|l| l.contains("OCSD_GEN_TRC_ELEM_INSTR_RANGE"))
        .map(|l| {
            let n = &l[l.find("num_i(").unwrap() + 6..];
            n[..n.find(')').unwrap()].parse().unwrap()
        })
        .collect();
    (ranges.len() as u64, ranges.iter().sum())
}

/// The `total:` line's numbers.
fn totals(text: &str) -> Vec<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with("total:"))
        .unwrap_or_else(|| panic!("{text}"));
    line.split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[test]
fn count_splits_each_stream_over_threads() {
    let dir = snapshot("trc-index-count");
    let d = dir.to_str().unwrap();
    ok(&["build", d]);
    let (ranges, instructions) = lister_instructions(d);
    assert!(instructions > 5000, "{instructions}");
    // One piece per ID: the serial decode's counts (both streams start
    // with a sync point).
    let one = ok(&["count", d, "--pieces", "1", "--threads", "2"]);
    assert!(one.starts_with("# pieces: 2, threads: 2, decoded in "), "{one}");
    assert_eq!(totals(&one)[1..], [ranges, instructions], "{one}");
    // Three pieces per ID on two threads: the pieces chain, and their
    // instructions add up to the serial decode's.
    let three = ok(&["count", d, "--pieces", "3", "--threads", "2", "--ids", "0x13"]);
    let rows: Vec<Vec<u64>> = three
        .lines()
        .filter(|l| l.starts_with("0x13 bytes "))
        .map(|l| {
            l["0x13 bytes ".len()..]
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 3, "{three}");
    assert!(rows.windows(2).all(|w| w[0][1] == w[1][0]), "{three}");
    let sum: u64 = rows.iter().map(|r| r[4]).sum();
    let total = three.lines().find(|l| l.starts_with("0x13 total: ")).unwrap();
    assert!(total.ends_with(&format!(" {sum} instructions")), "{three}");
    // The same instructions as one piece (each piece adds elements of
    // its own: the decoder's start).
    let serial = ok(&["count", d, "--pieces", "1", "--threads", "1", "--ids", "0x13"]);
    let ranges_and_instructions = &total[total.find(", ").unwrap()..];
    assert!(serial.contains(ranges_and_instructions), "{serial}\n{three}");
    let out = run(&["count", d, "--ids", "0x22"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("trace ID 0x22 has no indexed sync point"));
}

#[test]
fn help_version_and_usage_errors() {
    let help = ok(&["--help"]);
    for cmd in ["build", "show", "query", "decode", "correlate", "count"] {
        assert!(help.contains(cmd), "{help}");
    }
    assert!(ok(&["--version"]).starts_with("trc_index "));
    for bad in [
        &["show"][..],
        &["frobnicate"],
        &["query", "x", "syncs", "--id", "0x99"],
        &["decode", "x", "--id", "1", "--from", "3"],
        &["count", "x", "--threads", "0"],
        // It crashed spawning 65,535 threads; like the other tools it takes
        // at most 1,024.
        &["count", "x", "--threads", "65535"],
        &["count", "x", "--pieces", "1025"],
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(out.stdout.is_empty());
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn missing_damaged_and_stale_indexes_fail_with_what_is_wrong() {
    let dir = snapshot("trc-index-bad");
    let d = dir.to_str().unwrap();
    let index = dir.join("trace.bin.csidx");
    let fails = |args: &[&str], want: &str| {
        let out = run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with("trc_index: ") && err.contains(want), "{args:?}: {err}");
    };
    fails(&["show", d], "no index (run `trc_index build");
    fails(&["show", "/nonexistent/snapshot"], "/nonexistent/snapshot");
    ok(&["build", d]);
    let good = std::fs::read(&index).unwrap();
    std::fs::write(&index, &good[..good.len() / 2]).unwrap();
    fails(&["show", d], &format!("{}: index corrupt: checksum", index.display()));
    let mut flipped = good.clone();
    flipped[60] ^= 0x40;
    std::fs::write(&index, &flipped).unwrap();
    fails(&["query", d, "counts"], "index corrupt");
    std::fs::write(&index, &good[..10]).unwrap();
    fails(&["show", d], "index truncated");
    std::fs::write(&index, &good).unwrap();
    ok(&["show", d]);
    // The capture changes under the index.
    let trace = dir.join("trace.bin");
    let mut data = std::fs::read(&trace).unwrap();
    data[200] ^= 1;
    std::fs::write(&trace, &data).unwrap();
    fails(&["show", d], "stale index: built for a capture of");
    data[200] ^= 1;
    std::fs::write(&trace, &data).unwrap();
    ok(&["show", d]);

    // The same bytes with another configuration: a source's trace ID
    // changed in its register file. Before, the index was taken and a
    // window of the new ID decoded nothing.
    let etm = dir.join("ETM_1.ini");
    let ini = std::fs::read_to_string(&etm).unwrap();
    let changed: String = ini
        .lines()
        .map(|l| match l.split_once('=') {
            Some((reg, _)) if reg.starts_with("ETMTRACEIDR") => format!("{reg}=0x00000044\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    assert_ne!(changed.trim(), ini.trim(), "ETM_1.ini has no ETMTRACEIDR:\n{ini}");
    std::fs::write(&etm, changed).unwrap();
    fails(&["show", d], "stale index: built with another configuration");
    std::fs::write(&etm, ini).unwrap();
    ok(&["show", d]);
}

/// An index of the first bytes only (`--limit`) does not answer for a
/// window past them: before, the decode stopped there with exit 0.
#[test]
fn a_window_past_a_partial_index_is_refused() {
    let dir = snapshot("trc-index-limit");
    let d = dir.to_str().unwrap();
    ok(&["build", d, "--limit", "4096"]);
    let within = ok(&["decode", d, "--id", "0x13", "--from", "0", "--to", "4000"]);
    assert!(within.lines().count() > 10, "{within}");
    let out = run(&["decode", d, "--id", "0x13", "--from", "2000", "--to", "9000"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("the index covers bytes 0..4096 of") && err.contains("build it again without --limit"),
        "{err}"
    );
}

/// A single-source (unformatted) capture is indexed under its source's
/// trace ID, the one its elements carry: before, it was indexed as 0x00
/// and `--id 0x18` was refused with "no sync point".
#[test]
fn an_unformatted_capture_keeps_its_trace_id() {
    let dir = tmp("trc-index-unformatted");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args([
            "--protocol",
            "etmv4",
            "--seed",
            "3",
            "--length",
            "3000",
            "--unformatted",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = dir.to_str().unwrap();
    ok(&["build", d]);
    let show = ok(&["show", d]);
    assert!(show.contains("single unformatted source"), "{show}");
    let rows: Vec<&str> = show.lines().filter(|l| l.starts_with("0x")).collect();
    assert_eq!(rows.len(), 1, "{show}");
    assert!(rows[0].starts_with("0x18   ETMV4I"), "{show}");
    let got = ok(&["decode", d, "--id", "0x18", "--from", "1000", "--to", "3000"]);
    let got: Vec<&str> = got.lines().skip(1).collect();
    let want = lister_elements(d, "18", 1000, 3000);
    assert!(want.len() > 100, "{} elements", want.len());
    assert_eq!(got, want);
    let out = run(&["decode", d, "--id", "0x0", "--from", "1000", "--to", "3000"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("trc_index: trace ID 0x00 is not in the index (its trace IDs: 0x18)"),
        "{err}"
    );
}

/// A window that ends before an ID's first sync point is an empty answer
/// with a note on stderr and exit status 0, not an error.
#[test]
fn a_window_before_the_first_sync_point_is_empty() {
    let dir = snapshot("trc-index-before-sync");
    let d = dir.to_str().unwrap();
    ok(&["build", d]);
    let first: u64 = ok(&["query", d, "syncs", "--id", "0x3b"])
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(first > 0);
    let out = run(&["decode", d, "--id", "0x3b", "--from", "0", "--to", &first.to_string()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "trc_index: ID 0x3b, bytes 0..{first}: the window ends before the trace ID's first sync point \
             (byte {first}): nothing there can be decoded\n"
        )
    );
    // One byte more reaches the sync point: decoded from there.
    let got = ok(&[
        "decode",
        d,
        "--id",
        "0x3b",
        "--from",
        "0",
        "--to",
        &(first + 1).to_string(),
    ]);
    assert!(
        got.starts_with(&format!(
            "# ID 0x3b: bytes 0..{}, decoded from the sync point at {first}\n",
            first + 1
        )),
        "{got}"
    );
}

/// A generated capture with a frame that gives ETMv3 trace ID 0x3b, in the
/// middle of its trace, reserved packet headers (0x14): its decoder stops
/// the data path on the first (OCSD_ERR_BAD_PACKET_SEQ, fatal), as
/// OpenCSD's does.
fn snapshot_with_fatal_error(name: &str) -> PathBuf {
    let dir = snapshot(name);
    let bin = dir.join("trace.bin");
    let mut data = std::fs::read(&bin).unwrap();
    let at = (data.len() / 2) & !15;
    // The trace ID in effect after the frames before: the last ID byte
    // (even positions, low bit set) of the frames before.
    let before = data[..at]
        .chunks_exact(16)
        .flat_map(|f| f[..15].iter().step_by(2))
        .rev()
        .find(|&&b| b & 1 == 1)
        .map(|&b| b >> 1)
        .unwrap();
    // 0x3b, thirteen 0x14 bytes (enough to end any packet under way, so
    // that one is taken as a header), then the ID in effect before for the
    // frames after (an ID in byte 14 takes effect at the next frame).
    let (a, b) = ((before << 1) | 1, (0x3b << 1) | 1);
    let mut frame = [0x14u8; 16];
    (frame[0], frame[14], frame[15]) = (b, a, 0);
    data.splice(at..at, frame);
    std::fs::write(&bin, data).unwrap();
    dir
}

#[test]
fn a_fatal_error_keeps_what_was_decoded_before_it() {
    let dir = snapshot_with_fatal_error("trc-index-fatal");
    let d = dir.to_str().unwrap();
    // The index is of packets, which the damage does not stop (a reserved
    // header is a bad packet there): it covers the whole capture. The
    // decode of 0x3b stops at it.
    let built = ok(&["build", d]);
    let size = built
        .split(" entries, ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let whole = std::fs::metadata(dir.join("trace.bin")).unwrap().len();
    assert_eq!(size.parse::<u64>().unwrap(), whole, "{built}");
    // The full decode stops at the error: the window has its elements.
    let want = lister_elements(d, "3b", 0, u64::MAX);
    assert!(want.len() > 20, "{want:?}");
    let out = run(&["decode", d, "--id", "0x3b", "--from", "0", "--to", &size]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let got: Vec<&str> = stdout.lines().filter(|l| l.starts_with("Idx:")).collect();
    assert_eq!(got, want, "{stderr}");
    assert!(
        stderr.starts_with("trc_index: decoding trace ID 0x3b from byte ") && stderr.contains(": fatal error at byte "),
        "{stderr}"
    );
    // The other ID counts in full; the stopped one counts what came
    // before the error, then the error.
    let out = run(&["count", d, "--pieces", "1", "--threads", "1"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let total = |id: &str| {
        let l = stdout
            .lines()
            .find(|l| l.starts_with(&format!("0x{id} total: ")))
            .unwrap();
        l.split(' ').nth(2).unwrap().parse::<usize>().unwrap()
    };
    assert_eq!(total("3b"), want.len(), "{stdout}");
    assert!(total("13") > 20, "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("0x3b bytes ") && l.contains(" (stopped by a fatal error): ")),
        "{stdout}"
    );
    assert!(stderr.starts_with("trc_index: trace ID 0x3b, bytes "), "{stderr}");
    // correlate merges both streams, the stopped one up to its error.
    let out = run(&["correlate", d, "--ids", "0x13,0x3b"]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let n3b = stdout.lines().filter(|l| l.contains("; ID:3b; ")).count();
    let n13 = stdout.lines().filter(|l| l.contains("; ID:13; ")).count();
    assert!(n3b >= want.len() && n13 > 20, "{n3b} {n13}");
    assert!(
        stderr.starts_with("trc_index: trace ID 0x3b: decoding trace ID 0x3b"),
        "{stderr}"
    );
}

#[test]
fn count_includes_the_stm_end_of_trace() {
    let dir = tmp("trc-index-stm-eot");
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args([
            "--protocol",
            "stm",
            "--seed",
            "1",
            "--length",
            "50",
            "--unformatted",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = dir.to_str().unwrap();
    ok(&["build", d]);
    let listing = Command::new(env!("CARGO_BIN_EXE_trc_pkt_lister"))
        .args(["-ss_dir", d, "-decode", "-no_time_print", "-logstdout"])
        .output()
        .unwrap();
    let listing = String::from_utf8(listing.stdout).unwrap();
    let elements = listing.lines().filter(|l| l.contains("; OCSD_GEN_TRC_ELEM_")).count();
    assert!(listing.contains("OCSD_GEN_TRC_ELEM_EO_TRACE"), "{listing}");
    let counted = ok(&["count", d, "--pieces", "1", "--threads", "1"]);
    let total = counted.lines().find(|l| l.contains(" total: ")).unwrap();
    assert!(
        total.contains(&format!(": {elements} elements, ")),
        "{counted}\n{listing}"
    );
}
