//! The decode tree: a frame deformatter (or a single unformatted source),
//! one decoder per trace ID, and the services decoders share (target
//! memory, instruction decode, element output, error log).

use std::path::Path;
use std::sync::Arc;

use crate::datapath::{DatapathOp, DatapathResp, SerialKey, TrcIndex};
use crate::decoder::{
    DecodeContext, DecodeMode, DecoderOptions, DecoderRegistry, ElemRouter, SourceConfig, TraceComponent,
};
use crate::deformatter::{DeformatterConfig, FrameDeformatter, IdStreamSink};
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::instr::ArmInstrDecoder;
use crate::interfaces::{InstrDecode, TrcDataIn, TrcGenElemIn, TrcRawFrameIn};
use crate::logger::{ErrLink, ErrorLogger, MsgLogger};
use crate::memory::{CacheConfig, MemAccMapper, MemSpace, MemoryError};
use crate::printers::PacketPrinter;
use crate::shared::{Shared, shared};

/// How the trace buffer is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFormat {
    /// CoreSight formatted frames, split by a deformatter.
    Formatted(DeformatterConfig),
    /// One unformatted source (e.g. TRBE, or a single ETM into a FIFO).
    Single,
}

/// One decoder in the tree.
pub struct TreeElement {
    /// Protocol name (`ETMV4I`...).
    pub protocol: String,
    /// Snapshot source name, where known.
    pub source_name: String,
    /// Trace ID from the source's configuration.
    pub config_trace_id: u8,
    /// The decoder.
    pub component: Box<dyn TraceComponent>,
}

struct Elements {
    slots: Vec<Option<TreeElement>>,
    /// The IDs with a decoder, ascending: operations for every ID visit
    /// these, not all 128 slots (a caller that flushes often pays per ID).
    attached: Vec<u8>,
    /// What the tree is handing on now: see [`DecodeTree::serial_position`].
    position: Shared<SerialKey>,
    /// The frame and place of the block the deformatter hands on next.
    chunk: (TrcIndex, u8),
    filter: Option<[bool; 128]>,
    /// Hand empty frame blocks to the decoders, as OpenCSD does.
    opencsd_empty_blocks: bool,
    /// Byte windows per trace ID (decoding from an indexed point): data
    /// outside is dropped. `None`, the usual case, costs one test a block.
    windows: Option<Box<[(TrcIndex, TrcIndex); 128]>>,
}

impl Elements {
    /// Notes that `id` has a decoder now.
    fn attach(&mut self, id: u8) {
        if let Err(at) = self.attached.binary_search(&id) {
            self.attached.insert(at, id);
        }
    }

    fn enabled(&self, id: u8) -> bool {
        self.filter.is_none_or(|f| f[id as usize & 0x7f])
    }
}

impl Elements {
    /// Hands on the bytes of a block at `index` inside `begin..end` (byte
    /// `k` of a block is at `index + k`, as packet indexes count).
    fn windowed(
        &mut self,
        id: u8,
        index: TrcIndex,
        data: &[u8],
        (begin, end): (TrcIndex, TrcIndex),
    ) -> (DatapathResp, usize) {
        let len = data.len() as u64;
        let skip = begin.saturating_sub(index).min(len) as usize;
        let stop = end.saturating_sub(index).min(len) as usize;
        if skip >= stop {
            return (DatapathResp::Cont, data.len());
        }
        *self.position.borrow_mut() = SerialKey {
            index: self.chunk.0,
            chunk: self.chunk.1,
            trace_id: id,
        };
        let (r, used) = match self.slots.get_mut(id as usize) {
            Some(Some(e)) => e
                .component
                .trace_data_in(DatapathOp::Data, index + skip as u64, &data[skip..stop]),
            _ => (DatapathResp::Cont, stop - skip),
        };
        // Bytes after the window count as used once the window's are.
        let used = if skip + used >= stop { data.len() } else { skip + used };
        (r, used)
    }
}

