//! Shared by the plug-in's tests: random RISC-V programs and executions, a
//! decode run through a decode tree (with forced waits), and what the
//! elements say compared with what was executed.
#![allow(dead_code)]

use coresight_decode::shared::Lock;
use std::collections::HashMap;
use std::sync::Arc;

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile};
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{CoreConfig, DecodeMode, SourceConfig};
pub use coresight_decode::element::{DataAccess, DataAccessKind, ElemType, TraceElement, UnsyncInfo};
use coresight_decode::interfaces::{TargetMemAccess, TrcDataIn, TrcGenElemIn};
use coresight_decode::memory::{BufferAccessor, MemSpace};
use coresight_decode::tree::{DecodeTree, SourceFormat};
pub use coresight_generator::Rng;
use riscv_trace::config::{CoreIsa, RiscvTraceConfig, TraceReg};
use riscv_trace::encoder::{Access, Encoded, Encoder, Executed, Interrupt, Mode};
use riscv_trace::instr::{Flow, asm, classify, instr_len};

/// The program's memory.
#[derive(Clone)]
pub struct Program {
    pub base: u64,
    pub bytes: Vec<u8>,
    pub starts: Vec<u64>,
    /// Loads and stores, by address.
    pub mem_ops: HashMap<u64, DataAccessKind>,
    pub isa: CoreIsa,
}

