//! ETMv3 (3.0 to 3.5): packet processor and decoder.
//!
//! Cortex-A5, A7, A8, older Cortex-R and ARM11 cores trace with ETMv3. The
//! packet processor ([`Etmv3Processor`]) turns the byte stream into
//! [`Etmv3Packet`]s; the decoder ([`Etmv3Decoder`]) follows the program one
//! instruction per atom (P-headers carry an E or N atom for every
//! instruction), handles branch addresses with exceptions and security
//! state, and produces generic trace elements. Data-trace packets are
//! listed but not decoded: the decoder stops on them, as OpenCSD's does.
//!
//! The configuration comes from the trace source's ETMCR, ETMCCER, ETMIDR
//! and ETMTRACEIDR registers ([`Etmv3Config`]) and the traced core's
//! architecture profile.

mod decoder;
mod packet;
mod processor;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use crate::ptm::ISyncReason;
pub use decoder::Etmv3Decoder;
pub use packet::{Etmv3Exception, Etmv3Packet, Etmv3PktType};
pub use processor::Etmv3Processor;

use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
use crate::decoder::{DecoderFactory, Pipeline, SourceConfig};
use crate::factory::{ProtocolFactory, ProtocolInfo};

/// ETMv3 (`ETM3` devices).
pub(crate) const ETMV3: ProtocolInfo = ProtocolInfo {
    name: "ETMV3",
    device_types: &["ETM3"],
    registers: crate::ptm::ETMV3_PTM_REGS,
    trace_id_reg: ("ETMTRACEIDR", 0),
    pe_trace: true,
};

/// What an ETMv3 source traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Etmv3TraceMode {
    /// Instruction trace only.
    InstrOnly,
    /// Instruction trace with data values.
    InstrDataValue,
    /// Instruction trace with data addresses.
    InstrDataAddr,
    /// Instruction trace with data values and addresses.
    InstrDataValueAddr,
    /// Data trace only (ETMCR data-only mode), values.
    DataOnlyValue,
    /// Data trace only, addresses.
    DataOnlyAddr,
    /// Data trace only, values and addresses.
    DataOnlyValueAddr,
}

/// An ETMv3 trace source's configuration (OpenCSD's `EtmV3Config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Etmv3Config {
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

impl Default for Etmv3Config {
    /// ETMv3.4 on an Armv7-A core, instruction trace only.
    fn default() -> Self {
        Etmv3Config {
            reg_ctrl: 0,
            reg_idr: 0x4100_F240,
            reg_ccer: 0,
            reg_trc_id: 0,
            arch: ArchProfile::new(ArchVersion::V7, CoreProfile::CortexA),
        }
    }
}

impl Etmv3Config {
    const CTRL_DATAVAL: u32 = 0x4;
    const CTRL_DATAADDR: u32 = 0x8;
    const CTRL_CYCLEACC: u32 = 0x1000;
    const CTRL_DATAONLY: u32 = 0x10_0000;
    const CTRL_TS_ENA: u32 = 1 << 28;
    const CTRL_VMID_ENA: u32 = 1 << 30;
    const CCER_HAS_TS: u32 = 1 << 22;
    const CCER_VIRTEXT: u32 = 1 << 26;
    const CCER_TS64BIT: u32 = 1 << 29;
    const IDR_ALTBRANCH: u32 = 0x10_0000;

    /// From a snapshot source's registers; the core defaults to Armv7-A.
    pub fn from_source(cfg: &SourceConfig) -> Etmv3Config {
        let d = Etmv3Config::default();
        Etmv3Config {
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
    /// X in ETMv3.X.
    pub(crate) fn minor_rev(&self) -> u32 {
        (self.reg_idr >> 4) & 0xf
    }
    /// Instructions are traced: data-only mode is off (ETMCR bit 20 clear).
    pub(crate) fn instr_trace(&self) -> bool {
        self.reg_ctrl & Self::CTRL_DATAONLY == 0
    }
    /// Data values are traced (ETMCR data access bit 2).
    pub(crate) fn data_value_trace(&self) -> bool {
        self.reg_ctrl & Self::CTRL_DATAVAL != 0
    }
    /// Data addresses are traced (ETMCR data access bit 3).
    pub(crate) fn data_addr_trace(&self) -> bool {
        self.reg_ctrl & Self::CTRL_DATAADDR != 0
    }
    /// Data values or addresses are traced.
    pub(crate) fn data_trace(&self) -> bool {
        self.reg_ctrl & (Self::CTRL_DATAADDR | Self::CTRL_DATAVAL) != 0
    }
    /// What the source traces, from ETMCR's data access and data-only bits.
    pub(crate) fn trace_mode(&self) -> Etmv3TraceMode {
        use Etmv3TraceMode::*;
        match (self.instr_trace(), self.data_value_trace(), self.data_addr_trace()) {
            (true, false, false) => InstrOnly,
            (true, true, false) => InstrDataValue,
            (true, false, true) => InstrDataAddr,
            (true, true, true) => InstrDataValueAddr,
            // Data only with neither data kind: counted as OpenCSD counts it.
            (false, false, false) => InstrDataValueAddr,
            (false, true, false) => DataOnlyValue,
            (false, false, true) => DataOnlyAddr,
            (false, true, true) => DataOnlyValueAddr,
        }
    }
    /// An Armv7-M core (M-profile exception numbers).
    pub(crate) fn is_v7m(&self) -> bool {
        self.arch.arch == ArchVersion::V7 && self.arch.profile == CoreProfile::CortexM
    }
    /// The alternative branch address encoding (ETMv3.4 and later).
    pub(crate) fn alt_branch(&self) -> bool {
        self.reg_idr & Self::IDR_ALTBRANCH != 0 && self.minor_rev() >= 4
    }
    /// Context ID bytes traced: 0, 1, 2 or 4.
    pub(crate) fn ctxt_id_bytes(&self) -> usize {
        [0, 1, 2, 4][((self.reg_ctrl >> 14) & 3) as usize]
    }
    /// Virtualization Extensions implemented: Hyp mode and VMID (ETMCCER bit 26).
    pub(crate) fn has_virt_ext(&self) -> bool {
        self.reg_ccer & Self::CCER_VIRTEXT != 0
    }
    /// VMID tracing enabled (ETMCR bit 30).
    pub fn vmid_trace(&self) -> bool {
        self.reg_ctrl & Self::CTRL_VMID_ENA != 0
    }
    /// Timestamping implemented (ETMCCER bit 22).
    pub fn has_ts(&self) -> bool {
        self.reg_ccer & Self::CCER_HAS_TS != 0
    }
    /// Timestamps enabled (ETMCR bit 28).
    pub fn ts_enabled(&self) -> bool {
        self.reg_ctrl & Self::CTRL_TS_ENA != 0
    }
    /// Timestamps are 64 bits rather than 48 (ETMCCER bit 29).
    pub(crate) fn ts_64bit(&self) -> bool {
        self.reg_ccer & Self::CCER_TS64BIT != 0
    }
}

/// The protocol's factory for the decoder registry: a packet processor,
/// and in full decode mode the decoder behind it.
pub(crate) fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(ProtocolFactory::new(&ETMV3, |info, cfg, ctx| {
        let config = Etmv3Config::from_source(cfg);
        let dec = ctx.decoder_for_mode(|| Etmv3Decoder::new(config, ctx));
        Ok(Box::new(Pipeline::new(
            info.name,
            Etmv3Processor::new(config, ctx),
            dec,
        )))
    }))
}
