//! Decoders and their registry.
//!
//! A protocol is registered by name with a [`DecoderFactory`]; the tree
//! builder creates each trace source's decoder through it. A created
//! decoder is a [`TraceComponent`]: a `TrcDataIn` taking the source's byte
//! stream, that a packet printer can be attached to.
//!
//! Most protocols are a packet processor (bytes to packets) followed by a
//! packet decoder (packets to generic elements). [`Pipeline`] joins the two
//! with a packet monitor, so a protocol only writes its
//! [`PacketProcessor`] and its `PktDataIn` decoder.

use std::sync::Arc;

use crate::arch::ArchProfile;
use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::element::{TraceElement, UnsyncInfo};
use crate::errcode::{ErrCode, TraceError};
use crate::hooks::{EntryKind, StreamEntry, StreamIndexer};
use crate::interfaces::{
    InstrDecode, PktDataIn, PktRawDataMon, ResumeState, RunAddr, TargetMemAccess, TrcDataIn, TrcGenElemIn,
};
use crate::logger::{ErrLink, ErrorLogger};
use crate::printers::{PacketPrinter, TracePacket};
use crate::shared::Shared;

/// Whether decoders list packets only or decode them fully.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DecodeMode {
    /// Packet processing only: packets go to an attached packet sink.
    PacketsOnly,
    /// Full decode to generic elements.
    #[default]
    FullDecode,
}

/// Options passed to every decoder (the lister's decode flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderOptions {
    /// Check A64 opcodes and raise an error on invalid ones.
    pub aa64_opcode_check: bool,
    /// Maximum instructions in one range before an error (0: no limit).
    pub instr_range_limit: u32,
    /// ETE: split source-address ranges on N atoms.
    pub src_addr_n: bool,
    /// Check direct branches against the memory image (consistency).
    pub direct_br_cond: bool,
    /// Strict checks of conditional branches.
    pub strict_br_cond: bool,
    /// Check ranges are continuous.
    pub range_cont: bool,
    /// Halt on a decode error instead of resynchronising.
    pub halt_on_error: bool,
    /// OpenCSD's flow control at a block's end: a wait that stops the
    /// decoder with the whole block taken leaves it holding what
    /// OpenCSD's would, the elements of the block's last packet (an
    /// ETMv4/ETE run of packets never takes a block's last byte). A
    /// program that drops what a decoder still holds when it waits on a
    /// buffer's last bytes (Linux perf 6.1) then loses what it would with
    /// OpenCSD. Elements come out in the same order either way. The
    /// OpenCSD C API sets it.
    pub opencsd_flow: bool,
    /// OpenCSD's handling of an ETMv4/ETE configuration the decoder does
    /// not implement (see `EtmV4Config::check_decode_support`): the
    /// decoder is made, and its first packet stops the data path with
    /// OCSD_ERR_NOT_INIT, as in OpenCSD 1.8.0's listing. Off, making the
    /// decoder fails with OCSD_ERR_HW_CFG_UNSUPP naming the register
    /// field. The lister sets it.
    pub opencsd_cfg_unsupp: bool,
    /// ETMv4/ETE: take no commit from cycle count packets (which carry
    /// one when TRCIDR0.COMMOPT is 0), as OpenCSD before 1.6 did (1.3.3,
    /// which Debian's Linux perf 6.1 uses). A decoder configured with
    /// COMMOPT 0 for trace made with COMMOPT 1 then goes on where the
    /// commit would overrun: for matching that perf only.
    pub ccnt_without_commit: bool,
}

/// A trace source's register values, resolved for one protocol.
#[derive(Clone, Debug, Default)]
pub struct SourceConfig {
    /// Device name in the snapshot (`ETM_0`).
    pub name: String,
    /// Device type (`ETM4.2`, `PTM1.0`, `STM`...).
    pub device_type: String,
    /// Registers by name (without `(...)` decorations), in file order.
    pub regs: Vec<(String, u64)>,
    /// The core it traces, for PE trace.
    pub core: Option<CoreConfig>,
}

