//! ETMv4 / ETE instruction trace packets and their printed form.
//!
//! One [`EtmV4Packet`] is reused for the whole stream: besides the fields
//! of the current packet it carries the state that packets build on
//! (address and its history, context, timestamp, trace info), as the
//! protocol compresses each packet against what came before.

use std::fmt::Write as _;

use crate::printers::TracePacket;
use crate::text::{Line, Pad, TextBuf, TextOut};

/// Packet type (OpenCSD's `ocsd_etmv4_i_pkt_type`), including the
/// pseudo-types used for unsynchronised data and errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum PktType {
    /// Data before the first alignment synchronisation.
    NotSync,
    /// Partial packet at the end of the trace.
    IncompleteEot,
    /// No error: the packet is what its type says.
    #[default]
    NoErrType,
    /// Packet bytes in a sequence the protocol does not allow.
    BadSequence,
    /// Packet not valid in the configured trace mode.
    BadTraceMode,
    /// Header reserved in the architecture.
    Reserved,
    /// Header reserved in the current configuration.
    ReservedCfg,
    /// Extension header (0x00): async, discard, overflow and the ETE extensions follow.
    Extension,
    /// Trace info: trace unit state at a synchronisation point (INFO, cycle count threshold,
    /// speculation depth, P0 key).
    TraceInfo,
    /// Timestamp, optionally with the cycle count since the last one.
    Timestamp,
    /// Trace on: trace was off and restarts (a discontinuity).
    TraceOn,
    /// v8-M function return.
    FuncRet,
    /// Exception: exception type and whether an address follows.
    Except,
    /// Exception return (header 0x07; reserved in ETE): a P0 element only on Armv7-M.
    ExceptRtn,
    /// ETE software instrumentation.
    Ite,
    /// ETE transaction start / commit.
    TransSt,
    /// ETE: the current transaction commits.
    TransCommit,
    /// Cycle count format 1: count, with an optional commit section.
    CcntF1,
    /// Cycle count format 2: short count, with a commit.
    CcntF2,
    /// Cycle count format 3: 2-bit count since the last one.
    CcntF3,
    /// Numbered data synchronisation marker (data trace).
    NumDsMkr,
    /// Unnumbered data synchronisation marker (data trace).
    UnnumDsMkr,
    /// Commit: that many speculative P0 elements are committed.
    Commit,
    /// Cancel format 1: cancels that many of the newest P0 elements.
    CancelF1,
    /// Cancel format 1 that also marks the newest remaining atom as mispredicted.
    CancelF1Mispred,
    /// Mispredict: the newest atom went the other way.
    Mispredict,
    /// Cancel format 2: cancels the newest P0 element and adds atoms in its place.
    CancelF2,
    /// Cancel format 3: cancels 2 to 5 elements, optionally adding an E atom.
    CancelF3,
    /// Conditional instruction format 2 (conditional tracing).
    CondIF2,
    /// Conditional flush: all conditional results pending are dropped.
    CondFlush,
    /// Conditional result format 4.
    CondResF4,
    /// Conditional result format 2.
    CondResF2,
    /// Conditional result format 3.
    CondResF3,
    /// Conditional result format 1.
    CondResF1,
    /// Conditional instruction format 1.
    CondIF1,
    /// Conditional instruction format 3.
    CondIF3,
    /// Ignore: padding, with no meaning.
    Ignore,
    /// Event: one or more trace events (TRCEVENTCTL) occurred.
    Event,
    /// Context: exception level, security state, AArch64, context ID and VMID.
    Ctxt,
    /// Long 32-bit address in the A32 instruction set (IS0) with a context.
    AddrCtxtL32IS0,
    /// Long 32-bit address in the T32 instruction set (IS1) with a context.
    AddrCtxtL32IS1,
    /// Long 64-bit address (IS0: A64 / A32) with a context.
    AddrCtxtL64IS0,
    /// Long 64-bit address (IS1: T32) with a context.
    AddrCtxtL64IS1,
    /// ETE / ETMv4.6 timestamp marker.
    TsMarker,
    /// Exact match: the address is one of the three most recent addresses.
    AddrMatch,
    /// Short address (IS0), replacing the low 9 or 17 bits of the last one.
    AddrSIS0,
    /// Short address (IS1), replacing the low 8 or 16 bits of the last one.
    AddrSIS1,
    /// Long 32-bit address (IS0).
    AddrL32IS0,
    /// Long 32-bit address (IS1).
    AddrL32IS1,
    /// Long 64-bit address (IS0).
    AddrL64IS0,
    /// Long 64-bit address (IS1).
    AddrL64IS1,
    /// Q element: a count of instructions executed without the detail of their P0 elements.
    Q,
    /// ETE source address packets.
    SrcAddrMatch,
    /// ETE short source address (IS0).
    SrcAddrSIS0,
    /// ETE short source address (IS1).
    SrcAddrSIS1,
    /// ETE long 32-bit source address (IS0).
    SrcAddrL32IS0,
    /// ETE long 32-bit source address (IS1).
    SrcAddrL32IS1,
    /// ETE long 64-bit source address (IS0).
    SrcAddrL64IS0,
    /// ETE long 64-bit source address (IS1).
    SrcAddrL64IS1,
    /// Atom format 6: a run of E atoms followed by one E or N atom.
    AtomF6,
    /// Atom format 5: five atoms in one of four fixed patterns.
    AtomF5,
    /// Atom format 2: two atoms.
    AtomF2,
    /// Atom format 4: four atoms in one of four fixed patterns.
    AtomF4,
    /// Atom format 1: one atom (E or N).
    AtomF1,
    /// Atom format 3: three atoms.
    AtomF3,
    /// Alignment synchronisation: the byte stream's packet boundary (eleven 0x00 then 0x80).
    Async,
    /// Discard: all uncommitted P0 elements are discarded.
    Discard,
    /// Overflow: the trace unit's buffer overflowed and trace was lost.
    Overflow,
    /// ETE: exception packet meaning PE reset.
    PeReset,
    /// ETE: exception packet meaning transaction failure.
    TransFail,
}

