//! Real executions as trace: an executed instruction stream (read from a
//! Tarmac file) and the program's memory image (an ELF's loadable
//! segments) encoded by the generator's trace units, so that decoders are
//! checked on programs nobody here wrote.
//!
//! The stream is cut into the generator's segments: runs of instructions
//! ending at a waypoint (classified from the opcode by
//! [`coresight_decode::instr::ArmInstrDecoder`]), taken unless the trace says the
//! condition failed. A change of flow that no waypoint explains (an
//! exception), and the instructions after the last waypoint, end a segment
//! with an exception, so that every executed instruction is traced.

use std::io::BufRead;

use goblin::elf::Elf;
use goblin::elf::program_header::PT_LOAD;

use super::a32t32;
use super::flow::{Cause, Ctx, End, Seg, Term};
use super::{BufferLayout, Generated};
use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrSubType, InstrType, Isa};
use coresight_decode::instr::ArmInstrDecoder;
use coresight_decode::interfaces::InstrDecode;
use coresight_tarmac::{Effect, Iset, Reader, RecordKind};

/// One instruction of an execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecInsn {
    pub addr: u64,
    pub isa: Isa,
    /// Size in bytes (2 or 4).
    pub size: u8,
    /// Opcode as [`InstrInfo::opcode`] takes it (T32: first halfword low).
    pub opcode: u32,
    /// False when the instruction failed its condition.
    pub executed: bool,
    pub el: u8,
    pub secure: bool,
}

/// Trace units that can encode an execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecProtocol {
    /// ETMv4 (A64 or A32 code).
    Etmv4,
    /// ETE (A64 code).
    Ete,
    /// PTM (A32/T32 code).
    Ptm,
    /// ETMv3 (A32/T32 code).
    Etmv3,
}

impl ExecProtocol {
    pub fn from_name(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "etmv4" | "etm4" | "etmv4i" => Some(ExecProtocol::Etmv4),
            "ete" => Some(ExecProtocol::Ete),
            "ptm" | "pft" => Some(ExecProtocol::Ptm),
            "etmv3" | "etm3" => Some(ExecProtocol::Etmv3),
            _ => None,
        }
    }
}

/// Exception level and security from a Tarmac mode (`EL3h_s`, `svc_s`,
/// `usr_n`): AArch32 modes map to the level they run at.
pub fn mode_context(mode: Option<&str>) -> (u8, bool) {
    let Some(m) = mode else { return (1, false) };
    let (name, sec) = m.rsplit_once('_').unwrap_or((m, ""));
    let secure = sec.eq_ignore_ascii_case("s");
    let lower = name.to_ascii_lowercase();
    let el = if let Some(rest) = lower.strip_prefix("el") {
        rest.bytes().next().map_or(1, |c| c.wrapping_sub(b'0').min(3))
    } else {
        match lower.as_str() {
            "usr" | "user" | "thread" | "thrd" => 0,
            "hyp" => 2,
            "mon" => 3,
            _ => 1,
        }
    };
    (el, secure)
}

/// The executed instructions of a Tarmac trace, in order.
pub fn insns_from_tarmac<R: BufRead>(r: &mut Reader<R>) -> Result<Vec<ExecInsn>, String> {
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().map_err(|e| e.to_string())? {
        let RecordKind::Instruction(i) = rec.kind else { continue };
        let Some(enc) = i.encoding else {
            return Err(format!(
                "line {}: instruction fetch failed: no opcode to encode",
                rec.line
            ));
        };
        let (isa, size, opcode) = match (i.iset, i.width) {
            (Iset::A64, _) => (Isa::Aarch64, 4, enc as u32),
            (Iset::Arm, _) => (Isa::Arm, 4, enc as u32),
            (Iset::Thumb, 16) => (Isa::Thumb2, 2, enc as u32 & 0xffff),
            (Iset::Thumb, _) => (Isa::Thumb2, 4, (enc as u32).rotate_left(16)),
            (Iset::RiscV, _) => {
                return Err(format!(
                    "line {}: a RISC-V instruction: only Arm code is encoded as CoreSight trace",
                    rec.line
                ));
            }
        };
        let (el, secure) = mode_context(i.mode);
        out.push(ExecInsn {
            addr: i.addr,
            isa,
            size,
            opcode,
            executed: i.effect != Effect::CcFail,
            el,
            secure,
        });
    }
    Ok(out)
}

