//! Decoding the trace IDs of one formatted capture on worker threads, with
//! everything delivered in the order of the serial decode.
//!
//! A formatted capture interleaves the streams of several trace sources
//! (usually one per core); each is decoded on its own, so the streams can
//! be decoded at the same time. Each worker thread builds its own decode
//! tree (the caller's `build` function, run on the worker) and decodes a
//! share of the trace IDs, chosen to balance the bytes each worker
//! decodes. Every worker's tree sees the whole capture, in the same blocks
//! as a serial decode would, and skips the IDs that are not its own.
//!
//! What the decoders output (generic elements, and text written to the
//! worker's logger: packet listings, error messages) is captured with the
//! tree's [`SerialKey`] at the time: which block of which ID the tree was
//! handing on. In a serial decode everything output for one block comes
//! after everything output for the blocks before it, so merging the
//! workers' outputs by key gives back the serial order exactly; within a
//! worker the order is kept as it came. The capture is read and decoded
//! in rounds, a few rounds ahead of the merge, so memory stays bounded
//! whatever the capture's size.
//!
//! The merged output goes to a [`ParallelSink`] on the calling thread:
//! elements with the indices and trace IDs of the serial decode, and the
//! text in between. A sink that answers `Wait` is flushed before the next
//! element. A fatal error stops the decode where the serial decode would
//! have stopped: output from later blocks is dropped.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};

use crate::datapath::SerialKey;
use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::deformatter::{FrameDeformatter, IdStreamSink};
use crate::element::TraceElement;
use crate::errcode::ErrCode;
use crate::error::Error;
use crate::interfaces::{TrcDataIn, TrcGenElemIn};
use crate::logger::{MsgLogger, TextMark};
use crate::shared::{Shared, shared};
use crate::tree::{DecodeTree, SourceFormat};

/// Receives the merged output of a parallel decode, in serial order.
pub trait ParallelSink {
    /// Text the decoders wrote to their logger (packet listings, errors).
    fn text(&mut self, text: &str);
    /// A generic element, as a serial decode would have delivered it.
    fn element(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp;
    /// Called after [`element`](Self::element) answered `Wait`, before the
    /// next element: the flush of a serial decode.
    fn flush(&mut self) {}
}

/// What a worker's `build` function is given to set its tree up with.
pub struct WorkerSetup {
    /// The worker's number, from 0.
    pub worker: usize,
    /// The logger the worker's packet printers and error output must write
    /// to: its text is merged into the output in serial order.
    pub logger: Shared<MsgLogger>,
}

/// How a parallel decode ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParallelOutcome {
    /// `Cont`, or the fatal response that stopped the decode.
    pub resp: DatapathResp,
    /// Bytes of the capture processed (where a fatal error stopped it).
    pub processed: u64,
    /// With a fatal error: the last error the failing decoder logged
    /// (what OpenCSD's lister prints).
    pub last_error: Option<String>,
    /// With a fatal error: its reason, the last error the failing tree
    /// raised, logged or not (see [`ErrorLogger::last_reason`]).
    ///
    /// [`ErrorLogger::last_reason`]: crate::logger::ErrorLogger::last_reason
    pub reason: Option<String>,
}

/// Options of a parallel decode.
#[derive(Clone, Copy, Debug)]
pub struct ParallelOptions {
    /// Worker threads (at most one per trace ID is used).
    pub threads: usize,
    /// Bytes handed to the tree at a time: the serial decode's block size
    /// (what decoders see of a block boundary stays the same).
    pub block: usize,
    /// Blocks per round.
    pub blocks_per_round: usize,
    /// Deliver the generic elements to the sink (copied from the workers).
    /// Off: each worker's tree keeps the element output its `build` gave
    /// it (a printer writing to [`WorkerSetup::logger`], say), and only
    /// text is merged — cheaper when the elements end up as text anyway.
    pub deliver_elements: bool,
}

impl Default for ParallelOptions {
    fn default() -> Self {
        ParallelOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            block: 1024,
            blocks_per_round: 8,
            deliver_elements: true,
        }
    }
}

