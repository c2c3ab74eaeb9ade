//! The pull API: decode a trace buffer and iterate over its elements.
//!
//! A decode tree ([`DecodeTree`]) pushes elements into a sink and leaves
//! the data-path protocol (DATA, WAIT, FLUSH, EOT) to its caller. Here that
//! loop runs inside an iterator: elements are collected in a bounded
//! queue (when it is full the sink answers WAIT, the iterator hands out
//! what is queued, then FLUSHes and carries on), and each comes out as a
//! typed [`Decoded`] item.
//!
//! - [`Trace`]: a snapshot's trace buffer, ready to iterate
//!   (`Trace::open(dir)?`, then `for d in trace.elements()`).
//! - [`Decoder`]: a decode tree with the element queue, to decode any
//!   bytes in memory (`decoder.decode(&bytes)`); made from a snapshot, from
//!   a tree built by hand ([`Decoder::new`]), or from a configuration and
//!   memory images ([`DecoderBuilder`]).
//! - [`decode_buffer`]: the whole buffer at once, as a `Vec`.
//!
//! ```
//! use coresight_decode::{Element, Trace};
//!
//! let mut trace = Trace::open("snapshots/etmv4-a64")?;
//! let mut instructions = 0;
//! for item in trace.elements() {
//!     if let Element::InstrRange { num_instr, .. } = item?.element {
//!         instructions += num_instr as u64;
//!     }
//! }
//! assert!(instructions > 0);
//! # Ok::<(), coresight_decode::Error>(())
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::{DecodeMode, SourceConfig};
use crate::element::TraceElement;
use crate::element::{Decoded, Element};
use crate::errcode::{ErrCode, TraceError};
use crate::error::Error;
use crate::fileio::CaptureReader;
use crate::interfaces::{TrcDataIn, TrcGenElemIn};
use crate::logger::MsgLogger;
use crate::memory::{BufferAccessor, MemSpace};
use crate::shared::{Shared, shared};
use crate::snapshot::{Snapshot, SnapshotWarning};
use crate::tree::{DecodeTree, SourceFormat};

/// Elements queued before the sink asks the tree to wait.
pub const DEFAULT_QUEUE_CAPACITY: usize = 256;

/// Bytes of a capture read from its files at a time: the most of it held
/// in memory while a [`Trace`] opened from a snapshot is decoded.
pub const CHUNK_SIZE: usize = 1 << 20;

/// How many flushes in a row may make no progress before the decode is
/// reported as stalled (a sink other than the queue is waiting).
const MAX_IDLE_FLUSHES: u32 = 1000;
/// Ends of trace sent again after waits: one a source (trace IDs are 7 bits), and a margin.
const MAX_EOT_ROUNDS: usize = 256;

/// The queue between the tree's element output and the iterator.
struct Queue {
    items: VecDeque<Decoded>,
    capacity: usize,
}

/// The tree's element output: queues elements, asks for a wait when full.
struct QueueSink(Shared<Queue>);

impl TrcGenElemIn for QueueSink {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        let mut q = self.0.borrow_mut();
        q.items.push_back(Decoded {
            index,
            trace_id,
            element: Element::from_generic(elem),
        });
        if q.items.len() >= q.capacity {
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
    }
}

/// A decode tree whose elements are read through an iterator.
pub struct Decoder {
    tree: DecodeTree,
    queue: Shared<Queue>,
    /// Data has been sent since the tree was made (or last reset).
    used: bool,
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("decoders", &self.tree.decoder_count())
            .field("used", &self.used)
            .finish()
    }
}

impl Decoder {
    /// Takes over a decode tree (built from a snapshot or by hand, with its
    /// decoders): its element output becomes this decoder's queue.
    pub fn new(mut tree: DecodeTree) -> Decoder {
        let queue = shared(Queue {
            items: VecDeque::with_capacity(DEFAULT_QUEUE_CAPACITY),
            capacity: DEFAULT_QUEUE_CAPACITY,
        });
        tree.set_gen_elem_out(Box::new(QueueSink(queue.clone())));
        Decoder {
            tree,
            queue,
            used: false,
        }
    }

