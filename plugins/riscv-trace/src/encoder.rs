//! Encoder: an executed instruction stream to a RISC-V trace buffer, for
//! any combination of the emit options, with synchronisation points, Nop
//! padding, wrapping and `tbufwrite`. It writes exactly what the decoder
//! reads (see the crate documentation, "Choices").

use coresight_decode::element::DataAccessKind;
use coresight_decode::interfaces::TargetMemAccess;
use coresight_decode::memory::MemSpace;

use crate::config::{CoreIsa, MIN_BUFFER_WORDS, RiscvTraceConfig, TraceReg};
use crate::instr::{Flow, classify, instr_len};
use crate::packet::{Privilege, header};

/// Privilege mode and interrupt enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Mode {
    /// PRV: 0 U, 1 S, 3 M.
    pub prv: u8,
    pub ie: bool,
}

/// An interrupt taken after an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interrupt {
    /// First instruction of the handler.
    pub handler: u64,
    /// Mode the handler runs in.
    pub mode: Mode,
}

/// A load or store an instruction made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub kind: DataAccessKind,
    pub addr: u64,
    /// The value loaded or stored (XLEN bits).
    pub value: u64,
}

/// One executed instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Executed {
    pub hart: u64,
    pub pc: u64,
    /// Where this hart goes next by the instruction's own semantics (for
    /// an interrupt taken after it: where it would have gone, the
    /// preferred return address).
    pub next_pc: u64,
    /// Mode the instruction runs in.
    pub mode: Mode,
    /// Mode after it (changes at traps and trap returns).
    pub next_mode: Mode,
    pub interrupt: Option<Interrupt>,
    /// A timestamp taken before the instruction.
    pub timestamp: Option<u64>,
    pub access: Option<Access>,
}

/// The encoded buffer and the register values that describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The whole buffer, `tbufstart` at byte 0.
    pub data: Vec<u8>,
    /// `trace` (with `wrapped`), `tbufstart`, `tbufend`, `tbufwrite`.
    pub config: RiscvTraceConfig,
}

/// Why a stream could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError {
    /// Position of the offending instruction in the stream.
    pub step: usize,
    pub message: String,
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "executed instruction {}: {}", self.step, self.message)
    }
}

impl std::error::Error for EncodeError {}

/// Kinds of value whose missing bits come from the last value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pc = 0,
    LoadAddr = 1,
    StoreAddr = 2,
    Timestamp = 3,
}

/// The encoder.
pub struct Encoder {
    trace: TraceReg,
    isa: CoreIsa,
    tbufstart: u64,
    words: Vec<u32>,
    /// Shape of the buffer (sync points).
    shape: RiscvTraceConfig,
    /// Nibbles written since the start (the buffer position is this
    /// modulo the buffer length).
    pos: u64,
    /// Last value of each [`Kind`], `None` when a decoder starting at the
    /// last synchronisation point would not know it.
    last: [Option<u64>; 4],
    /// A synchronisation point was passed: the next instruction starts
    /// with a Trace Enabled group.
    sync_passed: bool,
    /// Some hart other than 0 has been traced.
    multi_hart: bool,
}

