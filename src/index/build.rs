//! Building a capture's indexes: a packet-level pass over the capture.

use super::source::SourceCollector;
use super::stream::StreamCollector;
use super::{CaptureId, CaptureIndex, IndexedFormat, SourceIndex, StreamIndex};
use crate::datapath::{DatapathOp, TrcIndex};
use crate::decoder::DecodeMode;
use crate::error::Error;
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
        let entries = shared(Vec::new());
        tree.attach_stream_indexer(slot, Box::new(StreamCollector::new(entries.clone())))
            .map_err(|e| Error::code(e, format!("trace ID 0x{id:02x} ({protocol}) cannot be indexed")))?;
        streams.push((id, protocol, entries));
    }
    let source = match format {
        IndexedFormat::Formatted { .. } => {
            let s = shared(SourceIndex {
                granularity: opts.granularity.max(16),
                ..SourceIndex::default()
            });
            tree.set_source_indexer(Box::new(SourceCollector::new(s.clone())))
                .map_err(|e| Error::code(e, "the tree has no frame deformatter"))?;
            Some(s)
        }
        IndexedFormat::Single => None,
    };

    let end = opts.limit.map_or(data.len(), |l| (l.min(data.len() as u64)) as usize);
    let end = match tree.format() {
        // Formatted input goes in whole units of the format.
        SourceFormat::Formatted(c) if opts.limit.is_some() => end - end % c.alignment(),
        _ => end,
    };
    let block = opts.block.max(16) & !15;
    let mut at = 0usize;
    let mut stopped = false;
    'feed: while at < end {
        let stop = (at + block).min(end);
        while at < stop {
            let (mut r, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, &data[at..stop]);
            at += used;
            while r.is_wait() {
                r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            }
            if r.is_fatal() {
                stopped = true;
                break 'feed;
            }
            if used == 0 {
                break;
            }
        }
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
    // The collectors stay attached to the tree; the entries are taken out.
    let streams = streams
        .into_iter()
        .map(|(id, protocol, entries)| StreamIndex {
            id,
            protocol,
            entries: std::mem::take(&mut *entries.borrow_mut()),
        })
        .collect();
    let source = source.map(|s| std::mem::take(&mut *s.borrow_mut()));
    Ok(CaptureIndex {
        capture: CaptureId::of(data),
        config: 0,
        format,
        indexed: 0..at as u64,
        source,
        streams,
    })
}

/// A snapshot's trace buffer: its bytes (files concatenated) and where the
/// first file is (an index is saved beside it by default).
pub struct Capture {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// The buffer's name.
    pub buffer: String,
    /// The buffer's bytes.
    pub data: Vec<u8>,
    /// The buffer's first file.
    pub path: std::path::PathBuf,
}

impl Capture {
    /// Loads `buffer` (the first buffer when `None`) of the snapshot in
    /// `dir`.
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
        let paths = snapshot.buffer_paths(&info);
        // One buffer of the files' total size: the capture is held once.
        let mut data = crate::fileio::read_concatenated(&paths).map_err(|(path, source)| Error::Io { path, source })?;
        if info.has_dstream_footers() {
            crate::dstream::strip_footers(&mut data);
        }
        let path = paths.first().cloned().unwrap_or_else(|| dir.join(&buffer));
        Ok(Capture {
            snapshot,
            buffer,
            data,
            path,
        })
    }

    /// A tree for the buffer in `mode`, with `setup` run on it first.
    pub fn tree(&self, mode: DecodeMode, setup: impl FnOnce(&mut DecodeTree)) -> Result<DecodeTree, Error> {
        self.snapshot.build_tree(&self.buffer, mode, setup)
    }

    /// Indexes the buffer.
    pub fn index(&self, opts: &IndexOptions) -> Result<CaptureIndex, Error> {
        let mut tree = self.tree(DecodeMode::PacketsOnly, |_| {})?;
        let mut ix = build_index(&mut tree, &self.data, opts)?;
        ix.config = self.config_hash();
        Ok(ix)
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
    /// capture's bytes and with its configuration.
    pub fn load_index(&self, path: &std::path::Path) -> Result<CaptureIndex, Error> {
        let ix = CaptureIndex::load(path, &self.data)?;
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
