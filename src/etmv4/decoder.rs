//! ETMv4 / ETE packet decoder: packets to generic trace elements.
//!
//! Packets become elements on a speculation stack ("P0" elements: atoms,
//! exceptions, ...; and the non-P0 ones that travel with them: addresses,
//! contexts, timestamps, ...). Commit, cancel, mispredict and discard
//! resolve the stack from its oldest end; committed atoms are followed
//! through the program image to the next waypoint, producing instruction
//! ranges. Output elements collect on a small stack and are sent in order,
//! honouring a `Wait` from the sink: sending resumes on the next flush.

use std::collections::VecDeque;

use crate::arch::{ExceptionLevel, InstrInfo, InstrSubType, InstrType, Isa, SecurityState};
use crate::datapath::{DatapathResp, TrcIndex};
use crate::decoder::{DecodeContext, DecoderOptions, ElemRouter, PacketDecoder};
use crate::element::{ElemType, EventType, TraceElement, TraceOnReason, UnsyncInfo};
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::interfaces::{InstrDecode, RunAddr, TargetMemAccess, TrcGenElemIn};
use crate::logger::ErrLink;
use crate::memory::MemSpace;
use crate::shared::Shared;
use crate::walk::{WalkEnd, WalkOptions, Walked, Walker, WaypointBlocks};

use super::config::EtmV4Config;
use super::packet::{Atoms, EtmV4Packet, PktContext, PktType};

mod atoms;
mod waypoints;
use atoms::fill_range;

/// Decoder state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not synchronised: report it, then wait for an alignment sync.
    NoSync,
    WaitSync,
    /// Synchronised: wait for the trace info packet decode starts from.
    WaitTraceInfo,
    DecodePackets,
    /// Resolving the speculation stack / sending elements.
    ResolveElements,
}

/// Kind of a speculation-stack element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum P0Kind {
    Atom,
    Addr,
    Ctxt,
    TraceOn,
    Exception,
    ExceptionRet,
    Event,
    Ts,
    Cc,
    TsCc,
    Marker,
    Q,
    FuncRet,
    SrcAddr,
    TransTraceInit,
    TransStart,
    TransCommit,
    TransFail,
    Ite,
    /// Speculative elements from before the trace info packet: as many as
    /// `params[0]` says (one stack entry for them all, so that a corrupt
    /// depth cannot make the stack huge).
    UnseenUncommitted,
    TraceInfo,
}

/// One speculation-stack element. Small and `Copy`: the stack never
/// allocates once it has grown to its working size.
#[derive(Clone, Copy, Debug)]
struct P0Elem {
    kind: P0Kind,
    /// A genuine P0 element (counts for commit and cancel).
    is_p0: bool,
    index: TrcIndex,
    addr: u64,
    addr_is: u8,
    context: PktContext,
    atoms: Atoms,
    excep_num: u16,
    /// Exception address is also the previous branch target.
    prev_same: bool,
    params: [u32; 3],
    q_count: u32,
    q_has_addr: bool,
    ite_el: u8,
    ite_value: u64,
}

impl P0Elem {
    fn new(kind: P0Kind, is_p0: bool, index: TrcIndex) -> Self {
        P0Elem {
            kind,
            is_p0,
            index,
            addr: 0,
            addr_is: 0,
            context: PktContext::default(),
            atoms: Atoms::default(),
            excep_num: 0,
            prev_same: false,
            params: [0; 3],
            q_count: 0,
            q_has_addr: false,
            ite_el: 0,
            ite_value: 0,
        }
    }

    /// Cancels up to `n` of the newest atoms; returns how many.
    fn cancel_newest(&mut self, n: u32) -> u32 {
        let k = n.min(self.atoms.num as u32);
        self.atoms.num -= k as u8;
        k
    }

    fn mispredict_newest(&mut self) {
        if self.atoms.num > 0 {
            self.atoms.en_bits ^= 1 << (self.atoms.num - 1);
        }
    }
}

/// What resolving the stack still has to do.
#[derive(Clone, Copy, Debug, Default)]
struct ElemRes {
    commit: i64,
    cancel: i64,
    mispredict: bool,
    discard: bool,
}

impl ElemRes {
    fn pending(&self) -> bool {
        self.commit != 0 || self.cancel != 0 || self.mispredict || self.discard
    }
}

/// Return address stack (TRCCONFIGR.RS), as the trace unit keeps it.
#[derive(Clone, Debug)]
struct ReturnStack {
    active: bool,
    entries: [(u64, Isa); 16],
    head: usize,
    num: i32,
    pop_pending: bool,
    /// A trace info was committed and no address since: pushes are
    /// ignored until the address that restarts the program flow.
    tinfo_wait_addr: bool,
}

impl ReturnStack {
    fn new(active: bool) -> Self {
        ReturnStack {
            active,
            entries: [(0, Isa::Unknown); 16],
            head: 0,
            num: 0,
            pop_pending: false,
            tinfo_wait_addr: false,
        }
    }
    /// Empties the stack; a pop waiting on the next packet goes too (a
    /// trace on or trace info after an indirect branch pops nothing).
    fn flush(&mut self) {
        self.head = 0;
        self.num = 0;
        self.pop_pending = false;
    }
    fn overflow(&self) -> bool {
        self.num < 0
    }
    fn push(&mut self, addr: u64, isa: Isa) {
        if !self.active || self.tinfo_wait_addr {
            return;
        }
        if self.overflow() {
            self.num = 0;
            self.head = 0;
        }
        if self.num > 0 {
            self.head = (self.head + 1) & 0xF;
        }
        self.entries[self.head] = (addr, isa);
        if self.num < 16 {
            self.num += 1;
        }
    }
    fn pop(&mut self) -> (u64, Isa) {
        let mut v = (u64::MAX, Isa::Unknown);
        if self.active {
            if self.num > 0 {
                v = self.entries[self.head];
                self.head = self.head.wrapping_sub(1) & 0xF;
            }
            self.num -= 1;
        }
        self.pop_pending = false;
        v
    }
    fn set_pop_pending(&mut self) {
        self.pop_pending = self.active;
    }
    fn pop_pending(&self) -> bool {
        self.active && self.pop_pending
    }
}

/// Generic elements waiting to be sent. Slots are reused; a new element
/// starts with the previous one's ISA and PE context, as OpenCSD's do.
struct OutStack {
    elems: Vec<(TrcIndex, TraceElement)>,
    curr: usize,
    send_idx: usize,
    to_send: usize,
    /// Slots `ctx_same.0..ctx_same.1` hold one and the same PE context.
    /// The atom fast path fills its slots ahead with the current context
    /// ([`fill_context`](Self::fill_context)), which then costs nothing
    /// per atom while the context stays: it changes rarely, and a range
    /// per atom is most of a trace.
    ctx_same: (usize, usize),
}

impl OutStack {
    fn new() -> Self {
        OutStack {
            elems: vec![(0, TraceElement::default()); 8],
            curr: 0,
            send_idx: 0,
            to_send: 0,
            ctx_same: (0, 8),
        }
    }

    fn in_ctx_same(&self, slot: usize) -> bool {
        (self.ctx_same.0..self.ctx_same.1).contains(&slot)
    }

