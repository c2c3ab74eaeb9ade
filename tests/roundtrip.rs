//! Round trips: generate a program and its trace, decode it, compare the
//! decoded instruction ranges with the truth. A failure names the seed and
//! the first differing item.

use coresight_generator::check::check;
use coresight_generator::etmv4::{Choice, Etmv4Options, generate_with};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};

fn round_trips(protocol: GenProtocol, seeds: std::ops::Range<u64>, layout: BufferLayout) {
    for seed in seeds {
        let opts = GenOptions {
            seed,
            protocol,
            layout,
            length: 150,
        };
        let g = generate(&opts);
        if let Err(e) = check(&g) {
            panic!(
                "{} seed {seed} ({layout:?}; {}): {e}",
                protocol.name(),
                g.spec.description
            );
        }
    }
}

/// Round trips with ETMv4 options (those left `Random` come from the seed).
fn etmv4_round_trips(protocol: GenProtocol, seeds: std::ops::Range<u64>, layout: BufferLayout, etmv4: Etmv4Options) {
    for seed in seeds {
        let opts = GenOptions {
            seed,
            protocol,
            layout,
            length: 150,
        };
        let g = generate_with(&opts, &etmv4);
        if let Err(e) = check(&g) {
            panic!(
                "{} seed {seed} ({layout:?}; {}): {e}",
                protocol.name(),
                g.spec.description
            );
        }
    }
}

/// 30 seeds with ETMv4 option `name` on (the others from the seed).
fn etmv4_option(name: &str, seeds: std::ops::Range<u64>) {
    let on = Etmv4Options::default().with(name, Choice::On);
    etmv4_round_trips(GenProtocol::Etmv4, seeds.clone(), BufferLayout::Formatted, on);
    etmv4_round_trips(
        GenProtocol::Etmv4M,
        seeds.start + 1000..seeds.end + 1000,
        BufferLayout::Unformatted,
        on,
    );
}

#[test]
fn etmv4_plain() {
    etmv4_round_trips(
        GenProtocol::Etmv4,
        300..330,
        BufferLayout::Formatted,
        Etmv4Options::all(Choice::Off),
    );
}

