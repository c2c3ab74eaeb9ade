//! The speed reference for the C API: decodes a snapshot's first buffer
//! with the library's Rust API into a sink that only counts elements, as
//! `ctest/ocsd_c_list -noprint` does through the C API.

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

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: rust_api_count <snapshot directory>");
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
    let mut tree = ss
        .build_tree(&buf.name, DecodeMode::FullDecode, |t| {
            t.set_opencsd_empty_blocks(true);
            t.set_gen_elem_out(Box::new(Shared(count.clone(), Count(0))));
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
    eprintln!(
        "{} elements, decode {:.6} s",
        count.load(std::sync::atomic::Ordering::Relaxed),
        t0.elapsed().as_secs_f64()
    );
}
