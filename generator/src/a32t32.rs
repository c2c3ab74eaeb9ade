//! Random A32 and T32 programs, random walks through them, and the
//! snapshot assembly shared by the PTM and ETMv3 generators.
//!
//! A program is a set of regions of basic blocks laid out back to back:
//! the main code (an A32 region, a T32 region, or both), and with
//! exceptions a vector table and the exception handlers. A block is a few
//! straight-line instructions (some conditional, some loads and stores,
//! perhaps an SVC) ending in a waypoint: a direct branch (B, BL, BLX
//! `<label>` switching instruction set, conditional branches, CBZ), an
//! indirect branch (BX/BLX `<reg>`, returns like `BX LR`, `POP {..,PC}`,
//! `LDR PC, [SP], #4`, `MOV PC, LR`, conditional returns), an ISB, or in
//! handlers an exception return (`SUBS PC, LR, #4`, `MOVS PC, LR`,
//! `LDMFD SP!, {..,PC}^`, `RFE`). Every branch target is a block start, so
//! a walk is a list of segments: a block run from some instruction (the
//! start, or where an exception returned to) to its terminator, or to the
//! instruction where an exception was taken.
//!
//! Trace sources built from walks (one per core) go into a snapshot here
//! too: alone in a buffer, or several interleaved in CoreSight frames as a
//! funnel would, with the truth of all of them merged in the order a
//! decoder produces it.

use super::{BufferLayout, GenOptions, Generated, Rng, Truth};
use crate::formatter::{FormatterConfig, FrameFormatter};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, SnapshotSpec};
use coresight_decode::arch::Isa;

/// Which instruction sets a program's main code uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsaMix {
    A32,
    T32,
    /// Both, with interworking branches between them.
    Mixed,
}

impl IsaMix {
    pub fn from_name(s: &str) -> Option<IsaMix> {
        match s.to_ascii_lowercase().as_str() {
            "a32" | "arm" => Some(IsaMix::A32),
            "t32" | "thumb" => Some(IsaMix::T32),
            "mixed" | "both" => Some(IsaMix::Mixed),
            _ => None,
        }
    }
}

/// Exceptions the walk takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExcKind {
    /// Supervisor call: the SVC instruction executes, then the exception.
    Svc,
    /// Synchronous data abort on a load or store, which does not complete
    /// (execution returns to it).
    DataAbort,
    Irq,
    Fiq,
}

impl ExcKind {
    pub const ALL: [ExcKind; 4] = [ExcKind::Svc, ExcKind::DataAbort, ExcKind::Irq, ExcKind::Fiq];

    /// The Armv7-A exception number traced by PTM and ETMv3.
    pub fn number(self) -> u16 {
        match self {
            ExcKind::Svc => 10,
            ExcKind::DataAbort => 12,
            ExcKind::Irq => 14,
            ExcKind::Fiq => 15,
        }
    }
    /// Offset of the exception's entry in the vector table.
    pub fn vector_offset(self) -> u64 {
        match self {
            ExcKind::Svc => 0x08,
            ExcKind::DataAbort => 0x10,
            ExcKind::Irq => 0x18,
            ExcKind::Fiq => 0x1c,
        }
    }
}

/// How a block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// Unconditional direct branch to block `.0` (same instruction set).
    B(usize),
    /// Direct call (BL); returns to the next block.
    Bl(usize),
    /// Direct call switching instruction set (BLX `<label>`).
    Blx(usize),
    /// Conditional direct branch (B`<c>`, CBZ/CBNZ), else fall through.
    Cond(usize),
    /// Indirect branch through a register (BX), anywhere in the main code.
    Bx,
    /// Indirect call through a register (BLX `<reg>`).
    BlxReg,
    /// Return.
    Ret,
    /// Conditional return (A32 BX`<c>` LR / LDM`<c>`; T32 IT then BX LR).
    CondRet,
    /// ISB: a waypoint that is not a branch; falls through.
    Isb,
    /// `LDR PC, [PC, #x]` to block `.0` (vector table entries).
    LdrPc(usize),
    /// Exception return (handlers only).
    ExcRet,
}

impl Term {
    /// The branch takes its target from a register or memory.
    pub fn is_indirect(self) -> bool {
        matches!(
            self,
            Term::Bx | Term::BlxReg | Term::Ret | Term::CondRet | Term::LdrPc(_) | Term::ExcRet
        )
    }
    /// A branch with link (pushes a return address).
    pub fn is_call(self) -> bool {
        matches!(self, Term::Bl(_) | Term::Blx(_) | Term::BlxReg)
    }
    /// A branch at all (ISB is a waypoint but not a branch).
    pub fn is_branch(self) -> bool {
        self != Term::Isb
    }
    /// Can fall through to the next block.
    pub fn falls_through(self) -> bool {
        matches!(self, Term::Cond(_) | Term::CondRet | Term::Isb) || self.is_call()
    }
}

/// What an instruction is, as far as tracing cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrKind {
    /// Always executes.
    Plain,
    /// Conditional (an A32 condition, or inside a T32 IT block): may fail
    /// its condition check.
    Cond,
    /// An unconditional load or store: may take a data abort.
    Mem,
    /// SVC: always takes the SVC exception.
    Svc,
    /// A T32 IT instruction covering the next one.
    It,
    /// The block's terminator.
    Term,
}

/// One instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instr {
    pub addr: u64,
    pub size: u8,
    pub kind: InstrKind,
    /// The opcode as read little-endian from memory (T32: first halfword
    /// in bits 15:0).
    pub op: u32,
}

impl Instr {
    pub fn end(&self) -> u64 {
        self.addr + self.size as u64
    }
}

/// One basic block.
#[derive(Clone, Debug)]
pub struct Block {
    pub addr: u64,
    /// `Isa::Arm` or `Isa::Thumb2`.
    pub isa: Isa,
    /// The instructions, terminator last.
    pub instrs: Vec<Instr>,
    pub term: Term,
    /// The block after this one in memory, where the terminator falls
    /// through to (and calls return to).
    pub fall: Option<usize>,
    /// Part of an exception handler (or the vector table).
    pub handler: bool,
    /// How the terminator is encoded (a choice among equivalent forms).
    form: u8,
}

impl Block {
    /// A block of given instructions (for a real execution's runs).
    pub(crate) fn given(addr: u64, isa: Isa, instrs: Vec<Instr>, term: Term) -> Block {
        Block {
            addr,
            isa,
            instrs,
            term,
            fall: None,
            handler: false,
            form: 0,
        }
    }

