//! Writes a perf.data file (file mode, little-endian) for a CoreSight recording, laid out as
//! `perf record -e cs_etm//` lays it out: one cs_etm attribute whose records carry sample ids,
//! the data section, and the feature sections perf needs to decode the trace.

use crate::cs_etm::CsEtmInfo;
use crate::features::feature;
use crate::header::{ATTR_FLAG_SAMPLE_ID_ALL, FILE_HEADER_SIZE, PIPE_HEADER_SIZE};
use crate::record::{AUXTRACE_CS_ETM, BuildId, kind, misc};

/// `perf_event_attr` size written (`PERF_ATTR_SIZE_VER7`, as simpleperf writes).
const ATTR_SIZE: usize = 128;
/// `sample_type` written by default: IP | TID | TIME | CPU | IDENTIFIER (what `perf record -e
/// cs_etm//u -a` sets); [`WriterOptions::sample_time`] and [`WriterOptions::sample_cpu`] drop TIME
/// and CPU, as a per-thread `perf record -e cs_etm//u -- PROG` does.
pub const WRITER_SAMPLE_TYPE: u64 = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_IDENTIFIER;
const SAMPLE_IP: u64 = 0x1;
const SAMPLE_TID: u64 = 0x2;
const SAMPLE_TIME: u64 = 0x4;
const SAMPLE_CPU: u64 = 0x80;
const SAMPLE_IDENTIFIER: u64 = 0x1_0000;
/// perf aligns strings in feature sections to this.
const NAME_ALIGN: usize = 64;

/// The feature sections written, in the order of their bits.
const FEATURES: [u32; 12] = [
    feature::BUILD_ID,
    feature::HOSTNAME,
    feature::OSRELEASE,
    feature::VERSION,
    feature::ARCH,
    feature::NRCPUS,
    feature::CPUDESC,
    feature::CPUID,
    feature::CMDLINE,
    feature::EVENT_DESC,
    feature::PMU_MAPPINGS,
    feature::AUXTRACE,
];

/// What to write in the header, attribute and feature sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterOptions {
    /// The cs_etm PMU's dynamic type number (`/sys/bus/event_source/devices/cs_etm/type`).
    pub pmu_type: u32,
    /// The CPUs traced; one event id is made for each.
    pub cpus: Vec<u32>,
    /// The attribute's config (cs_etm format bits: context ID, timestamps, ...).
    pub config: u64,
    /// `aux_watermark`.
    pub aux_watermark: u32,
    /// Trace user space only (exclude_kernel and exclude_hv).
    pub user_only: bool,
    /// HEADER_ARCH.
    pub arch: String,
    /// HEADER_CPUDESC.
    pub cpudesc: String,
    /// HEADER_CPUID (perf prints the MIDR as `0x%016lx` on Arm64).
    pub cpuid: String,
    /// HEADER_NRCPUS: CPUs available (online is the number of traced CPUs, at least).
    pub nr_cpus: u32,
    /// PERF_SAMPLE_TIME in `sample_type` (and a time in every record's sample id). Linux perf
    /// 6.1 decodes a file without it "timeless": buffers in file order, no trace timestamps
    /// needed, but only one trace ID's packets per buffer.
    pub sample_time: bool,
    /// PERF_SAMPLE_CPU in `sample_type` (and a CPU in every record's sample id): per-CPU
    /// recordings have it, and perf matches AUX records to AUXTRACE buffers by it.
    pub sample_cpu: bool,
    /// The event's name in HEADER_EVENT_DESC.
    pub event_name: String,
    /// HEADER_HOSTNAME.
    pub hostname: String,
    /// HEADER_OSRELEASE.
    pub osrelease: String,
    /// HEADER_VERSION (the perf version that "recorded").
    pub perf_version: String,
    /// HEADER_CMDLINE, one string an argument.
    pub cmdline: Vec<String>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            pmu_type: 8,
            cpus: vec![0],
            config: 0,
            aux_watermark: 0x8000,
            user_only: true,
            arch: "aarch64".into(),
            cpudesc: "ARM Cortex-A76".into(),
            cpuid: "0x00000000414fd0b1".into(),
            nr_cpus: 1,
            sample_time: true,
            sample_cpu: true,
            event_name: "cs_etm//".into(),
            hostname: "coresight-decode".into(),
            osrelease: "6.1.0-coresight-decode".into(),
            perf_version: "6.1".into(),
            cmdline: vec!["perf".into(), "record".into(), "-e".into(), "cs_etm//u".into()],
        }
    }
}

