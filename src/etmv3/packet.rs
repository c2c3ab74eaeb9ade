//! ETMv3 packets and their text.

use std::fmt::Write as _;

use crate::arch::Isa;
use crate::printers::TracePacket;
use crate::ptm::shared::{self, ARMV7_EXCEPTION_NAMES, ISyncReason};

/// ETMv3 packet types, with the pseudo-types for unsynchronised data and
/// errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Etmv3PktType {
    /// No type yet (printed as a reserved header).
    #[default]
    NoError,
    /// Bytes seen before the first A-sync.
    NotSync,
    /// A partial packet at the end of the trace.
    IncompleteEot,
    /// Branch address: the target of a taken branch, possibly with exception information.
    BranchAddress,
    /// Alignment synchronisation: a run of 0x00 bytes ended by 0x80.
    ASync,
    /// Cycle count: the cycles since the last one (header 0x04).
    CycleCount,
    /// Instruction synchronisation: full address, ISA, security state and context ID (header
    /// 0x08).
    ISync,
    /// Instruction synchronisation with a cycle count (cycle-accurate mode, header 0x70).
    ISyncCycle,
    /// Trigger: the trigger event occurred (header 0x0C).
    Trigger,
    /// P-header: E / N atoms, one per instruction executed or failing its condition, with
    /// cycle counts in cycle-accurate mode.
    PHdr,
    /// Store failed: the last store-exclusive did not write (data trace, header 0x50).
    StoreFail,
    /// Out-of-order data value, matched to its placeholder by tag.
    OooData,
    /// Out-of-order data address placeholder.
    OooAddrPlc,
    /// Normal data: a data address and / or value for a load or store.
    NormData,
    /// Data suppressed: the ETM's FIFO was filling and data trace was dropped (header 0x62).
    DataSuppressed,
    /// Value not traced: a data access whose value was filtered out.
    ValNotTraced,
    /// Ignore: padding (header 0x66).
    Ignore,
    /// Context ID: new CONTEXTIDR value (header 0x6E).
    ContextId,
    /// VMID: new VMID value (header 0x3C).
    Vmid,
    /// Exception entry marker (M-profile data trace, header 0x7E).
    ExceptionEntry,
    /// Exception exit: return from an exception (header 0x76).
    ExceptionExit,
    /// Timestamp (header 0x42 or 0x46).
    Timestamp,
    /// A packet with an invalid byte sequence.
    BadSequence,
    /// A data packet while data trace is off.
    BadTraceMode,
    /// A reserved header.
    Reserved,
}

impl Etmv3PktType {
    /// Name and description as OpenCSD prints them.
    pub(crate) fn name_desc(self) -> (&'static str, &'static str) {
        use Etmv3PktType::*;
        match self {
            NotSync => ("NOTSYNC", "Trace Stream not synchronised"),
            IncompleteEot => ("INCOMPLETE_EOT.", "Incomplete packet at end of trace data."),
            BranchAddress => ("BRANCH_ADDRESS", "Branch address."),
            ASync => ("A_SYNC", "Alignment Synchronisation."),
            CycleCount => ("CYCLE_COUNT", "Cycle Count."),
            ISync => ("I_SYNC", "Instruction Packet synchronisation."),
            ISyncCycle => ("I_SYNC_CYCLE", "Instruction Packet synchronisation with cycle count."),
            Trigger => ("TRIGGER", "Trace Trigger Event."),
            PHdr => ("P_HDR", "Atom P-header."),
            StoreFail => ("STORE_FAIL", "Data Store Failed."),
            OooData => ("OOO_DATA", "Out of Order data value packet."),
            OooAddrPlc => ("OOO_ADDR_PLC", "Out of Order data address placeholder."),
            NormData => ("NORM_DATA", "Data trace packet."),
            DataSuppressed => ("DATA_SUPPRESSED", "Data trace suppressed."),
            ValNotTraced => ("VAL_NOT_TRACED", "Data trace value not traced."),
            Ignore => ("IGNORE", "Packet ignored."),
            ContextId => ("CONTEXT_ID", "Context ID change."),
            Vmid => ("VMID", "VMID change."),
            ExceptionEntry => ("EXCEPTION_ENTRY", "Exception entry data marker."),
            ExceptionExit => ("EXCEPTION_EXIT", "Exception return."),
            Timestamp => ("TIMESTAMP", "Timestamp Value."),
            BadSequence => ("BAD_SEQUENCE", "Invalid sequence for packet type."),
            BadTraceMode => ("BAD_TRACEMODE", "Invalid packet type for this trace mode."),
            NoError | Reserved => ("I_RESERVED", "Reserved Packet Header"),
        }
    }