    /// A decoder for the trace buffer `buffer` of a snapshot (full decode,
    /// the snapshot's memory dumps mapped).
    pub fn from_snapshot(ss: &Snapshot, buffer: &str) -> Result<Decoder, Error> {
        if ss.buffer(buffer).is_none() {
            return Err(no_such_buffer(ss, buffer));
        }
        let log = shared(MsgLogger::capture());
        let mut tree = ss
            .build_tree(buffer, DecodeMode::FullDecode, |t| {
                t.set_error_output(Some(log.clone()))
            })
            .map_err(|e| match e {
                // A refused configuration's reason is the error; otherwise
                // all the builder logged.
                Error::NoDecoder { buffer, log: refused } if refused.is_empty() => Error::NoDecoder {
                    buffer,
                    log: log.borrow_mut().take_captured(),
                },
                e => e,
            })?;
        // Errors during the decode go to the `log` crate and to the tree's
        // error logger (see `last_error`), not to a growing capture.
        tree.set_error_output(None);
        Ok(Decoder::new(tree))
    }

    /// How many elements are queued before the decode pauses for them to
    /// be read (at least 1; default [`DEFAULT_QUEUE_CAPACITY`]). The order
    /// and content of the elements do not depend on it: a capacity of 1
    /// makes the tree wait after every element.
    pub fn set_queue_capacity(&mut self, capacity: usize) {
        let mut q = self.queue.borrow_mut();
        q.capacity = capacity.max(1);
        let want = q.capacity.min(1 << 16);
        let more = want.saturating_sub(q.items.len());
        q.items.reserve(more);
    }

    /// The trace sources decoded: trace ID, protocol name (`ETMV4I`...)
    /// and the source's name in the snapshot (`etm_0`; empty for a
    /// decoder added by hand), in trace ID order.
    pub fn sources(&self) -> impl Iterator<Item = (u8, &str, &str)> {
        self.tree
            .elements()
            .map(|(id, e)| (id, e.protocol.as_str(), e.source_name.as_str()))
    }

    /// Decodes only the sources with these trace IDs (`None`: all). A value
    /// of 0x80 or more is not a trace ID: an error, the filter unchanged.
    pub fn set_id_filter(&mut self, ids: Option<&[u8]>) -> Result<(), Error> {
        self.tree.set_id_filter(ids).map_err(|code| {
            let bad = ids
                .unwrap_or_default()
                .iter()
                .find(|&&id| id >= 0x80)
                .copied()
                .unwrap_or_default();
            Error::code(
                code,
                format!("trace ID filter: 0x{bad:02x} is not a trace ID (expected 0x00 to 0x7f)"),
            )
        })
    }

    /// The decode tree (its decoders, memory map, error logger).
    pub fn tree(&self) -> &DecodeTree {
        &self.tree
    }

    /// The decode tree, to change (an ID filter, memory images, decoder
    /// options). Replacing its element output stops this decoder from
    /// seeing elements.
    pub fn tree_mut(&mut self) -> &mut DecodeTree {
        &mut self.tree
    }

    /// The last error the tree's components raised (bad packets, memory
    /// that could not be read...), if any, logged or not: a fatal
    /// response's reason.
    pub(crate) fn last_error(&self) -> Option<TraceError> {
        self.tree.error_logger().borrow().last_reason().cloned()
    }

    /// How many errors the tree's components have logged.
    pub fn error_count(&self) -> usize {
        self.tree.error_logger().borrow().error_count()
    }

    /// Decodes `data`, a whole trace buffer whose first byte has trace
    /// index 0, ending with end of trace. A decoder that has decoded before
    /// is reset first, so each call is a decode of its own.
    pub fn decode<'a>(&'a mut self, data: &'a [u8]) -> Elements<'a> {
        Elements {
            decoder: self,
            input: Input::Bytes(data),
            cursor: Cursor::default(),
        }
    }

    /// The decode tree back.
    pub fn into_tree(self) -> DecodeTree {
        self.tree
    }
}

/// What the iterator sends next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Step {
    /// Reset a decoder that has decoded before, then send data.
    #[default]
    Start,
    /// Send the rest of the data.
    Data,
    /// Flush until the tree stops waiting, then go on with `then`.
    Flush { then: After },
    /// Send end of trace.
    Eot,
    /// Finished (or stopped on an error).
    Done,
}

/// Where to go once a wait is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    Data,
    Eot,
}

