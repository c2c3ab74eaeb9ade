//! The call-stack model every input is turned into: distinct stacks as a
//! trie with their own weights, one stack per context, clocks per trace
//! source, and a bounded timeline of calls and returns.
//!
//! Inputs drive it with a few operations ([`Profile::push`],
//! [`Profile::pop_to`], [`Profile::advance`], [`Profile::timestamp`],
//! [`Profile::gap`]...): the CoreSight element path ([`crate::elements`])
//! and the Tarmac path ([`crate::tarmac`]) both do, so every output is made
//! the same way whatever the input.
//!
//! Memory: the trie holds one node per distinct stack, each context one
//! entry per open call, and the timeline at most its cap of events; nothing
//! grows with the trace's length.

use std::collections::HashMap;

/// A function name, interned.
pub type FrameId = u32;

/// Which clock the time axis is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// The trace's timestamps, interpolated between them by instruction count.
    Timestamps,
    /// Cycle counts.
    Cycles,
    /// Instructions executed (the last resort).
    Instructions,
    /// The Tarmac trace's own time column.
    TarmacTime,
}

impl Axis {
    /// Index into the weight and time arrays.
    pub fn slot(self) -> usize {
        match self {
            Axis::Instructions => 0,
            Axis::Cycles => 1,
            Axis::Timestamps | Axis::TarmacTime => 2,
        }
    }
    /// What one unit is, for the outputs.
    pub fn unit(self) -> &'static str {
        match self {
            Axis::Timestamps => "timestamp ticks",
            Axis::Cycles => "cycles",
            Axis::Instructions => "instructions",
            Axis::TarmacTime => "Tarmac time units",
        }
    }
    /// How the axis was chosen, for the outputs.
    pub fn describe(self) -> &'static str {
        match self {
            Axis::Timestamps => "time from the trace's timestamps (interpolated by instruction count)",
            Axis::Cycles => "time from cycle counts (the trace has no timestamps)",
            Axis::Instructions => "time in instructions executed (the trace has neither timestamps nor cycle counts)",
            Axis::TarmacTime => "time from the Tarmac trace's time column",
        }
    }
}

/// Interned function names.
#[derive(Clone, Debug, Default)]
pub struct Frames {
    names: Vec<String>,
    by_name: HashMap<String, FrameId>,
}

impl Frames {
    /// The id of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> FrameId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = self.names.len() as FrameId;
        self.names.push(name.to_string());
        self.by_name.insert(name.to_string(), id);
        id
    }
    /// The name of `id` ("" for an unknown id).
    pub fn name(&self, id: FrameId) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }
    /// How many names.
    pub fn len(&self) -> usize {
        self.names.len()
    }
    /// No names.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// No node (the parent of a context's node).
pub const NONE: u32 = u32::MAX;

/// One distinct stack: its innermost frame, its parent stack, and the
/// weight spent in that frame itself on each clock.
#[derive(Clone, Debug)]
pub struct Node {
    /// The parent stack ([`NONE`] for a context's node).
    pub parent: u32,
    /// The innermost function.
    pub frame: FrameId,
    /// Depth: 0 for a context's node, 1 for its outermost functions.
    pub depth: u32,
    /// The context this stack belongs to.
    pub ctx: u32,
    /// Own weight: instructions, cycles, time.
    pub own: [u64; 3],
    /// How many times this stack was entered.
    pub calls: u64,
}

/// What a timeline event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The node's frame was entered.
    Open,
    /// The node's frame was left.
    Close,
    /// The trace has a gap here (overflow, lost sync, unreadable memory).
    Gap,
}

/// One call, return or gap, with the source's clocks when it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The context.
    pub ctx: u32,
    /// The stack entered or left (for a gap: the stack then).
    pub node: u32,
    /// What happened.
    pub kind: EventKind,
    /// Instructions, cycles and time at that point.
    pub t: [u64; 3],
}

/// A frame on a context's stack.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The innermost trie node this entry pushed (inline frames push
    /// several nodes as one entry).
    node: u32,
    /// The node to go back to when it returns.
    back: u32,
    /// Where it returns to (0: unknown).
    ret_addr: u64,
    /// Entered by an exception.
    exception: bool,
}