/// One event of a worker's output, in the order it was output.
enum Event {
    Text(usize, usize),
    Elem(usize),
}

/// A worker's fatal stop: where, the response, the bytes processed, the
/// last error logged and the reason (see [`ParallelOutcome`]).
type FatalStop = (SerialKey, DatapathResp, u64, Option<String>, Option<String>);

/// A worker's output for one round.
#[derive(Default)]
struct Batch {
    text: String,
    /// Where each position's text starts in `text`.
    marks: Vec<TextMark>,
    /// Elements with their position and where they stand in `text`.
    elems: Vec<KeyedElement>,
    /// A fatal response (see [`FatalStop`]).
    fatal: Option<FatalStop>,
}

impl Batch {
    /// The output in order, each piece with its position.
    fn events(&self) -> Vec<(SerialKey, Event)> {
        let mut out = Vec::with_capacity(self.elems.len() + self.marks.len());
        let mut at = 0;
        let mut mark = 0;
        let text_to = |to: usize, out: &mut Vec<(SerialKey, Event)>, at: &mut usize, mark: &mut usize| {
            while *at < to {
                while *mark + 1 < self.marks.len() && self.marks[*mark + 1].1 <= *at {
                    *mark += 1;
                }
                let end = self.marks.get(*mark + 1).map_or(to, |m| m.1.min(to));
                let key = self.marks.get(*mark).map_or(SerialKey::default(), |m| m.0);
                out.push((key, Event::Text(*at, end)));
                *at = end;
            }
        };
        for (i, e) in self.elems.iter().enumerate() {
            text_to(e.1, &mut out, &mut at, &mut mark);
            out.push((e.0, Event::Elem(i)));
        }
        text_to(self.text.len(), &mut out, &mut at, &mut mark);
        out
    }
}

/// An element with the tree position it was output at, the length of the
/// logged text before it, its trace index and trace ID.
type KeyedElement = (SerialKey, usize, TrcIndex, u8, TraceElement);

/// The worker's element sink: elements with the tree position.
struct Capture {
    position: Shared<SerialKey>,
    logger: Shared<MsgLogger>,
    elems: Shared<Vec<KeyedElement>>,
}

impl TrcGenElemIn for Capture {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        let at = self.logger.borrow().captured().len();
        let key = *self.position.borrow();
        self.elems.borrow_mut().push((key, at, index, trace_id, *elem));
        DatapathResp::Cont
    }
}

/// Counts each trace ID's bytes (to share the IDs out evenly).
struct ByteCount([u64; 128]);

impl IdStreamSink for ByteCount {
    fn is_attached(&self, _id: u8) -> bool {
        true
    }
    fn id_data_in(&mut self, id: u8, _index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        self.0[id as usize & 0x7f] += data.len() as u64;
        (DatapathResp::Cont, data.len())
    }
    fn all_ids_op(&mut self, _op: DatapathOp, _index: TrcIndex) -> DatapathResp {
        DatapathResp::Cont
    }
}

/// Bytes of each trace ID in `rounds` of the capture.
fn id_bytes<'a>(format: SourceFormat, rounds: impl Iterator<Item = &'a [u8]>) -> ByteCount {
    let mut bytes = ByteCount([0; 128]);
    if let SourceFormat::Formatted(mut cfg) = format {
        if cfg.validate().is_err() {
            // As a tree left unconfigured reads it.
            cfg = crate::deformatter::DeformatterConfig::mem_aligned();
        }
        let mut d = FrameDeformatter::new(cfg);
        for data in rounds.filter(|r| !r.is_empty()) {
            let _ = d.trace_data_in(DatapathOp::Data, 0, data, &mut bytes);
        }
    }
    bytes
}

/// Whether decoding `ids` on worker threads can pay, judged by their bytes
/// in `sample` (the start of a capture in `format`): every worker
/// deformats the whole capture, so a worker is worth its cost only with a
/// fair part of the decoding, and when all but one of the IDs hold less
/// than an eighth of the bytes, [`decode_parallel`] uses one worker. A
/// caller may then as well decode on its own thread.
pub fn worth_sharing(format: SourceFormat, sample: &[u8], ids: &[u8]) -> bool {
    ids.len() > 1 && !one_worker(&id_bytes(format, std::iter::once(sample)), ids)
}