impl IdStreamSink for Elements {
    fn is_attached(&self, id: u8) -> bool {
        self.enabled(id) && matches!(self.slots.get(id as usize), Some(Some(_)))
    }
    fn id_data_in(&mut self, id: u8, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        if !self.enabled(id) {
            return (DatapathResp::Cont, data.len());
        }
        if let Some(w) = self.windows.as_deref() {
            return self.windowed(id, index, data, w[id as usize & 0x7f]);
        }
        *self.position.borrow_mut() = SerialKey {
            index: self.chunk.0,
            chunk: self.chunk.1,
            trace_id: id,
        };
        match self.slots.get_mut(id as usize) {
            Some(Some(e)) => e.component.trace_data_in(DatapathOp::Data, index, data),
            _ => (DatapathResp::Cont, data.len()),
        }
    }
    fn error_position(&mut self, index: TrcIndex) {
        *self.position.borrow_mut() = SerialKey {
            index,
            chunk: 0,
            trace_id: 0,
        };
    }
    fn chunk_position(&mut self, frame_index: TrcIndex, chunk: usize) {
        self.chunk = (frame_index, chunk.min(u8::MAX as usize) as u8);
    }
    fn empty_block(&mut self, id: u8, index: TrcIndex) -> DatapathResp {
        if !self.opencsd_empty_blocks || !self.enabled(id) {
            return DatapathResp::Cont;
        }
        *self.position.borrow_mut() = SerialKey {
            index: self.chunk.0,
            chunk: self.chunk.1,
            trace_id: id,
        };
        match self.slots.get_mut(id as usize) {
            Some(Some(e)) => e.component.trace_data_in(DatapathOp::Data, index, &[]).0,
            _ => DatapathResp::Cont,
        }
    }
    fn all_ids_op(&mut self, op: DatapathOp, index: TrcIndex) -> DatapathResp {
        let filter = self.filter;
        let mut worst = DatapathResp::Cont;
        for &id in &self.attached {
            let id = usize::from(id);
            if let Some(e) = &mut self.slots[id]
                && filter.is_none_or(|f| f[id])
            {
                let at = if op == DatapathOp::Eot { TrcIndex::MAX } else { index };
                *self.position.borrow_mut() = SerialKey {
                    index: at,
                    chunk: 0,
                    trace_id: id as u8,
                };
                worst = worst.worst(e.component.trace_data_in(op, index, &[]).0);
                // End of trace goes out one decoder at a time: on a wait
                // the caller flushes and sends it again, and decoders
                // that have finished ignore the repeat.
                if op == DatapathOp::Eot && worst.is_wait() {
                    break;
                }
            }
        }
        worst
    }
}

/// A decode tree.
pub struct DecodeTree {
    format: SourceFormat,
    mode: DecodeMode,
    deformatter: Option<FrameDeformatter>,
    elements: Elements,
    mapper: Option<Shared<MemAccMapper>>,
    instr: Shared<dyn InstrDecode>,
    elem_out: Shared<ElemRouter>,
    err_log: Shared<ErrorLogger>,
    registry: Arc<DecoderRegistry>,
    options: DecoderOptions,
}

impl std::fmt::Debug for DecodeTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let decoders: Vec<(u8, &str)> = self.elements().map(|(id, e)| (id, e.protocol.as_str())).collect();
        f.debug_struct("DecodeTree")
            .field("format", &self.format)
            .field("mode", &self.mode)
            .field("decoders", &decoders)
            .finish_non_exhaustive()
    }
}

impl DecodeTree {
    /// A tree for `format`, decoding in `mode`, with the built-in protocols.
    pub fn new(format: SourceFormat, mode: DecodeMode) -> DecodeTree {
        DecodeTree::with_registry(format, mode, Arc::new(DecoderRegistry::builtin()))
    }

    /// A tree using the protocols in `registry` (for custom decoders).
    pub fn with_registry(format: SourceFormat, mode: DecodeMode, registry: Arc<DecoderRegistry>) -> DecodeTree {
        let err_log = shared(ErrorLogger::default());
        let deformatter = match format {
            SourceFormat::Formatted(cfg) => {
                let mut d = FrameDeformatter::new(cfg);
                d.set_error_link(ErrLink::new(&err_log, "DFMT_CSFRAMES"));
                Some(d)
            }
            SourceFormat::Single => None,
        };
        let mapper = (mode == DecodeMode::FullDecode).then(|| shared(MemAccMapper::new(CacheConfig::default())));
        DecodeTree {
            format,
            mode,
            deformatter,
            elements: Elements {
                slots: (0..128).map(|_| None).collect(),
                attached: Vec::new(),
                position: shared(SerialKey::default()),
                chunk: (0, 0),
                filter: None,
                opencsd_empty_blocks: false,
                windows: None,
            },
            mapper,
            instr: shared(ArmInstrDecoder::default()),
            elem_out: shared(ElemRouter::default()),
            err_log,
            registry,
            options: DecoderOptions::default(),
        }
    }