    /// An error pseudo-type.
    pub fn is_bad(self) -> bool {
        matches!(
            self,
            Etmv3PktType::BadSequence | Etmv3PktType::BadTraceMode | Etmv3PktType::Reserved
        )
    }
}

/// Exception information of a branch address packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Etmv3Exception {
    /// The branch address packet carried exception information.
    pub present: bool,
    /// The exception cancels the last instruction traced.
    pub cancel: bool,
    /// M-profile numbering.
    pub cm_type: bool,
    /// M-profile: the resume field (the exception continued a multi-cycle instruction).
    pub cm_resume: u8,
    /// M-profile: interrupt number, when the exception is an interrupt.
    pub cm_irq_n: u16,
    /// Exception number (in M-profile numbering when `cm_type`).
    pub number: u16,
}

/// What a P-header byte gives (see [`Etmv3Packet::phdr_table`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PHdrAtoms {
    /// Atoms, oldest in bit 0; 1 is E.
    pub bits: u32,
    /// Cycle count (cycle-accurate trace).
    pub cycles: u32,
    /// Number of atoms.
    pub num: u8,
    /// Format (1 to 4); 0: not a valid P-header.
    pub fmt: u8,
}

/// One ETMv3 packet, with the state that carries over between packets,
/// as the packet processor keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Etmv3Packet {
    /// Type of the current packet.
    pub pkt_type: Etmv3PktType,
    /// The type the packet had when it was found bad.
    pub err_type: Etmv3PktType,

    // ---- state carried between packets ----
    /// Instruction address (bits above `addr_valid_bits` unknown).
    pub addr: u64,
    /// Number of low address bits known.
    pub addr_valid_bits: u8,
    /// Number of address bits this packet gave.
    pub addr_pkt_bits: u8,
    /// Instruction set of the current address.
    pub curr_isa: Isa,
    /// Instruction set before this packet (differs from `curr_isa` when it changed).
    pub prev_isa: Isa,
    /// Alternative ISA (ThumbEE in T32 state).
    pub alt_isa: bool,
    /// Non-secure state.
    pub ns: bool,
    /// Hyp mode.
    pub hyp: bool,
    /// Context ID (CONTEXTIDR) last traced.
    pub context_id: u32,
    /// VMID last traced.
    pub vmid: u8,
    /// Timestamp value (units of the global timestamp counter).
    pub timestamp: u64,
    /// Data address (printed by the data packets).
    pub data_addr: u64,
    /// Number of low data address bits known.
    pub data_addr_valid_bits: u8,
    /// Number of data address bits this packet gave.
    pub data_addr_pkt_bits: u8,
    /// Data access was big-endian.
    pub data_be: bool,
    /// Atoms of the last P-header, oldest in bit 0; 1 is E.
    pub atom_bits: u32,
    /// P-header format (1 to 4).
    pub p_hdr_fmt: u8,
    /// Reason given by the last I-sync packet.
    pub isync_reason: ISyncReason,
    /// Exception of the last branch address packet.
    pub exception: Etmv3Exception,

    // ---- this packet only ----
    /// This packet gave NS / Hyp / AltISA.
    pub ctx_updated: bool,
    /// This packet gave a context ID.
    pub ctxt_id_updated: bool,
    /// This packet gave a VMID.
    pub vmid_updated: bool,
    /// Number of atoms in `atom_bits` given by this packet.
    pub atom_num: u8,
    /// Cycle count of this packet.
    pub cycle_count: u32,
    /// Number of low timestamp bits this packet gave.
    pub ts_update_bits: u8,
    /// Out-of-order tag of a data packet (matches a value to its placeholder).
    pub data_ooo_tag: u8,
    /// Data value of this packet.
    pub data_value: u32,
    /// This packet gave a data address.
    pub data_update_addr: bool,
    /// This packet gave the data endianness.
    pub data_update_be: bool,
    /// This packet gave a data value.
    pub data_update_value: bool,
    /// This I-sync packet carries a cycle count.
    pub isync_has_cc: bool,
    /// This I-sync packet carries the address of a load / store in progress (LSiP).
    pub isync_has_lsip: bool,
    /// This I-sync packet carries no address (data-only trace).
    pub isync_no_addr: bool,
}

