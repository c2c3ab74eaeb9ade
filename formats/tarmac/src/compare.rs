//! Compares two Tarmac traces the way Trace Matcher does: instruction by
//! instruction, or within a window where equal instructions may come in a
//! different order; optionally ignoring time, starting at an address,
//! skipping a boot section and the longer trace's remainder; and, on
//! request, the register writes and memory accesses of each matched
//! instruction.
//!
//! # The window
//!
//! With a window of N, an instruction matches an equal one of the other
//! trace at most N places from its own place there: N = 0 keeps the order
//! strictly, N = 1 lets neighbours swap. An instruction moved more than N
//! places is a difference: reported as missing where it was, and as extra
//! where it went. Places are counted after setting aside the
//! instructions already reported as in one trace only, so a dropped or
//! inserted instruction costs one difference, where it happened, and the
//! traces line up again after it.
//!
//! When neither trace's next instruction has a partner within the window,
//! the comparison looks ahead (up to [`RESYNC_LOOKAHEAD`] instructions) for
//! the nearest place where [`RESYNC_RUN`] instructions agree again: that
//! says whether an instruction was dropped, inserted or changed.
//!
//! Loops repeat instructions: with a window longer than a loop, a dropped
//! instruction could be paired with itself one iteration on, and every
//! later one with the next iteration's, pushing the difference to the end
//! of the loop. So an instruction is paired with the nearest equal one to
//! its place, and a partner away from its place is taken as the same
//! instruction an iteration on (the instruction itself dropped, inserted or
//! changed) when the traces agree after setting it aside and the partner
//! has a double within two places of where it would then belong. An
//! instruction moved by about a whole loop iteration is therefore reported
//! as dropped and inserted even within the window.
//!
//! # Registers and memory
//!
//! The register (`R`) and memory (`MR`, `MW`, `LD`, `ST`, `MU`) lines
//! after an instruction, up to the next one, are its effects. With
//! [`CompareOptions::registers`] (or `memory`), two matched instructions
//! must write the same registers with the same values (or make the same
//! accesses: direction, size, address and value), in any order; a line
//! only one trace has is a difference. Lines before the first instruction
//! belong to none and are not compared.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};

use super::reader::TarmacError;
use super::record::{DiagramByte, Effect, Iset, Record, RecordKind};

/// Instructions that must agree, one after another, for the comparison to
/// take a place as where the traces line up again.
pub const RESYNC_RUN: usize = 3;
/// How far (instructions of both traces together) the comparison looks for
/// where the traces line up again after a difference.
pub const RESYNC_LOOKAHEAD: usize = 32;
/// The largest window (a larger one is taken as this).
pub const MAX_WINDOW: usize = 1 << 20;

/// One executed (or condition-failed) instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Line in its file.
    pub line: u64,
    /// Timestamp of the line.
    pub time: u64,
    /// Virtual address.
    pub addr: u64,
    /// Encoding, when the fetch succeeded.
    pub encoding: Option<u64>,
    /// Instruction set.
    pub iset: Iset,
    /// Executed, condition failed, or fetch failed.
    pub effect: Effect,
}

impl Insn {
    /// The instruction of a record, if it is one.
    pub fn from_record(rec: &Record) -> Option<Insn> {
        match rec.kind {
            RecordKind::Instruction(i) => Some(Insn {
                line: rec.line,
                time: rec.time,
                addr: i.addr,
                encoding: i.encoding,
                iset: i.iset,
                effect: i.effect,
            }),
            _ => None,
        }
    }
}

impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = match self.effect {
            Effect::Executed => "IT",
            Effect::CcFail => "IS",
            Effect::FetchFail => "IF",
        };
        write!(f, "line {}: {} {st} {:08x} ", self.line, self.time, self.addr)?;
        match self.encoding {
            Some(e) => write!(f, "{e:08x}")?,
            None => f.write_str("--------")?,
        }
        write!(f, " {}", self.iset.letter())
    }
}

/// Where the records come from: a [`Reader`](super::Reader), or a wrapper
/// of one (that ends a trace at a cut last line, say).
pub trait RecordSource {
    /// The next record, `None` at the end.
    fn next_record(&mut self) -> Result<Option<Record<'_>>, TarmacError>;
    /// Whether this error of [`next_record`](Self::next_record) ends the
    /// trace instead of the comparison (a cut last line, say).
    fn ends_at(&mut self, _error: &TarmacError) -> bool {
        false
    }
}

impl<R: std::io::BufRead> RecordSource for super::Reader<R> {
    fn next_record(&mut self) -> Result<Option<Record<'_>>, TarmacError> {
        super::Reader::next_record(self)
    }
}