impl Program {
    pub fn fetch(&self, addr: u64) -> Option<u32> {
        let off = addr.checked_sub(self.base)? as usize;
        let b = self.bytes.get(off..off + 2)?;
        let hw = u16::from_le_bytes([b[0], b[1]]);
        if instr_len(hw) == 2 {
            return Some(hw as u32);
        }
        let b = self.bytes.get(off..off + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn size_at(&self, addr: u64) -> u64 {
        self.fetch(addr).map(|o| instr_len(o as u16) as u64).unwrap_or(4)
    }
}

/// The program as target memory, for the encoder.
pub struct ProgMem<'a>(pub &'a Program);

impl TargetMemAccess for ProgMem<'_> {
    fn read_target_memory(
        &mut self,
        address: u64,
        _id: u8,
        _s: MemSpace,
        buf: &mut [u8],
    ) -> Result<usize, coresight_decode::error::ErrCode> {
        let p = self.0;
        let Some(off) = address.checked_sub(p.base) else {
            return Ok(0);
        };
        let off = off as usize;
        if off >= p.bytes.len() {
            return Ok(0);
        }
        let n = buf.len().min(p.bytes.len() - off);
        buf[..n].copy_from_slice(&p.bytes[off..off + n]);
        Ok(n)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Other,
    Load,
    Store,
    Branch,
    Jal,
    Jalr,
    Trap,
    Ret,
}

/// A random program of `n` instructions at `base`.
pub fn random_program(rng: &mut Rng, isa: CoreIsa, base: u64, n: usize) -> Program {
    let pick = |rng: &mut Rng| match rng.below(100) {
        0..=44 => Slot::Other,
        45..=54 => Slot::Load,
        55..=62 => Slot::Store,
        63..=80 => Slot::Branch,
        81..=88 => Slot::Jal,
        89..=94 => Slot::Jalr,
        95..=97 => Slot::Trap,
        _ => Slot::Ret,
    };
    // The last instruction jumps back to the start, so straight-line code
    // never runs off the end.
    let slots: Vec<(Slot, bool)> = (0..n)
        .map(|i| {
            if i == n - 1 {
                return (Slot::Jal, false);
            }
            let s = pick(rng);
            let small = isa.compressed
                && matches!(s, Slot::Other | Slot::Branch | Slot::Jal | Slot::Jalr | Slot::Trap)
                && rng.chance(1, 2);
            (s, small)
        })
        .collect();
    let mut starts = Vec::with_capacity(n);
    let mut a = base;
    for &(_, small) in &slots {
        starts.push(a);
        a += if small { 2 } else { 4 };
    }
    let mut bytes = Vec::with_capacity((a - base) as usize);
    let mut mem_ops = HashMap::new();
    for (i, &(s, small)) in slots.iter().enumerate() {
        let pc = starts[i];
        // A target within `reach` bytes, at an instruction start.
        // Jumps only go forward: a loop closed by direct jumps alone gives
        // no packets with emitbranch, so how often it ran is not in the
        // trace (see the crate documentation).
        let target = |rng: &mut Rng, reach: i64, forward: bool| -> Option<i64> {
            for _ in 0..8 {
                let j = (i as i64 + rng.range(0, 64) as i64 - 32).clamp(0, n as i64 - 1) as usize;
                let off = starts[j] as i64 - pc as i64;
                if off.abs() < reach && (!forward || off > 0) {
                    return Some(off);
                }
            }
            None
        };
        let op: Result<u16, u32> = match (s, small) {
            _ if i == n - 1 => Err(asm::jal(0, base as i64 - pc as i64)),
            (Slot::Other, true) => Ok(asm::c_addi(1 + rng.below(31) as u32, rng.below(31) as i32 - 15)),
            (Slot::Branch, true) => match target(rng, 250, false) {
                Some(off) => Ok(asm::c_bz(rng.chance(1, 2), rng.below(8) as u32, off)),
                None => Ok(asm::c_addi(5, 1)),
            },
            (Slot::Jal, true) => match target(rng, 2000, true) {
                Some(off) if isa.xlen == 32 && rng.chance(1, 2) => Ok(asm::c_jal(off)),
                Some(off) => Ok(asm::c_j(off)),
                None => Ok(asm::c_addi(5, 1)),
            },
            (Slot::Jalr, true) => Ok(if rng.chance(1, 2) {
                asm::c_jr(1 + rng.below(31) as u32)
            } else {
                asm::c_jalr(1 + rng.below(31) as u32)
            }),
            (Slot::Trap, true) => Ok(asm::C_EBREAK),
            (Slot::Other, false) => Err(asm::addi(
                rng.below(32) as u32,
                rng.below(32) as u32,
                rng.below(4096) as i32 - 2048,
            )),
            (Slot::Load, _) => {
                mem_ops.insert(pc, DataAccessKind::Load);
                Err(asm::load(
                    rng.below(if isa.xlen == 64 { 7 } else { 6 }) as u32 % 6,
                    5,
                    6,
                    rng.below(2048) as i32,
                ))
            }
            (Slot::Store, _) => {
                mem_ops.insert(pc, DataAccessKind::Store);
                Err(asm::store(
                    rng.below(if isa.xlen == 64 { 4 } else { 3 }) as u32,
                    5,
                    6,
                    rng.below(2048) as i32,
                ))
            }
            (Slot::Branch, false) => match target(rng, 4000, false) {
                Some(off) => Err(asm::branch(
                    [0, 1, 4, 5, 6, 7][rng.below(6) as usize],
                    rng.below(32) as u32,
                    rng.below(32) as u32,
                    off,
                )),
                None => Err(asm::addi(5, 5, 1)),
            },
            (Slot::Jal, false) => match target(rng, 1 << 19, true) {
                Some(off) => Err(asm::jal([0, 1, 5][rng.below(3) as usize], off)),
                None => Err(asm::addi(5, 5, 1)),
            },
            (Slot::Jalr, false) => Err(asm::jalr(
                [0, 1, 5][rng.below(3) as usize],
                1 + rng.below(31) as u32,
                rng.below(64) as i32,
            )),
            (Slot::Trap, false) => Err(if rng.chance(1, 2) { asm::ECALL } else { asm::EBREAK }),
            (Slot::Ret, _) => Err(if rng.chance(1, 2) { asm::MRET } else { asm::SRET }),
        };
        match op {
            Ok(h) => bytes.extend_from_slice(&h.to_le_bytes()),
            Err(w) => bytes.extend_from_slice(&w.to_le_bytes()),
        }
    }
    Program {
        base,
        bytes,
        starts,
        mem_ops,
        isa,
    }
}

/// A random execution of `steps` instructions on `harts` harts.
pub fn random_execution(rng: &mut Rng, p: &Program, steps: usize, harts: u64) -> Vec<Executed> {
    let mask = p.isa.mask();
    let any = |rng: &mut Rng| p.starts[rng.below(p.starts.len() as u64) as usize];
    let mut state: Vec<(u64, Mode)> = (0..harts)
        .map(|_| {
            (
                any(rng),
                Mode {
                    prv: 3,
                    ie: rng.chance(1, 2),
                },
            )
        })
        .collect();
    let mut h = 0usize;
    let mut ts = rng.below(1 << 40);
    let mut out = Vec::with_capacity(steps);
    for _ in 0..steps {
        if harts > 1 && rng.chance(1, 40) {
            h = rng.below(harts) as usize;
        }
        let (pc, mode) = state[h];
        let op = p.fetch(pc).expect("execution stays in the program");
        let ins = classify(p.isa, pc, op).expect("valid instruction");
        let seq = (pc + ins.size as u64) & mask;
        let mut next_mode = mode;
        let next_pc = match ins.flow {
            Flow::Other => seq,
            Flow::Branch { target } => {
                if rng.chance(1, 2) {
                    target
                } else {
                    seq
                }
            }
            Flow::Jal { target, .. } => target,
            Flow::Jalr { .. } => any(rng),
            Flow::Trap => {
                next_mode = Mode { prv: 3, ie: false };
                any(rng)
            }
            Flow::TrapReturn => {
                next_mode = Mode {
                    prv: [0, 1, 3][rng.below(3) as usize],
                    ie: rng.chance(1, 2),
                };
                any(rng)
            }
        };
        let interrupt = rng.chance(1, 60).then(|| Interrupt {
            handler: any(rng),
            mode: Mode { prv: 3, ie: false },
        });
        let timestamp = rng.chance(1, 12).then(|| {
            ts += rng.range(1, 5000);
            ts
        });
        let access = p.mem_ops.get(&pc).map(|&kind| {
            let v = match rng.below(4) {
                0 => rng.below(256),
                1 => (rng.below(256) as i8) as i64 as u64,
                2 => rng.next_u64(),
                _ => (rng.below(1 << 16) as i16) as i64 as u64,
            };
            Access {
                kind,
                addr: (0x8000_0000 + rng.below(1 << 20)) & mask,
                value: v & mask,
            }
        });
        let rec = Executed {
            hart: h as u64,
            pc,
            next_pc,
            mode,
            next_mode,
            interrupt,
            timestamp,
            access,
        };
        out.push(rec);
        state[h] = match interrupt {
            Some(i) => (i.handler, i.mode),
            None => (next_pc, next_mode),
        };
    }
    out
}

pub fn encode(p: &Program, trace: u32, words: u64, steps: &[Executed]) -> Encoded {
    let enc = Encoder::new(TraceReg(trace), p.isa, 0x9000_0000, words).unwrap();
    enc.encode(&mut ProgMem(p), steps).unwrap()
}

/// Elements with their trace index.
pub type Elems = Vec<(TrcIndex, TraceElement)>;

struct Collect {
    out: Arc<Lock<Elems>>,
    wait_every: u32,
    n: u32,
}

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, _id: u8, elem: &TraceElement) -> DatapathResp {
        self.out.borrow_mut().push((index, *elem));
        self.n += 1;
        if self.wait_every > 0 && self.n.is_multiple_of(self.wait_every) {
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
    }
}

