//! The `PERFILE2` file header, the attribute section and the feature-section table.

use std::collections::HashMap;

use linux_perf_data::linux_perf_event_reader::{PerfEventAttr, RecordParseInfo};

use crate::bytes::{Endian, Reader, slice_at};
use crate::error::{Error, Result};

/// Size of the file-mode header.
pub const FILE_HEADER_SIZE: u64 = 104;
/// Size of the pipe-mode header (`perf record -o -`): magic and size, then records.
pub const PIPE_HEADER_SIZE: u64 = 16;
/// Smallest `perf_event_attr` (`PERF_ATTR_SIZE_VER0`).
pub const ATTR_SIZE_VER0: u64 = 64;

/// A `{offset, size}` pair in the header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Section {
    /// File offset.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

impl Section {
    /// One past the last byte (saturating).
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
}

/// The file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// Byte order of everything in the file.
    pub endian: Endian,
    /// Pipe mode: the header is only magic and size; attributes, features and build ids come
    /// as records in the stream, and the sections below are empty (`data` is the rest of the
    /// input, from offset 16).
    pub pipe: bool,
    /// Header size (104, or 16 in pipe mode).
    pub header_size: u64,
    /// Size of one entry of the attribute section (`perf_event_attr` plus a 16-byte ids section).
    pub attr_entry_size: u64,
    /// The attribute section.
    pub attrs: Section,
    /// The data section (the records).
    pub data: Section,
    /// The obsolete event-types section.
    pub event_types: Section,
    /// Bitmap of the feature sections present (256 bits).
    pub features: [u64; 4],
}

impl FileHeader {
    /// Reads the header at the start of `data`.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let magic = data.get(..8).unwrap_or(data);
        let endian = match magic {
            b"PERFILE2" => Endian::Little,
            b"2ELIFREP" => Endian::Big,
            _ => return Err(Error::BadMagic { found: magic.to_vec() }),
        };
        let mut r = Reader::new(data, 0, endian);
        r.bytes(8, "magic")?;
        let header_size = r.u64("header size")?;
        if header_size == PIPE_HEADER_SIZE {
            let len = data.len() as u64;
            return Ok(FileHeader {
                endian,
                pipe: true,
                header_size,
                attr_entry_size: 0,
                attrs: Section::default(),
                data: Section {
                    offset: PIPE_HEADER_SIZE,
                    size: len.saturating_sub(PIPE_HEADER_SIZE),
                },
                event_types: Section::default(),
                features: [0; 4],
            });
        }
        if header_size < FILE_HEADER_SIZE {
            return Err(Error::malformed(
                8,
                "header size",
                format!("{header_size}, expected {PIPE_HEADER_SIZE} (pipe mode) or at least {FILE_HEADER_SIZE}"),
            ));
        }
        let attr_entry_size = r.u64("attr entry size")?;
        let mut section = |what| -> Result<Section> {
            Ok(Section {
                offset: r.u64(what)?,
                size: r.u64(what)?,
            })
        };
        let attrs = section("attrs section")?;
        let data_section = section("data section")?;
        let event_types = section("event types section")?;
        let mut features = [0u64; 4];
        for f in &mut features {
            *f = r.u64("feature bitmap")?;
        }
        Ok(FileHeader {
            endian,
            pipe: false,
            header_size,
            attr_entry_size,
            attrs,
            data: data_section,
            event_types,
            features,
        })
    }

    /// Whether feature `feature` (a `HEADER_*` number) is flagged present.
    pub fn has_feature(&self, feature: u32) -> bool {
        feature < 256 && self.features[feature as usize / 64] >> (feature % 64) & 1 == 1
    }

    /// The features flagged present, in the order of their sections.
    pub fn feature_ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..256).filter(|&f| self.has_feature(f))
    }
}

