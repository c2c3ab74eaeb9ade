//! Decoding from an indexed point: one trace ID's window, one stream split
//! over threads, several IDs merged by time.
//!
//! # Starting at a sync point
//!
//! The tree is told to begin at byte `N` for one ID
//! ([`DecodeTree::set_id_window`]): the decoder sees only that ID's bytes
//! from `N` on, so its packet processor starts on the sync packet at `N`.
//! A formatted capture must still be deformatted from a frame boundary
//! with the right trace ID in effect: the source index's checkpoint at or
//! before `N` gives both ([`DecodeTree::resume_at_frame`]); at most one
//! block of the source index's granularity is deformatted for nothing.
//!
//! # What a decoder cannot know at its first sync point
//!
//! Elements compare as the listing prints them (index, trace ID and the
//! element's text): fields an element type does not print are decoder
//! scratch and may differ (an instruction range's exception number, say).
//!
//! A decoder started at a sync point knows nothing of what came before
//! it: it reports `NO_SYNC` first; it has no context and, for PTM / ETMv3,
//! no address until the I-sync; speculation pending at the sync point
//! (ETMv4/ETE), the return stack, the timestamp and cycle count, the STM
//! master's validity are unknown. So a window or a piece is decoded from
//! one sync point earlier ([`CaptureIndex::warm_start`]): by the sync
//! point at or before the window (or the piece's start) the decoder has
//! the serial decode's state again, and the elements before the window
//! are dropped. Windows from a sync point, windows a few bytes after one,
//! and the pieces of a split decode then have the serial decode's
//! elements exactly; `tests/index.rs` checks it on the corpus (ETMv4
//! `bugfix-exact-match`, PTM with a return stack, PTM / ETMv3, ETE, STM).
//!
//! Where exactness cannot be had:
//!
//! - at the stream's first sync point there is nothing before to start
//!   from: a window or piece starting there reports `NO_SYNC` at the sync
//!   point (a decode from the start of the capture reports it at its
//!   first packet, which may come earlier) and may differ up to its first
//!   `PE_CONTEXT` element as described above;
//! - ITM's cumulative timestamp adds up every local timestamp since the
//!   start: an ITM window or piece is decoded from the stream's first sync
//!   point (exact, at the cost of the bytes before it);
//! - state that lasts longer than one interval between sync points: the
//!   PTM / ETMv3 VMID is recovered (the index keeps their VMID packets,
//!   and the decoder is given the last one before its start:
//!   [`CaptureIndex::resume_state`], [`DecodeTree::resume_id_state`]);
//!   return stacks are flushed at every sync point (ETMv4/ETE trace info,
//!   PTM I-sync), so none crosses one; an STM master and channel set
//!   before an ASYNC that no VERSION packet follows (VERSION resets them)
//!   are still unknown.
//!
//! STM sync points may start in the high nibble of a byte: the index
//! records where ([`crate::hooks::EntryKind::Sync`]) and the decoder starts
//! there ([`DecodeTree::start_id_at_high_nibble`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::reader::{ByteWindow, Piece};
use super::{CaptureIndex, EntryKind};
use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::element::{ElemType, TraceElement};
use crate::errcode::ErrCode;
use crate::error::Error;
use crate::interfaces::{TrcDataIn, TrcGenElemIn};
use crate::shared::{Shared, shared};
use crate::tree::{DecodeTree, SourceFormat};

/// A window of one trace ID's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Elements with `from <= index < to`.
    Bytes {
        /// First index.
        from: TrcIndex,
        /// End index (exclusive).
        to: TrcIndex,
    },
    /// Elements whose time (the last timestamp the decoder reported before
    /// or with them) is within `from_ts..=to_ts`.
    Time {
        /// First time.
        from_ts: u64,
        /// Last time (inclusive).
        to_ts: u64,
    },
}

/// A decoded element: its index, trace ID, and the element.
pub type Element = (TrcIndex, u8, TraceElement);

/// What [`decode_window`] found.
#[derive(Clone, Debug)]
pub struct WindowDecode {
    /// The byte window decoded. When nothing could be decoded
    /// ([`WindowDecode::note`] says why), `start` is the window's `from`.
    pub window: ByteWindow,
    /// The window's elements, in decode order.
    pub elements: Vec<Element>,
    /// Set when the answer is empty for a reason other than the stream
    /// having no elements there; `None` for a window that was decoded.
    pub note: Option<WindowNote>,
    /// The fatal decode error that stopped the decode inside the window,
    /// in words: `elements` are those decoded before it.
    pub error: Option<String>,
}

