//! `tarmac browse`: an interactive terminal browser of a Tarmac trace,
//! built on the trace's index (upstream's `tarmac-browser`, in part).
//!
//! The screen shows the current instruction with the lines around it, the
//! function it is in, and the registers as the trace says they stand after
//! it: the last value written of each register by the records up to the
//! next instruction. Every move reads only from the index's nearest
//! checkpoint; the registers are replayed forward from where they were
//! last computed, or from the register snapshot kept at the latest
//! checkpoint passed before the target (from the start of the trace when
//! none was passed yet).
//!
//! A memory window (`m` and an address) shows the bytes from an address
//! as the trace's reads and writes up to the next instruction leave them,
//! `--` where no record has touched a byte; it is replayed with the
//! registers. A call can be folded (`f`) into one line, from its call
//! instruction to the instruction before its caller resumes, and unfolded
//! (`u`); stepping passes over it, and a jump into it unfolds it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use coresight_tarmac::index::TraceIndex;
use coresight_tarmac::memstate::MemoryWindow;
use coresight_tarmac::regstate::RegisterState;
use coresight_tarmac::symbols::Symbols;
use coresight_tarmac::{Reader, Record, RecordKind};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};

/// An instruction's place in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u64,
    pub offset: u64,
    pub time: u64,
    pub addr: u64,
}

/// Bytes the memory window shows, 16 a row.
pub const MEMORY_BYTES: usize = 64;

/// A folded call as shown: its first and last hidden-behind line (the call
/// instruction's line is shown as the fold's row) and its activation.
type Fold = (u64, u64, usize);

/// A row of the trace pane.
enum Row {
    Line(u64),
    Fold(Fold),
}

/// What the browser shows and where it is.
pub struct Browser {
    path: PathBuf,
    index: TraceIndex,
    syms: Option<Symbols>,
    pub cur: Pos,
    pub regs: RegisterState,
    /// The memory window, replayed with the registers.
    pub mem: Option<MemoryWindow>,
    /// The records fed to `regs` and `mem`: every one before this line, which starts
    /// at this offset.
    regs_line: u64,
    regs_offset: u64,
    /// The registers before each checkpoint passed so far (by its line),
    /// to start from rather than the start of the trace.
    snapshots: BTreeMap<u64, (u64, RegisterState, Option<MemoryWindow>)>,
    /// Folded calls, by activation.
    folded: BTreeSet<usize>,
    pub message: String,
    prompt: Option<(char, String)>,
}

impl Browser {
    pub fn new(path: &Path, index: TraceIndex, syms: Option<Symbols>) -> Result<Browser, String> {
        let mut b = Browser {
            path: path.to_path_buf(),
            index,
            syms,
            cur: Pos::default(),
            regs: RegisterState::new(),
            mem: None,
            regs_line: 1,
            regs_offset: 0,
            snapshots: BTreeMap::new(),
            folded: BTreeSet::new(),
            message: String::new(),
            prompt: None,
        };
        let first = b
            .first_instruction_from(1)?
            .ok_or_else(|| format!("{}: the trace has no instructions", path.display()))?;
        b.move_to(first)?;
        Ok(b)
    }

    /// Where to start reading to reach `line`: the checkpoint at or before
    /// it, or the start of the trace.
    fn start_for_line(&self, line: u64) -> (u64, u64) {
        match self.index.checkpoint_for_line(line) {
            Some(c) if c.line <= line => (c.line, c.offset),
            _ => (1, 0),
        }
    }

    /// Reads records from `(line, offset)` on, giving each with its
    /// absolute line and offset to `f` until it returns false.
    fn scan(&self, start: (u64, u64), mut f: impl FnMut(&Record, u64, u64) -> bool) -> Result<(), String> {
        let name = self.path.display();
        let mut file = File::open(&self.path).map_err(|e| format!("{name}: {e}"))?;
        file.seek(SeekFrom::Start(start.1))
            .map_err(|e| format!("{name}: {e}"))?;
        let mut r = Reader::new(BufReader::with_capacity(1 << 16, file));
        loop {
            match r.next_record_with_offset() {
                Ok(Some((pos, rec))) => {
                    let line = start.0 - 1 + rec.line;
                    if !f(&rec, line, start.1 + pos) {
                        return Ok(());
                    }
                }
                Ok(None) => return Ok(()),
                // A bad line: skip it (the reader goes on with the next
                // one); a cut last line ends the trace.
                Err(_) => {}
            }
            if r.at_partial_line() {
                return Ok(());
            }
        }
    }