pub fn core_name(isa: CoreIsa) -> &'static str {
    match (isa.xlen, isa.compressed) {
        (32, true) => "RV32IMAC",
        (32, false) => "RV32IMA",
        (_, true) => "RV64GC",
        (_, false) => "RV64G",
    }
}

pub fn source_config(c: &RiscvTraceConfig) -> SourceConfig {
    SourceConfig {
        name: "RVTRACE_0".into(),
        device_type: riscv_trace::DEVICE_TYPE.into(),
        regs: vec![
            ("trace".into(), c.trace.0 as u64),
            ("tbufstart".into(), c.tbufstart),
            ("tbufend".into(), c.tbufend),
            ("tbufwrite".into(), c.tbufwrite),
        ],
        core: Some(CoreConfig {
            name: "hart0".into(),
            core_type: core_name(c.isa).into(),
            profile: ArchProfile::new(ArchVersion::Custom, CoreProfile::Custom),
        }),
    }
}

/// Pushes `data` through `tree` in chunks of `chunk` bytes, flushing on waits.
pub fn run_tree(tree: &mut DecodeTree, data: &[u8], chunk: usize) {
    let mut idx = 0usize;
    let mut resp = DatapathResp::Cont;
    let mut guard = 0u64;
    while idx < data.len() {
        guard += 1;
        assert!(guard < 50_000_000, "no progress");
        if resp.is_wait() {
            resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            continue;
        }
        let end = (idx + chunk).min(data.len());
        let (r, used) = tree.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..end]);
        assert!(!r.is_fatal(), "fatal {r:?}");
        resp = r;
        idx += used;
    }
    while resp.is_wait() {
        resp = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
    }
    let mut r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
    while r.is_wait() {
        r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        if r.is_cont() {
            r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        }
    }
}

