//! One pass over a file, gathering what a trace decoder needs.

use std::collections::{BTreeMap, HashMap};

use crate::cs_etm::CsEtmInfo;
use crate::error::{Result, Warning};
use crate::features::{AuxtraceIndexEntry, BuildIdEntry};
use crate::file::{MappedFile, PerfFile};
use crate::header::Attr;
use crate::record::{AUXTRACE_CS_ETM, Aux, AuxtraceInfo, BuildId, MmapFileId, Record, TimeConv};

/// Whether a buffer holds CoreSight-formatted frames or a raw trace stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuxFormat {
    /// 16-byte CoreSight frames with trace IDs (ETR, ETF sinks).
    Formatted,
    /// One unformatted trace stream (TRBE): `PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW`.
    Raw,
    /// No AUX record said.
    Unknown,
}

/// One AUXTRACE buffer: a piece of a CPU's (or thread's) AUX stream stored in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxBuffer<'a> {
    /// The CPU (None in per-thread mode).
    pub cpu: Option<u32>,
    /// The thread (None in per-CPU mode).
    pub tid: Option<u32>,
    /// Index of the mmap it came from.
    pub idx: u32,
    /// Offset in that mmap's AUX stream.
    pub aux_offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// The record's reference value.
    pub reference: u64,
    /// File offset of the AUXTRACE record.
    pub record_offset: u64,
    /// File offset of the payload.
    pub data_offset: u64,
    /// The payload, borrowed from the file.
    pub data: &'a [u8],
    /// Formatted frames or raw trace.
    pub format: AuxFormat,
    /// Not contiguous with the previous buffer of the same CPU (a gap in the AUX offsets, or
    /// trace lost before it): a decoder must resynchronise rather than continue.
    pub discontinuous: bool,
}

/// A memory map (MMAP or MMAP2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEvent {
    /// File offset of the record.
    pub offset: u64,
    /// Process id (-1 for the kernel).
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Start address.
    pub start: u64,
    /// Length.
    pub len: u64,
    /// File offset mapped at `start`.
    pub pgoff: u64,
    /// Path.
    pub filename: String,
    /// From the MMAP2 record, else from the build-id feature for the same path.
    pub build_id: Option<BuildId>,
    /// Executable mapping.
    pub executable: bool,
    /// Time, when the attribute has sample ids.
    pub time: Option<u64>,
    /// CPU, when the attribute has sample ids.
    pub cpu: Option<u32>,
}

/// What happened to a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadEventKind {
    /// COMM.
    Comm {
        /// New name.
        name: String,
        /// At exec.
        exec: bool,
    },
    /// FORK (pid/tid in the event are the child's).
    Fork {
        /// Parent process.
        ppid: i32,
        /// Parent thread.
        ptid: i32,
    },
    /// EXIT.
    Exit,
    /// ITRACE_START: trace began for this thread.
    ItraceStart,
    /// SWITCH or SWITCH_CPU_WIDE.
    Switch {
        /// Out (else in).
        out: bool,
        /// Preempted.
        preempt: bool,
        /// CPU-wide: the other process and thread.
        next_prev: Option<(i32, i32)>,
    },
}

/// A thread event with its time and CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadEvent {
    /// File offset of the record.
    pub offset: u64,
    /// Time (sample id).
    pub time: Option<u64>,
    /// CPU (sample id).
    pub cpu: Option<u32>,
    /// Process.
    pub pid: i32,
    /// Thread.
    pub tid: i32,
    /// What.
    pub kind: ThreadEventKind,
}

/// The record kinds that carry, in pipe mode, what file mode keeps in its header sections.
pub(crate) fn is_pipe_header(k: u32) -> bool {
    use crate::record::kind;
    matches!(
        k,
        kind::HEADER_ATTR
            | kind::HEADER_EVENT_TYPE
            | kind::HEADER_TRACING_DATA
            | kind::HEADER_BUILD_ID
            | kind::HEADER_FEATURE
    )
}

