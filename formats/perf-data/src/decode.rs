//! Decoding a recording's AUX trace: one decoder per CPU's trace unit (ETMv4, ETE, ETMv3 or
//! PTM, from the cs_etm AUXTRACE_INFO), each AUXTRACE buffer fed as CoreSight frames (one tree
//! whose deformatter routes each trace ID to its CPU's decoder) or as one raw stream (TRBE:
//! the buffer's CPU's own tree), with the decoders reset before every buffer as perf and
//! simpleperf do (buffers are not contiguous, and the start of one may be overwritten trace).
//!
//! Elements go to a callback with the CPU, trace ID, buffer and thread they belong to. The
//! thread is kept per CPU in [`Streams`]: PE_CONTEXT elements set it from the context ID
//! before any later memory read, when the trace unit traces context IDs; else the recording's
//! ITRACE_START and SWITCH records for the CPU give it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile};
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{CoreConfig, DecodeMode, DecoderOptions, SourceConfig};
use coresight_decode::deformatter::DeformatterConfig;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::interfaces::{TargetMemAccess, TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::MsgLogger;
use coresight_decode::printers::PacketPrinter;
use coresight_decode::shared::{Shared, shared};
use coresight_decode::tree::{DecodeTree, SourceFormat};

use crate::cs_etm::{CpuConfig, TraceUnit};
use crate::error::Warning;
use crate::memory::{Model, RecordingMemory, StreamOf, Streams};
use crate::recording::{AuxBuffer, AuxFormat, Recording, ThreadEventKind};

/// A recording that cannot be decoded at all.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// No cs_etm AUXTRACE_INFO: not a CoreSight recording (or it was lost).
    #[error("the recording has no CoreSight (cs_etm) AUXTRACE_INFO record: nothing says how to decode its trace")]
    NoCsEtmInfo,
    /// A CPU's configuration could not make a decoder.
    #[error("at file offset {offset:#x}: cannot make a {protocol} decoder for CPU {cpu}: {detail}")]
    Config {
        /// File offset of the AUXTRACE_INFO record's private data.
        offset: u64,
        /// The CPU.
        cpu: u32,
        /// The protocol.
        protocol: &'static str,
        /// What the library said.
        detail: String,
    },
}

/// How to decode.
#[derive(Debug, Clone, Default)]
pub struct DecodeOptions {
    /// Packets only (for a packet dump), not elements.
    pub packets_only: bool,
    /// Where packet listings go (with `packets_only`, or beside the elements).
    pub packet_out: Option<Shared<MsgLogger>>,
    /// Feed each AUX record's piece of a buffer on its own, the decoders reset before each
    /// (what simpleperf does: it decodes AUX record by AUX record). Default: whole buffers,
    /// as perf does.
    pub split_at_aux_records: bool,
    /// Send the decoders an end of trace after each piece, so that what they hold back is
    /// delivered (perf does, at each buffer's end; simpleperf does not).
    pub flush_each_buffer: bool,
    /// Decode only the buffers of these CPUs (empty: all).
    pub cpus: Vec<u32>,
    /// Decode every raw (TRBE) buffer with the first CPU's trace unit configuration and say
    /// its elements are that CPU's, as Linux perf 6.1 does (a perf bug, fixed in 6.7: for
    /// comparing with that perf only).
    pub raw_with_first_config: bool,
    /// Decoders that hold what OpenCSD's would when the element sink waits at a
    /// block's end (see [`DecoderOptions::opencsd_flow`]): for matching a perf that
    /// drops what a decoder holds when it waits at a buffer's end (6.1).
    pub opencsd_flow: bool,
    /// Number the bytes of each buffer from its offset in its AUX area (the AUXTRACE
    /// record's `offset`: a CPU's first buffer from 0, its next one on from there), as the
    /// packet indexes `perf report -D` prints go; not on from the buffers decoded before it.
    pub index_at_aux_offset: bool,
    /// Write the decoders' error messages among the packets, each on its own line where it
    /// arose (to `packet_out`, as `perf report -D` shows them), rather than keeping them as
    /// warnings.
    pub errors_with_packets: bool,
    /// Set (by the caller, from its callback) to end [`RecordingDecoder::run`] early: it
    /// stops feeding at the next piece of data (a reader that is gone, a closed pipe).
    pub stop: Option<Arc<AtomicBool>>,
}

/// Where an element came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementInfo {
    /// Index of the buffer in [`Recording::buffers`].
    pub buffer: usize,
    /// The CPU whose trace unit made it.
    pub cpu: u32,
    /// Its stream: the index of that CPU's configuration in the cs_etm info.
    pub stream: usize,
    /// Its trace ID.
    pub trace_id: u8,
    /// Index of the packet's first byte: its offset in the buffer plus the sizes of the
    /// buffers decoded before it (unique across the decode), or plus the buffer's AUX offset
    /// instead with [`DecodeOptions::index_at_aux_offset`].
    pub index: TrcIndex,
    /// The process traced when it was made (-1: unknown).
    pub pid: i32,
    /// The thread (-1: unknown).
    pub tid: i32,
}

/// What the callback of [`RecordingDecoder::run`] is told.
#[derive(Debug)]
pub enum Event<'e, 'a> {
    /// A buffer starts (the decoders were reset).
    BufferStart {
        /// Its index.
        buffer: usize,
        /// The buffer.
        aux: &'e AuxBuffer<'a>,
    },
    /// An element.
    Element(&'e ElementInfo, &'e TraceElement),
    /// A buffer ends.
    BufferEnd {
        /// Its index.
        buffer: usize,
    },
}

