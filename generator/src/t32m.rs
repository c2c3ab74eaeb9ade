//! Random T32 programs for M-profile cores (Armv8-M, Armv8.1-M).
//!
//! Blocks of 16- and 32-bit straight-line instructions (with the odd IT
//! block, load, store and SVC) ending in a branch: B and `B<c>` (narrow and
//! wide), CBZ/CBNZ, BL, BX/BLX through a register, returns as BX LR or
//! POP {..., pc}, and on Armv8.1-M the low-overhead loop branches LE
//! (backwards) and WLS (forwards). Exception handlers end in an exception
//! return (BX LR or POP {pc} with an EXC_RETURN value). Each branch gets an
//! encoding first, so blocks can be laid out, then a target the encoding
//! can reach.

use super::Rng;
use super::flow::{self, Block, Instr, Kind, Program, Term};

/// Encoding of a terminating branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    BNarrow,
    BWide,
    CondNarrow,
    CondWide,
    Cbz,
    Le,
    Wls,
    Bl,
    BxReg,
    BlxReg,
    BxLr,
    PopPc,
}

impl Form {
    fn size(self) -> u8 {
        match self {
            Form::BWide | Form::CondWide | Form::Le | Form::Wls | Form::Bl => 4,
            _ => 2,
        }
    }

    /// Whether the encoding reaches `target` from a branch at `at`.
    fn reaches(self, at: u64, target: u64) -> bool {
        let off = target as i64 - (at as i64 + 4);
        match self {
            Form::BNarrow => (-2048..=2046).contains(&off),
            Form::CondNarrow => (-256..=254).contains(&off),
            Form::Cbz => (0..=126).contains(&off),
            Form::Le => (-4094..=0).contains(&off),
            Form::Wls => (0..=4094).contains(&off),
            Form::BWide | Form::Bl => (-(1 << 24)..(1 << 24)).contains(&off),
            Form::CondWide => (-(1 << 20)..(1 << 20)).contains(&off),
            _ => true,
        }
    }

    /// A same-size encoding that always reaches something.
    fn fallback(self) -> Form {
        match self {
            Form::Cbz => Form::CondNarrow,
            Form::Le | Form::Wls => Form::CondWide,
            f => f,
        }
    }
}

/// R0-R12.
fn reg(rng: &mut Rng) -> u16 {
    rng.below(13) as u16
}

/// R0-R7 (16-bit encodings).
fn r3(rng: &mut Rng) -> u16 {
    rng.below(8) as u16
}

/// Halfwords of one straight-line instruction of `kind` and `size`.
fn body_instr(rng: &mut Rng, kind: Kind, size: u8) -> Vec<u16> {
    match (kind, size) {
        (Kind::Svc, _) => vec![0xdf00 | rng.below(256) as u16],
        (Kind::Mem, 2) => {
            let (t, n, imm) = (r3(rng), r3(rng), rng.below(32) as u16);
            vec![if rng.chance(1, 2) { 0x6800 } else { 0x6000 } | imm << 6 | n << 3 | t]
        }
        (Kind::Mem, _) => {
            let (t, n, imm) = (reg(rng), reg(rng), rng.below(4096) as u16);
            vec![if rng.chance(1, 2) { 0xf8d0 } else { 0xf8c0 } | n, t << 12 | imm]
        }
        (Kind::Plain, 2) => {
            let (d, n, m) = (r3(rng), r3(rng), r3(rng));
            let imm8 = rng.below(256) as u16;
            vec![match rng.below(5) {
                0 => 0x2000 | d << 8 | imm8,                           // MOVS Rd, #imm8
                1 => 0x1c00 | (rng.below(8) as u16) << 6 | n << 3 | d, // ADDS Rd, Rn, #imm3
                2 => 0x2800 | n << 8 | imm8,                           // CMP Rn, #imm8
                3 => 0x1800 | m << 6 | n << 3 | d,                     // ADDS Rd, Rn, Rm
                _ => 0xbf00,                                           // NOP
            }]
        }
        (Kind::Plain, _) => {
            let (d, n) = (reg(rng), reg(rng));
            let (i, imm3, imm8) = (rng.below(2) as u16, rng.below(8) as u16, rng.below(256) as u16);
            if rng.chance(1, 2) {
                vec![0xf240 | i << 10 | rng.below(16) as u16, imm3 << 12 | d << 8 | imm8] // MOVW Rd, #imm16
            } else {
                vec![0xf200 | i << 10 | n, imm3 << 12 | d << 8 | imm8] // ADDW Rd, Rn, #imm12
            }
        }
        // Armv9 A64 instructions: not in M-profile programs.
        (_, size) => body_instr(rng, Kind::Plain, size),
    }
}

