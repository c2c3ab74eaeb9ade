//! PTM packet decoder: packets to generic trace elements.
//!
//! PTM traces waypoints only: each atom says whether the next waypoint
//! (a branch, or with DMB/DSB waypoints a barrier) was taken. The decoder
//! walks the program image from the current address to that waypoint and
//! outputs the range. A branch address packet is an implied E atom on the
//! waypoint before it, then the new address; with an exception it reports
//! the exception instead. A waypoint update closes a range at a given
//! address. With the return stack enabled, an E atom on an indirect branch
//! returns to the address the last call pushed.

use std::fmt::Write as _;

use super::PtmConfig;
use super::packet::{PtmPacket, PtmPktType};
use super::shared::{ISyncReason, ReturnStack, initial_element};
use crate::arch::{InstrInfo, InstrType, Isa, SecurityState};
use crate::datapath::{DatapathResp, TrcIndex};
use crate::decoder::{DecodeContext, ElemRouter, PacketDecoder};
use crate::element::{ElemType, EventType, PeContext, TraceElement, TraceOnReason, UnsyncInfo};
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::interfaces::{InstrDecode, ResumeState, TargetMemAccess, TrcGenElemIn};
use crate::logger::ErrLink;
use crate::memory::MemSpace;
use crate::shared::Shared;
use crate::walk::{WalkEnd, WalkOptions, Walker};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not synchronised: say so, then wait.
    NoSync,
    /// Waiting for an A-sync.
    WaitSync,
    /// Waiting for an I-sync.
    WaitIsync,
    DecodePkts,
    // Output interrupted by a wait, to finish on the next flush.
    ContIsync,
    ContAtom,
    ContWpUpdate,
    ContBranch,
}

/// How far an instruction walk goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalkTo {
    /// The next waypoint.
    Waypoint,
    /// The instruction at an address, included.
    AddrIncl(u64),
}

/// Where the program is: the next instruction to execute.
#[derive(Clone, Copy, Debug, Default)]
struct PeState {
    addr: u64,
    isa: Isa,
    valid: bool,
}

/// PTM packet decoder (OpenCSD's `TrcPktDecodePtm`).
pub struct PtmDecoder {
    /// The end-of-trace element went out (see [`PacketDecoder`]).
    eot_sent: bool,
    /// Atom headers carry a cycle count (and one atom each).
    cycle_accurate: bool,
    trace_id: u8,
    err: ErrLink,
    mem: Option<Shared<dyn TargetMemAccess>>,
    instr_dec: Shared<dyn InstrDecode>,
    out: Shared<ElemRouter>,

    state: State,
    unsync: UnsyncInfo,
    need_isync: bool,
    isync_pe_ctxt: bool,
    instr: InstrInfo,
    nacc_pending: bool,
    /// The program walk to waypoints, with its block cache.
    walker: Walker,
    nacc_addr: u64,
    pe_ctx: PeContext,
    pe: PeState,
    /// Atoms of the current packet still to process (oldest in bit 0).
    atom_bits: u32,
    atom_num: u8,
    ret_stack: ReturnStack,
    elem: TraceElement,
    /// The packet being decoded (kept for output resumed after a wait).
    pkt: PtmPacket,
    index: TrcIndex,
}

impl PtmDecoder {
    /// A decoder for one PTM source, reporting errors through the tree's log.
    pub fn new(cfg: PtmConfig, ctx: &DecodeContext) -> PtmDecoder {
        let err = ErrLink::new(&ctx.err_log, ctx.component_name("DCD_PTM"));
        let mut ret_stack = ReturnStack::default();
        if cfg.has_ret_stack() {
            ret_stack.set_active(cfg.ret_stack_enabled());
        }
        let instr = InstrInfo {
            pe_type: cfg.arch,
            dsb_dmb_waypoints: cfg.dmsb_waypoints(),
            ..InstrInfo::default()
        };
        let mut d = PtmDecoder {
            eot_sent: false,
            cycle_accurate: cfg.cycle_accurate(),
            trace_id: cfg.trace_id(),
            err,
            mem: ctx.mem.clone(),
            instr_dec: ctx.instr.clone(),
            out: ctx.elem_out.clone(),
            state: State::NoSync,
            unsync: UnsyncInfo::InitDecoder,
            need_isync: true,
            isync_pe_ctxt: false,
            instr,
            nacc_pending: false,
            walker: Walker::new(WalkOptions {
                a64_opcode_check: false,
                mem_error_is_error: true,
                range_limit: 0,
                eret_not_fast: false,
                full_table: false,
            }),
            nacc_addr: 0,
            pe_ctx: PeContext::default(),
            pe: PeState::default(),
            atom_bits: 0,
            atom_num: 0,
            ret_stack,
            elem: initial_element(),
            pkt: PtmPacket::default(),
            index: 0,
        };
        d.reset_decoder();
        d
    }