impl SourceConfig {
    /// A register by name (case-insensitive).
    pub fn reg(&self, name: &str) -> Option<u64> {
        self.regs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
    /// A register, or a default.
    pub fn reg_or(&self, name: &str, default: u64) -> u64 {
        self.reg(name).unwrap_or(default)
    }
}

/// The core a PE trace source is attached to.
#[derive(Clone, Debug, Default)]
pub struct CoreConfig {
    /// Core name in the snapshot (`cpu_0`).
    pub name: String,
    /// Core type as the snapshot gives it (`Cortex-A53`, `RV64GC`...).
    pub core_type: String,
    /// Architecture and profile of the core, from its type.
    pub profile: ArchProfile,
}

/// A register a protocol reads from the snapshot: required, or with a
/// default when missing.
#[derive(Clone, Copy, Debug)]
pub struct RegSpec {
    /// Register name as in the snapshot's device file.
    pub name: &'static str,
    /// Whether the source cannot be decoded without it.
    pub required: bool,
    /// Value used when an optional register is missing.
    pub default: u64,
}

impl RegSpec {
    /// A register the protocol cannot decode without.
    pub const fn required(name: &'static str) -> Self {
        RegSpec {
            name,
            required: true,
            default: 0,
        }
    }
    /// A register with the value `default` when the snapshot lacks it.
    pub(crate) const fn optional(name: &'static str, default: u64) -> Self {
        RegSpec {
            name,
            required: false,
            default,
        }
    }
}

/// Routes generic elements to whatever sink is attached (none: dropped).
#[derive(Default)]
pub struct ElemRouter {
    out: Option<Box<dyn TrcGenElemIn>>,
}

impl ElemRouter {
    /// Attaches `out` (or detaches, with `None`).
    pub(crate) fn set(&mut self, out: Option<Box<dyn TrcGenElemIn>>) {
        self.out = out;
    }
}

impl TrcGenElemIn for ElemRouter {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        match self.out.as_mut() {
            Some(o) => o.trace_elem_in(index, trace_id, elem),
            None => DatapathResp::Cont,
        }
    }
    #[inline]
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        match self.out.as_mut() {
            Some(o) => o.trace_elems_in(trace_id, elems),
            None => (DatapathResp::Cont, elems.len()),
        }
    }
}

impl<T: TrcGenElemIn + ?Sized> TrcGenElemIn for Shared<T> {
    #[inline]
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.borrow_mut().trace_elem_in(index, trace_id, elem)
    }
    #[inline]
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        self.borrow_mut().trace_elems_in(trace_id, elems)
    }
}

impl<T: TrcDataIn + ?Sized> TrcDataIn for Shared<T> {
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        self.borrow_mut().trace_data_in(op, index, data)
    }
}

/// What a decoder is connected to when it is created.
#[derive(Clone)]
pub struct DecodeContext {
    /// Full decode or packets only.
    pub mode: DecodeMode,
    /// Instance number for component names (`DCD_ETMV4_0016`): the trace ID
    /// the decoder sits on in a tree with a frame deformatter; `None` on a
    /// single-source tree, whose components OpenCSD names without a number.
    pub instance_id: Option<u8>,
    /// Target memory (full decode only).
    pub mem: Option<Shared<dyn TargetMemAccess>>,
    /// Instruction classifier for the memory walk.
    pub instr: Shared<dyn InstrDecode>,
    /// Where generic elements go.
    pub elem_out: Shared<ElemRouter>,
    /// Where errors are logged.
    pub err_log: Shared<ErrorLogger>,
    /// The decode options (checks, limits) of the tree.
    pub options: DecoderOptions,
}

impl DecodeContext {
    /// The name of a component of kind `base` (`PKTP_ETMV4I`) as error
    /// messages give it: with the instance number (`PKTP_ETMV4I_0016`, in
    /// decimal) when there is one.
    pub fn component_name(&self, base: &str) -> String {
        match self.instance_id {
            Some(id) => format!("{base}_{id:04}"),
            None => base.to_string(),
        }
    }