/// [`insns_from_tarmac`] of the Tarmac file at `path` (the error names it).
pub fn insns_from_tarmac_file(path: &std::path::Path) -> Result<Vec<ExecInsn>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    insns_from_tarmac(&mut Reader::new(std::io::BufReader::new(f))).map_err(|e| format!("{}: {e}", path.display()))
}

/// The loadable segments of an ELF file: (address, bytes in the file).
pub fn elf_images(data: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let elf = Elf::parse(data).map_err(|e| format!("not a readable ELF file ({e})"))?;
    let mut out = Vec::new();
    for ph in &elf.program_headers {
        if ph.p_type != PT_LOAD || ph.p_filesz == 0 {
            continue;
        }
        let start = ph.p_offset as usize;
        let end = start
            .checked_add(ph.p_filesz as usize)
            .filter(|&e| e <= data.len())
            .ok_or_else(|| format!("loadable segment at {:#x} runs past the end of the file", ph.p_vaddr))?;
        out.push((ph.p_vaddr, data[start..end].to_vec()));
    }
    if out.is_empty() {
        return Err("no loadable segments".into());
    }
    Ok(out)
}

/// Cuts an execution into segments ending at waypoints.
pub fn segments(insns: &[ExecInsn], pe: ArchProfile) -> Vec<Seg> {
    segments_with_isa(insns, pe).0
}

/// [`segments`], with the instruction set of each segment's code.
fn segments_with_isa(insns: &[ExecInsn], pe: ArchProfile) -> (Vec<Seg>, Vec<Isa>) {
    let mut isas = Vec::new();
    let mut dec = ArmInstrDecoder::new();
    let mut segs = Vec::new();
    let mut first = 0usize;
    for (k, ins) in insns.iter().enumerate() {
        let mut info = InstrInfo {
            pe_type: pe,
            isa: ins.isa,
            instr_addr: ins.addr,
            opcode: ins.opcode,
            ..Default::default()
        };
        let classified = dec.decode_instruction(&mut info).is_ok();
        let waypoint = classified
            && matches!(
                info.instr_type,
                InstrType::Branch | InstrType::BranchIndirect | InstrType::Isb
            );
        let next = insns.get(k + 1);
        let fall = ins.addr.wrapping_add(ins.size as u64);
        let ctx = Ctx {
            el: ins.el,
            secure: ins.secure,
            nse: false,
            aarch64: ins.isa == Isa::Aarch64,
            cid: 0,
            vmid: 0,
        };
        let start = insns[first].addr;
        let count = (k + 1 - first) as u32;
        if waypoint {
            let term = match info.instr_type {
                InstrType::BranchIndirect if info.sub_type == InstrSubType::V8Eret => Term::ExcRet,
                InstrType::BranchIndirect if info.is_link => Term::Blr,
                InstrType::BranchIndirect
                    if matches!(info.sub_type, InstrSubType::V8Ret | InstrSubType::V7ImpliedRet) =>
                {
                    Term::Ret
                }
                InstrType::BranchIndirect => Term::Br,
                InstrType::Branch if info.is_link => Term::Bl(0),
                InstrType::Branch if info.is_conditional => Term::Cond(0),
                _ => Term::B(0),
            };
            let taken = ins.executed;
            let to = next.map_or(if taken { info.branch_addr } else { fall }, |n| n.addr);
            segs.push(Seg {
                start,
                end: fall,
                count,
                ctx,
                how: End::Branch { taken, term, next: to },
                tx_depth: 0,
                events: Vec::new(),
            });
            isas.push(ins.isa);
            first = k + 1;
            // A direct branch whose successor is not where it goes (a gap in
            // the trace): an exception before the first instruction there
            // carries execution to where the trace goes on.
            if let (Some(n), Some(exp)) = (next, architectural_next(&info, taken, fall))
                && n.addr != exp
            {
                segs.push(Seg {
                    start: exp,
                    end: exp,
                    count: 0,
                    ctx,
                    how: End::Exception {
                        cause: Cause::Irq,
                        entry: 0,
                    },
                    tx_depth: 0,
                    events: Vec::new(),
                });
                isas.push(if taken { info.next_isa } else { ins.isa });
            }
        } else if next.is_none_or(|n| n.addr != fall) {
            // An exception before the next instruction (or the end of the
            // trace): the range ends here.
            segs.push(Seg {
                start,
                end: fall,
                count,
                ctx,
                how: End::Exception {
                    cause: Cause::Irq,
                    entry: 0,
                },
                tx_depth: 0,
                events: Vec::new(),
            });
            isas.push(ins.isa);
            first = k + 1;
        }
    }
    (segs, isas)
}