/// One CPU's trace unit and how it is decoded.
#[derive(Debug, Clone)]
pub struct CpuStream {
    /// The CPU.
    pub cpu: u32,
    /// Its trace ID.
    pub trace_id: u8,
    /// The decoder's protocol (`ETMV4I`, `ETE`, `ETMV3`, `PTM`).
    pub protocol: &'static str,
    /// The registers given to the decoder.
    pub config: SourceConfig,
    /// Context IDs (or VMIDs) in the trace name the thread.
    pub context_ids: bool,
    /// The VMID, not the context ID, holds the thread (a kernel at EL2: CONTEXTIDR_EL2).
    pub use_vmid: bool,
}

/// TRCCONFIGR bits: context ID, VMID, VMID option (perf's `ETM4_CFG_BIT_*`).
const TRCCONFIGR_CID: u64 = 1 << 6;
const TRCCONFIGR_VMID: u64 = 1 << 7;
const TRCCONFIGR_VMIDOPT: u64 = 1 << 15;
/// ETMCR context ID size field (bits 15:14): non-zero when context IDs are traced.
const ETMCR_CTXID_SIZE: u64 = 3 << 14;
/// PTMs have ETMIDR[11:8] = 0b0011.
const ETMIDR_PTM_VERSION: u64 = 0x300;

impl CpuStream {
    /// The decoder configuration for one CPU block of the cs_etm info.
    pub fn from_config(c: &CpuConfig) -> CpuStream {
        let core = |profile: ArchProfile, kind: &str| {
            Some(CoreConfig {
                name: format!("cpu_{}", c.cpu),
                core_type: kind.to_string(),
                profile,
            })
        };
        let reg = |n: &str, v: u64| (n.to_string(), v);
        match &c.unit {
            TraceUnit::Etmv3(e) => {
                let ptm = e.etmidr & ETMIDR_PTM_VERSION == ETMIDR_PTM_VERSION;
                CpuStream {
                    cpu: c.cpu,
                    trace_id: c.trace_id(),
                    protocol: if ptm { "PTM" } else { "ETMV3" },
                    config: SourceConfig {
                        name: format!("ETM_{}", c.cpu),
                        device_type: if ptm { "PTM1.1" } else { "ETM3.5" }.into(),
                        regs: vec![
                            reg("ETMCR", e.etmcr),
                            reg("ETMTRACEIDR", e.etmtraceidr),
                            reg("ETMCCER", e.etmccer),
                            reg("ETMIDR", e.etmidr),
                        ],
                        core: core(ArchProfile::new(ArchVersion::V7, CoreProfile::CortexA), "ARMv7-A"),
                    },
                    context_ids: e.etmcr & ETMCR_CTXID_SIZE != 0,
                    use_vmid: false,
                }
            }
            TraceUnit::Etmv4(e) | TraceUnit::Ete(e) => {
                let ete = matches!(c.unit, TraceUnit::Ete(_));
                let mut regs = vec![
                    reg("TRCCONFIGR", e.trcconfigr),
                    reg("TRCTRACEIDR", e.trctraceidr),
                    reg("TRCIDR0", e.trcidr0),
                    reg("TRCIDR1", e.trcidr1),
                    reg("TRCIDR2", e.trcidr2),
                    reg("TRCIDR8", e.trcidr8),
                ];
                if let Some(d) = e.trcdevarch {
                    regs.push(reg("TRCDEVARCH", d));
                }
                // As simpleperf configures them: ETMv4 on an Armv8 A-profile core, ETE on an
                // AArch64 (Armv9) one.
                let (profile, kind) = if ete {
                    (ArchProfile::new(ArchVersion::Aa64, CoreProfile::CortexA), "ARM-AA64")
                } else {
                    (ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA), "ARMv8-A")
                };
                let use_vmid = e.trcconfigr & (TRCCONFIGR_VMID | TRCCONFIGR_VMIDOPT) != 0;
                CpuStream {
                    cpu: c.cpu,
                    trace_id: c.trace_id(),
                    protocol: if ete { "ETE" } else { "ETMV4I" },
                    config: SourceConfig {
                        name: format!("ETM_{}", c.cpu),
                        device_type: if ete { "ETE" } else { "ETM4" }.into(),
                        regs,
                        core: core(profile, kind),
                    },
                    context_ids: use_vmid || e.trcconfigr & TRCCONFIGR_CID != 0,
                    use_vmid,
                }
            }
        }
    }
}

/// What a decode did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodeSummary {
    /// Buffers decoded.
    pub buffers: u64,
    /// Bytes of trace fed.
    pub bytes: u64,
    /// Elements delivered.
    pub elements: u64,
    /// ADDR_NACC elements: code the decoder needed and memory did not have.
    pub memory_gaps: u64,
    /// Times a decoder stopped on a fatal error and was reset.
    pub resets_after_error: u64,
    /// Error lines the decoders logged (they recovered from them).
    pub decoder_errors: u64,
}

/// An element held until the tree call that made it returns.
#[derive(Clone, Copy)]
struct Held {
    index: TrcIndex,
    trace_id: u8,
    stream: u16,
    pid: i32,
    tid: i32,
    elem: TraceElement,
}