#[test]
fn etmv4_everything() {
    etmv4_round_trips(
        GenProtocol::Etmv4,
        330..360,
        BufferLayout::Unformatted,
        Etmv4Options::all(Choice::On),
    );
    etmv4_round_trips(
        GenProtocol::Etmv4M,
        330..360,
        BufferLayout::Formatted,
        Etmv4Options::all(Choice::On),
    );
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
///
/// The test pins that behaviour: if the decoder changes here, its listings
/// no longer match OpenCSD's, which needs a deliberate decision.
#[test]
fn etmv4_exception_implying_the_target_with_return_stack() {
    let mut e = Etmv4Options::default().with("rs", Choice::On).with("exc", Choice::On);
    e.implied_target_with_rs = true;
    let g = generate_with(
        &GenOptions {
            seed: 19,
            protocol: GenProtocol::Etmv4,
            layout: BufferLayout::Unformatted,
            length: 5,
        },
        &e,
    );
    let err = check(&g).expect_err("the known divergence from the architecture");
    assert!(
        err.starts_with("item 3: expected `exception 0xe ret 0x7f9d800020`, decoded nothing more"),
        "{err}"
    );
}

/// The long soak: `cargo test --release -- --ignored soak`.
#[test]
#[ignore]
fn soak() {
    round_trips(GenProtocol::Etmv4, 1000..6000, BufferLayout::Formatted);
    round_trips(GenProtocol::Etmv4M, 1000..4000, BufferLayout::Unformatted);
    etmv4_round_trips(
        GenProtocol::Etmv4,
        6000..7000,
        BufferLayout::Unformatted,
        Etmv4Options::all(Choice::On),
    );
    etmv4_round_trips(
        GenProtocol::Etmv4M,
        6000..7000,
        BufferLayout::Formatted,
        Etmv4Options::all(Choice::On),
    );
    round_trips(GenProtocol::Stm, 1000..4000, BufferLayout::Formatted);
    round_trips(GenProtocol::Itm, 1000..4000, BufferLayout::Unformatted);
    ptm_etmv3::soak();
    ete_soak();
}

/// ETE in the soak: options from the seed, everything on, long traces.
fn ete_soak() {
    use coresight_generator::ete::EteOptions;
    ete::ete_round_trips(10_000..15_000, BufferLayout::Unformatted, EteOptions::default(), 150);
    ete::ete_round_trips(15_000..17_000, BufferLayout::Formatted, EteOptions::default(), 150);
    let all = EteOptions::all(Choice::On).with("bb", Choice::Off);
    ete::ete_round_trips(17_000..18_000, BufferLayout::Unformatted, all, 300);
    ete::ete_round_trips(18_000..18_300, BufferLayout::Unformatted, EteOptions::default(), 3000);
}

#[test]
fn a_wrong_truth_is_reported_with_the_first_differing_item() {
    use coresight_generator::Truth;
    let mut g = generate(&GenOptions {
        seed: 3,
        length: 40,
        ..GenOptions::default()
    });
    assert!(g.truth.len() > 10);
    let i = (7..g.truth.len())
        .find(|&i| matches!(g.truth[i], Truth::Range { .. }))
        .expect("a range");
    if let Truth::Range { exec, .. } = &mut g.truth[i] {
        *exec = !*exec;
    }
    let err = check(&g).unwrap_err();
    assert!(err.starts_with(&format!("item {i}: expected `range 0x")), "{err}");
}

/// PTM and ETMv3 on A32/T32 programs: each option on (and off) with the
/// others random, both buffer layouts, and several sources in one buffer.
mod ptm_etmv3 {
    use super::*;
    use coresight_generator::a32t32::IsaMix;
    use coresight_generator::etmv3::Etmv3GenOptions;
    use coresight_generator::ptm::PtmGenOptions;

    fn ptm(seeds: std::ops::Range<u64>, set: impl Fn(&mut PtmGenOptions)) {
        let mut o = PtmGenOptions::default();
        set(&mut o);
        round_trips(GenProtocol::Ptm(o), seeds.clone(), BufferLayout::Formatted);
    }

    fn etmv3(seeds: std::ops::Range<u64>, set: impl Fn(&mut Etmv3GenOptions)) {
        let mut o = Etmv3GenOptions::default();
        set(&mut o);
        round_trips(GenProtocol::Etmv3(o), seeds.clone(), BufferLayout::Formatted);
    }

    #[test]
    fn ptm_a32_t32_and_mixed() {
        ptm(0..10, |o| o.isa = Some(IsaMix::A32));
        ptm(10..20, |o| o.isa = Some(IsaMix::T32));
        ptm(20..30, |o| o.isa = Some(IsaMix::Mixed));
        round_trips(
            GenProtocol::Ptm(PtmGenOptions::default()),
            30..40,
            BufferLayout::Unformatted,
        );
    }

    #[test]
    fn ptm_options() {
        ptm(100..110, |o| {
            o.return_stack = Some(true);
            o.branch_broadcast = Some(false);
        });
        ptm(110..118, |o| o.branch_broadcast = Some(true));
        ptm(118..128, |o| o.cycle_accurate = Some(true));
        ptm(128..134, |o| o.cycle_accurate = Some(false));
        ptm(134..142, |o| o.timestamps = Some(true));
        ptm(142..150, |o| o.context_id = Some(true));
        ptm(150..160, |o| o.exceptions = Some(true));
        ptm(160..168, |o| o.trace_filter = Some(true));
        ptm(168..174, |o| o.pft10 = Some(true));
        // Everything at once (but branch broadcast, which excludes the
        // return stack).
        ptm(174..184, |o| {
            *o = PtmGenOptions {
                isa: Some(IsaMix::Mixed),
                return_stack: Some(true),
                branch_broadcast: Some(false),
                cycle_accurate: Some(true),
                timestamps: Some(true),
                context_id: Some(true),
                exceptions: Some(true),
                trace_filter: Some(true),
                pft10: Some(false),
            }
        });
    }

    #[test]
    fn etmv3_a32_t32_and_mixed() {
        etmv3(0..10, |o| o.isa = Some(IsaMix::A32));
        etmv3(10..20, |o| o.isa = Some(IsaMix::T32));
        etmv3(20..30, |o| o.isa = Some(IsaMix::Mixed));
        round_trips(
            GenProtocol::Etmv3(Etmv3GenOptions::default()),
            30..40,
            BufferLayout::Unformatted,
        );
    }

    #[test]
    fn etmv3_options() {
        etmv3(100..110, |o| o.cycle_accurate = Some(true));
        etmv3(110..116, |o| o.cycle_accurate = Some(false));
        etmv3(116..124, |o| o.alt_branch = Some(true));
        etmv3(124..130, |o| o.alt_branch = Some(false));
        etmv3(130..138, |o| o.timestamps = Some(true));
        etmv3(138..146, |o| o.context_id = Some(true));
        etmv3(146..156, |o| o.exceptions = Some(true));
        etmv3(156..164, |o| o.trace_filter = Some(true));
        etmv3(164..174, |o| {
            *o = Etmv3GenOptions {
                isa: Some(IsaMix::Mixed),
                cycle_accurate: Some(true),
                timestamps: Some(true),
                context_id: Some(true),
                exceptions: Some(true),
                data_aborts: Some(false),
                trace_filter: Some(true),
                alt_branch: None,
            }
        });
    }

    #[test]
    fn ptm_and_etmv3_sources_in_one_buffer() {
        round_trips(GenProtocol::Tc2, 0..25, BufferLayout::Formatted);
    }

    #[test]
    fn a_wrong_truth_is_reported_for_ptm_and_etmv3() {
        for protocol in [
            GenProtocol::Ptm(PtmGenOptions::default()),
            GenProtocol::Etmv3(Etmv3GenOptions::default()),
            GenProtocol::Tc2,
        ] {
            let mut g = generate(&GenOptions {
                seed: 9,
                protocol,
                layout: BufferLayout::Formatted,
                length: 60,
            });
            assert!(g.truth.len() > 20);
            g.truth.swap(12, 13);
            let err = check(&g).unwrap_err();
            assert!(err.starts_with("item 12: expected `range 0x"), "{err}");
        }
    }

    /// Data aborts: the aborted load or store is traced, then cancelled by
    /// the exception packet. OpenCSD's ETMv3 decoder (and so this one,
    /// which matches its output) only cancels a range it still holds back,
    /// which it does only when that range is the one element waiting: when
    /// the aborted instruction shares its P-header with other atoms, or
    /// follows a P-header with a single atom, its range is output anyway.
    /// The truth here is what executed; the test pins the decoder's
    /// OpenCSD-compatible output (first difference at item 140 of seed 0):
    /// if it changes, listings no longer match OpenCSD's.
    #[test]
    fn etmv3_data_aborts() {
        let o = Etmv3GenOptions {
            data_aborts: Some(true),
            ..Etmv3GenOptions::default()
        };
        let g = generate(&GenOptions {
            seed: 0,
            protocol: GenProtocol::Etmv3(o),
            layout: BufferLayout::Formatted,
            length: 150,
        });
        let err = check(&g).expect_err("the known divergence from the architecture");
        assert_eq!(
            err,
            "item 140: expected `range 0x80010010 0x80010014 1 E`, decoded `range 0x80000152 0x80000154 1 E`"
        );
    }

    /// Long traces: many periodic syncs, deep call stacks, the return
    /// stack wrapping.
    fn long_round_trips(protocol: GenProtocol, seeds: std::ops::Range<u64>, length: usize) {
        for seed in seeds {
            let g = generate(&GenOptions {
                seed,
                protocol,
                layout: BufferLayout::Formatted,
                length,
            });
            if let Err(e) = check(&g) {
                panic!("{protocol:?} seed {seed} length {length}: {e}");
            }
        }
    }

    pub(super) fn soak() {
        long_round_trips(GenProtocol::Ptm(PtmGenOptions::default()), 20_000..20_300, 3000);
        long_round_trips(GenProtocol::Etmv3(Etmv3GenOptions::default()), 20_000..20_300, 3000);
        long_round_trips(GenProtocol::Tc2, 20_000..20_200, 3000);
        round_trips(
            GenProtocol::Ptm(PtmGenOptions::default()),
            10_000..14_000,
            BufferLayout::Formatted,
        );
        round_trips(
            GenProtocol::Ptm(PtmGenOptions::default()),
            14_000..15_000,
            BufferLayout::Unformatted,
        );
        round_trips(
            GenProtocol::Etmv3(Etmv3GenOptions::default()),
            10_000..14_000,
            BufferLayout::Formatted,
        );
        round_trips(
            GenProtocol::Etmv3(Etmv3GenOptions::default()),
            14_000..15_000,
            BufferLayout::Unformatted,
        );
        round_trips(GenProtocol::Tc2, 10_000..12_000, BufferLayout::Formatted);
    }
}

/// ETE (Armv9) on A64 code: every option forced on in some seeds, both
/// buffer layouts, several sessions decoded in turn (through the lister,
/// end to end: tools/tests/lister.rs).
mod ete {
    use super::*;
    use coresight_generator::Truth;
    use coresight_generator::ete::{self, EteOptions};

    pub(super) fn ete_round_trips(seeds: std::ops::Range<u64>, layout: BufferLayout, o: EteOptions, length: usize) {
        for seed in seeds {
            let opts = GenOptions {
                seed,
                protocol: GenProtocol::Ete(o),
                layout,
                length,
            };
            let g = ete::generate_with(&opts, &o);
            if let Err(e) = check(&g) {
                panic!(
                    "ete seed {seed} ({layout:?}, length {length}; {}): {e}",
                    g.spec.description
                );
            }
        }
    }

    /// Seeds with ETE option `name` on (the others from the seed), half
    /// of them formatted.
    fn ete_option(name: &str, seeds: std::ops::Range<u64>) {
        let on = EteOptions::default().with(name, Choice::On);
        let mid = seeds.start + (seeds.end - seeds.start) / 2;
        ete_round_trips(seeds.start..mid, BufferLayout::Unformatted, on, 150);
        ete_round_trips(mid..seeds.end, BufferLayout::Formatted, on, 150);
    }

    #[test]
    fn ete_unformatted() {
        ete_round_trips(0..60, BufferLayout::Unformatted, EteOptions::default(), 150);
    }

    #[test]
    fn ete_formatted() {
        ete_round_trips(60..100, BufferLayout::Formatted, EteOptions::default(), 150);
    }

    #[test]
    fn ete_everything_and_nothing() {
        let all = EteOptions::all(Choice::On).with("bb", Choice::Off);
        ete_round_trips(100..115, BufferLayout::Unformatted, all, 150);
        ete_round_trips(
            115..125,
            BufferLayout::Formatted,
            all.with("bb", Choice::On).with("rs", Choice::Off),
            150,
        );
        ete_round_trips(125..135, BufferLayout::Unformatted, EteOptions::all(Choice::Off), 150);
    }

    #[test]
    fn ete_own_options() {
        ete_option("tsmark", 200..210);
        ete_option("tme", 210..222);
        ete_option("ite", 222..230);
        ete_option("rme", 230..240);
        ete_option("wfx", 240..248);
        ete_option("multi", 248..258);
    }

    #[test]
    fn ete_kept_etmv4_options() {
        ete_option("cc", 300..306);
        ete_option("ts", 306..312);
        ete_option("rs", 312..318);
        ete_option("bb", 318..324);
        ete_option("exc", 324..330);
        ete_option("ctxt", 330..336);
        ete_option("match", 336..342);
        ete_option("f45", 342..348);
    }

    /// Transactions with the return stack, exceptions and every element
    /// around them, in long traces.
    #[test]
    fn ete_transactions_in_long_traces() {
        let o = EteOptions::default()
            .with("tme", Choice::On)
            .with("rs", Choice::On)
            .with("bb", Choice::Off)
            .with("exc", Choice::On);
        ete_round_trips(400..406, BufferLayout::Unformatted, o, 1500);
    }

    #[test]
    fn a_wrong_truth_is_reported_for_ete() {
        let o = EteOptions::all(Choice::On)
            .with("bb", Choice::Off)
            .with("multi", Choice::Off);
        let opts = GenOptions {
            seed: 5,
            protocol: GenProtocol::Ete(o),
            layout: BufferLayout::Unformatted,
            length: 80,
        };
        let mut g = ete::generate_with(&opts, &o);
        let i = g
            .truth
            .iter()
            .position(|t| matches!(t, Truth::MemTrans(_) | Truth::Instrumentation { .. }))
            .expect("an ETE element");
        let want = g.truth.remove(i);
        let err = check(&g).unwrap_err();
        assert!(
            err.starts_with(&format!("item {i}: expected `")) && err.ends_with(&format!("decoded `{want}`")),
            "{err}"
        );
    }
}