/// Everything from one pass over a recording.
#[derive(Debug, Clone)]
pub struct Recording<'a> {
    /// Header, attributes, feature table.
    pub file: PerfFile<'a>,
    /// The CoreSight configuration, if the file has a cs_etm AUXTRACE_INFO.
    pub cs_etm: Option<CsEtmInfo>,
    /// All AUXTRACE_INFO records, raw.
    pub auxtrace_info: Vec<AuxtraceInfo>,
    /// AUXTRACE buffers in file order.
    pub buffers: Vec<AuxBuffer<'a>>,
    /// AUX records with their file offsets.
    pub aux_records: Vec<(u64, Aux)>,
    /// Memory maps in file order.
    pub maps: Vec<MapEvent>,
    /// COMM, FORK, EXIT, ITRACE_START and SWITCH events, ordered by time (stable).
    pub thread_events: Vec<ThreadEvent>,
    /// AUX_OUTPUT_HW_ID records: `(cpu, hw id)`.
    pub hw_ids: Vec<(Option<u32>, u64)>,
    /// The build-id feature.
    pub build_ids: Vec<BuildIdEntry>,
    /// The auxtrace index feature.
    pub auxtrace_index: Vec<AuxtraceIndexEntry>,
    /// TIME_CONV, if any.
    pub time_conv: Option<TimeConv>,
    /// simpleperf's meta info.
    pub meta_info: Vec<(String, String)>,
    /// Number of records read.
    pub records: u64,
    /// Number of SAMPLE records.
    pub samples: u64,
    /// Sum of LOST records' counts.
    pub lost: u64,
    /// AUX records flagged truncated (trace lost because the buffer was full).
    pub truncated_aux: u64,
    /// AUX records flagged partial or collision.
    pub partial_aux: u64,
    /// simpleperf-only records skipped.
    pub simpleperf_records: u64,
    /// Other record kinds skipped, with counts.
    pub unknown_records: BTreeMap<u32, u64>,
    /// What went wrong without stopping the pass.
    pub warnings: Vec<Warning>,
}

