//! Instruction classification for program-flow following (A64, A32, T32).
//!
//! A trace decoder walks the traced program one instruction at a time and
//! needs to know, for each opcode, whether it is a waypoint: a direct or
//! indirect branch, a barrier, a WFI/WFE or a TSTART. [`ArmInstrDecoder`]
//! answers that through the [`InstrDecode`] trait, classifying opcodes the
//! way OpenCSD 1.8.0 does (including its quirks, which trace decode output
//! depends on), not the way a full disassembler would.
//!
//! Each instruction set has its own module of ordered mask/value tables
//! (`a64`, `a32`, `t32`); the first row whose pattern matches an opcode
//! decides. The decoder applies the per-call options (DSB/DMB and WFI/WFE
//! waypoints) and the T32 IT-block state on top of what the tables say.
//!
//! T32 opcodes arrive as read little-endian from memory: the first halfword
//! in bits 15:0, the second (for a 32-bit instruction) in bits 31:16.
//! Internally T32 patterns are written with the first halfword in the high
//! half, which is how the Arm ARM lays encodings out.

mod a32;
mod a64;
mod t32;

use crate::arch::{ArchVersion, InstrInfo, InstrSubType, InstrType, Isa};
use crate::errcode::ErrCode;

/// Instruction classifier (OpenCSD's `IInstrDecode`): fills in the output
/// fields of `info` from its inputs.
#[doc(alias = "IInstrDecode")]
pub trait InstrDecode: Send {
    /// Classifies the instruction `info` describes (ISA, address, opcode), filling in its
    /// output fields; an error for an invalid opcode or an ISA the classifier does not
    /// support.
    fn decode_instruction(&mut self, info: &mut InstrInfo) -> Result<(), ErrCode>;

    /// State the classifier carries from one instruction to the next that
    /// changes how it classifies (for Arm: the T32 IT-block instructions
    /// still to come); 0 when none. Decoders reuse walked blocks only
    /// from state 0, so a classifier with other hidden state must report
    /// it here as non-zero.
    fn carried_state(&self) -> u8 {
        0
    }

    /// Forgets the state carried to the next instruction: the program did
    /// not go on to it (an exception was taken). By default there is none.
    fn clear_carried_state(&mut self) {}
}

pub use t32::is_wide_thumb;

/// Environment variable that, when set (to anything), turns the A64 opcode
/// check on (see [`ArmInstrDecoder::set_aa64_opcode_check_from_env`]).
pub const ENV_ERR_ON_AA64_BAD_OPCODE: &str = "OPENCSD_ERR_ON_AA64_BAD_OPCODE";

/// Classifies A64, A32 and T32 opcodes for program-flow following
/// (OpenCSD's `TrcIDecode`).
///
/// The decoder carries two pieces of state between calls:
/// - the A64 opcode check option ([`set_aa64_opcode_check`](Self::set_aa64_opcode_check));
/// - the number of instructions still covered by the current T32 IT block,
///   used when [`InstrInfo::track_it_block`] is set. Decoding an A32 or A64
///   instruction clears it, as does [`reset_it_block`](Self::reset_it_block).
#[derive(Clone, Debug, Default)]
pub struct ArmInstrDecoder {
    aa64_opcode_check: bool,
    it_remaining: u8,
}

impl ArmInstrDecoder {
    /// Number of instructions still covered by the current T32 IT block.
    #[cfg(test)]
    pub(crate) fn it_block_remaining(&self) -> u8 {
        self.it_remaining
    }

    /// A decoder with the A64 opcode check off and no IT block open.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// When on, an A64 opcode whose top 16 bits are all zero (a range in
    /// which no A64 instruction is allocated, and what unmapped or zeroed
    /// memory decodes as) makes `decode_instruction` fail with
    /// [`ErrCode::InvalidOpcode`].
    pub fn set_aa64_opcode_check(&mut self, on: bool) {
        self.aa64_opcode_check = on;
    }

    /// Whether the A64 opcode check is on.
    #[must_use]
    pub fn aa64_opcode_check(&self) -> bool {
        self.aa64_opcode_check
    }

    /// Turns the A64 opcode check on if [`ENV_ERR_ON_AA64_BAD_OPCODE`] is
    /// set in the environment; leaves the option alone otherwise.
    pub fn set_aa64_opcode_check_from_env(&mut self) {
        if std::env::var_os(ENV_ERR_ON_AA64_BAD_OPCODE).is_some() {
            self.aa64_opcode_check = true;
        }
    }

    /// Forgets any open T32 IT block (e.g. after a trace discontinuity).
    pub fn reset_it_block(&mut self) {
        self.it_remaining = 0;
    }

