//! Source indexing: what the frame deformatter sees of the whole capture.
//!
//! The capture is cut into blocks of `granularity` bytes. For each block
//! the source index keeps the set of trace IDs with data in it and a
//! checkpoint: the first frame that starts in the block, with the trace ID
//! in effect at its start. A decoder for one ID can begin at any
//! checkpoint ([`crate::deformatter::FrameDeformatter::resume_at_frame`]):
//! a frame's first data bytes belong to the ID of the last ID byte before
//! it, which may be far back in the capture, so it must be recorded. A
//! finer granularity makes a bigger index and less deformatting before a
//! decoder reaches the sync point it starts at.
//!
//! Frame syncs (TPIU, DSTREAM) and formatter triggers (data on trace ID
//! 0x7D, the formatter's trigger ID) are listed in full.

use crate::datapath::TrcIndex;
use crate::hooks::{FrameRecord, SourceIndexer};
use crate::shared::Shared;

/// The trace ID the formatter uses to mark a trigger.
pub(crate) const TRIGGER_ID: u8 = 0x7d;

/// Where a decoder can begin deformatting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Index of a frame's first byte.
    pub frame: TrcIndex,
    /// The trace ID in effect at its start.
    pub id: Option<u8>,
}

/// One block of the capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceBlock {
    /// Bit `n` set: trace ID `n` (a source: 0x01 to 0x6f) has data in the
    /// block.
    pub ids: u128,
    /// The first frame starting in the block.
    pub checkpoint: Option<Checkpoint>,
}

/// The source index of a formatted capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceIndex {
    /// Bytes per block.
    pub granularity: u32,
    /// Block `n` covers bytes `n * granularity .. (n + 1) * granularity`.
    pub blocks: Vec<SourceBlock>,
    /// Where frame syncs were found.
    pub frame_syncs: Vec<TrcIndex>,
    /// Where formatter triggers were found.
    pub triggers: Vec<TrcIndex>,
}

impl SourceIndex {
    fn block_of(&self, index: TrcIndex) -> usize {
        (index / self.granularity.max(1) as u64) as usize
    }

    /// The latest checkpoint at or before `index`.
    pub fn checkpoint_before(&self, index: TrcIndex) -> Option<Checkpoint> {
        let last = self.block_of(index).min(self.blocks.len().checked_sub(1)?);
        self.blocks[..=last]
            .iter()
            .rev()
            .filter_map(|b| b.checkpoint)
            .find(|c| c.frame <= index)
    }

    /// The IDs with data in the blocks overlapping `range` (at block
    /// granularity: an ID present elsewhere in a block the range touches
    /// is included).
    pub(crate) fn ids_in(&self, range: std::ops::Range<TrcIndex>) -> u128 {
        if range.start >= range.end || self.blocks.is_empty() {
            return 0;
        }
        let a = self.block_of(range.start).min(self.blocks.len());
        let b = (self.block_of(range.end - 1) + 1).min(self.blocks.len());
        self.blocks[a..b.max(a)].iter().fold(0, |m, blk| m | blk.ids)
    }

    /// Whether the capture carries frame syncs.
    pub fn has_frame_syncs(&self) -> bool {
        !self.frame_syncs.is_empty()
    }
}

/// The source indexer the index builder attaches.
pub(crate) struct SourceCollector {
    index: Shared<SourceIndex>,
}

impl SourceCollector {
    /// Collects into `index`, whose `granularity` must be set.
    pub(crate) fn new(index: Shared<SourceIndex>) -> Self {
        SourceCollector { index }
    }
}

impl SourceIndexer for SourceCollector {
    fn frame(&mut self, f: &FrameRecord) {
        let mut ix = self.index.borrow_mut();
        let g = ix.granularity.max(1) as u64;
        let b = (f.index / g) as usize;
        if ix.blocks.len() <= b {
            ix.blocks.resize(b + 1, SourceBlock::default());
        }
        if ix.blocks[b].checkpoint.is_none() {
            ix.blocks[b].checkpoint = Some(Checkpoint {
                frame: f.index,
                id: f.id_at_start,
            });
        }
        for r in f.runs() {
            let Some(id) = r.id else { continue };
            if r.len == 0 {
                continue;
            }
            if id == TRIGGER_ID {
                ix.triggers.push(r.index);
            }
            // The null ID (padding) and the reserved IDs are no source.
            if id == 0 || id >= 0x70 {
                continue;
            }
            let rb = (r.index / g) as usize;
            if ix.blocks.len() <= rb {
                ix.blocks.resize(rb + 1, SourceBlock::default());
            }
            ix.blocks[rb].ids |= 1u128 << (id & 0x7f);
        }
    }
    fn frame_sync(&mut self, index: TrcIndex) {
        self.index.borrow_mut().frame_syncs.push(index);
    }
}
