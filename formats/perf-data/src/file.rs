//! A perf.data file over borrowed bytes, and a memory-mapped file to get them from.

use std::path::Path;

use crate::bytes::{Reader, slice_at};
use crate::error::{Error, Result, Warning};
use crate::features::{self, AuxtraceIndexEntry, BuildIdEntry, EventDesc, SimpleperfFile, feature};
use crate::header::{Attr, FileHeader, Section, parse_attrs, parse_pipe_attr};
use crate::record::{Records, kind};

/// A perf.data file mapped into memory. Records and AUX payloads borrow from it.
#[derive(Debug)]
pub struct MappedFile {
    bytes: Bytes,
}

/// A recording's bytes: a file mapped, or bytes read from a stream.
#[derive(Debug)]
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl MappedFile {
    /// Maps `path` read-only: a file, or perf's directory output (`perf record --kcore`
    /// writes `perf.data/` holding `data` and `kcore_dir/`), whose `data` is mapped.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let inside = path.join("data");
        let path = if path.is_dir() { inside.as_path() } else { path };
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        // SAFETY: the map is read-only; like any reader of perf.data we assume the file is not
        // truncated or rewritten while it is mapped (a recording that is finished).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Ok(MappedFile {
            bytes: Bytes::Mapped(map),
        })
    }

    /// Bytes read from elsewhere (standard input, a pipe).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        MappedFile {
            bytes: Bytes::Owned(bytes),
        }
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    /// Says that the `len` bytes at `offset` will not be read again soon: the pages of a
    /// mapped file that hold them leave the process's resident memory (the system's file
    /// cache keeps them, and reading them again brings them back), so that reading a large
    /// recording once from end to end keeps only what is being read. Nothing for bytes read
    /// from a stream, or where the system declines.
    pub fn done_with(&self, offset: u64, len: u64) {
        let Bytes::Mapped(m) = &self.bytes else {
            return;
        };
        let (Ok(at), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else {
            return;
        };
        if len == 0 || at.checked_add(len).is_none_or(|end| end > m.len()) {
            return;
        }
        #[cfg(unix)]
        {
            // SAFETY: the map is read-only and of a file: pages let go are read from the file
            // again when next touched, with the same bytes (the file is not rewritten while
            // mapped, as `open` assumes); no byte of the map is lost or changed.
            let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, len) };
        }
        #[cfg(not(unix))]
        let _ = (m, at, len);
    }
}

/// One feature section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSection {
    /// The feature number (`HEADER_*`, or simpleperf's from 128).
    pub feature: u32,
    /// Where its data is.
    pub section: Section,
}

/// A parsed file header with its attributes and feature table; records are read on demand.
#[derive(Debug, Clone)]
pub struct PerfFile<'a> {
    /// The whole file.
    pub bytes: &'a [u8],
    /// The header.
    pub header: FileHeader,
    /// The attributes with their ids.
    pub attrs: Vec<Attr>,
    /// The feature sections that are inside the file.
    pub features: Vec<FeatureSection>,
    /// The data section as clamped to the file.
    pub data: Section,
    /// Problems met while reading the header and tables that did not stop it.
    pub warnings: Vec<Warning>,
    /// Pipe mode: the HEADER_BUILD_ID records (each a build-id entry, header included).
    pub pipe_build_ids: Vec<Section>,
}

