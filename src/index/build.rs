//! Building a capture's indexes: a packet-level pass over the capture.

use super::source::SourceCollector;
use super::spill::{SourceSpill, Spill, Spilled};
use super::stream::{EntryStore, StreamCollector};
use super::{CaptureHasher, CaptureId, CaptureIndex, IndexedFormat, SourceIndex, StreamIndex};
use crate::datapath::{DatapathOp, TrcIndex};
use crate::decoder::DecodeMode;
use crate::error::Error;
use crate::fileio::CaptureReader;
use crate::interfaces::TrcDataIn;
use crate::shared::shared;
use crate::snapshot::Snapshot;
use crate::tree::{DecodeTree, SourceFormat};

/// How to index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexOptions {
    /// Source index block size in bytes (ID map and checkpoints): smaller
    /// is a bigger index and less work to reach a sync point.
    pub granularity: u32,
    /// Bytes handed to the tree at a time.
    pub block: usize,
    /// Index only the first `limit` bytes (partial indexing).
    pub limit: Option<u64>,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            granularity: 4096,
            block: 64 * 1024,
            limit: None,
        }
    }
}

/// Indexes `data` with `tree`, a tree built for the capture in
/// [`DecodeMode::PacketsOnly`] mode (a full-decode tree works too, but
/// walks the program for nothing). Every decoder of the tree gets a stream
/// indexer; a formatted tree's deformatter gets the source indexer.
///
/// A fatal data-path error stops indexing where it happened: the index
/// then covers the bytes before it ([`CaptureIndex::indexed`]).
pub fn build_index(tree: &mut DecodeTree, data: &[u8], opts: &IndexOptions) -> Result<CaptureIndex, Error> {
    build_from(tree, data.len() as u64, &mut Whole(Some(data)), opts, None).map(|(ix, _)| ix)
}

/// A capture handed over in pieces, in order; an empty piece at its end.
trait Pieces {
    fn next_piece(&mut self) -> Result<&[u8], Error>;
}

/// A capture in memory: one piece.
struct Whole<'a>(Option<&'a [u8]>);

impl Pieces for Whole<'_> {
    fn next_piece(&mut self) -> Result<&[u8], Error> {
        Ok(self.0.take().unwrap_or_default())
    }
}

/// A capture's files, read a chunk at a time.
struct Chunks<'a> {
    reader: &'a mut CaptureReader,
    buf: Vec<u8>,
}

impl Pieces for Chunks<'_> {
    fn next_piece(&mut self) -> Result<&[u8], Error> {
        let n = self
            .reader
            .fill(&mut self.buf)
            .map_err(|(path, source)| Error::Io { path, source })?;
        Ok(&self.buf[..n])
    }
}

/// Bytes of a capture's files read at a time while indexing.
const READ_CHUNK: usize = 1 << 20;

