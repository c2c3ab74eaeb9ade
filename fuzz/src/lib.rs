//! Harnesses shared by the fuzz targets. Each takes the fuzzer's bytes,
//! draws a configuration from the head of the input and feeds the rest to
//! the library the way `trc_pkt_lister` does (data, waits answered with
//! flushes, end of trace). Anything may be reported as an error; nothing
//! may panic, hang or grow without bound.
//!
//! Protocol input layout (missing bytes read as zero):
//!
//! | bytes | meaning |
//! |-------|---------|
//! | 0     | flags: bit 0 formatted frames, bit 1 TPIU (FSYNC) stream, bits 2-4 core, bit 5 packets only, bit 6 packet printer, bit 7 waits |
//! | 1     | decoder option bits ([`DecoderOptions`]) |
//! | 2..10 | base address of the memory image (little endian) |
//! | then  | each of the protocol's registers, 4 bytes little endian |
//! | rest  | trace |
//!
//! `seeds.py` writes seeds in this layout from the project's snapshots.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use coresight_decode::arch::ArchProfile;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{CoreConfig, DecodeMode, DecoderOptions, SourceConfig};
use coresight_decode::deformatter::{DeformatterConfig, FrameDeformatter, IdStreamSink};
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{RawFrameKind, TrcDataIn, TrcGenElemIn, TrcRawFrameIn};
use coresight_decode::logger::MsgLogger;
use coresight_decode::memory::{BufferAccessor, CacheConfig, MemAccMapper, MemSpace};
use coresight_decode::shared::shared;
use coresight_decode::tree::{DecodeTree, SourceFormat};

/// The protocols with a fuzz target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Etmv4,
    Ete,
    Ptm,
    Etmv3,
    Stm,
    Itm,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Etmv4 => "ETMV4I",
            Protocol::Ete => "ETE",
            Protocol::Ptm => "PTM",
            Protocol::Etmv3 => "ETMV3",
            Protocol::Stm => "STM",
            Protocol::Itm => "ITM",
        }
    }
    fn device_type(self) -> &'static str {
        match self {
            Protocol::Etmv4 => "ETM4.4",
            Protocol::Ete => "ETE",
            Protocol::Ptm => "PTM1.1",
            Protocol::Etmv3 => "ETM3.5",
            Protocol::Stm => "STM",
            Protocol::Itm => "ITM",
        }
    }
    /// The registers drawn from the input, in order (the seed script uses
    /// the same order).
    pub fn registers(self) -> &'static [&'static str] {
        match self {
            Protocol::Etmv4 => &[
                "TRCCONFIGR",
                "TRCTRACEIDR",
                "TRCIDR0",
                "TRCIDR1",
                "TRCIDR2",
                "TRCIDR8",
                "TRCIDR9",
                "TRCIDR10",
                "TRCIDR11",
                "TRCIDR12",
                "TRCIDR13",
            ],
            Protocol::Ete => &[
                "TRCCONFIGR",
                "TRCTRACEIDR",
                "TRCIDR0",
                "TRCIDR1",
                "TRCIDR2",
                "TRCIDR8",
                "TRCDEVARCH",
            ],
            Protocol::Ptm | Protocol::Etmv3 => &["ETMIDR", "ETMCR", "ETMCCER", "ETMTRACEIDR"],
            Protocol::Stm => &["STMTCSR"],
            Protocol::Itm => &["ITMTCR"],
        }
    }
    fn pe_trace(self) -> bool {
        !matches!(self, Protocol::Stm | Protocol::Itm)
    }
}

/// Cores a PE source can be attached to (flag bits 2-4).
pub const CORES: [&str; 8] = [
    "Cortex-A72",
    "Cortex-A53",
    "Cortex-M33",
    "Cortex-A15",
    "Cortex-A7",
    "Cortex-A520",
    "Cortex-X2",
    "Neoverse-N2",
];

