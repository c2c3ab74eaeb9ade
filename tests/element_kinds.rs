//! The typed element carries everything the generic one does: every
//! element a decoder sends, turned into `Element` and back, prints the
//! same listing text. Checked on generated trace of every protocol (clean
//! and damaged, cycle-accurate ETMv3 and PTM among them) and, with
//! `--ignored`, on every case of the OpenCSD corpus.

use std::path::PathBuf;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::{Element, TraceElement};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::shared::{Shared, shared};
use coresight_decode::snapshot::Snapshot;
use coresight_generator::check::decode_with;
use coresight_generator::etmv3::Etmv3GenOptions;
use coresight_generator::ptm::PtmGenOptions;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Rng, damage, generate};

/// What the check found: elements seen, and the first few that did not
/// survive the round trip (listing text before and after).
#[derive(Default)]
struct Seen {
    count: usize,
    lost: Vec<(String, String)>,
}

struct RoundTrip(Shared<Seen>);

impl TrcGenElemIn for RoundTrip {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        let mut seen = self.0.borrow_mut();
        seen.count += 1;
        let before = elem.to_string();
        let after = Element::from_generic(elem).to_generic().to_string();
        if before != after && seen.lost.len() < 5 {
            seen.lost.push((before, after));
        }
        DatapathResp::Cont
    }
}

fn protocols() -> Vec<(GenProtocol, &'static str)> {
    let etmv3_cc = Etmv3GenOptions {
        cycle_accurate: Some(true),
        timestamps: Some(true),
        context_id: Some(true),
        exceptions: Some(true),
        ..Default::default()
    };
    let ptm_cc = PtmGenOptions {
        cycle_accurate: Some(true),
        timestamps: Some(true),
        ..Default::default()
    };
    vec![
        (GenProtocol::Etmv4, "etmv4"),
        (GenProtocol::Etmv4M, "etmv4m"),
        (GenProtocol::Ptm(Default::default()), "ptm"),
        (GenProtocol::Ptm(ptm_cc), "ptm cycle-accurate"),
        (GenProtocol::Etmv3(Default::default()), "etmv3"),
        (GenProtocol::Etmv3(etmv3_cc), "etmv3 cycle-accurate"),
        (GenProtocol::Ete(Default::default()), "ete"),
        (GenProtocol::Tc2, "tc2"),
        (GenProtocol::Stm, "stm"),
        (GenProtocol::Itm, "itm"),
    ]
}

#[test]
fn every_generated_element_survives_the_typed_round_trip() {
    let mut total = 0;
    for (protocol, name) in protocols() {
        for seed in 0..12u64 {
            let layout = if seed % 2 == 0 {
                BufferLayout::Formatted
            } else {
                BufferLayout::Unformatted
            };
            let mut g = generate(&GenOptions {
                seed,
                protocol,
                layout,
                length: 80,
            });
            // Every third seed damaged, so error elements are seen too.
            if seed % 3 == 2 {
                let mut rng = Rng::new(seed ^ 0x5eed);
                for b in &mut g.spec.buffers {
                    damage(&mut rng, &mut b.data);
                    if layout == BufferLayout::Formatted {
                        let n = (b.data.len() / 16 * 16).max(16);
                        b.data.resize(n, 0);
                    }
                }
            }
            let seen = shared(Seen::default());
            let _ = decode_with(&g, Box::new(RoundTrip(seen.clone())));
            let s = seen.borrow();
            assert!(
                s.lost.is_empty(),
                "{name} seed {seed}: typed round trip changed elements:\n{}",
                s.lost
                    .iter()
                    .map(|(a, b)| format!("  {a}\n  {b}\n"))
                    .collect::<String>()
            );
            total += s.count;
        }
    }
    assert!(total > 10_000, "only {total} elements checked");
}

#[test]
fn cycle_counted_addr_nacc_keeps_its_cycle_count() {
    use coresight_decode::element::ElemType;
    let mut g = TraceElement::new(ElemType::AddrNacc);
    g.st_addr = 0x8000;
    g.set_cycle_count(7);
    let t = Element::from_generic(&g);
    assert_eq!(t.cycle_count(), Some(7));
    assert_eq!(t.to_generic().to_string(), g.to_string());
    assert!(g.to_string().contains("[CC=7]"), "{g}");
}

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/opencsd-1.8.0");

/// Every snapshot of the corpus, decoded in full, element by element.
#[test]
#[ignore = "needs ../shared/corpus/opencsd-1.8.0"]
fn every_corpus_element_survives_the_typed_round_trip() {
    let cases = std::fs::read_to_string(PathBuf::from(CORPUS).join("cases.tsv")).expect("the corpus's cases.tsv");
    let mut dirs: Vec<PathBuf> = Vec::new();
    for line in cases.lines().filter(|l| !l.starts_with('#')) {
        let mut words = line.split_whitespace().skip_while(|w| *w != "-ss_dir");
        let Some(dir) = words.nth(1) else { continue };
        let p = PathBuf::from(CORPUS).join(dir);
        if !dirs.contains(&p) {
            dirs.push(p);
        }
    }
    assert!(dirs.len() >= 10, "only {} snapshot folders in cases.tsv", dirs.len());
    let mut total = 0;
    for dir in &dirs {
        let Ok(ss) = Snapshot::load(dir) else { continue };
        let seen = shared(Seen::default());
        for buffer in ss.buffer_names() {
            let Ok(mut tree) = ss.build_tree(buffer, DecodeMode::FullDecode, |_| {}) else {
                continue;
            };
            tree.set_gen_elem_out(Box::new(RoundTrip(seen.clone())));
            let b = ss.buffer(buffer).unwrap();
            let data: Vec<u8> = ss
                .buffer_paths(b)
                .iter()
                .flat_map(|p| std::fs::read(p).unwrap())
                .collect();
            let mut at = 0;
            while at < data.len() {
                let (r, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, &data[at..]);
                at += used;
                if r.is_fatal() {
                    break;
                }
                if r.is_wait() {
                    let _ = tree.trace_data_in(DatapathOp::Flush, 0, &[]);
                }
            }
            let _ = tree.trace_data_in(DatapathOp::Eot, 0, &[]);
        }
        let s = seen.borrow();
        assert!(
            s.lost.is_empty(),
            "{}: typed round trip changed elements:\n{}",
            dir.display(),
            s.lost
                .iter()
                .map(|(a, b)| format!("  {a}\n  {b}\n"))
                .collect::<String>()
        );
        total += s.count;
    }
    assert!(total > 1_000_000, "only {total} elements checked");
}
