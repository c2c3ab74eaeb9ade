//! An index read for one split decode only: of each stream, the entries
//! that decoding it in a given number of pieces reads
//! ([`super::CaptureIndex::split_pieces`] and the piece decodes of
//! [`super::decode_split_ids_partial`] and the others), so its memory
//! follows the number of pieces, not the capture. A full index has an
//! entry per sync point, timestamp and context of the capture.
//!
//! Kept of each stream, with each entry's place in the file's order:
//!
//! - the first sync point (where an ITM decoder starts, and the one whose
//!   `NO_SYNC` the first piece keeps);
//! - each split point (the first clean sync point, then the first clean
//!   one at or after each share of the stream), the sync point before it
//!   (where its decoder starts) and the one after it (where the piece
//!   before it stops feeding);
//! - of each sync point kept, what says whether it is clean: the next
//!   trace info or sync point entry (a sync point kept that way is kept
//!   with its own), so the sync points kept are clean in the thin index
//!   exactly when they are in the full one, and the split points come out
//!   the same;
//! - the last VMID entry before each sync point kept (the resume state);
//! - the first trace info entry (whether the stream has any decides which
//!   sync points are clean).
//!
//! Of the source index the frame syncs and triggers keep their first item
//! only (a split decode reads neither), and blocks are merged to at most
//! [`MAX_BLOCKS`], each with its first checkpoint: a piece's deformatter
//! may start further back (by at most a 4096th of the capture), and
//! the elements are the same.

use super::file::Keep;
use crate::hooks::{EntryKind, StreamEntry};

/// Source blocks kept at most: more are merged (a piece's decoder may
/// start deformatting up to that many times the granularity earlier).
const MAX_BLOCKS: usize = 4096;

/// A first pass: which streams (in file order) have a trace info entry.
#[derive(Default)]
pub(crate) struct HasInfo(pub(crate) Vec<bool>);

impl Keep for HasInfo {
    fn stream(&mut self, _n: usize, _indexed_end: u64) {
        self.0.push(false);
    }
    fn entry(&mut self, e: StreamEntry, _out: &mut Vec<StreamEntry>) {
        if e.kind == EntryKind::TraceInfo
            && let Some(last) = self.0.last_mut()
        {
            *last = true;
        }
    }
    fn list_item(&mut self, _k: usize) -> bool {
        false
    }
    fn whole(&self) -> bool {
        false
    }
}

/// An entry with its place in the stream.
type Placed = (u64, StreamEntry);

/// A sync point met, with what keeping it brings along.
#[derive(Clone, Copy)]
struct SyncPoint {
    /// The last VMID entry before it.
    vmid: Option<Placed>,
    sync: Placed,
    /// The trace info entry that decided whether it is clean.
    info: Option<Placed>,
    decided: bool,
    clean: bool,
    kept: bool,
}

/// Keeps what splitting each stream into `pieces` pieces needs.
pub(crate) struct SplitKeep {
    pieces: usize,
    /// Per stream in file order: whether it has trace info entries.
    has_info: Vec<bool>,
    info: bool,
    end: u64,
    /// Entries of the stream so far.
    n: u64,
    kept: Vec<Placed>,
    /// The last two VMID entries: the last one before a sync point's
    /// index may be the one before the last.
    vmids: [Option<Placed>; 2],
    prev: Option<SyncPoint>,
    cur: Option<SyncPoint>,
    /// The first clean sync point.
    first_clean: Option<u64>,
    /// The next share of the stream to find a split point for.
    share: usize,
    keep_next_sync: bool,
    seen_sync: bool,
    kept_info: bool,
}

impl SplitKeep {
    pub(crate) fn new(pieces: usize, has_info: Vec<bool>) -> SplitKeep {
        SplitKeep {
            pieces: pieces.max(1),
            has_info,
            info: false,
            end: 0,
            n: 0,
            kept: Vec::new(),
            vmids: [None; 2],
            prev: None,
            cur: None,
            first_clean: None,
            share: 1,
            keep_next_sync: false,
            seen_sync: false,
            kept_info: false,
        }
    }

