//! The speed reference for the C API: decodes a snapshot's first buffer
//! with the library's Rust API into a sink that only counts elements, as
//! `ctest/ocsd_c_list -noprint` does through the C API.
//!
//! With `--c-call`, the sink instead calls a counting `extern "C"` function
//! through a pointer for every element, as the C API calls its client, but
//! passes the library's own element with no conversion: what one call
//! into C per element costs, the floor under any C API's sink.

use std::ffi::c_void;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::snapshot::Snapshot;

struct Count(u64);

impl TrcGenElemIn for Count {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, _elem: &TraceElement) -> DatapathResp {
        self.0 += 1;
        DatapathResp::Cont
    }
}

/// OpenCSD's element callback, with the element left opaque.
type ElemFn = unsafe extern "C" fn(*const c_void, u64, u8, *const c_void) -> u32;

/// The client's callback: counts, as `ocsd_c_list -noprint`'s does.
unsafe extern "C" fn count_elem(ctx: *const c_void, _index: u64, _trace_id: u8, _elem: *const c_void) -> u32 {
    // SAFETY: `ctx` is the `u64` counter the sink was given.
    unsafe { *(ctx as *mut u64) += 1 };
    0
}

/// A sink calling `f` for every element, as the C API's sink does, with
/// the element as it is.
struct CCall {
    f: ElemFn,
    /// The address of the client's counter, its `ctx`.
    ctx: usize,
}

impl TrcGenElemIn for CCall {
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        let ctx = self.ctx as *const c_void;
        for (n, (index, elem)) in elems.iter().enumerate() {
            // SAFETY: `count_elem` takes the counter as `ctx` and does not
            // read the element.
            let r = unsafe { (self.f)(ctx, *index, trace_id, elem as *const TraceElement as *const c_void) };
            if r > 2 {
                return (DatapathResp::FatalInvalidData, n + 1);
            }
        }
        (DatapathResp::Cont, elems.len())
    }

    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.trace_elems_in(trace_id, std::slice::from_ref(&(index, *elem))).0
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .expect("usage: rust_api_count <snapshot directory> [--c-call]");
    let c_call = args.next().as_deref() == Some("--c-call");
    let ss = Snapshot::load(&dir).expect("snapshot");
    let buf = ss.buffers[0].clone();
    let mut data = Vec::new();
    for p in ss.buffer_paths(&buf) {
        data.extend(std::fs::read(p).expect("trace file"));
    }
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    struct Shared(std::sync::Arc<std::sync::atomic::AtomicU64>, Count);
    impl TrcGenElemIn for Shared {
        fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
            let r = self.1.trace_elem_in(index, trace_id, elem);
            self.0.store(self.1.0, std::sync::atomic::Ordering::Relaxed);
            r
        }
    }
    // The C-call sink's counter, as a C client would keep it: an address
    // the sink passes back and main reads after the decode.
    let c_count: *mut u64 = Box::into_raw(Box::new(0));
    let mut tree = ss
        .build_tree(&buf.name, DecodeMode::FullDecode, |t| {
            t.set_opencsd_empty_blocks(true);
            if c_call {
                // Through black_box: the call stays indirect, as into C.
                t.set_gen_elem_out(Box::new(CCall {
                    f: std::hint::black_box(count_elem as ElemFn),
                    ctx: c_count as usize,
                }));
            } else {
                t.set_gen_elem_out(Box::new(Shared(count.clone(), Count(0))));
            }
        })
        .expect("tree with decoders");
    let t0 = std::time::Instant::now();
    let mut pos = 0;
    while pos < data.len() {
        let end = (pos + 4096).min(data.len());
        let (r, used) = tree.trace_data_in(DatapathOp::Data, pos as u64, &data[pos..end]);
        pos += used;
        if r.is_fatal() {
            break;
        }
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    let elapsed = t0.elapsed().as_secs_f64();
    drop(tree);
    // SAFETY: `c_count` came from `Box::into_raw` above and the sink that
    // wrote through it is gone with the tree.
    let c_elems = *unsafe { Box::from_raw(c_count) };
    let n = if c_call {
        c_elems
    } else {
        count.load(std::sync::atomic::Ordering::Relaxed)
    };
    eprintln!("{n} elements, decode {elapsed:.6} s");
}
