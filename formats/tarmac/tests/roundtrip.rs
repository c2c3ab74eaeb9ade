//! Real executions through CoreSight: Tarmac → trace (the generator's
//! trace units, memory from the ELF) → decode → Tarmac (the writer) →
//! compare. The instruction streams must be the same.

use coresight_decode::shared::Lock;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coresight_generator::BufferLayout;
use coresight_generator::check::decode_with;
use coresight_generator::execution::{ExecProtocol, elf_images, generate_from_execution, insns_from_tarmac};
use coresight_tarmac::Reader;
use coresight_tarmac::compare::{self, CompareOptions};
use coresight_tarmac::writer::{MemImage, TarmacWriter, WriterOptions};

#[derive(Clone, Default)]
struct Shared(Arc<Lock<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Encodes `tarmac` (with `elf`'s memory) with `protocol`, decodes it back
/// to Tarmac, and returns (the report, the Tarmac written).
fn round_trip(
    tarmac: &[u8],
    elf: &[u8],
    protocol: ExecProtocol,
    seed: u64,
    layout: BufferLayout,
) -> (compare::CompareReport, String) {
    let insns = insns_from_tarmac(&mut Reader::new(tarmac)).unwrap();
    let images = elf_images(elf).unwrap();
    let g = generate_from_execution(&insns, &images, protocol, seed, layout).unwrap();
    let out = Shared::default();
    let w = TarmacWriter::new(
        out.clone(),
        MemImage { regions: images },
        WriterOptions {
            disassemble: true,
            ..Default::default()
        },
    );
    decode_with(&g, Box::new(w)).unwrap();
    let written = String::from_utf8(out.0.borrow().clone()).unwrap();
    let rep = {
        let mut ra = Reader::new(tarmac);
        let mut rb = Reader::new(written.as_bytes());
        let opts = CompareOptions {
            skip_time: true,
            ..Default::default()
        };
        compare::compare(&mut ra, &mut rb, &opts).unwrap()
    };
    (rep, written)
}

/// The shared traces; the tests using them are `#[ignore]`d, so they must be there.
fn shared() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tarmac");
    assert!(
        p.join("quicksort.tarmac").exists(),
        "{}: not present (these tests need ../shared)",
        p.display()
    );
    p
}

fn check_shared(dir: &Path, name: &str, protocols: &[ExecProtocol]) {
    let tarmac = std::fs::read(dir.join(format!("{name}.tarmac"))).unwrap();
    let elf = std::fs::read(dir.join(format!("{name}.elf"))).unwrap();
    for &p in protocols {
        for seed in 1..=4u64 {
            let layout = if seed % 2 == 0 {
                BufferLayout::Formatted
            } else {
                BufferLayout::Unformatted
            };
            let (rep, written) = round_trip(&tarmac, &elf, p, seed, layout);
            assert!(
                rep.same(),
                "{name} {p:?} seed {seed}:\n{}\n{}",
                rep.text("original", "decoded"),
                &written[..written.len().min(2000)]
            );
            assert!(rep.matched > 50, "{name}: {} instructions", rep.matched);
        }
    }
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Fast Models traces); .ci/run runs it with --ignored"]
fn shared_quicksort_etmv4_ete() {
    let dir = shared();
    check_shared(&dir, "quicksort", &[ExecProtocol::Etmv4, ExecProtocol::Ete]);
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Fast Models traces); .ci/run runs it with --ignored"]
fn shared_calltest64_etmv4_ete() {
    let dir = shared();
    check_shared(&dir, "calltest64", &[ExecProtocol::Etmv4, ExecProtocol::Ete]);
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Fast Models traces); .ci/run runs it with --ignored"]
fn shared_calltest32_etmv4_ptm_etmv3() {
    let dir = shared();
    check_shared(
        &dir,
        "calltest32",
        &[ExecProtocol::Etmv4, ExecProtocol::Ptm, ExecProtocol::Etmv3],
    );
}

/// The fixtures `tests/fixtures/make.sh` makes: a small program run
/// under qemu-user, logged as Tarmac (always present).
fn check_fixture(name: &str, protocols: &[ExecProtocol], expect: usize) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let tarmac = std::fs::read(dir.join(format!("{name}.tarmac"))).unwrap();
    let elf = std::fs::read(dir.join(format!("{name}.elf"))).unwrap();
    for &p in protocols {
        for seed in 1..=8u64 {
            let layout = if seed % 2 == 0 {
                BufferLayout::Formatted
            } else {
                BufferLayout::Unformatted
            };
            let (rep, written) = round_trip(&tarmac, &elf, p, seed, layout);
            assert!(
                rep.same(),
                "{name} {p:?} seed {seed}:\n{}\n{}",
                rep.text("original", "decoded"),
                &written[..written.len().min(2000)]
            );
            assert_eq!(rep.matched as usize, expect, "{name} {p:?} seed {seed}");
        }
    }
}

