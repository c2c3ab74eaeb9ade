//! Arrow batches filled by the decode tree itself: the tree's element
//! output is a sink that appends each element to the batcher as it is made,
//! so the elements are not queued, handed out one by one and copied again
//! on their way to the columns, as they are through the pull API.
//!
//! The loop that feeds the tree (data, flush after a wait, end of trace)
//! is the pull API's, and so are its errors: a fatal response stops the
//! decode with [`coresight_decode::Error::Fatal`], a tree that keeps waiting with
//! nothing to hand out with [`coresight_decode::Error::Stalled`].

use std::collections::VecDeque;

use arrow_array::RecordBatch;
use coresight_decode::CaptureReader;
use coresight_decode::Error as DecodeError;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::element::{ElemType, Element, TraceElement};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::pull::{CHUNK_SIZE, Decoder, TraceData};
use coresight_decode::shared::{Shared, shared};
use coresight_decode::tree::DecodeTree;

use crate::batches::{Batcher, Kind, RangeFields};
use crate::stream::Item;

/// How many flushes in a row may make no batch while the tree answers
/// WAIT before the decode is reported as stalled (as the pull API does).
const MAX_IDLE_FLUSHES: u32 = 1000;

/// Where the sink puts what it makes.
struct Columns {
    batcher: Batcher,
    /// Full batches, not yet handed out.
    ready: VecDeque<(Kind, RecordBatch)>,
    /// A batch could not be made.
    error: Option<String>,
}

impl Columns {
    /// Appends one element; true when the tree should wait (a batch is
    /// ready, or making it failed).
    #[inline(always)]
    fn add(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> bool {
        // Ranges, nearly every element, go to their columns from the
        // decoder's element as it is; the others through the typed one.
        let added = if elem.elem_type == ElemType::InstrRange {
            self.batcher.push_range(index, trace_id, &RangeFields::of(elem))
        } else {
            self.batcher.push(&Item {
                index,
                trace_id,
                element: Element::from_generic(elem),
                origin: None,
            })
        };
        match added {
            Ok(None) => false,
            Ok(Some(b)) => {
                self.ready.push_back(b);
                true
            }
            Err(e) => {
                self.error = Some(e);
                true
            }
        }
    }
}

/// The tree's element output.
struct ColumnSink(Shared<Columns>);

impl TrcGenElemIn for ColumnSink {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        if self.0.borrow_mut().add(index, trace_id, elem) {
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
    }

    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        let mut c = self.0.borrow_mut();
        for (n, (index, elem)) in elems.iter().enumerate() {
            if c.add(*index, trace_id, elem) {
                return (DatapathResp::Wait, n + 1);
            }
        }
        (DatapathResp::Cont, elems.len())
    }
}

/// What is sent to the tree next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Data,
    /// Flush until the tree stops waiting, then go on with data (true) or
    /// end of trace (false).
    Flush {
        then_data: bool,
    },
    Eot,
    /// The decode has ended: the batches not full are still to make.
    Last,
    Done,
}

/// A decode whose elements become Arrow batches as the tree makes them.
pub struct PushBatches {
    tree: DecodeTree,
    /// The bytes in memory: all of them, or the chunk of the capture's
    /// files read last.
    data: Vec<u8>,
    /// Trace index of `data[0]`.
    base: u64,
    /// The capture's files, read a chunk at a time as decoded.
    reader: Option<CaptureReader>,
    columns: Shared<Columns>,
    /// Trace index of the next byte to send.
    pos: u64,
    step: Step,
    idle_flushes: u32,
    /// The error that stopped the decode, returned after the batches made
    /// before it.
    stopped: Option<String>,
}

impl PushBatches {
    /// Takes over a decoder that has not decoded yet, and its data.
    pub fn new(decoder: Decoder, data: TraceData, batcher: Batcher) -> PushBatches {
        let (data, reader) = match data {
            TraceData::Bytes(d) => (d, None),
            TraceData::Files(r) => (Vec::new(), Some(r)),
        };
        let mut tree = decoder.into_tree();
        let columns = shared(Columns {
            batcher,
            ready: VecDeque::new(),
            error: None,
        });
        tree.set_gen_elem_out(Box::new(ColumnSink(columns.clone())));
        PushBatches {
            tree,
            data,
            base: 0,
            reader,
            columns,
            pos: 0,
            step: Step::Data,
            idle_flushes: 0,
            stopped: None,
        }
    }

