//! Round trips: generate a program and its trace, decode it, compare the
//! decoded instruction ranges with the truth. A failure names the seed and
//! the first differing item.

use coresight_decode::generator::check::check;
use coresight_decode::generator::{generate, BufferLayout, GenOptions, GenProtocol};

fn round_trips(protocol: GenProtocol, seeds: std::ops::Range<u64>, layout: BufferLayout) {
    for seed in seeds {
        let opts = GenOptions { seed, protocol, layout, length: 150 };
        let g = generate(&opts);
        if let Err(e) = check(&g) {
            panic!("{} seed {seed} ({layout:?}): {e}", protocol.name());
        }
    }
}

#[test]
fn etmv4_formatted() {
    round_trips(GenProtocol::Etmv4, 0..100, BufferLayout::Formatted);
}

#[test]
fn etmv4_unformatted() {
    round_trips(GenProtocol::Etmv4, 100..200, BufferLayout::Unformatted);
}

#[test]
fn stm_formatted() {
    round_trips(GenProtocol::Stm, 0..60, BufferLayout::Formatted);
}

#[test]
fn stm_unformatted() {
    round_trips(GenProtocol::Stm, 60..120, BufferLayout::Unformatted);
}

#[test]
fn itm_formatted() {
    round_trips(GenProtocol::Itm, 0..60, BufferLayout::Formatted);
}

#[test]
fn itm_unformatted() {
    round_trips(GenProtocol::Itm, 60..120, BufferLayout::Unformatted);
}

/// The long soak: `cargo test --release -- --ignored soak`.
#[test]
#[ignore]
fn soak() {
    round_trips(GenProtocol::Etmv4, 1000..6000, BufferLayout::Formatted);
    round_trips(GenProtocol::Stm, 1000..4000, BufferLayout::Formatted);
    round_trips(GenProtocol::Itm, 1000..4000, BufferLayout::Unformatted);
}

#[test]
fn a_wrong_truth_is_reported_with_the_first_differing_item() {
    let mut g = generate(&GenOptions { seed: 3, length: 40, ..GenOptions::default() });
    assert!(g.truth.len() > 10);
    if let coresight_decode::generator::Truth::Range { exec, .. } = &mut g.truth[7] {
        *exec = !*exec;
    }
    let err = check(&g).unwrap_err();
    assert!(err.starts_with("item 7: expected `range 0x"), "{err}");
}
