//! Decoding a snapshot (or a raw buffer with a snapshot's configuration)
//! into call stacks, and what the capture holds, for the report.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::decoder::DecoderRegistry;
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::MsgLogger;
use coresight_decode::memory::MemAccMapper;
use coresight_decode::shared::{Shared, shared};
use coresight_decode::snapshot::Snapshot;
use coresight_decode::tree::SourceFormat;

use crate::elements::ElementStacks;

/// One trace source of a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceInfo {
    /// Its name (the snapshot's device, a CPU...).
    pub name: String,
    /// The protocol.
    pub protocol: String,
    /// Its trace ID (0 when none: a raw per-CPU buffer).
    pub trace_id: u8,
}

/// What a capture holds, beside its call stacks.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    /// What the input was (a path and its kind).
    pub input: String,
    /// Kind of input: snapshot, perf.data, Tarmac...
    pub kind: String,
    /// The trace sources.
    pub sources: Vec<SourceInfo>,
    /// Trace bytes read.
    pub bytes: u64,
    /// Decoder errors, with the byte offset where each was reported (the
    /// first ones; `errors_total` counts them all).
    pub errors: Vec<(u64, String)>,
    /// All errors reported.
    pub errors_total: u64,
    /// Warnings about the input (snapshot files, perf.data records).
    pub warnings: Vec<String>,
}

impl Capture {
    /// Keeps an error (the first 200).
    pub fn error(&mut self, offset: u64, text: String) {
        self.errors_total += 1;
        if self.errors.len() < 200 {
            self.errors.push((offset, text));
        }
    }
}

/// How to decode a snapshot.
pub struct SnapshotInput<'a> {
    /// The snapshot directory.
    pub dir: &'a Path,
    /// The buffer to decode (default: the first).
    pub source: Option<&'a str>,
    /// Decode this file instead of the buffer's own files (a raw capture
    /// with the snapshot's configuration).
    pub raw_buffer: Option<PathBuf>,
    /// The protocols known (built-in and plug-ins).
    pub registry: Arc<DecoderRegistry>,
    /// Maps more memory images (the traced program's ELF files).
    pub map_images: &'a dyn Fn(&mut MemAccMapper) -> Result<(), String>,
    /// Called with (bytes done, total) as the trace is read.
    pub progress: &'a mut dyn FnMut(u64, u64),
}

/// Trace bytes given to the decoder at a time.
const CHUNK: usize = 2048;

/// Elements kept until the decoder hands back control.
struct Collect(Shared<Vec<(TrcIndex, u8, TraceElement)>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, trace_id, *elem));
        DatapathResp::Cont
    }
}