    /// The context of `slot` may have changed: the span of slots with the
    /// same context is cut there.
    fn ctx_changed(&mut self, slot: usize) {
        let (lo, hi) = self.ctx_same;
        if (lo..hi).contains(&slot) {
            self.ctx_same = if slot - lo >= hi - slot {
                (lo, slot)
            } else {
                (slot + 1, hi)
            };
        }
    }

    /// Makes slots `from..to` (`from` is the current slot or the one
    /// after it) hold the current slot's PE context.
    #[inline]
    fn fill_context(&mut self, from: usize, to: usize) {
        debug_assert!(from == self.curr || from == self.curr + 1);
        let (lo, hi) = self.ctx_same;
        if (lo..hi).contains(&self.curr) {
            if to > hi {
                self.fill_context_slots(hi, to);
                self.ctx_same.1 = to;
            }
        } else {
            self.fill_context_slots(from, to);
            self.ctx_same = (self.curr, to.max(self.curr + 1));
        }
    }

    #[cold]
    #[inline(never)]
    fn fill_context_slots(&mut self, from: usize, to: usize) {
        let ctx = self.elems[self.curr].1.context;
        for (_, e) in &mut self.elems[from..to] {
            e.context = ctx;
        }
    }

    fn copy_persistent(&mut self, from: usize, to: usize) {
        let (isa, ctx) = (self.elems[from].1.isa, self.elems[from].1.context);
        let e = &mut self.elems[to].1;
        e.isa = isa;
        e.context = ctx;
        if !self.in_ctx_same(from) {
            self.ctx_changed(to);
        }
    }

    fn reset(&mut self) {
        if self.curr > 0 {
            self.copy_persistent(self.curr, 0);
        }
        self.curr = 0;
        self.send_idx = 0;
        self.to_send = 0;
    }

    #[inline]
    fn add(&mut self, index: TrcIndex) {
        if self.to_send > 0 {
            self.curr += 1;
            if self.curr >= self.elems.len() {
                self.grow();
            }
            // The previous slot and the new one, with one bounds check.
            if let [(_, prev), (idx, e)] = &mut self.elems[self.curr - 1..=self.curr] {
                e.isa = prev.isa;
                e.context = prev.context;
                *idx = index;
            }
            if self.curr == self.ctx_same.0 {
                // The slot before is outside the span: this one may now
                // differ from it.
                self.ctx_changed(self.curr);
            }
        } else {
            self.elems[self.curr].0 = index;
        }
        self.to_send += 1;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.elems.push((0, TraceElement::default()));
    }

    /// Makes sure there are at least `len` slots.
    #[inline]
    fn reserve(&mut self, len: usize) {
        while self.elems.len() < len {
            self.grow();
        }
    }

    #[inline]
    fn add_type(&mut self, index: TrcIndex, t: ElemType) {
        self.add(index);
        self.elems[self.curr].1.set_type(t);
    }

    #[inline]
    fn cur(&mut self) -> &mut TraceElement {
        &mut self.elems[self.curr].1
    }

    fn cur_ref(&self) -> &TraceElement {
        &self.elems[self.curr].1
    }

    fn send(&mut self, out: &Shared<ElemRouter>, trace_id: u8) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        if self.to_send > 0 {
            // One call for the run: a sink that takes runs at once (a
            // muted printer) does no work per element.
            let run = &self.elems[self.send_idx..self.send_idx + self.to_send];
            let (r, n) = out.borrow_mut().trace_elems_in(trace_id, run);
            resp = r;
            let n = n.clamp(1, self.to_send);
            self.send_idx += n;
            self.to_send -= n;
        }
        if self.to_send == 0 {
            self.reset();
        }
        resp
    }

    /// [`send`](Self::send) but for the newest `keep` elements (which stay
    /// to be sent, or dropped by a reset, later). Apart from `send`: the
    /// common case keeps nothing.
    #[inline(never)]
    fn send_but(&mut self, out: &Shared<ElemRouter>, trace_id: u8, keep: usize) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        if self.to_send > keep {
            let count = self.to_send - keep;
            let run = &self.elems[self.send_idx..self.send_idx + count];
            let (r, n) = out.borrow_mut().trace_elems_in(trace_id, run);
            resp = r;
            let n = n.clamp(1, count);
            self.send_idx += n;
            self.to_send -= n;
        }
        if self.to_send == 0 {
            self.reset();
        }
        resp
    }
}

/// The most speculative P0 elements the decoder holds. TRCIDR8.MAXSPEC
/// is a 32-bit IMPLEMENTATION DEFINED field (any value up to 0xFFFFFFFF
/// is architecturally valid), so it cannot bound memory by itself; real
/// PEs report depths of tens to hundreds, bounded by their reorder
/// buffers. Past this many uncommitted P0 elements the oldest are
/// committed, as when a trace unit reaches its maximum depth, so the
/// stack stays a few hundred kilobytes whatever the register says.
pub const SPEC_DEPTH_LIMIT: u32 = 1 << 14;

/// Most elements held for a run of atom packets before they are sent.
const HELD_MAX: usize = 256;

/// Result of walking to a waypoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WpResult {
    NotFound,
    Found,
    /// Memory at the current address could not be read.
    Nacc,
}

/// An instruction range walked.
#[derive(Clone, Copy, Debug, Default)]
struct Range {
    st: u64,
    en: u64,
    num: u32,
}

/// Outcome of a decode step that may have hit a stream error: the error
/// was logged and the decoder reset to resynchronise (`Resync`), or it is
/// to stop decode (`Fatal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Resync,
    Fatal(ErrCode),
}

type Step = Result<(), Fault>;

/// The ETMv4 / ETE instruction trace decoder.
pub struct EtmV4Decoder {
    cfg: EtmV4Config,
    trace_id: u8,
    err: ErrLink,
    mem: Option<Shared<dyn TargetMemAccess>>,
    instr_dec: Shared<dyn InstrDecode>,
    out: Shared<ElemRouter>,
    options: DecoderOptions,

    state: State,
    unsync_info: UnsyncInfo,
    index_curr_pkt: TrcIndex,

    stack: VecDeque<P0Elem>,
    kept: Vec<P0Elem>,
    res: ElemRes,
    curr_spec_depth: i64,
    max_spec_depth: i64,

    need_ctxt: bool,
    need_addr: bool,
    elem_pending_addr: bool,
    prev_overflow: bool,
    last_is: u8,
    is_64bit: bool,
    is_secure: bool,
    /// Memory space of the current context (kept with the context).
    space: MemSpace,
    cc_threshold: u32,
    ete_first_ts_marker: bool,

    instr: InstrInfo,
    ret_stack: ReturnStack,
    out_stack: OutStack,
    /// Where the next range must start (range continuity check).
    next_range_check: Option<u64>,
    /// The program walk, with its code and block caches.
    code: Walker,
    /// The classifier's carried state as last read; `None` when it may
    /// have changed since (it is shared by the tree's decoders, so it is
    /// read again each time the decoder is entered, and after this
    /// decoder's own classifying outside a walk).
    carried: Option<u8>,
    /// ETE rather than ETMv4 (from the configuration; asked per atom).
    ete: bool,
    /// An M-profile PE (from the configuration).
    m_profile: bool,
    /// The memory's generation was looked at for this packet.
    mem_checked: bool,
    /// The atom fast path may run: there is memory to walk, and no
    /// consistency check that can fail is asked for (those are left to
    /// the general path).
    fast_ok: bool,
    /// The previous packet was an atom packet whose elements are held for
    /// this one, in the same block of data: memory and classifier cannot
    /// have changed since it was checked.
    in_atom_run: bool,
    /// The newest elements waiting that the current atom packet made
    /// before the sink asked to wait while the held ones were sent: sent
    /// only once the packet's other atoms are committed, so that an error
    /// there drops them (see `send_held`).
    held_keep: usize,
    /// End of trace handled (a repeated EOT only sends what is left).
    eot_done: bool,
    /// The atoms of each atom packet header byte, as the packet processor
    /// reads them, for atom packets given as bytes.
    atom_table: [Atoms; 256],
    /// Sync was lost while resolving a packet whose elements then had to
    /// wait: the NO_SYNC element is still to be sent, at the flush.
    no_sync_unreported: bool,
}

