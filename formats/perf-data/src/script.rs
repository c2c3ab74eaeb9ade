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

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::str::FromStr;

use coresight_decode::arch::{InstrType, Isa};
use coresight_decode::element::{ElemType, TraceElement};

use crate::decode::RecordingDecoder;
use crate::decode::{ElementInfo, Event};
use crate::memory::Model;
use crate::recording::Recording;

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

/// perf's invalid address (`CS_ETM_INVAL_ADDR`), in the packets that carry none.
const INVALID_ADDR: u64 = 0xdead_beef_dead_beef;

/// What a packet is (perf's `cs_etm_sample_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// perf's zeroed starting packet.
    Empty,
    Range,
    Discontinuity,
    Exception,
    ExceptionRet,
}

/// One of perf's cs_etm packets: what the samples are made from.
#[derive(Debug, Clone, Copy)]
struct Packet {
    kind: Kind,
    start: u64,
    end: u64,
    last_size: u64,
    instructions: u64,
    taken: bool,
    thumb: bool,
    cpu: u32,
    /// File offset of its buffer's AUXTRACE record (picks the maps).
    position: u64,
}

const EMPTY: Packet = Packet {
    kind: Kind::Empty,
    start: 0,
    end: 0,
    last_size: 0,
    instructions: 0,
    taken: false,
    thumb: false,
    cpu: 0,
    position: 0,
};

impl Packet {
    /// The address a branch from this packet leaves (0 for a gap).
    fn last_executed(&self) -> u64 {
        match self.kind {
            Kind::Discontinuity => 0,
            _ => self.end.wrapping_sub(self.last_size),
        }
    }

    /// The address a branch to this packet goes to (0 for a gap).
    fn first_executed(&self) -> u64 {
        match self.kind {
            Kind::Discontinuity => 0,
            _ => self.start,
        }
    }
}

/// The samples' state of one trace ID of one AUX queue (perf's `cs_etm_traceid_queue`):
/// its queued packets, the current and previous packet, the instruction count.
#[derive(Debug, Clone)]
struct Chan {
    seen: bool,
    trace_id: u8,
    queued: VecDeque<Packet>,
    packet: Packet,
    prev: Packet,
    period_instructions: u64,
    pid: i32,
    tid: i32,
}

impl Chan {
    fn new() -> Chan {
        Chan {
            seen: false,
            trace_id: 0,
            queued: VecDeque::new(),
            packet: EMPTY,
            prev: EMPTY,
            period_instructions: 0,
            pid: -1,
            tid: -1,
        }
    }
}

/// Writes perf script lines for the events of a decode.
///
/// Elements are turned into perf's packets as they arrive; [`ScriptWriter::event`] makes
/// the samples at once (a single decode in file order), while
/// `ScriptWriter::queue_event` only queues them, per AUX queue and trace ID, for
/// [`write_in_perf_order`] to take them in perf's time order.
pub struct ScriptWriter<'m, W: Write> {
    model: &'m Model,
    out: W,
    itrace: Itrace,
    fields: Fields,
    sample_time: u64,
    streams: usize,
    chans: Vec<Chan>,
    positions: Vec<u64>,
    line: String,
    instructions_name: String,
    branches_name: String,
    name_width: usize,
    /// Lines written.
    pub lines: u64,
}

