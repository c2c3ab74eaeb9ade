//! What `perf inject --itrace=il64` writes: a recording's trace replaced by the samples it
//! gives, so that tools made for hardware branch stacks (LBR) read CoreSight trace. AutoFDO's
//! `create_llvm_prof --profiler=perf` and `create_gcov` take such a file: this is the route
//! Linaro documents for AutoFDO on Arm, and Debian's own `perf inject` crashes on many
//! recordings.
//!
//! The samples are made by [`crate::script::ScriptWriter`] exactly as `perf script` shows
//! them (see [`SampleRecords`]); [`write_injected`] then lays out the file: the recording's
//! attributes and the synthesised events' ones; its records but the trace's (AUX, AUXTRACE,
//! AUXTRACE_INFO, ITRACE_START, the trace event's own samples), with the samples in the
//! order perf makes them, none before the AUXTRACE record of its trace; its feature sections
//! but the AUXTRACE index, the new events named in EVENT_DESC, and HEADER_BRANCH_STACK set
//! when samples carry branch stacks.

use crate::error::{Error, Result};
use crate::features::feature;
use crate::record::kind;
use crate::recording::Recording;
use crate::script_options::Itrace;
use crate::{Endian, FileHeader};

const SAMPLE_IDENTIFIER: u64 = 1 << 16;
const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_ADDR: u64 = 1 << 3;
const SAMPLE_ID: u64 = 1 << 6;
const SAMPLE_CPU: u64 = 1 << 7;
const SAMPLE_PERIOD: u64 = 1 << 8;
const SAMPLE_STREAM_ID: u64 = 1 << 9;
const SAMPLE_BRANCH_STACK: u64 = 1 << 11;
/// The sample fields perf's synthesised events take from the trace event (`PERF_SAMPLE_MASK`).
const SAMPLE_MASK: u64 = SAMPLE_IP
    | SAMPLE_TID
    | SAMPLE_TIME
    | SAMPLE_ADDR
    | SAMPLE_ID
    | SAMPLE_STREAM_ID
    | SAMPLE_CPU
    | SAMPLE_PERIOD
    | SAMPLE_IDENTIFIER;
/// `PERF_SAMPLE_BRANCH_HW_INDEX`: each branch stack starts with a hardware index.
const BRANCH_HW_INDEX: u64 = 1 << 17;
/// The `perf_event_attr` flag bits copied to the synthesised events: exclude_user, _kernel,
/// _hv, sample_id_all, exclude_host, exclude_guest.
const COPIED_FLAGS: u64 = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 18) | (1 << 19) | (1 << 20);
const PERF_TYPE_HARDWARE: u32 = 0;
const HW_INSTRUCTIONS: u64 = 1;
const HW_BRANCH_INSTRUCTIONS: u64 = 4;
/// The smallest attribute that holds `branch_sample_type` (`PERF_ATTR_SIZE_VER2`).
const MIN_ATTR_SIZE: usize = 80;
/// `predicted` in a branch entry's flags (ETM trace has no misprediction).
const BRANCH_PREDICTED: u64 = 1 << 1;
const MISC_KERNEL: u16 = 1;
const MISC_USER: u16 = 2;
/// perf's kernel start when it knows no kernel map: addresses from here up are the kernel's.
const KERNEL_START: u64 = 1 << 63;

/// One synthesised event: its id, `sample_type` and the attribute bytes written.
#[derive(Debug, Clone)]
pub struct SynthEvent {
    /// Event name (`instructions:uH`).
    pub name: String,
    /// The id its samples carry.
    pub id: u64,
    /// Its `sample_type`.
    pub sample_type: u64,
    /// Its `perf_event_attr`, `attr_size` bytes.
    pub attr: Vec<u8>,
}

/// The events perf's cs_etm synthesises for `itrace`: branches (`b`), then instructions
/// (`i`, with a branch stack for `l`). Ids follow perf: the trace event's first id plus
/// 1,000,000,000.
#[derive(Debug, Clone)]
pub struct SampleLayout {
    /// Branch samples' event.
    pub branches: Option<SynthEvent>,
    /// Instruction samples' event.
    pub instructions: Option<SynthEvent>,
    /// Branch stacks start with a hardware index (`PERF_SAMPLE_BRANCH_HW_INDEX`).
    pub hw_index: bool,
    /// The recording's events are left out and its records' sample ids rewritten for the
    /// new ones: its trace event does not sample IDENTIFIER (simpleperf's recordings), so
    /// events of other layouts beside it would put the id where perf cannot find it.
    pub strip: bool,
}

