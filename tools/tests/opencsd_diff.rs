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
            "ete-multi-session-reset-after-failed-buffer",
            "ete-trace-info-deep-speculation",
            "etmv3-fatal-error-last-error",
            "etmv3-unfilled-range-clears-flags",
            "etmv4-exception-address-missing-commits-again",
            "etmv4-halt-err-last-packet-ends-decode",
            "etmv4-trace-info-long-info-field",
            "etmv4-unformatted-decoder-name",
            "etmv4m-cancel-overrun-keeps-cycle-count",
            "etmv4m-commit-overrun-index-zero",
            "etmv4m-direct-br-cond-bad-image",
            "etmv4m-exception-ends-it-block",
            "etmv4m-reserved-cfg-header-error",
            "etmv4m-ret-stack-overflow-cs-id",
            "etmv4m-stats-unsynced-bytes",
            "etmv4m-trace-on-clears-pending-pop",
            "itm-stats-unavailable",
            "ptm-bad-packet-no-sync-undefined",
            "stm-decode-packet-error-not-logged",
            "stm-stats-no-frame-demux",
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

/// A header reserved in the current configuration (`I_RESERVED_CFG`) is an
/// invalid header as a reserved one is: logged in packet mode (and counted
/// in the statistics).
#[test]
fn reserved_header_for_the_configuration_is_logged() {
    check("etmv4m-reserved-cfg-header-error");
}

/// `-stats` counts as unsynchronised the bytes dumped before the first sync
/// point, not the sync packet's own bytes: 0 here, where the capture starts
/// with its A-sync.
#[test]
fn unsynced_bytes_are_those_dumped_before_sync() {
    check("etmv4m-stats-unsynced-bytes");
}

/// Only ETMv4 and ETE keep packet statistics, as in OpenCSD: `-stats` says
/// they are unavailable for the other protocols.
#[test]
fn statistics_are_unavailable_for_protocols_that_keep_none() {
    check("itm-stats-unavailable");
}

/// PTM's `NO_SYNC` after a bad or reserved packet gives no reason
/// (`[undefined]`), not the decoder's first one (`[init-decoder]`).
#[test]
fn ptm_no_sync_after_a_bad_packet_has_no_reason() {
    check("ptm-bad-packet-no-sync-undefined");
}

/// A trace info packet whose INFO field runs past its 16 bits: OpenCSD keeps
/// its "first trace info" and "speculation depth given" flags in bits 16
/// and 17 of that value, so such a field sets them, and the listing shows
/// `INIT SPEC DEPTH=n; Decoder Sync point TINFO` on a later trace info.
#[test]
fn trace_info_with_a_long_info_field_is_listed_as_opencsd_lists_it() {
    check("etmv4-trace-info-long-info-field");
}

/// The frame demux totals come with a decoder's statistics in OpenCSD's
/// lister: when no decoder keeps any (STM), they are not printed.
#[test]
fn frame_demux_totals_need_a_decoder_with_statistics() {
    check("stm-stats-no-frame-demux");
}

/// A cancel that asks for more elements than are stacked is an error that
/// resets the decoder, but the cycle counts and timestamps the cancel had
/// set aside go back on the stack after the reset, as in OpenCSD: the one
/// still pending is output at the end of trace.
#[test]
fn cancel_overrun_keeps_what_the_cancel_set_aside() {
    check("etmv4m-cancel-overrun-keeps-cycle-count");
}

/// A commit with nothing stacked names trace index 0 (the index of the last
/// element committed, and there was none), as OpenCSD's error does.
#[test]
fn commit_overrun_with_nothing_committed_names_index_zero() {
    check("etmv4m-commit-overrun-index-zero");
}

/// A trace info packet saying more elements are speculative than the
/// maximum depth (a damaged byte here): all of them are stacked, as in
/// OpenCSD, so the commit that follows finds them (no overrun), though the
/// stack holds them as one count.
#[test]
fn trace_info_deeper_than_the_maximum_speculation_is_committed_as_in_opencsd() {
    check("ete-trace-info-deep-speculation");
}

/// An exception taken inside a T32 IT block ends the block: the handler's
/// first instruction is not conditional (`<cond>`), as in OpenCSD.
#[test]
fn exception_ends_an_it_block() {
    check("etmv4m-exception-ends-it-block");
}

/// `-direct_br_cond` and `-strict_br_cond` report an N atom on an
/// unconditional branch with OpenCSD 1.8.0's text, and the `NO_SYNC` after
/// it says `bad-program-image`.
#[test]
fn branch_checks_report_a_bad_program_image() {
    check("etmv4m-direct-br-cond-bad-image");
}

/// An exception whose address is missing resets the decoder; OpenCSD
/// still counts the exception committed, so it commits once more with
/// nothing stacked and logs a second error, at index 0, before the
/// `NO_SYNC`.
#[test]
fn exception_without_an_address_commits_again_after_the_reset() {
    check("etmv4-exception-address-missing-commits-again");
}

/// With `-halt_err`, a bad incomplete packet at the end of the trace stops
/// the decoder; the end of trace does not reach it, so neither what it
/// held back nor an `EO_TRACE` element is output (the packet monitor still
/// lists `END OF TRACE DATA`).
#[test]
fn halted_decoder_does_not_see_the_end_of_trace() {
    check("etmv4-halt-err-last-packet-ends-decode");
}

/// `-multi_session` resets the decode path after each buffer, also after
/// one whose decode failed, before saying it aborts.
#[test]
fn multi_session_resets_after_a_failed_buffer() {
    check("ete-multi-session-reset-after-failed-buffer");
}

/// A trace on after an indirect branch empties the return stack and drops
/// the pop that waited on the next packet: the atoms that follow pop
/// nothing (no return-stack overflow).
#[test]
fn trace_on_drops_a_pending_return_stack_pop() {
    check("etmv4m-trace-on-clears-pending-pop");
}

/// An ETMv3 atom whose instruction could not be followed leaves its range
/// element unfilled: its addresses are those left in its slot of the
/// element list, but its instruction count, last instruction size and
/// executed flag are cleared (`num_i(0) last_sz(0) ... N`), as OpenCSD's
/// `setType` clears them.
#[test]
fn unfilled_etmv3_range_has_its_flags_cleared() {
    check("etmv3-unfilled-range-clears-flags");
}
