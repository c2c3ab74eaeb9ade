//! The saved index format.
//!
//! All numbers little-endian. Version 4 (version 3 had no VMID entries,
//! so a decoder started from it lacked a PTM/ETMv3 VMID given before its
//! sync point; version 2 indexed a single-source capture's stream as
//! trace ID 0x00, and STM sync points without where they start within a
//! byte):
//!
//! ```text
//! magic      8 bytes  "CSDIDX\r\n"
//! version    u32      INDEX_VERSION
//! capture    u64 size, u64 hash (crate::index::capture_hash)
//! config     u64      hash of the configuration the capture was decoded
//!                     with (CaptureIndex::config; 0: not recorded)
//! format     u8       0 single, 1 formatted; u8 flags (bit 0 memory
//!                     aligned, bit 1 FSYNCs, bit 2 HSYNCs); u16 zero
//! indexed    u64 start, u64 end
//! source     u8 present (0/1); if present:
//!              u32 granularity, u64 block count, per block: 16 bytes ID
//!              mask, u64 checkpoint frame (u64::MAX: none), u8 ID in
//!              effect (0xff: none)
//!              u64 frame sync count, u64 each
//!              u64 trigger count, u64 each
//! streams    u32 count; per stream: u8 trace ID, u8 name length, name
//!            (ASCII), u64 entry count, per entry: u64 index, u8 kind
//!            (EntryKind code), u64 value
//! checksum   u64      capture_hash of every byte before it
//! ```
//!
//! On load everything is checked: the magic and version, each count
//! against the bytes left (a corrupt count cannot make a huge
//! allocation), entry kinds, order (blocks and entries by index, streams
//! by ID), the checksum, and, against the capture given, its size and
//! hash (a stale index). Each problem is an [`IndexFileError`] naming the
//! byte offset and what was expected.

use std::path::Path;

use super::source::{Checkpoint, SourceBlock};
use super::spill::{Spill, Spilled};
use super::{CaptureId, CaptureIndex, EntryKind, IndexedFormat, SourceIndex, StreamEntry, StreamIndex, capture_hash};

/// The version this library writes and reads.
pub const INDEX_VERSION: u32 = 4;
const MAGIC: &[u8; 8] = b"CSDIDX\r\n";

pub use crate::error::IndexFileError;

/// Writes the file's fields, keeping the checksum of what it wrote.
struct Writer<W: std::io::Write> {
    out: W,
    sum: super::CaptureHasher,
    /// The first write error; later writes are skipped.
    err: Option<std::io::Error>,
}