impl EtmV4Decoder {
    /// A decoder for `cfg`, connected as `ctx` says.
    pub fn new(cfg: EtmV4Config, ctx: &DecodeContext) -> Self {
        let (ete, m_profile) = (cfg.is_ete(), cfg.is_m_profile());
        let o = &ctx.options;
        let fast_ok = ctx.mem.is_some() && !(o.direct_br_cond || o.strict_br_cond || o.range_cont);
        let err = ErrLink::new(&ctx.err_log, ctx.component_name("DCD_ETMV4"));
        let instr = InstrInfo {
            pe_type: cfg.arch,
            wfi_wfe_branch: cfg.wfi_wfe_branch(),
            dsb_dmb_waypoints: false,
            track_it_block: true,
            ..Default::default()
        };
        let mut d = EtmV4Decoder {
            atom_table: super::processor::atom_table(&cfg),
            trace_id: cfg.trace_id(),
            max_spec_depth: cfg.max_spec_depth().min(SPEC_DEPTH_LIMIT) as i64,
            ret_stack: ReturnStack::new(cfg.enabled_ret_stack()),
            cfg,
            err,
            mem: ctx.mem.clone(),
            instr_dec: ctx.instr.clone(),
            out: ctx.elem_out.clone(),
            options: ctx.options,
            state: State::NoSync,
            unsync_info: UnsyncInfo::InitDecoder,
            index_curr_pkt: 0,
            stack: VecDeque::with_capacity(64),
            kept: Vec::with_capacity(16),
            res: ElemRes::default(),
            curr_spec_depth: 0,
            need_ctxt: true,
            need_addr: true,
            elem_pending_addr: false,
            prev_overflow: false,
            last_is: 0,
            is_64bit: false,
            is_secure: true,
            space: MemSpace::S,
            cc_threshold: 0,
            ete_first_ts_marker: false,
            instr,
            out_stack: OutStack::new(),
            next_range_check: None,
            code: Walker::new(WalkOptions {
                a64_opcode_check: ctx.options.aa64_opcode_check,
                mem_error_is_error: false,
                range_limit: ctx.options.instr_range_limit,
                eret_not_fast: ete,
                full_table: true,
            }),
            carried: None,
            ete,
            m_profile,
            mem_checked: false,
            fast_ok,
            in_atom_run: false,
            held_keep: 0,
            eot_done: false,
            no_sync_unreported: false,
        };
        d.reset_decoder();
        d
    }

    fn reset_decoder(&mut self) {
        self.state = State::NoSync;
        self.is_secure = true;
        self.update_mem_space();
        self.is_64bit = false;
        self.cc_threshold = 0;
        self.curr_spec_depth = 0;
        self.need_ctxt = true;
        self.need_addr = true;
        self.elem_pending_addr = false;
        self.prev_overflow = false;
        self.stack.clear();
        self.out_stack.reset();
        self.last_is = 0;
        self.res = ElemRes::default();
        self.next_range_check = None;
        self.ete_first_ts_marker = false;
        self.ret_stack.tinfo_wait_addr = false;
        self.no_sync_unreported = false;
        self.in_atom_run = false;
        self.held_keep = 0;
    }

    fn log(&self, sev: Severity, code: ErrCode, index: Option<TrcIndex>, msg: &str) {
        let mut e = TraceError::new(sev, code).with_message(msg);
        if let Some(i) = index {
            e = e.at(i).on_id(self.trace_id);
        }
        self.err.log(&e);
    }

    /// Logs a stream error; resets to resynchronise unless told to halt.
    /// The error always names the trace ID, with or without an index (as
    /// OpenCSD's handlePacketErr: `...; CS ID=27; Trace Return Stack Overflow.`).
    fn packet_err(&mut self, code: ErrCode, sev: Severity, index: Option<TrcIndex>, msg: &str) -> Step {
        self.packet_err_unsync(code, sev, index, msg, UnsyncInfo::BadPacket)
    }

    /// Logs an error; then stops (with halt on error) or resynchronises,
    /// the next `NO_SYNC` giving `reason`.
    fn packet_err_unsync(
        &mut self,
        code: ErrCode,
        sev: Severity,
        index: Option<TrcIndex>,
        msg: &str,
        reason: UnsyncInfo,
    ) -> Step {
        let mut e = TraceError::new(sev, code).with_message(msg).on_id(self.trace_id);
        if let Some(i) = index {
            e = e.at(i);
        }
        self.err.log(&e);
        if self.options.halt_on_error {
            return Err(Fault::Fatal(code));
        }
        self.reset_decoder();
        self.state = State::NoSync;
        self.unsync_info = reason;
        Err(Fault::Resync)
    }

    fn seq_err(&mut self, code: ErrCode, index: Option<TrcIndex>, msg: &str) -> Step {
        self.packet_err(code, Severity::Error, index, msg)
    }

    fn bad_packet(&mut self, msg: &str) -> Step {
        let idx = Some(self.index_curr_pkt);
        self.packet_err(ErrCode::BadDecodePkt, Severity::Warn, idx, msg)
    }

    fn calc_isa(&self, sf: bool, is: u8) -> Isa {
        if self.m_profile {
            Isa::Thumb2
        } else if sf {
            Isa::Aarch64
        } else if is == 0 {
            Isa::Arm
        } else {
            Isa::Thumb2
        }
    }

    fn set_instr_addr_isa(&mut self, addr: u64, is: u8) {
        self.instr.instr_addr = addr;
        self.instr.isa = self.calc_isa(self.is_64bit, is);
    }

    /// Memory space of the current PE context: Secure / Non-secure alone
    /// until an exception level is known, then the space of that EL in
    /// the security state (Realm EL3 maps to Root, as in OpenCSD).
    fn mem_space(&self) -> MemSpace {
        self.space
    }

    /// Works out [`mem_space`](Self::mem_space) again after the PE
    /// context or the security state changed.
    fn update_mem_space(&mut self) {
        self.space = self.compute_mem_space();
    }

    fn compute_mem_space(&self) -> MemSpace {
        let c = &self.out_stack.cur_ref().context;
        if !c.el_valid {
            return if self.is_secure { MemSpace::S } else { MemSpace::N };
        }
        let el = c.exception_level.number().unwrap_or(0);
        match c.security {
            SecurityState::Root => MemSpace::ROOT,
            SecurityState::Realm => [MemSpace::EL1R, MemSpace::EL1R, MemSpace::EL2R, MemSpace::ROOT][el as usize & 3],
            SecurityState::Secure => [MemSpace::EL1S, MemSpace::EL1S, MemSpace::EL2S, MemSpace::EL3][el as usize & 3],
            SecurityState::NonSecure => [MemSpace::EL1N, MemSpace::EL1N, MemSpace::EL2, MemSpace::EL3][el as usize & 3],
        }
    }

