//! ETMv4 trace unit configuration, read from its ID and control registers.
//!
//! The packet processor and decoder only ever look at the interpreted
//! values held here; everything is worked out once, when the decoder is
//! created. ETE shares this structure (its major version is 5).
//!
//! What the decoder does with each register field it reads
//! ([`EtmV4Config::check_decode_support`] refuses the "no" rows, for
//! ETMv4 and ETE alike; ETE has INSTP0, COND, DA and DV as RES0):
//!
//! | field | meaning | decoded |
//! |---|---|---|
//! | TRCCONFIGR.INSTP0 [2:1] | loads/stores traced as P0 elements (atoms stand for them too) | no: refused when non-zero |
//! | TRCCONFIGR.BB [3] | branch broadcast: direct branches traced too | yes |
//! | TRCCONFIGR.CCI [4] | cycle counting | yes |
//! | TRCCONFIGR.CID [6], VMID [7], VMIDOPT [15] | context ID and VMID in context packets | yes |
//! | TRCCONFIGR.COND [10:8] | conditional non-branch instructions traced | no: refused when non-zero |
//! | TRCCONFIGR.TS [11] | timestamps | yes |
//! | TRCCONFIGR.RS [12] | return stack | yes |
//! | TRCCONFIGR.QE [14:13] | Q elements | yes |
//! | TRCCONFIGR.DA [16], DV [17] | data address / value trace (only with INSTP0) | no: refused |
//! | TRCIDR0.TRCDATA [4:3], TRCCOND [6], CONDTYPE [13:12], TRCEXDATA [17] | data / conditional trace implemented | only read to refuse the above |
//! | TRCIDR0.TRCCCI [7], QSUPP [16:15], TSSIZE [28:24], COMMOPT [29] | packet forms | yes |
//! | TRCIDR0.TSMARK [23], COMMTRANS [30] (ETE) | timestamp markers, transaction start as P0 | yes |
//! | TRCIDR1.TRCARCHMAJ/MIN, TRCDEVARCH (ETE) | version: which packets exist | yes |
//! | TRCIDR2.IASIZE, CIDSIZE, VMIDSIZE, CCSIZE, WFXMODE | field sizes, WFI/WFE as branches | yes |
//! | TRCIDR2.DASIZE, DVSIZE | data trace sizes | not needed (data trace refused) |
//! | TRCIDR8.MAXSPEC | speculation depth | yes (held depth capped, see `SPEC_DEPTH_LIMIT`) |
//! | TRCIDR9..13 (P0/P1/cond keys) | keys of data and conditional trace | not needed (both refused) |

use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
use crate::decoder::SourceConfig;
use crate::errcode::{ErrCode, Severity, TraceError};

/// TRCDEVARCH of an ETE when the snapshot does not give it (ETE v1.0).
pub(crate) const ETE_DEFAULT_DEVARCH: u32 = 0x4770_5A13;

/// Conditional (non-branch) instruction tracing mode (TRCCONFIGR.COND).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum CondTrace {
    /// Conditional instructions are not traced (COND = 0b000).
    #[default]
    Disabled,
    /// Only conditional load instructions are traced (0b001).
    Loads,
    /// Only conditional store instructions are traced (0b010).
    Stores,
    /// Conditional loads and stores are traced (0b011).
    LoadsStores,
    /// All conditional instructions are traced (0b111).
    All,
}

/// Q element support (TRCIDR0.QSUPP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum QSupport {
    /// No Q elements (TRCIDR0.QSUPP = 0b00).
    #[default]
    None,
    /// Q elements with instruction counts only (0b01).
    InstrCountOnly,
    /// Q elements without instruction counts only (0b10).
    NoInstrCountOnly,
    /// Q elements with and without instruction counts (0b11).
    Full,
}