impl<W: std::io::Write> Writer<W> {
    fn bytes(&mut self, b: &[u8]) {
        self.sum.update(b);
        if self.err.is_none()
            && let Err(e) = self.out.write_all(b)
        {
            self.err = Some(e);
        }
    }
    fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

/// The index as bytes of the saved format.
pub fn to_bytes(ix: &CaptureIndex) -> Vec<u8> {
    let out = Vec::with_capacity(64 + ix.streams.iter().map(|s| s.entries.len() * 17).sum::<usize>());
    write_index(ix, out).expect("writing to memory does not fail")
}

/// A stream entry as the file holds it.
pub(crate) fn entry_bytes(e: &StreamEntry) -> [u8; 17] {
    let mut b = [0u8; 17];
    b[..8].copy_from_slice(&e.index.to_le_bytes());
    b[8] = e.kind as u8;
    b[9..].copy_from_slice(&e.value.to_le_bytes());
    b
}

/// A source block as the file holds it.
pub(crate) fn block_bytes(blk: &SourceBlock) -> [u8; 25] {
    let mut b = [0u8; 25];
    b[..16].copy_from_slice(&blk.ids.to_le_bytes());
    let (frame, id) = match blk.checkpoint {
        Some(c) => (c.frame, c.id.unwrap_or(0xff)),
        None => (u64::MAX, 0xff),
    };
    b[16..24].copy_from_slice(&frame.to_le_bytes());
    b[24] = id;
    b
}

/// Writes the index's file to `out` as it goes (the file is never whole
/// in memory); returns `out`.
fn write_index<W: std::io::Write>(ix: &CaptureIndex, out: W) -> std::io::Result<W> {
    write_index_with(ix, None, out).map_err(|(_, e)| e)
}

/// [`write_index`] of an index some of whose lists were spilled while it
/// was built: each list is the spilled records, then those in `ix`. An
/// error names the file it came from (`None`: the output).
pub(crate) fn write_index_with<W: std::io::Write>(
    ix: &CaptureIndex,
    mut spilled: Option<&mut Spilled>,
    out: W,
) -> Result<W, (Option<std::path::PathBuf>, std::io::Error)> {
    let mut w = Writer {
        out,
        sum: super::CaptureHasher::new(),
        err: None,
    };
    w.bytes(MAGIC);
    w.u32(INDEX_VERSION);
    w.u64(ix.capture.size);
    w.u64(ix.capture.hash);
    w.u64(ix.config);
    match ix.format {
        IndexedFormat::Single => w.u8(0),
        IndexedFormat::Formatted { .. } => w.u8(1),
    }
    let flags = match ix.format {
        IndexedFormat::Single => 0,
        IndexedFormat::Formatted {
            mem_aligned,
            fsyncs,
            hsyncs,
        } => mem_aligned as u8 | (fsyncs as u8) << 1 | (hsyncs as u8) << 2,
    };
    w.u8(flags);
    w.bytes(&[0, 0]);
    w.u64(ix.indexed.start);
    w.u64(ix.indexed.end);
    match &ix.source {
        None => w.u8(0),
        Some(s) => {
            let sp = spilled.as_deref_mut().and_then(|sp| sp.source.as_mut());
            w.u8(1);
            w.u32(s.granularity);
            let (blocks, syncs, triggers) = match sp {
                Some(sp) => (Some(&mut sp.blocks), Some(&mut sp.frame_syncs), Some(&mut sp.triggers)),
                None => (None, None, None),
            };
            list_start(&mut w, blocks, s.blocks.len())?;
            for b in &s.blocks {
                w.bytes(&block_bytes(b));
            }
            for (spill, list) in [(syncs, &s.frame_syncs), (triggers, &s.triggers)] {
                list_start(&mut w, spill, list.len())?;
                for &i in list {
                    w.u64(i);
                }
            }
        }
    }
    w.u32(ix.streams.len() as u32);
    for (k, s) in ix.streams.iter().enumerate() {
        w.u8(s.id);
        let name = &s.protocol.as_bytes()[..s.protocol.len().min(255)];
        w.u8(name.len() as u8);
        w.bytes(name);
        let spill = spilled.as_deref_mut().and_then(|sp| sp.streams.get_mut(k));
        list_start(&mut w, spill, s.entries.len())?;
        for e in &s.entries {
            w.bytes(&entry_bytes(e));
        }
    }
    let sum = std::mem::replace(&mut w.sum, super::CaptureHasher::new()).finish();
    w.u64(sum);
    match w.err {
        Some(e) => Err((None, e)),
        None => Ok(w.out),
    }
}

/// Writes a list's count (the records `spill` set aside, then `held`
/// more) and the records set aside, which come first.
fn list_start<W: std::io::Write>(
    w: &mut Writer<W>,
    spill: Option<&mut Spill>,
    held: usize,
) -> Result<(), (Option<std::path::PathBuf>, std::io::Error)> {
    w.u64(spill.as_ref().map_or(0, |s| s.count()) + held as u64);
    if let Some(s) = spill {
        s.replay(|b| w.bytes(b)).map_err(|(p, e)| (Some(p), e))?;
    }
    Ok(())
}

/// Where a [`Reader`]'s bytes come from.
enum Src<'a> {
    Slice(&'a [u8]),
    /// A file read as it is parsed: the file is never whole in memory.
    File {
        file: std::io::BufReader<std::fs::File>,
        path: &'a Path,
        /// The field last read.
        buf: Vec<u8>,
    },
}

struct Reader<'a> {
    src: Src<'a>,
    len: usize,
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], IndexFileError> {
        let left = self.len - self.pos;
        if n > left {
            return Err(IndexFileError::Truncated {
                what,
                offset: self.pos,
                needed: n,
                left,
            });
        }
        let at = self.pos;
        self.pos += n;
        match &mut self.src {
            Src::Slice(d) => Ok(&d[at..at + n]),
            Src::File { file, path, buf } => {
                use std::io::Read;
                buf.resize(n, 0);
                file.read_exact(buf).map_err(|e| IndexFileError::Io {
                    path: path.display().to_string(),
                    msg: e.to_string(),
                })?;
                Ok(buf)
            }
        }
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, IndexFileError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, IndexFileError> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, IndexFileError> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    /// A count of items of `size` bytes each, checked against what is left
    /// (before the checksum).
    fn count(&mut self, size: usize, what: &'static str) -> Result<usize, IndexFileError> {
        let at = self.pos;
        let n = self.u64(what)?;
        let left = (self.len - self.pos).saturating_sub(8);
        if n > (left / size) as u64 {
            return Err(self.corrupt(
                at,
                format!("{what}: count {n} ({size} bytes each) is more than the {left} bytes left"),
            ));
        }
        Ok(n as usize)
    }
    fn corrupt(&self, at: usize, what: impl Into<String>) -> IndexFileError {
        IndexFileError::Corrupt {
            offset: at,
            what: what.into(),
        }
    }
}