impl PktType {
    /// Name and description as OpenCSD prints them.
    pub(crate) const fn name_desc(self) -> (&'static str, &'static str) {
        use PktType::*;
        match self {
            NotSync => ("I_NOT_SYNC", "I Stream not synchronised"),
            IncompleteEot => ("I_INCOMPLETE_EOT", "Incomplete packet at end of trace."),
            NoErrType => ("I_NO_ERR_TYPE", "No Error Type."),
            BadSequence => ("I_BAD_SEQUENCE", "Invalid Sequence in packet."),
            BadTraceMode => ("I_BAD_TRACEMODE", "Invalid Packet for trace mode."),
            Reserved => ("I_RESERVED", "Reserved Packet Header"),
            ReservedCfg => ("I_RESERVED_CFG", "Reserved header for current configuration."),
            Extension => ("I_EXTENSION", "Extension packet header."),
            TraceInfo => ("I_TRACE_INFO", "Trace Info."),
            Timestamp => ("I_TIMESTAMP", "Timestamp."),
            TraceOn => ("I_TRACE_ON", "Trace On."),
            FuncRet => ("I_FUNC_RET", "V8M - function return."),
            Except => ("I_EXCEPT", "Exception."),
            ExceptRtn => ("I_EXCEPT_RTN", "Exception Return."),
            Ite => ("I_ITE", "Instrumentation"),
            TransSt => ("I_TRANS_ST", "Transaction Start."),
            TransCommit => ("I_TRANS_COMMIT", "Transaction Commit."),
            CcntF1 => ("I_CCNT_F1", "Cycle Count format 1."),
            CcntF2 => ("I_CCNT_F2", "Cycle Count format 2."),
            CcntF3 => ("I_CCNT_F3", "Cycle Count format 3."),
            NumDsMkr => ("I_NUM_DS_MKR", "Data Synchronisation Marker - Numbered."),
            UnnumDsMkr => ("I_UNNUM_DS_MKR", "Data Synchronisation Marker - Unnumbered."),
            Commit => ("I_COMMIT", "Commit"),
            CancelF1 => ("I_CANCEL_F1", "Cancel Format 1."),
            CancelF1Mispred => ("I_CANCEL_F1_MISPRED", "Cancel Format 1 + Mispredict."),
            Mispredict => ("I_MISPREDICT", "Mispredict."),
            CancelF2 => ("I_CANCEL_F2", "Cancel Format 2."),
            CancelF3 => ("I_CANCEL_F3", "Cancel Format 3."),
            CondIF2 => ("I_COND_I_F2", "Conditional Instruction, format 2."),
            CondFlush => ("I_COND_FLUSH", "Conditional Flush."),
            CondResF4 => ("I_COND_RES_F4", "Conditional Result, format 4."),
            CondResF2 => ("I_COND_RES_F2", "Conditional Result, format 2."),
            CondResF3 => ("I_COND_RES_F3", "Conditional Result, format 3."),
            CondResF1 => ("I_COND_RES_F1", "Conditional Result, format 1."),
            CondIF1 => ("I_COND_I_F1", "Conditional Instruction, format 1."),
            CondIF3 => ("I_COND_I_F3", "Conditional Instruction, format 3."),
            Ignore => ("I_IGNORE", "Ignore."),
            Event => ("I_EVENT", "Trace Event."),
            Ctxt => ("I_CTXT", "Context Packet."),
            AddrCtxtL32IS0 => ("I_ADDR_CTXT_L_32IS0", "Address & Context, Long, 32 bit, IS0."),
            AddrCtxtL32IS1 => ("I_ADDR_CTXT_L_32IS1", "Address & Context, Long, 32 bit, IS1."),
            AddrCtxtL64IS0 => ("I_ADDR_CTXT_L_64IS0", "Address & Context, Long, 64 bit, IS0."),
            AddrCtxtL64IS1 => ("I_ADDR_CTXT_L_64IS1", "Address & Context, Long, 64 bit, IS1."),
            TsMarker => ("I_TS_MARKER", "Timestamp Marker"),
            AddrMatch => ("I_ADDR_MATCH", "Exact Address Match."),
            AddrSIS0 => ("I_ADDR_S_IS0", "Address, Short, IS0."),
            AddrSIS1 => ("I_ADDR_S_IS1", "Address, Short, IS1."),
            AddrL32IS0 => ("I_ADDR_L_32IS0", "Address, Long, 32 bit, IS0."),
            AddrL32IS1 => ("I_ADDR_L_32IS1", "Address, Long, 32 bit, IS1."),
            AddrL64IS0 => ("I_ADDR_L_64IS0", "Address, Long, 64 bit, IS0."),
            AddrL64IS1 => ("I_ADDR_L_64IS1", "Address, Long, 64 bit, IS1."),
            Q => ("I_Q", "Q Packet."),
            SrcAddrMatch => ("I_SRC_ADDR_MATCH", "Exact Source Address Match."),
            SrcAddrSIS0 => ("I_SRC_ADDR_S_IS0", "Source Address, Short, IS0."),
            SrcAddrSIS1 => ("I_SRC_ADDR_S_IS1", "Source Address, Short, IS1."),
            // OpenCSD spells this one "SCR".
            SrcAddrL32IS0 => ("I_SCR_ADDR_L_32IS0", "Source Address, Long, 32 bit, IS0."),
            SrcAddrL32IS1 => ("I_SRC_ADDR_L_32IS1", "Source Address, Long, 32 bit, IS1."),
            SrcAddrL64IS0 => ("I_SRC_ADDR_L_64IS0", "Source Address, Long, 64 bit, IS0."),
            SrcAddrL64IS1 => ("I_SRC_ADDR_L_64IS1", "Source Address, Long, 64 bit, IS1."),
            AtomF6 => ("I_ATOM_F6", "Atom format 6."),
            AtomF5 => ("I_ATOM_F5", "Atom format 5."),
            AtomF2 => ("I_ATOM_F2", "Atom format 2."),
            AtomF4 => ("I_ATOM_F4", "Atom format 4."),
            AtomF1 => ("I_ATOM_F1", "Atom format 1."),
            AtomF3 => ("I_ATOM_F3", "Atom format 3."),
            Async => ("I_ASYNC", "Alignment Synchronisation."),
            Discard => ("I_DISCARD", "Discard."),
            Overflow => ("I_OVERFLOW", "Overflow."),
            PeReset => ("I_PE_RESET", "PE Reset."),
            TransFail => ("I_TRANS_FAIL", "Transaction Fail."),
        }
    }

