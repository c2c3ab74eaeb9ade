//! A decode tree is `Send`: built on one thread, it decodes on another,
//! with the same elements as on the thread that built it.

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{DecodeMode, DecoderRegistry};
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::shared::{Shared, shared};
use coresight_decode::snapshot::Snapshot;
use coresight_decode::tree::DecodeTree;

fn assert_send<T: Send>() {}
fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn tree_and_registry_are_send() {
    assert_send::<DecodeTree>();
    assert_send::<Snapshot>();
    assert_send_sync::<DecoderRegistry>();
    assert_send::<Box<dyn coresight_decode::decoder::TraceComponent>>();
}

struct Collect(Shared<Vec<(TrcIndex, u8, TraceElement)>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, trace_id, *elem));
        DatapathResp::Cont
    }
}

fn run(mut tree: DecodeTree, trace: &[u8]) -> DecodeTree {
    let (resp, used) = tree.trace_data_in(DatapathOp::Data, 0, trace);
    assert!(resp.is_cont() && used == trace.len(), "{resp:?} {used}");
    assert!(tree.trace_data_in(DatapathOp::Eot, 0, &[]).0.is_cont());
    tree
}

#[test]
fn a_tree_built_here_decodes_on_another_thread() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64");
    let ss = Snapshot::load(dir).unwrap();
    let trace = std::fs::read(format!("{dir}/trace.bin")).unwrap();
    let build = |out: &Shared<Vec<_>>| {
        let mut tree = ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).unwrap();
        tree.set_gen_elem_out(Box::new(Collect(out.clone())));
        tree
    };
    let here = shared(Vec::new());
    run(build(&here), &trace);

    let there = shared(Vec::new());
    let tree = build(&there);
    let trace2 = trace.clone();
    let back = std::thread::spawn(move || run(tree, &trace2)).join().unwrap();
    // The tree comes back and can go on (another end of trace is ignored).
    drop(back);
    let here = here.borrow();
    assert!(here.len() > 100, "only {} elements", here.len());
    assert_eq!(*here, *there.borrow());
}