/// What a parse keeps of the file's lists: everything ([`KeepAll`]), or
/// what one use needs (`super::split_load`).
pub(crate) trait Keep {
    /// Stream `n` (in file order), of trace ID `id`, begins; the indexed
    /// bytes end at `indexed_end`.
    fn stream(&mut self, _n: usize, _indexed_end: u64) {}
    /// The next entry of the stream.
    fn entry(&mut self, e: StreamEntry, out: &mut Vec<StreamEntry>) {
        out.push(e);
    }
    /// The stream's entries have all been given.
    fn stream_end(&mut self, _out: &mut Vec<StreamEntry>) {}
    /// Whether to keep item `k` of the source's frame syncs or triggers.
    fn list_item(&mut self, _k: usize) -> bool {
        true
    }
    /// How many of the source's `n` blocks to merge into one (a decoder
    /// then starts deformatting at an earlier checkpoint).
    fn merge_blocks(&mut self, _n: usize) -> usize {
        1
    }
    /// Whether lists are allocated at their whole size up front.
    fn whole(&self) -> bool {
        true
    }
}

/// Keeps every list whole: the index as saved.
pub(crate) struct KeepAll;
impl Keep for KeepAll {}

/// Reads an index from the saved format, checking it throughout (not
/// against a capture: see [`check_capture`]).
pub fn from_bytes(data: &[u8]) -> Result<CaptureIndex, IndexFileError> {
    let mut r = Reader {
        src: Src::Slice(data),
        len: data.len(),
        pos: 0,
    };
    check_magic(&mut r)?;
    // The checksum first: a damaged file is reported as such rather than
    // by whatever field the damage happens to hit.
    if data.len() >= 20 {
        let body = &data[..data.len() - 8];
        let found = u64::from_le_bytes(data[data.len() - 8..].try_into().expect("8 bytes"));
        check_sum(found, capture_hash(body))?;
    }
    parse(&mut r, &mut KeepAll)
}

fn check_sum(found: u64, expected: u64) -> Result<(), IndexFileError> {
    match found == expected {
        true => Ok(()),
        false => Err(IndexFileError::Checksum { found, expected }),
    }
}

/// Reads the index file at `path` a buffer at a time, keeping of its lists
/// what `keep` keeps; checked as [`from_bytes`] checks.
pub(crate) fn read_file(path: &Path, keep: &mut dyn Keep) -> Result<CaptureIndex, IndexFileError> {
    use std::io::Read;
    let io = |e: std::io::Error| IndexFileError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len() as usize;
    let mut r = Reader {
        src: Src::File {
            file: std::io::BufReader::with_capacity(64 * 1024, file),
            path,
            buf: Vec::new(),
        },
        len,
        pos: 0,
    };
    check_magic(&mut r)?;
    if len >= 20 {
        // Opened again: its own offset, apart from the parse's.
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut h = super::CaptureHasher::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut left = len - 8;
        while left > 0 {
            let n = left.min(buf.len());
            file.read_exact(&mut buf[..n]).map_err(io)?;
            h.update(&buf[..n]);
            left -= n;
        }
        let mut sum = [0u8; 8];
        file.read_exact(&mut sum).map_err(io)?;
        check_sum(u64::from_le_bytes(sum), h.finish())?;
    }
    parse(&mut r, keep)
}

