//! Feature sections: build ids, the auxtrace index, perf's strings and tables, and
//! simpleperf's meta info and file tables.

use linux_perf_data::prost::Message;
use linux_perf_data::{SimpleperfFileRecord, SimpleperfTypeSpecificInfo};

use crate::bytes::{Reader, until_nul};
use crate::error::{Error, Result};
use crate::record::{BuildId, misc};

/// Feature numbers (bits of the header's feature bitmap).
pub mod feature {
    #![allow(missing_docs)]
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const OSRELEASE: u32 = 4;
    pub const VERSION: u32 = 5;
    pub const ARCH: u32 = 6;
    pub const NRCPUS: u32 = 7;
    pub const CPUDESC: u32 = 8;
    pub const CPUID: u32 = 9;
    pub const TOTAL_MEM: u32 = 10;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    /// The file has samples with branch stacks (no body).
    pub const BRANCH_STACK: u32 = 15;
    pub const PMU_MAPPINGS: u32 = 16;
    pub const AUXTRACE: u32 = 18;
    /// simpleperf: file table with symbols (old layout).
    pub const SIMPLEPERF_FILE: u32 = 128;
    /// simpleperf: NUL-separated key/value pairs.
    pub const SIMPLEPERF_META_INFO: u32 = 129;
    /// simpleperf: file table as protobuf messages.
    pub const SIMPLEPERF_FILE2: u32 = 132;
}

/// One entry of the build-id feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// File offset of the entry.
    pub offset: u64,
    /// Process id (-1 for the kernel and for "all processes").
    pub pid: i32,
    /// The entry's `misc` (its cpumode says kernel or user).
    pub misc: u16,
    /// The build id.
    pub build_id: BuildId,
    /// The path.
    pub filename: String,
}

/// Fixed part of a build-id entry: header, pid, 24 bytes of build id and size.
const BUILD_ID_ENTRY_FIXED: usize = 8 + 4 + 24;

pub(crate) fn parse_build_ids(bytes: &[u8], base: u64, r0: Reader<'_>) -> Result<Vec<BuildIdEntry>> {
    let mut out = Vec::new();
    let mut r = Reader::new(bytes, base, r0.endian);
    while r.remaining() > 0 {
        let at = r.offset();
        let mut h = r;
        h.u32("build id entry type")?;
        let emisc = h.u16("build id entry misc")?;
        let size = h.u16("build id entry size")? as usize;
        if size < BUILD_ID_ENTRY_FIXED {
            return Err(Error::malformed(
                at + 6,
                "build id entry size",
                format!("{size}, expected at least {BUILD_ID_ENTRY_FIXED}"),
            ));
        }
        let entry = r.bytes(size, "build id entry")?;
        let mut e = Reader::new(entry, at, r.endian);
        e.bytes(8, "build id entry header")?;
        let pid = e.u32("build id pid")? as i32;
        let raw: [u8; 20] = e.bytes(20, "build id")?.try_into().unwrap_or([0; 20]);
        let len = e.u8("build id size")?;
        e.bytes(3, "build id padding")?;
        let build_id = if emisc & misc::BUILD_ID_SIZE != 0 && len <= 20 {
            BuildId::new(&raw[..len as usize])
        } else {
            BuildId::from_padded(&raw)
        };
        out.push(BuildIdEntry {
            offset: at,
            pid,
            misc: emisc,
            build_id,
            filename: until_nul(e.rest()),
        });
    }
    Ok(out)
}

/// One entry of the auxtrace index: where an AUXTRACE record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxtraceIndexEntry {
    /// File offset of the AUXTRACE record.
    pub file_offset: u64,
    /// perf: record header plus payload; simpleperf: the record header only.
    pub size: u64,
}

