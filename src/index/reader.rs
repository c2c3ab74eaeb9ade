//! The index reader's searches.

use super::{CaptureIndex, EntryKind, IndexedFormat, StreamEntry};
use crate::datapath::TrcIndex;
use crate::interfaces::ResumeState;

/// A byte window of one trace ID's stream: decode from the sync point at
/// `start` and keep the elements with `from <= index < end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteWindow {
    /// The sync point the decoder starts at (`<= from` when one exists).
    pub start: TrcIndex,
    /// First index of the window.
    pub from: TrcIndex,
    /// End of the window (exclusive).
    pub end: TrcIndex,
}

/// A piece of one trace ID's stream for a split decode
/// ([`super::decode_split`], [`super::decode_pieces`]): decode from the
/// sync point at `start`, keep the elements with `start <= index < end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The trace ID.
    pub id: u8,
    /// The sync point the piece starts at.
    pub start: TrcIndex,
    /// Where the next piece starts, or the end of the indexed bytes
    /// (exclusive).
    pub end: TrcIndex,
}

/// An event or trigger, from a stream or from the formatter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHit {
    /// The trace ID, or `None` for a formatter trigger (trace ID 0x7D).
    pub id: Option<u8>,
    /// The entry (for a formatter trigger: a `Trigger` at its index).
    pub entry: StreamEntry,
}