/// [`build_index`] on a capture of `total` bytes handed over in pieces:
/// all of it is read (and hashed) whatever `opts.limit` says. With
/// `spill_beside`, the entries and the finished source blocks, frame syncs
/// and triggers go to temporary files beside that path instead of the
/// index (see [`super::spill`]): the index returned holds the rest.
fn build_from(
    tree: &mut DecodeTree,
    total: u64,
    pieces: &mut dyn Pieces,
    opts: &IndexOptions,
    spill_beside: Option<&std::path::Path>,
) -> Result<(CaptureIndex, Option<Spilled>), Error> {
    let mut spills = 0;
    let mut new_spill = || -> Result<Option<Spill>, Error> {
        let Some(p) = spill_beside else { return Ok(None) };
        spills += 1;
        Spill::beside(p, spills)
            .map(Some)
            .map_err(|(path, source)| Error::Io { path, source })
    };
    let format = match tree.format() {
        SourceFormat::Formatted(c) => IndexedFormat::Formatted {
            mem_aligned: c.mem_aligned,
            fsyncs: c.fsyncs,
            hsyncs: c.hsyncs,
        },
        SourceFormat::Single => IndexedFormat::Single,
    };
    let mut streams = Vec::new();
    // A single-source tree keeps its decoder in slot 0, but the stream is
    // indexed under the trace ID its configuration gives (the ID its
    // elements carry), so a user asks for it by that ID.
    let ids: Vec<(u8, u8, String)> = tree
        .elements()
        .map(|(slot, e)| {
            let id = match format {
                IndexedFormat::Single => e.config_trace_id,
                IndexedFormat::Formatted { .. } => slot,
            };
            (slot, id, e.protocol.clone())
        })
        .collect();
    for (slot, id, protocol) in ids {
        let entries = shared(match new_spill()? {
            Some(s) => EntryStore::Spill(s),
            None => EntryStore::Memory(Vec::new()),
        });
        tree.attach_stream_indexer(slot, Box::new(StreamCollector::new(entries.clone())))
            .map_err(|e| Error::code(e, format!("trace ID 0x{id:02x} ({protocol}) cannot be indexed")))?;
        streams.push((id, protocol, entries));
    }
    let mut source_spill = None;
    let source = match format {
        IndexedFormat::Formatted { .. } => {
            let s = shared(SourceIndex {
                granularity: opts.granularity.max(16),
                ..SourceIndex::default()
            });
            let collector = match (new_spill()?, new_spill()?, new_spill()?) {
                (Some(blocks), Some(frame_syncs), Some(triggers)) => {
                    let sp = shared(Some(SourceSpill {
                        blocks,
                        frame_syncs,
                        triggers,
                    }));
                    source_spill = Some(sp.clone());
                    SourceCollector::spilling(s.clone(), sp)
                }
                _ => SourceCollector::new(s.clone()),
            };
            tree.set_source_indexer(Box::new(collector))
                .map_err(|e| Error::code(e, "the tree has no frame deformatter"))?;
            Some(s)
        }
        IndexedFormat::Single => None,
    };

    let end = opts.limit.map_or(total, |l| l.min(total));
    let end = match tree.format() {
        // Formatted input goes in whole units of the format.
        SourceFormat::Formatted(c) if opts.limit.is_some() => end - end % c.alignment() as u64,
        _ => end,
    };
    let block = (opts.block.max(16) & !15) as u64;
    let mut hash = CaptureHasher::new();
    // Trace index of the piece's first byte, and of the next byte to send.
    let mut base = 0u64;
    let mut at = 0u64;
    let mut stopped = false;
    loop {
        let piece = pieces.next_piece()?;
        if piece.is_empty() {
            break;
        }
        hash.update(piece);
        let piece_end = base + piece.len() as u64;
        let feed_end = end.min(piece_end);
        while !stopped && at < feed_end {
            let stop = (at + block).min(feed_end);
            let bytes = &piece[(at - base) as usize..(stop - base) as usize];
            let (mut r, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, bytes);
            at += used.min(bytes.len()) as u64;
            let waited = r.is_wait();
            while r.is_wait() {
                r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            }
            // A fatal error, or nothing taken with no wait (the tree
            // cannot go on): the index covers the bytes before.
            if r.is_fatal() || (used == 0 && !waited) {
                stopped = true;
            }
        }
        base = piece_end;
    }
    if !stopped {
        let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        while r.is_wait() {
            r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            if r.is_cont() {
                r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
            }
        }
    }
    // The collectors stay attached to the tree; what they collected is
    // taken out.
    let mut spilled = Spilled {
        streams: Vec::new(),
        source: None,
    };
    let streams = streams
        .into_iter()
        .map(|(id, protocol, entries)| {
            let entries = match std::mem::replace(&mut *entries.borrow_mut(), EntryStore::Memory(Vec::new())) {
                EntryStore::Memory(v) => v,
                EntryStore::Spill(s) => {
                    spilled.streams.push(s);
                    Vec::new()
                }
            };
            StreamIndex { id, protocol, entries }
        })
        .collect();
    let source = source.map(|s| std::mem::take(&mut *s.borrow_mut()));
    // The collector is dropped with the tree; its spill is taken out whole.
    spilled.source = source_spill.and_then(|sp| sp.borrow_mut().take());
    let ix = CaptureIndex {
        capture: CaptureId {
            size: hash.len(),
            hash: hash.finish(),
        },
        config: 0,
        format,
        indexed: 0..at,
        source,
        streams,
    };
    Ok((ix, spill_beside.map(|_| spilled)))
}

