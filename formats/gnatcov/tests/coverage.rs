//! Object coverage from hardware trace agrees with what ran: for generated
//! snapshots whose truth lists the executed ranges, the coverage computed
//! from the decoded trace, from the exported gnatcov file read back, and
//! from the truth itself are the same, instruction by instruction and
//! branch by branch, for A64, A32 and T32 code.

use coresight_decode::shared::Lock;
use std::sync::Arc;

use coresight_decode::arch::Isa;
use coresight_generator::check::decode_into;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Generated, Truth, generate};
use coresight_gnatcov::coverage::{CodeImage, Coverage, Execution, InsnState};
use coresight_gnatcov::export::{ExecSignature, FlatTraceBuilder, Merge, SharedBuilder};
use coresight_gnatcov::format::{DateTime, Endian, Entry, Op, TraceFile};

fn image(g: &Generated, isa: Isa) -> CodeImage {
    let regions = g
        .spec
        .devices
        .iter()
        .filter(|d| d.class == "core")
        .flat_map(|d| d.dumps.iter().map(|x| (x.address, x.data.clone())))
        .collect();
    CodeImage::from_regions(regions, isa)
}

/// The truth's ranges as flat-trace entries: every instruction ran; the
/// last one's outcome (read where it is a conditional branch).
fn truth_entries(g: &Generated) -> Vec<Entry> {
    g.truth
        .iter()
        .filter_map(|t| match *t {
            Truth::Range { start, end, exec, .. } => Some(Entry::new(
                start,
                (end - start) as u16,
                Op::BLOCK | if exec { Op::BR0 } else { Op::BR1 },
            )),
            _ => None,
        })
        .collect()
}

struct Outcome {
    coverage: Coverage,
    /// Fault entries in the export (ranges cut by exceptions).
    faults: usize,
}

fn check(name: &str, opts: GenOptions, isa: Isa, endian: Endian) -> Outcome {
    let g = generate(&opts);
    let img = image(&g, isa);
    // 1. Decoded trace, through the export sink.
    let b = Arc::new(Lock::new(FlatTraceBuilder::new(Merge::All)));
    decode_into(&g, Box::new(SharedBuilder(b.clone())), |_| {}).unwrap();
    b.borrow_mut().finish();
    let decoded = Coverage::compute(&img, &Execution::from_entries(&img, b.borrow().entries(None)));
    // 2. The exported gnatcov file, read back.
    let sig = ExecSignature::of_bytes("prog.elf".into(), b"not really an ELF", DateTime::from_unix(0));
    let bytes = b
        .borrow()
        .trace_file(None, None, endian, Some(&sig), Some(DateTime::from_unix(0)))
        .to_bytes();
    let file = TraceFile::parse(&bytes).unwrap();
    let from_file = Coverage::compute(&img, &Execution::from_entries(&img, file.entries()));
    // 3. The truth.
    let truth = Coverage::compute(&img, &Execution::from_entries(&img, &truth_entries(&g)));
    for (what, c) in [("decoded trace", &decoded), ("gnatcov file", &from_file)] {
        for (a, t) in c.routines.iter().zip(&truth.routines) {
            for (x, y) in a.insns.iter().zip(&t.insns) {
                assert_eq!(x, y, "{name}: {what} vs truth at {:#x}", y.insn.addr);
            }
        }
        assert_eq!(c, &truth, "{name}: {what} vs truth");
    }
    let s = truth.total;
    eprintln!(
        "{name}: {} insns, {} covered; {} cond branches: {} fully, {} partially, {} not executed",
        s.insns, s.covered, s.branches, s.fully, s.partially, s.branch_not_executed
    );
    assert!(s.covered > 0, "{name}: nothing covered");
    let faults = file.entries().filter(|e| e.op.fault()).count();
    Outcome {
        coverage: truth,
        faults,
    }
}

/// The cases of a test together exercise what they must: code run and not
/// run, branches taken one way and both ways, every mark.
fn exercised(cases: &[Outcome]) {
    let mut t = coresight_gnatcov::coverage::Summary::default();
    let mut marks = std::collections::HashSet::new();
    for o in cases {
        t.add(&o.coverage.total);
        marks.extend(
            o.coverage
                .routines
                .iter()
                .flat_map(|r| r.insns.iter().map(|i| i.state.mark())),
        );
    }
    assert!(
        t.covered < t.insns && t.fully > 0 && t.partially > 0 && t.branch_not_executed > 0,
        "{t:?}"
    );
    for m in ['+', '-', '>', 'v'] {
        assert!(marks.contains(&m), "no '{m}' mark");
    }
}

