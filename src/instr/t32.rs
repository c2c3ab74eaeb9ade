//! T32 classification.
//!
//! Patterns here see an instruction as `hw1 << 16 | hw2`: the first
//! halfword in the high half, as the Arm ARM draws encodings. A 16-bit
//! instruction is in the high half and its patterns never look at the low
//! half (which holds whatever follows it in memory).
//!
//! Only `B<c>` (both encodings) and CBZ/CBNZ count as conditional in
//! themselves; with IT-block tracking on, the decoder also marks every
//! instruction inside an IT block.

use super::{Decoded, IndirectRule, Kind, Pattern, RowFilter, first_match_in, pat, sign_extend};
use crate::arch::{InstrSubType, Isa};

/// Whether `first_halfword` starts a 32-bit T32 instruction (bits 15:11
/// are 0b11101, 0b11110 or 0b11111).
#[inline]
#[must_use]
pub fn is_wide_thumb(first_halfword: u16) -> bool {
    first_halfword & 0xf800 >= 0xe800
}

/// The forms of direct branch, by how their target is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direct {
    /// `B<c> <label>`, 16-bit (T1): imm8.
    CondNarrow,
    /// `B <label>`, 16-bit (T2): imm11.
    Narrow,
    /// `B<c>.W <label>` (T3): S:J2:J1:imm6:imm11.
    CondWide,
    /// `B.W <label>` (T4) and `BL <label>`: S:I1:I2:imm10:imm11; hw2 bit 14 links.
    Wide,
    /// `BLX <label>`: as BL, to A32, from Align(PC, 4).
    BlxImm,
    /// CBZ / CBNZ: i:imm5, forward only.
    CompareZero,
    /// Armv8.1-M LE / LETP: backwards by immh:imml.
    LoopEnd,
    /// Armv8.1-M WLS / WLSTP: forwards by immh:imml.
    LoopStart,
}

/// Direct branches, first match wins (`None`: not a branch, stop).
const DIRECT: &[(Pattern, Option<Direct>)] = &[
    // UDF and SVC share the 16-bit B<c> space (cond = 111x).
    (pat(0xfe00_0000, 0xde00_0000), None),
    (pat(0xf000_0000, 0xd000_0000), Some(Direct::CondNarrow)),
    (pat(0xf800_0000, 0xe000_0000), Some(Direct::Narrow)),
    // cond = 111x in the B<c>.W space is miscellaneous control (MSR, hints, ...).
    (pat(0xfb80_d000, 0xf380_8000), None),
    (pat(0xf800_d000, 0xf000_8000), Some(Direct::CondWide)),
    (pat(0xf800_9000, 0xf000_9000), Some(Direct::Wide)),
    // BLX <label> needs hw2 bit 0 (H) clear.
    (pat(0xf800_d001, 0xf000_c000), Some(Direct::BlxImm)),
    (pat(0xf500_0000, 0xb100_0000), Some(Direct::CompareZero)),
    // LE LR, LETP LR, LE (no LR update).
    (pat(0xffff_f001, 0xf00f_c001), Some(Direct::LoopEnd)),
    (pat(0xffff_f001, 0xf01f_c001), Some(Direct::LoopEnd)),
    (pat(0xffff_f001, 0xf02f_c001), Some(Direct::LoopEnd)),
    // WLS LR, Rn; WLSTP.<size> LR, Rn.
    (pat(0xfff0_f001, 0xf040_c001), Some(Direct::LoopStart)),
    (pat(0xffc0_f001, 0xf000_c001), Some(Direct::LoopStart)),
];

const BRANCH: IndirectRule = IndirectRule::PLAIN;

