//! Flat gnatcov traces from decoded CoreSight trace.
//!
//! [`FlatTraceBuilder`] is a [`TrcGenElemIn`] sink. Each instruction range
//! becomes an executed block: an entry with op `Block`, plus `Br0` when the
//! block ends in a branch that was taken or `Br1` when it was not (a
//! conditional branch that fell through); coverage reads them on
//! conditional branches. A range that an exception cut (it ends in an instruction that
//! is not a branch and an exception element follows) becomes a `Fault`
//! entry covering the instructions that ran, as QEMU writes one. Entries
//! are merged as gnatcov's flat traces are: a block gets one entry per
//! outcome, written the first time that outcome is seen, so a block has at
//! most two. Blocks longer than an entry can say (64 KiB) are split.
//!
//! Streams are kept apart per trace ID (one file per core) or merged into
//! one, as [`Merge`] says. [`ExecSignature`] is the executable's size, time
//! stamp and CRC32 in gnatcov's forms, for the Info section.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use coresight_decode::arch::{InstrType, Isa};
use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::interfaces::TrcGenElemIn;
use coresight_decode::shared::Shared;

use super::format::{
    DateTime, EM_AARCH64, EM_ARM, EM_RISCV, Endian, Entry, InfoEntry, InfoKind, Op, PcSize, Record, TraceFile,
};

/// IEEE CRC-32 (the one GNAT.CRC32 and zlib compute).
pub fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            }
            *e = c;
        }
        t
    });
    !data
        .iter()
        .fold(!0u32, |c, &b| t[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8))
}

/// What gnatcov checks to pair a trace with its executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecSignature {
    /// The name written in the trace (as the user gave it).
    pub name: String,
    /// Size of the executable in bytes.
    pub size: u64,
    /// Modification time, UTC.
    pub time_stamp: DateTime,
    /// CRC32 of the executable's contents.
    pub crc32: u32,
}

impl ExecSignature {
    /// Reads the executable at `path` (named in the trace as given).
    pub fn of_file(path: impl AsRef<Path>) -> std::io::Result<ExecSignature> {
        let path = path.as_ref();
        let data = std::fs::read(path)?;
        let mtime = std::fs::metadata(path)?.modified()?;
        let secs = mtime
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ok(ExecSignature::of_bytes(
            path.to_string_lossy().into_owned(),
            &data,
            DateTime::from_unix(secs),
        ))
    }
    /// The signature of an executable named `name` with contents `data` and modification time
    /// `time_stamp`.
    pub fn of_bytes(name: String, data: &[u8], time_stamp: DateTime) -> ExecSignature {
        ExecSignature {
            name,
            size: data.len() as u64,
            time_stamp,
            crc32: crc32(data),
        }
    }
    /// The Info entries gnatcov writes for an executable, in its order.
    pub fn info_entries(&self) -> Vec<InfoEntry<'static>> {
        vec![
            InfoEntry::new(InfoKind::ExecFileName, self.name.clone().into_bytes()),
            InfoEntry::number(InfoKind::ExecFileSize, self.size),
            InfoEntry::new(InfoKind::ExecFileTimeStamp, self.time_stamp.to_string().into_bytes()),
            InfoEntry::number(InfoKind::ExecFileCrc32, self.crc32 as u64),
        ]
    }
}

/// How streams of different trace IDs become files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Merge {
    /// One trace for all IDs.
    #[default]
    All,
    /// One trace per trace ID.
    PerTraceId,
}

/// A range waiting to see whether an exception cut it.
#[derive(Clone, Copy, Debug)]
struct Pending {
    start: u64,
    end: u64,
    /// The last instruction is a branch (or other waypoint).
    ends_in_waypoint: bool,
    /// Br0/Br1 bits for the block (conditional branch only).
    outcome: u8,
}

#[derive(Default)]
struct Stream {
    pending: Option<Pending>,
    seen: HashSet<(u64, u16, u8)>,
    entries: Vec<Entry>,
    aarch64: bool,
    /// Ran RISC-V code, and (from the last PE context) RV64.
    riscv: bool,
    bits64: bool,
    any: bool,
}

impl Stream {
    fn emit(&mut self, pc: u64, size: u64, op: u8) {
        // Long blocks become several entries; only the last carries the outcome.
        let mut pc = pc;
        let mut left = size;
        while left > 0 {
            let n = left.min(0xfffc);
            let o = if n == left { op } else { op & !(Op::BR0 | Op::BR1) };
            if self.seen.insert((pc, n as u16, o)) {
                self.entries.push(Entry::new(pc, n as u16, o));
            }
            pc += n;
            left -= n;
        }
    }
    fn flush(&mut self, cut_by_exception: bool) {
        if let Some(p) = self.pending.take() {
            let size = p.end.saturating_sub(p.start);
            if cut_by_exception && !p.ends_in_waypoint {
                self.emit(p.start, size, Op::FAULT);
            } else {
                self.emit(p.start, size, Op::BLOCK | p.outcome);
            }
        }
    }
}

/// Flat trace(s) from generic trace elements.
#[derive(Default)]
pub struct FlatTraceBuilder {
    merge: Merge,
    streams: BTreeMap<u8, Stream>,
}

/// Key of the merged stream.
const ALL: u8 = 0xff;