impl<'m, W: Write> ScriptWriter<'m, W> {
    /// A writer of `streams` streams' samples to `out`; `modifier` is the event modifier of the
    /// recording (`u` for `cs_etm//u`, empty for none), `event_names` the recorded events'
    /// names (they set the width of the event column, as in perf) and `sample_time` the time
    /// the samples carry (see [`perf_sample_time`]; None: the recording has no time).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: &'m Model,
        streams: usize,
        out: W,
        itrace: Itrace,
        fields: Fields,
        modifier: &str,
        event_names: &[String],
        sample_time: Option<u64>,
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
        let streams = streams.max(1);
        ScriptWriter {
            model,
            out,
            itrace,
            fields,
            sample_time: sample_time.unwrap_or(0),
            streams,
            chans: vec![Chan::new(); streams],
            positions: vec![0],
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

    /// Room for `n` AUX queues.
    fn set_queues(&mut self, n: usize) {
        let n = n.max(1);
        self.chans.resize(n * self.streams, Chan::new());
        self.positions.resize(n, 0);
    }

    /// Takes one event of a decode in file order, making its samples at once.
    pub fn event(&mut self, ev: &Event<'_, '_>) -> io::Result<()> {
        self.queue_event(0, ev);
        if let Event::Element(info, _) = ev
            && info.stream < self.streams
        {
            self.process(0, info.stream)?;
        }
        Ok(())
    }

    /// Takes one event of AUX queue `queue`, queueing its packet.
    fn queue_event(&mut self, queue: usize, ev: &Event<'_, '_>) {
        match ev {
            Event::BufferStart { aux, .. } => {
                if let Some(p) = self.positions.get_mut(queue) {
                    *p = aux.record_offset;
                }
            }
            Event::Element(info, e) => self.element(queue, info, e),
            Event::BufferEnd { .. } => {}
        }
    }

    fn element(&mut self, queue: usize, info: &ElementInfo, e: &TraceElement) {
        let position = self.positions.get(queue).copied().unwrap_or(0);
        let Some(c) = self.chans.get_mut(queue * self.streams + info.stream) else {
            return;
        };
        if !c.seen {
            c.seen = true;
            c.trace_id = info.trace_id;
        }
        // The thread is the one the decode knew when the packet came (perf's tidq->tid,
        // set from the context ID as the decoder meets it).
        if info.tid != -1 && (c.tid == -1 || e.elem_type == ElemType::PeContext) {
            c.pid = info.pid;
            c.tid = info.tid;
        }
        let mut p = Packet {
            start: INVALID_ADDR,
            end: INVALID_ADDR,
            cpu: info.cpu,
            position,
            ..EMPTY
        };
        match e.elem_type {
            ElemType::NoSync | ElemType::TraceOn | ElemType::EoTrace => p.kind = Kind::Discontinuity,
            ElemType::Exception => p.kind = Kind::Exception,
            ElemType::ExceptionRet => p.kind = Kind::ExceptionRet,
            ElemType::InstrRange => {
                p.kind = Kind::Range;
                p.start = e.st_addr;
                p.end = e.en_addr;
                p.instructions = u64::from(e.num_instr_range);
                p.last_size = u64::from(e.last_instr_sz);
                p.taken = matches!(e.last_i_type, InstrType::Branch | InstrType::BranchIndirect) && e.last_instr_exec;
                p.thumb = e.isa == Isa::Thumb2;
            }
            _ => return,
        }
        c.queued.push_back(p);
    }

    /// Makes the samples of the packets queued for `stream` of `queue` (perf's
    /// `cs_etm__process_traceid_queue`).
    fn process(&mut self, queue: usize, stream: usize) -> io::Result<()> {
        let k = queue * self.streams + stream;
        while let Some(p) = self.chans.get_mut(k).and_then(|c| c.queued.pop_front()) {
            self.chans[k].packet = p;
            match p.kind {
                Kind::Range => self.sample(k)?,
                Kind::Exception | Kind::ExceptionRet => {
                    // The range before an exception ends in a (taken) change of flow.
                    let prev = &mut self.chans[k].prev;
                    if prev.kind == Kind::Range {
                        prev.taken = true;
                    }
                }
                Kind::Discontinuity => self.flush(k)?,
                Kind::Empty => {}
            }
        }
        Ok(())
    }

    fn swap(&mut self, k: usize) {
        let c = &mut self.chans[k];
        std::mem::swap(&mut c.packet, &mut c.prev);
    }

    /// perf's `cs_etm__sample`: the instruction samples of the current range, and a branch
    /// sample when the previous packet ended in a taken branch or was a gap.
    fn sample(&mut self, k: usize) -> io::Result<()> {
        let c = &self.chans[k];
        let (p, prev) = (c.packet, c.prev);
        let before = c.period_instructions;
        let mut total = before.saturating_add(p.instructions);
        if let Some(period) = self.itrace.instructions
            && total >= period
        {
            // The first sample is `period - before` instructions into this range.
            let mut offset = period - before;
            while total >= period {
                let addr = self.instr_addr(k, &p, offset - 1);
                self.instruction_sample(k, addr, period)?;
                offset += period;
                total -= period;
            }
        }
        self.chans[k].period_instructions = total;
        if self.itrace.branches && (prev.kind == Kind::Discontinuity || (prev.kind == Kind::Range && prev.taken)) {
            self.branch_sample(k, prev.last_executed(), p.first_executed())?;
        }
        self.swap(k);
        Ok(())
    }

    /// perf's `cs_etm__flush`: at a gap (and when perf empties the queues at a buffer's end),
    /// a branch sample from the last range to the current packet.
    fn flush(&mut self, k: usize) -> io::Result<()> {
        let c = &self.chans[k];
        let (p, prev) = (c.packet, c.prev);
        if prev.kind != Kind::Empty && self.itrace.branches && prev.kind == Kind::Range {
            self.branch_sample(k, prev.last_executed(), p.first_executed())?;
        }
        self.swap(k);
        Ok(())
    }

    /// perf's `cs_etm__clear_all_traceid_queues`: every trace ID of `queue`, in trace ID
    /// order, processed and flushed.
    fn process_all(&mut self, queue: usize) -> io::Result<()> {
        let mut order: Vec<(u8, usize)> = (0..self.streams)
            .filter(|&s| self.chans[queue * self.streams + s].seen)
            .map(|s| (self.chans[queue * self.streams + s].trace_id, s))
            .collect();
        order.sort_unstable();
        for (_, s) in order {
            self.process(queue, s)?;
            self.flush(queue * self.streams + s)?;
        }
        Ok(())
    }

    /// perf's `cs_etm__clear_all_packet_queues`: the packets queued in `queue` dropped.
    fn drop_queued(&mut self, queue: usize) {
        for s in 0..self.streams {
            if let Some(c) = self.chans.get_mut(queue * self.streams + s) {
                c.queued.clear();
            }
        }
    }

    /// The address of instruction `n` (from 0) of range `p`: 4 bytes each but in T32, whose
    /// sizes are read from the code.
    fn instr_addr(&self, k: usize, p: &Packet, n: u64) -> u64 {
        if !p.thumb {
            return p.start.wrapping_add(n.wrapping_mul(4));
        }
        let mut a = p.start;
        let map = self.model.find_map(self.chans[k].pid, a, p.position);
        for _ in 0..n {
            let mut hw = [0u8; 2];
            let got = map.map_or(0, |m| self.model.read_loaded(m, a, &mut hw));
            let wide = got == 2 && coresight_decode::instr::is_wide_thumb(u16::from_le_bytes(hw));
            a = a.wrapping_add(if wide { 4 } else { 2 });
        }
        a
    }

    fn start(&mut self, k: usize, period: u64, name_is_branch: bool) {
        let f = self.fields;
        let t = self.sample_time;
        let c = &self.chans[k];
        let (pid, tid, cpu) = (c.pid, c.tid, c.packet.cpu);
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
            let _ = write!(l, "[{cpu:03}] ");
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

    fn instruction_sample(&mut self, k: usize, addr: u64, period: u64) -> io::Result<()> {
        self.start(k, period, false);
        if self.fields.ip {
            self.line.push(' ');
            let _ = write!(self.line, "{addr:>16x}");
            let (pid, position) = (self.chans[k].pid, self.chans[k].packet.position);
            self.symbolise(pid, addr, position);
        }
        self.finish_line()
    }

    fn branch_sample(&mut self, k: usize, from: u64, to: u64) -> io::Result<()> {
        self.start(k, 1, true);
        let (pid, position) = (self.chans[k].pid, self.chans[k].packet.position);
        if self.fields.ip {
            self.line.push(' ');
            let _ = write!(self.line, "{from:>16x}");
            self.symbolise(pid, from, position);
        }
        if self.fields.addr {
            let _ = write!(self.line, " => {to:>16x}");
            self.symbolise(pid, to, position);
        }
        self.finish_line()
    }

    /// ` sym+0xoff (dso)` of `addr` in the process `pid`.
    fn symbolise(&mut self, pid: i32, addr: u64, position: u64) {
        let f = self.fields;
        let (sym, dso) = self.model.symbolize(pid, addr, position);
        let l = &mut self.line;
        if f.sym {
            l.push(' ');
            match sym {
                Some((name, off)) => {
                    l.push_str(name);
                    if f.symoff {
                        let _ = write!(l, "+{off:#x}");
                    }
                }
                None => l.push_str("[unknown]"),
            }
        }
        if f.dso {
            let _ = write!(l, " ({})", dso.unwrap_or("[unknown]"));
        }
    }

    fn finish_line(&mut self) -> io::Result<()> {
        self.line.push('\n');
        self.lines += 1;
        self.out.write_all(self.line.as_bytes())
    }
}

/// perf 6.1 decodes "timeless" (each AUX queue in file order, no time in the samples) when no
/// recorded event samples the time (`PERF_SAMPLE_TIME`), as in per-thread recordings.
pub fn is_timeless(rec: &Recording<'_>) -> bool {
    const PERF_SAMPLE_TIME: u64 = 1 << 2;
    !rec.attrs().iter().any(|a| a.sample_type & PERF_SAMPLE_TIME != 0)
}

/// The time perf 6.1 gives every synthesised sample: not the trace's timestamps but the
/// kernel time of the latest PERF_RECORD_AUX before it decodes, which is after all of them
/// (it decodes when the events have all been read). None for a timeless recording.
pub fn perf_sample_time(rec: &Recording<'_>) -> Option<u64> {
    if is_timeless(rec) {
        return None;
    }
    Some(
        rec.aux_records
            .iter()
            .filter_map(|(_, a)| a.sample_id.time)
            .filter(|&t| t != u64::MAX)
            .max()
            .unwrap_or(0),
    )
}

/// How [`write_in_perf_order`] decodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerfOrder {
    /// Drop what the decoder holds back when a buffer's last bytes stop it, as perf 6.1
    /// does (it moves to the next buffer without flushing the decoder: the last 1 to 9
    /// branches of a buffer can be lost). Off: they are decoded.
    pub drop_held_at_buffer_end: bool,
}

/// perf's `auxtrace_heap`: a binary min-heap of (queue, trace ID) on estimated time, whose
/// ties go as its sift rules send them (the order perf prints equal times in).
#[derive(Debug, Default)]
struct TimeHeap {
    items: Vec<(u64, usize, usize)>,
}

impl TimeHeap {
    fn place(&mut self, mut pos: usize, item: (u64, usize, usize)) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.items[parent].0 <= item.0 {
                break;
            }
            self.items[pos] = self.items[parent];
            pos = parent;
        }
        self.items[pos] = item;
    }

    fn add(&mut self, time: u64, queue: usize, stream: usize) {
        let item = (time, queue, stream);
        self.items.push(item);
        let at = self.items.len() - 1;
        self.place(at, item);
    }

    fn pop(&mut self) -> Option<(usize, usize)> {
        let top = *self.items.first()?;
        let n = self.items.len();
        let mut pos = 0;
        loop {
            let left = 2 * pos + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            if right >= n {
                self.items[pos] = self.items[left];
                self.items.truncate(n - 1);
                return Some((top.1, top.2));
            }
            let child = if self.items[left].0 < self.items[right].0 {
                left
            } else {
                right
            };
            self.items[pos] = self.items[child];
            pos = child;
        }
        let last = self.items[n - 1];
        self.items.truncate(n - 1);
        if pos < n - 1 {
            self.place(pos, last);
        }
        Some((top.1, top.2))
    }
}

