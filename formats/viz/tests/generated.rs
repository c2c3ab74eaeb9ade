//! On generated traces (`coresight_generator`, whose truth is the executed
//! ranges in order) of every protocol with calls and returns (ETMv4 and
//! ETE on A64, PTM and ETMv3 on A32/T32): the call tree and the call depth
//! over time that the element path builds from the decoded trace equal
//! those of the truth, also across a real overflow (trace bytes between two
//! synchronisation points cut out, the trace unit saying so), where the
//! truth's tree is its own with what was lost taken out and the stack kept.
//!
//! The truth's calls and returns are read from the program's memory: the
//! last instruction of each executed range classified from its encoding
//! (A64: BL, BLR call, RET returns, ERET; A32/T32: BL, BLX call, BX LR,
//! POP/LDR/MOV into PC return, SUBS PC, LR and the like return from
//! exceptions), written here independently of the decoder's classifier;
//! the truth's exceptions (A32/T32: ranges in the vector table) are calls
//! to their handlers.

use std::collections::BTreeMap;

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::{ElemType, TraceElement, TraceOnReason};
use coresight_decode::interfaces::TrcGenElemIn;
use coresight_decode::shared::{Shared, shared};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Generated, Truth, generate};
use coresight_viz::elements::ElementStacks;
use coresight_viz::profile::{EventKind, Limits};
use coresight_viz::symbols::Symbolizer;
use coresight_viz::timeline::Timeline;

struct Collect(Shared<Vec<(TrcIndex, u8, TraceElement)>>);
impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, id: u8, e: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, id, *e));
        DatapathResp::Cont
    }
}

fn elements(g: &Generated) -> Vec<(TrcIndex, u8, TraceElement)> {
    let got = shared(Vec::new());
    coresight_generator::check::decode_with(g, Box::new(Collect(got.clone()))).unwrap();
    got.borrow().clone()
}

/// The byte at `addr` in the snapshot's memory dumps.
fn byte(g: &Generated, addr: u64) -> Option<u8> {
    for d in g.spec.devices.iter().flat_map(|d| &d.dumps) {
        if addr >= d.address && addr < d.address + d.data.len() as u64 {
            return Some(d.data[(addr - d.address) as usize]);
        }
    }
    None
}

/// The 32-bit word at `addr` (little-endian).
fn word(g: &Generated, addr: u64) -> Option<u32> {
    Some(half(g, addr)? as u32 | (half(g, addr + 2)? as u32) << 16)
}

/// The halfword at `addr`.
fn half(g: &Generated, addr: u64) -> Option<u16> {
    Some(byte(g, addr)? as u16 | (byte(g, addr + 1)? as u16) << 8)
}

/// What the last instruction of a range does to the call stack.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// A branch with link at the range's last instruction (its address).
    Call(u64),
    Return,
    ExceptionReturn,
    Other,
}

/// The instruction sets of the generated programs.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Code {
    A64,
    /// A32 and T32 (PTM, ETMv3).
    A32T32,
}

/// A64: BL, BLR (call); RET (return); ERET.
fn a64_kind(g: &Generated, end: u64) -> Kind {
    let w = word(g, end - 4).unwrap();
    if w & 0xfc00_0000 == 0x9400_0000 || w & 0xffff_fc1f == 0xd63f_0000 {
        Kind::Call(end - 4)
    } else if w & 0xffff_fc1f == 0xd65f_0000 {
        Kind::Return
    } else if w == 0xd69f_03e0 {
        Kind::ExceptionReturn
    } else {
        Kind::Other
    }
}

/// A32: BL, BLX (immediate, register); BX LR, POP {.., PC}, LDR PC, [SP],
/// #4, MOV PC, LR (returns); SUBS PC, LR, #n, MOVS PC, LR, LDM {.., PC}^,
/// RFE (exception returns): the forms the generator writes.
fn a32_kind(w: u32, at: u64) -> Kind {
    let cond = w >> 28;
    if (cond != 0xf && w & 0x0f00_0000 == 0x0b00_0000)
        || w & 0xfe00_0000 == 0xfa00_0000
        || w & 0x0fff_fff0 == 0x012f_ff30
    {
        Kind::Call(at)
    } else if w & 0x0fff_ffff == 0x012f_ff1e || w & 0x0fff_8000 == 0x08bd_8000 || w == 0xe49d_f004 || w == 0xe1a0_f00e {
        Kind::Return
    } else if w & 0xffff_f000 == 0xe25e_f000 || w == 0xe1b0_f00e || w & 0xffff_8000 == 0xe8fd_8000 || w == 0xf8bd_0a00 {
        Kind::ExceptionReturn
    } else {
        Kind::Other
    }
}

