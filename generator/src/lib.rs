//! Trace generator: makes snapshots whose truth is known.
//!
//! From a seed it builds a small random program as real machine code,
//! walks a random execution path through it, encodes that execution as a
//! trace protocol's packets the way a trace unit would, and writes a
//! complete snapshot (registers consistent with the configuration, the
//! buffer, the memory image) together with the truth: the executed
//! instruction ranges, or the software messages, in order.

pub mod a32t32;
pub mod a64;
pub mod check;
pub mod elf;
pub mod ete;
pub mod etmv3;
pub mod etmv4;
pub mod execution;
pub mod flow;
pub mod formatter;
pub mod interleaved;
pub mod itm;
pub mod perf_data;
pub mod ptm;
pub mod snapshot_writer;
pub mod stm;
pub mod stream;
pub mod t32m;
pub mod truth_file;

use std::fmt::{self, Write as _};

use crate::formatter::{FormatterConfig, FrameFormatter};
use crate::snapshot_writer::SnapshotSpec;
use coresight_decode::arch::SecurityState;
use coresight_decode::element::{ElemType, ItmPktKind, MemTrans, TraceElement};

/// Deterministic random numbers (xorshift64*): the same seed gives the
/// same snapshot on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// True with probability `num`/`den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    pub fn range(&mut self, lo: u64, hi_inclusive: u64) -> u64 {
        lo + self.below(hi_inclusive - lo + 1)
    }
}

/// Protocols the generator can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenProtocol {
    Etmv4,
    /// ETMv4 on an M-profile core (Armv8-M / Armv8.1-M, T32 only).
    Etmv4M,
    Stm,
    Itm,
    /// PTM (Cortex-A15 / A9) on A32/T32 code, with its options.
    Ptm(ptm::PtmGenOptions),
    /// ETMv3 (Cortex-A7) on A32/T32 code, with its options.
    Etmv3(etmv3::Etmv3GenOptions),
    /// PTMs and ETMv3s on their own trace IDs in one formatted buffer,
    /// like a TC2 (options random).
    Tc2,
    /// ETE (Armv9) on A64 code, with its options; one buffer or several
    /// (sessions).
    Ete(ete::EteOptions),
}

impl GenProtocol {
    pub fn from_name(s: &str) -> Option<GenProtocol> {
        match s.to_ascii_lowercase().as_str() {
            "etmv4" | "etm4" | "etmv4i" => Some(GenProtocol::Etmv4),
            "etmv4m" | "etm4m" | "etmv4-m" => Some(GenProtocol::Etmv4M),
            "stm" => Some(GenProtocol::Stm),
            "itm" => Some(GenProtocol::Itm),
            "ptm" | "pft" => Some(GenProtocol::Ptm(Default::default())),
            "etmv3" | "etm3" => Some(GenProtocol::Etmv3(Default::default())),
            "tc2" | "ptm+etmv3" => Some(GenProtocol::Tc2),
            "ete" => Some(GenProtocol::Ete(Default::default())),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            GenProtocol::Etmv4 => "etmv4",
            GenProtocol::Etmv4M => "etmv4m",
            GenProtocol::Stm => "stm",
            GenProtocol::Itm => "itm",
            GenProtocol::Ptm(_) => "ptm",
            GenProtocol::Etmv3(_) => "etmv3",
            GenProtocol::Tc2 => "tc2",
            GenProtocol::Ete(_) => "ete",
        }
    }
    /// Sets a protocol option by name (`retstack=1`, `isa=t32`...).
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<(), String> {
        match self {
            GenProtocol::Ptm(o) => o.set(name, value),
            GenProtocol::Etmv3(o) => o.set(name, value),
            GenProtocol::Ete(o) => o.set_value(name, value),
            p => Err(format!("{} has no options", p.name())),
        }
    }
}

/// How the trace buffer is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferLayout {
    /// One source, no frame formatting (`source_data`).
    Unformatted,
    /// CoreSight frames (`coresight`).
    Formatted,
}

/// Generation options.
#[derive(Clone, Copy, Debug)]
pub struct GenOptions {
    pub seed: u64,
    pub protocol: GenProtocol,
    pub layout: BufferLayout,
    /// Approximate number of waypoints (branches) or messages.
    pub length: usize,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            seed: 1,
            protocol: GenProtocol::Etmv4,
            layout: BufferLayout::Formatted,
            length: 200,
        }
    }
}

