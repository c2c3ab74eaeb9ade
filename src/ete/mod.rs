//! ETE (Armv9 Embedded Trace Extension): packet processor and decoder.
//!
//! ETE is a superset of ETMv4: the ETMv4 packet processor and decoder
//! ([`crate::etmv4`]) handle it, switched by a configuration whose
//! architecture version (read from TRCDEVARCH) is 5. This module gives
//! the protocol its own name, registers and component names.

use std::sync::Arc;

use crate::decoder::RegSpec;
use crate::decoder::{DecoderFactory, SourceConfig};
use crate::etmv4::{EtmV4Config, create_component};
use crate::factory::{ProtocolFactory, ProtocolInfo};

const ETE_REGS: &[RegSpec] = &[
    RegSpec::required("TRCCONFIGR"),
    RegSpec::required("TRCTRACEIDR"),
    RegSpec::required("TRCIDR0"),
    RegSpec::optional("TRCIDR1", 0x4100_F403),
    RegSpec::required("TRCIDR2"),
    RegSpec::optional("TRCIDR8", 0),
    RegSpec::optional("TRCDEVARCH", 0x4770_5A13),
];

/// ETE, the Armv9 Embedded Trace Extension (`ETE` devices).
pub(crate) const ETE: ProtocolInfo = ProtocolInfo {
    name: "ETE",
    device_types: &["ETE"],
    registers: ETE_REGS,
    trace_id_reg: ("TRCTRACEIDR", 0),
    pe_trace: true,
};

#[cfg(test)]
mod tests;

/// The ETE configuration of a source: its ETMv4-compatible registers and
/// TRCDEVARCH.
pub fn config_from_source(cfg: &SourceConfig) -> EtmV4Config {
    EtmV4Config::from_ete_source(cfg)
}

/// The protocol's factory for the decoder registry.
pub(crate) fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(ProtocolFactory::new(&ETE, |info, cfg, ctx| {
        create_component(info.name, config_from_source(cfg), ctx)
    }))
}
