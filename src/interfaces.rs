//! The interfaces that join the components of a decode tree. Each is used
//! as a trait object, so components can be swapped for a user's own.
//! Each requires `Send`, so that a built tree can move to another thread.
//!
//! The memory and instruction-classifier interfaces belong to the layers
//! that implement them ([`crate::memory`], [`crate::instr`]) and are
//! re-exported here with the others.

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::element::{Element, TraceElement};

pub use crate::instr::InstrDecode;
pub use crate::memory::TargetMemAccess;

/// Raw trace bytes in (OpenCSD's `ITrcDataIn`): the input of a frame
/// deformatter or of a packet processor.
#[doc(alias = "ITrcDataIn")]
pub trait TrcDataIn: Send {
    /// Sends `op` with, for [`DatapathOp::Data`], the block `data` whose
    /// first byte is at `index` in the trace buffer. Returns the response
    /// and how many bytes of `data` were used; on a wait the caller sends
    /// [`DatapathOp::Flush`] until it gets `Cont`, then sends the rest.
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize);
}

/// Decoded packets in (OpenCSD's `IPktDataIn`): the input of a packet
/// decoder, or of a packet printer in packet-only mode. `index` is the
/// trace index of the packet's first byte; `pkt` is `None` for the
/// non-data operations.
#[doc(alias = "IPktDataIn")]
pub trait PktDataIn<P>: Send {
    /// Takes one packet operation: with `DatapathOp::Data` the packet `pkt` starting at trace
    /// index `index`; EOT, FLUSH and RESET carry no packet.
    fn packet_data_in(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&P>) -> DatapathResp;

    /// One packet: the same as `packet_data_in(DatapathOp::Data, index,
    /// Some(pkt))`, which is what it does unless the sink has a quicker
    /// way (packet processors send every packet through it).
    #[inline]
    fn packet_in(&mut self, index: TrcIndex, pkt: &P) -> DatapathResp {
        self.packet_data_in(DatapathOp::Data, index, Some(pkt))
    }

    /// A run of one-byte packets given as their bytes, for a sink that
    /// decodes them without a packet being built for each (ETMv4's atom
    /// packets): `run[i]` is a whole packet at `index + i`. The sink takes
    /// packets from the front and returns its response with how many
    /// bytes it took; it stops after one it answered other than continue,
    /// or before one it wants built, which the processor then sends
    /// through [`packet_in`](Self::packet_in). A processor uses this only
    /// with no packet monitor attached. By default no packet is taken.
    #[inline]
    fn packet_bytes_in(&mut self, _index: TrcIndex, _run: &[u8]) -> (DatapathResp, usize) {
        (DatapathResp::Cont, 0)
    }

    /// [`packet_bytes_in`](Self::packet_bytes_in) for a run that also
    /// holds, between its one-byte packets, the address packets of
    /// `addrs` (in order, each whole in `run`): their addresses as the
    /// processor worked them out, so the sink need not have them built.
    /// Taking an address packet takes all its bytes. By default the
    /// one-byte packets before the first address are offered to
    /// `packet_bytes_in`.
    #[inline]
    fn packet_run_in(&mut self, index: TrcIndex, run: &[u8], addrs: &[RunAddr]) -> (DatapathResp, usize) {
        let before = addrs
            .first()
            .map_or(run.len(), |a| a.index.saturating_sub(index) as usize);
        self.packet_bytes_in(index, &run[..before.min(run.len())])
    }

    /// Before the first packet of a decoder started at a sync point: what
    /// the serial decode knew there that the packets do not repeat. True
    /// when the sink keeps it; by default it has no use for it.
    fn resume(&mut self, _state: &ResumeState) -> bool {
        false
    }
}

/// An address packet in a run given to [`PktDataIn::packet_run_in`]: where
/// it starts, its length, and the address it gives with its instruction
/// set bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RunAddr {
    /// Trace index of the packet's header.
    pub index: TrcIndex,
    /// The address, as the address history completes it.
    pub addr: u64,
    /// The packet's instruction set bit (IS).
    pub is: u8,
    /// The packet's length in bytes.
    pub len: u8,
}

