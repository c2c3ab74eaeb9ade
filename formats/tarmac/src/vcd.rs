//! A Tarmac trace as a Value Change Dump (VCD) for waveform viewers such
//! as GTKWave, in the form of upstream's `tarmac-vcd`: the core, single-
//! and double-precision registers, the psr, the cycle, the function being
//! run, the instruction (encoding, disassembly, executed or not, PC) and
//! each memory access (read or write, address, data), one step of 1000 ps
//! per node of the trace (or at its timestamps). Signals and value
//! changes are written with the `vcd` crate's writer.
//!
//! The trace's nodes are cut as [`CallAnalyzer`](super::calls::CallAnalyzer)
//! cuts them; the functions come from its call tree, so a VCD takes two
//! passes: the calls first, then the signals.

use std::io::{self, Write};

use vcd::{IdCode, SimulationCommand, Value, VarType};

use super::calls::{CallTree, Naming};
use super::record::{DiagramByte, Effect, Iset, Record, RecordKind, RegClass, RegId};

/// VCD output options.
#[derive(Clone, Debug, Default)]
pub struct VcdOptions {
    /// Step at the trace's timestamps (upstream's `--use-tarmac-timestamps`)
    /// rather than one step per node.
    pub use_timestamps: bool,
    /// The `$date` text; none written when `None` (upstream's `--no-date`).
    pub date: Option<String>,
    /// The `$version` text (upstream writes `tarmac-vcd 0.0`).
    pub version: String,
    /// The `$comment` text.
    pub comment: String,
    /// The traced system is big-endian (memory in memory order, diagrams).
    pub big_endian: bool,
}

/// Picoseconds per step; memory accesses of one instruction are spread
/// within a step, so an instruction can show at most this many.
const TIMESCALE: u64 = 1000;

/// Where a register's bytes live in the register file: core (r/w/x, 31
/// of 8 bytes), stack pointer, vector (q/v and the low end of z, 32 of 16
/// bytes) and psr, as upstream's register space lays them out.
const CORE: usize = 0;
const SP: usize = CORE + 31 * 8;
const VEC: usize = SP + 8;
const PSR: usize = VEC + 32 * 16;
const FILE_SIZE: usize = PSR + 4;

/// One register signal: its offset and size in the file and VCD code.
#[derive(Clone, Copy)]
struct RegSignal {
    class: RegClass,
    index: u32,
    size: usize,
    id: IdCode,
}

/// Byte offset in the file of `class`/`index` and how many bytes it
/// holds; s and d registers sit differently on AArch64 (low end of qN) and
/// AArch32 (two dN or four sN per qN).
fn reg_place(class: RegClass, index: u32, aarch64: bool) -> Option<(usize, usize)> {
    let i = index as usize;
    Some(match class {
        RegClass::R if i <= 15 => (CORE + 8 * i, 4),
        RegClass::W if i <= 30 => (CORE + 8 * i, 4),
        RegClass::X if i <= 30 => (CORE + 8 * i, 8),
        RegClass::Xsp => (SP, 8),
        RegClass::Wsp => (SP, 4),
        RegClass::Q | RegClass::V | RegClass::Z if i < 32 => (VEC + 16 * i, 16),
        RegClass::D if i < 32 && aarch64 => (VEC + 16 * i, 8),
        RegClass::D if i < 32 => (VEC + 16 * (i / 2) + 8 * (i % 2), 8),
        RegClass::S if i < 32 && aarch64 => (VEC + 16 * i, 4),
        RegClass::S if i < 32 => (VEC + 16 * (i / 4) + 4 * (i % 4), 4),
        RegClass::Psr => (PSR, 4),
        _ => return None,
    })
}

/// The VCD identifier of the `n`th signal, as upstream numbers them
/// (`!` to `~`, least significant first).
fn id_code(n: u32) -> IdCode {
    let mut s = Vec::new();
    let mut n = n;
    loop {
        s.push(b'!' + (n % 94) as u8);
        n /= 94;
        if n == 0 {
            break;
        }
    }
    // Only the characters `!`..`~`: always a valid code.
    std::str::from_utf8(&s)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(IdCode::FIRST)
}

/// Disassembly as upstream shows it: the comment after `;` dropped,
/// trailing blanks trimmed, runs of blanks shortened to their first.
fn trim_disassembly(s: &str, out: &mut String) {
    out.clear();
    let s = s.split(';').next().unwrap_or("");
    let s = s.trim_end_matches([' ', '\t']);
    let mut prev_blank = false;
    for c in s.chars() {
        let blank = c == ' ' || c == '\t';
        if !(blank && prev_blank) {
            out.push(c);
        }
        prev_blank = blank;
    }
}