/// All but the busiest of `ids` hold less than an eighth of the bytes (or
/// there are none).
fn one_worker(bytes: &ByteCount, ids: &[u8]) -> bool {
    let of = |id: u8| bytes.0[id as usize & 0x7f];
    let total: u64 = ids.iter().map(|&id| of(id)).sum();
    let busiest = ids.iter().map(|&id| of(id)).max().unwrap_or(0);
    total == 0 || (total - busiest).saturating_mul(8) < total
}

/// Shares `ids` out among `workers`, balancing their bytes in `rounds`
/// (largest first, each to the least loaded worker).
fn share_ids(format: SourceFormat, rounds: &VecDeque<Vec<u8>>, ids: &[u8], workers: usize) -> Vec<Vec<u8>> {
    let bytes = id_bytes(format, rounds.iter().map(|r| r.as_slice()));
    let mut order: Vec<u8> = ids.to_vec();
    order.sort_by_key(|&id| (std::cmp::Reverse(bytes.0[id as usize & 0x7f]), id));
    let workers = if one_worker(&bytes, ids) { 1 } else { workers };
    let mut shares = vec![(0u64, Vec::new()); workers];
    for id in order {
        let least = shares.iter_mut().min_by_key(|s| s.0).expect("at least one worker");
        least.0 += bytes.0[id as usize & 0x7f].max(1);
        least.1.push(id);
    }
    shares
        .into_iter()
        .map(|(_, mut ids)| {
            ids.sort_unstable();
            ids
        })
        .filter(|ids| !ids.is_empty())
        .collect()
}

/// Bytes of the capture read to share the trace IDs out by.
const SHARE_SAMPLE: usize = 1 << 20;

enum Round {
    Data(u64, Arc<Vec<u8>>),
    End,
}