impl SampleLayout {
    /// The events for `rec` (whose trace event is its first attribute), decoded timeless or
    /// not, named with `modifier` (`uH`...); with `hw_index`, branch stacks in the layout of
    /// perf 5.7 and later (a hardware index first), which AutoFDO's readers do not take.
    pub fn new(
        rec: &Recording<'_>,
        itrace: &Itrace,
        timeless: bool,
        modifier: &str,
        hw_index: bool,
    ) -> Result<SampleLayout> {
        let trace = rec.attrs().first().ok_or_else(|| Error::Malformed {
            offset: 0,
            what: "attributes",
            detail: "the recording has no event attribute".into(),
        })?;
        let size = rec.file.header.attr_entry_size.saturating_sub(16) as usize;
        if size < MIN_ATTR_SIZE {
            return Err(Error::Malformed {
                offset: rec.file.header.attrs.offset,
                what: "attributes",
                detail: format!("{size} bytes each: too old to carry a branch stack (at least {MIN_ATTR_SIZE})"),
            });
        }
        let strip = trace.sample_type & SAMPLE_IDENTIFIER == 0;
        let mut sample_type = trace.sample_type & SAMPLE_MASK | SAMPLE_IP | SAMPLE_TID | SAMPLE_PERIOD;
        if strip {
            sample_type |= SAMPLE_IDENTIFIER;
        }
        if timeless {
            sample_type &= !SAMPLE_TIME;
        } else {
            sample_type |= SAMPLE_TIME;
        }
        let mut id = trace.ids.first().copied().unwrap_or(0).wrapping_add(1_000_000_000);
        if id == 0 {
            id = 1;
        }
        let suffix = if modifier.is_empty() {
            String::new()
        } else {
            format!(":{modifier}")
        };
        let attr = |config: u64, period: u64, sample_type: u64, branch_sample_type: u64| {
            let mut a = vec![0u8; size];
            a[4..8].copy_from_slice(&(size as u32).to_le_bytes());
            a[8..16].copy_from_slice(&config.to_le_bytes());
            a[16..24].copy_from_slice(&period.to_le_bytes());
            a[24..32].copy_from_slice(&sample_type.to_le_bytes());
            a[32..40].copy_from_slice(&trace.read_format.to_le_bytes());
            a[40..48].copy_from_slice(&(trace.flags & COPIED_FLAGS).to_le_bytes());
            a[72..80].copy_from_slice(&branch_sample_type.to_le_bytes());
            a[0..4].copy_from_slice(&PERF_TYPE_HARDWARE.to_le_bytes());
            a
        };
        let mut layout = SampleLayout {
            branches: None,
            instructions: None,
            hw_index,
            strip,
        };
        if itrace.branches {
            let t = sample_type | SAMPLE_ADDR;
            layout.branches = Some(SynthEvent {
                name: format!("branches{suffix}"),
                id,
                sample_type: t,
                attr: attr(HW_BRANCH_INSTRUCTIONS, 1, t, 0),
            });
            id += 1;
        }
        if let Some(period) = itrace.instructions {
            let (t, bst) = if itrace.last_branch.is_some() {
                (
                    sample_type | SAMPLE_BRANCH_STACK,
                    if hw_index { BRANCH_HW_INDEX } else { 0 },
                )
            } else {
                (sample_type, 0)
            };
            layout.instructions = Some(SynthEvent {
                name: format!("instructions{suffix}"),
                id,
                sample_type: t,
                attr: attr(HW_INSTRUCTIONS, period, t, bst),
            });
        }
        Ok(layout)
    }
}

/// The samples of a decode as perf.data SAMPLE records, each with the file offset of the
/// AUXTRACE record whose trace gave it.
#[derive(Debug, Clone)]
pub struct SampleRecords {
    layout: SampleLayout,
    bytes: Vec<u8>,
    /// (AUXTRACE record offset, start in `bytes`).
    index: Vec<(u64, usize)>,
}

