//! CoreSight frame deformatter: splits 16-byte formatter frames into one
//! byte stream per trace ID, each byte keeping its index in the buffer.
//!
//! Input can be memory-aligned frames (ETB, ETR), a TPIU stream with frame
//! syncs (FSYNC `ff ff ff 7f`) and optionally half-frame syncs (HSYNC
//! `ff 7f`), or DSTREAM captures (FSYNC streams cut into blocks). Frames are
//! unpacked as the CoreSight architecture lays them out: even bytes carry
//! an ID (bit 0 set) or data (bit 0 in byte 15), odd bytes are data.
//!
//! Unpacked data goes to an [`IdStreamSink`]; a downstream `Wait` stops the
//! deformatter mid-frame and a later `Flush` delivers the rest, so nothing
//! is lost or repeated.

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::hooks::{FrameRecord, FrameRun, SourceIndexer};
use crate::interfaces::{RawFrameKind, TrcRawFrameIn};
use crate::logger::ErrLink;

const FRAME_SIZE: usize = 16;
const FSYNC: [u8; 4] = [0xff, 0xff, 0xff, 0x7f];
const HSYNC: [u8; 2] = [0xff, 0x7f];

/// Input format and monitoring options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeformatterConfig {
    /// Frames are 16-byte aligned in memory (ETB/ETR); no syncs in-frame.
    pub mem_aligned: bool,
    /// The stream carries FSYNCs (TPIU, DSTREAM).
    pub fsyncs: bool,
    /// The stream carries HSYNCs (TPIU with half-frame syncs).
    pub hsyncs: bool,
    /// With memory-aligned frames: four consecutive FSYNCs reset the
    /// decoders (the padding some capture drivers insert between blocks).
    pub reset_on_4x_fsync: bool,
    /// Show raw input frames to the raw frame monitor.
    pub raw_packed: bool,
    /// Show unpacked per-ID data to the raw frame monitor.
    pub raw_unpacked: bool,
}

impl DeformatterConfig {
    /// Memory-aligned frames (ETB/ETR buffers).
    pub fn mem_aligned() -> Self {
        DeformatterConfig {
            mem_aligned: true,
            ..Default::default()
        }
    }
    /// A TPIU / DSTREAM stream with frame syncs.
    pub fn fsync_stream() -> Self {
        DeformatterConfig {
            fsyncs: true,
            ..Default::default()
        }
    }

    /// Checks the combination, as OpenCSD's deformatter does.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(self.mem_aligned || self.fsyncs || self.hsyncs) {
            return Err("No Config Flags Set");
        }
        if self.mem_aligned && (self.fsyncs || self.hsyncs) {
            return Err("Invalid Config Flag Combination Set");
        }
        Ok(())
    }

    /// The block size multiple input must come in.
    pub fn alignment(&self) -> usize {
        if self.hsyncs {
            2
        } else if self.fsyncs {
            4
        } else {
            16
        }
    }
}

/// Where unpacked per-ID data goes.
pub trait IdStreamSink {
    /// Whether anything consumes data for `id`.
    fn is_attached(&self, id: u8) -> bool;
    /// Data for `id` starting at `index`; returns the response and bytes used.
    fn id_data_in(&mut self, id: u8, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize);
    /// Sends a non-data operation to every attached stream; returns the
    /// most severe response.
    fn all_ids_op(&mut self, op: DatapathOp, index: TrcIndex) -> DatapathResp;
    /// A frame switched to `id` and away again with no data byte between,
    /// leaving `id` an empty block at `index`. Ignored by default; OpenCSD
    /// hands the empty block to the ID's packet processor, which rejects
    /// it as a fatal invalid parameter (see
    /// `DecodeTree::set_opencsd_empty_blocks`).
    fn empty_block(&mut self, _id: u8, _index: TrcIndex) -> DatapathResp {
        DatapathResp::Cont
    }
    /// The block about to be handed on is the `chunk`th of the frame that
    /// starts at `frame_index`: its place in the serial order (see
    /// [`crate::datapath::SerialKey`]). Ignored by default.
    fn chunk_position(&mut self, _frame_index: TrcIndex, _chunk: usize) {}
    /// The deformatter is about to report an error found at `index`,
    /// before any block of data at or after it. Ignored by default.
    fn error_position(&mut self, _index: TrcIndex) {}
}

/// Byte counts by kind (the lister's `-stats` demux figures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemuxStats {
    /// Bytes delivered to attached IDs.
    pub valid_id_bytes: u64,
    /// Bytes for IDs nothing is attached to.
    pub no_id_bytes: u64,
    /// Bytes for reserved IDs (0x00, 0x70..=0x7f).
    pub reserved_id_bytes: u64,
    /// Bytes before any ID was seen.
    pub unknown_id_bytes: u64,
    /// Frame overhead: ID bytes, flag bytes and syncs.
    pub frame_bytes: u64,
}

/// One run of data for one ID unpacked from the current frame.
#[derive(Clone, Copy, Default)]
struct Chunk {
    id: Option<u8>,
    index: TrcIndex,
    data: [u8; FRAME_SIZE],
    valid: usize,
    used: usize,
}

impl Chunk {
    /// Starts a new run in this slot. As in OpenCSD, the data bytes of
    /// earlier frames stay in the slot (see [`overread`]).
    fn restart(&mut self, id: Option<u8>, index: TrcIndex) {
        self.id = id;
        self.index = index;
        self.valid = 0;
        self.used = 0;
    }
}

