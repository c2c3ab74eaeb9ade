//! Listing text formatted on other threads, written in order.
//!
//! A listing's elements outnumber its other lines, and turning them into
//! text costs more than decoding them. [`FormatPool`] takes that work off
//! the decoding thread: installed in a [`MsgLogger`] (see
//! [`MsgLogger::set_batcher`]), it gathers what is written into batches:
//! text written as usual (packet lines, messages) and elements as they
//! are, in the order they came. Each full batch goes to one of the
//! formatter threads, which writes the batch's listing into the batch's
//! own buffer and then, when every earlier batch is out, writes it
//! itself: the text goes out while it is still in that core's cache, and
//! with one formatter (`-threads 2`) no batch waits its turn. The bytes
//! are those the serial listing writes.
//!
//! Memory is bounded: a fixed number of batches exist, and the decoding
//! thread waits for one to come back when all are in flight.

use std::any::Any;
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, channel, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::arch::{InstrSubType, InstrType, Isa};
use crate::datapath::TrcIndex;
use crate::element::{ElemType, TraceElement};
use crate::logger::{Destinations, MsgLogger, TextBatcher};
use crate::text::{TextBuf, TextOut};

/// Writes a line's `Idx:<index>; ID:<id>;` start.
#[inline(always)]
pub(crate) fn line_start<W: TextOut>(t: &mut W, index: TrcIndex, trace_id: u8) {
    t.put(b"Idx:");
    t.dec(index);
    t.put(b"; ID:");
    t.hex_u8(trace_id);
    t.ascii(b';');
}

/// Writes an element's line.
#[inline]
pub(crate) fn write_elem_line(t: &mut TextBuf, index: TrcIndex, trace_id: u8, elem: &TraceElement) {
    let mut l = t.line();
    l.idx_start(index, trace_id);
    l.ascii(b' ');
    elem.write_text(&mut l);
    l.ascii(b'\n');
    if !l.finish() {
        line_start(t, index, trace_id);
        t.ascii(b' ');
        elem.write_text(t);
        t.ascii(b'\n');
    }
}

/// Items in a batch before it is sent.
const BATCH_ITEMS: usize = 8192;
/// Text in a batch before it is sent.
const BATCH_TEXT: usize = 1 << 17;

/// What a batch holds, in order.
#[derive(Clone, Copy)]
enum Item {
    /// Text written up to this offset of the batch's text.
    Text(usize),
    /// INSTR_RANGE elements' lines: the batch's `ranges` up to this
    /// position. A run of ranges is one item, and each range is only what
    /// its text needs (a fifth of the element: less to copy on the
    /// decoding thread, and to move between cores).
    Ranges(usize),
    /// Any other element's line: the element is in the batch's `elems`
    /// (kept out of the items, which are copied whole).
    Elem(usize),
}

/// The fields of an INSTR_RANGE element its line shows. In a fixed
/// order, grouped as the compiler lays them out in `TraceElement` today
/// (flags, then subtype, type and ISA), so that neighbours are copied
/// together instead of byte by byte and reshuffled.
#[derive(Clone, Copy)]
#[repr(C)]
struct RangeText {
    st_addr: u64,
    en_addr: u64,
    num_instr_range: u32,
    cycle_count: u32,
    has_cc: bool,
    last_instr_exec: bool,
    last_instr_cond: bool,
    last_i_subtype: InstrSubType,
    last_i_type: InstrType,
    isa: Isa,
    last_instr_sz: u8,
    trace_id: u8,
}

impl RangeText {
    #[inline(always)]
    fn of(trace_id: u8, e: &TraceElement) -> RangeText {
        RangeText {
            st_addr: e.st_addr,
            en_addr: e.en_addr,
            num_instr_range: e.num_instr_range,
            cycle_count: e.cycle_count,
            trace_id,
            last_instr_sz: e.last_instr_sz,
            isa: e.isa,
            last_i_type: e.last_i_type,
            last_i_subtype: e.last_i_subtype,
            last_instr_exec: e.last_instr_exec,
            last_instr_cond: e.last_instr_cond,
            has_cc: e.has_cc,
        }
    }

