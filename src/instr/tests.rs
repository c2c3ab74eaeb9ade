//! Table-driven tests of `ArmInstrDecoder` with real encodings (checked
//! against an assembler), one table per instruction set.

use super::*;
use crate::arch::{ArchProfile, CoreProfile};
use InstrType::{Branch, BranchIndirect as Indirect, DsbDmb, Isb, Other, Tstart, WfiWfe};

/// Expected outputs of one decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Out {
    ty: InstrType,
    sub: InstrSubType,
    target: u64,
    isa: Isa,
    size: u8,
    cond: bool,
    link: bool,
}

impl Out {
    fn of(info: &InstrInfo) -> Out {
        Out {
            ty: info.instr_type,
            sub: info.sub_type,
            target: info.branch_addr,
            isa: info.next_isa,
            size: info.instr_size,
            cond: info.is_conditional,
            link: info.is_link,
        }
    }
}

/// Inputs shared by a table.
#[derive(Clone, Copy)]
struct Setup {
    isa: Isa,
    arch: ArchVersion,
    dsb_dmb: bool,
    wfi_wfe: bool,
}

fn info_for(s: Setup, addr: u64, opcode: u32) -> InstrInfo {
    InstrInfo {
        pe_type: ArchProfile::new(s.arch, CoreProfile::CortexA),
        isa: s.isa,
        instr_addr: addr,
        opcode,
        dsb_dmb_waypoints: s.dsb_dmb,
        wfi_wfe_branch: s.wfi_wfe,
        ..InstrInfo::default()
    }
}

fn decode(s: Setup, addr: u64, opcode: u32) -> (Result<(), ErrCode>, InstrInfo) {
    let mut info = info_for(s, addr, opcode);
    let r = ArmInstrDecoder::new().decode_instruction(&mut info);
    (r, info)
}

