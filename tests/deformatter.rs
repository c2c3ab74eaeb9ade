//! Frame deformatter: every sync form, ID changes mid-frame, odd bytes,
//! flow control, and round trips through the formatter.

mod common;

use coresight_decode::shared::Lock;
use std::sync::Arc;

use common::{Rng, RngExt};
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::deformatter::{DeformatterConfig, FrameDeformatter, IdStreamSink};
use coresight_decode::error::ErrCode;
use coresight_decode::interfaces::{RawFrameKind, TrcRawFrameIn};
use coresight_decode::logger::{ErrLink, ErrorLogger, MsgLogger};
use coresight_decode::shared::shared;
use coresight_generator::formatter::{FormatterConfig, FrameFormatter};

/// Records what reaches each ID: bytes in order with their indexes.
#[derive(Default)]
struct Recorder {
    attached: Vec<u8>,
    got: Vec<(u8, TrcIndex, u8)>,
    ops: Vec<(DatapathOp, TrcIndex)>,
    /// Answer Wait after accepting this many bytes of a call (None: never).
    wait_after: Option<usize>,
    calls: usize,
}

impl Recorder {
    fn on(ids: &[u8]) -> Self {
        Recorder {
            attached: ids.to_vec(),
            ..Default::default()
        }
    }
    fn stream(&self, id: u8) -> Vec<u8> {
        self.got
            .iter()
            .filter(|(i, _, _)| *i == id)
            .map(|(_, _, b)| *b)
            .collect()
    }
}

impl IdStreamSink for Recorder {
    fn is_attached(&self, id: u8) -> bool {
        self.attached.contains(&id)
    }
    fn id_data_in(&mut self, id: u8, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        self.calls += 1;
        let take = match self.wait_after {
            Some(n) if self.calls.is_multiple_of(3) => n.min(data.len()),
            _ => data.len(),
        };
        for (k, &b) in data[..take].iter().enumerate() {
            self.got.push((id, index + k as TrcIndex, b));
        }
        if take < data.len() || (self.wait_after.is_some() && self.calls.is_multiple_of(3)) {
            (DatapathResp::Wait, take)
        } else {
            (DatapathResp::Cont, take)
        }
    }
    fn all_ids_op(&mut self, op: DatapathOp, index: TrcIndex) -> DatapathResp {
        self.ops.push((op, index));
        DatapathResp::Cont
    }
}

/// Pushes `data` in `block`-sized pieces, flushing on waits as a client must.
fn feed(d: &mut FrameDeformatter, data: &[u8], block: usize, sink: &mut dyn IdStreamSink) -> DatapathResp {
    let mut idx = 0usize;
    let mut resp = DatapathResp::Cont;
    while idx < data.len() {
        let end = (idx + block).min(data.len());
        let mut pos = idx;
        while pos < end {
            if resp.is_wait() {
                resp = d.trace_data_in(DatapathOp::Flush, 0, &[], sink).0;
                continue;
            }
            let (r, used) = d.trace_data_in(DatapathOp::Data, pos as TrcIndex, &data[pos..end], sink);
            resp = r;
            if r.is_fatal() {
                return r;
            }
            pos += used;
        }
        idx = end;
    }
    while resp.is_wait() {
        resp = d.trace_data_in(DatapathOp::Flush, 0, &[], sink).0;
    }
    resp
}

fn frame(bytes: [u8; 16]) -> Vec<u8> {
    bytes.to_vec()
}

#[test]
fn single_id_frame_with_flag_bits() {
    // ID 0x10, then data; aux byte carries the LSBs of the even data bytes.
    let f = frame([
        0x21,
        0xaa,
        0x02,
        0xbb,
        0x04,
        0xcc,
        0x06,
        0xdd,
        0x08,
        0xee,
        0x0a,
        0xf0,
        0x0c,
        0xf1,
        0x0e,
        0b1000_0010,
    ]);
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    let mut r = Recorder::on(&[0x10]);
    assert_eq!(feed(&mut d, &f, 16, &mut r), DatapathResp::Cont);
    assert_eq!(
        r.stream(0x10),
        vec![
            0xaa, 0x03, 0xbb, 0x04, 0xcc, 0x06, 0xdd, 0x08, 0xee, 0x0a, 0xf0, 0x0c, 0xf1, 0x0f
        ]
    );
    // Indexes: the run starts at the frame start.
    assert_eq!(r.got[0].1, 0);
    assert_eq!(r.got.last().unwrap().1, 13);
}