/// Trace Matcher's options.
#[derive(Clone, Copy, Debug)]
pub struct CompareOptions {
    /// An instruction matches an equal one at most this many places from
    /// its own place in the other trace (0: strictly in order); see the
    /// [module documentation](self).
    pub window: usize,
    /// Records that differ only in their time are the same.
    pub skip_time: bool,
    /// Condition-failed and executed are the same.
    pub ignore_effect: bool,
    /// Start each trace at its first instruction at this address.
    pub start_addr: Option<u64>,
    /// Skip this many instructions at the start of each trace (after
    /// `start_addr`).
    pub boot_size: usize,
    /// When one trace ends first, ignore the rest of the other.
    pub skip_remainder: bool,
    /// Stop at the first difference (else count them all).
    pub stop_at_first: bool,
    /// Instructions of context to show on each side of a difference.
    pub context: usize,
    /// Differences to keep with their context (the first ones).
    pub show: usize,
    /// Compare the register writes of matched instructions.
    pub registers: bool,
    /// Compare the memory accesses of matched instructions.
    pub memory: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            window: 0,
            skip_time: false,
            ignore_effect: false,
            start_addr: None,
            boot_size: 0,
            skip_remainder: false,
            stop_at_first: false,
            context: 3,
            show: 1,
            registers: false,
            memory: false,
        }
    }
}

/// What kind of difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffKind {
    /// An instruction of the first trace has no partner in the second
    /// within the window: dropped from the second, or moved too far.
    OnlyInA,
    /// An instruction of the second trace has no partner in the first.
    OnlyInB,
    /// The instructions at one place differ.
    Changed,
    /// Matched instructions write different registers or values.
    Registers,
    /// Matched instructions access memory differently.
    Memory,
}

/// The instructions of one trace around a difference.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// Instructions before the place (oldest first).
    pub before: Vec<Insn>,
    /// The instruction at the place; `None` where this trace has none
    /// (the place where the other's instruction would have been).
    pub at: Option<Insn>,
    /// Instructions after the place.
    pub after: Vec<Insn>,
    /// Line of the instruction at the place (for a place without one: the
    /// instruction it would come before); `None` past the end.
    pub line: Option<u64>,
}

/// One difference, with context from both traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// What differs.
    pub kind: DiffKind,
    /// Place in the first trace (index from 0 of its compared
    /// instructions; for [`DiffKind::OnlyInB`], the instruction before
    /// which the missing one would be).
    pub index_a: u64,
    /// Place in the second trace.
    pub index_b: u64,
    /// The first trace around the place.
    pub a: Context,
    /// The second trace around the place.
    pub b: Context,
    /// Register or memory lines of the first trace's instruction that the
    /// second's has not: (line, the line as compared).
    pub lines_a: Vec<(u64, String)>,
    /// Register or memory lines of the second trace's instruction that the
    /// first's has not.
    pub lines_b: Vec<(u64, String)>,
}

/// What a comparison found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompareReport {
    /// Instructions compared equal.
    pub matched: u64,
    /// Differences (1 when stopped at the first).
    pub differences: u64,
    /// The first [`CompareOptions::show`] differences in trace order.
    pub shown: Vec<Difference>,
    /// The comparison stopped at the first difference.
    pub stopped: bool,
}

/// An error reading one of the traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareError {
    /// 0 for the first trace, 1 for the second.
    pub trace: usize,
    /// The reader's error (with its line).
    pub error: TarmacError,
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let which = if self.trace == 0 { "first" } else { "second" };
        write!(f, "{which} trace: {}", self.error)
    }
}

impl std::error::Error for CompareError {}

impl CompareReport {
    /// The traces compared equal.
    pub fn same(&self) -> bool {
        self.differences == 0
    }

    /// The first difference.
    pub fn first(&self) -> Option<&Difference> {
        self.shown.first()
    }

    /// A human-readable report: "same", or the differences kept with
    /// their context and the number of differences.
    pub fn text(&self, name_a: &str, name_b: &str) -> String {
        let mut s = String::new();
        if self.same() {
            let _ = writeln!(s, "same: {} instructions match", self.matched);
            return s;
        }
        if self.stopped {
            let _ = writeln!(
                s,
                "different: stopped at the first difference ({} instructions matched)",
                self.matched
            );
        } else {
            let _ = writeln!(
                s,
                "different: {} difference(s), {} instructions matched",
                self.differences, self.matched
            );
        }
        for d in &self.shown {
            d.write_text(&mut s, name_a, name_b);
        }
        let more = self.differences.saturating_sub(self.shown.len() as u64);
        if more > 0 && !self.stopped {
            let _ = writeln!(s, "and {more} more difference(s)");
        }
        s
    }
}