    /// The first instruction found from `start` on for which `want` holds.
    fn find_from(&self, start: (u64, u64), want: impl Fn(&Pos) -> bool) -> Result<Option<Pos>, String> {
        let mut found = None;
        self.scan(start, |rec, line, offset| {
            if let RecordKind::Instruction(i) = rec.kind {
                let p = Pos {
                    line,
                    offset,
                    time: rec.time,
                    addr: i.addr,
                };
                if want(&p) {
                    found = Some(p);
                    return false;
                }
            }
            true
        })?;
        Ok(found)
    }

    fn first_instruction_from(&self, line: u64) -> Result<Option<Pos>, String> {
        self.find_from(self.start_for_line(line), |p| p.line >= line)
    }

    /// Makes `p` the current instruction and brings the registers to it.
    pub fn move_to(&mut self, p: Pos) -> Result<(), String> {
        self.cur = p;
        self.message.clear();
        // A jump into a folded call unfolds it.
        let hidden: Vec<usize> = self
            .folded
            .iter()
            .copied()
            .filter(|&i| self.fold_range(i).is_some_and(|(s, e)| s < p.line && p.line <= e))
            .collect();
        for i in hidden {
            self.folded.remove(&i);
        }
        // Start from the latest register snapshot at or before the target
        // when it is nearer than where the registers stand, or when they
        // stand past the target.
        if let Some((&line, (offset, snap, mem))) = self.snapshots.range(..=p.line).next_back()
            && (line > self.regs_line || self.regs_line > p.line + 1)
        {
            self.regs = snap.clone();
            self.mem = mem.clone();
            (self.regs_line, self.regs_offset) = (line, *offset);
        } else if self.regs_line > p.line + 1 {
            self.regs.clear();
            if let Some(m) = &mut self.mem {
                m.clear();
            }
            self.regs_line = 1;
            self.regs_offset = 0;
        }
        let (mut state, cur_line) = (std::mem::take(&mut self.regs), p.line);
        let mut mem = self.mem.take();
        let mut stop = None;
        let mut next_cp = self.index.checkpoints.partition_point(|c| c.line < self.regs_line);
        let mut snapshots = std::mem::take(&mut self.snapshots);
        let checkpoints = &self.index.checkpoints;
        let res = self.scan((self.regs_line, self.regs_offset), |rec, line, offset| {
            while next_cp < checkpoints.len() && checkpoints[next_cp].line < line {
                next_cp += 1;
            }
            if next_cp < checkpoints.len() && checkpoints[next_cp].line == line {
                snapshots
                    .entry(line)
                    .or_insert_with(|| (offset, state.clone(), mem.clone()));
                next_cp += 1;
            }
            if line > cur_line && matches!(rec.kind, RecordKind::Instruction(_)) {
                stop = Some((line, offset));
                return false;
            }
            state.feed(rec);
            if let Some(m) = &mut mem {
                m.feed(rec);
            }
            true
        });
        self.snapshots = snapshots;
        self.regs = state;
        self.mem = mem;
        res?;
        match stop {
            Some(s) => (self.regs_line, self.regs_offset) = s,
            // The state holds the whole trace: moving anywhere starts over.
            None => self.regs_line = u64::MAX,
        }
        Ok(())
    }

    pub fn step_forward(&mut self) -> Result<(), String> {
        // Over a folded call: on from its last hidden line.
        let start = match self.fold_at(self.cur.line) {
            Some((_, e, _)) => self.start_for_line(e + 1),
            None => (self.cur.line, self.cur.offset),
        };
        let line = self.fold_at(self.cur.line).map_or(self.cur.line, |f| f.1);
        match self.find_from(start, |p| p.line > line)? {
            Some(p) => self.move_to(p),
            None => {
                self.message = "end of trace".into();
                Ok(())
            }
        }
    }

    pub fn step_back(&mut self) -> Result<(), String> {
        let line = self.cur.line;
        let mut last = None;
        self.scan(self.start_for_line(line.saturating_sub(1).max(1)), |rec, l, offset| {
            if l >= line {
                return false;
            }
            if let RecordKind::Instruction(i) = rec.kind {
                last = Some(Pos {
                    line: l,
                    offset,
                    time: rec.time,
                    addr: i.addr,
                });
            }
            true
        })?;
        match last {
            // Back into a folded call: to its row, the call instruction.
            Some(p) => match self.fold_at(p.line) {
                Some((s, _, _)) if s < p.line => self.goto_line(s),
                _ => self.move_to(p),
            },
            None => {
                self.message = "start of trace".into();
                Ok(())
            }
        }
    }