/// A context: one call stack.
#[derive(Clone, Debug)]
pub struct Context {
    /// Its name (CPU, trace ID, context ID, VMID, thread...).
    pub name: String,
    /// The source it runs on.
    pub source: u32,
    /// Its key within the source.
    pub key: u128,
    /// Its trie node.
    pub node: u32,
    /// Times its stack was broken by a gap in the trace.
    pub broken: u64,
    /// Calls and returns seen.
    pub calls: u64,
    /// Returns that matched no open call.
    pub unmatched_returns: u64,
    /// Instructions run in it.
    pub instructions: u64,
    stack: Vec<Entry>,
}

impl Context {
    /// The current call depth.
    pub fn depth(&self) -> usize {
        self.stack.len()
    }
}

/// A trace source: one clock, one running context at a time.
#[derive(Clone, Debug)]
struct Source {
    key: u64,
    active: Option<u32>,
    /// Instructions and cycles so far, and the time when set directly.
    clock: [u64; 3],
    /// The clocks when the running node's own weight was last settled.
    settled: [u64; 3],
    /// The last timestamp and the instruction count then.
    last_ts: Option<(u64, u64)>,
    timestamps: u64,
    /// Instructions per node since the last timestamp, given time when the
    /// next one comes.
    ts_pending: HashMap<u32, u64>,
    /// Timeline events since the last timestamp, waiting for their time.
    ev_pending: Vec<usize>,
    /// Ticks per instruction so far (numerator, denominator), to place
    /// what follows the last timestamp.
    rate: (u64, u64),
    time_started: bool,
}

/// A damaged or missing stretch of trace, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Byte offset in the input where it was seen.
    pub offset: u64,
    /// The source's name.
    pub source: String,
    /// What it was.
    pub what: String,
}

/// Limits on what the profile keeps.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Timeline events kept at most (the first ones; the rest are counted).
    pub max_events: usize,
    /// Gaps listed at most (the rest are counted).
    pub max_gaps: usize,
    /// Call depth at most per context (deeper calls are counted, not pushed).
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_events: 2_000_000,
            max_gaps: 1000,
            max_depth: 4096,
        }
    }
}

/// Call stacks of a capture.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Function names.
    pub frames: Frames,
    /// Distinct stacks.
    pub nodes: Vec<Node>,
    children: HashMap<(u32, FrameId), u32>,
    /// The contexts, in the order first seen.
    pub contexts: Vec<Context>,
    sources: Vec<Source>,
    source_names: Vec<String>,
    /// The timeline (the first [`Limits::max_events`] events).
    pub events: Vec<Event>,
    /// Events left out of the timeline.
    pub events_dropped: u64,
    /// Gaps seen (the first [`Limits::max_gaps`]).
    pub gaps: Vec<Gap>,
    /// All gaps seen.
    pub gap_count: u64,
    /// Calls not pushed because the stack was at its depth limit.
    pub depth_overflows: u64,
    limits: Limits,
    direct_time: bool,
}

impl Default for Profile {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Profile {
    /// An empty profile.
    pub fn new(limits: Limits) -> Self {
        Profile {
            frames: Frames::default(),
            nodes: Vec::new(),
            children: HashMap::new(),
            contexts: Vec::new(),
            sources: Vec::new(),
            source_names: Vec::new(),
            events: Vec::new(),
            events_dropped: 0,
            gaps: Vec::new(),
            gap_count: 0,
            depth_overflows: 0,
            limits,
            direct_time: false,
        }
    }

    /// A profile whose time is given directly ([`Profile::set_time`]), not
    /// from timestamps: Tarmac.
    pub fn with_direct_time(limits: Limits) -> Self {
        let mut p = Self::new(limits);
        p.direct_time = true;
        p
    }

    /// The clock the outputs use: timestamps when a source has two or more,
    /// else cycles when any were counted, else instructions.
    pub fn axis(&self) -> Axis {
        if self.direct_time {
            Axis::TarmacTime
        } else if self.sources.iter().any(|s| s.timestamps >= 2) {
            Axis::Timestamps
        } else if self.sources.iter().any(|s| s.clock[1] > 0) {
            Axis::Cycles
        } else {
            Axis::Instructions
        }
    }