    pub fn term_index(&self) -> usize {
        self.instrs.len() - 1
    }
    /// Address after the block.
    pub fn end(&self) -> u64 {
        self.instrs.last().map_or(self.addr, Instr::end)
    }
}

/// A memory image.
#[derive(Clone, Debug)]
pub struct Region {
    pub base: u64,
    pub code: Vec<u8>,
}

/// A program: blocks and their machine code.
#[derive(Clone, Debug)]
pub struct Program {
    pub blocks: Vec<Block>,
    pub regions: Vec<Region>,
    /// Blocks of the main code (indirect branches go to these).
    pub main: Vec<usize>,
    pub entry: usize,
    /// Vector table entry block of each exception kind.
    pub vectors: Vec<(ExcKind, usize)>,
    /// Vector base address (0 without exceptions).
    pub vbar: u64,
}

/// What program to make.
#[derive(Clone, Copy, Debug)]
pub struct ProgramConfig {
    pub base: u64,
    /// Blocks of main code, about.
    pub blocks: usize,
    pub isa: IsaMix,
    /// A vector table, handlers, and SVCs in the main code.
    pub exceptions: bool,
}

// ---- encodings ----

const A32_AL: u32 = 0xe;

/// An A32 condition other than AL.
fn a32_cond(rng: &mut Rng) -> u32 {
    rng.below(14) as u32
}

fn low_reg(rng: &mut Rng) -> u32 {
    rng.below(8) as u32
}

/// R0..R12.
fn gp_reg(rng: &mut Rng) -> u32 {
    rng.below(13) as u32
}

/// An A32 body instruction of `kind` (Plain, Cond, Mem or Svc).
fn a32_body(rng: &mut Rng, kind: InstrKind) -> u32 {
    let d = gp_reg(rng);
    let n = gp_reg(rng);
    let imm = rng.below(4096) as u32;
    let cond = if kind == InstrKind::Cond { a32_cond(rng) } else { A32_AL };
    let c = cond << 28;
    match kind {
        InstrKind::Svc => 0x0f00_0000 | c | rng.below(0x100) as u32,
        InstrKind::Mem => {
            if rng.chance(1, 2) {
                c | 0x0590_0000 | n << 16 | d << 12 | imm // LDR Rt, [Rn, #imm]
            } else {
                c | 0x0580_0000 | n << 16 | d << 12 | imm // STR Rt, [Rn, #imm]
            }
        }
        _ => match rng.below(if kind == InstrKind::Cond { 6 } else { 8 }) {
            0 => c | 0x0280_0000 | n << 16 | d << 12 | imm, // ADD Rd, Rn, #imm
            1 => c | 0x0240_0000 | n << 16 | d << 12 | imm, // SUB Rd, Rn, #imm
            2 => c | 0x01a0_0000 | d << 12 | gp_reg(rng),   // MOV Rd, Rm
            3 => c | 0x0350_0000 | n << 16 | imm,           // CMP Rn, #imm
            4 => c | 0x0080_0000 | n << 16 | d << 12 | gp_reg(rng), // ADD Rd, Rn, Rm
            5 => c | 0x0590_0000 | n << 16 | d << 12 | imm, // LDR
            6 => 0xe320_f000,                               // NOP
            _ => 0xf57f_f050 | [0xf, 0xe, 0xb, 0xa][rng.below(4) as usize], // DMB / DSB options
        },
    }
}

/// A T32 body instruction of `kind`: (halfwords, count 1 or 2).
fn t32_body(rng: &mut Rng, kind: InstrKind, wide: bool) -> (u16, u16) {
    let d = low_reg(rng) as u16;
    let n = low_reg(rng) as u16;
    match kind {
        InstrKind::Svc => (0xdf00 | rng.below(0x100) as u16, 0),
        InstrKind::Mem if wide => {
            let rt = gp_reg(rng) as u16;
            let base = if rng.chance(1, 2) { 0xf8d0 } else { 0xf8c0 }; // LDR.W / STR.W
            (base | gp_reg(rng) as u16, rt << 12 | rng.below(4096) as u16)
        }
        InstrKind::Mem => {
            let base = if rng.chance(1, 2) { 0x6800 } else { 0x6000 }; // LDR / STR
            (base | (rng.below(32) as u16) << 6 | n << 3 | d, 0)
        }
        _ if wide => match rng.below(3) {
            0 => (
                0xf100 | gp_reg(rng) as u16,
                (gp_reg(rng) as u16) << 8 | rng.below(256) as u16,
            ), // ADD.W
            1 => (
                0xf1a0 | gp_reg(rng) as u16,
                (gp_reg(rng) as u16) << 8 | rng.below(256) as u16,
            ), // SUB.W
            _ => (0xf3bf, 0x8f50 | [0xf, 0xe, 0xb][rng.below(3) as usize]), // DMB / DSB
        },
        _ => match rng.below(6) {
            0 => (0xbf00, 0),                                           // NOP
            1 => (0x2000 | d << 8 | rng.below(256) as u16, 0),          // MOVS Rd, #imm
            2 => (0x1800 | (low_reg(rng) as u16) << 6 | n << 3 | d, 0), // ADDS Rd, Rn, Rm
            3 => (0x2800 | n << 8 | rng.below(256) as u16, 0),          // CMP Rn, #imm
            4 => (0x4600 | n << 3 | d, 0),                              // MOV Rd, Rm
            _ => (0x1e00 | (rng.below(8) as u16) << 6 | n << 3 | d, 0), // SUBS Rd, Rn, #imm3
        },
    }
}

fn rel(pc: u64, target: u64) -> i64 {
    target as i64 - pc as i64
}

fn a32_branch(pc: u64, target: u64, cond: u32, link: bool) -> u32 {
    let off = ((rel(pc + 8, target) >> 2) as u32) & 0x00ff_ffff;
    cond << 28 | 0x0a00_0000 | (link as u32) << 24 | off
}

fn a32_blx_imm(pc: u64, target: u64) -> u32 {
    let d = rel(pc + 8, target);
    0xfa00_0000 | (((d >> 1) & 1) as u32) << 24 | ((d >> 2) as u32 & 0x00ff_ffff)
}

