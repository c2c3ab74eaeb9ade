//! Tarmac instruction records as the generic trace elements a CoreSight
//! decoder gives: instruction ranges that end at each waypoint (branch,
//! ISB), and exception elements. Anything that consumes decoded trace
//! (gnatcov export and coverage, listers) then takes a Tarmac trace as it
//! takes a decoded one.
//!
//! A range's last instruction carries whether it executed: for a branch,
//! whether it was taken. `IS` (condition failed) is not taken. An `IT`
//! conditional direct branch is taken when the next executed instruction
//! is at its target (CBZ/TBZ-style branches have no condition code, so
//! `IT` alone does not say); with no next instruction, or one at neither
//! its target nor its fall-through, `IT` counts as taken. A jump in
//! addresses after an instruction that is not a branch (an exception the
//! trace did not log), a fetch that failed and an exception record end the
//! range with an exception element, as the decoder reports an exception;
//! so does an SVC, HVC or SMC that executed, whether or not the trace logs
//! the exception it takes.

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, InstrInfo, InstrSubType, InstrType, Isa};
use coresight_decode::datapath::TrcIndex;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::instr::ArmInstrDecoder;
use coresight_decode::interfaces::{InstrDecode, TrcGenElemIn};

use super::reader::{Reader, TarmacError};
use super::record::{Effect, Instruction, Iset, RecordKind};

/// The last instruction seen, classified.
#[derive(Clone, Copy, Debug)]
struct Last {
    addr: u64,
    size: u8,
    isa: Isa,
    executed: bool,
    waypoint: bool,
    i_type: InstrType,
    sub_type: InstrSubType,
    cond: bool,
    /// Target of a direct branch.
    target: Option<u64>,
}

/// Turns Tarmac instruction records, one at a time, into trace elements
/// for a sink. Call [`finish`](Self::finish) at the end of the trace.
pub struct RangeBuilder {
    dec: ArmInstrDecoder,
    /// Trace ID given to the sink with every element.
    trace_id: u8,
    /// Start of the current range and its instruction count.
    start: u64,
    count: u32,
    last: Option<Last>,
    elem: TraceElement,
    index: TrcIndex,
}

impl RangeBuilder {
    /// A builder whose elements carry trace ID `trace_id`.
    pub fn new(trace_id: u8) -> RangeBuilder {
        RangeBuilder {
            dec: ArmInstrDecoder::new(),
            trace_id,
            start: 0,
            count: 0,
            last: None,
            elem: TraceElement::new(ElemType::InstrRange),
            index: 0,
        }
    }

    /// Takes one instruction record (`IT`, `IS`, `IF`, `ES`).
    pub fn instruction(&mut self, i: &Instruction<'_>, sink: &mut dyn TrcGenElemIn) {
        let Some(enc) = i.encoding else {
            // Nothing ran: the fetch aborted.
            self.exception(sink);
            return;
        };
        let (isa, size, opcode) = match (i.iset, i.width) {
            (Iset::A64, _) => (Isa::Aarch64, 4u8, enc as u32),
            (Iset::Arm, _) => (Isa::Arm, 4, enc as u32),
            (Iset::Thumb, 16) => (Isa::Thumb2, 2, enc as u32 & 0xffff),
            // Tarmac writes the first halfword high; the decoder wants it low.
            (Iset::Thumb, _) => (Isa::Thumb2, 4, (enc as u32).rotate_left(16)),
            // Not classified here: `trace_elements` refuses such traces.
            (Iset::RiscV, _) => return,
        };
        if let Some(l) = self.last {
            let fall = l.addr.wrapping_add(l.size as u64);
            if l.waypoint {
                let taken = match (l.executed, l.cond, l.target) {
                    (false, _, _) => false,
                    (true, true, Some(t)) if t != fall && (i.addr == t || i.addr == fall) => i.addr == t,
                    (true, _, _) => true,
                };
                self.emit_range(taken, sink);
            } else if i.addr != fall {
                self.emit_range(l.executed, sink);
                self.emit(ElemType::Exception, sink);
            } else if isa != l.isa {
                self.emit_range(l.executed, sink);
            }
        }
        let mut info = InstrInfo {
            pe_type: ArchProfile::new(
                if isa == Isa::Aarch64 {
                    ArchVersion::V8
                } else {
                    ArchVersion::V7
                },
                CoreProfile::CortexA,
            ),
            isa,
            instr_addr: i.addr,
            opcode,
            ..Default::default()
        };
        let classified = self.dec.decode_instruction(&mut info).is_ok();
        let waypoint = classified
            && matches!(
                info.instr_type,
                InstrType::Branch | InstrType::BranchIndirect | InstrType::Isb
            );
        if self.last.is_none() {
            self.start = i.addr;
            self.count = 0;
        }
        self.count += 1;
        self.last = Some(Last {
            addr: i.addr,
            size,
            isa,
            executed: i.effect != Effect::CcFail,
            waypoint,
            i_type: if classified { info.instr_type } else { InstrType::Other },
            sub_type: if classified { info.sub_type } else { InstrSubType::None },
            cond: classified && info.is_conditional,
            target: (classified && info.instr_type == InstrType::Branch).then_some(info.branch_addr),
        });
        // SVC, HVC and SMC always take an exception; a trace need not log it.
        if i.effect != Effect::CcFail && calls_exception(isa, size, opcode) {
            self.exception(sink);
        }
    }

