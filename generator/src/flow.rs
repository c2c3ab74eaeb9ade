//! Programs of basic blocks in any instruction set, and walks through
//! them that take exceptions and change context as a real PE would.
//!
//! A [`Program`] is a main program (blocks laid out back to back, each a
//! few straight-line instructions ending in a branch) and, optionally,
//! exception handlers: a second run of blocks whose branches only go
//! forwards and whose last block is an exception return, so every handler
//! returns. Instruction-set builders (`a64`, `t32m`) lay out and encode
//! the blocks; this module only needs their addresses, sizes and kinds.
//!
//! [`walk`] executes a program at random and records what a trace unit
//! sees as a list of [`Seg`]ments: a run of instructions from an address,
//! ending at a waypoint (a branch, taken or not) or at an exception taken
//! before some instruction. The walk keeps a call stack (returns go back to
//! their callers), an exception stack (exception returns resume where the
//! exception was taken, or after a trapped instruction), and the PE context
//! (exception level, security state, context ID, VMID).
//!
//! Armv9 additions (used by the ETE generator, absent from other programs):
//! WFI/WFE/WFIT/WFET, which end a segment when the trace unit makes them
//! waypoints; transactions (FEAT_TME: TSTART, TCOMMIT, TCANCEL), which the
//! walk follows with their nesting depth, failing now and then and
//! resuming after the outer TSTART; and TRCIT instrumentation. Programs
//! place transactions so that they are well formed (see [`tx_regions`]).
//! No exception is taken inside a transaction (one would make it fail
//! first), and transactions make no calls.

use super::Rng;

/// How a block ends. Targets are indices into [`Program::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// Unconditional direct branch.
    B(usize),
    /// Direct call; returns to the next block.
    Bl(usize),
    /// Conditional direct branch, else fall through.
    Cond(usize),
    /// Indirect branch through a register.
    Br,
    /// Indirect call through a register.
    Blr,
    /// Function return.
    Ret,
    /// Exception return (A64 ERET; M-profile BX LR / POP {pc} with an
    /// EXC_RETURN value).
    ExcRet,
}

impl Term {
    pub fn is_indirect(self) -> bool {
        matches!(self, Term::Br | Term::Blr | Term::Ret | Term::ExcRet)
    }
    pub fn is_link(self) -> bool {
        matches!(self, Term::Bl(_) | Term::Blr)
    }
}

/// What a straight-line instruction is, as far as exceptions care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plain,
    /// Supervisor call: always takes a Call exception after it executes.
    Svc,
    /// Load or store: may take a data fault before it executes.
    Mem,
    /// WFI, WFE, WFIT or WFET: a waypoint when the trace unit traces it as
    /// one ([`WalkCfg::wfx_waypoints`]), else an ordinary instruction.
    Wfx,
    /// TSTART: starts a transaction, or nests one inside the current one.
    /// A waypoint. A transaction head block ends with it (and a CBNZ on its
    /// result); nested ones sit inside a transaction's blocks.
    Tstart,
    /// TCOMMIT: ends the innermost transaction (the outer one commits).
    Tcommit,
    /// TCANCEL: the transaction fails.
    Tcancel,
    /// TRCIT: an instrumentation packet carrying a register's value.
    Ite,
}

/// One straight-line instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instr {
    pub size: u8,
    pub kind: Kind,
}

/// One basic block.
#[derive(Clone, Debug)]
pub struct Block {
    pub addr: u64,
    pub body: Vec<Instr>,
    pub term: Term,
    pub term_size: u8,
}

impl Block {
    /// Address of instruction `i` (`body.len()` is the terminator).
    pub fn instr_addr(&self, i: usize) -> u64 {
        self.addr + self.body[..i].iter().map(|x| x.size as u64).sum::<u64>()
    }
    pub fn term_addr(&self) -> u64 {
        self.instr_addr(self.body.len())
    }
    /// Address after the block.
    pub fn end(&self) -> u64 {
        self.term_addr() + self.term_size as u64
    }
    /// Size of instruction `i`.
    pub fn size_of(&self, i: usize) -> u8 {
        if i < self.body.len() {
            self.body[i].size
        } else {
            self.term_size
        }
    }
}