/// T32: BL, BLX (immediate, register); BX LR, POP {.., PC}, MOV PC, LR,
/// LDR PC, [SP], #4, POP.W {.., PC}; SUBS PC, LR, #n.
fn t32_kind(h1: u16, h2: u16, at: u64) -> Kind {
    let wide = h1 >> 11 >= 0x1d;
    if (wide && h1 & 0xf800 == 0xf000 && h2 & 0xc000 == 0xc000) || (!wide && h1 & 0xff87 == 0x4780) {
        Kind::Call(at)
    } else if !wide && (h1 == 0x4770 || h1 & 0xff00 == 0xbd00 || h1 == 0x46f7)
        || (h1, h2) == (0xf85d, 0xfb04)
        || (h1 == 0xe8bd && h2 & 0x8000 != 0)
    {
        Kind::Return
    } else if h1 == 0xf3de && h2 & 0xff00 == 0x8f00 {
        Kind::ExceptionReturn
    } else {
        Kind::Other
    }
}

/// The last instruction of the range of `count` instructions from `start`
/// to `end`, in A32 or T32, and whether it is T32. Which one: the T32
/// instruction sizes must add up to the range, A32 ranges are word
/// aligned; when both fit and the readings differ, `thumb` (the state the
/// previous range left, when known) says, or for a `vector` (the range an
/// exception enters) the vector's form.
fn a32t32_kind(g: &Generated, start: u64, end: u64, count: u32, thumb: Option<bool>, vector: bool) -> Reading {
    match a32t32_fit(g, start, end, count) {
        (Some(a), Some(t)) if a.0 != t.0 => {
            // A vector (the range an exception enters) is an A32 `LDR PC,
            // [PC, #n]` or `B`, whose words are no T32 vector's.
            let w = word(g, end - 4).unwrap();
            let vector = thumb.is_none() && vector && count == 1;
            let a32_vector = vector.then_some(w & 0xffff_f000 != 0xe59f_f000 && w >> 24 != 0xea);
            // Else the instruction set of the region, else the reading that
            // ends in a waypoint (ETMv3 ranges may end anywhere).
            let (h1, h2) = (half(g, end - 4).unwrap(), half(g, end - 2).unwrap());
            let t32_last = if h1 >> 11 >= 0x1d { (h1, h2) } else { (h2, 0) };
            let (wa, wt) = (a32_waypoint(w), t32_waypoint(t32_last.0, t32_last.1));
            let waypoint = (wa != wt).then_some(wt);
            let th = thumb
                .or(a32_vector)
                .or_else(|| isa_around(g, end - 2))
                .or(waypoint)
                .unwrap_or_else(|| {
                    panic!(
                        "range 0x{start:x}-0x{end:x} ({count}): A32 or T32? {a:?} {t:?} 0x{w:08x} {thumb:?} {vector}"
                    )
                });
            if th { t } else { a }
        }
        (Some(a), Some(t)) => {
            if thumb.or_else(|| isa_around(g, end - 2)).unwrap_or(true) {
                t
            } else {
                a
            }
        }
        (Some(a), None) => a,
        (None, Some(t)) => t,
        (None, None) => panic!("range 0x{start:x}-0x{end:x} ({count}): neither A32 nor T32"),
    }
}

/// An A32 branch, load or data processing into PC, ISB or RFE.
fn a32_waypoint(w: u32) -> bool {
    w & 0x0e00_0000 == 0x0a00_0000
        || w & 0xfe00_0000 == 0xfa00_0000
        || w & 0x0fff_ffd0 == 0x012f_ff10
        || w & 0x0e10_8000 == 0x0810_8000
        || w & 0x0c10_f000 == 0x0410_f000
        || w & 0x0c00_f000 == 0x0000_f000
        || w == 0xf57f_f06f
        || w & 0xfe50_ffff == 0xf810_0a00
}

