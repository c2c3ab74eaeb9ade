//! A persistent index of a Tarmac trace, built in one pass and reused
//! across runs: where to jump to reach a line or a time, and the calls
//! found.
//!
//! It holds a checkpoint (time, line, byte offset) at every `step`th
//! instruction (the first one included), the whole call tree (each
//! activation's entry, exit, call and resume sites and depth), the
//! instruction sets seen and the trace's line, record and instruction
//! counts.
//!
//! The trace it was built from is recognised by a [`Fingerprint`]: the
//! file's size, its modification time in nanoseconds, and an FNV-1a hash
//! of its first and last 64 KiB. An index whose fingerprint differs from
//! the trace's is stale and is rebuilt.
//!
//! File format (version 1), all integers little-endian:
//!
//! ```text
//! "TARMACIX"  version:u32  flags:u32 (bit 0 A64 seen, bit 1 A32/T32 seen)
//! size:u64  mtime_ns:u64  hash:u64            fingerprint
//! step:u32  reserved:u32  lines:u64  records:u64  instructions:u64
//! n:u64  n x (time:u64 line:u64 offset:u64)   checkpoints, lines rising
//! m:u64  m x (4 x (time:u64 line:u64 pc:u64) depth:u32 reserved:u32)
//!                                             activations: entry exit call resume
//! check:u64                                   FNV-1a of every byte before it
//! ```
//!
//! Loading checks every field and count against the bytes there are; a
//! damaged file is an [`IndexError`] naming the byte offset, never a panic.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::calls::{Activation, CallAnalyzer, CallTree, Site};
use super::record::{Record, RecordKind};

/// The index format's version, written after the magic.
pub const INDEX_VERSION: u32 = 1;
/// Instructions between checkpoints unless told otherwise.
pub const DEFAULT_STEP: u32 = 256;
const MAGIC: &[u8; 8] = b"TARMACIX";
/// Bytes hashed at each end of the trace for the fingerprint.
const HASHED_END: u64 = 64 * 1024;
const SITE_BYTES: usize = 24;
const ACT_BYTES: usize = 4 * SITE_BYTES + 8;

fn fnv1a(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// What identifies the trace an index was built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Fingerprint {
    /// File size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (0 if unknown).
    pub mtime_ns: u64,
    /// FNV-1a of the first and the last 64 KiB (the whole file if smaller).
    pub hash: u64,
}

impl Fingerprint {
    /// The fingerprint of the file at `path`: two reads of at most 64 KiB.
    pub fn of_file(path: &Path) -> io::Result<Fingerprint> {
        let mut f = File::open(path)?;
        let meta = f.metadata()?;
        let size = meta.len();
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        let mut buf = vec![0u8; HASHED_END.min(size) as usize];
        f.read_exact(&mut buf)?;
        let mut hash = fnv1a(FNV_OFFSET, &buf);
        if size > HASHED_END {
            let tail = HASHED_END.min(size - HASHED_END);
            f.seek(SeekFrom::Start(size - tail))?;
            buf.resize(tail as usize, 0);
            f.read_exact(&mut buf)?;
            hash = fnv1a(hash, &buf);
        }
        Ok(Fingerprint { size, mtime_ns, hash })
    }
}

/// A place in the trace: an instruction's time, line and byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// The record's time.
    pub time: u64,
    /// Its line number (1-based).
    pub line: u64,
    /// Byte offset of its line.
    pub offset: u64,
}

/// A damaged or foreign index file: what was wrong and at which byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexError {
    /// Byte offset in the index file.
    pub offset: u64,
    /// What was wrong there.
    pub what: String,
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.what)
    }
}

/// The index of one trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceIndex {
    /// The trace it was built from.
    pub fingerprint: Fingerprint,
    /// Instructions between checkpoints.
    pub step: u32,
    /// Lines, records and instructions read.
    pub lines: u64,
    /// Records read.
    pub records: u64,
    /// Instruction records read.
    pub instructions: u64,
    /// A64 instructions seen.
    pub aarch64: bool,
    /// A32 or T32 instructions seen.
    pub aarch32: bool,
    /// Every `step`th instruction, from the first.
    pub checkpoints: Vec<Checkpoint>,
    /// The calls found.
    pub calls: CallTree,
}

/// Builds a [`TraceIndex`] from the records of one pass.
pub struct IndexBuilder {
    analyzer: CallAnalyzer,
    index: TraceIndex,
}