/// The 15 data bytes of a frame that changes no ID (bit 0 of every even
/// byte clear) into `out[..15]`: each even byte gets its bit 0 from the
/// flags byte, bit `k` for byte `2k`. Done a half frame at a time: a
/// multiply places four flag bits 16 bits apart (its four partial products
/// do not overlap, so nothing carries). `out[15]` is left as it was.
#[inline(always)]
fn unpack_single_id(f: &[u8; FRAME_SIZE], out: &mut [u8; FRAME_SIZE]) {
    const SPREAD: u64 = 1 | 1 << 15 | 1 << 30 | 1 << 45;
    const LSBS: u64 = 0x0001_0001_0001_0001;
    let flags = u64::from(f[15]);
    let frame = u128::from_le_bytes(*f);
    let lo = frame as u64 | (((flags & 0xf) * SPREAD) & LSBS);
    let hi = (frame >> 64) as u64 | (((flags >> 4) * SPREAD) & LSBS);
    out[..8].copy_from_slice(&lo.to_le_bytes());
    out[8..15].copy_from_slice(&hi.to_le_bytes()[..7]);
}

/// A fault, with the bytes of the block it leaves used (`ALL`: the whole
/// block).
struct Fault(TraceError, DatapathResp, usize);

const ALL: usize = usize::MAX;

/// The frame deformatter (OpenCSD's `TraceFormatterFrameDecoder`).
pub struct FrameDeformatter {
    cfg: DeformatterConfig,
    raw_mon: Option<Box<dyn TrcRawFrameIn>>,
    raw_enabled: [bool; 128],
    err: Option<ErrLink>,
    stats: DemuxStats,

    // stream state
    synced: bool,
    first_data: bool,
    curr_idx: TrcIndex,
    curr_id: Option<u8>,

    // frame being extracted
    frame: [u8; FRAME_SIZE],
    frame_len: usize,
    frame_sof: TrcIndex,

    // unpacked output of the current frame
    chunks: [Chunk; 8],
    chunk_count: usize,
    chunks_done: usize,

    highest: DatapathResp,

    /// Source indexer (see [`crate::hooks`]; the index implements it): told of every frame.
    indexer: Option<Box<dyn SourceIndexer>>,

    /// Start of a possible FSYNC cut off by the end of the last block
    /// (half-frame sync streams only, where FSYNCs need not be 4-aligned).
    stash: [u8; 4],
    stash_len: usize,

    /// Memory-aligned input: the start of a frame cut off by the end of
    /// the last block (blocks need not be whole frames), starting at
    /// `curr_idx`.
    partial: [u8; FRAME_SIZE],
    partial_len: usize,
    /// The incomplete frame the trace ended with: (index, bytes).
    tail: Option<(TrcIndex, usize)>,
    /// Behave as OpenCSD's deformatter (see
    /// [`FrameDeformatter::set_opencsd_behaviour`]).
    opencsd: bool,
}

impl FrameDeformatter {
    /// A deformatter for input laid out as `cfg` says.
    pub fn new(cfg: DeformatterConfig) -> Self {
        FrameDeformatter {
            cfg,
            raw_mon: None,
            raw_enabled: [true; 128],
            err: None,
            stats: DemuxStats::default(),
            synced: false,
            first_data: false,
            curr_idx: 0,
            curr_id: None,
            frame: [0; FRAME_SIZE],
            frame_len: 0,
            frame_sof: 0,
            chunks: [Chunk::default(); 8],
            chunk_count: 0,
            chunks_done: 0,
            highest: DatapathResp::Cont,
            stash: [0; 4],
            stash_len: 0,
            partial: [0; FRAME_SIZE],
            partial_len: 0,
            tail: None,
            indexer: None,
            opencsd: false,
        }
    }

    /// Reproduces OpenCSD 1.8.0's deformatter (off by default;
    /// `trc_pkt_lister` and the C API turn it on). Its search for the
    /// first FSYNC takes a block without one but for its last three
    /// bytes, which cannot make an aligned block on their own, so the
    /// next call fails as a fatal `Input block incorrect size` error; and
    /// its errors reach no logger (its lister shows none), so they are
    /// kept only as the tree's last reason
    /// ([`ErrorLogger::last_reason`](crate::logger::ErrorLogger::last_reason)).
    /// Off, an FSYNC may straddle blocks, trace that ends with none at
    /// all is a fatal error at the end of trace, and errors are logged.
    pub fn set_opencsd_behaviour(&mut self, on: bool) {
        self.opencsd = on;
    }

    /// Attaches the source indexer (the design's attachment point at frame
    /// level): it is told of each frame unpacked and each frame sync.
    pub fn set_source_indexer(&mut self, indexer: Option<Box<dyn SourceIndexer>>) {
        self.indexer = indexer;
    }

    /// Starts again at a frame boundary, as if synchronised, with `id` the
    /// trace ID in effect at that frame's start (as a source index
    /// records it): the next data block must begin with that frame. Used
    /// to decode from the middle of a capture.
    pub fn resume_at_frame(&mut self, id: Option<u8>) {
        self.reset_state();
        self.synced = true;
        self.curr_id = id;
    }

