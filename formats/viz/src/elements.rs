//! Call stacks from CoreSight (and RISC-V) trace elements.
//!
//! A range whose last instruction is an executed branch with link is a
//! call: the next range's first address is the function called, the
//! address after the branch where it returns. An executed return (A64
//! RET, A32/T32 implied returns) leaves the call that returns to the next
//! range's first address (else the innermost one). An exception is a call
//! to its handler that returns to its preferred return address; ERET, an
//! exception-return element, or (A32/T32, whose exception returns have no
//! instruction subtype) an indirect branch to the innermost exception's
//! return address leaves it. A call, return or branch whose target never
//! ran because an exception came first went to the exception's return
//! address. A PE context element switches to
//! the stack of its context (context ID, VMID) on that source. A gap
//! (overflow, lost sync, unreadable memory) marks the stack broken and
//! keeps it: the calls resume from it, as perf's cs_etm does.
//!
//! Nothing here allocates per element: names are looked up once per
//! address and kept as frame ids.

use coresight_decode::arch::{InstrSubType, InstrType, Isa};
use coresight_decode::element::{ElemType, TraceElement, TraceOnReason, UnsyncInfo};

use crate::profile::{FrameId, Limits, Profile};
use crate::symbols::Symbolizer;

/// A transfer of control waiting for the next range to say where it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    None,
    /// A call from the branch at `site`, returning to `ret`.
    Call {
        site: u64,
        ret: u64,
    },
    /// An exception, returning to `ret` (0: not known).
    Exception {
        ret: u64,
    },
    /// A return.
    Return,
    /// An exception return.
    ExceptionReturn,
    /// Another indirect branch: an exception return when it goes back to
    /// where the innermost exception returns (A32/T32 `SUBS PC, LR`,
    /// `MOVS PC, LR`, `LDM {.., PC}^`, `RFE` have no instruction subtype).
    Indirect,
}

/// Per-source decoding state.
#[derive(Clone, Copy, Debug)]
struct SrcState {
    key: u64,
    src: u32,
    pending: Pending,
    /// Instructions seen since the source started or resynchronised.
    synced: bool,
    /// A call whose target never ran because an exception came first,
    /// when the trace does not say where the exception returns (ETMv3):
    /// made when the exception returns, to where it returns.
    deferred: Option<(u64, u64)>,
}

/// What the capture held, for the report.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// Elements seen.
    pub elements: u64,
    /// Instruction ranges.
    pub ranges: u64,
    /// Instructions executed.
    pub instructions: u64,
    /// Exceptions.
    pub exceptions: u64,
    /// Timestamps.
    pub timestamps: u64,
    /// The first and last timestamp.
    pub ts_span: Option<(u64, u64)>,
    /// `ADDR_NACC` elements: the program went where no memory image was
    /// mapped, and its instructions there could not be followed.
    pub addr_nacc: u64,
}

/// Builds a [`Profile`] from trace elements.
pub struct ElementStacks {
    /// The call stacks.
    pub profile: Profile,
    /// Function names.
    pub symbols: Symbolizer,
    /// What was seen.
    pub counts: Counts,
    /// Take contexts from PE context elements (off when the caller sets
    /// them, e.g. perf.data threads).
    pub contexts_from_elements: bool,
    states: Vec<SrcState>,
    last: usize,
    frames: Vec<FrameId>,
}

impl ElementStacks {
    /// A builder naming functions with `symbols`.
    pub fn new(symbols: Symbolizer, limits: Limits) -> Self {
        ElementStacks {
            profile: Profile::new(limits),
            symbols,
            counts: Counts::default(),
            contexts_from_elements: true,
            states: Vec::new(),
            last: 0,
            frames: Vec::new(),
        }
    }

    /// The state of source `key`, made (named `name()`) when first seen.
    fn state(&mut self, key: u64, name: impl FnOnce() -> String) -> usize {
        if let Some(s) = self.states.get(self.last)
            && s.key == key
        {
            return self.last;
        }
        let i = match self.states.iter().position(|s| s.key == key) {
            Some(i) => i,
            None => {
                let name = name();
                let src = self.profile.source(key, || name.clone());
                self.profile.switch_context(src, 0, || name);
                self.states.push(SrcState {
                    key,
                    src,
                    pending: Pending::None,
                    synced: false,
                    deferred: None,
                });
                self.states.len() - 1
            }
        };
        self.last = i;
        i
    }

