//! Pipe-mode recordings read as they arrive from a [`Read`] (standard input, a pipe from
//! `perf record -o -`), one AUXTRACE buffer at a time, in bounded memory.
//!
//! [`open_stream`] reads the 16-byte pipe header. [`PipeStream::next_segment`] then reads
//! records until an AUXTRACE record and its payload have arrived, and gives a [`Segment`]: a
//! small pipe-mode recording made of the records kept so far (attributes, features, build
//! ids, AUXTRACE_INFO, maps, thread events, AUX records, ...) and that one buffer, which
//! [`Recording::parse`](crate::Recording::parse) reads like any other. Only the current
//! buffer's payload is held: SAMPLE, FINISHED_ROUND and HEADER_TRACING_DATA records and
//! earlier payloads are not kept, so memory grows with the recording's maps and thread
//! events, not with its trace.

use std::io::Read;

use crate::bytes::Endian;
use crate::error::{Error, Result, Warning};
use crate::header::{FILE_HEADER_SIZE, PIPE_HEADER_SIZE};
use crate::record::{kind, trailing_size};
use crate::recording::Recording;

/// What [`open_stream`] found.
#[derive(Debug)]
pub enum Opened<R> {
    /// A pipe-mode recording, to be read segment by segment.
    Pipe(PipeStream<R>),
    /// A file-mode recording (it needs random access): all of its bytes.
    File(Vec<u8>),
}

/// A pipe-mode recording being read from `R`.
#[derive(Debug)]
pub struct PipeStream<R> {
    input: R,
    endian: Endian,
    /// Offset in the stream of the next byte to be read.
    pos: u64,
    /// The pipe header and the records kept.
    kept: Vec<u8>,
    /// `(offset in kept, offset in the stream)` of each kept record, in order.
    origins: Vec<(u64, u64)>,
    done: bool,
    /// Problems met in the stream itself (a cut at its end), with stream offsets.
    pub warnings: Vec<Warning>,
    /// Records read.
    pub records: u64,
}

/// One AUXTRACE buffer with the records that came before it, as a pipe-mode recording.
#[derive(Debug, Clone)]
pub struct Segment {
    /// The bytes: parse them with [`Recording::parse`].
    pub bytes: Vec<u8>,
    origins: Vec<(u64, u64)>,
}

impl Segment {
    /// The stream offset of byte `offset` of [`Self::bytes`].
    pub fn stream_offset(&self, offset: u64) -> u64 {
        let i = self.origins.partition_point(|&(k, _)| k <= offset);
        match i.checked_sub(1).and_then(|i| self.origins.get(i)) {
            Some(&(k, s)) => s + (offset - k),
            None => offset,
        }
    }

    /// The segment as a recording, its offsets (and an error's) those of the stream.
    /// The AUX data is not checked against the AUX records here (a segment holds one
    /// buffer): see [`Recording::missing_aux_data`].
    pub fn recording(&self) -> Result<Recording<'_>> {
        let mut rec = Recording::parse_segment(&self.bytes).map_err(|e| e.map_offset(|o| self.stream_offset(o)))?;
        self.to_stream_offsets(&mut rec);
        Ok(rec)
    }

    /// Rewrites the offsets `rec` (parsed from [`Self::bytes`]) gives as offsets in the stream.
    pub fn to_stream_offsets(&self, rec: &mut Recording<'_>) {
        for b in &mut rec.buffers {
            b.record_offset = self.stream_offset(b.record_offset);
            b.data_offset = self.stream_offset(b.data_offset);
        }
        for w in &mut rec.warnings {
            w.offset = self.stream_offset(w.offset);
        }
        for m in &mut rec.maps {
            m.offset = self.stream_offset(m.offset);
        }
        for t in &mut rec.thread_events {
            t.offset = self.stream_offset(t.offset);
        }
    }
}

fn io_error(offset: u64, what: &'static str, e: &std::io::Error) -> Error {
    Error::malformed(offset, what, format!("read error: {e}"))
}

/// Reads up to `buf.len()` bytes; how many were read (fewer only at the end of the input).
fn read_full(r: &mut impl Read, buf: &mut [u8], offset: u64, what: &'static str) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(offset + n as u64, what, &e)),
        }
    }
    Ok(n)
}

