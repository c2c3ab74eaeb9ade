//! Calls and returns in an instruction trace, found with the heuristic of
//! Arm's Tarmac Trace Utilities, and what is built from them: the call
//! tree, a per-function profile and folded stacks for `flamegraph.pl`.
//!
//! The heuristic (documented upstream in `doc/index.rst`): any transfer of
//! control (two consecutive instructions not consecutive in memory) is a
//! possible call when the link register was written within the previous 8
//! instructions and holds an address within 64 bytes of the instruction
//! after the branch. It becomes a call when a later transfer goes to that
//! address with the stack pointer back at its value at the call, and the
//! stack pointer never rose above that value in between.
//!
//! Time and lines are counted the way the upstream index counts them: the
//! trace is cut into nodes, each a run of lines with one timestamp holding
//! at most one instruction; calls and returns are recorded at the first
//! line of a node, and register values are read as they stood when the
//! current node began.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::record::{Iset, Record, RecordKind, RegClass, RegId};
use super::symbols::Symbols;

/// One end of a call, return or activation: a node's time, first line and
/// program counter (with bit 0 set for T32, as upstream prints it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Site {
    /// Timestamp of the node.
    pub time: u64,
    /// Line number of the node's first record.
    pub line: u64,
    /// Program counter (bit 0 set for T32).
    pub pc: u64,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    time: u64,
    line: u64,
    pc: Option<u64>,
}

/// Registers the heuristic needs: the 31 general-purpose registers
/// (r/w/x views of one storage) and the AArch64 stack pointer.
#[derive(Clone, Copy, Default)]
struct RegFile {
    core: [[u8; 8]; 31],
    core_known: [u8; 31],
    sp: [u8; 8],
    sp_known: u8,
}

/// Where a register lives in [`RegFile`]: (storage, first byte, size).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Core(usize),
    Sp,
}

fn slot_of(reg: RegId) -> Option<(Slot, usize)> {
    Some(match reg.class {
        RegClass::R if reg.index <= 15 => (Slot::Core(reg.index as usize), 4),
        RegClass::W if reg.index <= 30 => (Slot::Core(reg.index as usize), 4),
        RegClass::X if reg.index <= 30 => (Slot::Core(reg.index as usize), 8),
        RegClass::Xsp => (Slot::Sp, 8),
        RegClass::Wsp => (Slot::Sp, 4),
        _ => return None,
    })
}

impl RegFile {
    fn write(&mut self, slot: Slot, offset: usize, bytes: &[u8]) {
        let (data, known) = match slot {
            Slot::Core(n) => (&mut self.core[n], &mut self.core_known[n]),
            Slot::Sp => (&mut self.sp, &mut self.sp_known),
        };
        for (i, &b) in bytes.iter().enumerate() {
            if offset + i < 8 {
                data[offset + i] = b;
                *known |= 1 << (offset + i);
            }
        }
    }
    fn read(&self, slot: Slot, size: usize) -> Option<u64> {
        let (data, known) = match slot {
            Slot::Core(n) => (&self.core[n], self.core_known[n]),
            Slot::Sp => (&self.sp, self.sp_known),
        };
        let mask = if size >= 8 { 0xff } else { (1u8 << size) - 1 };
        if known & mask != mask {
            return None;
        }
        Some(data[..size].iter().rev().fold(0u64, |v, &b| (v << 8) | b as u64))
    }
}

/// Finds calls and returns in a stream of records. Feed every record in
/// order with [`CallAnalyzer::feed`], then [`CallAnalyzer::finish`].
pub struct CallAnalyzer {
    nodes: Vec<Node>,
    callrets: BTreeMap<u64, i8>,
    pending: BTreeMap<(u64, u64), u64>,
    regs: RegFile,
    node_start_regs: RegFile,
    insns_since_lr_update: u64,
    expected_next_pc: Option<u64>,
    expected_next_lr: u64,
    aarch64: bool,
    current_time: Option<u64>,
    seen_instruction_at_time: bool,
    log: Option<String>,
}

impl Default for CallAnalyzer {
    fn default() -> Self {
        Self::new()
    }
}

impl CallAnalyzer {
    /// An analyser with nothing seen yet.
    pub fn new() -> Self {
        CallAnalyzer {
            nodes: Vec::new(),
            callrets: BTreeMap::new(),
            pending: BTreeMap::new(),
            regs: RegFile::default(),
            node_start_regs: RegFile::default(),
            insns_since_lr_update: 0,
            expected_next_pc: None,
            expected_next_lr: 0,
            aarch64: false,
            current_time: None,
            seen_instruction_at_time: false,
            log: None,
        }
    }

