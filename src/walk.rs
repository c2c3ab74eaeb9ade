//! The instruction walk between waypoints, with a decoded-block cache.
//!
//! Instruction-trace decoders follow the program from an address to the
//! next waypoint (a branch, or an instruction that the trace treats as
//! one): every opcode is read from the memory image and classified. The
//! same blocks run again and again, so [`Walker`] remembers each walked
//! block — keyed by start address, instruction set, memory space and T32
//! IT state — with its end, instruction count and the classification of
//! its last instruction. A walk over code it has seen costs one lookup,
//! whatever the block's length: branchless stretches of an image (NOP
//! sleds, zero-filled or data regions) are walked once, not per atom.
//!
//! The cache is a fixed direct-mapped table: it never grows, and it never
//! allocates after the decoder is built. It is forgotten when the memory
//! changes: when the target memory reports a new
//! [`generation`](crate::interfaces::TargetMemAccess::generation) for its
//! trace ID (images added or removed, `invalidate_mem_acc_cache`), or when the decoder says
//! so (its context changed).
//!
//! A cached walk leaves the decoder in exactly the state the uncached walk
//! would: the caller's [`InstrInfo`] as the last instruction left it, and
//! the same outcome (waypoint, inaccessible memory, bad opcode or decode
//! error). Range limits are checked by the caller on the block's count.

use crate::arch::{InstrInfo, InstrSubType, InstrType, Isa};
use crate::error::ErrCode;
use crate::interfaces::{InstrDecode, TargetMemAccess};
use crate::memory::MemSpace;

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalkEnd {
    /// The last instruction walked is a waypoint.
    Waypoint,
    /// The next opcode could not be read (not all of it is mapped).
    Nacc,
    /// The next opcode is not a valid instruction (A64 opcode check), or
    /// its classification failed: the walk stops before it.
    Error(ErrCode),
}

/// A walk's result: instructions executed and how it ended. The
/// instruction state is in the caller's [`InstrInfo`]: the address after
/// the last instruction, and that instruction's classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Walked {
    pub num: u32,
    pub end: WalkEnd,
}

/// Options of a walk that stay fixed for one decoder.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WalkOptions {
    /// An A64 opcode with bits 31:16 all zero is an error (OpenCSD's
    /// AA64 opcode check).
    pub a64_opcode_check: bool,
    /// A memory read error ends the walk as an error (PTM) rather than as
    /// inaccessible memory (ETMv4).
    pub mem_error_is_error: bool,
}

/// Program memory in lines, in front of the target memory interface.
struct CodeCache {
    tags: Vec<(u64, u8, u16, u16)>,
    data: Vec<[u8; LINE]>,
}

const LINE: usize = 256;
const LINES: usize = 1024;
const LINE_SHIFT: u32 = LINE.trailing_zeros();
const NO_TAG: u64 = 1;

impl CodeCache {
    fn new() -> Self {
        CodeCache { tags: vec![(NO_TAG, 0, 0, 0); LINES], data: vec![[0; LINE]; LINES] }
    }

    fn invalidate(&mut self) {
        for t in &mut self.tags {
            t.0 = NO_TAG;
        }
    }

    /// The 4 bytes at `addr`: `Ok(None)` when they are not all there.
    #[inline]
    fn read4(&mut self, mem: &mut dyn TargetMemAccess, addr: u64, trace_id: u8, space: MemSpace) -> Result<Option<u32>, ErrCode> {
        let base = addr & !(LINE as u64 - 1);
        let off = (addr - base) as usize;
        let slot = ((addr >> LINE_SHIFT) as usize) & (LINES - 1);
        let (tag, sp, start, end) = self.tags[slot];
        if tag == base && sp == space.bits() && off >= start as usize && off + 4 <= end as usize {
            let d = &self.data[slot];
            return Ok(Some(u32::from_le_bytes([d[off], d[off + 1], d[off + 2], d[off + 3]])));
        }
        self.fill(mem, addr, trace_id, space)
    }

