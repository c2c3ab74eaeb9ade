//! The records of the data section, as a typed enum over borrowed bytes.

use std::borrow::Cow;

use linux_perf_data::linux_perf_event_reader::{
    CommonData, EventRecord, Mmap2FileId, RawData, RawEventRecord, RecordParseInfo, RecordType,
};

use crate::bytes::{Endian, Reader};
use crate::error::{Error, Result};
use crate::header::{Attr, AttrIndex};

/// Record type numbers (`perf_event_header.type`).
pub mod kind {
    #![allow(missing_docs)]
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const AUX: u32 = 11;
    pub const ITRACE_START: u32 = 12;
    pub const SWITCH: u32 = 14;
    pub const SWITCH_CPU_WIDE: u32 = 15;
    pub const AUX_OUTPUT_HW_ID: u32 = 21;
    /// Pipe mode: an attribute and its ids.
    pub const HEADER_ATTR: u32 = 64;
    /// Pipe mode: an event type name (obsolete).
    pub const HEADER_EVENT_TYPE: u32 = 65;
    /// Pipe mode: tracepoint formats; that many bytes follow the record.
    pub const HEADER_TRACING_DATA: u32 = 66;
    /// Pipe mode: one build-id entry.
    pub const HEADER_BUILD_ID: u32 = 67;
    pub const FINISHED_ROUND: u32 = 68;
    pub const AUXTRACE_INFO: u32 = 70;
    pub const AUXTRACE: u32 = 71;
    pub const ID_INDEX: u32 = 69;
    pub const EVENT_UPDATE: u32 = 78;
    pub const TIME_CONV: u32 = 79;
    /// Pipe mode: one feature section (a `u64` feature number, then the section's bytes).
    pub const HEADER_FEATURE: u32 = 80;
    pub const FINISHED_INIT: u32 = 82;
    /// simpleperf's own record types start here (kernel symbols, dsos, split records, ...).
    pub const SIMPLEPERF_FIRST: u32 = 32768;
}

/// `misc` bits.
pub mod misc {
    #![allow(missing_docs)]
    pub const CPUMODE_MASK: u16 = 7;
    pub const USER: u16 = 2;
    /// MMAP/MMAP2: a non-executable (data) mapping.
    pub const MMAP_DATA: u16 = 1 << 13;
    /// COMM: the name changed at exec.
    pub const COMM_EXEC: u16 = 1 << 13;
    /// SWITCH: switching out (else in).
    pub const SWITCH_OUT: u16 = 1 << 13;
    /// SWITCH: switched out while runnable (preempted).
    pub const SWITCH_OUT_PREEMPT: u16 = 1 << 14;
    /// MMAP2: the record holds a build id rather than device and inode numbers.
    pub const MMAP_BUILD_ID: u16 = 1 << 14;
    /// Build-id feature entries: the size byte is valid.
    pub const BUILD_ID_SIZE: u16 = 1 << 15;
}

/// A GNU build id (up to 20 bytes).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BuildId {
    bytes: [u8; 20],
    len: u8,
}

impl BuildId {
    /// A build id from its bytes (at most 20 are kept).
    pub fn new(b: &[u8]) -> Self {
        let n = b.len().min(20);
        let mut bytes = [0; 20];
        bytes[..n].copy_from_slice(&b[..n]);
        BuildId { bytes, len: n as u8 }
    }

    /// From a 20-byte field whose length is not recorded: 16-byte ids (md5, or simpleperf's
    /// short ids) are written zero-padded to 20, so four trailing zero bytes make it 16.
    pub(crate) fn from_padded(b: &[u8; 20]) -> Self {
        let len = if b[16..].iter().all(|&c| c == 0) { 16 } else { 20 };
        BuildId::new(&b[..len])
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Lower-case hex, as `readelf -n` and perf print it.
    pub fn to_hex(&self) -> String {
        self.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for BuildId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BuildId({})", self.to_hex())
    }
}

impl std::fmt::Display for BuildId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// The `sample_id` fields a record carries (trailer of non-sample records with `sample_id_all`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    /// Process id.
    pub pid: Option<i32>,
    /// Thread id.
    pub tid: Option<i32>,
    /// Timestamp.
    pub time: Option<u64>,
    /// Event id (ID or IDENTIFIER).
    pub id: Option<u64>,
    /// Stream id.
    pub stream_id: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
}

