//! Mutation fuzzing with fixed seeds: valid generated trace for every
//! protocol, damaged (bits flipped, bytes changed, runs repeated or cut,
//! truncated), then decoded. Errors and resynchronisation are expected;
//! panics and hangs are not. `cargo test --release -- --ignored mutation`
//! runs a longer soak.

use std::time::{Duration, Instant};

use coresight_generator::check::decode;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Rng, damage, generate};

fn protocols() -> Vec<(GenProtocol, &'static str)> {
    vec![
        (GenProtocol::Etmv4, "etmv4"),
        (GenProtocol::Etmv4M, "etmv4m"),
        (GenProtocol::Ptm(Default::default()), "ptm"),
        (GenProtocol::Etmv3(Default::default()), "etmv3"),
        (GenProtocol::Ete(Default::default()), "ete"),
        (GenProtocol::Tc2, "tc2"),
        (GenProtocol::Stm, "stm"),
        (GenProtocol::Itm, "itm"),
    ]
}

fn run(seeds: std::ops::Range<u64>, budget: Duration) {
    let start = Instant::now();
    for seed in seeds {
        for (protocol, name) in protocols() {
            let layout = if seed % 2 == 0 {
                BufferLayout::Formatted
            } else {
                BufferLayout::Unformatted
            };
            let mut g = generate(&GenOptions {
                seed,
                protocol,
                layout,
                length: 60,
            });
            let mut rng = Rng::new(seed ^ 0xbad);
            for b in &mut g.spec.buffers {
                damage(&mut rng, &mut b.data);
                if layout == BufferLayout::Formatted {
                    // Keep whole frames so the deformatter accepts the block.
                    let n = b.data.len() / 16 * 16;
                    b.data.truncate(n.max(16));
                    b.data.resize(n.max(16), 0);
                }
            }
            let t = Instant::now();
            let _ = decode(&g);
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{name} seed {seed}: decode took {:?}",
                t.elapsed()
            );
        }
        if start.elapsed() > budget {
            break;
        }
    }
}

#[test]
fn damaged_trace_never_panics_or_hangs() {
    run(0..60, Duration::from_secs(20));
}

#[test]
#[ignore]
fn mutation_soak() {
    run(1000..21000, Duration::from_secs(600));
}