    /// The input format.
    pub fn config(&self) -> DeformatterConfig {
        self.cfg
    }

    /// Changes the input format. Fails (and logs) an invalid combination.
    pub fn configure(&mut self, cfg: DeformatterConfig) -> Result<(), ErrCode> {
        if let Err(msg) = cfg.validate() {
            self.log(TraceError::new(Severity::Error, ErrCode::InvalidParamVal).with_message(msg));
            return Err(ErrCode::InvalidParamVal);
        }
        self.cfg = cfg;
        Ok(())
    }

    /// Sets the error logger link.
    pub fn set_error_link(&mut self, err: ErrLink) {
        self.err = Some(err);
    }

    /// Attaches the raw frame monitor.
    pub fn set_raw_monitor(&mut self, mon: Option<Box<dyn TrcRawFrameIn>>) {
        self.raw_mon = mon;
    }

    /// Restricts raw unpacked output to the given IDs (all when `None`).
    pub(crate) fn set_raw_id_filter(&mut self, ids: Option<&[u8]>) {
        match ids {
            None => self.raw_enabled = [true; 128],
            Some(list) => {
                self.raw_enabled = [false; 128];
                for &id in list {
                    if let Some(e) = self.raw_enabled.get_mut(id as usize) {
                        *e = true;
                    }
                }
            }
        }
    }

    /// Bytes handled so far, by kind.
    pub fn stats(&self) -> DemuxStats {
        self.stats
    }

    /// The incomplete frame memory-aligned trace ended with, as
    /// (index of its first byte, bytes): trace whose length is not a
    /// multiple of 16 has its whole frames decoded and this tail left
    /// over. Set at the end of trace (a warning is logged then too).
    pub fn incomplete_tail(&self) -> Option<(TrcIndex, usize)> {
        self.tail
    }

    fn log(&self, e: TraceError) {
        match &self.err {
            Some(l) if self.opencsd => l.note(&e),
            Some(l) => l.log(&e),
            None => {}
        }
    }

    fn raw(&mut self, index: TrcIndex, kind: RawFrameKind, data: &[u8], id: Option<u8>) {
        if let Some(m) = self.raw_mon.as_mut() {
            m.trace_raw_frame_in(DatapathOp::Data, index, kind, data, id);
        }
    }

    fn collate(&mut self, resp: DatapathResp) {
        self.highest = self.highest.worst(resp);
    }

    /// Processes one data-path operation, sending unpacked data to `sink`.
    pub fn trace_data_in(
        &mut self,
        op: DatapathOp,
        index: TrcIndex,
        data: &[u8],
        sink: &mut dyn IdStreamSink,
    ) -> (DatapathResp, usize) {
        self.highest = DatapathResp::Cont;
        match op {
            DatapathOp::Reset => {
                self.reset_state();
                (sink.all_ids_op(DatapathOp::Reset, index), 0)
            }
            DatapathOp::Flush => {
                let r = sink.all_ids_op(DatapathOp::Flush, 0);
                self.collate(r);
                if self.highest.is_cont() {
                    self.output_frame(sink);
                }
                (self.highest, 0)
            }
            DatapathOp::Eot => {
                if self.partial_len > 0 {
                    self.tail = Some((self.curr_idx, self.partial_len));
                    self.log(
                        TraceError::new(Severity::Warn, ErrCode::InvalidParamVal).at(self.curr_idx).with_message(format!(
                            "Incomplete frame at end of trace: {} bytes not decoded (frames are {FRAME_SIZE} bytes).\n",
                            self.partial_len
                        )),
                    );
                    self.curr_idx += self.partial_len as TrcIndex;
                    self.partial_len = 0;
                }
                if self.first_data && !self.synced && self.cfg.fsyncs {
                    // Nothing was decoded: say so rather than end as if
                    // the trace were empty.
                    self.log(
                        TraceError::new(Severity::Error, ErrCode::DfmtrBadFhSync)
                            .at(self.curr_idx)
                            .with_message("No frame sync (FSYNC) found before the end of trace: nothing decoded."),
                    );
                    return (DatapathResp::FatalInvalidData, 0);
                }
                (sink.all_ids_op(DatapathOp::Eot, 0), 0)
            }
            DatapathOp::Data => {
                if data.is_empty() {
                    return (DatapathResp::FatalInvalidParam, 0);
                }
                // Output still held back by a wait goes first.
                if self.chunks_done < self.chunk_count && !self.output_frame(sink) {
                    return (self.highest, 0);
                }
                let done = if self.cfg.mem_aligned {
                    self.process_frames(index, data, sink)
                } else {
                    self.process(index, data, sink)
                };
                match done {
                    Ok(used) => (self.highest, used),
                    Err(Fault(e, resp, used)) => {
                        sink.error_position(self.curr_idx);
                        self.log(e);
                        self.collate(resp);
                        // What was taken before the fault, as OpenCSD
                        // counts it: the bytes before the frame at fault.
                        let used = if used == ALL {
                            self.curr_idx.saturating_sub(index) as usize
                        } else {
                            used
                        };
                        (self.highest, used.min(data.len()))
                    }
                }
            }
        }
    }

    fn reset_state(&mut self) {
        self.synced = false;
        self.first_data = false;
        self.curr_id = None;
        self.frame_len = 0;
        self.chunk_count = 0;
        self.chunks_done = 0;
        self.stash_len = 0;
        self.partial_len = 0;
        self.tail = None;
    }