/// Instructions that write the PC from a register or memory, first match
/// wins.
const INDIRECT: &[(Pattern, IndirectRule)] = &[
    // BX Rm / BLX Rm (and Armv8-M BXNS / BLXNS): bit 7 links; BX LR returns.
    (
        pat(0xff00_0000, 0x4700_0000),
        IndirectRule::Branch {
            link: Some(pat(0x0080_0000, 0x0080_0000)),
            ret: Some(pat(0x0078_0000, 0x0070_0000)),
        },
    ),
    // BXJ Rm (acts as BX).
    (pat(0xfff0_d000, 0xf3c0_8000), BRANCH),
    // POP {..., PC} (16-bit).
    (pat(0xff00_0000, 0xbd00_0000), IndirectRule::RETURN),
    // ADD PC, Rm / MOV PC, Rm (16-bit); MOV PC, LR is a return.
    (
        pat(0xfd87_0000, 0x4487_0000),
        IndirectRule::ret_if(0xffff_0000, 0x46f7_0000),
    ),
    // TBB / TBH.
    (pat(0xfff0_ffe0, 0xe8d0_f000), BRANCH),
    // RFEDB, RFEIA.
    (pat(0xffd0_0000, 0xe810_0000), BRANCH),
    (pat(0xffd0_0000, 0xe990_0000), BRANCH),
    // SUBS PC, LR, #imm8 (ERET included).
    (pat(0xfff0_d000, 0xf3d0_8000), BRANCH),
    // LDR.W PC, [Rn, #imm12].
    (pat(0xfff0_f000, 0xf8d0_f000), BRANCH),
    // LDR.W PC, <label>.
    (pat(0xff7f_f000, 0xf85f_f000), BRANCH),
    // LDR PC, [Rn, #+/-imm8] (indexed forms); LDR PC, [SP], #+imm is a return.
    (
        pat(0xfff0_f800, 0xf850_f800),
        IndirectRule::ret_if(0x000f_0f00, 0x000d_0b00),
    ),
    // LDR.W PC, [Rn, Rm{, LSL #n}].
    (pat(0xfff0_ffc0, 0xf850_f000), BRANCH),
    // LDM.W / LDMDB with the PC in the list; LDMIA SP! (POP.W) is a return.
    (
        pat(0xfe50_8000, 0xe810_8000),
        IndirectRule::ret_if(0x0fff_0000, 0x08bd_0000),
    ),
];

/// DSB / DMB / ISB, option field in bits 3:0 of hw2.
const BARRIER: Pattern = pat(0xffff_ff00, 0xf3bf_8f00);
/// The Armv6 CP15 barrier operations, `MCR p15, 0, Rt, c7, <CRm>, <opc2>`.
const CP15_BARRIER: Pattern = pat(0xffff_0f00, 0xee07_0f00);
/// WFE.W / WFI.W.
const WFI_WFE_WIDE: Pattern = pat(0xffff_fffe, 0xf3af_8002);
/// WFE / WFI (16-bit).
const WFI_WFE_NARROW: Pattern = pat(0xffef_0000, 0xbf20_0000);
/// `IT{x{y{z}}} <firstcond>`: 16-bit, mask (bits 3:0) nonzero.
const IT: Pattern = pat(0xff00_0000, 0xbf00_0000);

/// Target of a direct branch, with bit 0 set when it stays in T32.
fn branch_target(form: Direct, op: u32, addr: u32) -> u32 {
    let hw1 = op >> 16;
    let hw2 = op & 0xffff;
    let pc = addr.wrapping_add(4);
    let bit = |v: u32, n: u32| (v >> n) & 1;
    // S:I1:I2 with I1 = NOT(J1 XOR S), I2 = NOT(J2 XOR S).
    let s_i1_i2 = || {
        let s = bit(hw1, 10);
        (s << 2) | ((1 ^ bit(hw2, 13) ^ s) << 1) | (1 ^ bit(hw2, 11) ^ s)
    };
    let thumb = |offset: i32| pc.wrapping_add_signed(offset) | 1;
    match form {
        Direct::CondNarrow => thumb(sign_extend(hw1 & 0xff, 8) << 1),
        Direct::Narrow => thumb(sign_extend(hw1 & 0x7ff, 11) << 1),
        Direct::CondWide => {
            let imm = (bit(hw1, 10) << 19)
                | (bit(hw2, 11) << 18)
                | (bit(hw2, 13) << 17)
                | ((hw1 & 0x3f) << 11)
                | (hw2 & 0x7ff);
            thumb(sign_extend(imm, 20) << 1)
        }
        Direct::Wide => {
            let imm = (s_i1_i2() << 21) | ((hw1 & 0x3ff) << 11) | (hw2 & 0x7ff);
            thumb(sign_extend(imm, 24) << 1)
        }
        Direct::BlxImm => {
            // imm10H:imm10L:'00', relative to Align(PC, 4); lands in A32.
            let imm = (s_i1_i2() << 21) | ((hw1 & 0x3ff) << 11) | (hw2 & 0x7fe);
            (pc & !3).wrapping_add_signed(sign_extend(imm, 24) << 1)
        }
        Direct::CompareZero => pc.wrapping_add((bit(hw1, 9) << 6) | (((hw1 >> 3) & 0x1f) << 1)) | 1,
        Direct::LoopEnd => pc.wrapping_sub(loop_offset(hw2)) | 1,
        Direct::LoopStart => pc.wrapping_add(loop_offset(hw2)) | 1,
    }
}