/// Reads the auxtrace index. perf writes a count and then `{offset, size}` pairs (so the size is
/// 8 more than a multiple of 16); simpleperf writes the pairs alone (a multiple of 16).
pub(crate) fn parse_auxtrace_index(bytes: &[u8], base: u64, r0: Reader<'_>) -> Result<Vec<AuxtraceIndexEntry>> {
    let mut r = Reader::new(bytes, base, r0.endian);
    let n = match bytes.len() % 16 {
        0 => bytes.len() / 16,
        8 => {
            let n = r.u64("auxtrace index count")?;
            let room = (r.remaining() / 16) as u64;
            if n > room {
                return Err(Error::malformed(
                    base,
                    "auxtrace index count",
                    format!("{n}, but the section has room for {room}"),
                ));
            }
            n as usize
        }
        _ => {
            return Err(Error::malformed(
                base,
                "auxtrace index",
                format!(
                    "section size {} is neither 8 + 16n (perf) nor 16n (simpleperf)",
                    bytes.len()
                ),
            ));
        }
    };
    (0..n)
        .map(|_| {
            Ok(AuxtraceIndexEntry {
                file_offset: r.u64("auxtrace index offset")?,
                size: r.u64("auxtrace index size")?,
            })
        })
        .collect()
}

/// A perf length-prefixed string feature (hostname, osrelease, arch, cpudesc, cpuid, version).
pub(crate) fn parse_string(bytes: &[u8], base: u64, r0: Reader<'_>) -> Result<String> {
    Reader::new(bytes, base, r0.endian).perf_string("feature string")
}

/// HEADER_CMDLINE: a count and strings.
pub(crate) fn parse_string_list(bytes: &[u8], base: u64, r0: Reader<'_>) -> Result<Vec<String>> {
    let mut r = Reader::new(bytes, base, r0.endian);
    let n = r.u32("string list count")?;
    let room = r.remaining() / 4;
    if n as usize > room {
        return Err(Error::malformed(
            base,
            "string list count",
            format!("{n}, but the section has room for {room}"),
        ));
    }
    (0..n).map(|_| r.perf_string("string list entry")).collect()
}

/// HEADER_NRCPUS: `(available, online)`.
pub(crate) fn parse_nr_cpus(bytes: &[u8], base: u64, r0: Reader<'_>) -> Result<(u32, u32)> {
    let mut r = Reader::new(bytes, base, r0.endian);
    Ok((r.u32("nr_cpus_available")?, r.u32("nr_cpus_online")?))
}

/// HEADER_PMU_MAPPINGS: `(type, name)` pairs.
pub(crate) fn parse_pmu_mappings(bytes: &[u8], base: u64, r0: Reader<'_>) -> Result<Vec<(u32, String)>> {
    let mut r = Reader::new(bytes, base, r0.endian);
    let n = r.u32("pmu mappings count")?;
    let room = r.remaining() / 8;
    if n as usize > room {
        return Err(Error::malformed(
            base,
            "pmu mappings count",
            format!("{n}, but the section has room for {room}"),
        ));
    }
    (0..n)
        .map(|_| Ok((r.u32("pmu type")?, r.perf_string("pmu name")?)))
        .collect()
}

/// One event of HEADER_EVENT_DESC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDesc {
    /// The event name (`cs_etm//`, ...).
    pub name: String,
    /// The attribute's type field.
    pub kind: u32,
    /// The event ids.
    pub ids: Vec<u64>,
}

