//! Random A64 programs and random walks through them.
//!
//! A program is a chain of basic blocks laid out back to back. Each block is
//! a few straight-line instructions ending in a branch: direct (B, BL),
//! conditional (B.cond, CBZ/CBNZ, TBZ/TBNZ), or indirect (BR, BLR, RET).
//! Every branch target is the start of a block, so each executed stretch of
//! code is a whole block and a walk is a list of block visits.

use super::{Rng, flow};

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
        1 => 0x9100_0000 | imm << 10 | n << 5 | d, // ADD Xd, Xn, #imm
        2 => 0xd100_0000 | imm << 10 | n << 5 | d, // SUB Xd, Xn, #imm
        3 => 0xaa00_03e0 | (rng.below(29) as u32) << 16 | d, // MOV Xd, Xm
        4 => 0xf940_0000 | (imm & 0x1ff) << 10 | n << 5 | d, // LDR Xt, [Xn, #imm]
        _ => 0xf900_0000 | (imm & 0x1ff) << 10 | n << 5 | d, // STR Xt, [Xn, #imm]
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
                    0x3600_0000
                        | (bit >> 5) << 31
                        | (rng.below(2) as u32) << 24
                        | (bit & 31) << 19
                        | offset_bits(pc, target, 14) << 5
                        | reg
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
        out.push(Step {
            block: cur,
            taken,
            next,
        });
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
                if rng.chance(1, 2) {
                    0xf940_0000 | imm << 10 | n << 5 | t
                } else {
                    0xf900_0000 | imm << 10 | n << 5 | t
                }
            }
        }
        _ => loop {
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
    flow_program_ext(rng, base, n_blocks, handler_base, svc, &Armv9Extras::default())
}

/// Armv9 instructions an A64 program may contain (none by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Armv9Extras {
    /// WFI, WFE, WFIT and WFET.
    pub wfx: bool,
    /// Transactions (FEAT_TME): TSTART, TCOMMIT, TCANCEL.
    pub tme: bool,
    /// TRCIT (FEAT_ITE), in the main program and handlers (as WFx).
    pub ite: bool,
}

const TSTART: u32 = 0xd523_3060; // TSTART Xt
const TCOMMIT: u32 = 0xd503_307f;
const TCANCEL: u32 = 0xd460_0000; // TCANCEL #imm16
const TRCIT: u32 = 0xd50b_72e0; // SYS #3, C7, C2, #7, Xt
const CBNZ_X: u32 = 0xb500_0000;

/// A64 opcode of an Armv9 body instruction.
fn armv9_instr(rng: &mut Rng, kind: flow::Kind) -> u32 {
    let reg = rng.below(29) as u32;
    match kind {
        flow::Kind::Wfx => match rng.below(4) {
            0 => 0xd503_207f,       // WFI
            1 => 0xd503_205f,       // WFE
            2 => 0xd503_1020 | reg, // WFIT Xt
            _ => 0xd503_1000 | reg, // WFET Xt
        },
        flow::Kind::Tstart => TSTART | reg,
        flow::Kind::Tcommit => TCOMMIT,
        flow::Kind::Tcancel => TCANCEL | (rng.below(0x1_0000) as u32) << 5,
        flow::Kind::Ite => TRCIT | reg,
        k => flow_body_instr(rng, k),
    }
}

/// Role of a main-program block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Plain,
    /// Ends with TSTART Xt; CBNZ Xt to the failure path.
    TxHead,
    /// Inside a transaction: reached only by falling through, left only to
    /// the next block.
    TxBody,
    /// Inside a transaction, whose TCOMMIT ends it.
    TxEnd,
}