impl From<CommonData> for SampleId {
    fn from(c: CommonData) -> Self {
        SampleId {
            pid: c.pid,
            tid: c.tid,
            time: c.timestamp,
            id: c.id,
            stream_id: c.stream_id,
            cpu: c.cpu,
        }
    }
}

/// How an MMAP2 record identifies the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmapFileId {
    /// MMAP records have neither.
    None,
    /// Device and inode numbers.
    Inode {
        /// Device major.
        major: u32,
        /// Device minor.
        minor: u32,
        /// Inode.
        inode: u64,
        /// Inode generation.
        generation: u64,
    },
    /// The build id (`PERF_RECORD_MISC_MMAP_BUILD_ID`).
    BuildId(BuildId),
}

/// MMAP or MMAP2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mmap<'a> {
    /// Process id (-1 for the kernel).
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Start address.
    pub start: u64,
    /// Length.
    pub len: u64,
    /// File offset of the mapping's first byte.
    pub pgoff: u64,
    /// Inode or build id (MMAP2).
    pub file_id: MmapFileId,
    /// Protection bits (MMAP2).
    pub prot: Option<u32>,
    /// mmap flags (MMAP2).
    pub flags: Option<u32>,
    /// The executable bit: false for data mappings (`PERF_RECORD_MISC_MMAP_DATA`).
    pub executable: bool,
    /// Path, as recorded (no NUL).
    pub filename: &'a [u8],
    /// Trailer fields.
    pub sample_id: SampleId,
}

impl Mmap<'_> {
    /// The path as text.
    pub fn filename_str(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.filename)
    }
}

/// COMM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm<'a> {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// New name (no NUL).
    pub name: &'a [u8],
    /// Set at exec.
    pub exec: bool,
    /// Trailer fields.
    pub sample_id: SampleId,
}

/// FORK or EXIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForkExit {
    /// Process id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// Thread id.
    pub tid: i32,
    /// Parent thread id.
    pub ptid: i32,
    /// Timestamp in the record body.
    pub time: u64,
    /// Trailer fields.
    pub sample_id: SampleId,
}

/// LOST: records the kernel dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    /// Event id.
    pub id: u64,
    /// How many records were lost.
    pub lost: u64,
    /// Trailer fields.
    pub sample_id: SampleId,
}

/// SAMPLE, with the fields of its attribute's `sample_type` that this crate exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample<'a> {
    /// Event id.
    pub id: Option<u64>,
    /// Instruction pointer.
    pub ip: Option<u64>,
    /// Process id.
    pub pid: Option<i32>,
    /// Thread id.
    pub tid: Option<i32>,
    /// Timestamp.
    pub time: Option<u64>,
    /// Address.
    pub addr: Option<u64>,
    /// Stream id.
    pub stream_id: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
    /// Period.
    pub period: Option<u64>,
    /// `PERF_SAMPLE_RAW` bytes.
    pub raw: Option<&'a [u8]>,
    /// The whole record body.
    pub body: &'a [u8],
}

/// Flags of an AUX record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuxFlags(pub u64);

impl AuxFlags {
    /// `PERF_AUX_FLAG_TRUNCATED`: the buffer was full, trace was lost.
    pub const TRUNCATED: u64 = 0x01;
    /// `PERF_AUX_FLAG_OVERWRITE`: snapshot mode.
    pub const OVERWRITE: u64 = 0x02;
    /// `PERF_AUX_FLAG_PARTIAL`: a record with gaps.
    pub const PARTIAL: u64 = 0x04;
    /// `PERF_AUX_FLAG_COLLISION`: the sample collided with another.
    pub const COLLISION: u64 = 0x08;
    /// `PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW`: unformatted trace (TRBE), no CoreSight frames.
    pub const CORESIGHT_FORMAT_RAW: u64 = 0x100;

    /// Data was lost.
    pub fn truncated(self) -> bool {
        self.0 & Self::TRUNCATED != 0
    }
    /// Snapshot (overwrite) mode.
    pub fn overwrite(self) -> bool {
        self.0 & Self::OVERWRITE != 0
    }
    /// Partial record.
    pub fn partial(self) -> bool {
        self.0 & Self::PARTIAL != 0
    }
    /// Collision.
    pub fn collision(self) -> bool {
        self.0 & Self::COLLISION != 0
    }
    /// The PMU-specific format byte (bits 8..16).
    pub fn pmu_format(self) -> u8 {
        (self.0 >> 8) as u8
    }
    /// CoreSight: raw (unformatted) trace.
    pub fn coresight_raw(self) -> bool {
        self.0 & Self::CORESIGHT_FORMAT_RAW != 0
    }
}