impl Default for Etmv3Packet {
    fn default() -> Self {
        Etmv3Packet {
            pkt_type: Etmv3PktType::NoError,
            err_type: Etmv3PktType::NoError,
            addr: 0,
            addr_valid_bits: 0,
            addr_pkt_bits: 0,
            curr_isa: Isa::Unknown,
            prev_isa: Isa::Unknown,
            alt_isa: false,
            ns: false,
            hyp: false,
            context_id: 0,
            vmid: 0,
            timestamp: 0,
            data_addr: 0,
            data_addr_valid_bits: 0,
            data_addr_pkt_bits: 0,
            data_be: false,
            atom_bits: 0,
            p_hdr_fmt: 0,
            isync_reason: ISyncReason::Periodic,
            exception: Etmv3Exception::default(),
            ctx_updated: false,
            ctxt_id_updated: false,
            vmid_updated: false,
            atom_num: 0,
            cycle_count: 0,
            ts_update_bits: 0,
            data_ooo_tag: 0,
            data_value: 0,
            data_update_addr: false,
            data_update_be: false,
            data_update_value: false,
            isync_has_cc: false,
            isync_has_lsip: false,
            isync_no_addr: false,
        }
    }
}

impl Etmv3Packet {
    /// Clears what is per packet, keeping what carries over.
    pub(crate) fn clear(&mut self) {
        self.addr_pkt_bits = 0;
        self.prev_isa = self.curr_isa;
        self.exception.present = false;
        self.atom_num = 0;
        self.cycle_count = 0;
        self.ctx_updated = false;
        self.ctxt_id_updated = false;
        self.vmid_updated = false;
        self.data_ooo_tag = 0;
        self.data_value = 0;
        self.data_update_addr = false;
        self.data_update_be = false;
        self.data_update_value = false;
        self.ts_update_bits = 0;
        self.isync_has_cc = false;
        self.isync_has_lsip = false;
        self.isync_no_addr = false;
    }

    /// Marks the packet bad: the current type is kept as the error type.
    pub(crate) fn set_err_type(&mut self, t: Etmv3PktType) {
        self.err_type = self.pkt_type;
        self.pkt_type = t;
    }

    pub(crate) fn update_address(&mut self, value: u64, bits: u8) {
        self.addr = shared::merge_bits(self.addr, value, bits as u32);
        self.addr_pkt_bits = bits;
        self.addr_valid_bits = self.addr_valid_bits.max(bits);
    }