    pub fn goto_line(&mut self, line: u64) -> Result<(), String> {
        match self.first_instruction_from(line)? {
            Some(p) => self.move_to(p),
            None => {
                self.message = format!("no instruction at or after line {line}");
                Ok(())
            }
        }
    }

    pub fn goto_time(&mut self, time: u64) -> Result<(), String> {
        let start = match self.index.checkpoint_for_time(time) {
            Some(c) if c.time < time => (c.line, c.offset),
            _ => (1, 0),
        };
        match self.find_from(start, |p| p.time >= time)? {
            Some(p) => self.move_to(p),
            None => {
                self.message = format!("no instruction at or after time {time}");
                Ok(())
            }
        }
    }

    /// To the return instruction of the call the current instruction is in.
    pub fn goto_return(&mut self) -> Result<(), String> {
        match self.index.activation_at(self.cur.line) {
            Some(i) if i > 0 => {
                let exit = self.index.calls.acts[i].exit.line;
                self.goto_line(exit)
            }
            _ => {
                self.message = "not in a call".into();
                Ok(())
            }
        }
    }

    /// To the next call of the function the current instruction is in.
    pub fn goto_next_call(&mut self) -> Result<(), String> {
        let Some(i) = self.index.activation_at(self.cur.line) else {
            return Ok(());
        };
        let acts = &self.index.calls.acts;
        let pc = acts[i].entry.pc;
        match acts.iter().find(|a| a.entry.line > self.cur.line && a.entry.pc == pc) {
            Some(a) => {
                let line = a.entry.line;
                self.goto_line(line)
            }
            None => {
                self.message = format!("no later call of {}", self.function_name(pc));
                Ok(())
            }
        }
    }

    /// To the next execution of an address (hex) or of a symbol's address.
    pub fn search(&mut self, what: &str) -> Result<(), String> {
        let what = what.trim();
        let Some(addr) = self.address_of(what) else {
            self.message = format!("{what}: neither a symbol nor a hex address");
            return Ok(());
        };
        let (line, addr) = (self.cur.line, addr & !1);
        match self.find_from((line, self.cur.offset), |p| p.line > line && p.addr & !1 == addr)? {
            Some(p) => self.move_to(p),
            None => {
                self.message = format!("{what} ({addr:#x}) not executed after line {line}");
                Ok(())
            }
        }
    }

    /// A symbol's address, or a hex address.
    fn address_of(&self, what: &str) -> Option<u64> {
        let by_name = self.syms.as_ref().and_then(|s| s.find_by_name(what)).map(|s| s.addr);
        by_name.or_else(|| u64::from_str_radix(what.trim_start_matches("0x").trim_start_matches("0X"), 16).ok())
    }

    /// Shows memory from an address (hex) or a symbol's address: the
    /// window is replayed from the start of the trace to the current
    /// instruction, and with the registers from then on.
    pub fn show_memory(&mut self, what: &str) -> Result<(), String> {
        let what = what.trim();
        let Some(addr) = self.address_of(what) else {
            self.message = format!("{what}: neither a symbol nor a hex address");
            return Ok(());
        };
        self.mem = Some(MemoryWindow::new(addr, MEMORY_BYTES));
        self.snapshots.clear();
        self.regs.clear();
        (self.regs_line, self.regs_offset) = (1, 0);
        let p = self.cur;
        self.move_to(p)
    }

    /// The lines folding activation `i` hides behind one row: from its
    /// call instruction to the line before its caller resumes (to its
    /// return when the trace ends in it). None for the root.
    fn fold_range(&self, i: usize) -> Option<(u64, u64)> {
        let a = self.index.calls.acts.get(i)?;
        if i == 0 || a.call.line == 0 {
            return None;
        }
        let end = if a.resume.line > a.exit.line {
            a.resume.line - 1
        } else {
            a.exit.line
        };
        Some((a.call.line, end.max(a.call.line)))
    }