    /// The cached bytes from `addr` to the end of its line, when the line
    /// holds `addr`.
    #[inline]
    fn cached_from(&self, addr: u64, space: MemSpace) -> &[u8] {
        let base = addr & !(LINE as u64 - 1);
        let off = (addr - base) as usize;
        let slot = ((addr >> LINE_SHIFT) as usize) & (LINES - 1);
        let (tag, sp, start, end) = self.tags[slot];
        if tag == base && sp == space.bits() && off >= start as usize && off < end as usize {
            &self.data[slot][off..end as usize]
        } else {
            &[]
        }
    }

    #[cold]
    fn fill(&mut self, mem: &mut dyn TargetMemAccess, addr: u64, trace_id: u8, space: MemSpace) -> Result<Option<u32>, ErrCode> {
        let base = addr & !(LINE as u64 - 1);
        let off = (addr - base) as usize;
        let slot = ((addr >> LINE_SHIFT) as usize) & (LINES - 1);
        self.tags[slot].0 = NO_TAG;
        let got = mem.read_target_memory(addr, trace_id, space, &mut self.data[slot][off..])?.min(LINE - off);
        self.tags[slot] = (base, space.bits(), off as u16, (off + got) as u16);
        if got >= 4 {
            let d = &self.data[slot];
            return Ok(Some(u32::from_le_bytes([d[off], d[off + 1], d[off + 2], d[off + 3]])));
        }
        if off + got < LINE {
            // The image ends here.
            return Ok(None);
        }
        // Straddles two lines: read directly.
        let mut b = [0u8; 4];
        let n = mem.read_target_memory(addr, trace_id, space, &mut b)?;
        Ok((n == 4).then(|| u32::from_le_bytes(b)))
    }
}

/// One remembered block.
#[derive(Clone, Copy)]
struct Block {
    /// Walk generation the entry belongs to; 0 never matches.
    generation: u32,
    start: u64,
    isa: Isa,
    space: u8,
    it_conditions: u8,
    walked: Walked,
    /// The instruction state the walk left.
    after: InstrInfo,
}

/// Blocks remembered per decoder. Direct-mapped: a colliding block
/// replaces the one in its slot.
const BLOCKS: usize = 16384;

/// The instruction walk of one decoder: a code cache and a block cache in
/// front of its target memory and instruction classifier.
pub(crate) struct Walker {
    code: CodeCache,
    blocks: Vec<Block>,
    /// Checkpoints passed by the walk in progress: address, IT state and
    /// instructions walked before it.
    passed: Vec<(u64, u8, u32)>,
    generation: u32,
    mem_generation: u64,
    options: WalkOptions,
}

impl Walker {
    pub fn new(options: WalkOptions) -> Self {
        let empty = Block {
            generation: 0,
            start: 0,
            isa: Isa::Arm,
            space: 0,
            it_conditions: 0,
            walked: Walked { num: 0, end: WalkEnd::Nacc },
            after: InstrInfo::default(),
        };
        Walker { code: CodeCache::new(), blocks: vec![empty; BLOCKS], passed: Vec::new(), generation: 1, mem_generation: 0, options }
    }

    /// Forgets all cached code and blocks (memory may have changed).
    pub fn invalidate(&mut self) {
        self.code.invalidate();
        self.generation = self.generation.wrapping_add(1).max(1);
        if self.generation == 1 {
            // Wrapped: old entries could match again.
            for b in &mut self.blocks {
                b.generation = 0;
            }
        }
    }

    #[inline]
    fn check_memory(&mut self, mem: &dyn TargetMemAccess, trace_id: u8) {
        let g = mem.generation(trace_id);
        if g != self.mem_generation {
            self.mem_generation = g;
            self.invalidate();
        }
    }

    /// Reads the opcode at `addr` through the code cache; `None` when not
    /// all 4 bytes are mapped or the memory reports an error.
    pub fn read4(&mut self, mem: &mut dyn TargetMemAccess, addr: u64, trace_id: u8, space: MemSpace) -> Option<u32> {
        self.check_memory(mem, trace_id);
        self.code.read4(mem, addr, trace_id, space).ok().flatten()
    }