/// A T32 branch, BX/BLX, POP/LDM/LDR into PC (and RFE, whose second
/// halfword has bit 15 set too), MOV PC, ISB, SUBS PC, LR.
fn t32_waypoint(h1: u16, h2: u16) -> bool {
    if h1 >> 11 >= 0x1d {
        (h1 >> 11 == 0x1e || h1 & 0xfe50 == 0xe810) && h2 & 0x8000 != 0 || (h1 & 0xff70 == 0xf850 && h2 >> 12 == 0xf)
    } else {
        (h1 >> 12 == 0xd && (h1 >> 8) & 0xf < 0xe)
            || h1 >> 11 == 0x1c
            || h1 & 0xf500 == 0xb100
            || h1 & 0xff00 == 0x4700
            || h1 & 0xff00 == 0xbd00
            || h1 & 0xff87 == 0x4687
    }
}

/// Whether the instruction at `addr` is T32, from the truth's ranges in
/// the same memory dump (a region of the program: one instruction set)
/// that fit one instruction set only.
fn isa_around(g: &Generated, addr: u64) -> Option<bool> {
    let d = g
        .spec
        .devices
        .iter()
        .flat_map(|d| &d.dumps)
        .find(|d| (d.address..d.address + d.data.len() as u64).contains(&addr))?;
    let region = d.address..d.address + d.data.len() as u64;
    g.truth.iter().find_map(|t| match *t {
        Truth::Range { start, end, count, .. } if region.contains(&start) => match a32t32_fit(g, start, end, count) {
            (Some(_), None) => Some(false),
            (None, Some(_)) => Some(true),
            _ => None,
        },
        _ => None,
    })
}

/// The readings of a range as A32 and as T32, where they fit: the last
/// instruction's kind, whether T32, and the instruction set after it.
type Reading = (Kind, bool, Next);

fn a32t32_fit(g: &Generated, start: u64, end: u64, count: u32) -> (Option<Reading>, Option<Reading>) {
    let mut a = start;
    let mut last = (0, 0, 0);
    for _ in 0..count {
        let h1 = half(g, a).unwrap();
        let wide = h1 >> 11 >= 0x1d;
        let h2 = if wide { half(g, a + 2).unwrap() } else { 0 };
        last = (h1, h2, a);
        a += if wide { 4 } else { 2 };
    }
    let (h1, h2, at) = last;
    let wide = h1 >> 11 >= 0x1d;
    // The instruction set of the next range: a direct branch or another
    // instruction keeps it (BLX switches), an indirect branch may change it.
    let t32 = (a == end).then(|| {
        let next = if wide && h1 >> 11 == 0x1e && h2 & 0xd000 == 0xc000 {
            Next::Switch
        } else if (wide && h1 >> 11 == 0x1e && (h2 & 0xd000 == 0x9000 || (h2 & 0xd000 == 0x8000 && (h1 >> 7) & 7 != 7)))
            || (!wide && (h1 >> 12 == 0xd || h1 >> 11 == 0x1c || h1 & 0xf500 == 0xb100))
            || !t32_waypoint(h1, h2)
        {
            Next::Same
        } else {
            Next::Unknown
        };
        (t32_kind(h1, h2, at), true, next)
    });
    let a32 = (start.is_multiple_of(4) && end - start == 4 * count as u64).then(|| {
        let w = word(g, end - 4).unwrap();
        let next = if w & 0xfe00_0000 == 0xfa00_0000 {
            Next::Switch
        } else if w & 0x0e00_0000 == 0x0a00_0000 || !a32_waypoint(w) {
            Next::Same
        } else {
            Next::Unknown
        };
        (a32_kind(w, end - 4), false, next)
    });
    (a32, t32)
}

/// The instruction set after a taken waypoint.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Next {
    Same,
    Switch,
    Unknown,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Flow {
    /// A call from the branch at `site`, returning to `ret`.
    Call {
        site: u64,
        ret: u64,
    },
    Exception(u64),
    Return,
    ExceptionReturn,
}