    /// Memory-aligned input in blocks of any length: whole frames are
    /// decoded as they come; the start of a frame cut off by the end of a
    /// block is kept and completed by the next block, and reported at the
    /// end of trace if nothing completes it. (OpenCSD refuses a block that
    /// is not a multiple of 16 bytes, so that a trace whose length is not
    /// one decoded nothing at all.)
    fn process_frames(&mut self, index: TrcIndex, data: &[u8], sink: &mut dyn IdStreamSink) -> Result<usize, Fault> {
        if !self.first_data {
            self.curr_idx = index;
            self.first_data = true;
        } else if self.curr_idx + self.partial_len as TrcIndex != index {
            return Err(Fault(
                TraceError::new(Severity::Error, ErrCode::DfmtrNotContTrace).at(index),
                DatapathResp::FatalInvalidData,
                0,
            ));
        }
        let mut used = 0;
        if self.partial_len > 0 {
            let take = (FRAME_SIZE - self.partial_len).min(data.len());
            self.partial[self.partial_len..self.partial_len + take].copy_from_slice(&data[..take]);
            self.partial_len += take;
            used = take;
            if self.partial_len < FRAME_SIZE {
                return Ok(used);
            }
            let frame = self.partial;
            self.partial_len = 0;
            self.process(self.curr_idx, &frame, sink)?;
            if !self.highest.is_cont() {
                return Ok(used);
            }
        }
        let rest = &data[used..];
        let whole = rest.len() - rest.len() % FRAME_SIZE;
        if whole > 0 {
            let n = self.process(index + used as TrcIndex, &rest[..whole], sink)?;
            used += n;
            if n < whole {
                return Ok(used);
            }
        }
        let cut = &rest[whole..];
        self.partial[..cut.len()].copy_from_slice(cut);
        self.partial_len = cut.len();
        Ok(used + cut.len())
    }

    fn process(&mut self, index: TrcIndex, data: &[u8], sink: &mut dyn IdStreamSink) -> Result<usize, Fault> {
        if !self.first_data {
            self.curr_idx = index;
        } else if self.curr_idx != index {
            return Err(Fault(
                TraceError::new(Severity::Error, ErrCode::DfmtrNotContTrace).at(index),
                DatapathResp::FatalInvalidData,
                0,
            ));
        }
        self.first_data = true;
        let align = self.cfg.alignment();
        if !data.len().is_multiple_of(align) {
            return Err(Fault(
                TraceError::new(Severity::Error, ErrCode::InvalidParamVal)
                    .with_message(format!("Input block incorrect size, must be {align} byte multiple")),
                DatapathResp::FatalInvalidData,
                0,
            ));
        }

        let mut pos = 0usize;
        if !self.synced {
            if self.cfg.fsyncs {
                pos = self.find_first_fsync(data);
                self.curr_idx += pos as TrcIndex;
            } else {
                self.synced = true;
            }
        }
        if !self.synced {
            return Ok(pos);
        }

        // Memory-aligned frames with nothing watching them frame by frame
        // may take the single-ID path.
        let direct = self.cfg.mem_aligned && !self.cfg.raw_packed && !self.cfg.raw_unpacked && self.indexer.is_none();
        loop {
            if direct && !self.single_id_frames(data, &mut pos, sink) {
                break;
            }
            let (cont, used) = self.extract_frame(data, pos, sink)?;
            pos += used;
            if !cont {
                break;
            }
            self.unpack_frame();
            if !self.output_frame(sink) {
                break;
            }
        }
        Ok(pos)
    }

    /// Whole memory-aligned frames from `pos` that change no ID, for an
    /// attached ID that wants no overread image: the usual case with one
    /// busy source. Each is unpacked from the input straight into the
    /// first chunk and delivered, leaving the state `extract_frame`,
    /// `unpack_frame` and `output_frame` would (so a wait resumes the
    /// same way), without their checks for what cannot occur here. Stops
    /// at the first other frame (an FSYNC has ID bits set too), which the
    /// general path then takes. Returns false when the sink asked to wait.
    #[inline]
    fn single_id_frames(&mut self, data: &[u8], pos: &mut usize, sink: &mut dyn IdStreamSink) -> bool {
        let Some(id) = self.curr_id else {
            return true;
        };
        if !sink.is_attached(id) || overread::wanted(id) {
            return true;
        }
        while let Some(f) = data.get(*pos..).and_then(|d| d.first_chunk::<FRAME_SIZE>()) {
            if (f[0] | f[2] | f[4] | f[6] | f[8] | f[10] | f[12] | f[14]) & 1 != 0 {
                break;
            }
            let sof = self.curr_idx;
            let c = &mut self.chunks[0];
            c.restart(Some(id), sof);
            unpack_single_id(f, &mut c.data);
            c.valid = FRAME_SIZE - 1;
            *pos += FRAME_SIZE;
            self.curr_idx += FRAME_SIZE as TrcIndex;
            self.frame_sof = sof;
            self.stats.frame_bytes += 1;
            self.chunk_count = 1;
            self.chunks_done = 0;
            sink.chunk_position(sof, 0);
            let (resp, used) = sink.id_data_in(id, sof, &self.chunks[0].data[..FRAME_SIZE - 1]);
            self.collate(resp);
            self.stats.valid_id_bytes += used as u64;
            if !self.highest.is_cont() {
                let c = &mut self.chunks[0];
                c.used = used.min(c.valid);
                if c.used == c.valid {
                    self.chunks_done = 1;
                }
                return false;
            }
            self.chunks_done = 1;
        }
        true
    }

