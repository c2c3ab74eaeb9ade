//! Random A64 programs and random walks through them.
//!
//! A program is a chain of basic blocks laid out back to back. Each block is
//! a few straight-line instructions ending in a branch: direct (B, BL),
//! conditional (B.cond, CBZ/CBNZ, TBZ/TBNZ), or indirect (BR, BLR, RET).
//! Every branch target is the start of a block, so each executed stretch of
//! code is a whole block and a walk is a list of block visits.

use super::{flow, Rng};

/// How a block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// Unconditional direct branch to block `.0`.
    B(usize),
    /// Direct call to block `.0`; returns to the next block.
    Bl(usize),
    /// Conditional direct branch to block `.0`, else fall through.
    Cond(usize),
    /// Indirect branch through a register.
    Br,
    /// Indirect call through a register.
    Blr,
    /// Return.
    Ret,
}

impl Term {
    pub fn is_indirect(self) -> bool {
        matches!(self, Term::Br | Term::Blr | Term::Ret)
    }
    pub fn is_call(self) -> bool {
        matches!(self, Term::Bl(_) | Term::Blr)
    }
}

/// One basic block.
#[derive(Clone, Debug)]
pub struct Block {
    pub addr: u64,
    /// Straight-line instructions before the terminator.
    pub body: u32,
    pub term: Term,
}

impl Block {
    /// Instructions in the block, terminator included.
    pub fn count(&self) -> u32 {
        self.body + 1
    }
    /// Address of the terminating branch.
    pub fn term_addr(&self) -> u64 {
        self.addr + 4 * self.body as u64
    }
    /// Address after the block.
    pub fn end(&self) -> u64 {
        self.addr + 4 * self.count() as u64
    }
}

/// A program: blocks and their machine code.
#[derive(Clone, Debug)]
pub struct Program {
    pub base: u64,
    pub blocks: Vec<Block>,
    pub code: Vec<u8>,
}

const NOP: u32 = 0xd503_201f;

fn body_instr(rng: &mut Rng) -> u32 {
    let d = rng.below(29) as u32;
    let n = rng.below(29) as u32;
    let imm = rng.below(4096) as u32;
    match rng.below(6) {
        0 => NOP,
        1 => 0x9100_0000 | imm << 10 | n << 5 | d,               // ADD Xd, Xn, #imm
        2 => 0xd100_0000 | imm << 10 | n << 5 | d,               // SUB Xd, Xn, #imm
        3 => 0xaa00_03e0 | (rng.below(29) as u32) << 16 | d,     // MOV Xd, Xm
        4 => 0xf940_0000 | (imm & 0x1ff) << 10 | n << 5 | d,     // LDR Xt, [Xn, #imm]
        _ => 0xf900_0000 | (imm & 0x1ff) << 10 | n << 5 | d,     // STR Xt, [Xn, #imm]
    }
}

fn offset_bits(from: u64, to: u64, bits: u32) -> u32 {
    let words = (to.wrapping_sub(from) as i64) >> 2;
    (words as u32) & ((1u32 << bits) - 1)
}

fn term_instr(rng: &mut Rng, pc: u64, term: Term, blocks_addr: impl Fn(usize) -> u64) -> u32 {
    let reg = rng.below(29) as u32;
    match term {
        Term::B(t) => 0x1400_0000 | offset_bits(pc, blocks_addr(t), 26),
        Term::Bl(t) => 0x9400_0000 | offset_bits(pc, blocks_addr(t), 26),
        Term::Cond(t) => {
            let target = blocks_addr(t);
            match rng.below(3) {
                // B.cond, any condition but AL/NV.
                0 => 0x5400_0000 | offset_bits(pc, target, 19) << 5 | rng.below(14) as u32,
                // CBZ / CBNZ
                1 => 0xb400_0000 | (rng.below(2) as u32) << 24 | offset_bits(pc, target, 19) << 5 | reg,
                // TBZ / TBNZ
                _ => {
                    let bit = rng.below(64) as u32;
                    0x3600_0000 | (bit >> 5) << 31 | (rng.below(2) as u32) << 24 | (bit & 31) << 19 | offset_bits(pc, target, 14) << 5 | reg
                }
            }
        }
        Term::Br => 0xd61f_0000 | reg << 5,
        Term::Blr => 0xd63f_0000 | reg << 5,
        Term::Ret => 0xd65f_03c0,
    }
}