    /// A data address update. As in OpenCSD, it lands in the instruction
    /// address, and only marks the data address as updated.
    pub(crate) fn update_data_address(&mut self, value: u32, bits: u8) {
        let mask = if bits >= 32 { u32::MAX } else { (1u32 << bits) - 1 };
        self.addr = (self.addr & !u64::from(mask)) | u64::from(value & mask);
        self.addr_pkt_bits = bits;
        self.addr_valid_bits = self.addr_valid_bits.max(bits);
        self.data_update_addr = true;
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
    pub(crate) fn update_timestamp(&mut self, value: u64, bits: u8) {
        self.timestamp = shared::merge_bits(self.timestamp, value, bits as u32);
        self.ts_update_bits = bits;
    }
    pub(crate) fn set_data_value(&mut self, v: u32) {
        self.data_value = v;
        self.data_update_value = true;
    }
    pub(crate) fn update_data_endian(&mut self, be: bool) {
        self.data_be = be;
        self.data_update_be = true;
    }

    /// The atoms a P-header byte gives, for each byte (`fmt` 0: not a
    /// valid P-header for this setting), so a run of P-headers is decoded
    /// without a packet being built for each.
    pub(crate) fn phdr_table(cycle_accurate: bool) -> Box<[PHdrAtoms; 256]> {
        let mut table = Box::new([PHdrAtoms::default(); 256]);
        for (b, t) in table.iter_mut().enumerate() {
            let b = b as u8;
            let mut p = Etmv3Packet::default();
            if b & 0x81 == 0x80 && p.update_atoms_from_phdr(b, cycle_accurate) {
                *t = PHdrAtoms {
                    bits: p.atom_bits,
                    cycles: p.cycle_count,
                    num: p.atom_num,
                    fmt: p.p_hdr_fmt,
                };
            }
        }
        table
    }

    /// Atoms and cycle count of a P-header; false for an invalid encoding.
    pub(crate) fn update_atoms_from_phdr(&mut self, hdr: u8, cycle_accurate: bool) -> bool {
        if !cycle_accurate {
            if hdr & 0x3 == 0 {
                // Format 1: E atoms then an optional N.
                let e = (hdr >> 2) & 0xf;
                let n = (hdr >> 6) & 1;
                self.atom_num = e + n;
                self.atom_bits = (1u32 << e) - 1;
                self.p_hdr_fmt = 1;
            } else if hdr & 0x3 == 0x2 {
                // Format 2: two atoms.
                self.atom_num = 2;
                self.p_hdr_fmt = 2;
                self.atom_bits = u32::from(hdr & 0x8 == 0) | (u32::from(hdr & 0x4 == 0) << 1);
            } else {
                return false;
            }
            return true;
        }
        match hdr & 0xa3 {
            0x80 => {
                // Format 1: each atom takes a cycle.
                self.p_hdr_fmt = 1;
                let e = (hdr >> 2) & 0x7;
                let n = (hdr >> 6) & 1;
                self.atom_num = e + n;
                if self.atom_num == 0 {
                    return false;
                }
                self.atom_bits = (1u32 << e) - 1;
                self.cycle_count = u32::from(e + n);
            }
            0x82 => {
                if hdr & 0x10 != 0 {
                    // Format 4: one atom, no cycle.
                    self.p_hdr_fmt = 4;
                    self.atom_num = 1;
                    self.cycle_count = 0;
                    self.atom_bits = u32::from(hdr & 0x4 == 0);
                } else {
                    // Format 2: a wait, then two atoms.
                    self.p_hdr_fmt = 2;
                    self.atom_num = 2;
                    self.cycle_count = 1;
                    self.atom_bits = u32::from(hdr & 0x8 == 0) | (u32::from(hdr & 0x4 == 0) << 1);
                }
            }
            0xa0 => {
                // Format 3: waits, then an optional E atom.
                self.p_hdr_fmt = 3;
                self.cycle_count = u32::from((hdr >> 2) & 7) + 1;
                let e = (hdr >> 6) & 1;
                self.atom_num = e;
                self.atom_bits = u32::from(e);
            }
            _ => return false,
        }
        true
    }

    /// The packet changed the instruction set.
    pub(crate) fn isa_changed(&self) -> bool {
        self.curr_isa != self.prev_isa
    }

    /// Any of NS / Hyp / AltISA, context ID or VMID given in this packet.
    pub(crate) fn is_ctxt_updated(&self) -> bool {
        self.ctx_updated || self.ctxt_id_updated || self.vmid_updated
    }

    /// The branch address packet's exception cancels the last instruction traced.
    pub(crate) fn is_excep_cancel(&self) -> bool {
        self.exception.present && self.exception.cancel
    }

    fn write_exception(&self, out: &mut String) {
        const M_NAMES: [&str; 24] = [
            "No Exception",
            "IRQ1",
            "IRQ2",
            "IRQ3",
            "IRQ4",
            "IRQ5",
            "IRQ6",
            "IRQ7",
            "IRQ0",
            "usage Fault",
            "NMI",
            "SVC",
            "DebugMonitor",
            "Mem Manage",
            "PendSV",
            "SysTick",
            "Reserved",
            "PE Reset",
            "Reserved",
            "HardFault",
            "Reserved",
            "BusFault",
            "Reserved",
            "Reserved",
        ];
        let ex = &self.exception;
        out.push_str("Exception=");
        if ex.cm_type {
            match M_NAMES.get(ex.number as usize) {
                Some(n) => out.push_str(n),
                None => {
                    let _ = write!(out, "IRQ{}", i32::from(ex.number) - 0x10);
                }
            }
            if ex.cm_resume != 0 {
                let _ = write!(out, "; Resume={}", ex.cm_resume);
            }
        } else {
            out.push_str(
                ARMV7_EXCEPTION_NAMES
                    .get(ex.number as usize)
                    .copied()
                    .unwrap_or("Reserved"),
            );
            out.push_str("; ");
        }
        if ex.cancel {
            out.push_str("; Cancel prev instr");
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
        if self.exception.present {
            self.write_exception(out);
        }
    }

    fn write_atoms(&self, out: &mut String) {
        let mut bits = self.atom_bits;
        let next = |b: &mut u32| {
            let e = *b & 1 != 0;
            *b >>= 1;
            e
        };
        if self.cycle_count == 0 {
            for _ in 0..self.atom_num {
                out.push_str(if next(&mut bits) { "E" } else { "N" });
            }
            return;
        }
        match self.p_hdr_fmt {
            1 => {
                for _ in 0..self.atom_num {
                    out.push_str(if next(&mut bits) { "WE" } else { "WN" });
                }
            }
            2 => {
                out.push('W');
                for _ in 0..self.atom_num {
                    out.push_str(if next(&mut bits) { "E" } else { "N" });
                }
            }
            3 => {
                for _ in 0..self.cycle_count {
                    out.push('W');
                }
                if self.atom_num > 0 {
                    out.push_str(if bits & 1 != 0 { "E" } else { "N" });
                }
            }
            _ => {}
        }
        let _ = write!(out, "; Cycles={}", self.cycle_count);
    }

    fn write_isync(&self, out: &mut String) {
        let _ = write!(out, "({}); ", self.isync_reason.name());
        if !self.isync_no_addr {
            out.push_str(if self.isync_has_lsip {
                "Data Instr Addr=0x"
            } else {
                "Addr=0x"
            });
            let _ = write!(out, "{:08x}; ", self.addr);
        }
        out.push_str(if self.ns { "NS; " } else { "S; " });
        out.push_str(if self.hyp { "Hyp; " } else { " " });
        if self.ctxt_id_updated {
            let _ = write!(out, "CtxtID={:x}; ", self.context_id);
        }
        if self.isync_no_addr {
            return;
        }
        out.push_str(shared::isa_text(self.curr_isa));
        if self.isync_has_cc {
            let _ = write!(out, "Cycles={}; ", self.cycle_count);
        }
        if self.isync_has_lsip {
            out.push_str("Curr Instr Addr=");
            self.write_data_addr(out);
            out.push(';');
        }
    }

    fn write_data_addr(&self, out: &mut String) {
        shared::write_partial_hex(
            out,
            32,
            self.data_addr_valid_bits as u32,
            self.data_addr,
            self.data_addr_pkt_bits as u32,
        );
    }
}

impl TracePacket for Etmv3Packet {
    fn write_desc(&self, out: &mut String) {
        use Etmv3PktType::*;
        let (name, desc) = self.pkt_type.name_desc();
        out.push_str(name);
        out.push_str(" : ");
        out.push_str(desc);
        match self.pkt_type {
            BadSequence | BadTraceMode => {
                out.push('[');
                out.push_str(self.err_type.name_desc().0);
                out.push(']');
            }
            BranchAddress => {
                out.push_str("; ");
                self.write_branch(out);
            }
            ISync | ISyncCycle => {
                out.push_str("; ");
                self.write_isync(out);
            }
            PHdr => {
                out.push_str("; ");
                self.write_atoms(out);
            }
            CycleCount => {
                let _ = write!(out, "; Cycles={}", self.cycle_count);
            }
            ContextId => {
                let _ = write!(out, "; CtxtID=0x{:x}", self.context_id);
            }
            Vmid => {
                let _ = write!(out, "; VMID=0x{:x}", self.vmid);
            }
            Timestamp => {
                let _ = write!(out, "; TS=0x{:x} ({}) ", self.timestamp, self.timestamp);
            }
            OooData => {
                let _ = write!(out, "; Val=0x{:x}; OO_Tag=0x{:x}", self.data_value, self.data_ooo_tag);
            }
            ValNotTraced if self.data_update_addr => {
                out.push_str("; Addr=");
                self.write_data_addr(out);
            }
            OooAddrPlc => {
                if self.data_update_addr {
                    out.push_str("; Addr=");
                    self.write_data_addr(out);
                }
                let _ = write!(out, "; OO_Tag=0x{:x}", self.data_ooo_tag);
            }
            NormData => {
                if self.data_update_addr {
                    out.push_str("; Addr=");
                    self.write_data_addr(out);
                }
                if self.data_update_value {
                    let _ = write!(out, "; Val=0x{:x}", self.data_value);
                }
            }
            _ => {}
        }
    }
}
