//! A user-defined protocol registered in the decoder registry and run
//! through the decode tree, by hand and from a snapshot; and the data-path
//! flow control: a sink answering Wait every N elements must not change the
//! listing.

mod common;

use std::sync::Arc;

use common::{Rng, RngExt, temp_dir, write_files};
use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{
    DecodeContext, DecodeMode, DecoderFactory, DecoderRegistry, PacketOut, PacketProcessor, Pipeline, RegSpec,
    SourceConfig, TraceComponent,
};
use coresight_decode::deformatter::DeformatterConfig;
use coresight_decode::element::{ElemType, EventType, TraceElement};
use coresight_decode::error::{ErrCode, TraceError};
use coresight_decode::interfaces::{PktDataIn, TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::MsgLogger;
use coresight_decode::printers::{GenElemPrinter, TracePacket};
use coresight_decode::shared::{Shared, shared};
use coresight_decode::snapshot::Snapshot;
use coresight_decode::tree::{DecodeTree, SourceFormat};
use coresight_generator::formatter::{FormatterConfig, FrameFormatter};

/// The "ECHO" protocol: each byte is a packet; each packet decodes to an
/// event carrying the byte and, for odd bytes, a timestamp too.
struct EchoPkt(u8);

impl TracePacket for EchoPkt {
    fn write_desc(&self, out: &mut String) {
        out.push_str(&format!("ECHO : byte 0x{:02x}", self.0));
    }
}

struct EchoProc;

impl PacketProcessor for EchoProc {
    type Packet = EchoPkt;
    fn process(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, EchoPkt>) -> (DatapathResp, usize) {
        for (i, &b) in data.iter().enumerate() {
            let r = out.emit(index + i as TrcIndex, &EchoPkt(b), &data[i..=i]);
            if !r.is_cont() {
                return (r, i + 1);
            }
        }
        (DatapathResp::Cont, data.len())
    }
    fn eot(&mut self, _out: &mut PacketOut<'_, EchoPkt>) -> DatapathResp {
        DatapathResp::Cont
    }
    fn reset(&mut self, _index: TrcIndex) {}
}

struct EchoDecoder {
    trace_id: u8,
    out: Shared<coresight_decode::decoder::ElemRouter>,
    elem: TraceElement,
    /// A timestamp still to send after a wait.
    pending: Option<(TrcIndex, u64)>,
    /// The end-of-trace element went out (EOT is sent again after a wait).
    eot_sent: bool,
}

impl EchoDecoder {
    fn send_ts(&mut self, index: TrcIndex, ts: u64) -> DatapathResp {
        self.elem.set_type(ElemType::Timestamp);
        self.elem.timestamp = ts;
        self.out.borrow_mut().trace_elem_in(index, self.trace_id, &self.elem)
    }
}

impl PktDataIn<EchoPkt> for EchoDecoder {
    fn packet_data_in(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&EchoPkt>) -> DatapathResp {
        match (op, pkt) {
            (DatapathOp::Data, Some(p)) => {
                self.elem.set_type(ElemType::Event);
                self.elem.event_type = EventType::Numbered;
                self.elem.event_number = p.0 as u16;
                let r = self.out.borrow_mut().trace_elem_in(index, self.trace_id, &self.elem);
                if p.0 & 1 == 1 {
                    if r.is_wait() {
                        self.pending = Some((index, p.0 as u64 * 100));
                        return r;
                    }
                    return self.send_ts(index, p.0 as u64 * 100);
                }
                r
            }
            (DatapathOp::Flush, _) => match self.pending.take() {
                Some((i, ts)) => self.send_ts(i, ts),
                None => DatapathResp::Cont,
            },
            (DatapathOp::Eot, _) => {
                if self.eot_sent {
                    return DatapathResp::Cont;
                }
                self.eot_sent = true;
                self.elem.set_type(ElemType::EoTrace);
                self.out.borrow_mut().trace_elem_in(0, self.trace_id, &self.elem)
            }
            _ => DatapathResp::Cont,
        }
    }
}

struct EchoFactory;

impl DecoderFactory for EchoFactory {
    fn protocol_name(&self) -> &str {
        "ECHO"
    }
    fn device_types(&self) -> &[&str] {
        &["ECHO"]
    }
    /// A software source: not attached to a core.
    fn is_pe_trace(&self) -> bool {
        false
    }
    fn registers(&self) -> &[RegSpec] {
        const R: &[RegSpec] = &[RegSpec::required("ECHOIDR")];
        R
    }
    /// Unmasked, so a test can give the tree an ID a CoreSight source
    /// cannot have.
    fn trace_id(&self, cfg: &SourceConfig) -> u8 {
        cfg.reg_or("ECHOIDR", 0) as u8
    }
    fn create(&self, cfg: &SourceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, TraceError> {
        let decoder = (ctx.mode == DecodeMode::FullDecode).then(|| {
            Box::new(EchoDecoder {
                trace_id: self.trace_id(cfg),
                out: ctx.elem_out.clone(),
                elem: TraceElement::default(),
                pending: None,
                eot_sent: false,
            }) as Box<dyn PktDataIn<EchoPkt>>
        });
        Ok(Box::new(Pipeline::new("ECHO", EchoProc, decoder)))
    }
}

fn registry() -> Arc<DecoderRegistry> {
    let mut r = DecoderRegistry::builtin();
    r.register(Arc::new(EchoFactory)).unwrap();
    Arc::new(r)
}

/// Answers Wait on every `n`th element (0: never), printing all.
struct WaitEvery {
    inner: GenElemPrinter,
    n: u32,
    count: u32,
}

impl TrcGenElemIn for WaitEvery {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        let r = self.inner.trace_elem_in(index, trace_id, elem);
        self.count += 1;
        if self.n > 0 && self.count.is_multiple_of(self.n) {
            DatapathResp::Wait
        } else {
            r
        }
    }
}

/// Pushes `data` through the tree as the lister does, flushing on waits.
fn run(tree: &mut DecodeTree, data: &[u8]) {
    let mut idx = 0usize;
    let mut resp = DatapathResp::Cont;
    while idx < data.len() {
        if resp.is_wait() {
            resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            continue;
        }
        let (r, used) = tree.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..]);
        assert!(!r.is_fatal());
        resp = r;
        idx += used;
    }
    while resp.is_wait() {
        resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
    }
    // End of trace: on a wait, flush until continue, then send EOT again.
    let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
    while r.is_wait() {
        r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        if r.is_cont() {
            r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        }
    }
}