/// One row: name, address, opcode, expected outputs.
type Row = (&'static str, u64, u32, Out);

fn check(s: Setup, rows: &[Row]) {
    for &(name, addr, opcode, want) in rows {
        let (r, info) = decode(s, addr, opcode);
        assert_eq!(r, Ok(()), "{name} ({opcode:#010x})");
        assert_eq!(Out::of(&info), want, "{name} ({opcode:#010x})");
        assert_eq!(info.thumb_it_conditions, 0, "{name}");
    }
}

// Compact constructors for expected outputs.

fn other(isa: Isa, size: u8) -> Out {
    Out {
        ty: Other,
        sub: InstrSubType::None,
        target: 0,
        isa,
        size,
        cond: false,
        link: false,
    }
}

fn typed(isa: Isa, size: u8, ty: InstrType) -> Out {
    Out { ty, ..other(isa, size) }
}

fn indirect(isa: Isa, size: u8, sub: InstrSubType) -> Out {
    Out {
        ty: Indirect,
        sub,
        link: sub == InstrSubType::BranchLink,
        ..other(isa, size)
    }
}

fn direct(isa: Isa, size: u8, target: u64) -> Out {
    Out {
        ty: Branch,
        target,
        ..other(isa, size)
    }
}

impl Out {
    fn cond(self) -> Out {
        Out { cond: true, ..self }
    }
    fn link(self) -> Out {
        Out {
            link: true,
            sub: InstrSubType::BranchLink,
            ..self
        }
    }
    fn to(self, isa: Isa) -> Out {
        Out { isa, ..self }
    }
}

use InstrSubType::{BranchLink, V7ImpliedRet, V8Eret, V8Ret};
const NO_SUB: InstrSubType = InstrSubType::None;

// ---------------------------------------------------------------- A64

const A64: Isa = Isa::Aarch64;
const A64_ALL: Setup = Setup {
    isa: A64,
    arch: ArchVersion::Aa64,
    dsb_dmb: true,
    wfi_wfe: true,
};
const X: u64 = 0xffff_8000_0010_0000;

fn a64_other() -> Out {
    other(A64, 4)
}
fn a64_ind(sub: InstrSubType) -> Out {
    indirect(A64, 4, sub)
}
fn a64_br(target: u64) -> Out {
    direct(A64, 4, target)
}

#[test]
fn a64_direct_branches() {
    check(
        A64_ALL,
        &[
            ("b #+0x40", X, 0x1400_0010, a64_br(X + 0x40)),
            ("bl #-0x40", X, 0x97ff_fff0, a64_br(X - 0x40).link()),
            ("b.ne #+0x20", X, 0x5400_0101, a64_br(X + 0x20).cond()),
            ("bc.eq #-8", X, 0x54ff_ffd0, a64_br(X - 8).cond()),
            ("cbz x0, #+0x100", X, 0xb400_0800, a64_br(X + 0x100).cond()),
            ("tbnz w3, #5, #-0x10", X, 0x372f_ff83, a64_br(X - 0x10).cond()),
            (
                "b to the top of the range",
                0x1000,
                0x15ff_ffff,
                a64_br(0x1000 + (1 << 27) - 4),
            ),
            ("b wraps below zero", 0x800, 0x17ff_fc00, a64_br(0xffff_ffff_ffff_f800)),
            // FEAT_CMPBR: direct branches, but not marked conditional.
            ("cbgt x1, x2, #+0x40", X, 0xf402_0201, a64_br(X + 0x40)),
            ("cb<cc> w1, #5, #-8", X, 0x7542_bfc1, a64_br(X - 8)),
            ("cb<cc> x1, #5, #+8", X, 0xf542_8041, a64_br(X + 8)),
            ("cbb<cc> w1, w2, #+0x10", X, 0x7402_8081, a64_br(X + 0x10)),
            ("cbh<cc> w1, w2, #-0x10", X, 0x7402_ff81, a64_br(X - 0x10)),
            ("unallocated 0x74 bits 15:14 = 01", X, 0x7400_4000, a64_other()),
            ("unallocated 0xf4 bits 15:14 = 10", X, 0xf400_8000, a64_other()),
            ("unallocated 0xf5 bit 14 = 1", X, 0xf500_4000, a64_other()),
        ],
    );
}

#[test]
fn a64_indirect_branches() {
    check(
        A64_ALL,
        &[
            ("br x1", X, 0xd61f_0020, a64_ind(NO_SUB)),
            ("blr x2", X, 0xd63f_0040, a64_ind(BranchLink)),
            ("ret", X, 0xd65f_03c0, a64_ind(V8Ret)),
            ("ret x3", X, 0xd65f_0060, a64_ind(V8Ret)),
            ("eret", X, 0xd69f_03e0, a64_ind(V8Eret)),
            ("braa x1, x2", X, 0xd71f_0822, a64_ind(NO_SUB)),
            ("blrab x4, x5", X, 0xd73f_0c85, a64_ind(BranchLink)),
            ("braaz x1", X, 0xd61f_083f, a64_ind(NO_SUB)),
            ("blraaz x3", X, 0xd63f_087f, a64_ind(BranchLink)),
            ("retaa", X, 0xd65f_0bff, a64_ind(V8Ret)),
            ("retab", X, 0xd65f_0fff, a64_ind(V8Ret)),
            ("eretaa", X, 0xd69f_0bff, a64_ind(V8Eret)),
            ("eretab", X, 0xd69f_0fff, a64_ind(V8Eret)),
            ("retaasppc <label>", X, 0x5500_003f, a64_ind(V8Ret)),
            ("retabsppc <label>", X, 0x5520_003f, a64_ind(V8Ret)),
            ("retaasppcr x16", X, 0xd65f_0bf0, a64_ind(V8Ret)),
            ("texit", X, 0xd6ff_03e0, a64_ind(V8Eret)),
            ("texit (alt)", X, 0xd6ff_07e0, a64_ind(V8Eret)),
        ],
    );
}

#[test]
fn a64_barriers_wfx_tstart_and_others() {
    check(
        A64_ALL,
        &[
            ("isb", X, 0xd503_3fdf, typed(A64, 4, Isb)),
            ("dsb sy", X, 0xd503_3f9f, typed(A64, 4, DsbDmb)),
            ("dmb ish", X, 0xd503_3bbf, typed(A64, 4, DsbDmb)),
            ("ssbb (a DSB encoding)", X, 0xd503_309f, typed(A64, 4, DsbDmb)),
            ("sb", X, 0xd503_30ff, a64_other()),
            ("wfi", X, 0xd503_207f, typed(A64, 4, WfiWfe)),
            ("wfe", X, 0xd503_205f, typed(A64, 4, WfiWfe)),
            ("wfit x1", X, 0xd503_1021, typed(A64, 4, WfiWfe)),
            ("wfet x2", X, 0xd503_1002, typed(A64, 4, WfiWfe)),
            ("tstart x0", X, 0xd523_3060, typed(A64, 4, Tstart)),
            ("ttest x1", X, 0xd523_3161, a64_other()),
            ("tcommit", X, 0xd503_307f, a64_other()),
            ("nop", X, 0xd503_201f, a64_other()),
            ("yield", X, 0xd503_203f, a64_other()),
            ("svc #0", X, 0xd400_0001, a64_other()),
            ("add x0, x1, x2", X, 0x8b02_0020, a64_other()),
            ("ldr x0, [x1]", X, 0xf940_0020, a64_other()),
            ("udf #0 (check off)", X, 0x0000_0000, a64_other()),
            ("all ones", X, 0xffff_ffff, a64_other()),
        ],
    );
}

#[test]
fn a64_waypoint_options_off() {
    let s = Setup {
        dsb_dmb: false,
        wfi_wfe: false,
        ..A64_ALL
    };
    check(
        s,
        &[
            ("isb", X, 0xd503_3fdf, typed(A64, 4, Isb)),
            ("dsb sy", X, 0xd503_3f9f, a64_other()),
            ("dmb ish", X, 0xd503_3bbf, a64_other()),
            ("wfi", X, 0xd503_207f, a64_other()),
            ("wfet x2", X, 0xd503_1002, a64_other()),
            ("tstart x0", X, 0xd523_3060, typed(A64, 4, Tstart)),
            ("ret", X, 0xd65f_03c0, a64_ind(V8Ret)),
        ],
    );
}

#[test]
fn a64_architecture_gates() {
    // Armv8.0-8.2: no pointer authentication, WFxT or TME.
    let v8 = Setup {
        arch: ArchVersion::V8,
        ..A64_ALL
    };
    check(
        v8,
        &[
            ("ret", X, 0xd65f_03c0, a64_ind(V8Ret)),
            ("eret", X, 0xd69f_03e0, a64_ind(V8Eret)),
            ("blr x2", X, 0xd63f_0040, a64_ind(BranchLink)),
            ("braa x1, x2", X, 0xd71f_0822, a64_other()),
            ("blraaz x3", X, 0xd63f_087f, a64_other()),
            ("retaa", X, 0xd65f_0bff, a64_other()),
            ("eretaa", X, 0xd69f_0bff, a64_other()),
            ("retaasppc <label>", X, 0x5500_003f, a64_other()),
            ("texit", X, 0xd6ff_03e0, a64_other()),
            ("wfi", X, 0xd503_207f, typed(A64, 4, WfiWfe)),
            ("wfit x1", X, 0xd503_1021, a64_other()),
            ("tstart x0", X, 0xd523_3060, a64_other()),
            // Compare-and-branch is not gated.
            ("cbgt x1, x2, #+0x40", X, 0xf402_0201, a64_br(X + 0x40)),
        ],
    );
    // Armv8.3: pointer authentication, still no WFxT or TME.
    let v8r3 = Setup {
        arch: ArchVersion::V8r3,
        ..A64_ALL
    };
    check(
        v8r3,
        &[
            ("retaa", X, 0xd65f_0bff, a64_ind(V8Ret)),
            ("blraaz x3", X, 0xd63f_087f, a64_ind(BranchLink)),
            ("wfit x1", X, 0xd503_1021, a64_other()),
            ("tstart x0", X, 0xd523_3060, a64_other()),
        ],
    );
}

#[test]
fn a64_opcode_check() {
    let mut dec = ArmInstrDecoder::new();
    assert!(!dec.aa64_opcode_check());
    dec.set_aa64_opcode_check(true);
    assert!(dec.aa64_opcode_check());

    for bad in [0x0000_0000, 0x0000_ffff, 0x0000_1234] {
        let mut info = info_for(A64_ALL, X, bad);
        info.instr_type = Branch;
        info.sub_type = V8Ret;
        info.is_link = true;
        info.instr_size = 2;
        info.next_isa = Isa::Arm;
        info.branch_addr = 0x1234;
        assert_eq!(
            dec.decode_instruction(&mut info),
            Err(ErrCode::InvalidOpcode),
            "{bad:#x}"
        );
        // Reset like any A64 decode before the check; the rest is untouched.
        assert_eq!(info.instr_type, Other);
        assert_eq!(info.sub_type, NO_SUB);
        assert!(!info.is_link);
        assert_eq!(info.instr_size, 4);
        assert_eq!(info.next_isa, A64);
        assert_eq!(info.branch_addr, 0x1234);
    }
    for good in [0x0001_0000, 0xd65f_03c0, 0xffff_0000] {
        let mut info = info_for(A64_ALL, X, good);
        assert_eq!(dec.decode_instruction(&mut info), Ok(()), "{good:#x}");
    }
    // Only A64 is checked.
    for isa in [Isa::Arm, Isa::Thumb2] {
        let mut info = info_for(Setup { isa, ..A64_ALL }, 0x8000, 0);
        assert_eq!(dec.decode_instruction(&mut info), Ok(()));
    }
    dec.set_aa64_opcode_check(false);
    let mut info = info_for(A64_ALL, X, 0);
    assert_eq!(dec.decode_instruction(&mut info), Ok(()));
    assert_eq!(Out::of(&info), a64_other());
}

// ---------------------------------------------------------------- A32

const A32: Isa = Isa::Arm;
const A32_ALL: Setup = Setup {
    isa: A32,
    arch: ArchVersion::V7,
    dsb_dmb: true,
    wfi_wfe: true,
};
const A: u64 = 0x8000;

fn a32_other() -> Out {
    other(A32, 4)
}
fn a32_ind(sub: InstrSubType) -> Out {
    indirect(A32, 4, sub)
}
fn a32_br(target: u64) -> Out {
    direct(A32, 4, target)
}

#[test]
fn a32_direct_branches() {
    check(
        A32_ALL,
        &[
            ("b #+0x100", A, 0xea00_0040, a32_br(A + 8 + 0x100)),
            ("bl #-0x100", A, 0xebff_ffc0, a32_br(A + 8 - 0x100).link()),
            ("bne #+0x40", A, 0x1a00_0010, a32_br(A + 8 + 0x40).cond()),
            ("bleq #0", A, 0x0b00_0000, a32_br(A + 8).cond().link()),
            (
                "blx #+0x100 (H=0)",
                A,
                0xfa00_0040,
                a32_br(A + 8 + 0x100).link().to(Isa::Thumb2),
            ),
            (
                "blx #+0x102 (H=1)",
                A,
                0xfb00_0040,
                a32_br(A + 8 + 0x102).link().to(Isa::Thumb2),
            ),
            (
                "blx #-0x10",
                A,
                0xfaff_fffc,
                a32_br(A + 8 - 0x10).link().to(Isa::Thumb2),
            ),
            // AArch32 addresses are 32 bits: the upper bits are dropped.
            ("b from above 4GB", 0x1_0000_8000, 0xea00_0040, a32_br(A + 8 + 0x100)),
            ("b wraps at 4GB", 0xffff_fff0, 0xea00_0040, a32_br(0xf8)),
        ],
    );
}

#[test]
fn a32_indirect_branches() {
    check(
        A32_ALL,
        &[
            ("bx lr", A, 0xe12f_ff1e, a32_ind(V7ImpliedRet)),
            ("bxne r3", A, 0x112f_ff13, a32_ind(NO_SUB).cond()),
            ("bxeq lr", A, 0x012f_ff1e, a32_ind(V7ImpliedRet).cond()),
            ("blx r2", A, 0xe12f_ff32, a32_ind(BranchLink)),
            ("blx lr", A, 0xe12f_ff3e, a32_ind(BranchLink)),
            ("bxj r1", A, 0xe12f_ff21, a32_ind(NO_SUB)),
            ("pop {r4, pc}", A, 0xe8bd_8010, a32_ind(V7ImpliedRet)),
            ("pop {r4-r11, pc}", A, 0xe8bd_8ff0, a32_ind(V7ImpliedRet)),
            ("ldmia sp!, {sp, pc}", A, 0xe8bd_a000, a32_ind(NO_SUB)),
            ("ldm sp, {pc} (no writeback)", A, 0xe89d_8000, a32_ind(NO_SUB)),
            ("ldm r0, {r1, pc}", A, 0xe890_8002, a32_ind(NO_SUB)),
            ("ldmdb r0, {r1, pc}", A, 0xe910_8002, a32_ind(NO_SUB)),
            ("ldr pc, [sp], #4 (pop {pc})", A, 0xe49d_f004, a32_ind(V7ImpliedRet)),
            ("ldr pc, [sp, #4]", A, 0xe59d_f004, a32_ind(NO_SUB)),
            ("ldr pc, [r0, #8]", A, 0xe590_f008, a32_ind(NO_SUB)),
            ("ldr pc, [r0, r1]", A, 0xe790_f001, a32_ind(NO_SUB)),
            ("mov pc, lr", A, 0xe1a0_f00e, a32_ind(V7ImpliedRet)),
            ("movs pc, lr", A, 0xe1b0_f00e, a32_ind(NO_SUB)),
            ("mov pc, r0", A, 0xe1a0_f000, a32_ind(NO_SUB)),
            ("add pc, pc, r0", A, 0xe08f_f000, a32_ind(NO_SUB)),
            ("add pc, r1, #4", A, 0xe281_f004, a32_ind(NO_SUB)),
            ("subs pc, lr, #4", A, 0xe25e_f004, a32_ind(NO_SUB)),
            ("rfeia r0", A, 0xf890_0a00, a32_ind(NO_SUB)),
            // A register-form compare with the (ignored) Rd field set to PC
            // is counted as a branch; the immediate form is not.
            ("cmp r0, r1 (Rd field = pc)", A, 0xe150_f001, a32_ind(NO_SUB)),
            ("cmp r0, #1 (Rd field = pc)", A, 0xe350_f001, a32_other()),
        ],
    );
}

#[test]
fn a32_barriers_wfx_and_others() {
    check(
        A32_ALL,
        &[
            ("isb sy", A, 0xf57f_f06f, typed(A32, 4, Isb)),
            ("dsb sy", A, 0xf57f_f04f, typed(A32, 4, DsbDmb)),
            ("dmb ish", A, 0xf57f_f05b, typed(A32, 4, DsbDmb)),
            ("clrex", A, 0xf57f_f01f, a32_other()),
            ("mcr p15 dsb", A, 0xee07_0f9a, typed(A32, 4, DsbDmb)),
            ("mcr p15 dmb", A, 0xee07_0fba, typed(A32, 4, DsbDmb)),
            ("mcr p15 isb", A, 0xee07_0f95, typed(A32, 4, Isb)),
            ("mcr p15 icialluis", A, 0xee07_0f11, a32_other()),
            ("wfi", A, 0xe320_f003, typed(A32, 4, WfiWfe)),
            ("wfe", A, 0xe320_f002, typed(A32, 4, WfiWfe)),
            ("wfeeq", A, 0x0320_f002, typed(A32, 4, WfiWfe).cond()),
            ("yield", A, 0xe320_f001, a32_other()),
            ("nop", A, 0xe320_f000, a32_other()),
            ("mov r0, r1", A, 0xe1a0_0001, a32_other()),
            (
                "addeq r0, r1, r2 (any condition counts)",
                A,
                0x0081_0002,
                a32_other().cond(),
            ),
            ("cmp r0, #1", A, 0xe350_0001, a32_other()),
            ("ldr r0, [r1]", A, 0xe591_0000, a32_other()),
            ("pld [r0]", A, 0xf5d0_f000, a32_other()),
            ("udf #0", A, 0xe7f0_00f0, a32_other()),
            ("svc #0", A, 0xef00_0000, a32_other()),
        ],
    );
}

#[test]
fn a32_waypoint_options_off() {
    let s = Setup {
        dsb_dmb: false,
        wfi_wfe: false,
        ..A32_ALL
    };
    check(
        s,
        &[
            ("isb sy", A, 0xf57f_f06f, typed(A32, 4, Isb)),
            ("dsb sy", A, 0xf57f_f04f, a32_other()),
            ("mcr p15 dmb", A, 0xee07_0fba, a32_other()),
            ("wfi", A, 0xe320_f003, a32_other()),
            ("wfeeq", A, 0x0320_f002, a32_other().cond()),
        ],
    );
}

// ---------------------------------------------------------------- T32

const T32: Isa = Isa::Thumb2;
const T32_ALL: Setup = Setup {
    isa: T32,
    arch: ArchVersion::V7,
    dsb_dmb: true,
    wfi_wfe: true,
};
const T: u64 = 0x8000;
/// An address to try the long branches from.
const TF: u64 = 0x0100_0000;

fn t16() -> Out {
    other(T32, 2)
}
fn t32w() -> Out {
    other(T32, 4)
}
fn t_ind(size: u8, sub: InstrSubType) -> Out {
    indirect(T32, size, sub)
}
fn t_br(size: u8, target: u64) -> Out {
    direct(T32, size, target)
}

#[test]
fn t32_direct_branches() {
    check(
        T32_ALL,
        &[
            ("b #-4", T, 0x0000_e7fe, t_br(2, T)),
            ("b #-4, next halfword in the opcode", T, 0xbf00_e7fe, t_br(2, T)),
            ("bne #+20", T, 0x0000_d10a, t_br(2, T + 4 + 20).cond()),
            ("cbz r0, #+20", T, 0x0000_b150, t_br(2, T + 4 + 20).cond()),
            ("cbnz r3, #+126", T, 0x0000_bbfb, t_br(2, T + 4 + 126).cond()),
            ("b.w #+0x1000", T, 0xb800_f001, t_br(4, T + 4 + 0x1000)),
            ("bne.w #-0x100", T, 0xaf80_f47f, t_br(4, T + 4 - 0x100).cond()),
            ("bl #+0x2000", T, 0xf800_f002, t_br(4, T + 4 + 0x2000).link()),
            ("bl #-0x2000", T, 0xf800_f7fe, t_br(4, T + 4 - 0x2000).link()),
            ("bl #+0x800000", TF, 0xd800_f000, t_br(4, TF + 4 + 0x80_0000).link()),
            ("bl #-0x800000", TF, 0xf000_f400, t_br(4, TF + 4 - 0x80_0000).link()),
            ("b.w #+0x400000", TF, 0xb000_f000, t_br(4, TF + 4 + 0x40_0000)),
            ("beq.w #+0x80000", TF, 0x8800_f000, t_br(4, TF + 4 + 0x8_0000).cond()),
            ("beq.w #-0x80000", TF, 0x8800_f400, t_br(4, TF + 4 - 0x8_0000).cond()),
            ("bgt.w #+0x40000", TF, 0xa000_f300, t_br(4, TF + 4 + 0x4_0000).cond()),
            // BLX <label> goes to A32 from Align(PC, 4).
            ("blx #+0x2000", T, 0xe800_f002, t_br(4, T + 4 + 0x2000).link().to(A32)),
            (
                "blx #+0x2000 from a halfword address",
                T + 2,
                0xe800_f002,
                t_br(4, T + 4 + 0x2000).link().to(A32),
            ),
            (
                "blx #+4 from a halfword address",
                TF + 2,
                0xe802_f000,
                t_br(4, TF + 8).link().to(A32),
            ),
            (
                "blx #-0x400000",
                TF + 2,
                0xe800_f400,
                t_br(4, TF + 4 - 0x40_0000).link().to(A32),
            ),
            // Armv8.1-M low-overhead loops: unconditional direct branches.
            ("wls lr, r0, #+0x40", T, 0xc021_f040, t_br(4, T + 4 + 0x40)),
            ("wlstp.8 lr, r0, #+0x40", T, 0xc021_f000, t_br(4, T + 4 + 0x40)),
            ("le lr, #-0x40", T, 0xc021_f00f, t_br(4, T + 4 - 0x40)),
            ("le #-0x20", T, 0xc011_f02f, t_br(4, T + 4 - 0x20)),
            ("letp lr, #-0x40", T, 0xc021_f01f, t_br(4, T + 4 - 0x40)),
            ("dls lr, r0", T, 0xe001_f040, t32w()),
        ],
    );
}

#[test]
fn t32_indirect_branches() {
    check(
        T32_ALL,
        &[
            ("bx lr", T, 0x0000_4770, t_ind(2, V7ImpliedRet)),
            (
                "bx lr, next halfword in the opcode",
                T,
                0xffff_4770,
                t_ind(2, V7ImpliedRet),
            ),
            ("bx r2", T, 0x0000_4710, t_ind(2, NO_SUB)),
            ("blx r3", T, 0x0000_4798, t_ind(2, BranchLink)),
            ("blx lr", T, 0x0000_47f0, t_ind(2, BranchLink)),
            ("pop {r4, pc}", T, 0x0000_bd10, t_ind(2, V7ImpliedRet)),
            ("mov pc, lr", T, 0x0000_46f7, t_ind(2, V7ImpliedRet)),
            ("mov pc, r2", T, 0x0000_4697, t_ind(2, NO_SUB)),
            ("add pc, r1", T, 0x0000_448f, t_ind(2, NO_SUB)),
            ("pop.w {r4-r11, pc}", T, 0x8ff0_e8bd, t_ind(4, V7ImpliedRet)),
            ("ldm.w r0, {r1, pc}", T, 0x8002_e890, t_ind(4, NO_SUB)),
            ("ldmdb r0, {r1, pc}", T, 0x8002_e910, t_ind(4, NO_SUB)),
            ("tbb [r0, r1]", T, 0xf001_e8d0, t_ind(4, NO_SUB)),
            ("tbh [r0, r1, lsl #1]", T, 0xf011_e8d0, t_ind(4, NO_SUB)),
            ("ldr pc, [sp], #4", T, 0xfb04_f85d, t_ind(4, V7ImpliedRet)),
            ("ldr pc, [sp, #-4]!", T, 0xfd04_f85d, t_ind(4, NO_SUB)),
            ("ldr.w pc, [r0, #8]", T, 0xf008_f8d0, t_ind(4, NO_SUB)),
            ("ldr.w pc, [r1, r2]", T, 0xf002_f851, t_ind(4, NO_SUB)),
            ("ldr.w pc, [pc, #16]", T, 0xf010_f8df, t_ind(4, NO_SUB)),
            ("subs pc, lr, #4", T, 0x8f04_f3de, t_ind(4, NO_SUB)),
            ("eret", T, 0x8f00_f3de, t_ind(4, NO_SUB)),
            ("rfeia r0", T, 0xc000_e990, t_ind(4, NO_SUB)),
            ("rfedb r0", T, 0xc000_e810, t_ind(4, NO_SUB)),
            ("bxj r1", T, 0x8f00_f3c1, t_ind(4, NO_SUB)),
        ],
    );
}

#[test]
fn t32_barriers_wfx_and_others() {
    check(
        T32_ALL,
        &[
            ("isb sy", T, 0x8f6f_f3bf, typed(T32, 4, Isb)),
            ("dsb sy", T, 0x8f4f_f3bf, typed(T32, 4, DsbDmb)),
            ("dmb ish", T, 0x8f5b_f3bf, typed(T32, 4, DsbDmb)),
            ("mcr p15 dsb", T, 0x0f9a_ee07, typed(T32, 4, DsbDmb)),
            ("mcr p15 isb", T, 0x0f95_ee07, typed(T32, 4, Isb)),
            ("wfi", T, 0x0000_bf30, typed(T32, 2, WfiWfe)),
            ("wfe", T, 0x0000_bf20, typed(T32, 2, WfiWfe)),
            ("wfi.w", T, 0x8003_f3af, typed(T32, 4, WfiWfe)),
            ("wfe.w", T, 0x8002_f3af, typed(T32, 4, WfiWfe)),
            ("nop", T, 0x0000_bf00, t16()),
            ("nop.w", T, 0x8000_f3af, t32w()),
            ("itte eq (not tracked)", T, 0x0000_bf06, t16()),
            ("mov r0, r1", T, 0x0000_4608, t16()),
            ("add.w r0, r1, r2", T, 0x0002_eb01, t32w()),
            ("udf #0", T, 0x0000_de00, t16()),
            ("svc #0", T, 0x0000_df00, t16()),
            ("udf.w #0", T, 0xa000_f7f0, t32w()),
        ],
    );
}

#[test]
fn t32_waypoint_options_off() {
    let s = Setup {
        dsb_dmb: false,
        wfi_wfe: false,
        ..T32_ALL
    };
    check(
        s,
        &[
            ("isb sy", T, 0x8f6f_f3bf, typed(T32, 4, Isb)),
            ("dsb sy", T, 0x8f4f_f3bf, t32w()),
            ("wfi", T, 0x0000_bf30, t16()),
            ("wfe.w", T, 0x8002_f3af, t32w()),
        ],
    );
}

/// Decodes a T32 sequence with one decoder and IT tracking on; returns
/// `(is_conditional, thumb_it_conditions, instr_type)` per instruction.
fn it_run(dec: &mut ArmInstrDecoder, track: bool, seq: &[(Isa, u32)]) -> Vec<(bool, u8, InstrType)> {
    seq.iter()
        .map(|&(isa, opcode)| {
            let mut info = info_for(Setup { isa, ..T32_ALL }, T, opcode);
            info.track_it_block = track;
            dec.decode_instruction(&mut info).unwrap();
            (info.is_conditional, info.thumb_it_conditions, info.instr_type)
        })
        .collect()
}

#[test]
fn t32_it_block_tracking() {
    let mut dec = ArmInstrDecoder::new();
    // itte eq; mov; b (inside the block); mov; mov (after it)
    let seq = [
        (T32, 0xbf06),
        (T32, 0x4608),
        (T32, 0xe7fe),
        (T32, 0x4608),
        (T32, 0x4608),
    ];
    assert_eq!(
        it_run(&mut dec, true, &seq),
        [
            (false, 3, Other),
            (true, 2, Other),
            (true, 1, Branch),
            (true, 0, Other),
            (false, 0, Other)
        ]
    );

    // itttt gt covers four; an IT inside a block does not open another.
    let seq = [
        (T32, 0xbfc1),
        (T32, 0xbf08),
        (T32, 0x4608),
        (T32, 0x4608),
        (T32, 0x4608),
        (T32, 0x4608),
    ];
    assert_eq!(
        it_run(&mut dec, true, &seq),
        [
            (false, 4, Other),
            (true, 3, Other),
            (true, 2, Other),
            (true, 1, Other),
            (true, 0, Other),
            (false, 0, Other)
        ]
    );

    // Without tracking nothing is counted.
    let seq = [(T32, 0xbf06), (T32, 0x4608)];
    assert_eq!(it_run(&mut dec, false, &seq), [(false, 0, Other), (false, 0, Other)]);
    assert_eq!(dec.it_block_remaining(), 0);

    // Decoding A32 or A64 closes an open block.
    for other_isa in [A32, A64] {
        let seq = [(T32, 0xbf04), (other_isa, 0xe1a0_0001), (T32, 0x4608)];
        let out = it_run(&mut dec, true, &seq);
        assert_eq!(out[0], (false, 2, Other));
        assert_eq!(out[1].1, 0);
        assert_eq!(out[2], (false, 0, Other));
    }

    // So does reset_it_block().
    it_run(&mut dec, true, &[(T32, 0xbf04)]);
    assert_eq!(dec.it_block_remaining(), 2);
    dec.reset_it_block();
    assert_eq!(it_run(&mut dec, true, &[(T32, 0x4608)]), [(false, 0, Other)]);
}

// ---------------------------------------------------------------- general

#[test]
fn unsupported_isas() {
    let mut dec = ArmInstrDecoder::default();
    for isa in [Isa::Tee, Isa::Jazelle, Isa::Custom, Isa::RiscV, Isa::Unknown] {
        let mut info = info_for(Setup { isa, ..A64_ALL }, X, 0xd65f_03c0);
        info.sub_type = V8Ret;
        info.instr_type = Branch;
        assert_eq!(dec.decode_instruction(&mut info), Err(ErrCode::UnsupportedIsa));
        assert_eq!(info.sub_type, NO_SUB);
        assert_eq!(info.instr_type, Branch, "other outputs are left alone");
    }
}

#[test]
fn new_matches_default() {
    let d = ArmInstrDecoder::new();
    assert!(!d.aa64_opcode_check());
    assert_eq!(d.it_block_remaining(), 0);
    assert_eq!(format!("{d:?}"), format!("{:?}", ArmInstrDecoder::default()));
}

/// Every opcode must decode without panicking; sample the whole space in
/// every ISA, architecture and option combination and check invariants.
#[test]
fn strided_sweep_never_panics() {
    let archs = [
        ArchVersion::Unknown,
        ArchVersion::V7,
        ArchVersion::V8,
        ArchVersion::V8r3,
        ArchVersion::Aa64,
    ];
    let mut dec = ArmInstrDecoder::new();
    let ops = (0..=u32::MAX)
        .step_by(65_521)
        .chain([u32::MAX, 0x8000_0000, 0x7fff_ffff]);
    for opcode in ops {
        for isa in [A32, T32, A64] {
            for arch in archs {
                for flags in 0..8u8 {
                    dec.set_aa64_opcode_check(flags & 4 != 0);
                    let s = Setup {
                        isa,
                        arch,
                        dsb_dmb: flags & 1 != 0,
                        wfi_wfe: flags & 2 != 0,
                    };
                    let mut info = info_for(s, 0xffff_ffff_ffff_fffe, opcode);
                    info.track_it_block = true;
                    let r = dec.decode_instruction(&mut info);
                    check_invariants(&info, r);
                }
            }
        }
    }
}

/// Every first halfword of T32, with a few second halfwords.
#[test]
fn t32_first_halfword_sweep() {
    let mut dec = ArmInstrDecoder::new();
    for hw1 in 0..=0xffffu32 {
        for hw2 in [0x0000, 0xffff, 0x8000, 0xc001, 0xf000, 0x5a5a] {
            let mut info = info_for(T32_ALL, 0x8002, hw1 | (hw2 << 16));
            info.track_it_block = hw1 & 1 == 0;
            let r = dec.decode_instruction(&mut info);
            check_invariants(&info, r);
            assert_eq!(info.instr_size == 4, is_wide_thumb(hw1 as u16));
        }
    }
}

fn check_invariants(info: &InstrInfo, r: Result<(), ErrCode>) {
    let op = info.opcode;
    match info.isa {
        Isa::Aarch64 => {
            assert_eq!(r.is_err(), r == Err(ErrCode::InvalidOpcode), "{op:#x}");
            assert_eq!(info.instr_size, 4);
            assert_eq!(info.next_isa, Isa::Aarch64);
            assert_eq!(info.thumb_it_conditions, 0);
        }
        Isa::Arm => {
            assert_eq!(r, Ok(()));
            assert_eq!(info.instr_size, 4);
            assert_eq!(info.thumb_it_conditions, 0);
            if info.next_isa != Isa::Arm {
                assert_eq!(info.instr_type, Branch, "{op:#x}");
                assert_eq!(info.next_isa, Isa::Thumb2);
            }
        }
        Isa::Thumb2 => {
            assert_eq!(r, Ok(()));
            assert!(info.instr_size == 2 || info.instr_size == 4);
            assert!(info.thumb_it_conditions <= 4);
            if info.next_isa != Isa::Thumb2 {
                assert_eq!(info.instr_type, Branch, "{op:#x}");
                assert_eq!(info.next_isa, Isa::Arm);
                assert_eq!(info.branch_addr & 3, 0, "{op:#x}");
            }
        }
        _ => unreachable!(),
    }
    if r.is_ok() {
        if info.instr_type == Branch {
            assert!(info.isa == Isa::Aarch64 || info.branch_addr <= u64::from(u32::MAX));
            assert_eq!(info.branch_addr & 1, 0, "{op:#x}");
        }
        if info.is_link {
            assert_eq!(info.sub_type, BranchLink, "{op:#x}");
            assert!(matches!(info.instr_type, Branch | Indirect), "{op:#x}");
        }
        match info.sub_type {
            V8Ret | V8Eret | V7ImpliedRet => assert_eq!(info.instr_type, Indirect, "{op:#x}"),
            BranchLink => assert!(info.is_link),
            InstrSubType::None => {}
        }
    }
}
