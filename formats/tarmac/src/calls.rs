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
//! After every transfer of control, whether or not it was taken for a
//! call or a return, the link register counts as not recently written
//! (upstream does the same), so that one write of it makes at most one
//! call.
//!
//! Time and lines are counted the way the upstream index counts them: the
//! trace is cut into nodes, each a run of lines with one timestamp holding
//! at most one instruction; calls and returns are recorded at the first
//! line of a node, and register values are read as they stood when the
//! current node began.
//!
//! Memory: the analyser keeps the calls found (four sites each), the calls
//! still waiting for their return and the registers, never the trace's
//! nodes; the outputs are written as they are made, the call tree with
//! memory bounded by the call depth, the flame graph by the number of
//! distinct stacks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};

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

/// How many instructions after a write of the link register a transfer
/// of control may still be a call.
const LR_WRITE_WINDOW: u64 = 8;

/// Where the call/return log goes.
enum Log {
    Off,
    Text(String),
    Stream(Box<dyn Write>, Option<io::Error>),
}

impl Log {
    fn line(&mut self, args: std::fmt::Arguments) {
        match self {
            Log::Off => {}
            Log::Text(s) => {
                let _ = s.write_fmt(args);
                s.push('\n');
            }
            Log::Stream(w, err) => {
                if err.is_none()
                    && let Err(e) = w.write_fmt(args).and_then(|_| w.write_all(b"\n"))
                {
                    *err = Some(e);
                }
            }
        }
    }
    fn on(&self) -> bool {
        !matches!(self, Log::Off)
    }
}

/// A call or return found: at the first line of the node `at`, the node
/// before it being `before`.
#[derive(Clone, Copy, Debug)]
struct CallRet {
    dir: i8,
    before: Site,
    at: Site,
}

/// A call waiting for its return: the called function's first node and
/// the node before it (the call instruction's).
#[derive(Clone, Copy, Debug)]
struct Pending {
    before: Site,
    at: Site,
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
    callrets: BTreeMap<u64, CallRet>,
    pending: BTreeMap<(u64, u64), Pending>,
    regs: RegFile,
    node_start_regs: RegFile,
    insns_since_lr_update: u64,
    expected_next_pc: Option<u64>,
    expected_next_lr: u64,
    aarch64: bool,
    saw_a64: bool,
    saw_a32: bool,
    current_time: Option<u64>,
    seen_instruction_at_time: bool,
    /// The current node and the one before it (pc 0 when no instruction).
    cur: Option<Site>,
    prev: Site,
    /// The first node with an instruction: the root's entry.
    root: Option<Site>,
    log: Log,
    /// Byte offset of the record being fed and of the current node's
    /// first line.
    pos: u64,
    node_pos: u64,
    /// Addresses whose executions are kept (bit 0 clear), and those kept.
    watch: HashSet<u64>,
    executions: Vec<Execution>,
}