impl Difference {
    fn write_text(&self, s: &mut String, na: &str, nb: &str) {
        let at = |c: &Context| c.at.map(|i| i.line);
        // The line before which a missing instruction's place is.
        let place = |c: &Context, name: &str| match c.line {
            Some(l) => format!("before {name} line {l}"),
            None => format!("at the end of {name}"),
        };
        let both = format!(
            "{na} line {}, {nb} line {}",
            at(&self.a).unwrap_or(0),
            at(&self.b).unwrap_or(0)
        );
        let _ = match self.kind {
            DiffKind::OnlyInA => writeln!(
                s,
                "only in {na}: line {}, not in {nb} ({})",
                at(&self.a).unwrap_or(0),
                place(&self.b, nb)
            ),
            DiffKind::OnlyInB => writeln!(
                s,
                "only in {nb}: line {}, not in {na} ({})",
                at(&self.b).unwrap_or(0),
                place(&self.a, na)
            ),
            DiffKind::Changed => writeln!(s, "changed: {both}"),
            DiffKind::Registers => writeln!(s, "registers differ: {both}"),
            DiffKind::Memory => writeln!(s, "memory differs: {both}"),
        };
        for (name, c, lines) in [(na, &self.a, &self.lines_a), (nb, &self.b, &self.lines_b)] {
            let _ = writeln!(s, "  {name}");
            for i in &c.before {
                let _ = writeln!(s, "      {i}");
            }
            match c.at {
                Some(i) => {
                    let _ = writeln!(s, "    > {i}");
                }
                None => s.push_str("    > (none here)\n"),
            }
            for (line, text) in lines {
                let _ = writeln!(s, "        line {line}: {text}");
            }
            for i in &c.after {
                let _ = writeln!(s, "      {i}");
            }
        }
    }
}

/// A register or memory line of an instruction, as compared: `text` is a
/// range of the step's text.
#[derive(Clone, Copy, Debug)]
struct Eff {
    line: u64,
    mem: bool,
    start: u32,
    end: u32,
}

/// An instruction with its effects (kept only when compared).
#[derive(Debug)]
struct Step {
    insn: Insn,
    effs: Vec<Eff>,
    text: String,
}

impl Step {
    fn eff_text(&self, e: &Eff) -> &str {
        &self.text[e.start as usize..e.end as usize]
    }
    /// Sorts the effects: compared as sets, in any order.
    fn seal(&mut self) {
        let text = &self.text;
        self.effs.sort_unstable_by(|x, y| {
            (x.mem, &text[x.start as usize..x.end as usize], x.line).cmp(&(
                y.mem,
                &text[y.start as usize..y.end as usize],
                y.line,
            ))
        });
    }
}

/// The line of an effect record as compared; false when the record is
/// not one compared.
fn effect_text(kind: &RecordKind, regs: bool, mem: bool, out: &mut String) -> Option<bool> {
    match kind {
        RecordKind::Register(r) if regs => {
            out.push_str("R ");
            match r.reg {
                Some(id) => {
                    let _ = write!(out, "{id}");
                }
                None => out.extend(r.name.chars().map(|c| c.to_ascii_lowercase())),
            }
            if let Some(x) = r.extra {
                let _ = write!(out, " ({x})");
            }
            out.push(' ');
            for (b, w) in r.bytes.iter().zip(r.written).rev() {
                if *w {
                    let _ = write!(out, "{b:02x}");
                } else {
                    out.push_str("--");
                }
            }
            Some(false)
        }
        RecordKind::Memory(m) if mem => {
            let rw = if m.read { 'R' } else { 'W' };
            let x = if m.exclusive { "X" } else { "" };
            let _ = write!(out, "M{rw}{}{x} {:08x} ", m.size, m.addr);
            match m.value {
                Some(v) => {
                    let _ = write!(out, "{v:0w$x}", w = usize::from(m.size) * 2);
                }
                None => out.extend(std::iter::repeat_n('x', usize::from(m.size) * 2)),
            }
            Some(true)
        }
        RecordKind::MemAborted { read, size, addr } if mem => {
            let rw = if *read { 'R' } else { 'W' };
            let _ = write!(out, "M{rw}{size} {addr:08x} (ABORTED)");
            Some(true)
        }
        RecordKind::Diagram(d) if mem => {
            let _ = write!(out, "{} {:08x} ", if d.read { "LD" } else { "ST" }, d.base);
            for b in &d.bytes {
                match b {
                    DiagramByte::Unused => out.push_str(".."),
                    DiagramByte::Unknown => out.push_str("##"),
                    DiagramByte::Known(v) => {
                        let _ = write!(out, "{v:02x}");
                    }
                }
            }
            Some(true)
        }
        RecordKind::MemUpdate { size, op, addr, text } if mem => {
            let _ = write!(out, "MU{size}_{op}");
            if let Some(a) = addr {
                let _ = write!(out, " {a:08x}");
            }
            let _ = write!(out, " {}", text.trim());
            Some(true)
        }
        _ => None,
    }
}