    /// Looks for the first FSYNC, which may straddle blocks. Returns where
    /// synchronised data starts in `data` (at the FSYNC, or after the end of
    /// one completed from the previous block), or `data.len()` if none.
    fn find_first_fsync(&mut self, data: &[u8]) -> usize {
        if self.stash_len > 0 {
            let need = 4 - self.stash_len;
            let avail = need.min(data.len());
            if data[..avail] == FSYNC[self.stash_len..self.stash_len + avail] {
                if avail == need {
                    self.stash_len = 0;
                    self.synced = true;
                    return need;
                }
                self.stash_len += avail;
                return data.len();
            }
            self.stash_len = 0;
        }
        if let Some(p) = data.windows(4).position(|w| w == FSYNC) {
            self.synced = true;
            return p;
        }
        if self.opencsd {
            return data.len().saturating_sub(3);
        }
        // Keep the longest tail that could start an FSYNC.
        self.stash_len = (1..=3.min(data.len()))
            .rev()
            .find(|&k| FSYNC.starts_with(&data[data.len() - k..]))
            .unwrap_or(0);
        self.stash[..self.stash_len].copy_from_slice(&data[data.len() - self.stash_len..]);
        data.len()
    }

    /// Pulls the next frame (or the part of it this block holds) out of
    /// `data` from `pos`. Returns whether a full frame is ready and how
    /// many input bytes were consumed.
    fn extract_frame(&mut self, data: &[u8], pos: usize, sink: &mut dyn IdStreamSink) -> Result<(bool, usize), Fault> {
        let mut fsync_bytes = 0usize;
        let mut hsync_bytes = 0usize;
        let mut ex_bytes = 0usize;
        let cont;

        if self.cfg.mem_aligned {
            if self.cfg.reset_on_4x_fsync {
                let n = data[pos..].chunks_exact(4).take_while(|w| *w == FSYNC).count();
                if n > 0 {
                    fsync_bytes = n * 4;
                    if self.cfg.raw_packed || self.cfg.raw_unpacked {
                        let idx = self.curr_idx;
                        self.raw_mon_bytes(idx, RawFrameKind::FSync, &data[pos..pos + fsync_bytes]);
                    }
                    if n % 4 == 0 {
                        let r = sink.all_ids_op(DatapathOp::Reset, self.curr_idx);
                        self.collate(r);
                        self.curr_id = None;
                        self.frame_len = 0;
                    } else {
                        return Err(Fault(
                            TraceError::new(Severity::Error, ErrCode::DfmtrBadFhSync)
                                .at(self.curr_idx)
                                .with_message("Incorrect FSYNC frame reset pattern"),
                            DatapathResp::FatalInvalidData,
                            ALL,
                        ));
                    }
                }
            }
            let start = pos + fsync_bytes;
            if data.len() - start < FRAME_SIZE {
                self.frame_len = 0;
                cont = false;
            } else {
                self.frame.copy_from_slice(&data[start..start + FRAME_SIZE]);
                self.frame_len = FRAME_SIZE;
                self.frame_sof = self.curr_idx + fsync_bytes as TrcIndex;
                ex_bytes = FRAME_SIZE;
                cont = true;
            }
        } else {
            let mut p = pos;
            let mut more = p < data.len();
            if self.stash_len > 0 && more {
                // Finish the FSYNC the last block may have cut, or take the
                // held bytes as frame data after all.
                let need = 4 - self.stash_len;
                let avail = (data.len() - p).min(need);
                let mut joined = self.stash;
                joined[self.stash_len..self.stash_len + avail].copy_from_slice(&data[p..p + avail]);
                if avail == need && joined == FSYNC {
                    fsync_bytes += need;
                    p += need;
                    more = p < data.len();
                } else {
                    self.frame_sof = self.curr_idx - self.stash_len as TrcIndex;
                    for pair in self.stash[..self.stash_len].chunks_exact(2) {
                        self.frame[self.frame_len] = pair[0];
                        self.frame[self.frame_len + 1] = pair[1];
                        self.frame_len += 2;
                    }
                }
                self.stash_len = 0;
            }
            if self.cfg.fsyncs && more && self.frame_len == 0 {
                while more && data[p..].starts_with(&FSYNC) {
                    fsync_bytes += 4;
                    p += 4;
                    more = p < data.len();
                }
                let rest = &data[p..];
                if self.cfg.hsyncs
                    && !rest.is_empty()
                    && rest.len() < 4
                    && rest.len().is_multiple_of(2)
                    && FSYNC.starts_with(rest)
                {
                    self.stash[..rest.len()].copy_from_slice(rest);
                    self.stash_len = rest.len();
                    hsync_bytes += rest.len();
                    p = data.len();
                    more = false;
                }
            }
            while self.frame_len < FRAME_SIZE && more {
                if self.frame_len.is_multiple_of(4) && data[p..].starts_with(&FSYNC) {
                    return Err(Fault(
                        TraceError::new(Severity::Error, ErrCode::DfmtrBadFhSync)
                            .at(self.curr_idx)
                            .with_message("Bad FSYNC in frame."),
                        DatapathResp::FatalInvalidData,
                        ALL,
                    ));
                }
                if self.frame_len == 0 {
                    self.frame_sof = self.curr_idx + fsync_bytes as TrcIndex;
                }
                if p + 1 >= data.len() {
                    // Odd trailing byte (cannot happen with aligned input).
                    break;
                }
                let pair = [data[p], data[p + 1]];
                if pair == HSYNC {
                    if !self.cfg.hsyncs {
                        return Err(Fault(
                            TraceError::new(Severity::Error, ErrCode::DfmtrBadFhSync)
                                .at(self.curr_idx)
                                .with_message("Bad HSYNC in frame."),
                            DatapathResp::FatalInvalidData,
                            ALL,
                        ));
                    }
                    hsync_bytes += 2;
                } else {
                    self.frame[self.frame_len] = pair[0];
                    self.frame[self.frame_len + 1] = pair[1];
                    self.frame_len += 2;
                    ex_bytes += 2;
                }
                p += 2;
                more = p < data.len();
            }
            cont = more || self.frame_len == FRAME_SIZE;
        }

        if fsync_bytes > 0
            && let Some(ix) = self.indexer.as_mut()
        {
            ix.frame_sync(self.curr_idx);
        }
        let total = ex_bytes + fsync_bytes + hsync_bytes;
        if (self.frame_len == FRAME_SIZE || !cont) && self.cfg.raw_packed && total > 0 {
            let idx = self.curr_idx;
            self.raw_mon_bytes(idx, RawFrameKind::Packed, &data[pos..pos + total]);
        }
        self.curr_idx += total as TrcIndex;
        self.stats.frame_bytes += (fsync_bytes + hsync_bytes) as u64;
        Ok((cont && self.frame_len == FRAME_SIZE, total))
    }