    #[inline]
    fn slot(addr: u64, isa: Isa, space: MemSpace) -> usize {
        let h = (addr >> 1) ^ (addr >> 13) ^ ((isa as u64) << 7) ^ ((space.bits() as u64) << 3);
        (h as usize) & (BLOCKS - 1)
    }

    /// Walks from `instr.instr_addr` to the next waypoint, as far as the
    /// memory image goes.
    #[inline]
    pub fn to_waypoint(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        dec: &mut dyn InstrDecode,
        instr: &mut InstrInfo,
        trace_id: u8,
        space: MemSpace,
    ) -> Walked {
        self.check_memory(mem, trace_id);
        let slot = Self::slot(instr.instr_addr, instr.isa, space);
        let b = &self.blocks[slot];
        if b.generation == self.generation
            && b.start == instr.instr_addr
            && b.isa == instr.isa
            && b.space == space.bits()
            && b.it_conditions == instr.thumb_it_conditions
        {
            *instr = b.after;
            return b.walked;
        }
        self.walk_block(mem, dec, instr, trace_id, space, slot)
    }

    /// The walk of a block not in the cache; remembers it. On the way it
    /// looks in the cache at each checkpoint (an address aligned to
    /// [`CHECKPOINT`]) and joins a block remembered from there; the
    /// checkpoints it passes are remembered too, as blocks with the same
    /// end. So a stretch of branchless code is walked once, whatever
    /// address later walks enter it at.
    #[cold]
    #[inline(never)]
    fn walk_block(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        dec: &mut dyn InstrDecode,
        instr: &mut InstrInfo,
        trace_id: u8,
        space: MemSpace,
        slot: usize,
    ) -> Walked {
        let (start, isa, it) = (instr.instr_addr, instr.isa, instr.thumb_it_conditions);
        let mut passed = std::mem::take(&mut self.passed);
        passed.clear();
        let mut walked = Walked { num: 0, end: WalkEnd::Nacc };
        loop {
            let (part, at_checkpoint) = self.walk(mem, dec, instr, trace_id, space, None, true);
            walked = Walked { num: walked.num.saturating_add(part.num), end: part.end };
            if !at_checkpoint {
                break;
            }
            let at = instr.instr_addr;
            let s = Self::slot(at, instr.isa, space);
            let b = &self.blocks[s];
            if b.generation == self.generation
                && b.start == at
                && b.isa == instr.isa
                && b.space == space.bits()
                && b.it_conditions == instr.thumb_it_conditions
            {
                *instr = b.after;
                walked = Walked { num: walked.num.saturating_add(b.walked.num), end: b.walked.end };
                break;
            }
            passed.push((at, instr.thumb_it_conditions, walked.num));
        }
        // A walk that decoded nothing leaves stale classification in
        // `instr`; it is cheap, so it is not remembered.
        if walked.num > 0 {
            let g = self.generation;
            for &(at, at_it, before) in &passed {
                let num = walked.num - before;
                if num > 0 {
                    let w = Walked { num, end: walked.end };
                    let b = Block { generation: g, start: at, isa, space: space.bits(), it_conditions: at_it, walked: w, after: *instr };
                    self.blocks[Self::slot(at, isa, space)] = b;
                }
            }
            self.blocks[slot] = Block { generation: g, start, isa, space: space.bits(), it_conditions: it, walked, after: *instr };
        }
        self.passed = passed;
        walked
    }

    /// Walks from `instr.instr_addr` until the next instruction would be
    /// at `to` (not stopping at waypoints), uncached.
    pub fn to_address(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        dec: &mut dyn InstrDecode,
        instr: &mut InstrInfo,
        trace_id: u8,
        space: MemSpace,
        to: u64,
    ) -> Walked {
        self.check_memory(mem, trace_id);
        self.walk(mem, dec, instr, trace_id, space, Some(to), false).0
    }