/// A capture's files read a chunk at a time.
#[derive(Debug)]
struct Chunks {
    reader: CaptureReader,
    /// `CHUNK_SIZE` bytes, allocated at the first decode.
    buf: Vec<u8>,
    /// Trace index of `buf[0]`.
    start: u64,
    /// Bytes of `buf` read.
    len: usize,
}

impl Chunks {
    /// Back to the first byte.
    fn rewind(&mut self) {
        self.reader.rewind();
        self.start = 0;
        self.len = 0;
    }

    /// The bytes from trace index `pos` on that are in memory (reading the
    /// next chunk when `pos` is the end of this one); empty at the end.
    fn at(&mut self, pos: u64) -> Result<&[u8], Error> {
        let end = self.start + self.len as u64;
        if pos >= end {
            self.buf.resize(CHUNK_SIZE, 0);
            self.start = end;
            self.len = 0;
            self.len = self
                .reader
                .fill(&mut self.buf)
                .map_err(|(path, source)| Error::Io { path, source })?;
        }
        let from = usize::try_from(pos.saturating_sub(self.start)).map_or(self.len, |d| d.min(self.len));
        Ok(&self.buf[from..self.len])
    }
}

/// Where a decode's bytes come from.
enum Input<'a> {
    Bytes(&'a [u8]),
    Chunks(&'a mut Chunks),
}

impl Input<'_> {
    fn rewind(&mut self) {
        if let Input::Chunks(c) = self {
            c.rewind();
        }
    }

    fn at(&mut self, pos: u64) -> Result<&[u8], Error> {
        match self {
            Input::Bytes(d) => Ok(usize::try_from(pos).ok().and_then(|p| d.get(p..)).unwrap_or_default()),
            Input::Chunks(c) => c.at(pos),
        }
    }
}

/// The state of one decode.
#[derive(Debug, Default)]
struct Cursor {
    /// Trace index of the next byte to send.
    pos: u64,
    step: Step,
    idle_flushes: u32,
    /// The error that stopped the decode, returned once the elements
    /// queued before it have been.
    stopped: Option<Error>,
}

impl Cursor {
    fn next(&mut self, dec: &mut Decoder, input: &mut Input) -> Option<Result<Decoded, Error>> {
        loop {
            if let Some(d) = dec.queue.borrow_mut().items.pop_front() {
                self.idle_flushes = 0;
                return Some(Ok(d));
            }
            if let Some(e) = self.stopped.take() {
                return Some(Err(e));
            }
            let index = self.pos;
            match self.step {
                Step::Done => return None,
                Step::Start => {
                    if dec.used {
                        let r = dec.tree.trace_data_in(DatapathOp::Reset, 0, &[]).0;
                        self.check(dec, r, After::Data);
                        if self.step != Step::Start {
                            continue;
                        }
                    }
                    dec.used = true;
                    input.rewind();
                    self.step = Step::Data;
                }
                Step::Data => {
                    let data = match input.at(self.pos) {
                        Ok(d) => d,
                        Err(e) => {
                            self.step = Step::Done;
                            self.stopped = Some(e);
                            continue;
                        }
                    };
                    if data.is_empty() {
                        self.step = Step::Eot;
                        continue;
                    }
                    let (r, used) = dec.tree.trace_data_in(DatapathOp::Data, index, data);
                    self.pos += used.min(data.len()) as u64;
                    if r.is_cont() && used == 0 {
                        // Nothing taken and no wait: the tree cannot go on.
                        self.step = Step::Done;
                        self.stopped = Some(Error::Fatal {
                            index,
                            response: r,
                            error: dec.last_error(),
                        });
                        continue;
                    }
                    self.check(dec, r, After::Data);
                }
                Step::Flush { then } => {
                    let r = dec.tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
                    if r.is_wait() && dec.queue.borrow().items.is_empty() {
                        self.idle_flushes += 1;
                        if self.idle_flushes > MAX_IDLE_FLUSHES {
                            self.step = Step::Done;
                            self.stopped = Some(Error::Stalled { index });
                            continue;
                        }
                    }
                    self.check(dec, r, then);
                    if r.is_cont() {
                        self.step = match then {
                            After::Data => Step::Data,
                            After::Eot => Step::Eot,
                        };
                    }
                }
                Step::Eot => {
                    let r = dec.tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
                    self.check(dec, r, After::Eot);
                    if r.is_cont() {
                        self.step = Step::Done;
                    }
                }
            }
        }
    }

