//! `perf script`-style lines from decoded trace: the instruction and branch samples that
//! perf's cs_etm support synthesises (`--itrace=i<N>` and `--itrace=b`), printed with the
//! layout of `perf script -F …`.
//!
//! The samples are made as perf makes them from the decoder's ranges:
//! - an instruction sample every N instructions: the instructions of each range are added to
//!   a per-CPU count, and each time it reaches N a sample is made at the instruction that
//!   reached it (perf reports the address of that instruction);
//! - a branch sample for each taken branch (the range ended with a taken branch, or with an
//!   exception), from the last instruction of that range to the first of the next; and at a
//!   gap in the trace (trace on, no sync, end of trace) one from the last instruction to 0,
//!   then one from 0 to the first instruction after the gap.
//!
//! Each line (perf 6.1's layout): `comm` (`%16s`), `tid` (`%5d`, or `pid/tid` as `%5d/%-5d`), `[cpu]` (`[%03d]`),
//! `time` (`secs.usecs:` in `%12s`), `period` (`%10u`), the event name, then
//! `ip sym+off (dso)` and for branches `=> addr sym+off (dso)`, addresses as `%16x`; a symbol
//! that cannot be found is `[unknown]`, as perf prints it.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::str::FromStr;

use coresight_decode::arch::{InstrType, Isa};
use coresight_decode::element::{ElemType, TraceElement};

use crate::decode::{ElementInfo, Event};
use crate::memory::Model;
use crate::record::TimeConv;

/// perf's default instruction sample period (`PERF_ITRACE_DEFAULT_PERIOD`).
pub const DEFAULT_PERIOD: u64 = 100_000;

/// What samples to make: perf's `--itrace` letters `i` and `b` (others are accepted and have
/// no effect on ETM trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Itrace {
    /// Instruction samples, with their period in instructions.
    pub instructions: Option<u64>,
    /// Branch samples.
    pub branches: bool,
}

impl Default for Itrace {
    /// perf's default for `perf script` on an AUX trace: `ib` with the default period.
    fn default() -> Self {
        Itrace {
            instructions: Some(DEFAULT_PERIOD),
            branches: true,
        }
    }
}

impl FromStr for Itrace {
    type Err = String;

    /// Parses perf's spelling: `i100`, `i1000i`, `b`, `ib`, `i10ib`...; a period unit of
    /// `i` means instructions (time units are taken as instruction counts, as perf's cs_etm
    /// does).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut it = Itrace {
            instructions: None,
            branches: false,
        };
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'i' => {
                    i += 1;
                    let st = i;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                    let period = if st == i {
                        DEFAULT_PERIOD
                    } else {
                        s[st..i]
                            .parse::<u64>()
                            .map_err(|e| format!("bad period in --itrace={s}: {e}"))?
                    };
                    if period == 0 {
                        return Err(format!("--itrace={s}: the period must be at least 1"));
                    }
                    // A unit after the number: instructions, ticks or time.
                    for unit in ["ms", "us", "ns", "i", "t"] {
                        if st != i && s[i..].starts_with(unit) {
                            i += unit.len();
                            break;
                        }
                    }
                    it.instructions = Some(period);
                }
                b'b' => {
                    it.branches = true;
                    i += 1;
                }
                // Accepted, and nothing to do with ETM instruction trace.
                b'c' | b'r' | b'x' | b'w' | b'p' | b'e' | b'd' | b'f' | b'm' | b't' | b'a' | b'g' | b'l' | b's'
                | b'q' | b'o' | b'A' | b'Z' | b'I' | b'L' | b'M' | b'T' | b'E' => {
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                c => return Err(format!("unknown --itrace option '{}' in {s}", c as char)),
            }
        }
        Ok(it)
    }
}

/// The `-F` fields this writer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    /// Thread name.
    pub comm: bool,
    /// Process id.
    pub pid: bool,
    /// Thread id.
    pub tid: bool,
    /// CPU.
    pub cpu: bool,
    /// Time.
    pub time: bool,
    /// Sample period.
    pub period: bool,
    /// Event name.
    pub event: bool,
    /// Address.
    pub ip: bool,
    /// Symbol.
    pub sym: bool,
    /// Offset in the symbol.
    pub symoff: bool,
    /// Binary.
    pub dso: bool,
    /// Branch target.
    pub addr: bool,
}

