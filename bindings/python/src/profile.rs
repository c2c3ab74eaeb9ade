//! Mergeable counts over a decode: AutoFDO-style range and branch counts.
//!
//! A range count is the number of times an instruction range
//! `[start, end)` was executed; a branch count the number of times the
//! branch at the end of a range was taken to the start of the next range
//! of the same source (trace ID and CPU). A discontinuity in the trace
//! (trace on, loss of sync, an exception, memory not available, a range
//! with no path) ends the chain: no branch is counted across it. Each
//! count is a sum over elements, so the counts of several captures add up
//! to those of all of them.

use std::collections::HashMap;

use coresight_decode::arch::InstrType;
use coresight_decode::element::Element;

use crate::stream::Item;

/// The counts of one or more captures.
#[derive(Default, Debug)]
pub struct Profile {
    pub ranges: HashMap<(u64, u64), u64>,
    pub branches: HashMap<(u64, u64), u64>,
    pub instructions: u64,
    pub elements: u64,
    /// The address of the last instruction of each source's previous
    /// range, when it was a taken branch.
    from: HashMap<(u8, u32), u64>,
}

impl Profile {
    pub fn add(&mut self, item: &Item) {
        self.elements += 1;
        let key = (item.trace_id, item.origin.map_or(u32::MAX, |o| o.cpu));
        match item.element {
            Element::InstrRange {
                start,
                end,
                num_instr,
                last,
                ..
            } => {
                self.instructions += u64::from(num_instr);
                *self.ranges.entry((start, end)).or_default() += 1;
                if let Some(from) = self.from.remove(&key) {
                    *self.branches.entry((from, start)).or_default() += 1;
                }
                if last.executed && matches!(last.kind, InstrType::Branch | InstrType::BranchIndirect) {
                    self.from.insert(key, end.wrapping_sub(u64::from(last.size)));
                }
            }
            Element::TraceOn { .. }
            | Element::NoSync { .. }
            | Element::EoTrace { .. }
            | Element::Exception { .. }
            | Element::AddrNacc { .. }
            | Element::AddrUnknown { .. }
            | Element::IRangeNoPath { .. } => {
                self.from.remove(&key);
            }
            _ => {}
        }
    }
}
