//! ETMv3 packet decoder: packets to generic trace elements.
//!
//! Every instruction is an atom in ETMv3: a P-header's E and N atoms say
//! whether each instruction in turn passed its condition, so the decoder
//! steps one instruction per atom from the current address. A branch
//! address packet gives the next address, and may carry an exception and
//! a change of security state; an exception that cancels the last
//! instruction removes that instruction's range. The decoder therefore
//! holds back the last range (and an exception return with the range
//! before it) until the next packet shows it stands.
//!
//! Elements are built in a ring of reused elements, as OpenCSD's element
//! list does; fields an element type does not set keep the values the
//! ring slot had.

use super::packet::{Etmv3Packet, Etmv3PktType, PHdrAtoms};
use super::{Etmv3Config, Etmv3TraceMode};
use crate::arch::{CoreProfile, ExceptionLevel, InstrInfo, InstrSubType, InstrType, Isa, SecurityState};
use crate::datapath::{DatapathResp, TrcIndex};
use crate::decoder::{DecodeContext, ElemRouter, PacketDecoder};
use crate::element::{ElemType, EventType, PeContext, TraceElement, TraceOnReason, UnsyncInfo};
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::interfaces::{InstrDecode, ResumeState, TargetMemAccess, TrcGenElemIn};
use crate::logger::ErrLink;
use crate::memory::MemSpace;
use crate::ptm::shared::{ISyncReason, initial_element};
use crate::shared::Shared;
use crate::walk::{Single, WalkOptions, Walker};

/// The ring of output elements (OpenCSD's `OcsdGenElemList`): elements are
/// taken in order, sent from the oldest; the newest can be held back
/// (pended), then released or cancelled.
struct ElemList {
    /// Elements with the index of the packet that produced each (the
    /// order a sink takes runs of them in).
    slots: Vec<(TrcIndex, TraceElement)>,
    first: usize,
    used: usize,
    pend: usize,
}

impl ElemList {
    fn new() -> ElemList {
        ElemList {
            slots: Vec::new(),
            first: 0,
            used: 0,
            pend: 0,
        }
    }

    fn reset(&mut self) {
        self.first = 0;
        self.used = 0;
        self.pend = 0;
    }

    /// Takes the next element; returns its slot.
    #[inline]
    fn next(&mut self, index: TrcIndex) -> usize {
        if self.used == self.slots.len() {
            self.grow();
        }
        let slot = self.wrap(self.first + self.used);
        self.used += 1;
        self.slots[slot].0 = index;
        slot
    }

    /// Takes the next element (see [`next`](Self::next)).
    #[inline]
    fn push(&mut self, index: TrcIndex) -> &mut TraceElement {
        if self.used == self.slots.len() {
            self.grow();
        }
        let slot = self.wrap(self.first + self.used);
        self.used += 1;
        let s = &mut self.slots[slot];
        s.0 = index;
        &mut s.1
    }

    /// `i % slots.len()` for `i < 2 * slots.len()`.
    #[inline]
    fn wrap(&self, i: usize) -> usize {
        if i >= self.slots.len() { i - self.slots.len() } else { i }
    }

    /// Grows by half (8 to start with), keeping the elements in ring order
    /// from the oldest.
    #[cold]
    fn grow(&mut self) {
        let add = if self.slots.is_empty() { 8 } else { self.slots.len() / 2 };
        self.slots.rotate_left(self.first);
        self.slots
            .extend(std::iter::repeat_with(|| (0, initial_element())).take(add));
        self.first = 0;
    }

    fn elem(&mut self, slot: usize) -> &mut TraceElement {
        &mut self.slots[slot].1
    }

    fn num(&self) -> usize {
        self.used
    }

    /// Slots not in use.
    fn free(&self) -> usize {
        self.slots.len() - self.used
    }

    /// Type of the `n`th element in use (0: oldest).
    fn elem_type(&self, n: usize) -> ElemType {
        if n < self.used {
            self.slots[self.wrap(self.first + n)].1.elem_type
        } else {
            ElemType::Unknown
        }
    }

    /// Holds back the last `n` elements, when there are no more than `n`.
    fn pend_last(&mut self, n: usize) {
        if n >= self.used {
            self.pend = n;
        }
    }

    /// Holds back the last element, whatever else is unsent (a run of
    /// packets sent together; see `Etmv3Decoder::phdr_bytes`).
    fn pend_last_of_run(&mut self) {
        self.pend = 1;
    }

