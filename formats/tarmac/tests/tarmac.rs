//! Tarmac reader and call analysis: the upstream golden outputs (when the
//! shared corpus is present) and our own small inputs (always).

use std::path::PathBuf;

use coresight_tarmac::calls::CallAnalyzer;
use coresight_tarmac::compare;
use coresight_tarmac::events::EventPrinter;
use coresight_tarmac::symbols::Symbols;
use coresight_tarmac::*;

/// The upstream test data; the tests using it are `#[ignore]`d, so it must be there.
fn corpus() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tarmac");
    assert!(
        p.join("parsertest.ref").exists(),
        "{}: not present (these tests need ../shared)",
        p.display()
    );
    p
}

/// The upstream parser test: each non-comment line, then its events.
fn parsertest(text: &str, opts: ReaderOptions) -> String {
    parsertest_endian(text, opts, false)
}

fn parsertest_endian(text: &str, opts: ReaderOptions, big_endian: bool) -> String {
    let mut p = LineParser::new(opts);
    let mut printer = EventPrinter::new().with_big_endian(big_endian);
    let mut out = String::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        out.push_str("--- Tarmac line: ");
        out.push_str(line);
        out.push('\n');
        match p.parse_line(line, n as u64 + 1) {
            Ok(Some(rec)) => printer.write(&rec, &mut out),
            Ok(None) => {}
            Err(e) => out.push_str(&format!("Parse error: {e}\n")),
        }
    }
    out
}

fn assert_same_lines(ours: &str, theirs: &str, what: &str) {
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(a, b, "{what}: first difference at output line {}", i + 1);
    }
    assert_eq!(
        ours.lines().count(),
        theirs.lines().count(),
        "{what}: line counts differ"
    );
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn upstream_parsertest() {
    let dir = corpus();
    let txt = std::fs::read_to_string(dir.join("parsertest.txt")).unwrap();
    let want = std::fs::read_to_string(dir.join("parsertest.ref")).unwrap();
    assert_same_lines(&parsertest(&txt, ReaderOptions::default()), &want, "parsertest");
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn upstream_parsertest_implicit_thumb() {
    let dir = corpus();
    let txt = std::fs::read_to_string(dir.join("parsertest-implicit-thumb.txt")).unwrap();
    let want = std::fs::read_to_string(dir.join("parsertest-implicit-thumb.ref")).unwrap();
    let opts = ReaderOptions {
        implicit_iset: Some(Iset::Thumb),
    };
    assert_same_lines(&parsertest(&txt, opts), &want, "parsertest-implicit-thumb");
}

/// Memory in memory order and load/store diagrams on little- and
/// big-endian systems, against upstream's parser (`parsertest --li/--bi`,
/// goldens made by `fixtures/endian/make.sh`).
#[test]
fn memory_events_in_either_byte_order_equal_upstream() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/endian");
    let txt = std::fs::read_to_string(dir.join("endian.txt")).unwrap();
    for (be, golden) in [(false, "endian-li.ref"), (true, "endian-bi.ref")] {
        let want = std::fs::read_to_string(dir.join(golden)).unwrap();
        assert_eq!(parsertest_endian(&txt, ReaderOptions::default(), be), want, "{golden}");
    }
}

fn analyse(path: &std::path::Path) -> CallAnalyzer {
    let f = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut r = Reader::new(f);
    let mut a = CallAnalyzer::new().with_log();
    while let Some(rec) = r.next_record().unwrap() {
        a.feed(&rec);
    }
    a
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn upstream_quicksort_profile_calltree_flamegraph() {
    let dir = corpus();
    let a = analyse(&dir.join("quicksort.tarmac"));
    let tree = a.finish();
    let syms = Symbols::from_elf_file(&dir.join("quicksort.elf")).unwrap();
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    assert_eq!(tree.profile_text(Some(&syms)), read("profile-quicksort-symbols.ref"));
    assert_eq!(tree.profile_text(None), read("profile-quicksort-addr.ref"));
    assert_eq!(tree.calltree_text(Some(&syms)), read("calltree-quicksort-symbols.ref"));
    assert_eq!(
        tree.flamegraph_text(Some(&syms)),
        read("flamegraph-quicksort-symbols.ref")
    );
}

#[test]
#[ignore = "needs ../shared/corpus/tarmac (Tarmac Trace Utilities' tests); .ci/run runs it with --ignored"]
fn upstream_calltest_calls_and_returns() {
    let dir = corpus();
    for name in ["calltest32", "calltest64"] {
        let a = analyse(&dir.join(format!("{name}.tarmac")));
        let reflog = std::fs::read_to_string(dir.join(format!("{name}.ref"))).unwrap();
        let ours = a.log().unwrap();
        // The debug log part of the reference: every transfer and its verdict.
        let theirs: String = reflog
            .lines()
            .take_while(|l| !l.starts_with("o "))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_same_lines(ours, &theirs, name);
        // And the call tree after it.
        let syms = Symbols::from_elf_file(&dir.join(format!("{name}.elf"))).unwrap();
        let tree_ref: String = reflog
            .lines()
            .skip_while(|l| !l.starts_with("o "))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(a.finish().calltree_text(Some(&syms)), tree_ref, "{name} call tree");
    }
}

// ---- Our own inputs (always run) ----

fn records(text: &str) -> Vec<String> {
    let mut r = Reader::new(text.as_bytes());
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push(format!("{:?}", rec.kind));
    }
    out
}

