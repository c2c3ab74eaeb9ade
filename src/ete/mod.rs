//! ETE (Armv9 Embedded Trace Extension): packet processor and decoder.
//!
//! ETE is a superset of ETMv4: the ETMv4 packet processor and decoder
//! ([`crate::etmv4`]) handle it, switched by a configuration whose
//! architecture version (read from TRCDEVARCH) is 5. This module gives
//! the protocol its own name, registers and component names.

use std::rc::Rc;

use crate::decoder::{DecodeContext, DecoderFactory, RegSpec, SourceConfig, TraceComponent};
use crate::error::Error;
use crate::etmv4::{create_component, EtmV4Config};
use crate::protocols::{ProtocolInfo, ETE};

#[cfg(test)]
mod tests;

/// Creates ETE decoders.
pub struct EteFactory {
    info: &'static ProtocolInfo,
}

impl EteFactory {
    pub fn new() -> Self {
        EteFactory { info: &ETE }
    }
}

impl Default for EteFactory {
    fn default() -> Self {
        Self::new()
    }
}

/// The ETE configuration of a source: its ETMv4-compatible registers and
/// TRCDEVARCH.
pub fn config_from_source(cfg: &SourceConfig) -> EtmV4Config {
    EtmV4Config::from_ete_source(cfg)
}

impl DecoderFactory for EteFactory {
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
        Ok(create_component(self.info.name, config_from_source(cfg), ctx))
    }
}

/// The protocol's factory for the decoder registry.
pub fn factory() -> Rc<dyn DecoderFactory> {
    Rc::new(EteFactory::new())
}
