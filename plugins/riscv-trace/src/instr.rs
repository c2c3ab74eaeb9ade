//! RV32/RV64 (+C) instruction classification for program-flow decode: the
//! instruction's length and what it does to the PC.

use crate::config::CoreIsa;

/// What an instruction does to the program flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Execution continues at the next instruction.
    Other,
    /// Conditional branch (`beq`... `bgeu`, `c.beqz`, `c.bnez`) to `target`.
    Branch { target: u64 },
    /// `jal` / `c.j` / `c.jal`: always taken, direct. `link`: a call (rd is
    /// x1 or x5).
    Jal { target: u64, link: bool },
    /// `jalr` / `c.jr` / `c.jalr`: target from a register.
    Jalr { link: bool },
    /// `ecall`, `ebreak`, `c.ebreak`: a trap; the target is the trap vector.
    Trap,
    /// `mret`, `sret`, `uret`, `dret`: return from a trap.
    TrapReturn,
}

impl Flow {
    /// The target comes from outside the instruction (a PC packet).
    pub fn is_indirect(self) -> bool {
        matches!(self, Flow::Jalr { .. } | Flow::Trap | Flow::TrapReturn)
    }
}

/// One classified instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instr {
    /// 2 or 4 bytes.
    pub size: u8,
    pub flow: Flow,
}

/// Why an instruction could not be classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrError {
    /// A 16-bit encoding on a hart without C, or an encoding longer than
    /// 32 bits.
    Unsupported,
}

/// Length in bytes of the instruction whose first halfword is `hw`.
pub fn instr_len(hw: u16) -> usize {
    if hw & 3 != 3 {
        2
    } else if hw & 0x1c != 0x1c {
        4
    } else {
        // 48-bit and longer encodings: not supported.
        0
    }
}

fn sext(v: u64, bits: u32) -> u64 {
    let s = 64 - bits;
    (((v << s) as i64) >> s) as u64
}

fn bits(v: u32, hi: u32, lo: u32) -> u32 {
    (v >> lo) & ((1 << (hi - lo + 1)) - 1)
}

/// Classifies the instruction `opcode` (little-endian, first halfword in
/// bits 15:0) at `pc`.
pub fn classify(isa: CoreIsa, pc: u64, opcode: u32) -> Result<Instr, InstrError> {
    let mask = isa.mask();
    match instr_len(opcode as u16) {
        2 if isa.compressed => Ok(Instr {
            size: 2,
            flow: classify16(isa, pc, opcode as u16, mask),
        }),
        4 => Ok(Instr {
            size: 4,
            flow: classify32(pc, opcode, mask),
        }),
        _ => Err(InstrError::Unsupported),
    }
}

fn classify32(pc: u64, op: u32, mask: u64) -> Flow {
    let rd = bits(op, 11, 7);
    let link = rd == 1 || rd == 5;
    match op & 0x7f {
        0x63 if !matches!(bits(op, 14, 12), 2 | 3) => {
            let imm =
                (bits(op, 31, 31) << 12) | (bits(op, 7, 7) << 11) | (bits(op, 30, 25) << 5) | (bits(op, 11, 8) << 1);
            Flow::Branch {
                target: pc.wrapping_add(sext(imm as u64, 13)) & mask,
            }
        }
        0x6f => {
            let imm = (bits(op, 31, 31) << 20)
                | (bits(op, 19, 12) << 12)
                | (bits(op, 20, 20) << 11)
                | (bits(op, 30, 21) << 1);
            Flow::Jal {
                target: pc.wrapping_add(sext(imm as u64, 21)) & mask,
                link,
            }
        }
        0x67 if bits(op, 14, 12) == 0 => Flow::Jalr { link },
        0x73 => match op {
            0x0000_0073 | 0x0010_0073 => Flow::Trap,
            0x0020_0073 | 0x1020_0073 | 0x3020_0073 | 0x7b20_0073 => Flow::TrapReturn,
            _ => Flow::Other,
        },
        _ => Flow::Other,
    }
}