    /// An exception: ends the current range, then an exception element.
    pub fn exception(&mut self, sink: &mut dyn TrcGenElemIn) {
        if let Some(l) = self.last {
            self.emit_range(l.executed, sink);
        }
        self.emit(ElemType::Exception, sink);
    }

    /// End of trace: the last range (a branch with nothing after it counts
    /// as taken when it executed).
    pub fn finish(&mut self, sink: &mut dyn TrcGenElemIn) {
        if let Some(l) = self.last {
            self.emit_range(l.executed, sink);
        }
    }

    fn emit_range(&mut self, exec: bool, sink: &mut dyn TrcGenElemIn) {
        let Some(l) = self.last.take() else { return };
        let e = &mut self.elem;
        e.set_type(ElemType::InstrRange);
        e.isa = l.isa;
        e.st_addr = self.start;
        e.en_addr = l.addr.wrapping_add(l.size as u64);
        e.last_i_type = l.i_type;
        e.last_i_subtype = l.sub_type;
        e.last_instr_exec = exec;
        e.last_instr_sz = l.size;
        e.last_instr_cond = l.cond;
        e.num_instr_range = self.count;
        sink.trace_elem_in(self.index, self.trace_id, &self.elem);
        self.index += 1;
        self.count = 0;
    }

    fn emit(&mut self, ty: ElemType, sink: &mut dyn TrcGenElemIn) {
        self.elem.set_type(ty);
        sink.trace_elem_in(self.index, self.trace_id, &self.elem);
        self.index += 1;
    }
}

/// SVC, HVC or SMC (opcode as the decoder takes it: T32 first halfword low).
fn calls_exception(isa: Isa, size: u8, op: u32) -> bool {
    match (isa, size) {
        (Isa::Aarch64, _) => op & 0xffe0_001c == 0xd400_0000 && op & 3 != 0,
        (Isa::Arm, _) => {
            (op & 0x0f00_0000 == 0x0f00_0000 && op >> 28 != 0xf)
                || matches!(op & 0x0ff0_00f0, 0x0140_0070 | 0x0160_0070)
        }
        (Isa::Thumb2, 2) => op & 0xff00 == 0xdf00,
        (Isa::Thumb2, _) => matches!(op & 0xfff0, 0xf7e0 | 0xf7f0) && (op >> 16) & 0xf000 == 0x8000,
        _ => false,
    }
}

