//! Object coverage: which instructions of a program's routines ran, and
//! which way its conditional branches went, from execution entries.
//!
//! The program is a [`CodeImage`]: code bytes, routines (an ELF's function
//! symbols, or memory regions), and where the code is in which instruction
//! set (ELF mapping symbols `$a`/`$t`/`$x`, with `$d` marking data). The
//! evidence is a list of [`Entry`]s, as a flat trace holds them:
//!
//! - every instruction that starts inside an entry's bytes ran (`Block`
//!   and `Fault` entries alike: a fault entry covers what ran before the
//!   exception);
//! - a conditional branch that ends an entry went the way the entry's op
//!   says: `Br0` taken, `Br1` fall-through;
//! - a conditional branch inside an entry, followed by more of it, fell
//!   through.
//!
//! Each instruction then gets gnatcov's state and mark: `-` not executed,
//! `+` covered (for a conditional branch: both ways), `>` branch always
//! taken, `v` never taken (always fell through). A conditional branch that
//! ran without saying which way counts as covered and partially covered
//! (it only happens with traces from elsewhere that lack `Br0`/`Br1`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Write as _};

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrType, Isa};
use coresight_decode::instr::ArmInstrDecoder;
use coresight_decode::interfaces::InstrDecode;

use super::format::{EM_AARCH64, EM_ARM, EM_RISCV, Entry, Op};

/// A routine: a named address range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routine {
    /// The routine's symbol name.
    pub name: String,
    /// Address of its first byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Instruction set where no mapping symbol says otherwise.
    pub isa: Isa,
}

/// What the bytes at an address are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Instructions of the given set (`$a`, `$t`, `$x` mapping symbols).
    Code(Isa),
    /// Data (`$d` mapping symbol).
    Data,
}

/// Code, routines and instruction-set mapping of a program.
#[derive(Clone, Debug, Default)]
pub struct CodeImage {
    /// (address, bytes), sorted, not overlapping.
    pub segments: Vec<(u64, Vec<u8>)>,
    /// Sorted by start address.
    pub routines: Vec<Routine>,
    /// Mapping symbols (address, what starts there), sorted.
    pub mapping: Vec<(u64, Mapping)>,
    /// ELF machine (EM_ARM, EM_AARCH64, EM_RISCV).
    pub machine: u16,
}

/// Reading an ELF failed.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file is not a readable ELF file; the parser's message.
    #[error("not an ELF file: {0}")]
    NotElf(String),
    /// The ELF machine number is not one gnatcov traces are made for here.
    #[error("ELF machine {0} is not Arm, AArch64 or RISC-V")]
    Machine(u16),
    /// A section's contents run past the end of the file.
    #[error("section {name} at file offset {offset} runs past the end of the file")]
    SectionPastEnd {
        /// The section's name.
        name: String,
        /// Its offset in the file.
        offset: u64,
    },
    /// No routine of that name.
    #[error("no routine named {0}")]
    NoRoutine(String),
}