fn low_mask(bits: u32) -> u64 {
    if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

impl Encoder {
    /// An encoder writing a buffer of `buffer_words` words at `tbufstart`
    /// with the emit options of `trace` (its `wrapped` bit is ignored).
    pub fn new(trace: TraceReg, isa: CoreIsa, tbufstart: u64, buffer_words: u64) -> Result<Encoder, String> {
        if !(MIN_BUFFER_WORDS..=(1 << 28)).contains(&buffer_words) {
            return Err(format!(
                "buffer of {buffer_words} words: expected {MIN_BUFFER_WORDS} to 2^28"
            ));
        }
        let trace = TraceReg(trace.0 & !TraceReg::WRAPPED);
        let tbufend = tbufstart
            .checked_add(4 * buffer_words)
            .ok_or_else(|| format!("buffer at 0x{tbufstart:x} passes the end of memory"))?;
        let shape = RiscvTraceConfig::new(trace, tbufstart, tbufend, tbufstart, isa).map_err(|e| e.to_string())?;
        Ok(Encoder {
            trace,
            isa,
            tbufstart,
            words: vec![0; buffer_words as usize],
            shape,
            pos: 0,
            last: [None; 4],
            sync_passed: false,
            multi_hart: false,
        })
    }

    fn buf_nibs(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    fn put(&mut self, n: u8) {
        let phys = self.pos % self.buf_nibs();
        let w = &mut self.words[(phys / 8) as usize];
        let sh = 4 * (phys % 8) as u32;
        *w = (*w & !(0xf << sh)) | (((n & 0xf) as u32) << sh);
        self.pos += 1;
    }

    /// Makes room for a packet of `len` nibbles: Nops up to the next
    /// synchronisation point if it would straddle one. Returns whether the
    /// packet now starts at a synchronisation point.
    fn place(&mut self, len: u64) -> bool {
        let phys = self.pos % self.buf_nibs();
        if self.shape.is_sync_point(phys) {
            return true;
        }
        let next = self.shape.next_sync_point(phys);
        if phys + len > next {
            for _ in phys..next {
                self.put(header::NOP);
            }
            return true;
        }
        false
    }

    fn at_sync_point(&mut self) {
        // A decoder starting here knows none of the last values.
        self.last = [None; 4];
        self.sync_passed = true;
    }

    fn simple(&mut self, nibbles: &[u8]) {
        if self.place(nibbles.len() as u64) {
            self.at_sync_point();
        }
        for &n in nibbles {
            self.put(n);
        }
    }

    /// Width of a kind's field, in bits.
    fn width(&self, kind: Kind) -> u32 {
        match kind {
            Kind::Pc => self.isa.xlen as u32 - self.isa.pc_shift(),
            Kind::LoadAddr | Kind::StoreAddr => self.isa.xlen as u32,
            Kind::Timestamp => 64,
        }
    }

    fn fill_nibbles(&self, kind: Kind, v: u64) -> u8 {
        let w = self.width(kind);
        let full = w.div_ceil(4) as u8;
        match self.last[kind as usize] {
            None => full,
            Some(last) => {
                let diff = (v ^ last) & low_mask(w);
                (1..=full)
                    .find(|&n| (4 * n as u32) >= 64 || diff >> (4 * n as u32) == 0)
                    .unwrap_or(full)
            }
        }
    }

    fn sext_nibbles(&self, v: u64) -> u8 {
        let xlen = self.isa.xlen as u32;
        let v = v & self.isa.mask();
        (1..=(xlen / 4) as u8)
            .find(|&n| {
                let b = 4 * n as u32;
                let s = 64 - b;
                ((((v << s) as i64) >> s) as u64) & self.isa.mask() == v
            })
            .unwrap_or((xlen / 4) as u8)
    }

    fn sequence(&mut self, hdr: u8, value: u64, nibbles: impl Fn(&Self) -> u8) {
        let mut n = nibbles(self);
        if self.place(2 + n as u64) {
            self.at_sync_point();
            n = nibbles(self);
        }
        self.put(hdr);
        self.put(n - 1);
        for i in 0..n as u32 {
            self.put(((value >> (4 * i)) & 0xf) as u8);
        }
    }

    fn filled(&mut self, hdr: u8, kind: Kind, value: u64) {
        let v = value & low_mask(self.width(kind));
        self.sequence(hdr, v, |s| s.fill_nibbles(kind, v));
        self.last[kind as usize] = Some(v);
    }

    fn pc(&mut self, addr: u64) {
        self.filled(header::PC, Kind::Pc, (addr & self.isa.mask()) >> self.isa.pc_shift());
    }

    fn data(&mut self, hdr: u8, value: u64) {
        let v = value & self.isa.mask();
        self.sequence(hdr, v, |s| s.sext_nibbles(v));
    }

    fn hart(&mut self, id: u64) {
        let n = (1..=16u8).find(|&n| n == 16 || id >> (4 * n as u32) == 0).unwrap_or(16);
        self.sequence(header::CHANGE_HART, id, |_| n);
    }

    fn privilege(&mut self, m: Mode, interrupt: bool) {
        self.simple(&[
            header::PRIVILEGE,
            Privilege {
                interrupt,
                prv: m.prv,
                ie: m.ie,
            }
            .nibble(),
        ]);
    }

    /// Trace Enabled (or Change Hart) group: where the hart is now.
    fn group(&mut self, enabled: bool, r: &Executed) {
        if enabled {
            self.simple(&[header::TRACE_ENABLED, 0]);
        }
        if !enabled || self.multi_hart {
            self.hart(r.hart);
        }
        if self.trace.emit_priv() {
            self.privilege(r.mode, false);
        }
        if self.trace.emit_pc() {
            self.pc(r.pc);
        }
        if enabled {
            self.sync_passed = false;
        }
    }

    /// Encodes `steps` (instruction bytes read from `mem`), then Trace
    /// Disabled, and returns the buffer.
    pub fn encode(mut self, mem: &mut dyn TargetMemAccess, steps: &[Executed]) -> Result<Encoded, EncodeError> {
        let t = self.trace;
        let mut cur_hart: Option<u64> = None;
        // Where the current hart goes after its last instruction.
        let mut cont = 0u64;
        for (i, r) in steps.iter().enumerate() {
            let err = |m: String| EncodeError { step: i, message: m };
            let mut buf = [0u8; 4];
            let n = mem
                .read_target_memory(r.pc, 0, MemSpace::ANY, &mut buf)
                .map_err(|e| err(format!("reading 0x{:x}: {e}", r.pc)))?;
            let hw = u16::from_le_bytes([buf[0], buf[1]]);
            if n < 2 || instr_len(hw) == 0 || n < instr_len(hw) {
                return Err(err(format!("no instruction in the image at 0x{:x}", r.pc)));
            }
            let op = if instr_len(hw) == 2 {
                hw as u32
            } else {
                u32::from_le_bytes(buf)
            };
            let ins = classify(self.isa, r.pc, op)
                .map_err(|_| err(format!("opcode 0x{op:x} at 0x{:x} not valid for this hart", r.pc)))?;
            let seq = r.pc.wrapping_add(ins.size as u64) & self.isa.mask();
            if r.hart != 0 {
                self.multi_hart = true;
            }

            match cur_hart {
                None => self.group(true, r),
                Some(h) if h != r.hart => {
                    // Where the old hart stopped, then the new one.
                    if t.emit_pc() {
                        self.pc(cont);
                    }
                    self.group(false, r);
                }
                Some(_) => {}
            }
            if self.sync_passed {
                self.group(true, r);
            }
            cur_hart = Some(r.hart);

            if t.emit_timestamp()
                && let Some(ts) = r.timestamp
            {
                self.filled(header::TIMESTAMP, Kind::Timestamp, ts);
            }
            if let Some(a) = r.access {
                let (addr_on, data_on, ah, dh, kind) = match a.kind {
                    DataAccessKind::Load => (
                        t.emit_load_addr(),
                        t.emit_load_data(),
                        header::LOAD_ADDR,
                        header::LOAD_DATA,
                        Kind::LoadAddr,
                    ),
                    DataAccessKind::Store => (
                        t.emit_store_addr(),
                        t.emit_store_data(),
                        header::STORE_ADDR,
                        header::STORE_DATA,
                        Kind::StoreAddr,
                    ),
                };
                if addr_on {
                    self.filled(ah, kind, a.addr);
                }
                if data_on {
                    self.data(dh, a.value);
                }
            }

            let pair = !t.emit_branch() && t.emit_pc();
            match ins.flow {
                Flow::Other => {
                    if r.next_pc != seq {
                        return Err(err(format!(
                            "0x{:x} does not branch but the next instruction is 0x{:x}",
                            r.pc, r.next_pc
                        )));
                    }
                }
                Flow::Branch { target } => {
                    let taken = r.next_pc != seq;
                    if taken && r.next_pc != target {
                        return Err(err(format!(
                            "branch at 0x{:x} goes to 0x{target:x}, not 0x{:x}",
                            r.pc, r.next_pc
                        )));
                    }
                    if t.emit_branch() {
                        self.simple(&[if taken {
                            header::BRANCH_TAKEN
                        } else {
                            header::BRANCH_NOT_TAKEN
                        }]);
                    } else if pair && taken {
                        self.pc(r.pc);
                        self.pc(r.next_pc);
                    }
                }
                Flow::Jal { target, .. } => {
                    if r.next_pc != target {
                        return Err(err(format!(
                            "jump at 0x{:x} goes to 0x{target:x}, not 0x{:x}",
                            r.pc, r.next_pc
                        )));
                    }
                    if pair {
                        self.pc(r.pc);
                        self.pc(r.next_pc);
                    }
                }
                Flow::Jalr { .. } => {
                    if pair {
                        self.pc(r.pc);
                    }
                    if t.emit_pc() {
                        self.pc(r.next_pc);
                    }
                }
                Flow::Trap | Flow::TrapReturn => {
                    if pair {
                        self.pc(r.pc);
                    }
                    if t.emit_priv() {
                        self.privilege(r.next_mode, false);
                    }
                    if t.emit_pc() {
                        self.pc(r.next_pc);
                    }
                }
            }
            cont = r.next_pc;
            if let Some(irq) = r.interrupt {
                // The interrupt's Privilege Level packet is what tells its
                // PCs from a jump's, so it goes out whenever PCs do.
                if t.emit_pc() {
                    self.pc(r.next_pc);
                }
                if t.emit_priv() || t.emit_pc() {
                    self.privilege(irq.mode, true);
                }
                if t.emit_pc() {
                    self.pc(irq.handler);
                }
                cont = irq.handler;
            }
        }
        if cur_hart.is_some() {
            if t.emit_pc() {
                self.pc(cont);
            }
            self.simple(&[header::TRACE_DISABLED]);
        }
        while !self.pos.is_multiple_of(8) {
            self.put(header::NOP);
        }
        let buf_nibs = self.buf_nibs();
        let wrapped = self.pos > buf_nibs;
        let phys = if self.pos == buf_nibs {
            buf_nibs
        } else {
            self.pos % buf_nibs
        };
        let trace = TraceReg(t.0 | if wrapped { TraceReg::WRAPPED } else { 0 });
        let tbufend = self.tbufstart + 4 * self.words.len() as u64;
        let config = RiscvTraceConfig {
            trace,
            tbufstart: self.tbufstart,
            tbufend,
            tbufwrite: self.tbufstart + phys / 2,
            isa: self.isa,
            trace_id: 0,
        };
        let data = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        Ok(Encoded { data, config })
    }
}