    /// Also keep a log of every transfer of control and what it was taken
    /// for, in the form of the upstream `--debug=call_heuristics` output.
    pub fn with_log(mut self) -> Self {
        self.log = Some(String::new());
        self
    }

    fn sp_slot(&self) -> (Slot, usize) {
        if self.aarch64 {
            (Slot::Sp, 8)
        } else {
            (Slot::Core(13), 4)
        }
    }
    fn lr_slot(&self) -> (Slot, usize) {
        if self.aarch64 {
            (Slot::Core(30), 8)
        } else {
            (Slot::Core(14), 4)
        }
    }

    /// Starts a node when the time moves on or a second instruction
    /// arrives at the same time.
    fn event(&mut self, time: u64, line: u64, is_instruction: bool) {
        let t = match self.current_time {
            Some(c) if c >= time => c,
            _ => time,
        };
        if self.current_time != Some(t) || (self.seen_instruction_at_time && is_instruction) {
            self.node_start_regs = self.regs;
            if self.current_time != Some(t) {
                self.current_time = Some(t);
                self.seen_instruction_at_time = false;
            }
            self.nodes.push(Node {
                time: t,
                line,
                pc: None,
            });
        }
        if is_instruction {
            self.seen_instruction_at_time = true;
        }
    }

    /// Takes the next record of the trace.
    pub fn feed(&mut self, rec: &Record) {
        match rec.kind {
            RecordKind::Instruction(ins) => {
                self.event(rec.time, rec.line, true);
                self.insns_since_lr_update += 1;
                self.aarch64 = ins.iset == Iset::A64;
                let thumb = ins.iset == Iset::Thumb;
                let pc = ins.addr | thumb as u64;
                let next = pc.wrapping_add(ins.width as u64 / 8);
                self.update_pc(pc, next, thumb);
            }
            RecordKind::Register(r) => {
                let Some(reg) = r.reg else { return };
                for (offset, bytes) in r.runs() {
                    self.event(rec.time, rec.line, false);
                    let Some((slot, _)) = slot_of(reg) else { continue };
                    self.regs.write(slot, offset, bytes);
                    let overlaps = |(s, sz): (Slot, usize)| s == slot && offset < sz && !bytes.is_empty();
                    if overlaps(self.sp_slot()) {
                        let (s, sz) = self.sp_slot();
                        if let Some(sp) = self.node_start_regs.read(s, sz) {
                            self.update_sp(sp);
                        }
                    }
                    if overlaps(self.lr_slot()) {
                        self.insns_since_lr_update = 0;
                    }
                }
            }
            RecordKind::Memory(_)
            | RecordKind::MemAborted { .. }
            | RecordKind::MemFetch { .. }
            | RecordKind::Exception { .. }
            | RecordKind::Text { .. }
            | RecordKind::MemUpdate { .. }
            | RecordKind::Flow { .. } => self.event(rec.time, rec.line, false),
            RecordKind::Diagram(d) => {
                if d.bytes.iter().any(|b| *b != super::record::DiagramByte::Unused) {
                    self.event(rec.time, rec.line, false)
                }
            }
            RecordKind::SysOp { .. } | RecordKind::CoprocTransfer { .. } | RecordKind::Header { .. } => {}
        }
    }

    fn update_sp(&mut self, sp: u64) {
        // A pending call whose stack pointer is below the new one can no
        // longer be returned from.
        self.pending.retain(|&(psp, _), _| psp >= sp);
    }