    /// The error link of a packet processor of kind `base` (`PKTP_PTM`): in
    /// full decode its errors are counted (for statistics) but not logged,
    /// as OpenCSD logs only the decoder's (see [`ErrLink::unlogged`]).
    pub(crate) fn packet_processor_err_link(&self, base: &str) -> ErrLink {
        let link = ErrLink::new(&self.err_log, self.component_name(base));
        match self.mode {
            DecodeMode::FullDecode => link.unlogged(),
            DecodeMode::PacketsOnly => link,
        }
    }

    /// The packet decoder `make` builds, in full decode mode; none when
    /// only packets are listed.
    pub fn decoder_for_mode<P, D>(&self, make: impl FnOnce() -> D) -> Option<Box<dyn PktDataIn<P>>>
    where
        D: PktDataIn<P> + 'static,
    {
        match self.mode {
            DecodeMode::FullDecode => Some(Box::new(make())),
            DecodeMode::PacketsOnly => None,
        }
    }
}

/// A created decoder for one trace source.
pub trait TraceComponent: TrcDataIn {
    /// Protocol name (`ETMV4I`, `PTM`, ...).
    fn protocol_name(&self) -> &str;
    /// Attaches a packet printer: as a monitor of every packet with its raw
    /// bytes (`monitor`), or, in packet-only mode, as the packet sink.
    fn attach_packet_printer(&mut self, printer: PacketPrinter, monitor: bool) -> Result<(), ErrCode>;
    /// Packet-processing statistics, where the protocol keeps them.
    fn stats(&self) -> Option<DecodeStats> {
        None
    }
    /// Attaches a trace-ID stream indexer (the design's attachment point
    /// at packet level, see [`crate::index`]); it sees every packet's
    /// index entries. Fails with [`ErrCode::Fail`] for components that
    /// cannot index.
    fn attach_indexer(&mut self, _indexer: Box<dyn StreamIndexer>) -> Result<(), ErrCode> {
        Err(ErrCode::Fail)
    }
    /// Starts decoding in the high nibble of the next data block's first
    /// byte (a sync point a stream index recorded there, see
    /// [`crate::hooks::EntryKind::Sync`]). Fails with [`ErrCode::Fail`]
    /// for components whose packets are whole bytes.
    fn start_at_high_nibble(&mut self) -> Result<(), ErrCode> {
        Err(ErrCode::Fail)
    }
    /// Gives the decoder, before its first packet, what the serial decode
    /// knew at the sync point it starts at ([`PktDataIn::resume`]). True
    /// when the decoder keeps it; by default it has no use for it.
    fn resume(&mut self, _state: &ResumeState) -> bool {
        false
    }
}

/// Packet-processing statistics of one trace source (the lister's
/// `-stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Bytes received.
    pub channel_total: u64,
    /// Bytes processed before synchronisation (and after losing it).
    pub channel_unsynced: u64,
    /// Invalid or reserved packet headers.
    pub bad_header_errs: u64,
    /// Malformed packets.
    pub bad_sequence_errs: u64,
}

/// What a packet processor counts for [`DecodeStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStats {
    /// Bytes seen before synchronisation (and after losing it).
    pub unsynced_bytes: u64,
    /// Invalid or reserved packet headers seen.
    pub bad_header_errs: u64,
    /// Malformed packets seen.
    pub bad_sequence_errs: u64,
}

impl ProcStats {
    /// Unsynchronised bytes, and the packet errors logged through `link`.
    pub(crate) fn with_errors(unsynced_bytes: u64, link: &crate::logger::ErrLink) -> ProcStats {
        let (h, s) = link.packet_error_counts();
        ProcStats {
            unsynced_bytes,
            bad_header_errs: h,
            bad_sequence_errs: s,
        }
    }
}