/// A program and its code.
#[derive(Clone, Debug)]
pub struct Program {
    pub blocks: Vec<Block>,
    /// Blocks of the main program (contiguous, the last never falls through).
    pub main: std::ops::Range<usize>,
    /// Exception handler blocks (contiguous, forward branches only, the
    /// last an exception return); may be empty.
    pub handlers: std::ops::Range<usize>,
    /// Handler blocks exceptions enter at.
    pub entries: Vec<usize>,
    /// Code images: (address, bytes).
    pub images: Vec<(u64, Vec<u8>)>,
}

/// PE context as the trace shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ctx {
    pub el: u8,
    /// Secure (or, with `nse`, Root) rather than Non-secure (Realm).
    pub secure: bool,
    /// Armv9 RME: Root (secure) or Realm (not secure) state.
    pub nse: bool,
    pub aarch64: bool,
    pub cid: u32,
    pub vmid: u32,
}

impl Ctx {
    /// The security state.
    pub fn security(&self) -> coresight_decode::arch::SecurityState {
        use coresight_decode::arch::SecurityState as S;
        match (self.nse, self.secure) {
            (false, true) => S::Secure,
            (false, false) => S::NonSecure,
            (true, true) => S::Root,
            (true, false) => S::Realm,
        }
    }
}

/// Exception causes the walk can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Irq,
    Fiq,
    /// After an SVC.
    Call,
    /// Before a load or store, which runs again after the handler.
    DataFault,
    /// Before an instruction, which the handler emulates and skips.
    Trap,
}

/// Something that happens inside a segment without ending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The outer transaction commits (a TCOMMIT at depth 1).
    TxCommit,
    /// A TRCIT with this value.
    Ite(u64),
}

/// How a segment ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The last instruction is a waypoint: a branch, taken or not;
    /// execution continues at `next`.
    Branch { taken: bool, term: Term, next: u64 },
    /// An exception is taken before the instruction at the segment's end
    /// (the preferred return address). `entry` is the handler block.
    Exception { cause: Cause, entry: usize },
    /// The last instruction is a WFI/WFE/WFIT/WFET traced as a waypoint;
    /// execution continues after it.
    Wfx,
    /// The last instruction is a TSTART that starts the outer transaction
    /// (`outer`) or a nested one; execution continues after it.
    Tstart { outer: bool },
    /// The transaction fails after the segment's instructions (the last
    /// one a TCANCEL, or a conflict); execution resumes at `resume`, after
    /// the outer TSTART, outside the transaction.
    TxFail { resume: u64 },
}

/// A run of instructions from `start` up to (not including) `end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seg {
    pub start: u64,
    pub end: u64,
    pub count: u32,
    /// Context the instructions ran in.
    pub ctx: Ctx,
    pub how: End,
    /// Transaction nesting depth when the segment starts.
    pub tx_depth: u8,
    /// What happened along the way, in order.
    pub events: Vec<Event>,
}

/// What the walk may do.
#[derive(Clone, Copy, Debug)]
pub struct WalkCfg {
    pub exceptions: bool,
    /// Exception levels, security states, context IDs and VMIDs change.
    pub ctx_changes: bool,
    /// M-profile: no exception levels above 1, no context ID or VMID.
    pub m_profile: bool,
    /// Deepest exception nesting.
    pub max_depth: usize,
    /// Context the main program starts in.
    pub start_ctx: Ctx,
    /// WFI/WFE/WFIT/WFET end segments (waypoints).
    pub wfx_waypoints: bool,
    /// Armv9 RME: EL3 runs in Root state, lower levels in Non-secure or
    /// Realm state (the monitor switches worlds now and then).
    pub rme: bool,
}

impl WalkCfg {
    /// A walk with the given options and none of the Armv9 ones.
    pub fn basic(exceptions: bool, ctx_changes: bool, m_profile: bool, max_depth: usize, start_ctx: Ctx) -> Self {
        WalkCfg {
            exceptions,
            ctx_changes,
            m_profile,
            max_depth,
            start_ctx,
            wfx_waypoints: false,
            rme: false,
        }
    }
}