    fn walk(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        dec: &mut dyn InstrDecode,
        instr: &mut InstrInfo,
        trace_id: u8,
        space: MemSpace,
        to: Option<u64>,
        stop_at_checkpoint: bool,
    ) -> (Walked, bool) {
        let mut num = 0u32;
        loop {
            if stop_at_checkpoint && num > 0 && instr.instr_addr & (CHECKPOINT - 1) == 0 {
                return (Walked { num, end: WalkEnd::Nacc }, true);
            }
            let opcode = match self.code.read4(mem, instr.instr_addr, trace_id, space) {
                Ok(Some(op)) => op,
                Ok(None) => return (Walked { num, end: WalkEnd::Nacc }, false),
                Err(e) if self.options.mem_error_is_error => return (Walked { num, end: WalkEnd::Error(e) }, false),
                Err(_) => return (Walked { num, end: WalkEnd::Nacc }, false),
            };
            instr.opcode = opcode;
            if instr.isa == Isa::Aarch64 && to.is_none() {
                // Runs of ordinary A64 instructions, straight from the
                // cached line: no waypoint can be among them.
                let check = self.options.a64_opcode_check;
                let mut run = 0u32;
                let mut last = opcode;
                for w in self.code.cached_from(instr.instr_addr, space).chunks_exact(4) {
                    let op = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    if !a64_plain(op) || (check && op & 0xFFFF_0000 == 0) {
                        break;
                    }
                    last = op;
                    run += 1;
                }
                if run > 0 {
                    instr.opcode = last;
                    instr.instr_type = InstrType::Other;
                    instr.sub_type = InstrSubType::None;
                    instr.instr_size = 4;
                    instr.is_conditional = false;
                    instr.is_link = false;
                    instr.next_isa = Isa::Aarch64;
                    instr.thumb_it_conditions = 0;
                    instr.instr_addr = instr.instr_addr.wrapping_add(4 * run as u64);
                    num = num.saturating_add(run);
                    continue;
                }
            }
            if instr.isa == Isa::Aarch64 {
                if self.options.a64_opcode_check && opcode & 0xFFFF_0000 == 0 {
                    return (Walked { num, end: WalkEnd::Error(ErrCode::InvalidOpcode) }, false);
                }
                if a64_plain(opcode) {
                    // Outside the branch / exception / system group no A64
                    // instruction is a waypoint: skip the classifier.
                    instr.instr_type = InstrType::Other;
                    instr.sub_type = InstrSubType::None;
                    instr.instr_size = 4;
                    instr.is_conditional = false;
                    instr.is_link = false;
                    instr.next_isa = Isa::Aarch64;
                    instr.thumb_it_conditions = 0;
                } else if let Err(e) = dec.decode_instruction(instr) {
                    return (Walked { num, end: WalkEnd::Error(e) }, false);
                }
            } else if let Err(e) = dec.decode_instruction(instr) {
                return (Walked { num, end: WalkEnd::Error(e) }, false);
            }
            instr.instr_addr = instr.instr_addr.wrapping_add(instr.instr_size as u64);
            num = num.saturating_add(1);
            let done = match to {
                Some(a) => instr.instr_addr == a,
                None => instr.instr_type != InstrType::Other,
            };
            if done {
                return (Walked { num, end: WalkEnd::Waypoint }, false);
            }
        }
    }
}

/// An A64 opcode that is certainly no waypoint: outside the branch,
/// exception and system group, or NOP (the usual padding).
#[inline]
fn a64_plain(op: u32) -> bool {
    op & A64_GROUP_MASK != A64_GROUP_BRANCH_SYS || op == A64_NOP
}

const A64_NOP: u32 = 0xD503_201F;

/// Spacing of the checkpoints where a walk looks for a remembered block
/// to join (a power of two).
const CHECKPOINT: u64 = 4096;

/// A64 op0 (bits 28:26) and its value for branches, exception generation
/// and system instructions: the only group holding waypoints.
const A64_GROUP_MASK: u32 = 0x1C00_0000;
const A64_GROUP_BRANCH_SYS: u32 = 0x1400_0000;