impl IndexBuilder {
    /// A builder taking a checkpoint every `step` instructions (at least 1).
    pub fn new(step: u32) -> Self {
        IndexBuilder {
            analyzer: CallAnalyzer::new(),
            index: TraceIndex {
                step: step.max(1),
                ..Default::default()
            },
        }
    }

    /// Takes one record, its line starting at byte `pos`.
    pub fn feed_at(&mut self, rec: &Record, pos: u64) {
        self.analyzer.feed_at(rec, pos);
        let ix = &mut self.index;
        ix.records += 1;
        ix.lines = rec.line;
        if matches!(rec.kind, RecordKind::Instruction(_)) {
            if ix.instructions.is_multiple_of(ix.step as u64) {
                ix.checkpoints.push(Checkpoint {
                    time: rec.time,
                    line: rec.line,
                    offset: pos,
                });
            }
            ix.instructions += 1;
        }
    }

    /// The index, for the trace of `fingerprint`.
    pub fn finish(mut self, fingerprint: Fingerprint) -> TraceIndex {
        let (a64, a32) = self.analyzer.instruction_sets();
        self.index.aarch64 = a64;
        self.index.aarch32 = a32;
        self.index.calls = self.analyzer.finish();
        self.index.fingerprint = fingerprint;
        self.index
    }
}

fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Reads the index bytes in order, each read checked against the length.
struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], IndexError> {
        if self.data.len() - self.at < n {
            return Err(IndexError {
                offset: self.at as u64,
                what: format!("file ends inside {what}"),
            });
        }
        let s = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u64(&mut self, what: &str) -> Result<u64, IndexError> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }
    fn u32(&mut self, what: &str) -> Result<u32, IndexError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
    }
    fn err(&self, at: usize, what: impl Into<String>) -> IndexError {
        IndexError {
            offset: at as u64,
            what: what.into(),
        }
    }
    /// A count of `each`-byte entries, no more than the bytes left allow.
    fn count(&mut self, each: usize, what: &str) -> Result<usize, IndexError> {
        let at = self.at;
        let n = self.u64(what)?;
        let left = (self.data.len() - self.at) as u64;
        if n > left / each as u64 {
            return Err(self.err(at, format!("{what}: {n} entries do not fit in the {left} bytes left")));
        }
        Ok(n as usize)
    }
    fn site(&mut self) -> Result<Site, IndexError> {
        Ok(Site {
            time: self.u64("an activation")?,
            line: self.u64("an activation")?,
            pc: self.u64("an activation")?,
        })
    }
}