    /// How the trace buffer is laid out.
    pub fn format(&self) -> SourceFormat {
        self.format
    }
    /// The protocols this tree can create decoders for.
    pub fn registry(&self) -> &DecoderRegistry {
        &self.registry
    }

    /// Options passed to decoders created from now on.
    pub fn set_decoder_options(&mut self, options: DecoderOptions) {
        self.options = options;
    }

    /// The error logger shared by the tree's components.
    pub fn error_logger(&self) -> &Shared<ErrorLogger> {
        &self.err_log
    }

    /// Sends logged errors to `out` (as well as to the `log` crate).
    pub fn set_error_output(&mut self, out: Option<Shared<MsgLogger>>) {
        self.err_log.borrow_mut().set_output(out);
    }

    /// Replaces the instruction decoder used by decoders created from now on.
    pub fn set_instr_decoder(&mut self, instr: Shared<dyn InstrDecode>) {
        self.instr = instr;
    }

    /// The memory mapper (full decode only).
    pub fn mem_mapper(&self) -> Option<&Shared<MemAccMapper>> {
        self.mapper.as_ref()
    }

    /// Maps a region of a binary file (see [`MemAccMapper::add_file_region`]).
    pub fn add_file_region(
        &mut self,
        path: &Path,
        start: u64,
        offset: u64,
        size: u64,
        space: MemSpace,
    ) -> Result<(), MemoryError> {
        let m = self.mapper.as_ref().ok_or(MemoryError::NoMemory)?;
        m.borrow_mut().add_file_region(path, start, offset, size, space)
    }

    /// The frame deformatter (formatted sources only).
    pub fn deformatter(&self) -> Option<&FrameDeformatter> {
        self.deformatter.as_ref()
    }

    /// The deformatter, for a formatted source.
    pub fn deformatter_mut(&mut self) -> Option<&mut FrameDeformatter> {
        self.deformatter.as_mut()
    }

    /// Attaches a raw frame monitor to the deformatter.
    pub fn set_raw_frame_monitor(&mut self, mon: Box<dyn TrcRawFrameIn>) -> Result<(), ErrCode> {
        let d = self.deformatter.as_mut().ok_or(ErrCode::DcdtNoFormatter)?;
        d.set_raw_monitor(Some(mon));
        Ok(())
    }

    /// The tree's current [`SerialKey`], shared: it is updated as the tree
    /// hands data and operations to its decoders.
    pub fn serial_position(&self) -> Shared<SerialKey> {
        self.elements.position.clone()
    }

    /// Makes the tree keep its [`SerialKey`] in `position` (shared with,
    /// for example, a logger that notes where text was written).
    pub(crate) fn set_serial_position(&mut self, position: Shared<SerialKey>) {
        let now = *self.elements.position.borrow();
        *position.borrow_mut() = now;
        self.elements.position = position;
    }

    /// Sends the tree's elements, typed, to `sink` (replacing any output
    /// set before).
    pub fn set_element_sink(&mut self, sink: impl crate::interfaces::ElementSink + 'static) {
        self.set_gen_elem_out(Box::new(crate::interfaces::TypedSink(sink)));
    }

    /// Sets where the flat generic elements go (OpenCSD's form, for
    /// printers and the C API); [`DecodeTree::set_element_sink`] is the
    /// typed way.
    pub fn set_gen_elem_out(&mut self, out: Box<dyn TrcGenElemIn>) {
        self.elem_out.borrow_mut().set(Some(out));
    }

