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

use super::spill::SourceSpill;

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
    /// When building straight to a file: where finished blocks, frame
    /// syncs and triggers go. Blocks before the one a frame starts in are
    /// finished (frames come in capture order and a frame's runs are in
    /// or after its block), so the index keeps only the last few.
    spill: Option<Shared<Option<SourceSpill>>>,
}

impl SourceCollector {
    /// Collects into `index`, whose `granularity` must be set.
    pub(crate) fn new(index: Shared<SourceIndex>) -> Self {
        SourceCollector { index, spill: None }
    }

    /// Collects into `index` what is not yet finished, and into `spill`
    /// the rest.
    pub(crate) fn spilling(index: Shared<SourceIndex>, spill: Shared<Option<SourceSpill>>) -> Self {
        SourceCollector {
            index,
            spill: Some(spill),
        }
    }
}

/// Block `n` (counted over the whole capture) of `blocks`, which holds
/// the blocks from `first` on; made (with those before it) if missing.
/// `None` for a block already spilled.
fn block_mut(blocks: &mut Vec<SourceBlock>, first: u64, n: u64) -> Option<&mut SourceBlock> {
    let i = usize::try_from(n.checked_sub(first)?).ok()?;
    if blocks.len() <= i {
        blocks.resize(i + 1, SourceBlock::default());
    }
    blocks.get_mut(i)
}

impl SourceIndexer for SourceCollector {
    fn frame(&mut self, f: &FrameRecord) {
        let mut ix = self.index.borrow_mut();
        let mut spill_lock = self.spill.as_ref().map(|s| s.borrow_mut());
        let mut spill = spill_lock.as_deref_mut().and_then(Option::as_mut);
        let g = ix.granularity.max(1) as u64;
        let b = f.index / g;
        let first = match spill.as_deref_mut() {
            Some(sp) => {
                // Blocks before this frame's are finished.
                let first = sp.blocks.count();
                let done = (b.saturating_sub(first) as usize).min(ix.blocks.len());
                for blk in ix.blocks.drain(..done) {
                    sp.blocks.push(&super::file::block_bytes(&blk));
                }
                sp.blocks.count()
            }
            None => 0,
        };
        if let Some(blk) = block_mut(&mut ix.blocks, first, b)
            && blk.checkpoint.is_none()
        {
            blk.checkpoint = Some(Checkpoint {
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
                match spill.as_deref_mut() {
                    Some(sp) => sp.triggers.push(&r.index.to_le_bytes()),
                    None => ix.triggers.push(r.index),
                }
            }
            // The null ID (padding) and the reserved IDs are no source.
            if id == 0 || id >= 0x70 {
                continue;
            }
            if let Some(blk) = block_mut(&mut ix.blocks, first, r.index / g) {
                blk.ids |= 1u128 << (id & 0x7f);
            }
        }
    }
    fn frame_sync(&mut self, index: TrcIndex) {
        let mut spill_lock = self.spill.as_ref().map(|s| s.borrow_mut());
        match spill_lock.as_deref_mut().and_then(Option::as_mut) {
            Some(sp) => sp.frame_syncs.push(&index.to_le_bytes()),
            None => self.index.borrow_mut().frame_syncs.push(index),
        }
    }
}
