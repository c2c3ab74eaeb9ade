//! AutoFDO profiles from decoded trace, written as `simpleperf inject --output autofdo` writes
//! them: the text "unsymbolized profile" that `create_llvm_prof --format=text`, `create_gcov`
//! and `llvm-profgen --unsymbolized-profile` read.
//!
//! What is counted follows simpleperf's `inject`: every instruction range element is one
//! execution of the range `start-end` (`end` the address of its last instruction); a range
//! ending in a taken branch also counts the branch `end->to`, where `to` is the start of the
//! next range for a direct branch (or its encoded target when no range follows), and 0 for an
//! indirect branch (its target is not in the instruction). Addresses are virtual addresses of
//! the ELF file (runtime address → file offset through the map's page offset → virtual address
//! through the program headers), less the first loadable segment's address. A trace-on element
//! (a gap in the trace) ends the chain; so does a range in code of no known map.
//!
//! For each binary (sorted by path): the number of ranges and `start-end:count` lines, the
//! number of addresses (always 0 from ETM trace), the number of branches and `from->to:count`
//! lines, all in hex without `0x` but the counts in decimal, sorted by address; then
//! `// build_id: 0x…` (20 bytes, zero padded) and `// <path>`, and an empty line. More than
//! one binary is preceded by a line asking to split the file (AutoFDO takes one binary).

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrType, Isa};
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::instr::ArmInstrDecoder;
use coresight_decode::interfaces::InstrDecode;
pub use regex::Regex;

use crate::decode::{ElementInfo, Event};
use crate::memory::Model;

/// A binary of the profile: its recorded path and build id (simpleperf's `BinaryKey`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BinaryKey {
    /// Path on the device.
    pub path: String,
    /// `0x` and 40 hex digits.
    pub build_id: String,
}

/// The counts of one binary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BinaryProfile {
    /// Address of the first loadable segment (subtracted from every address written).
    pub first_load_vaddr: u64,
    /// `(start, end)` → executions.
    pub ranges: HashMap<(u64, u64), u64>,
    /// Address → samples (not made from ETM trace; kept for the format).
    pub addresses: HashMap<u64, u64>,
    /// `(from, to)` → times taken.
    pub branches: HashMap<(u64, u64), u64>,
}

/// Adds with saturation at 2^64-1; true if it saturated.
fn add_sat(dest: &mut u64, add: u64) -> bool {
    match dest.checked_add(add) {
        Some(v) => {
            *dest = v;
            false
        }
        None => {
            *dest = u64::MAX;
            true
        }
    }
}

/// An AutoFDO profile over any number of recordings.
#[derive(Debug, Clone, Default)]
pub struct AutoFdoProfile {
    /// The binaries.
    pub binaries: HashMap<BinaryKey, BinaryProfile>,
    /// Keep only binaries whose path this matches (anywhere in it, as simpleperf's
    /// `--binary`).
    pub filter: Option<Regex>,
    /// Additions that saturated at 2^64-1.
    pub overflows: u64,
}

impl AutoFdoProfile {
    /// An empty profile keeping binaries whose path matches `filter`.
    pub fn new(filter: Option<Regex>) -> Self {
        AutoFdoProfile {
            filter,
            ..Default::default()
        }
    }

    /// Whether `path` is kept.
    pub fn keeps(&self, path: &str) -> bool {
        self.filter.as_ref().is_none_or(|r| r.is_match(path))
    }

    fn binary(&mut self, key: &BinaryKey, first_load_vaddr: u64) -> &mut BinaryProfile {
        if !self.binaries.contains_key(key) {
            self.binaries.insert(
                key.clone(),
                BinaryProfile {
                    first_load_vaddr,
                    ..Default::default()
                },
            );
        }
        self.binaries.get_mut(key).expect("inserted above")
    }

    /// Adds `count` executions of the range `start..=end` of `key`.
    pub fn add_range(&mut self, key: &BinaryKey, first_load_vaddr: u64, start: u64, end: u64, count: u64) {
        let b = self.binary(key, first_load_vaddr);
        let sat = add_sat(b.ranges.entry((start, end)).or_default(), count);
        self.overflows += u64::from(sat);
    }

    /// Adds `count` takings of the branch `from->to` of `key`.
    pub fn add_branch(&mut self, key: &BinaryKey, first_load_vaddr: u64, from: u64, to: u64, count: u64) {
        let b = self.binary(key, first_load_vaddr);
        let sat = add_sat(b.branches.entry((from, to)).or_default(), count);
        self.overflows += u64::from(sat);
    }