    /// Limits decoding to the given trace IDs (`None`: all). A trace ID is
    /// 7 bits: a value of 0x80 or more is refused with
    /// [`ErrCode::InvalidId`] and the filter is left as it was.
    pub fn set_id_filter(&mut self, ids: Option<&[u8]>) -> Result<(), ErrCode> {
        if ids.is_some_and(|list| list.iter().any(|&id| id >= 0x80)) {
            return Err(ErrCode::InvalidId);
        }
        self.elements.filter = ids.map(|list| {
            let mut f = [false; 128];
            for &id in list {
                f[id as usize] = true;
            }
            f
        });
        if let Some(d) = self.deformatter.as_mut() {
            d.set_raw_id_filter(ids);
        }
        Ok(())
    }

    /// The context a decoder is created with.
    pub fn decode_context(&self) -> DecodeContext {
        DecodeContext {
            mode: self.mode,
            instance_id: None,
            mem: self
                .mapper
                .as_ref()
                .map(|m| m.clone() as Shared<dyn crate::interfaces::TargetMemAccess>),
            instr: self.instr.clone(),
            elem_out: self.elem_out.clone(),
            err_log: self.err_log.clone(),
            options: self.options,
        }
    }

    /// Creates a decoder for `cfg` with the registered protocol `protocol`
    /// and places it on the trace ID its configuration gives (ID 0 on a
    /// single-source tree). Returns that ID.
    pub fn create_decoder(&mut self, protocol: &str, cfg: &SourceConfig) -> Result<u8, TraceError> {
        let factory = self.registry.find(protocol).ok_or_else(|| {
            TraceError::new(Severity::Error, ErrCode::DcdregNameUnknown)
                .with_message(format!("no decoder registered as '{protocol}'"))
        })?;
        let config_id = factory.trace_id(cfg);
        if usize::from(config_id) >= self.elements.slots.len() {
            return Err(
                TraceError::new(Severity::Error, ErrCode::InvalidId).with_message(format!(
                    "{}: trace ID 0x{config_id:x} from the configuration is not a CoreSight trace ID (0x00 to 0x7f)",
                    cfg.name
                )),
            );
        }
        let slot_id = match self.format {
            SourceFormat::Formatted(_) => config_id,
            SourceFormat::Single => 0,
        };
        if self.elements.slots[slot_id as usize].is_some() {
            return Err(TraceError::new(Severity::Error, ErrCode::AttachTooMany)
                .with_message(format!("trace ID 0x{slot_id:x} already has a decoder")));
        }
        let mut ctx = self.decode_context();
        ctx.instance_id = match self.format {
            SourceFormat::Formatted(_) => Some(slot_id),
            SourceFormat::Single => None,
        };
        let component = factory.create(cfg, &ctx)?;
        self.elements.attach(slot_id);
        self.elements.slots[slot_id as usize] = Some(TreeElement {
            protocol: factory.protocol_name().to_string(),
            source_name: cfg.name.clone(),
            config_trace_id: config_id,
            component,
        });
        Ok(slot_id)
    }

    /// Places a hand-made decoder on `id`.
    pub fn add_decoder(&mut self, id: u8, protocol: &str, component: Box<dyn TraceComponent>) -> Result<(), ErrCode> {
        let slot = self.elements.slots.get_mut(id as usize).ok_or(ErrCode::InvalidId)?;
        if slot.is_some() {
            return Err(ErrCode::AttachTooMany);
        }
        *slot = Some(TreeElement {
            protocol: protocol.to_string(),
            source_name: String::new(),
            config_trace_id: id,
            component,
        });
        self.elements.attach(id);
        Ok(())
    }

    /// Takes out the decoder created for trace ID `id` (on a single-source
    /// tree, its only decoder) and returns it, or `None` when there is none
    /// (OpenCSD's `removeDecoder`, which also succeeds then). Data for `id`
    /// is dropped from then on, as for any ID with no decoder, and a new
    /// decoder may be created for it. An `id` that is no CoreSight trace ID
    /// (above 0x7f) on a formatted tree is [`ErrCode::InvalidId`].
    pub fn remove_decoder(&mut self, id: u8) -> Result<Option<TreeElement>, ErrCode> {
        let slot = match self.format {
            SourceFormat::Formatted(_) if id > 0x7f => return Err(ErrCode::InvalidId),
            SourceFormat::Formatted(_) => id,
            SourceFormat::Single => 0,
        };
        let removed = self.elements.slots[slot as usize].take();
        if let Ok(at) = self.elements.attached.binary_search(&slot) {
            self.elements.attached.remove(at);
        }
        Ok(removed)
    }