    fn commit_all(&mut self) {
        self.pend = 0;
    }

    /// Drops the held-back elements (the count stays, as in OpenCSD).
    fn cancel_pend(&mut self) {
        if self.pend > 0 {
            self.used = self.used.saturating_sub(self.pend);
        }
    }

    fn elem_to_send(&self) -> bool {
        self.used > self.pend
    }

    /// Sends the elements not held back, oldest first, in at most two
    /// runs (the ring wraps once), stopping where the sink says other than
    /// continue.
    fn send(&mut self, out: &Shared<ElemRouter>, trace_id: u8) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        while self.elem_to_send() && resp.is_cont() {
            let run = (self.used - self.pend).min(self.slots.len() - self.first);
            let (r, taken) = out
                .borrow_mut()
                .trace_elems_in(trace_id, &self.slots[self.first..self.first + run]);
            resp = r;
            self.first = self.wrap(self.first + taken);
            self.used -= taken;
            if taken == 0 {
                break;
            }
        }
        resp
    }
}

/// Instructions classified ahead of one not remembered, at most (see
/// [`Walker::classify_ahead`]).
const CLASSIFY_AHEAD: usize = 16;

/// The instruction an atom is on (OpenCSD's `OcsdCodeFollower`): the last
/// classified, and the memory space code is read from.
struct Follower {
    instr: InstrInfo,
    space: MemSpace,
}

/// What a range element says of its one instruction, from a remembered
/// classification or the follower's.
#[derive(Clone, Copy)]
struct LastInstr {
    instr_type: InstrType,
    sub_type: InstrSubType,
    size: u8,
    conditional: bool,
}

impl LastInstr {
    #[inline(always)]
    fn of_single(s: &Single) -> LastInstr {
        LastInstr {
            instr_type: s.instr_type,
            sub_type: s.sub_type,
            size: s.instr_size,
            conditional: s.is_conditional,
        }
    }

    #[inline(always)]
    fn of_instr(i: &InstrInfo) -> LastInstr {
        LastInstr {
            instr_type: i.instr_type,
            sub_type: i.sub_type,
            size: i.instr_size,
            conditional: i.is_conditional,
        }
    }
}

/// Fills a range element (its type already set) with the one instruction
/// `last` at `addr`, ending at `en`, executed or not as `atom_e` says.
#[inline(always)]
fn fill_one_instr_range(e: &mut TraceElement, last: LastInstr, addr: u64, en: u64, atom_e: bool, isa: Isa) {
    e.st_addr = addr;
    e.en_addr = en;
    e.num_instr_range = 1;
    e.last_instr_exec = atom_e;
    e.last_i_type = last.instr_type;
    e.last_i_subtype = last.sub_type;
    e.last_instr_sz = last.size;
    e.last_instr_cond = last.conditional;
    e.isa = isa;
}

/// The atoms of a P-header being processed.
struct Atoms {
    bits: u32,
    num: u8,
    fmt: u8,
    cycles: u32,
    cycle_accurate: bool,
}

impl Atoms {
    /// Cycle count of the current atom.
    fn atom_cc(&self) -> u32 {
        if !self.cycle_accurate {
            return 0;
        }
        match self.fmt {
            1 => 1,
            2 => u32::from(self.num > 1),
            3 => self.cycles,
            _ => 0,
        }
    }
    /// Cycle count of the atoms left.
    fn remaining_cc(&self) -> u32 {
        if !self.cycle_accurate {
            return 0;
        }
        match self.fmt {
            1 => u32::from(self.num),
            2 => u32::from(self.num > 1),
            3 => self.cycles,
            _ => 0,
        }
    }
    fn clear_atom(&mut self) {
        self.bits >>= 1;
        self.num = self.num.saturating_sub(1);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    NoSync,
    WaitAsync,
    WaitIsync,
    DecodePkts,
    SendPkts,
}

/// A decode error: what to log, and the response to give.
struct DecodeFault {
    code: ErrCode,
    msg: &'static str,
    resp: DatapathResp,
}

/// ETMv3 packet decoder (OpenCSD's `TrcPktDecodeEtmV3`).
pub struct Etmv3Decoder {
    /// The end-of-trace element went out (see [`PacketDecoder`]).
    eot_sent: bool,
    cfg: Etmv3Config,
    trace_id: u8,
    err: ErrLink,
    mem: Option<Shared<dyn TargetMemAccess>>,
    instr_dec: Shared<dyn InstrDecode>,
    out: Shared<ElemRouter>,