struct Slot {
    step: Step,
    resolved: bool,
}

/// One trace: the instructions read and not yet dropped (from some
/// already compared, for context, to those read ahead), numbered from 0
/// in the order compared.
struct Side<'s> {
    src: &'s mut dyn RecordSource,
    which: usize,
    /// The instruction whose effects are being read.
    cur: Option<Step>,
    eof: bool,
    started: bool,
    skipped: usize,
    buf: VecDeque<Slot>,
    /// Number of `buf[0]`.
    base: u64,
    /// Number of the first instruction not yet matched or reported.
    head: u64,
    pool: Vec<(Vec<Eff>, String)>,
}

impl<'s> Side<'s> {
    fn new(src: &'s mut dyn RecordSource, which: usize) -> Self {
        Side {
            src,
            which,
            cur: None,
            eof: false,
            started: false,
            skipped: 0,
            buf: VecDeque::new(),
            base: 0,
            head: 0,
            pool: Vec::new(),
        }
    }

    fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }

    /// The next instruction with its effects, after the start address and
    /// the boot section.
    fn read_step(&mut self, o: &CompareOptions) -> Result<Option<Step>, CompareError> {
        if self.eof {
            return Ok(None);
        }
        let which = self.which;
        loop {
            let rec = match self.src.next_record() {
                Ok(r) => r,
                Err(error) => {
                    if !self.src.ends_at(&error) {
                        return Err(CompareError { trace: which, error });
                    }
                    None
                }
            };
            let Some(rec) = rec else {
                self.eof = true;
                return Ok(self.cur.take().map(|mut s| {
                    s.seal();
                    s
                }));
            };
            if let Some(insn) = Insn::from_record(&rec) {
                let mut keep = true;
                if !self.started {
                    if o.start_addr.is_some_and(|a| a != insn.addr) {
                        keep = false;
                    } else {
                        self.started = true;
                    }
                }
                if keep && self.skipped < o.boot_size {
                    self.skipped += 1;
                    keep = false;
                }
                let done = self.cur.take();
                if keep {
                    let (effs, text) = self.pool.pop().unwrap_or_default();
                    self.cur = Some(Step { insn, effs, text });
                }
                if let Some(mut d) = done {
                    d.seal();
                    return Ok(Some(d));
                }
                continue;
            }
            if let Some(cur) = &mut self.cur {
                let start = cur.text.len();
                if let Some(mem) = effect_text(&rec.kind, o.registers, o.memory, &mut cur.text) {
                    // Effects past 4 GiB of text per instruction are not compared.
                    if let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(cur.text.len())) {
                        cur.effs.push(Eff {
                            line: rec.line,
                            mem,
                            start,
                            end,
                        });
                    }
                }
            }
        }
    }

    /// Reads until instruction `n` is buffered (or the trace ends).
    fn fill_to(&mut self, n: u64, o: &CompareOptions) -> Result<(), CompareError> {
        while self.end() <= n {
            match self.read_step(o)? {
                Some(step) => self.buf.push_back(Slot { step, resolved: false }),
                None => break,
            }
        }
        Ok(())
    }

    fn get(&self, n: u64) -> Option<&Slot> {
        n.checked_sub(self.base)
            .and_then(|i| self.buf.get(usize::try_from(i).ok()?))
    }

    fn open(&self, n: u64) -> Option<&Step> {
        self.get(n).filter(|s| !s.resolved).map(|s| &s.step)
    }

    fn resolve(&mut self, n: u64) {
        if let Some(s) = n
            .checked_sub(self.base)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.buf.get_mut(i))
        {
            s.resolved = true;
        }
        while self.get(self.head).is_some_and(|s| s.resolved) {
            self.head += 1;
        }
    }

    /// Drops what is resolved and older than `keep` instructions before
    /// the first unresolved one.
    fn trim(&mut self, keep: u64) {
        while self.head.saturating_sub(self.base) > keep {
            let Some(s) = self.buf.pop_front() else { break };
            let Step { mut effs, mut text, .. } = s.step;
            effs.clear();
            text.clear();
            self.pool.push((effs, text));
            self.base += 1;
        }
    }

    /// This trace's instructions around place `n`: `n` itself when
    /// `present`, else the place before `n`.
    fn context(&mut self, n: u64, present: bool, c: usize, o: &CompareOptions) -> Result<Context, CompareError> {
        let after_from = n + u64::from(present);
        let to = after_from.saturating_add(c as u64);
        self.fill_to(to, o)?;
        let insn = |k: u64| self.get(k).map(|s| s.step.insn);
        // Only what is buffered: a huge context costs the trace, not the number.
        let (first, end) = (n.saturating_sub(c as u64).max(self.base), to.min(self.end()));
        Ok(Context {
            before: (first..n).filter_map(insn).collect(),
            at: if present { insn(n) } else { None },
            after: (after_from..end).filter_map(insn).collect(),
            line: insn(n).map(|i| i.line),
        })
    }
}

