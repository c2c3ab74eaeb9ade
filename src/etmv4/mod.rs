//! ETMv4 instruction trace: packet processor and decoder.
//!
//! - [`config::EtmV4Config`]: the trace unit's registers, interpreted.
//! - [`packet::EtmV4Packet`]: one packet (with the state packets build on)
//!   and its printed form.
//! - [`proc::EtmV4PktProc`]: bytes to packets.
//! - [`decode::EtmV4Decoder`]: packets to generic trace elements, following
//!   the program through target memory.
//!
//! ETE (Armv9) is a superset of ETMv4: the same processor and decoder
//! handle it when the configuration says so ([`config::EtmV4Config::is_ete`]).

pub mod config;
pub mod decode;
pub mod packet;
pub mod proc;

#[cfg(test)]
pub(crate) mod tests;

use std::rc::Rc;

use crate::decoder::{DecodeContext, DecodeMode, DecoderFactory, Pipeline, RegSpec, SourceConfig, TraceComponent};
use crate::error::Error;
use crate::logger::ErrLink;
use crate::protocols::{ProtocolInfo, ETMV4};

pub use config::EtmV4Config;
pub use decode::EtmV4Decoder;
pub use packet::{EtmV4Packet, PktType};
pub use proc::EtmV4PktProc;

/// Creates ETMv4 decoders.
pub struct EtmV4Factory {
    info: &'static ProtocolInfo,
}

impl EtmV4Factory {
    pub fn new(info: &'static ProtocolInfo) -> Self {
        EtmV4Factory { info }
    }
}

/// Builds the component for one source: the packet processor, and in full
/// decode mode the decoder behind it. `name` is the protocol name; ETE
/// shares ETMv4's processor and decoder, and so (as in OpenCSD) their
/// error-log names, `PKTP_ETMV4I_nnnn` and `DCD_ETMV4_nnnn`.
pub fn create_component(name: &'static str, cfg: EtmV4Config, ctx: &DecodeContext) -> Box<dyn TraceComponent> {
    let pkt_err = ErrLink::new(&ctx.err_log, format!("PKTP_ETMV4I_{:04}", ctx.instance_id));
    let proc = EtmV4PktProc::new(cfg.clone(), Some(pkt_err));
    let decoder: Option<Box<dyn crate::interfaces::PktDataIn<EtmV4Packet>>> = match ctx.mode {
        DecodeMode::PacketsOnly => None,
        DecodeMode::FullDecode => Some(Box::new(EtmV4Decoder::new(cfg, ctx))),
    };
    Box::new(Pipeline::new(name, proc, decoder))
}

impl DecoderFactory for EtmV4Factory {
    fn protocol_name(&self) -> &str {
        self.info.name
    }
    fn device_types(&self) -> &[&str] {
        self.info.device_types
    }
    fn is_pe_trace(&self) -> bool {
        self.info.pe_trace
    }
    fn registers(&self) -> &[RegSpec] {
        self.info.registers
    }
    fn trace_id(&self, cfg: &SourceConfig) -> u8 {
        self.info.trace_id(cfg)
    }
    fn create(&self, cfg: &SourceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, Error> {
        Ok(create_component(self.info.name, EtmV4Config::from_source(cfg), ctx))
    }
}

/// The protocol's factory for the decoder registry.
pub fn factory() -> Rc<dyn DecoderFactory> {
    Rc::new(EtmV4Factory::new(&ETMV4))
}