    fn raw_mon_bytes(&mut self, index: TrcIndex, kind: RawFrameKind, bytes: &[u8]) {
        if let Some(m) = self.raw_mon.as_mut() {
            m.trace_raw_frame_in(DatapathOp::Data, index, kind, bytes, None);
        }
    }

    /// Splits the extracted frame into per-ID chunks.
    fn unpack_frame(&mut self) {
        let f = self.frame;
        let flags = f[15];
        let sof = self.frame_sof;
        let id_at_start = self.curr_id;
        if (f[0] | f[2] | f[4] | f[6] | f[8] | f[10] | f[12] | f[14]) & 1 == 0 {
            // No ID change in the frame (the usual case with one busy
            // source): all 15 data bytes are the current ID's, each byte
            // at an even position completed by its bit of the flags byte.
            let c = &mut self.chunks[0];
            c.restart(self.curr_id, sof);
            unpack_single_id(&f, &mut c.data);
            c.valid = 15;
            self.stats.frame_bytes += 1;
            self.frame_len = 0;
            self.chunk_count = 1;
            self.chunks_done = 0;
            self.report_frame(sof, id_at_start);
            return;
        }
        // The run being filled is kept in locals, and written back when the
        // ID changes and at the end of the frame.
        let mut cur = 0usize;
        self.chunks[0].restart(self.curr_id, sof);
        let mut data = self.chunks[0].data;
        let mut valid = 0usize;
        // At most 15 data bytes come out of one frame.
        let push = |data: &mut [u8; FRAME_SIZE], valid: &mut usize, b: u8| {
            if *valid < FRAME_SIZE {
                data[*valid] = b;
                *valid += 1;
            }
        };
        let mut overhead = 1u64; // byte 15
        for pair in 0..7 {
            let i = 2 * pair;
            let flag = (flags >> pair) & 1;
            if f[i] & 1 == 0 {
                push(&mut data, &mut valid, f[i] | flag);
                push(&mut data, &mut valid, f[i + 1]);
                continue;
            }
            overhead += 1;
            let new_id = Some((f[i] >> 1) & 0x7f);
            if new_id == self.curr_id {
                push(&mut data, &mut valid, f[i + 1]);
                continue;
            }
            // Flag set: the byte after the ID still belongs to the old ID.
            if flag != 0 {
                push(&mut data, &mut valid, f[i + 1]);
            }
            self.curr_id = new_id;
            if valid > 0 {
                let c = &mut self.chunks[cur];
                c.data = data;
                c.valid = valid;
                cur += 1;
                let c = &mut self.chunks[cur];
                c.restart(c.id, sof + i as TrcIndex);
                data = c.data;
                valid = 0;
            }
            self.chunks[cur].id = self.curr_id;
            if flag == 0 {
                push(&mut data, &mut valid, f[i + 1]);
            }
        }
        if f[14] & 1 != 0 {
            self.curr_id = Some((f[14] >> 1) & 0x7f);
            overhead += 1;
        } else {
            push(&mut data, &mut valid, f[14] | (flags >> 7));
        }
        let c = &mut self.chunks[cur];
        c.data = data;
        c.valid = valid;
        self.stats.frame_bytes += overhead;
        self.frame_len = 0;
        self.chunk_count = cur + 1;
        self.chunks_done = 0;
        self.report_frame(sof, id_at_start);
    }

