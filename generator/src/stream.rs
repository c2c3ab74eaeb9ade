//! Snapshots written as they are made, for traces of gigabytes: the same
//! files, byte for byte, as [`crate::etmv4::generate_with`] (or
//! [`crate::ete::generate_with`]) and
//! [`crate::snapshot_writer::SnapshotSpec::write_to`] would write, in
//! memory bounded by the program rather than the trace.
//!
//! The in-memory generator draws its random numbers from one generator in
//! turn: the walk, then the encoding, then the trace ID, then the
//! formatter's pieces and the registers. Streaming keeps that order
//! without holding the walk or the trace:
//!
//! 1. the walk is made once and thrown away, for the numbers it leaves
//!    the encoder;
//! 2. it is made again, from the same numbers, one segment at a time, each
//!    encoded as it comes and the trace written through the formatter;
//! 3. the trace ID, drawn only after the encoding, is written into the
//!    frames afterwards: they were formatted with a stand-in ID, and the
//!    frames differ only in the ID bytes (a frame's layout depends only on
//!    where the ID changes, not on its value);
//! 4. the numbers the formatter's pieces took are drawn again from the
//!    trace's length, and the registers follow.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::ete::{self, EteOptions};
use crate::etmv4::{self, Etmv4Options, Gen, Stats};
use crate::flow::Walk;
use crate::formatter::{FormatterConfig, FrameFormatter};
use crate::{BufferLayout, GenOptions, Truth, skip_layout_draws};

/// What [`write_etmv4`] wrote.
#[derive(Clone, Debug)]
pub struct Streamed {
    /// The snapshot's description (as `snapshot.ini` gives it).
    pub description: String,
    /// Items of truth.
    pub truth_items: u64,
    /// Bytes of trace, before formatting.
    pub trace_bytes: u64,
    /// What the trace contains.
    pub stats: Stats,
}

/// The ID frames are formatted with until the real one is known.
const STAND_IN_ID: u8 = 0x10;

