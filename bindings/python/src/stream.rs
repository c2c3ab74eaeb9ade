//! Where elements come from: a snapshot's buffer, raw bytes with a
//! configuration, or a perf.data recording, behind one pull interface.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use coresight_decode::Element;
use coresight_decode::arch::ArchProfile;
use coresight_decode::decoder::{CoreConfig, SourceConfig};
use coresight_decode::deformatter::DeformatterConfig;
use coresight_decode::pull::{Decoder, DecoderBuilder, IntoElements, Trace, TraceData};
use coresight_decode::tree::SourceFormat;
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::decode::{DecodeOptions, Event, RecordingDecoder};
use coresight_perf_data::memory::Model;
use coresight_perf_data::{MappedFile, Recording};

/// Where a perf.data element came from.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    /// Index of the AUX buffer in the recording.
    pub buffer: u32,
    /// The CPU whose trace unit made it.
    pub cpu: u32,
    /// Process (-1: unknown).
    pub pid: i32,
    /// Thread (-1: unknown).
    pub tid: i32,
}

/// One decoded element.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    pub index: u64,
    pub trace_id: u8,
    pub element: Element,
    pub origin: Option<Origin>,
}

/// A decode in progress. `Err` is the error that stopped it (the last
/// item).
pub trait Stream: Send {
    fn next_item(&mut self) -> Option<Result<Item, String>>;

    /// Passes items to `f` until `f` returns true (stop for now), the
    /// stream ends or it fails: one call for many items, for sinks that
    /// take every item (Arrow batches).
    fn feed(&mut self, f: &mut dyn FnMut(Item) -> bool) -> Fed {
        while let Some(r) = self.next_item() {
            match r {
                Ok(i) => {
                    if f(i) {
                        return Fed::Stopped;
                    }
                }
                Err(e) => return Fed::Failed(e),
            }
        }
        Fed::End
    }

    /// The decoder and its data, when the stream is a decode tree that
    /// has not started (the Arrow batches are then filled by the tree, see
    /// `push`); otherwise the stream back (perf.data: a push-only decoder
    /// on a thread of its own).
    fn into_parts(self: Box<Self>) -> Result<(Decoder, TraceData), Box<dyn Stream>>;
}

/// Why [`Stream::feed`] returned.
pub enum Fed {
    /// The sink asked to stop; there may be more.
    Stopped,
    /// No more items.
    End,
    /// The decode stopped on this error.
    Failed(String),
}

/// The pull API over a trace buffer: the trace until the first element is
/// asked for (its decoder can still be taken for Arrow batches, see
/// [`Stream::into_parts`]), then its iterator.
enum PullStream {
    Ready(Trace),
    Running(IntoElements),
    /// Only while turning from one into the other.
    Gone,
}

impl PullStream {
    /// The iterator, started on the first call (`None` never happens: the
    /// stream is only `Gone` inside this function).
    fn elements(&mut self) -> Option<&mut IntoElements> {
        if let PullStream::Ready(_) = self
            && let PullStream::Ready(t) = std::mem::replace(self, PullStream::Gone)
        {
            *self = PullStream::Running(t.into_iter());
        }
        match self {
            PullStream::Running(e) => Some(e),
            _ => None,
        }
    }
}

impl Stream for PullStream {
    fn feed(&mut self, f: &mut dyn FnMut(Item) -> bool) -> Fed {
        let Some(elements) = self.elements() else {
            return Fed::End;
        };
        for r in elements.by_ref() {
            match r {
                Ok(d) => {
                    let i = Item {
                        index: d.index,
                        trace_id: d.trace_id,
                        element: d.element,
                        origin: None,
                    };
                    if f(i) {
                        return Fed::Stopped;
                    }
                }
                Err(e) => return Fed::Failed(e.to_string()),
            }
        }
        Fed::End
    }

    fn next_item(&mut self) -> Option<Result<Item, String>> {
        self.elements()?.next().map(|r| {
            r.map(|d| Item {
                index: d.index,
                trace_id: d.trace_id,
                element: d.element,
                origin: None,
            })
            .map_err(|e| e.to_string())
        })
    }

    fn into_parts(self: Box<Self>) -> Result<(Decoder, TraceData), Box<dyn Stream>> {
        match *self {
            PullStream::Ready(t) => Ok(t.into_parts()),
            s => Err(Box::new(s)),
        }
    }
}

/// Elements per message from the perf.data decode thread.
const PERF_CHUNK: usize = 4096;
/// Messages in flight: the decode thread waits when the reader is behind,
/// so memory stays bounded.
const PERF_QUEUE: usize = 4;

/// A perf.data recording decoded on its own thread (the recording's
/// decoder is push-only), its elements passed in chunks through a bounded
/// channel.
struct PerfStream {
    rx: Receiver<Result<Vec<Item>, String>>,
    chunk: std::vec::IntoIter<Item>,
    done: bool,
}

impl Stream for PerfStream {
    fn into_parts(self: Box<Self>) -> Result<(Decoder, TraceData), Box<dyn Stream>> {
        Err(self)
    }