/// perf's packet queue limit (`CS_ETM_PACKET_MAX_BUFFER - 1`): a full queue stops the decoder.
const PERF_MAX_QUEUED: u32 = 1023;

/// What perf's cs_etm decoder glue (`cs-etm-decoder.c`) keeps for one trace ID to pace the
/// decoder: the timestamp estimate of the packets queued and how many are queued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChanPacing {
    /// Estimated time of the packets waiting (0: no timestamp seen since the last gap).
    pub cs_timestamp: u64,
    /// Estimated time of the next range.
    pub next_cs_timestamp: u64,
    /// Instructions since the last estimate.
    pub instr_count: u64,
    /// Packets queued (ranges, gaps, exceptions) and not yet taken by the front end.
    pub queued: u32,
}

/// perf's pacing of one decoder (one AUX queue): the decoder stops (a `Wait`) at each
/// timestamp that starts a timed run, after each range once one has, and when a trace ID's
/// packet queue is full; `pending` then says which stream and estimated time, as perf's
/// `pending_timestamp_chan_id` does.
#[derive(Debug, Default)]
pub struct Pacing {
    /// Per stream (CPU configuration index).
    pub chans: Vec<ChanPacing>,
    /// The stream and estimated time of the stop, taken by the front end.
    pub pending: Option<(usize, u64)>,
    /// Timeless decoding: no stop at timestamps (only when the packets queue up).
    pub timeless: bool,
}

impl Pacing {
    /// Takes one element of stream `s`; true: stop the decoder after it.
    fn element(&mut self, s: usize, e: &TraceElement) -> bool {
        let Some(c) = self.chans.get_mut(s) else {
            return false;
        };
        let queue = |c: &mut ChanPacing| {
            c.queued = c.queued.saturating_add(1);
            c.queued >= PERF_MAX_QUEUED
        };
        match e.elem_type {
            ElemType::InstrRange | ElemType::Timestamp if self.timeless => {
                e.elem_type == ElemType::InstrRange && queue(c)
            }
            ElemType::InstrRange => {
                if queue(c) {
                    return true;
                }
                c.instr_count = c.instr_count.wrapping_add(u64::from(e.num_instr_range));
                if c.cs_timestamp == 0 {
                    return false;
                }
                c.cs_timestamp = c.next_cs_timestamp;
                c.next_cs_timestamp = c.next_cs_timestamp.wrapping_add(c.instr_count);
                c.instr_count = 0;
                self.pending = Some((s, c.cs_timestamp));
                true
            }
            ElemType::Timestamp => {
                if c.cs_timestamp != 0 {
                    c.next_cs_timestamp = e.timestamp;
                    return false;
                }
                // The first timestamp after a gap: the ranges before it started that many
                // instructions earlier (one instruction a tick, as perf estimates).
                c.cs_timestamp = e.timestamp.saturating_sub(c.instr_count);
                c.next_cs_timestamp = e.timestamp;
                c.instr_count = 0;
                self.pending = Some((s, c.cs_timestamp));
                true
            }
            ElemType::NoSync | ElemType::TraceOn | ElemType::EoTrace => {
                c.cs_timestamp = 0;
                c.next_cs_timestamp = 0;
                c.instr_count = 0;
                queue(c)
            }
            ElemType::Exception | ElemType::ExceptionRet => queue(c),
            _ => false,
        }
    }
}

/// The trees' element output: notes the thread from PE_CONTEXT elements at once (memory reads
/// that follow must see it), and keeps the element for the callback.
struct Collect {
    held: Shared<Vec<Held>>,
    stream_of: StreamOf,
    streams: Arc<Streams>,
    model: Arc<Model>,
    use_vmid: Vec<bool>,
    pacing: Option<Shared<Pacing>>,
}

impl Collect {
    /// A PE_CONTEXT element names the stream's thread (when context IDs are
    /// traced): noted at once, so that memory reads that follow see it.
    fn note_context(&self, s: usize, elem: &TraceElement) {
        if elem.elem_type != ElemType::PeContext || !self.streams.from_context(s) {
            return;
        }
        let c = &elem.context;
        let id = if self.use_vmid.get(s).copied().unwrap_or(false) {
            c.vmid_valid.then_some(c.vmid)
        } else {
            c.ctxt_id_valid.then_some(c.context_id)
        };
        if let Some(id) = id {
            let tid = id as i32;
            self.streams.set_thread(s, self.model.pid_of(tid), tid);
        }
    }
}

impl Collect {
    /// Holds `elems` of `trace_id`: one borrow of the held list, and the
    /// thread looked up again only after a context element. Stops early
    /// (WAIT) when the pacing says so; returns how many were taken.
    fn take<'e>(
        &mut self,
        trace_id: u8,
        elems: impl ExactSizeIterator<Item = (TrcIndex, &'e TraceElement)>,
    ) -> (DatapathResp, usize) {
        let total = elems.len();
        let Some(s) = self.stream_of.get(trace_id) else {
            return (DatapathResp::Cont, total);
        };
        let mut held = self.held.borrow_mut();
        held.reserve(total);
        let (mut pid, mut tid) = self.streams.thread(s);
        for (n, (index, elem)) in elems.enumerate() {
            if elem.elem_type == ElemType::PeContext {
                self.note_context(s, elem);
                (pid, tid) = self.streams.thread(s);
            }
            held.push(Held {
                index,
                trace_id,
                stream: s as u16,
                pid,
                tid,
                elem: *elem,
            });
            if let Some(p) = &self.pacing
                && p.borrow_mut().element(s, elem)
            {
                return (DatapathResp::Wait, n + 1);
            }
        }
        (DatapathResp::Cont, total)
    }
}

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.take(trace_id, std::iter::once((index, elem))).0
    }

    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        self.take(trace_id, elems.iter().map(|(index, elem)| (*index, elem)))
    }
}

