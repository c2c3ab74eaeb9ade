//! STM (STPv2) packets as the packet processor produces them.

use std::fmt::Write as _;

use crate::datapath::TrcIndex;
use crate::printers::TracePacket;

/// Packet type (OpenCSD's `ocsd_stm_pkt_type`), including the markers for
/// unsynchronised data and for bad packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum StmPktType {
    /// Data seen before the first ASYNC.
    #[default]
    NotSync,
    /// A partial packet flushed at the end of the trace.
    IncompleteEot,
    /// No error (the error type of a good packet).
    NoErrType,
    /// Alignment synchronisation: 21 or more 0xF nibbles then 0x0; the stream synchronises
    /// here.
    Async,
    /// Version: the STPv2 protocol version, which fixes the timestamp encoding.
    Version,
    /// Frequency: the timestamp frequency in Hz.
    Freq,
    /// Null: no data (padding, or a carrier for a timestamp).
    Null,
    /// Trigger: a trigger event, with an 8-bit payload.
    Trig,
    /// Global error: some master lost trace.
    Gerr,
    /// Master error: the current master lost trace.
    Merr,
    /// Set the current master (8 bits).
    M8,
    /// Set the low 8 bits of the current channel.
    C8,
    /// Set the current channel (16 bits).
    C16,
    /// Flag: a marker with no data.
    Flag,
    /// 4-bit data write to the current master and channel.
    D4,
    /// 8-bit data write.
    D8,
    /// 16-bit data write.
    D16,
    /// 32-bit data write.
    D32,
    /// 64-bit data write.
    D64,
    /// A bad sequence of nibbles inside a packet.
    BadSequence,
    /// A header CoreSight STM does not use.
    Reserved,
}

impl StmPktType {
    /// Name and description as OpenCSD prints them, without the marker and
    /// timestamp suffixes.
    fn name_desc(self) -> (&'static str, &'static str) {
        match self {
            StmPktType::Reserved => ("RESERVED", "Reserved Packet Header"),
            StmPktType::NotSync => ("NOTSYNC", "STM not synchronised"),
            StmPktType::IncompleteEot => ("INCOMPLETE_EOT", "Incomplete packet flushed at end of trace"),
            StmPktType::NoErrType => ("NO_ERR_TYPE", "Error type not set"),
            StmPktType::BadSequence => ("BAD_SEQUENCE", "Invalid sequence in packet"),
            StmPktType::Async => ("ASYNC", "Alignment synchronisation packet"),
            StmPktType::Version => ("VERSION", "Version packet"),
            StmPktType::Freq => ("FREQ", "Frequency packet"),
            StmPktType::Null => ("NULL", "Null packet"),
            StmPktType::Trig => ("TRIG", "Trigger packet"),
            StmPktType::Gerr => ("GERR", "Global Error"),
            StmPktType::Merr => ("MERR", "Master Error"),
            StmPktType::M8 => ("M8", "Set current master"),
            StmPktType::C8 => ("C8", "Set current channel"),
            StmPktType::C16 => ("C16", "Set current channel"),
            StmPktType::Flag => ("FLAG", "Flag packet"),
            StmPktType::D4 => ("D4", "4 bit data"),
            StmPktType::D8 => ("D8", "8 bit data"),
            StmPktType::D16 => ("D16", "16 bit data"),
            StmPktType::D32 => ("D32", "32 bit data"),
            StmPktType::D64 => ("D64", "64 bit data"),
        }
    }

    /// Whether the name takes `M` / `TS` suffixes for marker and timestamp.
    fn takes_suffixes(self) -> bool {
        matches!(
            self,
            StmPktType::Trig
                | StmPktType::Flag
                | StmPktType::D4
                | StmPktType::D8
                | StmPktType::D16
                | StmPktType::D32
                | StmPktType::D64
        )
    }
}

/// Timestamp encoding, set by the VERSION packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StmTsType {
    /// No VERSION packet seen yet.
    #[default]
    Unknown,
    /// Natural binary (STPv2 version 3).
    NatBinary,
    /// Gray code (STPv2 version 4).
    Gray,
}

/// One STM packet, with the state that persists between packets (current
/// master and channel, last timestamp, timestamp encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StmPacket {
    /// Type of the current packet.
    pub pkt_type: StmPktType,
    /// For bad and incomplete packets: the type the packet started as.
    pub err_type: StmPktType,
    /// Current master (set by M8; GERR sets it to 0).
    pub master: u8,
    /// Current channel (set by C8 and C16; MERR sets it to 0).
    pub channel: u16,
    /// Latest timestamp value (binary; gray decoding is done).
    pub timestamp: u64,
    /// Timestamp bits updated by this packet.
    pub ts_bits: u8,
    /// This packet carries a timestamp (possibly of 0 bits).
    pub has_ts: bool,
    /// Timestamp encoding given by the last VERSION packet.
    pub ts_type: StmTsType,
    /// This packet is a marker packet.
    pub marker: bool,
    /// Payload. As in OpenCSD, the 8, 16, 32 and 64 bit views share
    /// storage: a smaller write leaves the upper bits as they were.
    pub payload: u64,
    /// For an ASYNC whose first `F` nibble is the high nibble of a byte:
    /// that byte's index (the packet's listed index may be the next
    /// byte's, as in OpenCSD). Not listed; a stream index records it so a
    /// decoder can start there.
    pub high_nibble_start: Option<TrcIndex>,
}