impl WriterOptions {
    /// The attribute's `sample_type`.
    pub fn sample_type(&self) -> u64 {
        let mut t = WRITER_SAMPLE_TYPE;
        if !self.sample_time {
            t &= !SAMPLE_TIME;
        }
        if !self.sample_cpu {
            t &= !SAMPLE_CPU;
        }
        t
    }
}

/// The sample-id fields written at the end of every non-sample record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleFields {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Time.
    pub time: u64,
    /// CPU (also picks the event id).
    pub cpu: u32,
}

/// Builds a perf.data file in memory.
#[derive(Debug, Clone)]
pub struct Writer {
    opts: WriterOptions,
    ids: Vec<u64>,
    data_offset: u64,
    data: Vec<u8>,
    index: Vec<(u64, u64)>,
    build_ids: Vec<(i32, String, BuildId)>,
    /// simpleperf's FILE2 entries of kernel modules: (path, min_vaddr, its memory offset).
    simpleperf_modules: Vec<(String, u64, u64)>,
}

fn pad_to(v: &mut Vec<u8>, align: usize) {
    while !v.len().is_multiple_of(align) {
        v.push(0);
    }
}

fn put_u16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put_u64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// perf's string: `u32` padded length, then the NUL-padded bytes.
fn put_string(v: &mut Vec<u8>, s: &str) {
    let len = (s.len() + 1).next_multiple_of(NAME_ALIGN);
    put_u32(v, len as u32);
    let start = v.len();
    v.extend_from_slice(s.as_bytes());
    v.resize(start + len, 0);
}

impl Writer {
    /// A writer for `opts`.
    pub fn new(opts: WriterOptions) -> Self {
        let ids: Vec<u64> = (0..opts.cpus.len() as u64).map(|i| 100 + i).collect();
        let data_offset = FILE_HEADER_SIZE + 8 * ids.len() as u64 + (ATTR_SIZE + 16) as u64;
        Writer {
            opts,
            ids,
            data_offset,
            data: Vec::new(),
            index: Vec::new(),
            build_ids: Vec::new(),
            simpleperf_modules: Vec::new(),
        }
    }

    /// The event id used for records of `cpu`.
    pub fn event_id(&self, cpu: u32) -> u64 {
        let i = self.opts.cpus.iter().position(|&c| c == cpu).unwrap_or(0);
        self.ids.get(i).copied().unwrap_or(0)
    }

    fn attr_bytes(&self) -> Vec<u8> {
        let o = &self.opts;
        let mut flags: u64 = (1 << 1) | (1 << 8) | (1 << 9) | (1 << 13) | ATTR_FLAG_SAMPLE_ID_ALL | (1 << 20);
        flags |= (1 << 23) | (1 << 24);
        if o.user_only {
            flags |= (1 << 5) | (1 << 6);
        }
        let mut v = Vec::with_capacity(ATTR_SIZE);
        put_u32(&mut v, o.pmu_type);
        put_u32(&mut v, ATTR_SIZE as u32);
        put_u64(&mut v, o.config);
        put_u64(&mut v, 1); // sample_period
        put_u64(&mut v, o.sample_type());
        put_u64(&mut v, 0); // read_format
        put_u64(&mut v, flags);
        v.resize(104, 0);
        put_u32(&mut v, o.aux_watermark);
        v.resize(ATTR_SIZE, 0);
        v
    }

    /// Starts a kernel record; returns where it starts so that [`Self::end`] can fix its size.
    fn begin(&mut self, record_kind: u32, misc_bits: u16) -> usize {
        let at = self.data.len();
        put_u32(&mut self.data, record_kind);
        put_u16(&mut self.data, misc_bits);
        put_u16(&mut self.data, 0);
        at
    }