fn same(a: &Insn, b: &Insn, o: &CompareOptions) -> bool {
    a.addr == b.addr
        && a.iset == b.iset
        && (a.encoding.is_none() || b.encoding.is_none() || a.encoding == b.encoding)
        && (o.ignore_effect || a.effect == b.effect)
        && (o.skip_time || a.time == b.time)
}

/// The effects (registers when `!mem`, memory when `mem`) of two matched
/// instructions that the other has not, or `None` when they agree.
type EffDiff = (Vec<(u64, String)>, Vec<(u64, String)>);

fn effects_differ(x: &Step, y: &Step, mem: bool, want_lines: bool) -> Option<EffDiff> {
    let ex = x.effs.iter().filter(|e| e.mem == mem);
    let ey = y.effs.iter().filter(|e| e.mem == mem);
    // Both sorted by text: walk them together.
    let (mut ex, mut ey) = (ex.peekable(), ey.peekable());
    let (mut only_x, mut only_y) = (Vec::new(), Vec::new());
    let mut differ = false;
    loop {
        let ord = match (ex.peek(), ey.peek()) {
            (None, None) => break,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(a), Some(b)) => x.eff_text(a).cmp(y.eff_text(b)),
        };
        match ord {
            std::cmp::Ordering::Equal => {
                ex.next();
                ey.next();
            }
            std::cmp::Ordering::Less => {
                differ = true;
                let e = ex.next().copied();
                if let (true, Some(e)) = (want_lines, e) {
                    only_x.push((e.line, x.eff_text(&e).to_string()));
                }
            }
            std::cmp::Ordering::Greater => {
                differ = true;
                let e = ey.next().copied();
                if let (true, Some(e)) = (want_lines, e) {
                    only_y.push((e.line, y.eff_text(&e).to_string()));
                }
            }
        }
        if differ && !want_lines {
            break;
        }
    }
    if !differ {
        return None;
    }
    only_x.sort_by_key(|e| e.0);
    only_y.sort_by_key(|e| e.0);
    Some((only_x, only_y))
}

/// The places of a window around `place`, `w` either side, from `first`
/// and before `end`, nearest first (the earlier of two as near): where
/// the same instructions recur (a loop), an instruction is paired with the
/// one at its own place rather than one a loop iteration away.
fn nearest(place: u64, w: u64, first: u64, end: u64) -> impl Iterator<Item = u64> {
    let lo = place.saturating_sub(w).max(first);
    let hi = place.saturating_add(w).min(end.saturating_sub(1));
    // Only as far as places exist: a long window over a short buffer costs
    // the buffer, not the window.
    let reach = if lo > hi {
        0
    } else {
        (place.saturating_sub(lo)).max(hi.saturating_sub(place)) + 1
    };
    (0..reach)
        .flat_map(move |d| [place.checked_sub(d), (d > 0).then(|| place.checked_add(d)).flatten()])
        .flatten()
        .filter(move |&k| (lo..=hi).contains(&k))
}

/// What the look-ahead found for two instructions without partners.
enum Resync {
    OnlyA,
    OnlyB,
    Changed,
}

struct Matcher<'s, 'o> {
    a: Side<'s>,
    b: Side<'s>,
    o: &'o CompareOptions,
    n: u64,
    /// Where an instruction of A belongs in B: its number plus `shift`
    /// (instructions only in B minus instructions only in A, so far).
    shift: i64,
    rep: CompareReport,
    /// The place of the first difference found (for stopping at it).
    first_at: Option<(u64, u64)>,
    /// No look-ahead until A's first unresolved instruction reaches this:
    /// the last one found nothing, and traces that differ everywhere must
    /// not cost a look-ahead per instruction.
    quiet_until: u64,
    /// Scratch: numbers of unresolved instructions of each trace.
    ua: Vec<u64>,
    ub: Vec<u64>,
}