/// Decodes `dec`'s recording and writes its samples in the order perf 6.1 prints them.
///
/// Timeless recordings (see [`is_timeless`]): buffer by buffer in file order. Otherwise as
/// perf's `cs_etm__process_queues`: each AUX queue (one per mmap: per CPU) has its own
/// decoder, paced as perf's (see [`crate::decode::Pacing`]: it stops at each timestamp and,
/// once timed, after each range, giving the queued packets an estimated time); the queues'
/// first timed stops go in a min-heap (packets before a queue's first timestamp are
/// dropped, as perf drops them); the earliest is taken, its trace ID's packets made into
/// samples, and its queue decoded on to its next stop. A queue's decoder that stops without
/// a time (end of its data) has all its trace IDs' packets made into samples and flushed.
/// Memory: the packets between two stops of each queue, at most 1023 per trace ID.
///
/// `progress` is told the bytes of each buffer done.
pub fn write_in_perf_order<W: Write>(
    dec: &mut RecordingDecoder<'_, '_>,
    w: &mut ScriptWriter<'_, W>,
    order: PerfOrder,
    progress: &mut dyn FnMut(u64),
) -> io::Result<()> {
    let rec = dec.recording();
    let mut err: Option<io::Error> = None;
    if is_timeless(rec) {
        dec.run(&mut |ev| {
            if err.is_some() {
                return;
            }
            if let Event::BufferEnd { buffer } = ev {
                progress(rec.buffers.get(buffer).map_or(0, |b| b.data.len() as u64));
            }
            if let Err(e) = w.event(&ev) {
                err = Some(e);
            }
        });
        return err.map_or(Ok(()), Err);
    }
    let keep = !order.drop_held_at_buffer_end;
    let mut queues = dec.perf_queues().map_err(io::Error::other)?;
    w.set_queues(queues.len());
    let mut heap = TimeHeap::default();
    let mut take = |w: &mut ScriptWriter<'_, W>, qi: usize, ev: Event<'_, '_>| {
        if let Event::BufferEnd { buffer } = ev {
            progress(rec.buffers.get(buffer).map_or(0, |b| b.data.len() as u64));
        }
        w.queue_event(qi, &ev);
    };
    // Each queue decoded to its first timestamp.
    for (qi, q) in queues.iter_mut().enumerate() {
        while dec.next_block(q, keep, &mut |ev| take(w, qi, ev)) {
            match dec.decode_block(q, keep, &mut |ev| take(w, qi, ev)) {
                Some((s, t)) if t != 0 => {
                    heap.add(t, qi, s);
                    break;
                }
                _ => {
                    w.drop_queued(qi);
                    q.drained_all();
                }
            }
        }
    }
    while let Some((qi, s)) = heap.pop() {
        w.process(qi, s)?;
        let q = &mut queues[qi];
        q.drained(s);
        while dec.next_block(q, keep, &mut |ev| take(w, qi, ev)) {
            match dec.decode_block(q, keep, &mut |ev| take(w, qi, ev)) {
                Some((s, t)) if t != 0 => {
                    heap.add(t, qi, s);
                    break;
                }
                _ => {
                    w.process_all(qi)?;
                    q.drained_all();
                }
            }
        }
    }
    Ok(())
}
