//! Typed Tarmac records: one per line of trace.
//!
//! Records borrow their text (mode, disassembly, register names) from the
//! line being read and their decoded bytes from the reader's scratch
//! buffers, so reading allocates nothing per line.

use std::fmt;

/// Time unit written after a timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// `clk`: clock ticks.
    Clk,
    /// `ns`: nanoseconds.
    Ns,
    /// `cs`: written by some Arm models; kept as written.
    Cs,
    /// `cyc`: core cycles.
    Cyc,
    /// `tic`: simulator ticks.
    Tic,
    /// `ps`: picoseconds.
    Ps,
    /// `us`: microseconds.
    Us,
}

impl TimeUnit {
    /// The unit a time suffix names (`b"ns"`...); `None` for an unknown suffix.
    pub fn from_name(s: &[u8]) -> Option<Self> {
        Some(match s {
            b"clk" => TimeUnit::Clk,
            b"ns" => TimeUnit::Ns,
            b"cs" => TimeUnit::Cs,
            b"cyc" => TimeUnit::Cyc,
            b"tic" => TimeUnit::Tic,
            b"ps" => TimeUnit::Ps,
            b"us" => TimeUnit::Us,
            _ => return None,
        })
    }
    /// The unit as written in a trace.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Clk => "clk",
            TimeUnit::Ns => "ns",
            TimeUnit::Cs => "cs",
            TimeUnit::Cyc => "cyc",
            TimeUnit::Tic => "tic",
            TimeUnit::Ps => "ps",
            TimeUnit::Us => "us",
        }
    }
}

/// Instruction set of an executed instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Iset {
    /// A32 (`A`).
    Arm,
    /// T32 (`T`, `T16`, `T32`).
    Thumb,
    /// A64 (`O`).
    A64,
    /// RISC-V (`R`: this project's choice, Tarmac has no RISC-V state;
    /// see [`crate::writer`]).
    RiscV,
}

impl Iset {
    /// The state letter Fast Models write.
    pub fn letter(self) -> &'static str {
        match self {
            Iset::Arm => "A",
            Iset::Thumb => "T",
            Iset::A64 => "O",
            Iset::RiscV => "R",
        }
    }
}

/// What happened to an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Executed (`IT`, `IF`, `ES`).
    Executed,
    /// Failed its condition code (`IS`, or `ES ... CCFAIL`).
    CcFail,
    /// The fetch failed: encoding written as `--------`.
    FetchFail,
}

/// Which instruction line style the record used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstrStyle {
    /// `IT`: an instruction executed (Fast Models).
    It,
    /// `IS`: an instruction that failed its condition code (Fast Models).
    Is,
    /// `IF` line (taken as executed).
    If,
    /// `ES` line of RTL-style traces (executed, or `CCFAIL`).
    Es,
}

/// A physical address with its optional security suffix (`_S`, `_NS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PhysAddr {
    /// The physical address.
    pub addr: u64,
    /// `Some(true)` for `_NS`, `Some(false)` for `_S`.
    pub non_secure: Option<bool>,
}

/// Security state from a mode suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Security {
    /// Secure (`_s`).
    Secure,
    /// Non-secure (`_n`, `_ns`).
    NonSecure,
    /// Realm (`_rl`).
    Realm,
    /// Root (`_rt`).
    Root,
}

/// An instruction line (`IT`, `IS`, `IF`, `ES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instruction<'a> {
    /// The line style the trace used.
    pub style: InstrStyle,
    /// Executed, condition failed, or fetch failed.
    pub effect: Effect,
    /// The `(inst_id)` or `(addr:inst_id)` counter, when written.
    pub inst_id: Option<u64>,
    /// Virtual address of the instruction.
    pub addr: u64,
    /// Physical address, when written.
    pub paddr: Option<PhysAddr>,
    /// Encoding in logical order (T32: first halfword in the high half);
    /// `None` when the fetch failed.
    pub encoding: Option<u64>,
    /// Width in bits, from the number of hex digits of the encoding.
    pub width: u8,
    /// Instruction set the instruction is in.
    pub iset: Iset,
    /// True when the state was written `T16` or `T32`.
    pub t16_t32: bool,
    /// True when the trace gave no state and the reader's implicit one was used.
    pub implicit_iset: bool,
    /// Mode and security as written (`svc_s`, `EL3h_s`, `thread`), if any.
    pub mode: Option<&'a str>,
    /// The disassembly as written (possibly empty).
    pub disassembly: &'a str,
}

impl Instruction<'_> {
    /// Security state from the mode's suffix (`_s`, `_n`/`_ns`, `_rl`, `_rt`).
    pub fn security(&self) -> Option<Security> {
        let m = self.mode?;
        let (_, suf) = m.rsplit_once('_')?;
        Some(match suf.to_ascii_lowercase().as_str() {
            "s" => Security::Secure,
            "n" | "ns" => Security::NonSecure,
            "rl" => Security::Realm,
            "rt" => Security::Root,
            _ => return None,
        })
    }
    /// The mode without its security suffix.
    pub fn mode_name(&self) -> Option<&str> {
        let m = self.mode?;
        Some(match m.rsplit_once('_') {
            Some((name, _)) if self.security().is_some() => name,
            _ => m,
        })
    }
}