/// One of perf's AUX queues (the buffers of one mmap, in file order), decoded step by step
/// with perf's pacing so that the samples of several queues can be merged in time order.
pub struct PerfQueue {
    /// Its number (the AUXTRACE records' `idx`).
    pub number: u32,
    /// Its buffers ([`Recording::buffers`] indices), in file order.
    pub buffers: Vec<usize>,
    tree: Option<DecodeTree>,
    single: Option<usize>,
    pacing: Shared<Pacing>,
    /// Position in `buffers` of the buffer being decoded.
    current: Option<usize>,
    next: usize,
    used: usize,
    last: DatapathResp,
    index0: TrcIndex,
    retries: u32,
}

impl PerfQueue {
    /// The buffer being decoded.
    pub fn buffer(&self) -> Option<usize> {
        self.current.and_then(|c| self.buffers.get(c).copied())
    }

    /// Decodes without stopping at timestamps (perf's timeless decoding).
    pub fn set_timeless(&self) {
        self.pacing.borrow_mut().timeless = true;
    }

    /// The front end took every packet queued for stream `s`.
    pub fn drained(&self, s: usize) {
        if let Some(c) = self.pacing.borrow_mut().chans.get_mut(s) {
            c.queued = 0;
        }
    }

    /// The front end dropped every queued packet.
    pub fn drained_all(&self) {
        for c in self.pacing.borrow_mut().chans.iter_mut() {
            c.queued = 0;
        }
    }
}

/// Trace bytes fed to a tree before its elements are delivered.
const FEED_CHUNK: usize = 16 << 10;

/// Most decoder error lines kept as warnings (the rest are counted).
const MAX_ERROR_LINES: usize = 32;

/// Decodes the AUX trace of a recording.
pub struct RecordingDecoder<'r, 'a> {
    rec: &'r Recording<'a>,
    model: Arc<Model>,
    streams: Arc<Streams>,
    cpus: Vec<CpuStream>,
    opts: DecodeOptions,
    formatted: Option<DecodeTree>,
    raw: Vec<Option<DecodeTree>>,
    held: Shared<Vec<Held>>,
    errors: Shared<MsgLogger>,
    /// What went wrong without stopping the decode.
    pub warnings: Vec<Warning>,
    /// Counts.
    pub summary: DecodeSummary,
}

impl<'r, 'a> RecordingDecoder<'r, 'a> {
    /// A decoder for `rec` reading code through `model`.
    pub fn new(rec: &'r Recording<'a>, model: Arc<Model>, opts: DecodeOptions) -> Result<Self, DecodeError> {
        let info = rec.cs_etm.as_ref().ok_or(DecodeError::NoCsEtmInfo)?;
        let cpus: Vec<CpuStream> = info.cpus.iter().map(CpuStream::from_config).collect();
        let streams = Arc::new(Streams::new(cpus.len()));
        for (i, c) in cpus.iter().enumerate() {
            streams.set_from_context(i, c.context_ids);
        }
        let mut d = RecordingDecoder {
            rec,
            model,
            streams,
            raw: (0..cpus.len()).map(|_| None).collect(),
            cpus,
            opts,
            formatted: None,
            held: shared(Vec::new()),
            errors: shared(MsgLogger::capture()),
            warnings: Vec::new(),
            summary: DecodeSummary::default(),
        };
        // Make every decoder now, so that a bad configuration is reported before decoding.
        let needs_formatted = rec.buffers.iter().any(|b| b.format != AuxFormat::Raw);
        if needs_formatted {
            d.formatted = Some(d.make_tree(None)?);
        }
        for b in &rec.buffers {
            if b.format == AuxFormat::Raw
                && let Some(s) = d.stream_of_cpu(b.cpu)
                && d.raw[s].is_none()
            {
                d.raw[s] = Some(d.make_tree(Some(s))?);
            }
        }
        let mut seen = [false; 128];
        for c in &d.cpus {
            if std::mem::replace(&mut seen[c.trace_id as usize], true) {
                d.warnings.push(Warning {
                    offset: 0,
                    message: format!(
                        "trace ID {:#x} is used by more than one CPU: formatted trace of CPU {} is decoded as the first's",
                        c.trace_id, c.cpu
                    ),
                });
            }
        }
        Ok(d)
    }

    /// The CPUs' trace units.
    pub fn cpus(&self) -> &[CpuStream] {
        &self.cpus
    }

    /// The recording.
    pub fn recording(&self) -> &'r Recording<'a> {
        self.rec
    }

    /// The processes and binaries.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The current thread of each stream.
    pub fn streams(&self) -> &Arc<Streams> {
        &self.streams
    }

    fn stream_of_cpu(&self, cpu: Option<u32>) -> Option<usize> {
        match cpu {
            Some(c) => self.cpus.iter().position(|s| s.cpu == c),
            // Per-thread recordings of one CPU's unit.
            None if self.cpus.len() == 1 => Some(0),
            None => None,
        }
    }