    /// The source with `key` (made, named `name()`, when first seen).
    pub fn source(&mut self, key: u64, name: impl FnOnce() -> String) -> u32 {
        if let Some(i) = self.sources.iter().position(|s| s.key == key) {
            return i as u32;
        }
        self.sources.push(Source {
            key,
            active: None,
            clock: [0; 3],
            settled: [0; 3],
            last_ts: None,
            timestamps: 0,
            ts_pending: HashMap::new(),
            ev_pending: Vec::new(),
            rate: (0, 0),
            time_started: false,
        });
        self.source_names.push(name());
        (self.sources.len() - 1) as u32
    }

    /// A source's name.
    pub fn source_name(&self, src: u32) -> &str {
        self.source_names.get(src as usize).map_or("", String::as_str)
    }

    /// Number of sources.
    pub fn source_count(&self) -> usize {
        self.sources.len()
    }

    /// Timestamps seen on a source.
    pub fn timestamps(&self, src: u32) -> u64 {
        self.sources.get(src as usize).map_or(0, |s| s.timestamps)
    }

    /// Makes the context `key` of `src` the running one (made, named
    /// `name()`, when first seen). Returns its index.
    pub fn switch_context(&mut self, src: u32, key: u128, name: impl FnOnce() -> String) -> u32 {
        let s = src as usize;
        if let Some(a) = self.sources[s].active
            && self.contexts[a as usize].key == key
        {
            return a;
        }
        self.settle(src);
        let found = self
            .contexts
            .iter()
            .position(|c| c.source == src && c.key == key)
            .map(|i| i as u32);
        let ctx = match found {
            Some(c) => c,
            None => {
                let c = self.contexts.len() as u32;
                let name = name();
                let frame = self.frames.intern(&name);
                let node = self.nodes.len() as u32;
                self.nodes.push(Node {
                    parent: NONE,
                    frame,
                    depth: 0,
                    ctx: c,
                    own: [0; 3],
                    calls: 0,
                });
                self.contexts.push(Context {
                    name,
                    source: src,
                    key,
                    node,
                    broken: 0,
                    calls: 0,
                    unmatched_returns: 0,
                    instructions: 0,
                    stack: Vec::new(),
                });
                c
            }
        };
        self.sources[s].active = Some(ctx);
        ctx
    }

    /// The running context of `src`.
    pub fn active(&self, src: u32) -> Option<u32> {
        self.sources.get(src as usize).and_then(|s| s.active)
    }

    /// The node the running context of `src` is in.
    fn top(&self, src: u32) -> Option<u32> {
        let c = self.sources[src as usize].active?;
        let ctx = &self.contexts[c as usize];
        Some(ctx.stack.last().map_or(ctx.node, |e| e.node))
    }

    /// Gives the clock time since the last settling to the running node.
    fn settle(&mut self, src: u32) {
        let top = self.top(src);
        let s = &mut self.sources[src as usize];
        let d = [
            s.clock[0] - s.settled[0],
            s.clock[1] - s.settled[1],
            s.clock[2].saturating_sub(s.settled[2]),
        ];
        s.settled = s.clock;
        let Some(top) = top else { return };
        let n = &mut self.nodes[top as usize];
        n.own[0] = n.own[0].saturating_add(d[0]);
        n.own[1] = n.own[1].saturating_add(d[1]);
        if self.direct_time {
            n.own[2] = n.own[2].saturating_add(d[2]);
        } else if d[0] > 0 && s.last_ts.is_some() {
            let p = s.ts_pending.entry(top).or_default();
            *p = p.saturating_add(d[0]);
        }
        if let Some(c) = s.active {
            self.contexts[c as usize].instructions += d[0];
        }
    }