/// B.W (0x9000), BL (0xd000) or BLX `<label>` (0xc000).
fn t32_wide_branch(pc: u64, target: u64, kind: u16) -> (u16, u16) {
    let base = if kind == 0xc000 { (pc + 4) & !3 } else { pc + 4 };
    let off = rel(base, target);
    let bit = |n: u32| ((off >> n) & 1) as u16;
    let s = bit(24);
    let j1 = 1 ^ bit(23) ^ s;
    let j2 = 1 ^ bit(22) ^ s;
    let hw1 = 0xf000 | s << 10 | ((off >> 12) & 0x3ff) as u16;
    let mut imm11 = ((off >> 1) & 0x7ff) as u16;
    if kind == 0xc000 {
        imm11 &= !1;
    }
    (hw1, kind | j1 << 13 | j2 << 11 | imm11)
}

fn t32_cond_wide(pc: u64, target: u64, cond: u16) -> (u16, u16) {
    let off = rel(pc + 4, target);
    let bit = |n: u32| ((off >> n) & 1) as u16;
    let hw1 = 0xf000 | bit(20) << 10 | cond << 6 | ((off >> 12) & 0x3f) as u16;
    let hw2 = 0x8000 | bit(18) << 13 | bit(19) << 11 | ((off >> 1) & 0x7ff) as u16;
    (hw1, hw2)
}

// ---- construction ----

/// A block before layout: instruction kinds and sizes.
struct Proto {
    isa: Isa,
    body: Vec<(InstrKind, u8)>,
    term: Term,
    term_size: u8,
    form: u8,
    handler: bool,
}

impl Proto {
    fn new(isa: Isa, term: Term, handler: bool) -> Proto {
        Proto {
            isa,
            body: Vec::new(),
            term,
            term_size: 4,
            form: 0,
            handler,
        }
    }
}

fn random_body(rng: &mut Rng, isa: Isa, handler: bool, exceptions: bool) -> Vec<(InstrKind, u8)> {
    let n = rng.below(8) as usize;
    let mut body = Vec::with_capacity(n);
    let mut svc = !handler && exceptions && rng.chance(1, 12);
    while body.len() < n {
        let t32 = isa == Isa::Thumb2;
        let wide = t32 && rng.chance(1, 3);
        let size = if t32 && !wide { 2 } else { 4 };
        match rng.below(10) {
            0..=1 => body.push((InstrKind::Mem, size)),
            2..=3 if t32 => {
                if body.len() + 2 <= n {
                    body.push((InstrKind::It, 2));
                    body.push((InstrKind::Cond, 2));
                }
            }
            2..=3 => body.push((InstrKind::Cond, 4)),
            4 if svc => {
                svc = false;
                body.push((InstrKind::Svc, if t32 { 2 } else { 4 }));
            }
            _ => body.push((InstrKind::Plain, size)),
        }
    }
    body
}

/// Chooses the encoding form and size of a T32 terminator, from how far
/// away (in blocks) its target is; block sizes are bounded so a distance
/// in blocks bounds the distance in bytes.
fn t32_form(rng: &mut Rng, p: &mut Proto, me: usize) {
    let dist = |t: usize| t as i64 - me as i64;
    let (form, size) = match p.term {
        Term::B(t) if dist(t).abs() <= 40 && rng.chance(1, 2) => (1, 2),
        Term::Cond(t) if (2..=3).contains(&dist(t)) && rng.chance(1, 3) => (2, 2), // CBZ / CBNZ
        Term::Cond(t) if dist(t).abs() <= 5 && rng.chance(2, 3) => (1, 2),
        Term::Bx | Term::BlxReg => (0, 2),
        Term::Ret => match rng.below(5) {
            0 => (0, 2), // BX LR
            1 => (1, 2), // POP {.., PC}
            2 => (2, 2), // MOV PC, LR
            3 => (3, 4), // LDR.W PC, [SP], #4
            _ => (4, 4), // POP.W {.., PC}
        },
        Term::CondRet => (0, 2),
        _ => (0, 4),
    };
    p.form = form;
    p.term_size = size;
}

/// The largest block: 7 body instructions and a terminator, 4 bytes each.
const MAX_BLOCK_BYTES: u64 = 32;

