//! PTM (Program Flow Trace, PFT 1.0 / 1.1): packet processor and decoder.
//!
//! Cortex-A9, A12, A15 and A17 trace with PTM. The packet processor
//! ([`PtmProcessor`]) turns the byte stream into [`PtmPacket`]s; the
//! decoder ([`PtmDecoder`]) follows the program through its memory image
//! from waypoint to waypoint (taken/not-taken atoms, branch addresses,
//! waypoint updates, exceptions, the optional return stack) and produces
//! generic trace elements.
//!
//! The configuration comes from the trace source's ETMCR, ETMCCER, ETMIDR
//! and ETMTRACEIDR registers ([`PtmConfig`]) and the traced core's
//! architecture profile.

mod decoder;
mod packet;
mod processor;
pub(crate) mod shared;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use decoder::PtmDecoder;
pub use packet::{PtmPacket, PtmPktType};
pub use processor::PtmProcessor;
pub use shared::ISyncReason;

use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
use crate::decoder::RegSpec;
use crate::decoder::{DecoderFactory, Pipeline, SourceConfig};
use crate::factory::{ProtocolFactory, ProtocolInfo};

/// Registers of ETMv3 and PTM sources (the same set).
pub(crate) const ETMV3_PTM_REGS: &[RegSpec] = &[
    RegSpec::required("ETMIDR"),
    RegSpec::required("ETMCR"),
    RegSpec::required("ETMCCER"),
    RegSpec::required("ETMTRACEIDR"),
];

/// PTM / PFT (`PTM1` and `PFT1` devices).
pub(crate) const PTM: ProtocolInfo = ProtocolInfo {
    name: "PTM",
    device_types: &["PTM1", "PFT1"],
    registers: ETMV3_PTM_REGS,
    trace_id_reg: ("ETMTRACEIDR", 0),
    pe_trace: true,
};

/// A PTM trace source's configuration (OpenCSD's `PtmConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtmConfig {
    /// ETMCR: main control.
    pub reg_ctrl: u32,
    /// ETMIDR: ID (minor revision in bits 7:4).
    pub reg_idr: u32,
    /// ETMCCER: configuration code extension.
    pub reg_ccer: u32,
    /// ETMTRACEIDR: trace ID.
    pub reg_trc_id: u32,
    /// The traced core.
    pub arch: ArchProfile,
}

impl Default for PtmConfig {
    /// PTM 1.1 on an Armv7-A core, nothing enabled.
    fn default() -> Self {
        PtmConfig {
            reg_ctrl: 0,
            reg_idr: 0x4100_F310,
            reg_ccer: 0,
            reg_trc_id: 0,
            arch: ArchProfile::new(ArchVersion::V7, CoreProfile::CortexA),
        }
    }
}

impl PtmConfig {
    const CTRL_CYCLEACC: u32 = 1 << 12;
    const CTRL_RETSTACK_ENA: u32 = 1 << 29;
    const CCER_RETSTACK_IMPL: u32 = 1 << 23;
    const CCER_DMSB_WPT: u32 = 1 << 24;
    const CCER_TS_ENC_NAT: u32 = 1 << 28;
    const CCER_TS_64BIT: u32 = 1 << 29;

    /// From a snapshot source's registers; the core defaults to Armv7-A.
    pub fn from_source(cfg: &SourceConfig) -> PtmConfig {
        let d = PtmConfig::default();
        PtmConfig {
            reg_ctrl: cfg.reg_or("ETMCR", d.reg_ctrl as u64) as u32,
            reg_idr: cfg.reg_or("ETMIDR", d.reg_idr as u64) as u32,
            reg_ccer: cfg.reg_or("ETMCCER", d.reg_ccer as u64) as u32,
            reg_trc_id: cfg.reg_or("ETMTRACEIDR", 0) as u32,
            arch: cfg.core.as_ref().map(|c| c.profile).unwrap_or(d.arch),
        }
    }

    /// Trace ID of the source (ETMTRACEIDR bits 6:0).
    pub(crate) fn trace_id(&self) -> u8 {
        (self.reg_trc_id & 0x7f) as u8
    }
    /// Cycle-accurate tracing enabled (ETMCR bit 12).
    pub(crate) fn cycle_accurate(&self) -> bool {
        self.reg_ctrl & Self::CTRL_CYCLEACC != 0
    }
    /// Return stack enabled (ETMCR bit 29).
    pub(crate) fn ret_stack_enabled(&self) -> bool {
        self.reg_ctrl & Self::CTRL_RETSTACK_ENA != 0
    }
    /// Return stack implemented (ETMCCER bit 23).
    pub(crate) fn has_ret_stack(&self) -> bool {
        self.reg_ccer & Self::CCER_RETSTACK_IMPL != 0
    }
    /// DMB and DSB are waypoints.
    pub(crate) fn dmsb_waypoints(&self) -> bool {
        self.reg_ccer & Self::CCER_DMSB_WPT != 0
    }
    /// X in PTM 1.X.
    pub(crate) fn minor_rev(&self) -> u32 {
        (self.reg_idr >> 4) & 0xf
    }
    /// Timestamps are 64 bits (PTM 1.1 and later).
    pub(crate) fn ts_64bit(&self) -> bool {
        self.minor_rev() != 0 && self.reg_ccer & Self::CCER_TS_64BIT != 0
    }
    /// Timestamps are natural binary rather than Gray code. PTM 1.0 has
    /// binary timestamps only; PTM 1.1 says which in ETMCCER.
    pub(crate) fn ts_binary(&self) -> bool {
        self.minor_rev() == 0 || self.reg_ccer & Self::CCER_TS_ENC_NAT != 0
    }
    /// Context ID bytes traced: 0, 1, 2 or 4.
    pub(crate) fn ctxt_id_bytes(&self) -> usize {
        [0, 1, 2, 4][((self.reg_ctrl >> 14) & 3) as usize]
    }
}

/// The protocol's factory for the decoder registry: a packet processor,
/// and in full decode mode the decoder behind it.
pub(crate) fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(ProtocolFactory::new(&PTM, |info, cfg, ctx| {
        let config = PtmConfig::from_source(cfg);
        let dec = ctx.decoder_for_mode(|| PtmDecoder::new(config, ctx));
        Ok(Box::new(Pipeline::new(info.name, PtmProcessor::new(config, ctx), dec)))
    }))
}
