//! Hooks: what the frame deformatter and the packet processors tell an
//! observer that is attached to them.
//!
//! The indexes ([`crate::index`]) implement these traits; the components
//! only know the traits, so they do not depend on the indexes.
//!
//! - [`SourceIndexer`]: every frame the deformatter unpacks
//!   ([`FrameRecord`]), and where frame syncs are.
//! - [`StreamIndexer`]: the entries ([`StreamEntry`]) a trace ID's packets
//!   make: sync points, timestamps, events, contexts... Each protocol maps
//!   its own packets to [`EntryKind`]s
//!   ([`crate::decoder::PacketProcessor::index_entries`]).

use crate::datapath::TrcIndex;

/// One run of data for one ID in a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameRun {
    /// `None` before any ID byte has been seen.
    pub id: Option<u8>,
    /// Index of the run's first byte (as its packets' `Idx` count).
    pub index: TrcIndex,
    /// Data bytes in the run.
    pub len: u8,
}

/// What the deformatter tells a source indexer of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRecord {
    /// Index of the frame's first byte.
    pub index: TrcIndex,
    /// The trace ID in effect at the frame's start.
    pub id_at_start: Option<u8>,
    /// The runs, `count` of them used.
    pub runs: [FrameRun; 8],
    /// Runs used in `runs`.
    pub count: usize,
}

impl FrameRecord {
    /// The runs used.
    pub(crate) fn runs(&self) -> &[FrameRun] {
        &self.runs[..self.count.min(8)]
    }
}

/// Receives what the deformatter sees (the design's source indexer
/// attachment point, see
/// [`crate::tree::DecodeTree::set_source_indexer`]).
pub trait SourceIndexer: Send {
    /// A frame has been unpacked.
    fn frame(&mut self, frame: &FrameRecord);
    /// Frame syncs start at `index`.
    fn frame_sync(&mut self, _index: TrcIndex) {}
}

/// Receives a trace ID's stream index entries (the design's trace-ID
/// stream indexer attachment point, see
/// [`crate::decoder::TraceComponent::attach_indexer`]).
pub trait StreamIndexer: Send {
    /// One entry, in packet order.
    fn entry(&mut self, entry: StreamEntry);
}

/// What a stream index entry marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[non_exhaustive]
pub enum EntryKind {
    /// Alignment synchronisation (ETMv4/ETE I_ASYNC, PTM/STM ASYNC, ETMv3
    /// A_SYNC, ITM_ASYNC): where a decoder can start. The value is 0
    /// when the decoder starts at the entry's index; for an STM ASYNC
    /// whose first nibble is the high nibble of a byte, it is that byte's
    /// index × 2 + 1 (the listed index may be the next byte's): a decoder
    /// starts at that byte, skipping its low nibble
    /// ([`crate::tree::DecodeTree::start_id_at_high_nibble`]).
    Sync = 1,
    /// Timestamp (ETMv4/ETE I_TIMESTAMP, PTM/ETMv3 TIMESTAMP, STM packets
    /// with a timestamp, ITM global timestamps): the value the packet
    /// processor holds after it (for ITM GTS1/GTS2, the packet's bits).
    Timestamp = 2,
    /// ETMv4/ETE event (I_EVENT): the event bits.
    Event = 3,
    /// Trigger (PTM/ETMv3 TRIGGER, STM TRIG packets).
    Trigger = 4,
    /// ETMv4/ETE trace info: the value is the speculation depth it gives.
    TraceInfo = 5,
    /// Context change (ETMv4/ETE context, PTM/ETMv3 context ID): the
    /// context ID.
    Context = 6,
    /// Exception (ETMv4/ETE I_EXCEPT, ETMv3 exception entry): its number.
    Exception = 7,
    /// Instruction synchronisation (PTM/ETMv3 I-sync): the address.
    InstrSync = 8,
    /// Overflow (ETMv4/ETE, ITM), STM global / master error.
    Overflow = 9,
    /// STM master set (M8): the master.
    Master = 10,
    /// STM channel set (C8/C16): the channel.
    Channel = 11,
    /// ITM local timestamp: the delta.
    LocalTimestamp = 12,
    /// PTM/ETMv3 VMID packet: the VMID. Their sync packets do not repeat
    /// it, so a decoder started at a sync point learns it from here
    /// ([`crate::interfaces::ResumeState::vmid`]).
    Vmid = 13,
}

impl EntryKind {
    /// Every kind, in code order.
    pub const ALL: [EntryKind; 13] = [
        EntryKind::Sync,
        EntryKind::Timestamp,
        EntryKind::Event,
        EntryKind::Trigger,
        EntryKind::TraceInfo,
        EntryKind::Context,
        EntryKind::Exception,
        EntryKind::InstrSync,
        EntryKind::Overflow,
        EntryKind::Master,
        EntryKind::Channel,
        EntryKind::LocalTimestamp,
        EntryKind::Vmid,
    ];

    /// The kind of a saved code.
    pub(crate) fn from_code(code: u8) -> Option<EntryKind> {
        EntryKind::ALL.get((code as usize).wrapping_sub(1)).copied()
    }

    /// A short name for listings.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Sync => "sync",
            EntryKind::Timestamp => "timestamp",
            EntryKind::Event => "event",
            EntryKind::Trigger => "trigger",
            EntryKind::TraceInfo => "trace-info",
            EntryKind::Context => "context",
            EntryKind::Exception => "exception",
            EntryKind::InstrSync => "i-sync",
            EntryKind::Overflow => "overflow",
            EntryKind::Master => "master",
            EntryKind::Channel => "channel",
            EntryKind::LocalTimestamp => "local-timestamp",
            EntryKind::Vmid => "vmid",
        }
    }

    /// Events and triggers: what [`crate::index::CaptureIndex::events`] returns.
    pub(crate) fn is_event(self) -> bool {
        matches!(self, EntryKind::Event | EntryKind::Trigger)
    }
}

/// One entry of a trace-ID stream index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamEntry {
    /// Byte position of the packet's first byte in the whole capture (the
    /// listing's `Idx`).
    pub index: TrcIndex,
    /// What the entry marks.
    pub kind: EntryKind,
    /// The kind's value (see [`EntryKind`]), 0 when it has none.
    pub value: u64,
}