impl Program {
    /// A random program (its literal pool still empty).
    fn random(rng: &mut Rng, cfg: &ProgramConfig) -> Program {
        let n = cfg.blocks.max(4);
        let (n_a, n_t) = match cfg.isa {
            IsaMix::A32 => (n, 0),
            IsaMix::T32 => (0, n),
            IsaMix::Mixed => {
                let a = 2 + rng.below(n as u64 - 3) as usize;
                (a, n - a)
            }
        };
        let mut protos: Vec<Proto> = Vec::new();
        // (first index, count, isa, base)
        let mut regions: Vec<(usize, usize, Isa, u64)> = Vec::new();
        if n_a > 0 {
            regions.push((0, n_a, Isa::Arm, cfg.base));
        }
        if n_t > 0 {
            let base = if n_a > 0 { cfg.base + 0x8000 } else { cfg.base };
            regions.push((n_a, n_t, Isa::Thumb2, base));
        }
        let main_regions = regions.clone();
        for &(first, count, isa, _) in &main_regions {
            let other = main_regions.iter().find(|r| r.2 != isa).copied();
            for li in 0..count {
                let me = first + li;
                let same = |rng: &mut Rng| first + rng.below(count as u64) as usize;
                // Unconditional direct branches and calls go forward, so a
                // walk cannot get stuck in a loop with no way out: the
                // region's last block branches anywhere.
                let ahead = |rng: &mut Rng| me + 1 + rng.below((first + count - me - 1) as u64) as usize;
                let term = if li == count - 1 {
                    if rng.chance(2, 3) { Term::Bx } else { Term::Ret }
                } else {
                    match rng.below(100) {
                        0..=29 => {
                            // Now and then a loop on itself.
                            if rng.chance(1, 5) {
                                Term::Cond(me)
                            } else {
                                Term::Cond(same(rng))
                            }
                        }
                        30..=41 => Term::B(ahead(rng)),
                        42..=54 => Term::Bl(ahead(rng)),
                        55..=61 => match other {
                            Some((f, c, _, _)) => Term::Blx(f + rng.below(c as u64) as usize),
                            None => Term::Bl(ahead(rng)),
                        },
                        62..=69 => Term::Bx,
                        70..=75 => Term::BlxReg,
                        76..=89 => Term::Ret,
                        90..=95 => Term::CondRet,
                        _ => Term::Isb,
                    }
                };
                let mut p = Proto::new(isa, term, false);
                p.body = random_body(rng, isa, false, cfg.exceptions);
                if isa == Isa::Thumb2 {
                    if term == Term::CondRet {
                        // The IT instruction that makes the return conditional.
                        p.body.truncate(6);
                        p.body.push((InstrKind::It, 2));
                    }
                    t32_form(rng, &mut p, me);
                } else {
                    p.form = rng.below(4) as u8;
                }
                protos.push(p);
            }
        }
        let main: Vec<usize> = (0..protos.len()).collect();
        let entry = 0;

        // Vector table and handlers.
        let mut vectors = Vec::new();
        let mut vbar = 0;
        if cfg.exceptions {
            vbar = cfg.base + 0x1_0000;
            // Vector entries are T32 when the main code is (SCTLR.TE set).
            let vec_isa = if cfg.isa == IsaMix::T32 { Isa::Thumb2 } else { Isa::Arm };
            let first_vec = protos.len();
            // Entries are laid out by hand below; placeholders now.
            for _ in ExcKind::ALL {
                protos.push(Proto::new(vec_isa, Term::ExcRet, true));
            }
            let mut h_regions: Vec<(usize, usize, Isa, u64)> = Vec::new();
            for (k, kind) in ExcKind::ALL.iter().enumerate() {
                let isa = match cfg.isa {
                    IsaMix::A32 => Isa::Arm,
                    IsaMix::T32 => Isa::Thumb2,
                    IsaMix::Mixed => {
                        if rng.chance(1, 2) {
                            Isa::Arm
                        } else {
                            Isa::Thumb2
                        }
                    }
                };
                let count = 1 + rng.below(3) as usize;
                let first = protos.len();
                for j in 0..count {
                    let term = if j == count - 1 {
                        Term::ExcRet
                    } else if rng.chance(1, 2) {
                        Term::Cond(first + j + 1 + rng.below((count - j - 1) as u64) as usize)
                    } else {
                        Term::B(first + j + 1 + rng.below((count - j - 1) as u64) as usize)
                    };
                    let mut p = Proto::new(isa, term, true);
                    p.body = random_body(rng, isa, true, false);
                    if isa == Isa::Thumb2 {
                        t32_form(rng, &mut p, first + j);
                    }
                    p.form = if term == Term::ExcRet {
                        rng.below(4) as u8
                    } else {
                        p.form
                    };
                    protos.push(p);
                }
                let base = vbar + 0x100 + 0x400 * k as u64;
                h_regions.push((first, count, isa, base));
                // The vector entry: a branch to the handler, or a load of
                // its address (which may switch instruction set).
                let v = &mut protos[first_vec + k];
                v.term = if isa == vec_isa && rng.chance(1, 2) {
                    Term::B(first)
                } else {
                    Term::LdrPc(first)
                };
                v.term_size = 4;
                vectors.push((*kind, first_vec + k));
            }
            regions.extend(h_regions);
        }

        // Layout.
        let mut blocks: Vec<Block> = Vec::with_capacity(protos.len());
        for p in &protos {
            blocks.push(Block {
                addr: 0,
                isa: p.isa,
                instrs: Vec::new(),
                term: p.term,
                fall: None,
                handler: p.handler,
                form: p.form,
            });
        }
        let place = |blocks: &mut Vec<Block>, idx: usize, addr: u64| -> u64 {
            let p = &protos[idx];
            let mut a = addr;
            let b = &mut blocks[idx];
            b.addr = addr;
            for &(kind, size) in &p.body {
                b.instrs.push(Instr {
                    addr: a,
                    size,
                    kind,
                    op: 0,
                });
                a += size as u64;
            }
            b.instrs.push(Instr {
                addr: a,
                size: p.term_size,
                kind: InstrKind::Term,
                op: 0,
            });
            a + p.term_size as u64
        };
        for &(first, count, _, base) in &regions {
            let mut a = base;
            for i in first..first + count {
                a = place(&mut blocks, i, a);
                if i + 1 < first + count {
                    blocks[i].fall = Some(i + 1);
                }
            }
            debug_assert!(a - base <= MAX_BLOCK_BYTES * count as u64);
        }
        for &(kind, idx) in &vectors {
            place(&mut blocks, idx, vbar + kind.vector_offset());
        }

        // Encoding.
        let mut images: Vec<Region> = Vec::new();
        for &(first, count, _, base) in &regions {
            let end = blocks[first + count - 1].end();
            let mut img = Region {
                base,
                code: vec![0; (end - base) as usize + 4],
            };
            for i in first..first + count {
                encode_block(rng, &mut blocks, i, &mut img);
            }
            images.push(img);
        }
        if cfg.exceptions {
            // Eight entries, then the literal pool the LDR PC entries use.
            let vec_isa = blocks[vectors[0].1].isa;
            let mut img = Region {
                base: vbar,
                code: vec![0; 0x44],
            };
            for slot in 0..8u64 {
                // Unused entries loop on themselves.
                let (w, hw) = if vec_isa == Isa::Arm {
                    (0xeaff_fffe_u32, 0)
                } else {
                    (0, 0xe7fe_u16)
                };
                let at = (slot * 4) as usize;
                if vec_isa == Isa::Arm {
                    img.code[at..at + 4].copy_from_slice(&w.to_le_bytes());
                } else {
                    img.code[at..at + 2].copy_from_slice(&hw.to_le_bytes());
                    img.code[at + 2..at + 4].copy_from_slice(&0xbf00u16.to_le_bytes());
                }
            }
            for &(_, idx) in &vectors {
                encode_block(rng, &mut blocks, idx, &mut img);
            }
            images.push(img);
        }
        Program {
            blocks,
            regions: images,
            main,
            entry,
            vectors,
            vbar,
        }
    }

    /// The vector entry block of an exception.
    pub fn vector(&self, kind: ExcKind) -> Option<usize> {
        self.vectors.iter().find(|v| v.0 == kind).map(|v| v.1)
    }

    /// Address of block `b` with bit 0 set for T32, as interworking
    /// branches and literal pools hold it.
    fn interwork_addr(&self, b: usize) -> u64 {
        self.blocks[b].addr | (self.blocks[b].isa == Isa::Thumb2) as u64
    }
}