    fn reset_decoder(&mut self) {
        self.state = State::NoSync;
        self.need_isync = true;
        self.instr.isa = Isa::Unknown;
        self.nacc_pending = false;
        self.pe_ctx = PeContext::default();
        self.pe = PeState {
            addr: 0,
            isa: Isa::Unknown,
            valid: false,
        };
        self.atom_num = 0;
        self.elem = initial_element();
    }

    fn output(&mut self) -> DatapathResp {
        self.out
            .borrow_mut()
            .trace_elem_in(self.index, self.trace_id, &self.elem)
    }

    fn log(&self, sev: Severity, code: ErrCode, msg: String) {
        self.err.log(
            &TraceError::new(sev, code)
                .at(self.index)
                .on_id(self.trace_id)
                .with_message(msg),
        );
    }

    fn process_packet(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        loop {
            match self.state {
                State::NoSync => {
                    // Not a full new element: only the type and reason change.
                    self.elem.elem_type = ElemType::NoSync;
                    self.elem.unsync_info = self.unsync;
                    resp = self.output();
                    self.state = if self.pkt.pkt_type == PtmPktType::ASync {
                        State::WaitIsync
                    } else {
                        State::WaitSync
                    };
                    break;
                }
                State::WaitSync => {
                    if self.pkt.pkt_type == PtmPktType::ASync {
                        self.state = State::WaitIsync;
                    }
                    break;
                }
                State::WaitIsync => {
                    if self.pkt.pkt_type == PtmPktType::ISync {
                        self.state = State::DecodePkts;
                    } else {
                        break;
                    }
                }
                State::DecodePkts => {
                    resp = self.decode_packet();
                    break;
                }
                State::ContIsync | State::ContAtom | State::ContWpUpdate | State::ContBranch => break,
            }
        }
        resp
    }

    fn decode_packet(&mut self) -> DatapathResp {
        match self.pkt.pkt_type {
            PtmPktType::NotSync | PtmPktType::IncompleteEot | PtmPktType::NoError => DatapathResp::Cont,
            PtmPktType::BadSequence | PtmPktType::Reserved => {
                self.state = State::WaitSync;
                self.need_isync = true;
                self.elem.set_type(ElemType::NoSync);
                // OpenCSD clears the element's per-packet value (which the
                // reason shares) and gives none: `[undefined]`.
                self.elem.unsync_info = UnsyncInfo::Unknown;
                self.output()
            }
            PtmPktType::ASync | PtmPktType::Ignore => DatapathResp::Cont,
            PtmPktType::ISync => self.process_isync(),
            PtmPktType::BranchAddress => self.process_branch(),
            PtmPktType::Trigger => {
                self.elem.set_type(ElemType::Event);
                self.elem.event_type = EventType::Trigger;
                self.elem.event_number = 0;
                self.output()
            }
            PtmPktType::WaypointUpdate => self.process_wp_update(),
            PtmPktType::ContextId => {
                if self.pe_ctx.ctxt_id_valid && self.pe_ctx.context_id == self.pkt.context_id {
                    return DatapathResp::Cont;
                }
                self.pe_ctx.context_id = self.pkt.context_id;
                self.pe_ctx.ctxt_id_valid = true;
                self.elem.set_type(ElemType::PeContext);
                self.elem.context = self.pe_ctx;
                self.output()
            }
            PtmPktType::Vmid => {
                if self.pe_ctx.vmid_valid && self.pe_ctx.vmid == u32::from(self.pkt.vmid) {
                    return DatapathResp::Cont;
                }
                self.pe_ctx.vmid = u32::from(self.pkt.vmid);
                self.pe_ctx.vmid_valid = true;
                self.elem.set_type(ElemType::PeContext);
                self.elem.context = self.pe_ctx;
                self.output()
            }
            PtmPktType::Atom => {
                if !self.pe.valid {
                    return DatapathResp::Cont;
                }
                self.atom_bits = self.pkt.atom_bits;
                self.atom_num = self.pkt.atom_num;
                self.process_atom()
            }
            PtmPktType::Timestamp => {
                self.elem.set_type(ElemType::Timestamp);
                self.elem.timestamp = self.pkt.timestamp;
                if self.pkt.cc_valid {
                    self.elem.set_cycle_count(self.pkt.cycle_count);
                }
                self.output()
            }
            PtmPktType::ExceptionReturn => {
                self.elem.set_type(ElemType::ExceptionRet);
                self.output()
            }
        }
    }

