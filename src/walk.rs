//! The instruction walk between waypoints, with a decoded-block cache.
//!
//! Instruction-trace decoders follow the program from an address to the
//! next waypoint (a branch, or an instruction that the trace treats as
//! one): every opcode is read from the memory image and classified. The
//! same blocks run again and again, so [`Walker`] remembers each walked
//! block — keyed by start address, instruction set and memory space, and
//! only from a classifier that carries no state (no T32 IT block open) —
//! with its end, instruction count and the classification of
//! its last instruction. A walk over code it has seen costs one lookup,
//! whatever the block's length: branchless stretches of an image (NOP
//! sleds, zero-filled or data regions) are walked once, not per atom.
//!
//! The cache is a fixed direct-mapped table: it never grows, and it never
//! allocates after the decoder is built. It is forgotten when the memory
//! changes: when the target memory reports a new
//! [`generation`](crate::memory::TargetMemAccess::generation) for its
//! trace ID (images added or removed, `invalidate_mem_acc_cache`), or when the decoder says
//! so (its context changed).
//!
//! A cached walk leaves the decoder in exactly the state the uncached walk
//! would: the caller's [`InstrInfo`] as the last instruction left it, and
//! the same outcome (waypoint, inaccessible memory, bad opcode or decode
//! error). Range limits are checked by the caller on the block's count.

use crate::arch::{InstrInfo, InstrSubType, InstrType, Isa};
use crate::errcode::ErrCode;
use crate::instr::InstrDecode;
use crate::memory::MemSpace;
use crate::memory::TargetMemAccess;

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// A defined layout with `Waypoint` as tag 0, for zeroed tables.
#[repr(u8)]
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
    /// The decoder's instruction range limit (0: none): a block longer
    /// than this is not offered to [`Walker::waypoint_blocks`] look-ups,
    /// so the decoder's fast path need not check it.
    pub range_limit: u32,
    /// Blocks ending in an A64 exception return are not offered to
    /// [`Walker::waypoint_blocks`] look-ups either (ETE traces an ERET as
    /// an element of its own, which the fast path does not make).
    pub eret_not_fast: bool,
    /// The block table is made at its full size on the first walk rather
    /// than grown: the decoders whose fast path reads it
    /// ([`Walker::waypoint_blocks`], offered only at full size) decode long
    /// traces, where growing would keep them off that path for a while.
    pub full_table: bool,
}

/// Program memory in lines, in front of the target memory interface.
struct CodeCache {
    /// Per line: its address, memory space, and the bytes it holds
    /// (`start..end` within it), after its bytes (see [`Line`]). Lines
    /// and tags are one allocation of zero bytes, which the allocator takes
    /// as fresh pages from the system: making the cache writes nothing. A
    /// line holding nothing (`end` 0, as made) matches no read.
    lines: Vec<u8>,
}

/// A line's bytes, then its tag: address (8 bytes), memory space (1),
/// and the range of bytes it holds, `start` and `end` (2 each).
type Line = [u8; LINE_BYTES];
const LINE_BYTES: usize = LINE + 16;

/// A line's address, memory space and byte range.
type LineTag = (u64, u8, u16, u16);

#[inline(always)]
fn line_tag(l: &Line) -> LineTag {
    let t = &l[LINE..];
    (
        u64::from_le_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]),
        t[8],
        u16::from_le_bytes([t[10], t[11]]),
        u16::from_le_bytes([t[12], t[13]]),
    )
}

#[inline(always)]
fn set_line_tag(l: &mut Line, (base, space, start, end): LineTag) {
    let t = &mut l[LINE..];
    t[..8].copy_from_slice(&base.to_le_bytes());
    t[8] = space;
    t[10..12].copy_from_slice(&start.to_le_bytes());
    t[12..14].copy_from_slice(&end.to_le_bytes());
}

const LINE: usize = 256;
const LINES: usize = 1024;
const LINE_SHIFT: u32 = LINE.trailing_zeros();
const NO_LINE: LineTag = (0, 0, 0, 0);

impl CodeCache {
    fn new() -> Self {
        CodeCache {
            // Bytes, not lines: only a vector of zero bytes is allocated
            // zeroed rather than written.
            lines: vec![0; LINES * LINE_BYTES],
        }
    }

    #[inline(always)]
    fn line(&self, slot: usize) -> &Line {
        &self.lines.as_chunks::<LINE_BYTES>().0[slot & (LINES - 1)]
    }

    #[inline(always)]
    fn line_mut(&mut self, slot: usize) -> &mut Line {
        &mut self.lines.as_chunks_mut::<LINE_BYTES>().0[slot & (LINES - 1)]
    }

    fn invalidate(&mut self) {
        for l in self.lines.as_chunks_mut::<LINE_BYTES>().0 {
            set_line_tag(l, NO_LINE);
        }
    }