/// Why [`decode_window`] decoded nothing: not an error, an empty answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowNote {
    /// The byte window ends at or before the trace ID's first indexed sync
    /// point (`first_sync`; `None`: the ID has none). A decoder cannot
    /// start before a sync point: the serial decode has at most its
    /// initial `NO_SYNC` element there, and no packet is decoded.
    BeforeFirstSync {
        /// The ID's first sync point, if it has one.
        first_sync: Option<TrcIndex>,
    },
}

impl std::fmt::Display for WindowNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowNote::BeforeFirstSync { first_sync: Some(s) } => write!(
                f,
                "the window ends before the trace ID's first sync point (byte {s}): nothing there can be decoded"
            ),
            WindowNote::BeforeFirstSync { first_sync: None } => {
                write!(f, "the trace ID has no sync point: nothing can be decoded")
            }
        }
    }
}

/// Collects elements for the decode loop to drain after each block.
struct Collect(Shared<Vec<Element>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, trace_id, *elem));
        DatapathResp::Cont
    }
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        // A run at once: one lock, not one per element.
        self.0
            .borrow_mut()
            .extend(elems.iter().map(|(i, e)| (*i, trace_id, *e)));
        (DatapathResp::Cont, elems.len())
    }
}

/// The time an element sets, if any.
pub fn element_time(e: &TraceElement) -> Option<u64> {
    (e.elem_type == ElemType::Timestamp || e.has_ts).then_some(e.timestamp)
}

/// Decodes trace ID `id` with `tree` (a full-decode tree for the capture,
/// fresh) from the sync point `start` up to (not including) byte `end` of
/// its stream, handing each element to `each`.
pub(crate) fn decode_range(
    ix: &CaptureIndex,
    data: &[u8],
    id: u8,
    start: TrcIndex,
    end: TrcIndex,
    mut tree: DecodeTree,
    each: &mut dyn FnMut(&Element),
) -> Result<(), Error> {
    let out = shared(Vec::new());
    tree.set_gen_elem_out(Box::new(Collect(out.clone())));
    // Blocks of 16 KiB: the elements are handed on after each, so the
    // collection stays small.
    feed_range(ix, data, id, start, end, &mut tree, 16 * 1024, &mut || {
        let mut got = out.borrow_mut();
        got.iter().for_each(&mut *each);
        got.clear();
    })
}

/// Sets `tree` up to decode trace ID `id` from the sync point `start` up
/// to (not including) byte `end` of its stream, feeds it the capture's
/// bytes for that in blocks of `block` bytes, calling `drained` after each
/// block and after the end of trace.
#[allow(clippy::too_many_arguments)]
fn feed_range(
    ix: &CaptureIndex,
    data: &[u8],
    id: u8,
    start: TrcIndex,
    end: TrcIndex,
    tree: &mut DecodeTree,
    block: usize,
    drained: &mut dyn FnMut(),
) -> Result<(), Error> {
    // A sync point in the high nibble of a byte (STM): the decoder starts
    // at that byte, its low nibble skipped.
    let high_nibble = ix
        .stream(id)
        .and_then(|s| {
            s.in_range(start..start.saturating_add(1))
                .iter()
                .find(|e| e.kind == EntryKind::Sync)
        })
        // Listed at the next byte: the serial decoder met it with the high
        // nibble held, as the decoder is made to (listed at its own byte,
        // it was found while unsynchronised, as it is from that byte).
        .filter(|e| e.value & 1 == 1 && e.value >> 1 < start)
        .map(|e| e.value >> 1);
    let begin = high_nibble.unwrap_or(start);
    let (feed_from, feed_to, align) = match tree.format() {
        SourceFormat::Formatted(cfg) => {
            tree.set_id_filter(Some(&[id])).map_err(|code| {
                Error::code(
                    code,
                    format!("index: 0x{id:02x} is not a trace ID (expected 0x00 to 0x7f)"),
                )
            })?;
            let cp = ix.source.as_ref().and_then(|s| s.checkpoint_before(begin));
            let from = match cp {
                Some(cp) => {
                    tree.resume_at_frame(cp.id)
                        .map_err(|e| Error::code(e, "resuming the deformatter"))?;
                    cp.frame
                }
                None => 0,
            };
            // Data of a frame can sit up to a frame (and its syncs) before
            // the frame's end: a margin past `end` delivers all of it.
            (from, end.saturating_add(64), cfg.alignment())
        }
        SourceFormat::Single => (begin, end, 1),
    };
    let slot = match tree.format() {
        SourceFormat::Formatted(_) => id,
        SourceFormat::Single => 0,
    };
    tree.set_id_window(slot, begin, end);
    tree.resume_id_state(slot, &ix.resume_state(id, begin))
        .map_err(|e| Error::code(e, format!("trace ID 0x{id:02x}: no decoder to resume at byte {begin}")))?;
    if high_nibble.is_some() {
        tree.start_id_at_high_nibble(slot).map_err(|e| {
            Error::code(
                e,
                format!("trace ID 0x{id:02x}: starting in the high nibble of byte {begin}"),
            )
        })?;
    }
    let from = (feed_from as usize).min(data.len());
    let mut to = (feed_to.min(data.len() as u64)) as usize;
    to = from + (to.saturating_sub(from)) / align * align;
    let mut at = from;
    while at < to {
        let stop = at.saturating_add(block.max(align)).min(to);
        let (mut r, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, &data[at..stop]);
        at += used;
        while r.is_wait() {
            r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        }
        drained();
        if r.is_fatal() {
            let msg = tree
                .error_logger()
                .borrow()
                .last_reason()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return Err(Error::code(
                ErrCode::Fail,
                format!("decoding trace ID 0x{id:02x} from byte {start}: fatal error at byte {at}: {msg}"),
            ));
        }
        if used == 0 {
            break;
        }
    }
    let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
    while r.is_wait() {
        r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        if r.is_cont() {
            r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        }
    }
    drained();
    Ok(())
}