impl CaptureIndex {
    /// Sync points of `id` at or after byte `pos`.
    pub fn syncs_from(&self, id: u8, pos: TrcIndex) -> impl Iterator<Item = &StreamEntry> + '_ {
        let entries = self.stream(id).map_or(&[][..], |s| s.in_range(pos..TrcIndex::MAX));
        entries.iter().filter(|e| e.kind == EntryKind::Sync)
    }

    /// The last sync point of `id` at or before byte `pos`.
    pub fn sync_at_or_before(&self, id: u8, pos: TrcIndex) -> Option<TrcIndex> {
        let s = self.stream(id)?;
        s.in_range(0..pos.saturating_add(1))
            .iter()
            .rev()
            .find(|e| e.kind == EntryKind::Sync)
            .map(|e| e.index)
    }

    /// What the serial decode of `id` knew at byte `pos` that a decoder
    /// started there cannot learn from the packets after it: the VMID of
    /// the last PTM/ETMv3 VMID packet before `pos`.
    pub fn resume_state(&self, id: u8, pos: TrcIndex) -> ResumeState {
        // Only these protocols have VMID entries: the others' streams are
        // not searched.
        let vmid = self
            .stream(id)
            .filter(|s| s.protocol == "PTM" || s.protocol == "ETMV3")
            .and_then(|s| {
                s.in_range(0..pos)
                    .iter()
                    .rev()
                    .find(|e| e.kind == EntryKind::Vmid)
                    .map(|e| e.value as u32)
            });
        ResumeState::default().with_vmid(vmid)
    }

    /// The timestamps of `id`: first and last value.
    pub fn timestamp_range(&self, id: u8) -> Option<(u64, u64)> {
        let s = self.stream(id)?;
        let mut ts = s.of_kind(EntryKind::Timestamp);
        let first = ts.next()?.value;
        let last = ts.last().map_or(first, |e| e.value);
        Some((first, last))
    }

    /// The byte window of `id` covering byte positions `from..end`: the
    /// decoder starts at the sync point before the last one at or before
    /// `from` (see [`warm_start`](Self::warm_start)), or at the first
    /// after `from` when there is none before.
    pub fn byte_window(&self, id: u8, from: TrcIndex, end: TrcIndex) -> Option<ByteWindow> {
        let start = match self.sync_at_or_before(id, from) {
            Some(s) => self.warm_start(id, s),
            None => self.syncs_from(id, from).next()?.index,
        };
        (start < end).then_some(ByteWindow { start, from, end })
    }

    /// Where a decoder starts to have the serial decode's state by the
    /// sync point `sync`: the sync point before it, or `sync` itself when
    /// it is the first. A decoder started at a sync point knows nothing of
    /// what came before (context, addresses, return stack, speculation,
    /// STM master validity, ITM and STM running state); one whole interval
    /// between sync points gives it back what the protocols resend there.
    ///
    /// ITM is the exception: its cumulative timestamp adds up every local
    /// timestamp since the start of the stream, so an ITM decoder starts
    /// at the stream's first sync point.
    pub fn warm_start(&self, id: u8, sync: TrcIndex) -> TrcIndex {
        if self.stream(id).is_some_and(|s| s.protocol == "ITM") {
            return self.syncs_from(id, 0).next().map_or(sync, |e| e.index.min(sync));
        }
        match sync.checked_sub(1) {
            Some(before) => self.sync_at_or_before(id, before).unwrap_or(sync),
            None => sync,
        }
    }

    /// The byte window of `id` covering timestamps `t0..=t1`.
    ///
    /// An element's time is the value of the last timestamp packet of its
    /// stream before it, so timestamps alone do not bound the elements:
    /// the edges are found as follows. The window begins at the first
    /// timestamp packet whose value is at least `t0` (the elements before
    /// it carry an earlier time), and the decoder starts at the last sync
    /// point at or before that packet (a decoder needs one, and the packets
    /// between it and the timestamp set up the decoder's state). The window
    /// ends at the first timestamp packet whose value is greater than `t1`
    /// (the elements from there on carry a later time), or at the end of
    /// the stream. Timestamps are taken to increase along the stream (as
    /// they do, per trace ID). `None` when no timestamp is in the interval
    /// or no sync point precedes it.
    pub fn time_window(&self, id: u8, t0: u64, t1: u64) -> Option<ByteWindow> {
        let s = self.stream(id)?;
        let mut ts = s.of_kind(EntryKind::Timestamp);
        let first = ts.find(|e| e.value >= t0)?;
        if first.value > t1 {
            return None;
        }
        let end = ts.find(|e| e.value > t1).map_or(self.indexed.end, |e| e.index);
        let start = self.warm_start(id, self.sync_at_or_before(id, first.index)?);
        Some(ByteWindow {
            start,
            from: first.index,
            end,
        })
    }

    /// Events and triggers of every stream and of the formatter, by index.
    pub fn events(&self) -> Vec<EventHit> {
        let mut v: Vec<EventHit> = self
            .streams
            .iter()
            .flat_map(|s| {
                s.entries.iter().filter(|e| e.kind.is_event()).map(move |e| EventHit {
                    id: Some(s.id),
                    entry: *e,
                })
            })
            .collect();
        if let Some(src) = &self.source {
            v.extend(src.triggers.iter().map(|&index| EventHit {
                id: None,
                entry: StreamEntry {
                    index,
                    kind: EntryKind::Trigger,
                    value: 0,
                },
            }));
        }
        v.sort_by_key(|h| (h.entry.index, h.id));
        v
    }

    /// The trace IDs with data in bytes `range`: from the source index at
    /// its granularity (formatted), else the single stream's ID when its
    /// index overlaps the range.
    pub fn ids_in(&self, range: std::ops::Range<TrcIndex>) -> Vec<u8> {
        match (&self.source, self.format) {
            (Some(src), _) => {
                let mask = src.ids_in(range);
                (0..128u8).filter(|&i| mask & (1u128 << i) != 0).collect()
            }
            (None, IndexedFormat::Single) => {
                let overlap = range.start < self.indexed.end && range.end > self.indexed.start;
                self.streams.iter().filter(|_| overlap).map(|s| s.id).collect()
            }
            (None, _) => Vec::new(),
        }
    }

    /// Split points for decoding `id` in `pieces` pieces: sync points near
    /// equal shares of the stream's byte range, each one where nothing is
    /// pending (see [`super::decode_split`]). The first is the first sync.
    pub fn split_points(&self, id: u8, pieces: usize) -> Vec<TrcIndex> {
        let Some(s) = self.stream(id) else { return Vec::new() };
        let clean = clean_syncs(&s.entries);
        let (Some(&first), Some(_)) = (clean.first(), s.entries.last()) else {
            return Vec::new();
        };
        let last = self.indexed.end;
        let mut out = vec![first];
        for k in 1..pieces.max(1) {
            let span = last.saturating_sub(first) as u128;
            let target = first + (span * k as u128 / pieces as u128) as u64;
            let i = clean.partition_point(|&c| c < target);
            if let Some(&c) = clean.get(i)
                && c > *out.last().expect("one point")
            {
                out.push(c);
            }
        }
        out
    }

    /// `id`'s stream in up to `pieces` pieces, from its
    /// [`split_points`](Self::split_points) to the end of the indexed
    /// bytes; empty when it has no sync point to start at.
    pub fn split_pieces(&self, id: u8, pieces: usize) -> Vec<Piece> {
        let points = self.split_points(id, pieces);
        let ends = points.iter().skip(1).copied().chain(std::iter::once(self.indexed.end));
        points
            .iter()
            .zip(ends)
            .map(|(&start, end)| Piece { id, start, end })
            .collect()
    }
}

/// Sync points after which nothing crosses: for ETMv4 / ETE, those whose
/// trace info packet (the next entry of its kind) gives a speculation depth
/// of 0; for other protocols, every sync point.
pub(crate) fn clean_syncs(entries: &[StreamEntry]) -> Vec<TrcIndex> {
    let has_info = entries.iter().any(|e| e.kind == EntryKind::TraceInfo);
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.kind != EntryKind::Sync {
            continue;
        }
        if !has_info {
            out.push(e.index);
            continue;
        }
        let info = entries[i + 1..]
            .iter()
            .find(|n| n.kind == EntryKind::TraceInfo || n.kind == EntryKind::Sync);
        if matches!(info, Some(n) if n.kind == EntryKind::TraceInfo && n.value == 0) {
            out.push(e.index);
        }
    }
    out
}