/// Register classes the reader identifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegClass {
    /// AArch32 core register r0..r15 (`msp` is r13, `lr` is r14).
    R,
    /// AArch64 core register x0..x30 (also written `e0`..`e30`).
    X,
    /// Low 32 bits of x0..x30.
    W,
    /// AArch32 / AArch64 single-precision FP register s0..s31.
    S,
    /// Double-precision FP register d0..d31.
    D,
    /// 128-bit vector register v0..v31.
    V,
    /// 128-bit quadword register q0..q15 (AArch32) or q0..q31.
    Q,
    /// SVE vector register; its length is that of the data written.
    Z,
    /// SVE predicate register; its length is that of the data written.
    P,
    /// AArch64 stack pointer (`xsp`).
    Xsp,
    /// Low 32 bits of the AArch64 stack pointer (`wsp`).
    Wsp,
    /// Program status register (`psr`, `cpsr`; xPSR on M-profile).
    Psr,
    /// Floating-point status register (FPSR).
    Fpsr,
    /// Floating-point control register (FPCR).
    Fpcr,
    /// AArch32 floating-point status and control register (FPSCR).
    Fpscr,
    /// M-profile vector predication status and control register (VPR, MVE).
    Vpr,
}

/// A register the reader identified: class and number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegId {
    /// Register class.
    pub class: RegClass,
    /// Register number within the class (0 for single registers).
    pub index: u8,
}

impl RegId {
    /// Size in bytes (`None` for the variable-length SVE registers).
    pub fn size(self) -> Option<usize> {
        use RegClass::*;
        Some(match self.class {
            R | W | S | Wsp | Psr | Fpsr | Fpcr | Fpscr | Vpr => 4,
            X | D | Xsp => 8,
            V | Q => 16,
            Z | P => return None,
        })
    }
}

impl fmt::Display for RegId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RegClass::*;
        let p = match self.class {
            R => "r",
            X => "x",
            W => "w",
            S => "s",
            D => "d",
            V => "v",
            Q => "q",
            Z => "z",
            P => "p",
            Xsp => return f.write_str("xsp"),
            Wsp => return f.write_str("wsp"),
            Psr => return f.write_str("psr"),
            Fpsr => return f.write_str("fpsr"),
            Fpcr => return f.write_str("fpcr"),
            Fpscr => return f.write_str("fpscr"),
            Vpr => return f.write_str("vpr"),
        };
        write!(f, "{p}{}", self.index)
    }
}

/// A register line (`R name [(extra)] value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Register<'a> {
    /// The name as written (`r14_svc`, `SP_EL3`, `Z0`).
    pub name: &'a str,
    /// The parenthesised detail after the name (`USR`, `AARCH32`).
    pub extra: Option<&'a str>,
    /// The register, when the reader knows it (system registers it does not model are `None`).
    pub reg: Option<RegId>,
    /// Value bytes, least significant first (index = byte offset in the register).
    pub bytes: &'a [u8],
    /// Which bytes the line wrote (`--` and `<hi:lo>` leave bytes out).
    pub written: &'a [bool],
    /// The text after the name, as written.
    pub raw: &'a str,
}

impl Register<'_> {
    /// Maximal runs of written bytes: (offset, bytes least significant first).
    pub fn runs(&self) -> impl Iterator<Item = (usize, &[u8])> + '_ {
        let mut i = 0;
        std::iter::from_fn(move || {
            while i < self.written.len() && !self.written[i] {
                i += 1;
            }
            if i >= self.written.len() {
                return None;
            }
            let start = i;
            while i < self.written.len() && self.written[i] {
                i += 1;
            }
            Some((start, &self.bytes[start..i]))
        })
    }
    /// The value as an integer when every byte up to 8 was written.
    pub fn value_u64(&self) -> Option<u64> {
        if self.bytes.is_empty() || self.bytes.len() > 8 || self.written.iter().any(|w| !w) {
            return None;
        }
        Some(self.bytes.iter().rev().fold(0u64, |v, &b| (v << 8) | b as u64))
    }
}

/// A contiguous memory access (`MR4 addr value`, `W08 addr value`...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemAccess {
    /// A read (otherwise a write).
    pub read: bool,
    /// Size in bytes as written in the type (1, 2, 4, 8, 16).
    pub size: u8,
    /// Virtual address of the access.
    pub addr: u64,
    /// Physical address, when written.
    pub paddr: Option<PhysAddr>,
    /// An exclusive access (`X` in the type).
    pub exclusive: bool,
    /// Logical value (little-endian trace); `None` when written as `x`s.
    pub value: Option<u128>,
    /// The trace wrote the bytes in memory order (Cortex-M RTL `..D`).
    pub memory_order: bool,
    /// `(addr:serial)` written after the type (Cortex-R RTL).
    pub tag: Option<(u64, u64)>,
}

/// One byte of a load/store diagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiagramByte {
    /// `..`: not accessed.
    Unused,
    /// `##`: accessed, value unknown.
    Unknown,
    /// A byte accessed, with its value.
    Known(u8),
}