    fn decode_a64(&mut self, info: &mut InstrInfo) -> Result<(), ErrCode> {
        self.it_remaining = 0;
        info.instr_size = 4;
        info.instr_type = InstrType::Other;
        info.next_isa = info.isa;
        info.is_link = false;
        info.thumb_it_conditions = 0;
        if self.aa64_opcode_check && info.opcode & 0xffff_0000 == 0 {
            return Err(ErrCode::InvalidOpcode);
        }
        let d = a64::classify(info.opcode, info.instr_addr, info.pe_type.arch);
        apply(info, &d);
        Ok(())
    }

    fn decode_a32(&mut self, info: &mut InstrInfo) {
        self.it_remaining = 0;
        info.thumb_it_conditions = 0;
        let d = a32::classify(info.opcode, info.instr_addr);
        apply(info, &d);
    }

    fn decode_t32(&mut self, info: &mut InstrInfo) {
        let (d, it_count) = t32::classify(info.opcode, info.instr_addr);
        apply(info, &d);
        if info.track_it_block {
            if self.it_remaining == 0 {
                // An IT instruction opens a block for the ones after it.
                if info.instr_type == InstrType::Other {
                    self.it_remaining = it_count;
                }
            } else {
                // Everything inside an IT block executes conditionally,
                // branches included.
                info.is_conditional = true;
                self.it_remaining -= 1;
            }
        }
        info.thumb_it_conditions = self.it_remaining;
    }
}

impl InstrDecode for ArmInstrDecoder {
    fn carried_state(&self) -> u8 {
        self.it_remaining
    }
    fn clear_carried_state(&mut self) {
        self.reset_it_block();
    }

    fn decode_instruction(&mut self, info: &mut InstrInfo) -> Result<(), ErrCode> {
        info.sub_type = InstrSubType::None;
        match info.isa {
            Isa::Aarch64 => self.decode_a64(info),
            Isa::Arm => {
                self.decode_a32(info);
                Ok(())
            }
            Isa::Thumb2 => {
                self.decode_t32(info);
                Ok(())
            }
            Isa::Tee | Isa::Jazelle | Isa::Custom | Isa::RiscV | Isa::Unknown => Err(ErrCode::UnsupportedIsa),
        }
    }
}

/// Writes a classification into `info`, applying the waypoint options.
/// `branch_addr` is only written for direct branches.
fn apply(info: &mut InstrInfo, d: &Decoded) {
    info.instr_size = d.size;
    info.next_isa = info.isa;
    info.is_link = d.link;
    info.is_conditional = d.conditional;
    info.sub_type = d.sub_type;
    info.instr_type = match d.kind {
        Kind::Other => InstrType::Other,
        Kind::Direct { target, isa } => {
            info.branch_addr = target;
            if let Some(isa) = isa {
                info.next_isa = isa;
            }
            InstrType::Branch
        }
        Kind::Indirect => InstrType::BranchIndirect,
        Kind::Isb => InstrType::Isb,
        Kind::DsbDmb if info.dsb_dmb_waypoints => InstrType::DsbDmb,
        Kind::WfiWfe if info.wfi_wfe_branch => InstrType::WfiWfe,
        Kind::DsbDmb | Kind::WfiWfe => InstrType::Other,
        Kind::Tstart => InstrType::Tstart,
    };
}

/// What an instruction is, before the per-call waypoint options apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Other,
    /// Direct branch to `target`; `isa` is set when the branch changes
    /// instruction set (A32/T32 interworking).
    Direct {
        target: u64,
        isa: Option<Isa>,
    },
    Indirect,
    Isb,
    DsbDmb,
    WfiWfe,
    Tstart,
}

/// The result of classifying one opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Decoded {
    kind: Kind,
    sub_type: InstrSubType,
    link: bool,
    conditional: bool,
    size: u8,
}

impl Decoded {
    const fn other(size: u8) -> Self {
        Decoded {
            kind: Kind::Other,
            sub_type: InstrSubType::None,
            link: false,
            conditional: false,
            size,
        }
    }
}

/// An opcode pattern: the opcode matches when `op & mask == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pattern {
    mask: u32,
    value: u32,
}

impl Pattern {
    /// Panics at compile time (tables are `const`) if `value` has bits
    /// outside `mask`, which could never match.
    const fn new(mask: u32, value: u32) -> Self {
        assert!(value & !mask == 0, "pattern value has bits outside its mask");
        Pattern { mask, value }
    }

    #[inline]
    const fn matches(self, op: u32) -> bool {
        op & self.mask == self.value
    }
}

/// Shorthand for table rows.
const fn pat(mask: u32, value: u32) -> Pattern {
    Pattern::new(mask, value)
}

/// A quick first test of an opcode, before its tables: for each key —
/// 8 bits of the opcode from bit `shift` up and 4 from bit `low` up
/// (bits 15:12 unless said otherwise) — the patterns that could match an
/// opcode with that key (bit `r` for the `r`-th added). An opcode whose
/// key has none matches no pattern: it is no waypoint (most opcodes).
/// One that passes need only be tried against those rows, rather than
/// down whole tables: most that pass match a row near the end, or none.
struct RowFilter {
    rows: [u32; 4096],
    shift: u32,
    low: u32,
    /// Patterns added so far (the next one's bit).
    added: u32,
}