    /// A tree for all streams (formatted: `single` None) or for one.
    fn make_tree(&self, single: Option<usize>) -> Result<DecodeTree, DecodeError> {
        self.make_paced_tree(single, None)
    }

    /// A tree, its element output paced as perf's when `pacing` is given.
    fn make_paced_tree(
        &self,
        single: Option<usize>,
        pacing: Option<Shared<Pacing>>,
    ) -> Result<DecodeTree, DecodeError> {
        let format = match single {
            None => SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
            Some(_) => SourceFormat::Single,
        };
        let mode = if self.opts.packets_only {
            DecodeMode::PacketsOnly
        } else {
            DecodeMode::FullDecode
        };
        let mut tree = DecodeTree::new(format, mode);
        tree.set_decoder_options(DecoderOptions {
            opencsd_flow: self.opts.opencsd_flow,
            ..DecoderOptions::default()
        });
        match &self.opts.packet_out {
            Some(out) if self.opts.errors_with_packets => {
                tree.set_error_output(Some(out.clone()));
                tree.error_logger().borrow_mut().set_line_breaks(true);
            }
            _ => tree.set_error_output(Some(self.errors.clone())),
        }
        let stream_of = match single {
            Some(s) => StreamOf::Fixed(s),
            None => {
                let mut t = Box::new([None; 128]);
                for (i, c) in self.cpus.iter().enumerate() {
                    let slot = &mut t[c.trace_id as usize & 0x7f];
                    if slot.is_none() {
                        *slot = Some(i as u16);
                    }
                }
                StreamOf::ById(t)
            }
        };
        let mem: Shared<dyn TargetMemAccess> = shared(RecordingMemory::new(
            self.model.clone(),
            self.streams.clone(),
            stream_of.clone(),
        ));
        let offset = self
            .rec
            .auxtrace_info
            .iter()
            .find(|i| i.kind == crate::record::AUXTRACE_CS_ETM)
            .map_or(0, |i| i.priv_offset);
        let which: Vec<usize> = match single {
            Some(s) => vec![s],
            None => (0..self.cpus.len()).collect(),
        };
        let mut placed = [false; 128];
        for i in which {
            // perf 6.1 configures a raw buffer's decoder from the first CPU's registers.
            let c = if single.is_some() && self.opts.raw_with_first_config {
                &self.cpus[0]
            } else {
                &self.cpus[i]
            };
            let err = |detail: String| DecodeError::Config {
                offset,
                cpu: c.cpu,
                protocol: c.protocol,
                detail,
            };
            let slot = if single.is_some() { 0 } else { c.trace_id & 0x7f };
            if std::mem::replace(&mut placed[slot as usize], true) {
                continue;
            }
            let factory = tree
                .registry()
                .find(c.protocol)
                .ok_or_else(|| err("protocol not registered".into()))?;
            let mut ctx = tree.decode_context();
            ctx.instance_id = if single.is_some() { None } else { Some(slot) };
            if ctx.mem.is_some() {
                ctx.mem = Some(mem.clone());
            }
            let component = factory.create(&c.config, &ctx).map_err(|e| err(e.to_string()))?;
            tree.add_decoder(slot, c.protocol, component)
                .map_err(|e| err(format!("{e:?}")))?;
            if let Some(out) = &self.opts.packet_out {
                // Labelled with the trace unit's ID, also in a raw buffer's tree (whose one
                // decoder sits in slot 0), as perf labels them.
                let printer = PacketPrinter::new(c.trace_id & 0x7f, out.clone());
                tree.attach_printer(slot, printer, !self.opts.packets_only)
                    .map_err(|e| err(format!("{e:?}")))?;
            }
        }
        tree.set_gen_elem_out(Box::new(Collect {
            held: self.held.clone(),
            stream_of,
            streams: self.streams.clone(),
            model: self.model.clone(),
            use_vmid: self.cpus.iter().map(|c| c.use_vmid).collect(),
            pacing,
        }));
        Ok(tree)
    }

    /// The thread running on `cpu` at file position `at`, from the recording's thread events
    /// (the last ITRACE_START or switch-in on the CPU before it, else the first after).
    fn thread_on_cpu(&self, cpu: Option<u32>, buffer_tid: Option<u32>, at: u64) -> (i32, i32) {
        if let Some(t) = buffer_tid {
            let tid = t as i32;
            return (self.model.pid_of(tid), tid);
        }
        let mut best: Option<(u64, i32, i32)> = None;
        let mut first_after: Option<(u64, i32, i32)> = None;
        for e in &self.rec.thread_events {
            if cpu.is_some() && e.cpu.is_some() && e.cpu != cpu {
                continue;
            }
            let (pid, tid) = match &e.kind {
                ThreadEventKind::ItraceStart => (e.pid, e.tid),
                ThreadEventKind::Switch { out: false, .. } => (e.pid, e.tid),
                ThreadEventKind::Switch {
                    out: true,
                    next_prev: Some((p, t)),
                    ..
                } => (*p, *t),
                _ => continue,
            };
            if e.offset <= at {
                if best.is_none_or(|b| b.0 <= e.offset) {
                    best = Some((e.offset, pid, tid));
                }
            } else if first_after.is_none_or(|b| b.0 > e.offset) {
                first_after = Some((e.offset, pid, tid));
            }
        }
        best.or(first_after).map_or((-1, -1), |(_, p, t)| (p, t))
    }