    /// OpenCSD's name of the packet type (`I_ATOM_F1`...).
    pub fn name(self) -> &'static str {
        self.name_desc().0
    }

    /// One of the six atom packet formats.
    pub fn is_atom(self) -> bool {
        matches!(
            self,
            PktType::AtomF1 | PktType::AtomF2 | PktType::AtomF3 | PktType::AtomF4 | PktType::AtomF5 | PktType::AtomF6
        )
    }
}

/// A (possibly partly known) virtual address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct VAddr {
    /// Address value; only `valid_bits` low bits are known.
    pub val: u64,
    /// Bits the last packet updated.
    pub pkt_bits: u8,
    /// Bits known.
    pub valid_bits: u8,
    /// Address width: 64 (true) or 32.
    pub is_64: bool,
}

/// Exception packet details.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ExceptionInfo {
    /// Exception type: TYPE of the exception packet (10 bits with the second byte).
    pub exc_type: u16,
    /// 0: none; 1: address follows; 2: address follows, same as previous target.
    pub addr_interp: u8,
    /// M-profile: a fault was pending (FAULT_PENDING bit of the exception packet).
    pub m_fault_pending: bool,
    /// M-profile exception numbering.
    pub m_type: bool,
}

/// Context packet fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PktContext {
    /// Exception level (0 to 3).
    pub el: u8,
    /// AArch64 (SF).
    pub sf: bool,
    /// Non-secure.
    pub ns: bool,
    /// ETE: NSE (root / realm).
    pub nse: bool,
    /// This packet carried context (otherwise "same as last time").
    pub updated: bool,
    /// This packet updated the context ID.
    pub updated_c: bool,
    /// This packet updated the VMID.
    pub updated_v: bool,
    /// Context ID (CONTEXTIDR), when traced.
    pub ctxt_id: u32,
    /// VMID, when traced.
    pub vmid: u32,
}

/// Atom pattern: bit 0 is the oldest atom; 1 means E.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Atoms {
    /// Atom bits, oldest first in bit 0: 1 is E (executed / taken), 0 is N.
    pub en_bits: u32,
    /// Number of atoms in `en_bits`.
    pub num: u8,
}

/// Trace info fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TraceInfo {
    /// The INFO section.
    pub val: u32,
    /// First trace info after synchronisation (where decode starts).
    pub initial: bool,
    /// The packet had a speculation depth section.
    pub spec_field_present: bool,
}

impl TraceInfo {
    /// Cycle counting enabled (INFO.CC_ENABLED, bit 0).
    pub(crate) fn cc_enabled(&self) -> bool {
        self.val & 1 != 0
    }
    /// ETE: the PE is in transactional state (INFO.TSTATE, bit 6).
    pub fn in_trans_state(&self) -> bool {
        self.val & 0x40 != 0
    }
}