    /// Unmaps the memory image holding `addr` in a memory space overlapping
    /// `space` (OpenCSD's `removeMemAccByAddress`): see
    /// [`MemAccMapper::remove_accessor_at`]. A packets-only tree has no
    /// memory: [`MemoryError::NoMemory`].
    pub fn remove_mem_acc(&mut self, addr: u64, space: MemSpace) -> Result<(), MemoryError> {
        let m = self.mapper.as_ref().ok_or(MemoryError::NoMemory)?;
        m.borrow_mut().remove_accessor_at(addr, space)
    }

    /// The decoders, in trace ID order.
    pub fn elements(&self) -> impl Iterator<Item = (u8, &TreeElement)> {
        self.elements
            .slots
            .iter()
            .enumerate()
            .filter_map(|(id, e)| e.as_ref().map(|e| (id as u8, e)))
    }

    /// Number of decoders.
    pub fn decoder_count(&self) -> usize {
        self.elements.slots.iter().flatten().count()
    }

    /// Attaches a packet printer writing to `out` to the decoder on `id`.
    pub fn attach_packet_printer(
        &mut self,
        id: u8,
        out: Shared<MsgLogger>,
        monitor: bool,
        test_waits: u32,
    ) -> Result<(), ErrCode> {
        let mut p = PacketPrinter::new(id, out);
        p.set_test_waits(test_waits);
        self.attach_printer(id, p, monitor)
    }

    /// Attaches a configured packet printer to the decoder on `id`: as a
    /// monitor beside the packet decoder, or as the packet sink.
    pub fn attach_printer(&mut self, id: u8, printer: PacketPrinter, monitor: bool) -> Result<(), ErrCode> {
        let e = self
            .elements
            .slots
            .get_mut(id as usize)
            .and_then(Option::as_mut)
            .ok_or(ErrCode::InvalidId)?;
        e.component.attach_packet_printer(printer, monitor)
    }

    /// Reproduces an OpenCSD 1.8.0 behaviour (off by default, also in a
    /// tree built from a snapshot; `trc_pkt_lister` and the C API turn it
    /// on): when a
    /// formatter frame switches to a trace ID and away again with no data
    /// byte between, OpenCSD hands that ID's decoder a zero-length block,
    /// which its packet processor rejects as a fatal invalid parameter
    /// (`Packet Processor: Zero length data block or NULL pointer error`),
    /// stopping the data path. Without this the empty block is dropped and
    /// decoding carries on.
    pub fn set_opencsd_empty_blocks(&mut self, on: bool) {
        self.elements.opencsd_empty_blocks = on;
    }

    /// Makes the deformatter behave as OpenCSD 1.8.0's: a fatal error
    /// when the first block has no frame sync, and its errors not logged
    /// (see [`FrameDeformatter::set_opencsd_behaviour`]; no effect without
    /// a deformatter).
    pub fn set_opencsd_deformatter(&mut self, on: bool) {
        if let Some(d) = self.deformatter.as_mut() {
            d.set_opencsd_behaviour(on);
        }
    }

    /// Attaches a trace-ID stream indexer to the decoder on `id` (see
    /// [`crate::index`]).
    pub fn attach_stream_indexer(
        &mut self,
        id: u8,
        indexer: Box<dyn crate::hooks::StreamIndexer>,
    ) -> Result<(), ErrCode> {
        let e = self
            .elements
            .slots
            .get_mut(id as usize)
            .and_then(Option::as_mut)
            .ok_or(ErrCode::InvalidId)?;
        e.component.attach_indexer(indexer)
    }

    /// Attaches the source indexer to the deformatter (formatted sources).
    pub fn set_source_indexer(&mut self, indexer: Box<dyn crate::hooks::SourceIndexer>) -> Result<(), ErrCode> {
        let d = self.deformatter.as_mut().ok_or(ErrCode::DcdtNoFormatter)?;
        d.set_source_indexer(Some(indexer));
        Ok(())
    }