    state: State,
    unsync: UnsyncInfo,
    iaddr: u64,
    need_addr: bool,
    sent_unknown: bool,
    wait_isync: bool,
    pe_ctx: PeContext,
    follower: Follower,
    /// Code and classified instructions remembered per address: every
    /// atom classifies one instruction, mostly ones seen before.
    walker: Walker,
    /// The classifier carries no state into this packet's atoms, so
    /// remembered instructions may stand in for it (see [`Walker::singles`]).
    remembered_ok: bool,
    /// `remembered_ok` and the memory were checked in this run of
    /// P-headers.
    code_checked: bool,
    /// The classifier carries no state now, as last checked or left by
    /// the last instruction classified (which also brought the remembered
    /// instructions in step with the memory): what the next packet's check
    /// would find.
    clean: bool,
    /// The atoms of each P-header byte, for this source's setting.
    phdr: Box<[PHdrAtoms; 256]>,
    list: ElemList,
    pkt: Etmv3Packet,
    index: TrcIndex,
    /// The VMID the serial decode had at the sync point this decoder was
    /// started at ([`PacketDecoder::on_resume`]): the first I-sync keeps
    /// it, as the serial decoder's context did.
    resume_vmid: Option<u32>,
}

impl Etmv3Decoder {
    /// A decoder for one ETMv3 source, reporting errors through the tree's log (and warning
    /// when the source traces data, which is not decoded).
    pub fn new(cfg: Etmv3Config, ctx: &DecodeContext) -> Etmv3Decoder {
        let err = ErrLink::new(&ctx.err_log, ctx.component_name("DCD_ETMV3"));
        if cfg.trace_mode() != Etmv3TraceMode::InstrOnly {
            err.log(
                &TraceError::new(Severity::Error, ErrCode::HwCfgUnsupp)
                    .with_message("ETMv3 trace decoder : data trace decode not yet supported"),
            );
        }
        let instr = InstrInfo {
            pe_type: cfg.arch,
            // What follows an atom the classifier refuses (Jazelle or ThumbEE
            // code from a damaged I-sync) is decoded in the ISA the last
            // classified instruction left; before any, OpenCSD reads a field
            // it never set, in practice zero: A32.
            next_isa: Isa::Arm,
            ..InstrInfo::default()
        };
        Etmv3Decoder {
            eot_sent: false,
            cfg,
            trace_id: cfg.trace_id(),
            err,
            mem: ctx.mem.clone(),
            instr_dec: ctx.instr.clone(),
            out: ctx.elem_out.clone(),
            state: State::NoSync,
            unsync: UnsyncInfo::InitDecoder,
            iaddr: 0,
            need_addr: true,
            sent_unknown: false,
            wait_isync: false,
            pe_ctx: PeContext::default(),
            follower: Follower {
                instr,
                space: MemSpace::S,
            },
            walker: Walker::new(WalkOptions::default()),
            remembered_ok: false,
            code_checked: false,
            clean: false,
            phdr: Etmv3Packet::phdr_table(cfg.cycle_accurate()),
            list: ElemList::new(),
            pkt: Etmv3Packet::default(),
            index: 0,
            resume_vmid: None,
        }
    }

    fn reset_decoder(&mut self) {
        self.state = State::NoSync;
        self.need_addr = true;
        self.sent_unknown = false;
        self.wait_isync = false;
        self.list.reset();
    }

    fn set_need_addr(&mut self, need: bool) {
        self.need_addr = need;
        self.sent_unknown = false;
    }

    #[inline]
    fn next_elem(&mut self) -> usize {
        self.list.next(self.index)
    }

    fn send(&mut self) -> DatapathResp {
        self.list.send(&self.out, self.trace_id)
    }

    fn after_send_state(&self) -> State {
        if self.wait_isync {
            State::WaitIsync
        } else {
            State::DecodePkts
        }
    }