/// Register values of one ETMv4 (or ETE) trace unit and what they mean.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtmV4Config {
    /// TRCIDR0: tracing options the trace unit implements (P0 load/store, data, branch
    /// broadcast, cycle counting, Q elements, timestamp size...).
    pub idr0: u32,
    /// TRCIDR1: architecture version (TRCARCHMAJ / TRCARCHMIN) and designer.
    pub idr1: u32,
    /// TRCIDR2: instruction address, context ID, VMID and cycle counter sizes.
    pub idr2: u32,
    /// TRCIDR8: maximum speculation depth (MAXSPEC).
    pub idr8: u32,
    /// TRCIDR9: number of P0 right-hand keys (NUMP0KEY).
    pub idr9: u32,
    /// TRCIDR10: number of P1 right-hand keys (NUMP1KEY).
    pub idr10: u32,
    /// TRCIDR11: number of special P1 right-hand keys (NUMP1SPC).
    pub idr11: u32,
    /// TRCIDR12: number of conditional instruction right-hand keys (NUMCONDKEY).
    pub idr12: u32,
    /// TRCIDR13: number of special conditional instruction right-hand keys (NUMCONDSPC).
    pub idr13: u32,
    /// TRCCONFIGR: the options enabled for this trace session (context ID, VMID, timestamps,
    /// cycle counting, branch broadcast, return stack...).
    pub configr: u32,
    /// TRCTRACEIDR: the trace ID the unit puts on its trace stream (bits 6:0).
    pub traceidr: u32,
    /// ETE's TRCDEVARCH: when present, the architecture version comes
    /// from here (TRCIDR1 of an ETE reads as version 15.15).
    pub devarch: Option<u32>,
    /// Architecture and profile of the traced core.
    pub arch: ArchProfile,
}

impl Default for EtmV4Config {
    /// OpenCSD's default register set (an ETMv4.0 on an Armv7-A core).
    fn default() -> Self {
        EtmV4Config {
            idr0: 0x2800_0EA1,
            idr1: 0x4100_F403,
            idr2: 0x0000_0488,
            idr8: 0,
            idr9: 0,
            idr10: 0,
            idr11: 0,
            idr12: 0,
            idr13: 0,
            configr: 0xC1,
            traceidr: 0,
            devarch: None,
            arch: ArchProfile::new(ArchVersion::V7, CoreProfile::CortexA),
        }
    }
}