/// Blocks inside transactions: those after a transaction head (a block
/// whose body ends with TSTART) up to the one whose TCOMMIT ends the outer
/// transaction. Program builders make them reachable only by falling
/// through from the head (no branch or return lands in them), and give them
/// no way out but to the next one, so every transaction either commits or
/// fails.
pub fn tx_regions(prog: &Program) -> Vec<bool> {
    let mut inside = vec![false; prog.blocks.len()];
    for (i, b) in prog.blocks.iter().enumerate() {
        if b.body.last().map(|x| x.kind) != Some(Kind::Tstart) {
            continue;
        }
        let mut depth = 1i32;
        let mut j = i + 1;
        while depth > 0 && j < prog.blocks.len() {
            inside[j] = true;
            for x in &prog.blocks[j].body {
                match x.kind {
                    Kind::Tstart => depth += 1,
                    Kind::Tcommit => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
            j += 1;
        }
    }
    inside
}

/// Where execution is: block and instruction index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pc {
    block: usize,
    index: usize,
}

/// Walks about `steps` segments through `prog` from its first block.
pub fn walk(rng: &mut Rng, prog: &Program, cfg: &WalkCfg, steps: usize) -> Vec<Seg> {
    let mut w = Walk::new(rng.clone(), prog, cfg, steps);
    let out = w.by_ref().collect();
    *rng = w.rng;
    out
}

/// [`walk`] one segment at a time, so that a long walk need not be held:
/// the same segments, from the same random numbers.
pub struct Walk<'a> {
    rng: Rng,
    prog: &'a Program,
    cfg: WalkCfg,
    /// Segments still to walk.
    left: usize,
    /// Return addresses of calls (at most 64).
    calls: Vec<usize>,
    /// Where each exception taken resumes, and the context it was taken in.
    excs: Vec<(Pc, Ctx)>,
    ctx: Ctx,
    pc: Pc,
    can_except: bool,
    /// Blocks only reachable by falling through inside a transaction: no
    /// indirect branch goes there.
    in_tx_region: Vec<bool>,
    /// Transactions: nesting depth, where a failure resumes (after the
    /// outer TSTART), and whether the last one failed (its CBNZ is taken).
    tx_depth: u8,
    tx_resume: Pc,
    tx_failed: bool,
}

/// A main program block outside transactions, at random.
fn main_block(rng: &mut Rng, prog: &Program, in_tx_region: &[bool]) -> usize {
    loop {
        let b = prog.main.start + rng.below(prog.main.len() as u64) as usize;
        if !in_tx_region[b] {
            break b;
        }
    }
}

impl<'a> Walk<'a> {
    /// A walk of `steps` segments through `prog` drawing from `rng`.
    pub fn new(rng: Rng, prog: &'a Program, cfg: &WalkCfg, steps: usize) -> Self {
        let pc = Pc {
            block: prog.main.start,
            index: 0,
        };
        Walk {
            rng,
            prog,
            cfg: *cfg,
            left: steps,
            calls: Vec::new(),
            excs: Vec::new(),
            ctx: cfg.start_ctx,
            pc,
            can_except: cfg.exceptions && !prog.handlers.is_empty(),
            in_tx_region: tx_regions(prog),
            tx_depth: 0,
            tx_resume: pc,
            tx_failed: false,
        }
    }

    /// The random number generator, as the segments walked so far left it.
    pub fn into_rng(self) -> Rng {
        self.rng
    }

    /// Walks `steps` from `rng` for the random numbers alone: `rng` is left
    /// as the whole walk leaves it, and the generator the walk started
    /// from is returned (to walk it again, for real, after what follows
    /// the walk has drawn its numbers).
    pub fn skip_over(rng: &mut Rng, prog: &Program, cfg: &WalkCfg, steps: usize) -> Rng {
        let start = rng.clone();
        let mut walk = Walk::new(start.clone(), prog, cfg, steps);
        walk.by_ref().for_each(drop);
        *rng = walk.into_rng();
        start
    }
}