/// One event attribute (`perf_event_attr`) with its event ids.
#[derive(Debug, Clone)]
pub struct Attr {
    /// File offset of the attribute.
    pub offset: u64,
    /// `type`: the PMU type (the cs_etm PMU's dynamic type for CoreSight).
    pub kind: u32,
    /// `size` of the attribute as written.
    pub size: u32,
    /// `config`: for cs_etm, the ETM options (context ID, timestamps, ...).
    pub config: u64,
    /// `sample_period`.
    pub sample_period: u64,
    /// `sample_type` (`PERF_SAMPLE_*` bits).
    pub sample_type: u64,
    /// `read_format`.
    pub read_format: u64,
    /// The flag bits (disabled, inherit, ..., sample_id_all, ...).
    pub flags: u64,
    /// `config1` (cs_etm: sink and other options).
    pub config1: u64,
    /// `config2` (cs_etm: the sink hash on newer kernels).
    pub config2: u64,
    /// `aux_watermark` (0 when the attribute is too short to hold it).
    pub aux_watermark: u32,
    /// The event ids that records of this attribute carry.
    pub ids: Vec<u64>,
    /// The attribute as parsed by `linux-perf-event-reader`.
    pub parsed: PerfEventAttr,
    /// How records of this attribute are laid out.
    pub(crate) parse_info: RecordParseInfo,
}

/// `sample_id_all` flag bit.
pub const ATTR_FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;

impl Attr {
    /// Whether non-sample records carry the sample-id trailer.
    pub fn sample_id_all(&self) -> bool {
        self.flags & ATTR_FLAG_SAMPLE_ID_ALL != 0
    }

    /// Parses one attribute of `len` bytes at `offset`.
    pub(crate) fn parse(file: &[u8], offset: u64, len: u64, endian: Endian) -> Result<Self> {
        let bytes = slice_at(file, offset, len, "perf_event_attr")?;
        Self::parse_bytes(bytes, offset, endian)
    }

    /// Parses the attribute in `bytes` (its whole entry), whose first byte is at file `offset`.
    pub(crate) fn parse_bytes(bytes: &[u8], offset: u64, endian: Endian) -> Result<Self> {
        let len = bytes.len() as u64;
        let mut r = Reader::new(bytes, offset, endian);
        let kind = r.u32("attr type")?;
        let size = r.u32("attr size")?;
        if u64::from(size) < ATTR_SIZE_VER0 || u64::from(size) > len {
            return Err(Error::malformed(
                offset + 4,
                "attr size",
                format!("{size}, expected {ATTR_SIZE_VER0} to {len} (the attribute entry)"),
            ));
        }
        let config = r.u64("attr config")?;
        let sample_period = r.u64("attr sample_period")?;
        let sample_type = r.u64("attr sample_type")?;
        let read_format = r.u64("attr read_format")?;
        let flags = r.u64("attr flags")?;
        r.u64("attr wakeup/bp_type")?;
        let config1 = r.u64("attr config1")?;
        let config2 = if size >= 72 { r.u64("attr config2")? } else { 0 };
        let aux_watermark = if size >= 108 {
            let mut w = Reader::new(&bytes[104..108], offset + 104, endian);
            w.u32("attr aux_watermark")?
        } else {
            0
        };
        let own = &bytes[..size as usize];
        let parsed = match endian {
            Endian::Little => PerfEventAttr::parse::<_, byteorder::LittleEndian>(own),
            Endian::Big => PerfEventAttr::parse::<_, byteorder::BigEndian>(own),
        }
        .map_err(|e| Error::malformed(offset, "perf_event_attr", e.to_string()))?
        .0;
        let parse_info = RecordParseInfo::new(&parsed, endian.to_reader());
        Ok(Attr {
            offset,
            kind,
            size,
            config,
            sample_period,
            sample_type,
            read_format,
            flags,
            config1,
            config2,
            aux_watermark,
            ids: Vec::new(),
            parsed,
            parse_info,
        })
    }
}