/// Where a waypoint sends execution when the trace does not say (a direct
/// branch taken, any branch not taken, an ISB); `None` for a taken
/// indirect branch.
fn architectural_next(info: &InstrInfo, taken: bool, fall: u64) -> Option<u64> {
    match info.instr_type {
        _ if !taken => Some(fall),
        InstrType::Branch => Some(info.branch_addr),
        InstrType::BranchIndirect => None,
        _ => Some(fall),
    }
}

/// Encodes an execution as trace with `protocol`'s trace unit (options
/// chosen from `seed`), with `images` as the snapshot's memory.
pub fn generate_from_execution(
    insns: &[ExecInsn],
    images: &[(u64, Vec<u8>)],
    protocol: ExecProtocol,
    seed: u64,
    layout: BufferLayout,
) -> Result<Generated, String> {
    let Some(first) = insns.first() else {
        return Err("no instructions to encode".into());
    };
    let aarch64 = first.isa == Isa::Aarch64;
    if insns.iter().any(|i| (i.isa == Isa::Aarch64) != aarch64) {
        return Err("the execution mixes AArch64 and AArch32 code".into());
    }
    let thumb = insns.iter().any(|i| i.isa == Isa::Thumb2);
    let pe = ArchProfile::new(
        if aarch64 { ArchVersion::V8 } else { ArchVersion::V7 },
        CoreProfile::CortexA,
    );
    let formatted = layout == BufferLayout::Formatted;
    if matches!(protocol, ExecProtocol::Ptm | ExecProtocol::Etmv3) {
        if aarch64 {
            return Err("PTM and ETMv3 trace AArch32 code only".into());
        }
        let arm = insns.iter().any(|i| i.isa == Isa::Arm);
        let mix = match (arm, thumb) {
            (true, true) => a32t32::IsaMix::Mixed,
            (false, true) => a32t32::IsaMix::T32,
            _ => a32t32::IsaMix::A32,
        };
        let (prog, segs) = a32_program(insns, pe);
        return Ok(if protocol == ExecProtocol::Ptm {
            super::ptm::generate_given(seed, mix, &prog, &segs, images, formatted)
        } else {
            super::etmv3::generate_given(seed, mix, &prog, &segs, images, formatted)
        });
    }
    let (segs, isas) = segments_with_isa(insns, pe);
    Ok(match protocol {
        ExecProtocol::Etmv4 => {
            let o = super::etmv4::Etmv4Options::all(super::etmv4::Choice::Random)
                .with("exc", super::etmv4::Choice::Off)
                .with("ctxt", super::etmv4::Choice::Off);
            let seg_is = isas.iter().map(|&i| (i == Isa::Thumb2) as u8).collect();
            super::etmv4::generate_given(seed, &o, &segs, images, layout, aarch64, seg_is)
        }
        ExecProtocol::Ete => {
            if !aarch64 {
                return Err("ETE traces AArch64 code only".into());
            }
            super::ete::generate_given(seed, &segs, images, layout)
        }
        ExecProtocol::Ptm | ExecProtocol::Etmv3 => unreachable!("handled above"),
    })
}