impl Default for Fields {
    /// perf's defaults for the hardware events cs_etm synthesises.
    fn default() -> Self {
        Fields {
            comm: true,
            pid: false,
            tid: true,
            cpu: true,
            time: true,
            period: true,
            event: true,
            ip: true,
            sym: true,
            symoff: true,
            dso: true,
            addr: true,
        }
    }
}

impl FromStr for Fields {
    type Err = String;

    /// perf's `-F` spelling: `comm,tid,ip,sym` replaces the defaults; `+field` and `-field`
    /// change them. `event` may be written `evname`.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.split_once(':').map_or(s, |(_, f)| f);
        let modify = s.starts_with('+') || s.starts_with('-');
        let mut f = if modify {
            Fields::default()
        } else {
            Fields {
                comm: false,
                pid: false,
                tid: false,
                cpu: false,
                time: false,
                period: false,
                event: false,
                ip: false,
                sym: false,
                symoff: false,
                dso: false,
                addr: false,
            }
        };
        let mut on = true;
        for tok in s.split(',').filter(|t| !t.is_empty()) {
            let name = if let Some(n) = tok.strip_prefix('+') {
                on = true;
                n
            } else if let Some(n) = tok.strip_prefix('-') {
                on = false;
                n
            } else {
                tok
            };
            let slot = match name {
                "comm" => &mut f.comm,
                "pid" => &mut f.pid,
                "tid" => &mut f.tid,
                "cpu" => &mut f.cpu,
                "time" => &mut f.time,
                "period" => &mut f.period,
                "event" | "evname" => &mut f.event,
                "ip" => &mut f.ip,
                "sym" => &mut f.sym,
                "symoff" => &mut f.symoff,
                "dso" => &mut f.dso,
                "addr" => &mut f.addr,
                other => {
                    return Err(format!(
                        "-F field '{other}' is not supported (known: comm, pid, tid, cpu, time, period, event, ip, sym, symoff, dso, addr)"
                    ));
                }
            };
            *slot = on;
        }
        Ok(f)
    }
}

/// The last packet of a stream, as perf keeps it to make branch samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    Empty,
    Discontinuity,
    Range {
        /// Address of the last instruction.
        last: u64,
        taken: bool,
        pid: i32,
        tid: i32,
    },
}

#[derive(Debug, Clone, Copy)]
struct StreamState {
    prev: Prev,
    period_instructions: u64,
    timestamp: Option<u64>,
}

/// Writes perf script lines for the events of a decode.
pub struct ScriptWriter<'m, W: Write> {
    model: &'m Model,
    out: W,
    itrace: Itrace,
    fields: Fields,
    time_conv: Option<TimeConv>,
    states: Vec<StreamState>,
    position: u64,
    line: String,
    instructions_name: String,
    branches_name: String,
    name_width: usize,
    /// Lines written.
    pub lines: u64,
}