/// A VCD string value: C escapes, other non-printing bytes (and space) as
/// `\ooo`.
fn escape(s: &str, out: &mut String) {
    out.clear();
    for b in s.bytes() {
        match b {
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x0b => out.push_str("\\v"),
            b'\'' => out.push_str("\\'"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'?' => out.push_str("\\?"),
            0x21..=0x7e => out.push(b as char),
            _ => {
                out.push('\\');
                out.push((b'0' + (b >> 6)) as char);
                out.push((b'0' + ((b >> 3) & 7)) as char);
                out.push((b'0' + (b & 7)) as char);
            }
        }
    }
}

/// The function changes of a call tree in time order, as upstream's VCD
/// shows them: each function at its entry, and the caller again where it
/// resumes after each call.
pub fn function_changes(tree: &CallTree, naming: Naming) -> Vec<(u64, String)> {
    let name = |pc: u64| {
        let mut s = String::new();
        naming.write(&mut s, pc);
        s
    };
    let mut out = Vec::new();
    // Activations still running: their indexes.
    let mut stack: Vec<usize> = Vec::new();
    let pop_to = |depth: u32, stack: &mut Vec<usize>, out: &mut Vec<(u64, String)>| {
        while let Some(&top) = stack.last() {
            if tree.acts[top].depth < depth {
                break;
            }
            stack.pop();
            if let Some(&parent) = stack.last() {
                out.push((tree.acts[top].resume.time, name(tree.acts[parent].entry.pc)));
            }
        }
    };
    for (i, a) in tree.acts.iter().enumerate() {
        pop_to(a.depth, &mut stack, &mut out);
        out.push((a.entry.time, name(a.entry.pc)));
        stack.push(i);
    }
    pop_to(0, &mut stack, &mut out);
    out
}

/// The signals' definitions, numbered in order.
struct Defs<'a, W: Write> {
    w: &'a mut vcd::Writer<W>,
    n: u32,
}

impl<W: Write> Defs<'_, W> {
    fn add(&mut self, ty: VarType, width: u32, name: &str) -> io::Result<IdCode> {
        let id = id_code(self.n);
        self.n += 1;
        self.w.var_def(ty, width, id, name, None)?;
        Ok(id)
    }

    /// `count` registers of `class`, `size` bytes each.
    fn regs(&mut self, class: RegClass, count: u32, size: usize) -> io::Result<Vec<RegSignal>> {
        (0..count)
            .map(|index| {
                let name = RegId {
                    class,
                    index: index as u8,
                }
                .to_string();
                let id = self.add(VarType::Integer, 8 * size as u32, &name)?;
                Ok(RegSignal { class, index, size, id })
            })
            .collect()
    }
}

/// One memory access of an instruction.
#[derive(Clone, Copy)]
struct Access {
    addr: u64,
    data: u64,
    read: bool,
}

/// Writes a trace's records as VCD. Make it with the functions' changes
/// ([`function_changes`]) and whether the trace holds A64 code, feed every
/// record in order, then [`VcdWriter::finish`].
pub struct VcdWriter<W: Write> {
    w: vcd::Writer<W>,
    opts: VcdOptions,
    core: Vec<RegSignal>,
    single: Vec<RegSignal>,
    double: Vec<RegSignal>,
    cycle: IdCode,
    function: IdCode,
    inst: IdCode,
    inst_asm: IdCode,
    inst_executed: IdCode,
    pc: IdCode,
    mem_rw: IdCode,
    mem_addr: IdCode,
    mem_data: IdCode,
    addr_bits: u32,
    data_bits: u32,
    functions: Vec<(u64, String)>,
    next_function: usize,
    // Register file: values, bytes known, bytes written in this node.
    file: Vec<u8>,
    known: Vec<bool>,
    written: Vec<bool>,
    // The current node.
    node_time: Option<u64>,
    node_has_instruction: bool,
    in_aarch64: bool,
    accesses: Vec<Access>,
    had_accesses: bool,
    tick: Option<u64>,
    prev_executed: bool,
    prev_pc: Option<u64>,
    prev_inst: Option<u32>,
    text: String,
    escaped: String,
    line: Vec<u8>,
    warnings: Vec<String>,
}