/// A context: (context ID, VMID) where traced.
type Ctx = (Option<u32>, Option<u32>);
/// Per context, (depth, callee entry) per activation in the order they
/// began; and the depth at the start of every range.
type Tree = (BTreeMap<Ctx, Vec<(usize, u64)>>, Vec<usize>);

/// The truth's call tree, one stack per context.
fn truth_tree(g: &Generated, protocol: GenProtocol) -> Tree {
    truth_tree_with_gap(g, protocol, None)
}

/// The truth's call tree, one stack per context; with `lost` (a range of
/// indices into the truth), the items there are lost to an overflow
/// before the first of them: only their context changes are known (the
/// trace restates the context when it resynchronises), and the stack is
/// kept, as the documented gap rule says.
fn truth_tree_with_gap(g: &Generated, protocol: GenProtocol, lost: Option<std::ops::Range<usize>>) -> Tree {
    let code = code(protocol);
    let mut t = TruthTree {
        defer_calls: matches!(protocol, GenProtocol::Etmv3(_)),
        ..Default::default()
    };
    let vectors = match code {
        Code::A64 => None,
        Code::A32T32 => vector_table(g),
    };
    // A32/T32: whether the next range is T32, when known.
    let mut thumb: Option<bool> = None;
    let mut after_exception = false;
    // A range ran before (since the trace (re)started): a trace that
    // starts in the vector table says nothing of an exception.
    let mut ran = false;
    for (n, item) in g.truth.iter().enumerate() {
        if let Some(l) = &lost
            && l.contains(&n)
        {
            t.pending = None;
            thumb = None;
            ran = false;
            if let Truth::Context { ctxt_id, vmid, .. } = *item {
                t.ctx = (ctxt_id, vmid);
            }
            continue;
        }
        match *item {
            Truth::Range {
                start,
                end,
                exec,
                count,
            } => {
                // PTM and ETMv3 truths hold no exceptions: a range in the
                // vector table is one, returning to where the range after
                // its handler's exception return starts.
                if let Some(v) = &vectors
                    && v.contains(&start)
                    && std::mem::replace(&mut ran, true)
                {
                    let ret = exception_return_target(g, n, v);
                    t.exception(ret);
                    thumb = None;
                    after_exception = true;
                }
                ran = true;
                t.transfer(start);
                let stack = t.stacks.entry(t.ctx).or_default();
                let acts = t.acts.entry(t.ctx).or_default();
                if acts.is_empty() {
                    acts.push((0, start));
                }
                t.depths.push(stack.len());
                let kind = match code {
                    Code::A64 => a64_kind(g, end),
                    Code::A32T32 => {
                        let (kind, t32, next) = a32t32_kind(g, start, end, count, thumb, after_exception);
                        thumb = match (exec, next) {
                            (false, _) | (true, Next::Same) => Some(t32),
                            (true, Next::Switch) => Some(!t32),
                            (true, Next::Unknown) => None,
                        };
                        after_exception = false;
                        kind
                    }
                };
                if exec {
                    t.pending = match kind {
                        Kind::Call(site) => Some(Flow::Call { site, ret: end }),
                        Kind::Return => Some(Flow::Return),
                        Kind::ExceptionReturn => Some(Flow::ExceptionReturn),
                        Kind::Other => None,
                    };
                }
            }
            Truth::Exception { ret_addr, .. } => t.exception(ret_addr),
            Truth::ExceptionReturn => t.pending = Some(Flow::ExceptionReturn),
            Truth::Context { ctxt_id, vmid, .. } => t.ctx = (ctxt_id, vmid),
            Truth::Session(_) => {
                t.pending = None;
                thumb = None;
                ran = false;
            }
            _ => {}
        }
    }
    t.acts.retain(|_, v| !v.is_empty());
    (t.acts, t.depths)
}