#[test]
fn typed_instruction_fields() {
    let text = "10 clk cpu1 IT (10) 0000815c:00000000815c_NS,00000000815e_NS f7ffef76 T hyp_n : BLX {pc}-0x110\n";
    let mut r = Reader::new(text.as_bytes());
    let rec = r.next_record().unwrap().unwrap();
    assert_eq!(
        (rec.line, rec.time, rec.cpu, rec.unit),
        (1, 10, Some(1), Some(TimeUnit::Clk))
    );
    let RecordKind::Instruction(i) = rec.kind else {
        panic!("{:?}", rec.kind)
    };
    assert_eq!(
        (i.addr, i.encoding, i.width, i.iset, i.inst_id),
        (0x815c, Some(0xf7ffef76), 32, Iset::Thumb, Some(10))
    );
    assert_eq!(
        i.paddr,
        Some(PhysAddr {
            addr: 0x815c,
            non_secure: Some(true)
        })
    );
    assert_eq!(
        (i.mode, i.mode_name(), i.security()),
        (Some("hyp_n"), Some("hyp"), Some(Security::NonSecure))
    );
    assert_eq!(i.disassembly, "BLX {pc}-0x110");
}

#[test]
fn cpu_component_names_and_trace_matcher_cpu_numbers() {
    let text =
        "7 clk cluster0.cpu3 IT (7) 00001000 d503201f O EL1h_n : NOP\n8 clk 2 IT (8) 00001004 d503201f O EL1h : NOP\n";
    let mut r = Reader::new(text.as_bytes());
    assert_eq!(r.next_record().unwrap().unwrap().cpu, Some(3));
    let rec = r.next_record().unwrap().unwrap();
    assert_eq!(rec.cpu, Some(2));
    let RecordKind::Instruction(i) = rec.kind else { panic!() };
    assert_eq!((i.mode, i.security()), (Some("EL1h"), None));
}

#[test]
fn typed_register_memory_and_diagram() {
    let text = "\
5 ns R Q0 -------- -------- 3ff6a09e 667f3bcd
R X0 01234567 89abcdef
6 clk MW16 4001c440 4050d645c8ac92fc c04ce8c2677550b4
   LD 00004020  ........ 626d654d 2043424d ####203e   S:0000000000004020  NM NSH
";
    let mut r = Reader::new(text.as_bytes());
    let rec = r.next_record().unwrap().unwrap();
    let RecordKind::Register(q) = rec.kind else { panic!() };
    assert_eq!(
        q.reg,
        Some(RegId {
            class: RegClass::Q,
            index: 0
        })
    );
    assert_eq!(
        q.runs().collect::<Vec<_>>(),
        vec![(0usize, &[0xcd, 0x3b, 0x7f, 0x66, 0x9e, 0xa0, 0xf6, 0x3f][..])]
    );
    let rec = r.next_record().unwrap().unwrap();
    assert_eq!((rec.time, rec.time_given), (5, false));
    let RecordKind::Register(x) = rec.kind else { panic!() };
    assert_eq!(x.value_u64(), Some(0x0123456789abcdef));
    let rec = r.next_record().unwrap().unwrap();
    let RecordKind::Memory(m) = rec.kind else { panic!() };
    assert_eq!((m.read, m.size, m.addr), (false, 16, 0x4001c440));
    assert_eq!(m.value, Some(0x4050d645c8ac92fc_c04ce8c2677550b4));
    let rec = r.next_record().unwrap().unwrap();
    let RecordKind::Diagram(d) = rec.kind else { panic!() };
    assert_eq!(
        (d.read, d.base, d.attributes),
        (true, 0x4020, "S:0000000000004020  NM NSH")
    );
    assert_eq!(d.bytes[15], DiagramByte::Known(0x3e));
    assert_eq!(d.bytes[12], DiagramByte::Unknown);
    assert_eq!(d.bytes[0], DiagramByte::Unused);
}