    fn update_pc(&mut self, pc: u64, next_pc: u64, thumb: bool) {
        let node_line = self.nodes.last().map_or(0, |n| n.line);
        if let Some(expected) = self.expected_next_pc
            && (pc ^ expected) & !1 != 0
        {
            let (s, sz) = self.sp_slot();
            let sp = self.node_start_regs.read(s, sz).unwrap_or(u64::MAX);
            if let Some(log) = &mut self.log {
                let _ = writeln!(log, "transfer of control @ {node_line}, sp={sp:x}, pc={pc:x}");
            }
            if let Some(call_line) = self.pending.remove(&(sp, pc)) {
                if let Some(log) = &mut self.log {
                    let _ = writeln!(log, "  looks like return for call @ {call_line}");
                }
                self.callrets.entry(call_line).or_insert(1);
                self.callrets.entry(node_line).or_insert(-1);
                // The link register was used up by the return.
                self.insns_since_lr_update = 8;
            } else {
                let (s, sz) = self.lr_slot();
                if let Some(lr) = self.node_start_regs.read(s, sz)
                    && self.insns_since_lr_update < 8
                    && lr.abs_diff(self.expected_next_lr) < 64
                {
                    if let Some(log) = &mut self.log {
                        let _ = writeln!(log, "  inserting as pending call with sp={sp:x} lr={lr:x}");
                    }
                    self.pending.entry((sp, lr)).or_insert(node_line);
                    // One write of the link register makes one call: a
                    // later branch near the same return address (a loop
                    // in the callee) must not count again.
                    self.insns_since_lr_update = 8;
                }
            }
        }
        if let Some(n) = self.nodes.last_mut() {
            n.pc = Some(pc);
        }
        self.expected_next_pc = Some(next_pc);
        self.expected_next_lr = next_pc | thumb as u64;
    }

    /// The call/return log (when made with [`CallAnalyzer::with_log`]).
    pub fn log(&self) -> Option<&str> {
        self.log.as_deref()
    }

    /// Lines at which calls (+1: first line of the called function) and
    /// returns (-1: first line back in the caller) were found.
    pub fn calls_and_returns(&self) -> &BTreeMap<u64, i8> {
        &self.callrets
    }

    /// Builds the call tree.
    pub fn finish(&self) -> CallTree {
        let site = |n: &Node| Site {
            time: n.time,
            line: n.line,
            pc: n.pc.unwrap_or(0),
        };
        let mut tree = CallTree { acts: Vec::new() };
        let Some(first) = self.nodes.iter().position(|n| n.pc.is_some()) else {
            return tree;
        };
        // Call depth of every node.
        let mut depth = 0i64;
        let mut it = self.callrets.iter().peekable();
        let mut depths = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            if let Some(&(&line, &dir)) = it.peek()
                && line == n.line
            {
                depth += dir as i64;
                it.next();
            }
            depths.push(depth);
        }
        tree.acts.push(Activation {
            entry: site(&self.nodes[first]),
            exit: None,
            calls: Vec::new(),
        });
        let mut stack = vec![0usize];
        let mut cur = depths[first];
        for (i, &d) in depths.iter().enumerate().skip(first + 1) {
            if d > cur {
                let id = tree.acts.len();
                tree.acts.push(Activation {
                    entry: site(&self.nodes[i]),
                    exit: None,
                    calls: Vec::new(),
                });
                let top = *stack.last().unwrap_or(&0);
                tree.acts[top].calls.push(Call {
                    call: site(&self.nodes[i - 1]),
                    resume: None,
                    callee: id,
                });
                stack.push(id);
            } else if d < cur && stack.len() > 1 {
                let top = stack.pop().unwrap_or(0);
                tree.acts[top].exit = Some(site(&self.nodes[i - 1]));
                let parent = *stack.last().unwrap_or(&0);
                if let Some(c) = tree.acts[parent].calls.last_mut() {
                    c.resume = Some(site(&self.nodes[i]));
                }
            }
            cur = d;
        }
        // Activations still open at the end of the trace end with it.
        let last = site(self.nodes.last().unwrap_or(&self.nodes[first]));
        for a in &mut tree.acts {
            if a.exit.is_none() {
                a.exit = Some(last);
            }
        }
        for a in &mut tree.acts {
            for c in &mut a.calls {
                if c.resume.is_none() {
                    c.resume = Some(last);
                }
            }
        }
        tree
    }
}

/// A call from an activation: the call instruction's node, the node where
/// the caller resumed, and the called activation.
#[derive(Clone, Debug)]
pub struct Call {
    /// Where the call instruction was.
    pub call: Site,
    /// Where the caller resumed after the return (`None` when the trace ended first).
    pub resume: Option<Site>,
    /// The called activation: an index into [`CallTree::acts`].
    pub callee: usize,
}

/// One activation of a function: from its first instruction to its return
/// instruction.
#[derive(Clone, Debug)]
pub struct Activation {
    /// The function's first instruction.
    pub entry: Site,
    /// Its return (`None` when the trace ended first).
    pub exit: Option<Site>,
    /// The calls it made, in order.
    pub calls: Vec<Call>,
}