    /// The 4 bytes at `addr`: `Ok(None)` when they are not all there.
    #[inline]
    fn read4(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        addr: u64,
        trace_id: u8,
        space: MemSpace,
    ) -> Result<Option<u32>, ErrCode> {
        let base = addr & !(LINE as u64 - 1);
        let off = (addr - base) as usize;
        let slot = ((addr >> LINE_SHIFT) as usize) & (LINES - 1);
        let d = self.line(slot);
        let (tag, sp, start, end) = line_tag(d);
        if tag == base && sp == space.bits() && off >= start as usize && off + 4 <= end as usize {
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
        let d = self.line(slot);
        let (tag, sp, start, end) = line_tag(d);
        if tag == base && sp == space.bits() && off >= start as usize && off < end as usize {
            &d[off..end as usize]
        } else {
            &[]
        }
    }

    #[cold]
    fn fill(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        addr: u64,
        trace_id: u8,
        space: MemSpace,
    ) -> Result<Option<u32>, ErrCode> {
        let base = addr & !(LINE as u64 - 1);
        let off = (addr - base) as usize;
        let slot = ((addr >> LINE_SHIFT) as usize) & (LINES - 1);
        let line = self.line_mut(slot);
        set_line_tag(line, NO_LINE);
        let got = mem
            .read_target_memory(addr, trace_id, space, &mut line[off..LINE])?
            .min(LINE - off);
        set_line_tag(line, (base, space.bits(), off as u16, (off + got) as u16));
        if got >= 4 {
            let d = &*line;
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

// Variant 0 of each enum in a block (see `Walker::empty_table`): a zeroed
// block holds these.
const _: () = assert!(
    Isa::Arm as u8 == 0
        && InstrType::Other as u8 == 0
        && InstrSubType::None as u8 == 0
        && crate::arch::ArchVersion::Unknown as u8 == 0
        && crate::arch::CoreProfile::Unknown as u8 == 0
);

/// One remembered block.
#[derive(Clone, Copy)]
struct Block {
    start: u64,
    /// Walk generation (0 never matches), instruction set and memory space
    /// of the entry in one word, so a look-up is two compares; and, in
    /// bit 0, whether the block is offered to the atom fast path (see
    /// [`Walker::waypoint_blocks`]).
    tag: u64,
    walked: Walked,
    /// The instruction state the walk left.
    after: InstrInfo,
}

/// A table entry whose all-zero bytes are a valid value, equal to
/// [`EMPTY`](Self::EMPTY) (see [`Walker::empty_table`]).
///
/// # Safety
///
/// All-zero bytes must be a valid value of the type: its fields are
/// integers, bools, and enums with a defined layout (`repr(u8)`) whose
/// variant 0 has no payload, or payload fields that are zero valid in turn.
unsafe trait ZeroIsEmpty: Copy {
    /// The entry zeroed memory holds: a zero tag, which never matches.
    const EMPTY: Self;
}

// SAFETY: `Block` holds integers, a bool-free `Walked` (an integer and a
// `repr(u8)` enum) and an `InstrInfo` of integers, bools and `repr(u8)`
// enums; variant 0 of each enum is the one named in `EMPTY` (asserted
// above).
unsafe impl ZeroIsEmpty for Block {
    const EMPTY: Block = Block {
        start: 0,
        tag: 0,
        walked: Walked {
            num: 0,
            end: WalkEnd::Waypoint,
        },
        after: InstrInfo {
            pe_type: crate::arch::ArchProfile::new(
                crate::arch::ArchVersion::Unknown,
                crate::arch::CoreProfile::Unknown,
            ),
            isa: Isa::Arm,
            instr_addr: 0,
            opcode: 0,
            dsb_dmb_waypoints: false,
            wfi_wfe_branch: false,
            track_it_block: false,
            instr_type: InstrType::Other,
            sub_type: InstrSubType::None,
            branch_addr: 0,
            next_isa: Isa::Arm,
            instr_size: 0,
            is_conditional: false,
            is_link: false,
            thumb_it_conditions: 0,
        },
    };
}

/// One remembered classification, for decoders that step one instruction
/// per atom ([`Walker::singles`]): the classifier's outputs as
/// it gave them.
// The classification in `InstrInfo`'s order (and its first four in
// `TraceElement`'s), so it is stored and read in one move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Single {
    addr: u64,
    /// [`block_tag`] of the entry (0 never matches).
    tag: u64,
    pub(crate) branch_addr: u64,
    pub(crate) instr_type: InstrType,
    pub(crate) sub_type: InstrSubType,
    pub(crate) instr_size: u8,
    pub(crate) is_conditional: bool,
    pub(crate) next_isa: Isa,
    is_link: bool,
    thumb_it_conditions: u8,
}

impl Single {
    #[inline(always)]
    fn of(i: &InstrInfo, tag: u64) -> Single {
        Single {
            addr: i.instr_addr,
            tag,
            branch_addr: i.branch_addr,
            instr_type: i.instr_type,
            sub_type: i.sub_type,
            next_isa: i.next_isa,
            instr_size: i.instr_size,
            is_conditional: i.is_conditional,
            is_link: i.is_link,
            thumb_it_conditions: i.thumb_it_conditions,
        }
    }

    #[cfg(test)]
    fn give(&self, i: &mut InstrInfo) {
        i.instr_type = self.instr_type;
        i.sub_type = self.sub_type;
        i.next_isa = self.next_isa;
        i.instr_size = self.instr_size;
        i.is_conditional = self.is_conditional;
        i.is_link = self.is_link;
        i.thumb_it_conditions = self.thumb_it_conditions;
        i.branch_addr = self.branch_addr;
    }
}

// SAFETY: integers, bools and `repr(u8)` enums whose variant 0 is the one
// named in `EMPTY` (asserted above).
unsafe impl ZeroIsEmpty for Single {
    const EMPTY: Single = Single {
        addr: 0,
        tag: 0,
        branch_addr: 0,
        instr_type: InstrType::Other,
        sub_type: InstrSubType::None,
        next_isa: Isa::Arm,
        instr_size: 0,
        is_conditional: false,
        is_link: false,
        thumb_it_conditions: 0,
    };
}

/// Remembered blocks ending at a waypoint within the range limit, in one
/// generation and memory space: see [`Walker::waypoint_blocks`].
pub(crate) struct WaypointBlocks<'a> {
    /// The whole table, grown to its full size (so a slot needs no bounds
    /// check).
    blocks: &'a [Block; BLOCKS],
    /// The tag of a matching block, with the instruction set bits clear
    /// (`Isa::Arm` is 0).
    tag: u64,
}

impl<'a> WaypointBlocks<'a> {
    /// The block from `addr` in `isa`: its instruction count and the state
    /// its last instruction left (`instr_addr` is the address after it).
    #[inline(always)]
    pub(crate) fn get(&self, addr: u64, isa: Isa) -> Option<(u32, &'a InstrInfo)> {
        let b = &self.blocks[slot_of(addr, FULL_SHIFT) & (BLOCKS - 1)];
        (b.start == addr && b.tag == self.tag | (isa as u64) << 16).then_some((b.walked.num, &b.after))
    }
}

// `WaypointBlocks::tag` and `RememberedSingles::tag` rely on it.
const _: () = assert!(Isa::Arm as u64 == 0);

/// The remembered single instructions of one generation and memory space:
/// see [`Walker::singles`].
pub(crate) struct RememberedSingles<'a> {
    /// The whole table (so a slot needs no bounds check).
    singles: &'a [Single; SINGLES],
    /// The tag of a matching entry, with the instruction set bits clear.
    tag: u64,
}

impl<'a> RememberedSingles<'a> {
    /// The entry for the instruction at `addr` in `isa`, if remembered.
    #[inline(always)]
    pub(crate) fn get(&self, addr: u64, isa: Isa) -> Option<&'a Single> {
        let s = &self.singles[slot_of(addr, SINGLES_SHIFT) & (SINGLES - 1)];
        (s.addr == addr && s.tag == self.tag | (isa as u64) << 16).then_some(s)
    }
}

