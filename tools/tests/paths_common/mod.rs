//! What `tools/tests/every_path.rs` (on generated captures) and the `paths` fuzz target (on
//! arbitrary bytes; `fuzz/src/lib.rs` includes this file) share: the sink that records
//! elements as the listing prints them and answers WAIT, the driver of the push tree's flow
//! control, the pull API's elements, and the comparison of two streams. One code, so the
//! test and the fuzz target compare the same paths the same way. Only the library is used.
#![allow(dead_code)]

use coresight_decode::DecodeTree;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::shared::Shared;

/// One element as the listing prints it: `Idx:N; ID:H; ELEMENT`.
pub type Stream = Vec<String>;

/// The elements a push sink saw; answers WAIT after every `wait_every`-th (0: never).
pub struct Lines {
    out: Shared<Stream>,
    wait_every: u32,
    calls: u32,
}

impl Lines {
    pub fn new(out: Shared<Stream>, wait_every: u32) -> Self {
        Lines {
            out,
            wait_every,
            calls: 0,
        }
    }
}

impl TrcGenElemIn for Lines {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.out
            .borrow_mut()
            .push(format!("Idx:{index}; ID:{trace_id:x}; {elem}"));
        self.calls = self.calls.wrapping_add(1);
        if self.wait_every != 0 && self.calls.is_multiple_of(self.wait_every) {
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
    }
}

/// Sends `data` to `tree`: all at once by `push_all` when `chunk` is 0, else `chunk` bytes
/// at a time following the flow control as `tests/pull.rs` does (on a WAIT, flush until the
/// tree answers otherwise, then send the bytes not yet taken). Stops at a fatal answer (as
/// `push_all` does) or a tree that never stops waiting.
pub fn push(tree: &mut DecodeTree, data: &[u8], chunk: usize) {
    if chunk == 0 {
        let _ = tree.push_all(data);
        return;
    }
    // Flushes until the tree answers other than WAIT; None on a fatal answer or a tree that
    // never stops waiting.
    let flush = |tree: &mut DecodeTree, mut r: DatapathResp| -> Option<DatapathResp> {
        let mut n = 0usize;
        while r.is_wait() {
            n += 1;
            if n > 1_000_000 {
                return None;
            }
            r = tree.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        }
        (!r.is_fatal()).then_some(r)
    };
    let mut pos = 0;
    while pos < data.len() {
        let end = pos.saturating_add(chunk).min(data.len());
        while pos < end {
            let (r, used) = tree.trace_data_in(DatapathOp::Data, pos as TrcIndex, &data[pos..end]);
            pos += used.min(end - pos);
            match flush(tree, r) {
                None => return,
                Some(r) if r.is_cont() && used == 0 => return,
                Some(_) => {}
            }
        }
    }
    // End of trace is sent again after each wait, until the tree takes it.
    let mut rounds = 0usize;
    loop {
        let r = tree.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        rounds += 1;
        if !r.is_wait() || flush(tree, r).is_none() || rounds > 1_000_000 {
            return;
        }
    }
}

/// The pull API's elements (anything printed as the listing prints it) up to the error that
/// stops it, and whether one did.
pub fn pulled<D: std::fmt::Display, E>(elements: impl Iterator<Item = Result<D, E>>) -> (Stream, bool) {
    let mut out = Vec::new();
    for d in elements {
        match d {
            Ok(d) => out.push(d.to_string()),
            Err(_) => return (out, true),
        }
    }
    (out, false)
}

/// The first difference of two streams, with two lines of context.
pub fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    let i = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    let show = |s: &[String]| {
        (i.saturating_sub(2)..(i + 3).min(s.len()))
            .map(|k| format!("  {}{}", if k == i { "> " } else { "  " }, s[k]))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some(format!(
        "element {i} (of {} and {}):\n{}\n---\n{}",
        a.len(),
        b.len(),
        show(a),
        show(b)
    ))
}