/// The truth's stacks as it is read.
#[derive(Default)]
struct TruthTree {
    acts: BTreeMap<Ctx, Vec<(usize, u64)>>,
    depths: Vec<usize>,
    /// Per context: (return address, entered by an exception).
    stacks: BTreeMap<Ctx, Vec<(u64, bool)>>,
    ctx: Ctx,
    pending: Option<Flow>,
    /// The trace does not say where exceptions return (ETMv3): a call
    /// whose target never ran because an exception came first is seen
    /// when the exception returns, going to where it returns; a return
    /// whose target never ran leaves the innermost call.
    defer_calls: bool,
    deferred: Option<u64>,
}

impl TruthTree {
    /// The transfer pending went to `to`.
    fn transfer(&mut self, to: u64) {
        let stack = self.stacks.entry(self.ctx).or_default();
        let acts = self.acts.entry(self.ctx).or_default();
        let from = match self.pending {
            Some(Flow::Call { site, .. }) => site,
            Some(Flow::Exception(ret)) => ret,
            _ => 0,
        };
        if from != 0 && acts.is_empty() {
            // The context begins with a call or an exception: the
            // function it was in is its outermost.
            acts.push((0, from));
        }
        match self.pending.take() {
            Some(Flow::Call { ret, .. }) => {
                stack.push((ret, false));
                acts.push((stack.len(), to));
            }
            Some(Flow::Exception(ret)) => {
                stack.push((ret, true));
                acts.push((stack.len(), to));
            }
            Some(f @ (Flow::Return | Flow::ExceptionReturn)) => {
                let found = if f == Flow::Return {
                    stack.iter().rposition(|e| e.0 == to)
                } else {
                    stack.iter().rposition(|e| e.1)
                };
                match found {
                    Some(i) => {
                        stack.truncate(i);
                        if f == Flow::ExceptionReturn
                            && let Some(ret) = self.deferred.take()
                        {
                            stack.push((ret, false));
                            acts.push((stack.len(), to));
                        }
                    }
                    // The walk's own call stack holds 64 calls at most, is
                    // not kept per context, and a return with none goes
                    // anywhere: a return that matches no call leaves the
                    // innermost call, or replaces the outermost function.
                    None if !stack.is_empty() => {
                        stack.pop();
                    }
                    None => acts.push((0, to)),
                }
            }
            None => {}
        }
    }

    /// An exception returning to `ret`: the transfer pending (whose target
    /// never ran) went there.
    fn exception(&mut self, ret: u64) {
        if self.defer_calls
            && let Some(Flow::Call { ret: r, .. }) = self.pending
        {
            self.deferred = Some(r);
        } else if self.defer_calls && self.pending == Some(Flow::Return) {
            // Nor where a return went: it leaves the innermost call.
            self.stacks.entry(self.ctx).or_default().pop();
        } else if self.defer_calls && self.pending == Some(Flow::ExceptionReturn) {
            // Nor where an exception return went: it leaves the innermost
            // exception, and a call deferred still waits for where it goes.
            let stack = self.stacks.entry(self.ctx).or_default();
            if let Some(i) = stack.iter().rposition(|e| e.1) {
                stack.truncate(i);
            }
        } else if self.pending.is_some() {
            self.transfer(ret);
        }
        self.pending = Some(Flow::Exception(ret));
    }
}

/// The generated A32/T32 programs' vector table: 0x10000 above the main
/// code, when a memory dump starts there.
fn vector_table(g: &Generated) -> Option<std::ops::Range<u64>> {
    let dumps: Vec<u64> = g
        .spec
        .devices
        .iter()
        .flat_map(|d| &d.dumps)
        .map(|d| d.address)
        .collect();
    let vbar = dumps.iter().min()? + 0x1_0000;
    dumps.contains(&vbar).then_some(vbar..vbar + 0x20)
}

/// Where the exception entered at truth item `n` returns: the start of the
/// range after its handler's exception return (handlers nest: a vector
/// entered again before it returns goes one deeper; one entered as it
/// returns, before anything ran, returns to the same place).
fn exception_return_target(g: &Generated, n: usize, vectors: &std::ops::Range<u64>) -> u64 {
    let mut depth = 0;
    let mut returning = false;
    for item in &g.truth[n..] {
        let Truth::Range {
            start,
            end,
            count,
            exec,
        } = *item
        else {
            continue;
        };
        if returning {
            // Where it returned to another exception came before anything
            // ran: that one returns there too.
            if depth == 0 && !vectors.contains(&start) {
                return start;
            }
            returning = false;
        }
        if vectors.contains(&start) {
            depth += 1;
        }
        let (a, t) = a32t32_fit(g, start, end, count);
        let exc_ret = [a, t].iter().flatten().any(|r| r.0 == Kind::ExceptionReturn);
        if exec && exc_ret {
            depth -= 1;
            returning = true;
        }
    }
    0
}