fn formatted_input(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut f = FrameFormatter::new(FormatterConfig::default());
    for _ in 0..60 {
        let id = [0x10, 0x11][rng.below(2) as usize];
        let n = 1 + rng.below(7) as usize;
        f.push(id, &rng.bytes(n));
    }
    f.finish()
}

fn listing(wait_every: u32, data: &[u8]) -> String {
    let out = shared(MsgLogger::capture());
    let mut tree = DecodeTree::with_registry(
        SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        DecodeMode::FullDecode,
        registry(),
    );
    for id in [0x10u64, 0x11] {
        let cfg = SourceConfig {
            name: format!("ECHO_{id:x}"),
            regs: vec![("ECHOIDR".into(), id)],
            ..Default::default()
        };
        assert_eq!(tree.create_decoder("ECHO", &cfg).unwrap() as u64, id);
        tree.attach_packet_printer(id as u8, out.clone(), true, 0).unwrap();
    }
    tree.set_gen_elem_out(Box::new(WaitEvery {
        inner: GenElemPrinter::new(out.clone()),
        n: wait_every,
        count: 0,
    }));
    run(&mut tree, data);

    out.borrow_mut().take_captured()
}

#[test]
fn custom_protocol_decodes_through_the_tree() {
    let mut f = FrameFormatter::new(FormatterConfig::default());
    f.push(0x10, &[0x02, 0x03]);
    let data = f.finish();
    let text = listing(0, &data);
    assert_eq!(
        text,
        "Idx:0; ID:10; [0x02 ];\tECHO : byte 0x02\n\
         Idx:0; ID:10; OCSD_GEN_TRC_ELEM_EVENT( Numbered:2; )\n\
         Idx:1; ID:10; [0x03 ];\tECHO : byte 0x03\n\
         Idx:1; ID:10; OCSD_GEN_TRC_ELEM_EVENT( Numbered:3; )\n\
         Idx:1; ID:10; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x00000000012c]; )\n\
         Idx:0; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [undefined])\n\
         ID:10\tEND OF TRACE DATA\n\
         Idx:0; ID:11; OCSD_GEN_TRC_ELEM_EO_TRACE( [undefined])\n\
         ID:11\tEND OF TRACE DATA\n"
    );
}

#[test]
fn waits_every_n_elements_leave_the_listing_unchanged() {
    for seed in 0..6 {
        let data = formatted_input(seed);
        let reference = listing(0, &data);
        assert!(reference.lines().count() > 100);
        for n in [1, 2, 3, 7] {
            let got = listing(n, &data);
            if let Some((i, (a, b))) = got
                .lines()
                .zip(reference.lines())
                .enumerate()
                .find(|(_, (a, b))| a != b)
            {
                panic!("seed {seed}, wait every {n}: line {i}: got `{a}`, expected `{b}`");
            }
            let tail = |t: &str| t.lines().rev().take(4).collect::<Vec<_>>().join(" | ");
            assert_eq!(
                got.lines().count(),
                reference.lines().count(),
                "seed {seed}, wait every {n}: {} vs {}",
                tail(&got),
                tail(&reference)
            );
        }
    }
}