/// The A32/T32 encoders' form of an execution: one block per run of
/// instructions (ending at a waypoint, or cut by an exception or the end
/// of the trace), and the walk through them. A run cut by an exception
/// gets a terminator it never reaches, and "takes an exception" to the
/// next run's block; the last run goes to a block at the address after it.
fn a32_program(insns: &[ExecInsn], pe: ArchProfile) -> (a32t32::Program, Vec<a32t32::Seg>) {
    use a32t32::{Block, ExcKind, Instr, InstrKind, SegEnd, Term as T};
    let mut dec = ArmInstrDecoder::new();
    let mut blocks: Vec<Block> = Vec::new();
    // (block, how it ends: Some((taken)) for a waypoint, None for a cut)
    let mut ends: Vec<Option<bool>> = Vec::new();
    let mut fails = Vec::new();
    let mut cur: Vec<Instr> = Vec::new();
    let mut cur_fails = 0u64;
    for (k, ins) in insns.iter().enumerate() {
        let mut info = InstrInfo {
            pe_type: pe,
            isa: ins.isa,
            instr_addr: ins.addr,
            opcode: ins.opcode,
            ..Default::default()
        };
        let classified = dec.decode_instruction(&mut info).is_ok();
        let waypoint = classified
            && matches!(
                info.instr_type,
                InstrType::Branch | InstrType::BranchIndirect | InstrType::Isb
            );
        let fall = ins.addr.wrapping_add(ins.size as u64);
        if !ins.executed && !waypoint && cur.len() < 64 {
            cur_fails |= 1 << cur.len();
        }
        let kind = if waypoint { InstrKind::Term } else { InstrKind::Plain };
        cur.push(Instr {
            addr: ins.addr,
            size: ins.size,
            kind,
            op: ins.opcode,
        });
        let next = insns.get(k + 1);
        if waypoint {
            let term = match info.instr_type {
                InstrType::Isb => T::Isb,
                InstrType::BranchIndirect if info.sub_type == InstrSubType::V8Eret => T::ExcRet,
                InstrType::BranchIndirect if info.is_link => T::BlxReg,
                InstrType::BranchIndirect if info.sub_type == InstrSubType::V7ImpliedRet => T::Ret,
                InstrType::BranchIndirect => T::Bx,
                InstrType::Branch if info.is_link && info.next_isa != ins.isa => T::Blx(0),
                InstrType::Branch if info.is_link => T::Bl(0),
                InstrType::Branch if info.is_conditional => T::Cond(0),
                _ => T::B(0),
            };
            blocks.push(Block::given(cur[0].addr, ins.isa, std::mem::take(&mut cur), term));
            ends.push(Some(ins.executed));
            fails.push(std::mem::replace(&mut cur_fails, 0));
            // A gap in the trace after a direct branch (see `segments`).
            if let (Some(n), Some(exp)) = (next, architectural_next(&info, ins.executed, fall))
                && n.addr != exp
            {
                let isa = info.next_isa;
                blocks.push(Block::given(
                    exp,
                    isa,
                    vec![Instr {
                        addr: exp,
                        size: ins.size,
                        kind: InstrKind::Term,
                        op: 0,
                    }],
                    T::B(0),
                ));
                ends.push(None);
                fails.push(0);
            }
        } else if next.is_none_or(|n| n.addr != fall) {
            // A terminator never reached.
            let size = ins.size;
            cur.push(Instr {
                addr: fall,
                size,
                kind: InstrKind::Term,
                op: 0,
            });
            blocks.push(Block::given(cur[0].addr, ins.isa, std::mem::take(&mut cur), T::B(0)));
            ends.push(None);
            fails.push(std::mem::replace(&mut cur_fails, 0));
        }
    }
    // Where the last run goes.
    let n = blocks.len();
    let last = insns.last().map_or(0, |i| i.addr.wrapping_add(i.size as u64));
    let isa = insns.last().map_or(Isa::Arm, |i| i.isa);
    blocks.push(Block::given(
        last,
        isa,
        vec![Instr {
            addr: last,
            size: 4,
            kind: InstrKind::Term,
            op: 0,
        }],
        T::B(0),
    ));
    let mut segs = Vec::with_capacity(n);
    for (i, end) in ends.iter().enumerate() {
        let end = match end {
            Some(taken) => SegEnd::Term {
                taken: *taken,
                next: i + 1,
                next_start: 0,
            },
            None => SegEnd::Exception {
                at: blocks[i].instrs.len() - 1,
                kind: ExcKind::Irq,
                vector: i + 1,
            },
        };
        segs.push(a32t32::Seg {
            block: i,
            start: 0,
            end,
            fails: fails[i],
        });
    }
    let prog = a32t32::Program {
        blocks,
        regions: Vec::new(),
        main: Vec::new(),
        entry: 0,
        vectors: Vec::new(),
        vbar: 0,
    };
    (prog, segs)
}
