//! Configuration of a RISC-V trace source: the `trace` register, the trace
//! buffer bounds, and the traced hart's XLEN and C extension.
//!
//! From a snapshot, the device `.ini` of type `RISCV_TRACE` gives the
//! registers by name (`trace`, `tbufstart`, `tbufend`, `tbufwrite`, and
//! optionally `traceid`), and the core it traces gives XLEN and C by its
//! name (`RV64GC`, `RV32IMAC`, `rv64imac_zicsr`...).

use coresight_decode::decoder::{RegSpec, SourceConfig};
use coresight_decode::error::{ErrCode, Error};

/// The `trace` register (CSR 0x728).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TraceReg(pub u32);

impl TraceReg {
    pub const SUPPORTED: u32 = 1 << 0;
    pub const DISCARD: u32 = 1 << 1;
    pub const STALL: u32 = 1 << 2;
    pub const EMIT_PC: u32 = 1 << 16;
    pub const EMIT_BRANCH: u32 = 1 << 17;
    pub const EMIT_PRIV: u32 = 1 << 18;
    pub const EMIT_LOAD_ADDR: u32 = 1 << 19;
    pub const EMIT_STORE_ADDR: u32 = 1 << 20;
    pub const EMIT_LOAD_DATA: u32 = 1 << 21;
    pub const EMIT_STORE_DATA: u32 = 1 << 22;
    pub const EMIT_TIMESTAMP: u32 = 1 << 23;
    pub const WRAPPED: u32 = 1 << 24;
    /// All eight emit bits.
    pub const EMIT_ALL: u32 = 0xff << 16;

    fn bit(self, b: u32) -> bool {
        self.0 & b != 0
    }
    pub fn supported(self) -> bool {
        self.bit(Self::SUPPORTED)
    }
    pub fn discard(self) -> bool {
        self.bit(Self::DISCARD)
    }
    pub fn stall(self) -> bool {
        self.bit(Self::STALL)
    }
    /// Bits 5:4.
    pub fn destination(self) -> u32 {
        (self.0 >> 4) & 3
    }
    /// Bits 9:8.
    pub fn fullaction(self) -> u32 {
        (self.0 >> 8) & 3
    }
    pub fn emit_pc(self) -> bool {
        self.bit(Self::EMIT_PC)
    }
    pub fn emit_branch(self) -> bool {
        self.bit(Self::EMIT_BRANCH)
    }
    pub fn emit_priv(self) -> bool {
        self.bit(Self::EMIT_PRIV)
    }
    pub fn emit_load_addr(self) -> bool {
        self.bit(Self::EMIT_LOAD_ADDR)
    }
    pub fn emit_store_addr(self) -> bool {
        self.bit(Self::EMIT_STORE_ADDR)
    }
    pub fn emit_load_data(self) -> bool {
        self.bit(Self::EMIT_LOAD_DATA)
    }
    pub fn emit_store_data(self) -> bool {
        self.bit(Self::EMIT_STORE_DATA)
    }
    pub fn emit_timestamp(self) -> bool {
        self.bit(Self::EMIT_TIMESTAMP)
    }
    pub fn wrapped(self) -> bool {
        self.bit(Self::WRAPPED)
    }
}

/// XLEN and the C extension, from a core name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreIsa {
    /// 32 or 64.
    pub xlen: u8,
    /// The compressed instruction set (C) is implemented.
    pub compressed: bool,
}

impl CoreIsa {
    /// Reads `RV32...`/`RV64...` names: `RV` (any case), the width, then
    /// base and extension letters starting with `I`, `E` or `G` (`G` is
    /// IMAFD); multi-letter extensions after `_` are ignored.
    pub fn from_core_name(name: &str) -> Option<CoreIsa> {
        let n = name.trim();
        let rest = n.get(..2).filter(|p| p.eq_ignore_ascii_case("rv")).map(|_| &n[2..])?;
        let (xlen, letters) = if let Some(r) = rest.strip_prefix("32") {
            (32, r)
        } else if let Some(r) = rest.strip_prefix("64") {
            (64, r)
        } else {
            return None;
        };
        let letters = letters.split('_').next().unwrap_or("");
        let first = letters.chars().next()?.to_ascii_uppercase();
        if !matches!(first, 'I' | 'E' | 'G') || !letters.chars().all(|c| c.is_ascii_alphabetic()) {
            return None;
        }
        let compressed = letters.chars().any(|c| c.eq_ignore_ascii_case(&'c'));
        Some(CoreIsa { xlen, compressed })
    }

