//! Trace-ID stream indexing: what each protocol's packets say about where
//! a decoder can start and what happened when.
//!
//! A packet processor tells an attached [`StreamIndexer`] of the entries
//! its packets make ([`crate::decoder::PacketProcessor::index_entries`]);
//! the mapping for each built-in protocol is here, one function per
//! protocol. Bad, reserved and incomplete packets make no entry, as they
//! are not listed under a packet name.

use super::{EntryKind, StreamEntry};
use crate::datapath::TrcIndex;
use crate::logger::Shared;

/// Receives a trace ID's stream index entries (the design's trace-ID
/// stream indexer attachment point, see
/// [`crate::decoder::TraceComponent::attach_indexer`]).
pub trait StreamIndexer: Send {
    /// One entry, in packet order.
    fn entry(&mut self, entry: StreamEntry);
}

/// The stream index of one trace ID: entries in byte order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamIndex {
    /// The trace ID.
    pub id: u8,
    /// Protocol name (`ETMV4I`, `PTM`, ...).
    pub protocol: String,
    /// Every entry, by index (full index).
    pub entries: Vec<StreamEntry>,
}

/// Counts of a stream's entries by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryCounts {
    counts: [u64; 13],
}

impl EntryCounts {
    /// Entries of `kind`.
    pub fn get(&self, kind: EntryKind) -> u64 {
        self.counts[kind as usize]
    }
    /// Sync points.
    pub fn syncs(&self) -> u64 {
        self.get(EntryKind::Sync)
    }
    /// Timestamps (global; ITM local timestamps are counted apart).
    pub fn timestamps(&self) -> u64 {
        self.get(EntryKind::Timestamp)
    }
    /// Events and triggers.
    pub fn events(&self) -> u64 {
        self.get(EntryKind::Event) + self.get(EntryKind::Trigger)
    }
}

impl StreamIndex {
    /// Entries of one kind.
    pub fn of_kind(&self, kind: EntryKind) -> impl Iterator<Item = &StreamEntry> + '_ {
        self.entries.iter().filter(move |e| e.kind == kind)
    }

    /// Counts by kind.
    pub fn counts(&self) -> EntryCounts {
        let mut c = EntryCounts::default();
        for e in &self.entries {
            c.counts[e.kind as usize] += 1;
        }
        c
    }

    /// Entries with `range.start <= index < range.end`.
    pub fn in_range(&self, range: std::ops::Range<TrcIndex>) -> &[StreamEntry] {
        let a = self.entries.partition_point(|e| e.index < range.start);
        let b = self.entries.partition_point(|e| e.index < range.end);
        &self.entries[a..b.max(a)]
    }
}

/// A sparse stream index: per block of the capture, counts of each entry
/// kind and the key values (the first sync point, the first and last
/// timestamp). Much smaller than the full index; a search narrows to a
/// block, then reads the capture (or the full index) there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseStreamIndex {
    /// The trace ID.
    pub id: u8,
    /// Bytes per block.
    pub block: u64,
    /// Blocks with at least one entry, by block number.
    pub blocks: Vec<SparseBlock>,
}

/// One block of a [`SparseStreamIndex`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseBlock {
    /// Block number: bytes `number * block ..`.
    pub number: u64,
    /// Entries by kind in the block.
    pub counts: EntryCounts,
    /// The block's first sync point.
    pub first_sync: Option<TrcIndex>,
    /// First and last timestamp values in the block.
    pub timestamps: Option<(u64, u64)>,
}

impl StreamIndex {
    /// The sparse form of this index, with blocks of `block` bytes.
    pub fn sparse(&self, block: u64) -> SparseStreamIndex {
        let block = block.max(1);
        let mut blocks: Vec<SparseBlock> = Vec::new();
        for e in &self.entries {
            let number = e.index / block;
            if blocks.last().is_none_or(|b| b.number != number) {
                blocks.push(SparseBlock { number, ..SparseBlock::default() });
            }
            let b = blocks.last_mut().expect("a block");
            b.counts.counts[e.kind as usize] += 1;
            match e.kind {
                EntryKind::Sync if b.first_sync.is_none() => b.first_sync = Some(e.index),
                EntryKind::Timestamp => b.timestamps = Some(b.timestamps.map_or((e.value, e.value), |(f, _)| (f, e.value))),
                _ => {}
            }
        }
        SparseStreamIndex { id: self.id, block, blocks }
    }
}

impl SparseStreamIndex {
    /// Counts over the whole stream.
    pub fn counts(&self) -> EntryCounts {
        let mut c = EntryCounts::default();
        for b in &self.blocks {
            for (t, n) in c.counts.iter_mut().zip(b.counts.counts) {
                *t += n;
            }
        }
        c
    }

    /// The first of the blocks' first sync points at or after `pos` (a
    /// sparse index knows only the first sync point of each block, so a
    /// later one in the block of `pos` is not found).
    pub fn sync_from(&self, pos: TrcIndex) -> Option<TrcIndex> {
        self.blocks.iter().filter_map(|b| b.first_sync).find(|&s| s >= pos)
    }
}

/// The stream indexer the index builder attaches: entries pushed to a
/// shared vector (no allocation per packet beyond the vector's growth).
pub struct StreamCollector {
    entries: Shared<Vec<StreamEntry>>,
}

impl StreamCollector {
    /// Collects into `entries`.
    pub fn new(entries: Shared<Vec<StreamEntry>>) -> Self {
        StreamCollector { entries }
    }
}