    /// Instructions and cycles executed on `src` (by its running context).
    pub fn advance(&mut self, src: u32, instructions: u64, cycles: u64) {
        let s = &mut self.sources[src as usize];
        s.clock[0] = s.clock[0].saturating_add(instructions);
        s.clock[1] = s.clock[1].saturating_add(cycles);
    }

    /// The time on `src` is now `t` (direct time: Tarmac). Time never goes back.
    pub fn set_time(&mut self, src: u32, t: u64) {
        let s = &mut self.sources[src as usize];
        if !s.time_started {
            // The clock starts at the first time given: nothing ran before.
            s.time_started = true;
            s.settled[2] = t;
        }
        s.clock[2] = s.clock[2].max(t);
    }

    /// A timestamp on `src`: the time since the last one goes to the
    /// stacks run since, by their instructions, and the calls and returns
    /// since get their times.
    pub fn timestamp(&mut self, src: u32, ts: u64) {
        self.settle(src);
        let s = &mut self.sources[src as usize];
        s.timestamps += 1;
        let instr = s.clock[0];
        let Some((ts0, i0)) = s.last_ts else {
            // Before the first timestamp there is no time: what ran gets
            // none, and the events so far are placed at it.
            for &e in &s.ev_pending {
                self.events[e].t[2] = ts;
            }
            s.ev_pending.clear();
            s.last_ts = Some((ts, instr));
            return;
        };
        // Timestamps that go back (a reset counter) restart the interpolation.
        let dt = ts.saturating_sub(ts0);
        let di = instr - i0;
        let mut given = 0u64;
        let mut largest: Option<(u32, u64)> = None;
        for (&node, &n) in &s.ts_pending {
            let w = if di == 0 {
                0
            } else {
                ((dt as u128 * n as u128) / di as u128) as u64
            };
            given += w;
            let own = &mut self.nodes[node as usize].own[2];
            *own = own.saturating_add(w);
            if largest.is_none_or(|(_, m)| n > m) {
                largest = Some((node, n));
            }
        }
        // Rounding leftovers go to the stack that ran most, so that the
        // weights add up to the time.
        if let Some((node, _)) = largest {
            let own = &mut self.nodes[node as usize].own[2];
            *own = own.saturating_add(dt - given.min(dt));
        }
        s.ts_pending.clear();
        for &e in &s.ev_pending {
            let ev = &mut self.events[e];
            let off = if di == 0 {
                0
            } else {
                ((dt as u128 * ev.t[0].saturating_sub(i0) as u128) / di as u128) as u64
            };
            ev.t[2] = ts0 + off.min(dt);
        }
        s.ev_pending.clear();
        s.rate.0 = s.rate.0.saturating_add(dt);
        let ts = ts.max(ts0);
        s.rate.1 = s.rate.1.saturating_add(di);
        s.last_ts = Some((ts, instr));
    }

    fn event(&mut self, src: u32, ctx: u32, node: u32, kind: EventKind) {
        if self.events.len() >= self.limits.max_events {
            self.events_dropped += 1;
            return;
        }
        let s = &mut self.sources[src as usize];
        let mut t = s.clock;
        if !self.direct_time {
            t[2] = s.last_ts.map_or(0, |(ts, _)| ts);
            s.ev_pending.push(self.events.len());
        }
        self.events.push(Event { ctx, node, kind, t });
    }

    /// The child of `parent` for `frame` (made when new).
    fn child(&mut self, parent: u32, frame: FrameId) -> u32 {
        if let Some(&n) = self.children.get(&(parent, frame)) {
            return n;
        }
        let p = &self.nodes[parent as usize];
        let (depth, ctx) = (p.depth + 1, p.ctx);
        let n = self.nodes.len() as u32;
        self.nodes.push(Node {
            parent,
            frame,
            depth,
            ctx,
            own: [0; 3],
            calls: 0,
        });
        self.children.insert((parent, frame), n);
        n
    }

    /// A call on `src`'s running context: `frames` (outermost first; inline
    /// frames then the function) entered, returning to `ret_addr`.
    pub fn push(&mut self, src: u32, frames: &[FrameId], ret_addr: u64, exception: bool) {
        self.push_inner(src, frames, ret_addr, exception, true);
    }