/// Creates decoders of one protocol.
pub trait DecoderFactory: Send + Sync {
    /// Protocol name shown in listings and used to look the factory up.
    fn protocol_name(&self) -> &str;
    /// Snapshot device types handled (`ETM4`, `PTM`, ...), compared with
    /// the device type up to its first `.`.
    fn device_types(&self) -> &[&str];
    /// Whether the source traces a core (PE trace) rather than standing
    /// alone (software trace).
    fn is_pe_trace(&self) -> bool {
        true
    }
    /// Registers read from the snapshot.
    fn registers(&self) -> &[RegSpec];
    /// The architecture of a core named `core_type` in a snapshot
    /// (`Cortex-A53`, `RV64GC`...), or `None` when this protocol cannot
    /// trace such a core (the snapshot builder then skips the source with
    /// an error). By default, the Arm cores [`ArchProfile::from_core_name`]
    /// knows; a protocol for another architecture answers for its own
    /// names. The name itself reaches [`DecoderFactory::create`] in
    /// [`CoreConfig::core_type`].
    fn core_profile(&self, core_type: &str) -> Option<ArchProfile> {
        ArchProfile::from_core_name(core_type)
    }
    /// The trace ID the configuration gives.
    fn trace_id(&self, cfg: &SourceConfig) -> u8;
    /// Creates the decoder. `cfg` has every register of
    /// [`DecoderFactory::registers`] resolved.
    fn create(&self, cfg: &SourceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, TraceError>;
}

/// The protocols known to a decode tree. The registry knows no protocol
/// itself: [`DecoderRegistry::builtin`] (made by the protocols' layer) fills
/// one with the built-in protocols, and users register their own.
pub struct DecoderRegistry {
    factories: Vec<Arc<dyn DecoderFactory>>,
}

impl DecoderRegistry {
    /// An empty registry.
    pub(crate) fn empty() -> Self {
        DecoderRegistry { factories: Vec::new() }
    }

    /// Registers a protocol; fails if the name is taken.
    pub fn register(&mut self, factory: Arc<dyn DecoderFactory>) -> Result<(), ErrCode> {
        if self.find(factory.protocol_name()).is_some() {
            return Err(ErrCode::DcdregNameRepeat);
        }
        self.factories.push(factory);
        Ok(())
    }

    /// A protocol by name.
    pub fn find(&self, name: &str) -> Option<Arc<dyn DecoderFactory>> {
        self.factories.iter().find(|f| f.protocol_name() == name).cloned()
    }

    /// The protocol for a snapshot device type (`ETM4.2` matches `ETM4`).
    pub fn for_device_type(&self, device_type: &str) -> Option<Arc<dyn DecoderFactory>> {
        let base = device_type.split('.').next().unwrap_or(device_type);
        self.factories
            .iter()
            .find(|f| f.device_types().contains(&base))
            .cloned()
    }

    /// Names of the registered protocols.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.iter().map(|f| f.protocol_name())
    }
}

/// What a software-trace decoder does with a packet, as [`SyncGate`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GateStep {
    /// Report "not synchronised" for this reason, and do not decode.
    ReportNoSync(UnsyncInfo),
    /// Not synchronised yet: skip the packet.
    Hold,
    /// Decode the packet.
    Decode,
}

/// Synchronisation as OpenCSD's STM and ITM decoders keep it: after a start
/// or a loss of sync, report it once (with the reason), then skip packets
/// up to and including the next alignment sync.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SyncGate {
    state: GateState,
    /// The reason the next report gives.
    pub unsync: UnsyncInfo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GateState {
    NoSync,
    WaitSync,
    Decode,
}

impl SyncGate {
    pub(crate) fn new() -> Self {
        SyncGate {
            state: GateState::NoSync,
            unsync: UnsyncInfo::InitDecoder,
        }
    }

    /// Synchronisation is lost: the next packet reports it.
    pub(crate) fn lose_sync(&mut self) {
        self.state = GateState::NoSync;
    }