/// Single classified instructions remembered per decoder
/// ([`Walker::singles`]), direct-mapped like the blocks. A slot
/// is a [`Single`] (32 bytes: address, tag, whose generation 0 never
/// matches, branch target and the classification), in one table of zeros
/// made on the first classification: the allocator hands it out without
/// writing (see [`ZeroIsEmpty`]).
const SINGLES: usize = 65536;
const SINGLES_SHIFT: u32 = 64 - SINGLES.trailing_zeros();

/// A block's tag without its waypoint bit.
#[inline]
fn block_tag(generation: u32, isa: Isa, space: MemSpace) -> u64 {
    (generation as u64) << 32 | (isa as u64) << 16 | (space.bits() as u64) << 8
}

/// Blocks remembered per decoder, at most. Direct-mapped: a colliding
/// block replaces the one in its slot. The table (64 bytes a slot) is made
/// on the first walk with [`MIN_BLOCKS`] slots, so decoders that never walk
/// do not pay for it, and grows fourfold each time it has taken as many
/// new walked blocks as a quarter of its slots: a short trace does not
/// fill 4 MiB.
const BLOCKS: usize = 65536;
const MIN_BLOCKS: usize = 1024;
/// The slot shift of the table at its full size.
const FULL_SHIFT: u32 = 64 - BLOCKS.trailing_zeros();