fn opts(protocol: GenProtocol, seed: u64, length: usize) -> GenOptions {
    GenOptions {
        seed,
        protocol,
        layout: BufferLayout::Formatted,
        length,
    }
}

#[test]
fn a64_etmv4() {
    let mut all = Vec::new();
    for seed in [2, 3, 5] {
        let o = check(
            &format!("etmv4 A64 seed {seed}"),
            opts(GenProtocol::Etmv4, seed, 300),
            Isa::Aarch64,
            Endian::Little,
        );
        assert!(
            o.coverage
                .routines
                .iter()
                .all(|r| r.insns.iter().all(|i| i.insn.size == 4))
        );
        all.push(o);
    }
    exercised(&all);
    assert!(all.iter().any(|o| o.faults > 0), "exceptions cut some blocks");
}

#[test]
fn a64_ete_big_endian_file() {
    exercised(&[check(
        "ete A64",
        opts(GenProtocol::Ete(Default::default()), 7, 300),
        Isa::Aarch64,
        Endian::Big,
    )]);
}

#[test]
fn a32_ptm_and_etmv3() {
    let mut all = Vec::new();
    for (seed, p) in [(4, "ptm"), (12, "ptm"), (8, "etmv3"), (13, "etmv3")] {
        let mut proto = GenProtocol::from_name(p).unwrap();
        proto.set_option("isa", "a32").unwrap();
        all.push(check(
            &format!("{p} A32 seed {seed}"),
            opts(proto, seed, 300),
            Isa::Arm,
            Endian::Little,
        ));
    }
    exercised(&all);
    assert!(all.iter().any(|o| o.faults > 0), "exceptions cut some blocks");
}

#[test]
fn t32_ptm_and_etmv4m() {
    let mut proto = GenProtocol::from_name("ptm").unwrap();
    proto.set_option("isa", "t32").unwrap();
    let o = check("ptm T32", opts(proto, 9, 300), Isa::Thumb2, Endian::Little);
    assert!(
        o.coverage
            .routines
            .iter()
            .any(|r| r.insns.iter().any(|i| i.insn.size == 2))
    );
    assert!(
        o.coverage
            .routines
            .iter()
            .any(|r| r.insns.iter().any(|i| i.insn.size == 4))
    );
    let m = check(
        "etmv4m T32",
        opts(GenProtocol::Etmv4M, 10, 300),
        Isa::Thumb2,
        Endian::Little,
    );
    exercised(&[o, m]);
}

#[test]
fn states_follow_the_evidence() {
    // Marks on a hand-made A64 routine: b.eq taken only, cbz both ways,
    // tbz fell through only, one not reached.
    let code: Vec<u32> = vec![
        0xd503201f, // 0x00 nop
        0x54000040, // 0x04 b.eq +8
        0xd503201f, // 0x08 nop
        0xb4000040, // 0x0c cbz x0, +8
        0xd503201f, // 0x10 nop
        0x36000040, // 0x14 tbz w0, #0, +8
        0xd503201f, // 0x18 nop
        0x54000040, // 0x1c b.eq +8 (never reached)
        0xd65f03c0, // 0x20 ret
    ];
    let bytes: Vec<u8> = code.iter().flat_map(|w| w.to_le_bytes()).collect();
    let img = CodeImage::from_regions(vec![(0x1000, bytes)], Isa::Aarch64);
    let entries = [
        Entry::new(0x1000, 8, 0x11), // to b.eq, taken
        Entry::new(0x100c, 4, 0x11), // cbz taken
        Entry::new(0x100c, 4, 0x12), // cbz fell through
        Entry::new(0x1010, 8, 0x12), // tbz fell through
        Entry::new(0x1018, 4, 0x20), // fault after the nop
    ];
    let c = Coverage::compute(&img, &Execution::from_entries(&img, &entries));
    let marks: String = c.routines[0].insns.iter().map(|i| i.state.mark()).collect();
    assert_eq!(marks, "+>-++v+--");
    assert_eq!(c.routines[0].insns[3].state, InsnState::BothTaken);
    let report = c.report(8, &mut |_| String::new());
    assert!(
        report.starts_with("mem_1000 !: 00001000-00001023\n00001000 +:  1f 20 03 d5  \n00001004 >:  40 00 00 54  \n"),
        "{report}"
    );
    assert!(report.ends_with(
        "9 instructions analyzed:\n  6 covered\n  3 not executed\n4 conditional branches analyzed:\n  1 fully covered\n  2 partially covered\n  1 not executed\n"
    ), "{report}");
}
