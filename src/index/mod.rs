//! Trace indexes: the source indexer, the trace-ID stream indexers and the
//! index reader of the decode-tree design (OpenCSD's design document,
//! "Ancillary Support Components"), and what they make possible: decoding
//! one trace ID from the middle of a capture, a byte or time window, one
//! long stream split over threads, and several IDs merged by time.
//!
//! Indexing runs at packet level only (no memory image, no instruction
//! walk), in a tree built in [`crate::decoder::DecodeMode::PacketsOnly`]:
//!
//! - the **source indexer** ([`SourceIndex`]) is attached to the frame
//!   deformatter ([`crate::tree::DecodeTree::set_source_indexer`]): it
//!   records which trace IDs appear in each block of the capture (the
//!   granularity is configurable), a *checkpoint* per block (the first
//!   frame starting in it and the trace ID in effect at that frame's
//!   start, so the deformatter can begin there), frame syncs and
//!   formatter triggers (trace ID 0x7D);
//! - a **stream indexer** ([`StreamIndex`]) is attached to each trace ID's
//!   packet processor ([`crate::tree::DecodeTree::attach_stream_indexer`]):
//!   it records synchronisation points, timestamps, events and triggers,
//!   and protocol entries (trace info, context, exceptions, STM masters and
//!   channels), each at the `Idx` of its packet: the byte position in the
//!   whole capture that the packet listing prints.
//!
//! A stream index is full (every entry); [`StreamIndex::sparse`] gives
//! the sparse form (counts and key values per block).
//!
//! [`CaptureIndex`] holds both; [`CaptureIndex::save`] and
//! [`CaptureIndex::load`] keep it in a file (versioned, checked), its
//! methods answer searches, [`decode_window`] and the other `decode_`
//! functions decode from an indexed point.

mod build;
mod decode;
mod file;
mod reader;
mod source;
mod spill;
mod split_load;
mod stream;

pub use crate::hooks::{EntryKind, FrameRecord, FrameRun, SourceIndexer, StreamEntry, StreamIndexer};
pub use build::{Capture, IndexOptions, IndexWritten, build_index};
pub use decode::{
    Element, Window, WindowDecode, WindowNote, correlate, correlate_partial, decode_pieces, decode_split,
    decode_split_ids, decode_split_ids_partial, decode_window, element_time,
};
pub use file::{INDEX_VERSION, IndexFileError, check_capture, from_bytes, to_bytes};
pub use reader::{ByteWindow, EventHit, Piece};
pub use source::{Checkpoint, SourceBlock, SourceIndex};
pub use stream::{EntryCounts, SparseBlock, SparseStreamIndex, StreamIndex};

/// The capture an index was built from: a stale index (the capture
/// changed) is refused on load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureId {
    /// Size in bytes.
    pub size: u64,
    /// [`capture_hash`] of the bytes.
    pub hash: u64,
}

impl CaptureId {
    /// The identity of the capture `data`.
    pub(crate) fn of(data: &[u8]) -> CaptureId {
        CaptureId {
            size: data.len() as u64,
            hash: capture_hash(data),
        }
    }

    /// The identity of the capture `reader` reads from where it is on,
    /// read a chunk at a time.
    pub(crate) fn read(reader: &mut crate::fileio::CaptureReader) -> Result<CaptureId, crate::error::Error> {
        let mut h = CaptureHasher::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = reader
                .fill(&mut buf)
                .map_err(|(path, source)| crate::error::Error::Io { path, source })?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok(CaptureId {
            size: h.len(),
            hash: h.finish(),
        })
    }
}

/// A cheap 64-bit hash of a capture: FNV-1a over 8-byte little-endian
/// words (the tail zero-padded), then one final mix. It reads every byte
/// (a changed byte anywhere changes it with high probability) at memory
/// speed; it is a check against mistakes, not against tampering.
pub fn capture_hash(data: &[u8]) -> u64 {
    let mut h = CaptureHasher::new();
    h.update(data);
    h.finish()
}

/// [`capture_hash`] of a capture read in pieces of any size.
#[derive(Clone, Debug)]
pub(crate) struct CaptureHasher {
    h: u64,
    len: u64,
    /// Bytes of a word not yet complete.
    word: [u8; 8],
    have: usize,
}

