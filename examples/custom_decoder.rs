//! `custom_decoder`: replace the built-in decoder of one trace ID with a
//! decoder of our own.
//!
//! ```text
//! cargo run --example custom_decoder
//! ```
//!
//! The shipped `snapshots/etmv4-a64` has an ETMv4 on trace ID 0x15. Here a
//! decoder that counts its source's bytes and, at the end of the trace,
//! reads the first word of its core's code takes that ID's place: it is
//! registered beside the built-in protocols and chosen for ID 0x15 with
//! `TreeBuilder::decoder_for_id`. It gets the ID's bytes from the frame
//! deformatter and the core's memory images, as the built-in would, and
//! sends custom elements with typed payloads (a kind and a value).

use std::sync::Arc;

use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{
    DecodeContext, DecodeMode, DecoderFactory, DecoderRegistry, ElemRouter, RegSpec, SourceConfig, TraceComponent,
};
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::error::{ErrCode, TraceError};
use coresight_decode::memory::{MemSpace, TargetMemAccess};
use coresight_decode::printers::PacketPrinter;
use coresight_decode::shared::{Shared, shared};
use coresight_decode::{Element, ElementSink, Snapshot, TrcDataIn, TrcGenElemIn};

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64");
/// Custom element kinds.
const KIND_BYTES: u32 = 1;
const KIND_WORD: u32 = 2;

/// The decoder: counts bytes, peeks at memory at end of trace.
struct ByteCounter {
    trace_id: u8,
    bytes: u64,
    peek_at: u64,
    mem: Option<Shared<dyn TargetMemAccess>>,
    out: Shared<ElemRouter>,
}

impl TrcDataIn for ByteCounter {
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        match op {
            DatapathOp::Data => {
                self.bytes += data.len() as u64;
                (DatapathResp::Cont, data.len())
            }
            DatapathOp::Eot => {
                let mut elem = TraceElement::new(ElemType::Custom);
                elem.custom_kind = KIND_BYTES;
                elem.custom_value = self.bytes;
                self.out.borrow_mut().trace_elem_in(index, self.trace_id, &elem);
                let mut word = [0u8; 4];
                let read = self.mem.as_ref().map_or(Ok(0), |m| {
                    m.borrow_mut()
                        .read_target_memory(self.peek_at, self.trace_id, MemSpace::ANY, &mut word)
                });
                if read == Ok(4) {
                    elem.custom_kind = KIND_WORD;
                    elem.custom_value = u32::from_le_bytes(word).into();
                    self.out.borrow_mut().trace_elem_in(index, self.trace_id, &elem);
                }
                (DatapathResp::Cont, 0)
            }
            _ => (DatapathResp::Cont, 0),
        }
    }
}

impl TraceComponent for ByteCounter {
    fn protocol_name(&self) -> &str {
        "BYTES"
    }
    fn attach_packet_printer(&mut self, _: PacketPrinter, _: bool) -> Result<(), ErrCode> {
        // It has no packets to print.
        Err(ErrCode::Fail)
    }
}

/// Makes the decoder from an ETMv4's registers (it needs only the trace ID).
struct ByteCounterFactory {
    peek_at: u64,
}