fn check_magic(r: &mut Reader) -> Result<(), IndexFileError> {
    if r.take(8, "magic").map_err(|_| IndexFileError::BadMagic)? != MAGIC {
        return Err(IndexFileError::BadMagic);
    }
    let version = r.u32("version")?;
    if version != INDEX_VERSION {
        return Err(IndexFileError::Version {
            found: version,
            supported: INDEX_VERSION,
        });
    }
    Ok(())
}

/// Parses the fields after the version.
fn parse(r: &mut Reader, keep: &mut dyn Keep) -> Result<CaptureIndex, IndexFileError> {
    let capture = CaptureId {
        size: r.u64("capture size")?,
        hash: r.u64("capture hash")?,
    };
    let config = r.u64("configuration hash")?;
    let at = r.pos;
    let kind = r.u8("format")?;
    let flags = r.u8("format flags")?;
    r.take(2, "format padding")?;
    let format = match kind {
        0 => IndexedFormat::Single,
        1 => IndexedFormat::Formatted {
            mem_aligned: flags & 1 != 0,
            fsyncs: flags & 2 != 0,
            hsyncs: flags & 4 != 0,
        },
        k => return Err(r.corrupt(at, format!("format {k}, expected 0 (single) or 1 (formatted)"))),
    };
    let at = r.pos;
    let indexed = r.u64("indexed start")?..r.u64("indexed end")?;
    if indexed.start > indexed.end || indexed.end > capture.size {
        return Err(r.corrupt(
            at,
            format!(
                "indexed range {indexed:?} is not within the capture's {} bytes",
                capture.size
            ),
        ));
    }
    let at = r.pos;
    let source = match r.u8("source flag")? {
        0 => None,
        1 => {
            let at = r.pos;
            let granularity = r.u32("granularity")?;
            if granularity == 0 {
                return Err(r.corrupt(at, "granularity 0"));
            }
            let n = r.count(25, "source blocks")?;
            // Blocks kept merged `merge` to one, each with the first
            // checkpoint of those merged.
            let merge = keep.merge_blocks(n).clamp(1, (u32::MAX / granularity).max(1) as usize);
            let mut blocks: Vec<SourceBlock> = Vec::with_capacity(n.div_ceil(merge));
            let mut last = None;
            for b in 0..n {
                let ids = u128::from_le_bytes(r.take(16, "block ID mask")?.try_into().expect("16 bytes"));
                let at = r.pos;
                let frame = r.u64("checkpoint")?;
                let id = r.u8("checkpoint ID")?;
                let checkpoint = (frame != u64::MAX).then_some(Checkpoint {
                    frame,
                    id: (id != 0xff).then_some(id),
                });
                if let Some(c) = checkpoint {
                    let blk = c.frame / granularity as u64;
                    if blk != b as u64
                        || last.is_some_and(|l| l >= c.frame)
                        || c.frame >= indexed.end
                        || id != 0xff && id > 0x7f
                    {
                        return Err(r.corrupt(at, format!("checkpoint {c:?} does not belong to block {b}")));
                    }
                    last = Some(c.frame);
                }
                match blocks.get_mut(b / merge) {
                    Some(m) => {
                        m.ids |= ids;
                        m.checkpoint = m.checkpoint.or(checkpoint);
                    }
                    None => blocks.push(SourceBlock { ids, checkpoint }),
                }
            }
            let granularity = granularity * merge as u32;
            let mut lists = [Vec::new(), Vec::new()];
            for (list, what) in lists.iter_mut().zip(["frame syncs", "triggers"]) {
                let n = r.count(8, what)?;
                if keep.whole() {
                    list.reserve(n);
                }
                let mut last = None;
                for k in 0..n {
                    let at = r.pos;
                    let i = r.u64(what)?;
                    if last.is_some_and(|l| l > i) {
                        return Err(r.corrupt(at, format!("{what} out of order")));
                    }
                    last = Some(i);
                    if keep.list_item(k) {
                        list.push(i);
                    }
                }
            }
            let [frame_syncs, triggers] = lists;
            Some(SourceIndex {
                granularity,
                blocks,
                frame_syncs,
                triggers,
            })
        }
        f => return Err(r.corrupt(at, format!("source flag {f}, expected 0 or 1"))),
    };
    let n = r.u32("stream count")? as usize;
    let mut streams: Vec<StreamIndex> = Vec::new();
    for k in 0..n {
        let at = r.pos;
        let id = r.u8("trace ID")?;
        if id > 0x7f || streams.last().is_some_and(|s| s.id >= id) {
            return Err(r.corrupt(at, format!("trace ID 0x{id:02x} out of range or order")));
        }
        let len = r.u8("protocol name length")? as usize;
        let at = r.pos;
        let name = r.take(len, "protocol name")?.to_vec();
        let protocol = String::from_utf8(name).map_err(|_| r.corrupt(at, "protocol name not text"))?;
        let count = r.count(17, "stream entries")?;
        let mut entries = Vec::with_capacity(if keep.whole() { count } else { 0 });
        keep.stream(k, indexed.end);
        let mut last = None;
        for _ in 0..count {
            let at = r.pos;
            let index = r.u64("entry index")?;
            let code = r.u8("entry kind")?;
            let value = r.u64("entry value")?;
            let kind =
                EntryKind::from_code(code).ok_or_else(|| r.corrupt(at + 8, format!("unknown entry kind {code}")))?;
            if last.is_some_and(|l| l > index) || index >= indexed.end {
                return Err(r.corrupt(
                    at,
                    format!("entry index {index} out of order or past the indexed bytes"),
                ));
            }
            last = Some(index);
            keep.entry(StreamEntry { index, kind, value }, &mut entries);
        }
        keep.stream_end(&mut entries);
        streams.push(StreamIndex { id, protocol, entries });
    }
    r.u64("checksum")?;
    if r.pos != r.len {
        return Err(r.corrupt(r.pos, format!("{} bytes after the checksum", r.len - r.pos)));
    }
    Ok(CaptureIndex {
        capture,
        format,
        config,
        indexed,
        source,
        streams,
    })
}