#[test]
fn registry_refuses_a_repeated_name_and_finds_by_device_type() {
    let mut r = DecoderRegistry::builtin();
    r.register(Arc::new(EchoFactory)).unwrap();
    assert_eq!(r.register(Arc::new(EchoFactory)).err(), Some(ErrCode::DcdregNameRepeat));
    assert_eq!(r.for_device_type("ECHO.2").unwrap().protocol_name(), "ECHO");
    assert_eq!(r.for_device_type("ETM4.2").unwrap().protocol_name(), "ETMV4I");
    assert_eq!(r.for_device_type("PFT1.1").unwrap().protocol_name(), "PTM");
    assert!(r.for_device_type("XYZ").is_none());
}

#[test]
fn custom_protocol_from_a_snapshot() {
    let dir = temp_dir("custom_from_snapshot");
    let mut f = FrameFormatter::new(FormatterConfig::default());
    f.push(0x22, &[0x40, 0x41]);
    let trace = f.finish();
    write_files(
        &dir,
        &[
            ("snapshot.ini", b"[snapshot]\nversion=1.0\n[device_list]\ndevice0=echo.ini\n[trace]\nmetadata=trace.ini\n"),
            ("echo.ini", b"[device]\nname=ECHO_0\nclass=trace_source\ntype=ECHO\n[regs]\nECHOIDR(0x10)=0x22\n"),
            (
                "trace.ini",
                b"[trace_buffers]\nbuffers=buffer0\n[buffer0]\nname=ETB_0\nfile=trace.bin\nformat=coresight\n[source_buffers]\nECHO_0=ETB_0\n",
            ),
            ("trace.bin", &trace),
        ],
    );
    let ss = Snapshot::load(&dir).unwrap();
    let out = shared(MsgLogger::capture());
    let mut tree = TreeBuilder::with_registry(&ss, registry())
        .build("ETB_0", DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(out.clone()))
        })
        .expect("a tree with the ECHO decoder");
    let ids: Vec<(u8, String)> = tree.elements().map(|(id, e)| (id, e.protocol.clone())).collect();
    assert_eq!(ids, vec![(0x22, "ECHO".to_string())]);
    tree.set_gen_elem_out(Box::new(GenElemPrinter::new(out.clone())));
    run(&mut tree, &trace);
    assert_eq!(
        out.borrow().captured(),
        "Idx:0; ID:22; OCSD_GEN_TRC_ELEM_EVENT( Numbered:64; )\n\
         Idx:1; ID:22; OCSD_GEN_TRC_ELEM_EVENT( Numbered:65; )\n\
         Idx:1; ID:22; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000001964]; )\n\
         Idx:0; ID:22; OCSD_GEN_TRC_ELEM_EO_TRACE( [undefined])\n"
    );
}

/// A tree with user-registered decoders is read through the pull API as
/// the built-in ones are: typed elements, the tree waiting after each.
#[test]
fn custom_protocol_through_the_pull_api() {
    use coresight_decode::element::Event;
    use coresight_decode::element::UnsyncInfo;
    use coresight_decode::{Decoder, Element};

    let mut tree = DecodeTree::with_registry(
        SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        DecodeMode::FullDecode,
        registry(),
    );
    for id in [0x10u64, 0x11] {
        let cfg = SourceConfig {
            name: format!("ECHO_{id:x}"),
            regs: vec![("ECHOIDR".into(), id)],
            ..Default::default()
        };
        tree.create_decoder("ECHO", &cfg).unwrap();
    }
    let mut f = FrameFormatter::new(FormatterConfig::default());
    f.push(0x10, &[0x02, 0x03]);
    let data = f.finish();
    let mut decoder = Decoder::new(tree);
    decoder.set_queue_capacity(1);
    let got: Vec<(TrcIndex, u8, Element)> = decoder
        .decode(&data)
        .map(|i| i.map(|d| (d.index, d.trace_id, d.element)))
        .collect::<Result<_, _>>()
        .unwrap();
    let eot = Element::EoTrace {
        reason: UnsyncInfo::Unknown,
    };
    assert_eq!(
        got,
        [
            (0, 0x10, Element::Event(Event::Numbered(2))),
            (1, 0x10, Element::Event(Event::Numbered(3))),
            (
                1,
                0x10,
                Element::Timestamp {
                    timestamp: 0x12c,
                    cycle_count: None
                }
            ),
            (0, 0x10, eot),
            (0, 0x11, eot),
        ]
    );
}