    /// Acts on a response: a wait means flushing before `then`; a fatal
    /// response ends the decode with an error (after the queued elements).
    fn check(&mut self, dec: &Decoder, r: DatapathResp, then: After) {
        if r.is_fatal() {
            self.step = Step::Done;
            self.stopped = Some(Error::Fatal {
                index: self.pos,
                response: r,
                error: dec.last_error(),
            });
        } else if r.is_wait() {
            self.step = Step::Flush { then };
        }
    }
}

/// The elements of one decode, in the order the tree produced them.
///
/// Each item is an element, or the error that stopped the decode (the
/// last item). Dropping the iterator early leaves the decode unfinished.
pub struct Elements<'a> {
    decoder: &'a mut Decoder,
    input: Input<'a>,
    cursor: Cursor,
}

impl Iterator for Elements<'_> {
    type Item = Result<Decoded, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        self.cursor.next(self.decoder, &mut self.input)
    }
}

impl std::iter::FusedIterator for Elements<'_> {}

/// A trace's bytes, apart from its decoder ([`Trace::into_parts`]).
#[derive(Debug)]
pub enum TraceData {
    /// Bytes in memory ([`Trace::new`]).
    Bytes(Vec<u8>),
    /// A snapshot's data files, read as they are decoded.
    Files(CaptureReader),
}

/// Where a [`Trace`]'s bytes are.
#[derive(Debug)]
enum Source {
    Bytes(Vec<u8>),
    Files(Chunks),
}

impl Source {
    fn input(&mut self) -> Input<'_> {
        match self {
            Source::Bytes(d) => Input::Bytes(d),
            Source::Files(c) => Input::Chunks(c),
        }
    }
}

/// A trace buffer with its decoder: what to iterate over.
///
/// One opened from a snapshot reads its data files as it decodes, a chunk
/// of [`CHUNK_SIZE`] bytes at a time: memory does not grow with the size
/// of the capture.
pub struct Trace {
    decoder: Decoder,
    source: Source,
    buffer: String,
    warnings: Vec<SnapshotWarning>,
}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the bytes: a buffer can be gigabytes.
        f.debug_struct("Trace")
            .field("buffer", &self.buffer)
            .field("bytes", &self.size())
            .field("decoder", &self.decoder)
            .finish()
    }
}

impl Trace {
    /// Opens the snapshot directory `dir` and its first trace buffer.
    pub fn open(dir: impl AsRef<Path>) -> Result<Trace, Error> {
        let ss = Snapshot::load(dir)?;
        Trace::from_snapshot(&ss, None)
    }

    /// Opens the trace buffer named `buffer` (`ETB_0`...) of the snapshot
    /// directory `dir`.
    pub fn open_buffer(dir: impl AsRef<Path>, buffer: &str) -> Result<Trace, Error> {
        let ss = Snapshot::load(dir)?;
        Trace::from_snapshot(&ss, Some(buffer))
    }

    /// The trace buffer `buffer` of a loaded snapshot (`None`: its first
    /// buffer): checks that its data files can be read and builds its
    /// decoder. The files are read as the buffer is decoded, a chunk at a
    /// time (one after another, DSTREAM footers left out), not held.
    pub fn from_snapshot(ss: &Snapshot, buffer: Option<&str>) -> Result<Trace, Error> {
        let name = match buffer {
            Some(n) => n,
            None => ss.buffers.first().map(|b| b.name.as_str()).ok_or(Error::NoBuffer)?,
        };
        let info = ss.buffer(name).ok_or_else(|| no_such_buffer(ss, name))?;
        let reader = CaptureReader::open_named(ss.buffer_paths(info), info.has_dstream_footers())
            .map_err(|(path, source)| Error::Io { path, source })?;
        let decoder = Decoder::from_snapshot(ss, name)?;
        Ok(Trace {
            decoder,
            source: Source::Files(Chunks {
                reader,
                buf: Vec::new(),
                start: 0,
                len: 0,
            }),
            buffer: name.to_string(),
            warnings: ss.warnings().to_vec(),
        })
    }

    /// Trace data in memory and the decoder to decode it with.
    pub fn new(decoder: Decoder, data: Vec<u8>) -> Trace {
        Trace {
            decoder,
            source: Source::Bytes(data),
            buffer: String::new(),
            warnings: Vec::new(),
        }
    }