/// Q packet fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QInfo {
    /// Instruction count (when `count_present`).
    pub count: u32,
    /// Q packet type: the low 4 bits of its header (0xF: no count known).
    pub q_type: u8,
    /// The packet carries an instruction count.
    pub count_present: bool,
    /// The packet carries an address.
    pub addr_present: bool,
    /// The address is given by exact match of the address history.
    pub addr_match: bool,
}

/// What address packets change of a packet's carried state (see
/// [`EtmV4Packet::addr_state`]).
#[derive(Clone, Copy)]
pub(crate) struct AddrState {
    addr: VAddr,
    addr_is: u8,
    stack: [(VAddr, u8); 3],
    exact_match_idx: u8,
}

/// One ETMv4 / ETE instruction trace packet, with the state carried from
/// packet to packet.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EtmV4Packet {
    /// Type of the current packet.
    pub pkt_type: PktType,
    /// For error types: the type the packet started as.
    pub err_type: PktType,
    /// Header byte of a reserved packet.
    pub err_hdr: u8,
    /// Protocol version (0x4m ETMv4, 0x5m ETE): changes printing.
    pub protocol_version: u8,

    // ---- state carried between packets ----
    /// Current instruction address (updated by address packets, with history for exact
    /// matches).
    pub addr: VAddr,
    /// Instruction set of `addr` (IS bit).
    pub addr_is: u8,
    addr_stack: [(VAddr, u8); 3],
    /// Current context (from context and address-with-context packets).
    pub context: PktContext,
    /// A context has been received since synchronisation.
    pub context_valid: bool,
    /// Global timestamp value (units of the system timestamp counter).
    pub timestamp: u64,
    /// Number of low timestamp bits the last timestamp packet changed.
    pub ts_bits_changed: u8,
    /// A timestamp has been received.
    pub ts_valid: bool,
    /// The last trace info packet's INFO section.
    pub trace_info: TraceInfo,
    /// Cycle count threshold from the trace info packet.
    pub cc_threshold: u32,
    /// `cc_threshold` was given.
    pub cc_threshold_valid: bool,
    /// Speculation depth from the trace info packet.
    pub spec_depth: u32,
    /// `spec_depth` was given.
    pub spec_depth_valid: bool,
    /// P0 key from the trace info packet (data trace only).
    pub p0_key: u32,

    // ---- this packet only ----
    /// Cycle count of this packet (cycle count and timestamp packets).
    pub cycle_count: u32,
    /// This packet carried a cycle count.
    pub cc_valid: bool,
    /// Number of P0 elements committed by this packet.
    pub commit_elements: u32,
    /// This packet committed elements.
    pub commit_valid: bool,
    /// Number of P0 elements cancelled by this packet.
    pub cancel_elements: u32,
    /// Atoms of this packet.
    pub atoms: Atoms,
    /// Exception of this packet.
    pub exception: ExceptionInfo,
    /// Index into the address history of an exact match packet.
    pub exact_match_idx: u8,
    /// Event packet: the EVENT bits, one per event (bits 3:0).
    pub event_val: u8,
    /// Data synchronisation marker: its number or type (bits 2:0).
    pub dsm_val: u8,
    /// Q packet fields.
    pub q: QInfo,
    /// ETE instrumentation packet: exception level of the writing software.
    pub ite_el: u8,
    /// ETE instrumentation packet: the 64-bit value written by the TRCIT instruction.
    pub ite_value: u64,
    /// An atom packet, sent with no packet monitor attached, whose next
    /// byte (in the same block of data) is another atom packet, or an
    /// address packet whole in the block with an atom packet after it: the
    /// decoder may hold this packet's elements and send them with the
    /// next atom packet's, as nothing can be shown between the two. On
    /// such an address packet: an atom packet follows it in the block.
    pub(crate) atom_run_continues: bool,
}

impl EtmV4Packet {
    /// Clears all state: start of trace or after a discontinuity.
    pub(crate) fn init_start_state(&mut self) {
        self.context_valid = false;
        self.ts_valid = false;
        self.cc_threshold_valid = false;
        self.spec_depth_valid = false;
        self.addr.pkt_bits = 0;
        self.addr.valid_bits = 0;
        self.addr_is = 0;
        self.ts_bits_changed = 0;
        self.timestamp = 0;
        self.init_next_packet();
    }

    /// Clears the fields that only last one packet.
    pub(crate) fn init_next_packet(&mut self) {
        self.cc_valid = false;
        self.commit_valid = false;
        self.atoms.num = 0;
        self.atom_run_continues = false;
        self.context.updated = false;
        self.context.updated_c = false;
        self.context.updated_v = false;
        self.err_type = PktType::NoErrType;
    }

    /// Makes the packet an error packet of `err`, remembering what it was.
    pub(crate) fn set_err_type(&mut self, err: PktType, hdr: u8) {
        self.err_type = self.pkt_type;
        self.pkt_type = err;
        self.err_hdr = hdr;
    }

    /// Resets the trace-info state before a new trace info packet.
    pub(crate) fn clear_trace_info(&mut self) {
        self.ts_valid = false;
        self.cc_threshold_valid = false;
        self.trace_info = TraceInfo::default();
        self.spec_depth = 0;
        self.spec_depth_valid = true;
        self.reset_addr_stack();
        self.addr = self.addr_stack[0].0;
        self.addr_is = 0;
    }