    /// Tells the source indexer, if one is attached, of the frame just
    /// unpacked.
    fn report_frame(&mut self, sof: TrcIndex, id_at_start: Option<u8>) {
        if let Some(ix) = self.indexer.as_mut() {
            let mut rec = FrameRecord {
                index: sof,
                id_at_start,
                runs: [FrameRun::default(); 8],
                count: self.chunk_count,
            };
            for (r, c) in rec.runs.iter_mut().zip(&self.chunks[..self.chunk_count]) {
                *r = FrameRun {
                    id: c.id,
                    index: c.index,
                    len: c.valid as u8,
                };
            }
            ix.frame(&rec);
        }
    }

    /// Delivers the unpacked chunks; false when a downstream component
    /// asked to wait (or failed).
    fn output_frame(&mut self, sink: &mut dyn IdStreamSink) -> bool {
        while self.chunks_done < self.chunk_count {
            let c = self.chunks[self.chunks_done];
            let data = &c.data[..c.valid];
            match c.id {
                Some(id) if sink.is_attached(id) => {
                    sink.chunk_position(self.frame_sof, self.chunks_done);
                    if self.cfg.raw_unpacked && c.used == 0 && self.raw_enabled[id as usize & 0x7f] {
                        self.raw(c.index, RawFrameKind::IdData, data, Some(id));
                    }
                    let (resp, used) = if c.used < c.valid {
                        let publish = overread::wanted(id);
                        if publish {
                            overread::publish(|buf| self.memory_after(self.chunks_done, buf));
                        }
                        let r = sink.id_data_in(id, c.index + c.used as TrcIndex, &data[c.used..]);
                        if publish {
                            overread::clear();
                        }
                        r
                    } else if c.valid == 0 {
                        (sink.empty_block(id, c.index), 0)
                    } else {
                        (DatapathResp::Cont, 0)
                    };
                    self.collate(resp);
                    self.stats.valid_id_bytes += used as u64;
                    if !self.highest.is_cont() {
                        let chunk = &mut self.chunks[self.chunks_done];
                        chunk.used = (chunk.used + used).min(chunk.valid);
                        if chunk.used == chunk.valid {
                            self.chunks_done += 1;
                        }
                        return false;
                    }
                    self.chunks_done += 1;
                }
                Some(id) => {
                    if self.cfg.raw_unpacked && self.raw_enabled[id as usize & 0x7f] {
                        self.raw(c.index, RawFrameKind::IdData, data, Some(id));
                    }
                    if id == 0 || id >= 0x70 {
                        self.stats.reserved_id_bytes += c.valid as u64;
                    } else {
                        self.stats.no_id_bytes += c.valid as u64;
                    }
                    self.chunks_done += 1;
                }
                None => {
                    if self.cfg.raw_unpacked {
                        self.raw(c.index, RawFrameKind::IdData, data, None);
                    }
                    self.stats.unknown_id_bytes += c.valid as u64;
                    self.chunks_done += 1;
                }
            }
        }
        true
    }
}

impl FrameDeformatter {
    /// Writes into `buf` the bytes that follow chunk `k`'s data in OpenCSD's
    /// deformatter (its array of per-ID output records: the rest of the
    /// record's data, its valid and used counts, the later records, then
    /// the record count and output position). Returns the bytes written.
    fn memory_after(&self, k: usize, buf: &mut [u8]) -> usize {
        let mut w = ImageWriter { buf, len: 0 };
        let c = &self.chunks[k];
        // OpenCSD's record holds 15 data bytes (the most a frame carries).
        const REC_DATA: usize = FRAME_SIZE - 1;
        w.put(&c.data[c.valid.min(REC_DATA)..REC_DATA]);
        w.put(&(c.valid as u32).to_le_bytes());
        w.put(&(c.used as u32).to_le_bytes());
        for c in &self.chunks[k + 1..] {
            w.put(&c.index.to_le_bytes());
            w.put(&[c.id.unwrap_or(0xff)]);
            w.put(&c.data[..REC_DATA]);
            w.put(&(c.valid as u32).to_le_bytes());
            w.put(&(c.used as u32).to_le_bytes());
        }
        w.put(&(self.chunk_count as i32 - 1).to_le_bytes());
        w.put(&(self.chunks_done as i32).to_le_bytes());
        w.len
    }
}

struct ImageWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl ImageWriter<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }
}

/// OpenCSD compatibility: the memory that follows a delivered block.
///
/// OpenCSD's STM and PTM packet processors, when they list the bytes of a
/// stream they have not synchronised on yet, can count bytes carried over
/// from the previous block and so list more bytes than the current block
/// holds, reading past its end. For a formatted source those bytes are the
/// rest of the deformatter's per-ID output record, and OpenCSD's listings
/// show them. To list such packets byte for byte, the consumer of a trace
/// ID registers an `overread::Interest` in it; while one exists, the
/// deformatter publishes the image of that memory for the duration of each
/// block it delivers to that ID, and `overread::following_bytes` reads
/// it. Nothing is published for unformatted sources (OpenCSD's bytes there
/// are not knowable).
pub(crate) mod overread {
    use std::cell::{Cell, RefCell};

    /// Largest image published (the deformatter's records after a block).
    pub(crate) const IMAGE_MAX: usize = 256;

    thread_local! {
        /// Interests registered, by trace ID.
        static INTEREST: [Cell<u16>; 128] = const { [const { Cell::new(0) }; 128] };
        static IMAGE: RefCell<([u8; IMAGE_MAX], usize)> = const { RefCell::new(([0; IMAGE_MAX], 0)) };
    }

