//! Encode random executions of random RV32/RV64 programs (with and without
//! C) for every combination of the eight emit options, decode them through
//! a decode tree, and compare what the elements say with what ran.

mod common;

use common::*;
use riscv_trace::config::{CoreIsa, TraceReg};

const ISAS: [CoreIsa; 4] = [
    CoreIsa {
        xlen: 32,
        compressed: false,
    },
    CoreIsa {
        xlen: 32,
        compressed: true,
    },
    CoreIsa {
        xlen: 64,
        compressed: false,
    },
    CoreIsa {
        xlen: 64,
        compressed: true,
    },
];

fn base(isa: CoreIsa) -> u64 {
    if isa.xlen == 64 { 0x7fff_fff0_0000 } else { 0x8000_0000 }
}

#[test]
fn every_emit_combination_round_trips() {
    let mut checked = 0;
    for (k, &isa) in ISAS.iter().enumerate() {
        for emit in 0u32..256 {
            let trace = TraceReg::SUPPORTED | (emit << 16);
            let mut rng = Rng::new(((k as u64) << 16) | emit as u64);
            let p = random_program(&mut rng, isa, base(isa), 200);
            let harts = if emit % 3 == 0 { 3 } else { 1 };
            let steps = random_execution(&mut rng, &p, 300, harts);
            let enc = encode(&p, trace, 300 * 24 + 64, &steps);
            assert!(!enc.config.trace.wrapped(), "buffer large enough");
            let elems = decode(&enc, &p, 0, 4096);
            let what = format!("{} trace=0x{trace:08x} harts={harts}", core_name(isa));
            assert_eq!(trouble(&elems), Vec::<String>::new(), "{what}");
            let got = observe(&elems, &p, TraceReg(trace).emit_pc());
            let want = expect(&steps, &p, trace);
            assert_same(&got, &want, &what);
            // Trace Disabled then the end of trace close every decode.
            let tail: Vec<String> = elems.iter().rev().take(2).map(|(_, e)| e.to_string()).collect();
            assert_eq!(
                tail,
                [
                    "OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
                    "OCSD_GEN_TRC_ELEM_NO_SYNC( [discard])"
                ],
                "{what}"
            );
            if TraceReg(trace).emit_pc() {
                assert_eq!(got.instrs.len(), steps.len(), "{what}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 1024);
}

#[test]
fn waits_and_chunking_leave_the_elements_unchanged() {
    for (k, &isa) in ISAS.iter().enumerate() {
        for emit in [0xffu32, 0x01, 0x03, 0x05, 0xfd, 0x80] {
            let trace = TraceReg::SUPPORTED | (emit << 16);
            let mut rng = Rng::new(1000 + k as u64 * 7 + emit as u64);
            let p = random_program(&mut rng, isa, base(isa), 150);
            let steps = random_execution(&mut rng, &p, 250, 2);
            for words in [250 * 24, 40] {
                let enc = encode(&p, trace, words, &steps);
                let reference = decode(&enc, &p, 0, 1 << 20);
                assert!(reference.len() > 5);
                for (wait, chunk) in [(1, 1), (2, 3), (3, 64), (7, 5), (1, 1 << 20)] {
                    let got = decode(&enc, &p, wait, chunk);
                    assert_eq!(
                        got,
                        reference,
                        "{} trace=0x{trace:x} words={words} wait={wait} chunk={chunk}",
                        core_name(isa)
                    );
                }
            }
        }
    }
}

#[test]
fn wrapped_buffers_decode_the_latest_execution() {
    let mut wrapped = 0;
    for (k, &isa) in ISAS.iter().enumerate() {
        for (j, emit) in [0xffu32, 0x01, 0x03, 0x0b, 0x07, 0xfd].into_iter().enumerate() {
            for words in [24u64, 61, 137, 200] {
                let trace = TraceReg::SUPPORTED | (emit << 16);
                let mut rng = Rng::new(5000 + (k * 100 + j * 10) as u64 + words);
                let p = random_program(&mut rng, isa, base(isa), 300);
                let harts = 1 + (words % 3);
                let steps = random_execution(&mut rng, &p, 6000, harts);
                let enc = encode(&p, trace, words, &steps);
                let what = format!("{} trace=0x{trace:x} words={words} harts={harts}", core_name(isa));
                assert!(enc.config.trace.wrapped(), "{what}");
                wrapped += 1;
                let elems = decode(&enc, &p, 0, 4096);
                assert_eq!(trouble(&elems), Vec::<String>::new(), "{what}");
                let got = observe(&elems, &p, false);
                let want = expect(&steps, &p, trace);
                // The oldest trace was overwritten: the decode is the end
                // of the execution, from a sync point on.
                assert!(
                    !got.instrs.is_empty() && (got.instrs.len() > 50 || words < 100),
                    "{what}: only {} instructions",
                    got.instrs.len()
                );
                assert!(got.instrs.len() < want.instrs.len(), "{what}");
                assert_eq!(
                    got.instrs[..],
                    want.instrs[want.instrs.len() - got.instrs.len()..],
                    "{what}"
                );
                assert_eq!(
                    got.timestamps[..],
                    want.timestamps[want.timestamps.len() - got.timestamps.len()..],
                    "{what}"
                );
                assert_eq!(got.data[..], want.data[want.data.len() - got.data.len()..], "{what}");
            }
        }
    }
    assert_eq!(wrapped, 96);
}
