//! `push_sink`: decode a snapshot in push mode, with a sink of our own.
//!
//! ```text
//! cargo run --example push_sink [SNAPSHOT_DIR]
//! ```
//!
//! The decode tree calls the sink for each element; `DecodeTree::push_all`
//! feeds the whole buffer (see its docs for the hand-written loop, for a
//! sink that answers WAIT to do work of its own). The sink gets each
//! element as the typed `Element` the pull API gives, and counts
//! instruction ranges and the instructions in them.

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::shared::{Shared, shared};
use coresight_decode::{DecodeMode, Element, ElementSink, Snapshot};

/// Ranges and instructions seen.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub ranges: u64,
    pub instructions: u64,
}

struct Sink(Shared<Counts>);

impl ElementSink for Sink {
    fn element(&mut self, _index: TrcIndex, _trace_id: u8, element: &Element) -> DatapathResp {
        if let Element::InstrRange { num_instr, .. } = *element {
            let mut c = self.0.borrow_mut();
            c.ranges += 1;
            c.instructions += u64::from(num_instr);
        }
        DatapathResp::Cont
    }
}

/// Decodes the snapshot's first buffer in push mode.
pub fn count(dir: &str) -> coresight_decode::Result<Counts> {
    let ss = Snapshot::load(dir)?;
    let buffer = ss.buffers.first().ok_or(coresight_decode::Error::NoBuffer)?;
    let mut tree = ss.build_tree(&buffer.name, DecodeMode::FullDecode, |_| {})?;
    let counts = shared(Counts::default());
    tree.set_element_sink(Sink(counts.clone()));
    let mut data = Vec::new();
    for path in ss.buffer_paths(buffer) {
        data.extend(std::fs::read(&path).map_err(|source| coresight_decode::Error::Io { path, source })?);
    }
    tree.push_all(&data)?;
    Ok(std::mem::take(&mut *counts.borrow_mut()))
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64").to_string());
    match count(&dir) {
        Ok(c) => println!("{} instruction ranges, {} instructions", c.ranges, c.instructions),
        Err(e) => {
            eprintln!("push_sink: {e}");
            std::process::exit(1);
        }
    }
}

#[test]
fn counts_the_shipped_snapshot_as_the_pull_api_does() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64");
    let pushed = count(dir).unwrap();
    let mut pulled = Counts::default();
    for d in coresight_decode::Trace::open(dir).unwrap().elements() {
        if let Element::InstrRange { num_instr, .. } = d.unwrap().element {
            pulled.ranges += 1;
            pulled.instructions += u64::from(num_instr);
        }
    }
    assert_eq!(pushed, pulled);
    assert!(pushed.ranges > 0);
}