    /// Warns of a buffer that the file cuts short, or that does not follow
    /// on from its CPU's previous one.
    fn warn_of_buffer(&mut self, bi: usize, b: &AuxBuffer<'_>) {
        if (b.data.len() as u64) < b.size {
            self.warnings.push(Warning {
                offset: b.data_offset,
                message: format!(
                    "AUXTRACE buffer {bi} holds {} of its {} bytes: the file is truncated",
                    b.data.len(),
                    b.size
                ),
            });
        }
        if b.discontinuous {
            self.warnings.push(Warning {
                offset: b.record_offset,
                message: format!(
                    "AUXTRACE buffer {bi} (CPU {}) does not follow on from the previous one: trace was lost between them",
                    b.cpu.map_or("?".into(), |c| c.to_string())
                ),
            });
        }
    }

    /// Decodes every buffer in file order, telling `f` what happens.
    pub fn run(&mut self, f: &mut dyn FnMut(Event<'_, 'a>)) -> DecodeSummary {
        let rec = self.rec;
        let mut index: TrcIndex = 0;
        for (bi, b) in rec.buffers.iter().enumerate() {
            if self.stopped() {
                break;
            }
            if !self.opts.cpus.is_empty() && !b.cpu.is_some_and(|c| self.opts.cpus.contains(&c)) {
                continue;
            }
            self.warn_of_buffer(bi, b);
            let single = match b.format {
                AuxFormat::Raw => match self.stream_of_cpu(b.cpu) {
                    Some(s) => Some(s),
                    None => {
                        self.warnings.push(Warning {
                            offset: b.record_offset,
                            message: format!(
                                "raw AUXTRACE buffer {bi} is for CPU {:?}, which has no trace unit configuration: skipped",
                                b.cpu
                            ),
                        });
                        continue;
                    }
                },
                _ => None,
            };
            self.streams.position.store(b.record_offset, Ordering::Relaxed);
            self.streams.bump_all();
            // Threads at the buffer's start: unknown where context IDs will say (simpleperf
            // forgets them at each reset), else from the thread events.
            for (s, c) in self.cpus.iter().enumerate() {
                if c.context_ids {
                    self.streams.set_thread(s, -1, -1);
                } else {
                    let cpu = if b.cpu.is_some() { Some(c.cpu) } else { None };
                    let (p, t) = self.thread_on_cpu(cpu, b.tid, b.record_offset);
                    self.streams.set_thread(s, p, t);
                }
            }
            f(Event::BufferStart { buffer: bi, aux: b });
            self.summary.buffers += 1;
            let pieces = self.pieces(b);
            let base = if self.opts.index_at_aux_offset {
                b.aux_offset
            } else {
                index
            };
            for (from, to) in pieces {
                let data = &b.data[from..to];
                self.feed(bi, single, base + from as u64, data, f);
            }
            index += b.data.len() as u64;
            self.summary.bytes += b.data.len() as u64;
            f(Event::BufferEnd { buffer: bi });
        }
        self.take_errors();
        self.summary.clone()
    }

    /// The pieces of buffer `b` decoded each from a reset.
    fn pieces(&self, b: &AuxBuffer<'_>) -> Vec<(usize, usize)> {
        let len = b.data.len();
        if !self.opts.split_at_aux_records {
            return vec![(0, len)];
        }
        let mut cuts: Vec<usize> = self
            .rec
            .aux_records
            .iter()
            .filter(|(_, a)| b.cpu.is_none() || a.sample_id.cpu.is_none() || a.sample_id.cpu == b.cpu)
            .filter_map(|(_, a)| {
                let rel = a.aux_offset.checked_sub(b.aux_offset)?;
                (rel > 0 && rel < len as u64).then_some(rel as usize)
            })
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = Vec::with_capacity(cuts.len() + 1);
        let mut at = 0;
        for c in cuts {
            out.push((at, c));
            at = c;
        }
        out.push((at, len));
        out
    }

    /// Whether the caller asked [`run`](Self::run) to end (see [`DecodeOptions::stop`]).
    fn stopped(&self) -> bool {
        self.opts.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
    }

    fn tree(&mut self, single: Option<usize>) -> Option<&mut DecodeTree> {
        match single {
            Some(s) => self.raw.get_mut(s).and_then(Option::as_mut),
            None => self.formatted.as_mut(),
        }
    }