impl CodeImage {
    /// From an ELF executable: its executable sections, function symbols
    /// (of non-zero size) as routines, its mapping symbols. A stripped
    /// executable (no function symbols) has one routine per executable
    /// section, named after it (`.text`).
    pub fn from_elf(bytes: &[u8]) -> Result<CodeImage, ImageError> {
        use goblin::elf::{Elf, section_header, sym};
        let elf = Elf::parse(bytes).map_err(|e| ImageError::NotElf(e.to_string()))?;
        let machine = elf.header.e_machine;
        if machine != EM_ARM && machine != EM_AARCH64 && machine != EM_RISCV {
            return Err(ImageError::Machine(machine));
        }
        // RISC-V has no mapping symbols nor interworking bit: like A64.
        let rv = machine == EM_RISCV;
        let a64 = machine == EM_AARCH64 || rv;
        let mut segments = Vec::new();
        let mut names = Vec::new();
        for sh in &elf.section_headers {
            let exec = sh.sh_flags & (section_header::SHF_ALLOC | section_header::SHF_EXECINSTR) as u64
                == (section_header::SHF_ALLOC | section_header::SHF_EXECINSTR) as u64;
            if !exec || sh.sh_type != section_header::SHT_PROGBITS || sh.sh_size == 0 {
                continue;
            }
            let name = elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("?").to_string();
            let data = (sh.sh_offset as usize)
                .checked_add(sh.sh_size as usize)
                .and_then(|end| bytes.get(sh.sh_offset as usize..end))
                .ok_or_else(|| ImageError::SectionPastEnd {
                    name: name.clone(),
                    offset: sh.sh_offset,
                })?;
            segments.push((sh.sh_addr, data.to_vec()));
            names.push((sh.sh_addr, name));
        }
        segments.sort_by_key(|s| s.0);
        names.sort_by_key(|n| n.0);
        let in_code = |a: u64| segments.iter().any(|(b, d)| a >= *b && a - b < d.len() as u64);
        let mut routines: BTreeMap<u64, Routine> = BTreeMap::new();
        let mut mapping = Vec::new();
        for s in elf.syms.iter() {
            let name = elf.strtab.get_at(s.st_name).unwrap_or("");
            let map = match name.split('.').next().unwrap_or("") {
                "$a" => Some(Mapping::Code(Isa::Arm)),
                "$t" => Some(Mapping::Code(Isa::Thumb2)),
                "$x" => Some(Mapping::Code(Isa::Aarch64)),
                "$d" => Some(Mapping::Data),
                _ => None,
            };
            if let Some(m) = map {
                if in_code(s.st_value) {
                    mapping.push((s.st_value, m));
                }
                continue;
            }
            if s.st_type() != sym::STT_FUNC || s.st_size == 0 || name.is_empty() {
                continue;
            }
            let thumb = !a64 && s.st_value & 1 != 0;
            let start = if a64 { s.st_value } else { s.st_value & !1 };
            if !in_code(start) {
                continue;
            }
            let isa = if rv {
                Isa::RiscV
            } else if a64 {
                Isa::Aarch64
            } else if thumb {
                Isa::Thumb2
            } else {
                Isa::Arm
            };
            // Aliases: the first global name wins, else the first name.
            let r = Routine {
                name: name.to_string(),
                start,
                end: start.saturating_add(s.st_size),
                isa,
            };
            match routines.get(&start) {
                Some(old) if !(s.st_bind() == sym::STB_GLOBAL && old.name.starts_with('.')) => {}
                _ => {
                    routines.insert(start, r);
                }
            }
        }
        // A stripped executable: its executable sections are the routines.
        if routines.is_empty() {
            let isa = if rv {
                Isa::RiscV
            } else if a64 {
                Isa::Aarch64
            } else {
                Isa::Arm
            };
            for ((start, data), (_, name)) in segments.iter().zip(&names) {
                routines.insert(
                    *start,
                    Routine {
                        name: name.clone(),
                        start: *start,
                        end: start.saturating_add(data.len() as u64),
                        isa,
                    },
                );
            }
        }
        mapping.sort_by_key(|m| m.0);
        mapping.dedup_by_key(|m| m.0);
        Ok(CodeImage {
            segments,
            routines: routines.into_values().collect(),
            mapping,
            machine,
        })
    }

    /// From memory regions (a snapshot's dumps): one routine per region,
    /// named `mem_<address>`, all in `isa`.
    pub fn from_regions(regions: Vec<(u64, Vec<u8>)>, isa: Isa) -> CodeImage {
        let mut segments = regions;
        segments.sort_by_key(|s| s.0);
        let routines = segments
            .iter()
            .filter(|(_, d)| !d.is_empty())
            .map(|(a, d)| Routine {
                name: format!("mem_{a:x}"),
                start: *a,
                end: a.saturating_add(d.len() as u64),
                isa,
            })
            .collect();
        let machine = match isa {
            Isa::Aarch64 => EM_AARCH64,
            Isa::RiscV => EM_RISCV,
            _ => EM_ARM,
        };
        CodeImage {
            segments,
            routines,
            mapping: Vec::new(),
            machine,
        }
    }

    /// Keeps only the routines named (in the image's order). An unknown
    /// name is an error.
    pub fn restrict(&mut self, names: &[String]) -> Result<(), ImageError> {
        for n in names {
            if !self.routines.iter().any(|r| &r.name == n) {
                return Err(ImageError::NoRoutine(n.clone()));
            }
        }
        let keep: HashSet<&String> = names.iter().collect();
        self.routines.retain(|r| keep.contains(&r.name));
        Ok(())
    }