/// Compares two Tarmac traces.
pub fn compare(
    a: &mut dyn RecordSource,
    b: &mut dyn RecordSource,
    opts: &CompareOptions,
) -> Result<CompareReport, CompareError> {
    // Partners are looked for fewer than n places away.
    let n = opts.window.saturating_add(1).min(MAX_WINDOW) as u64;
    let mut m = Matcher {
        a: Side::new(a, 0),
        b: Side::new(b, 1),
        o: opts,
        n,
        shift: 0,
        rep: CompareReport::default(),
        first_at: None,
        quiet_until: 0,
        ua: Vec::new(),
        ub: Vec::new(),
    };
    m.run()?;
    Ok(m.rep)
}

impl Matcher<'_, '_> {
    fn run(&mut self) -> Result<(), CompareError> {
        let o = self.o;
        let w = self.n - 1;
        // Kept behind the first unresolved instruction, for context.
        let keep = (o.context as u64).saturating_add(2 * self.n + RESYNC_LOOKAHEAD as u64);
        loop {
            self.a.trim(keep);
            self.b.trim(keep);
            let (i, j) = (self.a.head, self.b.head);
            self.a.fill_to(i, o)?;
            self.b.fill_to(j, o)?;
            let (has_a, has_b) = (self.a.open(i).is_some(), self.b.open(j).is_some());
            if !has_a && !has_b {
                break;
            }
            // Stopping at the first difference: once nothing before it can
            // still be found different.
            if let Some((fa, fb)) = self.first_at
                && o.stop_at_first
                && (!has_a || i > fa + self.n)
                && (!has_b || j > fb + self.n)
            {
                break;
            }
            if !has_a || !has_b {
                if o.skip_remainder {
                    break;
                }
                if has_a {
                    self.only_a(i)?;
                } else {
                    self.only_b(j)?;
                }
                continue;
            }
            // Where x (A's next) belongs in B, and y (B's next) in A.
            let pa = (i as i64).saturating_add(self.shift).max(0) as u64;
            let pb = (j as i64).saturating_sub(self.shift).max(0) as u64;
            // Nothing unresolved left within x's window: x has no partner.
            if j > pa + w {
                self.only_a(i)?;
                continue;
            }
            if i > pb + w {
                self.only_b(j)?;
                continue;
            }
            self.b.fill_to(pa + w, o)?;
            let x = self.a.open(i).map(|s| s.insn);
            if let Some(x) = x
                && let Some(k) =
                    nearest(pa, w, j, self.b.end()).find(|&k| self.b.open(k).is_some_and(|s| same(&x, &s.insn, o)))
            {
                // A partner away from x's place may be the same instruction
                // a loop iteration on, with x dropped.
                if k != pa && self.set_aside(i, j, k, true, 1, 0)? {
                    self.only_a(i)?;
                } else if k != pa && k != j && self.set_aside(i, j, k, true, 1, 1)? {
                    self.changed(i, j)?;
                } else if k != pa && k != j && !self.y_has_partner(i, j, pb)? && self.set_aside(i, j, k, true, 0, 1)? {
                    self.only_b(j)?;
                } else {
                    self.pair(i, k)?;
                }
                continue;
            }
            self.a.fill_to(pb + w, o)?;
            let y = self.b.open(j).map(|s| s.insn);
            if let Some(y) = y
                && let Some(k) =
                    nearest(pb, w, i, self.a.end()).find(|&k| self.a.open(k).is_some_and(|s| same(&s.insn, &y, o)))
            {
                if k != pb && self.set_aside(i, j, k, false, 0, 1)? {
                    self.only_b(j)?;
                } else if k != pb && k != i && self.set_aside(i, j, k, false, 1, 1)? {
                    self.changed(i, j)?;
                } else if k != pb && k != i && self.set_aside(i, j, k, false, 1, 0)? {
                    self.only_a(i)?;
                } else {
                    self.pair(k, j)?;
                }
                continue;
            }
            match self.resync(i)? {
                Resync::OnlyA => self.only_a(i)?,
                Resync::OnlyB => self.only_b(j)?,
                Resync::Changed => self.changed(i, j)?,
            }
        }
        if o.stop_at_first && self.rep.differences > 0 {
            self.rep.differences = 1;
            self.rep.stopped = true;
            self.rep.shown.truncate(1);
        }
        Ok(())
    }