    /// Switches source `key` to the context `ctx` (a thread, say), named
    /// `name()` when first seen.
    pub fn set_context(
        &mut self,
        key: u64,
        source_name: impl FnOnce() -> String,
        ctx: u128,
        name: impl FnOnce() -> String,
    ) {
        let i = self.state(key, source_name);
        let src = self.states[i].src;
        self.profile.switch_context(src, ctx, name);
    }

    fn function(&mut self, addr: u64) {
        self.frames.clear();
        let f = self.symbols.function(addr, &mut self.profile.frames);
        self.frames.extend_from_slice(f);
    }

    /// Takes one element of source `key` (a trace ID, a CPU), seen at byte
    /// `offset` of the input.
    pub fn element(&mut self, key: u64, source_name: impl FnOnce() -> String, offset: u64, e: &TraceElement) {
        self.counts.elements += 1;
        let i = self.state(key, source_name);
        let src = self.states[i].src;
        if e.has_cc && e.elem_type != ElemType::InstrRange {
            self.profile.advance(src, 0, e.cycle_count as u64);
        }
        match e.elem_type {
            ElemType::PeContext if self.contexts_from_elements => {
                let c = &e.context;
                let key = context_key(c);
                let profile = &mut self.profile;
                let sname = profile.source_name(src).to_string();
                profile.switch_context(src, key, || context_name(&sname, c));
            }
            ElemType::InstrRange => self.range(i, e),
            ElemType::IRangeNoPath => {
                self.resolve(i, e.st_addr);
                self.profile.advance(src, e.num_instr_range as u64, 0);
                self.counts.instructions += e.num_instr_range as u64;
            }
            ElemType::Exception => {
                self.counts.exceptions += 1;
                let ret = if e.excep_ret_addr { e.en_addr } else { 0 };
                // An exception taken before the first instruction at the
                // target of a call, return or branch ran: the transfer still
                // happened, to where the exception returns.
                if self.states[i].pending != Pending::None && ret != 0 {
                    self.resolve(i, ret);
                } else if let Pending::Call { site, ret } = self.states[i].pending {
                    self.states[i].deferred = Some((site, ret));
                } else if self.states[i].pending == Pending::Return {
                    // Where it returned is not said (ETMv3): it left the
                    // innermost call, as most do.
                    self.states[i].pending = Pending::None;
                    if self
                        .profile
                        .active(src)
                        .is_some_and(|c| self.profile.contexts[c as usize].depth() > 1)
                    {
                        self.profile.pop(src);
                    }
                } else if self.states[i].pending == Pending::ExceptionReturn {
                    // Where it returned is not said (ETMv3), but which
                    // exception it left is.
                    self.states[i].pending = Pending::None;
                    self.profile.pop_to(src, 0, true, &[]);
                }
                if self.states[i].synced {
                    self.states[i].pending = Pending::Exception { ret };
                }
            }
            ElemType::ExceptionRet if self.states[i].synced => {
                self.states[i].pending = Pending::ExceptionReturn;
            }
            ElemType::Timestamp => {
                self.counts.timestamps += 1;
                let ts = e.timestamp;
                self.counts.ts_span = Some(match self.counts.ts_span {
                    None => (ts, ts),
                    Some((a, b)) => (a.min(ts), b.max(ts)),
                });
                self.profile.timestamp(src, ts);
            }
            ElemType::TraceOn if e.trace_on_reason == TraceOnReason::Overflow => {
                self.gap(i, offset, "trace unit overflow: trace lost")
            }
            ElemType::NoSync if self.states[i].synced => {
                let what = match e.unsync_info {
                    UnsyncInfo::Overflow => "overflow: synchronisation lost",
                    UnsyncInfo::BadPacket => "bad packet: synchronisation lost",
                    UnsyncInfo::BadImage => "trace does not fit the program image: synchronisation lost",
                    UnsyncInfo::Discard => "speculative trace discarded",
                    UnsyncInfo::ResetDecoder => "decoder reset",
                    _ => "synchronisation lost",
                };
                self.gap(i, offset, what)
            }
            ElemType::AddrNacc => {
                self.counts.addr_nacc += 1;
                if self.states[i].synced {
                    self.gap(i, offset, "memory image missing at the traced address: path lost");
                }
            }
            ElemType::EoTrace => {
                // The end of a buffer: what follows (another session) starts anew.
                self.states[i].pending = Pending::None;
                self.states[i].deferred = None;
                self.states[i].synced = false;
            }
            _ => {}
        }
    }

