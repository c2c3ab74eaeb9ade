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

use coresight_decode::arch::{InstrSubType, InstrType, Isa};
use coresight_decode::element::{ElemType, TraceElement};

use crate::decode::RecordingDecoder;
use crate::decode::{ElementInfo, Event};
use crate::inject::{SampleRecords, SampleValues};
use crate::memory::Model;
use crate::recording::Recording;

pub use crate::script_options::{DEFAULT_LAST_BRANCH, DEFAULT_PERIOD, Fields, Itrace, MAX_LAST_BRANCH};

/// Entries of the symbol text cache.
const SYM_CACHE: usize = 4096;

/// A symbolised address as the line shows it.
#[derive(Debug, Clone, Default)]
struct SymText {
    valid: bool,
    pid: i32,
    addr: u64,
    position: u64,
    text: String,
}

/// A mangled symbol name as perf 6.1 shows it: C++ names (`_Z…`) without their parameter
/// list or return type (`_ZN1AC2Ev` is `A::A`); Rust's legacy names also without their hash
/// (`core::fmt::write`). None when `name` is not mangled or does not demangle.
pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    let opts = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
    let mut d = sym.demangle(&opts).ok()?;
    // A Rust legacy name ends in `::h` and 16 hex digits.
    if let Some(i) = d.rfind("::h")
        && d.len() - i == 19
        && d[i + 3..].bytes().all(|b| b.is_ascii_hexdigit())
    {
        d.truncate(i);
    }
    Some(d)
}

/// Appends `v` in hex, right-aligned in `width` characters (perf's `%16lx`).
fn push_hex(l: &mut String, v: u64, width: usize) {
    let digits = ((64 - v.leading_zeros() as usize).div_ceil(4)).max(1);
    for _ in digits..width {
        l.push(' ');
    }
    for i in (0..digits).rev() {
        l.push(char::from(b"0123456789abcdef"[(v >> (4 * i) & 0xf) as usize]));
    }
}

/// The packets perf's decoder queues before it stops to make samples of them
/// (`CS_ETM_PACKET_MAX_BUFFER` - 1).
const PACKET_QUEUE: usize = 1023;

/// perf's sample flags (`PERF_IP_FLAG_*`).
const FLAG_BRANCH: u32 = 1 << 0;
const FLAG_CALL: u32 = 1 << 1;
const FLAG_RETURN: u32 = 1 << 2;
const FLAG_CONDITIONAL: u32 = 1 << 3;
const FLAG_SYSCALLRET: u32 = 1 << 4;
const FLAG_ASYNC: u32 = 1 << 5;
const FLAG_INTERRUPT: u32 = 1 << 6;
const FLAG_TRACE_BEGIN: u32 = 1 << 8;
const FLAG_TRACE_END: u32 = 1 << 9;

/// The names perf gives combinations of sample flags.
const FLAG_NAMES: [(u32, &str); 11] = [
    (FLAG_BRANCH | FLAG_CALL, "call"),
    (FLAG_BRANCH | FLAG_RETURN, "return"),
    (FLAG_BRANCH | FLAG_CONDITIONAL, "jcc"),
    (FLAG_BRANCH, "jmp"),
    (FLAG_BRANCH | FLAG_CALL | FLAG_INTERRUPT, "int"),
    (FLAG_BRANCH | FLAG_RETURN | FLAG_INTERRUPT, "iret"),
    (FLAG_BRANCH | FLAG_CALL | FLAG_SYSCALLRET, "syscall"),
    (FLAG_BRANCH | FLAG_RETURN | FLAG_SYSCALLRET, "sysret"),
    (FLAG_BRANCH | FLAG_CALL | FLAG_ASYNC | FLAG_INTERRUPT, "hw int"),
    (FLAG_BRANCH | FLAG_TRACE_BEGIN, "tr strt"),
    (FLAG_BRANCH | FLAG_TRACE_END, "tr end"),
];