    fn process_packet(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        let mut done = false;
        while !done {
            match self.state {
                State::NoSync => {
                    let slot = self.next_elem();
                    let e = self.list.elem(slot);
                    e.set_type(ElemType::NoSync);
                    e.unsync_info = self.unsync;
                    resp = self.send();
                    self.state = State::WaitAsync;
                }
                State::WaitAsync => {
                    if self.pkt.pkt_type == Etmv3PktType::ASync {
                        self.state = State::WaitIsync;
                    }
                    done = true;
                }
                State::WaitIsync => {
                    self.wait_isync = true;
                    match self.pkt.pkt_type {
                        Etmv3PktType::ISync | Etmv3PktType::ISyncCycle => {
                            resp = self.process_isync(true);
                            self.state = State::SendPkts;
                            self.wait_isync = false;
                        }
                        t if self.valid_before_isync(t) => resp = self.decode_packet(&mut done),
                        _ => done = true,
                    }
                }
                State::DecodePkts => resp = self.decode_packet(&mut done),
                State::SendPkts => {
                    resp = self.send();
                    if resp.is_cont() {
                        self.state = self.after_send_state();
                    }
                    done = true;
                }
            }
        }
        resp
    }

    /// Packets that may be decoded between the A-sync and the first I-sync.
    fn valid_before_isync(&self, t: Etmv3PktType) -> bool {
        t == Etmv3PktType::Timestamp
            || (self.cfg.cycle_accurate() && matches!(t, Etmv3PktType::CycleCount | Etmv3PktType::PHdr))
    }

    fn decode_packet(&mut self, done: &mut bool) -> DatapathResp {
        use Etmv3PktType as T;
        // Held-back elements stand unless a branch packet cancels them.
        if self.pkt.pkt_type != T::BranchAddress {
            self.list.commit_all();
        }
        let result = match self.pkt.pkt_type {
            T::NotSync => Err(DecodeFault {
                code: ErrCode::BadPacketSeq,
                msg: "Trace Packet Synchronisation Lost",
                resp: DatapathResp::Cont,
            }),
            T::IncompleteEot | T::ASync | T::Ignore => Ok(DatapathResp::Cont),
            T::CycleCount => {
                let cc = self.pkt.cycle_count;
                let slot = self.next_elem();
                let e = self.list.elem(slot);
                e.set_type(ElemType::CycleCount);
                e.set_cycle_count(cc);
                Ok(DatapathResp::Cont)
            }
            T::Trigger => {
                let slot = self.next_elem();
                let e = self.list.elem(slot);
                e.set_type(ElemType::Event);
                e.event_type = EventType::Trigger;
                e.event_number = 0;
                Ok(DatapathResp::Cont)
            }
            T::BranchAddress => Ok(self.process_branch_addr()),
            T::ISync | T::ISyncCycle => Ok(self.process_isync(false)),
            T::PHdr => Ok(self.process_phdr()),
            T::ContextId => {
                self.pe_ctx.context_id = self.pkt.context_id;
                self.pe_ctx.ctxt_id_valid = true;
                let ctx = self.pe_ctx;
                let slot = self.next_elem();
                let e = self.list.elem(slot);
                e.set_type(ElemType::PeContext);
                e.context = ctx;
                Ok(DatapathResp::Cont)
            }
            T::Vmid => {
                self.pe_ctx.vmid = u32::from(self.pkt.vmid);
                self.pe_ctx.vmid_valid = true;
                let ctx = self.pe_ctx;
                let slot = self.next_elem();
                let e = self.list.elem(slot);
                e.set_type(ElemType::PeContext);
                e.context = ctx;
                Ok(DatapathResp::Cont)
            }
            T::ExceptionEntry => {
                // A v7-M data marker: an exception element with no details.
                let slot = self.next_elem();
                self.list.elem(slot).set_type(ElemType::Exception);
                Ok(DatapathResp::Cont)
            }
            T::ExceptionExit => {
                let slot = self.next_elem();
                self.list.elem(slot).set_type(ElemType::ExceptionRet);
                self.pend_exception_return();
                Ok(DatapathResp::Cont)
            }
            T::Timestamp => {
                let ts = self.pkt.timestamp;
                let slot = self.next_elem();
                let e = self.list.elem(slot);
                e.set_type(ElemType::Timestamp);
                e.timestamp = ts;
                Ok(DatapathResp::Cont)
            }
            T::StoreFail
            | T::OooData
            | T::OooAddrPlc
            | T::NormData
            | T::DataSuppressed
            | T::ValNotTraced
            | T::BadTraceMode => Err(DecodeFault {
                code: ErrCode::HwCfgUnsupp,
                msg: "Invalid packet type : Data Tracing decode not supported.",
                resp: DatapathResp::FatalInvalidData,
            }),
            T::BadSequence => Err(DecodeFault {
                code: ErrCode::BadPacketSeq,
                msg: "Bad Packet sequence.",
                resp: DatapathResp::FatalInvalidData,
            }),
            T::NoError | T::Reserved => Err(DecodeFault {
                code: ErrCode::BadPacketSeq,
                msg: "Reserved or unknown packet ID.",
                resp: DatapathResp::FatalInvalidData,
            }),
        };
        match result {
            Ok(resp) => {
                let to_send = self.list.elem_to_send();
                self.state = if to_send { State::SendPkts } else { State::DecodePkts };
                *done = !to_send;
                resp
            }
            Err(f) => {
                self.err.log(
                    &TraceError::new(Severity::Error, f.code)
                        .at(self.index)
                        .on_id(self.trace_id)
                        .with_message(f.msg),
                );
                self.unsync = UnsyncInfo::BadPacket;
                self.reset_decoder();
                // The serial decoder lost its context here too.
                self.resume_vmid = None;
                *done = true;
                f.resp
            }
        }
    }

