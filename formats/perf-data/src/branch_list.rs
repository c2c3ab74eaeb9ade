//! simpleperf's ETM branch lists (`simpleperf inject --output branch-list`): a compact form of
//! decoded trace that a fleet of devices sends home, merged there and turned into one AutoFDO
//! profile.
//!
//! A branch list of a binary is a start address (a virtual address of the ELF file, bit 0 set
//! for T32 code) and the outcome of each branch instruction met from there, in execution order:
//! 1 taken, 0 not taken. Walking the binary's code from the start, to each next branch
//! instruction, and on to its target or the instruction after it, gives back the instruction
//! ranges and the branches taken, so one branch list with its count stands for as many
//! executions of that path. The file is simpleperf's `BranchList` protocol buffer message
//! (`branch_list.proto`, magic `simpleperf:EtmBranchList`), read and written with `prost`.
//!
//! What a branch list cannot hold is lost on this route, as on simpleperf's: a range that does
//! not end at a branch instruction (cut short by an exception or the end of trace), and a
//! branch's target when the next range is in another binary.

use std::collections::{BTreeMap, HashMap};

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrType, Isa};
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::instr::ArmInstrDecoder;
use coresight_decode::interfaces::InstrDecode;
use prost::Message;

use crate::autofdo::{AutoFdoProfile, BinaryKey};
use crate::binaries::SymbolSearch;
use crate::decode::{ElementInfo, Event};
use crate::elf::ElfImage;
use crate::memory::Model;

/// The `magic` field of every branch list file.
pub const MAGIC: &str = "simpleperf:EtmBranchList";

/// The kind of a binary, as the file records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum BinaryKind {
    /// A program or shared library.
    #[default]
    Elf,
    /// The kernel (its addresses are virtual addresses of vmlinux).
    Kernel,
    /// A loadable kernel module.
    KernelModule,
}

/// The branch lists of one binary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EtmBinary {
    /// The binary's path on the device.
    pub path: String,
    /// Its build id: hex digits without `0x` (empty when unknown), as simpleperf writes it.
    pub build_id: String,
    /// What it is.
    pub kind: BinaryKind,
    /// For the kernel: the address its addresses are relative to (0: already virtual
    /// addresses of vmlinux, which is what this crate writes).
    pub kernel_start_addr: u64,
    /// Start address → branch outcomes → times seen.
    pub branches: BTreeMap<u64, BTreeMap<Vec<bool>, u64>>,
}

/// A branch list file: the binaries' branch lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BranchList {
    /// By (path, build id, kernel start address), the key simpleperf merges on.
    pub binaries: BTreeMap<(String, String, u64), EtmBinary>,
    /// Additions that saturated at 2^64-1.
    pub overflows: u64,
}

/// A branch list file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BranchListError {
    /// Not a protocol buffer of the `BranchList` message.
    #[error("not a branch list file: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A protocol buffer, but not simpleperf's branch list.
    #[error("not a branch list file: its magic is {found:?}, expected {MAGIC:?}")]
    Magic {
        /// The magic found.
        found: String,
    },
    /// A branch of more bits than its bytes hold.
    #[error("binary {path}: a branch list of {bits} branches has only {bytes} bytes")]
    Short {
        /// The binary.
        path: String,
        /// Bits claimed.
        bits: u32,
        /// Bytes there.
        bytes: usize,
    },
}

