//! Pieces shared by the PTM and ETMv3 decoders: Armv7 vocabulary, the
//! packet-text helpers both protocols print with, and the return stack.

use std::fmt::Write as _;

use crate::arch::Isa;
use crate::element::TraceElement;

/// A fresh output element, as OpenCSD initialises one (addresses all ones).
pub(crate) fn initial_element() -> TraceElement {
    TraceElement {
        st_addr: u64::MAX,
        en_addr: u64::MAX,
        ..TraceElement::default()
    }
}

/// Names of the Armv7-A/R exception numbers carried in branch packets.
pub(crate) const ARMV7_EXCEPTION_NAMES: [&str; 16] = [
    "No Exception",
    "Debug Halt",
    "SMC",
    "Hyp",
    "Async Data Abort",
    "Jazelle",
    "Reserved",
    "Reserved",
    "PE Reset",
    "Undefined Instr",
    "SVC",
    "Prefetch Abort",
    "Data Fault",
    "Generic",
    "IRQ",
    "FIQ",
];

/// Reasons an I-sync packet gives, by their 2-bit code.
pub(crate) const ISYNC_REASONS: [&str; 4] = ["Periodic", "Trace Enable", "Restart Overflow", "Debug Exit"];

/// Why an I-sync packet was emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ISyncReason {
    /// Periodic synchronisation (code 0b00).
    #[default]
    Periodic,
    /// Trace enabled, or restarted after being off (0b01).
    TraceEnable,
    /// Trace restarted after an overflow (0b10).
    RestartOverflow,
    /// The core left Debug state (0b11).
    DebugExit,
}

impl ISyncReason {
    pub(crate) fn from_bits(bits: u8) -> ISyncReason {
        match bits & 3 {
            0 => ISyncReason::Periodic,
            1 => ISyncReason::TraceEnable,
            2 => ISyncReason::RestartOverflow,
            _ => ISyncReason::DebugExit,
        }
    }
    pub(crate) fn name(self) -> &'static str {
        ISYNC_REASONS[self as usize]
    }
}

/// The `ISA=...; ` text of PTM and ETMv3 packets.
pub(crate) fn isa_text(isa: Isa) -> &'static str {
    match isa {
        Isa::Arm => "ISA=ARM(32); ",
        Isa::Thumb2 => "ISA=Thumb2; ",
        Isa::Aarch64 => "ISA=AArch64; ",
        Isa::Tee => "ISA=ThumbEE; ",
        Isa::Jazelle => "ISA=Jazelle; ",
        Isa::Custom | Isa::RiscV | Isa::Unknown => "ISA=Unknown; ",
    }
}

/// A partly known value as the packet printers show it: `0x`, one `?` per
/// unknown hex digit, the known digits (upper case), `(N:0)` when not all
/// bits are known, and `~[0x..]` with the bits this packet updated.
pub(crate) fn write_partial_hex(out: &mut String, total_bits: u32, valid_bits: u32, value: u64, update_bits: u32) {
    out.push_str("0x");
    let total_chars = total_bits.div_ceil(4);
    let valid_chars = valid_bits.div_ceil(4);
    for _ in valid_chars..total_chars {
        out.push('?');
    }
    let width = valid_chars as usize;
    if valid_bits > 32 {
        let _ = write!(out, "{value:0width$X}");
    } else {
        let _ = write!(out, "{:0width$X}", value as u32);
    }
    if valid_bits < total_bits {
        let _ = write!(out, " ({}:0)", valid_bits as i64 - 1);
    }
    if update_bits > 0 {
        let mask = if update_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << update_bits) - 1
        };
        let _ = write!(out, " ~[0x{:X}]", value & mask);
    }
}

/// Replaces the low `update_bits` of `current` with those of `value`.
pub(crate) fn merge_bits(current: u64, value: u64, update_bits: u32) -> u64 {
    let mask = if update_bits >= 64 {
        u64::MAX
    } else {
        (1u64 << update_bits) - 1
    };
    (current & !mask) | (value & mask)
}

/// Depth of the PTM return stack.
const RET_STACK_DEPTH: usize = 16;

/// Return addresses pushed by calls (branches with link) when the trace
/// source leaves them out of the trace: an E atom on an indirect branch
/// then returns to the last address pushed. Popping an empty stack is an
/// error (`overflow`).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReturnStack {
    active: bool,
    entries: [(u64, Isa); RET_STACK_DEPTH],
    head: usize,
    count: i32,
}

impl ReturnStack {
    pub(crate) fn set_active(&mut self, on: bool) {
        self.active = on;
    }
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }
    pub(crate) fn push(&mut self, addr: u64, isa: Isa) {
        if self.active {
            self.head = (self.head + 1) % RET_STACK_DEPTH;
            self.entries[self.head] = (addr, isa);
            self.count = (self.count + 1).min(RET_STACK_DEPTH as i32);
        }
    }
    /// Pops a return address; `isa` is updated only when there was one.
    pub(crate) fn pop(&mut self, isa: &mut Isa) -> u64 {
        let mut addr = u64::MAX;
        if self.active {
            if self.count > 0 {
                let (a, i) = self.entries[self.head];
                addr = a;
                *isa = i;
                self.head = (self.head + RET_STACK_DEPTH - 1) % RET_STACK_DEPTH;
            }
            self.count -= 1;
        }
        addr
    }
    /// More pops than pushes since the last flush.
    pub(crate) fn overflow(&self) -> bool {
        self.count < 0
    }
    pub(crate) fn flush(&mut self) {
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(total: u32, valid: u32, value: u64, upd: u32) -> String {
        let mut s = String::new();
        write_partial_hex(&mut s, total, valid, value, upd);
        s
    }

    #[test]
    fn partial_hex_forms() {
        assert_eq!(hex(32, 13, 0x137e, 13), "0x????137E (12:0) ~[0x137E]");
        assert_eq!(hex(32, 32, 0xc0076a4c, 20), "0xC0076A4C ~[0x76A4C]");
        assert_eq!(hex(64, 64, 0x58e90bb867, 42), "0x00000058E90BB867 ~[0x58E90BB867]");
        assert_eq!(hex(32, 0, 0, 0), "0x????????0 (-1:0)");
        // A value wider than its valid digits is printed whole.
        assert_eq!(hex(32, 8, 0x1234, 0), "0x??????1234 (7:0)");
    }

    #[test]
    fn return_stack_wraps_and_overflows() {
        let mut rs = ReturnStack::default();
        let mut isa = Isa::Arm;
        rs.push(0x100, Isa::Thumb2);
        assert_eq!(rs.pop(&mut isa), u64::MAX, "inactive stack pops nothing");
        assert_eq!(isa, Isa::Arm);
        rs.set_active(true);
        for i in 0..20u64 {
            rs.push(0x1000 + i * 4, Isa::Thumb2);
        }
        for i in (4..20u64).rev() {
            assert_eq!(rs.pop(&mut isa), 0x1000 + i * 4);
            assert_eq!(isa, Isa::Thumb2);
        }
        assert!(!rs.overflow());
        isa = Isa::Arm;
        assert_eq!(rs.pop(&mut isa), u64::MAX);
        assert_eq!(isa, Isa::Arm);
        assert!(rs.overflow());
        rs.flush();
        assert!(!rs.overflow());
    }
}