/// What the serial decode knew at a sync point that the packets from there
/// on do not repeat: given to a decoder started at that sync point
/// ([`crate::tree::DecodeTree::resume_id_state`]) so that its elements are
/// the serial decode's. A stream index has what it takes
/// ([`crate::index::CaptureIndex::resume_state`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResumeState {
    /// The VMID of the last PTM/ETMv3 VMID packet before the sync point
    /// (their I-sync packets carry the context ID but not the VMID).
    pub vmid: Option<u32>,
}

impl ResumeState {
    /// This state with `vmid`.
    pub fn with_vmid(mut self, vmid: Option<u32>) -> ResumeState {
        self.vmid = vmid;
        self
    }
}

/// Packet monitor (OpenCSD's `IPktRawDataMon`): sees each packet with the
/// raw bytes it was built from, before it goes on to the decoder.
#[doc(alias = "IPktRawDataMon")]
pub trait PktRawDataMon<P>: Send {
    /// Shows the packet `pkt` starting at `index` together with the bytes `raw` it was built
    /// from.
    fn raw_packet_data_mon(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&P>, raw: &[u8]);
}

/// Generic trace elements out (OpenCSD's `ITrcGenElemIn`): what a decoder
/// produces and a client consumes.
#[doc(alias = "ITrcGenElemIn")]
pub trait TrcGenElemIn: Send {
    /// Takes one generic element from the source with trace ID `trace_id`, found at trace
    /// index `index`; a wait response makes the decoder stop and resume on the next flush.
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp;

    /// Several elements of `trace_id` in order, each with its index.
    /// Returns the response to the last one taken and how many were taken:
    /// all of them, or fewer when one answered other than `Cont` (that one
    /// counts as taken). The default passes them one at a time to
    /// [`trace_elem_in`](Self::trace_elem_in); a sink that can take a run
    /// at once (a muted printer, a counter) overrides it, so a decoder
    /// sending its elements together costs one call, not one per element.
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        elems_one_by_one(self, trace_id, elems)
    }
}

/// A sink of typed elements: what a program that consumes a decode
/// implements (the push-mode twin of the pull API's iterator). It sees
/// each element as an [`Element`], the same type the pull API gives, with
/// the trace index and trace ID it came from. Attach it with
/// [`crate::tree::DecodeTree::set_element_sink`]. ([`TrcGenElemIn`], the
/// flat element OpenCSD's listing and C API use, is for components that
/// need that form.)
pub trait ElementSink: Send {
    /// Takes one element; answering [`DatapathResp::Wait`] pauses the
    /// decode after it, until the tree is sent FLUSH.
    fn element(&mut self, index: TrcIndex, trace_id: u8, element: &Element) -> DatapathResp;
}

/// An [`ElementSink`] as a [`TrcGenElemIn`]: each flat element is made
/// typed on its way in.
pub(crate) struct TypedSink<S>(pub S);

impl<S: ElementSink> TrcGenElemIn for TypedSink<S> {
    #[inline]
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.element(index, trace_id, &Element::from_generic(elem))
    }
}

/// [`TrcGenElemIn::trace_elems_in`] done one element at a time: what the
/// default does, for an override that takes some runs whole and hands the
/// others on element by element.
pub fn elems_one_by_one<S: TrcGenElemIn + ?Sized>(
    sink: &mut S,
    trace_id: u8,
    elems: &[(TrcIndex, TraceElement)],
) -> (DatapathResp, usize) {
    let mut resp = DatapathResp::Cont;
    let mut n = 0;
    for (index, elem) in elems {
        resp = sink.trace_elem_in(*index, trace_id, elem);
        n += 1;
        if !resp.is_cont() {
            break;
        }
    }
    (resp, n)
}

/// Raw frame monitor (OpenCSD's `ITrcRawFrameIn`): sees the deformatter's
/// input frames and the per-ID data it unpacks.
#[doc(alias = "ITrcRawFrameIn")]
pub trait TrcRawFrameIn: Send {
    /// Shows data of kind `kind` at trace index `index`: whole frames, syncs, or the bytes
    /// unpacked for `trace_id`.
    fn trace_raw_frame_in(
        &mut self,
        op: DatapathOp,
        index: TrcIndex,
        kind: RawFrameKind,
        data: &[u8],
        trace_id: Option<u8>,
    );
}

/// What a raw frame monitor is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RawFrameKind {
    /// Bytes as captured, frame by frame (with any syncs).
    Packed,
    /// Half-frame syncs.
    HSync,
    /// Frame syncs.
    FSync,
    /// Data unpacked for one trace ID.
    IdData,
}