    /// Empties the address history to zero addresses, all 64 bits known:
    /// what a processor starts with, so that an exact match before any
    /// address (after a bad sequence) prints a zero address, not an
    /// unknown one.
    pub(crate) fn reset_addr_stack(&mut self) {
        let reset = VAddr {
            val: 0,
            pkt_bits: 0,
            valid_bits: 64,
            is_64: true,
        };
        self.addr_stack = [(reset, 0); 3];
    }

    /// Sets the INFO section of the trace info.
    pub(crate) fn set_trace_info(&mut self, val: u32) {
        self.trace_info.val = val;
    }
    /// Sets the speculation depth given by trace info.
    pub(crate) fn set_spec_depth(&mut self, depth: u32) {
        self.spec_depth = depth;
        self.spec_depth_valid = true;
    }
    /// Sets the cycle count threshold given by trace info.
    pub(crate) fn set_cc_threshold(&mut self, v: u32) {
        self.cc_threshold = v;
        self.cc_threshold_valid = true;
    }
    /// Cycle count threshold from the last trace info (0 if none).
    pub(crate) fn cc_threshold(&self) -> u32 {
        if self.cc_threshold_valid { self.cc_threshold } else { 0 }
    }
    /// Speculation depth from the last trace info (0 if none).
    pub(crate) fn curr_spec_depth(&self) -> u32 {
        if self.spec_depth_valid { self.spec_depth } else { 0 }
    }

    /// Updates the low `bits` bits of the timestamp.
    pub(crate) fn set_ts(&mut self, value: u64, bits: u8) {
        let mask = if bits < 64 { (1u64 << bits) - 1 } else { u64::MAX };
        self.timestamp = (self.timestamp & !mask) | (value & mask);
        self.ts_bits_changed = bits;
        self.ts_valid = true;
    }
    /// Sets this packet's cycle count.
    pub(crate) fn set_cycle_count(&mut self, v: u32) {
        self.cycle_count = v;
        self.cc_valid = true;
    }
    /// Sets this packet's commit count.
    pub(crate) fn set_commit(&mut self, n: u32) {
        self.commit_elements = n;
        self.commit_valid = true;
    }
    /// Sets this packet's atoms: `num` atoms, oldest in bit 0 of `en_bits`.
    pub(crate) fn set_atoms(&mut self, en_bits: u32, num: u8) {
        self.atoms = Atoms { en_bits, num };
    }

    /// Marks a context as received; with `update`, sets its EL, NS, SF (AArch64) and NSE
    /// bits.
    pub(crate) fn set_context_info(&mut self, update: bool, el: u8, ns: bool, sf: bool, nse: bool) {
        self.context_valid = true;
        if update {
            self.context.updated = true;
            self.context.el = el;
            self.context.ns = ns;
            self.context.sf = sf;
            self.context.nse = nse;
        }
    }
    /// Sets the VMID of the context.
    pub(crate) fn set_vmid(&mut self, vmid: u32) {
        self.context_valid = true;
        self.context.updated = true;
        self.context.vmid = vmid;
        self.context.updated_v = true;
    }
    /// Sets the context ID of the context.
    pub(crate) fn set_ctxt_id(&mut self, cid: u32) {
        self.context_valid = true;
        self.context.updated = true;
        self.context.ctxt_id = cid;
        self.context.updated_c = true;
    }

    /// The address state address packets change: the address, its
    /// instruction set, the history and the last exact match.
    pub(crate) fn addr_state(&self) -> AddrState {
        AddrState {
            addr: self.addr,
            addr_is: self.addr_is,
            stack: self.addr_stack,
            exact_match_idx: self.exact_match_idx,
        }
    }

    /// Puts back an address state taken by [`addr_state`](Self::addr_state).
    pub(crate) fn set_addr_state(&mut self, s: &AddrState) {
        self.addr = s.addr;
        self.addr_is = s.addr_is;
        self.addr_stack = s.stack;
        self.exact_match_idx = s.exact_match_idx;
    }

    fn push_addr(&mut self) {
        self.addr_stack[2] = self.addr_stack[1];
        self.addr_stack[1] = self.addr_stack[0];
        self.addr_stack[0] = (self.addr, self.addr_is);
    }

    /// Sets a full 64-bit address with its instruction set, and pushes it on the address
    /// history.
    pub(crate) fn set_64bit_addr(&mut self, addr: u64, is: u8) {
        self.addr = VAddr {
            val: addr,
            pkt_bits: 64,
            valid_bits: 64,
            is_64: true,
        };
        self.addr_is = is;
        self.push_addr();
    }

    /// Sets the low 32 bits of the address (the high half kept in AArch64), and pushes it on
    /// the address history.
    pub(crate) fn set_32bit_addr(&mut self, addr: u32, is: u8) {
        self.addr.pkt_bits = 32;
        if self.context_valid && self.context.sf {
            self.addr.is_64 = true;
            self.addr.val = (self.addr.val & !0xFFFF_FFFF) | addr as u64;
        } else {
            self.addr.val = addr as u64;
            self.addr.is_64 = false;
        }
        if self.addr.valid_bits < 32 {
            self.addr.valid_bits = 32;
        }
        self.addr_is = is;
        self.push_addr();
    }

