//! A64 classification.
//!
//! Every instruction this module cares about lives in the "branches,
//! exception generating and system instructions" group (op0 bits 28:26 =
//! 0b101), so anything else is classified as `Other` straight away.

use super::{Decoded, Kind, Pattern, arch_at_least, first_match, pat, sign_extend};
use crate::arch::{ArchVersion, InstrSubType};

/// Bits 28:26 of an opcode, and their value for the branch/system group.
const GROUP_MASK: u32 = 0x1c00_0000;
const GROUP_BRANCH_SYS: u32 = 0x1400_0000;

/// An indirect branch row: the sub-type it reports, whether bit 21 selects
/// the linking form, and the architecture that introduced it.
#[derive(Clone, Copy, Debug)]
struct Indirect {
    sub_type: InstrSubType,
    link_bit21: bool,
    min_arch: ArchVersion,
}

const fn ind(sub_type: InstrSubType, link_bit21: bool, min_arch: ArchVersion) -> Indirect {
    Indirect {
        sub_type,
        link_bit21,
        min_arch,
    }
}

use ArchVersion::{Unknown as ANY, V8r3};
use InstrSubType::{None as NONE, V8Eret as ERET, V8Ret as RET};

/// Indirect branches, first match wins. The rows are disjoint, so a row
/// that needs a later architecture can simply stop the search.
const INDIRECT: &[(Pattern, Indirect)] = &[
    // BR Xn / BLR Xn
    (pat(0xffdf_fc1f, 0xd61f_0000), ind(NONE, true, ANY)),
    // RET {Xn}
    (pat(0xffff_fc1f, 0xd65f_0000), ind(RET, false, ANY)),
    // ERET
    (pat(0xffff_ffff, 0xd69f_03e0), ind(ERET, false, ANY)),
    // Armv8.3 pointer authentication: BRAA/BRAB/BLRAA/BLRAB Xn, Xm|SP
    (pat(0xffdf_f800, 0xd71f_0800), ind(NONE, true, V8r3)),
    // BRAAZ/BRABZ/BLRAAZ/BLRABZ Xn
    (pat(0xffdf_f81f, 0xd61f_081f), ind(NONE, true, V8r3)),
    // ERETAA/ERETAB
    (pat(0xffff_fbff, 0xd69f_0bff), ind(ERET, false, V8r3)),
    // RETAA/RETAB
    (pat(0xffff_fbff, 0xd65f_0bff), ind(RET, false, V8r3)),
    // FEAT_PAuth_LR RETAASPPC/RETABSPPC <label>
    (pat(0xffc0_001f, 0x5500_001f), ind(RET, false, V8r3)),
    // FEAT_PAuth_LR RETAASPPCR/RETABSPPCR Xm (Xm = 31 is RETAA/RETAB, above)
    (pat(0xffff_fbe0, 0xd65f_0be0), ind(RET, false, V8r3)),
    // TEXIT (treated as an exception return)
    (pat(0xffff_fbff, 0xd6ff_03e0), ind(ERET, false, V8r3)),
];

/// Where a direct branch keeps its word offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Offset {
    /// imm26, bits 25:0 (B, BL).
    Imm26,
    /// imm19, bits 23:5 (B.cond, BC.cond, CBZ, CBNZ).
    Imm19,
    /// imm14, bits 18:5 (TBZ, TBNZ).
    Imm14,
    /// imm9, bits 13:5 (FEAT_CMPBR compare-and-branch).
    Imm9,
}

#[derive(Clone, Copy, Debug)]
struct Direct {
    offset: Offset,
    /// Counts as conditional. The FEAT_CMPBR forms do not: OpenCSD only
    /// marks B.cond/BC.cond, CBZ/CBNZ and TBZ/TBNZ.
    conditional: bool,
    /// Bit 31 selects the linking form (B / BL).
    link_bit31: bool,
}

const fn dir(offset: Offset, conditional: bool, link_bit31: bool) -> Direct {
    Direct {
        offset,
        conditional,
        link_bit31,
    }
}

/// Direct branches, first match wins.
const DIRECT: &[(Pattern, Direct)] = &[
    // CBZ / CBNZ
    (pat(0x7e00_0000, 0x3400_0000), dir(Offset::Imm19, true, false)),
    // TBZ / TBNZ
    (pat(0x7e00_0000, 0x3600_0000), dir(Offset::Imm14, true, false)),
    // B.cond, and BC.cond (bit 4 set, FEAT_HBC)
    (pat(0xff00_0000, 0x5400_0000), dir(Offset::Imm19, true, false)),
    // B / BL
    (pat(0x7c00_0000, 0x1400_0000), dir(Offset::Imm26, false, true)),
    // FEAT_CMPBR: CB<cc> Wt, Wm (bits 15:14 = 00), CBB<cc> (10), CBH<cc> (11)
    (pat(0xff00_c000, 0x7400_0000), dir(Offset::Imm9, false, false)),
    (pat(0xff00_c000, 0x7400_8000), dir(Offset::Imm9, false, false)),
    (pat(0xff00_c000, 0x7400_c000), dir(Offset::Imm9, false, false)),
    // CB<cc> Xt, Xm
    (pat(0xff00_c000, 0xf400_0000), dir(Offset::Imm9, false, false)),
    // CB<cc> Wt|Xt, #imm6 (bit 14 = 0)
    (pat(0x7f00_4000, 0x7500_0000), dir(Offset::Imm9, false, false)),
];