    fn process_isync(&mut self, first_sync: bool) -> DatapathResp {
        let ctxt_update = self.pkt.is_ctxt_updated();
        let mut slot = self.next_elem();
        if first_sync || self.pkt.isync_reason != ISyncReason::Periodic {
            let e = self.list.elem(slot);
            e.set_type(ElemType::TraceOn);
            e.trace_on_reason = match self.pkt.isync_reason {
                ISyncReason::RestartOverflow => TraceOnReason::Overflow,
                ISyncReason::DebugExit => TraceOnReason::ExDebug,
                _ => TraceOnReason::Normal,
            };
            slot = self.next_elem();
        }
        if ctxt_update || first_sync {
            if first_sync {
                self.pe_ctx = PeContext::default();
                if let Some(vmid) = self.resume_vmid.take() {
                    self.pe_ctx.vmid = vmid;
                    self.pe_ctx.vmid_valid = true;
                }
            }
            if self.pkt.ctxt_id_updated {
                self.pe_ctx.context_id = self.pkt.context_id;
                self.pe_ctx.ctxt_id_valid = true;
            }
            if self.pkt.vmid_updated {
                self.pe_ctx.vmid = u32::from(self.pkt.vmid);
                self.pe_ctx.vmid_valid = true;
            }
            if self.pkt.ctx_updated {
                self.set_el(if self.pkt.hyp {
                    ExceptionLevel::El2
                } else {
                    ExceptionLevel::Unknown
                });
                self.pe_ctx.security = if self.pkt.ns {
                    SecurityState::NonSecure
                } else {
                    SecurityState::Secure
                };
            }
            let (ctx, isa, has_cc, cc) = (
                self.pe_ctx,
                self.pkt.curr_isa,
                self.pkt.isync_has_cc,
                self.pkt.cycle_count,
            );
            let e = self.list.elem(slot);
            e.set_type(ElemType::PeContext);
            e.context = ctx;
            e.isa = isa;
            if has_cc {
                e.set_cycle_count(cc);
            }
        }
        if !self.pkt.isync_no_addr {
            // (A load/store-in-progress address is already merged in.)
            self.iaddr = self.pkt.addr;
            self.set_need_addr(false);
        }
        self.state = if self.list.elem_to_send() {
            State::SendPkts
        } else {
            State::DecodePkts
        };
        DatapathResp::Cont
    }

    fn set_el(&mut self, el: ExceptionLevel) {
        self.pe_ctx.exception_level = el;
        self.pe_ctx.el_valid = el != ExceptionLevel::Unknown;
    }

    fn process_branch_addr(&mut self) -> DatapathResp {
        if self.pkt.is_excep_cancel() {
            self.list.cancel_pend();
        } else {
            self.list.commit_all();
        }
        self.iaddr = self.pkt.addr;
        self.set_need_addr(false);

        if self.pkt.exception.present {
            let mut update_ctx = false;
            if self.pkt.is_ctxt_updated() {
                let sec = if self.pkt.ns {
                    SecurityState::NonSecure
                } else {
                    SecurityState::Secure
                };
                if sec != self.pe_ctx.security {
                    self.pe_ctx.security = sec;
                    update_ctx = true;
                }
                let el = if self.pkt.hyp {
                    ExceptionLevel::El2
                } else {
                    ExceptionLevel::Unknown
                };
                if el != self.pe_ctx.exception_level {
                    self.set_el(el);
                    update_ctx = true;
                }
            }
            if update_ctx {
                let ctx = self.pe_ctx;
                let slot = self.next_elem();
                let e = self.list.elem(slot);
                e.set_type(ElemType::PeContext);
                e.context = ctx;
            }
            if self.pkt.exception.number != 0 {
                let num = u32::from(self.pkt.exception.number);
                let slot = self.next_elem();
                let e = self.list.elem(slot);
                e.set_type(ElemType::Exception);
                e.exception_number = num;
            }
            self.state = if self.list.elem_to_send() {
                State::SendPkts
            } else {
                State::DecodePkts
            };
        }
        DatapathResp::Cont
    }