pub(crate) fn parse_event_desc(bytes: &[u8], base: u64, r0: Reader<'_>) -> Result<Vec<EventDesc>> {
    let mut r = Reader::new(bytes, base, r0.endian);
    let n = r.u32("event desc count")?;
    let attr_size = r.u32("event desc attr size")? as usize;
    if attr_size < 8 {
        return Err(Error::malformed(
            base + 4,
            "event desc attr size",
            format!("{attr_size}, expected at least 8"),
        ));
    }
    let room = r.remaining() / (attr_size + 8);
    if n as usize > room {
        return Err(Error::malformed(
            base,
            "event desc count",
            format!("{n}, but the section has room for {room}"),
        ));
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let attr = r.bytes(attr_size, "event desc attr")?;
        let kind = r.endian.u32([attr[0], attr[1], attr[2], attr[3]]);
        let nr_ids = r.u32("event desc id count")? as usize;
        let name = r.perf_string("event desc name")?;
        if nr_ids > r.remaining() / 8 {
            return Err(Error::malformed(
                r.offset(),
                "event desc id count",
                format!("{nr_ids}, more than the section holds"),
            ));
        }
        let ids = (0..nr_ids).map(|_| r.u64("event desc id")).collect::<Result<_>>()?;
        out.push(EventDesc { name, kind, ids });
    }
    Ok(out)
}

/// simpleperf's meta info: NUL-separated key/value pairs.
pub(crate) fn parse_meta_info(bytes: &[u8]) -> Vec<(String, String)> {
    let mut parts = bytes.split(|&b| b == 0);
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
        if k.is_empty() {
            break;
        }
        out.push((
            String::from_utf8_lossy(k).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ));
    }
    out
}

/// A file that simpleperf described in its file feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleperfFile {
    /// The path on the device.
    pub path: String,
    /// simpleperf's dso type (0 kernel, 1 kernel module, 2 ELF, 3 dex, ...).
    pub dso_type: u32,
    /// The lowest virtual address of the file's loadable segments.
    pub min_vaddr: u64,
    /// How many symbols simpleperf stored for it.
    pub symbol_count: usize,
    /// A kernel module's: how far from the module's start its text (`min_vaddr`) was in
    /// memory (FILE2 only; `None` when not recorded).
    pub memory_offset_of_min_vaddr: Option<u64>,
}

/// simpleperf's dso type of a kernel module.
pub const DSO_KERNEL_MODULE: u32 = 1;

/// simpleperf's file features: each entry is a `u32` size and then, in FILE2, a protobuf
/// `FileFeature` message (decoded by linux-perf-data), or in the old FILE layout a path,
/// a type, min_vaddr and the symbols.
pub(crate) fn parse_simpleperf_files(bytes: &[u8], base: u64, r0: Reader<'_>, v2: bool) -> Result<Vec<SimpleperfFile>> {
    let mut r = Reader::new(bytes, base, r0.endian);
    let mut out = Vec::new();
    while r.remaining() > 0 {
        let size = r.u32("simpleperf file entry size")? as usize;
        let at = r.offset();
        let entry = r.bytes(size, "simpleperf file entry")?;
        if v2 {
            let m = SimpleperfFileRecord::decode(entry)
                .map_err(|e| Error::malformed(at, "simpleperf file entry", format!("bad protobuf: {e}")))?;
            out.push(SimpleperfFile {
                path: m.path,
                dso_type: m.r#type,
                min_vaddr: m.min_vaddr,
                symbol_count: m.symbol.len(),
                memory_offset_of_min_vaddr: match m.type_specific_msg {
                    Some(SimpleperfTypeSpecificInfo::KernelModule(k)) if k.memory_offset_of_min_vaddr != u64::MAX => {
                        Some(k.memory_offset_of_min_vaddr)
                    }
                    _ => None,
                },
            });
        } else {
            let end = entry
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| Error::malformed(at, "simpleperf file path", "no NUL terminator inside the entry"))?;
            let path = String::from_utf8_lossy(&entry[..end]).into_owned();
            let mut e = Reader::new(&entry[end + 1..], at + end as u64 + 1, r.endian);
            let dso_type = e.u32("simpleperf file type")?;
            let min_vaddr = e.u64("simpleperf file min_vaddr")?;
            let symbol_count = e.u32("simpleperf symbol count")? as usize;
            out.push(SimpleperfFile {
                path,
                dso_type,
                min_vaddr,
                symbol_count,
                memory_offset_of_min_vaddr: None,
            });
        }
    }
    Ok(out)
}