/// `immh:imml:'0'` of the Armv8.1-M loop branches (`immh` = hw2 bits
/// 10:1, `imml` = hw2 bit 11).
fn loop_offset(hw2: u32) -> u32 {
    ((hw2 & 0x7fe) << 1) | ((hw2 >> 10) & 2)
}

/// Number of instructions an IT instruction covers (1 to 4), from the
/// position of the lowest set bit of its mask; 0 when `op` is not an IT.
fn it_count(op: u32) -> u8 {
    let mask = (op >> 16) & 0xf;
    if IT.matches(op) && mask != 0 {
        4 - mask.trailing_zeros() as u8
    } else {
        0
    }
}

/// Rows of [`MAY_MATCH`] and [`MAY_MATCH_NARROW`], in the order added:
/// the [`DIRECT`] rows, the [`INDIRECT`] rows, then these.
const ROW_BARRIER: u32 = 1 << (DIRECT.len() + INDIRECT.len());
const ROW_CP15_BARRIER: u32 = ROW_BARRIER << 1;
const ROW_WFI_WFE_WIDE: u32 = ROW_BARRIER << 2;
const ROW_WFI_WFE_NARROW: u32 = ROW_BARRIER << 3;
const ROW_IT: u32 = ROW_BARRIER << 4;
const DIRECT_ROWS: u32 = (1 << DIRECT.len()) - 1;
const INDIRECT_ROWS: u32 = (1 << INDIRECT.len()) - 1;

/// Every row, for the classification by whole tables.
#[cfg(test)]
const ALL_ROWS: u32 = u32::MAX;

const fn all_rows(f: RowFilter) -> RowFilter {
    let f = f
        .add_rows(DIRECT)
        .add_rows(INDIRECT)
        .add(BARRIER)
        .add(CP15_BARRIER)
        .add(WFI_WFE_WIDE)
        .add(WFI_WFE_NARROW)
        .add(IT);
    assert!(1 << (f.added - 1) == ROW_IT, "row bits out of step with the filter");
    f
}

/// The rows (of every table above) each key — hw1 bits 15:8 and hw2
/// bits 15:12 — could match.
const MAY_MATCH: RowFilter = all_rows(RowFilter::with_low(24, 12));

/// The same for 16-bit opcodes, keyed on hw1 bits 15:4: their patterns
/// never look at hw2, and the finer key turns away more of the common
/// instructions that share a top byte with a branch (MOV and ADD of
/// low registers beside MOV PC, NOP beside IT). (The 32-bit rows'
/// keys are all first halfwords of 32-bit opcodes, never looked up here.)
const MAY_MATCH_NARROW: RowFilter = all_rows(RowFilter::with_low(24, 20));

/// Classifies the T32 opcode `opcode` (first halfword in bits 15:0) at
/// `addr`. Also returns how many instructions it would open an IT block
/// for (0 for anything but IT).
#[inline]
pub(super) fn classify(opcode: u32, addr: u64) -> (Decoded, u8) {
    let op = opcode.rotate_left(16);
    let wide = is_wide_thumb((op >> 16) as u16);
    let size = if wide { 4 } else { 2 };
    let filter = if wide { &MAY_MATCH } else { &MAY_MATCH_NARROW };
    let rows = filter.rows(op);
    if rows == 0 {
        return (Decoded::other(size), 0);
    }
    classify_tables(op, addr, size, rows)
}