impl TraceIndex {
    /// The index as the bytes of an index file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut o = Vec::with_capacity(96 + self.checkpoints.len() * 24 + self.calls.acts.len() * ACT_BYTES);
        o.extend_from_slice(MAGIC);
        put32(&mut o, INDEX_VERSION);
        put32(&mut o, self.aarch64 as u32 | (self.aarch32 as u32) << 1);
        put64(&mut o, self.fingerprint.size);
        put64(&mut o, self.fingerprint.mtime_ns);
        put64(&mut o, self.fingerprint.hash);
        put32(&mut o, self.step);
        put32(&mut o, 0);
        put64(&mut o, self.lines);
        put64(&mut o, self.records);
        put64(&mut o, self.instructions);
        put64(&mut o, self.checkpoints.len() as u64);
        for c in &self.checkpoints {
            put64(&mut o, c.time);
            put64(&mut o, c.line);
            put64(&mut o, c.offset);
        }
        put64(&mut o, self.calls.acts.len() as u64);
        for a in &self.calls.acts {
            for s in [a.entry, a.exit, a.call, a.resume] {
                put64(&mut o, s.time);
                put64(&mut o, s.line);
                put64(&mut o, s.pc);
            }
            put32(&mut o, a.depth);
            put32(&mut o, 0);
        }
        let check = fnv1a(FNV_OFFSET, &o);
        put64(&mut o, check);
        o
    }

    /// Reads an index from the bytes of an index file, checking them.
    pub fn from_bytes(data: &[u8]) -> Result<TraceIndex, IndexError> {
        let mut c = Cursor { data, at: 0 };
        if c.take(8, "the magic")? != MAGIC {
            return Err(c.err(0, "not a Tarmac index (no TARMACIX magic)"));
        }
        let version = c.u32("the version")?;
        if version != INDEX_VERSION {
            return Err(c.err(
                8,
                format!("index version {version}, this program reads {INDEX_VERSION}"),
            ));
        }
        // The checksum first: a damaged file is reported as such rather than
        // by whichever field the damage happens to make implausible.
        if data.len() >= 20 {
            let end = data.len() - 8;
            let stored = u64::from_le_bytes(data[end..].try_into().unwrap_or([0; 8]));
            if fnv1a(FNV_OFFSET, &data[..end]) != stored {
                return Err(c.err(end, "checksum does not match the contents (damaged index)"));
            }
            c.data = &data[..end];
        }
        let flags_at = c.at;
        let flags = c.u32("the flags")?;
        if flags > 3 {
            return Err(c.err(flags_at, format!("unknown flags {flags:#x}")));
        }
        let fingerprint = Fingerprint {
            size: c.u64("the fingerprint")?,
            mtime_ns: c.u64("the fingerprint")?,
            hash: c.u64("the fingerprint")?,
        };
        let step_at = c.at;
        let step = c.u32("the step")?;
        if step == 0 {
            return Err(c.err(step_at, "checkpoint step 0"));
        }
        c.u32("the header")?;
        let lines = c.u64("the counts")?;
        let records = c.u64("the counts")?;
        let instructions = c.u64("the counts")?;
        let n = c.count(SITE_BYTES, "the checkpoints")?;
        let mut checkpoints: Vec<Checkpoint> = Vec::with_capacity(n);
        for _ in 0..n {
            let at = c.at;
            let cp = Checkpoint {
                time: c.u64("a checkpoint")?,
                line: c.u64("a checkpoint")?,
                offset: c.u64("a checkpoint")?,
            };
            if let Some(prev) = checkpoints.last()
                && (cp.line <= prev.line || cp.offset <= prev.offset)
            {
                return Err(c.err(at, "checkpoints out of order"));
            }
            if cp.line == 0 {
                return Err(c.err(at, "checkpoint at line 0 (lines count from 1)"));
            }
            if cp.offset >= fingerprint.size || cp.line > lines {
                return Err(c.err(at, "checkpoint beyond the end of the trace"));
            }
            checkpoints.push(cp);
        }
        let m = c.count(ACT_BYTES, "the activations")?;
        let mut acts = Vec::with_capacity(m);
        for _ in 0..m {
            let (entry, exit, call, resume) = (c.site()?, c.site()?, c.site()?, c.site()?);
            let depth_at = c.at;
            let depth = c.u32("an activation")?;
            c.u32("an activation")?;
            if depth as usize > acts.len() {
                return Err(c.err(depth_at, format!("call depth {depth} deeper than the calls before it")));
            }
            acts.push(Activation {
                entry,
                exit,
                call,
                resume,
                depth,
            });
        }
        if c.at != c.data.len() {
            return Err(c.err(c.at, format!("{} bytes after the activations", c.data.len() - c.at)));
        }
        Ok(TraceIndex {
            fingerprint,
            step,
            lines,
            records,
            instructions,
            aarch64: flags & 1 != 0,
            aarch32: flags & 2 != 0,
            checkpoints,
            calls: CallTree { acts },
        })
    }

    /// Reads the index file at `path`; the error names the file and byte.
    pub fn read_file(path: &Path) -> Result<TraceIndex, String> {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_bytes(&data).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes the index to `path` (through a temporary file beside it, so
    /// that a reader never sees half an index).
    pub fn write_file(&self, path: &Path) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::write(&tmp, self.to_bytes())?;
        std::fs::rename(&tmp, path)
    }

    /// The last checkpoint at or before `line` (the first one if none is).
    pub fn checkpoint_for_line(&self, line: u64) -> Option<&Checkpoint> {
        let i = self.checkpoints.partition_point(|c| c.line <= line);
        self.checkpoints.get(i.saturating_sub(1))
    }

    /// The last checkpoint before time `time` (the first one if none is):
    /// reading on from it reaches the first instruction at `time`.
    pub fn checkpoint_for_time(&self, time: u64) -> Option<&Checkpoint> {
        let i = self.checkpoints.partition_point(|c| c.time < time);
        self.checkpoints.get(i.saturating_sub(1))
    }

    /// The innermost activation running at `line` (entered at or before
    /// it, not yet returned); the root before the first instruction.
    pub fn activation_at(&self, line: u64) -> Option<usize> {
        let acts = &self.calls.acts;
        // Activations are in entry order; the innermost is the latest
        // entered one still running.
        let end = acts.partition_point(|a| a.entry.line <= line).max(acts.len().min(1));
        (0..end).rev().find(|&i| acts[i].exit.line >= line || i == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reader;

    fn build(text: &str, step: u32) -> TraceIndex {
        let mut r = Reader::new(text.as_bytes());
        let mut b = IndexBuilder::new(step);
        while let Some((pos, rec)) = r.next_record_with_offset().unwrap() {
            b.feed_at(&rec, pos);
        }
        b.finish(Fingerprint {
            size: text.len() as u64,
            mtime_ns: 7,
            hash: 9,
        })
    }

    const TRACE: &str = include_str!("../tests/fixtures/calls/a64-fm.tarmac");

    #[test]
    fn checkpoints_every_step_instructions_with_offsets() {
        let ix = build(TRACE, 100);
        assert_eq!(ix.instructions, 168);
        assert_eq!(ix.lines, 326);
        assert_eq!(ix.checkpoints.len(), 2);
        for c in &ix.checkpoints {
            let line = TRACE[c.offset as usize..].lines().next().unwrap();
            assert!(line.starts_with(&format!("{} clk I", c.time)), "{line}");
        }
        assert_eq!(ix.checkpoints[0].line, 33);
        assert!(ix.aarch64 && !ix.aarch32);
        // The call tree's first call, as tarmac calltree prints it.
        let a = ix.calls.acts[1];
        assert_eq!((a.entry.time, a.entry.line, a.entry.pc), (10, 49, 0x400130));
        assert_eq!((a.exit.time, a.exit.line, a.exit.pc), (127, 251, 0x400154));
    }

    #[test]
    fn round_trip() {
        let ix = build(TRACE, 64);
        let bytes = ix.to_bytes();
        assert_eq!(TraceIndex::from_bytes(&bytes).unwrap(), ix);
    }

    #[test]
    fn damaged_files_name_the_byte() {
        let ix = build(TRACE, 64);
        let bytes = ix.to_bytes();
        let e = TraceIndex::from_bytes(b"NOTANINDEX").unwrap_err();
        assert_eq!(e.to_string(), "byte 0: not a Tarmac index (no TARMACIX magic)");
        let e = TraceIndex::from_bytes(&bytes[..5]).unwrap_err();
        assert_eq!(e.to_string(), "byte 0: file ends inside the magic");
        let mut v = bytes.clone();
        v[8] = 2;
        assert_eq!(
            TraceIndex::from_bytes(&v).unwrap_err().to_string(),
            "byte 8: index version 2, this program reads 1"
        );
        let mut v = bytes.clone();
        v[100] ^= 1;
        let end = bytes.len() - 8;
        assert_eq!(
            TraceIndex::from_bytes(&v).unwrap_err().to_string(),
            format!("byte {end}: checksum does not match the contents (damaged index)")
        );
        // Cut anywhere: an error, never a panic.
        for n in 0..bytes.len() {
            assert!(TraceIndex::from_bytes(&bytes[..n]).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn damage_behind_a_valid_checksum_is_still_caught() {
        let ix = build(TRACE, 64);
        let mut v = ix.to_bytes();
        v.truncate(v.len() - 8);
        // A huge checkpoint count, checksum recomputed.
        v[72..80].copy_from_slice(&u64::MAX.to_le_bytes());
        let check = fnv1a(FNV_OFFSET, &v);
        v.extend_from_slice(&check.to_le_bytes());
        let e = TraceIndex::from_bytes(&v).unwrap_err();
        assert_eq!(e.offset, 72);
        assert!(
            e.what
                .starts_with("the checkpoints: 18446744073709551615 entries do not fit"),
            "{e}"
        );
    }

    #[test]
    fn lookups() {
        let ix = build(TRACE, 50);
        assert_eq!(ix.checkpoint_for_line(1).unwrap().line, 33);
        let c = ix.checkpoints[2];
        assert_eq!(ix.checkpoint_for_line(c.line + 3), Some(&c));
        assert_eq!(ix.checkpoint_for_time(c.time + 1), Some(&c));
        assert_eq!(ix.activation_at(1), Some(0));
        assert_eq!(ix.activation_at(49), Some(1));
        assert_eq!(ix.activation_at(ix.calls.acts[2].entry.line), Some(2));
        assert_eq!(ix.activation_at(252), Some(0));
    }

    #[test]
    fn fingerprint_changes_with_the_contents() {
        let dir = std::env::temp_dir().join(format!("tidx-fp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.tarmac");
        std::fs::write(&p, vec![b'a'; 200_000]).unwrap();
        let a = Fingerprint::of_file(&p).unwrap();
        let mut v = vec![b'a'; 200_000];
        v[199_999] = b'b';
        std::fs::write(&p, v).unwrap();
        let b = Fingerprint::of_file(&p).unwrap();
        assert_eq!(a.size, b.size);
        assert_ne!(a.hash, b.hash);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