/// The slot of `addr` in a table of `1 << (64 - shift)` slots. Fibonacci
/// hashing: instruction addresses are 2- or 4-aligned and clustered; the
/// multiply spreads them over every slot. The same address in another
/// instruction set or memory space is rare enough to share its slot.
#[inline(always)]
fn slot_of(addr: u64, shift: u32) -> usize {
    (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// The instruction walk of one decoder: a code cache and a block cache in
/// front of its target memory and instruction classifier.
pub(crate) struct Walker {
    code: CodeCache,
    blocks: Vec<Block>,
    /// Single classified instructions, [`SINGLES`] slots once the first
    /// is classified.
    singles: Vec<Single>,
    /// `64 - log2(blocks.len())` once the table is made.
    shift: u32,
    /// Worth of the blocks stored since the table was made (see
    /// [`reserve`](Self::reserve)), at most the size it last grew from.
    stored: usize,
    /// Checkpoints passed by the walk in progress: address and
    /// instructions walked before it.
    passed: Vec<(u64, u32)>,
    generation: u32,
    mem_generation: u64,
    options: WalkOptions,
}

impl Walker {
    pub(crate) fn new(options: WalkOptions) -> Self {
        Walker {
            code: CodeCache::new(),
            blocks: Vec::new(),
            singles: Vec::new(),
            shift: 63,
            stored: 0,
            passed: Vec::new(),
            generation: 1,
            mem_generation: 0,
            options,
        }
    }

    /// A table of `len` empty entries (generation 0 never matches). A
    /// large one is taken from zeroed memory: the allocator then maps
    /// fresh pages from the operating system, with no fill at all (an
    /// ETMv4 decoder's full table is 64 Ki blocks, 4 MiB, most of which a
    /// short capture never touches). A small one is filled: the allocator
    /// would clear it with a memset that costs more than the fill.
    fn empty_table<T: ZeroIsEmpty>(len: usize) -> Vec<T> {
        use std::alloc::{Layout, alloc_zeroed, handle_alloc_error};
        const ZEROED_FROM: usize = 128 << 10;
        if len * size_of::<T>() < ZEROED_FROM {
            // A fill of a few stores an entry: seen as zero, the fill
            // would become a memset, whose `rep stos` callgrind counts
            // byte by byte.
            return vec![std::hint::black_box(T::EMPTY); len];
        }
        let layout = Layout::array::<T>(len).expect("table size fits the address space");
        // SAFETY: the layout is not zero-sized (len > 0 here, and the
        // entry types are not empty). All-zero bytes are a valid `T`, as
        // `ZeroIsEmpty` promises (and `zero_is_a_valid_entry` checks). The
        // pointer comes from the global allocator with the layout of `len`
        // entries, which is what `Vec::from_raw_parts` needs.
        unsafe {
            let p = alloc_zeroed(layout).cast::<T>();
            if p.is_null() {
                handle_alloc_error(layout);
            }
            Vec::from_raw_parts(p, len, len)
        }
    }

    fn block(&self, start: u64, isa: Isa, space: MemSpace, walked: Walked, after: InstrInfo) -> Block {
        let limit = self.options.range_limit;
        let eret = after.instr_type == InstrType::BranchIndirect && after.sub_type == InstrSubType::V8Eret;
        let fast = walked.end == WalkEnd::Waypoint
            && (limit == 0 || walked.num <= limit)
            && !(eret && self.options.eret_not_fast);
        let tag = block_tag(self.generation, isa, space) | fast as u64;
        Block {
            start,
            tag,
            walked,
            after,
        }
    }

    /// Forgets all cached code and blocks (memory may have changed).
    pub(crate) fn invalidate(&mut self) {
        self.code.invalidate();
        self.generation = self.generation.wrapping_add(1).max(1);
        if self.generation == 1 {
            // Wrapped: old entries could match again.
            for b in &mut self.blocks {
                b.tag = 0;
            }
            for slot in &mut self.singles {
                slot.tag = 0;
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
    pub(crate) fn read4(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        addr: u64,
        trace_id: u8,
        space: MemSpace,
    ) -> Option<u32> {
        self.check_memory(mem, trace_id);
        self.code.read4(mem, addr, trace_id, space).ok().flatten()
    }

    #[inline]
    fn slot(&self, addr: u64) -> usize {
        slot_of(addr, self.shift)
    }

    /// Makes room for blocks worth `n`: makes the table, or grows it
    /// (keeping the blocks of this generation) once it has taken its size
    /// in worth (a walked block is worth 4).
    #[inline]
    fn reserve(&mut self, n: usize) {
        self.stored += n;
        if self.stored > self.blocks.len() && self.blocks.len() < BLOCKS {
            self.grow();
        }
    }

    #[cold]
    fn grow(&mut self) {
        let len = if self.options.full_table {
            BLOCKS
        } else if self.blocks.is_empty() {
            MIN_BLOCKS
        } else {
            self.blocks.len() * 4
        };
        self.resize(len);
    }

    #[cold]
    fn resize(&mut self, len: usize) {
        let len = len.min(BLOCKS);
        let old = std::mem::replace(&mut self.blocks, Self::empty_table(len));
        self.shift = 64 - len.trailing_zeros();
        self.stored = self.stored.min(old.len());
        for b in old {
            if b.tag >> 32 == u64::from(self.generation) {
                let slot = self.slot(b.start);
                self.blocks[slot] = b;
            }
        }
    }

    /// Drops the remembered blocks if the memory's
    /// [`generation`](TargetMemAccess::generation) for the trace ID is not
    /// the one they were walked in.
    #[inline]
    pub(crate) fn sync_memory(&mut self, mem_generation: u64) {
        if mem_generation != self.mem_generation {
            self.memory_changed(mem_generation);
        }
    }

    #[cold]
    #[inline(never)]
    fn memory_changed(&mut self, mem_generation: u64) {
        self.mem_generation = mem_generation;
        self.invalidate();
    }

    /// The remembered walk from `instr.instr_addr` to the next waypoint,
    /// if there is one: `instr` is then left as that walk left it.
    /// `carried` is the classifier's
    /// [`carried_state`](InstrDecode::carried_state); the caller keeps the
    /// memory generation in step ([`sync_memory`](Self::sync_memory)).
    #[inline]
    pub(crate) fn remembered(&mut self, instr: &mut InstrInfo, space: MemSpace, carried: u8) -> Option<Walked> {
        let b = self.blocks.get(self.slot(instr.instr_addr))?;
        if b.start == instr.instr_addr && b.tag & !1 == block_tag(self.generation, instr.isa, space) && carried == 0 {
            *instr = b.after;
            return Some(b.walked);
        }
        None
    }

    /// The remembered blocks of `space` that end at a waypoint, within the
    /// range limit and, with `WalkOptions::eret_not_fast`, not in an
    /// exception return, for a run of look-ups (the atom fast path): the
    /// caller makes sure the
    /// classifier carries no state, as [`remembered`](Self::remembered)
    /// does.
    /// `None` until the table has grown to its full size (a short trace
    /// takes the general walk, which is what grows it).
    #[inline]
    pub(crate) fn waypoint_blocks(&self, space: MemSpace) -> Option<WaypointBlocks<'_>> {
        Some(WaypointBlocks {
            blocks: self.blocks.as_slice().try_into().ok()?,
            tag: block_tag(self.generation, Isa::Arm, space) | 1,
        })
    }

    /// Walks from `instr.instr_addr` to the next waypoint, as far as the
    /// memory image goes.
    #[inline(always)]
    pub(crate) fn walk_to_waypoint(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        dec: &mut dyn InstrDecode,
        instr: &mut InstrInfo,
        trace_id: u8,
        space: MemSpace,
    ) -> Walked {
        self.sync_memory(mem.generation(trace_id));
        if let Some(w) = self.remembered(instr, space, dec.carried_state()) {
            return w;
        }
        self.walk_block(mem, dec, instr, trace_id, space)
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
    ) -> Walked {
        let (start, isa) = (instr.instr_addr, instr.isa);
        // Blocks are remembered only from and to a classifier carrying no
        // state: a hit skips the classifier, which must be left as the
        // walk would have left it.
        let from_clean = dec.carried_state() == 0;
        let mut passed = std::mem::take(&mut self.passed);
        passed.clear();
        let mut walked = Walked {
            num: 0,
            end: WalkEnd::Nacc,
        };
        loop {
            let (part, at_checkpoint) = self.walk(mem, dec, instr, trace_id, space, None, true);
            walked = Walked {
                num: walked.num.saturating_add(part.num),
                end: part.end,
            };
            if !at_checkpoint {
                break;
            }
            if dec.carried_state() != 0 {
                continue;
            }
            let at = instr.instr_addr;
            if let Some(rest) = self.remembered(instr, space, 0) {
                walked = Walked {
                    num: walked.num.saturating_add(rest.num),
                    end: rest.end,
                };
                break;
            }
            passed.push((at, walked.num));
        }
        // A walk that decoded nothing leaves stale classification in
        // `instr`; it is cheap, so it is not remembered.
        if walked.num > 0 && dec.carried_state() == 0 {
            // A walked block saves more work than one instruction does.
            self.reserve(4 * (passed.len() + 1));
            for &(at, before) in &passed {
                let num = walked.num - before;
                if num > 0 {
                    let b = self.block(at, isa, space, Walked { num, end: walked.end }, *instr);
                    let slot = self.slot(at);
                    self.blocks[slot] = b;
                }
            }
            if from_clean {
                let slot = self.slot(start);
                self.blocks[slot] = self.block(start, isa, space, walked, *instr);
            }
        }
        self.passed = passed;
        walked
    }

    /// The remembered classifications of single instructions in `space`
    /// (see [`classify_one`](Self::classify_one)), for a run of look-ups
    /// by address and instruction set: the classifier's outputs as it gave
    /// them, read in place (a copy per atom would be most of a hit's
    /// cost). `None` until the first instruction is remembered. The caller
    /// keeps the memory generation in step
    /// ([`sync_memory`](Self::sync_memory)) and makes sure the classifier
    /// carries no state, as for [`remembered`](Self::remembered).
    #[inline]
    pub(crate) fn singles(&self, space: MemSpace) -> Option<RememberedSingles<'_>> {
        Some(RememberedSingles {
            singles: self.singles.as_slice().try_into().ok()?,
            tag: block_tag(self.generation, Isa::Arm, space),
        })
    }

    /// The remembered classification at `instr`'s address and ISA
    /// copied into it, for tests.
    #[cfg(test)]
    pub(crate) fn remembered_one(&self, instr: &mut InstrInfo, space: MemSpace) -> bool {
        match self.singles(space).and_then(|s| s.get(instr.instr_addr, instr.isa)) {
            Some(s) => {
                s.give(instr);
                true
            }
            None => false,
        }
    }

    /// Reads and classifies the one instruction at `instr.instr_addr`
    /// (not moving on), through the code cache, and remembers the result
    /// for [`singles`](Self::singles) (for decoders that
    /// step one instruction per atom). `clean`: the classifier carries no
    /// state now. `Ok(None)`: not all 4 bytes of the opcode are mapped;
    /// `Ok(Some(clean))`: classified, and whether the classifier carries
    /// no state after it. Errors are the memory's or the classifier's.
    /// The caller keeps the memory generation in step
    /// ([`sync_memory`](Self::sync_memory)).
    pub(crate) fn classify_one(
        &mut self,
        mem: &mut dyn TargetMemAccess,
        dec: &mut dyn InstrDecode,
        instr: &mut InstrInfo,
        trace_id: u8,
        space: MemSpace,
        clean: bool,
    ) -> Result<Option<bool>, ErrCode> {
        let Some(opcode) = self.code.read4(mem, instr.instr_addr, trace_id, space)? else {
            return Ok(None);
        };
        instr.opcode = opcode;
        dec.decode_instruction(instr)?;
        let clean_after = dec.carried_state() == 0;
        if clean && clean_after {
            if self.singles.is_empty() {
                self.singles = Self::empty_table(SINGLES);
            }
            let tag = block_tag(self.generation, instr.isa, space);
            if let Some(slot) = self
                .singles
                .get_mut(slot_of(instr.instr_addr, SINGLES_SHIFT) & (SINGLES - 1))
            {
                *slot = Single::of(instr, tag);
            }
        }
        Ok(Some(clean_after))
    }

    /// Classifies ahead of `instr`, just classified with the classifier
    /// carrying no state: the instructions after it in its cache line, up
    /// to and including the next branch (or `max` of them), remembered as
    /// [`classify_one`](Self::classify_one) remembers one, for a decoder
    /// that steps one instruction per atom through code it mostly runs
    /// once. Nothing is read from memory, and the classifier is left as
    /// it was: an instruction that would make it carry state (a T32 IT)
    /// ends the run unremembered, its state cleared, as are an opcode the
    /// line does not hold whole and one the classifier refuses.
    pub(crate) fn classify_ahead(&mut self, dec: &mut dyn InstrDecode, instr: &InstrInfo, space: MemSpace, max: usize) {
        if self.singles.is_empty() {
            return;
        }
        let tag = block_tag(self.generation, instr.isa, space);
        let mut next = *instr;
        // The line is looked up once: the run stays in it.
        let from = next.instr_addr.wrapping_add(u64::from(next.instr_size));
        let line = self.code.cached_from(from, space);
        let mut off = 0usize;
        for _ in 0..max {
            if matches!(next.instr_type, InstrType::Branch | InstrType::BranchIndirect) || next.next_isa != next.isa {
                return;
            }
            let Some(&[b0, b1, b2, b3]) = line.get(off..).and_then(|l| l.first_chunk::<4>()) else {
                return;
            };
            let addr = from.wrapping_add(off as u64);
            next.instr_addr = addr;
            next.opcode = u32::from_le_bytes([b0, b1, b2, b3]);
            if dec.decode_instruction(&mut next).is_err() {
                return;
            }
            if dec.carried_state() != 0 {
                dec.clear_carried_state();
                return;
            }
            if let Some(slot) = self.singles.get_mut(slot_of(addr, SINGLES_SHIFT) & (SINGLES - 1)) {
                *slot = Single::of(&next, tag);
            }
            off += usize::from(next.instr_size);
        }
    }

    /// Walks from `instr.instr_addr` until the next instruction would be
    /// at `to` (not stopping at waypoints), uncached.
    pub(crate) fn walk_to_address(
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

    // The walk's state goes in registers, not a struct: it is the hot path.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
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
                return (
                    Walked {
                        num,
                        end: WalkEnd::Nacc,
                    },
                    true,
                );
            }
            let opcode = match self.code.read4(mem, instr.instr_addr, trace_id, space) {
                Ok(Some(op)) => op,
                Ok(None) => {
                    return (
                        Walked {
                            num,
                            end: WalkEnd::Nacc,
                        },
                        false,
                    );
                }
                Err(e) if self.options.mem_error_is_error => {
                    return (
                        Walked {
                            num,
                            end: WalkEnd::Error(e),
                        },
                        false,
                    );
                }
                Err(_) => {
                    return (
                        Walked {
                            num,
                            end: WalkEnd::Nacc,
                        },
                        false,
                    );
                }
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
                    classify_plain_a64(instr);
                    instr.instr_addr = instr.instr_addr.wrapping_add(4 * run as u64);
                    num = num.saturating_add(run);
                    continue;
                }
            }
            if instr.isa == Isa::Aarch64 {
                if self.options.a64_opcode_check && opcode & 0xFFFF_0000 == 0 {
                    return (
                        Walked {
                            num,
                            end: WalkEnd::Error(ErrCode::InvalidOpcode),
                        },
                        false,
                    );
                }
                if a64_plain(opcode) {
                    // Outside the branch / exception / system group no A64
                    // instruction is a waypoint: skip the classifier.
                    classify_plain_a64(instr);
                } else if let Err(e) = dec.decode_instruction(instr) {
                    return (
                        Walked {
                            num,
                            end: WalkEnd::Error(e),
                        },
                        false,
                    );
                }
            } else if let Err(e) = dec.decode_instruction(instr) {
                return (
                    Walked {
                        num,
                        end: WalkEnd::Error(e),
                    },
                    false,
                );
            }
            instr.instr_addr = instr.instr_addr.wrapping_add(instr.instr_size as u64);
            num = num.saturating_add(1);
            let done = match to {
                Some(a) => instr.instr_addr == a,
                None => instr.instr_type != InstrType::Other,
            };
            if done {
                return (
                    Walked {
                        num,
                        end: WalkEnd::Waypoint,
                    },
                    false,
                );
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

/// What the classifier says of an A64 instruction that is no waypoint.
#[inline]
fn classify_plain_a64(instr: &mut InstrInfo) {
    instr.instr_type = InstrType::Other;
    instr.sub_type = InstrSubType::None;
    instr.instr_size = 4;
    instr.is_conditional = false;
    instr.is_link = false;
    instr.next_isa = Isa::Aarch64;
    instr.thumb_it_conditions = 0;
}

/// Spacing of the checkpoints where a walk looks for a remembered block
/// to join (a power of two).
const CHECKPOINT: u64 = 4096;

/// A64 op0 (bits 28:26) and its value for branches, exception generation
/// and system instructions: the only group holding waypoints.
const A64_GROUP_MASK: u32 = 0x1C00_0000;
const A64_GROUP_BRANCH_SYS: u32 = 0x1400_0000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
    use crate::instr::ArmInstrDecoder;

    /// A table holds empty entries of the variant-0 values, zeroed (large)
    /// or filled (small).
    #[test]
    fn zero_is_a_valid_entry() {
        let t: Vec<Block> = Walker::empty_table(BLOCKS);
        assert_eq!(t.len(), BLOCKS);
        let small: Vec<Block> = Walker::empty_table(3);
        assert_eq!(small.len(), 3);
        let zero_info = InstrInfo {
            pe_type: ArchProfile::new(ArchVersion::Unknown, CoreProfile::Unknown),
            isa: Isa::Arm,
            next_isa: Isa::Arm,
            ..InstrInfo::default()
        };
        for b in t.iter().chain(&small) {
            assert_eq!((b.start, b.tag), (0, 0));
            assert_eq!(
                b.walked,
                Walked {
                    num: 0,
                    end: WalkEnd::Waypoint
                }
            );
            assert_eq!(b.after, zero_info);
        }
        assert!(Walker::empty_table::<Block>(0).is_empty());
        let singles: Vec<Single> = Walker::empty_table(SINGLES);
        let few: Vec<Single> = Walker::empty_table(3);
        assert!(
            SINGLES * size_of::<Single>() >= 128 << 10,
            "the large table is zeroed memory"
        );
        assert_eq!(singles.len(), SINGLES);
        for e in singles.iter().chain(&few) {
            assert_eq!(*e, Single::EMPTY);
        }
    }

    /// Memory whose contents the test changes, with a generation it bumps
    /// (or not) and a count of reads.
    struct Mem {
        base: u64,
        bytes: Vec<u8>,
        generation: u64,
        reads: usize,
    }

    impl TargetMemAccess for Mem {
        fn read_target_memory(
            &mut self,
            address: u64,
            _id: u8,
            _space: MemSpace,
            buf: &mut [u8],
        ) -> Result<usize, ErrCode> {
            self.reads += 1;
            let Some(off) = address
                .checked_sub(self.base)
                .map(|o| o as usize)
                .filter(|&o| o < self.bytes.len())
            else {
                return Ok(0);
            };
            let n = buf.len().min(self.bytes.len() - off);
            buf[..n].copy_from_slice(&self.bytes[off..off + n]);
            Ok(n)
        }
        fn generation(&self, _trace_id: u8) -> u64 {
            self.generation
        }
    }

    fn words(ops: &[u32]) -> Vec<u8> {
        ops.iter().flat_map(|o| o.to_le_bytes()).collect()
    }

    const NOP: u32 = 0xD503_201F;
    const ADD: u32 = 0x9100_0400; // add x0, x0, #1
    const RET: u32 = 0xD65F_03C0;

    fn a64_at(addr: u64) -> InstrInfo {
        InstrInfo {
            pe_type: ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA),
            isa: Isa::Aarch64,
            instr_addr: addr,
            ..Default::default()
        }
    }

    fn walk(w: &mut Walker, mem: &mut Mem, dec: &mut ArmInstrDecoder, addr: u64) -> (Walked, InstrInfo) {
        let mut info = a64_at(addr);
        let r = w.walk_to_waypoint(mem, dec, &mut info, 1, MemSpace::ANY);
        (r, info)
    }

    #[test]
    fn a_remembered_block_gives_the_walk_result_without_reading_memory() {
        let mut mem = Mem {
            base: 0x1000,
            bytes: words(&[ADD, NOP, ADD, RET, ADD]),
            generation: 1,
            reads: 0,
        };
        let mut dec = ArmInstrDecoder::new();
        let mut w = Walker::new(WalkOptions::default());
        let (first, after) = walk(&mut w, &mut mem, &mut dec, 0x1000);
        assert_eq!(
            first,
            Walked {
                num: 4,
                end: WalkEnd::Waypoint
            }
        );
        assert_eq!(
            (after.instr_addr, after.instr_type, after.opcode),
            (0x1010, InstrType::BranchIndirect, RET)
        );
        let reads = mem.reads;
        let again = walk(&mut w, &mut mem, &mut dec, 0x1000);
        assert_eq!(again, (first, after));
        assert_eq!(mem.reads, reads, "a remembered block reads no memory");
        // Entering the same block further on is another block.
        assert_eq!(
            walk(&mut w, &mut mem, &mut dec, 0x1008).0,
            Walked {
                num: 2,
                end: WalkEnd::Waypoint
            }
        );
        // Past the end of memory: inaccessible.
        assert_eq!(
            walk(&mut w, &mut mem, &mut dec, 0x1010).0,
            Walked {
                num: 1,
                end: WalkEnd::Nacc
            }
        );
    }

    #[test]
    fn a_new_memory_generation_drops_remembered_blocks() {
        let mut mem = Mem {
            base: 0x1000,
            bytes: words(&[ADD, ADD, RET]),
            generation: 1,
            reads: 0,
        };
        let mut dec = ArmInstrDecoder::new();
        let mut w = Walker::new(WalkOptions::default());
        assert_eq!(walk(&mut w, &mut mem, &mut dec, 0x1000).0.num, 3);
        // Contents change without a new generation: the contract says the
        // old block stands.
        mem.bytes = words(&[RET, ADD, ADD]);
        assert_eq!(walk(&mut w, &mut mem, &mut dec, 0x1000).0.num, 3);
        // With a new generation the walk sees the new contents.
        mem.generation += 1;
        assert_eq!(walk(&mut w, &mut mem, &mut dec, 0x1000).0.num, 1);
    }

    #[test]
    fn a_long_branchless_stretch_is_walked_once_from_any_entry() {
        let n = 64 * 1024;
        let mut ops = vec![NOP; n];
        ops.push(RET);
        let mut mem = Mem {
            base: 0x10_0000,
            bytes: words(&ops),
            generation: 1,
            reads: 0,
        };
        let mut dec = ArmInstrDecoder::new();
        let mut w = Walker::new(WalkOptions::default());
        let (r, _) = walk(&mut w, &mut mem, &mut dec, 0x10_0000);
        assert_eq!(
            r,
            Walked {
                num: n as u32 + 1,
                end: WalkEnd::Waypoint
            }
        );
        // Entering anywhere else walks only to the next checkpoint.
        let reads = mem.reads;
        for k in [1u64, 1000, 30_000, 65_000] {
            let (r, after) = walk(&mut w, &mut mem, &mut dec, 0x10_0000 + 4 * k);
            assert_eq!(
                r,
                Walked {
                    num: (n as u64 + 1 - k) as u32,
                    end: WalkEnd::Waypoint
                }
            );
            assert_eq!(after.instr_addr, 0x10_0000 + 4 * (n as u64 + 1));
        }
        assert!(
            mem.reads - reads <= 4 * (CHECKPOINT as usize / LINE),
            "{} reads",
            mem.reads - reads
        );
    }

    #[test]
    fn a_single_classification_gives_back_what_the_classifier_gave() {
        use InstrSubType as S;
        use InstrType as T;
        let types = [
            T::Other,
            T::Branch,
            T::BranchIndirect,
            T::Isb,
            T::DsbDmb,
            T::WfiWfe,
            T::Tstart,
        ];
        let subs = [S::None, S::BranchLink, S::V8Ret, S::V8Eret, S::V7ImpliedRet];
        let isas = [
            Isa::Arm,
            Isa::Thumb2,
            Isa::Aarch64,
            Isa::Tee,
            Isa::Jazelle,
            Isa::Custom,
            Isa::RiscV,
            Isa::Unknown,
        ];
        for (n, &instr_type) in types.iter().enumerate() {
            for (m, &sub_type) in subs.iter().enumerate() {
                for &next_isa in &isas {
                    let given = InstrInfo {
                        instr_type,
                        sub_type,
                        next_isa,
                        instr_size: 2 + 2 * (n % 2) as u8,
                        is_conditional: m % 2 == 0,
                        is_link: n % 3 == 0,
                        thumb_it_conditions: (n + m) as u8 % 4,
                        branch_addr: 0x8000_0000_1234_5678 + n as u64,
                        ..a64_at(0x1000)
                    };
                    let mut got = a64_at(0x1000);
                    Single::of(&given, 1).give(&mut got);
                    assert_eq!(got, given);
                }
            }
        }
    }

    #[test]
    fn a_classified_instruction_is_remembered_in_its_generation_isa_and_space_only() {
        let mut mem = Mem {
            base: 0x1000,
            bytes: words(&[ADD, RET]),
            generation: 1,
            reads: 0,
        };
        let mut dec = ArmInstrDecoder::new();
        let mut w = Walker::new(WalkOptions::default());
        let mut info = a64_at(0x1004);
        assert!(!w.remembered_one(&mut info, MemSpace::EL1N));
        let r = w.classify_one(&mut mem, &mut dec, &mut info, 1, MemSpace::EL1N, true);
        assert_eq!(r, Ok(Some(true)));
        assert_eq!(
            (info.instr_type, info.sub_type),
            (InstrType::BranchIndirect, InstrSubType::V8Ret)
        );
        let classified = info;

        let mut again = a64_at(0x1004);
        assert!(w.remembered_one(&mut again, MemSpace::EL1N));
        again.opcode = classified.opcode;
        assert_eq!(again, classified);
        // Another space, instruction set or address: not this entry.
        assert!(!w.remembered_one(&mut a64_at(0x1004), MemSpace::EL2));
        assert!(!w.remembered_one(
            &mut InstrInfo {
                isa: Isa::Arm,
                ..a64_at(0x1004)
            },
            MemSpace::EL1N
        ));
        assert!(!w.remembered_one(&mut a64_at(0x1000), MemSpace::EL1N));
        // Classified while the classifier carried state: not remembered.
        let mut add = a64_at(0x1000);
        assert_eq!(
            w.classify_one(&mut mem, &mut dec, &mut add, 1, MemSpace::EL1N, false),
            Ok(Some(true))
        );
        assert!(!w.remembered_one(&mut a64_at(0x1000), MemSpace::EL1N));
        // A new memory generation forgets it.
        mem.generation = 2;
        w.sync_memory(mem.generation);
        assert!(!w.remembered_one(&mut a64_at(0x1004), MemSpace::EL1N));
        // Unmapped: nothing classified.
        assert_eq!(
            w.classify_one(&mut mem, &mut dec, &mut a64_at(0x2000), 1, MemSpace::EL1N, true),
            Ok(None)
        );
    }

    #[test]
    fn classifying_ahead_remembers_the_line_up_to_a_branch_without_reading_memory() {
        let mut mem = Mem {
            base: 0x1000,
            bytes: words(&[ADD, NOP, ADD, RET, NOP]),
            generation: 1,
            reads: 0,
        };
        let mut dec = ArmInstrDecoder::new();
        let mut w = Walker::new(WalkOptions::default());
        let mut first = a64_at(0x1000);
        assert_eq!(
            w.classify_one(&mut mem, &mut dec, &mut first, 1, MemSpace::EL1N, true),
            Ok(Some(true))
        );
        let reads = mem.reads;
        w.classify_ahead(&mut dec, &first, MemSpace::EL1N, 16);
        assert_eq!(mem.reads, reads);
        for addr in [0x1004, 0x1008, 0x100c] {
            let mut ahead = a64_at(addr);
            assert!(w.remembered_one(&mut ahead, MemSpace::EL1N), "{addr:#x}");
            let mut fresh = a64_at(addr);
            assert_eq!(
                w.classify_one(&mut mem, &mut dec, &mut fresh, 1, MemSpace::EL1N, true),
                Ok(Some(true))
            );
            ahead.opcode = fresh.opcode;
            assert_eq!(ahead, fresh);
        }
        // Not past the RET.
        assert!(!w.remembered_one(&mut a64_at(0x1010), MemSpace::EL1N));
        // At most `max`.
        let mut w = Walker::new(WalkOptions::default());
        let mut first = a64_at(0x1000);
        w.classify_one(&mut mem, &mut dec, &mut first, 1, MemSpace::EL1N, true)
            .unwrap();
        w.classify_ahead(&mut dec, &first, MemSpace::EL1N, 1);
        assert!(w.remembered_one(&mut a64_at(0x1004), MemSpace::EL1N));
        assert!(!w.remembered_one(&mut a64_at(0x1008), MemSpace::EL1N));
    }

    #[test]
    fn classifying_ahead_stops_at_an_it_block_and_leaves_the_classifier_clean() {
        // T32: 0x2000 nop; nop; ittt eq; nop.
        let bytes = vec![0x00, 0xbf, 0x00, 0xbf, 0x02, 0xbf, 0x00, 0xbf, 0x00, 0xbf, 0x00, 0xbf];
        let mut mem = Mem {
            base: 0x2000,
            bytes,
            generation: 1,
            reads: 0,
        };
        let mut dec = ArmInstrDecoder::new();
        let mut w = Walker::new(WalkOptions::default());
        let t32 = |addr| InstrInfo {
            isa: Isa::Thumb2,
            track_it_block: true,
            ..a64_at(addr)
        };
        let mut first = t32(0x2000);
        assert_eq!(
            w.classify_one(&mut mem, &mut dec, &mut first, 1, MemSpace::ANY, true),
            Ok(Some(true))
        );
        w.classify_ahead(&mut dec, &first, MemSpace::ANY, 16);
        assert_eq!(dec.carried_state(), 0);
        assert!(w.remembered_one(&mut t32(0x2002), MemSpace::ANY));
        assert!(!w.remembered_one(&mut t32(0x2004), MemSpace::ANY));
        assert!(!w.remembered_one(&mut t32(0x2006), MemSpace::ANY));
    }

    #[test]
    fn no_block_is_reused_while_a_t32_it_block_is_open() {
        // 0x2000: bx lr; nop; 0x2004: ittt eq; then 2 bytes, too few for
        // the next opcode read.
        let bytes = vec![0x70, 0x47, 0x00, 0xbf, 0x02, 0xbf, 0x00, 0x00];
        let mut mem = Mem {
            base: 0x2000,
            bytes,
            generation: 1,
            reads: 0,
        };
        let mut dec = ArmInstrDecoder::new();
        let mut w = Walker::new(WalkOptions::default());
        let mut t32 = |w: &mut Walker, dec: &mut ArmInstrDecoder, addr| {
            let mut info = InstrInfo {
                isa: Isa::Thumb2,
                track_it_block: true,
                ..a64_at(addr)
            };
            (
                w.walk_to_waypoint(&mut mem, dec, &mut info, 1, MemSpace::ANY),
                info.is_conditional,
            )
        };
        let bx = Walked {
            num: 1,
            end: WalkEnd::Waypoint,
        };
        assert_eq!(t32(&mut w, &mut dec, 0x2000), (bx, false));
        // The IT opens a block of three; memory ends right after it.
        assert_eq!(
            t32(&mut w, &mut dec, 0x2004),
            (
                Walked {
                    num: 1,
                    end: WalkEnd::Nacc
                },
                false
            )
        );
        assert_eq!(dec.carried_state(), 3);
        // The classifier still applies the block: the remembered bx (from
        // no open block) must not be used.
        for _ in 0..3 {
            assert_eq!(t32(&mut w, &mut dec, 0x2000), (bx, true));
        }
        assert_eq!(dec.carried_state(), 0);
        assert_eq!(t32(&mut w, &mut dec, 0x2000), (bx, false));
    }
}