#[test]
fn id_change_mid_frame_and_previous_id_flag() {
    // Byte 4 is a new ID (0x11) with its flag set: byte 5 still belongs to
    // 0x10. Byte 8 changes to 0x12 without the flag: byte 9 is 0x12's.
    let f = frame([
        0x21,
        0x01,
        0x02,
        0x03,
        0x23,
        0x05,
        0x06,
        0x07,
        0x25,
        0x09,
        0x0a,
        0x0b,
        0x0c,
        0x0d,
        0x0e,
        0b0000_0100,
    ]);
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    let mut r = Recorder::on(&[0x10, 0x11, 0x12]);
    feed(&mut d, &f, 16, &mut r);
    assert_eq!(r.stream(0x10), vec![0x01, 0x02, 0x03, 0x05]);
    assert_eq!(r.stream(0x11), vec![0x06, 0x07]);
    assert_eq!(r.stream(0x12), vec![0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e]);
    // A run for a new ID is indexed from its ID byte's position.
    assert_eq!(r.got.iter().find(|g| g.0 == 0x11).unwrap().1, 4);
    assert_eq!(r.got.iter().find(|g| g.0 == 0x12).unwrap().1, 8);
}

#[test]
fn byte_14_id_applies_to_next_frame_and_unknown_id_data_is_skipped() {
    // Frame 1 starts with data before any ID: skipped. Byte 14 is ID 0x20.
    let f1 = frame([
        0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x41, 0x00,
    ]);
    let f2 = frame([
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x80,
    ]);
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    let mut r = Recorder::on(&[0x20]);
    feed(&mut d, &[f1, f2].concat(), 32, &mut r);
    let expect: Vec<u8> = (0x10..=0x1d).chain([0x1f]).collect();
    assert_eq!(r.stream(0x20), expect);
    assert_eq!(r.got[0].1, 16);
    let st = d.stats();
    assert_eq!(st.unknown_id_bytes, 14);
    assert_eq!(st.valid_id_bytes, 15);
}

#[test]
fn fsync_stream_syncs_skips_leading_garbage_and_splits_across_blocks() {
    let mut fm = FrameFormatter::new(FormatterConfig {
        fsync_every: 2,
        hsync_every: 0,
    });
    let payload: Vec<u8> = (0..100u8).collect();
    fm.push(0x10, &payload);
    let mut data = vec![0x55, 0x66, 0x77, 0x88];
    data.extend(fm.finish());
    // Pad to a multiple of 4 (the FSYNC stream alignment).
    while data.len() % 4 != 0 {
        data.push(0xff);
        data.push(0x7f);
    }
    for block in [4usize, 8, 12, 20, 504] {
        let mut d = FrameDeformatter::new(DeformatterConfig::fsync_stream());
        let mut r = Recorder::on(&[0x10]);
        assert!(!feed(&mut d, &data, block, &mut r).is_fatal());
        assert_eq!(r.stream(0x10), payload, "block size {block}");
    }
}

#[test]
fn hsyncs_are_removed_and_rejected_when_not_expected() {
    let mut fm = FrameFormatter::new(FormatterConfig {
        fsync_every: 1,
        hsync_every: 3,
    });
    let payload: Vec<u8> = (0..64u8).map(|b| b.wrapping_mul(7)).collect();
    fm.push(0x22, &payload);
    let data = fm.finish();
    let mut d = FrameDeformatter::new(DeformatterConfig {
        hsyncs: true,
        fsyncs: true,
        ..Default::default()
    });
    let mut r = Recorder::on(&[0x22]);
    feed(&mut d, &data, 2 * 17, &mut r);
    assert_eq!(r.stream(0x22), payload);

    // The same stream to a deformatter expecting FSYNCs only: an error is
    // logged and the data path stops.
    let log = shared(ErrorLogger::default());
    let out = shared(MsgLogger::capture());
    log.borrow_mut().set_output(Some(out.clone()));
    let mut d = FrameDeformatter::new(DeformatterConfig::fsync_stream());
    d.set_error_link(ErrLink::new(&log, "DFMT_CSFRAMES"));
    let mut r = Recorder::on(&[0x22]);
    let padded: Vec<u8> = data
        .iter()
        .copied()
        .chain(std::iter::repeat_n(0, (4 - data.len() % 4) % 4))
        .collect();
    assert!(feed(&mut d, &padded, padded.len(), &mut r).is_fatal());
    let text = out.borrow().captured().to_string();
    assert!(
        text.starts_with("DFMT_CSFRAMES : 0x0012 (OCSD_ERR_DFMTR_BAD_FHSYNC)"),
        "{text}"
    );
    assert!(text.ends_with("Bad HSYNC in frame."), "{text}");
}