impl Iterator for Walk<'_> {
    type Item = Seg;

    fn next(&mut self) -> Option<Seg> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (mut ctx, mut pc, mut tx_depth, mut tx_resume, mut tx_failed) =
            (self.ctx, self.pc, self.tx_depth, self.tx_resume, self.tx_failed);
        let Walk {
            rng,
            prog,
            cfg,
            calls,
            excs,
            can_except,
            in_tx_region,
            ..
        } = self;
        let prog: &Program = prog;
        let cfg: &WalkCfg = cfg;
        let can_except = *can_except;
        let main_block = |rng: &mut Rng| main_block(rng, prog, in_tx_region);
        let out = 'step: {
            let b = &prog.blocks[pc.block];
            let last = b.body.len();
            let start = b.instr_addr(pc.index);
            let seg = move |end: usize, ctx: Ctx, how: End, events: Vec<Event>| Seg {
                start,
                end: b.instr_addr(end),
                count: (end - pc.index) as u32,
                ctx,
                how,
                tx_depth,
                events,
            };
            // The first exception this run reaches, if any: (boundary, cause,
            // resume index). None inside a transaction.
            let mut exc: Option<(usize, Cause, usize)> = None;
            let mut consider = |k: usize, cause: Cause, resume: usize| {
                if exc.is_none_or(|(e, _, _)| k < e) {
                    exc = Some((k, cause, resume));
                }
            };
            if can_except && excs.len() < cfg.max_depth && tx_depth == 0 {
                for (j, ins) in b.body.iter().enumerate().skip(pc.index) {
                    match ins.kind {
                        Kind::Svc => {
                            consider(j + 1, Cause::Call, j + 1);
                            break;
                        }
                        Kind::Mem if rng.chance(1, 12) => consider(j, Cause::DataFault, j),
                        Kind::Plain if rng.chance(1, 40) => consider(j, Cause::Trap, j + 1),
                        _ => {}
                    }
                }
                if rng.chance(1, 10) {
                    let k = pc.index + rng.below((last - pc.index + 1) as u64) as usize;
                    consider(k, if rng.chance(1, 4) { Cause::Fiq } else { Cause::Irq }, k);
                }
            }

            // Instructions that end the run before its terminator (waypoints,
            // a failing transaction) or happen along the way: (boundary, how).
            let mut stop: Option<(usize, End)> = None;
            let mut events = Vec::new();
            let mut depth = tx_depth;
            let exc_at = exc.map_or(usize::MAX, |(k, _, _)| k);
            for j in pc.index..=last {
                if j >= exc_at {
                    break;
                }
                if depth > 0 && rng.chance(1, 40) {
                    // A conflict: the transaction fails before instruction j.
                    stop = Some((
                        j,
                        End::TxFail {
                            resume: prog.blocks[tx_resume.block].instr_addr(tx_resume.index),
                        },
                    ));
                    break;
                }
                let Some(ins) = b.body.get(j) else { break };
                match ins.kind {
                    Kind::Wfx if cfg.wfx_waypoints => {
                        stop = Some((j + 1, End::Wfx));
                        break;
                    }
                    Kind::Tstart => {
                        stop = Some((j + 1, End::Tstart { outer: depth == 0 }));
                        break;
                    }
                    Kind::Tcommit if depth > 0 => {
                        depth -= 1;
                        if depth == 0 {
                            events.push(Event::TxCommit);
                        }
                    }
                    Kind::Tcancel if depth > 0 => {
                        stop = Some((
                            j + 1,
                            End::TxFail {
                                resume: prog.blocks[tx_resume.block].instr_addr(tx_resume.index),
                            },
                        ));
                        break;
                    }
                    Kind::Ite => events.push(Event::Ite(rng.next_u64())),
                    _ => {}
                }
            }
            if let Some((k, how)) = stop {
                let out = seg(k, ctx, how, events);
                match how {
                    End::Tstart { outer } => {
                        if outer {
                            tx_resume = Pc {
                                block: pc.block,
                                index: k,
                            };
                            tx_failed = false;
                        }
                        tx_depth = depth + 1;
                        pc.index = k;
                    }
                    End::TxFail { .. } => {
                        tx_depth = 0;
                        tx_failed = true;
                        pc = tx_resume;
                    }
                    _ => {
                        tx_depth = depth;
                        pc.index = k;
                    }
                }
                break 'step out;
            }
            tx_depth = depth;

            if let Some((k, cause, resume)) = exc {
                let entry = prog.entries[rng.below(prog.entries.len() as u64) as usize];
                let out = seg(k, ctx, End::Exception { cause, entry }, events);
                excs.push((
                    Pc {
                        block: pc.block,
                        index: resume,
                    },
                    ctx,
                ));
                if cfg.ctx_changes {
                    ctx = handler_ctx(rng, cfg, ctx, cause);
                }
                pc = Pc { block: entry, index: 0 };
                break 'step out;
            }

            // Run to the terminator. An exception return or a context switch
            // changes the context after it: the segment ran in this one.
            let run_ctx = ctx;
            let in_handler = prog.handlers.contains(&pc.block);
            let fall = pc.block + 1;
            // The CBNZ after a transaction's TSTART: taken when it failed.
            let tx_head = b.body.last().is_some_and(|x| x.kind == Kind::Tstart);
            let (taken, to) = match b.term {
                Term::B(t) => (true, Pc { block: t, index: 0 }),
                Term::Cond(t) => {
                    let taken = if tx_head {
                        std::mem::take(&mut tx_failed)
                    } else {
                        rng.chance(1, 2)
                    };
                    if taken {
                        (true, Pc { block: t, index: 0 })
                    } else {
                        (false, Pc { block: fall, index: 0 })
                    }
                }
                Term::Bl(t) => {
                    if calls.len() < 64 {
                        calls.push(fall);
                    }
                    (true, Pc { block: t, index: 0 })
                }
                Term::Blr => {
                    if calls.len() < 64 {
                        calls.push(fall);
                    }
                    (
                        true,
                        Pc {
                            block: main_block(rng),
                            index: 0,
                        },
                    )
                }
                Term::Br => {
                    let t = if in_handler {
                        // Forward only, so handlers always reach their return.
                        fall + rng.below((prog.handlers.end - fall) as u64) as usize
                    } else {
                        main_block(rng)
                    };
                    (true, Pc { block: t, index: 0 })
                }
                Term::Ret => {
                    let t = calls.pop().unwrap_or_else(|| main_block(rng));
                    (true, Pc { block: t, index: 0 })
                }
                Term::ExcRet => match excs.pop() {
                    Some((resume, saved)) => {
                        let from_el3 = ctx.el == 3;
                        ctx = saved;
                        if cfg.ctx_changes && !cfg.m_profile && rng.chance(1, 4) {
                            // Return to another process.
                            ctx.cid = rng.next_u64() as u32;
                            if rng.chance(1, 3) {
                                ctx.vmid = rng.next_u64() as u32;
                            }
                        }
                        if cfg.rme && from_el3 && ctx.el < 3 && !ctx.secure && rng.chance(1, 4) {
                            // The monitor switches worlds: Non-secure <-> Realm.
                            ctx.nse = !ctx.nse;
                        }
                        (true, resume)
                    }
                    None => (
                        true,
                        Pc {
                            block: main_block(rng),
                            index: 0,
                        },
                    ),
                },
            };
            if cfg.ctx_changes && !cfg.m_profile && b.term == Term::Br && !in_handler && ctx.el >= 1 && rng.chance(1, 6)
            {
                // A context switch: the kernel branches into another process.
                ctx.cid = rng.next_u64() as u32;
            }
            let next = prog.blocks[to.block].instr_addr(to.index);
            let out = Seg {
                start,
                end: b.end(),
                count: (last + 1 - pc.index) as u32,
                ctx: run_ctx,
                how: End::Branch {
                    taken,
                    term: b.term,
                    next,
                },
                tx_depth,
                events,
            };
            pc = to;
            out
        };
        (self.ctx, self.pc, self.tx_depth, self.tx_resume, self.tx_failed) = (ctx, pc, tx_depth, tx_resume, tx_failed);
        Some(out)
    }
}

/// Context of the handler for an exception taken from `from`.
fn handler_ctx(rng: &mut Rng, cfg: &WalkCfg, from: Ctx, cause: Cause) -> Ctx {
    let mut c = from;
    if cfg.m_profile {
        // Armv8-M: a handler may run in the other security state.
        if rng.chance(1, 3) {
            c.secure = !c.secure;
        }
        return c;
    }
    let lowest = from.el.max(1);
    c.el = match cause {
        Cause::Fiq => 3,
        // SVC goes to EL1 (from EL0 or EL1); the main program makes them.
        Cause::Call => lowest,
        Cause::Trap => (lowest + rng.below(2) as u8).min(3),
        _ => lowest + rng.below((4 - lowest) as u64) as u8,
    }
    .max(lowest);
    c.secure = c.el == 3;
    if cfg.rme {
        // EL3 is Root; below it the handler stays in the world it
        // interrupted (Non-secure or Realm).
        c.nse = if c.el == 3 { true } else { from.nse && !from.secure };
    }
    c
}