    /// What the snapshot's loader warned of (a memory dump that cannot be
    /// read, a buffer ending inside a frame, repeated keys...): the decode
    /// goes on without what they describe. Also logged with `log::warn!`.
    pub fn warnings(&self) -> &[SnapshotWarning] {
        &self.warnings
    }

    /// The buffer's name (empty for a [`Trace::new`]).
    pub fn buffer_name(&self) -> &str {
        &self.buffer
    }

    /// The trace data when it is in memory ([`Trace::new`]); `None` for a
    /// snapshot's buffer, read from its files as it is decoded.
    pub fn data(&self) -> Option<&[u8]> {
        match &self.source {
            Source::Bytes(d) => Some(d),
            Source::Files(_) => None,
        }
    }

    /// Bytes of trace (DSTREAM footers left out; for files, from their
    /// sizes when the trace was opened).
    pub fn size(&self) -> u64 {
        match &self.source {
            Source::Bytes(d) => d.len() as u64,
            Source::Files(c) => c.reader.len(),
        }
    }

    /// The decoder.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The decoder, to change (see [`Decoder::tree_mut`]).
    pub fn decoder_mut(&mut self) -> &mut Decoder {
        &mut self.decoder
    }

    /// Decodes the buffer (again, from the start, on a second call).
    pub fn elements(&mut self) -> Elements<'_> {
        Elements {
            decoder: &mut self.decoder,
            input: self.source.input(),
            cursor: Cursor::default(),
        }
    }

    /// The decoder and the trace data, apart: to drive the decode another
    /// way, with a sink of one's own on the tree ([`Decoder::into_tree`]).
    /// A snapshot's buffer comes as a reader of its files, at their start.
    pub fn into_parts(self) -> (Decoder, TraceData) {
        let data = match self.source {
            Source::Bytes(d) => TraceData::Bytes(d),
            Source::Files(mut c) => {
                c.reader.rewind();
                TraceData::Files(c.reader)
            }
        };
        (self.decoder, data)
    }
}

impl IntoIterator for Trace {
    type Item = Result<Decoded, Error>;
    type IntoIter = IntoElements;
    fn into_iter(self) -> IntoElements {
        IntoElements {
            trace: self,
            cursor: Cursor::default(),
        }
    }
}

/// The elements of a [`Trace`], owning it (see [`Elements`]).
#[derive(Debug)]
pub struct IntoElements {
    trace: Trace,
    cursor: Cursor,
}

impl Iterator for IntoElements {
    type Item = Result<Decoded, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        self.cursor
            .next(&mut self.trace.decoder, &mut self.trace.source.input())
    }
}

impl std::iter::FusedIterator for IntoElements {}

/// Decodes the trace buffer `buffer` (`None`: the first) of the snapshot
/// in `dir` and returns all its elements, or the error that stopped it.
pub fn decode_buffer(dir: impl AsRef<Path>, buffer: Option<&str>) -> Result<Vec<Decoded>, Error> {
    let ss = Snapshot::load(dir)?;
    Trace::from_snapshot(&ss, buffer)?.into_iter().collect()
}

fn no_such_buffer(ss: &Snapshot, name: &str) -> Error {
    Error::NoSuchBuffer {
        name: name.to_string(),
        available: ss.buffer_names().join(", "),
    }
}

/// A memory image for a [`DecoderBuilder`].
enum Image {
    Bytes {
        address: u64,
        data: Vec<u8>,
        space: MemSpace,
    },
    File {
        path: PathBuf,
        address: u64,
        offset: u64,
        size: u64,
        space: MemSpace,
    },
    Elf {
        path: PathBuf,
        space: MemSpace,
    },
}