/// Decodes `window` of trace ID `id` from one sync point before the last
/// indexed sync point at or before it ([`CaptureIndex::warm_start`]);
/// `tree` is a fresh full-decode tree for the capture. The elements are
/// those the full decode gives in the window, with the exceptions
/// described in the module documentation.
///
/// A byte window that ends at or before the ID's first sync point is an
/// empty answer with [`WindowDecode::note`] set
/// ([`WindowNote::BeforeFirstSync`]), not an error; an ID that is not in
/// the index is an error.
pub fn decode_window(
    ix: &CaptureIndex,
    data: &[u8],
    id: u8,
    window: Window,
    tree: DecodeTree,
) -> Result<WindowDecode, Error> {
    let no = |what: String| Error::code(ErrCode::InvalidParamVal, what);
    // A partial index cannot say where the sync points past its end are.
    if let Window::Bytes { to, .. } = window
        && to > ix.indexed.end
        && ix.indexed.end < data.len() as u64
    {
        return Err(no(format!(
            "the index covers bytes {}..{} of {}: bytes up to {to} were asked for; build it again without --limit",
            ix.indexed.start,
            ix.indexed.end,
            data.len()
        )));
    }
    if ix.stream(id).is_none() {
        let ids: Vec<String> = ix.streams.iter().map(|s| format!("0x{:02x}", s.id)).collect();
        return Err(no(format!(
            "trace ID 0x{id:02x} is not in the index (its trace IDs: {})",
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        )));
    }
    let w = match window {
        Window::Bytes { from, to } => match ix.byte_window(id, from, to) {
            Some(w) => w,
            None => {
                // Before the first sync point (or an empty range): an
                // empty answer, with the reason.
                let first_sync = ix.syncs_from(id, 0).next().map(|e| e.index);
                let note = (from < to).then_some(WindowNote::BeforeFirstSync { first_sync });
                return Ok(WindowDecode {
                    window: ByteWindow {
                        start: from,
                        from,
                        end: to,
                    },
                    elements: Vec::new(),
                    note,
                    error: None,
                });
            }
        },
        Window::Time { from_ts, to_ts } => ix.time_window(id, from_ts, to_ts).ok_or_else(|| {
            no(format!(
                "trace ID 0x{id:02x} has no timestamp in {from_ts}..={to_ts} after a sync point"
            ))
        })?,
    };
    // Decode on to the next sync point past the window, so everything the
    // window's packets produce is out.
    let feed_end = ix
        .syncs_from(id, w.end)
        .next()
        .map_or(ix.indexed.end, |e| e.index.max(w.end));
    let mut elements = Vec::new();
    let mut now: Option<u64> = None;
    // A fatal error ends the decode; what came before it is the answer's.
    let decoded = decode_range(ix, data, id, w.start, feed_end, tree, &mut |e: &Element| {
        if let Some(t) = element_time(&e.2) {
            now = Some(t);
        }
        let keep = match window {
            Window::Bytes { from, to } => e.0 >= from && e.0 < to,
            Window::Time { from_ts, to_ts } => e.0 < feed_end && now.is_some_and(|t| t >= from_ts && t <= to_ts),
        };
        if keep && e.2.elem_type != ElemType::EoTrace {
            elements.push(*e);
        }
    });
    Ok(WindowDecode {
        window: w,
        elements,
        note: None,
        error: decoded.err().map(|e| e.to_string()),
    })
}