/// Reads a whole Tarmac trace into `sink` as trace elements; returns the
/// number of instruction records. Each CPU (`cpuN`, or none: 0) is a
/// stream of its own, with trace ID N (modulo 256), as each core has its
/// own trace source. Stops at the first line that is not well formed.
pub fn trace_elements<R: std::io::BufRead>(r: &mut Reader<R>, sink: &mut dyn TrcGenElemIn) -> Result<u64, TarmacError> {
    // At most 256 builders: one per trace ID seen.
    let mut cpus: Vec<RangeBuilder> = Vec::new();
    let mut n = 0;
    while let Some(rec) = r.next_record()? {
        let id = rec.cpu.unwrap_or(0) as u8;
        let b = match cpus.iter().position(|b| b.trace_id == id) {
            Some(k) => &mut cpus[k],
            None => {
                cpus.push(RangeBuilder::new(id));
                cpus.last_mut().unwrap()
            }
        };
        match rec.kind {
            RecordKind::Instruction(i) if i.iset == Iset::RiscV => {
                return Err(TarmacError {
                    line: r.line_number(),
                    column: 1,
                    expected: "an Arm instruction (A64, A32 or T32): RISC-V Tarmac is not taken as trace input here"
                        .into(),
                    text: String::new(),
                });
            }
            RecordKind::Instruction(i) => {
                n += 1;
                b.instruction(&i, sink);
            }
            RecordKind::Exception { .. } => b.exception(sink),
            _ => {}
        }
    }
    for b in &mut cpus {
        b.finish(sink);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use coresight_decode::datapath::DatapathResp;

    #[derive(Default)]
    struct Collect(Vec<(ElemType, u64, u64, bool, u32)>, Vec<u8>);

    impl TrcGenElemIn for Collect {
        fn trace_elem_in(&mut self, _: TrcIndex, id: u8, e: &TraceElement) -> DatapathResp {
            self.1.push(id);
            let r = if e.elem_type == ElemType::InstrRange {
                (e.st_addr, e.en_addr, e.last_instr_exec, e.num_instr_range)
            } else {
                (0, 0, false, 0)
            };
            self.0.push((e.elem_type, r.0, r.1, r.2, r.3));
            DatapathResp::Cont
        }
    }

    fn elements(text: &str) -> Vec<(ElemType, u64, u64, bool, u32)> {
        let mut c = Collect::default();
        trace_elements(&mut Reader::new(text.as_bytes()), &mut c).unwrap();
        c.0
    }

    const R: ElemType = ElemType::InstrRange;
    const X: ElemType = ElemType::Exception;

    #[test]
    fn a64_branch_outcomes_gaps_and_svc() {
        let t = "\
1 clk IT (1) 00001000 d503201f O EL0t_n : NOP
2 clk IT (2) 00001004 b4000080 O EL0t_n : CBZ x0,{pc}+0x10
3 clk IT (3) 00001008 54000041 O EL0t_n : B.NE {pc}+8
4 clk IT (4) 00001010 d503201f O EL0t_n : NOP
5 clk IS (5) 00001014 54000041 O EL0t_n : B.NE {pc}+8
6 clk IT (6) 00001018 d503201f O EL0t_n : NOP
7 clk IT (7) 00002000 d503201f O EL0t_n : NOP
8 clk IT (8) 00002004 d4000001 O EL0t_n : SVC #0
9 clk IT (9) 00002008 b4000080 O EL0t_n : CBZ x0,{pc}+0x10
";
        assert_eq!(
            elements(t),
            [
                // CBZ written IT but the next instruction is its fall-through: not taken.
                (R, 0x1000, 0x1008, false, 2),
                // B.NE followed by its target: taken.
                (R, 0x1008, 0x100c, true, 1),
                // IS: condition failed, not taken.
                (R, 0x1010, 0x1018, false, 2),
                // A jump after a NOP: an exception the trace did not log.
                (R, 0x1018, 0x101c, true, 1),
                (X, 0, 0, false, 0),
                // SVC takes an exception.
                (R, 0x2000, 0x2008, true, 2),
                (X, 0, 0, false, 0),
                // A branch ending the trace counts as taken when it executed.
                (R, 0x2008, 0x200c, true, 1),
            ]
        );
    }

    #[test]
    fn t32_widths_and_exception_records() {
        // T32: a 16-bit BEQ (d0xx) taken, a 32-bit BL (f000 f802) after a
        // halfword-aligned 16-bit MOVS; an exception record; a gap in A32.
        let t = "\
1 clk IT (1) 00008000 2001 T svc_s : MOVS r0,#1
2 clk IT (2) 00008002 f000f801 T svc_s : BL {pc}+6
3 clk IT (3) 00008008 d000 T svc_s : BEQ {pc}+4
4 clk IT (4) 0000800c 2001 T svc_s : MOVS r0,#1
5 clk E 0000800e 00000001 CoreEvent_IRQ
6 clk IT (6) 00000018 e1a00000 A irq_s : MOV r0,r0
7 clk IT (7) 00000020 e1a00000 A irq_s : MOV r0,r0
";
        assert_eq!(
            elements(t),
            [
                (R, 0x8000, 0x8006, true, 2),
                (R, 0x8008, 0x800a, true, 1),
                (R, 0x800c, 0x800e, true, 1),
                (X, 0, 0, false, 0),
                (R, 0x18, 0x1c, true, 1),
                (X, 0, 0, false, 0),
                (R, 0x20, 0x24, true, 1),
            ]
        );
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::*;
    use coresight_gnatcov::export::{FlatTraceBuilder, Merge};

    #[test]
    fn each_cpu_is_a_stream_of_its_own() {
        // Two cores interleaved, each running straight-line code: no gaps.
        let t = "\
1 clk cpu0 IT (1) 00001000 d503201f O EL1h_n : NOP
1 clk cpu1 IT (1) 00005000 d503201f O EL1h_n : NOP
2 clk cpu0 IT (2) 00001004 d503201f O EL1h_n : NOP
2 clk cpu1 IT (2) 00005004 14000002 O EL1h_n : B {pc}+8
3 clk cpu0 IT (3) 00001008 d503201f O EL1h_n : NOP
3 clk cpu1 IT (3) 0000500c d503201f O EL1h_n : NOP
";
        let mut b = FlatTraceBuilder::new(Merge::PerTraceId);
        assert_eq!(trace_elements(&mut Reader::new(t.as_bytes()), &mut b).unwrap(), 6);
        b.finish();
        assert_eq!(b.streams(), [Some(0), Some(1)]);
        let e = |id| {
            b.entries(Some(id))
                .iter()
                .map(|e| (e.pc, e.size, e.op.0))
                .collect::<Vec<_>>()
        };
        use coresight_gnatcov::Op;
        assert_eq!(e(0), [(0x1000, 12, Op::BLOCK)]);
        assert_eq!(e(1), [(0x5000, 8, Op::BLOCK | Op::BR0), (0x500c, 4, Op::BLOCK)]);
    }
}
