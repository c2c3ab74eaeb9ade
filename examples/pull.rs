//! `pull`: open a snapshot and pull its elements through an iterator.
//!
//! ```text
//! cargo run --example pull [SNAPSHOT_DIR]
//! ```
//!
//! Counts the elements of each kind and the instructions executed in the
//! snapshot's first trace buffer (default: the shipped `snapshots/etmv4-a64`).

use std::collections::BTreeMap;

use coresight_decode::{Element, Trace};

/// Elements by kind name, and instructions executed.
pub fn count(dir: &str) -> coresight_decode::Result<(BTreeMap<&'static str, u64>, u64)> {
    let mut trace = Trace::open(dir)?;
    let mut kinds = BTreeMap::new();
    let mut instructions = 0;
    for item in trace.elements() {
        let decoded = item?;
        *kinds.entry(decoded.element.kind_name()).or_insert(0) += 1;
        if let Element::InstrRange { num_instr, .. } = decoded.element {
            instructions += u64::from(num_instr);
        }
    }
    Ok((kinds, instructions))
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64").to_string());
    match count(&dir) {
        Ok((kinds, instructions)) => {
            for (kind, n) in kinds {
                println!("{kind:>20} {n}");
            }
            println!("{:>20} {instructions}", "instructions");
        }
        Err(e) => {
            eprintln!("pull: {e}");
            std::process::exit(1);
        }
    }
}

/// The counts agree with what the generator that made the snapshot says
/// the program executed (its `truth.txt`: one `range START END N E` line
/// per instruction range).
#[test]
fn counts_the_shipped_snapshot_as_its_truth_file_says() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64");
    let (kinds, instructions) = count(dir).unwrap();
    let truth = std::fs::read_to_string(format!("{dir}/truth.txt")).unwrap();
    let ranges: Vec<u64> = truth
        .lines()
        .filter_map(|l| l.strip_prefix("range "))
        .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(kinds.get("instr_range"), Some(&(ranges.len() as u64)));
    assert_eq!(instructions, ranges.iter().sum::<u64>());
    assert_eq!((ranges.len(), instructions), (72, 240));
}