    fn next_item(&mut self) -> Option<Result<Item, String>> {
        loop {
            if let Some(i) = self.chunk.next() {
                return Some(Ok(i));
            }
            if self.done {
                return None;
            }
            match self.rx.recv() {
                Ok(Ok(v)) => self.chunk = v.into_iter(),
                Ok(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Err(_) => {
                    self.done = true;
                    return None;
                }
            }
        }
    }
}

/// A trace source for a raw buffer.
#[derive(Clone, Debug)]
pub struct RawSource {
    pub protocol: String,
    pub config: SourceConfig,
}

/// How to (re)open a decode.
#[derive(Clone, Debug)]
pub enum Spec {
    Snapshot {
        dir: PathBuf,
        buffer: Option<String>,
    },
    Raw {
        data: Arc<Vec<u8>>,
        formatted: bool,
        sources: Vec<RawSource>,
        memory: Vec<(u64, Arc<Vec<u8>>)>,
        elfs: Vec<PathBuf>,
    },
    Perf {
        path: PathBuf,
        symdirs: Vec<PathBuf>,
    },
}

/// A source configuration from a protocol name, registers and core type.
pub fn source_config(
    name: &str,
    protocol: &str,
    registers: Vec<(String, u64)>,
    core: Option<&str>,
) -> Result<SourceConfig, String> {
    let device_type = match protocol.to_ascii_uppercase().as_str() {
        "ETMV4I" | "ETMV4" => "ETM4",
        "ETE" => "ETE",
        "PTM" => "PTM1",
        "ETMV3" => "ETM3",
        "STM" => "STM",
        "ITM" => "ITM",
        _ => protocol,
    }
    .to_string();
    let core = match core {
        Some(c) => Some(CoreConfig {
            name: format!("{name}_core"),
            core_type: c.to_string(),
            profile: ArchProfile::from_core_name(c).ok_or_else(|| format!("unknown core type '{c}'"))?,
        }),
        None => None,
    };
    Ok(SourceConfig {
        name: name.to_string(),
        device_type,
        regs: registers,
        core,
    })
}

fn perf_context(path: &std::path::Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

fn symbol_search(symdirs: &[PathBuf]) -> Result<SymbolSearch, String> {
    let mut search = SymbolSearch::new();
    for d in symdirs {
        search
            .add_symdir(d)
            .map_err(|e| format!("symbol directory {}: {e}", d.display()))?;
    }
    Ok(search)
}

/// Runs the decode of a recording, sending chunks of elements to `tx`.
fn perf_decode(
    path: &std::path::Path,
    symdirs: &[PathBuf],
    tx: &SyncSender<Result<Vec<Item>, String>>,
) -> Result<(), String> {
    let f = MappedFile::open(path).map_err(|e| e.to_string())?;
    let rec = Recording::parse(f.bytes()).map_err(|e| perf_context(path, e))?;
    let model = Arc::new(Model::new(&rec, symbol_search(symdirs)?));
    let mut dec = RecordingDecoder::new(&rec, model, DecodeOptions::default()).map_err(|e| perf_context(path, e))?;
    let mut chunk = Vec::with_capacity(PERF_CHUNK);
    let mut closed = false;
    dec.run(&mut |ev| {
        if closed {
            return;
        }
        if let Event::Element(info, e) = ev {
            chunk.push(Item {
                index: info.index,
                trace_id: info.trace_id,
                element: Element::from_generic(e),
                origin: Some(Origin {
                    buffer: info.buffer as u32,
                    cpu: info.cpu,
                    pid: info.pid,
                    tid: info.tid,
                }),
            });
            if chunk.len() >= PERF_CHUNK {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(PERF_CHUNK));
                // The reader has gone: decode no more.
                closed = tx.send(Ok(full)).is_err();
            }
        }
    });
    if !closed && !chunk.is_empty() {
        let _ = tx.send(Ok(chunk));
    }
    Ok(())
}

/// Checks that a recording can be decoded (its header, its CoreSight
/// configuration), so that `open` reports what would stop the decode.
fn perf_check(path: &std::path::Path, symdirs: &[PathBuf]) -> Result<(), String> {
    let f = MappedFile::open(path).map_err(|e| e.to_string())?;
    let rec = Recording::parse(f.bytes()).map_err(|e| perf_context(path, e))?;
    let model = Arc::new(Model::new(&rec, symbol_search(symdirs)?));
    RecordingDecoder::new(&rec, model, DecodeOptions::default()).map_err(|e| perf_context(path, e))?;
    Ok(())
}

impl Spec {
    /// Starts a decode: opens the snapshot, builds the decoder, or starts
    /// the recording's decode thread.
    pub fn open(&self) -> Result<Box<dyn Stream>, String> {
        match self {
            Spec::Snapshot { dir, buffer } => {
                let t = match buffer {
                    Some(b) => Trace::open_buffer(dir, b),
                    None => Trace::open(dir),
                }
                .map_err(|e| format!("{}: {e}", dir.display()))?;
                Ok(Box::new(PullStream::Ready(t)))
            }
            Spec::Raw {
                data,
                formatted,
                sources,
                memory,
                elfs,
            } => {
                let format = if *formatted {
                    SourceFormat::Formatted(DeformatterConfig::mem_aligned())
                } else {
                    SourceFormat::Single
                };
                let mut b = DecoderBuilder::new(format);
                for s in sources {
                    b = b.source(&s.protocol, s.config.clone());
                }
                for (addr, bytes) in memory {
                    b = b.memory(*addr, bytes.as_slice());
                }
                for e in elfs {
                    b = b.elf(e.clone());
                }
                let dec = b.build().map_err(|e| e.to_string())?;
                Ok(Box::new(PullStream::Ready(Trace::new(dec, data.to_vec()))))
            }
            Spec::Perf { path, symdirs } => {
                perf_check(path, symdirs)?;
                let (tx, rx) = sync_channel(PERF_QUEUE);
                let (path, symdirs) = (path.clone(), symdirs.clone());
                std::thread::Builder::new()
                    .name("perf-decode".into())
                    .spawn(move || {
                        if let Err(e) = perf_decode(&path, &symdirs, &tx) {
                            let _ = tx.send(Err(e));
                        }
                    })
                    .map_err(|e| format!("cannot start the decode thread: {e}"))?;
                Ok(Box::new(PerfStream {
                    rx,
                    chunk: Vec::new().into_iter(),
                    done: false,
                }))
            }
        }
    }
}