/// Ours, from the timeline's events and the stacks as the elements go by.
fn our_tree(els: &[(TrcIndex, u8, TraceElement)]) -> (Tree, u64) {
    let (tree, gaps) = our_tree_with_gaps(els);
    (tree, gaps.count)
}

/// What our side says of gaps.
struct Gaps {
    /// Gaps seen.
    count: u64,
    /// Their byte offsets.
    offsets: Vec<u64>,
    /// Times a stack was marked broken.
    broken: u64,
    /// Calls the timeline opens after its first gap.
    opened_after: usize,
}

fn our_tree_with_gaps(els: &[(TrcIndex, u8, TraceElement)]) -> (Tree, Gaps) {
    let mut s = ElementStacks::new(Symbolizer::new(), Limits::default());
    let mut depths = Vec::new();
    for (i, id, e) in els {
        s.element(*id as u64, || format!("id {id}"), *i, e);
        if e.elem_type == ElemType::InstrRange {
            let c = s.profile.active(0).unwrap();
            depths.push(s.profile.contexts[c as usize].depth() - 1);
        }
    }
    s.finish();
    let tl = Timeline::all(&s.profile);
    let p = &s.profile;
    let mut acts: BTreeMap<Ctx, Vec<(usize, u64)>> = BTreeMap::new();
    for e in tl.events.iter().filter(|e| e.kind == EventKind::Open) {
        let key = p.contexts[e.ctx as usize].key;
        let ctx = (
            ((key >> 64) & 1 == 1).then_some(key as u32),
            ((key >> 65) & 1 == 1).then_some((key >> 32) as u32),
        );
        let n = &p.nodes[e.node as usize];
        let name = p.frames.name(n.frame);
        acts.entry(ctx)
            .or_default()
            .push((n.depth as usize - 1, u64::from_str_radix(&name[2..], 16).unwrap()));
    }
    let first_gap = tl.events.iter().position(|e| e.kind == EventKind::Gap);
    let gaps = Gaps {
        count: p.gap_count,
        offsets: p.gaps.iter().map(|g| g.offset).collect(),
        broken: p.contexts.iter().map(|c| c.broken).sum(),
        opened_after: first_gap.map_or(0, |f| {
            tl.events[f..].iter().filter(|e| e.kind == EventKind::Open).count()
        }),
    };
    ((acts, depths), gaps)
}

/// PTM and ETMv3 with every option random (by seed), on A32, T32 or both,
/// but context IDs and trace filtering: their generators change the
/// context ID at random in the middle of one program's walk, and their
/// truths say neither that nor where trace was off, so one stack per
/// context (checked on ETMv4 and ETE, whose truths give the contexts)
/// would split what the truth runs as one, and the truth would run on
/// across what was not traced.
fn a32t32_protocols() -> Vec<GenProtocol> {
    let ptm = coresight_generator::ptm::PtmGenOptions {
        context_id: Some(false),
        trace_filter: Some(false),
        ..Default::default()
    };
    let etmv3 = coresight_generator::etmv3::Etmv3GenOptions {
        context_id: Some(false),
        trace_filter: Some(false),
        ..Default::default()
    };
    vec![GenProtocol::Ptm(ptm), GenProtocol::Etmv3(etmv3)]
}

fn code(protocol: GenProtocol) -> Code {
    match protocol {
        GenProtocol::Ptm(_) | GenProtocol::Etmv3(_) => Code::A32T32,
        _ => Code::A64,
    }
}