fn put(img: &mut Region, addr: u64, bytes: &[u8]) {
    let at = (addr - img.base) as usize;
    img.code[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Writes block `i`'s machine code into `img`, recording the opcodes.
fn encode_block(rng: &mut Rng, blocks: &mut [Block], i: usize, img: &mut Region) {
    let isa = blocks[i].isa;
    let term = blocks[i].term;
    let form = blocks[i].form;
    let addr_of = |blocks: &[Block], t: usize| blocks[t].addr;
    let n = blocks[i].instrs.len();
    let mut it_cond = 0u16;
    for j in 0..n {
        let ins = blocks[i].instrs[j];
        let (lo, hi): (u32, Option<u32>);
        if isa == Isa::Arm {
            let w = if ins.kind != InstrKind::Term {
                a32_body(rng, ins.kind)
            } else {
                let pc = ins.addr;
                match term {
                    Term::B(t) => a32_branch(pc, addr_of(blocks, t), A32_AL, false),
                    Term::Bl(t) => a32_branch(pc, addr_of(blocks, t), A32_AL, true),
                    Term::Cond(t) => a32_branch(pc, addr_of(blocks, t), a32_cond(rng), false),
                    Term::Blx(t) => a32_blx_imm(pc, addr_of(blocks, t)),
                    Term::Bx => 0xe12f_ff10 | gp_reg(rng),
                    Term::BlxReg => 0xe12f_ff30 | gp_reg(rng),
                    Term::Ret => match form {
                        0 => 0xe12f_ff1e,                                    // BX LR
                        1 => 0xe8bd_8000 | (rng.range(1, 0xff) as u32) << 4, // POP {.., PC}
                        2 => 0xe49d_f004,                                    // LDR PC, [SP], #4
                        _ => 0xe1a0_f00e,                                    // MOV PC, LR
                    },
                    Term::CondRet => {
                        let c = a32_cond(rng) << 28;
                        if rng.chance(1, 2) {
                            c | 0x012f_ff1e
                        } else {
                            c | 0x08bd_8000 | (rng.range(1, 0xff) as u32) << 4
                        }
                    }
                    Term::Isb => 0xf57f_f06f,
                    Term::LdrPc(_) => {
                        // Literal pool entry for this vector slot, 0x20 on.
                        let lit = pc + 0x20;
                        0xe59f_f000 | ((lit - (pc + 8)) as u32 & 0xfff)
                    }
                    Term::ExcRet => match form {
                        0 => 0xe25e_f004,                               // SUBS PC, LR, #4
                        1 => 0xe1b0_f00e,                               // MOVS PC, LR
                        2 => 0xe8fd_8000 | rng.range(1, 0x1fff) as u32, // LDMFD SP!, {.., PC}^
                        _ => 0xf8bd_0a00,                               // RFEIA SP!
                    },
                }
            };
            lo = w;
            hi = None;
        } else {
            let (h1, h2) = if ins.kind == InstrKind::Term {
                let pc = ins.addr;
                match term {
                    Term::B(t) if form == 1 => (0xe000 | ((rel(pc + 4, addr_of(blocks, t)) >> 1) & 0x7ff) as u16, 0),
                    Term::B(t) => t32_wide_branch(pc, addr_of(blocks, t), 0x9000),
                    Term::Bl(t) => t32_wide_branch(pc, addr_of(blocks, t), 0xd000),
                    Term::Blx(t) => t32_wide_branch(pc, addr_of(blocks, t), 0xc000),
                    Term::Cond(t) if form == 2 => {
                        let off = rel(pc + 4, addr_of(blocks, t));
                        let nz = rng.below(2) as u16;
                        (
                            0xb100
                                | nz << 11
                                | (((off >> 6) & 1) as u16) << 9
                                | (((off >> 1) & 0x1f) as u16) << 3
                                | low_reg(rng) as u16,
                            0,
                        )
                    }
                    Term::Cond(t) if form == 1 => (
                        0xd000 | (rng.below(14) as u16) << 8 | ((rel(pc + 4, addr_of(blocks, t)) >> 1) & 0xff) as u16,
                        0,
                    ),
                    Term::Cond(t) => t32_cond_wide(pc, addr_of(blocks, t), rng.below(14) as u16),
                    Term::Bx => (0x4700 | (gp_reg(rng) as u16) << 3, 0),
                    Term::BlxReg => (0x4780 | (gp_reg(rng) as u16) << 3, 0),
                    Term::Ret => match form {
                        0 => (0x4770, 0),
                        1 => (0xbd00 | rng.below(0x100) as u16, 0),
                        2 => (0x46f7, 0),
                        3 => (0xf85d, 0xfb04),
                        _ => (0xe8bd, 0x8000 | rng.range(1, 0x1fff) as u16),
                    },
                    Term::CondRet => {
                        debug_assert!(it_cond != 0);
                        (0x4770, 0)
                    }
                    Term::Isb => (0xf3bf, 0x8f6f),
                    Term::LdrPc(_) => {
                        let lit = pc + 0x20;
                        (0xf8df, 0xf000 | ((lit - ((pc + 4) & !3)) as u16 & 0xfff))
                    }
                    Term::ExcRet => (0xf3de, 0x8f00 | [4, 0, 4, 8][form as usize & 3]),
                }
            } else if ins.kind == InstrKind::It {
                let c = rng.below(14) as u16;
                it_cond = 0x10 | c;
                (0xbf08 | c << 4, 0)
            } else {
                t32_body(rng, ins.kind, ins.size == 4)
            };
            lo = h1 as u32;
            hi = (ins.size == 4).then_some(h2 as u32);
        }
        let op = match hi {
            Some(h) => lo | h << 16,
            None => lo,
        };
        let bytes = op.to_le_bytes();
        put(img, ins.addr, &bytes[..ins.size as usize]);
        blocks[i].instrs[j].op = op;
    }
}

/// Fills the literal pool of the vector table (after all blocks are
/// placed, so handler addresses are known).
fn fill_literals(prog: &mut Program) {
    let Some(img) = prog.regions.iter().position(|r| r.base == prog.vbar && prog.vbar != 0) else {
        return;
    };
    for k in 0..prog.vectors.len() {
        let (kind, idx) = prog.vectors[k];
        if let Term::LdrPc(t) = prog.blocks[idx].term {
            let v = prog.interwork_addr(t) as u32;
            let at = prog.vbar + kind.vector_offset() + 0x20;
            put(&mut prog.regions[img], at, &v.to_le_bytes());
        }
    }
}

impl Program {
    /// A random program with its literal pool filled in.
    pub fn generate(rng: &mut Rng, cfg: &ProgramConfig) -> Program {
        let mut p = Program::random(rng, cfg);
        fill_literals(&mut p);
        p
    }
}

// ---- walks ----

/// How a segment ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegEnd {
    /// The terminator executed: taken or not, and where execution went.
    Term {
        taken: bool,
        next: usize,
        next_start: usize,
    },
    /// An exception was taken before instruction `at` (for an SVC, the
    /// one after it; for a data abort, the load or store that aborted).
    /// Execution goes on at the vector entry, and returns to `at`.
    Exception { at: usize, kind: ExcKind, vector: usize },
}

/// A stretch of one block executed without a waypoint in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seg {
    pub block: usize,
    /// First instruction executed.
    pub start: usize,
    pub end: SegEnd,
    /// Conditional instructions that failed their condition, by index.
    pub fails: u64,
}