impl Program {
    /// A random program of about `n_blocks` blocks at `base`.
    pub fn random(rng: &mut Rng, base: u64, n_blocks: usize) -> Program {
        let n = n_blocks.max(2);
        let mut blocks = Vec::with_capacity(n);
        let mut addr = base;
        for i in 0..n {
            let body = rng.below(8) as u32;
            let target = rng.below(n as u64) as usize;
            let term = if i == n - 1 {
                // The last block must not fall through past the end.
                if rng.chance(1, 2) { Term::B(0) } else { Term::Br }
            } else {
                match rng.below(20) {
                    0..=5 => Term::Cond(target),
                    6..=8 => Term::B(target),
                    9..=11 => Term::Bl(target),
                    12..=13 => Term::Br,
                    14..=15 => Term::Blr,
                    _ => Term::Ret,
                }
            };
            let b = Block { addr, body, term };
            addr = b.end();
            blocks.push(b);
        }
        let addrs: Vec<u64> = blocks.iter().map(|b| b.addr).collect();
        let mut code = Vec::with_capacity((addr - base) as usize);
        for b in &blocks {
            for _ in 0..b.body {
                code.extend(body_instr(rng).to_le_bytes());
            }
            let w = term_instr(rng, b.term_addr(), b.term, |t| addrs[t]);
            code.extend(w.to_le_bytes());
        }
        Program { base, blocks, code }
    }

    /// The block starting at `addr`.
    pub fn block_at(&self, addr: u64) -> Option<usize> {
        self.blocks.binary_search_by_key(&addr, |b| b.addr).ok()
    }
}

/// One executed block: where it went next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub block: usize,
    /// The terminating branch was taken.
    pub taken: bool,
    /// The block executed next.
    pub next: usize,
}

/// Walks `steps` blocks from block 0 at random, keeping a call stack so
/// returns go back to their callers (a return with no caller goes anywhere).
pub fn walk(rng: &mut Rng, prog: &Program, steps: usize) -> Vec<Step> {
    let n = prog.blocks.len();
    let mut out = Vec::with_capacity(steps);
    let mut stack: Vec<usize> = Vec::new();
    let mut cur = 0usize;
    for _ in 0..steps {
        let b = &prog.blocks[cur];
        let fall = (cur + 1).min(n - 1);
        let (taken, next) = match b.term {
            Term::B(t) => (true, t),
            Term::Cond(t) => {
                if rng.chance(1, 2) {
                    (true, t)
                } else {
                    (false, fall)
                }
            }
            Term::Bl(t) => {
                if stack.len() < 32 {
                    stack.push(fall);
                }
                (true, t)
            }
            Term::Blr => {
                if stack.len() < 32 {
                    stack.push(fall);
                }
                (true, rng.below(n as u64) as usize)
            }
            Term::Br => (true, rng.below(n as u64) as usize),
            Term::Ret => (true, stack.pop().unwrap_or_else(|| rng.below(n as u64) as usize)),
        };
        out.push(Step { block: cur, taken, next });
        cur = next;
    }
    out
}

/// A64 opcode of a straight-line instruction of `kind`.
fn flow_body_instr(rng: &mut Rng, kind: flow::Kind) -> u32 {
    match kind {
        flow::Kind::Svc => 0xd400_0001 | (rng.below(0x1_0000) as u32) << 5,
        flow::Kind::Mem => {
            let w = body_instr(rng);
            // Keep drawing until it is a load or a store.
            if w & 0xff00_0000 == 0xf900_0000 || w & 0xff00_0000 == 0xf800_0000 {
                w
            } else {
                let (t, n, imm) = (rng.below(29) as u32, rng.below(29) as u32, rng.below(512) as u32);
                if rng.chance(1, 2) { 0xf940_0000 | imm << 10 | n << 5 | t } else { 0xf900_0000 | imm << 10 | n << 5 | t }
            }
        }
        flow::Kind::Plain => loop {
            let w = body_instr(rng);
            if w & 0xff00_0000 != 0xf900_0000 {
                break w;
            }
        },
    }
}

fn flow_term_instr(rng: &mut Rng, pc: u64, term: flow::Term, addr_of: impl Fn(usize) -> u64) -> u32 {
    use flow::Term as F;
    let t = match term {
        F::B(t) => Term::B(t),
        F::Bl(t) => Term::Bl(t),
        F::Cond(t) => Term::Cond(t),
        F::Br => Term::Br,
        F::Blr => Term::Blr,
        F::Ret => Term::Ret,
        F::ExcRet => return 0xd69f_03e0, // ERET
    };
    term_instr(rng, pc, t, addr_of)
}

/// Builds the A64 code of `blocks` (addresses already laid out).
fn flow_encode(rng: &mut Rng, blocks: &[flow::Block], range: std::ops::Range<usize>, words: &[Vec<u32>]) -> Vec<u8> {
    let mut code = Vec::new();
    for (b, body) in blocks[range].iter().zip(words) {
        for w in body {
            code.extend(w.to_le_bytes());
        }
        let w = flow_term_instr(rng, b.term_addr(), b.term, |t| blocks[t].addr);
        code.extend(w.to_le_bytes());
    }
    code
}