    fn gap(&mut self, i: usize, offset: u64, what: &str) {
        self.states[i].pending = Pending::None;
        self.states[i].deferred = None;
        self.states[i].synced = false;
        self.profile.gap(self.states[i].src, offset, what);
    }

    /// The next instruction ran at `addr`: finishes the transfer pending.
    fn resolve(&mut self, i: usize, addr: u64) {
        let src = self.states[i].src;
        let pending = std::mem::replace(&mut self.states[i].pending, Pending::None);
        // A context whose first activity is a call or an exception: the
        // function it came from is its outermost one.
        let from = match pending {
            Pending::Call { site, .. } => site,
            Pending::Exception { ret } => ret,
            _ => 0,
        };
        if from != 0
            && self
                .profile
                .active(src)
                .is_some_and(|c| self.profile.contexts[c as usize].depth() == 0)
        {
            self.function(from);
            self.profile.ensure_root(src, &self.frames);
        }
        match pending {
            Pending::None => {}
            Pending::Call { site, ret } => {
                self.frames.clear();
                let inl = self.symbols.inline_frames(site, &mut self.profile.frames);
                self.frames.extend_from_slice(inl);
                let f = self.symbols.function(addr, &mut self.profile.frames);
                self.frames.extend_from_slice(f);
                self.profile.push(src, &self.frames, ret, false);
            }
            Pending::Exception { ret } => {
                self.function(addr);
                self.profile.push(src, &self.frames, ret, true);
            }
            Pending::Indirect => {
                if self.profile.exception_returns_to(src, addr) {
                    self.function(addr);
                    self.profile.pop_to(src, addr, true, &self.frames);
                }
            }
            p @ (Pending::Return | Pending::ExceptionReturn) => {
                let exc = p == Pending::ExceptionReturn;
                self.function(addr);
                self.profile.pop_to(src, addr, exc, &self.frames);
                if exc && let Some((site, ret)) = self.states[i].deferred.take() {
                    self.states[i].pending = Pending::Call { site, ret };
                    return self.resolve(i, addr);
                }
            }
        }
        // The first instructions of a context: the function they are in.
        if self
            .profile
            .active(src)
            .is_some_and(|c| self.profile.contexts[c as usize].depth() == 0)
        {
            self.function(addr);
            self.profile.ensure_root(src, &self.frames);
        }
    }

    fn range(&mut self, i: usize, e: &TraceElement) {
        self.counts.ranges += 1;
        self.counts.instructions += e.num_instr_range as u64;
        self.states[i].synced = true;
        self.resolve(i, e.st_addr);
        let src = self.states[i].src;
        self.profile.advance(
            src,
            e.num_instr_range as u64,
            if e.has_cc { e.cycle_count as u64 } else { 0 },
        );
        if !e.last_instr_exec {
            return;
        }
        self.states[i].pending = match e.last_i_subtype {
            InstrSubType::BranchLink => Pending::Call {
                site: e.en_addr.wrapping_sub(e.last_instr_sz.max(1) as u64),
                ret: e.en_addr,
            },
            InstrSubType::V8Ret | InstrSubType::V7ImpliedRet => Pending::Return,
            InstrSubType::V8Eret => Pending::ExceptionReturn,
            // A64 has ERET for that: there an indirect branch is only one.
            InstrSubType::None if e.last_i_type == InstrType::BranchIndirect && e.isa != Isa::Aarch64 => {
                Pending::Indirect
            }
            _ => Pending::None,
        };
    }

    /// Ends the trace: every open call is left.
    pub fn finish(&mut self) {
        self.profile.finish();
    }
}

/// A context's key: context ID and VMID, each with whether it is traced
/// (bits 64 and 65).
pub fn context_key(c: &coresight_decode::element::PeContext) -> u128 {
    (c.ctxt_id_valid as u128) << 64 | (c.vmid_valid as u128) << 65 | (c.vmid as u128) << 32 | c.context_id as u128
}

/// A context's name: its source, then its context ID and VMID when traced.
pub fn context_name(source: &str, c: &coresight_decode::element::PeContext) -> String {
    let mut s = source.to_string();
    if c.ctxt_id_valid {
        s.push_str(&format!(" ctxid 0x{:x}", c.context_id));
    }
    if c.vmid_valid {
        s.push_str(&format!(" vmid {}", c.vmid));
    }
    if let Some(h) = c.hart {
        s.push_str(&format!(" hart {h}"));
    }
    s
}