impl Seg {
    /// The index after the last instruction executed (a data abort's
    /// instruction does not count).
    pub fn exec_end(&self, prog: &Program) -> usize {
        match self.end {
            SegEnd::Term { .. } => prog.blocks[self.block].instrs.len(),
            SegEnd::Exception { at, .. } => at,
        }
    }
    /// Whether instruction `i` passed its condition check.
    pub fn passed(&self, i: usize) -> bool {
        i >= 64 || self.fails & (1 << i) == 0
    }
}

/// How often things happen in a walk.
#[derive(Clone, Copy, Debug)]
pub struct WalkConfig {
    /// Interrupts (IRQ or FIQ): one in this many instruction boundaries;
    /// 0 for none.
    pub irq_period: u64,
    /// Data aborts: one in this many loads and stores; 0 for none.
    pub abort_period: u64,
}

/// Walks `steps` segments from the entry, keeping a call stack so returns
/// go back to their callers (a return with no caller goes anywhere).
/// Exceptions are not taken inside handlers.
pub fn walk(rng: &mut Rng, prog: &Program, steps: usize, cfg: &WalkConfig) -> Vec<Seg> {
    let mut out = Vec::with_capacity(steps);
    let mut calls: Vec<usize> = Vec::new();
    let mut exc_return: Option<(usize, usize)> = None;
    let mut cur = (prog.entry, 0usize);
    let any_main = |rng: &mut Rng| prog.main[rng.below(prog.main.len() as u64) as usize];
    for _ in 0..steps {
        let b = &prog.blocks[cur.0];
        let start = cur.1;
        let ti = b.term_index();
        let mut exc = None;
        if !b.handler && exc_return.is_none() && !prog.vectors.is_empty() {
            for idx in start..=ti {
                let k = b.instrs[idx].kind;
                let in_it = idx > 0 && b.instrs[idx - 1].kind == InstrKind::It;
                if cfg.irq_period > 0 && !in_it && rng.chance(1, cfg.irq_period) {
                    exc = Some((idx, if rng.chance(1, 4) { ExcKind::Fiq } else { ExcKind::Irq }));
                    break;
                }
                if k == InstrKind::Mem && cfg.abort_period > 0 && rng.chance(1, cfg.abort_period) {
                    exc = Some((idx, ExcKind::DataAbort));
                    break;
                }
                if k == InstrKind::Svc {
                    exc = Some((idx + 1, ExcKind::Svc));
                    break;
                }
            }
        }
        let exec_end = exc.map_or(ti, |e| e.0);
        let mut fails = 0u64;
        for idx in start..exec_end {
            if b.instrs[idx].kind == InstrKind::Cond && rng.chance(1, 3) {
                fails |= 1 << idx;
            }
        }
        if let Some((at, kind)) = exc {
            let vector = prog.vector(kind).expect("exceptions need a vector table");
            out.push(Seg {
                block: cur.0,
                start,
                end: SegEnd::Exception { at, kind, vector },
                fails,
            });
            exc_return = Some((cur.0, at));
            cur = (vector, 0);
            continue;
        }
        let fall = b.fall;
        let ret = |rng: &mut Rng, calls: &mut Vec<usize>| calls.pop().unwrap_or_else(|| any_main(rng));
        let (taken, next, next_start) = match b.term {
            Term::B(t) | Term::LdrPc(t) => (true, t, 0),
            Term::Cond(t) => {
                if rng.chance(1, 2) {
                    (true, t, 0)
                } else {
                    (false, fall.expect("conditional block falls through"), 0)
                }
            }
            Term::Bl(t) | Term::Blx(t) => {
                if calls.len() < 32 {
                    calls.push(fall.expect("call returns"));
                }
                (true, t, 0)
            }
            Term::BlxReg => {
                if calls.len() < 32 {
                    calls.push(fall.expect("call returns"));
                }
                (true, any_main(rng), 0)
            }
            Term::Bx => (true, any_main(rng), 0),
            Term::Ret => (true, ret(rng, &mut calls), 0),
            Term::CondRet => {
                if rng.chance(1, 2) {
                    (true, ret(rng, &mut calls), 0)
                } else {
                    (false, fall.expect("conditional block falls through"), 0)
                }
            }
            Term::Isb => (true, fall.expect("ISB falls through"), 0),
            Term::ExcRet => {
                let (blk, at) = exc_return.take().expect("exception return in a handler");
                (true, blk, at)
            }
        };
        out.push(Seg {
            block: cur.0,
            start,
            end: SegEnd::Term {
                taken,
                next,
                next_start,
            },
            fails,
        });
        cur = (next, next_start);
    }
    out
}

// ---- snapshot assembly ----

/// One trace source's generated trace, before it goes into a buffer.
pub struct Source {
    pub trace_id: u8,
    /// The trace source device (registers).
    pub device: DeviceSpec,
    /// The traced core, with its memory dumps.
    pub core: DeviceSpec,
    pub bytes: Vec<u8>,
    /// Truth items with the index of the byte of `bytes` whose packet
    /// makes a decoder output them (`usize::MAX`: at the end of trace).
    pub truth: Vec<(usize, Truth)>,
}

/// Memory dumps of a program's regions, as a core device.
pub fn core_device(name: &str, core_type: &str, prog: &Program, file_prefix: &str) -> DeviceSpec {
    let mut core = DeviceSpec::core(name, core_type);
    for (i, r) in prog.regions.iter().enumerate() {
        core.dumps.push(crate::snapshot_writer::DumpSpec {
            file: format!("{file_prefix}_{i}.bin"),
            address: r.base,
            data: r.code.clone(),
            space: String::new(),
        });
    }
    core
}