/// AUX: new data in the AUX area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aux {
    /// Offset in the AUX stream.
    pub aux_offset: u64,
    /// Size of the new data.
    pub aux_size: u64,
    /// Flags.
    pub flags: AuxFlags,
    /// Trailer fields (the CPU tells which buffer).
    pub sample_id: SampleId,
}

/// ITRACE_START: trace started for a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItraceStart {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Trailer fields.
    pub sample_id: SampleId,
}

/// SWITCH or SWITCH_CPU_WIDE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    /// Switching out (else in).
    pub out: bool,
    /// Switched out while runnable.
    pub preempt: bool,
    /// SWITCH_CPU_WIDE: the next (when out) or previous (when in) process and thread.
    pub next_prev: Option<(i32, i32)>,
    /// Trailer fields.
    pub sample_id: SampleId,
}

/// AUX_OUTPUT_HW_ID: the hardware id (CoreSight trace ID) the event now uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxOutputHwId {
    /// The id value.
    pub hw_id: u64,
    /// Trailer fields.
    pub sample_id: SampleId,
}

/// AUXTRACE_INFO: the AUX tracer's own description of the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuxtraceInfo {
    /// The tracer kind (`PERF_AUXTRACE_CS_ETM` = 3).
    pub kind: u32,
    /// The private words.
    pub priv_words: Vec<u64>,
    /// File offset of the first private word.
    pub priv_offset: u64,
}

/// `PERF_AUXTRACE_CS_ETM`.
pub const AUXTRACE_CS_ETM: u32 = 3;

/// AUXTRACE: a chunk of AUX data copied into the file, right after the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Auxtrace<'a> {
    /// Payload size.
    pub size: u64,
    /// Offset of the payload in the AUX stream of its buffer.
    pub offset: u64,
    /// Reference (a timestamp for CoreSight).
    pub reference: u64,
    /// Index of the mmap (buffer) it came from.
    pub idx: u32,
    /// Thread (per-thread mode), or -1 as u32.
    pub tid: u32,
    /// CPU (per-CPU mode), or -1 as u32.
    pub cpu: u32,
    /// The payload, borrowed from the file.
    pub data: &'a [u8],
    /// File offset of the payload.
    pub data_offset: u64,
}

/// TIME_CONV: how to turn counter values into perf time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeConv {
    /// Shift.
    pub time_shift: u64,
    /// Multiplier.
    pub time_mult: u64,
    /// Zero point.
    pub time_zero: u64,
    /// `(time_cycles, time_mask, cap_user_time_zero, cap_user_time_short)` in newer files.
    pub extended: Option<(u64, u64, bool, bool)>,
}