    // ---------------- packet handling ----------------

    fn process_packet(&mut self, pkt: &EtmV4Packet) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        loop {
            match self.state {
                State::NoSync => {
                    resp = self.send_no_sync();
                }
                State::WaitSync => {
                    if pkt.pkt_type == PktType::Async {
                        self.state = State::WaitTraceInfo;
                    }
                    return resp;
                }
                State::WaitTraceInfo => {
                    self.need_ctxt = true;
                    self.need_addr = true;
                    if pkt.pkt_type == PktType::TraceInfo {
                        self.do_trace_info(pkt);
                        self.state = State::DecodePackets;
                        self.ret_stack.flush();
                    } else if self.ete
                        && pkt.pkt_type == PktType::Event
                        && let Err(Fault::Fatal(_)) = self.decode_packet(pkt)
                    {
                        return DatapathResp::FatalInvalidData;
                    }
                    return resp;
                }
                State::DecodePackets => match self.decode_packet(pkt) {
                    Err(Fault::Fatal(_)) => return DatapathResp::FatalInvalidData,
                    _ => {
                        if self.state != State::ResolveElements {
                            return resp;
                        }
                    }
                },
                State::ResolveElements => {
                    resp = self.resolve_elements();
                    if self.state == State::DecodePackets || !resp.is_cont() {
                        // A wait after a discard or error: the loss of
                        // sync is reported at the flush, for this packet.
                        self.no_sync_unreported = self.state == State::NoSync;
                        return resp;
                    }
                }
            }
        }
    }

    /// Reports loss of synchronisation and starts waiting for a sync.
    fn send_no_sync(&mut self) -> DatapathResp {
        self.no_sync_unreported = false;
        self.out_stack.reset();
        self.out_stack.add_type(self.index_curr_pkt, ElemType::NoSync);
        self.out_stack.cur().unsync_info = self.unsync_info;
        self.state = State::WaitSync;
        self.out_stack.send(&self.out, self.trace_id)
    }

    fn do_trace_info(&mut self, pkt: &EtmV4Packet) {
        self.cc_threshold = pkt.cc_threshold();
        self.curr_spec_depth = pkt.curr_spec_depth() as i64;
        // The elements speculated before the trace info, counted in one
        // entry: a depth of any size takes no memory.
        let unseen = pkt.curr_spec_depth();
        if unseen > 0 {
            let mut e = P0Elem::new(P0Kind::UnseenUncommitted, true, self.index_curr_pkt);
            e.params[0] = unseen;
            self.stack.push_back(e);
        }
        self.stack
            .push_back(P0Elem::new(P0Kind::TraceInfo, false, self.index_curr_pkt));
        if pkt.trace_info.in_trans_state() {
            self.stack
                .push_back(P0Elem::new(P0Kind::TransTraceInit, false, self.index_curr_pkt));
        }
    }

    fn push(&mut self, kind: P0Kind, is_p0: bool) -> &mut P0Elem {
        self.stack.push_back(P0Elem::new(kind, is_p0, self.index_curr_pkt));
        self.stack.back_mut().expect("just pushed")
    }

    fn push_addr(&mut self, kind: P0Kind, is_p0: bool, pkt: &EtmV4Packet) {
        self.last_is = pkt.addr_is;
        let e = self.push(kind, is_p0);
        e.addr = pkt.addr.val;
        e.addr_is = pkt.addr_is;
    }

    fn push_ctxt(&mut self, pkt: &EtmV4Packet) {
        let is = self.last_is;
        let e = self.push(P0Kind::Ctxt, false);
        e.context = pkt.context;
        e.addr_is = is;
    }

    fn decode_packet(&mut self, pkt: &EtmV4Packet) -> Step {
        use PktType as T;
        let mut is_addr = false;
        match pkt.pkt_type {
            T::Async | T::Ignore => {}
            T::TraceInfo => {
                self.push(P0Kind::TraceInfo, false);
            }
            T::TraceOn => {
                self.push(P0Kind::TraceOn, false);
            }
            T::AtomF1 | T::AtomF2 | T::AtomF3 | T::AtomF4 | T::AtomF5 | T::AtomF6 => {
                // Built whole, then pushed: no second look-up of the back.
                let e = P0Elem {
                    atoms: pkt.atoms,
                    ..P0Elem::new(P0Kind::Atom, true, self.index_curr_pkt)
                };
                self.stack.push_back(e);
                self.curr_spec_depth += pkt.atoms.num as i64;
            }
            T::Ctxt => self.push_ctxt(pkt),
            T::AddrMatch => {
                self.push_addr(P0Kind::Addr, false, pkt);
                is_addr = true;
            }
            T::AddrCtxtL32IS0 | T::AddrCtxtL32IS1 | T::AddrCtxtL64IS0 | T::AddrCtxtL64IS1 => {
                self.last_is = pkt.addr_is;
                self.push_ctxt(pkt);
                self.push_addr(P0Kind::Addr, false, pkt);
                is_addr = true;
            }
            T::AddrL32IS0 | T::AddrL32IS1 | T::AddrL64IS0 | T::AddrL64IS1 | T::AddrSIS0 | T::AddrSIS1 => {
                self.push_addr(P0Kind::Addr, false, pkt);
                is_addr = true;
            }
            T::SrcAddrMatch
            | T::SrcAddrSIS0
            | T::SrcAddrSIS1
            | T::SrcAddrL32IS0
            | T::SrcAddrL32IS1
            | T::SrcAddrL64IS0
            | T::SrcAddrL64IS1 => {
                self.push_addr(P0Kind::SrcAddr, true, pkt);
                self.curr_spec_depth += 1;
            }
            T::Except => {
                let e = self.push(P0Kind::Exception, true);
                e.prev_same = pkt.exception.addr_interp == 0x2;
                e.excep_num = pkt.exception.exc_type;
                self.elem_pending_addr = true;
            }
            T::ExceptRtn => {
                // A P0 element on v7-M only.
                let v7m = self.cfg.arch.arch == crate::arch::ArchVersion::V7 && self.m_profile;
                self.push(P0Kind::ExceptionRet, v7m);
                if v7m {
                    self.curr_spec_depth += 1;
                }
            }
            T::FuncRet => {
                if self.cfg.is_v8_arch() && self.m_profile {
                    self.push(P0Kind::FuncRet, true);
                    self.curr_spec_depth += 1;
                }
            }
            T::Q => {
                let has_addr = pkt.q.addr_present;
                let e = self.push(P0Kind::Q, true);
                e.q_count = pkt.q.count;
                if has_addr {
                    e.q_has_addr = true;
                    e.addr = pkt.addr.val;
                    e.addr_is = pkt.addr_is;
                    self.curr_spec_depth += 1;
                } else {
                    self.elem_pending_addr = true;
                }
            }
            T::Event => {
                let e = self.push(P0Kind::Event, false);
                e.params[0] = pkt.event_val as u32;
            }
            T::CcntF1 | T::CcntF2 | T::CcntF3 => {
                let e = self.push(P0Kind::Cc, false);
                e.params[0] = if pkt.cc_valid { pkt.cycle_count } else { 0 };
                if pkt.commit_valid && !self.options.ccnt_without_commit {
                    self.res.commit = pkt.commit_elements as i64;
                }
            }
            T::Timestamp => {
                let with_cc = self.cfg.enabled_cci();
                let ts = if pkt.ts_valid { pkt.timestamp } else { 0 };
                let cc = if pkt.cc_valid { pkt.cycle_count } else { 0 };
                let e = self.push(if with_cc { P0Kind::TsCc } else { P0Kind::Ts }, false);
                e.params = [ts as u32, (ts >> 32) as u32, if with_cc { cc } else { 0 }];
            }
            T::TsMarker => {
                self.push(P0Kind::Marker, false);
            }
            T::TransSt => {
                let p0 = self.cfg.comm_trans_p0();
                self.push(P0Kind::TransStart, p0);
                if p0 {
                    self.curr_spec_depth += 1;
                }
            }
            T::TransCommit => {
                self.push(P0Kind::TransCommit, false);
            }
            T::TransFail => {
                self.push(P0Kind::TransFail, false);
            }
            T::Ite => {
                let e = self.push(P0Kind::Ite, false);
                e.ite_el = pkt.ite_el;
                e.ite_value = pkt.ite_value;
            }
            T::BadSequence => return self.bad_packet("Bad byte sequence in packet."),
            T::BadTraceMode => return self.bad_packet("Invalid packet type for trace mode."),
            T::Reserved => return self.bad_packet("Reserved packet header"),
            // OpenCSD's decoder has no case for these: a header reserved in
            // this configuration, ETE's PE reset (an exception packet of
            // type 0), a partial packet at the end of the trace.
            T::ReservedCfg | T::PeReset | T::IncompleteEot | T::NotSync | T::NoErrType | T::Extension => {
                return self.bad_packet("Unknown packet type.");
            }
            T::Mispredict | T::CancelF1Mispred | T::CancelF2 | T::CancelF3 => {
                self.res.mispredict = true;
                if pkt.atoms.num > 0 {
                    let e = self.push(P0Kind::Atom, true);
                    e.atoms = pkt.atoms;
                    self.curr_spec_depth += pkt.atoms.num as i64;
                }
                self.res.cancel = pkt.cancel_elements as i64;
            }
            T::CancelF1 => self.res.cancel = pkt.cancel_elements as i64,
            T::Commit => self.res.commit = pkt.commit_elements as i64,
            T::Overflow | T::Discard => {
                if pkt.pkt_type == T::Overflow {
                    self.prev_overflow = true;
                }
                self.curr_spec_depth = 0;
                self.res.discard = true;
            }
            T::CondFlush
            | T::CondIF1
            | T::CondIF2
            | T::CondIF3
            | T::CondResF1
            | T::CondResF2
            | T::CondResF3
            | T::CondResF4
            | T::NumDsMkr
            | T::UnnumDsMkr => {
                let idx = Some(self.index_curr_pkt);
                return self.packet_err(
                    ErrCode::UnsuppDecodePkt,
                    Severity::Error,
                    idx,
                    "Data trace related, unsupported packet type.",
                );
            }
        }

        if is_addr && self.elem_pending_addr {
            self.curr_spec_depth += 1;
            self.elem_pending_addr = false;
        }
        if self.curr_spec_depth > self.max_spec_depth {
            self.res.commit = self.curr_spec_depth - self.max_spec_depth;
        }
        if self.res.pending() {
            self.state = State::ResolveElements;
        }
        Ok(())
    }

    // ---------------- resolution ----------------

    fn resolve_elements(&mut self) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        loop {
            if self.held_keep > 0 && !self.res.pending() {
                self.held_keep = 0;
            }
            if self.out_stack.to_send > self.held_keep {
                resp = if self.held_keep == 0 {
                    self.out_stack.send(&self.out, self.trace_id)
                } else {
                    self.out_stack.send_but(&self.out, self.trace_id, self.held_keep)
                };
            } else if self.res.pending() {
                let mut r = Ok(());
                if self.res.commit != 0 {
                    r = if self.held_keep == 0 {
                        self.commit_elements()
                    } else {
                        self.commit_behind_kept()
                    };
                }
                if r.is_ok() && self.res.commit == 0 {
                    if self.res.cancel != 0 {
                        r = self.cancel_elements();
                    }
                    if r.is_ok() && self.res.mispredict {
                        r = self.mispredict_atom();
                    }
                    if r.is_ok() && self.res.discard {
                        r = self.discard_elements();
                    }
                }
                match r {
                    Err(Fault::Fatal(_)) => resp = DatapathResp::FatalInvalidData,
                    Err(Fault::Resync) => {
                        // The decoder was reset: nothing is left to resolve.
                        return resp;
                    }
                    Ok(()) => {}
                }
            }
            if !resp.is_cont() {
                return resp;
            }
            if self.out_stack.to_send == 0 && !self.res.pending() {
                if self.state == State::ResolveElements {
                    self.state = State::DecodePackets;
                }
                return resp;
            }
        }
    }

    #[inline(always)]
    fn commit_elements(&mut self) -> Step {
        self.commit_elements_from(true)
    }

    /// [`commit_elements`](Self::commit_elements) behind the elements of
    /// an atom packet still waiting (see `held_keep`), which go out first.
    #[cold]
    #[inline(never)]
    fn commit_behind_kept(&mut self) -> Step {
        self.commit_elements_from(false)
    }

    #[inline(always)]
    fn commit_elements_from(&mut self, reset: bool) -> Step {
        let num_req = self.res.commit;
        // The index of the last element committed, as OpenCSD reports the
        // error: 0 when there was none.
        let mut err_idx = 0;
        if reset {
            self.out_stack.reset();
        }
        let mut context_flush = false;
        while self.res.commit > 0 && !context_flush {
            let Some(front) = self.stack.front() else {
                let r = self.seq_err(
                    ErrCode::CommitPktOverrun,
                    Some(err_idx),
                    "Not enough elements to commit",
                );
                self.res.commit = 0;
                return r;
            };
            if front.kind == P0Kind::UnseenUncommitted {
                // Committed as many at once as are asked for.
                err_idx = front.index;
                let n = i64::from(front.params[0]).min(self.res.commit);
                self.res.commit -= n;
                let left = front.params[0] - n as u32;
                match self.stack.front_mut() {
                    Some(f) if left > 0 => f.params[0] = left,
                    _ => {
                        self.stack.pop_front();
                    }
                }
                continue;
            }
            if front.kind == P0Kind::Atom {
                // The common case, without copying the element: only its
                // atoms change.
                let (index, mut atoms) = (front.index, front.atoms);
                err_idx = index;
                self.commit_atom_run(&mut atoms, index)?;
                if atoms.num > 0 {
                    if let Some(f) = self.stack.front_mut() {
                        f.atoms = atoms;
                    }
                } else {
                    self.stack.pop_front();
                }
                continue;
            }
            let elem = *front;
            err_idx = elem.index;
            match elem.kind {
                P0Kind::TraceOn => {
                    self.next_range_check = None;
                    self.out_stack.add_type(elem.index, ElemType::TraceOn);
                    self.out_stack.cur().trace_on_reason = if self.prev_overflow {
                        TraceOnReason::Overflow
                    } else {
                        TraceOnReason::Normal
                    };
                    self.prev_overflow = false;
                    self.ret_stack.flush();
                }
                P0Kind::Addr => self.commit_address(elem.addr, elem.addr_is),
                P0Kind::Ctxt => {
                    if elem.context.updated {
                        self.out_stack.add(elem.index);
                        let before = self.out_stack.cur_ref().context;
                        self.update_context(&elem);
                        context_flush = true;
                        // Memory may differ in another context (another
                        // process, VM or exception level): forget what was
                        // read and walked. The same context again keeps it.
                        if self.out_stack.cur_ref().context != before {
                            // Unless the memory says its contents do not
                            // follow the context (file images).
                            let fixed = match &self.mem {
                                Some(m) => {
                                    let mut m = m.borrow_mut();
                                    m.invalidate_mem_acc_cache(self.trace_id);
                                    m.contents_fixed()
                                }
                                None => false,
                            };
                            if !fixed {
                                self.code.invalidate();
                            }
                        }
                    }
                }
                P0Kind::Event | P0Kind::Ts | P0Kind::Cc | P0Kind::TsCc => self.process_ts_cc_event(&elem),
                P0Kind::Marker => self.process_marker(&elem),
                // Committed above, oldest atom first.
                P0Kind::Atom => {}
                P0Kind::Exception => {
                    self.return_stack_pop()?;
                    self.next_range_check = None;
                    self.process_exception(&elem)?;
                    self.res.commit -= 1;
                }
                P0Kind::ExceptionRet => {
                    self.next_range_check = None;
                    self.out_stack.add_type(elem.index, ElemType::ExceptionRet);
                    if elem.is_p0 {
                        self.res.commit -= 1;
                    }
                }
                P0Kind::FuncRet => {
                    if elem.is_p0 {
                        self.res.commit -= 1;
                    }
                }
                P0Kind::SrcAddr => {
                    self.next_range_check = None;
                    self.process_source_address(&elem)?;
                    self.res.commit -= 1;
                }
                P0Kind::Q => {
                    self.next_range_check = None;
                    self.process_q(&elem)?;
                    self.res.commit -= 1;
                }
                P0Kind::TransStart | P0Kind::TransCommit | P0Kind::TransFail | P0Kind::TransTraceInit => {
                    if elem.kind == P0Kind::TransStart && self.cfg.comm_trans_p0() {
                        self.res.commit -= 1;
                    }
                    self.next_range_check = None;
                    self.process_trans(&elem);
                }
                P0Kind::Ite => self.process_ite(&elem),
                // Committed above, before the element is copied.
                P0Kind::UnseenUncommitted => {}
                P0Kind::TraceInfo => {
                    self.ret_stack.tinfo_wait_addr = true;
                    self.ret_stack.flush();
                }
            }
            self.stack.pop_front();
        }
        self.curr_spec_depth -= num_req - self.res.commit;
        Ok(())
    }

    fn return_stack_pop(&mut self) -> Step {
        if self.ret_stack.pop_pending() {
            let (addr, isa) = self.ret_stack.pop();
            if self.ret_stack.overflow() {
                return self.seq_err(ErrCode::RetStackOverflow, None, "Trace Return Stack Overflow.");
            }
            self.instr.instr_addr = addr;
            self.instr.isa = isa;
            self.need_addr = false;
        }
        Ok(())
    }

    fn cancel_elements(&mut self) -> Step {
        let num_req = self.res.cancel;
        self.kept.clear();
        while self.res.cancel > 0 {
            let Some(elem) = self.stack.back_mut() else {
                let idx = Some(self.index_curr_pkt);
                let r = self.seq_err(ErrCode::CommitPktOverrun, idx, "Not enough elements to cancel");
                self.res.cancel = 0;
                // What was kept goes back after the error's reset, as in
                // OpenCSD: a cycle count or timestamp still pending is
                // output at the end of trace.
                while let Some(k) = self.kept.pop() {
                    self.stack.push_back(k);
                }
                return r;
            };
            if elem.is_p0 {
                if elem.kind == P0Kind::Atom {
                    let n = elem.cancel_newest(self.res.cancel as u32);
                    self.res.cancel -= n as i64;
                    if elem.atoms.num == 0 {
                        self.stack.pop_back();
                    }
                } else if elem.kind == P0Kind::UnseenUncommitted {
                    let n = i64::from(elem.params[0]).min(self.res.cancel);
                    self.res.cancel -= n;
                    elem.params[0] -= n as u32;
                    if elem.params[0] == 0 {
                        self.stack.pop_back();
                    }
                } else {
                    self.res.cancel -= 1;
                    self.stack.pop_back();
                }
            } else {
                let e = *elem;
                self.stack.pop_back();
                if matches!(
                    e.kind,
                    P0Kind::Event | P0Kind::Ts | P0Kind::Cc | P0Kind::TsCc | P0Kind::Marker | P0Kind::Ite
                ) {
                    self.kept.push(e);
                }
            }
        }
        while let Some(k) = self.kept.pop() {
            self.stack.push_back(k);
        }
        self.curr_spec_depth -= num_req - self.res.cancel;
        Ok(())
    }

    fn mispredict_atom(&mut self) -> Step {
        let mut found = false;
        let mut i = self.stack.len();
        while i > 0 {
            i -= 1;
            match self.stack[i].kind {
                P0Kind::Atom => {
                    self.stack[i].mispredict_newest();
                    found = true;
                    break;
                }
                P0Kind::Addr => {
                    self.stack.remove(i);
                }
                P0Kind::UnseenUncommitted => {
                    found = true;
                    break;
                }
                _ => {}
            }
        }
        self.res.mispredict = false;
        if !found {
            let idx = Some(self.index_curr_pkt);
            return self.seq_err(ErrCode::CommitPktOverrun, idx, "Not found mispredict atom");
        }
        Ok(())
    }

    fn discard_elements(&mut self) -> Step {
        while let Some(elem) = self.stack.pop_front() {
            // Markers, timestamps, cycle counts and events survive a
            // discard; instrumentation does not (as in OpenCSD).
            match elem.kind {
                P0Kind::Marker => self.process_marker(&elem),
                _ => self.process_ts_cc_event(&elem),
            }
        }
        self.res = ElemRes::default();
        self.curr_spec_depth = 0;
        self.state = State::NoSync;
        self.unsync_info = if self.prev_overflow {
            UnsyncInfo::Overflow
        } else {
            UnsyncInfo::Discard
        };
        self.need_ctxt = true;
        self.need_addr = true;
        self.elem_pending_addr = false;
        Ok(())
    }

    fn commit_elem_on_eot(&mut self) {
        if self.out_stack.to_send == 0 {
            self.out_stack.reset();
        }
        while let Some(elem) = self.stack.front().copied() {
            match elem.kind {
                P0Kind::TraceOn
                | P0Kind::Atom
                | P0Kind::Exception
                | P0Kind::ExceptionRet
                | P0Kind::Q
                | P0Kind::UnseenUncommitted => {
                    self.stack.clear();
                    break;
                }
                P0Kind::TransStart if self.cfg.comm_trans_p0() => {
                    self.stack.clear();
                    break;
                }
                P0Kind::TransFail | P0Kind::TransCommit if self.max_spec_depth == 0 || self.curr_spec_depth == 0 => {
                    self.process_trans(&elem);
                }
                P0Kind::Event | P0Kind::Ts | P0Kind::Cc | P0Kind::TsCc => self.process_ts_cc_event(&elem),
                P0Kind::Marker => self.process_marker(&elem),
                P0Kind::Ite => self.process_ite(&elem),
                _ => {}
            }
            self.stack.pop_front();
        }
        self.out_stack.add_type(self.index_curr_pkt, ElemType::EoTrace);
        self.out_stack.cur().unsync_info = if self.prev_overflow {
            UnsyncInfo::Overflow
        } else {
            UnsyncInfo::Eot
        };
    }

    // ---------------- element output ----------------

    fn process_ts_cc_event(&mut self, e: &P0Elem) {
        let permit_ts = !self.cfg.ete_has_ts_marker() || self.ete_first_ts_marker;
        match e.kind {
            P0Kind::Event => {
                self.out_stack.add_type(e.index, ElemType::Event);
                let o = self.out_stack.cur();
                o.event_type = EventType::Numbered;
                o.event_number = e.params[0] as u16;
            }
            P0Kind::Ts | P0Kind::TsCc if permit_ts => {
                self.out_stack.add_type(e.index, ElemType::Timestamp);
                let o = self.out_stack.cur();
                o.timestamp = e.params[0] as u64 | (e.params[1] as u64) << 32;
                if e.kind == P0Kind::TsCc {
                    o.set_cycle_count(e.params[2]);
                }
            }
            P0Kind::Cc => {
                self.out_stack.add_type(e.index, ElemType::CycleCount);
                self.out_stack.cur().set_cycle_count(e.params[0]);
            }
            _ => {}
        }
    }

    fn process_marker(&mut self, e: &P0Elem) {
        if self.cfg.ete_has_ts_marker() {
            self.ete_first_ts_marker = true;
        }
        self.out_stack.add_type(e.index, ElemType::SyncMarker);
        self.out_stack.cur().sync_marker_value = 0;
    }

    fn process_trans(&mut self, e: &P0Elem) {
        self.out_stack.add_type(e.index, ElemType::MemTrans);
        self.out_stack.cur().mem_trans = match e.kind {
            P0Kind::TransStart => crate::element::MemTrans::Start,
            P0Kind::TransCommit => crate::element::MemTrans::Commit,
            P0Kind::TransFail => crate::element::MemTrans::Fail,
            _ => crate::element::MemTrans::TraceInit,
        };
    }

    fn process_ite(&mut self, e: &P0Elem) {
        self.out_stack.add_type(e.index, ElemType::Instrumentation);
        let o = self.out_stack.cur();
        o.ite_el = e.ite_el;
        o.ite_value = e.ite_value;
    }

    fn update_context(&mut self, e: &P0Elem) {
        let c = e.context;
        let isa = self.calc_isa(c.sf, e.addr_is);
        let secure = !c.ns;
        self.out_stack.ctx_changed(self.out_stack.curr);
        let o = self.out_stack.cur();
        o.set_type(ElemType::PeContext);
        o.context.bits64 = c.sf;
        o.context.security = match (c.nse, c.ns) {
            (true, true) => SecurityState::Realm,
            (true, false) => SecurityState::Root,
            (false, true) => SecurityState::NonSecure,
            (false, false) => SecurityState::Secure,
        };
        o.context.exception_level = ExceptionLevel::from_number(c.el);
        o.context.el_valid = true;
        if c.updated_c {
            o.context.ctxt_id_valid = true;
            o.context.context_id = c.ctxt_id;
        }
        if c.updated_v {
            o.context.vmid_valid = true;
            o.context.vmid = c.vmid;
        }
        o.isa = isa;
        self.is_64bit = c.sf;
        self.is_secure = secure;
        self.instr.isa = isa;
        self.need_ctxt = false;
        self.update_mem_space();
    }

    /// Fills the current element as an instruction range.
    #[inline]
    fn set_range(&mut self, r: Range, executed: bool) {
        fill_range(self.out_stack.cur(), &self.instr, r, executed);
        if executed {
            self.instr.isa = self.instr.next_isa;
        }
    }

    fn set_nacc(&mut self, addr: u64) {
        let space = self.mem_space();
        let o = self.out_stack.cur();
        o.set_type(ElemType::AddrNacc);
        o.st_addr = addr;
        o.mem_space = space;
    }

    /// Follows the program from the current address to the next waypoint
    /// (or, with `to_addr`, until the next instruction is at that address).
    #[inline]
    fn trace_to_waypoint(&mut self, to_addr: Option<u64>) -> Result<(Range, WpResult), ErrCode> {
        let st = self.instr.instr_addr;
        if to_addr.is_none() && self.mem.is_some() {
            let carried = match self.carried {
                Some(c) => c,
                None => {
                    let c = self.instr_dec.borrow().carried_state();
                    self.carried = Some(c);
                    c
                }
            };
            self.check_memory();
            if let Some(w) = self.code.remembered(&mut self.instr, self.space, carried) {
                return self.walk_outcome(st, w);
            }
        }
        self.walk_uncached(to_addr)
    }

    #[inline(never)]
    fn walk_uncached(&mut self, to_addr: Option<u64>) -> Result<(Range, WpResult), ErrCode> {
        let st = self.instr.instr_addr;
        let space = self.mem_space();
        let Some(mem) = &self.mem else {
            return Ok((Range { st, en: st, num: 0 }, WpResult::Nacc));
        };
        let mut m = mem.borrow_mut();
        let mut dec = self.instr_dec.borrow_mut();
        let walked = match to_addr {
            None => self
                .code
                .walk_to_waypoint(&mut *m, &mut *dec, &mut self.instr, self.trace_id, space),
            Some(a) => self
                .code
                .walk_to_address(&mut *m, &mut *dec, &mut self.instr, self.trace_id, space, a),
        };
        self.carried = Some(dec.carried_state());
        drop((m, dec));
        self.walk_outcome(st, walked)
    }

    #[inline]
    fn walk_outcome(&mut self, st: u64, walked: Walked) -> Result<(Range, WpResult), ErrCode> {
        // The limit is on the instructions walked: the walk would have
        // stopped at the first one past it, before any later outcome.
        let limit = self.options.instr_range_limit;
        if limit != 0 && walked.num > limit {
            return Err(self.range_limit_overrun());
        }
        let r = Range {
            st,
            en: self.instr.instr_addr,
            num: walked.num,
        };
        match walked.end {
            WalkEnd::Waypoint => Ok((r, WpResult::Found)),
            WalkEnd::Nacc => Ok((r, WpResult::Nacc)),
            WalkEnd::Error(e) => Err(e),
        }
    }

    /// A new packet (or run of atom packets): memory and the classifier's
    /// carried state may have changed since the last one (memory does not
    /// change within one). Both are looked at again when next needed.
    fn sync_memory(&mut self) {
        self.carried = None;
        self.in_atom_run = false;
        self.mem_checked = false;
    }

    /// Keeps the walk's remembered blocks in step with the memory (images
    /// added, or memory invalidated for this trace ID), once per packet
    /// (or run of them), before a remembered block is used. (The walk
    /// itself checks the memory it reads.) In line, as it is mostly done
    /// already.
    #[inline(always)]
    fn check_memory(&mut self) {
        if !self.mem_checked {
            self.check_memory_now();
        }
    }

    #[inline(never)]
    fn check_memory_now(&mut self) {
        self.mem_checked = true;
        if let Some(m) = &self.mem {
            let g = m.borrow().generation(self.trace_id);
            self.code.sync_memory(g);
        }
    }

    #[cold]
    fn range_limit_overrun(&self) -> ErrCode {
        self.log(
            Severity::Error,
            ErrCode::IRangeLimitOverrun,
            None,
            "Decode Instruction Range Limit Overrun",
        );
        ErrCode::IRangeLimitOverrun
    }

    fn process_atom(&mut self, taken: bool, index: TrcIndex) -> Step {
        self.out_stack.add(index);
        let (range, wp) = match self.trace_to_waypoint(None) {
            Ok(v) => v,
            Err(ErrCode::UnsupportedIsa) => {
                self.need_addr = true;
                self.need_ctxt = true;
                self.log(
                    Severity::Warn,
                    ErrCode::UnsupportedIsa,
                    Some(index),
                    "Warning: unsupported instruction set processing atom packet.",
                );
                return Ok(());
            }
            Err(code) => return self.seq_err(code, Some(index), "Error processing atom packet."),
        };
        if wp == WpResult::Found {
            let next_addr = self.instr.instr_addr;
            let mut ete_eret = false;
            match self.instr.instr_type {
                InstrType::Branch => {
                    if taken {
                        self.instr.instr_addr = self.instr.branch_addr;
                        if self.instr.is_link {
                            self.ret_stack.push(next_addr, self.instr.isa);
                        }
                    } else if !self.instr.is_conditional
                        // Some ETMs trace a taken branch to the next
                        // instruction as N: the direct check lets that be.
                        && ((self.options.direct_br_cond && self.instr.branch_addr != next_addr)
                            || self.options.strict_br_cond)
                    {
                        return self.bad_image(index, "Bad program image - N Atom on unconditional direct BR.\n");
                    }
                }
                InstrType::BranchIndirect => {
                    if taken {
                        self.need_addr = true;
                        if self.instr.is_link {
                            self.ret_stack.push(next_addr, self.instr.isa);
                        }
                        self.ret_stack.set_pop_pending();
                        if self.ete && self.instr.sub_type == InstrSubType::V8Eret {
                            ete_eret = true;
                        }
                    } else if self.options.strict_br_cond && !self.instr.is_conditional {
                        return self.bad_image(index, "Bad program image - N Atom on unconditional indirect BR.\n");
                    }
                }
                _ => {}
            }
            self.set_range(range, taken);
            if self.options.range_cont
                && let Some(expect) = self.next_range_check
                && expect != range.st
            {
                return self.bad_image(index, "Discontinuous ranges - Inconsistent program image for decode\n");
            }
            self.next_range_check = if taken { None } else { Some(next_addr) };
            if ete_eret {
                self.out_stack.add_type(index, ElemType::ExceptionRet);
            }
        } else {
            self.need_addr = true;
            self.next_range_check = None;
            if range.st != range.en {
                self.set_range(range, true);
                if wp == WpResult::Nacc {
                    self.out_stack.add(index);
                }
            }
            if wp == WpResult::Nacc {
                let a = self.instr.instr_addr;
                self.set_nacc(a);
            }
        }
        Ok(())
    }

    /// The trace does not fit the program image: the `NO_SYNC` after it
    /// says `bad-program-image`.
    fn bad_image(&mut self, index: TrcIndex, msg: &str) -> Step {
        self.packet_err_unsync(
            ErrCode::BadDecodeImage,
            Severity::Error,
            Some(index),
            msg,
            UnsyncInfo::BadImage,
        )
    }

    fn flush(&mut self) -> DatapathResp {
        if self.state == State::ResolveElements {
            let r = self.resolve_elements();
            if self.state == State::NoSync {
                if r.is_cont() {
                    // A discard or error while resolving.
                    return self.send_no_sync();
                }
                self.no_sync_unreported = true;
            }
            r
        } else {
            let r = self.out_stack.send(&self.out, self.trace_id);
            if r.is_cont() && self.state == State::NoSync && self.no_sync_unreported {
                // Report the loss of sync as the packet that caused it would
                // have without the wait.
                return self.send_no_sync();
            }
            r
        }
    }
}