    /// Up to `buf.len()` bytes at `addr`, from one segment.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        let i = self.segments.partition_point(|s| s.0 <= addr);
        if i == 0 {
            return 0;
        }
        let (base, data) = &self.segments[i - 1];
        let off = (addr - base) as usize;
        if off >= data.len() {
            return 0;
        }
        let n = buf.len().min(data.len() - off);
        buf[..n].copy_from_slice(&data[off..off + n]);
        n
    }

    /// What the bytes at `addr` in `r` are: the last mapping symbol at or
    /// before it inside the routine, else the routine's instruction set.
    pub fn mapping_at(&self, r: &Routine, addr: u64) -> Mapping {
        let i = self.mapping.partition_point(|m| m.0 <= addr);
        match i.checked_sub(1).map(|j| self.mapping[j]) {
            Some((a, m)) if a >= r.start => m,
            _ => Mapping::Code(r.isa),
        }
    }

    /// The routine containing `addr`.
    pub fn routine_at(&self, addr: u64) -> Option<&Routine> {
        let i = self.routines.partition_point(|r| r.start <= addr);
        i.checked_sub(1).map(|j| &self.routines[j]).filter(|r| addr < r.end)
    }
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Address of the instruction.
    pub addr: u64,
    /// Size in bytes.
    pub size: u8,
    /// Instruction set.
    pub isa: Isa,
    /// The bytes, in memory order (`size` of them; data units have 2 or 4).
    pub bytes: [u8; 4],
    /// A conditional branch (its two outcomes are counted).
    pub cond_branch: bool,
    /// Not an instruction: data (mapping symbol `$d`), or bytes cut short.
    pub data: bool,
}

/// Instruction classifier over an image.
struct Decoder {
    dec: ArmInstrDecoder,
}

impl Decoder {
    fn new() -> Decoder {
        Decoder {
            dec: ArmInstrDecoder::new(),
        }
    }
    /// The instruction at `addr` in `isa`, reading at most up to `limit`.
    fn at(&mut self, img: &CodeImage, addr: u64, isa: Isa, limit: u64) -> Option<Insn> {
        let mut b = [0u8; 4];
        let avail = (limit.saturating_sub(addr)).min(4) as usize;
        let n = img.read(addr, &mut b[..avail]);
        let mut info = InstrInfo {
            pe_type: ArchProfile::new(ArchVersion::Aa64, CoreProfile::CortexA),
            isa,
            instr_addr: addr,
            track_it_block: true,
            ..Default::default()
        };
        let size = match isa {
            Isa::Thumb2 => {
                if n < 2 {
                    return None;
                }
                let hw = u16::from_le_bytes([b[0], b[1]]);
                if coresight_decode::instr::is_wide_thumb(hw) {
                    if n < 4 {
                        return Some(Insn {
                            addr,
                            size: 2,
                            isa,
                            bytes: b,
                            cond_branch: false,
                            data: true,
                        });
                    }
                    info.opcode = u32::from_le_bytes(b);
                    4
                } else {
                    info.opcode = hw as u32;
                    2
                }
            }
            Isa::Arm | Isa::Aarch64 => {
                if n < 4 {
                    return if n >= 2 {
                        Some(Insn {
                            addr,
                            size: 2,
                            isa,
                            bytes: b,
                            cond_branch: false,
                            data: true,
                        })
                    } else {
                        None
                    };
                }
                info.opcode = u32::from_le_bytes(b);
                4
            }
            Isa::RiscV => {
                if n < 2 {
                    return None;
                }
                // Low two bits 0b11: 32 bits, else a compressed (C) one.
                let hw = u16::from_le_bytes([b[0], b[1]]);
                let size = if hw & 3 == 3 { 4 } else { 2 };
                if n < size {
                    return Some(Insn {
                        addr,
                        size: 2,
                        isa,
                        bytes: b,
                        cond_branch: false,
                        data: true,
                    });
                }
                let op = if size == 4 { u32::from_le_bytes(b) } else { hw as u32 };
                return Some(Insn {
                    addr,
                    size: size as u8,
                    isa,
                    bytes: b,
                    cond_branch: riscv_cond_branch(op),
                    data: false,
                });
            }
            _ => return None,
        };
        self.dec.decode_instruction(&mut info).ok()?;
        let branch = matches!(info.instr_type, InstrType::Branch | InstrType::BranchIndirect);
        Some(Insn {
            addr,
            size,
            isa,
            bytes: b,
            cond_branch: branch && info.is_conditional,
            data: false,
        })
    }
}

/// Whether the RISC-V instruction `op` (a 16-bit one in the low half) is a
/// conditional branch: B-type `beq`, `bne`, `blt`, `bge`, `bltu`, `bgeu`
/// (opcode 0x63, funct3 not 2 or 3), or `c.beqz`, `c.bnez` (quadrant 1,
/// funct3 6 or 7). The same on RV32 and RV64.
pub fn riscv_cond_branch(op: u32) -> bool {
    if op & 3 == 3 {
        op & 0x7f == 0x63 && !matches!((op >> 12) & 7, 2 | 3)
    } else {
        op & 3 == 1 && (op >> 13) & 7 >= 6
    }
}