    fn end(&mut self, at: usize, s: Option<SampleFields>) {
        if let Some(s) = s {
            // The sample id's fields in perf's order: TID, TIME, CPU, IDENTIFIER.
            let id = self.event_id(s.cpu);
            put_u32(&mut self.data, s.pid);
            put_u32(&mut self.data, s.tid);
            if self.opts.sample_time {
                put_u64(&mut self.data, s.time);
            }
            if self.opts.sample_cpu {
                put_u32(&mut self.data, s.cpu);
                put_u32(&mut self.data, 0);
            }
            put_u64(&mut self.data, id);
        }
        pad_to(&mut self.data, 8);
        let size = (self.data.len() - at) as u16;
        self.data[at + 6..at + 8].copy_from_slice(&size.to_le_bytes());
    }

    /// The cs_etm AUXTRACE_INFO (written in the version-1 layout).
    pub fn auxtrace_info(&mut self, info: &CsEtmInfo) {
        let at = self.begin(kind::AUXTRACE_INFO, 0);
        put_u32(&mut self.data, AUXTRACE_CS_ETM);
        put_u32(&mut self.data, 0);
        for w in info.to_words() {
            put_u64(&mut self.data, w);
        }
        self.end(at, None);
    }

    /// COMM.
    pub fn comm(&mut self, pid: u32, tid: u32, name: &str, exec: bool, s: SampleFields) {
        let at = self.begin(kind::COMM, if exec { misc::COMM_EXEC } else { 0 });
        put_u32(&mut self.data, pid);
        put_u32(&mut self.data, tid);
        self.data.extend_from_slice(name.as_bytes());
        self.data.push(0);
        pad_to(&mut self.data, 8);
        self.end(at, Some(s));
    }

    /// MMAP2 of an executable mapping; with a build id, in the build-id form.
    #[allow(clippy::too_many_arguments)]
    pub fn mmap2(
        &mut self,
        pid: u32,
        tid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        filename: &str,
        build_id: Option<BuildId>,
        s: SampleFields,
    ) {
        let m = misc::USER | if build_id.is_some() { misc::MMAP_BUILD_ID } else { 0 };
        let at = self.begin(kind::MMAP2, m);
        put_u32(&mut self.data, pid);
        put_u32(&mut self.data, tid);
        put_u64(&mut self.data, start);
        put_u64(&mut self.data, len);
        put_u64(&mut self.data, pgoff);
        match build_id {
            Some(b) => {
                let bytes = b.as_bytes();
                self.data.push(bytes.len() as u8);
                self.data.extend_from_slice(&[0; 3]);
                let mut id = [0u8; 20];
                id[..bytes.len()].copy_from_slice(bytes);
                self.data.extend_from_slice(&id);
            }
            None => self.data.extend_from_slice(&[0; 24]),
        }
        put_u32(&mut self.data, 5); // PROT_READ | PROT_EXEC
        put_u32(&mut self.data, 2); // MAP_PRIVATE
        self.data.extend_from_slice(filename.as_bytes());
        self.data.push(0);
        pad_to(&mut self.data, 8);
        self.end(at, Some(s));
    }

    /// ITRACE_START.
    pub fn itrace_start(&mut self, pid: u32, tid: u32, s: SampleFields) {
        let at = self.begin(kind::ITRACE_START, 0);
        put_u32(&mut self.data, pid);
        put_u32(&mut self.data, tid);
        self.end(at, Some(s));
    }

    /// AUX: `aux_size` new bytes at `aux_offset` of `s.cpu`'s AUX stream.
    pub fn aux(&mut self, aux_offset: u64, aux_size: u64, flags: u64, s: SampleFields) {
        let at = self.begin(kind::AUX, 0);
        put_u64(&mut self.data, aux_offset);
        put_u64(&mut self.data, aux_size);
        put_u64(&mut self.data, flags);
        self.end(at, Some(s));
    }

    /// AUXTRACE with `payload` following it; also indexed in the auxtrace feature.
    pub fn auxtrace(&mut self, aux_offset: u64, reference: u64, idx: u32, tid: u32, cpu: u32, payload: &[u8]) {
        let file_offset = self.data_offset + self.data.len() as u64;
        let at = self.begin(kind::AUXTRACE, 0);
        put_u64(&mut self.data, payload.len() as u64);
        put_u64(&mut self.data, aux_offset);
        put_u64(&mut self.data, reference);
        put_u32(&mut self.data, idx);
        put_u32(&mut self.data, tid);
        put_u32(&mut self.data, cpu);
        put_u32(&mut self.data, 0);
        self.end(at, None);
        self.data.extend_from_slice(payload);
        // The index gives the record's size without its payload: perf checks it against the
        // header's size and refuses the AUXTRACE_INFO (EINVAL) when they differ.
        self.index.push((file_offset, 48));
    }