/// A random body: instructions with their halfwords.
fn body(rng: &mut Rng, len: usize, svc: bool) -> (Vec<Instr>, Vec<u16>) {
    let mut ins = Vec::with_capacity(len);
    let mut hw = Vec::new();
    let push = |rng: &mut Rng, ins: &mut Vec<Instr>, hw: &mut Vec<u16>, kind: Kind| {
        let size = if kind == Kind::Svc || rng.chance(1, 2) { 2 } else { 4 };
        ins.push(Instr { size, kind });
        hw.extend(body_instr(rng, kind, size));
    };
    while ins.len() < len {
        let left = len - ins.len();
        match rng.below(24) {
            0 if svc => push(rng, &mut ins, &mut hw, Kind::Svc),
            1 if left >= 2 => {
                // IT block of 1 to 4 instructions, all "then".
                let k = 1 + rng.below(4.min(left as u64 - 1)) as usize;
                let cond = rng.below(14) as u16;
                let c = cond & 1;
                let mut mask = 1u16 << (4 - k);
                for j in 0..k - 1 {
                    mask |= c << (3 - j);
                }
                ins.push(Instr {
                    size: 2,
                    kind: Kind::Plain,
                });
                hw.push(0xbf00 | cond << 4 | mask);
                for _ in 0..k {
                    let kind = if rng.chance(1, 4) { Kind::Mem } else { Kind::Plain };
                    push(rng, &mut ins, &mut hw, kind);
                }
            }
            2..=6 => push(rng, &mut ins, &mut hw, Kind::Mem),
            _ => push(rng, &mut ins, &mut hw, Kind::Plain),
        }
    }
    (ins, hw)
}

fn form_for(rng: &mut Rng, term: Term, lob: bool) -> Form {
    match term {
        Term::B(_) => {
            if rng.chance(1, 2) {
                Form::BNarrow
            } else {
                Form::BWide
            }
        }
        Term::Cond(_) => match rng.below(if lob { 7 } else { 5 }) {
            0 | 1 => Form::CondNarrow,
            2 => Form::CondWide,
            3 | 4 => Form::Cbz,
            5 => Form::Le,
            _ => Form::Wls,
        },
        Term::Bl(_) => Form::Bl,
        Term::Br => Form::BxReg,
        Term::Blr => Form::BlxReg,
        Term::Ret | Term::ExcRet => {
            if rng.chance(3, 4) {
                Form::BxLr
            } else {
                Form::PopPc
            }
        }
    }
}

/// Halfwords of a branch of `form` at `at` to `target`.
fn encode(rng: &mut Rng, form: Form, at: u64, target: u64) -> Vec<u16> {
    let off = (target as i64 - (at as i64 + 4)) as i32;
    let cond = rng.below(14) as u16;
    match form {
        Form::BNarrow => vec![0xe000 | ((off >> 1) & 0x7ff) as u16],
        Form::CondNarrow => vec![0xd000 | cond << 8 | ((off >> 1) & 0xff) as u16],
        Form::Cbz => {
            let o = off as u16;
            vec![
                0xb100
                    | (rng.below(2) as u16) << 11
                    | ((o >> 6) & 1) << 9
                    | ((o >> 1) & 0x1f) << 3
                    | rng.below(8) as u16,
            ]
        }
        Form::CondWide => {
            let imm = (off >> 1) as u32;
            let (s, j2, j1) = ((imm >> 19) & 1, (imm >> 18) & 1, (imm >> 17) & 1);
            let hw1 = 0xf000 | s << 10 | (cond as u32) << 6 | ((imm >> 11) & 0x3f);
            let hw2 = 0x8000 | j1 << 13 | j2 << 11 | (imm & 0x7ff);
            vec![hw1 as u16, hw2 as u16]
        }
        Form::BWide | Form::Bl => {
            let imm = (off >> 1) as u32;
            let s = (imm >> 23) & 1;
            let (i1, i2) = ((imm >> 22) & 1, (imm >> 21) & 1);
            let (j1, j2) = (1 ^ i1 ^ s, 1 ^ i2 ^ s);
            let hw1 = 0xf000 | s << 10 | ((imm >> 11) & 0x3ff);
            let base = if form == Form::Bl { 0xd000 } else { 0x9000 };
            let hw2 = base | j1 << 13 | j2 << 11 | (imm & 0x7ff);
            vec![hw1 as u16, hw2 as u16]
        }
        Form::Le | Form::Wls => {
            let o = off.unsigned_abs() as u16;
            let hw2 = 0xc001 | ((o >> 2) & 0x3ff) << 1 | ((o >> 1) & 1) << 11;
            let hw1 = if form == Form::Le { 0xf00f } else { 0xf040 | reg(rng) };
            vec![hw1, hw2]
        }
        Form::BxReg => vec![0x4700 | reg(rng) << 3],
        Form::BlxReg => vec![0x4780 | reg(rng) << 3],
        Form::BxLr => vec![0x4770],
        Form::PopPc => vec![0xbd00 | rng.below(256) as u16],
    }
}