/// A factory whose configuration gives a trace ID of 0x80 or more (not a
/// CoreSight trace ID) is refused with OpenCSD's invalid-ID code, not a
/// panic.
#[test]
fn a_trace_id_past_0x7f_is_an_error() {
    for (format, id) in [
        (SourceFormat::Formatted(DeformatterConfig::mem_aligned()), 0x90),
        (SourceFormat::Single, 0x80),
    ] {
        let mut tree = DecodeTree::with_registry(format, DecodeMode::FullDecode, registry());
        let cfg = SourceConfig {
            name: "echo".into(),
            device_type: "ECHO".into(),
            regs: vec![("ECHOIDR".into(), id)],
            core: None,
        };
        let e = tree.create_decoder("ECHO", &cfg).unwrap_err();
        assert_eq!(e.code, ErrCode::InvalidId, "{e}");
        assert!(e.message.contains(&format!("0x{id:x}")), "{e}");
        assert_eq!(tree.decoder_count(), 0);
    }
}

/// An ID filter naming 0x90 is refused: before, it silently became 0x10
/// and decoded that source instead.
#[test]
fn an_id_filter_past_0x7f_is_an_error_not_another_id() {
    let mut tree = DecodeTree::with_registry(
        SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        DecodeMode::FullDecode,
        registry(),
    );
    assert_eq!(tree.set_id_filter(Some(&[0x10, 0x90])), Err(ErrCode::InvalidId));
    assert_eq!(tree.set_id_filter(Some(&[0x10, 0x7f])), Ok(()));
    assert_eq!(tree.set_id_filter(None), Ok(()));
}

#[test]
fn a_removed_decoder_gets_no_more_data_and_its_id_takes_a_new_one() {
    let mut f = FrameFormatter::new(FormatterConfig::default());
    f.push(0x10, &[0x02]);
    f.push(0x11, &[0x04]);
    let data = f.finish();
    let out = shared(MsgLogger::capture());
    let mut tree = DecodeTree::with_registry(
        SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        DecodeMode::FullDecode,
        registry(),
    );
    let cfg = |id: u64| SourceConfig {
        name: format!("ECHO_{id:x}"),
        regs: vec![("ECHOIDR".into(), id)],
        ..Default::default()
    };
    for id in [0x10, 0x11] {
        tree.create_decoder("ECHO", &cfg(id)).unwrap();
    }
    tree.set_gen_elem_out(Box::new(GenElemPrinter::new(out.clone())));
    let removed = tree.remove_decoder(0x11).unwrap().expect("the decoder on 0x11");
    assert_eq!((removed.protocol.as_str(), removed.config_trace_id), ("ECHO", 0x11));
    assert_eq!(tree.decoder_count(), 1);
    // Nothing there any more: OpenCSD's removeDecoder succeeds too.
    assert!(tree.remove_decoder(0x11).unwrap().is_none());
    assert_eq!(tree.remove_decoder(0x80).err(), Some(ErrCode::InvalidId));
    run(&mut tree, &data);
    assert_eq!(
        out.borrow_mut().take_captured(),
        "Idx:0; ID:10; OCSD_GEN_TRC_ELEM_EVENT( Numbered:2; )\n\
         Idx:0; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [undefined])\n"
    );

    // A decoder created again on the ID decodes its data.
    let mut tree = DecodeTree::with_registry(
        SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        DecodeMode::FullDecode,
        registry(),
    );
    tree.create_decoder("ECHO", &cfg(0x11)).unwrap();
    tree.remove_decoder(0x11).unwrap();
    assert_eq!(tree.create_decoder("ECHO", &cfg(0x11)).unwrap(), 0x11);
    tree.set_gen_elem_out(Box::new(GenElemPrinter::new(out.clone())));
    run(&mut tree, &data);
    assert_eq!(
        out.borrow_mut().take_captured(),
        "Idx:2; ID:11; OCSD_GEN_TRC_ELEM_EVENT( Numbered:4; )\n\
         Idx:0; ID:11; OCSD_GEN_TRC_ELEM_EO_TRACE( [undefined])\n"
    );

    // A single-source tree's decoder goes whatever ID it is asked by.
    let mut tree = DecodeTree::with_registry(SourceFormat::Single, DecodeMode::FullDecode, registry());
    tree.create_decoder("ECHO", &cfg(0x22)).unwrap();
    assert!(tree.remove_decoder(0x22).unwrap().is_some());
    assert_eq!(tree.decoder_count(), 0);
}

// Replacing the built-in decoder of one trace ID of a snapshot is shown,
// and tested, by `examples/custom_decoder.rs`.
