//! DSTREAM captures (`format=dstream_coresight`: frame syncs in the
//! stream, an 8-byte footer ending every 512-byte block) decode the same on
//! every path: trc_pkt_lister with `-dstream_format`, trc_decode (serial
//! and with threads), trc_index, and the pull API.

use std::path::{Path, PathBuf};
use std::process::Command;

use coresight_decode::dstream;

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(exe: &str, args: &[&str]) -> String {
    let out = Command::new(exe).args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{exe} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A generated two-source capture turned into a DSTREAM one: a frame sync
/// first, then the frames, with a footer after every 504 trace bytes.
fn dstream_snapshot(name: &str) -> (PathBuf, u64) {
    let dir = tmp(name);
    run(
        env!("CARGO_BIN_EXE_trc_gen"),
        &[
            "--protocol",
            "tc2",
            "--seed",
            "5",
            "--length",
            "2000",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    let frames = std::fs::read(dir.join("trace.bin")).unwrap();
    let mut trace = vec![0xff, 0xff, 0xff, 0x7f];
    trace.extend_from_slice(&frames);
    // The probe writes whole blocks: frame syncs fill the last one.
    while !trace.len().is_multiple_of(dstream::DATA) {
        trace.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
    }
    let mut raw = Vec::new();
    for (n, block) in trace.chunks(dstream::DATA).enumerate() {
        raw.extend_from_slice(block);
        raw.extend_from_slice(&[0xA5, 0x5A, n as u8, 0, 0, 0, 0, 0]);
    }
    std::fs::write(dir.join("trace.bin"), raw).unwrap();
    let ini = std::fs::read_to_string(dir.join("trace.ini")).unwrap();
    std::fs::write(
        dir.join("trace.ini"),
        ini.replace("format=coresight", "format=dstream_coresight"),
    )
    .unwrap();
    (dir, trace.len() as u64)
}

/// The element lines of a listing or of trc_decode's text, tabs as spaces.
fn elements(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("OCSD_GEN_TRC_ELEM_") && !l.contains("EO_TRACE"))
        .map(|l| l.replace('\t', " "))
        .collect()
}

#[test]
fn every_path_leaves_out_the_footers() {
    let (dir, data_len) = dstream_snapshot("dstream");
    let d = dir.to_str().unwrap();
    let listing = run(
        env!("CARGO_BIN_EXE_trc_pkt_lister"),
        &[
            "-ss_dir",
            d,
            "-dstream_format",
            "-decode",
            "-no_time_print",
            "-logstdout",
        ],
    );
    assert!(!listing.contains("BAD_FHSYNC"), "{listing}");
    let want = elements(&listing);
    assert!(want.len() > 2000, "{} elements", want.len());
    // Every source decoded.
    let mut ids: Vec<&str> = want.iter().filter_map(|l| l.split("; ").nth(1)).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids, ["ID:13", "ID:21", "ID:3c"]);

    for threads in ["1", "2"] {
        let got = run(env!("CARGO_BIN_EXE_trc_decode"), &[d, "--threads", threads]);
        assert_eq!(elements(&got), want, "trc_decode --threads {threads}");
    }

    // The index covers the trace bytes (the footers left out) and a window
    // over all of one ID gives the listing's elements of that ID.
    let index = dir.join("trace.bin.csidx");
    let built = run(env!("CARGO_BIN_EXE_trc_index"), &["build", d]);
    assert!(
        built.contains(&format!("{data_len} of {data_len} bytes indexed")),
        "{built} (expected {data_len} bytes)"
    );
    assert!(index.exists());
    let got = run(
        env!("CARGO_BIN_EXE_trc_index"),
        &[
            "decode",
            d,
            "--id",
            "0x13",
            "--from",
            "0",
            "--to",
            &data_len.to_string(),
        ],
    );
    let want13: Vec<String> = want.iter().filter(|l| l.contains("; ID:13;")).cloned().collect();
    assert_eq!(elements(&got), want13);

    // The pull API: the same number of elements per trace ID.
    let ss = coresight_decode::snapshot::Snapshot::load(&dir).unwrap();
    let mut trace = coresight_decode::pull::Trace::from_snapshot(&ss, None).unwrap();
    let mut n = 0;
    for item in trace.elements() {
        let item = item.unwrap();
        if item.element.kind() != coresight_decode::ElemType::EoTrace {
            n += 1;
        }
    }
    assert_eq!(n, want.len());
}