    /// Replaces the low `bits` bits of the address (short address packet), and pushes it on
    /// the address history.
    pub(crate) fn update_short_addr(&mut self, addr: u32, is: u8, bits: u8) {
        let mask = (1u64 << bits) - 1;
        self.addr.pkt_bits = bits;
        if self.addr.valid_bits < bits {
            self.addr.valid_bits = bits;
        }
        self.addr.val = (self.addr.val & !mask) | (addr as u64 & mask);
        self.addr_is = is;
        self.push_addr();
    }

    /// Exact match: the address is entry `idx` of the address history.
    pub(crate) fn set_exact_match(&mut self, idx: u8) {
        self.exact_match_idx = idx;
        if let Some(&(a, is)) = self.addr_stack.get(idx as usize) {
            self.addr = a;
            self.addr_is = is;
        }
        self.push_addr();
    }

    /// The packet stream is ETE (protocol version 0x5m).
    pub(crate) fn is_ete(&self) -> bool {
        self.protocol_version & 0xF0 == 0x50
    }

    fn write_context(&self, out: &mut String) {
        if !self.context_valid {
            return;
        }
        let c = &self.context;
        if !c.updated {
            out.push_str("Ctxt: Same");
            return;
        }
        out.push_str("Ctxt: ");
        out.push_str(if c.sf { "AArch64," } else { "AArch32, " });
        let _ = write!(out, "EL{}, ", c.el);
        out.push_str(match (c.nse, c.ns) {
            (true, true) => "Realm; ",
            (true, false) => "Root; ",
            (false, true) => "NS; ",
            (false, false) => "S; ",
        });
        if c.updated_c {
            let _ = write!(out, "CID=0x{:08x}; ", c.ctxt_id);
        }
        if c.updated_v {
            let _ = write!(out, "VMID=0x{:04x}; ", c.vmid);
        }
    }

    fn write_atoms(&self, out: &mut String) {
        let mut bits = self.atoms.en_bits;
        for _ in 0..self.atoms.num {
            out.push(if bits & 1 != 0 { 'E' } else { 'N' });
            bits >>= 1;
        }
    }

    fn write_addr(&self, out: &mut String, update_bits: u8) {
        write_val_str(
            out,
            if self.addr.is_64 { 64 } else { 32 },
            self.addr.valid_bits,
            self.addr.val,
            update_bits,
        );
    }

    fn write_exception(&self, out: &mut String) {
        const A_EXCEP: [&str; 16] = [
            "PE Reset",
            "Debug Halt",
            "Call",
            "Trap",
            "System Error",
            "Reserved",
            "Inst Debug",
            "Data Debug",
            "Reserved",
            "Reserved",
            "Alignment",
            "Inst Fault",
            "Data Fault",
            "Reserved",
            "IRQ",
            "FIQ",
        ];
        const M_EXCEP: [&str; 32] = [
            "Reserved",
            "PE Reset",
            "NMI",
            "HardFault",
            "MemManage",
            "BusFault",
            "UsageFault",
            "Reserved",
            "Reserved",
            "Reserved",
            "Reserved",
            "SVC",
            "DebugMonitor",
            "Reserved",
            "PendSV",
            "SysTick",
            "IRQ0",
            "IRQ1",
            "IRQ2",
            "IRQ3",
            "IRQ4",
            "IRQ5",
            "IRQ6",
            "IRQ7",
            "DebugHalt",
            "LazyFP Push",
            "Lockup",
            "Reserved",
            "Reserved",
            "Reserved",
            "Reserved",
            "Reserved",
        ];
        let e = &self.exception;
        let t = e.exc_type as usize;
        if !e.m_type {
            out.push(' ');
            out.push_str(A_EXCEP.get(t).copied().unwrap_or("Reserved"));
            out.push(';');
        } else {
            if t < 0x20 {
                out.push(' ');
                out.push_str(M_EXCEP[t]);
                out.push(';');
            } else if (0x208..=0x3EF).contains(&t) {
                let _ = write!(out, " IRQ{};", t - 0x200);
            } else {
                out.push_str(" Reserved;");
            }
            if e.m_fault_pending {
                out.push_str(" Fault Pending;");
            }
        }
        match e.addr_interp {
            1 => out.push_str(" Ret Addr Follows;"),
            2 => out.push_str(" Ret Addr Follows, Match Prev;"),
            _ => {}
        }
    }
}

/// An address or value as OpenCSD's `getValStr` prints it: `0x` and
/// upper-case hex, `?` for unknown leading digits, the valid range when
/// only some bits are known, and `~[0x..]` with the bits just updated.
pub(crate) fn write_val_str(out: &mut String, total_bits: u32, valid_bits: u8, value: u64, update_bits: u8) {
    out.push_str("0x");
    let num_hex = total_bits.div_ceil(4) as usize;
    let valid_chars = (valid_bits as usize).div_ceil(4);
    for _ in valid_chars..num_hex {
        out.push('?');
    }
    if valid_bits > 32 {
        let _ = write!(out, "{:0w$X}", value, w = valid_chars);
    } else {
        let _ = write!(out, "{:0w$X}", value as u32, w = valid_chars);
    }
    if (valid_bits as u32) < total_bits {
        let _ = write!(out, " ({}:0)", valid_bits as i32 - 1);
    }
    if update_bits != 0 {
        let mask = if update_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << update_bits) - 1
        };
        let _ = write!(out, " ~[0x{:X}]", value & mask);
    }
}