#[test]
fn four_fsyncs_reset_the_decoders_in_memory_aligned_mode() {
    let mut fm = FrameFormatter::new(FormatterConfig::default());
    fm.push(0x10, &[1; 30]);
    let mut data = fm.finish();
    let reset_at = data.len();
    data.extend([0xff, 0xff, 0xff, 0x7f].repeat(4));
    let mut fm = FrameFormatter::new(FormatterConfig::default());
    fm.push(0x10, &[2; 14]);
    data.extend(fm.finish());
    let mut d = FrameDeformatter::new(DeformatterConfig {
        reset_on_4x_fsync: true,
        ..DeformatterConfig::mem_aligned()
    });
    let mut r = Recorder::on(&[0x10]);
    feed(&mut d, &data, 64, &mut r);
    assert_eq!(r.ops, vec![(DatapathOp::Reset, reset_at as TrcIndex)]);
    assert_eq!(r.stream(0x10), [[1u8; 30].as_slice(), &[2u8; 14]].concat());

    // Three FSYNCs are a bad pattern.
    let mut bad = vec![0u8; 0];
    bad.extend([0xff, 0xff, 0xff, 0x7f].repeat(3));
    bad.extend([0x21, 0, 0, 0]);
    let mut d = FrameDeformatter::new(DeformatterConfig {
        reset_on_4x_fsync: true,
        ..DeformatterConfig::mem_aligned()
    });
    assert!(feed(&mut d, &bad, 16, &mut Recorder::on(&[0x10])).is_fatal());
}

#[test]
fn misaligned_stream_block_and_non_contiguous_index_are_fatal() {
    // A TPIU stream comes in 4-byte units, as OpenCSD requires.
    let mut d = FrameDeformatter::new(DeformatterConfig::fsync_stream());
    let mut r = Recorder::on(&[0x10]);
    let (resp, _) = d.trace_data_in(DatapathOp::Data, 0, &[0u8; 6], &mut r);
    assert_eq!(resp, DatapathResp::FatalInvalidData);
    // Memory-aligned frames may come in blocks of any length, but each
    // block must follow the last.
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    assert!(d.trace_data_in(DatapathOp::Data, 0, &[0u8; 20], &mut r).0.is_cont());
    assert_eq!(
        d.trace_data_in(DatapathOp::Data, 16, &[0u8; 12], &mut r).0,
        DatapathResp::FatalInvalidData
    );
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    assert!(d.trace_data_in(DatapathOp::Data, 0, &[0u8; 16], &mut r).0.is_cont());
    assert_eq!(
        d.trace_data_in(DatapathOp::Data, 100, &[0u8; 16], &mut r).0,
        DatapathResp::FatalInvalidData
    );
    // After a reset the index may start again.
    d.trace_data_in(DatapathOp::Reset, 0, &[], &mut r);
    assert!(d.trace_data_in(DatapathOp::Data, 0, &[0u8; 16], &mut r).0.is_cont());
}

/// Sends end of trace, flushing while a decoder waits.
fn end_of_trace(d: &mut FrameDeformatter, sink: &mut dyn IdStreamSink) {
    let mut resp = d.trace_data_in(DatapathOp::Eot, 0, &[], sink).0;
    while resp.is_wait() {
        resp = d.trace_data_in(DatapathOp::Flush, 0, &[], sink).0;
    }
}