/// One execution of a watched address: the node of the instruction, as
/// upstream's `tarmac-callinfo` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The instruction's address (bit 0 clear).
    pub addr: u64,
    /// The node's time.
    pub time: u64,
    /// The node's first line.
    pub line: u64,
    /// Byte offset of the node's first line in the trace (when fed with
    /// [`CallAnalyzer::feed_at`]).
    pub pos: u64,
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
            callrets: BTreeMap::new(),
            pending: BTreeMap::new(),
            regs: RegFile::default(),
            node_start_regs: RegFile::default(),
            insns_since_lr_update: LR_WRITE_WINDOW,
            expected_next_pc: None,
            expected_next_lr: 0,
            aarch64: false,
            saw_a64: false,
            saw_a32: false,
            current_time: None,
            seen_instruction_at_time: false,
            cur: None,
            prev: Site::default(),
            root: None,
            log: Log::Off,
            pos: 0,
            node_pos: 0,
            watch: HashSet::new(),
            executions: Vec::new(),
        }
    }

    /// Also keep every execution of an instruction at one of `addrs`
    /// (bit 0, T32's, ignored), for [`CallAnalyzer::executions`].
    pub fn with_watch(mut self, addrs: impl IntoIterator<Item = u64>) -> Self {
        self.watch = addrs.into_iter().map(|a| a & !1).collect();
        self
    }

    /// The executions of the watched addresses, in trace order.
    pub fn executions(&self) -> &[Execution] {
        &self.executions
    }

    /// [`CallAnalyzer::feed`], with the byte offset of the record's line in
    /// the trace (for [`Execution::pos`]).
    pub fn feed_at(&mut self, rec: &Record, pos: u64) {
        self.pos = pos;
        self.feed(rec);
    }

    /// Also keep a log of every transfer of control and what it was taken
    /// for, in the form of the upstream `--debug=call_heuristics` output;
    /// read it with [`CallAnalyzer::log`].
    pub fn with_log(mut self) -> Self {
        self.log = Log::Text(String::new());
        self
    }

    /// Writes that log to `out` as the trace is read, rather than keeping it.
    pub fn with_log_to(mut self, out: Box<dyn Write>) -> Self {
        self.log = Log::Stream(out, None);
        self
    }

    /// Whether A64 and whether A32/T32 instructions were seen.
    pub fn instruction_sets(&self) -> (bool, bool) {
        (self.saw_a64, self.saw_a32)
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
            if let Some(c) = self.cur {
                self.prev = c;
            }
            self.cur = Some(Site { time: t, line, pc: 0 });
            self.node_pos = self.pos;
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
                self.insns_since_lr_update = (self.insns_since_lr_update + 1).min(LR_WRITE_WINDOW);
                self.aarch64 = ins.iset == Iset::A64;
                if self.aarch64 {
                    self.saw_a64 = true;
                } else if matches!(ins.iset, Iset::Arm | Iset::Thumb) {
                    self.saw_a32 = true;
                }
                let thumb = ins.iset == Iset::Thumb;
                if !self.watch.is_empty()
                    && self.watch.contains(&(ins.addr & !1))
                    && let Some(cur) = self.cur
                {
                    self.executions.push(Execution {
                        addr: ins.addr & !1,
                        time: cur.time,
                        line: cur.line,
                        pos: self.node_pos,
                    });
                }
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
        // longer be returned from. The map is ordered by stack pointer, so
        // those are at its front: the cost is that of the calls dropped.
        while let Some(e) = self.pending.first_entry()
            && e.key().0 < sp
        {
            e.remove();
        }
    }

    fn update_pc(&mut self, pc: u64, next_pc: u64, thumb: bool) {
        let Some(cur) = self.cur.as_mut() else { return };
        cur.pc = pc;
        let at = *cur;
        let before = self.prev;
        if self.root.is_none() {
            self.root = Some(at);
        }
        if let Some(expected) = self.expected_next_pc
            && (pc ^ expected) & !1 != 0
        {
            let (s, sz) = self.sp_slot();
            let sp = self.node_start_regs.read(s, sz).unwrap_or(u64::MAX);
            let node_line = at.line;
            if self.log.on() {
                self.log
                    .line(format_args!("transfer of control @ {node_line}, sp={sp:x}, pc={pc:x}"));
            }
            if let Some(call) = self.pending.remove(&(sp, pc)) {
                if self.log.on() {
                    self.log
                        .line(format_args!("  looks like return for call @ {}", call.at.line));
                }
                self.callrets.entry(call.at.line).or_insert(CallRet {
                    dir: 1,
                    before: call.before,
                    at: call.at,
                });
                self.callrets
                    .entry(node_line)
                    .or_insert(CallRet { dir: -1, before, at });
            } else {
                let (s, sz) = self.lr_slot();
                if let Some(lr) = self.node_start_regs.read(s, sz)
                    && self.insns_since_lr_update < LR_WRITE_WINDOW
                    && lr.abs_diff(self.expected_next_lr) < 64
                {
                    if self.log.on() {
                        self.log
                            .line(format_args!("  inserting as pending call with sp={sp:x} lr={lr:x}"));
                    }
                    self.pending.entry((sp, lr)).or_insert(Pending { before, at });
                }
            }
            // Any transfer of control uses up the last write of the link
            // register: a later branch (a loop in the callee, a tail
            // call) is not taken for a call on the strength of it.
            self.insns_since_lr_update = LR_WRITE_WINDOW;
        }
        self.expected_next_pc = Some(next_pc);
        self.expected_next_lr = next_pc | thumb as u64;
    }

    /// The call/return log (when made with [`CallAnalyzer::with_log`]).
    pub fn log(&self) -> Option<&str> {
        match &self.log {
            Log::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The first error writing the log (when made with
    /// [`CallAnalyzer::with_log_to`]), after flushing it.
    pub fn flush_log(&mut self) -> io::Result<()> {
        if let Log::Stream(w, err) = &mut self.log {
            if let Some(e) = err.take() {
                return Err(e);
            }
            w.flush()?;
        }
        Ok(())
    }

    /// Lines at which calls (+1: first line of the called function) and
    /// returns (-1: first line back in the caller) were found.
    pub fn calls_and_returns(&self) -> impl Iterator<Item = (u64, i8)> + '_ {
        self.callrets.iter().map(|(&l, c)| (l, c.dir))
    }

    /// Builds the call tree: activations in the order they began.
    pub fn finish(&self) -> CallTree {
        let mut tree = CallTree { acts: Vec::new() };
        let Some(root) = self.root else { return tree };
        let last = self.cur.unwrap_or(root);
        tree.acts.push(Activation {
            entry: root,
            exit: last,
            call: Site::default(),
            resume: last,
            depth: 0,
        });
        let mut stack = vec![0usize];
        for c in self.callrets.values() {
            if c.dir > 0 {
                stack.push(tree.acts.len());
                tree.acts.push(Activation {
                    entry: c.at,
                    exit: last,
                    call: c.before,
                    resume: last,
                    depth: stack.len() as u32 - 1,
                });
            } else if stack.len() > 1
                && let Some(top) = stack.pop()
            {
                let a = &mut tree.acts[top];
                a.exit = c.before;
                a.resume = c.at;
            }
        }
        tree
    }
}

/// One activation of a function: from its first instruction to its return
/// instruction, with the call that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activation {
    /// The function's first instruction.
    pub entry: Site,
    /// Its return (the end of the trace when the trace ended first).
    pub exit: Site,
    /// The call instruction, in the caller (zero for the root).
    pub call: Site,
    /// Where the caller resumed (the end of the trace when it ended first).
    pub resume: Site,
    /// Call depth: 0 for the root, which covers the whole trace.
    pub depth: u32,
}