/// A reader over the input that yields zeros once it runs out.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        self.u32() as u64 | (self.u32() as u64) << 32
    }
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }
}

/// The fixed memory image: 4 KiB of instruction-like words (mostly
/// sequential ALU operations with A64, A32 and T32 branches of every kind
/// sprinkled in), the same on every run.
pub fn memory_image() -> Vec<u8> {
    const WORDS: [u32; 16] = [
        0xd503201f, // A64 NOP
        0x91000421, // A64 ADD x1, x1, #1
        0x54000041, // A64 B.NE +8
        0x14000004, // A64 B +16
        0x94000010, // A64 BL +64
        0xd65f03c0, // A64 RET
        0xd61f0020, // A64 BR x1
        0xb4000040, // A64 CBZ x0, +8
        0xe2811001, // A32 ADD r1, r1, #1
        0x1a000002, // A32 BNE +16
        0xeb000004, // A32 BL +24
        0xe12fff1e, // A32 BX lr
        0xd1fee7fe, // T32 B . ; T16 BNE
        0xbf00bf00, // T32 NOP; NOP
        0x4770bf00, // T32 NOP; BX lr
        0xf000f802, // T32 BL +4
    ];
    let mut out = Vec::with_capacity(4096);
    let mut x: u32 = 0x1234_5678;
    for _ in 0..1024 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let w = if x.is_multiple_of(4) {
            WORDS[(x >> 8) as usize % WORDS.len()]
        } else {
            WORDS[(x >> 8) as usize % 2]
        };
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}

/// Element sink: formats each element as the lister would, and answers
/// WAIT now and then when asked to.
struct Sink {
    waits: Arc<AtomicU32>,
    text: String,
}

impl TrcGenElemIn for Sink {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        use std::fmt::Write;
        self.text.clear();
        let _ = write!(self.text, "{elem}");
        let w = self.waits.load(Ordering::Relaxed);
        if w > 0 && w.is_multiple_of(3) {
            self.waits.store(w - 1, Ordering::Relaxed);
            return DatapathResp::Wait;
        }
        self.waits.store(w.saturating_sub(1), Ordering::Relaxed);
        DatapathResp::Cont
    }
}

/// Pushes `data` through `sink`, answering waits with flushes, then ends
/// the trace, as the lister does. Bounded: every round either uses bytes
/// or flushes, and a tree that stops making progress ends the run.
pub fn feed(sink: &mut dyn TrcDataIn, data: &[u8]) {
    let mut idx = 0usize;
    let mut stalls = 0u32;
    while idx < data.len() {
        let (mut r, used) = sink.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..]);
        idx += used;
        let mut flushes = 0;
        while r.is_wait() && flushes < 10_000 {
            r = sink.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            flushes += 1;
        }
        if r.is_fatal() {
            return;
        }
        if used == 0 {
            stalls += 1;
            assert!(stalls < 10_000, "no progress at index {idx}");
        } else {
            stalls = 0;
        }
    }
    let mut r = sink.trace_data_in(DatapathOp::Eot, idx as TrcIndex, &[]).0;
    let mut rounds = 0;
    while r.is_wait() {
        rounds += 1;
        assert!(rounds < 100_000, "end of trace never completes");
        r = sink.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        if r.is_cont() {
            r = sink.trace_data_in(DatapathOp::Eot, idx as TrcIndex, &[]).0;
        }
    }
}

