//! PTM packets and their text.

use std::fmt::Write as _;

use super::shared::{self, ARMV7_EXCEPTION_NAMES, ISyncReason};
use crate::arch::Isa;
use crate::printers::TracePacket;

/// PTM packet types, with the pseudo-types for unsynchronised data and
/// errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PtmPktType {
    /// Bytes seen before the first A-sync.
    #[default]
    NotSync,
    /// A partial packet flushed at the end of the trace.
    IncompleteEot,
    /// No error (only meaningful as an error type).
    NoError,
    /// A packet with an invalid byte sequence.
    BadSequence,
    /// A reserved header.
    Reserved,
    /// Branch address: a taken waypoint's target, possibly with exception information (header
    /// bit 0 set).
    BranchAddress,
    /// Alignment synchronisation: five 0x00 bytes then 0x80.
    ASync,
    /// Instruction synchronisation: full address, ISA, security state and context ID (header
    /// 0x08).
    ISync,
    /// Trigger: the trigger event occurred (header 0x0C).
    Trigger,
    /// Waypoint update: the address the core reached without a taken branch (header 0x72).
    WaypointUpdate,
    /// Ignore: padding (header 0x66).
    Ignore,
    /// Context ID: new CONTEXTIDR value (header 0x6E).
    ContextId,
    /// VMID: new VMID value (header 0x3C).
    Vmid,
    /// Atom: E / N atoms for the waypoints passed (header 1xxxxxx0).
    Atom,
    /// Timestamp (header 0x42 or 0x46), optionally with a cycle count.
    Timestamp,
    /// Exception return: the core returned from an exception (header 0x76).
    ExceptionReturn,
}

impl PtmPktType {
    /// Name and description as OpenCSD prints them.
    pub(crate) fn name_desc(self) -> (&'static str, &'static str) {
        match self {
            PtmPktType::NotSync => ("NOTSYNC", "PTM Not Synchronised"),
            PtmPktType::IncompleteEot => ("INCOMPLETE_EOT", "Incomplete packet flushed at end of trace"),
            PtmPktType::NoError => ("NO_ERROR", "Error type not set"),
            PtmPktType::BadSequence => ("BAD_SEQUENCE", "Invalid sequence in packet"),
            PtmPktType::Reserved => ("RESERVED", "Reserved Packet Header"),
            PtmPktType::BranchAddress => ("BRANCH_ADDRESS", "Branch address packet"),
            PtmPktType::ASync => ("ASYNC", "Alignment Synchronisation Packet"),
            PtmPktType::ISync => ("ISYNC", "Instruction Synchronisation packet"),
            PtmPktType::Trigger => ("TRIGGER", "Trigger Event packet"),
            PtmPktType::WaypointUpdate => ("WP_UPDATE", "Waypoint update packet"),
            PtmPktType::Ignore => ("IGNORE", "Ignore packet"),
            PtmPktType::ContextId => ("CTXTID", "Context ID packet"),
            PtmPktType::Vmid => ("VMID", "VM ID packet"),
            PtmPktType::Atom => ("ATOM", "Atom packet"),
            PtmPktType::Timestamp => ("TIMESTAMP", "Timestamp packet"),
            PtmPktType::ExceptionReturn => ("ERET", "Exception return packet"),
        }
    }

    /// The packet type a header byte starts.
    pub(crate) fn from_header(hdr: u8) -> PtmPktType {
        match hdr {
            0x00 => PtmPktType::ASync,
            0x08 => PtmPktType::ISync,
            0x72 => PtmPktType::WaypointUpdate,
            0x0c => PtmPktType::Trigger,
            0x6e => PtmPktType::ContextId,
            0x3c => PtmPktType::Vmid,
            0x42 | 0x46 => PtmPktType::Timestamp,
            0x76 => PtmPktType::ExceptionReturn,
            0x66 => PtmPktType::Ignore,
            h if h & 0x01 == 0x01 => PtmPktType::BranchAddress,
            h if h & 0x81 == 0x80 => PtmPktType::Atom,
            _ => PtmPktType::Reserved,
        }
    }
}

