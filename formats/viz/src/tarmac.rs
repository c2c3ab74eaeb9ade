//! Call stacks from a Tarmac trace: the calls and returns that
//! `coresight-tarmac`'s analyser finds (the heuristic of Arm's Tarmac
//! Trace Utilities, the one `tarmac flamegraph` uses), replayed into a
//! [`Profile`] so that every output of this crate can be made from them.
//! Functions are named as `tarmac flamegraph` names them.

use std::fmt::Write as _;

use coresight_tarmac::calls::CallTree;
use coresight_tarmac::symbols::Symbols;

use crate::profile::{FrameId, Limits, Profile};

/// Builds the profile of a Tarmac call tree. `no_offsets`: leave out the
/// ` + 0xPC` of functions entered past their start, as `--no-offsets`.
pub fn profile_from_calltree(tree: &CallTree, symbols: Option<&Symbols>, no_offsets: bool, limits: Limits) -> Profile {
    let mut p = Profile::with_direct_time(limits);
    let src = p.source(0, || "tarmac".to_string());
    p.switch_context(src, 0, || "tarmac".to_string());
    let mut text = String::new();
    let mut label = |p: &mut Profile, pc: u64| -> FrameId {
        text.clear();
        let named = symbols.is_some_and(|s| s.write_function_name(&mut text, pc, !no_offsets).unwrap_or(false));
        if !named {
            let _ = write!(text, "0x{pc:x}");
        }
        p.frames.intern(&text)
    };
    // Open activations: the time each one's return comes.
    let mut open: Vec<u64> = Vec::new();
    for a in &tree.acts {
        while open.len() > a.depth as usize {
            if let Some(exit) = open.pop() {
                p.set_time(src, exit);
                p.pop(src);
            }
        }
        p.set_time(src, a.entry.time);
        let f = label(&mut p, a.entry.pc);
        if a.depth == 0 {
            p.ensure_root(src, &[f]);
        } else {
            p.push(src, &[f], 0, false);
        }
        open.push(a.exit.time);
    }
    while let Some(exit) = open.pop() {
        p.set_time(src, exit);
        p.pop(src);
    }
    p.finish();
    p
}