/// Evidence gathered from entries, by address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Execution {
    /// Start addresses of instructions that ran.
    executed: HashSet<u64>,
    /// Conditional branches: bit 0 taken, bit 1 fell through.
    outcomes: HashMap<u64, u8>,
    /// Conditional branches that ran ending an entry without Br0/Br1.
    unknown: HashSet<u64>,
}

impl Execution {
    /// Walks each entry's instructions in the image. Entries outside the
    /// image's routines are ignored.
    pub fn from_entries<'a>(img: &CodeImage, entries: impl IntoIterator<Item = &'a Entry>) -> Execution {
        let mut x = Execution::default();
        let mut dec = Decoder::new();
        let mut seen: HashSet<Entry> = HashSet::new();
        for e in entries {
            if e.op.special() || e.size == 0 || !seen.insert(*e) {
                continue;
            }
            let Some(end) = e.pc.checked_add(e.size as u64) else {
                continue;
            };
            let Some(r) = img.routine_at(e.pc) else { continue };
            let mut pc = e.pc;
            dec.dec.reset_it_block();
            while pc < end {
                let Mapping::Code(isa) = img.mapping_at(r, pc) else {
                    break;
                };
                let Some(i) = dec.at(img, pc, isa, r.end.max(end)) else {
                    break;
                };
                x.executed.insert(pc);
                let Some(next) = pc.checked_add(i.size as u64) else {
                    break;
                };
                if i.cond_branch && !i.data {
                    if next < end {
                        *x.outcomes.entry(pc).or_default() |= 2;
                    } else if next == end {
                        let o = (e.op.has(Op::BR0) as u8) | (e.op.has(Op::BR1) as u8) << 1;
                        if o == 0 {
                            x.unknown.insert(pc);
                        } else {
                            *x.outcomes.entry(pc).or_default() |= o;
                        }
                    }
                }
                pc = next;
            }
        }
        x
    }
    /// Adds another run's evidence.
    pub fn merge(&mut self, other: &Execution) {
        self.executed.extend(other.executed.iter().copied());
        for (a, o) in &other.outcomes {
            *self.outcomes.entry(*a).or_default() |= o;
        }
        self.unknown.extend(other.unknown.iter().copied());
    }
}

/// Coverage state of one instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InsnState {
    /// Not executed.
    NotCovered,
    /// Executed (not a conditional branch).
    Covered,
    /// A conditional branch always taken.
    BranchTaken,
    /// A conditional branch never taken.
    FallthroughTaken,
    /// A conditional branch taken both ways.
    BothTaken,
}

impl InsnState {
    /// gnatcov's mark.
    pub fn mark(self) -> char {
        match self {
            InsnState::NotCovered => '-',
            InsnState::Covered | InsnState::BothTaken => '+',
            InsnState::BranchTaken => '>',
            InsnState::FallthroughTaken => 'v',
        }
    }
}

/// One instruction with its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsnCoverage {
    /// The instruction.
    pub insn: Insn,
    /// Its coverage state.
    pub state: InsnState,
}

/// Counts, as gnatcov's summary gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Summary {
    /// Instructions analysed.
    pub insns: usize,
    /// Instructions executed.
    pub covered: usize,
    /// Conditional branches analysed.
    pub branches: usize,
    /// Conditional branches taken both ways.
    pub fully: usize,
    /// Conditional branches taken one way only.
    pub partially: usize,
    /// Conditional branches never executed.
    pub branch_not_executed: usize,
}

impl Summary {
    /// Adds another summary's counts to this one.
    pub fn add(&mut self, o: &Summary) {
        self.insns += o.insns;
        self.covered += o.covered;
        self.branches += o.branches;
        self.fully += o.fully;
        self.partially += o.partially;
        self.branch_not_executed += o.branch_not_executed;
    }
}

impl fmt::Display for Summary {
    /// gnatcov's summary lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} instructions analyzed:", self.insns)?;
        writeln!(f, "  {} covered", self.covered)?;
        writeln!(f, "  {} not executed", self.insns - self.covered)?;
        writeln!(f, "{} conditional branches analyzed:", self.branches)?;
        writeln!(f, "  {} fully covered", self.fully)?;
        writeln!(f, "  {} partially covered", self.partially)?;
        writeln!(f, "  {} not executed", self.branch_not_executed)
    }
}

/// Coverage of one routine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutineCoverage {
    /// The routine.
    pub routine: Routine,
    /// Its instructions, in address order, with their states.
    pub insns: Vec<InsnCoverage>,
    /// Its counts.
    pub summary: Summary,
}