    /// Makes `e`, an INSTR_RANGE element, print as the one these fields
    /// came from (an element reused from line to line: only the fields a
    /// range's line shows are written).
    #[inline(always)]
    fn fill(&self, e: &mut TraceElement) {
        e.st_addr = self.st_addr;
        e.en_addr = self.en_addr;
        e.num_instr_range = self.num_instr_range;
        e.cycle_count = self.cycle_count;
        e.last_instr_sz = self.last_instr_sz;
        e.isa = self.isa;
        e.last_i_type = self.last_i_type;
        e.last_i_subtype = self.last_i_subtype;
        e.last_instr_exec = self.last_instr_exec;
        e.last_instr_cond = self.last_instr_cond;
        e.has_cc = self.has_cc;
    }
}

/// A batch: what was written, and (once formatted) its listing.
struct Batch {
    seq: u64,
    text: TextBuf,
    items: Vec<Item>,
    ranges: Vec<(TrcIndex, RangeText)>,
    elems: Vec<(TrcIndex, u8, TraceElement)>,
    /// Text of `text` already covered by an `Item::Text`.
    marked: usize,
    out: TextBuf,
    /// `out` holds the batch's listing already (formatted by the
    /// decoding thread, which had no free batch to go on with).
    formatted: bool,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            seq: 0,
            text: TextBuf::with_capacity(BATCH_TEXT + 4096),
            items: Vec::with_capacity(BATCH_ITEMS + 1),
            ranges: Vec::with_capacity(BATCH_ITEMS),
            elems: Vec::new(),
            marked: 0,
            out: TextBuf::with_capacity(4 * BATCH_TEXT),
            formatted: false,
        }
    }

    /// Notes the text written since the last item.
    #[inline]
    fn mark_text(&mut self) {
        if self.text.len() > self.marked {
            self.marked = self.text.len();
            self.items.push(Item::Text(self.marked));
        }
    }

    fn is_full(&self) -> bool {
        self.items.len() + self.ranges.len() >= BATCH_ITEMS || self.text.len() >= BATCH_TEXT
    }

    /// Writes the batch's listing into `out`.
    fn format(&mut self) {
        self.out.clear();
        let mut from = 0;
        let mut next_range = 0;
        let mut range = TraceElement::new(ElemType::InstrRange);
        for item in &self.items {
            match item {
                Item::Text(end) => {
                    self.out.put_range(&self.text, from, *end);
                    from = *end;
                }
                Item::Ranges(end) => {
                    for (index, r) in self.ranges.get(next_range..*end).unwrap_or_default() {
                        r.fill(&mut range);
                        write_elem_line(&mut self.out, *index, r.trace_id, &range);
                    }
                    next_range = *end;
                }
                Item::Elem(n) => {
                    if let Some((index, id, elem)) = self.elems.get(*n) {
                        write_elem_line(&mut self.out, *index, *id, elem);
                    }
                }
            }
        }
    }

    /// Formats the batch on this thread: a formatter only writes it.
    fn format_here(&mut self) {
        self.format();
        self.formatted = true;
    }

    fn reset(&mut self) {
        self.text.clear();
        self.items.clear();
        self.ranges.clear();
        self.elems.clear();
        self.marked = 0;
        self.out.clear();
        self.formatted = false;
    }
}

/// How far the writing has got: batches written (all with `seq` below),
/// and where they go (`None` once the pool has stopped and taken them
/// back, or after a formatter panicked while writing).
struct Progress {
    written: Mutex<(u64, Option<Destinations>)>,
    cond: Condvar,
}

/// Formats elements on worker threads; see the [module docs](self).
pub struct FormatPool {
    cur: Box<Batch>,
    next_seq: u64,
    to_format: Option<Sender<Box<Batch>>>,
    free: Receiver<Box<Batch>>,
    progress: Arc<Progress>,
    threads: Vec<JoinHandle<()>>,
    /// Every batch is formatted on the decoding thread (tests: the path
    /// taken when no batch is free, made certain).
    format_here: bool,
}

impl FormatPool {
    /// A pool of `formatters` threads (at least one), each writing the
    /// batches it formats to `dest` in batch order, with
    /// `2 * formatters + 4` batches.
    pub fn new(formatters: usize, dest: Destinations) -> FormatPool {
        Self::with_batches(formatters, 2 * formatters + 4, dest)
    }