    fn process_phdr(&mut self) -> DatapathResp {
        let atoms = PHdrAtoms {
            bits: self.pkt.atom_bits,
            cycles: self.pkt.cycle_count,
            num: self.pkt.atom_num,
            fmt: self.pkt.p_hdr_fmt,
        };
        self.follower.space = self.mem_space();
        self.remembered_ok = false;
        if atoms.num > 0 && !self.need_addr {
            self.check_code();
        }
        self.phdr_atoms(atoms);

        // A last instruction range may yet be cancelled by an exception.
        let n = self.list.num();
        if n >= 1 && self.list.elem_type(n - 1) == ElemType::InstrRange {
            self.list.pend_last(1);
        }
        self.state = if self.list.elem_to_send() {
            State::SendPkts
        } else {
            State::DecodePkts
        };
        DatapathResp::Cont
    }

    fn mem_space(&self) -> MemSpace {
        if self.pe_ctx.security == SecurityState::Secure {
            MemSpace::S
        } else {
            MemSpace::N
        }
    }

    /// Brings the remembered instructions in step with the memory, and
    /// says whether they may stand in for the classifier: classifying
    /// A32, T32 (IT blocks not tracked) or A64 never makes it carry
    /// state, so with no state now there is none until it next classifies.
    #[inline(always)]
    fn check_code(&mut self) {
        if let Some(mem) = &self.mem {
            self.walker.sync_memory(mem.borrow().generation(self.trace_id));
            self.clean = self.instr_dec.borrow().carried_state() == 0;
            self.remembered_ok = self.clean;
        }
        self.code_checked = true;
    }

    /// A run of P-headers given as their bytes (see
    /// [`PacketDecoder::on_packet_bytes`]), taken while the decoder is in
    /// step: each is decoded as [`process_phdr`](Self::process_phdr)
    /// would, and the elements of the run go out together (in packet
    /// order, each with its packet's index), so the sink is called once
    /// for several packets rather than once a packet. Stops at a byte that
    /// is not a valid P-header, which the processor then builds and sends.
    fn phdr_bytes(&mut self, index: TrcIndex, run: &[u8]) -> (DatapathResp, usize) {
        if self.state != State::DecodePkts || self.wait_isync {
            return (DatapathResp::Cont, 0);
        }
        self.follower.space = self.mem_space();
        self.code_checked = false;
        // What the packet-at-a-time decode would hold after the last
        // packet's send: only a held-back range.
        let mut held = self.list.num();
        let mut resp = DatapathResp::Cont;
        let mut i = 0;
        while i < run.len() {
            let atoms = self.phdr[run[i] as usize];
            if atoms.fmt == 0 {
                break;
            }
            // Fields an element type does not set keep the ring slot's
            // values, so the ring must grow just where the
            // packet-at-a-time decode's does: what is gathered goes out
            // before this packet could fill it (a packet gives at most an
            // element per atom and one more).
            if self.list.free() < usize::from(atoms.num) + 1 && self.list.elem_to_send() {
                resp = self.send();
                self.code_checked = false;
                if !resp.is_cont() {
                    break;
                }
            }
            self.index = index + i as u64;
            i += 1;
            self.list.commit_all();
            if atoms.num > 0 && !self.need_addr {
                if self.code_checked {
                    self.remembered_ok = self.clean;
                } else {
                    self.check_code();
                }
            }
            let before = self.list.num();
            self.phdr_atoms(atoms);
            let n = self.list.num();
            // As process_phdr holds back a last range: when it is the only
            // element the packet-at-a-time decode would have.
            held = if held + n - before <= 1 && n >= 1 && self.list.elem_type(n - 1) == ElemType::InstrRange {
                self.list.pend_last_of_run();
                1
            } else {
                0
            };
        }
        if resp.is_cont() && self.list.elem_to_send() {
            resp = self.send();
        }
        if i > 0 {
            self.pkt.pkt_type = Etmv3PktType::PHdr;
        }
        self.state = if resp.is_cont() {
            State::DecodePkts
        } else {
            State::SendPkts
        };
        (resp, i)
    }