/// One protocol's packet processor and decoder, from raw bytes.
pub fn run_protocol(protocol: Protocol, data: &[u8]) {
    let mut inp = Input::new(data);
    let flags = inp.u8();
    let opts = inp.u8();
    let base = inp.u64();
    let regs: Vec<(String, u64)> = protocol
        .registers()
        .iter()
        .map(|r| (r.to_string(), inp.u32() as u64))
        .collect();
    let trace = inp.rest();

    let format = match flags & 3 {
        0 | 2 => SourceFormat::Single,
        1 => SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        _ => SourceFormat::Formatted(DeformatterConfig::fsync_stream()),
    };
    let mode = if flags & 0x20 != 0 {
        DecodeMode::PacketsOnly
    } else {
        DecodeMode::FullDecode
    };
    let core_name = CORES[(flags >> 2) as usize & 7];
    let mut tree = DecodeTree::new(format, mode);
    tree.set_decoder_options(DecoderOptions {
        aa64_opcode_check: opts & 1 != 0,
        instr_range_limit: if opts & 2 != 0 { 64 } else { 0 },
        src_addr_n: opts & 4 != 0,
        direct_br_cond: opts & 8 != 0,
        strict_br_cond: opts & 16 != 0,
        range_cont: opts & 32 != 0,
        halt_on_error: opts & 64 != 0,
        opencsd_flow: opts & 128 != 0,
        ..DecoderOptions::default()
    });
    let cfg = SourceConfig {
        name: "src_0".into(),
        device_type: protocol.device_type().into(),
        regs,
        core: protocol.pe_trace().then(|| CoreConfig {
            name: "cpu_0".into(),
            core_type: core_name.into(),
            profile: ArchProfile::from_core_name(core_name).unwrap_or_default(),
        }),
    };
    let Ok(id) = tree.create_decoder(protocol.name(), &cfg) else {
        return;
    };
    if let Some(mapper) = tree.mem_mapper() {
        let acc = BufferAccessor::new(base, memory_image(), MemSpace::ANY);
        if let Ok(acc) = acc {
            let _ = mapper.borrow_mut().add_accessor(Box::new(acc));
        }
    }
    let waits = Arc::new(AtomicU32::new(if flags & 0x80 != 0 { 50 } else { 0 }));
    tree.set_gen_elem_out(Box::new(Sink {
        waits: waits.clone(),
        text: String::new(),
    }));
    if flags & 0x40 != 0 || mode == DecodeMode::PacketsOnly {
        let slot = if matches!(format, SourceFormat::Single) { 0 } else { id };
        let _ = tree.attach_packet_printer(
            slot,
            shared(MsgLogger::none()),
            flags & 0x40 != 0,
            if flags & 0x80 != 0 { 7 } else { 0 },
        );
    }
    feed(&mut tree, trace);
    // A second session after a reset, as -multi_session does.
    if opts & 0x80 != 0 {
        tree.trace_data_in(DatapathOp::Reset, 0, &[]);
        feed(&mut tree, trace);
    }
}

/// Per-ID consumer for the deformatter target: attached IDs from a mask
/// in the input, WAIT answered now and then.
struct IdSink {
    attached: u128,
    calls: u32,
    wait_every: u32,
    /// Answer to an empty block: OpenCSD's fatal error, or ignore it.
    empty_fatal: bool,
}

impl IdStreamSink for IdSink {
    fn is_attached(&self, id: u8) -> bool {
        id < 128 && self.attached >> id & 1 != 0
    }
    fn id_data_in(&mut self, _id: u8, _index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        self.calls += 1;
        if self.wait_every != 0 && self.calls.is_multiple_of(self.wait_every) {
            // A wait still takes something, as a real consumer does.
            return (DatapathResp::Wait, data.len().div_ceil(2));
        }
        (DatapathResp::Cont, data.len())
    }
    fn all_ids_op(&mut self, _op: DatapathOp, _index: TrcIndex) -> DatapathResp {
        DatapathResp::Cont
    }
    fn empty_block(&mut self, _id: u8, _index: TrcIndex) -> DatapathResp {
        if self.empty_fatal {
            DatapathResp::FatalInvalidParam
        } else {
            DatapathResp::Cont
        }
    }
}

/// Raw frame monitor that looks at everything it is shown.
struct RawMon(u64);

