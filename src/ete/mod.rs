//! ETE (Armv9 Embedded Trace Extension): packet processor and decoder.
//!
//! ETE is a superset of ETMv4: the ETMv4 packet processor and decoder
//! ([`crate::etmv4`]) handle it, switched by a configuration whose
//! architecture version (read from TRCDEVARCH) is 5. This module gives
//! the protocol its own name, registers and component names.

use std::sync::Arc;

use crate::decoder::{DecoderFactory, SourceConfig};
use crate::etmv4::{create_component, EtmV4Config};
use crate::protocols::{ProtocolFactory, ETE};

#[cfg(test)]
mod tests;

/// The ETE configuration of a source: its ETMv4-compatible registers and
/// TRCDEVARCH.
pub fn config_from_source(cfg: &SourceConfig) -> EtmV4Config {
    EtmV4Config::from_ete_source(cfg)
}

/// The protocol's factory for the decoder registry.
pub fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(ProtocolFactory::new(&ETE, |info, cfg, ctx| Ok(create_component(info.name, config_from_source(cfg), ctx))))
}