    /// What to do with the next packet (`is_async`: it is an alignment sync).
    pub(crate) fn step(&mut self, is_async: bool) -> GateStep {
        if self.state == GateState::Decode {
            return GateStep::Decode;
        }
        let report = self.state == GateState::NoSync;
        self.state = if is_async {
            GateState::Decode
        } else {
            GateState::WaitSync
        };
        if report {
            GateStep::ReportNoSync(self.unsync)
        } else {
            GateStep::Hold
        }
    }
}

/// A packet decoder's side of the datapath, with the rules every decoder
/// follows made common: every type implementing it is a `PktDataIn` of
/// its packets.
///
/// The rules: a data operation without a packet is an invalid parameter;
/// the end of trace is acted on once (after a wait the caller flushes and
/// sends EOT again, which must not repeat the end-of-trace element) until
/// new data or a reset.
pub trait PacketDecoder: Send {
    /// The protocol's packet type.
    type Packet;
    /// Whether the end of trace has been acted on; kept by the decoder,
    /// set and cleared by the rules above.
    fn eot_done(&mut self) -> &mut bool;
    /// One packet, first byte at `index`.
    fn on_packet(&mut self, index: TrcIndex, pkt: &Self::Packet) -> DatapathResp;
    /// One-byte packets as their bytes (see
    /// [`PktDataIn::packet_bytes_in`]): by default none are taken.
    fn on_packet_bytes(&mut self, _index: TrcIndex, _run: &[u8]) -> (DatapathResp, usize) {
        (DatapathResp::Cont, 0)
    }
    /// One-byte packets with address packets among them (see
    /// [`PktDataIn::packet_run_in`]): by default those before the first
    /// address, as bytes.
    fn on_packet_run(&mut self, index: TrcIndex, run: &[u8], addrs: &[RunAddr]) -> (DatapathResp, usize) {
        let before = addrs
            .first()
            .map_or(run.len(), |a| a.index.saturating_sub(index) as usize);
        self.on_packet_bytes(index, &run[..before.min(run.len())])
    }
    /// The end of trace, the first time: sends the end-of-trace element.
    fn on_eot(&mut self) -> DatapathResp;
    /// The end of trace again, after a wait: by default nothing to do.
    fn on_eot_again(&mut self) -> DatapathResp {
        DatapathResp::Cont
    }
    /// Delivers output held back by a wait: by default there is none.
    fn on_flush(&mut self) -> DatapathResp {
        DatapathResp::Cont
    }
    /// A reset of the decode path.
    fn on_reset(&mut self, index: TrcIndex) -> DatapathResp;
    /// What the serial decode knew at the sync point this decoder starts
    /// at ([`PktDataIn::resume`]): by default nothing is kept.
    fn on_resume(&mut self, _state: &ResumeState) -> bool {
        false
    }
}

impl<D: PacketDecoder> PktDataIn<D::Packet> for D {
    fn packet_in(&mut self, index: TrcIndex, pkt: &D::Packet) -> DatapathResp {
        *self.eot_done() = false;
        self.on_packet(index, pkt)
    }
    fn packet_bytes_in(&mut self, index: TrcIndex, run: &[u8]) -> (DatapathResp, usize) {
        // Cleared whether or not any is taken: the processor sends the
        // first packet otherwise.
        *self.eot_done() = false;
        self.on_packet_bytes(index, run)
    }
    fn packet_run_in(&mut self, index: TrcIndex, run: &[u8], addrs: &[RunAddr]) -> (DatapathResp, usize) {
        *self.eot_done() = false;
        self.on_packet_run(index, run, addrs)
    }
    fn resume(&mut self, state: &ResumeState) -> bool {
        self.on_resume(state)
    }
    fn packet_data_in(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&D::Packet>) -> DatapathResp {
        match op {
            DatapathOp::Data => match pkt {
                Some(p) => {
                    *self.eot_done() = false;
                    self.on_packet(index, p)
                }
                None => DatapathResp::FatalInvalidParam,
            },
            DatapathOp::Eot => {
                if std::mem::replace(self.eot_done(), true) {
                    self.on_eot_again()
                } else {
                    self.on_eot()
                }
            }
            DatapathOp::Flush => self.on_flush(),
            DatapathOp::Reset => {
                *self.eot_done() = false;
                self.on_reset(index)
            }
        }
    }
}