/// One PTM packet, with the state that carries over between packets
/// (address, ISA, context, timestamp), as the packet processor keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtmPacket {
    /// Type of the current packet.
    pub pkt_type: PtmPktType,
    /// The type the packet had when it was found bad.
    pub err_type: PtmPktType,

    // ---- state carried between packets ----
    /// Address (bits above `addr_valid_bits` unknown).
    pub addr: u64,
    /// Number of low address bits known.
    pub addr_valid_bits: u8,
    /// Address bits this packet gave.
    pub addr_pkt_bits: u8,
    /// Instruction set of the current address.
    pub curr_isa: Isa,
    /// ISA before this packet (differs from `curr_isa` when it changed).
    pub prev_isa: Isa,
    /// Non-secure state.
    pub ns: bool,
    /// Hyp mode.
    pub hyp: bool,
    /// Alternative ISA (ThumbEE in T32 state).
    pub alt_isa: bool,
    /// Context ID (CONTEXTIDR) last traced.
    pub context_id: u32,
    /// VMID last traced.
    pub vmid: u8,
    /// Timestamp value (units of the global timestamp counter).
    pub timestamp: u64,

    // ---- this packet only ----
    /// NS / Hyp / AltISA given in this packet.
    pub ctx_updated: bool,
    /// This packet gave a context ID.
    pub ctxt_id_updated: bool,
    /// This packet gave a VMID.
    pub vmid_updated: bool,
    /// Number of low timestamp bits this packet gave.
    pub ts_update_bits: u8,
    /// Number of atoms in `atom_bits`.
    pub atom_num: u8,
    /// Atoms, oldest in bit 0; 1 is E.
    pub atom_bits: u32,
    /// Cycle count of this packet, when `cc_valid`.
    pub cycle_count: u32,
    /// This packet carried a cycle count.
    pub cc_valid: bool,
    /// A branch address packet carried exception information.
    pub exception_present: bool,
    /// Exception number of a branch address packet (when `exception_present`).
    pub exception_number: u16,
    /// Reason given by an I-sync packet.
    pub isync_reason: ISyncReason,
}

impl Default for PtmPacket {
    fn default() -> Self {
        PtmPacket {
            pkt_type: PtmPktType::NotSync,
            err_type: PtmPktType::NoError,
            addr: 0,
            addr_valid_bits: 0,
            addr_pkt_bits: 0,
            curr_isa: Isa::Unknown,
            prev_isa: Isa::Unknown,
            ns: false,
            hyp: false,
            alt_isa: false,
            context_id: 0,
            vmid: 0,
            timestamp: 0,
            ctx_updated: false,
            ctxt_id_updated: false,
            vmid_updated: false,
            ts_update_bits: 0,
            atom_num: 0,
            atom_bits: 0,
            cycle_count: 0,
            cc_valid: false,
            exception_present: false,
            exception_number: 0,
            isync_reason: ISyncReason::Periodic,
        }
    }
}

impl PtmPacket {
    /// Clears what is per packet, keeping what carries over.
    pub(crate) fn clear(&mut self) {
        self.err_type = PtmPktType::NoError;
        self.cycle_count = 0;
        self.cc_valid = false;
        self.ctx_updated = false;
        self.ctxt_id_updated = false;
        self.vmid_updated = false;
        self.ts_update_bits = 0;
        self.atom_bits = 0;
        self.exception_present = false;
        self.prev_isa = self.curr_isa;
    }

    /// Marks the packet bad: it keeps its original type as the error type.
    pub(crate) fn set_err_type(&mut self, t: PtmPktType) {
        self.err_type = self.pkt_type;
        self.pkt_type = t;
    }

    pub(crate) fn update_address(&mut self, value: u64, bits: u8) {
        self.addr = shared::merge_bits(self.addr, value, bits as u32);
        self.addr_pkt_bits = bits;
        self.addr_valid_bits = self.addr_valid_bits.max(bits);
    }

    pub(crate) fn update_isa(&mut self, isa: Isa) {
        self.prev_isa = self.curr_isa;
        self.curr_isa = isa;
    }
    pub(crate) fn update_ns(&mut self, ns: bool) {
        self.ns = ns;
        self.ctx_updated = true;
    }
    pub(crate) fn update_hyp(&mut self, hyp: bool) {
        self.hyp = hyp;
        self.ctx_updated = true;
    }
    pub(crate) fn update_alt_isa(&mut self, alt: bool) {
        self.alt_isa = alt;
        self.ctx_updated = true;
    }
    pub(crate) fn update_context_id(&mut self, id: u32) {
        self.context_id = id;
        self.ctxt_id_updated = true;
    }
    pub(crate) fn update_vmid(&mut self, vmid: u8) {
        self.vmid = vmid;
        self.vmid_updated = true;
    }
    pub(crate) fn set_cycle_count(&mut self, cc: u32) {
        self.cycle_count = cc;
        self.cc_valid = true;
    }
    pub(crate) fn update_timestamp(&mut self, value: u64, bits: u8) {
        self.timestamp = shared::merge_bits(self.timestamp, value, bits as u32);
        self.ts_update_bits = bits;
    }