impl RoutineCoverage {
    /// The routine's mark: `+` all covered, `-` nothing, `!` partly.
    pub fn mark(&self) -> char {
        let s = &self.summary;
        if s.covered == 0 {
            '-'
        } else if s.covered == s.insns && s.fully == s.branches {
            '+'
        } else {
            '!'
        }
    }
}

/// Coverage of every routine of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coverage {
    /// Each routine's coverage, in address order.
    pub routines: Vec<RoutineCoverage>,
    /// Counts over all routines.
    pub total: Summary,
}

impl Coverage {
    /// Decodes each routine's instructions (linearly from its start,
    /// restarting at any address the trace says an instruction started,
    /// skipping `$d` data) and gives each its state.
    pub fn compute(img: &CodeImage, x: &Execution) -> Coverage {
        let mut dec = Decoder::new();
        let mut starts: Vec<u64> = x.executed.iter().copied().collect();
        starts.sort_unstable();
        let mut routines = Vec::new();
        let mut total = Summary::default();
        for r in &img.routines {
            let mut insns = Vec::new();
            let mut s = Summary::default();
            let mut pc = r.start;
            dec.dec.reset_it_block();
            let mut next_start = starts.partition_point(|&a| a <= r.start);
            while pc < r.end {
                while next_start < starts.len() && starts[next_start] <= pc {
                    next_start += 1;
                }
                let sync = starts.get(next_start).copied().filter(|&a| a < r.end);
                let insn = match img.mapping_at(r, pc) {
                    Mapping::Data => {
                        // Skip to the next mapping symbol (or the end).
                        let i = img.mapping.partition_point(|m| m.0 <= pc);
                        let to = img.mapping.get(i).map_or(r.end, |m| m.0.min(r.end));
                        pc = to.max(pc.saturating_add(1));
                        if pc == u64::MAX {
                            break;
                        }
                        continue;
                    }
                    Mapping::Code(isa) => dec.at(img, pc, isa, r.end),
                };
                let Some(mut insn) = insn else { break };
                // An instruction the trace says starts inside this one: the
                // linear decode was off (data in code); restart there.
                if let Some(a) = sync.filter(|&a| a - pc < insn.size as u64) {
                    insn.size = (a - pc) as u8;
                    insn.data = true;
                }
                let Some(next) = pc.checked_add(insn.size as u64) else {
                    break;
                };
                pc = next;
                if insn.data {
                    continue;
                }
                let ran = x.executed.contains(&insn.addr);
                let state = if !ran {
                    InsnState::NotCovered
                } else if insn.cond_branch {
                    match x.outcomes.get(&insn.addr).copied().unwrap_or(0) {
                        3 => InsnState::BothTaken,
                        1 => InsnState::BranchTaken,
                        2 => InsnState::FallthroughTaken,
                        _ => InsnState::Covered,
                    }
                } else {
                    InsnState::Covered
                };
                s.insns += 1;
                s.covered += ran as usize;
                if insn.cond_branch {
                    s.branches += 1;
                    match state {
                        InsnState::NotCovered => s.branch_not_executed += 1,
                        InsnState::BothTaken => s.fully += 1,
                        _ => s.partially += 1,
                    }
                }
                insns.push(InsnCoverage { insn, state });
            }
            total.add(&s);
            routines.push(RoutineCoverage {
                routine: r.clone(),
                insns,
                summary: s,
            });
        }
        Coverage { routines, total }
    }

    /// The annotated disassembly: per routine a header line
    /// (`name !: first-last`), one line per instruction (`address mark:
    /// bytes  disassembly`), the routine's summary; then the total summary.
    /// `disasm` gives an instruction's text (empty if none).
    pub fn report(&self, digits: usize, disasm: &mut dyn FnMut(&Insn) -> String) -> String {
        let mut out = String::new();
        for rc in &self.routines {
            let r = &rc.routine;
            let _ = writeln!(
                out,
                "{} {}: {:0w$x}-{:0w$x}",
                r.name,
                rc.mark(),
                r.start,
                r.end.saturating_sub(1),
                w = digits
            );
            for ic in &rc.insns {
                let i = &ic.insn;
                let _ = write!(out, "{:0w$x} {}:  ", i.addr, ic.state.mark(), w = digits);
                for b in &i.bytes[..i.size as usize] {
                    let _ = write!(out, "{b:02x} ");
                }
                let text = disasm(i);
                let _ = writeln!(out, " {text}");
            }
            out.push('\n');
            let _ = write!(out, "{}", rc.summary);
            out.push('\n');
        }
        let _ = write!(out, "{}", self.total);
        out
    }
}
