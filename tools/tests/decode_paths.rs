//! Side paths of the decode that must give what OpenCSD 1.8.0 gives, or a
//! clear error: a trace ID filter on unformatted trace, TPIU options on
//! trace without frame syncs, and the reason a fatal error is reported
//! with.

use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};
use coresight_tools::lister;
use std::path::{Path, PathBuf};

/// A fresh empty directory under the target dir for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a generated ETMv4 snapshot laid out as `layout`.
fn etmv4(name: &str, seed: u64, layout: BufferLayout) -> PathBuf {
    let dir = temp_dir(name);
    let g = generate(&GenOptions {
        seed,
        protocol: GenProtocol::Etmv4,
        layout,
        length: 200,
    });
    g.spec.write_to(&dir).unwrap();
    dir
}

/// Runs the lister: (status, listing after the command-line echo).
fn list(args: &[&str]) -> (i32, String) {
    let out = shared(MsgLogger::capture());
    let mut argv = vec!["trc_pkt_lister".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let status = lister::run(&argv, &|_| None, out.clone());
    let text = out.borrow_mut().take_captured();
    let (_, rest) = text.split_once("Test Command Line:-\n").unwrap();
    (status, rest.split_once('\n').unwrap().1.to_string())
}

fn element_lines(listing: &str) -> Vec<&str> {
    listing.lines().filter(|l| l.contains("OCSD_GEN_TRC_ELEM")).collect()
}

#[test]
fn an_id_filter_on_unformatted_trace_keeps_the_end_of_trace() {
    // OpenCSD filters trace IDs in the deformatter, which unformatted
    // trace does not go through: `-id` only leaves out the packet printer
    // (on ID 0 there), and the elements are all listed, to the last range
    // and EO_TRACE the end of trace flushes.
    for seed in 1..=3 {
        let dir = etmv4(
            &format!("id-filter-unformatted-{seed}"),
            seed,
            BufferLayout::Unformatted,
        );
        let d = dir.to_str().unwrap();
        let (s, all) = list(&["-ss_dir", d, "-decode", "-no_time_print"]);
        assert_eq!(s, 0);
        // The source's trace ID, as the element lines give it.
        let id = element_lines(&all)
            .first()
            .and_then(|l| l.split_once("; ID:"))
            .and_then(|(_, r)| r.split_once(';'))
            .map(|(id, _)| id.to_string())
            .unwrap_or_else(|| panic!("no element line: {all}"));
        let (s, filtered) = list(&["-ss_dir", d, "-decode", "-no_time_print", "-id", &format!("0x{id}")]);
        assert_eq!(s, 0);
        let elements = element_lines(&all);
        assert!(elements.last().unwrap().contains("OCSD_GEN_TRC_ELEM_EO_TRACE"), "{all}");
        assert_eq!(element_lines(&filtered), elements, "seed {seed}");
    }
}

#[test]
fn tpiu_options_on_trace_without_frame_syncs_fail_as_in_opencsd() {
    // Memory-aligned frames have no FSYNC. OpenCSD's deformatter takes a
    // block without one but for its last three bytes, then refuses those
    // (not a 4-byte, or with HSYNCs 2-byte, multiple): a fatal data-path
    // error, with no error line (its deformatter's errors reach no
    // logger), the bytes before them processed.
    let dir = etmv4("tpiu-no-fsync", 1, BufferLayout::Formatted);
    let d = dir.to_str().unwrap();
    let size = std::fs::metadata(dir.join("trace.bin")).unwrap().len();
    assert!(size > 4 && size < 1024, "{size}");
    for opt in ["-tpiu", "-tpiu_hsync"] {
        let (s, text) = list(&["-ss_dir", d, "-decode", "-no_time_print", opt]);
        assert_eq!(s, 1, "{opt}: {text}");
        let tail: Vec<&str> = text.lines().rev().take(2).collect();
        assert_eq!(
            tail,
            [
                format!("Trace Packet Lister : Trace buffer done, processed {} bytes.", size - 3).as_str(),
                "Trace Packet Lister : Data Path fatal error",
            ],
            "{opt}: {text}"
        );
        assert!(!text.contains("EO_TRACE") && !text.contains("END OF TRACE"), "{text}");
    }
}

#[test]
fn trc_decode_gives_the_reason_a_decode_stopped() {
    // A DSTREAM buffer is read for frame syncs: memory-aligned frames have
    // none, so nothing can be decoded. Said at the end of trace, with the
    // reason, not a silent success.
    let dir = etmv4("trc-decode-no-fsync", 1, BufferLayout::Formatted);
    let ini = std::fs::read_to_string(dir.join("trace.ini")).unwrap();
    assert!(ini.contains("format=coresight\n"), "{ini}");
    std::fs::write(
        dir.join("trace.ini"),
        ini.replace("format=coresight\n", "format=dstream_coresight\n"),
    )
    .unwrap();
    let size = std::fs::metadata(dir.join("trace.bin")).unwrap().len();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trc_decode"))
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The last line (the error was logged on the line before).
    assert_eq!(
        stderr.lines().last().unwrap_or_default(),
        format!(
            "trc_decode: decode stopped by a fatal error after {size} bytes of trace: \
             0x0012 (OCSD_ERR_DFMTR_BAD_FHSYNC) [Bad frame or half frame sync in trace deformatter]; \
             TrcIdx={size}; No frame sync (FSYNC) found before the end of trace: nothing decoded."
        )
    );
}