/// Decodes `enc` with `p` as memory; `wait_every` forces waits.
pub fn decode(enc: &Encoded, p: &Program, wait_every: u32, chunk: usize) -> Elems {
    let image = p.bytes.clone();
    decode_with(enc, wait_every, chunk, |tree| {
        tree.mem_mapper()
            .unwrap()
            .borrow_mut()
            .add_accessor(Box::new(BufferAccessor::new(p.base, image, MemSpace::ANY).unwrap()))
            .unwrap();
    })
}

/// Decodes `enc` with the memory `map` gives the tree.
pub fn decode_with(enc: &Encoded, wait_every: u32, chunk: usize, map: impl FnOnce(&mut DecodeTree)) -> Elems {
    let mut tree = DecodeTree::with_registry(SourceFormat::Single, DecodeMode::FullDecode, riscv_trace::registry());
    map(&mut tree);
    tree.create_decoder(riscv_trace::PROTOCOL_NAME, &source_config(&enc.config))
        .unwrap();
    collect(&mut tree, &enc.data, chunk, wait_every)
}

/// Runs `data` through `tree` in blocks of `chunk` bytes and returns its
/// elements; `wait_every` forces waits.
pub fn collect(tree: &mut DecodeTree, data: &[u8], chunk: usize, wait_every: u32) -> Elems {
    let out = Arc::new(Lock::new(Vec::new()));
    tree.set_gen_elem_out(Box::new(Collect {
        out: out.clone(),
        wait_every,
        n: 0,
    }));
    run_tree(tree, data, chunk);
    std::mem::take(&mut *out.borrow_mut())
}

/// What a decode says, in a form to compare with an execution.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Instructions, with their hart.
    pub instrs: Vec<(u64, u64)>,
    /// Conditional branches that end ranges: (address, taken).
    pub branches: Vec<(u64, bool)>,
    /// Mode changes: (instructions before, hart, prv, ie).
    pub modes: Vec<(usize, u64, u8, bool)>,
    /// Interrupts: (instructions before, return address if given).
    pub interrupts: Vec<(usize, Option<u64>)>,
    pub timestamps: Vec<u64>,
    pub data: Vec<DataAccess>,
}

/// Reads the elements back into an [`Observed`].
pub fn observe(elems: &Elems, p: &Program, with_positions: bool) -> Observed {
    let mut o = Observed::default();
    let mut hart = 0u64;
    let mut known: HashMap<u64, (u8, bool)> = HashMap::new();
    for (_, e) in elems {
        let pos = if with_positions { o.instrs.len() } else { 0 };
        match e.elem_type {
            ElemType::InstrRange => {
                let mut a = e.st_addr;
                for _ in 0..e.num_instr_range {
                    o.instrs.push((hart, a));
                    a += p.size_at(a);
                }
                assert_eq!(a, e.en_addr, "range end");
                if e.last_instr_cond {
                    o.branches.push((a - e.last_instr_sz as u64, e.last_instr_exec));
                }
            }
            ElemType::PeContext => {
                hart = e.context.hart.expect("RISC-V contexts name the hart");
                if e.context.el_valid {
                    let m = (
                        e.context.exception_level.number().unwrap(),
                        e.context.interrupts_enabled.unwrap(),
                    );
                    if known.insert(hart, m) != Some(m) {
                        o.modes.push((pos, hart, m.0, m.1));
                    }
                }
            }
            ElemType::Exception => o.interrupts.push((pos, e.excep_ret_addr.then_some(e.en_addr))),
            ElemType::Timestamp => o.timestamps.push(e.timestamp),
            ElemType::DataAccess => o.data.push(e.data),
            _ => {}
        }
    }
    o
}