#[test]
fn text_and_other_kinds() {
    let got = records(
        "Tarmac Text Rev 3t\n1 clk SIGNAL: SIGNAL=Abort STATE=N\n2 clk TTW S1 L1 0000\n3 clk FD 00008000 ret\n4 clk MU4_ADD 00001000 1 2\nwhat is this\n",
    );
    assert!(got[0].starts_with("Header"), "{got:?}");
    assert!(got[1].contains("Signal"));
    assert!(got[2].contains("TableWalk"));
    assert!(got[3].contains("Flow { kind: Fd, target: Some(32768)"));
    assert!(got[4].contains("MemUpdate { size: 4, op: \"ADD\", addr: Some(4096)"));
    assert!(got[5].contains("Unknown"));
}

#[test]
fn malformed_known_records_name_the_line() {
    let text = "1 clk IT (1) 00008000 d2a00200 O EL3h_s : MOV x0,#1\n2 clk IT (2) 0000800g d2a00200 O EL3h_s : MOV\n";
    let mut r = Reader::new(text.as_bytes());
    r.next_record().unwrap();
    let e = r.next_record().unwrap_err();
    assert_eq!((e.line, e.column), (2, 14));
    assert!(
        e.to_string()
            .starts_with("line 2, column 14: expected a hex instruction"),
        "{e}"
    );
    let cases = [
        ("R X0 0123zz", "register contents"),
        ("MR4 00001000", "memory contents"),
        ("LD 00001000 ........", "a word of data bytes"),
        ("ES (00001000:e1a00000 A svc: MOV", "')'"),
        ("IT (1) 00001000 e1a00000 svc_s : MOV", "instruction set state"),
        ("MR3 00001000 00", "size of 1, 2, 4, 8 or 16"),
    ];
    for (line, want) in cases {
        let e = Reader::new(line.as_bytes()).next_record().unwrap_err();
        assert!(e.to_string().contains(want), "{line}: {e}");
        assert_eq!(e.line, 1);
    }
}

