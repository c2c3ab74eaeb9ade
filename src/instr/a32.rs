//! A32 classification.
//!
//! An A32 instruction counts as a branch when it writes the PC: B/BL/BLX,
//! BX/BXJ, RFE, loads to the PC (LDR, LDM/POP) and data-processing
//! instructions with the PC as destination. Every instruction whose
//! condition field is not AL (or the unconditional NV space) counts as
//! conditional, branch or not.

use super::{Decoded, IndirectRule, Kind, Pattern, RowFilter, pat, sign_extend};
use crate::arch::{InstrSubType, Isa};

const NOT_BRANCH: IndirectRule = IndirectRule::NotBranch;
const BRANCH: IndirectRule = IndirectRule::PLAIN;

/// Instructions that write the PC from a register or memory, first match
/// wins.
const INDIRECT: &[(Pattern, IndirectRule)] = &[
    // Unconditional (NV) space: only RFE loads the PC.
    (pat(0xfe50_0000, 0xf810_0000), BRANCH),
    (pat(0xf000_0000, 0xf000_0000), NOT_BRANCH),
    // BX Rm / BLX Rm: bit 5 links; BX LR is a return.
    (
        pat(0x0ff0_00d0, 0x0120_0010),
        IndirectRule::Branch {
            link: Some(pat(0x0000_0020, 0x0000_0020)),
            ret: Some(pat(0x0000_00ff, 0x0000_001e)),
        },
    ),
    // BXJ Rm (acts as BX).
    (pat(0x0ff0_00f0, 0x0120_0020), BRANCH),
    // LDM/LDMDA/LDMDB/LDMIB with the PC in the list; LDMIA SP! without SP
    // in the list (POP) is a return.
    (
        pat(0x0e10_8000, 0x0810_8000),
        IndirectRule::ret_if(0x0fff_a000, 0x08bd_8000),
    ),
    // LDR PC, [Rn, #imm] (all indexing modes); LDR PC, [SP], #imm is a return.
    (
        pat(0x0e50_f000, 0x0410_f000),
        IndirectRule::ret_if(0x01ff_0000, 0x009d_0000),
    ),
    // LDR PC, [Rn, Rm{, shift}]
    (pat(0x0e50_f010, 0x0610_f000), BRANCH),
    // MOV{S} PC, Rm{, shift}; only plain MOV PC, LR is a return.
    (
        pat(0x0fe0_f000, 0x01a0_f000),
        IndirectRule::ret_if(0x0010_0fff, 0x0000_000e),
    ),
    // Miscellaneous instructions in the data-processing space.
    (pat(0x0f90_0080, 0x0100_0000), NOT_BRANCH),
    // Extra loads and stores.
    (pat(0x0f90_00f0, 0x0180_0090), NOT_BRANCH),
    // MSR (immediate) and hints.
    (pat(0x0fb0_f000, 0x0320_f000), NOT_BRANCH),
    // TST/TEQ/CMP/CMN (immediate) do not write their Rd field.
    (pat(0x0f90_f000, 0x0310_f000), NOT_BRANCH),
    // Data processing (immediate) with Rd = PC.
    (pat(0x0e00_f000, 0x0200_f000), BRANCH),
    // Data processing (register) with bits 15:12 = PC. No compare exclusion
    // here: OpenCSD counts these as branches too.
    (pat(0x0e00_f000, 0x0000_f000), BRANCH),
];

/// `BLX <label>` (NV space); bit 24 is H, the halfword offset.
const BLX_IMM: Pattern = pat(0xfe00_0000, 0xfa00_0000);
/// `B`/`BL <label>` (any condition but NV); bit 24 links.
const B_BL: Pattern = pat(0x0e00_0000, 0x0a00_0000);
const COND_NV: Pattern = pat(0xf000_0000, 0xf000_0000);