/// The sink of a piece of a split decode: folds each element whose index
/// is in the piece's range straight into the piece's result, as the
/// decoder hands its runs on (no copy of the element, no call per element
/// through a pointer). The sink owns the result while the tree decodes
/// and hands it over when the tree drops it: no lock per run.
struct FoldSink<R: Default, F> {
    acc: R,
    fold: Arc<F>,
    from: TrcIndex,
    /// `to - from`: an index is in the piece when `index - from`
    /// (wrapping) is below it.
    len: u64,
    /// The piece does not start at the stream's first sync point: the
    /// decoder's first element, a `NO_SYNC` for its own start, is not in
    /// the serial decode and is dropped.
    drop_start_no_sync: bool,
    /// No element seen yet.
    first: bool,
    /// The piece ends the stream: its end of trace is the serial
    /// decode's (other pieces' are dropped).
    keep_eot: bool,
    done: Shared<Option<R>>,
}

impl<R: Default, F> FoldSink<R, F> {
    /// Whether `elem` is one of the piece's own elements: in its byte
    /// range, and not an artefact of the piece's start or end.
    #[inline]
    fn keeps(&mut self, index: TrcIndex, elem: &TraceElement) -> bool {
        if std::mem::replace(&mut self.first, false) && self.drop_start_no_sync && elem.elem_type == ElemType::NoSync {
            return false;
        }
        // The end of trace is the last piece's wherever the decoder puts
        // it: at the end of the data, past the piece's last byte (STM).
        if elem.elem_type == ElemType::EoTrace {
            return self.keep_eot;
        }
        index.wrapping_sub(self.from) < self.len
    }
}

impl<R: Default, F> Drop for FoldSink<R, F> {
    fn drop(&mut self) {
        *self.done.borrow_mut() = Some(std::mem::take(&mut self.acc));
    }
}

impl<R, F> TrcGenElemIn for FoldSink<R, F>
where
    R: Default + Send,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync,
{
    fn trace_elem_in(&mut self, index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        if self.keeps(index, elem) {
            (self.fold)(&mut self.acc, index, elem);
        }
        DatapathResp::Cont
    }
    fn trace_elems_in(&mut self, _trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        for (index, elem) in elems {
            if self.keeps(*index, elem) {
                (self.fold)(&mut self.acc, *index, elem);
            }
        }
        (DatapathResp::Cont, elems.len())
    }
}

/// Decodes `piece` with `tree`, folding its elements into a fresh `R`;
/// with the fatal error that stopped it, if one did (`R` then holds the
/// elements before it).
fn decode_piece<R, F>(
    ix: &CaptureIndex,
    data: &[u8],
    piece: Piece,
    mut tree: DecodeTree,
    fold: &Arc<F>,
) -> Result<(R, Option<Error>), Error>
where
    R: Default + Send + 'static,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync + 'static,
{
    let done = shared(None);
    let sink = FoldSink {
        acc: R::default(),
        fold: fold.clone(),
        from: piece.start,
        len: piece.end.saturating_sub(piece.start),
        drop_start_no_sync: ix.syncs_from(piece.id, 0).next().is_some_and(|s| s.index < piece.start),
        first: true,
        keep_eot: piece.end >= ix.indexed.end,
        done: done.clone(),
    };
    tree.set_gen_elem_out(Box::new(sink));
    // Nothing is collected: the whole piece goes in at once. The decoder
    // starts an interval early, so it has the serial decode's state by the
    // piece's start; the elements before it are not the piece's. It goes
    // on past the sync point that ends the piece to the one after, so an
    // element its last packet holds until a later packet commits it comes
    // out (the next piece's elements are dropped).
    let feed_end = ix
        .syncs_from(piece.id, piece.end)
        .find(|e| e.index > piece.end)
        .map_or(ix.indexed.end, |e| e.index);
    let fed = feed_range(
        ix,
        data,
        piece.id,
        ix.warm_start(piece.id, piece.start),
        feed_end.max(piece.end),
        &mut tree,
        usize::MAX,
        &mut || {},
    );
    // Dropping the tree drops the sink, which hands the result over.
    drop(tree);
    let acc = done.borrow_mut().take();
    let acc = acc.ok_or_else(|| Error::code(ErrCode::Fail, "a piece's result was not handed over"))?;
    Ok((acc, fed.err()))
}