fn classify16(isa: CoreIsa, pc: u64, h: u16, mask: u64) -> Flow {
    let h = h as u32;
    let funct3 = bits(h, 15, 13);
    let cj_target = || {
        let imm = (bits(h, 12, 12) << 11)
            | (bits(h, 11, 11) << 4)
            | (bits(h, 10, 9) << 8)
            | (bits(h, 8, 8) << 10)
            | (bits(h, 7, 7) << 6)
            | (bits(h, 6, 6) << 7)
            | (bits(h, 5, 3) << 1)
            | (bits(h, 2, 2) << 5);
        pc.wrapping_add(sext(imm as u64, 12)) & mask
    };
    match (h & 3, funct3) {
        (1, 0b101) => Flow::Jal {
            target: cj_target(),
            link: false,
        },
        // c.jal exists only on RV32 (RV64 reuses the encoding for c.addiw).
        (1, 0b001) if isa.xlen == 32 => Flow::Jal {
            target: cj_target(),
            link: true,
        },
        (1, 0b110) | (1, 0b111) => {
            let imm = (bits(h, 12, 12) << 8)
                | (bits(h, 6, 5) << 6)
                | (bits(h, 2, 2) << 5)
                | (bits(h, 11, 10) << 3)
                | (bits(h, 4, 3) << 1);
            Flow::Branch {
                target: pc.wrapping_add(sext(imm as u64, 9)) & mask,
            }
        }
        (2, 0b100) => {
            let rs1 = bits(h, 11, 7);
            let rs2 = bits(h, 6, 2);
            match (bits(h, 12, 12), rs1, rs2) {
                (0, r, 0) if r != 0 => Flow::Jalr { link: false },
                (1, 0, 0) => Flow::Trap,
                (1, _, 0) => Flow::Jalr { link: true },
                _ => Flow::Other,
            }
        }
        _ => Flow::Other,
    }
}