/// [`classify`] by the tables, `op` with the first halfword in bits 31:16,
/// trying only `rows` (bits as in [`MAY_MATCH`]; the others cannot match).
// Inline: one call site outside tests. Left to LLVM it was inlined or
// not as the crate's codegen units fell (TC2 moved by 0.2 M); the release
// build now has one unit, and the attribute keeps the choice made.
#[inline]
fn classify_tables(op: u32, addr: u64, size: u8, rows: u32) -> (Decoded, u8) {
    let mut d = Decoded::other(size);

    if let Some(form) = first_match_in(DIRECT, op, rows & DIRECT_ROWS).flatten() {
        let npc = branch_target(form, op, addr as u32);
        let isa = (npc & 1 == 0).then_some(Isa::Arm);
        d.kind = Kind::Direct {
            target: u64::from(npc & !1),
            isa,
        };
        d.conditional = matches!(form, Direct::CondNarrow | Direct::CondWide | Direct::CompareZero);
        let links = match form {
            Direct::Wide => op & (1 << 14) != 0,
            Direct::BlxImm => true,
            _ => false,
        };
        if links {
            d.link = true;
            d.sub_type = InstrSubType::BranchLink;
        }
        return (d, 0);
    }

    let indirect = (rows >> DIRECT.len()) & INDIRECT_ROWS;
    if let Some((link, sub_type)) = IndirectRule::lookup_in(INDIRECT, op, indirect) {
        d.kind = Kind::Indirect;
        d.link = link;
        d.sub_type = sub_type;
        return (d, 0);
    }

    let may = |row: u32, p: Pattern| rows & row != 0 && p.matches(op);
    d.kind = if may(ROW_BARRIER, BARRIER) {
        match op & 0xf0 {
            0x40 | 0x50 => Kind::DsbDmb,
            0x60 => Kind::Isb,
            _ => Kind::Other,
        }
    } else if may(ROW_CP15_BARRIER, CP15_BARRIER) {
        match op & 0xff {
            0x9a | 0xba => Kind::DsbDmb, // c7, c10, 4 / c7, c10, 5
            0x95 => Kind::Isb,           // c7, c5, 4
            _ => Kind::Other,
        }
    } else if may(ROW_WFI_WFE_WIDE, WFI_WFE_WIDE) || may(ROW_WFI_WFE_NARROW, WFI_WFE_NARROW) {
        Kind::WfiWfe
    } else {
        Kind::Other
    };
    (d, if rows & ROW_IT != 0 { it_count(op) } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefilter turns away no opcode the tables classify as anything
    /// but a plain instruction: every key, with varied other bits.
    #[test]
    fn prefilter_keeps_every_opcode_a_table_matches() {
        let mut x = 0x1234_5678u32;
        for k in 0..4096u32 {
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let op = (x & !0xff00_f000) | ((k >> 4) << 24) | ((k & 0xf) << 12);
                let size = if is_wide_thumb((op >> 16) as u16) { 4 } else { 2 };
                let full = classify_tables(op, 0x8000, size, ALL_ROWS);
                assert_eq!(classify(op.rotate_left(16), 0x8000), full, "{op:#010x}");
                if MAY_MATCH.rows(op) == 0 {
                    assert_eq!(full, (Decoded::other(size), 0), "{op:#010x}");
                }
            }
        }
    }

    /// The 16-bit prefilter turns away no 16-bit opcode the tables
    /// classify as anything but a plain instruction: every first
    /// halfword, with varied second ones.
    #[test]
    fn narrow_prefilter_keeps_every_opcode_a_table_matches() {
        let mut x = 0x9e37_79b9u32;
        for hw1 in 0..0xe800u32 {
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let op = (hw1 << 16) | (x & 0xffff);
                let full = classify_tables(op, 0x8000, 2, ALL_ROWS);
                assert_eq!(classify(op.rotate_left(16), 0x8000), full, "{op:#010x}");
                if MAY_MATCH_NARROW.rows(op) == 0 {
                    assert_eq!(full, (Decoded::other(2), 0), "{op:#010x}");
                }
            }
        }
    }

    /// 16-bit patterns must only look at the first halfword.
    #[test]
    fn narrow_patterns_ignore_the_second_halfword() {
        let rows = DIRECT.iter().map(|r| r.0).chain(INDIRECT.iter().map(|r| r.0));
        for p in rows.chain([WFI_WFE_NARROW, IT]) {
            let hw1 = (p.value >> 16) as u16;
            if !is_wide_thumb(hw1) {
                assert_eq!(p.mask & 0xffff, 0, "{p:x?}");
            }
        }
    }

    #[test]
    fn it_counts() {
        // it eq / itt eq / itte eq / itttt gt
        assert_eq!(it_count(0xbf08_0000), 1);
        assert_eq!(it_count(0xbf04_0000), 2);
        assert_eq!(it_count(0xbf06_0000), 3);
        assert_eq!(it_count(0xbfc1_0000), 4);
        // nop, wfi
        assert_eq!(it_count(0xbf00_0000), 0);
        assert_eq!(it_count(0xbf30_0000), 0);
    }

    #[test]
    fn wide_first_halfwords() {
        assert!(!is_wide_thumb(0xe7fe));
        assert!(is_wide_thumb(0xe800));
        assert!(is_wide_thumb(0xf000));
        assert!(is_wide_thumb(0xffff));
        assert!(!is_wide_thumb(0x4770));
    }
}