impl EtmV4Config {
    /// Largest instruction address size: 32 or 64.
    #[cfg(test)]
    pub(crate) fn ia_size_max(&self) -> u32 {
        if self.idr2 & 0x1F == 0x8 { 64 } else { 32 }
    }
    /// Reads the registers from a source's resolved configuration.
    pub fn from_source(cfg: &SourceConfig) -> EtmV4Config {
        let d = EtmV4Config::default();
        let r = |name: &str, def: u32| cfg.reg(name).map(|v| v as u32).unwrap_or(def);
        let arch = cfg
            .core
            .as_ref()
            .map(|c| c.profile)
            .filter(|p| p.arch != ArchVersion::Unknown)
            .unwrap_or(ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA));
        EtmV4Config {
            idr0: r("TRCIDR0", d.idr0),
            idr1: r("TRCIDR1", d.idr1),
            idr2: r("TRCIDR2", d.idr2),
            idr8: r("TRCIDR8", 0),
            idr9: r("TRCIDR9", 0),
            idr10: r("TRCIDR10", 0),
            idr11: r("TRCIDR11", 0),
            idr12: r("TRCIDR12", 0),
            idr13: r("TRCIDR13", 0),
            configr: r("TRCCONFIGR", d.configr),
            traceidr: r("TRCTRACEIDR", 0),
            devarch: None,
            arch,
        }
    }

    /// Reads an ETE's registers: the ETMv4 set without TRCIDR9..13 (no
    /// keyed speculation), with the version taken from TRCDEVARCH.
    pub(crate) fn from_ete_source(cfg: &SourceConfig) -> EtmV4Config {
        let mut c = EtmV4Config::from_source(cfg);
        c.idr9 = 0;
        c.idr10 = 0;
        c.idr11 = 0;
        c.idr12 = 0;
        c.idr13 = 0;
        c.devarch = Some(cfg.reg("TRCDEVARCH").map(|v| v as u32).unwrap_or(ETE_DEFAULT_DEVARCH));
        c
    }

    // ---- TRCIDR0 ----

    /// Data tracing implemented (TRCIDR0.TRCDATA = 0b11).
    pub(crate) fn has_data_trace(&self) -> bool {
        self.idr0 & 0x18 == 0x18
    }
    /// Conditional instruction tracing implemented (TRCIDR0.TRCCOND).
    pub(crate) fn has_cond_trace(&self) -> bool {
        self.idr0 & 0x40 != 0
    }
    /// Cycle counting in instruction trace implemented (TRCIDR0.TRCCCI).
    pub(crate) fn has_cycle_count_i(&self) -> bool {
        self.idr0 & 0x80 != 0
    }
    /// Q element support (TRCIDR0.QSUPP).
    pub(crate) fn q_support(&self) -> QSupport {
        match (self.idr0 >> 15) & 0x3 {
            0 => QSupport::None,
            1 => QSupport::InstrCountOnly,
            2 => QSupport::NoInstrCountOnly,
            _ => QSupport::Full,
        }
    }
    /// Q elements implemented in any form.
    pub(crate) fn has_q_elem(&self) -> bool {
        self.q_support() != QSupport::None
    }
    /// ETE 1.1 and later with TRCIDR0.TSMARK: timestamp marker packets are
    /// traced, and timestamps count only after the first one.
    pub(crate) fn ete_has_ts_marker(&self) -> bool {
        self.full_version() >= 0x51 && self.idr0 & 0x80_0000 != 0
    }
    /// TRCIDR0.COMMOPT = 1: cycle count packets carry no commit section.
    pub(crate) fn commit_opt1(&self) -> bool {
        self.idr0 & 0x2000_0000 != 0 && self.has_cycle_count_i()
    }
    /// ETE: transaction start is a P0 element (TRCIDR0.COMMTRANS).
    pub(crate) fn comm_trans_p0(&self) -> bool {
        self.idr0 & 0x4000_0000 == 0
    }

    // ---- TRCIDR1 ----

    /// Architecture major version: TRCIDR1.TRCARCHMAJ, or TRCDEVARCH.ARCHVER for an ETE (4
    /// for ETMv4, 5 for ETE).
    pub(crate) fn major_version(&self) -> u8 {
        match self.devarch {
            Some(d) => ((d >> 12) & 0xF) as u8,
            None => ((self.idr1 >> 8) & 0xF) as u8,
        }
    }
    /// Architecture minor version: TRCIDR1.TRCARCHMIN, or TRCDEVARCH.REVISION for an ETE.
    pub(crate) fn minor_version(&self) -> u8 {
        match self.devarch {
            Some(d) => ((d >> 16) & 0xF) as u8,
            None => ((self.idr1 >> 4) & 0xF) as u8,
        }
    }
    /// `0xMm`: major and minor version (ETMv4.2 is 0x42, ETE 0x5m).
    pub(crate) fn full_version(&self) -> u8 {
        (self.major_version() << 4) | self.minor_version()
    }
    /// ETE (architecture major version 5) rather than ETMv4.
    pub(crate) fn is_ete(&self) -> bool {
        self.major_version() >= 5
    }

    // ---- TRCIDR2 ----

    /// Context ID size in bits (0 or 32).
    pub(crate) fn cid_size(&self) -> u32 {
        if (self.idr2 >> 5) & 0x1F == 0x4 { 32 } else { 0 }
    }
    /// VMID size in bits (0, 8, 16 or 32): 16 and 32 from ETMv4.1 on
    /// (any ETE).
    pub(crate) fn vmid_size(&self) -> u32 {
        let wide = self.full_version() > 0x40;
        match (self.idr2 >> 10) & 0x1F {
            1 => 8,
            2 if wide => 16,
            4 if wide => 32,
            _ => 0,
        }
    }
    /// Cycle counter size in bits.
    pub(crate) fn cc_size(&self) -> u32 {
        ((self.idr2 >> 25) & 0xF) + 12
    }
    /// WFI / WFE are traced as branches (TRCIDR2.WFXMODE, v4.3 and later).
    pub(crate) fn wfi_wfe_branch(&self) -> bool {
        self.idr2 & 0x8000_0000 != 0 && self.full_version() >= 0x43
    }

    // ---- TRCIDR8..13 ----

    /// Maximum speculation depth.
    pub(crate) fn max_spec_depth(&self) -> u32 {
        self.idr8
    }

    // ---- TRCTRACEIDR ----

    /// Trace ID of the trace stream (TRCTRACEIDR.TRACEID, 7 bits).
    pub(crate) fn trace_id(&self) -> u8 {
        (self.traceidr & 0x7F) as u8
    }

    // ---- TRCCONFIGR ----

    /// Load / store instructions are traced as P0 elements (TRCCONFIGR.INSTP0 non-zero).
    pub(crate) fn enabled_ls_p0(&self) -> bool {
        self.configr & 0x6 != 0
    }
    /// Data address tracing enabled (TRCCONFIGR.DA, where data trace is implemented).
    pub(crate) fn enabled_da_trace(&self) -> bool {
        self.has_data_trace() && self.enabled_ls_p0() && self.configr & (1 << 16) != 0
    }
    /// Data value tracing enabled (TRCCONFIGR.DV, where data trace is implemented).
    pub(crate) fn enabled_dv_trace(&self) -> bool {
        self.has_data_trace() && self.enabled_ls_p0() && self.configr & (1 << 17) != 0
    }
    /// Data address or data value tracing enabled.
    pub(crate) fn enabled_data_trace(&self) -> bool {
        self.enabled_da_trace() || self.enabled_dv_trace()
    }
    /// Cycle counting enabled.
    pub(crate) fn enabled_cci(&self) -> bool {
        self.configr & (1 << 4) != 0
    }
    /// Conditional instruction tracing mode (TRCCONFIGR.COND).
    pub(crate) fn enabled_cond_trace(&self) -> CondTrace {
        match (self.configr >> 8) & 0x7 {
            1 => CondTrace::Loads,
            2 => CondTrace::Stores,
            3 => CondTrace::LoadsStores,
            7 => CondTrace::All,
            _ => CondTrace::Disabled,
        }
    }
    /// Return stack enabled (TRCCONFIGR.RS).
    pub(crate) fn enabled_ret_stack(&self) -> bool {
        self.configr & (1 << 12) != 0
    }

    /// Refuses, with [`ErrCode::HwCfgUnsupp`] and a message naming the
    /// register field, a TRCCONFIGR the decoder would decode wrongly:
    /// load/store P0 tracing (INSTP0, with or without data trace DA/DV)
    /// and conditional non-branch tracing (COND). In such trace atoms and
    /// elements also stand for loads, stores and conditional instructions,
    /// so branch-only decoding would give wrong ranges without a word.
    /// Packets alone are listed whatever the configuration.
    pub fn check_decode_support(&self) -> Result<(), TraceError> {
        let unsupp = |msg: String| Err(TraceError::new(Severity::Error, ErrCode::HwCfgUnsupp).with_message(msg));
        let instp0 = (self.configr >> 1) & 0x3;
        let da_dv = (self.configr >> 16) & 0x3;
        if self.enabled_data_trace() {
            return unsupp(format!(
                "TRCCONFIGR = 0x{:08x}: data trace (DA/DV, bits [17:16] = 0b{da_dv:02b}, with INSTP0 bits [2:1] = 0b{instp0:02b}) is not decoded",
                self.configr
            ));
        }
        if instp0 != 0 {
            return unsupp(format!(
                "TRCCONFIGR = 0x{:08x}: INSTP0 (bits [2:1]) = 0b{instp0:02b} traces loads and stores as P0 elements, which are not decoded (atoms would be taken for branches); only INSTP0 = 0b00 is",
                self.configr
            ));
        }
        let cond = (self.configr >> 8) & 0x7;
        if cond != 0 {
            return unsupp(format!(
                "TRCCONFIGR = 0x{:08x}: COND (bits [10:8]) = 0b{cond:03b} traces conditional non-branch instructions, which are not decoded; only COND = 0b000 is",
                self.configr
            ));
        }
        Ok(())
    }

    // ---- core ----

    /// M-profile core: T32 only, v8-M exception and function-return rules.
    pub(crate) fn is_m_profile(&self) -> bool {
        self.arch.profile == CoreProfile::CortexM
    }
    /// Armv8 or later (any v8 / AArch64 variant).
    pub(crate) fn is_v8_arch(&self) -> bool {
        matches!(self.arch.arch, ArchVersion::V8 | ArchVersion::V8r3 | ArchVersion::Aa64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn juno_registers() {
        let c = EtmV4Config {
            idr0: 0x2800_0EA1,
            idr1: 0x4100_F402,
            idr2: 0x488,
            configr: 0xC1,
            traceidr: 0x14,
            ..Default::default()
        };
        assert_eq!(c.ia_size_max(), 64);
        assert_eq!(c.cid_size(), 32);
        assert_eq!(c.vmid_size(), 8);
        assert_eq!(c.full_version(), 0x40);
        assert!(!c.enabled_ret_stack());
        assert!(c.commit_opt1());
        assert!(!c.has_q_elem());
        assert_eq!(c.cc_size(), 12);
        assert_eq!(c.trace_id(), 0x14);
        assert!(!c.is_ete());
    }

    #[test]
    fn m_profile_registers() {
        let c = EtmV4Config {
            idr0: 0x2800_06E1,
            idr1: 0x4100_F454,
            idr2: 0x4,
            configr: 1,
            arch: ArchProfile::new(ArchVersion::V8r3, CoreProfile::CortexM),
            ..Default::default()
        };
        assert_eq!(c.ia_size_max(), 32);
        assert_eq!(c.cid_size(), 0);
        assert_eq!(c.vmid_size(), 0);
        assert_eq!(c.full_version(), 0x45);
        assert!(c.is_m_profile() && c.is_v8_arch());
        assert!(!c.wfi_wfe_branch());
    }
}