/// Instruction encoders, for tests and trace generators.
pub mod asm {
    fn b_imm(off: i64) -> u32 {
        let o = off as u32;
        (((o >> 12) & 1) << 31) | (((o >> 5) & 0x3f) << 25) | (((o >> 1) & 0xf) << 8) | (((o >> 11) & 1) << 7)
    }
    /// `addi rd, rs1, imm`.
    pub fn addi(rd: u32, rs1: u32, imm: i32) -> u32 {
        ((imm as u32 & 0xfff) << 20) | (rs1 << 15) | (rd << 7) | 0x13
    }
    /// `ld`/`lw`-style load: funct3 selects the width.
    pub fn load(funct3: u32, rd: u32, rs1: u32, imm: i32) -> u32 {
        ((imm as u32 & 0xfff) << 20) | (rs1 << 15) | (funct3 << 12) | (rd << 7) | 0x03
    }
    /// Store: funct3 selects the width.
    pub fn store(funct3: u32, rs2: u32, rs1: u32, imm: i32) -> u32 {
        let i = imm as u32 & 0xfff;
        ((i >> 5) << 25) | (rs2 << 20) | (rs1 << 15) | (funct3 << 12) | ((i & 0x1f) << 7) | 0x23
    }
    /// Conditional branch (`funct3`: 0 beq, 1 bne, 4 blt, 5 bge, 6 bltu,
    /// 7 bgeu) by `off` bytes (even, within ±4 KiB).
    pub fn branch(funct3: u32, rs1: u32, rs2: u32, off: i64) -> u32 {
        b_imm(off) | (rs2 << 20) | (rs1 << 15) | (funct3 << 12) | 0x63
    }
    /// `jal rd, off` (even, within ±1 MiB).
    pub fn jal(rd: u32, off: i64) -> u32 {
        let o = off as u32;
        (((o >> 20) & 1) << 31)
            | (((o >> 1) & 0x3ff) << 21)
            | (((o >> 11) & 1) << 20)
            | (((o >> 12) & 0xff) << 12)
            | (rd << 7)
            | 0x6f
    }
    /// `jalr rd, imm(rs1)`.
    pub fn jalr(rd: u32, rs1: u32, imm: i32) -> u32 {
        ((imm as u32 & 0xfff) << 20) | (rs1 << 15) | (rd << 7) | 0x67
    }
    pub const ECALL: u32 = 0x0000_0073;
    pub const EBREAK: u32 = 0x0010_0073;
    pub const MRET: u32 = 0x3020_0073;
    pub const SRET: u32 = 0x1020_0073;
    pub const C_EBREAK: u16 = 0x9002;
    /// `c.addi rd, imm` (rd ≠ 0, imm in -32..32).
    pub fn c_addi(rd: u32, imm: i32) -> u16 {
        let i = imm as u32 & 0x3f;
        (((i >> 5) << 12) | (rd << 7) | ((i & 0x1f) << 2) | 1) as u16
    }
    fn cj_imm(off: i64) -> u32 {
        let o = off as u32;
        (((o >> 11) & 1) << 12)
            | (((o >> 4) & 1) << 11)
            | (((o >> 8) & 3) << 9)
            | (((o >> 10) & 1) << 8)
            | (((o >> 6) & 1) << 7)
            | (((o >> 7) & 1) << 6)
            | (((o >> 1) & 7) << 3)
            | (((o >> 5) & 1) << 2)
    }
    /// `c.j off` (even, within ±2 KiB).
    pub fn c_j(off: i64) -> u16 {
        ((0b101 << 13) | cj_imm(off) | 1) as u16
    }
    /// `c.jal off` (RV32 only).
    pub fn c_jal(off: i64) -> u16 {
        ((0b001 << 13) | cj_imm(off) | 1) as u16
    }
    /// `c.beqz`/`c.bnez rs1', off` (`rs1p` 0..8 is x8..x15; even, within ±256 B).
    pub fn c_bz(nez: bool, rs1p: u32, off: i64) -> u16 {
        let o = off as u32;
        let f3 = if nez { 0b111 } else { 0b110 };
        ((f3 << 13)
            | (((o >> 8) & 1) << 12)
            | (((o >> 3) & 3) << 10)
            | (rs1p << 7)
            | (((o >> 6) & 3) << 5)
            | (((o >> 1) & 3) << 3)
            | (((o >> 5) & 1) << 2)
            | 1) as u16
    }
    /// `c.jr rs1` (rs1 ≠ 0).
    pub fn c_jr(rs1: u32) -> u16 {
        ((0b100 << 13) | (rs1 << 7) | 2) as u16
    }
    /// `c.jalr rs1` (rs1 ≠ 0).
    pub fn c_jalr(rs1: u32) -> u16 {
        ((0b100 << 13) | (1 << 12) | (rs1 << 7) | 2) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::asm::*;
    use super::*;

    const RV64C: CoreIsa = CoreIsa {
        xlen: 64,
        compressed: true,
    };
    const RV32C: CoreIsa = CoreIsa {
        xlen: 32,
        compressed: true,
    };
    const RV32: CoreIsa = CoreIsa {
        xlen: 32,
        compressed: false,
    };

    fn flow(isa: CoreIsa, pc: u64, op: u32) -> Flow {
        classify(isa, pc, op).unwrap().flow
    }

    #[test]
    fn known_encodings() {
        // Encodings as the GNU assembler writes them.
        assert_eq!(flow(RV64C, 0x1000, 0x00b50463), Flow::Branch { target: 0x1008 }); // beq a0,a1,+8
        assert_eq!(flow(RV64C, 0x1000, 0xfe0718e3), Flow::Branch { target: 0x1000 - 16 }); // bnez a4,-16
        assert_eq!(
            flow(RV64C, 0x1000, 0x008000ef),
            Flow::Jal {
                target: 0x1008,
                link: true
            }
        ); // jal ra,+8
        assert_eq!(flow(RV64C, 0x1000, 0x00008067), Flow::Jalr { link: false }); // ret
        assert_eq!(flow(RV64C, 0x1000, 0x000780e7), Flow::Jalr { link: true }); // jalr a5
        assert_eq!(flow(RV64C, 0x1000, 0x8082), Flow::Jalr { link: false }); // c.ret
        assert_eq!(flow(RV64C, 0x1000, 0x9782), Flow::Jalr { link: true }); // c.jalr a5
        assert_eq!(
            flow(RV64C, 0x1000, 0xa001),
            Flow::Jal {
                target: 0x1000,
                link: false
            }
        ); // c.j .
        assert_eq!(flow(RV64C, 0x1000, 0xc391), Flow::Branch { target: 0x1004 }); // c.beqz a5,+4
        assert_eq!(flow(RV64C, 0x1000, 0x2005), Flow::Other); // c.addiw on RV64
        assert_eq!(
            flow(RV32C, 0x1000, 0x2005),
            Flow::Jal {
                target: 0x1020,
                link: true
            }
        ); // c.jal +0x20
        assert_eq!(flow(RV64C, 0x1000, ECALL), Flow::Trap);
        assert_eq!(flow(RV64C, 0x1000, 0x9002), Flow::Trap); // c.ebreak
        assert_eq!(flow(RV64C, 0x1000, MRET), Flow::TrapReturn);
        assert_eq!(flow(RV64C, 0x1000, 0x10500073), Flow::Other); // wfi
        assert_eq!(classify(RV32, 0x1000, 0x8082), Err(InstrError::Unsupported));
        assert_eq!(flow(RV32, 0xffff_fffc, jal(0, 8)), Flow::Jal { target: 4, link: false });
    }

    #[test]
    fn encoders_round_trip_through_the_classifier() {
        for off in (-4096i64..4096).step_by(2) {
            assert_eq!(
                flow(RV64C, 0x10000, branch(1, 5, 6, off)),
                Flow::Branch {
                    target: (0x10000 + off) as u64
                }
            );
        }
        for off in [-(1i64 << 20), -2, 0, 2, 0x7fe, 0x800, 0xffffe] {
            assert_eq!(
                flow(RV64C, 0x200000, jal(1, off)),
                Flow::Jal {
                    target: (0x200000 + off) as u64,
                    link: true
                }
            );
        }
        for off in (-2048i64..2048).step_by(2) {
            assert_eq!(
                flow(RV64C, 0x10000, c_j(off) as u32),
                Flow::Jal {
                    target: (0x10000 + off) as u64,
                    link: false
                }
            );
            assert_eq!(
                flow(RV32C, 0x10000, c_jal(off) as u32),
                Flow::Jal {
                    target: (0x10000 + off) as u64,
                    link: true
                }
            );
        }
        for off in (-256i64..256).step_by(2) {
            assert_eq!(
                flow(RV64C, 0x10000, c_bz(off & 2 == 0, 3, off) as u32),
                Flow::Branch {
                    target: (0x10000 + off) as u64
                }
            );
        }
        assert_eq!(flow(RV64C, 0, c_jr(1) as u32), Flow::Jalr { link: false });
        assert_eq!(flow(RV64C, 0, c_jalr(7) as u32), Flow::Jalr { link: true });
        assert_eq!(flow(RV64C, 0, c_addi(3, -5) as u32), Flow::Other);
        assert_eq!(flow(RV64C, 0, addi(3, 4, -5)), Flow::Other);
        assert_eq!(flow(RV64C, 0, load(3, 3, 4, -5)), Flow::Other);
        assert_eq!(flow(RV64C, 0, store(2, 3, 4, 100)), Flow::Other);
        assert_eq!(flow(RV64C, 0, jalr(0, 1, 0)), Flow::Jalr { link: false });
        assert_eq!(flow(RV64C, 0, SRET), Flow::TrapReturn);
        assert_eq!(flow(RV64C, 0, EBREAK), Flow::Trap);
    }
}
