//! Compares two instruction streams the way Trace Matcher does: record by
//! record, or within a window where equal records may come in a different
//! order, optionally ignoring time, starting at an address, skipping a
//! boot section and the longer trace's remainder.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};

use super::reader::TarmacError;
use super::record::{Effect, Iset, Record, RecordKind};

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

/// Trace Matcher's options.
#[derive(Clone, Copy, Debug)]
pub struct CompareOptions {
    /// Records within this many of each other may match out of order (1:
    /// strictly in order).
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
    /// Records of context to show on each side of the first difference.
    pub context: usize,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            window: 1,
            skip_time: false,
            ignore_effect: false,
            start_addr: None,
            boot_size: 0,
            skip_remainder: false,
            stop_at_first: false,
            context: 3,
        }
    }
}

/// The first difference found, with context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// Index (from 0) of the compared record where the traces part.
    pub index: u64,
    /// Records that matched before it.
    pub matched_before: u64,
    /// The differing instruction of the first trace (`None` when it ended).
    pub a: Option<Insn>,
    /// The differing instruction of the second trace (`None` when it ended).
    pub b: Option<Insn>,
    /// Matched pairs before the difference (oldest first).
    pub before: Vec<(Insn, Insn)>,
    /// Records after the difference in each trace.
    pub after_a: Vec<Insn>,
    /// Instructions of the second trace after the difference.
    pub after_b: Vec<Insn>,
}

/// What a comparison found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompareReport {
    /// Records compared equal.
    pub matched: u64,
    /// Differences (a record without a partner counts as one).
    pub differences: u64,
    /// The first difference, with context.
    pub first: Option<Divergence>,
}

impl CompareReport {
    /// The traces compared equal.
    pub fn same(&self) -> bool {
        self.differences == 0
    }

    /// A human-readable report: "same", or the first divergence with
    /// context and the number of differences.
    pub fn text(&self, name_a: &str, name_b: &str) -> String {
        let mut s = String::new();
        let Some(d) = &self.first else {
            let _ = writeln!(s, "same: {} instructions match", self.matched);
            return s;
        };
        let _ = writeln!(
            s,
            "different: first difference at instruction {} ({} matched before it)",
            d.index, d.matched_before
        );
        for (a, b) in &d.before {
            let _ = writeln!(s, "    {name_a} {a}");
            let _ = writeln!(s, "    {name_b} {b}");
        }
        let show = |x: &Option<Insn>| x.map_or("(end of trace)".to_string(), |i| i.to_string());
        let _ = writeln!(s, "  > {name_a} {}", show(&d.a));
        let _ = writeln!(s, "  > {name_b} {}", show(&d.b));
        for a in &d.after_a {
            let _ = writeln!(s, "    {name_a} {a}");
        }
        for b in &d.after_b {
            let _ = writeln!(s, "    {name_b} {b}");
        }
        let _ = writeln!(s, "{} difference(s)", self.differences);
        s
    }
}

/// A source of instructions (errors are the input's).
pub type InsnSource<'a> = &'a mut dyn FnMut() -> Result<Option<Insn>, TarmacError>;

struct Side<'a> {
    src: InsnSource<'a>,
    window: VecDeque<Insn>,
    done: bool,
    started: bool,
    skipped: usize,
}

impl Side<'_> {
    fn pull(&mut self, opts: &CompareOptions) -> Result<Option<Insn>, TarmacError> {
        loop {
            let Some(i) = (self.src)()? else { return Ok(None) };
            if !self.started {
                if opts.start_addr.is_some_and(|a| a != i.addr) {
                    continue;
                }
                self.started = true;
            }
            if self.skipped < opts.boot_size {
                self.skipped += 1;
                continue;
            }
            return Ok(Some(i));
        }
    }
    fn fill(&mut self, opts: &CompareOptions, n: usize) -> Result<(), TarmacError> {
        while !self.done && self.window.len() < n {
            match self.pull(opts)? {
                Some(i) => self.window.push_back(i),
                None => self.done = true,
            }
        }
        Ok(())
    }
}

fn same(a: &Insn, b: &Insn, o: &CompareOptions) -> bool {
    a.addr == b.addr
        && a.iset == b.iset
        && (a.encoding.is_none() || b.encoding.is_none() || a.encoding == b.encoding)
        && (o.ignore_effect || a.effect == b.effect)
        && (o.skip_time || a.time == b.time)
}