    /// [`new`](Self::new) with `batches` batches (at least two: the one
    /// being filled, and one in flight or free).
    fn with_batches(formatters: usize, batches: usize, dest: Destinations) -> FormatPool {
        let formatters = formatters.max(1);
        let batches = batches.max(2);
        let (to_format, format_rx) = channel::<Box<Batch>>();
        let format_rx = Arc::new(Mutex::new(format_rx));
        let (free_tx, free) = sync_channel::<Box<Batch>>(batches);
        for _ in 0..batches - 1 {
            let _ = free_tx.send(Box::new(Batch::new()));
        }
        let progress = Arc::new(Progress {
            written: Mutex::new((0, Some(dest))),
            cond: Condvar::new(),
        });
        let threads = (0..formatters)
            .map(|n| {
                let rx = format_rx.clone();
                let free = free_tx.clone();
                let p = progress.clone();
                std::thread::Builder::new()
                    .name(format!("listing-format-{n}"))
                    .spawn(move || format_loop(&rx, &free, &p))
                    .expect("spawn a formatter thread")
            })
            .collect();
        FormatPool {
            cur: Box::new(Batch::new()),
            next_seq: 0,
            to_format: Some(to_format),
            free,
            progress,
            threads,
            format_here: false,
        }
    }

    /// Adds an element's line.
    #[inline]
    pub(crate) fn elem(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) {
        self.elems(trace_id, std::slice::from_ref(&(index, *elem)));
    }

    /// Adds the lines of a run of elements of `trace_id`.
    pub(crate) fn elems(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) {
        for chunk in elems.chunks(BATCH_ITEMS) {
            self.cur.mark_text();
            let batch = &mut *self.cur;
            batch.ranges.reserve(chunk.len());
            // A run of ranges is marked by one item, when it ends.
            let mut in_run = false;
            for (index, e) in chunk {
                if e.elem_type == ElemType::InstrRange {
                    batch.ranges.push((*index, RangeText::of(trace_id, e)));
                    in_run = true;
                } else {
                    if in_run {
                        batch.items.push(Item::Ranges(batch.ranges.len()));
                        in_run = false;
                    }
                    batch.elems.push((*index, trace_id, *e));
                    batch.items.push(Item::Elem(batch.elems.len() - 1));
                }
            }
            if in_run {
                batch.items.push(Item::Ranges(batch.ranges.len()));
            }
            if batch.items.len() + batch.ranges.len() >= BATCH_ITEMS {
                self.send();
            }
        }
    }

    /// Sends the current batch to be formatted and takes a free one.
    #[inline(never)]
    fn send(&mut self) {
        self.cur.mark_text();
        if self.cur.items.is_empty() {
            return;
        }
        let next = match self.free.try_recv() {
            Ok(next) => {
                if self.format_here {
                    self.cur.format_here();
                }
                next
            }
            Err(TryRecvError::Empty) => {
                // Every batch is in flight: the formatters are behind.
                // This thread formats the batch instead of waiting, and
                // a formatter only writes it; the work shares itself out
                // between the threads as their speeds are.
                self.cur.format_here();
                match self.free.recv() {
                    Ok(next) => next,
                    // The formatters have gone (they never end first):
                    // keep the batch.
                    Err(_) => return,
                }
            }
            Err(TryRecvError::Disconnected) => return,
        };
        let mut full = std::mem::replace(&mut self.cur, next);
        full.seq = self.next_seq;
        self.next_seq += 1;
        if let Some(tx) = &self.to_format {
            let _ = tx.send(full);
        }
    }

    /// Stops the threads and gives back the destinations.
    fn stop(&mut self) -> Option<Destinations> {
        self.send();
        self.to_format = None;
        if self.threads.is_empty() {
            return None;
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.progress.written.lock().ok().and_then(|mut w| w.1.take())
    }

    /// Whether a formatter thread is still running.
    fn formatting(&self) -> bool {
        self.threads.iter().any(|t| !t.is_finished())
    }
}

/// A formatter thread: takes batches in turn, formats each, waits until
/// every earlier batch is written, then writes it.
fn format_loop(rx: &Mutex<Receiver<Box<Batch>>>, free: &SyncSender<Box<Batch>>, progress: &Progress) {
    // Should formatting panic, the batches after this one would wait
    // for ever: the guard tells them to give up.
    struct GiveUp<'a>(&'a Progress);
    impl Drop for GiveUp<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                if let Ok(mut w) = self.0.written.lock() {
                    w.1 = None;
                }
                self.0.cond.notify_all();
            }
        }
    }
    let _guard = GiveUp(progress);
    loop {
        let batch = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok(mut batch) = batch else { return };
        if !batch.formatted {
            batch.format();
        }
        let Ok(mut w) = progress.written.lock() else { return };
        // Batches are taken from the queue in order, so the batch whose
        // turn it is has been taken by a formatter that is not waiting.
        while w.0 != batch.seq && w.1.is_some() {
            w = match progress.cond.wait(w) {
                Ok(w) => w,
                Err(_) => return,
            };
        }
        let Some(dest) = w.1.as_mut() else { return };
        dest.write_all(batch.out.as_bytes());
        dest.flush();
        w.0 += 1;
        drop(w);
        progress.cond.notify_all();
        batch.reset();
        if free.send(batch).is_err() {
            return;
        }
    }
}