    /// Makes the decoder on `id` see only its bytes with `begin <= index <
    /// end`: the tree is told to begin at byte `begin` for that ID (an
    /// indexed sync point) and stop before `end`. With a formatted source
    /// the data handed to the tree must still start at a frame boundary:
    /// see [`DecodeTree::resume_at_frame`].
    pub fn set_id_window(&mut self, id: u8, begin: TrcIndex, end: TrcIndex) {
        let w = self
            .elements
            .windows
            .get_or_insert_with(|| Box::new([(0, TrcIndex::MAX); 128]));
        w[id as usize & 0x7f] = (begin, end);
    }

    /// Makes the decoder on `id` start in the high nibble of the first byte
    /// it is given (with [`DecodeTree::set_id_window`], the window's
    /// first byte): for a sync point recorded there (STM, see
    /// [`crate::hooks::EntryKind::Sync`]). On a single-source tree `id` is
    /// ignored (its one decoder). Fails for protocols whose packets are
    /// whole bytes.
    pub fn start_id_at_high_nibble(&mut self, id: u8) -> Result<(), ErrCode> {
        self.decoder_of(id)?.component.start_at_high_nibble()
    }

    /// Gives trace ID `id`'s decoder, before its first packet, what the
    /// serial decode knew at the sync point it is started at (with
    /// [`DecodeTree::set_id_window`]): the PTM / ETMv3 VMID, which their
    /// sync packets do not repeat. On a single-source tree `id` is ignored
    /// (its one decoder). True when the decoder keeps it (protocols whose
    /// sync points repeat everything have no use for it); fails with
    /// [`ErrCode::InvalidId`] when no decoder has `id`.
    pub fn resume_id_state(&mut self, id: u8, state: &crate::interfaces::ResumeState) -> Result<bool, ErrCode> {
        Ok(self.decoder_of(id)?.component.resume(state))
    }

    /// The decoder of trace ID `id` (on a single-source tree, its one
    /// decoder whatever `id`).
    fn decoder_of(&mut self, id: u8) -> Result<&mut TreeElement, ErrCode> {
        let slot = match self.format {
            SourceFormat::Formatted(_) => id,
            SourceFormat::Single => self.elements.slots.iter().position(Option::is_some).unwrap_or(0) as u8,
        };
        self.elements
            .slots
            .get_mut(slot as usize)
            .and_then(Option::as_mut)
            .ok_or(ErrCode::InvalidId)
    }

    /// Makes the deformatter start again at a frame boundary with `id` in
    /// effect (a source index checkpoint): the next data block must begin
    /// with that frame.
    pub fn resume_at_frame(&mut self, id: Option<u8>) -> Result<(), ErrCode> {
        let d = self.deformatter.as_mut().ok_or(ErrCode::DcdtNoFormatter)?;
        d.resume_at_frame(id);
        Ok(())
    }

    /// Logs the mapped memory images as OpenCSD's `logMappedRanges` does.
    pub fn describe_mapped_ranges(&self, out: &mut String) {
        out.push_str("Gen_Info : Mapped Memory Accessors\n");
        if let Some(m) = &self.mapper {
            m.borrow().describe(out);
        }
        out.push_str("Gen_Info : ========================\n");
    }
}

impl TrcDataIn for DecodeTree {
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        match self.deformatter.as_mut() {
            Some(d) => d.trace_data_in(op, index, data, &mut self.elements),
            None => match op {
                DatapathOp::Data => match self.elements.windows.as_deref() {
                    Some(w) => {
                        let id = self.elements.slots.iter().position(Option::is_some).unwrap_or(0) as u8;
                        let win = w[id as usize];
                        self.elements.windowed(id, index, data, win)
                    }
                    None => match self.elements.slots.iter_mut().flatten().next() {
                        Some(e) => e.component.trace_data_in(op, index, data),
                        None => (DatapathResp::Cont, data.len()),
                    },
                },
                _ => {
                    // A single source has no trace IDs to filter (OpenCSD
                    // filters in the deformatter only): its data reaches
                    // the decoder whatever the filter, so must the end of
                    // trace and flushes.
                    let filter = self.elements.filter.take();
                    let r = self.elements.all_ids_op(op, index);
                    self.elements.filter = filter;
                    (r, 0)
                }
            },
        }
    }
}