/// A load/store diagram (`LD`/`ST` base, 16 bytes, attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemDiagram<'a> {
    /// A load (`LD`); otherwise a store (`ST`).
    pub read: bool,
    /// Address of the rightmost byte.
    pub base: u64,
    /// Bytes as written, left to right: `bytes[0]` is at `base + 15`.
    pub bytes: [DiagramByte; 16],
    /// The line continued the previous `LD`/`ST` without repeating it.
    pub continuation: bool,
    /// Attributes after the diagram (`S:007ff80fe0 nGnRnE OSH`).
    pub attributes: &'a str,
}

/// Text-only line classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextKind {
    /// `E` lines that are not exceptions (debug events).
    Event,
    /// `BR (addr) state` branch lines of ES-style traces.
    Branch,
    /// Bus transactions (`BR4`, `BW8`...).
    Bus,
    /// Cache maintenance and cache contents (`CACHE`...).
    Cache,
    /// Translation table walks and updates (`TTW`, `TTU`).
    TableWalk,
    /// `TLB` fills and evictions.
    Tlb,
    /// `WALKCACHE` fills and evictions.
    WalkCache,
    /// Signal changes (`SIGNAL` lines: interrupts, events).
    Signal,
    /// Simulator messages (`CADI`).
    Cadi,
    /// `P`, `INFO_EXCEPTION_REASON` and other known informational lines.
    Info,
    /// A line of a kind the reader does not know.
    Unknown,
}

/// Program-flow line kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKind {
    /// `FD`: a direct branch.
    Fd,
    /// `FI`: an indirect branch.
    Fi,
    /// `FR`: a return.
    Fr,
}

/// What a line says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RecordKind<'a> {
    /// An instruction line (`IT`, `IS`, `IF`, `ES`).
    Instruction(Instruction<'a>),
    /// A register write (`R name value`).
    Register(Register<'a>),
    /// A system operation logged as a register line (`R DC CISW ...`).
    SysOp {
        /// The operation group: `DC`, `IC`, `TLBI` or `AT`.
        op: &'a str,
        /// The rest of the line after the group.
        text: &'a str,
    },
    /// A memory access (`MR4`, `MW8`, `R08`...).
    Memory(MemAccess),
    /// An access that aborted (`MR4 addr (ABORTED)`).
    MemAborted {
        /// A read (otherwise a write).
        read: bool,
        /// Size in bytes.
        size: u8,
        /// Address of the access.
        addr: u64,
    },
    /// An instruction-fetch or peripheral access of Cortex-M RTL (`MNR4O__I`).
    MemFetch {
        /// The type word as written.
        ty: &'a str,
    },
    /// A coprocessor transfer logged like memory (`MCW4___R (..) TRANSFER v`).
    CoprocTransfer {
        /// The value transferred, when written.
        value: Option<u64>,
    },
    /// A load/store diagram (`LD` / `ST`).
    Diagram(MemDiagram<'a>),
    /// `MU<sz>_<op> addr ...`: an atomic memory update.
    MemUpdate {
        /// Size in bytes.
        size: u8,
        /// The operation after the underscore.
        op: &'a str,
        /// Address, when written.
        addr: Option<u64>,
        /// The rest of the line.
        text: &'a str,
    },
    /// An exception: `E addr code CoreEvent_X`, `ES EXC ...`, `EXC ...`, `ES Reset`.
    Exception {
        /// The address written with the exception, when given.
        addr: Option<u64>,
        /// The exception code (hexadecimal in the trace), when written.
        code: Option<u64>,
        /// The exception's name (`CoreEvent_IRQ`, `Reset`...).
        name: &'a str,
        /// The rest of the line.
        text: &'a str,
    },
    /// Program flow (`FD`/`FI`/`FR` target ...).
    Flow {
        /// Direct branch, indirect branch or return.
        kind: FlowKind,
        /// The target address, when written.
        target: Option<u64>,
        /// The rest of the line.
        text: &'a str,
    },
    /// The file header (`Tarmac Text Rev 3t`).
    Header {
        /// The header line as written.
        text: &'a str,
    },
    /// Any other line: its type word and the text after it.
    Text {
        /// The class of the line, as far as the reader knows it.
        kind: TextKind,
        /// The type word.
        ty: &'a str,
        /// The text after the type word.
        text: &'a str,
    },
}

/// One line of Tarmac, read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Record<'a> {
    /// 1-based line number in the input.
    pub line: u64,
    /// Time of the line: its own, or the last one given before it.
    pub time: u64,
    /// True when the line carried its own timestamp.
    pub time_given: bool,
    /// Unit of the timestamp, when written.
    pub unit: Option<TimeUnit>,
    /// Digits after the decimal point of a fractional timestamp (`time`
    /// then counts in that fraction of the unit).
    pub time_frac_digits: u8,
    /// `cpuN` (or a bare number after the time, Trace Matcher style).
    pub cpu: Option<u32>,
    /// The line from its type word on.
    pub body: &'a str,
    /// What the line says.
    pub kind: RecordKind<'a>,
}