impl CaptureHasher {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub(crate) fn new() -> CaptureHasher {
        CaptureHasher {
            h: 0xcbf2_9ce4_8422_2325,
            len: 0,
            word: [0; 8],
            have: 0,
        }
    }

    fn mix(&mut self, w: [u8; 8]) {
        self.h = (self.h ^ u64::from_le_bytes(w)).wrapping_mul(Self::PRIME);
    }

    pub(crate) fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if self.have > 0 {
            let n = (8 - self.have).min(data.len());
            self.word[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have < 8 {
                return;
            }
            self.mix(self.word);
            self.have = 0;
        }
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            self.mix(w.try_into().expect("8 bytes"));
        }
        let rest = words.remainder();
        self.word[..rest.len()].copy_from_slice(rest);
        self.have = rest.len();
    }

    /// Bytes hashed.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn finish(mut self) -> u64 {
        if self.have > 0 {
            let mut last = [0u8; 8];
            last[..self.have].copy_from_slice(&self.word[..self.have]);
            self.mix(last);
        }
        let mut h = self.h ^ self.len;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash of a capture read in pieces is the hash of it whole.
    #[test]
    fn a_capture_hashed_in_pieces_hashes_as_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 253) as u8).collect();
        for len in [0, 1, 7, 8, 9, 64, 1000] {
            let whole = capture_hash(&data[..len]);
            for piece in [1, 3, 8, 13, 100] {
                let mut h = CaptureHasher::new();
                for c in data[..len].chunks(piece) {
                    h.update(c);
                }
                assert_eq!(h.finish(), whole, "{len} bytes in pieces of {piece}");
            }
        }
        // The hash is the one index files have recorded: the whole-buffer
        // form it had before captures were read in pieces.
        fn whole(data: &[u8]) -> u64 {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            let mut words = data.chunks_exact(8);
            for w in &mut words {
                h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(0x0000_0100_0000_01b3);
            }
            let rest = words.remainder();
            if !rest.is_empty() {
                let mut last = [0u8; 8];
                last[..rest.len()].copy_from_slice(rest);
                h = (h ^ u64::from_le_bytes(last)).wrapping_mul(0x0000_0100_0000_01b3);
            }
            h ^= data.len() as u64;
            h ^= h >> 33;
            h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^ (h >> 33)
        }
        for len in [0, 5, 8, 999] {
            assert_eq!(capture_hash(&data[..len]), whole(&data[..len]), "{len} bytes");
        }
    }
}

/// How the indexed capture is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexedFormat {
    /// CoreSight frames: the deformatter's flags.
    Formatted {
        /// Frames aligned in memory (ETB/ETR).
        mem_aligned: bool,
        /// Frame syncs in the stream (TPIU, DSTREAM).
        fsyncs: bool,
        /// Half-frame syncs in the stream.
        hsyncs: bool,
    },
    /// One unformatted source (there is no source index).
    Single,
}

/// The indexes of one capture: the source index (formatted captures) and
/// one stream index per trace ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureIndex {
    /// The capture indexed.
    pub capture: CaptureId,
    /// Hash of the configuration it was indexed with (buffer format,
    /// trace sources and their registers: [`build::Capture::config_hash`]); 0
    /// when not recorded (an index built from a tree, not a snapshot).
    pub config: u64,
    /// Its layout.
    pub format: IndexedFormat,
    /// Bytes of the capture indexed: `0..size` when complete, less when
    /// indexing was asked to stop early (partial indexing).
    pub indexed: std::ops::Range<u64>,
    /// The source index (formatted captures).
    pub source: Option<SourceIndex>,
    /// By trace ID, ascending.
    pub streams: Vec<StreamIndex>,
}

impl CaptureIndex {
    /// The stream index of `id`.
    pub fn stream(&self, id: u8) -> Option<&StreamIndex> {
        self.streams.iter().find(|s| s.id == id)
    }

    /// Whether the whole capture was indexed.
    pub fn is_complete(&self) -> bool {
        self.indexed.start == 0 && self.indexed.end == self.capture.size
    }
}