// The messages of simpleperf's branch_list.proto (proto3), as prost reads and writes them.
#[derive(Clone, PartialEq, prost::Message)]
struct PbBranchList {
    #[prost(string, tag = "1")]
    magic: String,
    #[prost(message, repeated, tag = "2")]
    etm_data: Vec<PbEtmBinary>,
    #[prost(message, optional, tag = "3")]
    lbr_data: Option<PbLbrData>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PbEtmBinary {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(string, tag = "2")]
    build_id: String,
    #[prost(message, repeated, tag = "3")]
    addrs: Vec<PbAddress>,
    #[prost(int32, tag = "4")]
    kind: i32,
    #[prost(message, optional, tag = "5")]
    kernel_info: Option<PbKernelInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PbAddress {
    #[prost(uint64, tag = "1")]
    addr: u64,
    #[prost(message, repeated, tag = "2")]
    branches: Vec<PbBranch>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PbBranch {
    #[prost(bytes = "vec", tag = "1")]
    branch: Vec<u8>,
    #[prost(uint32, tag = "2")]
    branch_size: u32,
    #[prost(uint64, tag = "3")]
    count: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PbKernelInfo {
    #[prost(uint64, tag = "1")]
    kernel_start_addr: u64,
}

/// LBR samples (not made from ETM trace): only their presence is noted.
#[derive(Clone, PartialEq, prost::Message)]
struct PbLbrData {
    #[prost(bytes = "vec", repeated, tag = "1")]
    samples: Vec<Vec<u8>>,
}

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

impl BranchList {
    /// The branch list `bytes` hold, if they are one rather than a perf.data (which starts
    /// with its magic `PERFILE2`): read once, for the caller to use.
    pub fn sniff(bytes: &[u8]) -> Option<BranchList> {
        if bytes.starts_with(b"PERFILE2") || bytes.starts_with(b"2ELIFREP") {
            return None;
        }
        BranchList::parse(bytes).ok()
    }

    /// Reads a branch list file.
    pub fn parse(bytes: &[u8]) -> Result<BranchList, BranchListError> {
        let pb = PbBranchList::decode(bytes)?;
        if pb.magic != MAGIC {
            return Err(BranchListError::Magic { found: pb.magic });
        }
        let mut out = BranchList::default();
        for b in pb.etm_data {
            let kind = match b.kind {
                1 => BinaryKind::Kernel,
                2 => BinaryKind::KernelModule,
                _ => BinaryKind::Elf,
            };
            let mut bin = EtmBinary {
                path: b.path,
                build_id: b.build_id,
                kind,
                kernel_start_addr: b.kernel_info.map_or(0, |k| k.kernel_start_addr),
                branches: BTreeMap::new(),
            };
            for a in b.addrs {
                let lists = bin.branches.entry(a.addr).or_default();
                for br in a.branches {
                    let bits = br.branch_size as usize;
                    if br.branch.len() * 8 < bits {
                        return Err(BranchListError::Short {
                            path: bin.path,
                            bits: br.branch_size,
                            bytes: br.branch.len(),
                        });
                    }
                    let list: Vec<bool> = (0..bits).map(|i| br.branch[i / 8] >> (i % 8) & 1 == 1).collect();
                    out.overflows += u64::from(add_sat(lists.entry(list).or_default(), br.count));
                }
            }
            out.add_binary(bin);
        }
        Ok(out)
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let pb = PbBranchList {
            magic: MAGIC.to_string(),
            etm_data: self
                .binaries
                .values()
                .map(|b| PbEtmBinary {
                    path: b.path.clone(),
                    build_id: b.build_id.clone(),
                    kind: match b.kind {
                        BinaryKind::Elf => 0,
                        BinaryKind::Kernel => 1,
                        BinaryKind::KernelModule => 2,
                    },
                    kernel_info: (b.kind == BinaryKind::Kernel).then_some(PbKernelInfo {
                        kernel_start_addr: b.kernel_start_addr,
                    }),
                    addrs: b
                        .branches
                        .iter()
                        .map(|(addr, lists)| PbAddress {
                            addr: *addr,
                            branches: lists
                                .iter()
                                .map(|(list, count)| {
                                    let mut bytes = vec![0u8; list.len().div_ceil(8)];
                                    for (i, _) in list.iter().enumerate().filter(|(_, b)| **b) {
                                        bytes[i / 8] |= 1 << (i % 8);
                                    }
                                    PbBranch {
                                        branch: bytes,
                                        branch_size: list.len() as u32,
                                        count: *count,
                                    }
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
            lbr_data: None,
        };
        pb.encode_to_vec()
    }

    /// Adds one binary's lists (merged with what is there for the same binary).
    fn add_binary(&mut self, bin: EtmBinary) {
        let key = (bin.path.clone(), bin.build_id.clone(), bin.kernel_start_addr);
        match self.binaries.get_mut(&key) {
            None => {
                self.binaries.insert(key, bin);
            }
            Some(mine) => {
                for (addr, lists) in bin.branches {
                    let m = mine.branches.entry(addr).or_default();
                    for (list, count) in lists {
                        self.overflows += u64::from(add_sat(m.entry(list).or_default(), count));
                    }
                }
            }
        }
    }

    /// Adds another file's lists: counts of the same binary, start and branches add up
    /// (saturating at 2^64-1).
    pub fn merge(&mut self, other: &BranchList) {
        for b in other.binaries.values() {
            self.add_binary(b.clone());
        }
        self.overflows += other.overflows;
    }

    /// Keeps only the binaries whose path `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.binaries.retain(|(path, _, _), _| keep(path));
    }

    /// Turns the lists into AutoFDO counts, walking each binary's code (found with `search`
    /// by build id and path) as simpleperf does; adds them to `profile` (its filter applies).
    /// Returns the binaries whose code could not be read, with why.
    pub fn add_to_profile(&self, search: &SymbolSearch, profile: &mut AutoFdoProfile) -> Vec<(String, String)> {
        let mut missing = Vec::new();
        for b in self.binaries.values() {
            if !profile.keeps(&b.path) {
                continue;
            }
            let build_id = build_id_from_hex(&b.build_id);
            let Some(path) = search.find(&b.path, build_id.as_ref()) else {
                missing.push((b.path.clone(), "not found".to_string()));
                continue;
            };
            let img = match ElfImage::open(&path) {
                Ok(i) => i,
                Err(e) => {
                    missing.push((b.path.clone(), e.to_string()));
                    continue;
                }
            };
            let key = BinaryKey {
                path: b.path.clone(),
                build_id: format!("0x{:0<40}", b.build_id),
            };
            let mut walker = Walker::new(&img);
            for (start, lists) in &b.branches {
                for (list, count) in lists {
                    walker.walk(*start, list, &mut |r| match r {
                        Walked::Range(s, e) => profile.add_range(&key, img.first_load_vaddr(), s, e, *count),
                        Walked::Branch(f, t) => profile.add_branch(&key, img.first_load_vaddr(), f, t, *count),
                    });
                }
            }
        }
        missing
    }
}

/// A build id written as hex digits (None when empty or not hex).
fn build_id_from_hex(s: &str) -> Option<crate::record::BuildId> {
    let s = s.trim_start_matches("0x");
    if s.is_empty() || !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    Some(crate::record::BuildId::new(&bytes?))
}

/// What a walk gives.
enum Walked {
    /// An instruction range, first and last instruction.
    Range(u64, u64),
    /// A branch taken, from the branch instruction to its target (0: indirect).
    Branch(u64, u64),
}

/// Follows branch lists through a binary's code.
struct Walker<'i> {
    img: &'i ElfImage,
    instr: ArmInstrDecoder,
}

impl<'i> Walker<'i> {
    fn new(img: &'i ElfImage) -> Self {
        Walker {
            img,
            instr: ArmInstrDecoder::default(),
        }
    }

    /// The instruction at `addr`: its type, size and direct target; None when the code is not
    /// there or does not decode.
    fn decode(&mut self, addr: u64, isa: Isa) -> Option<InstrInfo> {
        let mut b = [0u8; 4];
        let want = if isa == Isa::Thumb2 { 2 } else { 4 };
        if self.img.read_vaddr(addr, &mut b[..want]) < want {
            return None;
        }
        if isa == Isa::Thumb2 && coresight_decode::instr::is_wide_thumb(u16::from_le_bytes([b[0], b[1]])) {
            if self.img.read_vaddr(addr, &mut b) < 4 {
                return None;
            }
            // A wide T32 instruction is two halfwords, the first in the upper bits.
            let (hi, lo) = (u16::from_le_bytes([b[0], b[1]]), u16::from_le_bytes([b[2], b[3]]));
            b = ((u32::from(hi) << 16) | u32::from(lo)).to_le_bytes();
        }
        let arch = if isa == Isa::Aarch64 {
            ArchVersion::Aa64
        } else {
            ArchVersion::V8
        };
        let mut info = InstrInfo {
            pe_type: ArchProfile::new(arch, CoreProfile::CortexA),
            isa,
            instr_addr: addr,
            opcode: u32::from_le_bytes(b),
            ..Default::default()
        };
        self.instr.decode_instruction(&mut info).ok()?;
        Some(info)
    }

    /// Walks one list from `start`.
    fn walk(&mut self, start: u64, list: &[bool], out: &mut dyn FnMut(Walked)) {
        let isa = if self.img.is_64 {
            Isa::Aarch64
        } else if start & 1 == 1 {
            Isa::Thumb2
        } else {
            Isa::Arm
        };
        let mut addr = start & !1;
        // A list is at most the trace's length; code with no branch for a long way is not a
        // real path (a wrong build, data read as code): give up on the list there.
        const MAX_RUN: u32 = 1 << 20;
        for &taken in list {
            let from = addr;
            let mut run = 0;
            let info = loop {
                let Some(info) = self.decode(addr, isa) else { return };
                if info.instr_type != InstrType::Other {
                    break info;
                }
                run += 1;
                if run > MAX_RUN {
                    return;
                }
                addr = addr.wrapping_add(u64::from(info.instr_size));
            };
            out(Walked::Range(from, info.instr_addr));
            let is_branch = matches!(info.instr_type, InstrType::Branch | InstrType::BranchIndirect);
            if taken && is_branch {
                let to = if info.instr_type == InstrType::Branch {
                    info.branch_addr
                } else {
                    0
                };
                out(Walked::Branch(info.instr_addr, to));
                if info.instr_type != InstrType::Branch {
                    return;
                }
                addr = info.branch_addr;
            } else {
                addr = info.instr_addr.wrapping_add(u64::from(info.instr_size));
            }
        }
    }
}

/// The list being built on one trace stream.
#[derive(Debug, Clone, Default)]
struct Open {
    binary: usize,
    start: u64,
    bits: Vec<bool>,
}

/// Turns decoded elements into branch lists: feed it every [`Event`] of a decode.
pub struct BranchListBuilder<'m> {
    model: &'m Model,
    open: Vec<Option<Open>>,
    position: u64,
    /// Start → list → count, per binary of the model.
    local: HashMap<usize, BTreeMap<u64, BTreeMap<Vec<bool>, u64>>>,
    overflows: u64,
    /// Ranges in code of no known map, or of a binary whose code is not loaded.
    pub unmapped_ranges: u64,
}

impl<'m> BranchListBuilder<'m> {
    /// A builder for a recording with `streams` trace streams whose processes `model` holds.
    pub fn new(model: &'m Model, streams: usize) -> Self {
        BranchListBuilder {
            model,
            open: vec![None; streams],
            position: 0,
            local: HashMap::new(),
            overflows: 0,
            unmapped_ranges: 0,
        }
    }

    /// Takes one event of the decode.
    pub fn event(&mut self, ev: &Event<'_, '_>) {
        match ev {
            Event::BufferStart { aux, .. } => {
                self.position = aux.record_offset;
                for s in 0..self.open.len() {
                    self.close(s);
                }
            }
            Event::Element(info, e) => self.element(info, e),
            Event::BufferEnd { .. } => {}
        }
    }

    fn element(&mut self, info: &ElementInfo, e: &TraceElement) {
        let s = info.stream;
        if s >= self.open.len() {
            return;
        }
        if e.elem_type != ElemType::InstrRange {
            // Anything else between two ranges (a gap, an exception, a new context) means the
            // next range's start is not where the last branch led.
            if !matches!(
                e.elem_type,
                ElemType::Timestamp | ElemType::CycleCount | ElemType::Event
            ) {
                self.close(s);
            }
            return;
        }
        let model = self.model;
        let located = if info.pid < 0 {
            None
        } else {
            model.find_map(info.pid, e.st_addr, self.position)
        };
        let Some(mi) = located else {
            self.unmapped_ranges += 1;
            self.close(s);
            return;
        };
        let map = &model.maps[mi];
        // The binary's own address, as the direct route takes it (a module's layout, a
        // kernel image's link address); none when its file is not loaded.
        let Some(vaddr) = model.vaddr_in_file(mi, e.st_addr) else {
            self.unmapped_ranges += 1;
            self.close(s);
            return;
        };
        let start = vaddr | u64::from(e.isa == Isa::Thumb2);
        if self.open[s].as_ref().is_some_and(|o| o.binary != map.binary) {
            self.close(s);
        }
        let open = self.open[s].get_or_insert_with(|| Open {
            binary: map.binary,
            start,
            bits: Vec::new(),
        });
        match e.last_i_type {
            InstrType::Branch | InstrType::BranchIndirect => {
                open.bits.push(e.last_instr_exec);
                // After a taken indirect branch the next start comes from the trace, not the
                // code: the list ends.
                if e.last_instr_exec && e.last_i_type == InstrType::BranchIndirect {
                    self.close(s);
                }
            }
            // A range that does not end at a branch cannot be written as one.
            _ => self.close(s),
        }
    }

    fn close(&mut self, s: usize) {
        let Some(o) = self.open.get_mut(s).and_then(Option::take) else {
            return;
        };
        if o.bits.is_empty() {
            return;
        }
        let lists = self.local.entry(o.binary).or_default().entry(o.start).or_default();
        self.overflows += u64::from(add_sat(lists.entry(o.bits).or_default(), 1));
    }

    /// Closes the lists still open and adds the counts of the binaries `keep` accepts to
    /// `out`.
    pub fn finish(&mut self, out: &mut BranchList, mut keep: impl FnMut(&str) -> bool) {
        for s in 0..self.open.len() {
            self.close(s);
        }
        for (bi, branches) in self.local.drain() {
            let Some(b) = self.model.binary(bi) else { continue };
            if !keep(&b.path) {
                continue;
            }
            let kind = if b.is_kernel() {
                BinaryKind::Kernel
            } else if b.path.ends_with(".ko") {
                BinaryKind::KernelModule
            } else {
                BinaryKind::Elf
            };
            let id = b.build_id_string();
            out.add_binary(EtmBinary {
                path: b.path.clone(),
                build_id: id.trim_start_matches("0x").to_string(),
                kind,
                kernel_start_addr: 0,
                branches,
            });
        }
        out.overflows += std::mem::take(&mut self.overflows);
    }
}

/// Decodes `rec` (binaries found with `search`) and adds its branch lists to `out` (binaries
/// `keep` accepts); returns the decode's report.
pub fn add_recording(
    rec: &crate::Recording<'_>,
    search: SymbolSearch,
    opts: crate::decode::DecodeOptions,
    out: &mut BranchList,
    keep: impl FnMut(&str) -> bool,
    progress: &mut dyn FnMut(u64),
) -> Result<crate::autofdo::RecordingReport, crate::decode::DecodeError> {
    let model = std::sync::Arc::new(Model::new(rec, search));
    let mut dec = crate::decode::RecordingDecoder::new(rec, model.clone(), opts)?;
    let mut b = BranchListBuilder::new(&model, dec.cpus().len());
    let summary = crate::autofdo::run_with_progress(&mut dec, progress, &mut |ev| b.event(ev));
    b.finish(out, keep);
    Ok(crate::autofdo::RecordingReport::of(&dec, summary, b.unmapped_ranges))
}