/// One record of the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Record<'a> {
    /// MMAP.
    Mmap(Mmap<'a>),
    /// MMAP2.
    Mmap2(Mmap<'a>),
    /// COMM.
    Comm(Comm<'a>),
    /// FORK.
    Fork(ForkExit),
    /// EXIT.
    Exit(ForkExit),
    /// LOST.
    Lost(Lost),
    /// SAMPLE.
    Sample(Sample<'a>),
    /// AUX.
    Aux(Aux),
    /// ITRACE_START.
    ItraceStart(ItraceStart),
    /// SWITCH.
    Switch(Switch),
    /// SWITCH_CPU_WIDE.
    SwitchCpuWide(Switch),
    /// AUX_OUTPUT_HW_ID.
    AuxOutputHwId(AuxOutputHwId),
    /// FINISHED_ROUND.
    FinishedRound,
    /// FINISHED_INIT.
    FinishedInit,
    /// AUXTRACE_INFO.
    AuxtraceInfo(AuxtraceInfo),
    /// AUXTRACE with its payload.
    Auxtrace(Auxtrace<'a>),
    /// TIME_CONV.
    TimeConv(TimeConv),
    /// A simpleperf-only record (kernel symbols, dso and symbol tables, split records...): not
    /// needed to decode trace, so only its kind and bytes are given.
    Simpleperf {
        /// The record type (32768 and up).
        kind: u32,
        /// Body bytes.
        body: &'a [u8],
    },
    /// Any other record kind.
    Other {
        /// The record type.
        kind: u32,
        /// Body bytes.
        body: &'a [u8],
    },
}

/// A record with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEntry<'a> {
    /// File offset of the record header.
    pub offset: u64,
    /// The record type.
    pub kind: u32,
    /// The header's `misc`.
    pub misc: u16,
    /// The attribute the record belongs to (0 when there is one).
    pub attr_index: usize,
    /// The record.
    pub record: Record<'a>,
}

/// One framed record: offset, kind, misc, body, and an AUXTRACE payload with its offset.
pub(crate) type Frame<'a> = (u64, u32, u16, &'a [u8], Option<(&'a [u8], u64)>);

/// The parts of the attributes the iterator needs.
#[derive(Debug, Clone)]
struct AttrLayout {
    parse_info: RecordParseInfo,
    sample_id_all: bool,
}

/// Iterator over the records of the data section. Framing errors (a size that is too small
/// or runs past the section) end the iteration after being returned; an error in one record's
/// body is returned and the iteration goes on with the next record.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    file: &'a [u8],
    pos: u64,
    end: u64,
    endian: Endian,
    layouts: Vec<AttrLayout>,
    index: AttrIndex,
    done: bool,
}

impl<'a> Records<'a> {
    pub(crate) fn new(file: &'a [u8], start: u64, end: u64, endian: Endian, attrs: &[Attr]) -> Self {
        let layouts = attrs
            .iter()
            .map(|a| AttrLayout {
                parse_info: a.parse_info,
                sample_id_all: a.sample_id_all(),
            })
            .collect();
        Records {
            file,
            pos: start,
            end,
            endian,
            layouts,
            index: AttrIndex::new(attrs),
            done: false,
        }
    }

    /// File offset of the next record.
    pub fn position(&self) -> u64 {
        self.pos
    }

    pub(crate) fn frame(&mut self) -> Result<Frame<'a>> {
        let at = self.pos;
        let avail = self.end - at;
        if avail < 8 {
            return Err(Error::Truncated {
                offset: at,
                what: "record header",
                needed: 8,
                available: avail,
            });
        }
        let h = &self.file[at as usize..at as usize + 8];
        let kind = self.endian.u32([h[0], h[1], h[2], h[3]]);
        let misc_bits = self.endian.u16([h[4], h[5]]);
        let size = u64::from(self.endian.u16([h[6], h[7]]));
        if size < 8 {
            return Err(Error::malformed(
                at + 6,
                "record size",
                format!("{size} for a record of type {kind}, expected at least 8"),
            ));
        }
        if size > avail {
            return Err(Error::Truncated {
                offset: at,
                what: "record",
                needed: size,
                available: avail,
            });
        }
        let body = &self.file[(at + 8) as usize..(at + size) as usize];
        let mut next = at + size;
        let mut payload = None;
        if let Some((psize, what)) = trailing_size(kind, body, at, self.endian)? {
            let left = self.end - next;
            if psize > left {
                return Err(Error::Truncated {
                    offset: next,
                    what,
                    needed: psize,
                    available: left,
                });
            }
            if kind == kind::AUXTRACE {
                payload = Some((&self.file[next as usize..(next + psize) as usize], next));
            }
            next += psize;
        }
        self.pos = next;
        Ok((at, kind, misc_bits, body, payload))
    }
}

/// The bytes that follow a record outside its size: an AUXTRACE record's payload, a pipe-mode
/// HEADER_TRACING_DATA record's tracepoint data. `body` is the record without its header,
/// which is at file offset `at`.
pub(crate) fn trailing_size(kind: u32, body: &[u8], at: u64, endian: Endian) -> Result<Option<(u64, &'static str)>> {
    match kind {
        kind::AUXTRACE => {
            if body.len() < 40 {
                return Err(Error::Truncated {
                    offset: at + 8,
                    what: "AUXTRACE record",
                    needed: 40,
                    available: body.len() as u64,
                });
            }
            let psize = Reader::new(body, at + 8, endian).u64("AUXTRACE size")?;
            Ok(Some((psize, "AUXTRACE payload")))
        }
        kind::HEADER_TRACING_DATA => {
            let psize = Reader::new(body, at + 8, endian).u32("HEADER_TRACING_DATA size")?;
            Ok(Some((u64::from(psize), "HEADER_TRACING_DATA payload")))
        }
        _ => Ok(None),
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RecordEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.end {
            return None;
        }
        let (at, kind, misc_bits, body, payload) = match self.frame() {
            Ok(f) => f,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let attr_index = if kind < 64 {
            self.index.find(body, kind == kind::SAMPLE, self.endian)
        } else {
            0
        };
        let layout = self.layouts.get(attr_index);
        Some(
            parse_record(at, kind, misc_bits, body, payload, self.endian, layout).map(|record| RecordEntry {
                offset: at,
                kind,
                misc: misc_bits,
                attr_index,
                record,
            }),
        )
    }
}

fn raw_slice(r: RawData<'_>) -> &[u8] {
    match r {
        RawData::Single(s) => s,
        // Only ring-buffer readers make split data; a file slice never does.
        RawData::Split(a, _) => a,
    }
}

fn lib_error(at: u64, what: &'static str, e: std::io::Error) -> Error {
    Error::malformed(at + 8, what, format!("record body too short or inconsistent ({e})"))
}

fn parse_record<'a>(
    at: u64,
    kind: u32,
    misc_bits: u16,
    body: &'a [u8],
    payload: Option<(&'a [u8], u64)>,
    endian: Endian,
    layout: Option<&AttrLayout>,
) -> Result<Record<'a>> {
    let mut r = Reader::new(body, at + 8, endian);
    // Kernel records: bodies parsed by linux-perf-event-reader where it has a parser.
    if kind < 64 {
        let Some(layout) = layout else {
            return Ok(Record::Other { kind, body });
        };
        let sample_id = |what| -> Result<SampleId> {
            if !layout.sample_id_all || kind == kind::SAMPLE {
                return Ok(SampleId::default());
            }
            CommonData::parse_nonsample(RawData::Single(body), &layout.parse_info)
                .map(SampleId::from)
                .map_err(|e| lib_error(at, what, e))
        };
        if kind == kind::MMAP2 && misc_bits & misc::MMAP_BUILD_ID != 0 {
            // The library asserts on this byte; check it first so bad input is an error, not a panic.
            if let Some(&n) = body.get(32)
                && n > 20
            {
                return Err(Error::malformed(
                    at + 8 + 32,
                    "MMAP2 build id size",
                    format!("{n}, expected at most 20"),
                ));
            }
        }
        let raw = RawEventRecord::new(RecordType(kind), misc_bits, RawData::Single(body), layout.parse_info);
        let parsed = match kind {
            kind::MMAP | kind::MMAP2 | kind::COMM | kind::FORK | kind::EXIT | kind::LOST | kind::SAMPLE => {
                Some(raw.parse().map_err(|e| lib_error(at, "record", e))?)
            }
            _ => None,
        };
        return Ok(match (kind, parsed) {
            (_, Some(EventRecord::Mmap(m))) => Record::Mmap(Mmap {
                pid: m.pid,
                tid: m.tid,
                start: m.address,
                len: m.length,
                pgoff: m.page_offset,
                file_id: MmapFileId::None,
                prot: None,
                flags: None,
                executable: misc_bits & misc::MMAP_DATA == 0,
                filename: raw_slice(m.path),
                sample_id: sample_id("MMAP sample_id")?,
            }),
            (_, Some(EventRecord::Mmap2(m))) => Record::Mmap2(Mmap {
                pid: m.pid,
                tid: m.tid,
                start: m.address,
                len: m.length,
                pgoff: m.page_offset,
                file_id: match m.file_id {
                    Mmap2FileId::BuildId(b) => MmapFileId::BuildId(BuildId::new(&b)),
                    Mmap2FileId::InodeAndVersion(i) => MmapFileId::Inode {
                        major: i.major,
                        minor: i.minor,
                        inode: i.inode,
                        generation: i.inode_generation,
                    },
                },
                prot: Some(m.protection),
                flags: Some(m.flags),
                executable: misc_bits & misc::MMAP_DATA == 0,
                filename: raw_slice(m.path),
                sample_id: sample_id("MMAP2 sample_id")?,
            }),
            (_, Some(EventRecord::Comm(c))) => Record::Comm(Comm {
                pid: c.pid,
                tid: c.tid,
                name: raw_slice(c.name),
                exec: c.is_execve,
                sample_id: sample_id("COMM sample_id")?,
            }),
            (_, Some(EventRecord::Fork(f))) | (_, Some(EventRecord::Exit(f))) => {
                let fe = ForkExit {
                    pid: f.pid,
                    ppid: f.ppid,
                    tid: f.tid,
                    ptid: f.ptid,
                    time: f.timestamp,
                    sample_id: sample_id("FORK/EXIT sample_id")?,
                };
                if kind == kind::FORK {
                    Record::Fork(fe)
                } else {
                    Record::Exit(fe)
                }
            }
            (_, Some(EventRecord::Lost(l))) => Record::Lost(Lost {
                id: l.id,
                lost: l.count,
                sample_id: sample_id("LOST sample_id")?,
            }),
            (_, Some(EventRecord::Sample(s))) => Record::Sample(Sample {
                id: s.id,
                ip: s.ip,
                pid: s.pid,
                tid: s.tid,
                time: s.timestamp,
                addr: s.addr,
                stream_id: s.stream_id,
                cpu: s.cpu,
                period: s.period,
                raw: s.raw.map(raw_slice),
                body,
            }),
            (kind::SWITCH_CPU_WIDE, _) => {
                let pid = r.u32("SWITCH_CPU_WIDE next_prev_pid")? as i32;
                let tid = r.u32("SWITCH_CPU_WIDE next_prev_tid")? as i32;
                Record::SwitchCpuWide(Switch {
                    out: misc_bits & misc::SWITCH_OUT != 0,
                    preempt: misc_bits & misc::SWITCH_OUT_PREEMPT != 0,
                    next_prev: Some((pid, tid)),
                    sample_id: sample_id("SWITCH_CPU_WIDE sample_id")?,
                })
            }
            (kind::SWITCH, _) => Record::Switch(Switch {
                out: misc_bits & misc::SWITCH_OUT != 0,
                preempt: misc_bits & misc::SWITCH_OUT_PREEMPT != 0,
                next_prev: None,
                sample_id: sample_id("SWITCH sample_id")?,
            }),
            (kind::AUX, _) => Record::Aux(Aux {
                aux_offset: r.u64("AUX aux_offset")?,
                aux_size: r.u64("AUX aux_size")?,
                flags: AuxFlags(r.u64("AUX flags")?),
                sample_id: sample_id("AUX sample_id")?,
            }),
            (kind::ITRACE_START, _) => Record::ItraceStart(ItraceStart {
                pid: r.u32("ITRACE_START pid")?,
                tid: r.u32("ITRACE_START tid")?,
                sample_id: sample_id("ITRACE_START sample_id")?,
            }),
            (kind::AUX_OUTPUT_HW_ID, _) => Record::AuxOutputHwId(AuxOutputHwId {
                hw_id: r.u64("AUX_OUTPUT_HW_ID hw_id")?,
                sample_id: sample_id("AUX_OUTPUT_HW_ID sample_id")?,
            }),
            _ => Record::Other { kind, body },
        });
    }
    Ok(match kind {
        kind::FINISHED_ROUND => Record::FinishedRound,
        kind::FINISHED_INIT => Record::FinishedInit,
        kind::AUXTRACE_INFO => {
            let info_kind = r.u32("AUXTRACE_INFO type")?;
            r.u32("AUXTRACE_INFO reserved")?;
            let priv_offset = r.offset();
            let n = r.remaining() / 8;
            let priv_words = (0..n).map(|_| r.u64("AUXTRACE_INFO priv")).collect::<Result<_>>()?;
            Record::AuxtraceInfo(AuxtraceInfo {
                kind: info_kind,
                priv_words,
                priv_offset,
            })
        }
        kind::AUXTRACE => {
            let size = r.u64("AUXTRACE size")?;
            let offset = r.u64("AUXTRACE offset")?;
            let reference = r.u64("AUXTRACE reference")?;
            let idx = r.u32("AUXTRACE idx")?;
            let tid = r.u32("AUXTRACE tid")?;
            let cpu = r.u32("AUXTRACE cpu")?;
            let (data, data_offset) = payload.unwrap_or((&[], r.offset()));
            Record::Auxtrace(Auxtrace {
                size,
                offset,
                reference,
                idx,
                tid,
                cpu,
                data,
                data_offset,
            })
        }
        kind::TIME_CONV => {
            let time_shift = r.u64("TIME_CONV time_shift")?;
            let time_mult = r.u64("TIME_CONV time_mult")?;
            let time_zero = r.u64("TIME_CONV time_zero")?;
            let extended = if r.remaining() >= 24 {
                let cycles = r.u64("TIME_CONV time_cycles")?;
                let mask = r.u64("TIME_CONV time_mask")?;
                let zero = r.u8("TIME_CONV cap_user_time_zero")? != 0;
                let short = r.u8("TIME_CONV cap_user_time_short")? != 0;
                Some((cycles, mask, zero, short))
            } else {
                None
            };
            Record::TimeConv(TimeConv {
                time_shift,
                time_mult,
                time_zero,
                extended,
            })
        }
        k if k >= kind::SIMPLEPERF_FIRST => Record::Simpleperf { kind, body },
        _ => Record::Other { kind, body },
    })
}