/// Compares two instruction streams.
pub fn compare(a: InsnSource, b: InsnSource, opts: &CompareOptions) -> Result<CompareReport, TarmacError> {
    let n = opts.window.max(1);
    let mut sa = Side {
        src: a,
        window: VecDeque::new(),
        done: false,
        started: false,
        skipped: 0,
    };
    let mut sb = Side {
        src: b,
        window: VecDeque::new(),
        done: false,
        started: false,
        skipped: 0,
    };
    let mut rep = CompareReport::default();
    let mut recent: VecDeque<(Insn, Insn)> = VecDeque::new();
    let mut index = 0u64;
    loop {
        sa.fill(opts, n)?;
        sb.fill(opts, n)?;
        let (Some(&x), Some(&y)) = (sa.window.front(), sb.window.front()) else {
            if sa.window.is_empty() && sb.window.is_empty() {
                break;
            }
            if opts.skip_remainder {
                break;
            }
            // One trace ended: the rest of the other differs.
            let (a, b) = (sa.window.front().copied(), sb.window.front().copied());
            let left = (sa.window.len() + sb.window.len()) as u64;
            if rep.first.is_none() {
                rep.first = Some(divergence(index, a, b, &recent, &mut sa, &mut sb, opts)?);
                if let Some(d) = &mut rep.first {
                    d.matched_before = rep.matched;
                }
            }
            rep.differences += if opts.stop_at_first {
                1
            } else {
                left + drain(&mut sa, opts)? + drain(&mut sb, opts)?
            };
            break;
        };
        let pair = if let Some(j) = sb.window.iter().position(|y| same(&x, y, opts)) {
            sa.window.pop_front();
            sb.window.remove(j).map(|y| (x, y))
        } else if let Some(j) = sa.window.iter().position(|x| same(x, &y, opts)) {
            sb.window.pop_front();
            sa.window.remove(j).map(|x| (x, y))
        } else {
            None
        };
        match pair {
            Some(p) => {
                rep.matched += 1;
                if opts.context > 0 {
                    if recent.len() == opts.context {
                        recent.pop_front();
                    }
                    recent.push_back(p);
                }
            }
            None => {
                rep.differences += 1;
                if rep.first.is_none() {
                    sa.window.pop_front();
                    sb.window.pop_front();
                    rep.first = Some(divergence(index, Some(x), Some(y), &recent, &mut sa, &mut sb, opts)?);
                    if let Some(d) = &mut rep.first {
                        d.matched_before = rep.matched;
                    }
                } else {
                    sa.window.pop_front();
                    sb.window.pop_front();
                }
                if opts.stop_at_first {
                    break;
                }
            }
        }
        index += 1;
    }
    Ok(rep)
}

fn drain(s: &mut Side, opts: &CompareOptions) -> Result<u64, TarmacError> {
    let mut n = 0;
    while s.pull(opts)?.is_some() {
        n += 1;
    }
    Ok(n)
}

fn divergence(
    index: u64,
    a: Option<Insn>,
    b: Option<Insn>,
    recent: &VecDeque<(Insn, Insn)>,
    sa: &mut Side,
    sb: &mut Side,
    opts: &CompareOptions,
) -> Result<Divergence, TarmacError> {
    sa.fill(opts, opts.context.max(opts.window))?;
    sb.fill(opts, opts.context.max(opts.window))?;
    let skip_a = usize::from(a.is_some() && sa.window.front() == a.as_ref());
    let skip_b = usize::from(b.is_some() && sb.window.front() == b.as_ref());
    Ok(Divergence {
        index,
        matched_before: 0,
        a,
        b,
        before: recent.iter().copied().collect(),
        after_a: sa.window.iter().skip(skip_a).take(opts.context).copied().collect(),
        after_b: sb.window.iter().skip(skip_b).take(opts.context).copied().collect(),
    })
}

/// Instructions of a Tarmac stream, for [`compare`].
pub fn insns_of<R: std::io::BufRead>(
    reader: &mut super::Reader<R>,
) -> impl FnMut() -> Result<Option<Insn>, TarmacError> + '_ {
    move || {
        while let Some(rec) = reader.next_record()? {
            if let Some(i) = Insn::from_record(&rec) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }
}