/// A random A64 program for [`flow::walk`]: about `n_blocks` main blocks
/// at `base` and, with `handler_base`, exception handlers there (blocks
/// branching forwards only and ending in ERET). `svc`: the main program
/// makes supervisor calls now and then.
pub fn flow_program(rng: &mut Rng, base: u64, n_blocks: usize, handler_base: Option<u64>, svc: bool) -> flow::Program {
    use flow::{Block as FBlock, Instr, Kind, Term as F};
    let n = n_blocks.max(2);
    let mut blocks: Vec<FBlock> = Vec::new();
    let mut words: Vec<Vec<u32>> = Vec::new();
    let body_of = |rng: &mut Rng, len: usize, svc: bool| {
        let mut body = Vec::with_capacity(len);
        let mut w = Vec::with_capacity(len);
        for _ in 0..len {
            let kind = match rng.below(40) {
                0 if svc => Kind::Svc,
                0..=9 => Kind::Mem,
                _ => Kind::Plain,
            };
            body.push(Instr { size: 4, kind });
            w.push(flow_body_instr(rng, kind));
        }
        (body, w)
    };
    let mut addr = base;
    for i in 0..n {
        let target = rng.below(n as u64) as usize;
        let term = if i == n - 1 {
            if rng.chance(1, 2) { F::B(0) } else { F::Br }
        } else {
            match rng.below(20) {
                0..=5 => F::Cond(target),
                6..=8 => F::B(target),
                9..=11 => F::Bl(target),
                12..=13 => F::Br,
                14..=15 => F::Blr,
                _ => F::Ret,
            }
        };
        let len = rng.below(8) as usize;
        let (body, w) = body_of(rng, len, svc);
        let b = FBlock { addr, body, term, term_size: 4 };
        addr = b.end();
        blocks.push(b);
        words.push(w);
    }
    let main = 0..n;
    let mut handlers = n..n;
    let mut entries = Vec::new();
    if let Some(hbase) = handler_base {
        let m = 3 + rng.below(6) as usize;
        let mut addr = hbase;
        for i in 0..m {
            let g = n + i;
            let fwd = g + 1 + rng.below((m - i).max(1) as u64) as usize;
            let term = if i == m - 1 {
                F::ExcRet
            } else {
                match rng.below(10) {
                    0..=4 => F::Cond(fwd.min(n + m - 1)),
                    5..=6 => F::B(fwd.min(n + m - 1)),
                    7 => F::Br,
                    _ => F::ExcRet,
                }
            };
            let len = rng.below(6) as usize;
            let (body, w) = body_of(rng, len, false);
            let b = FBlock { addr, body, term, term_size: 4 };
            addr = b.end();
            blocks.push(b);
            words.push(w);
        }
        handlers = n..n + m;
        entries.push(n);
        for g in n + 1..n + m {
            if rng.chance(1, 3) {
                entries.push(g);
            }
        }
    }
    let mut images = vec![(base, flow_encode(rng, &blocks, main.clone(), &words[main.clone()]))];
    if !handlers.is_empty() {
        let code = flow_encode(rng, &blocks, handlers.clone(), &words[handlers.clone()]);
        images.push((blocks[handlers.start].addr, code));
    }
    flow::Program { blocks, main, handlers, entries, images }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrSubType, InstrType, Isa};
    use crate::instr::ArmInstrDecoder;
    use crate::interfaces::InstrDecode;

    /// Every generated instruction classifies as the generator meant it.
    #[test]
    fn generated_code_classifies_as_intended() {
        let mut dec = ArmInstrDecoder::default();
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let p = Program::random(&mut rng, 0xffff_0000_0040_0000, 60);
            for b in &p.blocks {
                for i in 0..b.count() {
                    let addr = b.addr + 4 * i as u64;
                    let off = (addr - p.base) as usize;
                    let mut info = InstrInfo {
                        pe_type: ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA),
                        isa: Isa::Aarch64,
                        instr_addr: addr,
                        opcode: u32::from_le_bytes(p.code[off..off + 4].try_into().unwrap()),
                        ..Default::default()
                    };
                    dec.decode_instruction(&mut info).unwrap();
                    if i < b.body {
                        assert_eq!(info.instr_type, InstrType::Other, "{addr:#x} {:#010x}", info.opcode);
                        continue;
                    }
                    match b.term {
                        Term::B(t) | Term::Bl(t) | Term::Cond(t) => {
                            assert_eq!(info.instr_type, InstrType::Branch);
                            assert_eq!(info.branch_addr, p.blocks[t].addr, "{addr:#x} {:#010x}", info.opcode);
                            assert_eq!(info.is_conditional, matches!(b.term, Term::Cond(_)));
                            assert_eq!(info.is_link, matches!(b.term, Term::Bl(_)));
                        }
                        Term::Br | Term::Blr => {
                            assert_eq!(info.instr_type, InstrType::BranchIndirect);
                            assert_eq!(info.is_link, b.term == Term::Blr);
                        }
                        Term::Ret => {
                            assert_eq!(info.instr_type, InstrType::BranchIndirect);
                            assert_eq!(info.sub_type, InstrSubType::V8Ret);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn walks_follow_the_program() {
        let mut rng = Rng::new(5);
        let p = Program::random(&mut rng, 0x1000, 30);
        let w = walk(&mut rng, &p, 500);
        assert_eq!(w.len(), 500);
        assert_eq!(w[0].block, 0);
        for pair in w.windows(2) {
            assert_eq!(pair[0].next, pair[1].block);
            if !pair[0].taken {
                assert_eq!(pair[1].block, pair[0].block + 1);
            }
        }
    }
}
