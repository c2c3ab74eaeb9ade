//! The lister end to end, in-process: listing stability under forced waits,
//! option errors, and the snapshot shipped for the README.

use coresight_decode::lister;
use coresight_decode::logger::{shared, MsgLogger};

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64");

/// Runs the lister with `args`, returning (status, listing after the banner).
fn run(args: &[&str]) -> (i32, String) {
    let out = shared(MsgLogger::capture());
    let mut argv = vec!["trc_pkt_lister".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let status = lister::run(&argv, &|_| None, out.clone());
    let text = out.borrow_mut().take_captured();
    let body = text.split_once("Test Command Line:-\n").map(|(_, rest)| rest.split_once('\n').map(|x| x.1).unwrap_or(""));
    (status, body.unwrap_or(&text).to_string())
}

#[test]
fn listing_is_identical_with_forced_waits() {
    let (s, plain) = run(&["-ss_dir", SNAPSHOT, "-decode", "-no_time_print"]);
    assert_eq!(s, 0);
    assert!(plain.contains("OCSD_GEN_TRC_ELEM_INSTR_RANGE"), "{plain}");
    for waits in ["1", "7", "50", "100000"] {
        let (_, waited) = run(&["-ss_dir", SNAPSHOT, "-decode", "-no_time_print", "-test_waits", waits]);
        assert_eq!(waited, plain, "-test_waits {waits}");
    }
    // Packet-only listing with waits from the packet printer.
    let (_, pkts) = run(&["-ss_dir", SNAPSHOT, "-no_time_print"]);
    let (_, pkts_waited) = run(&["-ss_dir", SNAPSHOT, "-no_time_print", "-test_waits", "5"]);
    assert_eq!(pkts_waited, pkts);
}

#[test]
fn option_errors_are_reported() {
    let (s, text) = run(&["-id", "0x75"]);
    assert_eq!(s, 1);
    assert!(text.contains("Trace Packet Lister : Error: invalid ID number 0x75 on -id option"), "{text}");
    let (s, text) = run(&["-ss_dir"]);
    assert_eq!(s, 1);
    assert!(text.contains("Missing directory string on -ss_dir option"), "{text}");
    let (_, text) = run(&["-ss_dir", SNAPSHOT, "-frobnicate"]);
    assert!(text.contains("Trace Packet Lister : Warning: Ignored unknown option -frobnicate."), "{text}");
    let (_, text) = run(&["-ss_dir", SNAPSHOT, "-src_name", "NOPE"]);
    assert!(text.contains("Trace Packet Lister : Trace source name NOPE not found\nValid source names are:-\nETB_0\n"), "{text}");
}

#[test]
fn id_filter_limits_the_listing() {
    let (_, all) = run(&["-ss_dir", SNAPSHOT, "-decode", "-no_time_print"]);
    let (_, none) = run(&["-ss_dir", SNAPSHOT, "-decode", "-no_time_print", "-id", "0x6f"]);
    assert!(all.lines().filter(|l| l.starts_with("Idx:")).count() > 20);
    assert_eq!(none.lines().filter(|l| l.starts_with("Idx:")).count(), 0, "{none}");
}

#[test]
fn stats_report_every_byte() {
    let (_, text) = run(&["-ss_dir", SNAPSHOT, "-decode", "-no_time_print", "-stats"]);
    let size = std::fs::metadata(format!("{SNAPSHOT}/trace.bin")).unwrap().len();
    assert!(text.contains("\nReading packet decoder statistics....\n\nDecode stats ID 0x"), "{text}");
    assert!(text.contains("; Unsynced Bytes: ") && text.contains("Bad Header Errors: 0; Bad Sequence Errors: 0\n"), "{text}");
    assert!(text.contains(&format!("Total bytes processed by frame demux: {size}\n")), "{text}");
}