    /// Keeps the image published for one trace ID while it lives.
    #[derive(Debug)]
    pub(crate) struct Interest(u8);

    impl Interest {
        /// An interest in the blocks delivered to trace ID `id`.
        pub(crate) fn register(id: u8) -> Interest {
            let id = id & 0x7f;
            INTEREST.with(|n| n[id as usize].set(n[id as usize].get() + 1));
            Interest(id)
        }
    }

    impl Drop for Interest {
        fn drop(&mut self) {
            INTEREST.with(|n| {
                let n = &n[self.0 as usize];
                n.set(n.get().saturating_sub(1));
            });
        }
    }

    pub(crate) fn wanted(id: u8) -> bool {
        INTEREST.with(|n| n[(id & 0x7f) as usize].get() > 0)
    }

    pub(crate) fn publish(fill: impl FnOnce(&mut [u8]) -> usize) {
        IMAGE.with(|i| {
            let mut i = i.borrow_mut();
            let len = fill(&mut i.0);
            i.1 = len;
        });
    }

    pub(crate) fn clear() {
        IMAGE.with(|i| i.borrow_mut().1 = 0);
    }

    /// Copies into `out` the bytes that follow the block being delivered
    /// now, as far as they are known; returns how many were copied.
    pub(crate) fn following_bytes(out: &mut [u8]) -> usize {
        IMAGE.with(|i| {
            let i = i.borrow();
            let n = i.1.min(out.len());
            out[..n].copy_from_slice(&i.0[..n]);
            n
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sixteen bytes from an xorshift generator.
    fn random_frame(seed: &mut u64) -> [u8; FRAME_SIZE] {
        std::array::from_fn(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed as u8
        })
    }

    /// The half-frame multiply gives what unpacking byte by byte gives,
    /// for every flags byte, and leaves `out[15]` alone.
    #[test]
    fn single_id_unpack_matches_byte_by_byte() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for flags in 0..=255u8 {
            for _ in 0..16 {
                let mut f = random_frame(&mut seed);
                for pair in 0..8 {
                    f[2 * pair] &= !1;
                }
                f[15] = flags;
                let mut want = [0xa5u8; FRAME_SIZE];
                for pair in 0..7 {
                    want[2 * pair] = f[2 * pair] | ((flags >> pair) & 1);
                    want[2 * pair + 1] = f[2 * pair + 1];
                }
                want[14] = f[14] | (flags >> 7);
                let mut got = [0xa5u8; FRAME_SIZE];
                unpack_single_id(&f, &mut got);
                assert_eq!(got, want, "frame {f:02x?}");
            }
        }
    }

    /// (ID, index offset in the frame, bytes).
    type Run = (Option<u8>, usize, Vec<u8>);

    /// A frame unpacked byte by byte as the CoreSight formatter rules
    /// read (IHI0029): runs of (ID, index offset, bytes), with the ID after.
    fn reference_unpack(f: &[u8; FRAME_SIZE], mut id: Option<u8>) -> (Vec<Run>, Option<u8>) {
        let flags = f[15];
        let mut runs = vec![(id, 0usize, Vec::new())];
        for pair in 0..8 {
            let i = 2 * pair;
            let flag = (flags >> pair) & 1;
            if f[i] & 1 == 0 {
                runs.last_mut().unwrap().2.push(f[i] | flag);
                if i < 14 {
                    runs.last_mut().unwrap().2.push(f[i + 1]);
                }
                continue;
            }
            let new_id = Some(f[i] >> 1);
            if i == 14 {
                id = new_id;
                break;
            }
            if new_id == id {
                runs.last_mut().unwrap().2.push(f[i + 1]);
                continue;
            }
            if flag != 0 {
                runs.last_mut().unwrap().2.push(f[i + 1]);
            }
            id = new_id;
            if runs.last().unwrap().2.is_empty() {
                runs.last_mut().unwrap().0 = id;
            } else {
                runs.push((id, i, Vec::new()));
            }
            if flag == 0 {
                runs.last_mut().unwrap().2.push(f[i + 1]);
            }
        }
        (runs, id)
    }

    /// Frames that change ID split into the runs the byte-by-byte rules give.
    #[test]
    fn id_changing_frames_unpack_as_the_rules_say() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
        for n in 0..20_000 {
            let mut f = random_frame(&mut seed);
            // Few distinct IDs, so that some ID bytes repeat the current one.
            for pair in 0..8 {
                if f[2 * pair] & 1 != 0 {
                    f[2 * pair] = ((f[2 * pair] & 0x6) << 1) | 0x21;
                }
            }
            let id_before = if n % 3 == 0 { None } else { Some(0x10 + (n % 4) as u8) };
            let (want, id_after) = reference_unpack(&f, id_before);
            d.curr_id = id_before;
            d.frame = f;
            d.frame_sof = 1000;
            d.unpack_frame();
            let got: Vec<_> = d.chunks[..d.chunk_count]
                .iter()
                .map(|c| (c.id, (c.index - 1000) as usize, c.data[..c.valid].to_vec()))
                .collect();
            assert_eq!(got, want, "frame {f:02x?} from ID {id_before:?}");
            assert_eq!(d.curr_id, id_after, "frame {f:02x?}");
        }
    }
}