/// One sample's values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SampleValues {
    pub position: u64,
    pub pid: i32,
    pub tid: i32,
    pub time: u64,
    pub cpu: u32,
    pub ip: u64,
    pub addr: u64,
    pub period: u64,
}

impl SampleRecords {
    /// No samples yet, for the events of `layout`.
    pub fn new(layout: SampleLayout) -> SampleRecords {
        SampleRecords {
            layout,
            bytes: Vec::new(),
            index: Vec::new(),
        }
    }

    /// The events.
    pub fn layout(&self) -> &SampleLayout {
        &self.layout
    }

    /// Samples made.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// No sample made.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Appends a sample of the branches event (`branch`) or the instructions one, with the
    /// branch stack `lbr` (newest first) when that event has one.
    pub(crate) fn push<'b>(
        &mut self,
        branch: bool,
        v: SampleValues,
        lbr: impl ExactSizeIterator<Item = &'b (u64, u64)>,
    ) {
        let ev = if branch {
            &self.layout.branches
        } else {
            &self.layout.instructions
        };
        let Some(ev) = ev else { return };
        let (t, id, hw_index) = (ev.sample_type, ev.id, self.layout.hw_index);
        let b = &mut self.bytes;
        let at = b.len();
        self.index.push((v.position, at));
        let misc = if v.ip >= KERNEL_START { MISC_KERNEL } else { MISC_USER };
        b.extend_from_slice(&kind::SAMPLE.to_le_bytes());
        b.extend_from_slice(&misc.to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        let mut put = |x: u64| b.extend_from_slice(&x.to_le_bytes());
        if t & SAMPLE_IDENTIFIER != 0 {
            put(id);
        }
        if t & SAMPLE_IP != 0 {
            put(v.ip);
        }
        if t & SAMPLE_TID != 0 {
            put(u64::from(v.pid as u32) | u64::from(v.tid as u32) << 32);
        }
        if t & SAMPLE_TIME != 0 {
            put(v.time);
        }
        if t & SAMPLE_ADDR != 0 {
            put(v.addr);
        }
        if t & SAMPLE_ID != 0 {
            put(id);
        }
        if t & SAMPLE_STREAM_ID != 0 {
            put(id);
        }
        if t & SAMPLE_CPU != 0 {
            put(u64::from(v.cpu));
        }
        if t & SAMPLE_PERIOD != 0 {
            put(v.period);
        }
        if t & SAMPLE_BRANCH_STACK != 0 {
            put(lbr.len() as u64);
            if hw_index {
                put(0);
            }
            for &(from, to) in lbr {
                put(from);
                put(to);
                put(BRANCH_PREDICTED);
            }
        }
        let size = (b.len() - at) as u16;
        b[at + 6..at + 8].copy_from_slice(&size.to_le_bytes());
    }
}

/// `sample_id_all` in the attribute's flags.
const SAMPLE_ID_ALL: u64 = 1 << 18;
/// The sample id fields at the end of a non-sample record, in their order.
const TRAILER: [u64; 6] = [
    SAMPLE_TID,
    SAMPLE_TIME,
    SAMPLE_ID,
    SAMPLE_STREAM_ID,
    SAMPLE_CPU,
    SAMPLE_IDENTIFIER,
];

/// The 8-byte words of a record's sample id for `sample_type`.
fn trailer_words(sample_type: u64) -> usize {
    TRAILER.iter().filter(|&&b| sample_type & b != 0).count()
}

