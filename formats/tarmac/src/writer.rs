//! Tarmac from decoded trace: a [`TrcGenElemIn`] sink that writes one
//! instruction line per executed instruction.
//!
//! An instruction range element says where execution went; the writer
//! walks it through the memory image, reading each opcode (T32 halfwords
//! written in logical order, first halfword first), and writes it in Fast
//! Models form with the instruction set letter and the mode and security
//! of the last PE context. The last instruction of a range that was not
//! executed (a conditional branch not taken) is written `IS`. Times are
//! the last timestamp (`tic`) when the trace has timestamps, else the
//! instruction count (`clk`). Optionally: `FD`/`FI`/`FR` lines before the
//! first instruction at a branch target, `E` lines for exceptions, and the
//! Trace Matcher form (a numeric CPU, the mode without its security).
//!
//! RISC-V ranges ([`Isa::RiscV`], from the RISC-V trace plug-in) are
//! written the same way. Tarmac has no RISC-V state, so this writer
//! chooses: the instruction set letter is `R`, and the mode is the
//! privilege level's letter (`U`, `S`, `H` or `M`, from the PE context's
//! exception level, which RISC-V decoders use for PRV), with no security
//! suffix. Opcodes are read as the hart fetches them: a halfword, and a
//! second one when the first has its low two bits set (a 32-bit
//! instruction), written as one 8-digit word; 16-bit (C extension)
//! instructions are written as 4 digits. Disassembly (with the `disasm`
//! feature) is RV32 or RV64 as the PE context's `bits64` says. No link
//! register lines are written for RISC-V.

use std::fmt::Write as _;
use std::io::Write;

use coresight_decode::arch::{InstrSubType, InstrType};
use coresight_decode::arch::{Isa, SecurityState};
use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::error::ErrCode;
use coresight_decode::interfaces::{TargetMemAccess, TrcGenElemIn};
use coresight_decode::memory::MemSpace;

/// What to write besides instruction lines.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriterOptions {
    /// `FD` (direct), `FI` (indirect) and `FR` (return) lines naming each
    /// taken branch's target, before the first instruction there.
    pub flow_lines: bool,
    /// `E` lines for exceptions.
    pub exception_lines: bool,
    /// Trace Matcher form: `TIME clk CPU IT ...`, mode without security.
    pub trace_matcher: bool,
    /// The CPU number for the Trace Matcher form.
    pub cpu: u32,
    /// Disassembly text (with the `disasm` feature).
    pub disassemble: bool,
    /// After each executed branch with link, the link register's new value
    /// (`R X30` or `R r14`), so that call/return analysis (profiles, call
    /// trees) works on decoded trace, which has no register values.
    pub link_register_lines: bool,
}

/// A memory image: (address, bytes) regions.
#[derive(Clone, Debug, Default)]
pub struct MemImage {
    /// Regions: start address and the bytes from there.
    pub regions: Vec<(u64, Vec<u8>)>,
}

impl TargetMemAccess for MemImage {
    fn read_target_memory(
        &mut self,
        address: u64,
        _trace_id: u8,
        _space: MemSpace,
        buf: &mut [u8],
    ) -> Result<usize, ErrCode> {
        for (start, data) in &self.regions {
            if address >= *start && address - start < data.len() as u64 {
                let off = (address - start) as usize;
                let n = buf.len().min(data.len() - off);
                buf[..n].copy_from_slice(&data[off..off + n]);
                return Ok(n);
            }
        }
        Ok(0)
    }
}

/// Writes decoded trace as Tarmac. Output errors (and memory that cannot
/// be read) stop the decode with a fatal response; [`TarmacWriter::error`]
/// says what happened.
pub struct TarmacWriter<W: Write, M: TargetMemAccess> {
    out: W,
    mem: M,
    opts: WriterOptions,
    el: u8,
    security: SecurityState,
    count: u64,
    timestamp: Option<u64>,
    /// Kind letter of the last taken branch, for the flow line.
    pending_flow: Option<&'static str>,
    error: Option<String>,
    line: String,
    mode_text: String,
    mode_for: Option<(Isa, u8, SecurityState)>,
    /// XLEN of RISC-V code, from the last PE context.
    bits64: bool,
    classifier: coresight_decode::instr::ArmInstrDecoder,
    #[cfg(feature = "disasm")]
    disasm: Option<coresight_decode::disasm::Disassembler>,
}