/// What a decode of `steps` encoded with `trace` should say.
pub fn expect(steps: &[Executed], p: &Program, trace: u32) -> Observed {
    let t = TraceReg(trace);
    let mut o = Observed::default();
    let pos_on = t.emit_pc();
    let mut known: HashMap<u64, (u8, bool)> = HashMap::new();
    let mut last_hart = None;
    let note = |o: &mut Observed, known: &mut HashMap<u64, (u8, bool)>, pos: usize, h: u64, m: Mode| {
        if known.insert(h, (m.prv, m.ie)) != Some((m.prv, m.ie)) {
            o.modes.push((if pos_on { pos } else { 0 }, h, m.prv, m.ie));
        }
    };
    for (i, r) in steps.iter().enumerate() {
        if last_hart != Some(r.hart) && t.emit_priv() {
            note(&mut o, &mut known, i, r.hart, r.mode);
        }
        last_hart = Some(r.hart);
        if t.emit_pc() {
            o.instrs.push((r.hart, r.pc));
        }
        if t.emit_timestamp()
            && let Some(ts) = r.timestamp
        {
            o.timestamps.push(ts);
        }
        if let Some(a) = r.access {
            let (ea, ed) = match a.kind {
                DataAccessKind::Load => (t.emit_load_addr(), t.emit_load_data()),
                DataAccessKind::Store => (t.emit_store_addr(), t.emit_store_data()),
            };
            if ea {
                o.data.push(DataAccess {
                    kind: a.kind,
                    addr: Some(a.addr),
                    value: None,
                });
            }
            if ed {
                o.data.push(DataAccess {
                    kind: a.kind,
                    addr: None,
                    value: Some(a.value & p.isa.mask()),
                });
            }
        }
        let ins = classify(p.isa, r.pc, p.fetch(r.pc).unwrap()).unwrap();
        if t.emit_pc() && matches!(ins.flow, Flow::Branch { .. }) {
            o.branches.push((r.pc, r.next_pc != r.pc + ins.size as u64));
        }
        if matches!(ins.flow, Flow::Trap | Flow::TrapReturn) && t.emit_priv() {
            note(&mut o, &mut known, i + 1, r.hart, r.next_mode);
        }
        if let Some(irq) = r.interrupt
            && (t.emit_pc() || t.emit_priv())
        {
            o.interrupts
                .push((if pos_on { i + 1 } else { 0 }, t.emit_pc().then_some(r.next_pc)));
            note(&mut o, &mut known, i + 1, r.hart, irq.mode);
        }
    }
    o
}

/// Compares field by field, naming the first difference.
pub fn assert_same(got: &Observed, want: &Observed, what: &str) {
    fn first_diff<T: PartialEq + std::fmt::Debug>(a: &[T], b: &[T], name: &str, what: &str) {
        if a != b {
            let i = a
                .iter()
                .zip(b)
                .position(|(x, y)| x != y)
                .unwrap_or(a.len().min(b.len()));
            panic!(
                "{what}: {name} differ at {i} (got {} items, want {}): got {:?}, want {:?}",
                a.len(),
                b.len(),
                a.get(i.saturating_sub(2)..(i + 2).min(a.len())),
                b.get(i.saturating_sub(2)..(i + 2).min(b.len()))
            );
        }
    }
    first_diff(&got.instrs, &want.instrs, "instructions", what);
    first_diff(&got.branches, &want.branches, "branches", what);
    first_diff(&got.modes, &want.modes, "modes", what);
    first_diff(&got.interrupts, &want.interrupts, "interrupts", what);
    first_diff(&got.timestamps, &want.timestamps, "timestamps", what);
    first_diff(&got.data, &want.data, "data", what);
}

/// Elements that say the decoder lost its way.
pub fn trouble(elems: &Elems) -> Vec<String> {
    elems
        .iter()
        .filter(|(_, e)| {
            e.elem_type == ElemType::AddrNacc
                || (e.elem_type == ElemType::NoSync && e.unsync_info == UnsyncInfo::BadPacket)
        })
        .map(|(i, e)| format!("{i}: {e}"))
        .collect()
}

/// A program from the executable segments of a little-endian ELF64 file
/// (enough for the fixture programs: one text segment). XLEN and C come
/// from the header (class, and the RVC bit of e_flags).
pub fn program_from_elf(elf: &[u8]) -> Program {
    assert_eq!(&elf[..4], b"\x7fELF");
    assert_eq!(elf[4], 2, "ELF64");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    let compressed = u32_at(0x30) & 1 != 0;
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let (ty, flags) = (u32_at(ph), u32_at(ph + 4));
        if ty == 1 && flags & 1 != 0 {
            let (off, vaddr, filesz) = (u64_at(ph + 8) as usize, u64_at(ph + 16), u64_at(ph + 32) as usize);
            return Program {
                base: vaddr,
                bytes: elf[off..off + filesz].to_vec(),
                starts: Vec::new(),
                mem_ops: HashMap::new(),
                isa: CoreIsa { xlen: 64, compressed },
            };
        }
    }
    panic!("no executable segment");
}