#[test]
fn buffer_of_440_bytes_decodes_27_frames_and_reports_the_8_byte_tail() {
    // Issue 14: a memory-aligned buffer whose length is not a multiple of
    // 16 decoded nothing (OpenCSD refuses the block). Now its whole frames
    // are decoded, however the buffer is cut into blocks, and the tail is
    // reported at the end of trace.
    let mut fm = FrameFormatter::new(FormatterConfig::default());
    let a: Vec<u8> = (0..=255u8).cycle().take(300).collect();
    let b: Vec<u8> = (0..=255u8).rev().cycle().take(150).collect();
    fm.push(0x10, &a);
    fm.push(0x22, &b);
    let mut data = fm.finish();
    assert!(data.len() >= 448, "{}", data.len());
    data.truncate(440);

    // The reference: the 27 whole frames, as one aligned block.
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    let mut whole = Recorder::on(&[0x10, 0x22]);
    assert!(feed(&mut d, &data[..432], 432, &mut whole).is_cont());
    end_of_trace(&mut d, &mut whole);
    assert_eq!(d.incomplete_tail(), None);
    assert!(!whole.stream(0x10).is_empty() && !whole.stream(0x22).is_empty());

    for (block, waits) in [
        (440, None),
        (1024, None),
        (7, None),
        (13, Some(2)),
        (100, Some(1)),
        (16, Some(3)),
    ] {
        let log = shared(ErrorLogger::default());
        let out = shared(MsgLogger::capture());
        log.borrow_mut().set_output(Some(out.clone()));
        let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
        d.set_error_link(ErrLink::new(&log, "DFMT_CSFRAMES"));
        let mut r = Recorder::on(&[0x10, 0x22]);
        r.wait_after = waits;
        let resp = feed(&mut d, &data, block, &mut r);
        assert!(!resp.is_fatal(), "block {block}");
        end_of_trace(&mut d, &mut r);
        assert_eq!(
            r.got, whole.got,
            "block {block}: the bytes of the 27 frames, with their indexes"
        );
        assert_eq!(d.incomplete_tail(), Some((432, 8)), "block {block}");
        assert_eq!(
            out.borrow().captured(),
            "DFMT_CSFRAMES : 0x0006 (OCSD_ERR_INVALID_PARAM_VAL) [Invalid value parameter passed to component.]; \
             TrcIdx=432; Incomplete frame at end of trace: 8 bytes not decoded (frames are 16 bytes).\n",
            "block {block}"
        );
    }
}

#[test]
fn a_frame_cut_between_blocks_is_completed_by_the_next() {
    let mut fm = FrameFormatter::new(FormatterConfig::default());
    let payload: Vec<u8> = (0..200u8).collect();
    fm.push(0x31, &payload);
    let data = fm.finish();
    assert!(data.len().is_multiple_of(16));
    let mut rng = Rng::new(11);
    for _ in 0..20 {
        let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
        let mut r = Recorder::on(&[0x31]);
        let mut pos = 0;
        while pos < data.len() {
            let n = (1 + rng.below(40) as usize).min(data.len() - pos);
            let (resp, used) = d.trace_data_in(DatapathOp::Data, pos as TrcIndex, &data[pos..pos + n], &mut r);
            assert!(resp.is_cont());
            assert_eq!(used, n, "every byte is taken: the start of a frame is kept");
            pos += n;
        }
        end_of_trace(&mut d, &mut r);
        assert_eq!(r.stream(0x31), payload);
        assert_eq!(d.incomplete_tail(), None);
    }
}

#[test]
fn invalid_configuration_is_refused() {
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    assert_eq!(d.configure(DeformatterConfig::default()), Err(ErrCode::InvalidParamVal));
    assert_eq!(
        d.configure(DeformatterConfig {
            mem_aligned: true,
            fsyncs: true,
            ..Default::default()
        }),
        Err(ErrCode::InvalidParamVal)
    );
    assert!(d.configure(DeformatterConfig::fsync_stream()).is_ok());
}