impl<'a> PerfFile<'a> {
    /// Reads the header, the attributes and the feature table of `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let header = FileHeader::parse(bytes)?;
        if header.pipe {
            return Self::parse_pipe(bytes, header);
        }
        let attrs = parse_attrs(bytes, &header)?;
        let mut warnings = Vec::new();
        let len = bytes.len() as u64;
        let mut data = header.data;
        if data.offset > len {
            warnings.push(Warning {
                offset: 40,
                message: format!(
                    "data section offset {:#x} is past the end of the file ({len} bytes)",
                    data.offset
                ),
            });
            data = Section { offset: len, size: 0 };
        } else if data.end() > len || data.offset.checked_add(data.size).is_none() {
            warnings.push(Warning {
                offset: 48,
                message: format!(
                    "data section of {} bytes at {:#x} runs past the end of the file ({len} bytes): reading what is there",
                    data.size, data.offset
                ),
            });
            data.size = len - data.offset;
        }
        let mut features = Vec::new();
        let ids: Vec<u32> = header.feature_ids().collect();
        let table_at = header.data.end();
        match slice_at(bytes, table_at, 16 * ids.len() as u64, "feature section table") {
            Err(e) if !ids.is_empty() => warnings.push(e.into()),
            Err(_) => {}
            Ok(table) => {
                let mut r = Reader::new(table, table_at, header.endian);
                for feature in ids {
                    let at = r.offset();
                    let section = Section {
                        offset: r.u64("feature offset")?,
                        size: r.u64("feature size")?,
                    };
                    match slice_at(bytes, section.offset, section.size, "feature section") {
                        Ok(_) => features.push(FeatureSection { feature, section }),
                        Err(e) => warnings.push(Warning {
                            offset: at,
                            message: format!("feature {feature} skipped: {e}"),
                        }),
                    }
                }
            }
        }
        Ok(PerfFile {
            bytes,
            header,
            attrs,
            features,
            data,
            warnings,
            pipe_build_ids: Vec::new(),
        })
    }

    /// Pipe mode: one pass over the records gathers the attributes, the feature sections and
    /// the build ids that file mode keeps in its header's sections. A framing error ends the
    /// pass quietly: [`Self::records`] meets it again and reports it.
    fn parse_pipe(bytes: &'a [u8], mut header: FileHeader) -> Result<Self> {
        let mut attrs: Vec<Attr> = Vec::new();
        let mut features = Vec::new();
        let mut pipe_build_ids = Vec::new();
        let mut warnings = Vec::new();
        let data = header.data;
        let mut frames = Records::new(bytes, data.offset, data.end(), header.endian, &[]);
        while frames.position() < data.end() {
            let Ok((at, k, _, body, _)) = frames.frame() else {
                break;
            };
            match k {
                kind::HEADER_ATTR => attrs.push(parse_pipe_attr(body, at + 8, header.endian)?),
                kind::HEADER_FEATURE => {
                    let mut r = Reader::new(body, at + 8, header.endian);
                    let id = match r.u64("HEADER_FEATURE feature number") {
                        Ok(id) => id,
                        Err(e) => {
                            warnings.push(e.into());
                            continue;
                        }
                    };
                    if id >= 256 {
                        warnings.push(Warning {
                            offset: at + 8,
                            message: format!("HEADER_FEATURE record for feature {id} (expected below 256) skipped"),
                        });
                        continue;
                    }
                    let feature = id as u32;
                    header.features[feature as usize / 64] |= 1 << (feature % 64);
                    features.push(FeatureSection {
                        feature,
                        section: Section {
                            offset: at + 16,
                            size: body.len() as u64 - 8,
                        },
                    });
                }
                kind::HEADER_BUILD_ID => pipe_build_ids.push(Section {
                    offset: at,
                    size: body.len() as u64 + 8,
                }),
                _ => {}
            }
        }
        Ok(PerfFile {
            bytes,
            header,
            attrs,
            features,
            data,
            warnings,
            pipe_build_ids,
        })
    }

    /// The records of the data section, in file order.
    pub fn records(&self) -> Records<'a> {
        Records::new(
            self.bytes,
            self.data.offset,
            self.data.end(),
            self.header.endian,
            &self.attrs,
        )
    }

    /// The bytes of feature section `feature`, with their file offset.
    pub fn feature(&self, feature: u32) -> Option<(&'a [u8], u64)> {
        let f = self.features.iter().find(|f| f.feature == feature)?;
        let s = f.section;
        Some((&self.bytes[s.offset as usize..s.end() as usize], s.offset))
    }

    fn reader(&self) -> Reader<'a> {
        Reader::new(&[], 0, self.header.endian)
    }

    fn with<T>(&self, id: u32, f: impl FnOnce(&'a [u8], u64, Reader<'a>) -> Result<T>) -> Result<Option<T>> {
        match self.feature(id) {
            None => Ok(None),
            Some((b, at)) => f(b, at, self.reader()).map(Some),
        }
    }

    /// The build-id feature (empty when absent).
    pub fn build_ids(&self) -> Result<Vec<BuildIdEntry>> {
        if self.header.pipe {
            let mut out = Vec::new();
            for s in &self.pipe_build_ids {
                let b = &self.bytes[s.offset as usize..s.end() as usize];
                out.extend(features::parse_build_ids(b, s.offset, self.reader())?);
            }
            return Ok(out);
        }
        Ok(self
            .with(feature::BUILD_ID, features::parse_build_ids)?
            .unwrap_or_default())
    }

    /// The auxtrace index (empty when absent).
    pub fn auxtrace_index(&self) -> Result<Vec<AuxtraceIndexEntry>> {
        Ok(self
            .with(feature::AUXTRACE, features::parse_auxtrace_index)?
            .unwrap_or_default())
    }

    /// A string feature: [`feature::HOSTNAME`], `OSRELEASE`, `VERSION`, `ARCH`, `CPUDESC`, `CPUID`.
    pub fn feature_string(&self, id: u32) -> Result<Option<String>> {
        self.with(id, features::parse_string)
    }

    /// HEADER_CMDLINE.
    pub fn cmdline(&self) -> Result<Option<Vec<String>>> {
        self.with(feature::CMDLINE, features::parse_string_list)
    }

    /// HEADER_NRCPUS: `(available, online)`.
    pub fn nr_cpus(&self) -> Result<Option<(u32, u32)>> {
        self.with(feature::NRCPUS, features::parse_nr_cpus)
    }

    /// HEADER_PMU_MAPPINGS: `(type, name)` pairs.
    pub fn pmu_mappings(&self) -> Result<Option<Vec<(u32, String)>>> {
        self.with(feature::PMU_MAPPINGS, features::parse_pmu_mappings)
    }

    /// HEADER_EVENT_DESC.
    pub fn event_desc(&self) -> Result<Option<Vec<EventDesc>>> {
        self.with(feature::EVENT_DESC, features::parse_event_desc)
    }

    /// simpleperf's meta info (key/value pairs; empty when absent).
    pub fn simpleperf_meta_info(&self) -> Vec<(String, String)> {
        self.feature(feature::SIMPLEPERF_META_INFO)
            .map(|(b, _)| features::parse_meta_info(b))
            .unwrap_or_default()
    }

    /// simpleperf's file table (FILE2, else the older FILE; empty when absent).
    pub fn simpleperf_files(&self) -> Result<Vec<SimpleperfFile>> {
        if let Some(v) = self.with(feature::SIMPLEPERF_FILE2, |b, at, r| {
            features::parse_simpleperf_files(b, at, r, true)
        })? {
            return Ok(v);
        }
        Ok(self
            .with(feature::SIMPLEPERF_FILE, |b, at, r| {
                features::parse_simpleperf_files(b, at, r, false)
            })?
            .unwrap_or_default())
    }

    /// Whether simpleperf wrote the file (it has simpleperf's meta-info feature).
    pub fn is_simpleperf(&self) -> bool {
        self.header.has_feature(feature::SIMPLEPERF_META_INFO)
    }
}