    /// The byte the split points' search aims at for share `k`, as
    /// [`super::CaptureIndex::split_points`] computes it.
    fn target(&self, first: u64, k: usize) -> u64 {
        let span = self.end.saturating_sub(first) as u128;
        first + (span * k as u128 / self.pieces as u128) as u64
    }

    fn keep(kept: &mut Vec<Placed>, p: &mut SyncPoint) {
        if let Some(v) = p.vmid {
            kept.push(v);
        }
        kept.push(p.sync);
        if let Some(i) = p.info {
            kept.push(i);
        }
        p.kept = true;
    }

    /// The current sync point has just been found clean or not: is it a
    /// split point?
    fn decided(&mut self) {
        let Some(cur) = self.cur else { return };
        if !cur.clean {
            return;
        }
        let at = cur.sync.1.index;
        let split = match self.first_clean {
            None => {
                self.first_clean = Some(at);
                // Shares aimed at the first point itself give no new point.
                while self.share < self.pieces && self.target(at, self.share) <= at {
                    self.share += 1;
                }
                true
            }
            Some(first) => {
                let mut hit = false;
                while self.share < self.pieces && self.target(first, self.share) <= at {
                    self.share += 1;
                    hit = true;
                }
                hit
            }
        };
        if split {
            if let Some(p) = self.prev.as_mut().filter(|p| !p.kept) {
                Self::keep(&mut self.kept, p);
            }
            if let Some(c) = self.cur.as_mut().filter(|c| !c.kept) {
                Self::keep(&mut self.kept, c);
            }
            self.keep_next_sync = true;
        }
    }
}

impl Keep for SplitKeep {
    fn stream(&mut self, n: usize, indexed_end: u64) {
        let pieces = self.pieces;
        let has_info = std::mem::take(&mut self.has_info);
        *self = SplitKeep::new(pieces, has_info);
        self.info = self.has_info.get(n).copied().unwrap_or(false);
        self.end = indexed_end;
    }

    fn entry(&mut self, e: StreamEntry, _out: &mut Vec<StreamEntry>) {
        let placed = (self.n, e);
        self.n += 1;
        match e.kind {
            EntryKind::Vmid => self.vmids = [self.vmids[1], Some(placed)],
            EntryKind::TraceInfo => {
                if !self.kept_info {
                    self.kept.push(placed);
                    self.kept_info = true;
                }
                if let Some(c) = self.cur.as_mut().filter(|c| !c.decided) {
                    c.decided = true;
                    c.clean = e.value == 0;
                    c.info = Some(placed);
                    if c.kept {
                        self.kept.push(placed);
                    }
                    self.decided();
                }
            }
            EntryKind::Sync => {
                // A sync point before any trace info: the one before was
                // not clean, and if it was kept this one is kept too, so
                // that it is not clean in the thin index either.
                let mut chain = false;
                if let Some(c) = self.cur.as_mut().filter(|c| !c.decided) {
                    c.decided = true;
                    chain = c.kept;
                }
                let vmid = self.vmids.iter().rev().flatten().find(|v| v.1.index < e.index).copied();
                let mut p = SyncPoint {
                    vmid,
                    sync: placed,
                    info: None,
                    decided: !self.info,
                    clean: !self.info,
                    kept: false,
                };
                if chain || !self.seen_sync || self.keep_next_sync {
                    Self::keep(&mut self.kept, &mut p);
                    self.keep_next_sync = false;
                }
                self.seen_sync = true;
                self.prev = self.cur.replace(p);
                if p.decided {
                    self.decided();
                }
            }
            _ => {}
        }
    }

    fn stream_end(&mut self, out: &mut Vec<StreamEntry>) {
        self.kept.sort_by_key(|p| p.0);
        self.kept.dedup_by_key(|p| p.0);
        out.extend(self.kept.drain(..).map(|p| p.1));
    }

    fn list_item(&mut self, k: usize) -> bool {
        k == 0
    }

    fn merge_blocks(&mut self, n: usize) -> usize {
        n.div_ceil(MAX_BLOCKS)
    }

    fn whole(&self) -> bool {
        false
    }
}