impl<W: Write> VcdWriter<W> {
    /// Writes the header and the signals' definitions: AArch64's registers
    /// when `aarch64` (the trace holds A64 code), else M-profile's.
    pub fn new(out: W, aarch64: bool, functions: Vec<(u64, String)>, opts: VcdOptions) -> io::Result<Self> {
        let mut w = vcd::Writer::new(out);
        let raw = w.writer();
        if let Some(d) = &opts.date {
            write!(raw, "$date\n{d}\n$end\n")?;
        }
        write!(
            raw,
            "$version\n{}\n$end\n$comment\n{}\n$end\n",
            opts.version, opts.comment
        )?;
        writeln!(raw, "$timescale 1ps $end")?;
        w.add_module("CPU")?;
        let mut d = Defs { w: &mut w, n: 0 };
        // AArch64's registers, or M-profile's (upstream's V8-A and V7-M).
        let (mut core, n_double, data_bits, addr_bits) = if aarch64 {
            let mut core = d.regs(RegClass::X, 31, 8)?;
            core.extend(d.regs(RegClass::Xsp, 1, 8)?);
            (core, 32, 64, 64)
        } else {
            (d.regs(RegClass::R, 15, 4)?, 16, 32, 32)
        };
        core.extend(d.regs(RegClass::Psr, 1, 4)?);
        let double = d.regs(RegClass::D, n_double, 8)?;
        let single = d.regs(RegClass::S, 32, 4)?;
        let cycle = d.add(VarType::Integer, 32, "Cycle")?;
        let function = d.add(VarType::String, 1, "Function")?;
        let inst = d.add(VarType::Integer, 32, "Inst")?;
        let inst_asm = d.add(VarType::String, 1, "InstAsm")?;
        // Upstream declares it `bit`, a SystemVerilog type that IEEE 1364's
        // VCD (and the vcd crate) lacks; a 1-bit wire shows the same.
        let inst_executed = d.add(VarType::Wire, 1, "InstExecuted")?;
        let pc = d.add(VarType::Integer, addr_bits, "PC")?;
        let mem_rw = d.add(VarType::String, 1, "MemRW")?;
        let mem_addr = d.add(VarType::Integer, addr_bits, "MemAddr")?;
        let mem_data = d.add(VarType::Integer, data_bits, "MemData")?;
        w.upscope()?;
        w.enddefinitions()?;
        w.begin(SimulationCommand::Dumpvars)?;
        Ok(VcdWriter {
            w,
            opts,
            core,
            single,
            double,
            cycle,
            function,
            inst,
            inst_asm,
            inst_executed,
            pc,
            mem_rw,
            mem_addr,
            mem_data,
            addr_bits,
            data_bits,
            functions,
            next_function: 0,
            file: vec![0; FILE_SIZE],
            known: vec![false; FILE_SIZE],
            written: vec![false; FILE_SIZE],
            node_time: None,
            node_has_instruction: false,
            in_aarch64: false,
            accesses: Vec::new(),
            had_accesses: false,
            tick: None,
            prev_executed: false,
            prev_pc: None,
            prev_inst: None,
            text: String::new(),
            escaped: String::new(),
            line: Vec::new(),
            warnings: Vec::new(),
        })
    }