/// Reads the attribute section: each entry is an attribute followed by the section of its ids.
pub(crate) fn parse_attrs(file: &[u8], header: &FileHeader) -> Result<Vec<Attr>> {
    let entry = header.attr_entry_size;
    if !(ATTR_SIZE_VER0 + 16..=4096).contains(&entry) {
        return Err(Error::malformed(
            16,
            "attr entry size",
            format!("{entry}, expected {} to 4096", ATTR_SIZE_VER0 + 16),
        ));
    }
    // Bounds-check the whole section first: the count below cannot exceed what the file holds.
    slice_at(file, header.attrs.offset, header.attrs.size, "attrs section")?;
    if !header.attrs.size.is_multiple_of(entry) {
        return Err(Error::malformed(
            header.attrs.offset,
            "attrs section",
            format!("size {} is not a multiple of the entry size {entry}", header.attrs.size),
        ));
    }
    let count = header.attrs.size / entry;
    let mut attrs = Vec::with_capacity(count as usize);
    for i in 0..count {
        let at = header.attrs.offset + i * entry;
        let mut attr = Attr::parse(file, at, entry - 16, header.endian)?;
        let ids_at = at + entry - 16;
        let mut r = Reader::new(slice_at(file, ids_at, 16, "attr ids section")?, ids_at, header.endian);
        let ids = Section {
            offset: r.u64("attr ids offset")?,
            size: r.u64("attr ids size")?,
        };
        let bytes = slice_at(file, ids.offset, ids.size, "attr ids")?;
        if !ids.size.is_multiple_of(8) {
            return Err(Error::malformed(
                ids_at,
                "attr ids section",
                format!("size {} is not a multiple of 8", ids.size),
            ));
        }
        let mut r = Reader::new(bytes, ids.offset, header.endian);
        attr.ids = (0..ids.size / 8).map(|_| r.u64("attr id")).collect::<Result<_>>()?;
        attrs.push(attr);
    }
    Ok(attrs)
}

/// A pipe-mode HEADER_ATTR record's body (at file offset `at`): the attribute, then its ids.
pub(crate) fn parse_pipe_attr(body: &[u8], at: u64, endian: Endian) -> Result<Attr> {
    let mut r = Reader::new(body, at, endian);
    r.u32("HEADER_ATTR attr type")?;
    let size = u64::from(r.u32("HEADER_ATTR attr size")?);
    let len = body.len() as u64;
    if !(ATTR_SIZE_VER0..=len).contains(&size) {
        return Err(Error::malformed(
            at + 4,
            "HEADER_ATTR attr size",
            format!("{size}, expected {ATTR_SIZE_VER0} to {len} (the record body)"),
        ));
    }
    let attr_bytes = &body[..size as usize];
    let mut attr = Attr::parse_bytes(attr_bytes, at, endian)?;
    let ids = &body[size as usize..];
    let mut r = Reader::new(ids, at + size, endian);
    attr.ids = (0..ids.len() / 8)
        .map(|_| r.u64("HEADER_ATTR id"))
        .collect::<Result<_>>()?;
    Ok(attr)
}

/// Which attribute a record belongs to, found from its event id.
#[derive(Debug, Clone, Default)]
pub(crate) struct AttrIndex {
    by_id: HashMap<u64, usize>,
    /// `(sample: from start, non-sample: from end)` id positions when records must be told apart.
    id_pos: Option<(Option<u8>, Option<u8>)>,
}

impl AttrIndex {
    pub(crate) fn new(attrs: &[Attr]) -> Self {
        if attrs.len() <= 1 {
            return AttrIndex::default();
        }
        let by_id = attrs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.ids.iter().map(move |&id| (id, i)))
            .collect();
        let p = attrs[0].parse_info.id_parse_info;
        AttrIndex {
            by_id,
            id_pos: Some((
                p.sample_record_id_offset_from_start,
                p.nonsample_record_id_offset_from_end,
            )),
        }
    }

    /// The attribute index for a record body.
    pub(crate) fn find(&self, body: &[u8], is_sample: bool, endian: Endian) -> usize {
        let Some((from_start, from_end)) = self.id_pos else {
            return 0;
        };
        let pos = if is_sample {
            from_start.map(usize::from)
        } else {
            from_end.and_then(|e| body.len().checked_sub(usize::from(e)))
        };
        let id = pos
            .and_then(|p| body.get(p..p + 8))
            .map(|b| endian.u64(b.try_into().unwrap_or([0; 8])));
        id.and_then(|id| self.by_id.get(&id).copied()).unwrap_or(0)
    }
}