    /// Atoms of a non cycle-accurate atom header (formats 1 to 5). A 0 bit
    /// in the header is an E atom.
    pub(crate) fn set_atoms_from_header(&mut self, hdr: u8) {
        let num = match hdr & 0xf0 {
            0x80 => {
                if hdr & 0x08 != 0 {
                    2
                } else {
                    1
                }
            }
            0x90 => 3,
            _ if hdr & 0xe0 == 0xa0 => 4,
            _ => 5,
        };
        self.atom_num = num;
        self.atom_bits = 0;
        for i in 0..num {
            self.atom_bits <<= 1;
            if hdr & (0x2 << i) == 0 {
                self.atom_bits |= 1;
            }
        }
    }

    /// The single atom of a cycle-accurate atom header.
    pub(crate) fn set_ca_atom_from_header(&mut self, hdr: u8) {
        self.atom_num = 1;
        self.atom_bits = if hdr & 0x2 != 0 { 0 } else { 1 };
    }

    /// The packet changed the instruction set.
    pub(crate) fn isa_changed(&self) -> bool {
        self.curr_isa != self.prev_isa
    }

    fn write_cycles(&self, out: &mut String) {
        let _ = write!(out, "Cycles={}; ", self.cycle_count);
    }

    fn write_atoms(&self, out: &mut String) {
        let mut bits = self.atom_bits;
        if self.cc_valid {
            out.push_str(if bits & 1 != 0 { "E" } else { "N" });
            out.push_str("; ");
            self.write_cycles(out);
        } else {
            for _ in 0..self.atom_num {
                out.push_str(if bits & 1 != 0 { "E" } else { "N" });
                bits >>= 1;
            }
            out.push_str("; ");
        }
    }

    fn write_branch(&self, out: &mut String) {
        out.push_str("Addr=");
        shared::write_partial_hex(
            out,
            32,
            self.addr_valid_bits as u32,
            self.addr,
            self.addr_pkt_bits as u32,
        );
        out.push_str("; ");
        if self.isa_changed() {
            out.push_str(shared::isa_text(self.curr_isa));
        }
        if self.ctx_updated {
            out.push_str(if self.ns { "NS; " } else { "S; " });
            if self.hyp {
                out.push_str("Hyp; ");
            }
        }
        if self.exception_present {
            out.push_str("Excep=");
            out.push_str(
                ARMV7_EXCEPTION_NAMES
                    .get(self.exception_number as usize)
                    .copied()
                    .unwrap_or("Unknown"),
            );
            let _ = write!(out, " [{:02x}]; ", self.exception_number);
        }
        if self.cc_valid {
            self.write_cycles(out);
        }
    }

    fn write_isync(&self, out: &mut String) {
        let _ = write!(out, "({}); ", self.isync_reason.name());
        let _ = write!(out, "Addr=0x{:08x}; ", self.addr as u32);
        out.push_str(if self.ns { "NS; " } else { "S; " });
        out.push_str(if self.hyp { "Hyp; " } else { " " });
        if self.ctxt_id_updated {
            let _ = write!(out, "CtxtID={:08x}; ", self.context_id);
        }
        out.push_str(shared::isa_text(self.curr_isa));
        if self.cc_valid {
            self.write_cycles(out);
        }
    }

    fn write_timestamp(&self, out: &mut String) {
        out.push_str("TS=");
        shared::write_partial_hex(out, 64, 64, self.timestamp, self.ts_update_bits as u32);
        let _ = write!(out, "({}); ", self.timestamp);
        if self.cc_valid {
            self.write_cycles(out);
        }
    }
}

impl TracePacket for PtmPacket {
    fn write_desc(&self, out: &mut String) {
        let (name, desc) = self.pkt_type.name_desc();
        out.push_str(name);
        out.push_str(" : ");
        out.push_str(desc);
        out.push_str("; ");
        match self.pkt_type {
            PtmPktType::BadSequence => {
                out.push('[');
                out.push_str(self.err_type.name_desc().0);
                out.push_str("]; ");
            }
            PtmPktType::Atom => self.write_atoms(out),
            PtmPktType::ContextId => {
                let _ = write!(out, "CtxtID=0x{:08x}; ", self.context_id);
            }
            PtmPktType::Vmid => {
                let _ = write!(out, "VMID=0x{:02x}; ", self.vmid);
            }
            PtmPktType::WaypointUpdate | PtmPktType::BranchAddress => self.write_branch(out),
            PtmPktType::ISync => self.write_isync(out),
            PtmPktType::Timestamp => self.write_timestamp(out),
            _ => {}
        }
    }
}