/// Sample flags as perf script's `flags` field shows them, 21 characters wide.
fn write_flags(l: &mut String, flags: u32) {
    let name = |f: u32| FLAG_NAMES.iter().find(|(v, _)| *v == f).map(|(_, n)| *n);
    l.push_str("  ");
    let start = l.len();
    if let Some(n) = name(flags) {
        l.push_str(n);
    } else if let Some(n) = (flags & FLAG_TRACE_BEGIN != 0)
        .then(|| name(flags & !FLAG_TRACE_BEGIN))
        .flatten()
    {
        let _ = write!(l, "tr strt {n}");
    } else if let Some(n) = (flags & FLAG_TRACE_END != 0)
        .then(|| name(flags & !FLAG_TRACE_END))
        .flatten()
    {
        let _ = write!(l, "tr end  {n}");
    } else {
        // One letter a flag, in perf's order.
        for b in (0..16).filter(|b| flags >> b & 1 == 1) {
            l.push(b"bcrosyiABExghDtm".get(b).map_or('?', |&c| c as char));
        }
    }
    // Padded to 21 characters (the text is ASCII), then a space.
    while l.len() - start < 21 {
        l.push(' ');
    }
    l.push(' ');
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
    /// How the range's last instruction changed the flow (for the sample flags).
    last_type: InstrType,
    last_subtype: InstrSubType,
    last_cond: bool,
    /// An exception packet's number.
    exception: u32,
    /// perf's sample flags (`PERF_IP_FLAG_*`), set as the packets are taken.
    flags: u32,
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
    last_type: InstrType::Other,
    last_subtype: InstrSubType::None,
    last_cond: false,
    exception: 0,
    flags: 0,
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
    /// The last taken branches (from, to), newest first (`--itrace=l`).
    lbr: VecDeque<(u64, u64)>,
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
            lbr: VecDeque::new(),
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
    /// perf 6.1's timeless decoding: every trace ID of a queue in one channel (one packet
    /// queue, one previous packet, one thread), its packets made into samples when 1023
    /// are queued or the buffer ends.
    one_channel: bool,
    /// The line's start for the last (pid, tid, cpu, period, event) seen, and that key.
    prefix: String,
    prefix_key: Option<(i32, i32, u32, u64, bool)>,
    sym_cache: Vec<SymText>,
    srclines: crate::srcline::SourceLines,
    /// The column `callindent` pads to, as perf keeps it: it grows with a longer name and
    /// shrinks only for a much shorter one, so that lines stay aligned.
    callindent_spacing: usize,
    /// Show C++ and Rust symbol names demangled, as perf does by default.
    pub demangle: bool,
    /// Flush a queue whose data ended towards the stale packet, as perf 6.1 does.
    stale_flush: bool,
    /// Decoding timeless: each buffer's end is a block's end (perf's `cs_etm__end_block`).
    timeless: bool,
    /// Samples made into perf.data records instead of lines (`perf inject`).
    records: Option<SampleRecords>,
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
            one_channel: false,
            prefix: String::with_capacity(96),
            prefix_key: None,
            sym_cache: vec![SymText::default(); SYM_CACHE],
            srclines: Default::default(),
            callindent_spacing: 0,
            stale_flush: false,
            timeless: false,
            records: None,
            demangle: true,
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

    /// Makes the samples into perf.data records added to `records` instead of writing lines
    /// (what `perf inject` does with them).
    pub fn make_records(&mut self, records: SampleRecords) {
        self.records = Some(records);
    }

    /// The records made, back (see [`Self::make_records`]).
    pub fn take_records(&mut self) -> Option<SampleRecords> {
        self.records.take()
    }

    /// A sample as a record, when records are made: true then.
    fn record(&mut self, k: usize, branch: bool, ip: u64, addr: u64, period: u64) -> bool {
        let Some(r) = &mut self.records else {
            return false;
        };
        let c = &self.chans[k];
        let v = SampleValues {
            position: c.packet.position,
            pid: c.pid,
            tid: c.tid,
            time: self.sample_time,
            cpu: c.packet.cpu,
            ip,
            addr,
            period,
        };
        r.push(branch, v, c.lbr.iter());
        self.lines += 1;
        true
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
        if self.one_channel {
            let full = self.chans.first().is_some_and(|c| c.queued.len() >= PACKET_QUEUE);
            if full || matches!(ev, Event::BufferEnd { .. }) {
                self.process(0, 0)?;
            }
        } else if let Event::Element(info, _) = ev
            && info.stream < self.streams
        {
            self.process(0, info.stream)?;
        }
        Ok(())
    }

    /// Takes one event of AUX queue `queue` of a timeless decode: its samples made at once,
    /// or, with one channel, queued until the decoder stops.
    fn timeless_event(&mut self, queue: usize, ev: &Event<'_, '_>) -> io::Result<()> {
        if let Event::BufferEnd { .. } = ev
            && self.timeless
        {
            // Everything of the buffer is processed by now (its last block was).
            self.end_blocks(queue)?;
        }
        self.queue_event(queue, ev);
        if !self.one_channel
            && let Event::Element(info, _) = ev
            && info.stream < self.streams
        {
            self.process(queue, info.stream)?;
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
        let stream = if self.one_channel { 0 } else { info.stream };
        let Some(c) = self.chans.get_mut(queue * self.streams + stream) else {
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
            ElemType::Exception => {
                p.kind = Kind::Exception;
                p.exception = e.exception_number;
            }
            ElemType::ExceptionRet => p.kind = Kind::ExceptionRet,
            ElemType::InstrRange => {
                p.kind = Kind::Range;
                p.start = e.st_addr;
                p.end = e.en_addr;
                p.instructions = u64::from(e.num_instr_range);
                p.last_size = u64::from(e.last_instr_sz);
                p.taken = matches!(e.last_i_type, InstrType::Branch | InstrType::BranchIndirect) && e.last_instr_exec;
                p.thumb = e.isa == Isa::Thumb2;
                p.last_type = e.last_i_type;
                p.last_subtype = e.last_i_subtype;
                p.last_cond = e.last_instr_cond;
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
            self.set_flags(k);
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

    /// perf's sample flags for the packet just taken, and the previous packet's mended by
    /// it (its branch is the one a sample reports): a range is a jump, call or return by
    /// its last instruction; a range after a gap begins trace and one before a gap ends it;
    /// a range before an exception or its return takes that as its branch.
    fn set_flags(&mut self, k: usize) {
        let c = &mut self.chans[k];
        let (p, prev) = (&mut c.packet, &mut c.prev);
        match p.kind {
            Kind::Range => {
                let ty = p.last_type;
                p.flags = match (ty, p.last_subtype) {
                    (InstrType::Branch, InstrSubType::None) => {
                        FLAG_BRANCH | if p.last_cond { FLAG_CONDITIONAL } else { 0 }
                    }
                    (InstrType::Branch | InstrType::BranchIndirect, InstrSubType::BranchLink) => {
                        FLAG_BRANCH | FLAG_CALL
                    }
                    (
                        InstrType::BranchIndirect,
                        InstrSubType::None | InstrSubType::V8Ret | InstrSubType::V7ImpliedRet,
                    ) => FLAG_BRANCH | FLAG_RETURN,
                    _ => p.flags,
                };
                if prev.kind == Kind::Discontinuity {
                    prev.flags |= FLAG_BRANCH | FLAG_TRACE_BEGIN;
                }
            }
            Kind::Discontinuity => {
                if prev.kind == Kind::Range {
                    prev.flags |= FLAG_BRANCH | FLAG_TRACE_END;
                }
            }
            Kind::Exception => {
                // ETMv4 exception types: calls (SVC, HVC, SMC); resets, halts, errors,
                // debug events and interrupts come from outside; the rest are traps and faults.
                p.flags = match p.exception {
                    0x2 => FLAG_BRANCH | FLAG_CALL | FLAG_SYSCALLRET,
                    0x0 | 0x1 | 0x4 | 0x6 | 0x7 | 0xe | 0xf => FLAG_BRANCH | FLAG_CALL | FLAG_ASYNC | FLAG_INTERRUPT,
                    _ => FLAG_BRANCH | FLAG_CALL | FLAG_INTERRUPT,
                };
                if prev.kind == Kind::Range {
                    prev.flags = p.flags;
                }
            }
            Kind::ExceptionRet => {
                if prev.kind == Kind::Range {
                    prev.flags = FLAG_BRANCH | FLAG_RETURN | FLAG_INTERRUPT;
                }
            }
            Kind::Empty => {}
        }
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
        if let Some(n) = self.itrace.last_branch
            && prev.kind == Kind::Range
            && prev.taken
        {
            let lbr = &mut self.chans[k].lbr;
            if lbr.len() >= n {
                lbr.pop_back();
            }
            lbr.push_front((prev.last_executed(), p.first_executed()));
        }
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
        // With a branch stack, the branches not yet reported go in one more instruction
        // sample, at the last range's last instruction, for the instructions since the last.
        self.end_block(k)?;
        if prev.kind != Kind::Empty && self.itrace.branches && prev.kind == Kind::Range {
            self.branch_sample(k, prev.last_executed(), p.first_executed())?;
        }
        self.swap(k);
        self.chans[k].lbr.clear();
        Ok(())
    }

    /// perf's `cs_etm__end_block`: with a branch stack, an instruction sample of what the
    /// last range left (at its last instruction) when the trace or a buffer ends.
    fn end_block(&mut self, k: usize) -> io::Result<()> {
        let prev = self.chans[k].prev;
        if self.itrace.last_branch.is_some() && self.itrace.instructions.is_some() && prev.kind == Kind::Range {
            let period = self.chans[k].period_instructions;
            self.instruction_sample(k, prev.last_executed(), period)?;
            self.chans[k].period_instructions = 0;
        }
        Ok(())
    }

    /// [`Self::end_block`] for every trace ID of `queue`.
    fn end_blocks(&mut self, queue: usize) -> io::Result<()> {
        if self.itrace.last_branch.is_some() {
            for s in 0..self.streams {
                self.end_block(queue * self.streams + s)?;
            }
        }
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
            let k = queue * self.streams + s;
            if !self.stale_flush {
                // The data ended: a gap. perf flushes with whatever packet it last swapped
                // out, so its branch can go to a range that ran before (an invented branch).
                // The gap is on the same CPU and buffer as the packet before it.
                let last = self.chans[k].packet;
                self.chans[k].packet = Packet {
                    kind: Kind::Discontinuity,
                    cpu: last.cpu,
                    position: last.position,
                    ..EMPTY
                };
                self.set_flags(k);
            }
            self.flush(k)?;
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

    /// Starts a sample's line: the fields before the address (comm, pid/tid, cpu, time,
    /// period, event, flags). All but the flags are the same for the samples of one thread,
    /// CPU and period: they are made once and copied while they stay the same.
    fn start(&mut self, k: usize, period: u64, name_is_branch: bool) {
        let c = &self.chans[k];
        let key = (c.pid, c.tid, c.packet.cpu, period, name_is_branch);
        if self.prefix_key != Some(key) {
            self.prefix_key = Some(key);
            self.make_prefix(key);
        }
        let l = &mut self.line;
        l.clear();
        l.push_str(&self.prefix);
        if self.fields.flags {
            // The flags of the packet whose branch the sample reports.
            write_flags(l, self.chans[k].prev.flags);
        }
    }

    fn make_prefix(&mut self, (pid, tid, cpu, period, name_is_branch): (i32, i32, u32, u64, bool)) {
        let f = self.fields;
        let t = self.sample_time;
        let l = &mut self.prefix;
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
        if self.record(k, false, addr, 0, period) {
            return Ok(());
        }
        self.start(k, period, false);
        let (pid, position) = (self.chans[k].pid, self.chans[k].packet.position);
        if self.fields.addr {
            // Instruction samples have no address: perf prints its 0.
            push_hex(&mut self.line, 0, 16);
        }
        if self.fields.ip {
            self.line.push(' ');
            push_hex(&mut self.line, addr, 16);
            self.symbolise(pid, addr, position);
        }
        self.write_srcline(pid, addr, position);
        if self.fields.brstack {
            self.write_brstack(k, pid, position);
        }
        // perf reads the instruction through the current packet: none at a gap.
        if self.fields.insn && self.chans[k].packet.kind != Kind::Discontinuity {
            let thumb = self.chans[k].packet.thumb;
            self.write_insn(pid, addr, position, thumb);
        }
        self.finish_line()
    }

    fn branch_sample(&mut self, k: usize, from: u64, to: u64) -> io::Result<()> {
        if self.record(k, true, from, to, 1) {
            return Ok(());
        }
        self.start(k, 1, true);
        let (pid, position) = (self.chans[k].pid, self.chans[k].packet.position);
        if self.fields.callindent {
            self.write_callindent(pid, from, to, position, self.chans[k].prev.flags);
        }
        if self.fields.ip {
            self.line.push(' ');
            push_hex(&mut self.line, from, 16);
            self.symbolise(pid, from, position);
        }
        if self.fields.branch_target() {
            self.line.push_str(" => ");
            push_hex(&mut self.line, to, 16);
            self.symbolise(pid, to, position);
        }
        self.write_srcline(pid, from, position);
        let prev = self.chans[k].prev;
        if self.fields.insn && prev.kind == Kind::Range {
            self.write_insn(pid, from, position, prev.thumb);
        }
        self.finish_line()
    }

    /// The branch stack as perf prints it: ` 0xFROM/0xTO/P/-/-/0/ ` a branch (predicted, not in a
    /// transaction, no abort, no cycle count, no type), with `(dso)` after each address when
    /// the binary is shown.
    fn write_brstack(&mut self, k: usize, pid: i32, position: u64) {
        for i in 0..self.chans[k].lbr.len() {
            let (from, to) = self.chans[k].lbr[i];
            for (pre, a) in [(" 0x", from), ("/0x", to)] {
                self.line.push_str(pre);
                let _ = write!(self.line, "{a:x}");
                if self.fields.dso {
                    let dso = self.model.symbolize(pid, a, position).1;
                    let _ = write!(self.line, "({})", dso.unwrap_or("[unknown]"));
                }
            }
            self.line.push_str("/P/-/-/0/ ");
        }
    }

    /// perf's `callindent` of a branch sample: the function entered (a call's or a trace
    /// start's target) or left (a return's or trace end's source), by name or else address,
    /// padded to the current column. perf indents by the depth of its thread stack, which
    /// its CoreSight decoder does not keep for `perf script`: the depth is always 0.
    fn write_callindent(&mut self, pid: i32, from: u64, to: u64, position: u64, flags: u32) {
        let f = self.fields;
        if f.dso && !(f.ip || f.addr) {
            let (_, dso) = self.model.symbolize(pid, from, position);
            let l = &mut self.line;
            l.push('(');
            l.push_str(dso.unwrap_or("[unknown]"));
            l.push_str(")\t");
        }
        let at = if flags & (FLAG_CALL | FLAG_TRACE_BEGIN) != 0 {
            Some(to)
        } else if flags & (FLAG_RETURN | FLAG_TRACE_END) != 0 {
            Some(from)
        } else {
            None
        };
        let start = self.line.len();
        if let Some(a) = at {
            match self.model.symbolize(pid, a, position).0 {
                Some((name, _)) => match self.demangle.then(|| demangle(name)).flatten() {
                    Some(d) => self.line.push_str(&d),
                    None => self.line.push_str(name),
                },
                None if a != 0 => push_hex(&mut self.line, a, 16),
                None => {}
            }
        }
        let len = self.line.len() - start;
        let spacing = &mut self.callindent_spacing;
        if len > *spacing || (len > 0 && len + 52 < *spacing) {
            *spacing = (len + 4).div_ceil(32) * 32;
        }
        for _ in len..*spacing {
            self.line.push(' ');
        }
    }

    /// `\n  file:line` of `addr`, after the addresses and before the instruction, where
    /// perf puts it; nothing when the line is unknown.
    fn write_srcline(&mut self, pid: i32, addr: u64, position: u64) {
        if !self.fields.srcline {
            return;
        }
        if let Some(l) = self.srclines.get(self.model, pid, addr, position) {
            self.line.push_str("\n  ");
            self.line.push_str(l);
        }
    }

    /// ` insn: xx xx xx xx`: the bytes of the instruction at `addr` (none when its code is
    /// not available).
    fn write_insn(&mut self, pid: i32, addr: u64, position: u64, thumb: bool) {
        let Some(m) = self.model.find_map(pid, addr, position) else {
            return;
        };
        let mut b = [0u8; 4];
        let mut len = 4;
        if thumb {
            let got = self.model.read_loaded(m, addr, &mut b[..2]);
            if got != 2 {
                return;
            }
            if !coresight_decode::instr::is_wide_thumb(u16::from_le_bytes([b[0], b[1]])) {
                len = 2;
            }
        }
        if self.model.read_loaded(m, addr, &mut b[..len]) != len {
            return;
        }
        self.line.push_str(" insn:");
        for x in &b[..len] {
            let _ = write!(self.line, " {x:02x}");
        }
    }

    /// ` sym+0xoff (dso)` of `addr` in the process `pid`, from a direct-mapped cache of
    /// the texts made (hot code is symbolised once, not at every sample).
    fn symbolise(&mut self, pid: i32, addr: u64, position: u64) {
        let f = self.fields;
        if !f.sym && !f.dso {
            return;
        }
        let slot = (addr ^ (addr >> 12) ^ position) as usize % SYM_CACHE;
        let e = &mut self.sym_cache[slot];
        if !(e.valid && e.addr == addr && e.pid == pid && e.position == position) {
            e.valid = true;
            e.addr = addr;
            e.pid = pid;
            e.position = position;
            let l = &mut e.text;
            l.clear();
            let (sym, dso) = self.model.symbolize(pid, addr, position);
            if f.sym {
                l.push(' ');
                match sym {
                    Some((name, off)) => {
                        match self.demangle.then(|| demangle(name)).flatten() {
                            Some(d) => l.push_str(&d),
                            None => l.push_str(name),
                        }
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
        self.line.push_str(&e.text);
    }

    fn finish_line(&mut self) -> io::Result<()> {
        self.line.push('\n');
        self.lines += 1;
        self.out.write_all(self.line.as_bytes())
    }
}

/// perf's event name modifier for an attribute's flags: `u`, `k`, `h` for the privilege
/// levels counted when some are excluded, then `H` or `G` when only the host or the guest is.
pub fn event_modifier(flags: u64) -> String {
    let bit = |n: u32| flags >> n & 1 == 1;
    let (x_user, x_kernel, x_hv, x_host, x_guest) = (bit(4), bit(5), bit(6), bit(19), bit(20));
    let mut m = String::new();
    if x_user || x_kernel || x_hv {
        if !x_user {
            m.push('u');
        }
        if !x_kernel {
            m.push('k');
        }
        if !x_hv {
            m.push('h');
        }
    }
    if x_host != x_guest {
        m.push(if x_host { 'G' } else { 'H' });
    }
    m
}

/// perf 6.1 decodes "timeless" (each AUX queue in file order, no time in the samples) when
/// the CoreSight event was recorded without timestamps (its config lacks `ETM_OPT_TS`, bit
/// 28), as simpleperf's recordings and per-thread ones are: the trace then has no timestamp
/// to order the queues by. A recording without the event's attribute falls back to whether
/// any event samples the time.
pub fn is_timeless(rec: &Recording<'_>) -> bool {
    const ETM_OPT_TS: u64 = 1 << 28;
    const PERF_SAMPLE_TIME: u64 = 1 << 2;
    let pmu = rec.cs_etm.as_ref().map(|c| c.pmu_type);
    match rec.attrs().iter().find(|a| Some(a.kind) == pmu) {
        Some(a) => a.config & ETM_OPT_TS == 0,
        None => !rec.attrs().iter().any(|a| a.sample_type & PERF_SAMPLE_TIME != 0),
    }
}

/// Whether the recorded CoreSight event samples `bit` (`PERF_SAMPLE_*`).
pub fn event_samples(rec: &Recording<'_>, bit: u64) -> bool {
    let pmu = rec.cs_etm.as_ref().map(|c| c.pmu_type);
    let attrs = rec.attrs();
    attrs
        .iter()
        .find(|a| Some(a.kind) == pmu)
        .or(attrs.first())
        .is_some_and(|a| a.sample_type & bit != 0)
}

/// The names perf gives the recorded events (they set the width of the event column):
/// from the EVENT_DESC feature, or, without it, perf's name for an event type it does not
/// know (`unknown attr type: 8`), as a CoreSight PMU's dynamic type is on another machine.
pub fn event_names(rec: &Recording<'_>) -> Vec<String> {
    if let Ok(Some(d)) = rec.file.event_desc()
        && !d.is_empty()
    {
        return d.into_iter().map(|d| d.name).collect();
    }
    rec.attrs()
        .iter()
        .filter(|a| a.kind >= 6)
        .map(|a| format!("unknown attr type: {}", a.kind))
        .collect()
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
    /// Decode timeless even if the recording has timestamps (`--itrace=Z`).
    pub timeless: bool,
    /// Timeless decoding as perf 6.1 does it: the trace IDs of a buffer share one channel
    /// (see [`ScriptWriter`]), so on a formatted buffer of several CPUs a branch can join
    /// two CPUs' code and samples take the thread last seen on any of them.
    pub one_channel_when_timeless: bool,
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
    let keep = !order.drop_held_at_buffer_end;
    let timeless = order.timeless || is_timeless(rec);
    // One trace unit: its samples come in decode order whatever the timestamps, so the
    // decoder need not stop at each of them to merge queues by time (that costs more than
    // the decode itself). perf 6.1's way of losing what a stop leaves held is not kept then.
    let single = !timeless && keep && dec.cpus().len() == 1;
    if timeless || single {
        // perf's cs_etm__process_timeless_queues: each queue decoded whole, in queue order.
        w.one_channel = timeless && order.one_channel_when_timeless;
        w.timeless = timeless;
        let mut queues = dec.perf_queues().map_err(io::Error::other)?;
        w.set_queues(queues.len());
        for (qi, q) in queues.iter_mut().enumerate() {
            q.set_timeless();
            let mut take = |w: &mut ScriptWriter<'_, W>, ev: Event<'_, '_>| {
                if let Event::BufferEnd { buffer } = ev {
                    progress(rec.buffers.get(buffer).map_or(0, |b| b.data.len() as u64));
                }
                if err.is_none()
                    && let Err(e) = w.timeless_event(qi, &ev)
                {
                    err = Some(e);
                }
            };
            while dec.next_block(q, keep, &mut |ev| take(w, ev)) {
                dec.decode_block(q, keep, &mut |ev| take(w, ev));
                if w.one_channel {
                    w.process(qi, 0)?;
                }
                q.drained_all();
            }
            if let Some(e) = err.take() {
                return Err(e);
            }
            if single {
                // The end of the queue's data, as the timed way ends it.
                w.process_all(qi)?;
            }
        }
        return Ok(());
    }
    let mut queues = dec.perf_queues().map_err(io::Error::other)?;
    w.set_queues(queues.len());
    w.stale_flush = order.drop_held_at_buffer_end;
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
    // perf ends the timed decode with each queue's `cs_etm__end_block`: the branch stack
    // left after the last flush goes in one more instruction sample.
    for qi in 0..queues.len() {
        w.end_blocks(qi)?;
    }
    Ok(())
}

/// Decodes `dec`'s recording as `perf script` would for `itrace` (in perf's order, see
/// [`write_in_perf_order`]) and returns the injected file with the number of samples made
/// (`hw_index`: see [`crate::inject::SampleLayout::new`]).
/// `modifier` names the new events (`uH` gives `instructions:uH`), as perf names them from
/// the trace event's attribute (see [`event_modifier`]).
pub fn inject(
    dec: &mut RecordingDecoder<'_, '_>,
    itrace: Itrace,
    order: PerfOrder,
    hw_index: bool,
    progress: &mut dyn FnMut(u64),
) -> crate::error::Result<(Vec<u8>, usize)> {
    let rec = dec.recording();
    let timeless = order.timeless || is_timeless(rec);
    let modifier = rec.attrs().first().map(|a| event_modifier(a.flags)).unwrap_or_default();
    let layout = crate::inject::SampleLayout::new(rec, &itrace, timeless, &modifier, hw_index)?;
    let model = dec.model().clone();
    let mut w = ScriptWriter::new(
        &model,
        dec.cpus().len(),
        std::io::sink(),
        itrace,
        Fields::default(),
        &modifier,
        &[],
        if timeless { None } else { perf_sample_time(rec) },
    );
    w.make_records(SampleRecords::new(layout.clone()));
    let order = PerfOrder { timeless, ..order };
    write_in_perf_order(dec, &mut w, order, progress).map_err(|e| crate::error::Error::Io {
        path: "(samples)".into(),
        source: e,
    })?;
    let samples = w.take_records().unwrap_or_else(|| SampleRecords::new(layout));
    Ok((crate::inject::write_injected(dec.recording(), &samples)?, samples.len()))
}

#[cfg(test)]
mod tests {
    use super::demangle;

    /// The names Debian's perf 6.1 printed for these symbols (an ELF whose symbols were
    /// renamed to them, decoded by `perf script -F ip,sym`): no parameters, no return type.
    #[test]
    fn demangled_as_perf_shows_them() {
        for (mangled, shown) in [
            ("_ZN1a1b1cEi", "a::b::c"),
            ("_Z1fPKc", "f"),
            ("_ZN1AC2Ev", "A::A"),
            ("_ZN1aIiE1fE", "a<int>::f"),
            ("_ZN1A1gEv", "A::g"),
            ("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"),
        ] {
            assert_eq!(demangle(mangled).as_deref(), Some(shown), "{mangled}");
        }
        assert_eq!(demangle("main"), None);
        assert_eq!(demangle("_Zgarbage"), None);
    }
}