/// One item of the truth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Truth {
    /// Instructions executed from `start` up to (not including) `end`; the
    /// last one a waypoint, taken (`exec`) or not.
    Range {
        start: u64,
        end: u64,
        count: u32,
        exec: bool,
    },
    /// A software message.
    Message {
        master: u16,
        channel: u16,
        bits: u8,
        payload: u64,
        marker: bool,
        timestamp: Option<u64>,
    },
    /// An exception: its number and preferred return address.
    Exception { number: u32, ret_addr: u64 },
    /// An exception return, where the protocol marks one.
    ExceptionReturn,
    /// The PE context changes (or is restated). The security state is
    /// printed S, NS, Realm or Root.
    Context {
        el: u8,
        security: SecurityState,
        aarch64: bool,
        ctxt_id: Option<u32>,
        vmid: Option<u32>,
    },
    /// A cycle count.
    CycleCount(u32),
    /// A timestamp, with the cycle count it carries.
    Timestamp { ts: u64, cc: Option<u32> },
    /// ETE: a timestamp marker.
    TsMarker,
    /// ETE: a transactional memory element (start, commit, failure, or
    /// trace starting inside a transaction).
    MemTrans(MemTrans),
    /// ETE: an instrumentation packet's exception level and value.
    Instrumentation { el: u8, value: u64 },
    /// The start of trace buffer `n` (from 1) of a multi-session snapshot,
    /// whose buffers are decoded in turn.
    Session(u32),
}

impl fmt::Display for Truth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Truth::Range {
                start,
                end,
                count,
                exec,
            } => {
                write!(
                    f,
                    "range 0x{start:x} 0x{end:x} {count} {}",
                    if exec { "E" } else { "N" }
                )
            }
            Truth::Message {
                master,
                channel,
                bits,
                payload,
                marker,
                timestamp,
            } => {
                write!(f, "msg {master:#x} {channel:#x} {bits} 0x{payload:x}")?;
                if marker {
                    f.write_str(" marker")?;
                }
                if let Some(ts) = timestamp {
                    write!(f, " ts=0x{ts:x}")?;
                }
                Ok(())
            }
            Truth::Exception { number, ret_addr } => write!(f, "exception {number:#x} ret 0x{ret_addr:x}"),
            Truth::ExceptionReturn => f.write_str("exception return"),
            Truth::Context {
                el,
                security,
                aarch64,
                ctxt_id,
                vmid,
            } => {
                let sec = match security {
                    SecurityState::Secure => "S",
                    SecurityState::NonSecure => "NS",
                    SecurityState::Realm => "Realm",
                    SecurityState::Root => "Root",
                };
                write!(f, "context EL{el} {sec} {}", if aarch64 { "64" } else { "32" })?;
                if let Some(c) = ctxt_id {
                    write!(f, " cid={c:#x}")?;
                }
                if let Some(v) = vmid {
                    write!(f, " vmid={v:#x}")?;
                }
                Ok(())
            }
            Truth::CycleCount(cc) => write!(f, "cc {cc}"),
            Truth::Timestamp { ts, cc } => {
                write!(f, "ts 0x{ts:x}")?;
                if let Some(cc) = cc {
                    write!(f, " cc={cc}")?;
                }
                Ok(())
            }
            Truth::TsMarker => f.write_str("ts marker"),
            Truth::MemTrans(m) => f.write_str(match m {
                MemTrans::TraceInit => "memtrans init",
                MemTrans::Start => "memtrans start",
                MemTrans::Commit => "memtrans commit",
                MemTrans::Fail => "memtrans fail",
            }),
            Truth::Instrumentation { el, value } => write!(f, "ite EL{el} 0x{value:x}"),
            Truth::Session(n) => write!(f, "session {n}"),
        }
    }
}

impl Truth {
    /// Items beyond instruction ranges, messages and session starts:
    /// exceptions, contexts, cycle counts, timestamps, ETE's elements. They
    /// are compared only for truths that contain some (generators that
    /// model them).
    pub fn is_detail(&self) -> bool {
        !matches!(self, Truth::Range { .. } | Truth::Message { .. } | Truth::Session(_))
    }