/// A piece's result, with the fatal decode error that stopped it, if one did.
type PieceOutcome<R> = (R, Option<Error>);

/// Decodes `pieces` on up to `threads` worker threads, the largest pieces
/// first, each to the next free worker, with the tree `tree(k)` gives for
/// piece `k` (called on the worker). Results in the order of `pieces`,
/// each with the fatal decode error that stopped it, if one did; with
/// `stop_on_error`, a decode error stops the work as a tree that cannot
/// be built does (the error is returned).
fn run_pieces<R, F, T>(
    ix: &CaptureIndex,
    data: &[u8],
    pieces: &[Piece],
    threads: usize,
    tree: &T,
    fold: F,
    stop_on_error: bool,
) -> Result<Vec<PieceOutcome<R>>, Error>
where
    R: Default + Send + 'static,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync + 'static,
    T: Fn(usize) -> Result<DecodeTree, Error> + Sync,
{
    let fold = Arc::new(fold);
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(pieces[i].end.saturating_sub(pieces[i].start)));
    let next = AtomicUsize::new(0);
    let work = || -> Result<Vec<(usize, PieceOutcome<R>)>, Error> {
        let mut done = Vec::new();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(k) else { break };
            let r = tree(i).and_then(|t| decode_piece(ix, data, pieces[i], t, &fold));
            let r = match r {
                Ok((_, Some(e))) if stop_on_error => Err(e),
                r => r,
            };
            match r {
                Ok(r) => done.push((i, r)),
                Err(e) => {
                    // The other workers take no more pieces.
                    next.store(order.len(), Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(done)
    };
    // This thread is one of the workers.
    let workers = threads.clamp(1, pieces.len().max(1));
    let results = std::thread::scope(|scope| {
        // A thread the system will not give is one worker fewer, not a
        // panic: the pieces are shared by those that started.
        let handles: Vec<_> = (1..workers)
            .map_while(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mine = work();
        // Every worker is joined before an error is returned.
        let theirs: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        let mut all = mine?;
        for t in theirs {
            all.extend(t.map_err(|_| Error::code(ErrCode::Fail, "a decode worker panicked"))??);
        }
        Ok::<_, Error>(all)
    })?;
    let mut slots: Vec<Option<PieceOutcome<R>>> = (0..pieces.len()).map(|_| None).collect();
    for (i, r) in results {
        slots[i] = Some(r);
    }
    Ok(slots.into_iter().map(|r| r.expect("every piece decoded")).collect())
}

/// Decodes one trace ID's stream in `threads` pieces, one per worker
/// thread, split at indexed sync points ([`CaptureIndex::split_pieces`]),
/// and returns each piece's result in stream order. `build` makes a fresh
/// full-decode tree for the capture (on the worker's thread); `fold`
/// folds each element of a piece (those with indexes in the piece's byte
/// range), with its index, into the piece's result, starting from
/// `R::default()`. The elements are folded as the decoder hands them on:
/// nothing is copied or collected. [`decode_pieces`] does the same with
/// trees built beforehand. What a piece's own start and end add is left
/// out: the `NO_SYNC` its decoder reports first (but in the piece at the
/// stream's first sync point, where a decode from the start of the stream
/// reports one too), and the end of trace of every piece but the last. A
/// piece may start at a sync point in the high nibble of a byte (STM).
///
/// State that crosses a split point: the split points are where the
/// trace info says no speculation is pending, and each piece's decoder
/// starts one sync point before its piece, so it has the serial decode's
/// context, addresses, return stack and running state by the piece's
/// start (see the module documentation for what lasts longer). The
/// test-suite checks the joined elements against the serial decode's on
/// the corpus and on a generated multi-megabyte ETMv4 stream.
pub fn decode_split<B, R, F>(
    ix: &CaptureIndex,
    data: &[u8],
    id: u8,
    threads: usize,
    build: &B,
    fold: F,
) -> Result<Vec<R>, Error>
where
    B: Fn() -> Result<DecodeTree, Error> + Sync,
    R: Default + Send + 'static,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync + 'static,
{
    let pieces = ix.split_pieces(id, threads.max(1));
    if pieces.is_empty() {
        return Err(Error::code(
            ErrCode::InvalidParamVal,
            format!("trace ID 0x{id:02x} has no sync point to split at"),
        ));
    }
    let results = run_pieces(ix, data, &pieces, pieces.len(), &|_| build(), fold, true)?;
    Ok(results.into_iter().map(|(r, _)| r).collect())
}

/// Decodes `pieces` (from [`CaptureIndex::split_pieces`], of one trace ID
/// or several) on up to `threads` worker threads, piece `k` with
/// `trees[k]`, a fresh full-decode tree for the capture; returns each
/// piece's result in the order of `pieces`. The largest pieces go first,
/// each to the next free worker. `fold` is as for [`decode_split`].
///
/// Trees built beforehand keep their building (snapshot parsing, memory
/// mapping) out of the decode: what a benchmark of the decode alone
/// measures.
pub fn decode_pieces<R, F>(
    ix: &CaptureIndex,
    data: &[u8],
    pieces: &[Piece],
    trees: Vec<DecodeTree>,
    threads: usize,
    fold: F,
) -> Result<Vec<R>, Error>
where
    R: Default + Send + 'static,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync + 'static,
{
    if trees.len() != pieces.len() {
        return Err(Error::code(
            ErrCode::InvalidParamVal,
            format!("{} trees for {} pieces: one tree per piece", trees.len(), pieces.len()),
        ));
    }
    let trees: Vec<Mutex<Option<DecodeTree>>> = trees.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let take = |k: usize| {
        let t = trees[k].lock().unwrap_or_else(|e| e.into_inner()).take();
        t.ok_or_else(|| Error::code(ErrCode::Fail, "a piece's tree was used twice"))
    };
    let results = run_pieces(ix, data, pieces, threads, &take, fold, true)?;
    Ok(results.into_iter().map(|(r, _)| r).collect())
}

/// Decodes several trace IDs of a capture, each split into up to
/// `pieces_per_id` pieces at indexed sync points (as [`decode_split`]),
/// the pieces shared out among `threads` worker threads (largest first,
/// each to the next free worker). Returns each piece's result with its
/// trace ID, in ID order then stream order. The same crossing rules as
/// [`decode_split`] apply.
pub fn decode_split_ids<B, R, F>(
    ix: &CaptureIndex,
    data: &[u8],
    ids: &[u8],
    pieces_per_id: usize,
    threads: usize,
    build: &B,
    fold: F,
) -> Result<Vec<(u8, R)>, Error>
where
    B: Fn() -> Result<DecodeTree, Error> + Sync,
    R: Default + Send + 'static,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync + 'static,
{
    let pieces: Vec<Piece> = ids
        .iter()
        .flat_map(|&id| ix.split_pieces(id, pieces_per_id.max(1)))
        .collect();
    let results = run_pieces(ix, data, &pieces, threads, &|_| build(), fold, true)?;
    Ok(pieces
        .iter()
        .map(|p| p.id)
        .zip(results.into_iter().map(|(r, _)| r))
        .collect())
}

/// [`decode_split_ids`], going on past fatal decode errors: each piece's
/// result comes with the fatal error that stopped its decode, if one did
/// (the result then folds the elements before it), and the other pieces
/// are decoded all the same. Only a tree that cannot be built is an error.
pub fn decode_split_ids_partial<B, R, F>(
    ix: &CaptureIndex,
    data: &[u8],
    ids: &[u8],
    pieces_per_id: usize,
    threads: usize,
    build: &B,
    fold: F,
) -> Result<Vec<(u8, R, Option<Error>)>, Error>
where
    B: Fn() -> Result<DecodeTree, Error> + Sync,
    R: Default + Send + 'static,
    F: Fn(&mut R, TrcIndex, &TraceElement) + Send + Sync + 'static,
{
    let pieces: Vec<Piece> = ids
        .iter()
        .flat_map(|&id| ix.split_pieces(id, pieces_per_id.max(1)))
        .collect();
    let results = run_pieces(ix, data, &pieces, threads, &|_| build(), fold, false)?;
    Ok(pieces.iter().zip(results).map(|(p, (r, e))| (p.id, r, e)).collect())
}

/// Merges the elements of `ids` in timestamp order (what perf does for
/// CPU-wide traces): each ID is decoded from its first indexed sync point
/// with a fresh tree from `build`, each element is given the time of the
/// last timestamp its stream reported (elements before the first get the
/// first timestamp's time when one follows, else 0), and the streams are
/// merged by time, then by index, keeping each stream's order.
pub fn correlate<B>(ix: &CaptureIndex, data: &[u8], ids: &[u8], build: &B) -> Result<Vec<(u64, Element)>, Error>
where
    B: Fn() -> Result<DecodeTree, Error>,
{
    let (merged, mut errors) = correlate_partial(ix, data, ids, build)?;
    match errors.drain(..).next() {
        Some((_, e)) => Err(e),
        None => Ok(merged),
    }
}

/// [`correlate`], going on past fatal decode errors: a stream stopped by
/// one is merged with the elements decoded before it, and the error is
/// returned with its trace ID. Only a tree that cannot be built is an
/// error.
#[allow(clippy::type_complexity)]
pub fn correlate_partial<B>(
    ix: &CaptureIndex,
    data: &[u8],
    ids: &[u8],
    build: &B,
) -> Result<(Vec<(u64, Element)>, Vec<(u8, Error)>), Error>
where
    B: Fn() -> Result<DecodeTree, Error>,
{
    let mut streams: Vec<Vec<(u64, Element)>> = Vec::new();
    let mut errors = Vec::new();
    for &id in ids {
        let Some(first) = ix.syncs_from(id, 0).next() else {
            continue;
        };
        let mut v: Vec<(Option<u64>, Element)> = Vec::new();
        let mut now = None;
        let decoded = decode_range(
            ix,
            data,
            id,
            first.index,
            ix.indexed.end,
            build()?,
            &mut |e: &Element| {
                if let Some(t) = element_time(&e.2) {
                    now = Some(t);
                }
                v.push((now, *e));
            },
        );
        if let Err(e) = decoded {
            errors.push((id, e));
        }
        let first_ts = v.iter().find_map(|(t, _)| *t).unwrap_or(0);
        streams.push(v.into_iter().map(|(t, e)| (t.unwrap_or(first_ts), e)).collect());
    }
    Ok((merge_by_time(&streams), errors))
}

/// Merges streams each in time order into one, by time, then index, then
/// trace ID; elements that tie keep their stream's order.
pub(crate) fn merge_by_time(streams: &[Vec<(u64, Element)>]) -> Vec<(u64, Element)> {
    let mut at = vec![0usize; streams.len()];
    let mut out = Vec::with_capacity(streams.iter().map(Vec::len).sum());
    loop {
        let next = (0..streams.len())
            .filter(|&s| at[s] < streams[s].len())
            .min_by_key(|&s| {
                let (t, e) = &streams[s][at[s]];
                (*t, e.0, e.1)
            });
        let Some(s) = next else { break };
        out.push(streams[s][at[s]]);
        at[s] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(t: u64, index: TrcIndex, id: u8, n: u32) -> (u64, Element) {
        let e = TraceElement {
            elem_type: ElemType::InstrRange,
            num_instr_range: n,
            ..TraceElement::default()
        };
        (t, (index, id, e))
    }

    #[test]
    fn merge_interleaves_by_time_and_keeps_ties_in_stream_order() {
        let a = vec![el(10, 0, 1, 1), el(10, 5, 1, 2), el(30, 9, 1, 3), el(50, 12, 1, 4)];
        let b = vec![el(5, 2, 2, 1), el(20, 3, 2, 2), el(30, 4, 2, 3), el(30, 4, 2, 4)];
        let got: Vec<(u64, u8, u32)> = merge_by_time(&[a, b])
            .iter()
            .map(|(t, (_, id, e))| (*t, *id, e.num_instr_range))
            .collect();
        assert_eq!(
            got,
            [
                (5, 2, 1),
                (10, 1, 1),
                (10, 1, 2),
                (20, 2, 2),
                (30, 2, 3),
                (30, 2, 4),
                (30, 1, 3),
                (50, 1, 4)
            ]
        );
    }
}