    /// Adds another profile's counts (of the binaries this one keeps).
    pub fn merge(&mut self, other: &AutoFdoProfile) {
        for (k, b) in &other.binaries {
            if !self.keeps(&k.path) {
                continue;
            }
            let mine = self.binary(k, b.first_load_vaddr);
            let mut sat = 0;
            for (a, c) in &b.ranges {
                sat += u64::from(add_sat(mine.ranges.entry(*a).or_default(), *c));
            }
            for (a, c) in &b.addresses {
                sat += u64::from(add_sat(mine.addresses.entry(*a).or_default(), *c));
            }
            for (a, c) in &b.branches {
                sat += u64::from(add_sat(mine.branches.entry(*a).or_default(), *c));
            }
            self.overflows += sat;
        }
        self.overflows += other.overflows;
    }

    /// Writes the profile in simpleperf's AutoFDO text layout.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut keys: Vec<&BinaryKey> = self.binaries.keys().collect();
        // simpleperf sorts by path only; the build id breaks ties so the output is stable.
        keys.sort_by(|a, b| a.path.cmp(&b.path).then(a.build_id.cmp(&b.build_id)));
        if keys.len() > 1 {
            out.write_all(b"// Please split this file. AutoFDO only accepts profile for one binary.\n")?;
        }
        for k in keys {
            let b = &self.binaries[k];
            let first = b.first_load_vaddr;
            let off = |v: u64| if v == 0 { 0 } else { v.wrapping_sub(first) };
            let ranges: BTreeMap<_, _> = b.ranges.iter().collect();
            writeln!(out, "{}", ranges.len())?;
            for ((s, e), c) in ranges {
                writeln!(out, "{:x}-{:x}:{c}", off(*s), off(*e))?;
            }
            let addrs: BTreeMap<_, _> = b.addresses.iter().collect();
            writeln!(out, "{}", addrs.len())?;
            for (a, c) in addrs {
                writeln!(out, "{:x}:{c}", off(*a))?;
            }
            let branches: BTreeMap<_, _> = b.branches.iter().collect();
            writeln!(out, "{}", branches.len())?;
            for ((f, t), c) in branches {
                writeln!(out, "{:x}->{:x}:{c}", off(*f), off(*t))?;
            }
            writeln!(out, "// build_id: {}", k.build_id)?;
            writeln!(out, "// {}\n", k.path)?;
        }
        Ok(())
    }

    /// The profile as text.
    pub fn to_text(&self) -> String {
        let mut v = Vec::new();
        let _ = self.write(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// A range waiting for the next one (which gives its direct branch's target).
#[derive(Debug, Clone, Copy)]
struct Pending {
    binary: usize,
    start: u64,
    end: u64,
    branch_to: u64,
    taken: bool,
    wait_for_target: bool,
    /// For a taken direct branch: where to read it to find its encoded target, needed only
    /// when no range follows to give the target (map, runtime address, ISA, size).
    direct: Option<(usize, u64, Isa, u8)>,
}

/// The runtime addresses `lo..hi` of a stream's last range that one map and one segment
/// hold: there an address's virtual address in the file is `addr + delta`.
#[derive(Debug, Clone, Copy)]
struct Window {
    pid: i32,
    lo: u64,
    hi: u64,
    delta: u64,
    map: usize,
    binary: usize,
}

/// Entries of each count cache (a power of two).
const COUNT_CACHE: usize = 4096;

/// One slot of a direct-mapped cache of counts: hot ranges and branches are counted here,
/// and reach the hash map only when another key takes their slot.
#[derive(Debug, Clone, Copy, Default)]
struct CountSlot {
    binary: usize,
    a: u64,
    b: u64,
    count: u64,
}

fn slot_of(binary: usize, a: u64, b: u64) -> usize {
    let h = (a ^ b.rotate_left(17) ^ (binary as u64).rotate_left(40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 52) as usize % COUNT_CACHE
}

/// Turns decoded elements into AutoFDO counts: feed it every [`Event`] of a decode.
pub struct AutoFdoBuilder<'m> {
    model: &'m Model,
    pending: Vec<Option<Pending>>,
    /// The map used last per stream: (pid, map index).
    last_map: Vec<Option<(i32, usize)>>,
    position: u64,
    instr: ArmInstrDecoder,
    /// Counts per binary of the model (by its index), keyed by path only when finished:
    /// nothing is allocated per range.
    local: Vec<Option<BinaryProfile>>,
    /// The count caches in front of `local`: ranges, and branches taken.
    range_cache: Vec<CountSlot>,
    branch_cache: Vec<CountSlot>,
    /// Per stream, where the last range was (most ranges fall in the same segment).
    windows: Vec<Option<Window>>,
    overflows: u64,
    /// Ranges in code of no known map, dropped.
    pub unmapped_ranges: u64,
}

impl<'m> AutoFdoBuilder<'m> {
    /// A builder for a recording with `streams` trace streams whose processes `model` holds.
    pub fn new(model: &'m Model, streams: usize) -> Self {
        AutoFdoBuilder {
            model,
            pending: vec![None; streams],
            last_map: vec![None; streams],
            position: 0,
            instr: ArmInstrDecoder::default(),
            local: vec![None; model.binaries.len()],
            range_cache: vec![CountSlot::default(); COUNT_CACHE],
            branch_cache: vec![CountSlot::default(); COUNT_CACHE],
            windows: vec![None; streams],
            overflows: 0,
            unmapped_ranges: 0,
        }
    }

    /// Takes one event of the decode.
    pub fn event(&mut self, ev: &Event<'_, '_>) {
        match ev {
            Event::BufferStart { aux, .. } => {
                self.position = aux.record_offset;
                for m in &mut self.last_map {
                    *m = None;
                }
                for w in &mut self.windows {
                    *w = None;
                }
            }
            Event::Element(info, e) => self.element(info, e),
            Event::BufferEnd { .. } => {}
        }
    }

    fn find_map(&mut self, s: usize, pid: i32, addr: u64) -> Option<usize> {
        if pid < 0 {
            // simpleperf: no thread, no map (not even the kernel's).
            return None;
        }
        if let Some(Some((p, i))) = self.last_map.get(s)
            && *p == pid
        {
            let m = &self.model.maps[*i];
            if addr >= m.start && addr < m.end {
                return Some(*i);
            }
        }
        let i = self.model.find_map(pid, addr, self.position)?;
        if let Some(slot) = self.last_map.get_mut(s) {
            *slot = Some((pid, i));
        }
        Some(i)
    }

    fn element(&mut self, info: &ElementInfo, e: &TraceElement) {
        let s = info.stream;
        if s >= self.pending.len() {
            return;
        }
        match e.elem_type {
            ElemType::InstrRange => {}
            ElemType::TraceOn => {
                self.flush(s);
                return;
            }
            _ => return,
        }
        let last = e.en_addr.wrapping_sub(u64::from(e.last_instr_sz));
        let inside = |w: &Window| w.pid == info.pid && e.st_addr >= w.lo && last >= e.st_addr && last < w.hi;
        let w = match self.windows.get(s).copied().flatten().filter(inside) {
            Some(w) => w,
            None => match self.window(s, info.pid, e.st_addr) {
                Some(w) => w,
                None => {
                    self.unmapped_ranges += 1;
                    self.flush(s);
                    return;
                }
            },
        };
        let start = e.st_addr.wrapping_add(w.delta);
        if let Some(Some(p)) = self.pending.get_mut(s)
            && p.wait_for_target
        {
            p.branch_to = start;
            p.wait_for_target = false;
        }
        self.flush(s);
        let end_with_branch = matches!(e.last_i_type, InstrType::Branch | InstrType::BranchIndirect);
        let taken = end_with_branch && e.last_instr_exec;
        let direct = e.last_i_type == InstrType::Branch && taken;
        // A range leaving the window (rare) takes the slow way for its end.
        let end = if last < w.hi {
            last.wrapping_add(w.delta)
        } else {
            self.vaddr(w.map, last)
        };
        self.pending[s] = Some(Pending {
            binary: w.binary,
            start,
            end,
            branch_to: 0,
            taken,
            wait_for_target: direct,
            direct: direct.then_some((w.map, last, e.isa, e.last_instr_sz)),
        });
    }

    /// The binary's own address of runtime address `a` of map `mi`: through the file offset,
    /// or a module's layout, or a kernel image's link address; the file offset when the file
    /// is missing.
    fn vaddr(&self, mi: usize, a: u64) -> u64 {
        let model = self.model;
        model
            .vaddr_in_file(mi, a)
            .unwrap_or_else(|| model.maps[mi].file_offset(a))
    }

    /// Finds the map of `addr` and makes the stream's window around it.
    fn window(&mut self, s: usize, pid: i32, addr: u64) -> Option<Window> {
        let mi = self.find_map(s, pid, addr)?;
        let model = self.model;
        let map = &model.maps[mi];
        let img = model.binary(map.binary).and_then(|b| b.image(&model.search));
        let off = map.file_offset(addr);
        let linear = img.is_some_and(|i| i.relocatable) || model.binary(map.binary).is_some_and(|b| b.is_kernel());
        // The runtime addresses of the map whose file offsets one segment holds; a module
        // or kernel image is moved whole, so its whole map.
        let segment = if linear {
            None
        } else {
            img.and_then(|i| i.segment_at_offset(off))
        };
        let (lo, hi, delta) = match segment {
            None if linear => (map.start, map.end, self.vaddr(mi, map.start).wrapping_sub(map.start)),
            Some((seg_off, seg_size, seg_vaddr)) => {
                let lo = map.start.max(seg_off.wrapping_sub(map.pgoff).wrapping_add(map.start));
                let hi = map.end.min(
                    seg_off
                        .wrapping_add(seg_size)
                        .wrapping_sub(map.pgoff)
                        .wrapping_add(map.start),
                );
                let delta = seg_vaddr
                    .wrapping_sub(seg_off)
                    .wrapping_add(map.pgoff)
                    .wrapping_sub(map.start);
                (lo, hi, delta)
            }
            None if img.is_some() => {
                // Not in any segment: the slow way for this range, no window.
                (addr, addr, 0)
            }
            None => (map.start, map.end, map.pgoff.wrapping_sub(map.start)),
        };
        let mut w = Window {
            pid,
            lo,
            hi,
            delta,
            map: mi,
            binary: map.binary,
        };
        if lo >= hi || addr < lo || addr >= hi {
            // The window is empty: this range's start alone, the slow way.
            w.lo = addr;
            w.hi = addr;
            w.delta = self.vaddr(mi, addr).wrapping_sub(addr);
            if let Some(slot) = self.windows.get_mut(s) {
                *slot = None;
            }
            // `inside` fails on an empty window, so only this range uses it.
            w.hi = addr.wrapping_add(1);
            return Some(w);
        }
        if let Some(slot) = self.windows.get_mut(s) {
            *slot = Some(w);
        }
        Some(w)
    }

    /// The encoded target of the direct branch at `addr` (a virtual address of its binary).
    fn direct_target(&mut self, mi: usize, addr: u64, isa: Isa, size: u8) -> Option<u64> {
        let mut b = [0u8; 4];
        // Through the model: a module's or kernel's code is not at its file offset.
        let n = self
            .model
            .read_loaded(mi, addr, &mut b[..usize::from(size.clamp(2, 4))]);
        if n < 2 {
            return None;
        }
        let mut info = InstrInfo {
            pe_type: ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA),
            isa,
            instr_addr: addr,
            opcode: u32::from_le_bytes(b),
            ..Default::default()
        };
        if isa == Isa::Aarch64 {
            info.pe_type = ArchProfile::new(ArchVersion::Aa64, CoreProfile::CortexA);
        }
        self.instr.decode_instruction(&mut info).ok()?;
        if info.instr_type != InstrType::Branch {
            return None;
        }
        Some(self.vaddr(mi, info.branch_addr))
    }

    /// Counts one more of `(a, b)` of `binary` in `cache` (ranges or branches), moving the
    /// slot's previous key to the binary's map.
    fn count(&mut self, branches: bool, binary: usize, a: u64, b: u64) {
        let i = slot_of(binary, a, b);
        let cache = if branches {
            &mut self.branch_cache
        } else {
            &mut self.range_cache
        };
        let slot = &mut cache[i];
        if slot.count > 0
            && slot.binary == binary
            && slot.a == a
            && slot.b == b
            && let Some(c) = slot.count.checked_add(1)
        {
            slot.count = c;
            return;
        }
        let old = std::mem::replace(slot, CountSlot { binary, a, b, count: 1 });
        self.spill(branches, old);
    }

    /// Adds a cache slot's count to its binary's map.
    fn spill(&mut self, branches: bool, slot: CountSlot) {
        if slot.count == 0 {
            return;
        }
        let model = self.model;
        // The address the binary's counts are written from (its image is loaded: its code
        // was read to make them).
        let first = model
            .binary(slot.binary)
            .and_then(|b| b.image(&model.search))
            .map_or(0, |i| i.first_load_vaddr());
        let Some(b) = self.local.get_mut(slot.binary) else {
            return;
        };
        let b = b.get_or_insert_with(|| BinaryProfile {
            first_load_vaddr: first,
            ..Default::default()
        });
        let map = if branches { &mut b.branches } else { &mut b.ranges };
        self.overflows += u64::from(add_sat(map.entry((slot.a, slot.b)).or_default(), slot.count));
    }

    fn flush(&mut self, s: usize) {
        let Some(mut p) = self.pending.get_mut(s).and_then(Option::take) else {
            return;
        };
        if p.wait_for_target
            && let Some((mi, addr, isa, size)) = p.direct
        {
            // No range followed to give the target: the instruction's own.
            p.branch_to = self.direct_target(mi, addr, isa, size).unwrap_or(0);
        }
        self.count(false, p.binary, p.start, p.end);
        if p.taken {
            self.count(true, p.binary, p.end, p.branch_to);
        }
    }

    /// Flushes the ranges still waiting (at the end of a recording) and adds the counts of
    /// the binaries `profile` keeps to it.
    pub fn finish(&mut self, profile: &mut AutoFdoProfile) {
        for s in 0..self.pending.len() {
            self.flush(s);
        }
        for i in 0..COUNT_CACHE {
            let r = std::mem::take(&mut self.range_cache[i]);
            self.spill(false, r);
            let b = std::mem::take(&mut self.branch_cache[i]);
            self.spill(true, b);
        }
        let mut part = AutoFdoProfile {
            overflows: self.overflows,
            ..Default::default()
        };
        for (i, b) in self.local.iter_mut().enumerate() {
            let (Some(counts), Some(bin)) = (b.take(), self.model.binary(i)) else {
                continue;
            };
            let key = BinaryKey {
                path: bin.path.clone(),
                build_id: bin.build_id_string(),
            };
            part.binaries.insert(key, counts);
        }
        self.overflows = 0;
        profile.merge(&part);
    }
}

/// Decodes `rec` (binaries found with `search`) and adds its counts to `profile`; returns the
/// decode's summary, its warnings, and the binaries whose code was missing.
pub fn add_recording(
    rec: &crate::Recording<'_>,
    search: crate::binaries::SymbolSearch,
    opts: crate::decode::DecodeOptions,
    profile: &mut AutoFdoProfile,
    progress: &mut dyn FnMut(u64),
) -> Result<RecordingReport, crate::decode::DecodeError> {
    let model = std::sync::Arc::new(Model::new(rec, search));
    let mut dec = crate::decode::RecordingDecoder::new(rec, model.clone(), opts)?;
    let mut b = AutoFdoBuilder::new(&model, dec.cpus().len());
    let summary = run_with_progress(&mut dec, progress, &mut |ev| b.event(ev));
    b.finish(profile);
    Ok(RecordingReport::of(&dec, summary, b.unmapped_ranges))
}

/// Decodes every buffer of `dec`'s recording, telling `progress` the bytes of each buffer done
/// and handing every event to `f`.
pub(crate) fn run_with_progress(
    dec: &mut crate::decode::RecordingDecoder<'_, '_>,
    progress: &mut dyn FnMut(u64),
    f: &mut dyn FnMut(&Event<'_, '_>),
) -> crate::decode::DecodeSummary {
    let rec = dec.recording();
    dec.run(&mut |ev| {
        if let Event::BufferEnd { buffer } = ev
            && let Some(buf) = rec.buffers.get(buffer)
        {
            progress(buf.data.len() as u64);
        }
        f(&ev)
    })
}

/// What [`add_recording`] found.
#[derive(Debug, Clone)]
pub struct RecordingReport {
    /// Counts of the decode.
    pub summary: crate::decode::DecodeSummary,
    /// Problems that did not stop it.
    pub warnings: Vec<crate::Warning>,
    /// Binaries whose code was needed and not found: path, reads, why.
    pub missing: Vec<(String, u64, String)>,
    /// Ranges in code of no known map.
    pub unmapped_ranges: u64,
}

impl RecordingReport {
    /// The report of a decode that ended with `summary`.
    pub(crate) fn of(
        dec: &crate::decode::RecordingDecoder<'_, '_>,
        summary: crate::decode::DecodeSummary,
        unmapped_ranges: u64,
    ) -> Self {
        RecordingReport {
            summary,
            warnings: dec.warnings.clone(),
            missing: dec.missing_binaries(),
            unmapped_ranges,
        }
    }
}