    /// Feeds one piece from a reset, delivering elements as they come.
    fn feed(
        &mut self,
        bi: usize,
        single: Option<usize>,
        index0: TrcIndex,
        data: &[u8],
        f: &mut dyn FnMut(Event<'_, 'a>),
    ) {
        if self.tree(single).is_none() {
            return;
        }
        let op = |me: &mut Self, op: DatapathOp, index: TrcIndex, d: &[u8]| -> (DatapathResp, usize) {
            match me.tree(single) {
                Some(t) => t.trace_data_in(op, index, d),
                None => (DatapathResp::FatalNotInit, 0),
            }
        };
        op(self, DatapathOp::Reset, index0, &[]);
        let mut done = 0usize;
        let mut resp = DatapathResp::Cont;
        let mut retries = 0;
        while (done < data.len() || resp.is_wait()) && !self.stopped() {
            if resp.is_wait() {
                resp = op(self, DatapathOp::Flush, 0, &[]).0;
            } else {
                // A bounded piece at a time: the elements it makes are held until
                // delivered, so memory stays small and the held elements in cache.
                let end = data.len().min(done + FEED_CHUNK);
                let (r, used) = op(self, DatapathOp::Data, index0 + done as u64, &data[done..end]);
                resp = r;
                done += used.min(end - done);
            }
            self.deliver(bi, f);
            if resp.is_fatal() {
                // A decode error need not spoil the rest: reset and go on after it, a few
                // times (as simpleperf does), then give the piece up.
                self.summary.resets_after_error += 1;
                retries += 1;
                let at = self.rec.buffers.get(bi).map_or(0, |b| b.data_offset) + done as u64;
                self.warnings.push(Warning {
                    offset: at,
                    message: format!("the decoder stopped on an error in buffer {bi}; reset and resumed"),
                });
                op(self, DatapathOp::Reset, index0 + done as u64, &[]);
                resp = DatapathResp::Cont;
                if retries > 3 {
                    break;
                }
            }
        }
        if self.opts.flush_each_buffer && !resp.is_fatal() {
            let mut r = op(self, DatapathOp::Eot, 0, &[]).0;
            let mut guard = 0;
            while r.is_wait() && guard < 1_000_000 {
                r = op(self, DatapathOp::Flush, 0, &[]).0;
                if r.is_cont() {
                    r = op(self, DatapathOp::Eot, 0, &[]).0;
                }
                self.deliver(bi, f);
                guard += 1;
            }
            self.deliver(bi, f);
        }
        self.take_errors();
    }

    fn deliver(&mut self, bi: usize, f: &mut dyn FnMut(Event<'_, 'a>)) {
        let raw_first =
            self.opts.raw_with_first_config && self.rec.buffers.get(bi).is_some_and(|b| b.format == AuxFormat::Raw);
        let items = std::mem::take(&mut *self.held.borrow_mut());
        for h in &items {
            let stream = h.stream as usize;
            if h.elem.elem_type == ElemType::AddrNacc {
                self.summary.memory_gaps += 1;
            }
            let label = if raw_first { 0 } else { stream };
            let info = ElementInfo {
                buffer: bi,
                cpu: self.cpus.get(label).map_or(0, |c| c.cpu),
                stream,
                trace_id: h.trace_id,
                index: h.index,
                pid: h.pid,
                tid: h.tid,
            };
            self.summary.elements += 1;
            f(Event::Element(&info, &h.elem));
        }
        // Give the buffer back for reuse (no allocation per element once warmed up).
        let mut v = items;
        v.clear();
        let mut held = self.held.borrow_mut();
        if held.is_empty() {
            *held = v;
        }
    }

    /// perf's AUX queues: the buffers grouped by mmap index (`idx`), in index order, each
    /// with its own decoder paced as perf's (see [`Pacing`]), for [`Self::next_block`] and
    /// [`Self::decode_block`]. A raw queue of a CPU without a configuration is left out with a
    /// warning.
    pub fn perf_queues(&mut self) -> Result<Vec<PerfQueue>, DecodeError> {
        let rec = self.rec;
        let mut numbers: Vec<u32> = rec
            .buffers
            .iter()
            .filter(|b| self.opts.cpus.is_empty() || b.cpu.is_some_and(|c| self.opts.cpus.contains(&c)))
            .map(|b| b.idx)
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        let mut out = Vec::with_capacity(numbers.len());
        for number in numbers {
            let buffers: Vec<usize> = rec
                .buffers
                .iter()
                .enumerate()
                .filter(|(_, b)| b.idx == number)
                .filter(|(_, b)| self.opts.cpus.is_empty() || b.cpu.is_some_and(|c| self.opts.cpus.contains(&c)))
                .map(|(i, _)| i)
                .collect();
            let Some(first) = buffers.first().map(|&i| &rec.buffers[i]) else {
                continue;
            };
            let single = match first.format {
                AuxFormat::Raw => match self.stream_of_cpu(first.cpu) {
                    Some(s) => Some(s),
                    None => {
                        self.warnings.push(Warning {
                            offset: first.record_offset,
                            message: format!(
                                "raw AUX queue {number} is for CPU {:?}, which has no trace unit configuration: skipped",
                                first.cpu
                            ),
                        });
                        continue;
                    }
                },
                _ => None,
            };
            let pacing = shared(Pacing {
                chans: vec![ChanPacing::default(); self.cpus.len()],
                pending: None,
                timeless: false,
            });
            let tree = self.make_paced_tree(single, Some(pacing.clone()))?;
            out.push(PerfQueue {
                number,
                buffers,
                tree: Some(tree),
                single,
                pacing,
                current: None,
                next: 0,
                used: 0,
                last: DatapathResp::Cont,
                index0: 0,
                retries: 0,
            });
        }
        Ok(out)
    }