/// The call tree; activation 0 is the root (the whole trace).
#[derive(Clone, Debug, Default)]
pub struct CallTree {
    /// Activations; index 0 is the root, covering the whole trace.
    pub acts: Vec<Activation>,
}

fn name_of(syms: Option<&Symbols>, addr: u64) -> &str {
    syms.map_or("", |s| s.name(addr))
}

impl CallTree {
    /// The call tree in `tarmac-calltree` form.
    pub fn calltree_text(&self, syms: Option<&Symbols>) -> String {
        let mut out = String::new();
        if !self.acts.is_empty() {
            self.write_subtree(&mut out, 0, 0, syms);
        }
        out
    }

    fn write_subtree(&self, out: &mut String, a: usize, level: usize, syms: Option<&Symbols>) {
        let site = |s: &Site| format!("t:{} l:{} pc:0x{:x}", s.time, s.line, s.pc);
        // Explicit stack: entries are (activation, level, next call index).
        let mut stack = vec![(a, level, 0usize)];
        let act = &self.acts[a];
        let _ = writeln!(
            out,
            "{}o {} - {} : {}",
            "  ".repeat(level),
            site(&act.entry),
            site(&act.exit.unwrap_or_default()),
            name_of(syms, act.entry.pc)
        );
        while let Some(top) = stack.last_mut() {
            let (a, lvl, i) = *top;
            let act = &self.acts[a];
            if i >= act.calls.len() {
                stack.pop();
                continue;
            }
            top.2 += 1;
            let c = &act.calls[i];
            let _ = writeln!(
                out,
                "{}- {} - {}",
                "  ".repeat(lvl + 1),
                site(&c.call),
                site(&c.resume.unwrap_or_default())
            );
            let callee = &self.acts[c.callee];
            let _ = writeln!(
                out,
                "{}o {} - {} : {}",
                "  ".repeat(lvl + 2),
                site(&callee.entry),
                site(&callee.exit.unwrap_or_default()),
                name_of(syms, callee.entry.pc)
            );
            stack.push((c.callee, lvl + 2, 0));
        }
    }

    /// Per function entry address: (calls, total time including callees),
    /// each activation counting `exit - entry + 1`.
    pub fn profile(&self) -> BTreeMap<u64, (u64, u64)> {
        let mut prof: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for a in &self.acts {
            let exit = a.exit.unwrap_or_default();
            let e = prof.entry(a.entry.pc).or_default();
            e.0 += 1;
            e.1 = e.1.wrapping_add(exit.time.wrapping_sub(a.entry.time).wrapping_add(1));
        }
        prof
    }

    /// The profile in `tarmac-profile` form.
    pub fn profile_text(&self, syms: Option<&Symbols>) -> String {
        let mut out = format!("{:<12}{:<12}{:<12}{}\n", "Address", "Count", "Time", "Function name");
        for (addr, (count, time)) in self.profile() {
            let _ = writeln!(
                out,
                "{:<11} {:<11} {:<11} {}",
                format!("0x{addr:x}"),
                count,
                time,
                name_of(syms, addr)
            );
        }
        out
    }

    /// Folded stacks for `flamegraph.pl`: each call stack (names, or hex
    /// addresses) with the time spent in its innermost function itself.
    pub fn flamegraph_text(&self, syms: Option<&Symbols>) -> String {
        let mut folded: BTreeMap<String, i64> = BTreeMap::new();
        if self.acts.is_empty() {
            return String::new();
        }
        let label = |a: &Activation| {
            let n = name_of(syms, a.entry.pc);
            if n.is_empty() {
                format!("0x{:x}", a.entry.pc)
            } else {
                n.to_string()
            }
        };
        let dur = |a: &Activation| a.exit.unwrap_or_default().time as i64 - a.entry.time as i64;
        // (activation, its stack string)
        let mut work = vec![(0usize, label(&self.acts[0]))];
        while let Some((a, stack)) = work.pop() {
            let act = &self.acts[a];
            let mut own = dur(act);
            for c in &act.calls {
                let callee = &self.acts[c.callee];
                own -= dur(callee);
                work.push((c.callee, format!("{stack};{}", label(callee))));
            }
            *folded.entry(stack).or_default() += own;
        }
        let mut out = String::new();
        for (k, v) in folded {
            let _ = writeln!(out, "{k} {v}");
        }
        out
    }
}