impl<'m, W: Write> ScriptWriter<'m, W> {
    /// A writer of `streams` streams' samples to `out`; `modifier` is the event modifier of the
    /// recording (`u` for `cs_etm//u`, empty for none) and `event_names` the recorded events'
    /// names (they set the width of the event column, as in perf).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: &'m Model,
        streams: usize,
        out: W,
        itrace: Itrace,
        fields: Fields,
        modifier: &str,
        event_names: &[String],
        time_conv: Option<TimeConv>,
    ) -> Self {
        let suffix = if modifier.is_empty() {
            String::new()
        } else {
            format!(":{modifier}")
        };
        let instructions_name = format!("instructions{suffix}");
        let branches_name = format!("branches{suffix}");
        let mut name_width = event_names.iter().map(String::len).max().unwrap_or(0);
        if itrace.instructions.is_some() {
            name_width = name_width.max(instructions_name.len());
        }
        if itrace.branches {
            name_width = name_width.max(branches_name.len());
        }
        ScriptWriter {
            model,
            out,
            itrace,
            fields,
            time_conv,
            states: vec![
                StreamState {
                    prev: Prev::Empty,
                    period_instructions: 0,
                    timestamp: None,
                };
                streams
            ],
            position: 0,
            line: String::with_capacity(256),
            instructions_name,
            branches_name,
            name_width,
            lines: 0,
        }
    }

    /// The output, back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Takes one event of the decode.
    pub fn event(&mut self, ev: &Event<'_, '_>) -> io::Result<()> {
        match ev {
            Event::BufferStart { aux, .. } => {
                self.position = aux.record_offset;
                Ok(())
            }
            Event::Element(info, e) => self.element(info, e),
            Event::BufferEnd { .. } => Ok(()),
        }
    }

    fn element(&mut self, info: &ElementInfo, e: &TraceElement) -> io::Result<()> {
        let s = info.stream;
        let Some(st) = self.states.get(s).copied() else {
            return Ok(());
        };
        match e.elem_type {
            ElemType::Timestamp => {
                self.states[s].timestamp = Some(e.timestamp);
            }
            ElemType::NoSync | ElemType::TraceOn | ElemType::EoTrace => {
                // A gap: the last range's branch leads nowhere known.
                if let Prev::Range { last, pid, tid, .. } = st.prev
                    && self.itrace.branches
                {
                    self.branch_sample(info, pid, tid, last, 0)?;
                }
                // The next range then gets a branch sample from 0 (perf's discontinuity
                // packet takes the previous packet's place, even at the start).
                self.states[s].prev = Prev::Discontinuity;
            }
            ElemType::Exception | ElemType::ExceptionRet => {
                // The range before an exception ends in a (taken) change of flow.
                if let Prev::Range { taken, .. } = &mut self.states[s].prev {
                    *taken = true;
                }
            }
            ElemType::InstrRange => self.range(info, e, st)?,
            _ => {}
        }
        Ok(())
    }

    fn range(&mut self, info: &ElementInfo, e: &TraceElement, st: StreamState) -> io::Result<()> {
        let s = info.stream;
        let count = u64::from(e.num_instr_range);
        if let Some(period) = self.itrace.instructions {
            let before = st.period_instructions;
            let mut total = before.saturating_add(count);
            if total >= period {
                // The first sample is `period - before` instructions into this range.
                let mut offset = period - before;
                while total >= period {
                    let addr = self.instr_addr(info, e, offset - 1);
                    self.instruction_sample(info, addr, period)?;
                    offset += period;
                    total -= period;
                }
            }
            self.states[s].period_instructions = total;
        }
        if self.itrace.branches {
            let from = match st.prev {
                Prev::Discontinuity => Some(0),
                Prev::Range { last, taken: true, .. } => Some(last),
                _ => None,
            };
            if let Some(from) = from {
                self.branch_sample(info, info.pid, info.tid, from, e.st_addr)?;
            }
        }
        let taken = matches!(e.last_i_type, InstrType::Branch | InstrType::BranchIndirect) && e.last_instr_exec;
        self.states[s].prev = Prev::Range {
            last: e.en_addr.wrapping_sub(u64::from(e.last_instr_sz)),
            taken,
            pid: info.pid,
            tid: info.tid,
        };
        Ok(())
    }

    /// The address of instruction `n` (from 0) of range `e`: 4 bytes each but in T32, whose
    /// sizes are read from the code.
    fn instr_addr(&self, info: &ElementInfo, e: &TraceElement, n: u64) -> u64 {
        if e.isa != Isa::Thumb2 {
            return e.st_addr.wrapping_add(n.wrapping_mul(4));
        }
        let mut a = e.st_addr;
        let map = self.model.find_map(info.pid, a, self.position);
        for _ in 0..n {
            let mut hw = [0u8; 2];
            let got = map
                .and_then(|m| {
                    let m = &self.model.maps[m];
                    let img = self.model.binary(m.binary)?.loaded()?;
                    Some(img.read_at(m.file_offset(a), &mut hw))
                })
                .unwrap_or(0);
            let wide = got == 2 && coresight_decode::instr::is_wide_thumb(u16::from_le_bytes(hw));
            a = a.wrapping_add(if wide { 4 } else { 2 });
        }
        a
    }

    fn time_of(&self, s: usize) -> u64 {
        let Some(ts) = self.states.get(s).and_then(|x| x.timestamp) else {
            return 0;
        };
        match &self.time_conv {
            // perf's tsc_to_perf_time.
            Some(tc) if tc.time_mult != 0 && tc.time_shift < 64 => {
                let quot = ts >> tc.time_shift;
                let rem = ts & ((1u64 << tc.time_shift) - 1);
                tc.time_zero
                    .wrapping_add(quot.wrapping_mul(tc.time_mult))
                    .wrapping_add(rem.wrapping_mul(tc.time_mult) >> tc.time_shift)
            }
            _ => ts,
        }
    }

    fn start(&mut self, info: &ElementInfo, pid: i32, tid: i32, period: u64, name_is_branch: bool) {
        let f = self.fields;
        let t = self.time_of(info.stream);
        let l = &mut self.line;
        l.clear();
        if f.comm {
            // perf names a thread it has no COMM for ":<tid>".
            match self.model.comm(tid) {
                Some(c) => {
                    let _ = write!(l, "{c:>16} ");
                }
                None => {
                    let c = format!(":{tid}");
                    let _ = write!(l, "{c:>16} ");
                }
            }
        }
        if f.pid && f.tid {
            let _ = write!(l, "{pid:>5}/{tid:<5} ");
        } else if f.pid {
            let _ = write!(l, "{pid:>5} ");
        } else if f.tid {
            let _ = write!(l, "{tid:>5} ");
        }
        if f.cpu {
            let _ = write!(l, "[{:03}] ", info.cpu);
        }
        if f.time {
            let secs = t / 1_000_000_000;
            let usecs = (t % 1_000_000_000) / 1000;
            let ts = format!("{secs}.{usecs:06}");
            let _ = write!(l, "{ts:>12}: ");
        }
        if f.period {
            let _ = write!(l, "{period:>10} ");
        }
        if f.event {
            let name = if name_is_branch {
                &self.branches_name
            } else {
                &self.instructions_name
            };
            let _ = write!(l, "{name:>w$}: ", w = self.name_width);
        }
    }

    /// ` sym+0xoff (dso)` of `addr` in the process `pid`.
    fn symbolise(&mut self, pid: i32, addr: u64) {
        let f = self.fields;
        let model = self.model;
        let map = (pid >= 0 || addr >> 63 == 1)
            .then(|| model.find_map(pid, addr, self.position))
            .flatten()
            .map(|i| &model.maps[i]);
        let bin = map.and_then(|m| model.binary(m.binary));
        let l = &mut self.line;
        if f.sym {
            l.push(' ');
            let sym = map.zip(bin).and_then(|(m, b)| {
                let img = b.image(&model.search)?;
                img.symbol_at(img.offset_to_vaddr(m.file_offset(addr)))
            });
            match sym {
                Some((s, off)) => {
                    l.push_str(&s.name);
                    if f.symoff {
                        let _ = write!(l, "+{off:#x}");
                    }
                }
                None => l.push_str("[unknown]"),
            }
        }
        if f.dso {
            let _ = write!(l, " ({})", bin.map_or("[unknown]", |b| b.path.as_str()));
        }
    }

    fn instruction_sample(&mut self, info: &ElementInfo, addr: u64, period: u64) -> io::Result<()> {
        self.start(info, info.pid, info.tid, period, false);
        if self.fields.ip {
            self.line.push(' ');
            let _ = write!(self.line, "{addr:>16x}");
            self.symbolise(info.pid, addr);
        }
        self.finish_line()
    }

    fn branch_sample(&mut self, info: &ElementInfo, pid: i32, tid: i32, from: u64, to: u64) -> io::Result<()> {
        self.start(info, pid, tid, 1, true);
        if self.fields.ip {
            self.line.push(' ');
            let _ = write!(self.line, "{from:>16x}");
            self.symbolise(pid, from);
        }
        if self.fields.addr {
            let _ = write!(self.line, " => {to:>16x}");
            self.symbolise(pid, to);
        }
        self.finish_line()
    }

    fn finish_line(&mut self) -> io::Result<()> {
        self.line.push('\n');
        self.lines += 1;
        self.out.write_all(self.line.as_bytes())
    }
}