/// The call tree, as its activations in the order they began (a pre-order
/// walk of the tree): each activation's caller is the nearest earlier one
/// of one less depth.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallTree {
    /// Activations; index 0 is the root, covering the whole trace.
    pub acts: Vec<Activation>,
}

/// How functions are named in the outputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Naming<'a> {
    /// The image's symbols, if any.
    pub symbols: Option<&'a Symbols>,
    /// Leave out the ` + 0xPC` of a function entered past its start
    /// (upstream's `--no-offsets`).
    pub no_offsets: bool,
}

impl<'a> Naming<'a> {
    /// Names from `symbols`, with offsets.
    pub fn new(symbols: Option<&'a Symbols>) -> Self {
        Naming {
            symbols,
            no_offsets: false,
        }
    }

    /// Appends the name of the function at `addr` to `out` (nothing when
    /// unnamed); returns whether it wrote.
    pub fn write(&self, out: &mut String, addr: u64) -> bool {
        match self.symbols {
            Some(s) => s.write_function_name(out, addr, !self.no_offsets).unwrap_or(false),
            None => false,
        }
    }
}

fn write_site(out: &mut String, s: &Site) {
    let _ = write!(out, "t:{} l:{} pc:0x{:x}", s.time, s.line, s.pc);
}

/// A trie node of the flame graph: one distinct call stack.
struct Stack {
    label: u32,
    own: i64,
}