fn check_call_tree(protocols: Vec<GenProtocol>, seeds: std::ops::RangeInclusive<u64>) -> usize {
    let mut checked = 0;
    for protocol in protocols {
        for seed in seeds.clone() {
            let g = generate(&GenOptions {
                seed,
                protocol,
                layout: BufferLayout::Formatted,
                length: 400,
            });
            let (tacts, tdepths) = truth_tree(&g, protocol);
            let ((acts, depths), gaps) = our_tree(&elements(&g));
            assert_eq!(gaps, 0, "{} seed {seed}: gaps", protocol.name());
            let ranges: Vec<Truth> = truth_ranges(&g).into_iter().map(|t| t.1.clone()).collect();
            show_difference(&ranges, &depths, &tdepths, None);
            assert_eq!(depths, tdepths, "{} seed {seed}: depth over time", protocol.name());
            assert_eq!(acts, tacts, "{} seed {seed}: call tree", protocol.name());
            assert!(
                tacts.values().map(Vec::len).sum::<usize>() > 5,
                "{} seed {seed}: few calls",
                protocol.name()
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn call_tree_equals_the_truth_etmv4_ete() {
    let protocols = vec![GenProtocol::Etmv4, GenProtocol::Ete(Default::default())];
    assert_eq!(check_call_tree(protocols, 1..=12), 24);
}

#[test]
fn call_tree_equals_the_truth_ptm_etmv3() {
    assert_eq!(check_call_tree(a32t32_protocols(), 1..=16), 32);
}

/// Makes the generated trace (one source, unformatted) lose what its trace
/// unit wrote between two synchronisation points in its middle, as a
/// trace unit whose FIFO overflowed does: the bytes from an A-sync a
/// quarter of the way in to a later one (a sixth of the trace further at
/// least) are cut, and the trace unit says so where it resumes: ETMv4 and
/// ETE with an Overflow packet before the A-sync, PTM and ETMv3 with the
/// I-sync after it giving reason 2 (restart after overflow). Returns the
/// byte offset of the cut and the bytes lost.
fn overflow(g: &mut Generated, protocol: GenProtocol) -> (usize, usize) {
    let a64 = code(protocol) == Code::A64;
    let mut sync = vec![0u8; if a64 { 11 } else { 5 }];
    sync.push(0x80);
    assert_eq!(g.spec.buffers[0].format, "source_data");
    let data = &mut g.spec.buffers[0].data;
    let syncs: Vec<usize> = (0..data.len().saturating_sub(sync.len()))
        .filter(|&i| data[i..i + sync.len()] == sync[..])
        .collect();
    let len = data.len();
    let p1 = *syncs
        .iter()
        .find(|&&p| p >= len / 4)
        .unwrap_or_else(|| panic!("no sync a quarter of the way in: {len} bytes, syncs at {syncs:?}"));
    let p2 = *syncs.iter().find(|&&p| p >= p1 + len / 6).expect("a sync further on");
    data.drain(p1..p2);
    if a64 {
        data.insert(p1, 0x05);
    } else {
        // No cycle counts and no context ID: the I-sync is the header, the
        // address (PTM) and the information byte, or the header and the
        // information byte then the address (ETMv3).
        let i = p1 + sync.len();
        assert_eq!(data[i], 0x08, "an I-sync after the A-sync");
        let info = i + if matches!(protocol, GenProtocol::Ptm(_)) { 5 } else { 1 };
        assert_eq!(data[info] & 0x60, 0, "a periodic I-sync");
        data[info] |= 2 << 5;
    }
    (p1, p2 - p1)
}

/// The truth's ranges.
fn truth_ranges(g: &Generated) -> Vec<(usize, &Truth)> {
    g.truth
        .iter()
        .enumerate()
        .filter(|(_, t)| matches!(t, Truth::Range { .. }))
        .collect()
}

fn overflow_protocols() -> Vec<GenProtocol> {
    let ptm = coresight_generator::ptm::PtmGenOptions {
        context_id: Some(false),
        trace_filter: Some(false),
        cycle_accurate: Some(false),
        ..Default::default()
    };
    let etmv3 = coresight_generator::etmv3::Etmv3GenOptions {
        context_id: Some(false),
        trace_filter: Some(false),
        cycle_accurate: Some(false),
        ..Default::default()
    };
    vec![
        GenProtocol::Etmv4,
        GenProtocol::Ete(Default::default()),
        GenProtocol::Ptm(ptm),
        GenProtocol::Etmv3(etmv3),
    ]
}

#[test]
fn call_tree_across_a_real_overflow() {
    let mut checked = 0;
    // Calls the timelines open after their gap (some walks end in a loop
    // without calls).
    let mut opened_after = 0;
    for protocol in overflow_protocols() {
        for seed in 1..=6 {
            let name = format!("{} seed {seed}", protocol.name());
            let mut g = generate(&GenOptions {
                seed,
                protocol,
                layout: BufferLayout::Unformatted,
                length: 3000,
            });
            let (cut, lost_bytes) = overflow(&mut g, protocol);
            let els = elements(&g);
            // The decoded ranges are the truth's up to the cut, then the
            // truth's from where the decoder resynchronised: nothing made up.
            let resync = els
                .iter()
                .position(|e| {
                    e.0 as usize >= cut
                        && (e.2.elem_type == ElemType::NoSync
                            || (e.2.elem_type == ElemType::TraceOn && e.2.trace_on_reason == TraceOnReason::Overflow))
                })
                .unwrap_or_else(|| panic!("{name}: no loss of sync nor overflow seen"));
            let ranges = |els: &[(TrcIndex, u8, TraceElement)]| -> Vec<Truth> {
                els.iter()
                    .filter(|e| e.2.elem_type == ElemType::InstrRange)
                    .filter_map(|e| Truth::from_element(&e.2))
                    .collect()
            };
            let (ours_before, ours_after) = (ranges(&els[..resync]), ranges(&els[resync..]));
            let truth = truth_ranges(&g);
            let (before, after) = (ours_before.len(), ours_after.len());
            let ours: Vec<Truth> = ours_before.into_iter().chain(ours_after).collect();
            let theirs: Vec<Truth> = truth[..before]
                .iter()
                .chain(&truth[truth.len() - after..])
                .map(|t| t.1.clone())
                .collect();
            assert!(
                ours == theirs,
                "{name}: decoded ranges not the truth's before and after the gap"
            );
            let lost_ranges = truth.len() - ours.len();
            assert!(lost_ranges > 20, "{name}: {lost_ranges} ranges lost");
            assert!(
                before > 20 && after > 20,
                "{name}: {before} ranges before, {after} after (of {}); cut {lost_bytes} bytes at {cut} of {}",
                truth.len(),
                g.spec.buffers[0].data.len() + lost_bytes
            );
            // The truth with what was lost taken out, the stack kept.
            let lost = truth[before - 1].0 + 1..truth[truth.len() - after].0;
            let (tacts, tdepths) = truth_tree_with_gap(&g, protocol, Some(lost));
            let ((acts, depths), gaps) = our_tree_with_gaps(&els);
            assert_eq!(gaps.count, 1, "{name}: gaps {:?}", gaps.offsets);
            assert_eq!(gaps.broken, 1, "{name}: stacks broken");
            let at = gaps.offsets[0] as usize;
            assert!((cut..cut + 24).contains(&at), "{name}: gap at byte {at}, cut at {cut}");
            opened_after += gaps.opened_after;
            show_difference(&theirs, &depths, &tdepths, Some(before));
            assert_eq!(depths, tdepths, "{name}: depth over time");
            assert_eq!(acts, tacts, "{name}: call tree");
            let _ = lost_bytes;
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
    assert!(opened_after > 24 * 20, "{opened_after} calls after the gaps");
}

/// On stderr: the ranges around the first place the depths differ (and
/// where the decoder resynchronised).
fn show_difference(ranges: &[Truth], ours: &[usize], truth: &[usize], resync: Option<usize>) {
    let Some(i) = ours.iter().zip(truth).position(|(a, b)| a != b) else {
        return;
    };
    for (k, r) in ranges.iter().enumerate().skip(i.saturating_sub(6)).take(9) {
        let mark = if resync == Some(k) { " (resync)" } else { "" };
        eprintln!("{k}{mark}: {r} ours {:?} truth {:?}", ours.get(k), truth.get(k));
    }
}