    /// The folds shown, in line order: the outermost of nested ones.
    fn folds(&self) -> Vec<Fold> {
        let mut v: Vec<Fold> = self
            .folded
            .iter()
            .filter_map(|&i| self.fold_range(i).map(|(s, e)| (s, e, i)))
            .collect();
        v.sort();
        let mut out: Vec<Fold> = Vec::with_capacity(v.len());
        for f in v {
            if out.last().is_none_or(|l| f.0 > l.1) {
                out.push(f);
            }
        }
        out
    }

    /// The fold shown whose lines hold `line`.
    fn fold_at(&self, line: u64) -> Option<Fold> {
        self.folds().into_iter().find(|f| f.0 <= line && line <= f.1)
    }

    /// Folds the call the current instruction is in (on a folded call's
    /// row, the call around it) and moves to its call instruction.
    pub fn fold(&mut self) -> Result<(), String> {
        let line = self.fold_at(self.cur.line).map_or(self.cur.line, |f| f.0);
        match self.index.activation_at(line) {
            Some(i) if self.fold_range(i).is_some() => {
                self.folded.insert(i);
                let (s, _) = self.fold_range(i).unwrap_or_default();
                self.goto_line(s)
            }
            _ => {
                self.message = "not in a call".into();
                Ok(())
            }
        }
    }

    /// Unfolds the folded call on the current row.
    pub fn unfold(&mut self) {
        match self.fold_at(self.cur.line) {
            Some((_, _, i)) => {
                self.folded.remove(&i);
            }
            None => self.message = "no folded call here".into(),
        }
    }

    fn function_name(&self, pc: u64) -> String {
        let mut s = String::new();
        if let Some(syms) = &self.syms
            && syms.write_function_name(&mut s, pc, true).unwrap_or(false)
        {
            return s;
        }
        format!("{pc:#x}")
    }

    /// The trace's lines `from..=to`, as written.
    fn lines(&self, from: u64, to: u64) -> Vec<(u64, String)> {
        let (mut line, offset) = self.start_for_line(from);
        let mut out = Vec::new();
        let Ok(mut f) = File::open(&self.path) else { return out };
        if f.seek(SeekFrom::Start(offset)).is_err() {
            return out;
        }
        let mut r = BufReader::new(f);
        let mut buf = Vec::new();
        while line <= to {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line >= from {
                let text = String::from_utf8_lossy(&buf);
                out.push((line, text.trim_end().chars().take(400).collect()));
            }
            line += 1;
        }
        out
    }

