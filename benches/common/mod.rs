//! What the decode benchmarks share.

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::TrcGenElemIn;

/// Counts elements and their instructions, as a client that looks at each
/// would.
pub struct Count(pub u64);

impl TrcGenElemIn for Count {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0 += elem.num_instr_range as u64 + 1;
        DatapathResp::Cont
    }
}
