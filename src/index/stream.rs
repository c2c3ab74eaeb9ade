//! Trace-ID stream indexing: what each protocol's packets say about where
//! a decoder can start and what happened when.
//!
//! A packet processor tells an attached [`StreamIndexer`] of the entries
//! its packets make ([`crate::decoder::PacketProcessor::index_entries`]:
//! each protocol's processor maps its own packets); the collector here
//! keeps them.

use crate::datapath::TrcIndex;
use crate::hooks::{EntryKind, StreamEntry, StreamIndexer};
use crate::shared::Shared;

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
    counts: [u64; 14],
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
    pub(crate) fn in_range(&self, range: std::ops::Range<TrcIndex>) -> &[StreamEntry] {
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
                blocks.push(SparseBlock {
                    number,
                    ..SparseBlock::default()
                });
            }
            let b = blocks.last_mut().expect("a block");
            b.counts.counts[e.kind as usize] += 1;
            match e.kind {
                EntryKind::Sync if b.first_sync.is_none() => b.first_sync = Some(e.index),
                EntryKind::Timestamp => {
                    b.timestamps = Some(b.timestamps.map_or((e.value, e.value), |(f, _)| (f, e.value)))
                }
                _ => {}
            }
        }
        SparseStreamIndex {
            id: self.id,
            block,
            blocks,
        }
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

/// Where a stream's entries are collected: in memory, or set aside in a
/// temporary file when the index is built straight to its file.
pub(crate) enum EntryStore {
    Memory(Vec<StreamEntry>),
    Spill(super::spill::Spill),
}

/// The stream indexer the index builder attaches: entries pushed to a
/// shared store (no allocation per packet beyond a vector's growth).
pub(crate) struct StreamCollector {
    entries: Shared<EntryStore>,
}

impl StreamCollector {
    /// Collects into `entries`.
    pub(crate) fn new(entries: Shared<EntryStore>) -> Self {
        StreamCollector { entries }
    }
}

impl StreamIndexer for StreamCollector {
    fn entry(&mut self, entry: StreamEntry) {
        match &mut *self.entries.borrow_mut() {
            EntryStore::Memory(v) => v.push(entry),
            EntryStore::Spill(s) => s.push(&super::file::entry_bytes(&entry)),
        }
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