/// Checks that `ix` was built with the configuration whose hash is
/// `config` (see [`crate::index::build::Capture::config_hash`]); an index that
/// recorded none (0) is taken.
pub(crate) fn check_config(ix: &CaptureIndex, config: u64) -> Result<(), IndexFileError> {
    if ix.config != 0 && ix.config != config {
        return Err(IndexFileError::ConfigChanged {
            indexed: ix.config,
            now: config,
        });
    }
    Ok(())
}

/// Checks that `ix` was built from `capture` (size and hash).
pub fn check_capture(ix: &CaptureIndex, capture: &[u8]) -> Result<(), IndexFileError> {
    check_id(ix, CaptureId::of(capture))
}

/// Checks that `ix` was built from the capture whose identity is `now`.
fn check_id(ix: &CaptureIndex, now: CaptureId) -> Result<(), IndexFileError> {
    if now != ix.capture {
        return Err(IndexFileError::Stale {
            indexed_size: ix.capture.size,
            indexed_hash: ix.capture.hash,
            size: now.size,
            hash: now.hash,
        });
    }
    Ok(())
}

impl CaptureIndex {
    /// Writes the index to `path`.
    pub fn save(&self, path: &Path) -> Result<(), IndexFileError> {
        use std::io::Write;
        let io = |e: std::io::Error| IndexFileError::Io {
            path: path.display().to_string(),
            msg: e.to_string(),
        };
        let file = std::fs::File::create(path).map_err(io)?;
        write_index(self, std::io::BufWriter::new(file))
            .and_then(|mut w| w.flush())
            .map_err(io)
    }

    /// Reads the index at `path` and checks it against `capture`.
    pub fn load(path: &Path, capture: &[u8]) -> Result<CaptureIndex, IndexFileError> {
        CaptureIndex::load_checked(path, CaptureId::of(capture))
    }

