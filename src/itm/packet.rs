//! ITM packets as the packet processor produces them.

use std::fmt::Write as _;

use crate::printers::TracePacket;

/// Packet type (OpenCSD's `ocsd_itm_pkt_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum ItmPktType {
    /// Data before the first synchronisation packet.
    NotSync,
    /// A partial packet flushed at the end of the trace.
    IncompleteEot,
    /// No error (the error type of a good packet).
    NoErrType,
    /// Synchronisation: at least 47 zero bits then a one.
    Async,
    /// Overflow: the ITM's FIFO overflowed and packets were lost (header 0x70).
    Overflow,
    /// Software instrumentation: a write to a stimulus port.
    Swit,
    /// Hardware source (DWT): event counters, exceptions, PC samples,
    /// data trace.
    Dwt,
    /// Local timestamp: the time since the last one, in timestamp clock cycles, with its
    /// relation to the data (TC bits).
    TsLocal,
    /// Global timestamp bits 25:0.
    TsGlobal1,
    /// Global timestamp bits 63:26 (or 47:26).
    TsGlobal2,
    /// Extension: stimulus port page number or other source-specific information.
    Extension,
    /// A bad sequence of bytes inside a packet.
    BadSequence,
    /// Reserved header (also the type of a freshly started packet).
    #[default]
    Reserved,
}

impl ItmPktType {
    fn name_desc(self) -> (&'static str, &'static str) {
        match self {
            ItmPktType::NotSync => ("ITM_NOTSYNC", "ITM data stream not synchronised"),
            ItmPktType::IncompleteEot => ("ITM_INCOMPLETE_EOT", "Incomplete packet flushed at end of trace"),
            ItmPktType::Async => ("ITM_ASYNC", "Alignment synchronisation packet"),
            ItmPktType::Overflow => ("ITM_OVERFLOW", "ITM overflow packet"),
            ItmPktType::Swit => ("ITM_SWIT", "Software Stimulus write packet"),
            ItmPktType::Dwt => ("ITM_DWT", "DWT hardware stimulus write"),
            ItmPktType::TsLocal => ("ITM_TS_LOCAL", "Local Timestamp"),
            ItmPktType::TsGlobal1 => ("ITM_GTS_1", "Global Timestamp [25:0]"),
            ItmPktType::TsGlobal2 => ("ITM_GTS_2", "Global Timestamp [{63|42}:26]"),
            ItmPktType::Extension => ("ITM_EXTENSION", "Extension packet"),
            ItmPktType::BadSequence => ("ITM_BAD_SEQUENCE", "Invalid sequence in packet"),
            ItmPktType::Reserved => ("ITM_RESERVED", "Reserved Packet Header"),
            ItmPktType::NoErrType => ("ITM_UNKNOWN", "ERROR: unknown packet type"),
        }
    }
}

/// One ITM packet.
///
/// `src_id` depends on the type: the stimulus port (SWIT, bits 4:0), the
/// discriminator (DWT), the TC relation bits (local timestamp), the clock
/// wrap (bit 1) and change (bit 0) flags (GTS1), or for extension packets
/// the source bit (7, hardware) and the payload's top bit index N (4:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ItmPacket {
    /// Type of the current packet.
    pub pkt_type: ItmPktType,
    /// Source field of the header; meaning by type (see above).
    pub src_id: u8,
    /// Payload value (up to 32 bits).
    pub value: u32,
    /// Value size in bytes; 5 for a 38-bit GTS2 value.
    pub val_sz: u8,
    /// Bits 39:32 of a GTS2 value.
    pub val_ext: u8,
    /// For bad and incomplete packets: the type the packet started as.
    pub err_type: ItmPktType,
}

impl ItmPacket {
    pub(crate) fn init(&mut self) {
        *self = ItmPacket {
            err_type: ItmPktType::NoErrType,
            ..ItmPacket::default()
        };
    }

    /// Sets a value of `size` bytes (1 to 4; anything else counts as 4).
    pub(crate) fn set_value(&mut self, v: u32, size: u8) {
        self.val_sz = if (1..=4).contains(&size) { size } else { 4 };
        self.value = if self.val_sz == 4 {
            v
        } else {
            v & ((1u32 << (8 * self.val_sz)) - 1)
        };
    }

    pub(crate) fn set_ext_value(&mut self, v: u64) {
        self.value = v as u32;
        self.val_ext = (v >> 32) as u8;
        self.val_sz = 5;
    }

    /// The value with its extension bits.
    pub(crate) fn ext_value(&self) -> u64 {
        if self.val_sz < 5 {
            self.value as u64
        } else {
            self.value as u64 | (self.val_ext as u64) << 32
        }
    }