/// Builds a [`Decoder`] without a snapshot: the buffer's layout, each
/// source's protocol and registers, and the program's memory.
///
/// ```
/// use coresight_decode::decoder::{CoreConfig, SourceConfig};
/// use coresight_decode::arch::ArchProfile;
/// use coresight_decode::tree::SourceFormat;
/// use coresight_decode::{DecoderBuilder, Element};
///
/// let etm = SourceConfig {
///     name: "etm_0".into(),
///     device_type: "ETM4.0".into(),
///     regs: vec![
///         ("TRCCONFIGR".into(), 0x1),
///         ("TRCTRACEIDR".into(), 0x10),
///         ("TRCIDR0".into(), 0x2800_06e1),
///         ("TRCIDR1".into(), 0x4100_f421),
///         ("TRCIDR2".into(), 0x0000_0488),
///         ("TRCIDR8".into(), 0),
///         ("TRCIDR9".into(), 0),
///         ("TRCIDR10".into(), 0),
///         ("TRCIDR11".into(), 0),
///         ("TRCIDR12".into(), 0),
///         ("TRCIDR13".into(), 0),
///     ],
///     core: Some(CoreConfig {
///         name: "cpu_0".into(),
///         core_type: "Cortex-A53".into(),
///         profile: ArchProfile::from_core_name("Cortex-A53").unwrap(),
///     }),
/// };
/// let mut decoder = DecoderBuilder::new(SourceFormat::Single)
///     .source("ETMV4I", etm)
///     .memory(0x8000_0000, vec![0x1f, 0x20, 0x03, 0xd5]) // nop
///     .build()?;
/// // An empty trace: only the end of trace.
/// let items: Vec<_> = decoder.decode(&[]).collect::<Result<_, _>>()?;
/// assert_eq!(items.len(), 1);
/// assert!(matches!(items[0].element, Element::EoTrace { .. }));
/// # Ok::<(), coresight_decode::Error>(())
/// ```
pub struct DecoderBuilder {
    format: SourceFormat,
    sources: Vec<(String, SourceConfig)>,
    images: Vec<Image>,
}

impl DecoderBuilder {
    /// A builder for a buffer laid out as `format`: CoreSight frames
    /// ([`SourceFormat::Formatted`]) or one unformatted source.
    pub fn new(format: SourceFormat) -> DecoderBuilder {
        DecoderBuilder {
            format,
            sources: Vec::new(),
            images: Vec::new(),
        }
    }

    /// Adds a source decoded with the registered protocol `protocol`
    /// (`ETMV4I`, `ETE`, `PTM`, `ETMV3`, `STM`, `ITM`), configured by
    /// `config` (its registers; its core for PE trace). Its trace ID comes
    /// from its registers.
    pub fn source(mut self, protocol: &str, config: SourceConfig) -> DecoderBuilder {
        self.sources.push((protocol.to_string(), config));
        self
    }

    /// Maps `data` at `address` (any memory space).
    pub fn memory(mut self, address: u64, data: impl Into<Vec<u8>>) -> DecoderBuilder {
        self.images.push(Image::Bytes {
            address,
            data: data.into(),
            space: MemSpace::ANY,
        });
        self
    }

    /// Maps `data` at `address` in memory space `space` only.
    pub fn memory_in(mut self, address: u64, data: impl Into<Vec<u8>>, space: MemSpace) -> DecoderBuilder {
        self.images.push(Image::Bytes {
            address,
            data: data.into(),
            space,
        });
        self
    }

    /// Maps `size` bytes of the file `path` from `offset` at `address`
    /// (`size` 0: to the end of the file).
    pub fn memory_file(mut self, path: impl Into<PathBuf>, address: u64, offset: u64, size: u64) -> DecoderBuilder {
        self.images.push(Image::File {
            path: path.into(),
            address,
            offset,
            size,
            space: MemSpace::ANY,
        });
        self
    }

    /// Maps the loadable segments of the ELF file `path` at their
    /// addresses.
    pub fn elf(mut self, path: impl Into<PathBuf>) -> DecoderBuilder {
        self.images.push(Image::Elf {
            path: path.into(),
            space: MemSpace::ANY,
        });
        self
    }

    /// Builds the tree and its decoder.
    pub fn build(self) -> Result<Decoder, Error> {
        if self.sources.is_empty() {
            return Err(Error::NoSource);
        }
        let mut tree = DecodeTree::new(self.format, DecodeMode::FullDecode);
        for (protocol, cfg) in &self.sources {
            tree.create_decoder(protocol, cfg).map_err(Error::from)?;
        }
        let mapper = tree
            .mem_mapper()
            .cloned()
            .ok_or_else(|| Error::code(ErrCode::NotInit, "no memory map"))?;
        for image in self.images {
            match image {
                Image::Bytes { address, data, space } => {
                    let acc = BufferAccessor::new(address, data, space).map_err(Error::from)?;
                    mapper.borrow_mut().add_accessor(Box::new(acc)).map_err(Error::from)?;
                }
                Image::File {
                    path,
                    address,
                    offset,
                    size,
                    space,
                } => {
                    tree.add_file_region(&path, address, offset, size, space)
                        .map_err(Error::from)?;
                }
                Image::Elf { path, space } => {
                    mapper.borrow_mut().add_elf_file(&path, space).map_err(Error::from)?;
                }
            }
        }
        Ok(Decoder::new(tree))
    }
}