    /// Output held back by a wait, resumed on a flush.
    fn cont_process(&mut self) -> DatapathResp {
        let resp = match self.state {
            State::ContIsync => self.process_isync(),
            State::ContAtom => self.process_atom(),
            State::ContWpUpdate => self.process_wp_update(),
            State::ContBranch => self.process_branch(),
            _ => DatapathResp::Cont,
        };
        if resp.is_cont()
            && matches!(
                self.state,
                State::ContIsync | State::ContAtom | State::ContWpUpdate | State::ContBranch
            )
        {
            self.state = State::DecodePkts;
        }
        resp
    }

    fn process_isync(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        if self.state == State::DecodePkts {
            self.pe = PeState {
                addr: self.pkt.addr,
                isa: self.pkt.curr_isa,
                valid: true,
            };
            self.isync_pe_ctxt = self.pkt.isa_changed();
            if self.pkt.ctxt_id_updated {
                self.pe_ctx.context_id = self.pkt.context_id;
                self.pe_ctx.ctxt_id_valid = true;
                self.isync_pe_ctxt = true;
            }
            if self.pkt.vmid_updated {
                self.pe_ctx.vmid = u32::from(self.pkt.vmid);
                self.pe_ctx.vmid_valid = true;
                self.isync_pe_ctxt = true;
            }
            self.pe_ctx.security = if self.pkt.ns {
                SecurityState::NonSecure
            } else {
                SecurityState::Secure
            };

            if self.need_isync || self.pkt.isync_reason != ISyncReason::Periodic {
                self.elem.set_type(ElemType::TraceOn);
                self.elem.trace_on_reason = match self.pkt.isync_reason {
                    ISyncReason::RestartOverflow => TraceOnReason::Overflow,
                    ISyncReason::DebugExit => TraceOnReason::ExDebug,
                    _ => TraceOnReason::Normal,
                };
                if self.pkt.cc_valid {
                    self.elem.set_cycle_count(self.pkt.cycle_count);
                }
                resp = self.output();
            } else {
                // A periodic I-sync in sync says nothing new.
                self.isync_pe_ctxt = false;
            }
            self.need_isync = false;
            self.ret_stack.flush();
        }
        if self.isync_pe_ctxt && resp.is_cont() {
            self.elem.set_type(ElemType::PeContext);
            self.elem.context = self.pe_ctx;
            self.elem.isa = self.pe.isa;
            resp = self.output();
            self.isync_pe_ctxt = false;
        }
        if resp.is_wait() && self.isync_pe_ctxt {
            self.state = State::ContIsync;
        }
        resp
    }

    fn process_branch(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        if self.state == State::DecodePkts {
            if self.pkt.exception_present {
                self.elem.set_type(ElemType::Exception);
                self.elem.exception_number = u32::from(self.pkt.exception_number);
                self.elem.excep_ret_addr = false;
                if self.pe.valid {
                    self.elem.excep_ret_addr = true;
                    self.elem.en_addr = self.pe.addr;
                }
                if self.pkt.cc_valid {
                    self.elem.set_cycle_count(self.pkt.cycle_count);
                }
                resp = self.output();
            } else if self.pe.valid {
                // A branch address implies an E atom on the waypoint before it.
                resp = self.process_atom_range(true, "BranchAddr", WalkTo::Waypoint);
            }
            self.pe = PeState {
                addr: self.pkt.addr,
                isa: self.pkt.curr_isa,
                valid: true,
            };
        }
        self.check_pending_nacc(&mut resp);
        if resp.is_wait() && self.nacc_pending {
            self.state = State::ContBranch;
        }
        resp
    }

    fn process_wp_update(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        if self.pe.valid {
            // The instruction at the update address is the last one run.
            resp = self.process_atom_range(true, "WP update", WalkTo::AddrIncl(self.pkt.addr));
        }
        self.check_pending_nacc(&mut resp);
        if resp.is_wait() && self.nacc_pending {
            self.state = State::ContWpUpdate;
        }
        resp
    }

    fn process_atom(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        while self.atom_num > 0 && self.pe.valid && resp.is_cont() {
            let e = self.atom_bits & 1 != 0;
            resp = self.process_atom_range(e, "atom", WalkTo::Waypoint);
            if !self.pe.valid {
                self.atom_num = 0;
            } else {
                self.atom_bits >>= 1;
                self.atom_num -= 1;
            }
        }
        self.check_pending_nacc(&mut resp);
        if resp.is_wait() && (self.nacc_pending || self.atom_num > 0) {
            self.state = State::ContAtom;
        }
        resp
    }