#[test]
fn waits_lose_and_repeat_nothing() {
    let mut rng = Rng::new(7);
    let mut fm = FrameFormatter::new(FormatterConfig::default());
    let mut expect: Vec<Vec<u8>> = vec![Vec::new(); 4];
    for _ in 0..300 {
        let id = 0x10 + rng.below(4) as u8;
        let n = 1 + rng.below(9) as usize;
        let chunk = rng.bytes(n);
        expect[(id - 0x10) as usize].extend(&chunk);
        fm.push(id, &chunk);
    }
    let data = fm.finish();
    for wait_after in [0usize, 1, 3] {
        let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
        let mut r = Recorder::on(&[0x10, 0x11, 0x12, 0x13]);
        r.wait_after = Some(wait_after);
        assert!(!feed(&mut d, &data, 1024, &mut r).is_fatal());
        for id in 0..4u8 {
            assert_eq!(
                r.stream(0x10 + id),
                expect[id as usize],
                "wait_after {wait_after}, id {id}"
            );
        }
    }
}

#[test]
fn formatter_round_trip_many_streams() {
    for seed in 0..40 {
        let mut rng = Rng::new(seed);
        let cfg = match seed % 3 {
            0 => (FormatterConfig::default(), DeformatterConfig::mem_aligned()),
            1 => (
                FormatterConfig {
                    fsync_every: 1 + rng.below(5) as usize,
                    hsync_every: 0,
                },
                DeformatterConfig::fsync_stream(),
            ),
            _ => (
                FormatterConfig {
                    fsync_every: 1 + rng.below(3) as usize,
                    hsync_every: 1 + rng.below(6) as usize,
                },
                DeformatterConfig {
                    fsyncs: true,
                    hsyncs: true,
                    ..Default::default()
                },
            ),
        };
        let ids: Vec<u8> = (0..1 + rng.below(6)).map(|_| 1 + rng.below(0x6e) as u8).collect();
        let mut fm = FrameFormatter::new(cfg.0);
        let mut expect = std::collections::BTreeMap::<u8, Vec<u8>>::new();
        for _ in 0..rng.below(200) {
            let id = ids[rng.below(ids.len() as u64) as usize];
            let n = rng.below(20) as usize;
            let chunk = rng.bytes(n);
            expect.entry(id).or_default().extend(&chunk);
            fm.push(id, &chunk);
        }
        let mut data = fm.finish();
        let align = cfg.1.alignment();
        while !data.len().is_multiple_of(align) {
            data.extend([0xff, 0x7f]);
        }
        let mut d = FrameDeformatter::new(cfg.1);
        let mut attached: Vec<u8> = ids.clone();
        attached.dedup();
        let mut r = Recorder::on(&attached);
        let block = align * (1 + rng.below(40) as usize);
        let resp = feed(&mut d, &data, block, &mut r);
        assert!(!resp.is_fatal(), "seed {seed}");
        for (id, bytes) in &expect {
            assert_eq!(&r.stream(*id), bytes, "seed {seed} id {id:#x}");
        }
    }
}

/// What the raw monitor saw: (index, kind, bytes, trace ID).
type RawSeen = Vec<(TrcIndex, RawFrameKind, Vec<u8>, Option<u8>)>;

struct RawLog(Arc<Lock<RawSeen>>);
impl TrcRawFrameIn for RawLog {
    fn trace_raw_frame_in(&mut self, op: DatapathOp, index: TrcIndex, kind: RawFrameKind, data: &[u8], id: Option<u8>) {
        if op == DatapathOp::Data {
            self.0.borrow_mut().push((index, kind, data.to_vec(), id));
        }
    }
}

#[test]
fn raw_monitor_sees_packed_frames_and_unpacked_runs() {
    let f = frame([
        0x21, 0x01, 0x02, 0x03, 0x23, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x00,
    ]);
    let log = Arc::new(Lock::new(Vec::new()));
    let mut d = FrameDeformatter::new(DeformatterConfig {
        raw_packed: true,
        raw_unpacked: true,
        ..DeformatterConfig::mem_aligned()
    });
    d.set_raw_monitor(Some(Box::new(RawLog(log.clone()))));
    let mut r = Recorder::on(&[0x10]);
    feed(&mut d, &f, 16, &mut r);
    let got = log.borrow();
    assert_eq!(got[0], (0, RawFrameKind::Packed, f.clone(), None));
    assert_eq!(got[1], (0, RawFrameKind::IdData, vec![0x01, 0x02, 0x03], Some(0x10)));
    // ID 0x11 has no consumer: its data is still shown.
    assert_eq!(
        got[2],
        (
            4,
            RawFrameKind::IdData,
            vec![0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e],
            Some(0x11)
        )
    );
    assert_eq!(got.len(), 3);
}