impl PacketDecoder for EtmV4Decoder {
    type Packet = EtmV4Packet;
    fn eot_done(&mut self) -> &mut bool {
        &mut self.eot_done
    }
    fn on_packet(&mut self, index: TrcIndex, pkt: &EtmV4Packet) -> DatapathResp {
        self.index_curr_pkt = index;
        let in_run = std::mem::take(&mut self.in_atom_run);
        if !in_run {
            self.sync_memory();
        }
        if pkt.atoms.num > 0 && pkt.pkt_type.is_atom() && self.atoms_commit_now() {
            return self.atoms_now(pkt.atoms, pkt.atom_run_continues);
        }
        if in_run && let Some(resp) = self.address_in_run(pkt) {
            return resp;
        }
        // Elements are held only for a next packet that takes a path above.
        debug_assert!(self.out_stack.to_send == 0 || self.state != State::DecodePackets);
        self.process_packet(pkt)
    }
    fn on_packet_bytes(&mut self, index: TrcIndex, run: &[u8]) -> (DatapathResp, usize) {
        self.atom_bytes(index, run, &[])
    }
    fn on_packet_run(&mut self, index: TrcIndex, run: &[u8], addrs: &[RunAddr]) -> (DatapathResp, usize) {
        self.atom_bytes(index, run, addrs)
    }
    fn on_eot(&mut self) -> DatapathResp {
        self.sync_memory();
        self.commit_elem_on_eot();
        self.out_stack.send(&self.out, self.trace_id)
    }
    /// Sends what a wait held back of the end of trace.
    fn on_eot_again(&mut self) -> DatapathResp {
        self.out_stack.send(&self.out, self.trace_id)
    }
    fn on_flush(&mut self) -> DatapathResp {
        self.sync_memory();
        self.flush()
    }
    fn on_reset(&mut self, _index: TrcIndex) -> DatapathResp {
        self.unsync_info = UnsyncInfo::ResetDecoder;
        self.reset_decoder();
        DatapathResp::Cont
    }
}