/// A snapshot of one buffer holding `sources`: unformatted (one source
/// only) or in CoreSight frames, the sources' bytes interleaved in uneven
/// pieces as a funnel would. The truth is merged in decode order: the
/// deformatter hands each frame's bytes to the decoders in buffer order,
/// so items come in the order of the bytes that produce them; items at
/// the end of trace come last, by trace ID.
pub fn snapshot(description: String, sources: Vec<Source>, formatted: bool, rng: &mut Rng) -> Generated {
    assert!(!sources.is_empty());
    assert!(
        formatted || sources.len() == 1,
        "several sources need a formatted buffer"
    );
    let (data, format, positions) = if formatted {
        let mut f = FrameFormatter::new(FormatterConfig::default());
        let mut pos: Vec<Vec<usize>> = sources.iter().map(|s| Vec::with_capacity(s.bytes.len())).collect();
        let mut cursor = vec![0usize; sources.len()];
        let mut global = 0usize;
        loop {
            let live: Vec<usize> = (0..sources.len())
                .filter(|&s| cursor[s] < sources[s].bytes.len())
                .collect();
            if live.is_empty() {
                break;
            }
            let s = live[rng.below(live.len() as u64) as usize];
            let n = (1 + rng.below(24) as usize).min(sources[s].bytes.len() - cursor[s]);
            f.push(sources[s].trace_id, &sources[s].bytes[cursor[s]..cursor[s] + n]);
            for _ in 0..n {
                pos[s].push(global);
                global += 1;
            }
            cursor[s] += n;
        }
        (f.finish(), "coresight", pos)
    } else {
        let s = &sources[0];
        (s.bytes.clone(), "source_data", vec![(0..s.bytes.len()).collect()])
    };
    let mut keyed: Vec<((usize, u8), usize, Truth)> = Vec::new();
    for (s, src) in sources.iter().enumerate() {
        for (emit, t) in &src.truth {
            let key = if *emit == usize::MAX {
                (usize::MAX, src.trace_id)
            } else {
                (positions[s][*emit], 0)
            };
            keyed.push((key, keyed.len(), t.clone()));
        }
    }
    keyed.sort_by_key(|k| (k.0, k.1));
    let truth = keyed.into_iter().map(|k| k.2).collect();

    let mut devices = Vec::new();
    let mut source_buffers = Vec::new();
    let mut core_trace_sources = Vec::new();
    for s in &sources {
        devices.push(s.core.clone());
        devices.push(s.device.clone());
        source_buffers.push((s.device.name.clone(), "ETB_0".to_string()));
        core_trace_sources.push((s.core.name.clone(), s.device.name.clone()));
    }
    let spec = SnapshotSpec {
        description,
        devices,
        buffers: vec![BufferSpec {
            name: "ETB_0".into(),
            file: "trace.bin".into(),
            format: format.into(),
            data,
        }],
        source_buffers,
        core_trace_sources,
    };
    Generated { spec, truth }
}

/// A PTM or ETMv3 trace source device: its ETMCR, ETMIDR and ETMCCER
/// values, and trace ID.
pub(crate) fn etm_device(
    name: &str,
    device_type: &str,
    etmcr: u64,
    etmidr: u64,
    etmccer: u64,
    trace_id: u8,
) -> DeviceSpec {
    DeviceSpec::trace_source(
        name,
        device_type,
        vec![
            ("ETMCR(0x000)".into(), etmcr),
            ("ETMIDR(0x079)".into(), etmidr),
            ("ETMCCER(0x07A)".into(), etmccer),
            ("ETMTRACEIDR(0x080)".into(), trace_id as u64),
        ],
    )
}

/// The snapshot `trc_gen <protocol>` makes for one source: `make(rng,
/// length, base, trace_id)` builds it, for a program at one of three
/// bases, on a trace ID from 0x10 to 0x2f.
pub(crate) fn single_source(
    opts: &GenOptions,
    protocol: &str,
    make: impl FnOnce(&mut Rng, usize, u64, u8) -> Source,
) -> Generated {
    let mut rng = Rng::new(opts.seed);
    let base = [0x8000_0000u64, 0xc000_8000, 0x0001_0000][rng.below(3) as usize];
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let src = make(&mut rng, opts.length, base, trace_id);
    let formatted = opts.layout == BufferLayout::Formatted;
    snapshot(
        format!("trc_gen {protocol} seed {}", opts.seed),
        vec![src],
        formatted,
        &mut rng,
    )
}

// ---- small encoding helpers shared by the encoders ----

/// Binary to Gray code.
pub(crate) fn gray(v: u64) -> u64 {
    v ^ (v >> 1)
}

