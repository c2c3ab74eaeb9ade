//! Decode of the trace IDs of one capture on worker threads: the listing
//! and the elements are those of the serial decode, in the same order,
//! with and without forced waits, and a fatal error stops both at the
//! same place.

mod common;


use coresight_decode::shared::Lock;
use std::path::Path;
use std::sync::Arc;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::elem::TraceElement;
use coresight_generator::{generate, BufferLayout, GenOptions, GenProtocol};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::lister;
use coresight_decode::logger::{shared, MsgLogger};
use coresight_decode::parallel::{decode_parallel, ParallelOptions, ParallelSink, WorkerSetup};
use coresight_decode::snapshot::Snapshot;

/// The shipped snapshot with three trace IDs (PTM 0x11, ETMv3 0x29, 0x17)
/// in one formatted buffer.
const THREE_IDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/ptm-etmv3-shared-buffer");

/// The listing after the command-line echo.
fn list(args: &[&str]) -> String {
    let out = shared(MsgLogger::capture());
    let mut argv = vec!["trc_pkt_lister".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    assert_eq!(lister::run(&argv, &|_| None, out.clone()), 0);
    let text = out.borrow_mut().take_captured();
    let (_, rest) = text.split_once("Test Command Line:-\n").unwrap();
    rest.split_once('\n').unwrap().1.to_string()
}

/// A generated capture of three cores (PTM and ETMv3) long enough to take
/// many rounds.
fn long_capture(name: &str) -> std::path::PathBuf {
    let dir = common::temp_dir(name);
    let g = generate(&GenOptions { seed: 11, protocol: GenProtocol::Tc2, layout: BufferLayout::Formatted, length: 12_000 });
    g.spec.write_to(&dir).unwrap();
    let size = std::fs::metadata(dir.join("trace.bin")).map(|m| m.len()).unwrap_or(0);
    assert!(size > 30_000, "{size} bytes of trace");
    dir
}

#[test]
fn listings_are_identical_on_worker_threads() {
    let long = long_capture("parallel-listings");
    for dir in [Path::new(THREE_IDS), &long] {
        let dir = dir.to_str().unwrap();
        for mode in [&["-decode"][..], &["-decode", "-test_waits", "3"], &["-decode", "-test_waits", "5000"], &[], &["-test_waits", "7"], &["-decode_only"]] {
            let mut args = vec!["-ss_dir", dir, "-no_time_print"];
            args.extend_from_slice(mode);
            let serial = list(&[&args[..], &["-threads", "1"]].concat());
            assert!(serial.contains("Trace buffer done"), "{serial}");
            for threads in ["2", "3"] {
                let parallel = list(&[&args[..], &["-threads", threads]].concat());
                assert!(parallel == serial, "{dir} {mode:?} -threads {threads}: listings differ");
            }
        }
    }
}

#[test]
fn a_fatal_error_stops_the_threads_where_the_serial_decode_stops() {
    // A frame that switches to ID 0x17 and away with no byte between leaves
    // it an empty block: the lister, as OpenCSD, stops the data path there.
    let mut trace = std::fs::read(format!("{THREE_IDS}/trace.bin")).unwrap();
    let frame = [0x23, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2f, 0x00, 0x23, 0x40];
    let at = (trace.len() / 2) & !15;
    trace.splice(at..at, frame);
    let dir = common::temp_dir("parallel-fatal");
    for e in std::fs::read_dir(THREE_IDS).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    std::fs::write(dir.join("trace.bin"), &trace).unwrap();
    let d = dir.to_str().unwrap();
    let serial = list(&["-ss_dir", d, "-decode", "-no_time_print", "-threads", "1"]);
    assert!(serial.contains("Trace Packet Lister : Data Path fatal error"), "{serial}");
    assert!(!serial.contains("END OF TRACE DATA"), "{serial}");
    let parallel = list(&["-ss_dir", d, "-decode", "-no_time_print", "-threads", "2"]);
    assert_eq!(parallel, serial);
}

/// Elements as a sink saw them.
#[derive(Default)]
struct Seen {
    elems: Vec<(TrcIndex, u8, TraceElement)>,
    /// Answer `Wait` to every n-th element (0: never).
    wait_every: usize,
    flushes: usize,
}

impl ParallelSink for Seen {
    fn text(&mut self, _text: &str) {}
    fn element(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.elems.push((index, trace_id, *elem));
        if self.wait_every > 0 && self.elems.len() % self.wait_every == 0 { DatapathResp::Wait } else { DatapathResp::Cont }
    }
    fn flush(&mut self) {
        self.flushes += 1;
    }
}

struct Collect(Arc<Lock<Vec<(TrcIndex, u8, TraceElement)>>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, trace_id, *elem));
        DatapathResp::Cont
    }
}

#[test]
fn elements_come_in_the_serial_order_with_the_serial_indices() {
    let dir = long_capture("parallel-elements");
    let ss = Snapshot::load(&dir).unwrap();
    let data = std::fs::read(dir.join("trace.bin")).unwrap();

    // Serial, in the lister's 1 KB blocks.
    let mut tree = ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).unwrap().unwrap();
    let serial = Arc::new(Lock::new(Vec::new()));
    tree.set_gen_elem_out(Box::new(Collect(serial.clone())));
    for (n, block) in data.chunks(1024).enumerate() {
        let (r, used) = tree.trace_data_in(DatapathOp::Data, (n * 1024) as TrcIndex, block);
        assert!(r.is_cont() && used == block.len());
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    let ids: Vec<u8> = tree.elements().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 3);
    let serial = serial.borrow().clone();
    assert!(serial.len() > 1000);

    let build = |_: &WorkerSetup| Ok(ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).unwrap().unwrap());
    for (threads, wait_every) in [(2, 0), (3, 0), (2, 3)] {
        let mut seen = Seen { wait_every, ..Seen::default() };
        let options = ParallelOptions { threads, blocks_per_round: 2, ..ParallelOptions::default() };
        let outcome = decode_parallel(options, tree.format(), &ids, &mut data.as_slice(), &build, &mut seen).unwrap();
        assert_eq!(outcome.resp, DatapathResp::Cont);
        assert_eq!(outcome.processed, data.len() as u64);
        assert!(seen.elems == serial, "{threads} threads: elements differ");
        assert_eq!(seen.flushes, if wait_every > 0 { serial.len() / wait_every } else { 0 });
    }
}