/// Appends to `out` the sample id `old` (laid out for `from`) laid out for `to`, its ids made
/// `id`; a field `old` lacks is 0.
fn rewrite_sample_id(out: &mut Vec<u8>, old: &[u8], from: u64, to: u64, id: u64) {
    let mut words = old
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
    let mut value = [0u64; 6];
    for (i, &b) in TRAILER.iter().enumerate() {
        if from & b != 0 {
            value[i] = words.next().unwrap_or(0);
        }
    }
    for (i, &b) in TRAILER.iter().enumerate() {
        if to & b != 0 {
            let v = if b == SAMPLE_ID || b == SAMPLE_STREAM_ID || b == SAMPLE_IDENTIFIER {
                id
            } else {
                value[i]
            };
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2).map_or(0, |x| u16::from_le_bytes([x[0], x[1]]))
}

/// The file `perf inject` writes for `rec` with `samples` in place of its trace (file mode,
/// little-endian as the input). Each sample goes right after the AUXTRACE record of its
/// trace, in the order made: the threads and maps it belongs to are there. (perf 6.1, when
/// it decodes timeless, puts them before the recording's sideband records or after its
/// threads' EXIT, so that perf script names their threads `:TID` and their code `[unknown]`.)
pub fn write_injected(rec: &Recording<'_>, samples: &SampleRecords) -> Result<Vec<u8>> {
    let file = &rec.file;
    let h: &FileHeader = &file.header;
    if h.endian != Endian::Little {
        return Err(Error::Malformed {
            offset: 0,
            what: "byte order",
            detail: "a big-endian recording cannot be injected".into(),
        });
    }
    let bytes = file.bytes;
    let attr_size = h.attr_entry_size.saturating_sub(16) as usize;
    let new_events: Vec<&SynthEvent> = [&samples.layout.branches, &samples.layout.instructions]
        .into_iter()
        .flatten()
        .collect();
    // Attributes: the recording's (their bytes as they were), then the synthesised ones.
    let strip = samples.layout.strip;
    let mut attrs: Vec<(Vec<u8>, Vec<u64>)> = Vec::new();
    for a in rec.attrs().iter().filter(|_| !strip) {
        let start = a.offset as usize;
        let raw = bytes
            .get(start..start + attr_size.min(a.size.max(8) as usize))
            .ok_or_else(|| Error::Malformed {
                offset: a.offset,
                what: "attribute",
                detail: "runs past the file".into(),
            })?;
        let mut v = raw.to_vec();
        v.resize(attr_size, 0);
        v[4..8].copy_from_slice(&(attr_size as u32).to_le_bytes());
        attrs.push((v, a.ids.clone()));
    }
    for e in &new_events {
        attrs.push((e.attr.clone(), vec![e.id]));
    }
    const HEADER: usize = 104;
    let ids_len: usize = attrs.iter().map(|(_, ids)| 8 * ids.len()).sum();
    let attrs_offset = HEADER + ids_len;
    let data_offset = attrs_offset + attrs.len() * (attr_size + 16);
    let mut out = vec![0u8; data_offset];
    // Ids after the header, each attribute's ids section pointing at its own.
    let mut at = HEADER;
    for (i, (attr, ids)) in attrs.iter().enumerate() {
        let ids_at = at;
        for &id in ids {
            out[at..at + 8].copy_from_slice(&id.to_le_bytes());
            at += 8;
        }
        let e = attrs_offset + i * (attr_size + 16);
        out[e..e + attr_size].copy_from_slice(attr);
        out[e + attr_size..e + attr_size + 8].copy_from_slice(&(ids_at as u64).to_le_bytes());
        out[e + attr_size + 8..e + attr_size + 16].copy_from_slice(&(8 * ids.len() as u64).to_le_bytes());
    }

    // Records: the trace's own left out; the samples in the order they were made (perf's),
    // none before the AUXTRACE record of its trace.
    let order: Vec<usize> = (0..samples.index.len()).collect();
    let sample_bytes = |i: usize| {
        let start = samples.index[i].1;
        let size = u16_at(&samples.bytes, start + 6) as usize;
        &samples.bytes[start..start + size]
    };
    let mut next = 0;
    let trace_attr = 0;
    for r in file.records() {
        let r = r?;
        let offset = r.offset as usize;
        let size = u16_at(bytes, offset + 6) as usize;
        while next < order.len() && samples.index[order[next]].0 < r.offset {
            out.extend_from_slice(sample_bytes(order[next]));
            next += 1;
        }
        let keep = match r.kind {
            kind::AUX | kind::ITRACE_START | kind::AUX_OUTPUT_HW_ID => false,
            kind::SAMPLE => !strip && r.attr_index != trace_attr,
            k if k < kind::HEADER_ATTR => true,
            kind::FINISHED_ROUND | kind::TIME_CONV => true,
            _ => false,
        };
        let Some(raw) = bytes.get(offset..offset + size).filter(|_| keep) else {
            continue;
        };
        match (strip, new_events.first(), rec.attrs().get(r.attr_index)) {
            (true, Some(e), Some(a)) if r.kind < kind::HEADER_ATTR && a.flags & SAMPLE_ID_ALL != 0 => {
                let start = out.len();
                let kept = raw.len().saturating_sub(8 * trailer_words(a.sample_type));
                out.extend_from_slice(&raw[..kept]);
                rewrite_sample_id(&mut out, &raw[kept..], a.sample_type, e.sample_type, e.id);
                let size = (out.len() - start) as u16;
                out[start + 6..start + 8].copy_from_slice(&size.to_le_bytes());
            }
            _ => out.extend_from_slice(raw),
        }
    }
    while next < order.len() {
        out.extend_from_slice(sample_bytes(order[next]));
        next += 1;
    }
    let data_size = out.len() - data_offset;

    // Features: the recording's but its AUXTRACE index; EVENT_DESC naming the new events;
    // BRANCH_STACK when samples carry one.
    let mut bodies: Vec<(u32, Vec<u8>)> = Vec::new();
    for f in &file.features {
        let Some((body, _)) = file.feature(f.feature) else {
            continue;
        };
        match f.feature {
            feature::AUXTRACE | feature::BRANCH_STACK => {}
            feature::EVENT_DESC if strip => bodies.push((f.feature, event_desc(&[0; 8], attr_size, &new_events)?)),
            feature::EVENT_DESC => bodies.push((f.feature, event_desc(body, attr_size, &new_events)?)),
            n => bodies.push((n, body.to_vec())),
        }
    }
    let branch_stack = samples
        .layout
        .instructions
        .as_ref()
        .is_some_and(|e| e.sample_type & SAMPLE_BRANCH_STACK != 0);
    if branch_stack {
        bodies.push((feature::BRANCH_STACK, Vec::new()));
    }
    bodies.sort_by_key(|(f, _)| *f);
    let mut bitmap = [0u64; 4];
    for (f, _) in &bodies {
        bitmap[*f as usize / 64] |= 1 << (f % 64);
    }
    let mut body_at = (out.len() + 16 * bodies.len()) as u64;
    for (_, b) in &bodies {
        out.extend_from_slice(&body_at.to_le_bytes());
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        body_at += b.len() as u64;
    }
    for (_, b) in &bodies {
        out.extend_from_slice(b);
    }

    // The header.
    let mut hd = Vec::with_capacity(HEADER);
    hd.extend_from_slice(b"PERFILE2");
    for x in [
        HEADER as u64,
        (attr_size + 16) as u64,
        attrs_offset as u64,
        (attrs.len() * (attr_size + 16)) as u64,
        data_offset as u64,
        data_size as u64,
        0,
        0,
    ] {
        hd.extend_from_slice(&x.to_le_bytes());
    }
    for w in bitmap {
        hd.extend_from_slice(&w.to_le_bytes());
    }
    out[..HEADER].copy_from_slice(&hd);
    Ok(out)
}

/// EVENT_DESC `body` with `events` added (their attributes `attr_size` bytes, as the
/// recording's).
fn event_desc(body: &[u8], attr_size: usize, events: &[&SynthEvent]) -> Result<Vec<u8>> {
    let bad = || Error::Malformed {
        offset: 0,
        what: "EVENT_DESC",
        detail: "shorter than its 8-byte header".into(),
    };
    let nr = body.get(0..4).ok_or_else(bad)?;
    let size = body.get(4..8).ok_or_else(bad)?;
    let nr = u32::from_le_bytes([nr[0], nr[1], nr[2], nr[3]]);
    let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize;
    let mut v = body.to_vec();
    v[0..4].copy_from_slice(&(nr + events.len() as u32).to_le_bytes());
    for e in events {
        let mut a = e.attr.clone();
        a.resize(size, 0);
        a[4..8].copy_from_slice(&(attr_size.min(size) as u32).to_le_bytes());
        v.extend_from_slice(&a);
        v.extend_from_slice(&1u32.to_le_bytes());
        let len = (e.name.len() + 1).next_multiple_of(64);
        v.extend_from_slice(&(len as u32).to_le_bytes());
        let start = v.len();
        v.extend_from_slice(e.name.as_bytes());
        v.resize(start + len, 0);
        v.extend_from_slice(&e.id.to_le_bytes());
    }
    Ok(v)
}