impl RowFilter {
    const fn new(shift: u32) -> Self {
        Self::with_low(shift, 12)
    }

    const fn with_low(shift: u32, low: u32) -> Self {
        RowFilter {
            rows: [0; 4096],
            shift,
            low,
            added: 0,
        }
    }

    #[inline(always)]
    const fn key(&self, op: u32) -> usize {
        ((((op >> self.shift) & 0xff) << 4) | ((op >> self.low) & 0xf)) as usize
    }

    /// Adds `p` as the next row, with the keys it could match.
    const fn add(mut self, p: Pattern) -> Self {
        assert!(self.added < 32, "a row filter holds 32 rows");
        let bit = 1u32 << self.added;
        let mut k = 0;
        while k < 4096 {
            let op = (((k as u32) >> 4) << self.shift) | (((k as u32) & 0xf) << self.low);
            let key_mask = (0xff << self.shift) | (0xf << self.low);
            if (op ^ p.value) & key_mask & p.mask == 0 {
                self.rows[k] |= bit;
            }
            k += 1;
        }
        self.added += 1;
        self
    }

    /// Adds each row of `table` in turn.
    const fn add_rows<T>(mut self, table: &[(Pattern, T)]) -> Self {
        let mut i = 0;
        while i < table.len() {
            self = self.add(table[i].0);
            i += 1;
        }
        self
    }

    /// The rows that could match `op` (none: it matches no pattern).
    #[inline(always)]
    fn rows(&self, op: u32) -> u32 {
        self.rows[self.key(op)]
    }
}

/// The outcome of the first row of `table` among `rows` (bit `i`: row
/// `i`) that matches `op`. Rows left out must be ones that cannot match.
#[inline(always)]
fn first_match_in<T: Copy>(table: &[(Pattern, T)], op: u32, mut rows: u32) -> Option<T> {
    while rows != 0 {
        let (p, out) = *table.get(rows.trailing_zeros() as usize)?;
        if p.matches(op) {
            return Some(out);
        }
        rows &= rows - 1;
    }
    None
}

/// The outcome of the first row of an ordered table that matches `op`.
#[inline]
fn first_match<T: Copy>(table: &[(Pattern, T)], op: u32) -> Option<T> {
    table.iter().find(|(p, _)| p.matches(op)).map(|&(_, out)| out)
}

/// Sign-extends the low `bits` bits of `value`.
#[inline]
const fn sign_extend(value: u32, bits: u32) -> i32 {
    let shift = 32 - bits;
    ((value << shift) as i32) >> shift
}

/// An indirect-branch row for the A32 and T32 tables: either the opcode is
/// known not to be a branch, or it is one, with link and implied-return
/// sub-patterns. Link wins over return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IndirectRule {
    NotBranch,
    Branch {
        link: Option<Pattern>,
        ret: Option<Pattern>,
    },
}

impl IndirectRule {
    const PLAIN: IndirectRule = IndirectRule::Branch { link: None, ret: None };
    const RETURN: IndirectRule = IndirectRule::Branch {
        link: None,
        ret: Some(pat(0, 0)),
    };

    const fn ret_if(mask: u32, value: u32) -> IndirectRule {
        IndirectRule::Branch {
            link: None,
            ret: Some(pat(mask, value)),
        }
    }

    /// `(is_link, sub_type)` when `op` is an indirect branch by `table`.
    fn lookup(table: &[(Pattern, IndirectRule)], op: u32) -> Option<(bool, InstrSubType)> {
        Self::outcome(first_match(table, op)?, op)
    }

    /// As [`lookup`](Self::lookup), trying only `rows` (see [`first_match_in`]).
    #[inline(always)]
    fn lookup_in(table: &[(Pattern, IndirectRule)], op: u32, rows: u32) -> Option<(bool, InstrSubType)> {
        Self::outcome(first_match_in(table, op, rows)?, op)
    }

    #[inline(always)]
    fn outcome(rule: IndirectRule, op: u32) -> Option<(bool, InstrSubType)> {
        match rule {
            IndirectRule::NotBranch => None,
            IndirectRule::Branch { link, ret } => {
                if link.is_some_and(|p| p.matches(op)) {
                    Some((true, InstrSubType::BranchLink))
                } else if ret.is_some_and(|p| p.matches(op)) {
                    Some((false, InstrSubType::V7ImpliedRet))
                } else {
                    Some((false, InstrSubType::None))
                }
            }
        }
    }
}

/// Whether `arch` is at least `min` (OpenCSD's `OCSD_IS_ARCH_MINVER`).
#[inline]
fn arch_at_least(arch: ArchVersion, min: ArchVersion) -> bool {
    arch >= min
}

#[cfg(test)]
mod tests;