/// Where a packet processor sends each packet: the monitor first, then the
/// packet sink (the decoder, or a printer in packet-only mode).
pub struct PacketOut<'a, P> {
    /// The packet monitor (a printer shown raw bytes, or a stream indexer
    /// in front of one), if attached.
    pub mon: Option<&'a mut (dyn PktRawDataMon<P> + 'a)>,
    /// The packet sink (decoder, or printer in packet-only mode), if attached.
    pub sink: Option<&'a mut (dyn PktDataIn<P> + 'a)>,
}

impl<P> PacketOut<'_, P> {
    /// Offers the sink the run of one-byte packets at the front of `data`
    /// (first at `index`; the run ends at the first byte `in_run` refuses)
    /// as their bytes (see [`PktDataIn::packet_bytes_in`]): only with no
    /// monitor attached, which must see every packet built. Returns the
    /// sink's response and how many packets it took, or `None` when it
    /// took none (the processor then builds the first itself).
    #[inline]
    pub(crate) fn offer_run(
        &mut self,
        index: TrcIndex,
        data: &[u8],
        in_run: impl Fn(u8) -> bool,
    ) -> Option<(DatapathResp, usize)> {
        if self.mon.is_some() {
            return None;
        }
        let sink = self.sink.as_mut()?;
        let len = data.iter().position(|&b| !in_run(b)).unwrap_or(data.len());
        let (r, n) = sink.packet_bytes_in(index, &data[..len]);
        let n = n.min(len);
        (n > 0).then_some((r, n))
    }

    /// Sends one packet; returns the sink's response.
    pub fn emit(&mut self, index: TrcIndex, pkt: &P, raw: &[u8]) -> DatapathResp {
        if let Some(m) = self.mon.as_mut() {
            m.raw_packet_data_mon(DatapathOp::Data, index, Some(pkt), raw);
        }
        match self.sink.as_mut() {
            Some(s) => s.packet_in(index, pkt),
            None => DatapathResp::Cont,
        }
    }
}

/// Bytes to packets for one protocol.
pub trait PacketProcessor: Send {
    /// The protocol's packet type, printable for listings.
    type Packet: TracePacket + 'static;
    /// Processes `data` (first byte at `index`), emitting complete packets.
    /// Stops after a packet whose sink answered other than continue, and
    /// returns that response with the bytes used up to that packet's end.
    fn process(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, Self::Packet>)
    -> (DatapathResp, usize);
    /// End of trace: emits any partial packet.
    fn eot(&mut self, out: &mut PacketOut<'_, Self::Packet>) -> DatapathResp;
    /// Drops partial state; resynchronise on what follows.
    fn reset(&mut self, index: TrcIndex);
    /// What the processor counted, if it counts.
    fn stats(&self) -> Option<ProcStats> {
        None
    }
    /// Where the processor logs its errors (its `PKTP_...` name).
    fn error_link(&self) -> Option<&crate::logger::ErrLink> {
        None
    }
    /// The trace-ID stream index entries `pkt` makes (sync points,
    /// timestamps, events...), each given to `emit` with its value. Only
    /// called while a [`StreamIndexer`] is attached; by default a packet
    /// makes none.
    fn index_entries(_pkt: &Self::Packet, _emit: &mut dyn FnMut(EntryKind, u64)) {}
    /// Makes the processor, fresh or reset, start in the high nibble of
    /// the next data block's first byte (the low nibble ends a packet
    /// before the start): a sync point of a protocol whose packets are
    /// nibbles (STM) can begin there. False (and nothing changes) for a
    /// protocol whose packets are whole bytes.
    fn start_at_high_nibble(&mut self) -> bool {
        false
    }
}

/// A packet monitor that feeds a stream indexer before the real monitor:
/// put in the monitor's place only while an indexer is attached, so a
/// pipeline without one runs exactly as before.
struct IndexingMon<'a, PP: PacketProcessor> {
    inner: Option<&'a mut (dyn PktRawDataMon<PP::Packet> + 'a)>,
    ix: &'a mut (dyn StreamIndexer + 'a),
}