impl<W: Write, M: TargetMemAccess> TarmacWriter<W, M> {
    /// A writer to `out`, reading opcodes from `mem`.
    pub fn new(out: W, mem: M, opts: WriterOptions) -> Self {
        TarmacWriter {
            out,
            mem,
            opts,
            el: 1,
            security: SecurityState::NonSecure,
            count: 0,
            timestamp: None,
            pending_flow: None,
            error: None,
            line: String::with_capacity(128),
            mode_text: String::new(),
            mode_for: None,
            bits64: true,
            classifier: coresight_decode::instr::ArmInstrDecoder::new(),
            #[cfg(feature = "disasm")]
            disasm: if opts.disassemble {
                coresight_decode::disasm::Disassembler::new().ok()
            } else {
                None
            },
        }
    }

    /// Instructions written so far.
    pub fn instructions(&self) -> u64 {
        self.count
    }

    /// The first error met, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Gives back the output.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn time(&self) -> (u64, &'static str) {
        match self.timestamp {
            Some(t) => (t, "tic"),
            None => (self.count, "clk"),
        }
    }

    /// Time, unit and (Trace Matcher form) CPU number that start a line.
    fn push_prefix(&mut self) {
        let (t, unit) = self.time();
        let _ = write!(self.line, "{t} {unit} ");
        if self.opts.trace_matcher {
            let _ = write!(self.line, "{} ", self.opts.cpu);
        }
    }

    fn flush_line(&mut self) -> Result<(), String> {
        self.out.write_all(self.line.as_bytes()).map_err(|e| e.to_string())?;
        self.line.clear();
        Ok(())
    }

    /// Rebuilds the mode text when the context or the state changed.
    fn update_mode(&mut self, isa: Isa) {
        if self.mode_for == Some((isa, self.el, self.security)) {
            return;
        }
        self.mode_for = Some((isa, self.el, self.security));
        self.mode_text = self.mode(isa);
    }

    fn mode(&self, isa: Isa) -> String {
        if isa == Isa::RiscV {
            return ["U", "S", "H", "M"][self.el.min(3) as usize].to_string();
        }
        let aarch64 = isa == Isa::Aarch64;
        let sec = match self.security {
            SecurityState::Secure => "s",
            SecurityState::NonSecure => "n",
            SecurityState::Root => "rt",
            SecurityState::Realm => "rl",
        };
        let name = if aarch64 {
            format!("EL{}{}", self.el, if self.el == 0 { 't' } else { 'h' })
        } else {
            ["usr", "svc", "hyp", "mon"][self.el.min(3) as usize].to_string()
        };
        if self.opts.trace_matcher {
            name
        } else {
            format!("{name}_{sec}")
        }
    }

    fn read(&mut self, addr: u64, trace_id: u8, space: MemSpace, n: usize) -> Option<u32> {
        let mut b = [0u8; 4];
        match self.mem.read_target_memory(addr, trace_id, space, &mut b[..n]) {
            Ok(got) if got == n => Some(b[..n].iter().rev().fold(0u32, |v, &x| (v << 8) | x as u32)),
            _ => None,
        }
    }

    fn write_range(&mut self, trace_id: u8, e: &TraceElement) -> Result<(), String> {
        let letter = match e.isa {
            Isa::Aarch64 => "O",
            Isa::Arm => "A",
            Isa::Thumb2 => "T",
            Isa::RiscV => "R",
            other => return Err(format!("cannot write {other} instructions")),
        };
        self.update_mode(e.isa);
        #[cfg(feature = "disasm")]
        if let Some(d) = self.disasm.as_mut() {
            d.set_riscv_xlen(if self.bits64 { 64 } else { 32 });
        }
        let mut addr = e.st_addr;
        while addr < e.en_addr {
            let space = e.mem_space;
            let (enc, size, bytes) = if e.isa == Isa::RiscV {
                // Low two bits 0b11: a 32-bit instruction, else 16-bit (C).
                let hw1 = self
                    .read(addr, trace_id, space, 2)
                    .ok_or_else(|| format!("no memory at {addr:#x}"))?;
                if hw1 & 3 == 3 {
                    let hw2 = self
                        .read(addr.wrapping_add(2), trace_id, space, 2)
                        .ok_or_else(|| format!("no memory at {:#x}", addr.wrapping_add(2)))?;
                    let w = hw1 | hw2 << 16;
                    (w, 4u64, w.to_le_bytes())
                } else {
                    (hw1, 2, hw1.to_le_bytes())
                }
            } else if e.isa == Isa::Thumb2 {
                let hw1 = self
                    .read(addr, trace_id, space, 2)
                    .ok_or_else(|| format!("no memory at {addr:#x}"))?;
                if coresight_decode::instr::is_wide_thumb(hw1 as u16) {
                    let hw2 = self
                        .read(addr.wrapping_add(2), trace_id, space, 2)
                        .ok_or_else(|| format!("no memory at {:#x}", addr.wrapping_add(2)))?;
                    ((hw1 << 16) | hw2, 4u64, (hw1 | hw2 << 16).to_le_bytes())
                } else {
                    (hw1, 2, hw1.to_le_bytes())
                }
            } else {
                let w = self
                    .read(addr, trace_id, space, 4)
                    .ok_or_else(|| format!("no memory at {addr:#x}"))?;
                (w, 4, w.to_le_bytes())
            };
            let next = addr.checked_add(size);
            let last = next.is_none_or(|n| n >= e.en_addr);
            if let Some(kind) = self.pending_flow.take() {
                self.push_prefix();
                let _ = writeln!(self.line, "{kind} {addr:08x}");
                self.flush_line()?;
            }
            self.count += 1;
            let st = if last && !e.last_instr_exec { "IS" } else { "IT" };
            self.push_prefix();
            let _ = write!(self.line, "{st} ({}) {addr:08x} ", self.count);
            let _ = if size == 2 {
                write!(self.line, "{enc:04x}")
            } else {
                write!(self.line, "{enc:08x}")
            };
            let _ = write!(self.line, " {letter} {} : ", self.mode_text);
            #[cfg(feature = "disasm")]
            if let Some(text) = self
                .disasm
                .as_ref()
                .and_then(|d| d.one(e.isa, addr, &bytes[..size as usize]))
            {
                self.line.push_str(&text);
            }
            #[cfg(not(feature = "disasm"))]
            let _ = bytes;
            self.line.push('\n');
            if self.opts.link_register_lines && st == "IT" && e.isa != Isa::RiscV {
                let opcode = if size == 4 && e.isa == Isa::Thumb2 {
                    enc.rotate_left(16)
                } else {
                    enc
                };
                let mut info = coresight_decode::arch::InstrInfo {
                    pe_type: coresight_decode::arch::ArchProfile::new(
                        coresight_decode::arch::ArchVersion::V8,
                        coresight_decode::arch::CoreProfile::CortexA,
                    ),
                    isa: e.isa,
                    instr_addr: addr,
                    opcode,
                    ..Default::default()
                };
                use coresight_decode::interfaces::InstrDecode as _;
                if self.classifier.decode_instruction(&mut info).is_ok() && info.is_link {
                    let ret = addr.wrapping_add(size);
                    self.push_prefix();
                    let _ = match e.isa {
                        Isa::Aarch64 => writeln!(self.line, "R X30 {ret:016x}"),
                        Isa::Thumb2 => writeln!(self.line, "R r14 {:08x}", ret | 1),
                        _ => writeln!(self.line, "R r14 {ret:08x}"),
                    };
                }
            }
            self.flush_line()?;
            match next {
                Some(n) => addr = n,
                None => break,
            }
        }
        if self.opts.flow_lines && e.last_instr_exec {
            self.pending_flow = match (e.last_i_type, e.last_i_subtype) {
                (InstrType::Branch, _) => Some("FD"),
                (InstrType::BranchIndirect, InstrSubType::V8Ret | InstrSubType::V7ImpliedRet) => Some("FR"),
                (InstrType::BranchIndirect, _) => Some("FI"),
                _ => None,
            };
        }
        Ok(())
    }

    fn element(&mut self, trace_id: u8, e: &TraceElement) -> Result<(), String> {
        match e.elem_type {
            ElemType::PeContext => {
                if let Some(el) = e.context.exception_level.number() {
                    self.el = el;
                }
                self.security = e.context.security;
                self.bits64 = e.context.bits64;
            }
            ElemType::Timestamp => self.timestamp = Some(e.timestamp),
            ElemType::InstrRange => self.write_range(trace_id, e)?,
            ElemType::Exception if self.opts.exception_lines => {
                self.push_prefix();
                let _ = writeln!(
                    self.line,
                    "E {:08x} {:08x} CoreEvent_EXCEPTION",
                    e.en_addr, e.exception_number
                );
                self.flush_line()?;
                self.pending_flow = None;
            }
            _ => {}
        }
        Ok(())
    }
}