    /// FINISHED_ROUND.
    pub fn finished_round(&mut self) {
        let at = self.begin(kind::FINISHED_ROUND, 0);
        self.end(at, None);
    }

    /// An entry of the build-id feature.
    pub fn build_id(&mut self, pid: i32, filename: &str, build_id: BuildId) {
        self.build_ids.push((pid, filename.to_string(), build_id));
    }

    /// Describes a kernel module as simpleperf's FILE2 feature does: the file's (text)
    /// address `min_vaddr` was `offset` bytes from the module's start in memory
    /// (`memory_offset_of_min_vaddr`).
    pub fn simpleperf_module(&mut self, path: &str, min_vaddr: u64, offset: u64) {
        self.simpleperf_modules.push((path.to_string(), min_vaddr, offset));
    }

    fn feature_bytes(&self, f: u32) -> Vec<u8> {
        let o = &self.opts;
        let mut v = Vec::new();
        match f {
            feature::BUILD_ID => {
                for (pid, name, id) in &self.build_ids {
                    let name_len = (name.len() + 1).next_multiple_of(NAME_ALIGN);
                    put_u32(&mut v, kind::HEADER_BUILD_ID);
                    let cpumode = if *pid == -1 { 1 } else { misc::USER };
                    put_u16(&mut v, cpumode | misc::BUILD_ID_SIZE);
                    put_u16(&mut v, (36 + name_len) as u16);
                    put_u32(&mut v, *pid as u32);
                    let mut raw = [0u8; 20];
                    raw[..id.as_bytes().len()].copy_from_slice(id.as_bytes());
                    v.extend_from_slice(&raw);
                    v.push(id.as_bytes().len() as u8);
                    v.extend_from_slice(&[0; 3]);
                    let start = v.len();
                    v.extend_from_slice(name.as_bytes());
                    v.resize(start + name_len, 0);
                }
            }
            feature::ARCH => put_string(&mut v, &o.arch),
            feature::HOSTNAME => put_string(&mut v, &o.hostname),
            feature::OSRELEASE => put_string(&mut v, &o.osrelease),
            feature::VERSION => put_string(&mut v, &o.perf_version),
            feature::CMDLINE => {
                put_u32(&mut v, o.cmdline.len() as u32);
                for a in &o.cmdline {
                    put_string(&mut v, a);
                }
            }
            feature::NRCPUS => {
                put_u32(&mut v, o.nr_cpus.max(o.cpus.len() as u32));
                put_u32(&mut v, o.nr_cpus.max(o.cpus.len() as u32));
            }
            feature::CPUDESC => put_string(&mut v, &o.cpudesc),
            feature::CPUID => put_string(&mut v, &o.cpuid),
            feature::EVENT_DESC => {
                put_u32(&mut v, 1);
                put_u32(&mut v, ATTR_SIZE as u32);
                v.extend_from_slice(&self.attr_bytes());
                put_u32(&mut v, self.ids.len() as u32);
                put_string(&mut v, &o.event_name);
                for &id in &self.ids {
                    put_u64(&mut v, id);
                }
            }
            feature::PMU_MAPPINGS => {
                put_u32(&mut v, 1);
                put_u32(&mut v, o.pmu_type);
                put_string(&mut v, "cs_etm");
            }
            feature::AUXTRACE => {
                put_u64(&mut v, self.index.len() as u64);
                for &(off, size) in &self.index {
                    put_u64(&mut v, off);
                    put_u64(&mut v, size);
                }
            }
            feature::SIMPLEPERF_FILE2 => {
                use linux_perf_data::prost::Message;
                use linux_perf_data::{SimpleperfFileRecord, SimpleperfKernelModuleInfo, SimpleperfTypeSpecificInfo};
                for (path, min_vaddr, offset) in &self.simpleperf_modules {
                    let m = SimpleperfFileRecord {
                        path: path.clone(),
                        r#type: crate::features::DSO_KERNEL_MODULE,
                        min_vaddr: *min_vaddr,
                        symbol: Vec::new(),
                        type_specific_msg: Some(SimpleperfTypeSpecificInfo::KernelModule(SimpleperfKernelModuleInfo {
                            memory_offset_of_min_vaddr: *offset,
                        })),
                    };
                    let b = m.encode_to_vec();
                    put_u32(&mut v, b.len() as u32);
                    v.extend_from_slice(&b);
                }
            }
            _ => {}
        }
        v
    }

