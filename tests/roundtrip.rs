//! Round trips: generate a program and its trace, decode it, compare the
//! decoded instruction ranges with the truth. A failure names the seed and
//! the first differing item.

use coresight_decode::generator::check::check;
use coresight_decode::generator::etmv4::{generate_with, Choice, Etmv4Options};
use coresight_decode::generator::{generate, BufferLayout, GenOptions, GenProtocol};

fn round_trips(protocol: GenProtocol, seeds: std::ops::Range<u64>, layout: BufferLayout) {
    for seed in seeds {
        let opts = GenOptions { seed, protocol, layout, length: 150 };
        let g = generate(&opts);
        if let Err(e) = check(&g) {
            panic!("{} seed {seed} ({layout:?}; {}): {e}", protocol.name(), g.spec.description);
        }
    }
}

/// Round trips with ETMv4 options (those left `Random` come from the seed).
fn etmv4_round_trips(protocol: GenProtocol, seeds: std::ops::Range<u64>, layout: BufferLayout, etmv4: Etmv4Options) {
    for seed in seeds {
        let opts = GenOptions { seed, protocol, layout, length: 150 };
        let g = generate_with(&opts, &etmv4);
        if let Err(e) = check(&g) {
            panic!("{} seed {seed} ({layout:?}; {}): {e}", protocol.name(), g.spec.description);
        }
    }
}

/// 30 seeds with ETMv4 option `name` on (the others from the seed).
fn etmv4_option(name: &str, seeds: std::ops::Range<u64>) {
    let on = Etmv4Options::default().with(name, Choice::On);
    etmv4_round_trips(GenProtocol::Etmv4, seeds.clone(), BufferLayout::Formatted, on);
    etmv4_round_trips(GenProtocol::Etmv4M, seeds.start + 1000..seeds.end + 1000, BufferLayout::Unformatted, on);
}

#[test]
fn etmv4_plain() {
    etmv4_round_trips(GenProtocol::Etmv4, 300..330, BufferLayout::Formatted, Etmv4Options::all(Choice::Off));
}

#[test]
fn etmv4_everything() {
    etmv4_round_trips(GenProtocol::Etmv4, 330..360, BufferLayout::Unformatted, Etmv4Options::all(Choice::On));
    etmv4_round_trips(GenProtocol::Etmv4M, 330..360, BufferLayout::Formatted, Etmv4Options::all(Choice::On));
}

#[test]
fn etmv4_cycle_counting() {
    etmv4_option("cc", 400..420);
}

#[test]
fn etmv4_timestamps() {
    etmv4_option("ts", 420..440);
}

#[test]
fn etmv4_return_stack() {
    let rs = Etmv4Options::default().with("rs", Choice::On).with("bb", Choice::Off);
    etmv4_round_trips(GenProtocol::Etmv4, 440..460, BufferLayout::Formatted, rs);
    etmv4_round_trips(GenProtocol::Etmv4M, 1440..1460, BufferLayout::Formatted, rs);
}

#[test]
fn etmv4_branch_broadcast() {
    etmv4_option("bb", 460..480);
}

#[test]
fn etmv4_exceptions() {
    etmv4_option("exc", 480..500);
}

#[test]
fn etmv4_context_changes() {
    let ctxt = Etmv4Options::default().with("ctxt", Choice::On).with("exc", Choice::On);
    etmv4_round_trips(GenProtocol::Etmv4, 500..520, BufferLayout::Formatted, ctxt);
    etmv4_round_trips(GenProtocol::Etmv4M, 1500..1520, BufferLayout::Formatted, ctxt);
}

#[test]
fn etmv4_exact_match() {
    etmv4_option("match", 520..540);
}

#[test]
fn etmv4_atom_formats_4_and_5() {
    etmv4_option("f45", 540..560);
}

#[test]
fn etmv4m_formatted() {
    round_trips(GenProtocol::Etmv4M, 0..50, BufferLayout::Formatted);
}

#[test]
fn etmv4m_unformatted() {
    round_trips(GenProtocol::Etmv4M, 50..100, BufferLayout::Unformatted);
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

/// Known decoder divergence from the ETMv4 architecture, shared with
/// OpenCSD 1.8.0: with the return stack on, an indirect branch whose target
/// misses the stack, then an exception at the target whose packet says the
/// return address is also the branch target (E1:E0 = 0b10, an implied
/// address element, so no pop), makes the decoder pop the return stack
/// (here an empty one: "Trace Return Stack Overflow", resync). Seed 19,
/// length 5 is a minimal case.
#[test]
#[ignore = "OpenCSD 1.8.0 behaviour the decoder reproduces: return stack popped at an exception implying the branch target"]
fn etmv4_exception_implying_the_target_with_return_stack() {
    let mut e = Etmv4Options::default().with("rs", Choice::On).with("exc", Choice::On);
    e.implied_target_with_rs = true;
    let g = generate_with(&GenOptions { seed: 19, protocol: GenProtocol::Etmv4, layout: BufferLayout::Unformatted, length: 5 }, &e);
    if let Err(err) = check(&g) {
        panic!("seed 19 ({}): {err}", g.spec.description);
    }
}

/// The long soak: `cargo test --release -- --ignored soak`.
#[test]
#[ignore]
fn soak() {
    round_trips(GenProtocol::Etmv4, 1000..6000, BufferLayout::Formatted);
    round_trips(GenProtocol::Etmv4M, 1000..4000, BufferLayout::Unformatted);
    etmv4_round_trips(GenProtocol::Etmv4, 6000..7000, BufferLayout::Unformatted, Etmv4Options::all(Choice::On));
    etmv4_round_trips(GenProtocol::Etmv4M, 6000..7000, BufferLayout::Formatted, Etmv4Options::all(Choice::On));
    round_trips(GenProtocol::Stm, 1000..4000, BufferLayout::Formatted);
    round_trips(GenProtocol::Itm, 1000..4000, BufferLayout::Unformatted);
}

#[test]
fn a_wrong_truth_is_reported_with_the_first_differing_item() {
    use coresight_decode::generator::Truth;
    let mut g = generate(&GenOptions { seed: 3, length: 40, ..GenOptions::default() });
    assert!(g.truth.len() > 10);
    let i = (7..g.truth.len()).find(|&i| matches!(g.truth[i], Truth::Range { .. })).expect("a range");
    if let Truth::Range { exec, .. } = &mut g.truth[i] {
        *exec = !*exec;
    }
    let err = check(&g).unwrap_err();
    assert!(err.starts_with(&format!("item {i}: expected `range 0x")), "{err}");
}

