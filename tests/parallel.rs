//! Decode of the trace IDs of one capture on worker threads: the elements
//! are those of the serial decode, in the same order, with and without
//! forced waits (the lister's listings: tools/tests/lister.rs).

mod common;

use coresight_decode::shared::Lock;
use std::sync::Arc;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::parallel::{ParallelOptions, ParallelSink, WorkerSetup, decode_parallel};
use coresight_decode::snapshot::Snapshot;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};

/// A generated capture of three cores (PTM and ETMv3) long enough to take
/// many rounds.
fn long_capture(name: &str) -> std::path::PathBuf {
    let dir = common::temp_dir(name);
    let g = generate(&GenOptions {
        seed: 11,
        protocol: GenProtocol::Tc2,
        layout: BufferLayout::Formatted,
        length: 12_000,
    });
    g.spec.write_to(&dir).unwrap();
    let size = std::fs::metadata(dir.join("trace.bin")).map(|m| m.len()).unwrap_or(0);
    assert!(size > 30_000, "{size} bytes of trace");
    dir
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
        if self.wait_every > 0 && self.elems.len().is_multiple_of(self.wait_every) {
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
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
    let mut tree = ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).unwrap();
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

    let build = |_: &WorkerSetup| Ok(ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).unwrap());
    for (threads, wait_every) in [(2, 0), (3, 0), (2, 3)] {
        let mut seen = Seen {
            wait_every,
            ..Seen::default()
        };
        let options = ParallelOptions {
            threads,
            blocks_per_round: 2,
            ..ParallelOptions::default()
        };
        let outcome = decode_parallel(options, tree.format(), &ids, &mut data.as_slice(), &build, &mut seen).unwrap();
        assert_eq!(outcome.resp, DatapathResp::Cont);
        assert_eq!(outcome.processed, data.len() as u64);
        assert!(seen.elems == serial, "{threads} threads: elements differ");
        assert_eq!(seen.flushes, serial.len().checked_div(wait_every).unwrap_or(0));
    }
}

/// Worker threads are worth it only when more than one trace ID holds a
/// fair part of the bytes (each worker deformats the whole capture).
#[test]
fn worth_sharing_needs_two_busy_ids() {
    use coresight_decode::deformatter::DeformatterConfig;
    use coresight_decode::parallel::worth_sharing;
    use coresight_decode::tree::SourceFormat;
    use coresight_generator::formatter::{FormatterConfig, FrameFormatter};
    let frames = |shares: &[(u8, usize)]| {
        let mut fm = FrameFormatter::new(FormatterConfig::default());
        for _ in 0..100 {
            for &(id, n) in shares {
                fm.push(id, &vec![0x5a; n]);
            }
        }
        fm.finish()
    };
    let format = SourceFormat::Formatted(DeformatterConfig::mem_aligned());
    // Balanced: two workers pay.
    assert!(worth_sharing(format, &frames(&[(0x10, 40), (0x11, 40)]), &[0x10, 0x11]));
    // One ID with all but a twentieth: one worker would do the work of this thread.
    assert!(!worth_sharing(format, &frames(&[(0x10, 95), (0x11, 5)]), &[0x10, 0x11]));
    // An eighth and more of the bytes elsewhere is enough.
    assert!(worth_sharing(format, &frames(&[(0x10, 70), (0x11, 30)]), &[0x10, 0x11]));
    // One ID to decode, or no trace at all: nothing to share.
    assert!(!worth_sharing(format, &frames(&[(0x10, 40), (0x11, 40)]), &[0x10]));
    assert!(!worth_sharing(format, &[], &[0x10, 0x11]));
    // An unformatted source is one stream.
    assert!(!worth_sharing(SourceFormat::Single, &[0x5a; 64], &[0x10, 0x11]));
}