/// [`flow_program`] with Armv9 instructions. Transactions are laid out as
/// real code does: `TSTART Xt; CBNZ Xt, fail` ends a head block, then one
/// to three blocks that only fall through to each other (conditional
/// branches to the next block), the last with the outer TCOMMIT; they may
/// hold a nested TSTART ... TCOMMIT and a TCANCEL. Nothing else branches
/// into them. Without extras the program is the one [`flow_program`] makes.
pub fn flow_program_ext(
    rng: &mut Rng,
    base: u64,
    n_blocks: usize,
    handler_base: Option<u64>,
    svc: bool,
    ext: &Armv9Extras,
) -> flow::Program {
    use flow::{Block as FBlock, Instr, Kind, Term as F};
    let n = n_blocks.max(2);
    let mut blocks: Vec<FBlock> = Vec::new();
    let mut words: Vec<Vec<u32>> = Vec::new();
    let body_of = |rng: &mut Rng, len: usize, svc: bool, extras: bool| {
        let mut body = Vec::with_capacity(len);
        let mut w = Vec::with_capacity(len);
        for _ in 0..len {
            let mut kind = match rng.below(40) {
                0 if svc => Kind::Svc,
                0..=9 => Kind::Mem,
                _ => Kind::Plain,
            };
            if extras && kind == Kind::Plain {
                if ext.wfx && rng.chance(1, 10) {
                    kind = Kind::Wfx;
                } else if ext.ite && rng.chance(1, 10) {
                    kind = Kind::Ite;
                }
            }
            body.push(Instr { size: 4, kind });
            w.push(if extras {
                armv9_instr(rng, kind)
            } else {
                flow_body_instr(rng, kind)
            });
        }
        (body, w)
    };
    let extras = ext.wfx || ext.tme || ext.ite;

    // Transaction regions.
    let mut roles = vec![Role::Plain; n];
    if ext.tme {
        let mut i = 0;
        while i + 5 < n {
            if rng.chance(1, 5) {
                let k = 1 + rng.below(3) as usize;
                roles[i] = Role::TxHead;
                for r in &mut roles[i + 1..i + k] {
                    *r = Role::TxBody;
                }
                roles[i + k] = Role::TxEnd;
                i += k + 2;
            } else {
                i += 1;
            }
        }
    }
    let inside = |t: usize| matches!(roles[t], Role::TxBody | Role::TxEnd);
    // A branch target outside transactions.
    let outside = |t: usize| {
        let mut t = t;
        while inside(t) {
            t = (t + 1) % n;
        }
        t
    };

    let mut addr = base;
    for (i, &role) in roles.iter().enumerate() {
        let target = rng.below(n as u64) as usize;
        let term = if i == n - 1 {
            if rng.chance(1, 2) { F::B(0) } else { F::Br }
        } else {
            match role {
                // CBNZ to the failure path.
                Role::TxHead => F::Cond(outside(target)),
                Role::TxBody => F::Cond(i + 1),
                _ => match rng.below(20) {
                    0..=5 => F::Cond(outside(target)),
                    6..=8 => F::B(outside(target)),
                    9..=11 => F::Bl(outside(target)),
                    12..=13 => F::Br,
                    14..=15 => F::Blr,
                    _ => F::Ret,
                },
            }
        };
        let len = rng.below(8) as usize;
        let (mut body, mut w) = match role {
            // No supervisor calls or WFx inside a transaction.
            Role::TxBody | Role::TxEnd => body_of(rng, len, false, false),
            _ => body_of(rng, len, svc, extras),
        };
        let insert = |body: &mut Vec<Instr>, w: &mut Vec<u32>, at: usize, kind: Kind, word: u32| {
            body.insert(at, Instr { size: 4, kind });
            w.insert(at, word);
        };
        match role {
            Role::TxHead => {
                let at = body.len();
                insert(&mut body, &mut w, at, Kind::Tstart, TSTART | rng.below(29) as u32);
            }
            Role::TxBody | Role::TxEnd => {
                if rng.chance(1, 3) {
                    // A nested transaction.
                    let a = rng.below(body.len() as u64 + 1) as usize;
                    let b = a + 1 + rng.below((body.len() - a) as u64 + 1) as usize;
                    insert(&mut body, &mut w, a, Kind::Tstart, TSTART | rng.below(29) as u32);
                    insert(&mut body, &mut w, b, Kind::Tcommit, TCOMMIT);
                }
                if rng.chance(1, 5) {
                    let at = rng.below(body.len() as u64 + 1) as usize;
                    let word = TCANCEL | (rng.below(0x1_0000) as u32) << 5;
                    insert(&mut body, &mut w, at, Kind::Tcancel, word);
                }
                if ext.ite && rng.chance(1, 3) {
                    let at = rng.below(body.len() as u64 + 1) as usize;
                    let word = TRCIT | rng.below(29) as u32;
                    insert(&mut body, &mut w, at, Kind::Ite, word);
                }
                if role == Role::TxEnd {
                    // The outer TCOMMIT, after any nested pair or TCANCEL.
                    let nested_end = body
                        .iter()
                        .rposition(|x| matches!(x.kind, Kind::Tcommit | Kind::Tcancel))
                        .map_or(0, |p| p + 1);
                    let at = nested_end + rng.below((body.len() - nested_end) as u64 + 1) as usize;
                    insert(&mut body, &mut w, at, Kind::Tcommit, TCOMMIT);
                }
            }
            Role::Plain => {}
        }
        let b = FBlock {
            addr,
            body,
            term,
            term_size: 4,
        };
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
            let (body, w) = body_of(rng, len, false, extras);
            let b = FBlock {
                addr,
                body,
                term,
                term_size: 4,
            };
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
    if ext.tme {
        // The CBNZ of each transaction head tests the register its TSTART wrote.
        let code = &mut images[0].1;
        for (i, b) in blocks[main.clone()].iter().enumerate() {
            if roles[i] == Role::TxHead
                && let F::Cond(t) = b.term
            {
                let off = (b.term_addr() - base) as usize;
                let ts = u32::from_le_bytes(code[off - 4..off].try_into().expect("4 bytes"));
                let w = CBNZ_X | offset_bits(b.term_addr(), blocks[t].addr, 19) << 5 | (ts & 0x1f);
                code[off..off + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
    }
    if !handlers.is_empty() {
        let code = flow_encode(rng, &blocks, handlers.clone(), &words[handlers.clone()]);
        images.push((blocks[handlers.start].addr, code));
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

    /// Armv9 programs: every instruction classifies as the walk takes it
    /// (on an Armv9 core, WFx as waypoints), transaction heads end with
    /// TSTART then a CBNZ on its register, and nothing branches into a
    /// transaction.
    #[test]
    fn armv9_code_classifies_as_intended() {
        use flow::{Kind, Term as F};
        let mut dec = ArmInstrDecoder::default();
        let ext = Armv9Extras {
            wfx: true,
            tme: true,
            ite: true,
        };
        let mut heads = 0;
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let base = 0xffff_0000_0040_0000;
            let p = flow_program_ext(&mut rng, base, 60, Some(0x8000_0000), true, &ext);
            let inside = flow::tx_regions(&p);
            let code = &p.images[0].1;
            let word = |addr: u64| u32::from_le_bytes(code[(addr - base) as usize..][..4].try_into().unwrap());
            for (i, b) in p.blocks[p.main.clone()].iter().enumerate() {
                for (j, ins) in b.body.iter().enumerate() {
                    let addr = b.instr_addr(j);
                    let mut info = InstrInfo {
                        pe_type: ArchProfile::new(ArchVersion::Aa64, CoreProfile::CortexA),
                        isa: Isa::Aarch64,
                        instr_addr: addr,
                        opcode: word(addr),
                        wfi_wfe_branch: true,
                        ..Default::default()
                    };
                    dec.decode_instruction(&mut info).unwrap();
                    let want = match ins.kind {
                        Kind::Wfx => InstrType::WfiWfe,
                        Kind::Tstart => InstrType::Tstart,
                        _ => InstrType::Other,
                    };
                    assert_eq!(info.instr_type, want, "{addr:#x} {:#010x} {:?}", info.opcode, ins.kind);
                }
                match b.term {
                    F::B(t) | F::Bl(t) => assert!(!inside[t], "branch into a transaction"),
                    F::Cond(t) => assert!(!inside[t] || (inside[i] && t == i + 1), "branch into a transaction"),
                    _ => {}
                }
                if b.body.last().map(|x| x.kind) == Some(Kind::Tstart) {
                    heads += 1;
                    let ts = word(b.term_addr() - 4);
                    let cbnz = word(b.term_addr());
                    assert_eq!(
                        cbnz & 0xff00_001f,
                        0xb500_0000 | (ts & 0x1f),
                        "CBNZ on the TSTART register"
                    );
                    assert!(inside[i + 1] && !inside[i]);
                }
                if inside[i] && !inside.get(i + 1).copied().unwrap_or(false) {
                    assert!(
                        b.body.iter().any(|x| x.kind == Kind::Tcommit),
                        "the last block of a transaction commits it"
                    );
                }
            }
        }
        assert!(heads > 20);
    }
}