/// What [`Capture::index_to_file`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexWritten {
    /// The capture indexed.
    pub capture: CaptureId,
    /// Bytes of the capture indexed (see [`CaptureIndex::indexed`]).
    pub indexed: std::ops::Range<u64>,
    /// Trace IDs indexed.
    pub streams: usize,
    /// Entries over all of them.
    pub entries: u64,
}

/// A snapshot's trace buffer: its files and where the first is (an index
/// is saved beside it by default).
///
/// Loading does not read the trace: [`Capture::index`] and
/// [`Capture::load_index`] read it a chunk at a time, so memory does not
/// grow with the capture; [`Capture::data`] reads it all into memory once,
/// for the decodes that jump about in it ([`super::decode_window`]...).
pub struct Capture {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// The buffer's name.
    pub buffer: String,
    /// The buffer's first file.
    pub path: std::path::PathBuf,
    /// The buffer's files, in order.
    files: Vec<std::path::PathBuf>,
    /// DSTREAM footers to leave out.
    dstream: bool,
    /// Trace bytes when loaded.
    size: u64,
    /// The bytes, once [`Capture::data`] has read them.
    data: std::sync::OnceLock<Vec<u8>>,
}

impl Capture {
    /// Loads `buffer` (the first buffer when `None`) of the snapshot in
    /// `dir`, checking that its files can be read (without reading them).
    pub fn load(dir: &std::path::Path, buffer: Option<&str>) -> Result<Capture, Error> {
        let snapshot = Snapshot::load(dir)?;
        let buffer = match buffer {
            Some(b) => b.to_string(),
            None => snapshot
                .buffer_names()
                .first()
                .map(|s| s.to_string())
                .ok_or(Error::NoBuffer)?,
        };
        let info = snapshot
            .buffer(&buffer)
            .ok_or_else(|| Error::NoSuchBuffer {
                name: buffer.clone(),
                available: snapshot.buffer_names().join(", "),
            })?
            .clone();
        let files = snapshot.buffer_paths(&info);
        let dstream = info.has_dstream_footers();
        let size = CaptureReader::open_named(files.clone(), dstream)
            .map_err(|(path, source)| Error::Io { path, source })?
            .len();
        let path = files.first().cloned().unwrap_or_else(|| dir.join(&buffer));
        Ok(Capture {
            snapshot,
            buffer,
            path,
            files,
            dstream,
            size,
            data: std::sync::OnceLock::new(),
        })
    }

    /// Bytes of trace (DSTREAM footers left out), from the files' sizes
    /// when loaded.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// A reader of the trace from its first byte: the files one after
    /// another, DSTREAM footers left out.
    pub fn reader(&self) -> Result<CaptureReader, Error> {
        CaptureReader::open_named(self.files.clone(), self.dstream).map_err(|(path, source)| Error::Io { path, source })
    }

    /// The whole trace in memory, read on the first call and kept: for
    /// the decodes that start anywhere in it. Indexing does not need it.
    pub fn data(&self) -> Result<&[u8], Error> {
        if let Some(d) = self.data.get() {
            return Ok(d);
        }
        let d = self
            .reader()?
            .read_all()
            .map_err(|(path, source)| Error::Io { path, source })?;
        Ok(self.data.get_or_init(|| d))
    }

    /// A tree for the buffer in `mode`, with `setup` run on it first.
    pub fn tree(&self, mode: DecodeMode, setup: impl FnOnce(&mut DecodeTree)) -> Result<DecodeTree, Error> {
        self.snapshot.build_tree(&self.buffer, mode, setup)
    }

    /// Indexes the buffer, reading its files a chunk at a time.
    pub fn index(&self, opts: &IndexOptions) -> Result<CaptureIndex, Error> {
        Ok(self.index_from_files(opts, None)?.0)
    }