#[cfg(test)]
mod out_stack_tests {
    use super::*;

    /// Every slot of the span of same contexts holds the same context.
    fn check_span(s: &OutStack) {
        let (lo, hi) = s.ctx_same;
        assert!(hi <= s.elems.len());
        for slot in lo..hi {
            assert_eq!(
                s.elems[slot].1.context, s.elems[lo].1.context,
                "slot {slot} in span {lo}..{hi}"
            );
        }
    }

    #[test]
    fn the_span_of_same_contexts_survives_any_sequence_of_slot_updates() {
        let mut s = OutStack::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for step in 0..20_000u32 {
            match next(6) {
                0 | 1 => s.add(u64::from(step)),
                2 => {
                    // A context element, as update_context makes one.
                    s.ctx_changed(s.curr);
                    s.cur().context.context_id = next(3) as u32;
                }
                3 => {
                    s.to_send = 0;
                    s.reset();
                }
                _ => {
                    let first = if s.to_send > 0 { s.curr + 1 } else { s.curr };
                    let end = first + next(40) as usize;
                    s.reserve(end);
                    s.fill_context(first, end);
                    let ctx = s.elems[s.curr].1.context;
                    for slot in first..end {
                        assert_eq!(s.elems[slot].1.context, ctx, "step {step}, slot {slot}");
                    }
                }
            }
            check_span(&s);
        }
    }
}