    /// The rows of the trace pane, `height` of them at most, the current
    /// instruction's in the middle: the trace's lines, a folded call as
    /// one row.
    fn trace_rows(&self, height: usize) -> Vec<Line<'static>> {
        let folds = self.folds();
        let fold_of = |line: u64| {
            let i = folds.partition_point(|f| f.0 <= line);
            i.checked_sub(1).map(|i| folds[i]).filter(|f| line <= f.1)
        };
        let row_at = |line: u64| match fold_of(line) {
            Some(f) => (Row::Fold(f), f.0, f.1),
            None => (Row::Line(line), line, line),
        };
        let (cur, cur_start, cur_end) = row_at(self.cur.line);
        let mut up = Vec::new();
        let mut l = cur_start;
        while up.len() < height / 2 && l > 1 {
            let (row, start, _) = row_at(l - 1);
            up.push(row);
            l = start;
        }
        let mut rows: Vec<Row> = up.into_iter().rev().collect();
        let cur_row = rows.len();
        rows.push(cur);
        let mut l = cur_end;
        while rows.len() < height && l < self.index.lines {
            let (row, _, end) = row_at(l + 1);
            rows.push(row);
            l = end;
        }
        // The text of each run of lines, read from the trace.
        let mut text: BTreeMap<u64, String> = BTreeMap::new();
        let mut i = 0;
        while i < rows.len() {
            let Row::Line(first) = rows[i] else {
                i += 1;
                continue;
            };
            let mut last = first;
            while let Some(Row::Line(n)) = rows.get(i + 1) {
                last = *n;
                i += 1;
            }
            text.extend(self.lines(first, last));
            i += 1;
        }
        rows.iter()
            .enumerate()
            .map(|(i, row)| {
                let mark = if i == cur_row { '>' } else { ' ' };
                let l = match *row {
                    Row::Line(n) => Line::from(format!("{mark}{n:>7} {}", text.get(&n).map_or("", |t| t.as_str()))),
                    Row::Fold((s, e, act)) => {
                        let pc = self.index.calls.acts[act].entry.pc;
                        Line::from(format!(
                            "{mark}{s:>7} + call of {} folded: lines {s}-{e}",
                            self.function_name(pc)
                        ))
                    }
                };
                if i == cur_row {
                    l.style(Style::new().add_modifier(Modifier::REVERSED))
                } else {
                    l
                }
            })
            .collect()
    }

    fn draw(&self, frame: &mut ratatui::Frame) {
        let [top, main, bottom] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(1)]).areas(frame.area());
        let func = match self.index.activation_at(self.cur.line) {
            Some(i) => self.function_name(self.index.calls.acts[i].entry.pc),
            None => String::new(),
        };
        frame.render_widget(
            Paragraph::new(format!(
                "line {} time {} pc {:#x} in {func}",
                self.cur.line, self.cur.time, self.cur.addr
            ))
            .style(Style::new().add_modifier(Modifier::REVERSED)),
            top,
        );
        let [left, right] = Layout::horizontal([Constraint::Min(20), Constraint::Length(30)]).areas(main);
        let mem_rows = self.mem.as_ref().map_or(0, |m| m.bytes().len().div_ceil(16) as u16);
        let [left, mem_area] = Layout::vertical([
            Constraint::Min(3),
            Constraint::Length(if mem_rows > 0 { mem_rows + 2 } else { 0 }),
        ])
        .areas(left);
        let text = self.trace_rows(left.height.saturating_sub(2) as usize);
        frame.render_widget(
            Paragraph::new(text).block(Block::new().borders(Borders::ALL).title("trace")),
            left,
        );
        if let Some(m) = &self.mem {
            let rows: Vec<Line> = m
                .bytes()
                .chunks(16)
                .enumerate()
                .map(|(r, chunk)| {
                    let mut s = format!("{:016x} ", m.addr().wrapping_add(16 * r as u64));
                    for b in chunk {
                        match b {
                            Some(b) => s.push_str(&format!(" {b:02x}")),
                            None => s.push_str(" --"),
                        }
                    }
                    Line::from(s)
                })
                .collect();
            frame.render_widget(
                Paragraph::new(rows).block(Block::new().borders(Borders::ALL).title("memory")),
                mem_area,
            );
        }
        let regs: Vec<Line> = self
            .regs
            .iter()
            .map(|(n, v)| Line::from(format!("{n:<8}{}", v.hex())))
            .collect();
        frame.render_widget(
            Paragraph::new(regs).block(Block::new().borders(Borders::ALL).title("registers")),
            right,
        );
        let status = match &self.prompt {
            Some((c, s)) => format!("{c}{s}"),
            None if !self.message.is_empty() => self.message.clone(),
            None => "j/k step  g line (g t123: time)  r return  n next call  / address or symbol  m memory  f/u fold  q quit"
                .into(),
        };
        frame.render_widget(Paragraph::new(status), bottom);
    }

    /// Acts on one key; false to quit.
    fn key(&mut self, code: KeyCode) -> Result<bool, String> {
        if let Some((kind, mut text)) = self.prompt.take() {
            match code {
                KeyCode::Enter => {
                    self.message.clear();
                    match kind {
                        'g' => self.go(&text)?,
                        'm' => self.show_memory(&text)?,
                        _ => self.search(&text)?,
                    }
                }
                KeyCode::Esc => {}
                KeyCode::Backspace => {
                    text.pop();
                    self.prompt = Some((kind, text));
                }
                KeyCode::Char(c) => {
                    text.push(c);
                    self.prompt = Some((kind, text));
                }
                _ => self.prompt = Some((kind, text)),
            }
            return Ok(true);
        }
        self.message.clear();
        match code {
            KeyCode::Char('q') => return Ok(false),
            KeyCode::Char('j') | KeyCode::Down => self.step_forward()?,
            KeyCode::Char('k') | KeyCode::Up => self.step_back()?,
            KeyCode::Char('r') => self.goto_return()?,
            KeyCode::Char('n') => self.goto_next_call()?,
            KeyCode::Char('g') => self.prompt = Some(('g', String::new())),
            KeyCode::Char('/') => self.prompt = Some(('/', String::new())),
            KeyCode::Char('m') => self.prompt = Some(('m', String::new())),
            KeyCode::Char('f') => self.fold()?,
            KeyCode::Char('u') => self.unfold(),
            _ => {}
        }
        Ok(true)
    }

    /// `g` then a line number, or `t` and a time.
    fn go(&mut self, text: &str) -> Result<(), String> {
        let t = text.trim();
        let (time, num) = match t.strip_prefix(['t', '@']) {
            Some(rest) => (true, rest.trim()),
            None => (false, t),
        };
        match num.parse::<u64>() {
            Ok(n) if time => self.goto_time(n),
            Ok(n) => self.goto_line(n),
            Err(_) => {
                self.message = format!("{t}: not a line number (or t and a time)");
                Ok(())
            }
        }
    }

    /// Runs the browser in the terminal until `q`.
    pub fn run(mut self) -> Result<(), String> {
        use std::io::IsTerminal;
        // Without a terminal there are no keys to read nor a screen to
        // draw on: say so rather than fail inside the terminal library.
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return Err(
                "browse is interactive: it needs a terminal on standard input and output (`tarmac dump` prints the records)"
                    .into(),
            );
        }
        let mut term = ratatui::try_init().map_err(|e| format!("cannot set the terminal up: {e}"))?;
        let res = (|| -> Result<(), String> {
            loop {
                term.draw(|f| self.draw(f)).map_err(|e| format!("terminal: {e}"))?;
                if let Event::Key(k) = event::read().map_err(|e| format!("terminal: {e}"))?
                    && k.kind != KeyEventKind::Release
                {
                    // Raw mode turns Ctrl-C into a key: quit on it too.
                    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || !self.key(k.code)? {
                        return Ok(());
                    }
                }
            }
        })();
        ratatui::restore();
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coresight_tarmac::index::{Fingerprint, IndexBuilder};

    fn fixture() -> PathBuf {
        fixture_named("a64-fm.tarmac")
    }

    fn fixture_named(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../formats/tarmac/tests/fixtures/calls")
            .join(name)
    }

    fn index_of(text: &str, step: u32) -> TraceIndex {
        let mut r = Reader::new(text.as_bytes());
        let mut b = IndexBuilder::new(step);
        while let Some((pos, rec)) = r.next_record_with_offset().unwrap() {
            b.feed_at(&rec, pos);
        }
        b.finish(Fingerprint::default())
    }

    /// The memory window after the instruction at `line`, replayed from
    /// the start of the trace.
    fn memory_reference(text: &str, line: u64, addr: u64) -> Vec<Option<u8>> {
        let mut r = Reader::new(text.as_bytes());
        let mut m = MemoryWindow::new(addr, MEMORY_BYTES);
        while let Some(rec) = r.next_record().unwrap() {
            if rec.line > line && matches!(rec.kind, RecordKind::Instruction(_)) {
                break;
            }
            m.feed(&rec);
        }
        m.bytes().to_vec()
    }

    #[test]
    fn memory_at_every_move_equals_a_replay_from_the_start() {
        let path = fixture_named("a64-gem5.tarmac");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut br = Browser::new(&path, index_of(&text, 5), None).unwrap();
        br.goto_line(100).unwrap();
        br.show_memory("55008007f0").unwrap();
        let check = |br: &Browser| {
            let line = br.cur.line;
            assert_eq!(
                br.mem.as_ref().unwrap().bytes(),
                &memory_reference(&text, line, 0x55008007f0)[..],
                "at line {line}"
            );
        };
        check(&br);
        // Line 50 (time 10) writes x29 and x30 there.
        br.goto_line(50).unwrap();
        check(&br);
        let m = br.mem.as_ref().unwrap().bytes();
        assert_eq!(m[..8], [0x10, 0x08, 0x80, 0x00, 0x55, 0, 0, 0].map(Some));
        assert_eq!(m[8..16], [0x98, 0x01, 0x40, 0, 0, 0, 0, 0].map(Some));
        br.step_back().unwrap();
        check(&br);
        assert_eq!(br.mem.as_ref().unwrap().bytes()[0], None);
        for line in [300, 10, 367, 120, 119] {
            br.goto_line(line).unwrap();
            check(&br);
        }
        while br.message.is_empty() {
            br.step_back().unwrap();
            check(&br);
        }
        br.show_memory("nothing").unwrap();
        assert_eq!(br.message, "nothing: neither a symbol nor a hex address");
    }

    #[test]
    fn a_folded_call_is_one_row_that_steps_pass_over() {
        let path = fixture_named("a64-gem5.tarmac");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut br = Browser::new(&path, index_of(&text, 7), None).unwrap();
        // fib entered at line 119 (called at 117), its caller resumes at 139.
        br.goto_line(125).unwrap();
        br.fold().unwrap();
        assert_eq!(br.cur.line, 117);
        let rows: Vec<String> = br.trace_rows(40).iter().map(|l| l.to_string()).collect();
        assert!(
            rows.iter()
                .any(|r| r == ">    117 + call of 0x400130 folded: lines 117-138"),
            "{rows:#?}"
        );
        for hidden in 118..=138 {
            assert!(
                !rows.iter().any(|r| r[1..8].trim() == hidden.to_string()),
                "{hidden}: {rows:#?}"
            );
        }
        assert!(rows.iter().any(|r| r.starts_with("     139 ")), "{rows:#?}");
        br.step_forward().unwrap();
        assert_eq!(br.cur.line, 139);
        br.step_back().unwrap();
        assert_eq!(br.cur.line, 117);
        // Folding again folds the call around it; unfolding shows the inner
        // fold again.
        br.fold().unwrap();
        assert_eq!(br.cur.line, 63);
        assert_eq!(br.fold_at(117), Some((63, 193, 2)));
        br.unfold();
        assert_eq!(br.fold_at(117).map(|f| f.0), Some(117));
        // A jump inside unfolds.
        br.goto_line(122).unwrap();
        assert_eq!((br.cur.line, br.fold_at(122)), (122, None));
        br.goto_line(40).unwrap();
        br.fold().unwrap();
        assert_eq!(br.message, "not in a call");
        br.unfold();
        assert_eq!(br.message, "no folded call here");
    }

    /// The registers after the instruction at `line`, replayed from the
    /// start of the trace.
    fn reference(text: &str, line: u64) -> Vec<(String, String)> {
        let mut r = Reader::new(text.as_bytes());
        let mut s = RegisterState::new();
        while let Some(rec) = r.next_record().unwrap() {
            if rec.line > line && matches!(rec.kind, RecordKind::Instruction(_)) {
                break;
            }
            s.feed(&rec);
        }
        s.iter().map(|(n, v)| (n.to_string(), v.hex())).collect()
    }

    #[test]
    fn registers_at_every_move_equal_a_replay_from_the_start() {
        let path = fixture();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut r = Reader::new(text.as_bytes());
        // A checkpoint every 5 instructions, so that moves start from
        // register snapshots.
        let mut b = IndexBuilder::new(5);
        while let Some((pos, rec)) = r.next_record_with_offset().unwrap() {
            b.feed_at(&rec, pos);
        }
        let ix = b.finish(Fingerprint::default());
        let mut br = Browser::new(&path, ix, None).unwrap();
        let check = |br: &Browser, line: u64| {
            assert_eq!(br.cur.line, line);
            let shown: Vec<(String, String)> = br.regs.iter().map(|(n, v)| (n.to_string(), v.hex())).collect();
            assert_eq!(shown, reference(&text, line), "at line {line}");
        };
        check(&br, 33);
        // Line 200 is a register line: to the instruction after it.
        br.goto_line(200).unwrap();
        check(&br, 201);
        br.goto_line(199).unwrap();
        check(&br, 199);
        br.step_back().unwrap();
        check(&br, 198);
        br.goto_line(40).unwrap();
        check(&br, 40);
        br.goto_time(100).unwrap();
        let t100 = br.cur.line;
        assert!(text.lines().nth(t100 as usize - 1).unwrap().starts_with("100 clk IT"));
        check(&br, t100);
        br.step_forward().unwrap();
        assert!(br.cur.line > t100);
        let l = br.cur.line;
        check(&br, l);
        br.search("400130").unwrap();
        assert_eq!(br.cur.addr, 0x400130);
        let l = br.cur.line;
        check(&br, l);
        br.goto_line(1_000_000).unwrap();
        assert_eq!(br.message, "no instruction at or after line 1000000");
        check(&br, l);
        // Every instruction, stepping back from the last one.
        br.goto_line(326).unwrap();
        check(&br, 326);
        while br.message.is_empty() {
            let l = br.cur.line;
            check(&br, l);
            br.step_back().unwrap();
        }
        assert_eq!((br.cur.line, br.message.as_str()), (33, "start of trace"));
    }
}
