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

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use coresight_tarmac::index::TraceIndex;
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

/// What the browser shows and where it is.
pub struct Browser {
    path: PathBuf,
    index: TraceIndex,
    syms: Option<Symbols>,
    pub cur: Pos,
    pub regs: RegisterState,
    /// The records fed to `regs`: every one before this line, which starts
    /// at this offset.
    regs_line: u64,
    regs_offset: u64,
    /// The registers before each checkpoint passed so far (by its line),
    /// to start from rather than the start of the trace.
    snapshots: BTreeMap<u64, (u64, RegisterState)>,
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
            regs_line: 1,
            regs_offset: 0,
            snapshots: BTreeMap::new(),
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
        // Start from the latest register snapshot at or before the target
        // when it is nearer than where the registers stand, or when they
        // stand past the target.
        if let Some((&line, (offset, snap))) = self.snapshots.range(..=p.line).next_back()
            && (line > self.regs_line || self.regs_line > p.line + 1)
        {
            self.regs = snap.clone();
            (self.regs_line, self.regs_offset) = (line, *offset);
        } else if self.regs_line > p.line + 1 {
            self.regs.clear();
            self.regs_line = 1;
            self.regs_offset = 0;
        }
        let (mut state, cur_line) = (std::mem::take(&mut self.regs), p.line);
        let mut stop = None;
        let mut next_cp = self.index.checkpoints.partition_point(|c| c.line < self.regs_line);
        let mut snapshots = std::mem::take(&mut self.snapshots);
        let checkpoints = &self.index.checkpoints;
        let res = self.scan((self.regs_line, self.regs_offset), |rec, line, offset| {
            while next_cp < checkpoints.len() && checkpoints[next_cp].line < line {
                next_cp += 1;
            }
            if next_cp < checkpoints.len() && checkpoints[next_cp].line == line {
                snapshots.entry(line).or_insert_with(|| (offset, state.clone()));
                next_cp += 1;
            }
            if line > cur_line && matches!(rec.kind, RecordKind::Instruction(_)) {
                stop = Some((line, offset));
                return false;
            }
            state.feed(rec);
            true
        });
        self.snapshots = snapshots;
        res?;
        self.regs = state;
        match stop {
            Some(s) => (self.regs_line, self.regs_offset) = s,
            // The state holds the whole trace: moving anywhere starts over.
            None => self.regs_line = u64::MAX,
        }
        Ok(())
    }

    pub fn step_forward(&mut self) -> Result<(), String> {
        let line = self.cur.line;
        match self.find_from((line, self.cur.offset), |p| p.line > line)? {
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
            Some(p) => self.move_to(p),
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
        let by_name = self.syms.as_ref().and_then(|s| s.find_by_name(what)).map(|s| s.addr);
        let hex = u64::from_str_radix(what.trim_start_matches("0x").trim_start_matches("0X"), 16).ok();
        let Some(addr) = by_name.or(hex) else {
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
        let rows = left.height.saturating_sub(2) as u64;
        let above = rows / 2;
        let from = self.cur.line.saturating_sub(above).max(1);
        let text: Vec<Line> = self
            .lines(from, from + rows.saturating_sub(1))
            .into_iter()
            .map(|(n, t)| {
                let l = Line::from(format!("{}{n:>7} {t}", if n == self.cur.line { '>' } else { ' ' }));
                if n == self.cur.line {
                    l.style(Style::new().add_modifier(Modifier::REVERSED))
                } else {
                    l
                }
            })
            .collect();
        frame.render_widget(
            Paragraph::new(text).block(Block::new().borders(Borders::ALL).title("trace")),
            left,
        );
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
            None => "j/k step  g line (g t123: time)  r return  n next call  / address or symbol  q quit".into(),
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
        let mut term = ratatui::init();
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
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../formats/tarmac/tests/fixtures/calls/a64-fm.tarmac")
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