    fn push_inner(&mut self, src: u32, frames: &[FrameId], ret_addr: u64, exception: bool, is_call: bool) {
        let Some(c) = self.sources[src as usize].active else {
            return;
        };
        if frames.is_empty() {
            return;
        }
        if self.contexts[c as usize].stack.len() >= self.limits.max_depth {
            self.depth_overflows += 1;
            return;
        }
        self.settle(src);
        let back = self.top(src).unwrap_or(self.contexts[c as usize].node);
        let mut node = back;
        for &f in frames {
            node = self.child(node, f);
            self.nodes[node as usize].calls += 1;
            self.event(src, c, node, EventKind::Open);
        }
        let ctx = &mut self.contexts[c as usize];
        ctx.calls += is_call as u64;
        ctx.stack.push(Entry {
            node,
            back,
            ret_addr,
            exception,
        });
    }

    fn pop_entries(&mut self, src: u32, c: u32, keep: usize) {
        while self.contexts[c as usize].stack.len() > keep {
            let Some(e) = self.contexts[c as usize].stack.pop() else {
                break;
            };
            let mut n = e.node;
            while n != e.back && n != NONE {
                self.event(src, c, n, EventKind::Close);
                n = self.nodes[n as usize].parent;
            }
        }
    }

    /// A return on `src`'s running context to `target` (0: unknown). It
    /// leaves the innermost call that returns there, else the innermost
    /// call; with no call open, the outermost function is replaced by
    /// `then` (the function returned to), as the trace began inside it.
    /// `exception`: an exception return, which leaves the innermost
    /// exception entry when there is one.
    pub fn pop_to(&mut self, src: u32, target: u64, exception: bool, then: &[FrameId]) {
        let Some(c) = self.sources[src as usize].active else {
            return;
        };
        self.settle(src);
        let stack = &self.contexts[c as usize].stack;
        let found = if exception {
            stack.iter().rposition(|e| e.exception)
        } else if target != 0 {
            stack.iter().rposition(|e| e.ret_addr == target)
        } else {
            None
        };
        match found {
            Some(i) => self.pop_entries(src, c, i),
            None => {
                let n = stack.len();
                self.contexts[c as usize].unmatched_returns += 1;
                if n > 1 {
                    self.pop_entries(src, c, n - 1);
                } else {
                    // The trace began in the function now left: its caller
                    // becomes the outermost function.
                    self.pop_entries(src, c, 0);
                    self.push_inner(src, then, 0, false, false);
                }
            }
        }
    }

    /// The innermost exception on `src`'s running stack returns to `addr`.
    pub fn exception_returns_to(&self, src: u32, addr: u64) -> bool {
        let Some(c) = self.sources[src as usize].active else {
            return false;
        };
        self.contexts[c as usize]
            .stack
            .iter()
            .rev()
            .find(|e| e.exception)
            .is_some_and(|e| e.ret_addr == addr && addr != 0)
    }

    /// Leaves the innermost call of `src`'s running context.
    pub fn pop(&mut self, src: u32) {
        let Some(c) = self.sources[src as usize].active else {
            return;
        };
        self.settle(src);
        let n = self.contexts[c as usize].stack.len();
        self.pop_entries(src, c, n.saturating_sub(1));
    }

    /// Starts the outermost function of `src`'s running context when none
    /// is open (the first instructions of a context).
    pub fn ensure_root(&mut self, src: u32, frames: &[FrameId]) {
        let Some(c) = self.sources[src as usize].active else {
            return;
        };
        if self.contexts[c as usize].stack.is_empty() {
            self.push_inner(src, frames, 0, false, false);
        }
    }