    /// Warnings given so far (time not increasing with timestamps), each
    /// once; the caller prints them.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn bits(&mut self, id: IdCode, width: u32, v: u64) -> io::Result<()> {
        self.vector(id, (0..width).rev().map(|i| i < 64 && (v >> i) & 1 != 0))
    }

    /// A vector's change, `b`, the bits (most significant first), the code:
    /// as the vcd crate's `change_vector` writes it, made in one buffer
    /// rather than by a formatted write per bit (which took three quarters
    /// of the run).
    fn vector(&mut self, id: IdCode, bits: impl Iterator<Item = bool>) -> io::Result<()> {
        self.line.clear();
        self.line.push(b'b');
        self.line.extend(bits.map(|b| if b { b'1' } else { b'0' }));
        self.line.push(b' ');
        write!(self.line, "{id}")?;
        self.line.push(b'\n');
        self.w.writer().write_all(&self.line)
    }

    fn string(&mut self, id: IdCode, s: &str) -> io::Result<()> {
        let mut e = std::mem::take(&mut self.escaped);
        escape(s, &mut e);
        let r = self.w.change_string(id, &e);
        self.escaped = e;
        r
    }

    /// Starts a node when the time moves on or a second instruction comes
    /// at one time, as the call analyser does; the node before is written.
    fn event(&mut self, time: u64, is_instruction: bool) -> Result<(), String> {
        let t = match self.node_time {
            Some(c) if c >= time => c,
            _ => time,
        };
        if self.node_time != Some(t) || (self.node_has_instruction && is_instruction) {
            if let Some(prev) = self.node_time {
                self.end_node(prev).map_err(|e| e.to_string())?;
            }
            if self.node_time != Some(t) {
                self.node_has_instruction = false;
            }
            self.node_time = Some(t);
            self.start_node(t)?;
        }
        if is_instruction {
            self.node_has_instruction = true;
        }
        Ok(())
    }

    fn start_node(&mut self, t: u64) -> Result<(), String> {
        let tick = if self.opts.use_timestamps {
            let prev = self.tick.unwrap_or(0);
            if t < prev {
                return Err(format!(
                    "tarmac trace is not chronologically ordered (time {t} follows time {prev})"
                ));
            }
            if t == prev && prev != 0 {
                self.warnings.push(format!(
                    "time is not increasing strictly monotonically between instructions at time {t}; \
                     consider not using --use-tarmac-timestamps"
                ));
            }
            t
        } else {
            self.tick.map_or(0, |k| k + 1)
        };
        self.tick = Some(tick);
        self.w
            .timestamp(tick.wrapping_mul(TIMESCALE))
            .map_err(|e| e.to_string())?;
        self.bits(self.cycle, 32, t).map_err(|e| e.to_string())
    }

    fn write_regs(&mut self, bank: usize) -> io::Result<()> {
        let n = match bank {
            0 => self.core.len(),
            1 => self.single.len(),
            _ => self.double.len(),
        };
        for k in 0..n {
            let r = match bank {
                0 => self.core[k],
                1 => self.single[k],
                _ => self.double[k],
            };
            let Some((off, size)) = reg_place(r.class, r.index, self.in_aarch64) else {
                continue;
            };
            let size = size.min(r.size);
            let range = off..off + size;
            if !self.written[range.clone()].iter().any(|&w| w) || !self.known[range.clone()].iter().all(|&k| k) {
                continue;
            }
            // Bits straight from the file: no allocation per change.
            let bytes = &self.file[range];
            self.line.clear();
            self.line.push(b'b');
            self.line
                .extend((0..8 * size).rev().map(|i| b'0' + ((bytes[i / 8] >> (i % 8)) & 1)));
            self.line.push(b' ');
            write!(self.line, "{}", r.id)?;
            self.line.push(b'\n');
            self.w.writer().write_all(&self.line)?;
        }
        Ok(())
    }

    fn end_node(&mut self, t: u64) -> io::Result<()> {
        if let Some((ft, _)) = self.functions.get(self.next_function)
            && *ft == t
        {
            let name = std::mem::take(&mut self.functions[self.next_function].1);
            self.string(self.function, &name)?;
            self.next_function += 1;
        }
        for bank in 0..3 {
            self.write_regs(bank)?;
        }
        self.written.fill(false);
        if self.had_accesses && self.accesses.is_empty() {
            self.w.change_string(self.mem_rw, "")?;
            for (id, width) in [(self.mem_addr, self.addr_bits), (self.mem_data, self.data_bits)] {
                self.w.change_vector(id, (0..width).map(|_| Value::Z))?;
            }
        }
        self.had_accesses = !self.accesses.is_empty();
        let n = self.accesses.len() as u64;
        if n > TIMESCALE {
            return Err(io::Error::other(format!(
                "too many memory accesses in instruction at timestamp {t} - more than the {TIMESCALE} \
                 that can be represented in the VCD output"
            )));
        }
        let tick = self.tick.unwrap_or(0);
        // By index, so that the list's allocation is kept for the next node.
        for k in 0..self.accesses.len() {
            let a = self.accesses[k];
            if k > 0 {
                self.w
                    .timestamp(tick.wrapping_mul(TIMESCALE) + k as u64 * TIMESCALE / n)?;
            }
            self.w.change_string(self.mem_rw, if a.read { "R" } else { "W" })?;
            self.bits(self.mem_addr, self.addr_bits, a.addr)?;
            self.bits(self.mem_data, self.data_bits, a.data)?;
        }
        self.accesses.clear();
        Ok(())
    }

    fn access(&mut self, addr: u64, data: u64, read: bool) {
        self.accesses.push(Access { addr, data, read });
    }

    /// Takes the next record of the trace.
    pub fn feed(&mut self, rec: &Record) -> Result<(), String> {
        match rec.kind {
            RecordKind::Instruction(i) => {
                self.event(rec.time, true)?;
                self.in_aarch64 = i.iset == Iset::A64;
                let executed = i.effect == Effect::Executed;
                let io = |e: io::Error| e.to_string();
                if self.prev_executed != executed {
                    self.w
                        .change_scalar(self.inst_executed, if executed { Value::V1 } else { Value::V0 })
                        .map_err(io)?;
                    self.prev_executed = executed;
                }
                if self.prev_pc != Some(i.addr) {
                    self.bits(self.pc, self.addr_bits, i.addr).map_err(io)?;
                    self.prev_pc = Some(i.addr);
                }
                let enc = i.encoding.unwrap_or(0) as u32;
                if self.prev_inst != Some(enc) {
                    self.bits(self.inst, 32, enc as u64).map_err(io)?;
                    let mut t = std::mem::take(&mut self.text);
                    trim_disassembly(i.disassembly, &mut t);
                    self.string(self.inst_asm, &t).map_err(io)?;
                    self.text = t;
                    self.prev_inst = Some(enc);
                }
            }
            RecordKind::Register(r) => {
                let Some(reg) = r.reg else { return Ok(()) };
                for (offset, bytes) in r.runs() {
                    self.event(rec.time, false)?;
                    let Some((base, size)) = reg_place(reg.class, reg.index as u32, self.in_aarch64) else {
                        continue;
                    };
                    for (k, &b) in bytes.iter().enumerate() {
                        if offset + k < size {
                            self.file[base + offset + k] = b;
                            self.known[base + offset + k] = true;
                            self.written[base + offset + k] = true;
                        }
                    }
                }
            }
            RecordKind::Memory(m) => {
                self.event(rec.time, false)?;
                let v = m.value.unwrap_or(0);
                if m.size == 16 {
                    self.access(m.addr, v as u64, m.read);
                    self.access(m.addr.wrapping_add(8), (v >> 64) as u64, m.read);
                } else {
                    let mut v = v as u64;
                    if m.memory_order && self.opts.big_endian {
                        // The reader reversed it into a little-endian system's value.
                        v = v.swap_bytes() >> (64 - 8 * m.size.clamp(1, 8) as u32);
                    }
                    self.access(m.addr, v, m.read);
                }
            }
            RecordKind::Diagram(d) => {
                if d.bytes.iter().all(|b| *b == DiagramByte::Unused) {
                    return Ok(());
                }
                self.event(rec.time, false)?;
                let mut i = 0;
                while i < 16 {
                    match d.bytes[i] {
                        DiagramByte::Unused => i += 1,
                        DiagramByte::Unknown => {
                            let mut j = i;
                            while j < 16 && d.bytes[j] == DiagramByte::Unknown {
                                j += 1;
                            }
                            self.access(d.base.wrapping_add(16 - j as u64), 0, d.read);
                            i = j;
                        }
                        DiagramByte::Known(_) => {
                            let mut j = i;
                            let mut v = 0u64;
                            while j < 16 && j - i < 8 {
                                let DiagramByte::Known(b) = d.bytes[j] else { break };
                                if self.opts.big_endian {
                                    v |= (b as u64) << (8 * (j - i));
                                } else {
                                    v = (v << 8) | b as u64;
                                }
                                j += 1;
                            }
                            self.access(d.base.wrapping_add(16 - j as u64), v, d.read);
                            i = j;
                        }
                    }
                }
            }
            RecordKind::MemAborted { .. }
            | RecordKind::MemFetch { .. }
            | RecordKind::Exception { .. }
            | RecordKind::Text { .. }
            | RecordKind::MemUpdate { .. }
            | RecordKind::Flow { .. } => self.event(rec.time, false)?,
            RecordKind::SysOp { .. } | RecordKind::CoprocTransfer { .. } | RecordKind::Header { .. } => {}
        }
        Ok(())
    }

    /// Writes the last node and the closing step, and flushes the output.
    pub fn finish(mut self) -> io::Result<()> {
        if let Some(t) = self.node_time {
            self.end_node(t)?;
        }
        let tick = self.tick.map_or(0, |k| k + 1);
        self.w.timestamp(tick.wrapping_mul(TIMESCALE))?;
        self.w.end()?;
        self.w.flush()
    }
}