impl TrcRawFrameIn for RawMon {
    fn trace_raw_frame_in(
        &mut self,
        _op: DatapathOp,
        index: TrcIndex,
        _kind: RawFrameKind,
        data: &[u8],
        trace_id: Option<u8>,
    ) {
        self.0 = self
            .0
            .wrapping_add(index ^ data.len() as u64 ^ trace_id.unwrap_or(0xff) as u64);
    }
}

struct DeformatterIn<'a> {
    d: &'a mut FrameDeformatter,
    sink: &'a mut IdSink,
}

impl TrcDataIn for DeformatterIn<'_> {
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        self.d.trace_data_in(op, index, data, self.sink)
    }
}

/// The frame deformatter: byte 0 is the configuration (bits 0-3: memory
/// aligned, FSYNCs, HSYNCs, reset on 4 FSYNCs) and how often the consumer
/// waits (bits 4-7); byte 1 asks for raw packed (bit 0) and unpacked
/// (bit 1) frame output and makes empty blocks fatal as in OpenCSD
/// (bit 2); the next 16 bytes are the attached IDs (a bit mask); frames
/// follow.
pub fn run_deformatter(data: &[u8]) {
    let mut inp = Input::new(data);
    let flags = inp.u8();
    let more = inp.u8();
    let attached = inp.u64() as u128 | (inp.u64() as u128) << 64;
    let cfg = DeformatterConfig {
        mem_aligned: flags & 1 != 0,
        fsyncs: flags & 2 != 0,
        hsyncs: flags & 4 != 0,
        reset_on_4x_fsync: flags & 8 != 0,
        raw_packed: more & 1 != 0,
        raw_unpacked: more & 2 != 0,
    };
    if cfg.validate().is_err() {
        return;
    }
    let mut d = FrameDeformatter::new(cfg);
    if more & 3 != 0 {
        d.set_raw_monitor(Some(Box::new(RawMon(0))));
    }
    let mut sink = IdSink {
        attached,
        calls: 0,
        wait_every: (flags >> 4) as u32,
        empty_fatal: more & 4 != 0,
    };
    feed(
        &mut DeformatterIn {
            d: &mut d,
            sink: &mut sink,
        },
        inp.rest(),
    );
}