impl FlatTraceBuilder {
    /// A builder merging trace sources as `merge` says.
    pub fn new(merge: Merge) -> FlatTraceBuilder {
        FlatTraceBuilder {
            merge,
            streams: BTreeMap::new(),
        }
    }

    /// Takes one element (what [`TrcGenElemIn::trace_elem_in`] does).
    pub fn add(&mut self, trace_id: u8, e: &TraceElement) {
        let key = if self.merge == Merge::All { ALL } else { trace_id };
        let s = self.streams.entry(key).or_default();
        match e.elem_type {
            ElemType::InstrRange => {
                s.flush(false);
                if e.en_addr <= e.st_addr {
                    return;
                }
                s.any = true;
                s.aarch64 |= e.isa == Isa::Aarch64;
                s.riscv |= e.isa == Isa::RiscV;
                // Every branch gets its outcome, as QEMU gives it: a
                // conditional branch needs it, and whether the decoder knew
                // the branch was conditional (T32 IT blocks are not tracked
                // by every protocol's decoder) must not matter.
                let branch = matches!(e.last_i_type, InstrType::Branch | InstrType::BranchIndirect);
                let outcome = match (branch, e.last_instr_exec) {
                    (false, _) => 0,
                    (true, true) => Op::BR0,
                    (true, false) => Op::BR1,
                };
                s.pending = Some(Pending {
                    start: e.st_addr,
                    end: e.en_addr,
                    ends_in_waypoint: e.last_i_type != InstrType::Other,
                    outcome,
                });
            }
            ElemType::Exception => s.flush(true),
            ElemType::PeContext => {
                s.flush(false);
                s.bits64 = e.context.bits64;
            }
            // Timing and bookkeeping elements say nothing about the range.
            ElemType::Timestamp | ElemType::CycleCount | ElemType::Event | ElemType::SyncMarker | ElemType::Custom => {}
            _ => s.flush(false),
        }
    }

    /// Ends all streams (end of trace).
    pub fn finish(&mut self) {
        for s in self.streams.values_mut() {
            s.flush(false);
        }
    }

    /// Trace IDs (or the merged stream, as `None`) that have entries.
    pub fn streams(&self) -> Vec<Option<u8>> {
        self.streams
            .iter()
            .filter(|(_, s)| !s.entries.is_empty())
            .map(|(&k, _)| (k != ALL || self.merge == Merge::PerTraceId).then_some(k))
            .collect()
    }

    /// The entries of a stream (`None`: merged), in order of first occurrence.
    pub fn entries(&self, id: Option<u8>) -> &[Entry] {
        self.streams.get(&id.unwrap_or(ALL)).map_or(&[], |s| &s.entries)
    }

    /// Whether the stream ran A64 code.
    pub fn is_aarch64(&self, id: Option<u8>) -> bool {
        self.streams.get(&id.unwrap_or(ALL)).is_some_and(|s| s.aarch64)
    }

    /// Whether the stream ran RISC-V code, and whether it was RV64 (the
    /// last PE context's `bits64`).
    pub fn riscv(&self, id: Option<u8>) -> Option<bool> {
        self.streams
            .get(&id.unwrap_or(ALL))
            .filter(|s| s.riscv)
            .map(|s| s.bits64)
    }

    /// The flat trace file of a stream. The machine is RISC-V (EM_RISCV)
    /// when the stream ran RISC-V code, AArch64 when it ran A64 code, else
    /// Arm, unless `machine` says otherwise; 64-bit PCs for AArch64 and
    /// RV64 (32-bit for RV32, as gnatcov's QEMU writes them).
    /// `signature` and `date` fill the Info section.
    pub fn trace_file(
        &self,
        id: Option<u8>,
        machine: Option<u16>,
        endian: Endian,
        signature: Option<&ExecSignature>,
        date: Option<DateTime>,
    ) -> TraceFile<'static> {
        let rv = self.riscv(id);
        let machine = machine.unwrap_or(if rv.is_some() {
            EM_RISCV
        } else if self.is_aarch64(id) {
            EM_AARCH64
        } else {
            EM_ARM
        });
        let wide = machine == EM_AARCH64 || (machine == EM_RISCV && rv != Some(false));
        let pc = if wide || self.entries(id).iter().any(|e| e.pc > u32::MAX as u64) {
            PcSize::Bits64
        } else {
            PcSize::Bits32
        };
        let mut t = TraceFile::new_flat(pc, endian, machine);
        if let Some(d) = date {
            t.infos
                .push(InfoEntry::new(InfoKind::DateTime, d.to_bytes(endian).to_vec()));
        }
        if let Some(sig) = signature {
            t.infos.extend(sig.info_entries());
        }
        t.records = self.entries(id).iter().map(|e| Record::Exec(*e)).collect();
        t
    }
}

impl TrcGenElemIn for FlatTraceBuilder {
    fn trace_elem_in(&mut self, _index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.add(trace_id, elem);
        DatapathResp::Cont
    }
}

/// A shareable builder, for a decode tree that owns its sink.
pub struct SharedBuilder(pub Shared<FlatTraceBuilder>);

impl TrcGenElemIn for SharedBuilder {
    fn trace_elem_in(&mut self, _index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().add(trace_id, elem);
        DatapathResp::Cont
    }
}