/// DSB / DMB / ISB (CRm any; op2 = 100, 101, 110). op2 = 111 (SB) is not
/// a barrier here.
const BARRIER: Pattern = pat(0xffff_f09f, 0xd503_309f);
/// WFE (op2 = 010) and WFI (op2 = 011).
const WFI_WFE: Pattern = pat(0xffff_ffdf, 0xd503_205f);
/// WFET Xt / WFIT Xt (FEAT_WFxT).
const WFIT_WFET: Pattern = pat(0xffff_ffc0, 0xd503_1000);
/// TSTART Xt (FEAT_TME).
const TSTART: Pattern = pat(0xffff_ffe0, 0xd523_3060);

/// Byte offset of a direct branch of the given form.
fn branch_offset(op: u32, offset: Offset) -> i64 {
    let words = match offset {
        Offset::Imm26 => sign_extend(op & 0x03ff_ffff, 26),
        Offset::Imm19 => sign_extend((op >> 5) & 0x7_ffff, 19),
        Offset::Imm14 => sign_extend((op >> 5) & 0x3fff, 14),
        Offset::Imm9 => sign_extend((op >> 5) & 0x1ff, 9),
    };
    i64::from(words) * 4
}

/// Classifies the A64 opcode `op` at `addr` for a PE of architecture `arch`.
pub(super) fn classify(op: u32, addr: u64, arch: ArchVersion) -> Decoded {
    let mut d = Decoded::other(4);
    if op & GROUP_MASK != GROUP_BRANCH_SYS {
        return d;
    }

    if let Some(row) = first_match(INDIRECT, op) {
        if arch_at_least(arch, row.min_arch) {
            d.kind = Kind::Indirect;
            d.sub_type = row.sub_type;
            if row.link_bit21 && op & (1 << 21) != 0 {
                d.link = true;
                d.sub_type = InstrSubType::BranchLink;
            }
        }
        return d;
    }

    if let Some(row) = first_match(DIRECT, op) {
        let target = addr.wrapping_add_signed(branch_offset(op, row.offset));
        d.kind = Kind::Direct { target, isa: None };
        d.conditional = row.conditional;
        if row.link_bit31 && op & (1 << 31) != 0 {
            d.link = true;
            d.sub_type = InstrSubType::BranchLink;
        }
        return d;
    }

    d.kind = if BARRIER.matches(op) {
        match op & 0x60 {
            0x00 | 0x20 => Kind::DsbDmb,
            0x40 => Kind::Isb,
            _ => Kind::Other,
        }
    } else if WFI_WFE.matches(op) || (arch_at_least(arch, ArchVersion::Aa64) && WFIT_WFET.matches(op)) {
        Kind::WfiWfe
    } else if arch_at_least(arch, ArchVersion::Aa64) && TSTART.matches(op) {
        Kind::Tstart
    } else {
        Kind::Other
    };
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The group fast path is only exact if every pattern pins bits 28:26
    /// to the branch/system group.
    #[test]
    fn every_pattern_is_in_the_branch_system_group() {
        let all = INDIRECT
            .iter()
            .map(|r| r.0)
            .chain(DIRECT.iter().map(|r| r.0))
            .chain([BARRIER, WFI_WFE, WFIT_WFET, TSTART]);
        for p in all {
            assert_eq!(p.mask & GROUP_MASK, GROUP_MASK, "{p:x?}");
            assert_eq!(p.value & GROUP_MASK, GROUP_BRANCH_SYS, "{p:x?}");
        }
    }

    #[test]
    fn offsets() {
        // b #0x40, bl #-0x40
        assert_eq!(branch_offset(0x1400_0010, Offset::Imm26), 0x40);
        assert_eq!(branch_offset(0x97ff_fff0, Offset::Imm26), -0x40);
        // largest forward / backward B
        assert_eq!(branch_offset(0x15ff_ffff, Offset::Imm26), (1 << 27) - 4);
        assert_eq!(branch_offset(0x1600_0000, Offset::Imm26), -(1 << 27));
        // tbnz w3, #5, #-16
        assert_eq!(branch_offset(0x372f_ff83, Offset::Imm14), -16);
        // cb<cc> with imm9 = -2
        assert_eq!(branch_offset(0x7542_bfc1, Offset::Imm9), -8);
    }
}
