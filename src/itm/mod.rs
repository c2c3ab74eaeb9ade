//! ITM (Instrumentation Trace Macrocell): packet processor and decoder.
//!
//! [`ItmProcessor`] turns the byte stream into [`ItmPacket`]s;
//! [`ItmDecoder`] produces `OCSD_GEN_TRC_ELEM_ITMTRACE` elements for
//! software and hardware source packets and timestamps. `factory`
//! registers both with the decoder registry; the configuration is the
//! snapshot's `ITMTCR` register (trace ID in bits 22:16, local timestamp
//! prescaler in bits 9:8 when SWOENA, bit 4, is set).

use std::sync::Arc;

use crate::decoder::RegSpec;
use crate::decoder::{DecodeContext, DecoderFactory, Pipeline};
use crate::factory::{ProtocolFactory, ProtocolInfo};

mod decoder;
mod packet;
mod processor;
#[cfg(test)]
mod tests;

pub use decoder::ItmDecoder;
pub use packet::{ItmPacket, ItmPktType};
pub use processor::ItmProcessor;

/// ITM, Instrumentation Trace Macrocell (`ITM` devices): trace ID in ITMTCR bits 22:16.
pub(crate) const ITM: ProtocolInfo = ProtocolInfo {
    name: "ITM",
    device_types: &["ITM"],
    registers: &[RegSpec::required("ITMTCR")],
    trace_id_reg: ("ITMTCR", 16),
    pe_trace: false,
};

/// ITM configuration: the `ITMTCR` register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItmConfig {
    /// ITMTCR: ITM trace control (trace ID in TraceBusID, bits 22:16).
    pub tcr: u32,
}

impl ItmConfig {
    /// A configuration with trace ID `id` and nothing else set.
    #[cfg(test)]
    pub(crate) fn with_trace_id(id: u8) -> Self {
        ItmConfig {
            tcr: ((id as u32) & 0x7f) << 16,
        }
    }
    /// CoreSight trace ID (bits 22:16).
    pub(crate) fn trace_id(&self) -> u8 {
        ((self.tcr >> 16) & 0x7f) as u8
    }
    /// Local timestamp prescaler: 1, 4, 16 or 64 (TSPrescale, used only
    /// with the TPIU clock, SWOENA set).
    pub(crate) fn ts_prescale(&self) -> u32 {
        if self.tcr & 0x10 != 0 {
            [1, 4, 16, 64][((self.tcr >> 8) & 3) as usize]
        } else {
            1
        }
    }
}

/// Creates the ITM pipeline (processor, and decoder unless packets only)
/// for `cfg` in the context `ctx`.
pub fn create_pipeline(cfg: ItmConfig, ctx: &DecodeContext) -> Pipeline<ItmProcessor> {
    let id = cfg.trace_id();
    let mut proc = ItmProcessor::new(id);
    proc.set_error_link(ctx.packet_processor_err_link("PKTP_ITM"));
    let dec = ctx.decoder_for_mode(|| ItmDecoder::new(id, cfg.ts_prescale(), ctx.elem_out.clone()));
    Pipeline::new(ITM.name, proc, dec)
}

/// The protocol's factory for the decoder registry; the configuration is
/// the source's `ITMTCR`.
pub(crate) fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(ProtocolFactory::new(&ITM, |_info, cfg, ctx| {
        let tcr = cfg.reg_or("ITMTCR", 0) as u32;
        Ok(Box::new(create_pipeline(ItmConfig { tcr }, ctx)))
    }))
}