    /// Reads the index at `path` and checks it against the identity of
    /// the capture (hashed as it was read).
    pub(crate) fn load_checked(path: &Path, now: CaptureId) -> Result<CaptureIndex, IndexFileError> {
        let ix = read_file(path, &mut KeepAll)?;
        check_id(&ix, now)?;
        Ok(ix)
    }

    /// Reads the index at `path` keeping only what a split decode into
    /// `pieces` pieces per trace ID needs (`super::split_load`), and checks
    /// it against the identity of the capture.
    pub(crate) fn load_split_checked(
        path: &Path,
        now: CaptureId,
        pieces: usize,
    ) -> Result<CaptureIndex, IndexFileError> {
        // A first pass learns which streams have trace info entries, which
        // decides which sync points are clean.
        let mut info = super::split_load::HasInfo::default();
        read_file(path, &mut info)?;
        let ix = read_file(path, &mut super::split_load::SplitKeep::new(pieces, info.0))?;
        check_id(&ix, now)?;
        Ok(ix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a small index, field by field as the module
    /// documentation lays them out.
    #[test]
    fn layout_is_as_documented() {
        let ix = CaptureIndex {
            capture: CaptureId { size: 64, hash: 0x1122 },
            config: 0x3344,
            format: IndexedFormat::Formatted {
                mem_aligned: true,
                fsyncs: false,
                hsyncs: false,
            },
            indexed: 0..64,
            source: Some(SourceIndex {
                granularity: 32,
                blocks: vec![SourceBlock {
                    ids: 1 << 0x10,
                    checkpoint: Some(Checkpoint { frame: 0, id: None }),
                }],
                frame_syncs: vec![],
                triggers: vec![16],
            }),
            streams: vec![StreamIndex {
                id: 0x10,
                protocol: "STM".into(),
                entries: vec![StreamEntry {
                    index: 5,
                    kind: EntryKind::Sync,
                    value: 7,
                }],
            }],
        };
        let b = to_bytes(&ix);
        let mut want = b"CSDIDX\r\n".to_vec();
        want.extend_from_slice(&4u32.to_le_bytes());
        want.extend_from_slice(&64u64.to_le_bytes());
        want.extend_from_slice(&0x1122u64.to_le_bytes());
        want.extend_from_slice(&0x3344u64.to_le_bytes());
        want.extend_from_slice(&[1, 1, 0, 0]);
        want.extend_from_slice(&0u64.to_le_bytes());
        want.extend_from_slice(&64u64.to_le_bytes());
        want.push(1);
        want.extend_from_slice(&32u32.to_le_bytes());
        want.extend_from_slice(&1u64.to_le_bytes());
        want.extend_from_slice(&(1u128 << 0x10).to_le_bytes());
        want.extend_from_slice(&0u64.to_le_bytes());
        want.push(0xff);
        want.extend_from_slice(&0u64.to_le_bytes());
        want.extend_from_slice(&1u64.to_le_bytes());
        want.extend_from_slice(&16u64.to_le_bytes());
        want.extend_from_slice(&1u32.to_le_bytes());
        want.extend_from_slice(&[0x10, 3]);
        want.extend_from_slice(b"STM");
        want.extend_from_slice(&1u64.to_le_bytes());
        want.extend_from_slice(&5u64.to_le_bytes());
        want.push(1);
        want.extend_from_slice(&7u64.to_le_bytes());
        let sum = capture_hash(&want);
        want.extend_from_slice(&sum.to_le_bytes());
        assert_eq!(b, want);
        assert_eq!(from_bytes(&b).unwrap(), ix);
    }

    #[test]
    fn counts_cannot_ask_for_more_than_the_file_holds() {
        let mut b = b"CSDIDX\r\n".to_vec();
        b.extend_from_slice(&INDEX_VERSION.to_le_bytes());
        b.extend_from_slice(&[0; 24]);
        b.extend_from_slice(&[0, 0, 0, 0]);
        b.extend_from_slice(&[0; 16]);
        b.push(0);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&[0x10, 0]);
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        let sum = capture_hash(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        let e = from_bytes(&b).unwrap_err();
        assert_eq!(
            e.to_string(),
            "index corrupt at byte 63: stream entries: count 18446744073709551615 (17 bytes each) is more than the 0 bytes left"
        );
    }
}