    fn check_pending_nacc(&mut self, resp: &mut DatapathResp) {
        if self.nacc_pending && resp.is_cont() {
            let space = self.mem_space();
            self.elem.set_type(ElemType::AddrNacc);
            self.elem.st_addr = self.nacc_addr;
            self.elem.mem_space = space;
            self.elem.exception_number = u32::from(space.bits());
            *resp = self.output();
            self.nacc_pending = false;
        }
    }

    fn mem_space(&self) -> MemSpace {
        if self.pe_ctx.security == SecurityState::Secure {
            MemSpace::S
        } else {
            MemSpace::N
        }
    }

    /// Walks from the current address to the next waypoint (or the given
    /// address) and outputs the range, with the atom's outcome.
    fn process_atom_range(&mut self, atom_e: bool, what: &str, walk: WalkTo) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        self.instr.instr_addr = self.pe.addr;
        self.instr.isa = self.pe.isa;
        self.elem.set_type(ElemType::InstrRange);

        let found = match self.trace_instr_to_wp(walk) {
            Ok(found) => found,
            Err(ErrCode::UnsupportedIsa) => {
                self.pe.valid = false;
                let mut msg = String::new();
                let _ = write!(msg, "Warning: unsupported instruction set processing {what} packet.");
                self.log(Severity::Warn, ErrCode::UnsupportedIsa, msg);
                return DatapathResp::WarnCont;
            }
            Err(code) => {
                let mut msg = String::new();
                let _ = write!(msg, "Error processing {what} packet.");
                self.log(Severity::Error, code, msg);
                return DatapathResp::FatalInvalidData;
            }
        };

        if found {
            let next_addr = self.instr.instr_addr;
            match self.instr.instr_type {
                InstrType::Branch if atom_e => {
                    self.instr.instr_addr = self.instr.branch_addr;
                    if self.instr.is_link {
                        self.ret_stack.push(next_addr, self.instr.isa);
                    }
                }
                InstrType::BranchIndirect if atom_e => {
                    // Taken: the next address comes from a branch address
                    // packet, or from the return stack for an atom.
                    self.pe.valid = false;
                    if self.ret_stack.is_active() && self.pkt.pkt_type == PtmPktType::Atom {
                        let mut isa = self.instr.next_isa;
                        self.instr.instr_addr = self.ret_stack.pop(&mut isa);
                        self.instr.next_isa = isa;
                        if self.ret_stack.overflow() {
                            let mut msg = String::new();
                            let _ = write!(msg, "Return stack error processing {what} packet.");
                            self.log(Severity::Error, ErrCode::RetStackOverflow, msg);
                            return DatapathResp::FatalInvalidData;
                        }
                        self.pe.valid = true;
                    }
                    if self.instr.is_link {
                        self.ret_stack.push(next_addr, self.instr.isa);
                    }
                }
                _ => {}
            }
            self.set_last_instr(atom_e);
            if self.pkt.cc_valid {
                self.elem.set_cycle_count(self.pkt.cycle_count);
            }
            resp = self.output();
            self.pe.addr = self.instr.instr_addr;
            self.pe.isa = self.instr.next_isa;
        } else {
            // Ran out of memory image: a new address is needed.
            self.pe.valid = false;
            if self.elem.st_addr != self.elem.en_addr {
                self.set_last_instr(true);
                resp = self.output();
            }
        }
        resp
    }

    fn set_last_instr(&mut self, exec: bool) {
        self.elem.last_instr_exec = exec;
        self.elem.last_i_type = self.instr.instr_type;
        self.elem.last_i_subtype = self.instr.sub_type;
        self.elem.last_instr_sz = self.instr.instr_size;
        self.elem.isa = self.pe.isa;
        self.elem.last_instr_cond = self.instr.is_conditional;
    }

    /// Decodes instructions from `instr.instr_addr` until the walk's end;
    /// the range goes in the element. Returns whether the end was found
    /// (otherwise the memory ran out and an ADDR_NACC is pending).
    fn trace_instr_to_wp(&mut self, walk: WalkTo) -> Result<bool, ErrCode> {
        let space = self.mem_space();
        self.elem.st_addr = self.instr.instr_addr;
        self.elem.en_addr = self.instr.instr_addr;
        self.elem.num_instr_range = 0;
        if let WalkTo::Waypoint = walk
            && !self.nacc_pending
        {
            let Some(mem) = &self.mem else {
                self.nacc_pending = true;
                self.nacc_addr = self.instr.instr_addr;
                return Ok(false);
            };
            // Borrowed in place, not cloned: a walk per atom would pay two
            // reference-count round trips.
            let walked = self.walker.walk_to_waypoint(
                &mut *mem.borrow_mut(),
                &mut *self.instr_dec.borrow_mut(),
                &mut self.instr,
                self.trace_id,
                space,
            );
            if walked.num > 0 {
                self.elem.en_addr = self.instr.instr_addr;
                self.elem.num_instr_range = walked.num;
                self.elem.last_i_type = self.instr.instr_type;
            }
            return match walked.end {
                WalkEnd::Waypoint => Ok(true),
                WalkEnd::Nacc => {
                    self.nacc_pending = true;
                    self.nacc_addr = self.instr.instr_addr;
                    Ok(false)
                }
                WalkEnd::Error(e) => Err(e),
            };
        }
        let mut found = false;
        while !found && !self.nacc_pending {
            let op_addr = self.instr.instr_addr;
            let mut buf = [0u8; 4];
            let n = match &self.mem {
                Some(m) => m
                    .borrow_mut()
                    .read_target_memory(op_addr, self.trace_id, space, &mut buf)?,
                None => 0,
            };
            if n == 4 {
                self.instr.opcode = u32::from_le_bytes(buf);
                self.instr_dec.borrow_mut().decode_instruction(&mut self.instr)?;
                self.instr.instr_addr = self.instr.instr_addr.wrapping_add(u64::from(self.instr.instr_size));
                self.elem.en_addr = self.instr.instr_addr;
                self.elem.num_instr_range += 1;
                self.elem.last_i_type = self.instr.instr_type;
                found = match walk {
                    WalkTo::Waypoint => self.instr.instr_type != InstrType::Other,
                    WalkTo::AddrIncl(a) => op_addr == a,
                };
            } else {
                self.nacc_pending = true;
                self.nacc_addr = self.instr.instr_addr;
            }
        }
        Ok(found)
    }
}