    /// The feature sections written: [`FEATURES`], and simpleperf's FILE2 when module
    /// placements were given.
    fn features(&self) -> Vec<u32> {
        let mut f = FEATURES.to_vec();
        if !self.simpleperf_modules.is_empty() {
            f.push(feature::SIMPLEPERF_FILE2);
        }
        f
    }

    /// The same recording in pipe mode, as `perf record -o -` writes it: the 16-byte header,
    /// the attribute as a HEADER_ATTR record, the feature sections as HEADER_FEATURE records,
    /// the build ids as HEADER_BUILD_ID records, then the records of the data section. There is
    /// no auxtrace index: readers find each AUXTRACE payload right after its record.
    pub fn finish_pipe(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data.len() + 4096);
        out.extend_from_slice(b"PERFILE2");
        put_u64(&mut out, PIPE_HEADER_SIZE);
        let record = |out: &mut Vec<u8>, k: u32, body: &[u8]| {
            let at = out.len();
            put_u32(out, k);
            put_u16(out, 0);
            put_u16(out, 0);
            out.extend_from_slice(body);
            pad_to(out, 8);
            let size = (out.len() - at) as u16;
            out[at + 6..at + 8].copy_from_slice(&size.to_le_bytes());
        };
        // The attribute first: perf names events from EVENT_DESC only when the attribute
        // (matched by id) is already known.
        let mut body = self.attr_bytes();
        for &id in &self.ids {
            put_u64(&mut body, id);
        }
        record(&mut out, kind::HEADER_ATTR, &body);
        for f in self.features() {
            if f == feature::BUILD_ID || f == feature::AUXTRACE {
                continue;
            }
            let mut body = Vec::new();
            put_u64(&mut body, u64::from(f));
            body.extend_from_slice(&self.feature_bytes(f));
            record(&mut out, kind::HEADER_FEATURE, &body);
        }
        // The build-id feature's entries are whole HEADER_BUILD_ID records already.
        out.extend_from_slice(&self.feature_bytes(feature::BUILD_ID));
        out.extend_from_slice(&self.data);
        out
    }

    /// The file.
    pub fn finish(self) -> Vec<u8> {
        let features = self.features();
        let ids_offset = FILE_HEADER_SIZE;
        let attrs_offset = ids_offset + 8 * self.ids.len() as u64;
        let data_size = self.data.len() as u64;
        let mut out = Vec::with_capacity(self.data_offset as usize + self.data.len() + 4096);
        out.extend_from_slice(b"PERFILE2");
        put_u64(&mut out, FILE_HEADER_SIZE);
        put_u64(&mut out, (ATTR_SIZE + 16) as u64);
        put_u64(&mut out, attrs_offset);
        put_u64(&mut out, (ATTR_SIZE + 16) as u64);
        put_u64(&mut out, self.data_offset);
        put_u64(&mut out, data_size);
        put_u64(&mut out, 0);
        put_u64(&mut out, 0);
        let mut bitmap = [0u64; 4];
        for &f in &features {
            bitmap[f as usize / 64] |= 1 << (f % 64);
        }
        for w in bitmap {
            put_u64(&mut out, w);
        }
        for &id in &self.ids {
            put_u64(&mut out, id);
        }
        out.extend_from_slice(&self.attr_bytes());
        put_u64(&mut out, ids_offset);
        put_u64(&mut out, 8 * self.ids.len() as u64);
        debug_assert_eq!(out.len() as u64, self.data_offset);
        out.extend_from_slice(&self.data);
        let bodies: Vec<Vec<u8>> = features.iter().map(|&f| self.feature_bytes(f)).collect();
        let mut at = out.len() as u64 + 16 * features.len() as u64;
        for b in &bodies {
            put_u64(&mut out, at);
            put_u64(&mut out, b.len() as u64);
            at += b.len() as u64;
        }
        for b in bodies {
            out.extend_from_slice(&b);
        }
        out
    }
}