/// An I/O error that names its file.
fn at(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Writes the ETMv4 (or, for [`crate::GenProtocol::Etmv4M`], M-profile
/// ETMv4) snapshot of [`crate::etmv4::generate_with`] into `dir` (created
/// if needed), and its truth text (one item a line, as
/// [`crate::Generated::truth_text`]) to `truth` if given, holding a few
/// tens of kilobytes of trace and truth at a time.
pub fn write_etmv4(
    opts: &GenOptions,
    etmv4: &Etmv4Options,
    dir: &Path,
    mut truth: Option<&mut dyn Write>,
) -> io::Result<Streamed> {
    let mut p = etmv4::plan(opts, etmv4);
    std::fs::create_dir_all(dir).map_err(at(dir))?;

    // 1. The walk alone, for the random numbers it leaves.
    let walk_rng = Walk::skip_over(&mut p.rng, &p.prog, &p.wcfg, p.steps);

    // 2. The walk again, encoded and written as it comes.
    let rng = &mut p.rng;
    let (enc, ts) = etmv4::encoder(rng, &p.cfg, p.m_profile);
    let encoding = Gen::new(&p.cfg, enc, ts, 0);
    let mut trace = TraceFile::create(&dir.join("trace.bin"), opts.layout)?;
    let mut failed: Option<io::Error> = None;
    let mut truth_items = 0u64;
    let (stats, _) = encoding.run_stream(rng, Walk::new(walk_rng, &p.prog, &p.wcfg, p.steps), &mut |b, t| {
        truth_items += t.len() as u64;
        keep_going(trace.write(b).and_then(|()| write_truth(&mut truth, t)), &mut failed)
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let trace_bytes = trace.bytes;
    let trace = trace.finish()?;
    if let Some(w) = truth {
        w.flush()?;
    }

    // 3. and 4.: the trace ID, the formatter's numbers, the registers.
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let format = trace.set_trace_id(trace_id)?;
    if opts.layout == BufferLayout::Formatted {
        skip_layout_draws(rng, trace_bytes);
    }
    let spec = etmv4::snapshot(opts, &p, trace_id, format, Vec::new());
    spec.write_all_but_buffers(dir)
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(Streamed {
        description: spec.description,
        truth_items,
        trace_bytes,
        stats,
    })
}

/// [`write_etmv4`] for ETE ([`crate::ete::generate_with`]): one buffer or,
/// with several sessions, one a session (`session N` lines in the truth).
/// Sessions that start inside a transaction take one more walk to find.
pub fn write_ete(
    opts: &GenOptions,
    o: &EteOptions,
    dir: &Path,
    mut truth: Option<&mut dyn Write>,
) -> io::Result<Streamed> {
    let mut p = ete::plan(opts, o);
    std::fs::create_dir_all(dir).map_err(at(dir))?;
    let walk_rng = Walk::skip_over(&mut p.rng, &p.prog, &p.wcfg, p.steps);
    let rng = &mut p.rng;
    let windows = ete::session_windows(rng, &p.cfg, p.sessions, p.steps);
    // Where each session starts: the first segment in a transaction in its
    // window, for those that look for one.
    let mut starts: Vec<usize> = windows.iter().map(|w| w.start).collect();
    if let Some(last) = windows.iter().filter(|w| w.tx_start).map(|w| w.tx_limit).max() {
        let mut found = vec![false; windows.len()];
        let walk = Walk::new(walk_rng.clone(), &p.prog, &p.wcfg, p.steps);
        let in_tx = walk
            .take(last)
            .enumerate()
            .filter(|(_, s)| s.tx_depth > 0)
            .map(|(j, _)| j);
        for j in in_tx {
            for (k, w) in windows.iter().enumerate() {
                if w.tx_start && !found[k] && (w.start..w.tx_limit).contains(&j) {
                    starts[k] = j;
                    found[k] = true;
                }
            }
        }
    }

    let mut ts = ete::first_timestamp(rng, &p.cfg);
    let mut stats = Stats::default();
    let (mut trace_bytes, mut truth_items) = (0u64, 0u64);
    let mut walk = Walk::new(walk_rng, &p.prog, &p.wcfg, p.steps);
    let mut at_seg = 0;
    let mut written = Vec::with_capacity(p.sessions);
    for (i, (w, &start)) in windows.iter().zip(&starts).enumerate() {
        walk.by_ref().take(start - at_seg).for_each(drop);
        let enc = ete::encoder(rng, &p.cfg);
        let (_, _, file) = ete::session_names(i, p.sessions);
        let mut trace = TraceFile::create(&dir.join(file), opts.layout)?;
        if p.sessions > 1 {
            truth_items += 1;
            write_truth(&mut truth, &[Truth::Session(i as u32 + 1)])?;
        }
        let mut failed: Option<io::Error> = None;
        let (st, ts_end) =
            Gen::new(&p.cfg, enc, ts, 0).run_stream(rng, walk.by_ref().take(w.end - start), &mut |b, t| {
                truth_items += t.len() as u64;
                keep_going(trace.write(b).and_then(|()| write_truth(&mut truth, t)), &mut failed)
            });
        if let Some(e) = failed {
            return Err(e);
        }
        at_seg = w.end;
        ts = ts_end;
        stats.add(&st);
        trace_bytes += trace.bytes;
        written.push(trace.finish()?);
    }
    if let Some(w) = truth {
        w.flush()?;
    }

    let trace_id = 0x10 + rng.below(0x20) as u8;
    let regs = ete::registers(rng, &p.cfg, p.revision, trace_id);
    let mut buffers = Vec::with_capacity(written.len());
    for t in &written {
        buffers.push((t.set_trace_id(trace_id)?, Vec::new()));
    }
    let spec = ete::snapshot(opts, &p, &regs, buffers);
    spec.write_all_but_buffers(dir)
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(Streamed {
        description: spec.description,
        truth_items,
        trace_bytes,
        stats,
    })
}

/// Hands on an error from writing, if any: whether to go on.
fn keep_going(r: io::Result<()>, failed: &mut Option<io::Error>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => {
            *failed = Some(e);
            false
        }
    }
}

/// Truth items as text, one a line.
fn write_truth(w: &mut Option<&mut dyn Write>, t: &[Truth]) -> io::Result<()> {
    if let Some(w) = w {
        for item in t {
            writeln!(w, "{item}")?;
        }
    }
    Ok(())
}

/// A buffer file written as its trace is made: formatted (with a stand-in
/// ID until the real one is known) or not.
struct TraceFile {
    path: PathBuf,
    file: BufWriter<File>,
    formatter: Option<FrameFormatter>,
    /// Bytes of trace before formatting.
    bytes: u64,
}

/// A [`TraceFile`] written.
struct WrittenTrace {
    path: PathBuf,
    formatted: bool,
}

impl TraceFile {
    fn create(path: &Path, layout: BufferLayout) -> io::Result<TraceFile> {
        Ok(TraceFile {
            path: path.to_path_buf(),
            file: BufWriter::with_capacity(1 << 16, File::create(path).map_err(at(path))?),
            formatter: (layout == BufferLayout::Formatted).then(|| FrameFormatter::new(FormatterConfig::default())),
            bytes: 0,
        })
    }

    fn write(&mut self, b: &[u8]) -> io::Result<()> {
        self.bytes += b.len() as u64;
        match &mut self.formatter {
            Some(f) => {
                f.push(STAND_IN_ID, b);
                f.write_frames(&mut self.file)
            }
            None => self.file.write_all(b),
        }
        .map_err(at(&self.path))
    }

    fn finish(mut self) -> io::Result<WrittenTrace> {
        let formatted = self.formatter.is_some();
        if let Some(f) = self.formatter.take() {
            f.finish_into(&mut self.file).map_err(at(&self.path))?;
        }
        drop(self.file.into_inner().map_err(|e| at(&self.path)(e.into_error()))?);
        Ok(WrittenTrace {
            path: self.path,
            formatted,
        })
    }
}

impl WrittenTrace {
    /// Puts the trace ID into the frames; the buffer's format.
    fn set_trace_id(&self, trace_id: u8) -> io::Result<&'static str> {
        if !self.formatted {
            return Ok("source_data");
        }
        if trace_id != STAND_IN_ID {
            set_trace_id(&self.path, STAND_IN_ID, trace_id).map_err(at(&self.path))?;
        }
        Ok("coresight")
    }
}

/// Changes the trace ID `from` to `to` in the frames of the formatted
/// buffer at `path` (no syncs, whole 16-byte frames): an even byte of a
/// frame with bit 0 set is an ID (data in even bytes has bit 0 moved to
/// the frame's last byte).
fn set_trace_id(path: &Path, from: u8, to: u8) -> io::Result<()> {
    let mut f = OpenOptions::new().read(true).write(true).open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut pos = 0u64;
    loop {
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..])? {
                0 => break,
                k => n += k,
            }
        }
        if n == 0 {
            return Ok(());
        }
        let mut changed = false;
        for frame in buf[..n].chunks_exact_mut(16) {
            for b in frame[..15].iter_mut().step_by(2) {
                if *b == (from << 1) | 1 {
                    *b = (to << 1) | 1;
                    changed = true;
                }
            }
        }
        if changed {
            f.seek(SeekFrom::Start(pos))?;
            f.write_all(&buf[..n])?;
        }
        pos += n as u64;
        f.seek(SeekFrom::Start(pos))?;
    }
}
