//! `tarmac compare` run as a user runs it: the window, differences reported
//! where they happened with both traces shown, registers and memory on
//! request, and the exit statuses (0 same, 1 different, 2 trouble).

use std::path::PathBuf;
use std::process::Command;

/// A fresh directory for one test's traces (compared by their bare names,
/// so the outputs do not depend on where the directory is).
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tarmac-compare-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One NOP per address, at times 1, 2...
fn trace(pcs: &[u64]) -> String {
    pcs.iter()
        .enumerate()
        .map(|(n, pc)| format!("{t} clk IT ({t}) {pc:08x} d503201f O EL1h_n : NOP\n", t = n + 1))
        .collect()
}

/// Twelve instructions, 0x1000 to 0x102c.
fn base() -> Vec<u64> {
    (0..12).map(|k| 0x1000 + 4 * k).collect()
}

/// Runs `tarmac compare` in `d`: (exit status, standard output, standard error).
fn compare(d: &PathBuf, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tarmac"))
        .current_dir(d)
        .arg("compare")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_record_moved_beyond_the_window_differs_where_it_was_and_where_it_went() {
    let d = dir("moved");
    let mut moved = base();
    // 0x1008 (third) moved three places later.
    let m = moved.remove(2);
    moved.insert(5, m);
    std::fs::write(d.join("a.tarmac"), trace(&base())).unwrap();
    std::fs::write(d.join("b.tarmac"), trace(&moved)).unwrap();
    let args = ["a.tarmac", "b.tarmac", "--skip-time", "--context", "2", "--show", "2"];
    // Three places apart: not within a window of 2...
    let (code, out, err) = compare(&d, &[&args[..], &["-w", "2"]].concat());
    assert_eq!((code, err.as_str()), (Some(1), ""));
    assert_eq!(
        out,
        "different: 2 difference(s), 11 instructions matched\n\
         only in a.tarmac: line 3, not in b.tarmac (before b.tarmac line 3)\n\
         \x20 a.tarmac\n\
         \x20     line 1: 1 IT 00001000 d503201f O\n\
         \x20     line 2: 2 IT 00001004 d503201f O\n\
         \x20   > line 3: 3 IT 00001008 d503201f O\n\
         \x20     line 4: 4 IT 0000100c d503201f O\n\
         \x20     line 5: 5 IT 00001010 d503201f O\n\
         \x20 b.tarmac\n\
         \x20     line 1: 1 IT 00001000 d503201f O\n\
         \x20     line 2: 2 IT 00001004 d503201f O\n\
         \x20   > (none here)\n\
         \x20     line 3: 3 IT 0000100c d503201f O\n\
         \x20     line 4: 4 IT 00001010 d503201f O\n\
         only in b.tarmac: line 6, not in a.tarmac (before a.tarmac line 7)\n\
         \x20 a.tarmac\n\
         \x20     line 5: 5 IT 00001010 d503201f O\n\
         \x20     line 6: 6 IT 00001014 d503201f O\n\
         \x20   > (none here)\n\
         \x20     line 7: 7 IT 00001018 d503201f O\n\
         \x20     line 8: 8 IT 0000101c d503201f O\n\
         \x20 b.tarmac\n\
         \x20     line 4: 4 IT 00001010 d503201f O\n\
         \x20     line 5: 5 IT 00001014 d503201f O\n\
         \x20   > line 6: 6 IT 00001008 d503201f O\n\
         \x20     line 7: 7 IT 00001018 d503201f O\n\
         \x20     line 8: 8 IT 0000101c d503201f O\n"
    );
    // ...and within a window of 3.
    let (code, out, _) = compare(&d, &[&args[..], &["-w", "3"]].concat());
    assert_eq!((code, out.as_str()), (Some(0), "same: 12 instructions match\n"));
    // In order, a swap of neighbours is two changed instructions; -w 1 allows it.
    let mut swapped = base();
    swapped.swap(4, 5);
    std::fs::write(d.join("s.tarmac"), trace(&swapped)).unwrap();
    let (code, out, _) = compare(&d, &["a.tarmac", "s.tarmac", "--skip-time"]);
    assert_eq!(code, Some(1));
    assert!(
        out.starts_with("different: 2 difference(s), 10 instructions matched\n"),
        "{out}"
    );
    let (code, out, _) = compare(&d, &["a.tarmac", "s.tarmac", "--skip-time", "-w", "1"]);
    assert_eq!((code, out.as_str()), (Some(0), "same: 12 instructions match\n"));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_record_moved_500_places_differs_with_a_window_of_2() {
    let d = dir("far");
    let pcs: Vec<u64> = (0..1000).map(|k| 0x1000 + 4 * k).collect();
    let mut moved = pcs.clone();
    let m = moved.remove(10);
    moved.insert(510, m);
    std::fs::write(d.join("a.tarmac"), trace(&pcs)).unwrap();
    std::fs::write(d.join("b.tarmac"), trace(&moved)).unwrap();
    let (code, out, _) = compare(
        &d,
        &[
            "a.tarmac",
            "b.tarmac",
            "--skip-time",
            "-w",
            "2",
            "--context",
            "0",
            "--show",
            "2",
        ],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "different: 2 difference(s), 999 instructions matched\n\
         only in a.tarmac: line 11, not in b.tarmac (before b.tarmac line 11)\n\
         \x20 a.tarmac\n\
         \x20   > line 11: 11 IT 00001028 d503201f O\n\
         \x20 b.tarmac\n\
         \x20   > (none here)\n\
         only in b.tarmac: line 511, not in a.tarmac (before a.tarmac line 512)\n\
         \x20 a.tarmac\n\
         \x20   > (none here)\n\
         \x20 b.tarmac\n\
         \x20   > line 511: 511 IT 00001028 d503201f O\n"
    );
    // Moved 500 places: within a window of 500, not of 499.
    let (code, _, _) = compare(&d, &["a.tarmac", "b.tarmac", "--skip-time", "-w", "500"]);
    assert_eq!(code, Some(0));
    let (code, _, _) = compare(&d, &["a.tarmac", "b.tarmac", "--skip-time", "-w", "499"]);
    assert_eq!(code, Some(1));
    let (code, _, _) = compare(&d, &["a.tarmac", "b.tarmac", "--skip-time", "-w", "501"]);
    assert_eq!(code, Some(0));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn dropped_and_inserted_records_are_reported_at_their_instruction_with_both_sides() {
    let d = dir("dropins");
    let b = base();
    std::fs::write(d.join("a.tarmac"), trace(&b)).unwrap();
    std::fs::write(d.join("drop.tarmac"), trace(&[&b[..5], &b[6..]].concat())).unwrap();
    std::fs::write(d.join("ins.tarmac"), trace(&[&b[..5], &[0x2000], &b[5..]].concat())).unwrap();
    let dropped = "different: 1 difference(s), 11 instructions matched\n\
                   only in a.tarmac: line 6, not in drop.tarmac (before drop.tarmac line 6)\n\
                   \x20 a.tarmac\n\
                   \x20     line 4: 4 IT 0000100c d503201f O\n\
                   \x20     line 5: 5 IT 00001010 d503201f O\n\
                   \x20   > line 6: 6 IT 00001014 d503201f O\n\
                   \x20     line 7: 7 IT 00001018 d503201f O\n\
                   \x20     line 8: 8 IT 0000101c d503201f O\n\
                   \x20 drop.tarmac\n\
                   \x20     line 4: 4 IT 0000100c d503201f O\n\
                   \x20     line 5: 5 IT 00001010 d503201f O\n\
                   \x20   > (none here)\n\
                   \x20     line 6: 6 IT 00001018 d503201f O\n\
                   \x20     line 7: 7 IT 0000101c d503201f O\n";
    let inserted = "different: 1 difference(s), 12 instructions matched\n\
                    only in ins.tarmac: line 6, not in a.tarmac (before a.tarmac line 6)\n\
                    \x20 a.tarmac\n\
                    \x20     line 4: 4 IT 0000100c d503201f O\n\
                    \x20     line 5: 5 IT 00001010 d503201f O\n\
                    \x20   > (none here)\n\
                    \x20     line 6: 6 IT 00001014 d503201f O\n\
                    \x20     line 7: 7 IT 00001018 d503201f O\n\
                    \x20 ins.tarmac\n\
                    \x20     line 4: 4 IT 0000100c d503201f O\n\
                    \x20     line 5: 5 IT 00001010 d503201f O\n\
                    \x20   > line 6: 6 IT 00002000 d503201f O\n\
                    \x20     line 7: 7 IT 00001014 d503201f O\n\
                    \x20     line 8: 8 IT 00001018 d503201f O\n";
    // The same report, at the same instruction, in order and with windows.
    for w in ["0", "1", "2", "4", "64"] {
        let (code, out, _) = compare(
            &d,
            &["a.tarmac", "drop.tarmac", "--skip-time", "--context", "2", "-w", w],
        );
        assert_eq!((code, out.as_str()), (Some(1), dropped), "-w {w}");
        let (code, out, _) = compare(
            &d,
            &["a.tarmac", "ins.tarmac", "--skip-time", "--context", "2", "-w", w],
        );
        assert_eq!((code, out.as_str()), (Some(1), inserted), "-w {w}");
    }
    std::fs::remove_dir_all(&d).ok();
}

const REGS: &str = "\
1 clk IT (1) 00001000 d2800020 O EL1h_n : MOV x0,#1
1 clk R X0 0000000000000001
2 clk IT (2) 00001004 f9000020 O EL1h_n : STR x0,[x1]
2 clk MW8 00008000 0000000000000001
3 clk IT (3) 00001008 d2800041 O EL1h_n : MOV x1,#2
3 clk R X1 0000000000000002
3 clk R cpsr 600003c5
4 clk IT (4) 0000100c d503201f O EL1h_n : NOP
";

#[test]
fn registers_and_memory_are_compared_on_request() {
    let d = dir("regs");
    std::fs::write(d.join("a.tarmac"), REGS).unwrap();
    std::fs::write(
        d.join("reg.tarmac"),
        REGS.replace("R X1 0000000000000002", "R X1 0000000000000003"),
    )
    .unwrap();
    std::fs::write(d.join("mem.tarmac"), REGS.replace("MW8 00008000", "MW8 00008008")).unwrap();
    // The same writes in another order are the same.
    std::fs::write(
        d.join("order.tarmac"),
        REGS.replace(
            "3 clk R X1 0000000000000002\n3 clk R cpsr 600003c5\n",
            "3 clk R cpsr 600003c5\n3 clk R X1 0000000000000002\n",
        ),
    )
    .unwrap();
    let (code, out, _) = compare(&d, &["a.tarmac", "reg.tarmac", "--registers", "--context", "1"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "different: 1 difference(s), 4 instructions matched\n\
         registers differ: a.tarmac line 5, reg.tarmac line 5\n\
         \x20 a.tarmac\n\
         \x20     line 3: 2 IT 00001004 f9000020 O\n\
         \x20   > line 5: 3 IT 00001008 d2800041 O\n\
         \x20       line 6: R x1 0000000000000002\n\
         \x20     line 8: 4 IT 0000100c d503201f O\n\
         \x20 reg.tarmac\n\
         \x20     line 3: 2 IT 00001004 f9000020 O\n\
         \x20   > line 5: 3 IT 00001008 d2800041 O\n\
         \x20       line 6: R x1 0000000000000003\n\
         \x20     line 8: 4 IT 0000100c d503201f O\n"
    );
    // Not asked for: the instructions are the same.
    for args in [&["a.tarmac", "reg.tarmac"][..], &["a.tarmac", "reg.tarmac", "--memory"]] {
        let (code, out, _) = compare(&d, args);
        assert_eq!(
            (code, out.as_str()),
            (Some(0), "same: 4 instructions match\n"),
            "{args:?}"
        );
    }
    let (code, out, _) = compare(&d, &["a.tarmac", "mem.tarmac", "--memory", "--context", "1"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "different: 1 difference(s), 4 instructions matched\n\
         memory differs: a.tarmac line 3, mem.tarmac line 3\n\
         \x20 a.tarmac\n\
         \x20     line 1: 1 IT 00001000 d2800020 O\n\
         \x20   > line 3: 2 IT 00001004 f9000020 O\n\
         \x20       line 4: MW8 00008000 0000000000000001\n\
         \x20     line 5: 3 IT 00001008 d2800041 O\n\
         \x20 mem.tarmac\n\
         \x20     line 1: 1 IT 00001000 d2800020 O\n\
         \x20   > line 3: 2 IT 00001004 f9000020 O\n\
         \x20       line 4: MW8 00008008 0000000000000001\n\
         \x20     line 5: 3 IT 00001008 d2800041 O\n"
    );
    let (code, out, _) = compare(&d, &["a.tarmac", "mem.tarmac", "--registers"]);
    assert_eq!((code, out.as_str()), (Some(0), "same: 4 instructions match\n"));
    let (code, out, _) = compare(&d, &["a.tarmac", "order.tarmac", "--registers", "--memory"]);
    assert_eq!((code, out.as_str()), (Some(0), "same: 4 instructions match\n"));
    // A register only one trace writes differs too.
    std::fs::write(d.join("less.tarmac"), REGS.replace("3 clk R cpsr 600003c5\n", "")).unwrap();
    let (code, out, _) = compare(&d, &["a.tarmac", "less.tarmac", "--registers", "--context", "0"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "different: 1 difference(s), 4 instructions matched\n\
         registers differ: a.tarmac line 5, less.tarmac line 5\n\
         \x20 a.tarmac\n\
         \x20   > line 5: 3 IT 00001008 d2800041 O\n\
         \x20       line 7: R psr 600003c5\n\
         \x20 less.tarmac\n\
         \x20   > line 5: 3 IT 00001008 d2800041 O\n"
    );
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn exit_statuses_same_different_trouble() {
    let d = dir("status");
    std::fs::write(d.join("a.tarmac"), trace(&base())).unwrap();
    std::fs::write(d.join("other.tarmac"), trace(&[0x1000, 0x1004, 0x2000])).unwrap();
    std::fs::write(
        d.join("bad.tarmac"),
        format!("{}2 clk R X0 zz\n{}", trace(&[0x1000]), trace(&[0x1004])),
    )
    .unwrap();
    let (code, out, err) = compare(&d, &["a.tarmac", "a.tarmac"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(0), "same: 12 instructions match\n", "")
    );
    let (code, out, _) = compare(&d, &["a.tarmac", "other.tarmac", "--stop-first", "--context", "0"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        out,
        "different: stopped at the first difference (2 instructions matched)\n\
         changed: a.tarmac line 3, other.tarmac line 3\n\
         \x20 a.tarmac\n\
         \x20   > line 3: 3 IT 00001008 d503201f O\n\
         \x20 other.tarmac\n\
         \x20   > line 3: 3 IT 00002000 d503201f O\n"
    );
    // Trouble: a file that cannot be read, a line that does not parse
    // (named with its file and line), bad usage.
    let (code, out, err) = compare(&d, &["a.tarmac", "missing.tarmac"]);
    assert_eq!((code, out.as_str()), (Some(2), ""));
    assert!(err.starts_with("tarmac: missing.tarmac: "), "{err}");
    let (code, out, err) = compare(&d, &["a.tarmac", "bad.tarmac"]);
    assert_eq!((code, out.as_str()), (Some(2), ""));
    assert!(
        err.starts_with("tarmac: bad.tarmac: line 2, column 12: expected register contents in hex"),
        "{err}"
    );
    let (code, _, err) = compare(&d, &["bad.tarmac", "a.tarmac"]);
    assert_eq!(code, Some(2));
    assert!(err.starts_with("tarmac: bad.tarmac: line 2, column 12: "), "{err}");
    let (code, _, err) = compare(&d, &["a.tarmac", "a.tarmac", "-w", "1048576"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--window"), "{err}");
    // A cut last line ends its trace with a warning, as in the other subcommands.
    std::fs::write(d.join("cut.tarmac"), format!("{}13 clk IT (13) 0000", trace(&base()))).unwrap();
    let (code, out, err) = compare(&d, &["a.tarmac", "cut.tarmac"]);
    assert_eq!((code, out.as_str()), (Some(0), "same: 12 instructions match\n"));
    assert!(err.starts_with("tarmac: warning: cut.tarmac: line 13, "), "{err}");
    std::fs::remove_dir_all(&d).ok();
}