impl<W: Write + Send, M: TargetMemAccess> TrcGenElemIn for TarmacWriter<W, M> {
    fn trace_elem_in(&mut self, _index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        if self.error.is_some() {
            return DatapathResp::FatalSysErr;
        }
        match self.element(trace_id, elem) {
            Ok(()) => DatapathResp::Cont,
            Err(e) => {
                self.error = Some(e);
                DatapathResp::FatalSysErr
            }
        }
    }
}

#[derive(Clone, Default)]
struct SharedBuf(coresight_decode::shared::Shared<Vec<u8>>);

impl Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Decodes a snapshot directory's first trace buffer and writes its
/// instructions as Tarmac to `out`. Returns the number of instructions.
/// Only the built-in protocols: see [`snapshot_to_tarmac_with_registry`].
pub fn snapshot_to_tarmac(dir: &std::path::Path, out: &mut dyn Write, opts: WriterOptions) -> Result<u64, String> {
    snapshot_to_tarmac_with_registry(
        dir,
        std::sync::Arc::new(coresight_decode::decoder::DecoderRegistry::builtin()),
        out,
        opts,
    )
}

/// [`snapshot_to_tarmac`] with decoders from `registry` (plug-ins such as
/// RISC-V trace registered next to the built-in protocols).
pub fn snapshot_to_tarmac_with_registry(
    dir: &std::path::Path,
    registry: std::sync::Arc<coresight_decode::decoder::DecoderRegistry>,
    out: &mut dyn Write,
    opts: WriterOptions,
) -> Result<u64, String> {
    use coresight_decode::datapath::DatapathOp;
    use coresight_decode::interfaces::TrcDataIn;
    let ss = coresight_decode::snapshot::Snapshot::load(dir).map_err(|e| e.to_string())?;
    let name = ss
        .buffer_names()
        .first()
        .map(|s| s.to_string())
        .ok_or("no trace buffer in the snapshot")?;
    let mut tree = coresight_decode::builder::TreeBuilder::with_registry(&ss, registry)
        .build(&name, coresight_decode::decoder::DecodeMode::FullDecode, |_| {})
        .map_err(|e| e.to_string())?;
    let mem = tree.mem_mapper().ok_or("the snapshot has no memory image")?.clone();
    let buf = SharedBuf::default();
    let count = coresight_decode::shared::shared((0u64, None::<String>));
    struct Counting<W: Write + Send, M: TargetMemAccess>(
        TarmacWriter<W, M>,
        coresight_decode::shared::Shared<(u64, Option<String>)>,
    );
    impl<W: Write + Send, M: TargetMemAccess> TrcGenElemIn for Counting<W, M> {
        fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
            let r = self.0.trace_elem_in(index, trace_id, elem);
            *self.1.borrow_mut() = (self.0.instructions(), self.0.error().map(str::to_string));
            r
        }
    }
    tree.set_gen_elem_out(Box::new(Counting(
        TarmacWriter::new(buf.clone(), mem, opts),
        count.clone(),
    )));
    let info = ss.buffer(&name).ok_or("no trace buffer")?.clone();
    let drain = |out: &mut dyn Write| -> Result<(), String> {
        let mut b = buf.0.borrow_mut();
        out.write_all(&b).map_err(|e| format!("output: {e}"))?;
        b.clear();
        Ok(())
    };
    // The buffer is read a chunk at a time and decoded a piece at a time,
    // and what each piece decodes to is written before the next is given:
    // memory stays that of one chunk and one piece's lines, and the first
    // lines come out at once. Pieces are small because trace compresses
    // well: a byte of ETMv4 atoms is eight branches, and a generated
    // capture decodes to about 400 bytes of Tarmac a byte (a 64 KiB piece
    // held 27 MB of text and its first line took seconds).
    const PIECE: usize = 256;
    let mut chunk = vec![0u8; 1 << 16];
    let mut idx: TrcIndex = 0;
    for p in ss.buffer_paths(&info) {
        let mut f = std::fs::File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        loop {
            let n = match std::io::Read::read(&mut f, &mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("{}: {e}", p.display())),
            };
            let mut off = 0;
            while off < n {
                let (r, used) = tree.trace_data_in(DatapathOp::Data, idx, &chunk[off..n.min(off + PIECE)]);
                drain(out)?;
                if let Some(e) = &count.borrow().1 {
                    return Err(e.clone());
                }
                if r.is_fatal() || used == 0 {
                    return Err(format!("decode stopped at index {idx} of buffer {name} ({r:?})"));
                }
                off += used;
                idx += used as TrcIndex;
            }
        }
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    drain(out)?;
    let (n, err) = count.borrow().clone();
    match err {
        Some(e) => Err(e),
        None => Ok(n),
    }
}
