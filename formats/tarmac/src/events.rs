//! Records as the events of Arm's Tarmac Trace Utilities parser.
//!
//! The upstream parser turns each line into zero or more events
//! (instruction, register, memory, exception, text-only). This printer
//! writes our records in the form of its golden test output, so that the
//! two readers can be compared line for line; `tarmac dump --events` uses it.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::record::*;

/// Writes records in the upstream test's event form, remembering which
/// warnings it has already given (upstream warns once per name).
#[derive(Debug, Default)]
pub struct EventPrinter {
    warned: BTreeSet<String>,
    big_endian: bool,
}

/// `v` with its low `size` bytes in the reverse order.
fn reverse_bytes(v: u128, size: u8) -> u128 {
    let mut r = 0u128;
    for b in 0..size as u32 {
        r |= ((v >> (8 * b)) & 0xff) << (8 * (size as u32 - 1 - b));
    }
    r
}

fn text_event(out: &mut String, time: u64, ty: &str, text: &str) {
    let _ = writeln!(out, "* TextOnlyEvent time={time} type=\"{ty}\" text=\"{text}\"");
}

fn mem_event(out: &mut String, time: u64, read: bool, known: bool, addr: u64, size: usize, contents: u64) {
    let _ = writeln!(
        out,
        "* MemoryEvent time={time} read={read} known={known} addr={addr:x} size={size} contents={contents:x}"
    );
}

impl EventPrinter {
    /// A printer that has given no warnings yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Events of a trace from a big-endian system (upstream's `--bi`):
    /// memory contents are given in the system's byte order, so a line
    /// written in memory order (Cortex-M `..D`) is taken as it stands and a
    /// load/store diagram's lowest-addressed byte is the most significant.
    pub fn with_big_endian(mut self, big_endian: bool) -> Self {
        self.big_endian = big_endian;
        self
    }

    fn warn(&mut self, out: &mut String, key: String, msg: String) {
        if self.warned.insert(key) {
            let _ = writeln!(out, "Parse warning: {msg}");
        }
    }

    /// Appends the events of one record to `out`.
    pub fn write(&mut self, rec: &Record, out: &mut String) {
        let t = rec.time;
        match rec.kind {
            RecordKind::Instruction(i) => {
                let effect = match i.effect {
                    Effect::Executed => "executed",
                    Effect::CcFail => "ccfail",
                    Effect::FetchFail => "fetchfail",
                };
                let iset = match i.iset {
                    Iset::Arm => "ARM",
                    Iset::Thumb => "Thumb",
                    Iset::A64 => "A64",
                    Iset::RiscV => "RISCV",
                };
                let _ = writeln!(
                    out,
                    "* InstructionEvent time={t} effect={effect} pc={:x} iset={iset} width={} instruction={:x} disassembly=\"{}\"",
                    i.addr,
                    i.width,
                    i.encoding.unwrap_or(0),
                    i.disassembly
                );
            }
            RecordKind::Register(r) => {
                let Some(reg) = r.reg else { return };
                for (offset, bytes) in r.runs() {
                    let mut hex = String::with_capacity(bytes.len() * 3);
                    for (k, b) in bytes.iter().rev().enumerate() {
                        if k > 0 {
                            hex.push(':');
                        }
                        let _ = write!(hex, "{b:02x}");
                    }
                    let _ = writeln!(out, "* RegisterEvent time={t} reg={reg} offset={offset} bytes={hex}");
                }
            }
            RecordKind::SysOp { op, .. } => {
                self.warn(
                    out,
                    format!("sysop {op}"),
                    format!("unsupported system operation '{op}'"),
                );
            }
            RecordKind::Memory(m) => {
                let known = m.value.is_some();
                let mut v = m.value.unwrap_or(0);
                if m.memory_order && self.big_endian && m.size <= 8 {
                    // The reader reversed it into a little-endian system's value.
                    v = reverse_bytes(v, m.size);
                }
                if m.size == 16 {
                    mem_event(out, t, m.read, known, m.addr, 8, v as u64);
                    mem_event(out, t, m.read, known, m.addr.wrapping_add(8), 8, (v >> 64) as u64);
                } else {
                    mem_event(out, t, m.read, known, m.addr, m.size as usize, v as u64);
                }
            }
            RecordKind::MemAborted { .. } => text_event(out, t, "ABORTED", rec.body),
            RecordKind::MemFetch { ty } => text_event(out, t, ty, rec.body),
            RecordKind::CoprocTransfer { .. } | RecordKind::Header { .. } => {}
            RecordKind::Diagram(d) => {
                let mut i = 0;
                while i < 16 {
                    match d.bytes[i] {
                        DiagramByte::Unused => i += 1,
                        DiagramByte::Unknown => {
                            let mut j = i;
                            while j < 16 && d.bytes[j] == DiagramByte::Unknown {
                                j += 1;
                            }
                            mem_event(out, t, d.read, false, d.base.wrapping_add(16 - j as u64), j - i, 0);
                            i = j;
                        }
                        DiagramByte::Known(_) => {
                            // Runs of at most 8 bytes, the leftmost (highest
                            // address) most significant, or on a big-endian
                            // system the rightmost.
                            let mut j = i;
                            let mut v = 0u64;
                            while j < 16 && j - i < 8 {
                                let DiagramByte::Known(b) = d.bytes[j] else { break };
                                if self.big_endian {
                                    v |= (b as u64) << (8 * (j - i));
                                } else {
                                    v = (v << 8) | b as u64;
                                }
                                j += 1;
                            }
                            mem_event(out, t, d.read, true, d.base.wrapping_add(16 - j as u64), j - i, v);
                            i = j;
                        }
                    }
                }
            }
            RecordKind::Exception { .. } => {
                let _ = writeln!(out, "* ExceptionEvent time={t}");
            }
            RecordKind::MemUpdate { text, .. } | RecordKind::Flow { text, .. } => {
                let ty = rec.body.split_whitespace().next().unwrap_or("");
                self.warn(out, format!("type {ty}"), format!("unknown Tarmac event type '{ty}'"));
                text_event(out, t, ty, text);
            }
            RecordKind::Text { kind, ty, text } => {
                if kind == TextKind::Unknown && !matches!(ty, "E" | "EXC") {
                    self.warn(out, format!("type {ty}"), format!("unknown Tarmac event type '{ty}'"));
                }
                text_event(out, t, ty, text);
            }
        }
    }
}