    /// A partner found away from its instruction's place may be the same
    /// instruction a loop iteration on, the instruction itself being
    /// dropped, inserted or changed: is it? `in_b` says the partner `k` is
    /// in B (of x, A's `i`), else in A (of y, B's `j`); the hypothesis sets
    /// `skip_a` instructions of A and `skip_b` of B aside. It holds when the
    /// traces agree for [`RESYNC_RUN`] instructions after those set aside,
    /// and, for a drop or an insert, the partner has a double within two
    /// places of where it would be then. (Moved within the window, an instruction has no such double,
    /// unless it moved by about a whole loop iteration.)
    fn set_aside(
        &mut self,
        i: u64,
        j: u64,
        k: u64,
        in_b: bool,
        skip_a: u64,
        skip_b: u64,
    ) -> Result<bool, CompareError> {
        if !self.agree_from(i + skip_a, j + skip_b, RESYNC_RUN as u64)? {
            return Ok(false);
        }
        if skip_a == skip_b {
            // A change: whether the partner is extra where it is or the
            // instruction moved there, there are two differences.
            return Ok(true);
        }
        // Two places either way: other drops or inserts may come between.
        let (o, d) = (self.o, 2);
        let shift = self.shift + skip_b as i64 - skip_a as i64;
        // The double is not the instruction set aside.
        let (from, to, place, not) = if in_b {
            (
                &self.b,
                &mut self.a,
                (k as i64).saturating_sub(shift),
                (skip_a > 0).then_some(i),
            )
        } else {
            (
                &self.a,
                &mut self.b,
                (k as i64).saturating_add(shift),
                (skip_b > 0).then_some(j),
            )
        };
        let place = place.max(0) as u64;
        let Some(p) = from.open(k).map(|s| s.insn) else {
            return Ok(false);
        };
        to.fill_to(place + d, o)?;
        Ok(nearest(place, d, 0, to.end()).any(|m| Some(m) != not && to.open(m).is_some_and(|s| same(&s.insn, &p, o))))
    }

    /// Whether y (B's `j`, whose place in A is `pb`) has a partner within
    /// the window: then it may have moved, and is not taken as inserted.
    fn y_has_partner(&mut self, i: u64, j: u64, pb: u64) -> Result<bool, CompareError> {
        let (o, w) = (self.o, self.n - 1);
        self.a.fill_to(pb + w, o)?;
        let Some(y) = self.b.open(j).map(|s| s.insn) else {
            return Ok(false);
        };
        Ok(nearest(pb, w, i, self.a.end()).any(|k| self.a.open(k).is_some_and(|s| same(&s.insn, &y, o))))
    }

    /// Whether the unresolved instructions of A from `i` and of B from `j`
    /// are the same, in the same order, for `len` instructions (or until
    /// both traces end).
    fn agree_from(&mut self, mut i: u64, mut j: u64, len: u64) -> Result<bool, CompareError> {
        let o = self.o;
        for _ in 0..len {
            for (side, k) in [(&mut self.a, &mut i), (&mut self.b, &mut j)] {
                side.fill_to(*k, o)?;
                while side.get(*k).is_some_and(|s| s.resolved) {
                    *k += 1;
                    side.fill_to(*k, o)?;
                }
            }
            match (self.a.open(i), self.b.open(j)) {
                (Some(x), Some(y)) if same(&x.insn, &y.insn, o) => {}
                (None, None) => return Ok(true),
                _ => return Ok(false),
            }
            i += 1;
            j += 1;
        }
        Ok(true)
    }

    /// Whether a difference at (pa, pb) is among the first `show`, so that
    /// its context is worth making.
    fn wanted(&self, at: (u64, u64)) -> bool {
        let show = if self.o.stop_at_first { 1 } else { self.o.show };
        show > 0 && (self.rep.shown.len() < show || self.rep.shown.last().is_some_and(|d| at < (d.index_a, d.index_b)))
    }

    fn record(&mut self, d: Difference) {
        let show = if self.o.stop_at_first { 1 } else { self.o.show };
        let at = (d.index_a, d.index_b);
        let k = self.rep.shown.partition_point(|e| (e.index_a, e.index_b) <= at);
        self.rep.shown.insert(k, d);
        self.rep.shown.truncate(show);
    }

    fn found(&mut self, at: (u64, u64)) {
        self.rep.differences += 1;
        if self.first_at.is_none_or(|f| at < f) {
            self.first_at = Some(at);
        }
    }

    fn only_a(&mut self, i: u64) -> Result<(), CompareError> {
        let p = (i as i64).saturating_add(self.shift).max(0) as u64;
        self.found((i, p));
        if self.wanted((i, p)) {
            let c = self.o.context;
            let d = Difference {
                kind: DiffKind::OnlyInA,
                index_a: i,
                index_b: p,
                a: self.a.context(i, true, c, self.o)?,
                b: self.b.context(p, false, c, self.o)?,
                lines_a: Vec::new(),
                lines_b: Vec::new(),
            };
            self.record(d);
        }
        self.a.resolve(i);
        self.shift -= 1;
        Ok(())
    }