    pub(crate) fn set_err(&mut self, t: ItmPktType) {
        self.err_type = self.pkt_type;
        self.pkt_type = t;
    }

    fn write_val(&self, out: &mut String) {
        if self.val_sz <= 4 {
            let _ = write!(out, "0x{:0w$x}", self.value, w = self.val_sz as usize * 2);
        } else {
            let _ = write!(out, "0x{:02x}{:08x}", self.val_ext, self.value);
        }
    }

    fn write_dwt(&self, out: &mut String) {
        const EXCEPTION_FN: [&str; 4] = ["reserved", "entered", "exited", "returned to"];
        match self.src_id {
            0 => {
                let _ = write!(out, "[Event Counter: 0x{:02x}; Flags: ", self.value);
                for (bit, name) in [
                    (0x01, " CPI "),
                    (0x02, " EXC "),
                    (0x04, " Sleep "),
                    (0x08, " LSU "),
                    (0x10, " Fold "),
                    (0x20, " CYC "),
                ] {
                    out.push_str(if self.value & bit != 0 { name } else { " --- " });
                }
                out.push_str("] ");
            }
            1 => {
                let _ = write!(
                    out,
                    "[Exception Num:  0x{:04x}({}) ]",
                    self.value & 0x1ff,
                    EXCEPTION_FN[((self.value >> 12) & 3) as usize]
                );
            }
            2 => {
                out.push_str("[PC Sample: ");
                self.write_val(out);
                out.push_str("] ");
            }
            8..=23 => {
                let kind = (self.src_id >> 3) & 3;
                let write = self.src_id & 1 != 0;
                let comp = (self.src_id >> 1) & 3;
                let _ = write!(out, "[Data Trc: comp={comp}; ");
                match (kind, write) {
                    (1, false) => out.push_str("PC Value="),
                    (1, true) => out.push_str("Address="),
                    _ => out.push_str(if write { "Val write: " } else { "Val read: " }),
                }
                self.write_val(out);
                out.push_str(if kind == 1 { " ] " } else { "] " });
            }
            _ => out.push_str("[Reserved discriminator value] "),
        }
    }
}

impl TracePacket for ItmPacket {
    fn write_desc(&self, out: &mut String) {
        let (name, desc) = self.pkt_type.name_desc();
        out.push_str(name);
        out.push_str(": ");
        match self.pkt_type {
            ItmPktType::Swit => {
                let _ = write!(out, "{{src id: 0x{:02x}}}  ", self.src_id);
                self.write_val(out);
            }
            ItmPktType::Dwt => {
                let _ = write!(out, "{{desc: 0x{:02x}}} ", self.src_id);
                self.write_dwt(out);
            }
            ItmPktType::TsLocal => {
                const TC: [&str; 4] = [
                    "TS Sync",
                    "TS Delayed",
                    "TS Sync, Packet Delayed",
                    "TS Delayed, Packet Delayed",
                ];
                self.write_val(out);
                let _ = write!(out, " {{ {} }}", TC[(self.src_id & 3) as usize]);
            }
            ItmPktType::TsGlobal1 => {
                const BITS: [u8; 4] = [6, 13, 20, 25];
                let top = BITS[(self.val_sz.clamp(1, 4) - 1) as usize];
                let _ = write!(out, "{{ TS bits [{top}:0]");
                if self.src_id & 1 != 0 {
                    out.push_str(", Clk change");
                }
                if self.src_id & 2 != 0 {
                    out.push_str(", Clk wrap");
                }
                out.push_str("} ");
                self.write_val(out);
            }
            ItmPktType::TsGlobal2 => {
                out.push_str(if self.val_sz == 5 {
                    "{ TS bits [63:26]} "
                } else {
                    "{ TS bits [47:26]} "
                });
                self.write_val(out);
            }
            ItmPktType::Extension => {
                let bits = (self.src_id & 0x1f) as usize + 1;
                if bits == 3 && self.src_id & 0x80 == 0 {
                    let _ = write!(out, "{{stim port page}} 0x{:02x}", self.value);
                } else {
                    let _ = write!(
                        out,
                        "{{unknown extension type, {bits} bits }} 0x{:0w$x}",
                        self.value,
                        w = bits / 4 + 1
                    );
                }
            }
            ItmPktType::IncompleteEot | ItmPktType::BadSequence => {
                let _ = write!(out, "[Init type: {}] ", self.err_type.name_desc().0);
            }
            _ => {}
        }
        let _ = write!(out, "; '{desc}'");
    }
}