impl TextBatcher for FormatPool {
    #[inline]
    fn text(&mut self) -> &mut TextBuf {
        if self.cur.is_full() {
            self.send();
        }
        &mut self.cur.text
    }

    fn flush(&mut self) {
        self.send();
        let target = self.next_seq;
        if let Ok(mut w) = self.progress.written.lock() {
            while w.0 < target && self.formatting() {
                // Timed, so that formatters that stopped are noticed.
                w = match self.progress.cond.wait_timeout(w, std::time::Duration::from_millis(50)) {
                    Ok((w, _)) => w,
                    Err(_) => return,
                };
            }
        }
    }

    fn finish(&mut self) -> Option<Destinations> {
        self.stop()
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl Drop for FormatPool {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The format pool a logger hands its text to, if any.
pub(crate) fn pool_of(out: &mut MsgLogger) -> Option<&mut FormatPool> {
    out.batcher_mut()?.as_any_mut().downcast_mut::<FormatPool>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text and element lines mixed over many batches: the file a pool
    /// writes is the one the logger writes alone.
    #[test]
    fn a_pool_writes_what_the_logger_writes() {
        let dir = std::env::temp_dir().join(format!("format-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |log: &mut MsgLogger| {
            let mut e = TraceElement::new(ElemType::InstrRange);
            let mut run = Vec::new();
            for i in 0..50_000u64 {
                e.st_addr = 0x1000 + i * 4;
                e.en_addr = e.st_addr + 8;
                e.num_instr_range = (i % 7) as u32;
                e.has_cc = i % 4 == 0;
                e.cycle_count = i as u32;
                e.isa = if i % 3 == 0 { Isa::Thumb2 } else { Isa::Aarch64 };
                e.last_instr_exec = i % 2 == 0;
                // Runs of ranges with other kinds among them, at the start,
                // middle and end of a run: each run ends up in order.
                run.push((i / 3, e));
                if i % 11 == 0 {
                    let mut ts = TraceElement::new(ElemType::Timestamp);
                    ts.timestamp = i;
                    run.push((i / 3, ts));
                }
                if i % 6 != 5 {
                    continue;
                }
                match pool_of(log) {
                    Some(p) => p.elems(0x10, &run),
                    None => {
                        for (index, e) in &run {
                            write_elem_line(log.text(), *index, 0x10, e);
                        }
                    }
                }
                run.clear();
                if i % 5 == 0 {
                    log.log_msg("a message\n");
                }
                if i % 10_000 == 0 {
                    log.flush();
                }
            }
        };
        let serial = dir.join("serial.txt");
        let mut log = MsgLogger::none();
        log.set_file(&serial).unwrap();
        write(&mut log);
        drop(log);
        // `here`: the decoding thread formats every batch (as it does
        // when none is free) and the formatters only write.
        for (formatters, batches, here) in [(1, 6, false), (3, 10, false), (1, 2, true), (2, 3, true)] {
            let pooled = dir.join(format!("pool{formatters}-{batches}-{here}.txt"));
            let mut log = MsgLogger::none();
            log.set_file(&pooled).unwrap();
            assert!(log.set_batcher(|d| {
                let mut pool = FormatPool::with_batches(formatters, batches, d);
                pool.format_here = here;
                Box::new(pool)
            }));
            assert!(pool_of(&mut log).is_some());
            write(&mut log);
            log.end_batcher();
            assert!(pool_of(&mut log).is_none());
            log.log_msg("after\n");
            drop(log);
            let mut want = std::fs::read(&serial).unwrap();
            want.extend_from_slice(b"after\n");
            assert!(
                std::fs::read(&pooled).unwrap() == want,
                "{formatters} formatters, {batches} batches, formatted here: {here}"
            );
        }
        // A capturing logger keeps its text itself.
        let mut cap = MsgLogger::capture();
        assert!(!cap.set_batcher(|d| Box::new(FormatPool::new(1, d))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