    /// The elements of a P-header's atoms: a range (and cycle count) per
    /// atom from the current address, or cycle counts without one.
    #[inline(always)]
    fn phdr_atoms(&mut self, phdr: PHdrAtoms) {
        let ca = self.cfg.cycle_accurate();
        let mut atoms = Atoms {
            bits: phdr.bits,
            num: phdr.num,
            fmt: phdr.fmt,
            cycles: phdr.cycles,
            cycle_accurate: ca,
        };
        let mut isa = self.pkt.curr_isa;
        while !self.need_addr {
            if atoms.num == 0 {
                // No atom: the cycles alone (without cycle accuracy, an
                // empty range as OpenCSD gives).
                let cc = atoms.atom_cc();
                let e = self.list.push(self.index);
                if ca {
                    e.set_type(ElemType::CycleCount);
                    e.set_cycle_count(cc);
                } else {
                    e.set_type(ElemType::InstrRange);
                }
                return;
            }
            if self.remembered_ok {
                isa = self.remembered_atoms(&mut atoms, isa);
                if atoms.num == 0 {
                    return;
                }
                if self.need_addr {
                    break;
                }
            }
            let cc = atoms.atom_cc();
            let atom_e = atoms.bits & 1 != 0;
            isa = self.classified_atom(isa, atom_e, cc);
            atoms.clear_atom();
            if atoms.num == 0 {
                return;
            }
        }
        // No address: report the cycles (and, once, that the address is
        // unknown) and drop the atoms.
        if !self.sent_unknown || ca {
            let t = if self.sent_unknown || atoms.num == 0 {
                ElemType::CycleCount
            } else {
                ElemType::AddrUnknown
            };
            let cc = atoms.remaining_cc();
            let slot = self.next_elem();
            let e = self.list.elem(slot);
            e.set_type(t);
            if ca {
                e.set_cycle_count(cc);
            }
            self.sent_unknown = true;
        }
    }

    /// The elements of the atoms on instructions classified before, read
    /// where they are remembered (most atoms), from the current address in
    /// `isa` until an atom is not on one, the address is lost, or the
    /// atoms run out. Returns the instruction set of the next atom. The
    /// follower keeps only what a later refused atom reads: the ISA the
    /// last one leaves.
    #[inline(always)]
    fn remembered_atoms(&mut self, atoms: &mut Atoms, mut isa: Isa) -> Isa {
        let Some(singles) = self.walker.singles(self.follower.space) else {
            return isa;
        };
        let ca = atoms.cycle_accurate;
        let index = self.index;
        let list = &mut self.list;
        let mut addr = self.iaddr;
        let mut next_isa = None;
        let mut lost = false;
        while let Some(s) = singles.get(addr, isa) {
            let en = addr.wrapping_add(u64::from(s.instr_size));
            if addr >= en {
                break;
            }
            let atom_e = atoms.bits & 1 != 0;
            let e = list.push(index);
            e.set_type(ElemType::InstrRange);
            if ca {
                e.set_cycle_count(atoms.atom_cc());
            }
            fill_one_instr_range(e, LastInstr::of_single(s), addr, en, atom_e, isa);
            next_isa = Some(s.next_isa);
            isa = s.next_isa;
            match s.instr_type {
                InstrType::Branch if atom_e => addr = s.branch_addr,
                InstrType::BranchIndirect if atom_e => lost = true,
                _ => addr = en,
            }
            atoms.clear_atom();
            if atoms.num == 0 || lost {
                break;
            }
        }
        self.iaddr = addr;
        if let Some(n) = next_isa {
            self.follower.instr.next_isa = n;
        }
        if lost {
            self.set_need_addr(true);
        }
        isa
    }