    /// Leaves every call of every context (the end of the trace).
    pub fn finish(&mut self) {
        for src in 0..self.sources.len() as u32 {
            self.settle(src);
            // What ran after the last timestamp is placed at the rate seen
            // so far (one tick per instruction when none was seen).
            let s = &mut self.sources[src as usize];
            if !self.direct_time
                && let Some((ts0, i0)) = s.last_ts
            {
                let (num, den) = if s.rate.1 == 0 { (1, 1) } else { s.rate };
                let at = |i: u64| {
                    let d = (i.saturating_sub(i0) as u128 * num as u128) / den as u128;
                    ts0.saturating_add(d.min(u64::MAX as u128) as u64)
                };
                let end = at(s.clock[0]);
                for (&node, &n) in &s.ts_pending {
                    let w = (n as u128 * num as u128) / den as u128;
                    let own = &mut self.nodes[node as usize].own[2];
                    *own = own.saturating_add(w.min(u64::MAX as u128) as u64);
                }
                s.ts_pending.clear();
                for &e in &s.ev_pending {
                    self.events[e].t[2] = at(self.events[e].t[0]);
                }
                s.ev_pending.clear();
                s.clock[2] = end;
            }
            for c in 0..self.contexts.len() as u32 {
                if self.contexts[c as usize].source == src {
                    self.sources[src as usize].active = Some(c);
                    // Events placed at the end take the final clocks.
                    let dt = self.direct_time;
                    let start = self.events.len();
                    self.pop_entries(src, c, 0);
                    if !dt {
                        let t2 = self.sources[src as usize].clock[2];
                        for e in &mut self.events[start..] {
                            e.t[2] = t2;
                        }
                        self.sources[src as usize].ev_pending.clear();
                    }
                }
            }
        }
    }

    /// A gap in `src`'s trace at byte `offset`: the running context's stack
    /// is kept but marked broken, and calls resume from it.
    pub fn gap(&mut self, src: u32, offset: u64, what: &str) {
        self.gap_count += 1;
        if self.gaps.len() < self.limits.max_gaps {
            self.gaps.push(Gap {
                offset,
                source: self.source_name(src).to_string(),
                what: what.to_string(),
            });
        }
        let Some(c) = self.sources[src as usize].active else {
            return;
        };
        self.settle(src);
        self.contexts[c as usize].broken += 1;
        let node = self.top(src).unwrap_or(self.contexts[c as usize].node);
        self.event(src, c, node, EventKind::Gap);
    }

    /// The frames of a stack, outermost first, without the context's node.
    pub fn stack_of(&self, mut node: u32, out: &mut Vec<FrameId>) {
        out.clear();
        while node != NONE {
            let n = &self.nodes[node as usize];
            if n.parent == NONE {
                break;
            }
            out.push(n.frame);
            node = n.parent;
        }
        out.reverse();
    }

    /// Total weight of each node (own plus its descendants') on `axis`.
    pub fn totals(&self, axis: Axis) -> Vec<u64> {
        let k = axis.slot();
        let mut t: Vec<u64> = self.nodes.iter().map(|n| n.own[k]).collect();
        // Children always come after their parent: sum from the end.
        for i in (0..self.nodes.len()).rev() {
            let p = self.nodes[i].parent;
            if p != NONE {
                t[p as usize] = t[p as usize].saturating_add(t[i]);
            }
        }
        t
    }

    /// Per function: (own weight, weight with callees counted once per
    /// stack, calls), on `axis`, largest own first.
    pub fn hottest(&self, axis: Axis) -> Vec<(FrameId, u64, u64, u64)> {
        let k = axis.slot();
        let totals = self.totals(axis);
        let mut per: HashMap<FrameId, (u64, u64, u64)> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.parent == NONE {
                continue;
            }
            let e = per.entry(n.frame).or_default();
            e.0 += n.own[k];
            e.2 += n.calls;
            // Recursion: count the total only at the outermost node of the frame.
            let mut p = n.parent;
            let mut recursive = false;
            while p != NONE {
                if self.nodes[p as usize].frame == n.frame && self.nodes[p as usize].parent != NONE {
                    recursive = true;
                    break;
                }
                p = self.nodes[p as usize].parent;
            }
            if !recursive {
                e.1 += totals[i];
            }
        }
        let mut v: Vec<_> = per.into_iter().map(|(f, (o, t, c))| (f, o, t, c)).collect();
        v.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then(b.2.cmp(&a.2))
                .then_with(|| self.frames.name(a.0).cmp(self.frames.name(b.0)))
        });
        v
    }
}