/// [`write_val_str`] into a listing's buffer.
pub(crate) fn write_val_text<W: TextOut>(out: &mut W, total_bits: u32, valid_bits: u8, value: u64, update_bits: u8) {
    out.put(b"0x");
    let num_hex = total_bits.div_ceil(4) as usize;
    let valid_chars = (valid_bits as usize).div_ceil(4);
    for _ in valid_chars..num_hex {
        out.ascii(b'?');
    }
    let shown = if valid_bits > 32 { value } else { value as u32 as u64 };
    out.hex_width(shown, valid_chars, true);
    if (valid_bits as u32) < total_bits {
        out.put(b" (");
        out.dec_i64(valid_bits as i64 - 1);
        out.put(b":0)");
    }
    if update_bits != 0 {
        let mask = if update_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << update_bits) - 1
        };
        out.put(b" ~[0x");
        out.hex_width(value & mask, 0, true);
        out.ascii(b']');
    }
}

impl EtmV4Packet {
    /// `NAME : Description.`
    #[inline]
    fn write_name_desc<W: TextOut>(&self, out: &mut W) {
        use PktType::*;
        /// The listing's most frequent packets' `NAME : Description.`.
        const fn nd(t: PktType) -> Pad<64> {
            let (name, desc) = t.name_desc();
            Pad::join(name, " : ", desc)
        }
        let pad = match self.pkt_type {
            AtomF1 => const { &nd(AtomF1) },
            AtomF2 => const { &nd(AtomF2) },
            AtomF3 => const { &nd(AtomF3) },
            AtomF4 => const { &nd(AtomF4) },
            AtomF5 => const { &nd(AtomF5) },
            AtomF6 => const { &nd(AtomF6) },
            AddrSIS0 => const { &nd(AddrSIS0) },
            AddrMatch => const { &nd(AddrMatch) },
            AddrL32IS0 => const { &nd(AddrL32IS0) },
            AddrL64IS0 => const { &nd(AddrL64IS0) },
            _ => {
                let (name, desc) = self.pkt_type.name_desc();
                out.put_str(name);
                out.put(b" : ");
                out.put_str(desc);
                return;
            }
        };
        out.put_pad(pad);
    }

    fn write_addr_text<W: TextOut>(&self, out: &mut W, update_bits: u8) {
        write_val_text(
            out,
            if self.addr.is_64 { 64 } else { 32 },
            self.addr.valid_bits,
            self.addr.val,
            update_bits,
        );
    }
}

