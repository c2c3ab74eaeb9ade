//! STM (System Trace Macrocell, STPv2): packet processor and decoder.
//!
//! [`StmProcessor`] turns the nibble stream into [`StmPacket`]s;
//! [`StmDecoder`] joins master, channel, marker, timestamp and payload
//! into `OCSD_GEN_TRC_ELEM_SWTRACE` elements. `factory` registers both
//! with the decoder registry; the configuration is the snapshot's
//! `STMTCSR` register (trace ID in bits 22:16).
//!
//! ```
//! use coresight_decode::datapath::DatapathOp;
//! use coresight_decode::decoder::{DecodeMode, SourceConfig};
//! use coresight_decode::interfaces::TrcDataIn;
//! use coresight_decode::logger::MsgLogger;
//! use coresight_decode::shared::shared;
//! use coresight_decode::printers::GenElemPrinter;
//! use coresight_decode::tree::{DecodeTree, SourceFormat};
//!
//! // One unformatted STM stream: ASYNC, VERSION 3, M8 0x41, D8 0xab.
//! let mut data = vec![0xff; 10];
//! data.extend([0x0f, 0x0f, 0x30, 0x41, 0x41, 0xba]);
//!
//! let mut tree = DecodeTree::new(SourceFormat::Single, DecodeMode::FullDecode);
//! let cfg = SourceConfig { regs: vec![("STMTCSR".into(), 0x0020_0000)], ..Default::default() };
//! tree.create_decoder("STM", &cfg).unwrap();
//! let out = shared(MsgLogger::capture());
//! tree.set_gen_elem_out(Box::new(GenElemPrinter::new(out.clone())));
//! tree.trace_data_in(DatapathOp::Data, 0, &data);
//! tree.trace_data_in(DatapathOp::Eot, 0, &[]);
//! assert_eq!(
//!     out.borrow().captured(),
//!     "Idx:0; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])\n\
//!      Idx:15; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x00) 0xab; )\n\
//!      Idx:15; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])\n"
//! );
//! ```

use std::sync::Arc;

use crate::decoder::RegSpec;
use crate::decoder::{DecodeContext, DecoderFactory, Pipeline};
use crate::factory::{ProtocolFactory, ProtocolInfo};

mod decoder;
mod packet;
mod processor;
#[cfg(test)]
mod tests;

pub use decoder::StmDecoder;
pub use packet::{StmPacket, StmPktType, StmTsType};
pub use processor::StmProcessor;

/// STM, System Trace Macrocell (`STM` devices): trace ID in STMTCSR bits 22:16.
pub(crate) const STM: ProtocolInfo = ProtocolInfo {
    name: "STM",
    device_types: &["STM"],
    registers: &[RegSpec::required("STMTCSR")],
    trace_id_reg: ("STMTCSR", 16),
    pe_trace: false,
};

/// STM configuration: the `STMTCSR` register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StmConfig {
    /// STMTCSR: STM trace control and status (trace ID in TRACEID, bits 22:16).
    pub tcsr: u32,
}

impl StmConfig {
    /// A configuration with trace ID `id` and nothing else set.
    #[cfg(test)]
    pub(crate) fn with_trace_id(id: u8) -> Self {
        StmConfig {
            tcsr: ((id as u32) & 0x7f) << 16,
        }
    }
    /// CoreSight trace ID (bits 22:16).
    pub(crate) fn trace_id(&self) -> u8 {
        ((self.tcsr >> 16) & 0x7f) as u8
    }
}

/// Creates the STM pipeline (processor, and decoder unless packets only)
/// for `cfg` in the context `ctx`.
pub fn create_pipeline(cfg: StmConfig, ctx: &DecodeContext) -> Pipeline<StmProcessor> {
    let id = cfg.trace_id();
    let mut proc = StmProcessor::new(id);
    proc.set_error_link(ctx.packet_processor_err_link("PKTP_STM"));
    let dec = ctx.decoder_for_mode(|| StmDecoder::new(id, ctx.elem_out.clone()));
    Pipeline::new(STM.name, proc, dec)
}

/// The protocol's factory for the decoder registry; the configuration is
/// the source's `STMTCSR`.
pub(crate) fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(ProtocolFactory::new(&STM, |_info, cfg, ctx| {
        let tcsr = cfg.reg_or("STMTCSR", 0) as u32;
        Ok(Box::new(create_pipeline(StmConfig { tcsr }, ctx)))
    }))
}
