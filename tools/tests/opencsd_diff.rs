//! Differences from OpenCSD 1.8.0 that the differential harness (`trc_diff`,
//! see `tools/REGRESS.md`) found and that were fixed: each case in
//! `fixtures/opencsd-diff/` is a small generated snapshot with the lister
//! arguments that showed the difference (`args.txt`) and OpenCSD's listing
//! after the banner (`opencsd.ppl`, recorded by `record.sh` with OpenCSD's
//! own `trc_pkt_lister`). Our listing must equal it line for line.

use std::path::{Path, PathBuf};

use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;
use coresight_tools::lister;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/opencsd-diff");

/// Our listing of `case` after the banner, with the snapshot path (in the
/// snapshot and memory file lines) written as `args.txt` gives it: OpenCSD's
/// listing was made from inside the case.
fn our_listing(case: &Path) -> String {
    let args = std::fs::read_to_string(case.join("args.txt")).expect("args.txt");
    let snapshot = case.join("snapshot").display().to_string();
    let mut argv = vec!["trc_pkt_lister".to_string()];
    argv.extend(args.split_whitespace().map(|w| {
        if w == "snapshot" {
            snapshot.clone()
        } else {
            w.to_string()
        }
    }));
    let out = shared(MsgLogger::capture());
    lister::run(&argv, &|_| None, out.clone());
    let text = out.borrow_mut().take_captured();
    let body = text
        .split_once("Test Command Line:-\n")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .map(|x| x.1)
        .unwrap_or(&text);
    body.replace(&snapshot, "snapshot")
}

fn cases() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(FIXTURES)
        .expect("fixtures")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("args.txt").is_file())
        .collect();
    v.sort();
    v
}

fn check(name: &str) {
    let case = Path::new(FIXTURES).join(name);
    let expected = std::fs::read_to_string(case.join("opencsd.ppl")).expect("opencsd.ppl");
    let got = our_listing(&case);
    let (e, g): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), got.lines().collect());
    if let Some(i) = (0..e.len().max(g.len())).find(|&i| e.get(i) != g.get(i)) {
        panic!(
            "{name}: line {} differs from OpenCSD's\n  OpenCSD: {:?}\n  ours:    {:?}\n\nours in full:\n{got}",
            i + 1,
            e.get(i),
            g.get(i)
        );
    }
}

/// Every case is checked by one of the tests below (a new case needs its test).
#[test]
fn every_case_has_a_test() {
    let names: Vec<String> = cases()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "etmv3-fatal-error-last-error",
            "etmv4-unformatted-decoder-name",
            "etmv4m-ret-stack-overflow-cs-id",
            "stm-decode-packet-error-not-logged",
            "stm-unformatted-component-names",
        ]
    );
}

/// A single-source (unformatted) capture's components are named without an
/// instance number: `PKTP_STM`, not `PKTP_STM_0000`.
#[test]
fn unformatted_capture_names_components_without_a_number() {
    check("stm-unformatted-component-names");
}

/// The same for the decoder of an unformatted ETMv4 capture: `DCD_ETMV4`.
#[test]
fn unformatted_capture_names_the_decoder_without_a_number() {
    check("etmv4-unformatted-decoder-name");
}

/// With `-decode`, a packet processor's error is not logged (OpenCSD attaches
/// the error logger to the decoder only), nor is it the last error.
#[test]
fn packet_processor_errors_are_not_logged_in_full_decode() {
    check("stm-decode-packet-error-not-logged");
}

/// ETMv4's return-stack overflow error names the trace ID though it has no
/// trace index: `...; CS ID=27; Trace Return Stack Overflow.`.
#[test]
fn return_stack_overflow_error_names_the_trace_id() {
    check("etmv4m-ret-stack-overflow-cs-id");
}

/// After a fatal error the last error is written as OpenCSD's lister writes
/// it: the bare error string, no `ERROR:` prefix, no line end.
#[test]
fn last_fatal_error_is_written_bare() {
    check("etmv3-fatal-error-last-error");
}