    /// Indexes the buffer into the index file at `path`, as
    /// [`index`](Self::index) then [`CaptureIndex::save`] would, without
    /// holding the index: its entries and source blocks grow with the
    /// capture, so they are set aside in temporary files beside `path`
    /// (removed after) while the capture is read, and memory stays the
    /// same whatever the capture's size. Returns what was written.
    pub fn index_to_file(&self, opts: &IndexOptions, path: &std::path::Path) -> Result<IndexWritten, Error> {
        let (ix, spilled) = self.index_from_files(opts, Some(path))?;
        let mut spilled = spilled.unwrap_or(Spilled {
            streams: Vec::new(),
            source: None,
        });
        let entries = spilled.streams.iter().map(Spill::count).sum::<u64>()
            + ix.streams.iter().map(|s| s.entries.len() as u64).sum::<u64>();
        let io = |p: Option<std::path::PathBuf>, source| Error::Io {
            path: p.unwrap_or_else(|| path.to_path_buf()),
            source,
        };
        let file = std::fs::File::create(path).map_err(|e| io(None, e))?;
        let mut out = crate::index::file::write_index_with(&ix, Some(&mut spilled), std::io::BufWriter::new(file))
            .map_err(|(p, e)| io(p, e))?;
        std::io::Write::flush(&mut out).map_err(|e| io(None, e))?;
        Ok(IndexWritten {
            capture: ix.capture,
            indexed: ix.indexed,
            streams: ix.streams.len(),
            entries,
        })
    }

    fn index_from_files(
        &self,
        opts: &IndexOptions,
        spill_beside: Option<&std::path::Path>,
    ) -> Result<(CaptureIndex, Option<Spilled>), Error> {
        let mut tree = self.tree(DecodeMode::PacketsOnly, |_| {})?;
        let mut reader = self.reader()?;
        let total = reader.len();
        let mut chunks = Chunks {
            reader: &mut reader,
            buf: vec![0; READ_CHUNK],
        };
        let (mut ix, spilled) = build_from(&mut tree, total, &mut chunks, opts, spill_beside)?;
        ix.config = self.config_hash();
        Ok((ix, spilled))
    }

    /// A hash of what the decode of this buffer depends on besides its
    /// bytes: the buffer's format and, for each of its trace sources, the
    /// source's and its core's names, types and registers. An index
    /// records it so that one built before the snapshot's configuration
    /// changed (another trace ID, format) is refused.
    pub fn config_hash(&self) -> u64 {
        let ss = &self.snapshot;
        let mut text = String::new();
        if let Some(b) = ss.buffer(&self.buffer) {
            text.push_str(&format!("buffer {} format {}\n", b.name, b.format));
        }
        for (src, core) in ss.sources_of(&self.buffer) {
            for name in std::iter::once(src).chain(core) {
                match ss.device(name) {
                    Some(d) => {
                        text.push_str(&format!("device {} {} {}\n", d.name, d.class, d.device_type));
                        for r in &d.regs {
                            text.push_str(&format!("  {}={:#x}\n", r.name, r.value));
                        }
                    }
                    None => text.push_str(&format!("device {name} missing\n")),
                }
            }
        }
        // Never 0, which means "not recorded".
        crate::index::capture_hash(text.as_bytes()).max(1)
    }

    /// Reads the index at `path` and checks that it was built from this
    /// capture's bytes (read a chunk at a time) and with its
    /// configuration.
    pub fn load_index(&self, path: &std::path::Path) -> Result<CaptureIndex, Error> {
        let now = match self.data.get() {
            Some(d) => CaptureId::of(d),
            None => CaptureId::read(&mut self.reader()?)?,
        };
        let ix = CaptureIndex::load_checked(path, now)?;
        crate::index::file::check_config(&ix, self.config_hash())?;
        Ok(ix)
    }

    /// [`load_index`](Self::load_index) for one split decode: the index
    /// holds of each stream only the entries that splitting it into
    /// `pieces` pieces and decoding them read, so it takes memory by the
    /// pieces, not by the capture (a full index has an entry per sync
    /// point, timestamp and context). [`CaptureIndex::split_pieces`] with
    /// the same `pieces` and the `decode_split` functions with
    /// `pieces` pieces per ID answer as with the full index; its other
    /// answers (counts, events, windows) are of the entries kept only.
    pub fn load_index_for_split(&self, path: &std::path::Path, pieces: usize) -> Result<CaptureIndex, Error> {
        let now = match self.data.get() {
            Some(d) => CaptureId::of(d),
            None => CaptureId::read(&mut self.reader()?)?,
        };
        let ix = CaptureIndex::load_split_checked(path, now, pieces)?;
        crate::index::file::check_config(&ix, self.config_hash())?;
        Ok(ix)
    }

    /// Where the index is saved by default: beside the buffer's first
    /// file, with `.csidx` added to its name.
    pub fn default_index_path(&self) -> std::path::PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".csidx");
        p.into()
    }
}