/// A small AArch64 program: main calls f, f calls g twice, a loop branch
/// inside f is not a call.
const CALLS64: &str = "\
1 clk IT (1) 00001000 d2a00200 O EL3h_s : MOV x0,#0x100000
1 clk R X0 0000000000100000
2 clk IT (2) 00001004 9100001f O EL3h_s : MOV sp,x0
2 clk R SP_EL3 0000000000100000
3 clk IT (3) 00001008 94000002 O EL3h_s : BL 0x1010
3 clk R X30 000000000000100c
4 clk IT (4) 00001010 a9bf7bfd O EL3h_s : STP x29,x30,[sp,#-16]!
4 clk R SP_EL3 00000000000ffff0
5 clk IT (5) 00001014 94000004 O EL3h_s : BL 0x1024
5 clk R X30 0000000000001018
6 clk IT (6) 00001024 d65f03c0 O EL3h_s : RET
7 clk IT (7) 00001018 94000003 O EL3h_s : BL 0x1024
7 clk R X30 000000000000101c
8 clk IT (8) 00001024 d65f03c0 O EL3h_s : RET
9 clk IT (9) 0000101c a8c17bfd O EL3h_s : LDP x29,x30,[sp],#16
9 clk R X30 000000000000100c
9 clk R SP_EL3 0000000000100000
10 clk IT (10) 00001020 d65f03c0 O EL3h_s : RET
11 clk IT (11) 0000100c d503201f O EL3h_s : NOP
";

#[test]
fn call_tree_profile_flamegraph_of_a_small_trace() {
    let mut r = Reader::new(CALLS64.as_bytes());
    let mut a = CallAnalyzer::new();
    while let Some(rec) = r.next_record().unwrap() {
        a.feed(&rec);
    }
    let t = a.finish();
    let mut syms = Symbols::default();
    for (addr, name) in [(0u64, "zero"), (0x1000, "main"), (0x1010, "f"), (0x1024, "g")] {
        syms.add(coresight_tarmac::symbols::Symbol {
            addr,
            size: 0,
            name: name.into(),
        });
    }
    assert_eq!(
        t.calltree_text(Some(&syms)),
        "o t:1 l:1 pc:0x1000 - t:11 l:19 pc:0x100c : main\n\
         \x20 - t:3 l:5 pc:0x1008 - t:11 l:19 pc:0x100c\n\
         \x20   o t:4 l:7 pc:0x1010 - t:10 l:18 pc:0x1020 : f\n\
         \x20     - t:5 l:9 pc:0x1014 - t:7 l:12 pc:0x1018\n\
         \x20       o t:6 l:11 pc:0x1024 - t:6 l:11 pc:0x1024 : g\n\
         \x20     - t:7 l:12 pc:0x1018 - t:9 l:15 pc:0x101c\n\
         \x20       o t:8 l:14 pc:0x1024 - t:8 l:14 pc:0x1024 : g\n"
    );
    assert_eq!(
        t.profile_text(Some(&syms)),
        "Address     Count       Time        Function name\n\
         0x1000      1           11          main\n\
         0x1010      1           7           f\n\
         0x1024      2           2           g\n"
    );
    assert_eq!(
        t.flamegraph_text(None),
        "0x1000 4\n0x1000;0x1010 6\n0x1000;0x1010;0x1024 0\n"
    );
}

fn cmp(a: &str, b: &str, opts: &compare::CompareOptions) -> compare::CompareReport {
    let mut ra = Reader::new(a.as_bytes());
    let mut rb = Reader::new(b.as_bytes());
    compare::compare(&mut ra, &mut rb, opts).unwrap()
}

fn insn_lines(spec: &[(u64, u64)]) -> String {
    spec.iter()
        .map(|(t, pc)| format!("{t} clk IT ({t}) {pc:08x} d503201f O EL1h_n : NOP\n"))
        .collect()
}

#[test]
fn compare_with_trace_matcher_options() {
    use compare::CompareOptions;
    let a = insn_lines(&[(1, 0x100), (2, 0x104), (3, 0x108), (4, 0x10c)]);
    assert!(cmp(&a, &a, &CompareOptions::default()).same());
    // Reordered within a window of 2.
    let b = insn_lines(&[(1, 0x100), (3, 0x108), (2, 0x104), (4, 0x10c)]);
    let strict = cmp(
        &a,
        &b,
        &CompareOptions {
            skip_time: true,
            ..Default::default()
        },
    );
    assert!(!strict.same());
    let d = strict.first().unwrap();
    assert_eq!(
        (d.index_a, d.a.at.unwrap().addr, d.b.at.unwrap().addr),
        (1, 0x104, 0x108)
    );
    assert_eq!(d.a.before.len(), 1);
    assert!(
        cmp(
            &a,
            &b,
            &CompareOptions {
                window: 2,
                ..Default::default()
            }
        )
        .same()
    );
    // Time-only differences.
    let c = insn_lines(&[(10, 0x100), (20, 0x104), (30, 0x108), (40, 0x10c)]);
    assert_eq!(cmp(&a, &c, &CompareOptions::default()).differences, 4);
    assert!(
        cmp(
            &a,
            &c,
            &CompareOptions {
                skip_time: true,
                ..Default::default()
            }
        )
        .same()
    );
    // Start address, boot section, remainder.
    let longer = insn_lines(&[(0, 0x80), (1, 0x100), (2, 0x104), (3, 0x108), (4, 0x10c), (5, 0x110)]);
    let o = CompareOptions {
        start_addr: Some(0x100),
        ..Default::default()
    };
    let r = cmp(&a, &longer, &o);
    assert_eq!((r.matched, r.differences), (4, 1));
    assert!(r.first().unwrap().a.at.is_none());
    assert!(
        cmp(
            &a,
            &longer,
            &CompareOptions {
                skip_remainder: true,
                ..o
            }
        )
        .same()
    );
    let boot = CompareOptions {
        boot_size: 1,
        skip_time: true,
        ..Default::default()
    };
    assert!(
        !cmp(
            &a,
            &insn_lines(&[(1, 0x999), (2, 0x104), (3, 0x108), (4, 0x10c)]),
            &CompareOptions::default()
        )
        .same()
    );
    assert!(
        cmp(
            &a,
            &insn_lines(&[(1, 0x999), (2, 0x104), (3, 0x108), (4, 0x10c)]),
            &boot
        )
        .same()
    );
    // Stop at the first difference.
    let e = insn_lines(&[(1, 0x100), (2, 0x200), (3, 0x208), (4, 0x10c)]);
    assert_eq!(cmp(&a, &e, &CompareOptions::default()).differences, 2);
    assert_eq!(
        cmp(
            &a,
            &e,
            &CompareOptions {
                stop_at_first: true,
                ..Default::default()
            }
        )
        .differences,
        1
    );
    assert_eq!(
        cmp(&a, &e, &CompareOptions::default()).text("A", "B"),
        "different: 2 difference(s), 2 instructions matched\n\
         changed: A line 2, B line 2\n\
         \x20 A\n\
         \x20     line 1: 1 IT 00000100 d503201f O\n\
         \x20   > line 2: 2 IT 00000104 d503201f O\n\
         \x20     line 3: 3 IT 00000108 d503201f O\n\
         \x20     line 4: 4 IT 0000010c d503201f O\n\
         \x20 B\n\
         \x20     line 1: 1 IT 00000100 d503201f O\n\
         \x20   > line 2: 2 IT 00000200 d503201f O\n\
         \x20     line 3: 3 IT 00000208 d503201f O\n\
         \x20     line 4: 4 IT 0000010c d503201f O\n\
         and 1 more difference(s)\n"
    );
}