    /// Mask of an XLEN-bit value.
    pub fn mask(self) -> u64 {
        if self.xlen == 64 { u64::MAX } else { 0xffff_ffff }
    }

    /// Low PC bits a PC packet leaves out: 1 with C, 2 without.
    pub fn pc_shift(self) -> u32 {
        if self.compressed { 1 } else { 2 }
    }
}

/// Everything a RISC-V trace source needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RiscvTraceConfig {
    pub trace: TraceReg,
    /// First byte of the trace buffer.
    pub tbufstart: u64,
    /// One past the last byte of the trace buffer.
    pub tbufend: u64,
    /// Where the next word would be written.
    pub tbufwrite: u64,
    pub isa: CoreIsa,
    /// Trace ID used for the source in a decode tree (`traceid` register,
    /// 0 when absent; only matters in a CoreSight-formatted buffer).
    pub trace_id: u8,
}

/// Registers a RISC-V trace device file gives.
pub const REGISTERS: &[RegSpec] = &[
    RegSpec::required("trace"),
    RegSpec::required("tbufstart"),
    RegSpec::required("tbufend"),
    RegSpec::required("tbufwrite"),
];

/// Smallest buffer: eight sync segments of at least three words each, so
/// the longest sequence (18 nibbles) always fits between sync points.
pub const MIN_BUFFER_WORDS: u64 = 24;

impl RiscvTraceConfig {
    /// A configuration checked for consistency (see [`Self::validate`]).
    pub fn new(trace: TraceReg, tbufstart: u64, tbufend: u64, tbufwrite: u64, isa: CoreIsa) -> Result<Self, Error> {
        let c = RiscvTraceConfig {
            trace,
            tbufstart,
            tbufend,
            tbufwrite,
            isa,
            trace_id: 0,
        };
        c.validate()?;
        Ok(c)
    }

    /// From a source's registers and its core's name.
    pub fn from_source(cfg: &SourceConfig) -> Result<Self, Error> {
        let reg = |n: &str| {
            cfg.reg(n).ok_or_else(|| {
                Error::code(
                    ErrCode::InvalidParamVal,
                    format!("{}: RISC-V trace register '{n}' missing", cfg.name),
                )
            })
        };
        let trace = reg("trace")?;
        if trace > u32::MAX as u64 {
            return Err(Error::code(
                ErrCode::InvalidParamVal,
                format!("{}: trace register 0x{trace:x} wider than 32 bits", cfg.name),
            ));
        }
        let core = cfg.core.as_ref().ok_or_else(|| {
            Error::code(
                ErrCode::InvalidParamVal,
                format!("{}: a RISC-V trace source must trace a core", cfg.name),
            )
        })?;
        let isa = CoreIsa::from_core_name(&core.core_type).ok_or_else(|| {
            Error::code(
                ErrCode::InvalidParamVal,
                format!(
                    "{}: core type '{}': expected a RISC-V name such as RV64GC or RV32IMAC",
                    cfg.name, core.core_type
                ),
            )
        })?;
        let mut c = RiscvTraceConfig::new(
            TraceReg(trace as u32),
            reg("tbufstart")?,
            reg("tbufend")?,
            reg("tbufwrite")?,
            isa,
        )
        .map_err(|e| Error::code(ErrCode::InvalidParamVal, format!("{}: {e}", cfg.name)))?;
        c.trace_id = (cfg.reg_or("traceid", 0) & 0x7f) as u8;
        Ok(c)
    }