fn scratch_dir(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("csd-fuzz-{kind}-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// The snapshot loader. The input holds files, each `name` 0x01 `text`
/// 0x00; the first is written as `snapshot.ini` whatever its name. Names
/// are reduced to a plain file name inside a scratch directory.
pub fn run_snapshot(data: &[u8]) {
    let dir = scratch_dir("snapshot");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    for (n, part) in data.split(|&b| b == 0).take(16).enumerate() {
        let (name, text) = match part.iter().position(|&b| b == 1) {
            Some(p) => (&part[..p], &part[p + 1..]),
            None => (&b""[..], part),
        };
        let name: String = String::from_utf8_lossy(name)
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .collect();
        let name = if n == 0 { "snapshot.ini".to_string() } else { name };
        if name.is_empty() || name == "." || name == ".." {
            continue;
        }
        let _ = std::fs::write(dir.join(&name), text);
    }
    let Ok(ss) = coresight_decode::snapshot::Snapshot::load(&dir) else {
        return;
    };
    for name in ss.buffer_names() {
        if let Ok(mut tree) = ss.build_tree(name, DecodeMode::FullDecode, |_| {}) {
            let mut s = String::new();
            tree.describe_mapped_ranges(&mut s);
            tree.trace_data_in(DatapathOp::Eot, 0, &[]);
        }
    }
}

/// ELF memory images: the input is mapped as an ELF file, then read back
/// at the addresses its program headers name and around them.
pub fn run_elf(data: &[u8]) {
    let path = scratch_dir("elf").join("image.elf");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let mut m = MemAccMapper::new(CacheConfig::default());
    if m.add_elf_file(&path, MemSpace::ANY).is_err() {
        return;
    }
    let mut s = String::new();
    m.describe(&mut s);
    // Read at both ends of every loadable segment, and across them.
    let mut buf = [0u8; 64];
    let Ok(elf) = goblin::elf::Elf::parse(data) else { return };
    for ph in elf
        .program_headers
        .iter()
        .filter(|p| p.p_type == goblin::elf::program_header::PT_LOAD)
        .take(64)
    {
        for addr in [
            ph.p_vaddr,
            ph.p_vaddr.wrapping_add(ph.p_filesz).wrapping_sub(1),
            ph.p_vaddr.wrapping_add(ph.p_filesz),
            ph.p_vaddr.wrapping_sub(8),
        ] {
            let n = m.read(addr, MemSpace::ANY, &mut buf);
            assert!(n <= buf.len());
        }
    }
}

/// The Tarmac reader on arbitrary text: every line is a record or an
/// error naming its line; reading goes on after an error.
pub fn run_tarmac(data: &[u8]) {
    let mut r = coresight_tarmac::Reader::new(data);
    let mut lines = 0u64;
    loop {
        match r.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => assert!(e.line >= 1, "error without a line: {e:?}"),
        }
        lines += 1;
        assert!(lines <= data.len() as u64 + 1, "more records than lines");
    }
}

/// The gnatcov trace-file reader: a file that parses dumps, and writes
/// back to bytes that parse to the same dump.
pub fn run_gnatcov(data: &[u8]) {
    use coresight_gnatcov::TraceFile;
    use coresight_gnatcov::dump::dump;
    if let Ok(t) = TraceFile::parse(data) {
        let text = dump(&t, true);
        let bytes = t.to_bytes();
        let again = TraceFile::parse(&bytes).expect("a written trace file parses");
        assert_eq!(dump(&again, true), text);
    }
}

/// The RISC-V trace plug-in (packet processor and decoder) over a small
/// program image: the `trace` register, buffer bounds and ISA from the
/// head of the input, the rest as trace words.
pub fn run_riscv(data: &[u8]) {
    use riscv_trace::{CoreIsa, RiscvTraceConfig, TraceReg, create_component};
    let mut input = Input::new(data);
    let trace = TraceReg(input.u32() | TraceReg::SUPPORTED);
    let isa_bits = input.u8();
    let isa = CoreIsa {
        xlen: if isa_bits & 1 != 0 { 64 } else { 32 },
        compressed: isa_bits & 2 != 0,
    };
    let words = input.u8() as u64 % 64 + 8;
    let write = input.u8() as u64 % words;
    let base = 0x8000_0000u64;
    let cfg = match RiscvTraceConfig::new(trace, base, base + 4 * words, base + 4 * write, isa) {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut tree = DecodeTree::new(SourceFormat::Single, DecodeMode::FullDecode);
    let image: Vec<u8> = input.rest().iter().copied().cycle().take(4096).collect();
    if let Some(m) = tree.mem_mapper()
        && !image.is_empty()
    {
        let _ = m
            .borrow_mut()
            .add_accessor(Box::new(BufferAccessor::new(0x1000, image, MemSpace::ANY).unwrap()));
    }
    let Ok(component) = create_component(cfg, &tree.decode_context()) else {
        return;
    };
    tree.add_decoder(0, riscv_trace::PROTOCOL_NAME, component).unwrap();
    // A walk follows direct jumps for up to 65,536 instructions without a
    // packet (the plug-in's documented bound): a packet may give that many
    // ranges, so the trace is kept short to keep each run quick.
    let trace = &input.rest()[..input.rest().len().min(256)];
    tree.set_gen_elem_out(Box::new(Bounded {
        seen: 0,
        limit: (2 * trace.len() as u64 + 16) * 65_536,
    }));
    feed(&mut tree, trace);
}

/// An element sink that fails the run if the elements outgrow what the
/// input can give.
struct Bounded {
    seen: u64,
    limit: u64,
}

impl TrcGenElemIn for Bounded {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, _elem: &TraceElement) -> DatapathResp {
        self.seen += 1;
        assert!(self.seen <= self.limit, "{} elements from a short input", self.seen);
        DatapathResp::Cont
    }
}

/// Index loading: the input as an index file, and again with a valid
/// checksum appended (so the fields behind the checksum are reached). A
/// loaded index must save and load back to itself, and every search must
/// answer without panicking.
pub fn run_index(data: &[u8]) {
    use coresight_decode::index::capture_hash;
    use coresight_decode::index::{from_bytes, to_bytes};
    let mut fixed = data.to_vec();
    fixed.extend_from_slice(&capture_hash(data).to_le_bytes());
    for bytes in [data, &fixed[..]] {
        let Ok(ix) = from_bytes(bytes) else { continue };
        let again = from_bytes(&to_bytes(&ix)).expect("a written index loads");
        assert_eq!(again, ix);
        let end = ix.capture.size;
        for s in &ix.streams {
            let id = s.id;
            let _ = ix.syncs_from(id, end / 2).count();
            let _ = ix.sync_at_or_before(id, end / 2);
            let _ = ix.timestamp_range(id);
            let _ = ix.time_window(id, 0, u64::MAX);
            let _ = ix.time_window(id, u64::MAX / 2, u64::MAX / 2);
            let _ = ix.byte_window(id, end / 3, end);
            let _ = ix.split_points(id, 3);
            let _ = s.counts();
        }
        let _ = ix.events();
        let _ = ix.ids_in(0..end);
        let _ = ix.ids_in(end / 2..u64::MAX);
        if let Some(src) = &ix.source {
            let _ = src.checkpoint_before(end / 2);
            let _ = src.checkpoint_before(u64::MAX);
        }
    }
}

/// The perf.data reader: any bytes give a recording or an error naming an
/// offset inside the input; a recording's borrowed AUX data lies inside it.
/// A recording is then decoded (no binaries: the trace's memory reads find
/// nothing, as with a recording whose files are missing).
pub fn run_perf_data(data: &[u8]) {
    use coresight_perf_data::Recording;
    use coresight_perf_data::binaries::SymbolSearch;
    use coresight_perf_data::decode::{DecodeOptions, RecordingDecoder};
    use coresight_perf_data::memory::Model;
    match Recording::parse(data) {
        Ok(rec) => {
            let range = data.as_ptr_range();
            for b in &rec.buffers {
                let r = b.data.as_ptr_range();
                assert!(b.data.is_empty() || (range.start <= r.start && r.end <= range.end));
            }
            let mut search = SymbolSearch::new();
            // Never read a file the input names.
            search.recorded_paths = false;
            let model = std::sync::Arc::new(Model::new(&rec, search));
            if let Ok(mut dec) = RecordingDecoder::new(&rec, model, DecodeOptions::default()) {
                let mut n = 0u64;
                dec.run(&mut |_| n += 1);
            }
        }
        Err(e) => assert!(e.offset() <= data.len() as u64, "{e}"),
    }
}

// The sink, push driver, pull collector and comparison every_path uses: one code for the
// test and this target.
#[path = "../../tools/tests/paths_common/mod.rs"]
mod paths_common;
use paths_common::{Lines, first_difference, pulled};

/// The fixed configuration of [`run_paths`]: two ETMv4 sources on an A64
/// core in CoreSight frames, trace IDs 0x10 (return stack on) and 0x11
/// (cycle counts and branch broadcast), sharing [`memory_image`] at 0.
fn paths_tree() -> DecodeTree {
    let mut tree = DecodeTree::new(
        SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        DecodeMode::FullDecode,
    );
    for (id, configr) in [(0x10u64, 0x1000u64), (0x11, 0x0019)] {
        let regs = [
            ("TRCCONFIGR", configr),
            ("TRCTRACEIDR", id),
            ("TRCIDR0", 0x2800_0ea1),
            ("TRCIDR1", 0x4100_f403),
            ("TRCIDR2", 0x0000_0488),
            ("TRCIDR8", 0),
            ("TRCIDR9", 0),
            ("TRCIDR10", 0),
            ("TRCIDR11", 0),
            ("TRCIDR12", 0),
            ("TRCIDR13", 0),
        ];
        let cfg = SourceConfig {
            name: format!("etm_{id:x}"),
            device_type: "ETM4.4".into(),
            regs: regs.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            core: Some(CoreConfig {
                name: format!("cpu_{id:x}"),
                core_type: "Cortex-A72".into(),
                profile: ArchProfile::from_core_name("Cortex-A72").unwrap_or_default(),
            }),
        };
        tree.create_decoder("ETMV4I", &cfg).expect("fixed ETMv4 configuration");
    }
    if let Some(mapper) = tree.mem_mapper()
        && let Ok(acc) = BufferAccessor::new(0, memory_image(), MemSpace::ANY)
    {
        let _ = mapper.borrow_mut().add_accessor(Box::new(acc));
    }
    tree
}

/// One way of decoding `data` with the fixed configuration: a packet
/// monitor on each source or none, the bytes in blocks of `block` (0: all
/// at once by `push_all`), the sink waiting on every `wait_every`-th
/// element (0: never).
fn push_path(data: &[u8], monitor: bool, block: usize, wait_every: u32) -> Vec<String> {
    let mut tree = paths_tree();
    if monitor {
        for id in [0x10, 0x11] {
            let _ = tree.attach_packet_printer(id, shared(MsgLogger::none()), true, 0);
        }
    }
    let out = shared(Vec::new());
    tree.set_gen_elem_out(Box::new(Lines::new(out.clone(), wait_every)));
    paths_common::push(&mut tree, data, block);
    drop(tree);
    std::mem::take(&mut *out.borrow_mut())
}

/// The pull API's elements of `data` with the fixed configuration, up to
/// the error that stops it, if any; at the queue capacity given (None:
/// the default).
fn pull_path(data: &[u8], capacity: Option<usize>) -> Vec<String> {
    let mut dec = coresight_decode::Decoder::new(paths_tree());
    if let Some(c) = capacity {
        dec.set_queue_capacity(c);
    }
    pulled(dec.decode(data)).0
}

/// The differential target: arbitrary bytes as a formatted capture of two
/// ETMv4 sources (see `paths_tree`), decoded on every in-process path that
/// `tools/tests/every_path.rs` compares on generated captures — with and
/// without packet monitors; whole, in odd-sized blocks and one byte at a
/// time (memory-aligned frames take any block); with a sink that waits
/// after every element (driven by hand, and by `push_all`) or now and
/// then; through the pull API at its default queue capacity and at 1 —
/// must give one element stream. Panics with the first difference.
pub fn run_paths(data: &[u8]) {
    let reference = push_path(data, true, usize::MAX, 0);
    let others = [
        ("no monitor", push_path(data, false, usize::MAX, 0)),
        ("no monitor, 7-byte blocks", push_path(data, false, 7, 0)),
        ("monitor, 16-byte blocks", push_path(data, true, 16, 0)),
        ("no monitor, 1-byte blocks", push_path(data, false, 1, 0)),
        (
            "no monitor, sink waits now and then",
            push_path(data, false, usize::MAX, 3),
        ),
        (
            "no monitor, sink waits after every element",
            push_path(data, false, usize::MAX, 1),
        ),
        (
            "1-byte blocks, sink waits after every element",
            push_path(data, false, 1, 1),
        ),
        ("push_all, sink waits after every element", push_path(data, false, 0, 1)),
        ("pull API", pull_path(data, None)),
        ("pull API at queue capacity 1", pull_path(data, Some(1))),
    ];
    for (what, got) in &others {
        if let Some(d) = first_difference(got, &reference) {
            panic!("{what} differs from the monitor's path at {d}");
        }
    }
}