/// DSB / DMB / ISB (Armv7+), option field in bits 3:0.
const BARRIER: Pattern = pat(0xfff0_0000, 0xf570_0000);
/// The Armv6 CP15 barrier operations, `MCR p15, 0, Rt, c7, <CRm>, <opc2>`.
const CP15_BARRIER: Pattern = pat(0x0fff_0f00, 0x0e07_0f00);
/// WFE (bit 0 clear) / WFI (bit 0 set), any condition but NV.
const WFI_WFE: Pattern = pat(0x0fff_fffe, 0x0320_f002);

/// Keys (bits 27:20 and 15:12) of every opcode a pattern above could match.
const MAY_MATCH: RowFilter = branch_rows(RowFilter::new(20))
    .add(BLX_IMM)
    .add(B_BL)
    .add(BARRIER)
    .add(CP15_BARRIER)
    .add(WFI_WFE);

/// Adds the keys of the [`INDIRECT`] rows that are branches: a row saying
/// "not a branch" only ever turns an opcode away.
const fn branch_rows(mut f: RowFilter) -> RowFilter {
    let mut i = 0;
    while i < INDIRECT.len() {
        if !matches!(INDIRECT[i].1, IndirectRule::NotBranch) {
            f = f.add(INDIRECT[i].0);
        }
        i += 1;
    }
    f
}

/// Classifies the A32 opcode `op` at `addr`.
#[inline]
pub(super) fn classify(op: u32, addr: u64) -> Decoded {
    if MAY_MATCH.rows(op) == 0 {
        let mut d = Decoded::other(4);
        d.conditional = op >> 29 != 0b111;
        return d;
    }
    classify_tables(op, addr)
}

/// [`classify`] by the tables.
// Inline: one call site outside tests. Left to LLVM it was inlined or
// not as the crate's codegen units fell (TC2 moved by 0.2 M); the release
// build now has one unit, and the attribute keeps the choice made.
#[inline]
fn classify_tables(op: u32, addr: u64) -> Decoded {
    let mut d = Decoded::other(4);
    d.conditional = op >> 29 != 0b111;

    if let Some((link, sub_type)) = IndirectRule::lookup(INDIRECT, op) {
        d.kind = Kind::Indirect;
        d.link = link;
        d.sub_type = sub_type;
        return d;
    }

    let nv = COND_NV.matches(op);
    if (nv && BLX_IMM.matches(op)) || (!nv && B_BL.matches(op)) {
        // Addresses are 32 bits wide in AArch32.
        let offset = sign_extend(op & 0x00ff_ffff, 24) << 2;
        let mut npc = (addr as u32).wrapping_add(8).wrapping_add_signed(offset);
        if nv {
            // BLX <label>: to Thumb, at a halfword offset given by H.
            npc |= 1 | ((op >> 23) & 2);
        }
        let mut isa = None;
        if npc & 1 != 0 {
            isa = Some(Isa::Thumb2);
            npc &= !1;
        }
        d.kind = Kind::Direct {
            target: u64::from(npc),
            isa,
        };
        if nv || op & (1 << 24) != 0 {
            d.link = true;
            d.sub_type = InstrSubType::BranchLink;
        }
        return d;
    }

    d.kind = if BARRIER.matches(op) {
        match op & 0xf0 {
            0x40 | 0x50 => Kind::DsbDmb,
            0x60 => Kind::Isb,
            _ => Kind::Other,
        }
    } else if CP15_BARRIER.matches(op) {
        match op & 0xff {
            0x9a | 0xba => Kind::DsbDmb, // c7, c10, 4 / c7, c10, 5
            0x95 => Kind::Isb,           // c7, c5, 4
            _ => Kind::Other,
        }
    } else if !nv && WFI_WFE.matches(op) {
        Kind::WfiWfe
    } else {
        Kind::Other
    };
    d
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
                let op = (x & !0x0ff0_f000) | ((k >> 4) << 20) | ((k & 0xf) << 12);
                let full = classify_tables(op, 0x8000);
                assert_eq!(classify(op, 0x8000), full, "{op:#010x}");
                if MAY_MATCH.rows(op) == 0 {
                    let mut plain = Decoded::other(4);
                    plain.conditional = op >> 29 != 0b111;
                    assert_eq!(full, plain, "{op:#010x}");
                }
            }
        }
    }
}
