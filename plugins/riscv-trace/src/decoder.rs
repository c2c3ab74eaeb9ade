//! Packet decoder: [`RvPacket`]s to generic trace elements, following the
//! program through its memory image.
//!
//! The decoder walks lazily: it knows where each hart is (the next
//! instruction to execute) and moves on only when a packet says how far.
//! How each packet moves it is the crate's reading of the draft (see the
//! crate documentation, "Choices"):
//!
//! - Branch Taken / Not Taken (emitbranch): walk to the next conditional
//!   branch, following `jal`, and take it or not.
//! - PC, with emitbranch: the target of the next indirect instruction
//!   (`jalr`, trap, trap return); without emitbranch: PCs come in pairs,
//!   the address of a taken branch or jump (the walk to it passes
//!   conditional branches as not taken) and then its target.
//! - A PC followed by Privilege Level with the interrupt bit: the address
//!   where an interrupt was taken (the next instruction that would have
//!   run); the PC after that is the handler.
//! - A PC followed by Trace Disabled, Change Hart or the end of the trace:
//!   where the hart stopped (the next instruction it would have run).
//! - A PC after Trace Enabled or Change Hart: where the hart is now (a
//!   start, or a check that the walk agrees).
//!
//! A PC is therefore only acted on when the packet after it arrives.

use std::collections::VecDeque;

use coresight_decode::arch::{ExceptionLevel, InstrSubType, InstrType, Isa};
use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::decoder::{DecodeContext, ElemRouter, PacketDecoder};
use coresight_decode::element::{DataAccess, DataAccessKind, ElemType, TraceElement, UnsyncInfo};
use coresight_decode::error::{ErrCode, Severity, TraceError};
use coresight_decode::interfaces::{TargetMemAccess, TrcGenElemIn};
use coresight_decode::logger::ErrLink;
use coresight_decode::memory::MemSpace;
use coresight_decode::shared::Shared;

use crate::config::RiscvTraceConfig;
use crate::instr::{Flow, classify, instr_len};
use crate::packet::{Privilege, RvPacket};

/// Harts tracked at once; the least recently selected is forgotten past this.
const MAX_HARTS: usize = 256;
/// Instructions one walk may cover when no range limit is set.
const DEFAULT_WALK_LIMIT: u64 = 1 << 16;

#[derive(Clone, Copy, Debug)]
struct Hart {
    id: u64,
    /// Next instruction to execute, when known.
    pc: Option<u64>,
    prv: Option<u8>,
    ie: Option<bool>,
}