    fn only_b(&mut self, j: u64) -> Result<(), CompareError> {
        let p = (j as i64).saturating_sub(self.shift).max(0) as u64;
        self.found((p, j));
        if self.wanted((p, j)) {
            let c = self.o.context;
            let d = Difference {
                kind: DiffKind::OnlyInB,
                index_a: p,
                index_b: j,
                a: self.a.context(p, false, c, self.o)?,
                b: self.b.context(j, true, c, self.o)?,
                lines_a: Vec::new(),
                lines_b: Vec::new(),
            };
            self.record(d);
        }
        self.b.resolve(j);
        self.shift += 1;
        Ok(())
    }

    fn changed(&mut self, i: u64, j: u64) -> Result<(), CompareError> {
        self.found((i, j));
        if self.wanted((i, j)) {
            let c = self.o.context;
            let d = Difference {
                kind: DiffKind::Changed,
                index_a: i,
                index_b: j,
                a: self.a.context(i, true, c, self.o)?,
                b: self.b.context(j, true, c, self.o)?,
                lines_a: Vec::new(),
                lines_b: Vec::new(),
            };
            self.record(d);
        }
        self.a.resolve(i);
        self.b.resolve(j);
        Ok(())
    }

    fn pair(&mut self, i: u64, j: u64) -> Result<(), CompareError> {
        self.rep.matched += 1;
        for (on, mem, kind) in [
            (self.o.registers, false, DiffKind::Registers),
            (self.o.memory, true, DiffKind::Memory),
        ] {
            if !on {
                continue;
            }
            let (Some(x), Some(y)) = (self.a.open(i), self.b.open(j)) else {
                continue;
            };
            let want = self.wanted((i, j));
            let Some((lines_a, lines_b)) = effects_differ(x, y, mem, want) else {
                continue;
            };
            self.found((i, j));
            if want {
                let c = self.o.context;
                let d = Difference {
                    kind,
                    index_a: i,
                    index_b: j,
                    a: self.a.context(i, true, c, self.o)?,
                    b: self.b.context(j, true, c, self.o)?,
                    lines_a,
                    lines_b,
                };
                self.record(d);
            }
        }
        self.a.resolve(i);
        self.b.resolve(j);
        Ok(())
    }

    /// x (A's instruction `i`) and y (B's `j`) have no partners within the
    /// window: finds the nearest places, p instructions on in A and q in
    /// B, where the traces agree again. p = 0 says y was inserted, q = 0
    /// that x was dropped; otherwise they are a changed pair.
    fn resync(&mut self, i: u64) -> Result<Resync, CompareError> {
        if i < self.quiet_until {
            return Ok(Resync::Changed);
        }
        let o = self.o;
        // Reordering tolerated in the run, at most as far as the look-ahead:
        // a huge window must not make every look-ahead read it all.
        let w = (self.n as usize - 1).min(RESYNC_LOOKAHEAD);
        let need = RESYNC_LOOKAHEAD + RESYNC_RUN + w;
        for (side, list) in [(&mut self.a, &mut self.ua), (&mut self.b, &mut self.ub)] {
            list.clear();
            let mut k = side.head;
            while list.len() < need {
                side.fill_to(k, o)?;
                match side.get(k) {
                    Some(s) => {
                        if !s.resolved {
                            list.push(k);
                        }
                    }
                    None => break,
                }
                k += 1;
            }
        }
        let (a, b, ua, ub) = (&self.a, &self.b, &self.ua, &self.ub);
        let insn = |s: &Side, n: u64| s.get(n).map(|s| s.step.insn);
        let agree = |p: usize, q: usize| -> bool {
            let Some(a0) = ua.get(p).and_then(|&n| insn(a, n)) else {
                // A ends here: agreeing again means B ends here too.
                return ub.get(q).is_none();
            };
            let Some(b0) = ub.get(q).and_then(|&n| insn(b, n)) else {
                return false;
            };
            if !same(&a0, &b0, o) {
                return false;
            }
            (1..RESYNC_RUN).all(|t| {
                let Some(at) = ua.get(p + t).and_then(|&n| insn(a, n)) else {
                    return true;
                };
                let lo = (q + t).saturating_sub(w);
                (lo..=q + t + w).any(|u| ub.get(u).and_then(|&n| insn(b, n)).is_some_and(|bt| same(&at, &bt, o)))
            })
        };
        for s in 1..=RESYNC_LOOKAHEAD {
            // Fewer instructions set aside first; of those, changed pairs
            // before drops or inserts.
            for (p, q) in (1..s).map(|p| (p, s - p)).chain([(s, 0), (0, s)]) {
                if agree(p, q) {
                    return Ok(match (p, q) {
                        (_, 0) => Resync::OnlyA,
                        (0, _) => Resync::OnlyB,
                        _ => Resync::Changed,
                    });
                }
            }
        }
        self.quiet_until = i + RESYNC_LOOKAHEAD as u64;
        Ok(Resync::Changed)
    }
}