/// Bits needed to cover the highest bit set in `v` (0 for 0).
pub(crate) fn bits_needed(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Decoding generated trace, and the encoders' statistics, in tests.
#[cfg(test)]
pub(crate) mod testing {
    use coresight_decode::shared::Lock;
    use std::collections::BTreeMap;
    use std::ops::Range;
    use std::sync::Arc;

    use super::{Rng, Source};
    use coresight_decode::arch::ArchProfile;
    use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
    use coresight_decode::decoder::{CoreConfig, DecodeMode, SourceConfig};
    use coresight_decode::element::TraceElement;
    use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
    use coresight_decode::memory::{BufferAccessor, MemSpace};
    use coresight_decode::tree::{DecodeTree, SourceFormat};

    struct Collect(Arc<Lock<Vec<TraceElement>>>);

    impl TrcGenElemIn for Collect {
        fn trace_elem_in(&mut self, _index: TrcIndex, _id: u8, elem: &TraceElement) -> DatapathResp {
            self.0.borrow_mut().push(*elem);
            DatapathResp::Cont
        }
    }

    /// Decodes one source's bytes (unformatted); returns every element.
    pub(crate) fn decode_elements(src: &Source) -> Vec<TraceElement> {
        let mut tree = DecodeTree::new(SourceFormat::Single, DecodeMode::FullDecode);
        let cfg = SourceConfig {
            name: src.device.name.clone(),
            device_type: src.device.device_type.clone(),
            regs: src
                .device
                .regs
                .iter()
                .map(|(n, v)| (n.split('(').next().unwrap().to_string(), *v))
                .collect(),
            core: Some(CoreConfig {
                name: src.core.name.clone(),
                core_type: src.core.device_type.clone(),
                profile: ArchProfile::from_core_name(&src.core.device_type).unwrap(),
            }),
        };
        let name = tree
            .registry()
            .for_device_type(&cfg.device_type)
            .unwrap()
            .protocol_name()
            .to_string();
        tree.create_decoder(&name, &cfg).unwrap();
        let mapper = tree.mem_mapper().unwrap().clone();
        for d in &src.core.dumps {
            let acc = BufferAccessor::new(d.address, d.data.clone(), MemSpace::ANY).unwrap();
            mapper.borrow_mut().add_accessor(Box::new(acc)).unwrap();
        }
        let got = Arc::new(Lock::new(Vec::new()));
        tree.set_gen_elem_out(Box::new(Collect(got.clone())));
        let (resp, used) = tree.trace_data_in(DatapathOp::Data, 0, &src.bytes);
        assert!(resp.is_cont() && used == src.bytes.len(), "{resp:?} {used}");
        tree.trace_data_in(DatapathOp::Eot, 0, &[]);
        std::mem::take(&mut *got.borrow_mut())
    }

    /// An encoder's counts of what it put in the trace.
    pub(crate) type Stats = BTreeMap<&'static str, usize>;

    /// `stats(rng)` summed over the seeds.
    pub(crate) fn sum_stats(seeds: Range<u64>, stats: impl Fn(&mut Rng) -> Stats) -> Stats {
        let mut sum = Stats::new();
        for seed in seeds {
            for (k, v) in stats(&mut Rng::new(seed)) {
                *sum.entry(k).or_default() += v;
            }
        }
        sum
    }

    /// How many times `key` was counted.
    pub(crate) fn count(stats: &Stats, key: &str) -> usize {
        stats.get(key).copied().unwrap_or(0)
    }

    /// Each of `keys` is counted with an option on (`stats(true)`) and
    /// never with it off.
    pub(crate) fn assert_only_when_on(stats: impl Fn(bool) -> Stats, keys: &[&str]) {
        let (on, off) = (stats(true), stats(false));
        for k in keys {
            assert!(count(&on, k) > 0, "{k} never seen: {on:?}");
            assert_eq!(count(&off, k), 0, "{k} seen when off: {off:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrSubType, InstrType};
    use coresight_decode::instr::ArmInstrDecoder;
    use coresight_decode::interfaces::InstrDecode;

    fn classify(dec: &mut ArmInstrDecoder, isa: Isa, addr: u64, op: u32) -> InstrInfo {
        let mut info = InstrInfo {
            pe_type: ArchProfile::new(ArchVersion::V7, CoreProfile::CortexA),
            isa,
            instr_addr: addr,
            opcode: op,
            ..Default::default()
        };
        dec.decode_instruction(&mut info).unwrap();
        info
    }

    fn read_op(p: &Program, addr: u64) -> u32 {
        let r = p
            .regions
            .iter()
            .find(|r| addr >= r.base && addr + 4 <= r.base + r.code.len() as u64)
            .expect("mapped");
        let at = (addr - r.base) as usize;
        u32::from_le_bytes(r.code[at..at + 4].try_into().unwrap())
    }

    /// Every generated instruction classifies as the generator meant it,
    /// in memory as it will be read.
    #[test]
    fn generated_code_classifies_as_intended() {
        let mut dec = ArmInstrDecoder::default();
        for seed in 0..60 {
            let mut rng = Rng::new(seed);
            let isa = [IsaMix::A32, IsaMix::T32, IsaMix::Mixed][seed as usize % 3];
            let cfg = ProgramConfig {
                base: 0x8000_0000,
                blocks: 40,
                isa,
                exceptions: true,
            };
            let p = Program::generate(&mut rng, &cfg);
            for (bi, b) in p.blocks.iter().enumerate() {
                for (i, ins) in b.instrs.iter().enumerate() {
                    let op = read_op(&p, ins.addr);
                    let info = classify(&mut dec, b.isa, ins.addr, op);
                    assert_eq!(
                        info.instr_size, ins.size,
                        "block {bi} instr {i} at {:#x} op {op:#010x}",
                        ins.addr
                    );
                    let what = format!(
                        "seed {seed} block {bi} {:?} instr {i} at {:#x} op {op:#010x}",
                        b.term, ins.addr
                    );
                    if ins.kind != InstrKind::Term {
                        assert_eq!(info.instr_type, InstrType::Other, "{what}");
                        continue;
                    }
                    match b.term {
                        Term::B(t) | Term::Bl(t) | Term::Blx(t) | Term::Cond(t) => {
                            assert_eq!(info.instr_type, InstrType::Branch, "{what}");
                            assert_eq!(info.branch_addr, p.blocks[t].addr, "{what}");
                            assert_eq!(info.next_isa, p.blocks[t].isa, "{what}");
                            assert_eq!(info.is_link, b.term.is_call(), "{what}");
                        }
                        Term::Isb => assert_eq!(info.instr_type, InstrType::Isb, "{what}"),
                        _ => {
                            assert_eq!(info.instr_type, InstrType::BranchIndirect, "{what}");
                            assert_eq!(info.is_link, b.term == Term::BlxReg, "{what}");
                            if b.term == Term::Ret {
                                assert_eq!(info.sub_type, InstrSubType::V7ImpliedRet, "{what}");
                            }
                        }
                    }
                }
                if let Some(f) = b.fall {
                    assert_eq!(p.blocks[f].addr, b.end());
                    assert_eq!(p.blocks[f].isa, b.isa);
                }
            }
            for &(kind, v) in &p.vectors {
                assert_eq!(p.blocks[v].addr, p.vbar + kind.vector_offset());
                if let Term::LdrPc(t) = p.blocks[v].term {
                    let lit = read_op(&p, p.vbar + kind.vector_offset() + 0x20) as u64;
                    assert_eq!(lit, p.interwork_addr(t));
                }
            }
        }
    }

    #[test]
    fn walks_follow_the_program() {
        for seed in 0..30 {
            let mut rng = Rng::new(seed);
            let cfg = ProgramConfig {
                base: 0x1000_0000,
                blocks: 30,
                isa: IsaMix::Mixed,
                exceptions: true,
            };
            let p = Program::generate(&mut rng, &cfg);
            let w = walk(
                &mut rng,
                &p,
                400,
                &WalkConfig {
                    irq_period: 20,
                    abort_period: 5,
                },
            );
            assert_eq!(w.len(), 400);
            assert_eq!((w[0].block, w[0].start), (p.entry, 0));
            let mut exceptions = 0;
            for pair in w.windows(2) {
                match pair[0].end {
                    SegEnd::Term {
                        taken,
                        next,
                        next_start,
                    } => {
                        assert_eq!((pair[1].block, pair[1].start), (next, next_start));
                        if !taken {
                            assert_eq!(Some(pair[1].block), p.blocks[pair[0].block].fall);
                        }
                    }
                    SegEnd::Exception { vector, at, .. } => {
                        exceptions += 1;
                        assert_eq!((pair[1].block, pair[1].start), (vector, 0));
                        assert!(at <= p.blocks[pair[0].block].term_index());
                    }
                }
            }
            assert!(exceptions > 0, "seed {seed}");
        }
    }
}