/// Lays out, targets and encodes a run of blocks starting at `base`.
/// `forward`: targets only ever lie ahead (exception handlers).
#[allow(clippy::too_many_arguments)]
fn place(
    rng: &mut Rng,
    blocks: &mut Vec<Block>,
    base: u64,
    terms: Vec<Term>,
    bodies: Vec<(Vec<Instr>, Vec<u16>)>,
    lob: bool,
    forward: bool,
) -> (u64, Vec<u8>) {
    let first = blocks.len();
    let mut forms = Vec::with_capacity(terms.len());
    let mut addr = base;
    for (term, (ins, _)) in terms.iter().zip(&bodies) {
        let mut form = form_for(rng, *term, lob);
        if forward && form == Form::Le {
            form = Form::CondWide;
        }
        let b = Block {
            addr,
            body: ins.clone(),
            term: *term,
            term_size: form.size(),
        };
        addr = b.end();
        blocks.push(b);
        forms.push(form);
    }
    let range = first..blocks.len();
    let mut code = Vec::new();
    for (i, g) in range.clone().enumerate() {
        let at = blocks[g].term_addr();
        let mut form = forms[i];
        let has_target = matches!(blocks[g].term, Term::B(_) | Term::Bl(_) | Term::Cond(_));
        let mut target_addr = 0;
        if has_target {
            let pool: Vec<usize> = if forward {
                (g + 1..range.end).collect()
            } else {
                range.clone().collect()
            };
            let fits = |f: Form| -> Vec<usize> {
                let mut v: Vec<usize> = pool
                    .iter()
                    .copied()
                    .filter(|&t| f.reaches(at, blocks[t].addr))
                    .collect();
                if v.len() > 1 && matches!(blocks[g].term, Term::B(_)) {
                    v.retain(|&t| t != g);
                }
                v
            };
            let mut cands = fits(form);
            if cands.is_empty() {
                form = form.fallback();
                cands = fits(form);
            }
            let t = cands[rng.below(cands.len() as u64) as usize];
            target_addr = blocks[t].addr;
            blocks[g].term = match blocks[g].term {
                Term::B(_) => Term::B(t),
                Term::Bl(_) => Term::Bl(t),
                _ => Term::Cond(t),
            };
        }
        for h in &bodies[i].1 {
            code.extend(h.to_le_bytes());
        }
        for h in encode(rng, form, at, target_addr) {
            code.extend(h.to_le_bytes());
        }
    }
    // Padding, so that a 16-bit instruction at the very end can be read as
    // a word.
    code.extend(0xbf00u16.to_le_bytes());
    (base, code)
}