impl<PP: PacketProcessor> PktRawDataMon<PP::Packet> for IndexingMon<'_, PP> {
    fn raw_packet_data_mon(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&PP::Packet>, raw: &[u8]) {
        if let Some(p) = pkt {
            let ix = &mut *self.ix;
            PP::index_entries(p, &mut |kind, value| ix.entry(StreamEntry { index, kind, value }));
        }
        if let Some(m) = self.inner.as_mut() {
            m.raw_packet_data_mon(op, index, pkt, raw);
        }
    }
}

/// A packet processor, its monitor and its packet sink, as one component.
///
/// End of trace: if the sink answers `Wait` to EOT, the caller sends
/// `Flush` until it gets `Cont`, then EOT again; the sink must then deliver
/// only what it had not delivered yet. The monitor sees EOT once, after the
/// sink has finished.
pub struct Pipeline<PP: PacketProcessor> {
    name: std::borrow::Cow<'static, str>,
    proc: PP,
    mon: Option<Box<dyn PktRawDataMon<PP::Packet>>>,
    sink: Option<Box<dyn PktDataIn<PP::Packet>>>,
    /// Trace-ID stream indexer (see [`crate::index`]).
    indexer: Option<Box<dyn StreamIndexer>>,
    /// End of trace fully delivered (a repeated EOT is ignored).
    eot_done: bool,
    /// The monitor has been told of the end of trace.
    mon_eot_done: bool,
    /// Bytes taken in.
    total: u64,
}

impl<PP: PacketProcessor> Pipeline<PP> {
    /// A pipeline for the protocol `name` (a built-in's static name, or a
    /// name made at run time); `decoder` is `None` in packet-only mode.
    pub fn new(
        name: impl Into<std::borrow::Cow<'static, str>>,
        proc: PP,
        decoder: Option<Box<dyn PktDataIn<PP::Packet>>>,
    ) -> Self {
        Pipeline {
            name: name.into(),
            proc,
            mon: None,
            sink: decoder,
            indexer: None,
            eot_done: false,
            mon_eot_done: false,
            total: 0,
        }
    }
    /// Attaches (or detaches) the packet monitor.
    pub fn set_monitor(&mut self, mon: Option<Box<dyn PktRawDataMon<PP::Packet>>>) {
        self.mon = mon;
    }
    /// Attaches (or detaches) the packet sink.
    pub fn set_sink(&mut self, sink: Option<Box<dyn PktDataIn<PP::Packet>>>) {
        self.sink = sink;
    }

