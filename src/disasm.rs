//! Disassembly text for display, through capstone. Used by tools that show
//! decoded trace with its instructions; never on the decode path (the
//! decoders classify instructions with [`crate::instr`]).

use std::fmt::Write as _;

use capstone::prelude::*;

use crate::arch::Isa;

/// Capstone could not be opened for one of the instruction sets (its
/// message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("capstone: {0}")]
pub struct DisasmError(pub String);

/// Disassemblers for A64, A32, T32 and RISC-V (RV32 and RV64, with the C
/// extension; [`Disassembler::set_riscv_xlen`] picks the width, RV64 until
/// told otherwise).
pub struct Disassembler {
    a64: Capstone,
    a32: Capstone,
    t32: Capstone,
    rv32: Capstone,
    rv64: Capstone,
    rv_xlen64: bool,
}

// SAFETY: a capstone handle holds no thread-affine state: Capstone's own
// rule is one handle per thread at a time, which moving it keeps (the
// handles are owned here and never shared; `Disassembler` is not `Sync`).
unsafe impl Send for Disassembler {}

impl Disassembler {
    /// Opens capstone for A64, A32, T32 and RISC-V.
    pub fn new() -> Result<Disassembler, DisasmError> {
        let err = |e: capstone::Error| DisasmError(e.to_string());
        Ok(Disassembler {
            a64: Capstone::new()
                .arm64()
                .mode(arch::arm64::ArchMode::Arm)
                .build()
                .map_err(err)?,
            a32: Capstone::new()
                .arm()
                .mode(arch::arm::ArchMode::Arm)
                .extra_mode([arch::arm::ArchExtraMode::V8].into_iter())
                .build()
                .map_err(err)?,
            t32: Capstone::new()
                .arm()
                .mode(arch::arm::ArchMode::Thumb)
                .extra_mode([arch::arm::ArchExtraMode::V8].into_iter())
                .build()
                .map_err(err)?,
            rv32: Capstone::new()
                .riscv()
                .mode(arch::riscv::ArchMode::RiscV32)
                .extra_mode([arch::riscv::ArchExtraMode::RiscVC].into_iter())
                .build()
                .map_err(err)?,
            rv64: Capstone::new()
                .riscv()
                .mode(arch::riscv::ArchMode::RiscV64)
                .extra_mode([arch::riscv::ArchExtraMode::RiscVC].into_iter())
                .build()
                .map_err(err)?,
            rv_xlen64: true,
        })
    }

    /// The width [`Isa::RiscV`] code is disassembled in: 32 or 64 (the
    /// encodings differ: `c.jal` on RV32 is `c.addiw` on RV64, `c.flw` is
    /// `c.ld`...). Any other value means 64.
    pub fn set_riscv_xlen(&mut self, xlen: u32) {
        self.rv_xlen64 = xlen != 32;
    }

    fn handle(&self, isa: Isa) -> Option<&Capstone> {
        match isa {
            Isa::Aarch64 => Some(&self.a64),
            Isa::Arm => Some(&self.a32),
            Isa::Thumb2 => Some(&self.t32),
            Isa::RiscV if self.rv_xlen64 => Some(&self.rv64),
            Isa::RiscV => Some(&self.rv32),
            _ => None,
        }
    }

    fn first(&self, isa: Isa, addr: u64, code: &[u8]) -> Option<(String, String)> {
        let cs = self.handle(isa)?;
        let insns = cs.disasm_count(code, addr, 1).ok()?;
        let i = insns.iter().next()?;
        Some((
            i.mnemonic().unwrap_or("").to_string(),
            i.op_str().unwrap_or("").to_string(),
        ))
    }

    /// The text of the one instruction at the start of `code`
    /// (`mnemonic operands`), if it disassembles.
    pub fn text(&self, isa: Isa, addr: u64, code: &[u8]) -> Option<String> {
        let (m, ops) = self.first(isa, addr, code)?;
        let m = if m.is_empty() { "?".to_string() } else { m };
        Some(if ops.is_empty() { m } else { format!("{m} {ops}") })
    }

    /// The one instruction at the start of `code` as Tarmac shows it: the
    /// mnemonic padded to 8 columns, then the operands.
    pub fn one(&self, isa: Isa, addr: u64, code: &[u8]) -> Option<String> {
        let (m, ops) = self.first(isa, addr, code)?;
        Some(if ops.is_empty() { m } else { format!("{m:<8} {ops}") })
    }

    /// Appends up to `max` instructions of `code` (at `addr`, in `isa`),
    /// one a line: `    0xADDR  mnemonic operands`. Bytes that do not
    /// disassemble end the listing with a `(not decodable)` line.
    pub fn write(&self, isa: Isa, addr: u64, code: &[u8], max: usize, out: &mut String) {
        let Some(cs) = self.handle(isa) else {
            let _ = writeln!(out, "    ({isa}: no disassembler)");
            return;
        };
        let Ok(insns) = cs.disasm_count(code, addr, max) else {
            let _ = writeln!(out, "    0x{addr:x}  (not decodable)");
            return;
        };
        let mut end = addr;
        for i in insns.iter() {
            let _ = write!(out, "    0x{:x}  {}", i.address(), i.mnemonic().unwrap_or("?"));
            match i.op_str() {
                Some(ops) if !ops.is_empty() => {
                    let _ = writeln!(out, " {ops}");
                }
                _ => out.push('\n'),
            }
            end = i.address() + i.bytes().len() as u64;
        }
        if insns.len() < max && end < addr + code.len() as u64 {
            let _ = writeln!(out, "    0x{end:x}  (not decodable)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disassembles_each_instruction_set() {
        let d = Disassembler::new().unwrap();
        let mut s = String::new();
        let a64: Vec<u8> = [0xd503201fu32, 0xd65f03c0]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        d.write(Isa::Aarch64, 0x1000, &a64, 8, &mut s);
        assert_eq!(s, "    0x1000  nop\n    0x1004  ret\n");
        s.clear();
        d.write(Isa::Arm, 0x2000, &0xe12fff1eu32.to_le_bytes(), 8, &mut s);
        assert_eq!(s, "    0x2000  bx lr\n");
        s.clear();
        d.write(Isa::Thumb2, 0x3000, &[0x70, 0x47], 8, &mut s);
        assert_eq!(s, "    0x3000  bx lr\n");
        s.clear();
        d.write(Isa::Aarch64, 0x1000, &[0xff, 0xff, 0xff, 0xff], 8, &mut s);
        assert!(s.contains("(not decodable)"), "{s}");
    }

    #[test]
    fn disassembles_riscv_at_either_width() {
        let mut d = Disassembler::new().unwrap();
        // beq a0,a1,+8; c.ret; then 0x2085: c.addiw on RV64, c.jal on RV32.
        assert_eq!(
            d.text(Isa::RiscV, 0x1000, &0x00b50463u32.to_le_bytes()).as_deref(),
            Some("beq a0, a1, 8")
        );
        assert_eq!(d.text(Isa::RiscV, 0x1000, &[0x82, 0x80]).as_deref(), Some("c.jr ra"));
        assert_eq!(
            d.text(Isa::RiscV, 0x1000, &[0x85, 0x20]).as_deref(),
            Some("c.addiw ra, 1")
        );
        d.set_riscv_xlen(32);
        assert_eq!(d.text(Isa::RiscV, 0x1000, &[0x85, 0x20]).as_deref(), Some("c.jal 0x60"));
    }
}
