//! RISC-V trace packets: a header nibble and what follows it, with Value
//! Sequences already filled in by their rules.

use std::fmt::Write as _;

use coresight_decode::printers::TracePacket;

/// Header nibbles.
pub mod header {
    pub const NOP: u8 = 0;
    pub const PC: u8 = 1;
    pub const BRANCH_TAKEN: u8 = 2;
    pub const BRANCH_NOT_TAKEN: u8 = 3;
    pub const TRACE_ENABLED: u8 = 4;
    pub const TRACE_DISABLED: u8 = 5;
    pub const PRIVILEGE: u8 = 6;
    pub const CHANGE_HART: u8 = 7;
    pub const LOAD_ADDR: u8 = 8;
    pub const STORE_ADDR: u8 = 9;
    pub const LOAD_DATA: u8 = 10;
    pub const STORE_DATA: u8 = 11;
    pub const TIMESTAMP: u8 = 12;
    pub const RESERVED: u8 = 13;
    pub const CUSTOM0: u8 = 14;
    pub const CUSTOM1: u8 = 15;

    /// Headers followed by a Value Sequence.
    pub fn has_value(h: u8) -> bool {
        matches!(
            h,
            PC | CHANGE_HART | LOAD_ADDR | STORE_ADDR | LOAD_DATA | STORE_DATA | TIMESTAMP
        )
    }
}

/// A value from a Value Sequence, after its fill rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SeqValue {
    /// The value (a full address for PC packets; XLEN bits for data).
    pub value: u64,
    /// Value nibbles the sequence carried (1 to 16).
    pub nibbles: u8,
    /// All bits are known: the sequence was full width, or the bits it
    /// left out came from a known earlier value. When false only the low
    /// `4 * nibbles` bits (of the shifted PC, for PC packets) are real.
    pub known: bool,
}

/// Privilege Level packet payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Privilege {
    /// The change was caused by an interrupt.
    pub interrupt: bool,
    /// PRV: 0 U, 1 S, 3 M (2 reserved).
    pub prv: u8,
    /// Interrupts enabled.
    pub ie: bool,
}

impl Privilege {
    pub fn from_nibble(n: u8) -> Privilege {
        Privilege {
            interrupt: n & 8 != 0,
            prv: (n >> 1) & 3,
            ie: n & 1 != 0,
        }
    }
    pub fn nibble(self) -> u8 {
        ((self.interrupt as u8) << 3) | ((self.prv & 3) << 1) | self.ie as u8
    }
}

/// Why the packet processor gave up on the stream until the next
/// synchronisation point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadReason {
    /// Header 13 (reserved) or 14/15 (custom, whose length is unknown).
    Header(u8),
    /// Trace Enabled with a version other than 0.
    Version(u8),
    /// The trace ended inside a sequence.
    Truncated,
}

/// One packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RvPacket {
    Pc(SeqValue),
    BranchTaken,
    BranchNotTaken,
    TraceEnabled {
        version: u8,
    },
    TraceDisabled,
    Privilege(Privilege),
    ChangeHart(u64),
    LoadAddr(SeqValue),
    StoreAddr(SeqValue),
    LoadData(SeqValue),
    StoreData(SeqValue),
    Timestamp(SeqValue),
    /// Not decodable: the processor resynchronises at the next sync point.
    Bad(BadReason),
}

fn write_value(out: &mut String, name: &str, v: &SeqValue) {
    if v.known {
        let _ = write!(out, "{name} : 0x{:x}; ({} nibbles)", v.value, v.nibbles);
    } else {
        let _ = write!(
            out,
            "{name} : 0x{:x}; ({} nibbles, upper bits unknown)",
            v.value, v.nibbles
        );
    }
}

impl TracePacket for RvPacket {
    fn write_desc(&self, out: &mut String) {
        match self {
            RvPacket::Pc(v) => write_value(out, "PC", v),
            RvPacket::BranchTaken => out.push_str("BRANCH_TAKEN"),
            RvPacket::BranchNotTaken => out.push_str("BRANCH_NOT_TAKEN"),
            RvPacket::TraceEnabled { version } => {
                let _ = write!(out, "TRACE_ENABLED : version {version}");
            }
            RvPacket::TraceDisabled => out.push_str("TRACE_DISABLED"),
            RvPacket::Privilege(p) => {
                let _ = write!(
                    out,
                    "PRIVILEGE : {}; {}{}",
                    ["U", "S", "H", "M"][p.prv as usize & 3],
                    if p.ie { "IE" } else { "ID" },
                    if p.interrupt { "; interrupt" } else { "" }
                );
            }
            RvPacket::ChangeHart(h) => {
                let _ = write!(out, "CHANGE_HART : 0x{h:x}");
            }
            RvPacket::LoadAddr(v) => write_value(out, "LOAD_ADDR", v),
            RvPacket::StoreAddr(v) => write_value(out, "STORE_ADDR", v),
            RvPacket::LoadData(v) => write_value(out, "LOAD_DATA", v),
            RvPacket::StoreData(v) => write_value(out, "STORE_DATA", v),
            RvPacket::Timestamp(v) => write_value(out, "TIMESTAMP", v),
            RvPacket::Bad(r) => {
                match r {
                    BadReason::Header(h) if *h == header::RESERVED => {
                        let _ = write!(out, "BAD_PACKET : reserved header 0x{h:x}");
                    }
                    BadReason::Header(h) => {
                        let _ = write!(out, "BAD_PACKET : custom header 0x{h:x} (length unknown)");
                    }
                    BadReason::Version(v) => {
                        let _ = write!(out, "BAD_PACKET : trace version {v} (expected 0)");
                    }
                    BadReason::Truncated => out.push_str("BAD_PACKET : trace ends inside a sequence"),
                }
                out.push_str("; resync at next sync point");
            }
        }
    }
}