    /// The elements of an atom on an instruction not remembered (or that
    /// cannot be): classified now, or an ADDR_NACC where the memory has no
    /// code. Returns the instruction set of the next atom.
    #[inline(never)]
    fn classified_atom(&mut self, isa: Isa, atom_e: bool, cc: u32) -> Isa {
        let ca = self.cfg.cycle_accurate();
        let addr = self.iaddr;
        let e = self.list.push(self.index);
        e.set_type(ElemType::InstrRange);
        if ca {
            e.set_cycle_count(cc);
        }
        let f = &mut self.follower;
        f.instr.isa = isa;
        // Errors show as no range (and an ADDR_NACC for memory).
        let read = match self.mem.as_ref() {
            Some(mem) => {
                f.instr.instr_addr = addr;
                let mut mem = mem.borrow_mut();
                let mut dec = self.instr_dec.borrow_mut();
                let read =
                    self.walker
                        .classify_one(&mut *mem, &mut *dec, &mut f.instr, self.trace_id, f.space, self.clean);
                self.clean = match read {
                    Ok(Some(clean)) => clean,
                    Ok(None) => self.clean,
                    Err(_) => dec.carried_state() == 0,
                };
                if read == Ok(Some(true)) {
                    // Code is mostly run once, in straight lines: what
                    // follows is classified now, in one go.
                    self.walker.classify_ahead(&mut *dec, &f.instr, f.space, CLASSIFY_AHEAD);
                }
                read
            }
            None => Err(ErrCode::NotInit),
        };
        let fi = &f.instr;
        let en = addr.wrapping_add(u64::from(fi.instr_size));
        if matches!(read, Ok(Some(_))) && addr < en {
            fill_one_instr_range(e, LastInstr::of_instr(fi), addr, en, atom_e, isa);
            match fi.instr_type {
                InstrType::Branch if atom_e => self.iaddr = fi.branch_addr,
                InstrType::BranchIndirect if atom_e => self.set_need_addr(true),
                _ => self.iaddr = en,
            }
        } else if read == Ok(None) {
            // The range element becomes the NACC, flags kept.
            let space = f.space;
            e.elem_type = ElemType::AddrNacc;
            e.st_addr = addr;
            e.mem_space = space;
            e.exception_number = u32::from(space.bits());
            self.set_need_addr(true);
        }
        // (After an error too, as the last instruction classified left it.)
        let fi = &self.follower.instr;
        if fi.isa != fi.next_isa { fi.next_isa } else { isa }
    }

    /// Holds back an exception return, with the range before it on A/R
    /// cores (an exception may yet cancel that instruction).
    fn pend_exception_return(&mut self) {
        let mut n = 1;
        if self.cfg.arch.profile != CoreProfile::CortexM {
            let num = self.list.num();
            if num > 1 && self.list.elem_type(num - 2) == ElemType::InstrRange {
                n = 2;
            }
        }
        self.list.pend_last(n);
    }

    /// Sends the elements a wait held back.
    fn flush(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        if self.state == State::SendPkts {
            resp = self.send();
            if resp.is_cont() {
                self.state = self.after_send_state();
            }
        }
        resp
    }
}

impl PacketDecoder for Etmv3Decoder {
    type Packet = Etmv3Packet;
    fn eot_done(&mut self) -> &mut bool {
        &mut self.eot_sent
    }
    fn on_packet(&mut self, index: TrcIndex, pkt: &Etmv3Packet) -> DatapathResp {
        self.pkt = *pkt;
        self.index = index;
        self.process_packet()
    }
    fn on_packet_bytes(&mut self, index: TrcIndex, run: &[u8]) -> (DatapathResp, usize) {
        self.phdr_bytes(index, run)
    }
    fn on_eot(&mut self) -> DatapathResp {
        let slot = self.next_elem();
        let e = self.list.elem(slot);
        e.set_type(ElemType::EoTrace);
        e.unsync_info = UnsyncInfo::Eot;
        self.list.commit_all();
        self.state = State::SendPkts;
        let resp = self.send();
        if resp.is_cont() {
            self.state = State::DecodePkts;
        }
        resp
    }
    /// The end-of-trace element may be among what a wait held back.
    fn on_eot_again(&mut self) -> DatapathResp {
        self.flush()
    }
    fn on_flush(&mut self) -> DatapathResp {
        self.flush()
    }
    fn on_resume(&mut self, state: &ResumeState) -> bool {
        self.resume_vmid = state.vmid;
        state.vmid.is_some()
    }
    fn on_reset(&mut self, _index: TrcIndex) -> DatapathResp {
        self.unsync = UnsyncInfo::ResetDecoder;
        self.reset_decoder();
        DatapathResp::Cont
    }
}