/// Decodes the capture read from `input` with the trace IDs `ids` shared
/// out among worker threads. `format` is the capture's format (a single
/// unformatted stream has one ID and is not split). `build` makes a
/// worker's tree, on the worker's thread; it must send its text output to
/// [`WorkerSetup::logger`]; its generic element output and ID filter are
/// set afterwards. Output goes to `sink` on this thread, in the serial
/// decode's order.
///
/// The first MiB of the capture is read before the work is shared out:
/// IDs are balanced by their bytes in it.
pub fn decode_parallel<B>(
    options: ParallelOptions,
    format: SourceFormat,
    ids: &[u8],
    input: &mut dyn Read,
    build: &B,
    sink: &mut dyn ParallelSink,
) -> Result<ParallelOutcome, Error>
where
    B: Fn(&WorkerSetup) -> Result<DecodeTree, Error> + Sync,
{
    if let Some(bad) = ids.iter().find(|&&id| id >= 0x80) {
        return Err(Error::code(
            ErrCode::InvalidId,
            format!("parallel decode: 0x{bad:02x} is not a trace ID (expected 0x00 to 0x7f)"),
        ));
    }
    let block = options.block.max(16);
    let round_len = block * options.blocks_per_round.max(1);
    let read_round = |input: &mut dyn Read| -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; round_len];
        let mut n = 0;
        while n < round_len {
            match input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::code(ErrCode::FileError, format!("reading trace: {e}"))),
            }
        }
        buf.truncate(n);
        Ok(buf)
    };
    // The IDs are shared out by their bytes in the first MiB or so: the
    // rounds read for that are decoded first.
    let mut ahead: VecDeque<Vec<u8>> = VecDeque::new();
    let mut sampled = 0usize;
    let mut input_ended = false;
    while sampled < SHARE_SAMPLE && !input_ended {
        let r = read_round(input)?;
        input_ended = r.len() < round_len;
        sampled += r.len();
        ahead.push_back(r);
    }
    let workers = options.threads.clamp(1, ids.len().max(1));
    let shares = share_ids(format, &ahead, ids, workers);

    std::thread::scope(|scope| -> Result<ParallelOutcome, Error> {
        let mut to_workers: Vec<SyncSender<Round>> = Vec::new();
        let mut from_workers: Vec<Receiver<Result<Batch, Error>>> = Vec::new();
        let mut recycle: Vec<Sender<Batch>> = Vec::new();
        for (w, share) in shares.iter().enumerate() {
            let (tx_round, rx_round) = sync_channel::<Round>(3);
            let (tx_batch, rx_batch) = channel::<Result<Batch, Error>>();
            let (tx_back, rx_back) = channel::<Batch>();
            to_workers.push(tx_round);
            from_workers.push(rx_batch);
            recycle.push(tx_back);
            let share = share.clone();
            let deliver_elements = options.deliver_elements;
            scope.spawn(move || worker(w, &share, block, deliver_elements, build, rx_round, tx_batch, rx_back));
        }
        let send_all = |r: &dyn Fn() -> Round| {
            for tx in &to_workers {
                let _ = tx.send(r());
            }
        };

        let mut outcome = ParallelOutcome {
            resp: DatapathResp::Cont,
            processed: 0,
            last_error: None,
            reason: None,
        };
        let mut start = 0u64;
        let mut in_flight = 0usize;
        let mut end_sent = false;
        loop {
            // Keep the workers a couple of rounds ahead of the merge.
            while in_flight < 2 && !end_sent {
                if ahead.is_empty() && !input_ended {
                    let r = read_round(input)?;
                    input_ended = r.len() < round_len;
                    ahead.push_back(r);
                }
                match ahead.pop_front() {
                    Some(data) if !data.is_empty() => {
                        let len = data.len() as u64;
                        let data = Arc::new(data);
                        send_all(&|| Round::Data(start, data.clone()));
                        start += len;
                    }
                    _ => {
                        send_all(&|| Round::End);
                        end_sent = true;
                    }
                }
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            let mut batches = Vec::with_capacity(from_workers.len());
            for rx in &from_workers {
                match rx.recv() {
                    Ok(b) => batches.push(b?),
                    Err(_) => return Err(Error::code(ErrCode::Fail, "a decode worker stopped")),
                }
            }
            in_flight -= 1;
            let fatal = batches
                .iter()
                .filter_map(|b| b.fatal.as_ref())
                .min_by_key(|f| f.0)
                .cloned();
            deliver(&batches, fatal.as_ref().map(|f| f.0), sink);
            // The workers fill their batches again: no allocation per round.
            for (b, tx) in batches.into_iter().zip(&recycle) {
                let _ = tx.send(b);
            }
            if let Some((_, resp, processed, err, reason)) = fatal {
                outcome = ParallelOutcome {
                    resp,
                    processed,
                    last_error: err,
                    reason,
                };
                break;
            }
        }
        drop(to_workers);
        if !outcome.resp.is_fatal() {
            outcome.processed = start;
        }
        Ok(outcome)
    })
}