/// Reads the start of `input`: a pipe-mode header gives a [`PipeStream`]; a file-mode one
/// makes the rest be read whole. Errors name the offset (a bad magic, a short header).
pub fn open_stream<R: Read>(mut input: R) -> Result<Opened<R>> {
    let mut head = [0u8; PIPE_HEADER_SIZE as usize];
    let n = read_full(&mut input, &mut head, 0, "perf.data header")?;
    let magic = &head[..n.min(8)];
    let endian = match magic {
        b"PERFILE2" => Endian::Little,
        b"2ELIFREP" => Endian::Big,
        _ => return Err(Error::BadMagic { found: magic.to_vec() }),
    };
    if n < head.len() {
        return Err(Error::Truncated {
            offset: 8,
            what: "header size",
            needed: 8,
            available: n as u64 - 8,
        });
    }
    let size = endian.u64(head[8..16].try_into().unwrap_or_default());
    if size != PIPE_HEADER_SIZE {
        if size < FILE_HEADER_SIZE {
            return Err(Error::malformed(
                8,
                "header size",
                format!("{size}, expected {PIPE_HEADER_SIZE} (pipe mode) or at least {FILE_HEADER_SIZE}"),
            ));
        }
        let mut all = head.to_vec();
        input
            .read_to_end(&mut all)
            .map_err(|e| io_error(all.len() as u64, "perf.data", &e))?;
        return Ok(Opened::File(all));
    }
    Ok(Opened::Pipe(PipeStream {
        input,
        endian,
        pos: PIPE_HEADER_SIZE,
        kept: head.to_vec(),
        origins: vec![(0, 0)],
        done: false,
        warnings: Vec::new(),
        records: 0,
    }))
}

impl<R: Read> PipeStream<R> {
    /// The stream offset of the next byte to be read.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The records kept so far with no buffer: what comes before the first buffer, or after
    /// the last (maps and thread events only, for a recording without trace).
    pub fn kept(&self) -> Segment {
        Segment {
            bytes: self.kept.clone(),
            origins: self.origins.clone(),
        }
    }

    /// Reads to the next AUXTRACE buffer. None at the end of the stream; a stream cut inside
    /// a record ends it with a warning in [`Self::warnings`]; a read error is an error.
    pub fn next_segment(&mut self) -> Option<Result<Segment>> {
        while !self.done {
            match self.next_record() {
                Ok(Some(seg)) => return Some(Ok(seg)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }

    /// Reads one record: a Segment when it is an AUXTRACE buffer.
    fn next_record(&mut self) -> Result<Option<Segment>> {
        let at = self.pos;
        let mut h = [0u8; 8];
        let n = read_full(&mut self.input, &mut h, at, "record header")?;
        if n == 0 {
            self.done = true;
            return Ok(None);
        }
        if n < 8 {
            return self.cut(at, "record header", 8, n as u64);
        }
        let e = self.endian;
        let k = e.u32([h[0], h[1], h[2], h[3]]);
        let size = u64::from(e.u16([h[6], h[7]]));
        if size < 8 {
            return Err(Error::malformed(
                at + 6,
                "record size",
                format!("{size} for a record of type {k}, expected at least 8"),
            ));
        }
        let mut body = vec![0u8; size as usize - 8];
        let n = read_full(&mut self.input, &mut body, at + 8, "record")?;
        if n < body.len() {
            return self.cut(at, "record", size, 8 + n as u64);
        }
        self.pos = at + size;
        self.records += 1;
        let trailing = trailing_size(k, &body, at, e)?;
        let mut payload = Vec::new();
        if let Some((psize, what)) = trailing {
            let got = (&mut self.input)
                .take(psize)
                .read_to_end(&mut payload)
                .map_err(|err| io_error(self.pos + payload.len() as u64, what, &err))?;
            if (got as u64) < psize {
                return self.cut(self.pos, what, psize, got as u64);
            }
            self.pos += psize;
        }
        match k {
            kind::AUXTRACE => {
                let mut bytes = Vec::with_capacity(self.kept.len() + h.len() + body.len() + payload.len());
                bytes.extend_from_slice(&self.kept);
                let mut origins = self.origins.clone();
                origins.push((bytes.len() as u64, at));
                bytes.extend_from_slice(&h);
                bytes.extend_from_slice(&body);
                bytes.extend_from_slice(&payload);
                Ok(Some(Segment { bytes, origins }))
            }
            kind::SAMPLE | kind::FINISHED_ROUND | kind::HEADER_TRACING_DATA => Ok(None),
            _ => {
                self.origins.push((self.kept.len() as u64, at));
                self.kept.extend_from_slice(&h);
                self.kept.extend_from_slice(&body);
                Ok(None)
            }
        }
    }

    /// The stream ends inside a record: a warning, and the end.
    fn cut(&mut self, offset: u64, what: &'static str, needed: u64, available: u64) -> Result<Option<Segment>> {
        self.done = true;
        self.warnings.push(
            Error::Truncated {
                offset,
                what,
                needed,
                available,
            }
            .into(),
        );
        Ok(None)
    }
}