    /// The truth item a decoded element stands for, if any.
    pub fn from_element(e: &TraceElement) -> Option<Truth> {
        match e.elem_type {
            ElemType::InstrRange => Some(Truth::Range {
                start: e.st_addr,
                end: e.en_addr,
                count: e.num_instr_range,
                exec: e.last_instr_exec,
            }),
            // Data messages; triggers and flags are not messages.
            ElemType::SwTrace if e.sw_trace.payload_bits > 0 && !e.sw_trace.trigger => Some(Truth::Message {
                master: e.sw_trace.master_id,
                channel: e.sw_trace.channel_id,
                bits: e.sw_trace.payload_bits,
                payload: match e.sw_trace.payload_bits {
                    64 => e.sw_payload,
                    b => e.sw_payload & ((1u64 << b) - 1),
                },
                marker: e.sw_trace.marker,
                timestamp: e.sw_trace.has_timestamp.then_some(e.timestamp),
            }),
            ElemType::ItmTrace if e.itm.kind == ItmPktKind::Swit => Some(Truth::Message {
                master: 0,
                channel: e.itm.channel_or_desc as u16,
                bits: e.itm.payload_size * 8,
                payload: e.itm.value as u64,
                marker: false,
                timestamp: None,
            }),
            ElemType::Exception => Some(Truth::Exception {
                number: e.exception_number,
                ret_addr: e.en_addr,
            }),
            ElemType::ExceptionRet => Some(Truth::ExceptionReturn),
            ElemType::PeContext => Some(Truth::Context {
                el: e.context.exception_level.number().unwrap_or(0xff),
                security: e.context.security,
                aarch64: e.context.bits64,
                ctxt_id: e.context.ctxt_id_valid.then_some(e.context.context_id),
                vmid: e.context.vmid_valid.then_some(e.context.vmid),
            }),
            ElemType::CycleCount => Some(Truth::CycleCount(e.cycle_count)),
            ElemType::Timestamp => Some(Truth::Timestamp {
                ts: e.timestamp,
                cc: e.has_cc.then_some(e.cycle_count),
            }),
            ElemType::SyncMarker => Some(Truth::TsMarker),
            ElemType::MemTrans => Some(Truth::MemTrans(e.mem_trans)),
            ElemType::Instrumentation => Some(Truth::Instrumentation {
                el: e.ite_el,
                value: e.ite_value,
            }),
            _ => None,
        }
    }
}

/// A generated snapshot and its truth.
pub struct Generated {
    pub spec: SnapshotSpec,
    pub truth: Vec<Truth>,
}

impl Generated {
    /// The truth as text, one item a line.
    pub fn truth_text(&self) -> String {
        let mut s = String::new();
        for t in &self.truth {
            let _ = writeln!(s, "{t}");
        }
        s
    }
}

/// Generates a snapshot (ETMv4 options chosen from the seed: see
/// [`etmv4::generate_with`] to choose them).
pub fn generate(opts: &GenOptions) -> Generated {
    match opts.protocol {
        GenProtocol::Etmv4 | GenProtocol::Etmv4M => etmv4::generate(opts),
        GenProtocol::Stm => stm::generate(opts),
        GenProtocol::Itm => itm::generate(opts),
        GenProtocol::Ptm(o) => ptm::generate(opts, &o),
        GenProtocol::Etmv3(o) => etmv3::generate(opts, &o),
        GenProtocol::Tc2 => etmv3::generate_multi(opts),
        GenProtocol::Ete(o) => ete::generate_with(opts, &o),
    }
}

/// Lays out one source's bytes as the buffer format asks.
pub(crate) fn layout_buffer(
    layout: BufferLayout,
    trace_id: u8,
    bytes: &[u8],
    rng: &mut Rng,
) -> (Vec<u8>, &'static str) {
    match layout {
        BufferLayout::Unformatted => (bytes.to_vec(), "source_data"),
        BufferLayout::Formatted => {
            let mut f = FrameFormatter::new(FormatterConfig::default());
            // Feed in uneven pieces, as a funnel would interleave them.
            let mut i = 0;
            while i < bytes.len() {
                // (`skip_layout_draws` draws the same numbers.)
                let n = (1 + rng.below(24) as usize).min(bytes.len() - i);
                f.push(trace_id, &bytes[i..i + n]);
                i += n;
            }
            (f.finish(), "coresight")
        }
    }
}

/// The random numbers [`layout_buffer`] draws to format `len` bytes: those
/// that follow a formatted buffer's.
pub(crate) fn skip_layout_draws(rng: &mut Rng, len: u64) {
    let mut i = 0;
    while i < len {
        i += 1 + rng.below(24);
    }
}

/// Damages `data` the way a faulty capture might: one to six bits
/// flipped, bytes changed, runs repeated, cut or filled, or the end
/// truncated. Never leaves it empty. Shared by the mutation tests of the
/// decoders and of the file formats.
pub fn damage(rng: &mut Rng, data: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    for _ in 0..1 + rng.below(6) {
        let len = data.len() as u64;
        let at = rng.below(len) as usize;
        match rng.below(6) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data[at] = rng.next_u64() as u8,
            2 => {
                let n = (1 + rng.below(16) as usize).min(data.len() - at);
                let run: Vec<u8> = data[at..at + n].to_vec();
                data.splice(at..at, run);
            }
            3 => {
                let n = (1 + rng.below(16) as usize).min(data.len() - at);
                data.drain(at..at + n);
            }
            4 => data.truncate(at.max(1)),
            _ => {
                let b = [0x00, 0xff, 0x80, 0x7f][rng.below(4) as usize];
                let n = (1 + rng.below(12) as usize).min(data.len() - at);
                data[at..at + n].fill(b);
            }
        }
        if data.is_empty() {
            data.push(0);
        }
    }
}