impl StreamIndexer for StreamCollector {
    fn entry(&mut self, entry: StreamEntry) {
        self.entries.borrow_mut().push(entry);
    }
}

/// ETMv4 and ETE entries.
pub fn etmv4_entries(p: &crate::etmv4::packet::EtmV4Packet, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::etmv4::packet::PktType as T;
    match p.pkt_type {
        T::Async => emit(EntryKind::Sync, 0),
        T::TraceInfo => emit(EntryKind::TraceInfo, if p.spec_depth_valid { p.spec_depth as u64 } else { 0 }),
        T::Timestamp => emit(EntryKind::Timestamp, p.timestamp),
        T::Event => emit(EntryKind::Event, p.event_val as u64),
        T::Ctxt | T::AddrCtxtL32IS0 | T::AddrCtxtL32IS1 | T::AddrCtxtL64IS0 | T::AddrCtxtL64IS1 => {
            emit(EntryKind::Context, p.context.ctxt_id as u64)
        }
        T::Except => emit(EntryKind::Exception, p.exception.exc_type as u64),
        T::Overflow => emit(EntryKind::Overflow, 0),
        _ => {}
    }
}

/// PTM entries.
pub fn ptm_entries(p: &crate::ptm::PtmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::ptm::PtmPktType as T;
    match p.pkt_type {
        T::ASync => emit(EntryKind::Sync, 0),
        T::ISync => emit(EntryKind::InstrSync, p.addr),
        T::Trigger => emit(EntryKind::Trigger, 0),
        T::Timestamp => emit(EntryKind::Timestamp, p.timestamp),
        T::ContextId | T::Vmid => emit(EntryKind::Context, p.context_id as u64),
        _ => {}
    }
}

/// ETMv3 entries.
pub fn etmv3_entries(p: &crate::etmv3::Etmv3Packet, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::etmv3::Etmv3PktType as T;
    match p.pkt_type {
        T::ASync => emit(EntryKind::Sync, 0),
        T::ISync | T::ISyncCycle => emit(EntryKind::InstrSync, p.addr),
        T::Trigger => emit(EntryKind::Trigger, 0),
        T::Timestamp => emit(EntryKind::Timestamp, p.timestamp),
        T::ContextId | T::Vmid => emit(EntryKind::Context, p.context_id as u64),
        T::ExceptionEntry => emit(EntryKind::Exception, 0),
        _ => {}
    }
}

/// STM entries. A data, flag or trigger packet with a timestamp makes a
/// timestamp entry too.
pub fn stm_entries(p: &crate::stm::StmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::stm::StmPktType as T;
    match p.pkt_type {
        T::Async => emit(EntryKind::Sync, 0),
        T::Trig => emit(EntryKind::Trigger, p.payload & 0xff),
        T::M8 => emit(EntryKind::Master, p.master as u64),
        T::C8 | T::C16 => emit(EntryKind::Channel, p.channel as u64),
        T::Gerr | T::Merr => emit(EntryKind::Overflow, p.payload & 0xff),
        _ => {}
    }
    // Only these packet types carry a timestamp (the listing's `TS` suffix).
    if p.has_ts && matches!(p.pkt_type, T::Trig | T::Flag | T::D4 | T::D8 | T::D16 | T::D32 | T::D64) {
        emit(EntryKind::Timestamp, p.timestamp);
    }
}

/// ITM entries.
pub fn itm_entries(p: &crate::itm::ItmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::itm::ItmPktType as T;
    match p.pkt_type {
        T::Async => emit(EntryKind::Sync, 0),
        T::TsGlobal1 | T::TsGlobal2 => emit(EntryKind::Timestamp, p.ext_value()),
        T::TsLocal => emit(EntryKind::LocalTimestamp, p.value as u64),
        T::Overflow => emit(EntryKind::Overflow, 0),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_index_keeps_counts_and_key_values_per_block() {
        let e = |index, kind, value| StreamEntry { index, kind, value };
        let full = StreamIndex {
            id: 3,
            protocol: "ETMV4I".into(),
            entries: vec![
                e(2, EntryKind::Sync, 0),
                e(10, EntryKind::Timestamp, 100),
                e(40, EntryKind::Timestamp, 140),
                e(70, EntryKind::Event, 1),
                e(90, EntryKind::Sync, 0),
                e(95, EntryKind::Sync, 0),
                e(99, EntryKind::Timestamp, 200),
                e(300, EntryKind::Trigger, 0),
            ],
        };
        let sp = full.sparse(64);
        assert_eq!(sp.blocks.iter().map(|b| b.number).collect::<Vec<_>>(), [0, 1, 4]);
        assert_eq!(sp.blocks[0].first_sync, Some(2));
        assert_eq!(sp.blocks[0].timestamps, Some((100, 140)));
        assert_eq!(sp.blocks[1].first_sync, Some(90));
        assert_eq!(sp.blocks[1].counts.syncs(), 2);
        assert_eq!(sp.blocks[1].counts.events(), 1);
        assert_eq!(sp.blocks[1].timestamps, Some((200, 200)));
        assert_eq!(sp.blocks[2].timestamps, None);
        assert_eq!(sp.counts(), full.counts());
        assert_eq!(sp.sync_from(3), Some(90));
        assert_eq!(sp.sync_from(91), None);
    }
}