/// Merges one round's batches by position and hands them to the sink;
/// with a fatal error at `cut`, nothing after it. A worker's output is
/// taken run by run: everything before the next position of any other
/// worker goes at once.
fn deliver(batches: &[Batch], cut: Option<SerialKey>, sink: &mut dyn ParallelSink) {
    let events: Vec<Vec<(SerialKey, Event)>> = batches.iter().map(Batch::events).collect();
    let mut at = vec![0usize; events.len()];
    let limit = cut.unwrap_or(SerialKey {
        index: TrcIndex::MAX,
        chunk: u8::MAX,
        trace_id: u8::MAX,
    });
    loop {
        // The worker with the earliest next position, and the earliest
        // position any other worker has next.
        let mut best: Option<(usize, SerialKey)> = None;
        let mut bound = limit;
        for (w, ev) in events.iter().enumerate() {
            if let Some((k, _)) = ev.get(at[w]) {
                match best {
                    Some((_, b)) if *k >= b => bound = bound.min(*k),
                    _ => {
                        if let Some((_, b)) = best {
                            bound = bound.min(b);
                        }
                        best = Some((w, *k));
                    }
                }
            }
        }
        let Some((w, first)) = best else { break };
        if first > limit {
            break;
        }
        let b = &batches[w];
        let ev = &events[w];
        while let Some((k, e)) = ev.get(at[w]) {
            if *k > bound {
                break;
            }
            match *e {
                Event::Text(s, e) => sink.text(&b.text[s..e]),
                Event::Elem(i) => {
                    let (_, _, index, id, ref elem) = b.elems[i];
                    if sink.element(index, id, elem).is_wait() {
                        sink.flush();
                    }
                }
            }
            at[w] += 1;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn worker<B>(
    worker: usize,
    ids: &[u8],
    block: usize,
    deliver_elements: bool,
    build: &B,
    rounds: Receiver<Round>,
    out: Sender<Result<Batch, Error>>,
    recycled: Receiver<Batch>,
) where
    B: Fn(&WorkerSetup) -> Result<DecodeTree, Error> + Sync,
{
    // The logger notes the tree's position: the tree is given the
    // logger's position cell once it is built.
    let position = shared(SerialKey::default());
    let logger = shared(MsgLogger::capture_keyed(position.clone()));
    let mut tree = match build(&WorkerSetup {
        worker,
        logger: logger.clone(),
    }) {
        Ok(t) => t,
        Err(e) => {
            let _ = out.send(Err(e));
            return;
        }
    };
    tree.set_serial_position(position.clone());
    if worker > 0
        && let Some(d) = tree.deformatter_mut()
    {
        // Every worker reads every frame: the first one reports what is
        // wrong with them.
        d.set_error_link(crate::logger::ErrLink::new(
            &shared(crate::logger::ErrorLogger::default()),
            "DFMT_CSFRAMES",
        ));
    }
    let tree_position = position;
    // What building wrote is the main thread's to say.
    let _ = logger.borrow_mut().take_keyed();
    let elems = shared(Vec::new());
    if deliver_elements {
        tree.set_gen_elem_out(Box::new(Capture {
            position: tree_position.clone(),
            logger: logger.clone(),
            elems: elems.clone(),
        }));
    }
    // decode_parallel refused IDs of 0x80 and more before any worker began.
    let _ = tree.set_id_filter(Some(ids));

    let mut stopped = false;
    while let Ok(round) = rounds.recv() {
        let mut fatal = None;
        if !stopped {
            match round {
                Round::Data(start, data) => {
                    let mut at = 0usize;
                    'blocks: while at < data.len() {
                        let end = (at + block).min(data.len());
                        let mut done = at;
                        let mut resp = DatapathResp::Cont;
                        while done < end || resp.is_wait() {
                            if resp.is_wait() {
                                resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
                            } else {
                                let (r, used) =
                                    tree.trace_data_in(DatapathOp::Data, start + done as u64, &data[done..end]);
                                resp = r;
                                done += used;
                                if used == 0 && r.is_cont() {
                                    break;
                                }
                            }
                            if resp.is_fatal() {
                                let log = tree.error_logger().borrow();
                                let err = log.last_error().map(|e| e.to_string());
                                let reason = log.last_reason().map(|e| e.to_string());
                                drop(log);
                                fatal = Some((*tree_position.borrow(), resp, start + done as u64, err, reason));
                                stopped = true;
                                break 'blocks;
                            }
                        }
                        at = end;
                    }
                }
                Round::End => {
                    let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
                    while r.is_wait() {
                        r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
                        if r.is_cont() {
                            r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
                        }
                    }
                }
            }
        }
        let (text, marks) = logger.borrow_mut().take_keyed();
        let mut batch = Batch {
            text,
            marks,
            elems: std::mem::take(&mut *elems.borrow_mut()),
            fatal,
        };
        if out.send(Ok(batch)).is_err() {
            return;
        }
        // Reuse a batch the merge is done with.
        if let Ok(b) = recycled.try_recv() {
            batch = b;
            batch.elems.clear();
            *elems.borrow_mut() = batch.elems;
        }
    }
}