    /// The buffer is word aligned, at least [`MIN_BUFFER_WORDS`] long, and
    /// `tbufwrite` is a word inside it (or its end).
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::code(ErrCode::InvalidParamVal, m));
        if !self.tbufstart.is_multiple_of(4) || !self.tbufend.is_multiple_of(4) || !self.tbufwrite.is_multiple_of(4) {
            return bad(format!(
                "tbufstart 0x{:x}, tbufend 0x{:x} and tbufwrite 0x{:x} must be word aligned",
                self.tbufstart, self.tbufend, self.tbufwrite
            ));
        }
        if self.tbufend <= self.tbufstart || (self.tbufend - self.tbufstart) / 4 < MIN_BUFFER_WORDS {
            return bad(format!(
                "trace buffer 0x{:x}..0x{:x}: expected at least {MIN_BUFFER_WORDS} words",
                self.tbufstart, self.tbufend
            ));
        }
        if (self.tbufend - self.tbufstart) / 4 > (1 << 40) {
            return bad(format!(
                "trace buffer 0x{:x}..0x{:x} is implausibly large",
                self.tbufstart, self.tbufend
            ));
        }
        if self.tbufwrite < self.tbufstart || self.tbufwrite > self.tbufend {
            return bad(format!(
                "tbufwrite 0x{:x} outside the buffer 0x{:x}..0x{:x}",
                self.tbufwrite, self.tbufstart, self.tbufend
            ));
        }
        Ok(())
    }

    /// Buffer length in 32-bit words.
    pub fn buffer_words(&self) -> u64 {
        // Saturating, so an unchecked configuration cannot panic here.
        (self.tbufend.saturating_sub(self.tbufstart) / 4).min(1 << 40)
    }

    /// Buffer length in nibbles.
    pub fn buffer_nibbles(&self) -> u64 {
        self.buffer_words() * 8
    }

    /// Distance between synchronisation points, in nibbles: an eighth of
    /// the buffer, rounded down to whole words. The eight points are at
    /// 0, 1, ... 7 times this from the buffer start.
    pub fn sync_spacing_nibbles(&self) -> u64 {
        ((self.buffer_words() / 8) * 8).max(8)
    }

    /// Whether buffer nibble `pos` is a synchronisation point.
    pub fn is_sync_point(&self, pos: u64) -> bool {
        let s = self.sync_spacing_nibbles();
        pos.is_multiple_of(s) && pos / s < 8
    }

    /// The first synchronisation point at or after nibble `pos`, or the
    /// buffer end when there is none.
    pub fn next_sync_point(&self, pos: u64) -> u64 {
        let s = self.sync_spacing_nibbles();
        let k = pos.div_ceil(s);
        if k < 8 { k * s } else { self.buffer_nibbles() }
    }

    /// Offset of `tbufwrite` from the buffer start, in bytes.
    pub fn write_offset(&self) -> u64 {
        self.tbufwrite
            .saturating_sub(self.tbufstart)
            .min(self.buffer_words() * 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_names() {
        assert_eq!(
            CoreIsa::from_core_name("RV64GC"),
            Some(CoreIsa {
                xlen: 64,
                compressed: true
            })
        );
        assert_eq!(
            CoreIsa::from_core_name("RV32IMAC"),
            Some(CoreIsa {
                xlen: 32,
                compressed: true
            })
        );
        assert_eq!(
            CoreIsa::from_core_name("rv32imaf"),
            Some(CoreIsa {
                xlen: 32,
                compressed: false
            })
        );
        assert_eq!(
            CoreIsa::from_core_name("rv64imac_zicsr_zifencei"),
            Some(CoreIsa {
                xlen: 64,
                compressed: true
            })
        );
        assert_eq!(
            CoreIsa::from_core_name("RV64G"),
            Some(CoreIsa {
                xlen: 64,
                compressed: false
            })
        );
        for bad in ["", "RV", "RV128GC", "RV64", "Cortex-A53", "RV64XC", "RV64G-C"] {
            assert_eq!(CoreIsa::from_core_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn sync_points() {
        let isa = CoreIsa {
            xlen: 64,
            compressed: true,
        };
        let c = RiscvTraceConfig::new(TraceReg(0), 0x1000, 0x1000 + 4 * 100, 0x1000, isa).unwrap();
        // 100 words: segments of 12 words (96 nibbles); the last is longer.
        assert_eq!(c.sync_spacing_nibbles(), 96);
        assert!(c.is_sync_point(0) && c.is_sync_point(96 * 7) && !c.is_sync_point(96 * 8) && !c.is_sync_point(5));
        assert_eq!(c.next_sync_point(1), 96);
        assert_eq!(c.next_sync_point(96 * 7 + 1), 800);
        assert!(RiscvTraceConfig::new(TraceReg(0), 0x1000, 0x1000 + 4 * 23, 0x1000, isa).is_err());
        assert!(RiscvTraceConfig::new(TraceReg(0), 0x1000, 0x1100, 0x1102, isa).is_err());
        assert!(RiscvTraceConfig::new(TraceReg(0), 0x1000, 0x1100, 0x1104, isa).is_err());
    }
}