    /// Runs `f` with the processor and its packet output: monitor and
    /// sink, and the stream indexer in front of the monitor when one is
    /// attached (without one, nothing is added to the path).
    fn with_out<R>(&mut self, f: impl FnOnce(&mut PP, &mut PacketOut<'_, PP::Packet>) -> R) -> R {
        let mon = self.mon.as_deref_mut().map(|m| m as &mut dyn PktRawDataMon<PP::Packet>);
        let sink = self.sink.as_deref_mut().map(|s| s as &mut dyn PktDataIn<PP::Packet>);
        match self.indexer.as_deref_mut() {
            None => f(&mut self.proc, &mut PacketOut { mon, sink }),
            Some(ix) => {
                let mut mon = IndexingMon::<PP> { inner: mon, ix };
                f(
                    &mut self.proc,
                    &mut PacketOut {
                        mon: Some(&mut mon),
                        sink,
                    },
                )
            }
        }
    }
}

impl<PP: PacketProcessor> TrcDataIn for Pipeline<PP> {
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        match op {
            DatapathOp::Data if data.is_empty() => {
                // An empty data block is an invalid parameter, as in
                // OpenCSD's packet processors (a decode tree only hands one
                // on with `DecodeTree::set_opencsd_empty_blocks`).
                if let Some(e) = self.proc.error_link() {
                    e.log(
                        &crate::errcode::TraceError::new(
                            crate::errcode::Severity::Error,
                            crate::errcode::ErrCode::InvalidParamVal,
                        )
                        .with_message("Packet Processor: Zero length data block or NULL pointer error\n"),
                    );
                }
                (DatapathResp::FatalInvalidParam, 0)
            }
            DatapathOp::Data => {
                self.eot_done = false;
                self.mon_eot_done = false;
                let (resp, used) = self.with_out(|proc, out| proc.process(index, data, out));
                self.total += used as u64;
                (resp, used)
            }
            DatapathOp::Eot => {
                // On a wait the caller flushes and sends EOT again: the
                // sink and monitor see the end of trace once everything
                // before it has gone through.
                if self.eot_done {
                    return (DatapathResp::Cont, 0);
                }
                let mut r = self.with_out(|proc, out| proc.eot(out));
                if r.is_wait() {
                    return (r, 0);
                }
                // A last incomplete packet that stopped the decoder (halt on
                // error) keeps the end of trace from it, as in OpenCSD: what
                // it holds is not flushed and no EO_TRACE follows.
                if !r.is_fatal()
                    && let Some(s) = self.sink.as_mut()
                {
                    r = r.worst(s.packet_data_in(DatapathOp::Eot, index, None));
                }
                // Every packet has gone to the monitor: it sees the end of
                // trace now even if the decoder waits on its last elements
                // (the client may only flush them out, never send EOT again),
                // as OpenCSD's processors tell it.
                if !self.mon_eot_done {
                    if let Some(m) = self.mon.as_mut() {
                        m.raw_packet_data_mon(DatapathOp::Eot, index, None, &[]);
                    }
                    self.mon_eot_done = true;
                }
                if r.is_wait() {
                    return (r, 0);
                }
                self.eot_done = true;
                (r, 0)
            }
            DatapathOp::Flush => {
                let r = match self.sink.as_mut() {
                    Some(s) => s.packet_data_in(DatapathOp::Flush, index, None),
                    None => DatapathResp::Cont,
                };
                (r, 0)
            }
            DatapathOp::Reset => {
                self.eot_done = false;
                self.mon_eot_done = false;
                self.proc.reset(index);
                let mut r = DatapathResp::Cont;
                if let Some(s) = self.sink.as_mut() {
                    r = s.packet_data_in(DatapathOp::Reset, index, None);
                }
                if let Some(m) = self.mon.as_mut() {
                    m.raw_packet_data_mon(DatapathOp::Reset, index, None, &[]);
                }
                (r, 0)
            }
        }
    }
}

impl<PP: PacketProcessor> TraceComponent for Pipeline<PP> {
    fn protocol_name(&self) -> &str {
        &self.name
    }
    fn stats(&self) -> Option<DecodeStats> {
        self.proc.stats().map(|p| DecodeStats {
            channel_total: self.total,
            channel_unsynced: p.unsynced_bytes,
            bad_header_errs: p.bad_header_errs,
            bad_sequence_errs: p.bad_sequence_errs,
        })
    }
    fn attach_indexer(&mut self, indexer: Box<dyn StreamIndexer>) -> Result<(), ErrCode> {
        self.indexer = Some(indexer);
        Ok(())
    }
    fn start_at_high_nibble(&mut self) -> Result<(), ErrCode> {
        if self.proc.start_at_high_nibble() {
            Ok(())
        } else {
            Err(ErrCode::Fail)
        }
    }
    fn resume(&mut self, state: &ResumeState) -> bool {
        self.sink.as_mut().is_some_and(|s| s.resume(state))
    }
    fn attach_packet_printer(&mut self, printer: PacketPrinter, monitor: bool) -> Result<(), ErrCode> {
        if monitor {
            self.mon = Some(Box::new(printer));
        } else {
            if self.sink.is_some() {
                return Err(ErrCode::AttachTooMany);
            }
            self.sink = Some(Box::new(printer));
        }
        Ok(())
    }
}