impl StmPacket {
    /// The state at the start of decode (or after a reset).
    pub(crate) fn start_state() -> Self {
        StmPacket::default()
    }

    /// Clears the per-packet fields; type, master, channel, timestamp and
    /// payload persist.
    pub(crate) fn init_next(&mut self) {
        self.err_type = StmPktType::NoErrType;
        self.high_nibble_start = None;
        self.ts_bits = 0;
        self.marker = false;
        self.has_ts = false;
    }

    pub(crate) fn set_type(&mut self, t: StmPktType, marker: bool) {
        self.pkt_type = t;
        if marker {
            self.marker = true;
        }
    }

    /// Marks the packet as an error, keeping its type as the error type.
    pub(crate) fn set_err(&mut self, t: StmPktType) {
        self.err_type = self.pkt_type;
        self.pkt_type = t;
    }

    /// M8 (and GERR) set the master and clear the channel.
    pub(crate) fn set_master(&mut self, m: u8) {
        self.master = m;
        self.channel = 0;
    }

    pub(crate) fn set_channel(&mut self, c: u16, low8_only: bool) {
        self.channel = if low8_only {
            (self.channel & 0xff00) | (c & 0xff)
        } else {
            c
        };
    }

    /// VERSION selects the timestamp encoding and clears master and channel.
    pub(crate) fn on_version(&mut self, ts: StmTsType) {
        self.ts_type = ts;
        self.master = 0;
        self.channel = 0;
    }

    pub(crate) fn set_d8(&mut self, v: u8) {
        self.payload = (self.payload & !0xff) | v as u64;
    }
    pub(crate) fn set_d16(&mut self, v: u16) {
        self.payload = (self.payload & !0xffff) | v as u64;
    }
    pub(crate) fn set_d32(&mut self, v: u32) {
        self.payload = (self.payload & !0xffff_ffff) | v as u64;
    }
    pub(crate) fn set_d64(&mut self, v: u64) {
        self.payload = v;
    }

    /// The payload as 8-bit data (D8, TRIG).
    pub(crate) fn d8(&self) -> u8 {
        self.payload as u8
    }
    /// The payload as 16-bit data.
    pub(crate) fn d16(&self) -> u16 {
        self.payload as u16
    }
    /// The payload as 32-bit data (also the FREQ value).
    pub(crate) fn d32(&self) -> u32 {
        self.payload as u32
    }
    /// The payload as 64-bit data.
    pub(crate) fn d64(&self) -> u64 {
        self.payload
    }

    /// Updates the low `bits` bits of the timestamp.
    pub(crate) fn set_ts(&mut self, value: u64, bits: u8) {
        let mask = low_mask(bits);
        self.timestamp = (self.timestamp & !mask) | (value & mask);
        self.ts_bits = bits;
        self.has_ts = true;
    }

    fn write_name(&self, t: StmPktType, out: &mut String, desc: bool) {
        let (name, d) = t.name_desc();
        let suffix = t.takes_suffixes();
        if desc {
            out.push_str(d);
            if suffix && self.marker {
                out.push_str(" + marker");
            }
            if suffix && self.has_ts {
                out.push_str(" + timestamp");
            }
        } else {
            out.push_str(name);
            if suffix && self.marker {
                out.push('M');
            }
            if suffix && self.has_ts {
                out.push_str("TS");
            }
        }
    }
}

/// Mask of the low `bits` bits (all 64 for 64 or more).
pub(crate) fn low_mask(bits: u8) -> u64 {
    if bits >= 64 { !0 } else { (1u64 << bits) - 1 }
}

impl TracePacket for StmPacket {
    fn write_desc(&self, out: &mut String) {
        self.write_name(self.pkt_type, out, false);
        out.push(':');
        self.write_name(self.pkt_type, out, true);
        let _ = match self.pkt_type {
            StmPktType::IncompleteEot | StmPktType::BadSequence => {
                out.push('[');
                self.write_name(self.err_type, out, false);
                out.push(']');
                Ok(())
            }
            StmPktType::Version => write!(out, "; Ver={}", self.d8()),
            StmPktType::Freq => write!(out, "; Freq={}Hz", self.d32()),
            StmPktType::Trig => write!(out, "; TrigData=0x{:02x}", self.d8()),
            StmPktType::M8 => write!(out, "; Master=0x{:02x}", self.master),
            StmPktType::C8 | StmPktType::C16 => write!(out, "; Chan=0x{:04x}", self.channel),
            StmPktType::D4 => write!(out, "; Data=0x{:x}", self.d8() & 0xf),
            StmPktType::D8 => write!(out, "; Data=0x{:02x}", self.d8()),
            StmPktType::D16 => write!(out, "; Data=0x{:04x}", self.d16()),
            StmPktType::D32 => write!(out, "; Data=0x{:08x}", self.d32()),
            StmPktType::D64 => write!(out, "; Data=0x{:016x}", self.d64()),
            _ => Ok(()),
        };
        if self.has_ts {
            let _ = write!(out, "; TS=0x{:016X}", self.timestamp);
            if self.ts_bits > 0 {
                let _ = write!(out, " ~[0x{:X}]", self.timestamp & low_mask(self.ts_bits));
            }
        }
    }
}