/// Pushing a whole buffer through a tree whose element output is a sink
/// of the user's (push mode), without writing the data-path loop by hand.
impl DecodeTree {
    /// Sends all of `data` (trace index 0 is its first byte) and then end
    /// of trace, answering each WAIT from the element output with FLUSH
    /// until the tree goes on. Returns the first fatal response as
    /// [`Error::Fatal`] (with the last error the tree logged), or
    /// [`Error::Stalled`] when the output keeps asking to wait with no
    /// progress.
    ///
    /// The loop it runs, for a caller who wants to do something of its own
    /// on each wait (hand elements to another thread, say):
    ///
    /// ```
    /// use coresight_decode::{DatapathOp, DecodeTree, TrcDataIn};
    ///
    /// fn push(tree: &mut DecodeTree, data: &[u8]) -> bool {
    ///     let mut pos = 0;
    ///     while pos < data.len() {
    ///         let (mut resp, used) = tree.trace_data_in(DatapathOp::Data, pos as u64, &data[pos..]);
    ///         pos += used;
    ///         while resp.is_wait() {
    ///             // ... the sink asked to wait: drain it here, then ...
    ///             resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
    ///         }
    ///         if resp.is_fatal() || (used == 0 && resp.is_cont()) {
    ///             return false;
    ///         }
    ///     }
    ///     // A wait stops the end of trace at the source whose output waits:
    ///     // once that is drained, the end of trace goes again, to the rest.
    ///     let mut resp = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
    ///     while resp.is_wait() {
    ///         while resp.is_wait() {
    ///             resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
    ///         }
    ///         if !resp.is_fatal() {
    ///             resp = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
    ///         }
    ///     }
    ///     !resp.is_fatal()
    /// }
    /// ```
    pub fn push_all(&mut self, data: &[u8]) -> Result<(), Error> {
        let mut pos = 0;
        while pos < data.len() {
            let (resp, used) = self.trace_data_in(DatapathOp::Data, pos as TrcIndex, &data[pos..]);
            pos += used.min(data.len() - pos);
            // Where it stopped: the first byte not taken.
            let resp = self.flush_while_waiting(resp, pos as TrcIndex, used)?;
            if resp.is_cont() && used == 0 {
                return Err(self.fatal(pos as TrcIndex, resp));
            }
        }
        // A wait stops the end of trace at the source whose output waits:
        // once that is drained, the end of trace is sent again, for the
        // sources after it (each round ends at least one more).
        let end = data.len() as TrcIndex;
        let mut resp = self.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        let mut rounds = 0usize;
        while resp.is_wait() {
            self.flush_while_waiting(resp, end, 0)?;
            rounds += 1;
            if rounds > MAX_EOT_ROUNDS {
                return Err(Error::Stalled { index: end });
            }
            resp = self.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        }
        if resp.is_fatal() {
            return Err(self.fatal(end, resp));
        }
        Ok(())
    }

    /// Flushes until the tree answers other than WAIT. Each flush of a
    /// sink that waits after every element hands out at least one element,
    /// and a byte of trace makes only a few: past a bound set by the
    /// `bytes` just sent, the output is waiting for nothing.
    fn flush_while_waiting(
        &mut self,
        mut resp: DatapathResp,
        index: TrcIndex,
        bytes: usize,
    ) -> Result<DatapathResp, Error> {
        let bound = (MAX_IDLE_FLUSHES as usize).saturating_add(bytes.saturating_mul(256));
        let mut flushes = 0usize;
        while resp.is_wait() {
            flushes += 1;
            if flushes > bound {
                return Err(Error::Stalled { index });
            }
            resp = self.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        }
        if resp.is_fatal() {
            return Err(self.fatal(index, resp));
        }
        Ok(resp)
    }

    fn fatal(&self, index: TrcIndex, response: DatapathResp) -> Error {
        Error::Fatal {
            index,
            response,
            error: self.error_logger().borrow().last_reason().cloned(),
        }
    }
}