    /// The next batch, `None` at the end; `Err` is the error that stopped
    /// the decode (after the batches made before it).
    pub fn next_batch(&mut self) -> Result<Option<(Kind, RecordBatch)>, String> {
        loop {
            {
                let mut c = self.columns.borrow_mut();
                if let Some(e) = c.error.take() {
                    self.step = Step::Done;
                    return Err(e);
                }
                if let Some(b) = c.ready.pop_front() {
                    self.idle_flushes = 0;
                    return Ok(Some(b));
                }
            }
            match self.step {
                Step::Done => return self.stopped.take().map_or(Ok(None), Err),
                Step::Last => {
                    let mut c = self.columns.borrow_mut();
                    let rest = c.batcher.flush()?;
                    c.ready.extend(rest);
                    self.step = Step::Done;
                }
                Step::Data => {
                    if self.pos >= self.base + self.data.len() as u64 {
                        match self.refill() {
                            Ok(true) => {}
                            Ok(false) => {
                                self.step = Step::Eot;
                                continue;
                            }
                            Err(e) => {
                                self.stopped = Some(e);
                                self.step = Step::Last;
                                continue;
                            }
                        }
                    }
                    let index = self.pos as TrcIndex;
                    let bytes = &self.data[(self.pos - self.base) as usize..];
                    let (r, used) = self.tree.trace_data_in(DatapathOp::Data, index, bytes);
                    self.pos += used.min(bytes.len()) as u64;
                    if r.is_cont() && used == 0 {
                        // Nothing taken and no wait: the tree cannot go on.
                        self.stop(DecodeError::Fatal {
                            index,
                            response: r,
                            error: self.last_error(),
                        });
                        continue;
                    }
                    self.check(r, true);
                }
                Step::Flush { then_data } => {
                    let r = self.tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
                    if r.is_wait() && self.columns.borrow().ready.is_empty() {
                        self.idle_flushes += 1;
                        if self.idle_flushes > MAX_IDLE_FLUSHES {
                            self.stop(DecodeError::Stalled {
                                index: self.pos as TrcIndex,
                            });
                            continue;
                        }
                    }
                    self.check(r, then_data);
                    if r.is_cont() {
                        self.step = if then_data { Step::Data } else { Step::Eot };
                    }
                }
                Step::Eot => {
                    let r = self.tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
                    self.check(r, false);
                    if r.is_cont() {
                        self.step = Step::Last;
                    }
                }
            }
        }
    }

    /// Reads the next chunk of the capture's files after `data`; false at
    /// their end (or for bytes that were all in memory).
    fn refill(&mut self) -> Result<bool, String> {
        use std::io::Read;
        let Some(reader) = self.reader.as_mut() else {
            return Ok(false);
        };
        self.base += self.data.len() as u64;
        self.data.resize(CHUNK_SIZE, 0);
        let mut n = 0;
        while n < self.data.len() {
            match reader.read(&mut self.data[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        self.data.truncate(n);
        Ok(n > 0)
    }

    fn last_error(&self) -> Option<coresight_decode::TraceError> {
        self.tree.error_logger().borrow().last_reason().cloned()
    }

    /// Ends the decode on `e`: the rows before it still make batches.
    fn stop(&mut self, e: DecodeError) {
        self.stopped = Some(e.to_string());
        self.step = Step::Last;
    }

    /// Acts on a response: a wait means flushing before going on; a fatal
    /// response ends the decode.
    fn check(&mut self, r: DatapathResp, then_data: bool) {
        if r.is_fatal() {
            self.stop(DecodeError::Fatal {
                index: self.pos as TrcIndex,
                response: r,
                error: self.last_error(),
            });
        } else if r.is_wait() {
            self.step = Step::Flush { then_data };
        }
    }
}
