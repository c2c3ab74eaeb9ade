//! Snapshots written as they are made, for traces of gigabytes: the same
//! files, byte for byte, as [`crate::etmv4::generate_with`] and
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
use std::path::Path;

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
    let walk_rng = p.rng.clone();
    let mut walk = Walk::new(p.rng.clone(), &p.prog, &p.wcfg, p.steps);
    walk.by_ref().for_each(drop);
    p.rng = walk.into_rng();

    // 2. The walk again, encoded and written as it comes.
    let rng = &mut p.rng;
    let (enc, ts) = etmv4::encoder(rng, &p.cfg, p.m_profile);
    let encoding = Gen::new(&p.cfg, enc, ts, 0);
    let trace_path = dir.join("trace.bin");
    let mut file = BufWriter::with_capacity(1 << 16, File::create(&trace_path).map_err(at(&trace_path))?);
    let mut formatter =
        (opts.layout == BufferLayout::Formatted).then(|| FrameFormatter::new(FormatterConfig::default()));
    let mut failed: Option<io::Error> = None;
    let (mut trace_bytes, mut truth_items) = (0u64, 0u64);
    let mut write = |b: &[u8], t: &[Truth]| -> io::Result<()> {
        trace_bytes += b.len() as u64;
        truth_items += t.len() as u64;
        match &mut formatter {
            Some(f) => {
                f.push(STAND_IN_ID, b);
                f.write_frames(&mut file).map_err(at(&trace_path))?;
            }
            None => file.write_all(b).map_err(at(&trace_path))?,
        }
        if let Some(w) = &mut truth {
            for item in t {
                writeln!(w, "{item}")?;
            }
        }
        Ok(())
    };
    let (stats, _) = encoding.run_stream(
        rng,
        Walk::new(walk_rng, &p.prog, &p.wcfg, p.steps),
        &mut |b, t| match write(b, t) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        },
    );
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(f) = formatter {
        f.finish_into(&mut file).map_err(at(&trace_path))?;
    }
    drop(file.into_inner().map_err(|e| at(&trace_path)(e.into_error()))?);
    if let Some(w) = truth {
        w.flush()?;
    }

    // 3. and 4.: the trace ID, the formatter's numbers, the registers.
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let format = match opts.layout {
        BufferLayout::Formatted => {
            if trace_id != STAND_IN_ID {
                set_trace_id(&trace_path, STAND_IN_ID, trace_id).map_err(at(&trace_path))?;
            }
            skip_layout_draws(rng, trace_bytes);
            "coresight"
        }
        BufferLayout::Unformatted => "source_data",
    };
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