#[test]
fn fixture_aarch64_etmv4_ete() {
    check_fixture("prog64", &[ExecProtocol::Etmv4, ExecProtocol::Ete], 555);
}

#[test]
fn fixture_aarch32_etmv4_ptm_etmv3() {
    check_fixture(
        "prog32",
        &[ExecProtocol::Etmv4, ExecProtocol::Ptm, ExecProtocol::Etmv3],
        439,
    );
}

#[test]
fn fixture_t32_etmv4_ptm_etmv3() {
    check_fixture(
        "progt32",
        &[ExecProtocol::Etmv4, ExecProtocol::Ptm, ExecProtocol::Etmv3],
        448,
    );
}

#[test]
fn a_wrong_decode_is_reported_different() {
    // The writer's output with one instruction changed must not compare same.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let tarmac = std::fs::read(dir.join("prog64.tarmac")).unwrap();
    let elf = std::fs::read(dir.join("prog64.elf")).unwrap();
    let (rep, written) = round_trip(&tarmac, &elf, ExecProtocol::Etmv4, 1, BufferLayout::Unformatted);
    assert!(rep.same());
    let damaged = written.replacen(" IT (40) ", " IS (40) ", 1);
    assert_ne!(damaged, written);
    let mut ra = Reader::new(&tarmac[..]);
    let mut rb = Reader::new(damaged.as_bytes());
    let rep = compare::compare(
        &mut ra,
        &mut rb,
        &CompareOptions {
            skip_time: true,
            ..Default::default()
        },
    )
    .unwrap();
    let d = rep.first().unwrap();
    assert_eq!(
        (rep.differences, d.kind, d.index_a, d.index_b),
        (1, compare::DiffKind::Changed, 39, 39)
    );
}