/// Decodes a snapshot's buffer into `stacks`; returns what it holds.
/// Errors name the snapshot, file and line (snapshot), or the byte offset.
pub fn decode_snapshot(input: SnapshotInput, stacks: &mut ElementStacks) -> Result<Capture, String> {
    let dir = input.dir;
    let ss = Snapshot::load(dir).map_err(|e| e.to_string())?;
    let mut cap = Capture {
        input: dir.display().to_string(),
        kind: "snapshot".into(),
        ..Default::default()
    };
    for w in ss.warnings() {
        cap.warnings.push(w.to_string());
    }
    let names: Vec<String> = ss.buffer_names().into_iter().map(str::to_string).collect();
    let source = match input.source {
        Some(n) if names.iter().any(|b| b == n) => n.to_string(),
        Some(n) => {
            return Err(format!(
                "no trace buffer named {n} in {} (it has: {})",
                dir.display(),
                names.join(", ")
            ));
        }
        None => names
            .first()
            .cloned()
            .ok_or_else(|| format!("the snapshot in {} names no trace buffer", dir.display()))?,
    };
    let errors = shared(MsgLogger::capture());
    let builder = TreeBuilder::with_registry(&ss, input.registry.clone());
    let mut tree = builder
        .build(&source, DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(errors.clone()))
        })
        .map_err(|e| match e {
            coresight_decode::Error::NoDecoder { .. } => format!(
                "{}: no trace source of buffer {source} has a supported protocol",
                dir.display()
            ),
            e => format!("{}: {e}", dir.display()),
        })?;
    if let SourceFormat::Formatted(mut cfg) = tree.format() {
        if !(cfg.fsyncs || cfg.hsyncs) {
            cfg.mem_aligned = true;
        }
        if let Some(d) = tree.deformatter_mut() {
            let _ = d.configure(cfg);
        }
    }
    if let Some(m) = tree.mem_mapper() {
        (input.map_images)(&mut m.borrow_mut())?;
    }
    let mut id_names: Vec<(u8, String)> = Vec::new();
    for (id, el) in tree.elements() {
        let name = if el.source_name.is_empty() {
            format!("id 0x{id:x}")
        } else {
            format!("{} (id 0x{id:x})", el.source_name)
        };
        cap.sources.push(SourceInfo {
            name: name.clone(),
            protocol: el.protocol.clone(),
            trace_id: id,
        });
        id_names.push((id, name));
    }
    let files: Vec<PathBuf> = match &input.raw_buffer {
        Some(p) => vec![p.clone()],
        None => {
            let b = ss
                .buffer(&source)
                .ok_or_else(|| format!("no trace buffer named {source}"))?;
            ss.buffer_paths(b)
        }
    };
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let got = shared(Vec::new());
    tree.set_gen_elem_out(Box::new(Collect(got.clone())));
    let take = |stacks: &mut ElementStacks, cap: &mut Capture| {
        let mut items = std::mem::take(&mut *got.borrow_mut());
        for (index, id, e) in &items {
            stacks.element(
                *id as u64,
                || {
                    id_names
                        .iter()
                        .find(|(i, _)| i == id)
                        .map_or_else(|| format!("id 0x{id:x}"), |(_, n)| n.clone())
                },
                *index,
                e,
            );
        }
        items.clear();
        *got.borrow_mut() = items;
        let text = errors.borrow_mut().take_captured();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            cap.error(error_offset(line).unwrap_or(cap.bytes), line.to_string());
        }
    };
    let mut block = vec![0u8; 64 * 1024];
    let mut index: TrcIndex = 0;
    let mut resp = DatapathResp::Cont;
    'files: for f in &files {
        let mut file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
        loop {
            let n = read_full(&mut file, &mut block).map_err(|e| format!("{}: at byte {index}: {e}", f.display()))?;
            if n == 0 {
                break;
            }
            let mut done = 0;
            while (done < n || resp.is_wait()) && !resp.is_fatal() {
                if resp.is_wait() {
                    resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
                } else {
                    // A few KiB at a time: the elements they make are kept
                    // until the decoder returns, and stay in cache so.
                    let end = n.min(done + CHUNK);
                    let (r, used) = tree.trace_data_in(DatapathOp::Data, index, &block[done..end]);
                    resp = r;
                    done += used;
                    index += used as TrcIndex;
                }
                cap.bytes = index;
                take(stacks, &mut cap);
            }
            (input.progress)(index, total);
            if resp.is_fatal() {
                break 'files;
            }
        }
    }
    if resp.is_fatal() {
        let last = tree.error_logger().borrow().last_reason().map(|e| e.to_string());
        cap.error(
            index,
            format!(
                "decode stopped by a fatal error after {index} bytes: {}",
                last.unwrap_or_default()
            ),
        );
    } else {
        let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        let mut tries = 0;
        while r.is_wait() && tries < 1_000_000 {
            tries += 1;
            r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            if r.is_cont() {
                r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
            }
        }
    }
    take(stacks, &mut cap);
    stacks.finish();
    Ok(cap)
}

/// The byte offset an OpenCSD-style error line names (`... (0x1a2b) ...`
/// after "Idx:" or "index").
fn error_offset(line: &str) -> Option<u64> {
    let lower = line.to_ascii_lowercase();
    let at = lower
        .find("idx:")
        .map(|i| i + 4)
        .or_else(|| lower.find("index").map(|i| i + 5))?;
    let rest = line[at..].trim_start_matches([' ', ':', '=']);
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == 'x')
        .collect();
    match digits.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => digits.parse().ok(),
    }
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_offsets() {
        assert_eq!(
            super::error_offset("0x0010 (ERR) [Idx:1234; ID:10]; bad packet"),
            Some(1234)
        );
        assert_eq!(super::error_offset("no offset here"), None);
    }
}