impl<'a> Recording<'a> {
    /// Reads `bytes` as a perf.data file. Only an unusable header or attribute section is an
    /// error; damage further on becomes a warning and the rest is read where possible. Safe to
    /// call on arbitrary bytes (the fuzzing entry point).
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        Self::parse_with(bytes, &|_, _| {}, true)
    }

    /// [`parse`](Self::parse) of one segment of a pipe-mode stream (its kept records and one
    /// buffer): the AUX data the AUX records announce is not checked against its one buffer
    /// (the other CPUs' buffers are in other segments); the stream's reader checks the totals
    /// with [`missing_aux_data`](Self::missing_aux_data).
    pub(crate) fn parse_segment(bytes: &'a [u8]) -> Result<Self> {
        Self::parse_with(bytes, &|_, _| {}, false)
    }

    /// Parses a mapped recording as [`parse`](Self::parse) does, letting go of the pages of
    /// the file it has read as it goes (see [`MappedFile::done_with`]): reading the records of
    /// a large recording does not leave all of it resident (on Linux, touching a record's
    /// header can bring in the megabytes of trace around it). The buffers' bytes are read
    /// again from the file when used.
    pub fn parse_mapped(file: &'a MappedFile) -> Result<Self> {
        let rec = Self::parse_with(file.bytes(), &|at, len| file.done_with(at, len), true)?;
        file.done_with(0, file.bytes().len() as u64);
        Ok(rec)
    }

    /// [`parse`](Self::parse), calling `done(offset, len)` for the bytes behind it as it
    /// reads the records.
    fn parse_with(bytes: &'a [u8], done: &dyn Fn(u64, u64), check_aux: bool) -> Result<Self> {
        let file = PerfFile::parse(bytes)?;
        let mut warnings = file.warnings.clone();
        let mut build_ids = file.build_ids().unwrap_or_else(|e| {
            warnings.push(e.into());
            Vec::new()
        });
        build_ids.shrink_to_fit();
        let auxtrace_index = file.auxtrace_index().unwrap_or_else(|e| {
            warnings.push(e.into());
            Vec::new()
        });
        let mut rec = Recording {
            meta_info: file.simpleperf_meta_info(),
            file,
            cs_etm: None,
            auxtrace_info: Vec::new(),
            buffers: Vec::new(),
            aux_records: Vec::new(),
            maps: Vec::new(),
            thread_events: Vec::new(),
            hw_ids: Vec::new(),
            build_ids,
            auxtrace_index,
            time_conv: None,
            records: 0,
            samples: 0,
            lost: 0,
            truncated_aux: 0,
            partial_aux: 0,
            simpleperf_records: 0,
            unknown_records: BTreeMap::new(),
            warnings,
        };
        rec.read_records(done);
        rec.resolve_buffers();
        rec.thread_events.sort_by_key(|e| e.time);
        if rec.lost > 0 {
            rec.warn(0, format!("{} records were lost (LOST records)", rec.lost));
        }
        if check_aux {
            let held: Vec<(Option<u32>, u64)> = rec.buffers.iter().map(|b| (b.cpu, b.data.len() as u64)).collect();
            let missing = rec.missing_aux_data(&held);
            rec.warnings.extend(missing);
        }
        if rec.truncated_aux > 0 {
            rec.warn(
                0,
                format!(
                    "{} AUX records are flagged truncated: trace data was lost",
                    rec.truncated_aux
                ),
            );
        }
        Ok(rec)
    }

    /// Warns of AUX data the AUX records announce and no AUXTRACE record holds (a recording
    /// cut short, or written without its AUX area): per CPU (or for the one buffer of a
    /// per-thread recording), the bytes announced against the bytes there. Snapshot
    /// recordings announce the whole area each time and are left out.
    /// `held`: the AUX bytes of each buffer, with its CPU (those of the recording's buffers,
    /// or of every segment of a stream).
    pub fn missing_aux_data(&self, held: &[(Option<u32>, u64)]) -> Vec<Warning> {
        let mut out = Vec::new();
        if self.cs_etm.as_ref().is_some_and(|c| c.snapshot) {
            return out;
        }
        let mut announced: BTreeMap<Option<u32>, (u64, u64)> = BTreeMap::new();
        for (at, a) in &self.aux_records {
            let e = announced.entry(a.sample_id.cpu).or_insert((0, *at));
            e.0 = e.0.saturating_add(a.aux_size);
        }
        let per_cpu = announced.keys().any(Option::is_some);
        let mut found: BTreeMap<Option<u32>, u64> = BTreeMap::new();
        for &(cpu, bytes) in held {
            let key = if per_cpu { cpu } else { None };
            *found.entry(key).or_default() += bytes;
        }
        for (cpu, (bytes, first)) in announced {
            let have = found.get(&cpu).copied().unwrap_or(0);
            if bytes > have {
                let whose = cpu.map_or_else(|| "the recording".to_string(), |c| format!("CPU {c}"));
                out.push(Warning {
                    offset: first,
                    message: format!(
                        "AUX records announce {bytes} bytes of trace for {whose}, AUXTRACE records hold {have}: {} bytes are missing",
                        bytes - have
                    ),
                });
            }
        }
        out
    }

    fn warn(&mut self, offset: u64, message: String) {
        self.warnings.push(Warning { offset, message });
    }

    fn read_records(&mut self, done: &dyn Fn(u64, u64)) {
        /// Bytes read before those behind are let go.
        const DONE_STEP: u64 = 8 << 20;
        let by_path: HashMap<String, BuildId> = self
            .build_ids
            .iter()
            .map(|b| (b.filename.clone(), b.build_id))
            .collect();
        let mut maps = Vec::new();
        let mut done_to = 0u64;
        for entry in self.file.records() {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    self.warnings.push(e.into());
                    continue;
                }
            };
            if is_pipe_header(entry.kind) {
                // Pipe mode's header records: PerfFile has read them.
                continue;
            }
            self.records += 1;
            let at = entry.offset;
            if at.saturating_sub(done_to) >= DONE_STEP {
                done(done_to, at - done_to);
                done_to = at;
            }
            let thread = |sid: crate::record::SampleId, pid: i32, tid: i32, kind| ThreadEvent {
                offset: at,
                time: sid.time,
                cpu: sid.cpu,
                pid,
                tid,
                kind,
            };
            match entry.record {
                Record::Mmap(m) | Record::Mmap2(m) => {
                    let filename = m.filename_str().into_owned();
                    let build_id = match m.file_id {
                        MmapFileId::BuildId(b) => Some(b),
                        _ => by_path.get(filename.as_str()).copied(),
                    };
                    maps.push(MapEvent {
                        offset: at,
                        pid: m.pid,
                        tid: m.tid,
                        start: m.start,
                        len: m.len,
                        pgoff: m.pgoff,
                        filename,
                        build_id,
                        executable: m.executable,
                        time: m.sample_id.time,
                        cpu: m.sample_id.cpu,
                    });
                }
                Record::Comm(c) => {
                    let name = String::from_utf8_lossy(c.name).into_owned();
                    self.thread_events.push(thread(
                        c.sample_id,
                        c.pid,
                        c.tid,
                        ThreadEventKind::Comm { name, exec: c.exec },
                    ))
                }
                Record::Fork(f) => self.thread_events.push(thread(
                    f.sample_id,
                    f.pid,
                    f.tid,
                    ThreadEventKind::Fork {
                        ppid: f.ppid,
                        ptid: f.ptid,
                    },
                )),
                Record::Exit(f) => self
                    .thread_events
                    .push(thread(f.sample_id, f.pid, f.tid, ThreadEventKind::Exit)),
                Record::ItraceStart(s) => self.thread_events.push(thread(
                    s.sample_id,
                    s.pid as i32,
                    s.tid as i32,
                    ThreadEventKind::ItraceStart,
                )),
                Record::Switch(s) | Record::SwitchCpuWide(s) => {
                    let (pid, tid) = (s.sample_id.pid.unwrap_or(-1), s.sample_id.tid.unwrap_or(-1));
                    let kind = ThreadEventKind::Switch {
                        out: s.out,
                        preempt: s.preempt,
                        next_prev: s.next_prev,
                    };
                    self.thread_events.push(thread(s.sample_id, pid, tid, kind))
                }
                Record::Lost(l) => self.lost = self.lost.saturating_add(l.lost),
                Record::Sample(_) => self.samples += 1,
                Record::Aux(a) => {
                    if a.flags.truncated() {
                        self.truncated_aux += 1;
                    }
                    if a.flags.partial() || a.flags.collision() {
                        self.partial_aux += 1;
                    }
                    self.aux_records.push((at, a));
                }
                Record::AuxOutputHwId(h) => self.hw_ids.push((h.sample_id.cpu, h.hw_id)),
                Record::AuxtraceInfo(info) => {
                    if info.kind == AUXTRACE_CS_ETM {
                        match CsEtmInfo::parse(&info.priv_words, info.priv_offset) {
                            Ok(cs) if self.cs_etm.is_none() => self.cs_etm = Some(cs),
                            Ok(_) => self.warnings.push(Warning {
                                offset: at,
                                message: "a second cs_etm AUXTRACE_INFO was ignored".into(),
                            }),
                            Err(e) => self.warnings.push(e.into()),
                        }
                    }
                    self.auxtrace_info.push(info);
                }
                Record::Auxtrace(t) => self.buffers.push(AuxBuffer {
                    cpu: (t.cpu != u32::MAX).then_some(t.cpu),
                    tid: (t.tid != u32::MAX).then_some(t.tid),
                    idx: t.idx,
                    aux_offset: t.offset,
                    size: t.size,
                    reference: t.reference,
                    record_offset: at,
                    data_offset: t.data_offset,
                    data: t.data,
                    format: AuxFormat::Unknown,
                    discontinuous: false,
                }),
                Record::TimeConv(t) => self.time_conv = Some(t),
                Record::Simpleperf { .. } => self.simpleperf_records += 1,
                Record::FinishedRound | Record::FinishedInit => {}
                Record::Other { kind, .. } => *self.unknown_records.entry(kind).or_default() += 1,
            }
        }
        self.maps = maps;
    }

    /// Tells each buffer's format from the AUX records of its CPU whose AUX range overlaps it
    /// (else any AUX record of that CPU), and marks the gaps.
    fn resolve_buffers(&mut self) {
        let mut last: HashMap<(Option<u32>, u32), (u64, bool)> = HashMap::new();
        for b in &mut self.buffers {
            let same_cpu =
                |a: &&(u64, Aux)| b.cpu.is_none() || a.1.sample_id.cpu.is_none() || a.1.sample_id.cpu == b.cpu;
            let end = b.aux_offset.saturating_add(b.size);
            let overlapping: Vec<&Aux> = self
                .aux_records
                .iter()
                .filter(same_cpu)
                .filter(|(_, a)| a.aux_offset < end && b.aux_offset < a.aux_offset.saturating_add(a.aux_size))
                .map(|(_, a)| a)
                .collect();
            let any = self.aux_records.iter().filter(same_cpu).map(|(_, a)| a).next();
            b.format = match (overlapping.first(), any) {
                (Some(_), _) if overlapping.iter().any(|a| a.flags.coresight_raw()) => AuxFormat::Raw,
                (Some(_), _) => AuxFormat::Formatted,
                (None, Some(a)) if a.flags.coresight_raw() => AuxFormat::Raw,
                (None, Some(_)) => AuxFormat::Formatted,
                (None, None) => AuxFormat::Unknown,
            };
            let lost_here = overlapping.iter().any(|a| a.flags.truncated() || a.flags.collision());
            let key = (b.cpu, if b.cpu.is_some() { 0 } else { b.idx });
            if let Some(&(expected, prev_lost)) = last.get(&key) {
                b.discontinuous = b.aux_offset != expected || prev_lost;
            }
            last.insert(key, (end, lost_here));
        }
    }

    /// The attributes.
    pub fn attrs(&self) -> &[Attr] {
        &self.file.attrs
    }

    /// The buffers of one CPU, in file order.
    pub fn buffers_for_cpu(&self, cpu: u32) -> impl Iterator<Item = &AuxBuffer<'a>> {
        self.buffers.iter().filter(move |b| b.cpu == Some(cpu))
    }

    /// The build id the feature section gives for `path`.
    pub fn build_id_for(&self, path: &str) -> Option<BuildId> {
        self.build_ids.iter().find(|b| b.filename == path).map(|b| b.build_id)
    }
}