/// A random T32 program for [`flow::walk`]: about `n_blocks` main blocks
/// at `base` and, with `handler_base`, exception handlers there. `svc`:
/// the main program makes supervisor calls; `lob`: Armv8.1-M loop
/// branches are used.
pub fn flow_program(
    rng: &mut Rng,
    base: u64,
    n_blocks: usize,
    handler_base: Option<u64>,
    svc: bool,
    lob: bool,
) -> Program {
    let n = n_blocks.max(2);
    let mut terms = Vec::with_capacity(n);
    let mut bodies = Vec::with_capacity(n);
    for i in 0..n {
        let term = if i == n - 1 {
            if rng.chance(1, 2) { Term::B(0) } else { Term::Br }
        } else {
            match rng.below(20) {
                0..=6 => Term::Cond(0),
                7..=9 => Term::B(0),
                10..=12 => Term::Bl(0),
                13..=14 => Term::Br,
                15 => Term::Blr,
                _ => Term::Ret,
            }
        };
        terms.push(term);
        let len = rng.below(8) as usize;
        bodies.push(body(rng, len, svc));
    }
    let mut blocks = Vec::new();
    let mut images = vec![place(rng, &mut blocks, base, terms, bodies, lob, false)];
    let main = 0..n;
    let mut handlers = n..n;
    let mut entries = Vec::new();
    if let Some(hbase) = handler_base {
        let m = 3 + rng.below(6) as usize;
        let mut terms = Vec::with_capacity(m);
        let mut bodies = Vec::with_capacity(m);
        for i in 0..m {
            terms.push(if i == m - 1 {
                Term::ExcRet
            } else {
                match rng.below(10) {
                    0..=4 => Term::Cond(0),
                    5..=6 => Term::B(0),
                    7 => Term::Br,
                    _ => Term::ExcRet,
                }
            });
            let len = rng.below(6) as usize;
            bodies.push(body(rng, len, false));
        }
        images.push(place(rng, &mut blocks, hbase, terms, bodies, lob, true));
        handlers = n..n + m;
        entries.push(n);
        for g in n + 1..n + m {
            if rng.chance(1, 3) {
                entries.push(g);
            }
        }
    }
    flow::Program {
        blocks,
        main,
        handlers,
        entries,
        images,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrSubType, InstrType, Isa};
    use coresight_decode::instr::ArmInstrDecoder;
    use coresight_decode::interfaces::InstrDecode;

    fn read(p: &Program, addr: u64) -> u32 {
        for (base, code) in &p.images {
            if addr >= *base && addr + 4 <= base + code.len() as u64 {
                let o = (addr - base) as usize;
                return u32::from_le_bytes(code[o..o + 4].try_into().unwrap());
            }
        }
        panic!("{addr:#x} not in any image");
    }

    /// Every instruction classifies as meant: straight-line ones are not
    /// waypoints, terminators branch where the program says.
    #[test]
    fn generated_code_classifies_as_intended() {
        for seed in 0..40 {
            let mut dec = ArmInstrDecoder::default();
            let mut rng = Rng::new(seed);
            let p = flow_program(&mut rng, 0x1000_0000, 60, Some(0x2000_0000), true, seed % 2 == 0);
            for (g, b) in p.blocks.iter().enumerate() {
                dec.reset_it_block();
                for i in 0..=b.body.len() {
                    let addr = b.instr_addr(i);
                    let mut info = InstrInfo {
                        pe_type: ArchProfile::new(ArchVersion::V8r3, CoreProfile::CortexM),
                        isa: Isa::Thumb2,
                        instr_addr: addr,
                        opcode: read(&p, addr),
                        track_it_block: true,
                        ..Default::default()
                    };
                    dec.decode_instruction(&mut info).unwrap();
                    assert_eq!(
                        info.instr_size,
                        b.size_of(i),
                        "seed {seed} {addr:#x} {:#010x}",
                        info.opcode
                    );
                    if i < b.body.len() {
                        assert_eq!(
                            info.instr_type,
                            InstrType::Other,
                            "seed {seed} {addr:#x} {:#010x}",
                            info.opcode
                        );
                        continue;
                    }
                    match b.term {
                        Term::B(t) | Term::Bl(t) | Term::Cond(t) => {
                            assert_eq!(
                                info.instr_type,
                                InstrType::Branch,
                                "seed {seed} block {g} {:#010x}",
                                info.opcode
                            );
                            assert_eq!(
                                info.branch_addr, p.blocks[t].addr,
                                "seed {seed} {addr:#x} {:#010x}",
                                info.opcode
                            );
                            assert_eq!(info.is_link, matches!(b.term, Term::Bl(_)));
                            assert_eq!(info.next_isa, Isa::Thumb2);
                        }
                        Term::Br | Term::Blr => {
                            assert_eq!(info.instr_type, InstrType::BranchIndirect);
                            assert_eq!(info.is_link, b.term == Term::Blr);
                        }
                        Term::Ret | Term::ExcRet => {
                            assert_eq!(info.instr_type, InstrType::BranchIndirect);
                            assert_eq!(info.sub_type, InstrSubType::V7ImpliedRet);
                        }
                    }
                }
            }
            // Handlers only branch forwards.
            for g in p.handlers.clone() {
                if let Term::B(t) | Term::Cond(t) = p.blocks[g].term {
                    assert!(t > g && p.handlers.contains(&t));
                }
            }
            assert_eq!(p.blocks[p.handlers.end - 1].term, Term::ExcRet);
        }
    }
}