    /// perf's `cs_etm__get_data_block`: when the queue's buffer is used up, moves to its next
    /// one and resets the decoder (what the decoder still held back is dropped, as perf drops
    /// it, unless `keep_held`: then a buffer is used up once the decoder has delivered
    /// everything). False: no buffer left.
    pub fn next_block(&mut self, q: &mut PerfQueue, keep_held: bool, f: &mut dyn FnMut(Event<'_, 'a>)) -> bool {
        let rec = self.rec;
        if let Some(c) = q.current {
            let bi = q.buffers[c];
            if q.used < rec.buffers[bi].data.len() || (keep_held && q.last.is_wait()) {
                return true;
            }
            f(Event::BufferEnd { buffer: bi });
            q.current = None;
        }
        while let Some(&bi) = q.buffers.get(q.next) {
            q.next += 1;
            let b = &rec.buffers[bi];
            if b.data.is_empty() {
                continue;
            }
            self.warn_of_buffer(bi, b);
            self.streams.position.store(b.record_offset, Ordering::Relaxed);
            self.streams.bump_all();
            let covered: Vec<usize> = match q.single {
                Some(s) => vec![s],
                None => (0..self.cpus.len()).collect(),
            };
            for s in covered {
                let c = &self.cpus[s];
                if c.context_ids {
                    self.streams.set_thread(s, -1, -1);
                } else {
                    let cpu = if b.cpu.is_some() { Some(c.cpu) } else { None };
                    let (p, t) = self.thread_on_cpu(cpu, b.tid, b.record_offset);
                    self.streams.set_thread(s, p, t);
                }
            }
            f(Event::BufferStart { buffer: bi, aux: b });
            self.summary.buffers += 1;
            self.summary.bytes += b.data.len() as u64;
            q.current = Some(q.next - 1);
            q.used = 0;
            q.last = DatapathResp::Cont;
            q.retries = 0;
            q.index0 = rec.buffers[..bi].iter().map(|x| x.data.len() as u64).sum();
            if let Some(t) = q.tree.as_mut() {
                t.trace_data_in(DatapathOp::Reset, q.index0, &[]);
            }
            return true;
        }
        false
    }

    /// perf's `cs_etm__decode_data_block`: feeds the rest of the queue's buffer until the
    /// decoder stops (perf's pacing) or the data is used up, delivering the elements to `f`;
    /// returns the stream and estimated time of a timed stop. A decoder stopped when the last
    /// bytes went in is not flushed (perf's way), unless `keep_held`.
    pub fn decode_block(
        &mut self,
        q: &mut PerfQueue,
        keep_held: bool,
        f: &mut dyn FnMut(Event<'_, 'a>),
    ) -> Option<(usize, u64)> {
        let bi = q.buffer()?;
        let b = &self.rec.buffers[bi];
        let data = b.data;
        self.streams.position.store(b.record_offset, Ordering::Relaxed);
        loop {
            let at_end = q.used >= data.len();
            if at_end && !(keep_held && q.last.is_wait()) {
                break;
            }
            let Some(tree) = q.tree.as_mut() else {
                break;
            };
            let (r, used) = if q.last.is_wait() {
                tree.trace_data_in(DatapathOp::Flush, 0, &[])
            } else {
                tree.trace_data_in(DatapathOp::Data, q.index0 + q.used as u64, &data[q.used..])
            };
            q.used += used.min(data.len() - q.used);
            q.last = r;
            self.deliver(bi, f);
            if r.is_fatal() {
                self.summary.resets_after_error += 1;
                q.retries += 1;
                self.warnings.push(Warning {
                    offset: b.data_offset + q.used as u64,
                    message: format!("the decoder stopped on an error in buffer {bi}; reset and resumed"),
                });
                tree_reset(q);
                if q.retries > 3 {
                    q.used = data.len();
                }
                continue;
            }
            if r.is_wait() {
                break;
            }
        }
        self.take_errors();
        q.pacing.borrow_mut().pending.take()
    }

    fn take_errors(&mut self) {
        // Most blocks log nothing: no text taken, nothing allocated.
        if self.errors.borrow().captured().is_empty() {
            return;
        }
        let text = self.errors.borrow_mut().take_captured();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            self.summary.decoder_errors += 1;
            if (self.summary.decoder_errors as usize) <= MAX_ERROR_LINES {
                self.warnings.push(Warning {
                    offset: 0,
                    message: format!("decoder: {}", line.trim()),
                });
            }
        }
    }

    /// A report of the binaries whose code was needed but not found.
    pub fn missing_binaries(&self) -> Vec<(String, u64, String)> {
        let mut out = Vec::new();
        for b in self.model.binaries.iter() {
            let n = b.missing_reads.load(Ordering::Relaxed);
            if n > 0 {
                out.push((b.path.clone(), n, b.problem().unwrap_or("no bytes there").to_string()));
            }
        }
        out
    }
}

fn tree_reset(q: &mut PerfQueue) {
    q.last = DatapathResp::Cont;
    if let Some(t) = q.tree.as_mut() {
        t.trace_data_in(DatapathOp::Reset, q.index0 + q.used as u64, &[]);
    }
}

/// A text summary of a recording's CoreSight configuration (for `trc_perf info`).
pub fn describe_cpus(rec: &Recording<'_>) -> String {
    let mut s = String::new();
    if let Some(info) = &rec.cs_etm {
        for c in &info.cpus {
            let st = CpuStream::from_config(c);
            let _ = writeln!(
                s,
                "cpu {}: {} trace ID {:#04x}{}",
                c.cpu,
                st.protocol,
                st.trace_id,
                if st.context_ids {
                    if st.use_vmid {
                        ", VMIDs as thread ids"
                    } else {
                        ", context IDs"
                    }
                } else {
                    ""
                }
            );
        }
    }
    s
}