impl DecoderFactory for ByteCounterFactory {
    fn protocol_name(&self) -> &str {
        "BYTES"
    }
    /// No snapshot device is of this type: it is used where it is chosen.
    fn device_types(&self) -> &[&str] {
        &["BYTES"]
    }
    fn registers(&self) -> &[RegSpec] {
        const R: &[RegSpec] = &[RegSpec::required("TRCTRACEIDR")];
        R
    }
    fn trace_id(&self, cfg: &SourceConfig) -> u8 {
        (cfg.reg_or("TRCTRACEIDR", 0) & 0x7f) as u8
    }
    fn create(&self, cfg: &SourceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, TraceError> {
        Ok(Box::new(ByteCounter {
            trace_id: self.trace_id(cfg),
            bytes: 0,
            peek_at: self.peek_at,
            mem: ctx.mem.clone(),
            out: ctx.elem_out.clone(),
        }))
    }
}

/// Keeps the custom elements' payloads.
struct Payloads(Shared<Vec<(u32, u64)>>);

impl ElementSink for Payloads {
    fn element(&mut self, _: TrcIndex, _: u8, element: &Element) -> DatapathResp {
        if let Element::Custom { kind, value, .. } = *element {
            self.0.borrow_mut().push((kind, value));
        }
        DatapathResp::Cont
    }
}

/// Decodes the snapshot with ID 0x15 replaced: the payloads it sent.
pub fn run() -> coresight_decode::Result<Vec<(u32, u64)>> {
    let ss = Snapshot::load(SNAPSHOT)?;
    let mut registry = DecoderRegistry::builtin();
    registry.register(Arc::new(ByteCounterFactory {
        peek_at: 0xFFFF_FFC0_0008_0000,
    }))?;
    let mut tree = TreeBuilder::with_registry(&ss, Arc::new(registry))
        .decoder_for_id(0x15, "BYTES")
        .build("ETB_0", DecodeMode::FullDecode, |_| {})?;
    let payloads = shared(Vec::new());
    tree.set_element_sink(Payloads(payloads.clone()));
    let path = std::path::PathBuf::from(format!("{SNAPSHOT}/trace.bin"));
    let data = std::fs::read(&path).map_err(|source| coresight_decode::Error::Io { path, source })?;
    tree.push_all(&data)?;
    Ok(std::mem::take(&mut *payloads.borrow_mut()))
}

fn main() {
    match run() {
        Ok(payloads) => {
            for (kind, value) in payloads {
                match kind {
                    KIND_BYTES => println!("trace ID 0x15: {value} bytes"),
                    _ => println!("first word of the core's code: 0x{value:08x}"),
                }
            }
        }
        Err(e) => {
            eprintln!("custom_decoder: {e}");
            std::process::exit(1);
        }
    }
}

#[test]
fn the_custom_decoder_gets_the_ids_bytes_and_its_cores_memory() {
    let payloads = run().unwrap();
    let code = std::fs::read(format!("{SNAPSHOT}/code0.bin")).unwrap();
    let first_word = u32::from_le_bytes(code[..4].try_into().unwrap());
    assert_eq!(payloads.len(), 2, "{payloads:?}");
    assert_eq!(payloads[0].0, KIND_BYTES);
    // The ID's bytes: the capture less the frames' ID and flag bytes.
    let capture = std::fs::metadata(format!("{SNAPSHOT}/trace.bin")).unwrap().len();
    assert!(payloads[0].1 > 0 && payloads[0].1 < capture, "{payloads:?}");
    assert_eq!(payloads[1], (KIND_WORD, u64::from(first_word)));
}

#[test]
fn the_chosen_decoder_takes_the_ids_place_and_an_unknown_name_is_an_error() {
    let ss = Snapshot::load(SNAPSHOT).unwrap();
    let mut registry = DecoderRegistry::builtin();
    registry.register(Arc::new(ByteCounterFactory { peek_at: 0 })).unwrap();
    let registry = Arc::new(registry);
    let tree = TreeBuilder::with_registry(&ss, registry.clone())
        .decoder_for_id(0x15, "BYTES")
        .build("ETB_0", DecodeMode::FullDecode, |_| {})
        .unwrap();
    let ids: Vec<(u8, String)> = tree.elements().map(|(id, e)| (id, e.protocol.clone())).collect();
    assert_eq!(ids, vec![(0x15, "BYTES".to_string())]);

    let e = TreeBuilder::with_registry(&ss, registry)
        .decoder_for_id(0x15, "NOPE")
        .build("ETB_0", DecodeMode::FullDecode, |_| {})
        .unwrap_err();
    assert_eq!(e.err_code(), ErrCode::DcdregNameUnknown);
    assert!(
        e.to_string()
            .starts_with("trace ID 0x15: no decoder registered as 'NOPE'"),
        "{e}"
    );
}