impl PacketDecoder for PtmDecoder {
    type Packet = PtmPacket;
    fn eot_done(&mut self) -> &mut bool {
        &mut self.eot_sent
    }
    fn on_packet(&mut self, index: TrcIndex, pkt: &PtmPacket) -> DatapathResp {
        self.pkt = *pkt;
        self.index = index;
        self.process_packet()
    }
    /// One-byte atom packets as their bytes, while decoding: each is
    /// decoded as [`on_packet`](Self::on_packet) decodes it, and its
    /// elements go out as they are made, so waits fall where they would.
    /// Stops after a packet whose output answered other than continue.
    fn on_packet_bytes(&mut self, index: TrcIndex, run: &[u8]) -> (DatapathResp, usize) {
        if self.state != State::DecodePkts {
            return (DatapathResp::Cont, 0);
        }
        let mut resp = DatapathResp::Cont;
        let mut i = 0;
        while i < run.len() && resp.is_cont() {
            // The fields of the packet an atom's decode reads.
            let hdr = run[i];
            self.pkt.pkt_type = PtmPktType::Atom;
            if self.cycle_accurate {
                self.pkt.set_ca_atom_from_header(hdr);
                self.pkt.set_cycle_count(one_byte_atom_cycles(hdr));
            } else {
                self.pkt.set_atoms_from_header(hdr);
                self.pkt.cc_valid = false;
            }
            self.index = index + i as u64;
            i += 1;
            if self.pe.valid {
                self.atom_bits = self.pkt.atom_bits;
                self.atom_num = self.pkt.atom_num;
                resp = self.process_atom();
            }
        }
        (resp, i)
    }
    fn on_eot(&mut self) -> DatapathResp {
        self.elem.set_type(ElemType::EoTrace);
        self.elem.unsync_info = UnsyncInfo::Eot;
        self.output()
    }
    fn on_flush(&mut self) -> DatapathResp {
        self.cont_process()
    }
    /// PTM keeps its context from the start (a reset clears it): the VMID
    /// the serial decode had is its context's from the first packet.
    fn on_resume(&mut self, state: &ResumeState) -> bool {
        if let Some(vmid) = state.vmid {
            self.pe_ctx.vmid = vmid;
            self.pe_ctx.vmid_valid = true;
        }
        state.vmid.is_some()
    }
    fn on_reset(&mut self, _index: TrcIndex) -> DatapathResp {
        self.unsync = UnsyncInfo::ResetDecoder;
        self.reset_decoder();
        DatapathResp::Cont
    }
}

/// The cycle count of a one-byte cycle-accurate atom packet (bits 5:2 of
/// its header).
pub(crate) fn one_byte_atom_cycles(hdr: u8) -> u32 {
    u32::from((hdr >> 2) & 0xf)
}