impl Hart {
    fn new(id: u64) -> Hart {
        Hart {
            id,
            pc: None,
            prv: None,
            ie: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncState {
    /// Waiting for Trace Enabled (start of a wrapped buffer, after a bad
    /// packet or a walk that disagreed with the image).
    Unsynced,
    /// Trace was disabled: the next PC starts it again.
    Stopped,
    Tracing,
}

/// What the packet after a PC says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    /// Privilege Level with the interrupt bit.
    Interrupt,
    /// Trace Disabled, Change Hart, end of trace.
    Stop,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Goal {
    /// Up to (not including) this address.
    Before(u64),
    /// Up to and including the taken branch or jump at this address.
    Through(u64),
    /// Through the next conditional branch, taken or not.
    NextBranch(bool),
    /// Through the next indirect instruction.
    NextIndirect,
}

/// The RISC-V trace decoder.
pub struct RvDecoder {
    cfg: RiscvTraceConfig,
    trace_id: u8,
    mem: Option<Shared<dyn TargetMemAccess>>,
    out: Shared<ElemRouter>,
    log: ErrLink,
    queue: VecDeque<(TrcIndex, TraceElement)>,
    elem: TraceElement,
    eot_done: bool,
    sync: SyncState,
    harts: Vec<Hart>,
    /// Index in `harts` of the hart being traced.
    cur: usize,
    /// A PC waiting for the packet after it.
    pending: Option<(TrcIndex, u64)>,
    /// The next PC is where the hart is (after Trace Enabled, Change Hart).
    position_next: bool,
    /// The next PC is the target of a jump, trap or interrupt.
    await_target: bool,
    /// Inside a Trace Enabled / Change Hart group: Privilege Level packets
    /// there restate the mode rather than mark a trap.
    in_group: bool,
    walk_limit: u64,
}

impl RvDecoder {
    pub fn new(cfg: RiscvTraceConfig, ctx: &DecodeContext) -> RvDecoder {
        let mut elem = TraceElement::new(ElemType::Unknown);
        elem.isa = Isa::RiscV;
        elem.context.bits64 = cfg.isa.xlen == 64;
        let limit = ctx.options.instr_range_limit;
        RvDecoder {
            cfg,
            trace_id: ctx.instance_id.unwrap_or(0),
            mem: ctx.mem.clone(),
            out: ctx.elem_out.clone(),
            log: ErrLink::new(&ctx.err_log, ctx.component_name("DCD_RISCV")),
            queue: VecDeque::new(),
            elem,
            eot_done: false,
            sync: SyncState::Unsynced,
            harts: vec![Hart::new(0)],
            cur: 0,
            pending: None,
            position_next: false,
            await_target: false,
            in_group: false,
            walk_limit: if limit > 0 { limit as u64 } else { DEFAULT_WALK_LIMIT },
        }
    }

    fn pair_mode(&self) -> bool {
        !self.cfg.trace.emit_branch()
    }

    fn hart(&mut self) -> &mut Hart {
        &mut self.harts[self.cur]
    }

    fn push(&mut self, index: TrcIndex, ty: ElemType) -> &mut TraceElement {
        self.elem.set_type(ty);
        self.queue.push_back((index, self.elem));
        // Just pushed: the queue is not empty.
        &mut self.queue.back_mut().expect("element just queued").1
    }

    fn drain(&mut self) -> DatapathResp {
        while let Some((index, e)) = self.queue.pop_front() {
            let r = self.out.borrow_mut().trace_elem_in(index, self.trace_id, &e);
            if !r.is_cont() {
                return r;
            }
        }
        DatapathResp::Cont
    }

    fn error(&mut self, index: TrcIndex, code: ErrCode, msg: String) {
        self.log.log(
            &TraceError::new(Severity::Error, code)
                .at(index)
                .on_id(self.trace_id)
                .with_message(msg),
        );
    }

    /// Gives up until the next Trace Enabled.
    fn lose_sync(&mut self, index: TrcIndex, why: UnsyncInfo) {
        self.sync = SyncState::Unsynced;
        self.pending = None;
        self.position_next = false;
        self.await_target = false;
        self.in_group = false;
        for h in &mut self.harts {
            h.pc = None;
        }
        self.push(index, ElemType::NoSync).unsync_info = why;
    }

    fn set_context_fields(&mut self) {
        let h = self.harts[self.cur];
        let c = &mut self.elem.context;
        c.hart = Some(h.id);
        c.el_valid = h.prv.is_some();
        c.exception_level = match h.prv {
            Some(p) => ExceptionLevel::from_number(p),
            None => ExceptionLevel::Unknown,
        };
        c.interrupts_enabled = h.ie;
    }

    fn push_context(&mut self, index: TrcIndex) {
        self.set_context_fields();
        self.push(index, ElemType::PeContext);
    }

    // ---- memory and walking

    fn read_instr(&mut self, pc: u64) -> Option<u32> {
        let mem = self.mem.as_ref()?;
        let mut buf = [0u8; 4];
        let n = mem
            .borrow_mut()
            .read_target_memory(pc, self.trace_id, MemSpace::ANY, &mut buf)
            .ok()?;
        if n < 2 {
            return None;
        }
        let hw = u16::from_le_bytes([buf[0], buf[1]]);
        match instr_len(hw) {
            2 => Some(hw as u32),
            4 if n >= 4 => Some(u32::from_le_bytes(buf)),
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push_range(&mut self, index: TrcIndex, start: u64, end: u64, n: u32, size: u8, flow: Flow, exec: bool) {
        let e = self.push(index, ElemType::InstrRange);
        e.st_addr = start;
        e.en_addr = end;
        e.num_instr_range = n;
        e.last_instr_sz = size;
        e.last_instr_exec = exec;
        e.last_instr_cond = matches!(flow, Flow::Branch { .. });
        (e.last_i_type, e.last_i_subtype) = match flow {
            Flow::Other => (InstrType::Other, InstrSubType::None),
            Flow::Branch { .. } => (InstrType::Branch, InstrSubType::None),
            Flow::Jal { link, .. } => (
                InstrType::Branch,
                if link {
                    InstrSubType::BranchLink
                } else {
                    InstrSubType::None
                },
            ),
            Flow::Jalr { link } => (
                InstrType::BranchIndirect,
                if link {
                    InstrSubType::BranchLink
                } else {
                    InstrSubType::None
                },
            ),
            Flow::Trap | Flow::TrapReturn => (InstrType::BranchIndirect, InstrSubType::None),
        };
    }

    /// Walks the current hart towards `goal`. On success the hart's PC is
    /// the next instruction (or, after a taken jump whose target a PC
    /// packet gives, left at the jump with `await_target` set). On failure
    /// the decoder has lost sync.
    fn walk(&mut self, index: TrcIndex, goal: Goal) -> bool {
        let Some(mut pc) = self.hart().pc else { return false };
        let mask = self.cfg.isa.mask();
        let mut start = pc;
        let mut n: u32 = 0;
        let mut last = (0u8, Flow::Other);
        let mut steps = 0u64;
        loop {
            if goal == Goal::Before(pc) {
                if n > 0 {
                    self.push_range(index, start, pc, n, last.0, last.1, true);
                }
                self.hart().pc = Some(pc);
                return true;
            }
            steps += 1;
            if steps > self.walk_limit {
                if n > 0 {
                    self.push_range(index, start, pc, n, last.0, last.1, true);
                }
                self.error(
                    index,
                    ErrCode::IRangeLimitOverrun,
                    format!("walk for {goal:?} passed {} instructions", self.walk_limit),
                );
                self.lose_sync(index, UnsyncInfo::BadPacket);
                return false;
            }
            let Some(op) = self.read_instr(pc) else {
                if n > 0 {
                    self.push_range(index, start, pc, n, last.0, last.1, true);
                }
                self.push(index, ElemType::AddrNacc).st_addr = pc;
                self.error(index, ErrCode::MemNacc, format!("no program image at 0x{pc:x}"));
                self.lose_sync(index, UnsyncInfo::BadPacket);
                return false;
            };
            let ins = match classify(self.cfg.isa, pc, op) {
                Ok(i) => i,
                Err(_) => {
                    if n > 0 {
                        self.push_range(index, start, pc, n, last.0, last.1, true);
                    }
                    self.error(
                        index,
                        ErrCode::InvalidOpcode,
                        format!("opcode 0x{op:x} at 0x{pc:x} not valid for this hart"),
                    );
                    self.lose_sync(index, UnsyncInfo::BadPacket);
                    return false;
                }
            };
            n += 1;
            last = (ins.size, ins.flow);
            let next = pc.wrapping_add(ins.size as u64) & mask;
            let here = pc;
            let mismatch = |s: &mut Self, what: &str| {
                s.push_range(index, start, next, n, ins.size, ins.flow, true);
                s.error(
                    index,
                    ErrCode::BadDecodeImage,
                    format!("{what} at 0x{here:x} while walking for {goal:?}"),
                );
                s.lose_sync(index, UnsyncInfo::BadPacket);
                false
            };
            match ins.flow {
                Flow::Other => {
                    if goal == Goal::Through(pc) {
                        return mismatch(self, "not a branch or jump");
                    }
                    pc = next;
                    continue;
                }
                Flow::Branch { target } => {
                    match goal {
                        Goal::NextBranch(taken) => {
                            self.push_range(index, start, next, n, ins.size, ins.flow, taken);
                            self.hart().pc = Some(if taken { target } else { next });
                            return true;
                        }
                        Goal::Through(a) if a == pc => {
                            self.push_range(index, start, next, n, ins.size, ins.flow, true);
                            self.hart().pc = Some(pc);
                            self.await_target = true;
                            return true;
                        }
                        Goal::Before(_) | Goal::Through(_) if self.pair_mode() => {
                            // Without emitbranch, a branch without a PC pair was not taken.
                            self.push_range(index, start, next, n, ins.size, ins.flow, false);
                        }
                        _ => return mismatch(self, "conditional branch without a branch packet"),
                    }
                    pc = next;
                }
                Flow::Jal { target, .. } => {
                    if goal == Goal::Through(pc) {
                        self.push_range(index, start, next, n, ins.size, ins.flow, true);
                        self.hart().pc = Some(pc);
                        self.await_target = true;
                        return true;
                    }
                    if self.pair_mode() {
                        return mismatch(self, "jump without a PC pair");
                    }
                    self.push_range(index, start, next, n, ins.size, ins.flow, true);
                    pc = target;
                }
                _ => {
                    // Indirect: jalr, trap, trap return.
                    if goal == Goal::Through(pc) || goal == Goal::NextIndirect {
                        self.push_range(index, start, next, n, ins.size, ins.flow, true);
                        self.hart().pc = Some(pc);
                        self.await_target = true;
                        return true;
                    }
                    return mismatch(self, "indirect jump without its target");
                }
            }
            start = pc;
            n = 0;
        }
    }

    // ---- packets

    /// Acts on the PC waiting for this packet.
    fn resolve_pending(&mut self, after: After) {
        let Some((index, v)) = self.pending.take() else { return };
        if self.hart().pc.is_none() {
            self.hart().pc = Some(v);
            self.position_next = false;
            self.await_target = false;
            self.push(index, ElemType::TraceOn);
            self.push_context(index);
            if after == After::Interrupt {
                self.await_target = false;
            }
            return;
        }
        if std::mem::take(&mut self.position_next) {
            self.await_target = false;
            self.walk(index, Goal::Before(v));
            return;
        }
        match after {
            After::Interrupt | After::Stop => {
                self.await_target = false;
                self.walk(index, Goal::Before(v));
            }
            After::Other if self.await_target => {
                self.await_target = false;
                self.hart().pc = Some(v);
            }
            After::Other if self.pair_mode() => {
                self.walk(index, Goal::Through(v));
            }
            After::Other => {
                if self.walk(index, Goal::NextIndirect) {
                    self.await_target = false;
                    self.hart().pc = Some(v);
                }
            }
        }
    }

    fn select_hart(&mut self, id: u64) -> bool {
        if self.harts[self.cur].id == id {
            return false;
        }
        match self.harts.iter().position(|h| h.id == id) {
            Some(i) => self.cur = i,
            None => {
                if self.harts.len() >= MAX_HARTS {
                    self.harts.remove(0);
                }
                self.harts.push(Hart::new(id));
                self.cur = self.harts.len() - 1;
            }
        }
        true
    }

    fn data(&mut self, index: TrcIndex, kind: DataAccessKind, addr: Option<u64>, value: Option<u64>) {
        self.push(index, ElemType::DataAccess).data = DataAccess { kind, addr, value };
    }

    fn packet(&mut self, index: TrcIndex, pkt: &RvPacket) {
        if let RvPacket::Bad(_) = pkt {
            if self.sync != SyncState::Unsynced {
                self.lose_sync(index, UnsyncInfo::BadPacket);
            }
            return;
        }
        if self.sync == SyncState::Unsynced && !matches!(pkt, RvPacket::TraceEnabled { .. }) {
            return;
        }
        match *pkt {
            RvPacket::Pc(v) => {
                self.resolve_pending(After::Other);
                // A group's PC comes last: what follows is ordinary trace.
                self.in_group = false;
                if v.known {
                    self.pending = Some((index, v.value));
                }
            }
            RvPacket::TraceEnabled { .. } => {
                self.resolve_pending(After::Other);
                if self.sync != SyncState::Tracing {
                    for h in &mut self.harts {
                        h.pc = None;
                    }
                }
                self.sync = SyncState::Tracing;
                self.position_next = true;
                self.await_target = false;
                self.in_group = true;
            }
            RvPacket::TraceDisabled => {
                self.resolve_pending(After::Stop);
                for h in &mut self.harts {
                    h.pc = None;
                }
                self.sync = SyncState::Stopped;
                self.position_next = false;
                self.await_target = false;
                self.in_group = false;
                self.push(index, ElemType::NoSync).unsync_info = UnsyncInfo::Discard;
            }
            RvPacket::ChangeHart(id) => {
                self.resolve_pending(After::Stop);
                self.position_next = true;
                self.await_target = false;
                self.in_group = true;
                if self.select_hart(id) {
                    self.push_context(index);
                }
            }
            RvPacket::Privilege(p) => self.privilege(index, p),
            RvPacket::BranchTaken | RvPacket::BranchNotTaken => {
                self.resolve_pending(After::Other);
                self.in_group = false;
                if self.hart().pc.is_some() && !self.await_target {
                    self.walk(index, Goal::NextBranch(*pkt == RvPacket::BranchTaken));
                }
            }
            RvPacket::LoadAddr(v) | RvPacket::StoreAddr(v) | RvPacket::LoadData(v) | RvPacket::StoreData(v) => {
                self.resolve_pending(After::Other);
                self.in_group = false;
                let kind = if matches!(pkt, RvPacket::LoadAddr(_) | RvPacket::LoadData(_)) {
                    DataAccessKind::Load
                } else {
                    DataAccessKind::Store
                };
                let known = v.known.then_some(v.value);
                if matches!(pkt, RvPacket::LoadAddr(_) | RvPacket::StoreAddr(_)) {
                    self.data(index, kind, known, None);
                } else {
                    self.data(index, kind, None, known);
                }
            }
            RvPacket::Timestamp(v) => {
                self.resolve_pending(After::Other);
                self.in_group = false;
                if v.known {
                    self.push(index, ElemType::Timestamp).timestamp = v.value;
                }
            }
            RvPacket::Bad(_) => {}
        }
    }

    fn privilege(&mut self, index: TrcIndex, p: Privilege) {
        if p.interrupt {
            // Where the interrupt was taken: the pending PC, if any.
            let ret = self.pending.map(|(_, v)| v);
            self.resolve_pending(After::Interrupt);
            self.in_group = false;
            let e = self.push(index, ElemType::Exception);
            e.exception_number = 0;
            e.excep_ret_addr = ret.is_some();
            e.en_addr = ret.unwrap_or(0);
            self.await_target = self.hart().pc.is_some();
        } else {
            self.resolve_pending(After::Other);
            let trap = !std::mem::take(&mut self.in_group);
            if trap && !self.pair_mode() && self.cfg.trace.emit_pc() && self.hart().pc.is_some() && !self.await_target {
                // A trap or trap return: the mode changes at the next
                // indirect instruction; its target follows.
                self.walk(index, Goal::NextIndirect);
            }
            self.in_group = !trap;
        }
        let h = self.hart();
        let changed = h.prv != Some(p.prv) || h.ie != Some(p.ie);
        h.prv = Some(p.prv);
        h.ie = Some(p.ie);
        if changed {
            self.push_context(index);
        }
    }
}

impl PacketDecoder for RvDecoder {
    type Packet = RvPacket;

    fn eot_done(&mut self) -> &mut bool {
        &mut self.eot_done
    }

    fn on_packet(&mut self, index: TrcIndex, pkt: &RvPacket) -> DatapathResp {
        self.packet(index, pkt);
        self.drain()
    }

    fn on_eot(&mut self) -> DatapathResp {
        let index = self.pending.map(|p| p.0).unwrap_or(0);
        self.resolve_pending(After::Stop);
        self.push(index, ElemType::EoTrace).unsync_info = UnsyncInfo::Eot;
        self.drain()
    }

    fn on_eot_again(&mut self) -> DatapathResp {
        self.drain()
    }

    fn on_flush(&mut self) -> DatapathResp {
        self.drain()
    }

    fn on_reset(&mut self, _index: TrcIndex) -> DatapathResp {
        self.queue.clear();
        self.sync = SyncState::Unsynced;
        self.harts.clear();
        self.harts.push(Hart::new(0));
        self.cur = 0;
        self.pending = None;
        self.position_next = false;
        self.await_target = false;
        self.in_group = false;
        DatapathResp::Cont
    }
}