impl CallTree {
    /// Writes the call tree in `tarmac-calltree` form to `out`, line by
    /// line; memory beyond the tree is one line.
    pub fn write_calltree(&self, out: &mut dyn Write, names: Naming) -> io::Result<()> {
        let mut line = String::with_capacity(256);
        for a in &self.acts {
            let level = 2 * a.depth as usize;
            if a.depth > 0 {
                line.clear();
                line.extend(std::iter::repeat_n(' ', 2 * (level - 1)));
                line.push_str("- ");
                write_site(&mut line, &a.call);
                line.push_str(" - ");
                write_site(&mut line, &a.resume);
                line.push('\n');
                out.write_all(line.as_bytes())?;
            }
            line.clear();
            line.extend(std::iter::repeat_n(' ', 2 * level));
            line.push_str("o ");
            write_site(&mut line, &a.entry);
            line.push_str(" - ");
            write_site(&mut line, &a.exit);
            line.push_str(" : ");
            names.write(&mut line, a.entry.pc);
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// The call tree in `tarmac-calltree` form.
    pub fn calltree_text(&self, syms: Option<&Symbols>) -> String {
        let mut out = Vec::new();
        let _ = self.write_calltree(&mut out, Naming::new(syms));
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Per function entry address: (calls, total time including callees),
    /// each activation counting `exit - entry + 1`.
    pub fn profile(&self) -> BTreeMap<u64, (u64, u64)> {
        let mut prof: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for a in &self.acts {
            let e = prof.entry(a.entry.pc).or_default();
            e.0 += 1;
            e.1 = e.1.wrapping_add(a.exit.time.wrapping_sub(a.entry.time).wrapping_add(1));
        }
        prof
    }

    /// Writes the profile in `tarmac-profile` form to `out`.
    pub fn write_profile(&self, out: &mut dyn Write, names: Naming) -> io::Result<()> {
        writeln!(out, "{:<12}{:<12}{:<12}Function name", "Address", "Count", "Time")?;
        let mut line = String::with_capacity(128);
        let mut addr = String::with_capacity(20);
        for (pc, (count, time)) in self.profile() {
            addr.clear();
            let _ = write!(addr, "0x{pc:x}");
            line.clear();
            let _ = write!(line, "{addr:<11} {count:<11} {time:<11} ");
            names.write(&mut line, pc);
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// The profile in `tarmac-profile` form.
    pub fn profile_text(&self, syms: Option<&Symbols>) -> String {
        let mut out = Vec::new();
        let _ = self.write_profile(&mut out, Naming::new(syms));
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Writes folded stacks for `flamegraph.pl` to `out`: each distinct
    /// call stack (function names, or hex addresses) with the time spent
    /// in its innermost function itself, sorted by the stack's text as
    /// upstream sorts them. The stacks are kept as a trie (one node per
    /// distinct stack, holding a label number), never as text.
    pub fn write_flamegraph(&self, out: &mut dyn Write, names: Naming) -> io::Result<()> {
        if self.acts.is_empty() {
            return Ok(());
        }
        // Labels, one per distinct text, and the label of each entry pc.
        let mut labels: Vec<String> = Vec::new();
        let mut label_of_text: HashMap<String, u32> = HashMap::new();
        let mut label_of_pc: HashMap<u64, u32> = HashMap::new();
        let mut text = String::new();
        let mut label = |pc: u64| -> u32 {
            if let Some(&l) = label_of_pc.get(&pc) {
                return l;
            }
            text.clear();
            if !names.write(&mut text, pc) {
                let _ = write!(text, "0x{pc:x}");
            }
            let l = match label_of_text.get(&text) {
                Some(&l) => l,
                None => {
                    let l = labels.len() as u32;
                    labels.push(text.clone());
                    label_of_text.insert(text.clone(), l);
                    l
                }
            };
            label_of_pc.insert(pc, l);
            l
        };
        // The trie: node 0 is the root's stack; children by (parent, label).
        let mut nodes = vec![Stack {
            label: label(self.acts[0].entry.pc),
            own: 0,
        }];
        let mut child: HashMap<(u32, u32), u32> = HashMap::new();
        // Open activations: (trie node, own time so far).
        let mut open: Vec<(u32, i64)> = Vec::new();
        let dur = |a: &Activation| a.exit.time as i64 - a.entry.time as i64;
        let close = |open: &mut Vec<(u32, i64)>, nodes: &mut Vec<Stack>| {
            if let Some((n, own)) = open.pop() {
                nodes[n as usize].own += own;
            }
        };
        for a in &self.acts {
            while open.len() > a.depth as usize {
                close(&mut open, &mut nodes);
            }
            let d = dur(a);
            let node = match open.last_mut() {
                None => 0,
                Some((parent, parent_own)) => {
                    *parent_own -= d;
                    let l = label(a.entry.pc);
                    let next = nodes.len() as u32;
                    let n = *child.entry((*parent, l)).or_insert(next);
                    if n == next {
                        nodes.push(Stack { label: l, own: 0 });
                    }
                    n
                }
            };
            open.push((node, d));
        }
        while !open.is_empty() {
            close(&mut open, &mut nodes);
        }
        // Children of each node, in the order their lines sort: a child's
        // own line sorts by its label, its descendants by its label and a
        // ';' (so "f2" comes between "f" and "f;g").
        let mut kids: Vec<Vec<u32>> = Vec::new();
        kids.resize_with(nodes.len(), Vec::new);
        for (&(parent, _), &n) in &child {
            kids[parent as usize].push(n);
        }
        drop(child);
        // Items to emit under a node: (child, false) its own line, (child,
        // true) its descendants.
        let items = |n: u32, kids: &[Vec<u32>]| -> Vec<(u32, bool)> {
            let mut v: Vec<(u32, bool)> = kids[n as usize]
                .iter()
                .flat_map(|&k| [(k, false), (k, true)])
                .filter(|&(k, desc)| !desc || !kids[k as usize].is_empty())
                .collect();
            v.sort_by(|&(a, da), &(b, db)| {
                let ka = labels[nodes[a as usize].label as usize]
                    .bytes()
                    .chain(da.then_some(b';'));
                let kb = labels[nodes[b as usize].label as usize]
                    .bytes()
                    .chain(db.then_some(b';'));
                ka.cmp(kb)
            });
            v
        };
        let mut path = String::new();
        let mut line = String::new();
        let mut emit = |path: &str, own: i64, out: &mut dyn Write| -> io::Result<()> {
            line.clear();
            let _ = writeln!(line, "{path} {own}");
            out.write_all(line.as_bytes())
        };
        path.push_str(&labels[nodes[0].label as usize]);
        emit(&path, nodes[0].own, out)?;
        // Explicit stack (the depth may be in the hundreds of thousands):
        // (items under a node, next item, path length to restore).
        let mut stack = vec![(items(0, &kids), 0usize, path.len())];
        while let Some((list, i, _)) = stack.last_mut() {
            let Some(&(k, desc)) = list.get(*i) else {
                let (_, _, restore) = stack.pop().unwrap_or_default();
                path.truncate(restore);
                continue;
            };
            *i += 1;
            let restore = path.len();
            path.push(';');
            path.push_str(&labels[nodes[k as usize].label as usize]);
            if desc {
                // The path stays extended until this node's items are done.
                stack.push((items(k, &kids), 0, restore));
            } else {
                emit(&path, nodes[k as usize].own, out)?;
                path.truncate(restore);
            }
        }
        Ok(())
    }

    /// Folded stacks for `flamegraph.pl`.
    pub fn flamegraph_text(&self, syms: Option<&Symbols>) -> String {
        let mut out = Vec::new();
        let _ = self.write_flamegraph(&mut out, Naming::new(syms));
        String::from_utf8_lossy(&out).into_owned()
    }
}