impl TracePacket for EtmV4Packet {
    fn write_desc(&self, out: &mut String) {
        use PktType::*;
        let (name, desc) = self.pkt_type.name_desc();
        out.push_str(name);
        out.push_str(" : ");
        out.push_str(desc);
        match self.pkt_type {
            BadSequence | IncompleteEot | ReservedCfg => {
                out.push('[');
                out.push_str(self.err_type.name());
                out.push(']');
            }
            AddrCtxtL32IS0 | AddrCtxtL32IS1 | AddrL32IS0 | AddrL32IS1 | SrcAddrL32IS0 | SrcAddrL32IS1 => {
                out.push_str("; Addr=");
                self.write_addr(out, if self.addr.pkt_bits < 32 { self.addr.pkt_bits } else { 0 });
                out.push_str("; ");
                if matches!(self.pkt_type, AddrCtxtL32IS0 | AddrCtxtL32IS1) {
                    self.write_context(out);
                }
            }
            AddrCtxtL64IS0 | AddrCtxtL64IS1 | AddrL64IS0 | AddrL64IS1 | SrcAddrL64IS0 | SrcAddrL64IS1 => {
                out.push_str("; Addr=");
                self.write_addr(out, if self.addr.pkt_bits < 64 { self.addr.pkt_bits } else { 0 });
                out.push_str("; ");
                if matches!(self.pkt_type, AddrCtxtL64IS0 | AddrCtxtL64IS1) {
                    self.write_context(out);
                }
            }
            Ctxt => {
                out.push_str("; ");
                self.write_context(out);
            }
            AddrSIS0 | AddrSIS1 | SrcAddrSIS0 | SrcAddrSIS1 => {
                out.push_str("; Addr=");
                self.write_addr(out, self.addr.pkt_bits);
            }
            AddrMatch | SrcAddrMatch => {
                let _ = write!(out, ", [{}]; Addr=", self.exact_match_idx);
                self.write_addr(out, 0);
                out.push_str("; ");
            }
            AtomF1 | AtomF2 | AtomF3 | AtomF4 | AtomF5 | AtomF6 => {
                out.push_str("; ");
                self.write_atoms(out);
            }
            Except => {
                out.push_str("; ");
                self.write_exception(out);
            }
            Timestamp => {
                let _ = write!(out, "; Updated val = 0x{:x}", self.timestamp);
                if self.cc_valid {
                    let _ = write!(out, "; CC=0x{:x}", self.cycle_count);
                }
            }
            TraceInfo => {
                let ti = &self.trace_info;
                let _ = write!(out, "; INFO=0x{:x} {{ CC.{}", ti.val & 0xFF, ti.cc_enabled() as u8);
                if self.is_ete() {
                    let _ = write!(out, ", TSTATE.{}", ti.in_trans_state() as u8);
                }
                out.push_str(" }");
                if ti.cc_enabled() {
                    let _ = write!(out, "; CC_THRESHOLD=0x{:x}", self.cc_threshold);
                }
                if ti.initial && ti.spec_field_present && self.spec_depth_valid {
                    let _ = write!(out, "; INIT SPEC DEPTH={}", self.spec_depth);
                }
                if ti.initial {
                    out.push_str("; Decoder Sync point TINFO");
                }
            }
            CcntF1 | CcntF2 | CcntF3 => {
                let _ = write!(out, "; Count=0x{:x}", self.cycle_count);
                if self.commit_valid {
                    let _ = write!(out, "; Commit({})", self.commit_elements);
                }
            }
            CancelF1 => {
                let _ = write!(out, "; Cancel({})", self.cancel_elements);
            }
            CancelF1Mispred => {
                let _ = write!(out, "; Cancel({}), Mispredict", self.cancel_elements);
            }
            Mispredict | CancelF2 | CancelF3 => {
                out.push_str("; ");
                if self.atoms.num > 0 {
                    out.push_str("Atom: ");
                    self.write_atoms(out);
                    out.push_str(", ");
                }
                match self.pkt_type {
                    Mispredict => out.push_str("Mispredict"),
                    CancelF2 => out.push_str("Cancel(1), Mispredict"),
                    _ => {
                        let _ = write!(out, "Cancel({}), Mispredict", self.cancel_elements);
                    }
                }
            }
            Commit => {
                let _ = write!(out, "; Commit({})", self.commit_elements);
            }
            Q => {
                if self.q.count_present {
                    let _ = write!(out, "; Count({})", self.q.count);
                } else {
                    out.push_str("; Count(Unknown)");
                }
                if self.q.addr_match {
                    let _ = write!(out, "; [{}]", self.exact_match_idx);
                }
                if self.q.addr_present || self.q.addr_match {
                    out.push_str("; Addr=");
                    self.write_addr(out, if self.addr.pkt_bits < 64 { self.addr.pkt_bits } else { 0 });
                }
            }
            Ite => {
                let _ = write!(out, "; EL{}; Payload=0x{:x}", self.ite_el, self.ite_value);
            }
            _ => {}
        }
    }

    /// The frequent packets of a listing (atoms, addresses) written
    /// straight into the buffer; the others as [`write_desc`](Self::write_desc).
    #[inline]
    fn write_text(&self, out: &mut TextBuf, scratch: &mut String) {
        if !self.write_fast(out) {
            scratch.clear();
            self.write_desc(scratch);
            out.put_str(scratch);
        }
    }

    #[inline]
    fn write_line(&self, out: &mut Line<'_>) -> bool {
        self.write_fast(out)
    }
}

impl EtmV4Packet {
    /// The description of the frequent packets (atoms, addresses); false
    /// (nothing written) for the others.
    #[inline(always)]
    fn write_fast<W: TextOut>(&self, out: &mut W) -> bool {
        use PktType::*;
        match self.pkt_type {
            AtomF1 | AtomF2 | AtomF3 | AtomF4 | AtomF5 | AtomF6 => {
                self.write_name_desc(out);
                out.put(b"; ");
                let mut bits = self.atoms.en_bits;
                for _ in 0..self.atoms.num {
                    out.ascii(if bits & 1 != 0 { b'E' } else { b'N' });
                    bits >>= 1;
                }
            }
            AddrSIS0 | AddrSIS1 | SrcAddrSIS0 | SrcAddrSIS1 => {
                self.write_name_desc(out);
                out.put(b"; Addr=");
                self.write_addr_text(out, self.addr.pkt_bits);
            }
            AddrMatch | SrcAddrMatch => {
                self.write_name_desc(out);
                out.put(b", [");
                out.dec(self.exact_match_idx as u64);
                out.put(b"]; Addr=");
                self.write_addr_text(out, 0);
                out.put(b"; ");
            }
            AddrL32IS0 | AddrL32IS1 | SrcAddrL32IS0 | SrcAddrL32IS1 => {
                self.write_name_desc(out);
                out.put(b"; Addr=");
                self.write_addr_text(out, if self.addr.pkt_bits < 32 { self.addr.pkt_bits } else { 0 });
                out.put(b"; ");
            }
            AddrL64IS0 | AddrL64IS1 | SrcAddrL64IS0 | SrcAddrL64IS1 => {
                self.write_name_desc(out);
                out.put(b"; Addr=");
                self.write_addr_text(out, if self.addr.pkt_bits < 64 { self.addr.pkt_bits } else { 0 });
                out.put(b"; ");
            }
            _ => return false,
        }
        true
    }
}