#[test]
fn trace_matcher_form_with_flow_exception_and_link_lines_reads_back_the_same() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let tarmac = std::fs::read(dir.join("progt32.tarmac")).unwrap();
    let elf = std::fs::read(dir.join("progt32.elf")).unwrap();
    let insns = insns_from_tarmac(&mut Reader::new(&tarmac[..])).unwrap();
    let images = elf_images(&elf).unwrap();
    let g = generate_from_execution(&insns, &images, ExecProtocol::Ptm, 3, BufferLayout::Formatted).unwrap();
    let out = Shared::default();
    let opts = WriterOptions {
        flow_lines: true,
        exception_lines: true,
        trace_matcher: true,
        cpu: 2,
        disassemble: false,
        link_register_lines: true,
    };
    decode_with(
        &g,
        Box::new(TarmacWriter::new(out.clone(), MemImage { regions: images }, opts)),
    )
    .unwrap();
    let written = String::from_utf8(out.0.borrow().clone()).unwrap();
    // Trace Matcher form: CPU number, mode without security, T32 halfwords in order.
    // (PTM does not trace the exception level: the mode is the writer's default.)
    assert!(
        written.starts_with(
            "1 clk 2 IT (1) 000100fc b5b0 T svc : \n2 clk 2 IT (2) 000100fe 2006 T svc : \n\
             3 clk 2 IT (3) 00010100 f7ffffc8 T svc : \n3 clk 2 R r14 00010105\n3 clk 2 FD 00010094\n4 clk 2 IT (4) 00010094 b538 T svc : \n"
        ),
        "{}",
        &written[..400]
    );
    // The trace ends with the exception that stands for the end of the run.
    assert!(
        written.ends_with(" CoreEvent_EXCEPTION\n"),
        "{}",
        &written[written.len() - 300..]
    );
    let mut ra = Reader::new(&tarmac[..]);
    let mut rb = Reader::new(written.as_bytes());
    let rep = compare::compare(
        &mut ra,
        &mut rb,
        &CompareOptions {
            skip_time: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(rep.same(), "{}", rep.text("a", "b"));
    assert_eq!(rep.matched, 448);
}

/// Generated programs (random A64 and A32/T32 code, with exceptions and
/// context changes) decoded to Tarmac, that Tarmac encoded again as an
/// execution with another trace unit, decoded again: the same stream.
#[test]
fn generated_programs_survive_a_second_trip_as_executions() {
    use coresight_generator::{GenOptions, GenProtocol, generate};
    let cases: [(GenProtocol, &[ExecProtocol]); 3] = [
        (GenProtocol::Etmv4, &[ExecProtocol::Ete, ExecProtocol::Etmv4]),
        (
            GenProtocol::Ptm(Default::default()),
            &[ExecProtocol::Etmv3, ExecProtocol::Ptm, ExecProtocol::Etmv4],
        ),
        (
            GenProtocol::Etmv3(Default::default()),
            &[ExecProtocol::Ptm, ExecProtocol::Etmv3, ExecProtocol::Etmv4],
        ),
    ];
    let mut checked = 0;
    for (gp, targets) in cases {
        for seed in 1..=40u64 {
            let g = generate(&GenOptions {
                seed,
                protocol: gp,
                layout: BufferLayout::Formatted,
                length: 150,
            });
            let images: Vec<(u64, Vec<u8>)> = g
                .spec
                .devices
                .iter()
                .flat_map(|d| d.dumps.iter().map(|m| (m.address, m.data.clone())))
                .collect();
            let out = Shared::default();
            let w = TarmacWriter::new(
                out.clone(),
                MemImage {
                    regions: images.clone(),
                },
                WriterOptions::default(),
            );
            decode_with(&g, Box::new(w)).unwrap();
            let first = String::from_utf8(out.0.borrow().clone()).unwrap();
            let insns = insns_from_tarmac(&mut Reader::new(first.as_bytes())).unwrap();
            for &p in targets {
                let aarch64 = insns
                    .first()
                    .is_some_and(|i| i.isa == coresight_decode::arch::Isa::Aarch64);
                if insns.is_empty() || (aarch64 && matches!(p, ExecProtocol::Ptm | ExecProtocol::Etmv3)) {
                    continue;
                }
                let g2 = generate_from_execution(&insns, &images, p, seed, BufferLayout::Unformatted).unwrap();
                let out2 = Shared::default();
                let w2 = TarmacWriter::new(
                    out2.clone(),
                    MemImage {
                        regions: images.clone(),
                    },
                    WriterOptions::default(),
                );
                decode_with(&g2, Box::new(w2)).unwrap();
                let second = String::from_utf8(out2.0.borrow().clone()).unwrap();
                let mut ra = Reader::new(first.as_bytes());
                let mut rb = Reader::new(second.as_bytes());
                // ETMv3 traces the condition of every instruction; PTM and
                // ETMv4 only of branches: a failed non-branch reads back
                // as executed.
                let ignore_effect = gp.name() == "etmv3" && p != ExecProtocol::Etmv3;
                let o = CompareOptions {
                    skip_time: true,
                    ignore_effect,
                    ..Default::default()
                };
                let rep = compare::compare(&mut ra, &mut rb, &o).unwrap();
                assert!(
                    rep.same(),
                    "{} seed {seed} -> {p:?}:\n{}",
                    gp.name(),
                    rep.text("first", "second")
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 50, "only {checked} round trips ran");
}
