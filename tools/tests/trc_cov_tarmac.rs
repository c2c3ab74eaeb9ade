//! `trc_cov` on Tarmac traces: the coverage of a qemu run's Tarmac file
//! (formats/tarmac/tests/fixtures, made by make.sh) equals the coverage of the
//! CoreSight snapshot `trc_gen -tarmac` encodes from it, for A64, A32 and
//! T32 code and several protocols; its executed instructions are the
//! Tarmac's own; bad Tarmac input is an error naming the line.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().unwrap()
}

fn trc_cov(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_trc_cov"), args)
}

fn ok(o: Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tarmac/tests/fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trc_cov_tarmac_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The entry lines of a `dump` (the Info section holds the date).
fn entries(dump: &str) -> Vec<String> {
    dump.lines().filter(|l| l.contains(" ?: ")).map(String::from).collect()
}

/// `N covered` of the total summary (the report's last lines).
fn total_covered(report: &str) -> usize {
    let l = report
        .lines()
        .rev()
        .find(|l| l.ends_with(" covered") && !l.contains("fully") && !l.contains("partially"))
        .unwrap();
    l.trim().split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn tarmac_coverage_equals_the_encoded_snapshots_coverage() {
    let cases = [
        ("prog64", "etmv4"),
        ("prog64", "ete"),
        ("prog32", "ptm"),
        ("prog32", "etmv4"),
        ("progt32", "ptm"),
        ("progt32", "etmv3"),
    ];
    for (prog, protocol) in cases {
        let (tarmac, elf) = (fixture(&format!("{prog}.tarmac")), fixture(&format!("{prog}.elf")));
        let snap = tmp(&format!("{prog}-{protocol}"));
        let _ = std::fs::remove_dir_all(&snap);
        ok(run(
            env!("CARGO_BIN_EXE_trc_gen"),
            &[
                "-protocol",
                protocol,
                "-tarmac",
                &tarmac,
                "-elf",
                &elf,
                "-seed",
                "7",
                "-out",
                snap.to_str().unwrap(),
            ],
        ));
        let snap = snap.to_str().unwrap();
        let what = format!("{prog} {protocol}");

        // Annotated disassembly (every instruction's mark) and summaries.
        let from_tarmac = ok(trc_cov(&["coverage", "--elf", &elf, "--tarmac", &tarmac]));
        let from_snapshot = ok(trc_cov(&["coverage", "--elf", &elf, "--snapshot", snap]));
        assert_eq!(from_tarmac, from_snapshot, "{what}");
        // Not a vacuous agreement: branches went both ways, some partially.
        assert!(
            from_tarmac.lines().any(|l| l.contains(" >:  ") || l.contains(" v:  ")),
            "{what}: no partially covered branch\n{from_tarmac}"
        );
        let total: Vec<&str> = from_tarmac.lines().rev().take(7).collect();
        assert!(
            !total[3].starts_with("0 ") && !total[1].trim().starts_with("0 "),
            "{what}: {total:?}"
        );
        let summary = ok(trc_cov(&["coverage", "--summary", "--elf", &elf, "--tarmac", &tarmac]));
        assert_eq!(
            summary,
            ok(trc_cov(&["coverage", "--summary", "--elf", &elf, "--snapshot", snap])),
            "{what}"
        );

        // The instructions covered are the distinct addresses the Tarmac ran.
        let text = std::fs::read_to_string(&tarmac).unwrap();
        let pcs: HashSet<&str> = text.lines().filter_map(|l| l.split_whitespace().nth(4)).collect();
        assert_eq!(total_covered(&from_tarmac), pcs.len(), "{what}");

        // Export: the same flat-trace entries, in the same order.
        if protocol != "etmv3" {
            // (The ETMv3 decoder gives a range per instruction, so its entries differ while its coverage does not.)
            let (t, s) = (
                tmp(&format!("{prog}-{protocol}-t.trace")),
                tmp(&format!("{prog}-{protocol}-s.trace")),
            );
            ok(trc_cov(&["export", "--tarmac", &tarmac, "-o", t.to_str().unwrap()]));
            ok(trc_cov(&["export", "--snapshot", snap, "-o", s.to_str().unwrap()]));
            let dt = entries(&ok(trc_cov(&["dump", t.to_str().unwrap()])));
            assert!(dt.len() > 10, "{what}");
            assert_eq!(dt, entries(&ok(trc_cov(&["dump", s.to_str().unwrap()]))), "{what}");
            // And coverage read back from the exported file is the Tarmac's.
            assert_eq!(
                ok(trc_cov(&["coverage", "--elf", &elf, t.to_str().unwrap()])),
                from_tarmac,
                "{what}"
            );
        }
    }
}

/// The AArch64 program of tests/fixtures/cov (with DWARF) as a Tarmac
/// trace, written from its executed addresses (`prog-a64.pcs`, from qemu)
/// and its code: every line `IT`, as A64 has no condition-failed
/// instructions (a B.cond's way shows in the next address). Its coverage
/// is the objdump-based oracle's, and its coverage and lcov tracefile are
/// those of the gnatcov trace of the same run.
#[test]
fn tarmac_of_a_real_run_gives_the_oracles_coverage_and_lines() {
    use coresight_gnatcov::coverage::CodeImage;
    let cov = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cov");
    let (elf, trace) = (cov.join("prog-a64.elf"), cov.join("prog-a64.trace"));
    let img = CodeImage::from_elf(&std::fs::read(&elf).unwrap()).unwrap();
    let mut tarmac = String::new();
    for (n, l) in std::fs::read_to_string(cov.join("prog-a64.pcs"))
        .unwrap()
        .lines()
        .enumerate()
    {
        let pc = u64::from_str_radix(l, 16).unwrap();
        let mut w = [0u8; 4];
        assert_eq!(img.read(pc, &mut w), 4);
        tarmac += &format!(
            "{} clk IT ({}) {pc:08x} {:08x} O EL1h_n : insn\n",
            n + 1,
            n + 1,
            u32::from_le_bytes(w)
        );
    }
    let t = tmp("prog-a64.tarmac");
    std::fs::write(&t, tarmac).unwrap();
    let (elf, trace, t) = (elf.to_str().unwrap(), trace.to_str().unwrap(), t.to_str().unwrap());
    let summary = ok(trc_cov(&["coverage", "--summary", "--elf", elf, "--tarmac", t]));
    assert_eq!(summary, std::fs::read_to_string(cov.join("prog-a64.summary")).unwrap());
    assert_eq!(
        ok(trc_cov(&["coverage", "--elf", elf, "--tarmac", t])),
        ok(trc_cov(&["coverage", "--elf", elf, trace]))
    );
    let lcov = ok(trc_cov(&["lcov", "--elf", elf, "--tarmac", t]));
    assert!(lcov.contains("\nDA:") && lcov.contains("\nBRDA:"), "{lcov}");
    assert_eq!(lcov, ok(trc_cov(&["lcov", "--elf", elf, trace])));
}

#[test]
fn bad_tarmac_names_the_file_and_line() {
    let elf = fixture("prog64.elf");
    let bad = tmp("bad.tarmac");
    std::fs::write(
        &bad,
        "1 clk IT (1) 00001000 d503201f O EL0t_n : nop\n\n3 clk IT (3) 0000100g d503201f O EL0t_n : nop\n",
    )
    .unwrap();
    let b = bad.to_str().unwrap();
    for cmd in ["coverage", "lcov"] {
        let elf = if cmd == "lcov" {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/cov/prog-a64.elf")
                .to_string_lossy()
                .into_owned()
        } else {
            elf.clone()
        };
        let o = trc_cov(&[cmd, "--elf", &elf, "--tarmac", b]);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!(
                "trc_cov: {b}: line 3, column 14: expected a hex instruction address: \"3 clk IT (3) 0000100g d503201f O EL0t_n : nop\"\n"
            )
        );
        assert!(o.stdout.is_empty());
    }
    let o = trc_cov(&["export", "--tarmac", b, "-o", tmp("bad.trace").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains(": line 3, column 14: expected a hex instruction address"));
    // A snapshot and a Tarmac trace are two sources: export takes one.
    let o = trc_cov(&["export", "--tarmac", b, "--snapshot", "x", "-o", "y"]);
    assert_eq!(o.status.code(), Some(2));
    // A Tarmac trace with no instructions.
    std::fs::write(&bad, "1 clk R X0 0000000000000001\n").unwrap();
    let o = trc_cov(&["export", "--tarmac", b, "-o", tmp("none.trace").to_str().unwrap()]);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned()),
        (Some(1), format!("trc_cov: {b}: no instructions were traced\n"))
    );
}

/// Cortex-M style Tarmac gives no state letter: `--implicit-thumb` reads it
/// as T32; without it, the first line is an error.
#[test]
fn implicit_thumb_reads_stateless_lines() {
    let (tarmac, elf) = (fixture("progt32.tarmac"), fixture("progt32.elf"));
    let stateless = tmp("stateless.tarmac");
    let text = std::fs::read_to_string(&tarmac).unwrap();
    assert!(text.lines().all(|l| l.contains(" T usr_n ")));
    std::fs::write(&stateless, text.replace(" T usr_n ", " usr_n ")).unwrap();
    let s = stateless.to_str().unwrap();
    let o = trc_cov(&["coverage", "--elf", &elf, "--tarmac", s]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with(&format!(
        "trc_cov: {s}: line 1, column 28: expected the instruction set state (A, T, O or R)"
    )));
    assert_eq!(
        ok(trc_cov(&["coverage", "--implicit-thumb", "--elf", &elf, "--tarmac", s])),
        ok(trc_cov(&["coverage", "--elf", &elf, "--tarmac", &tarmac]))
    );
}

/// The Fast Models traces of Arm's Tarmac Trace Utilities (in ../shared,
/// when there): coverage of each equals that of the snapshot `trc_gen`
/// encodes from it.
#[test]
#[ignore = "needs ../shared/corpus/tarmac (Fast Models traces); .ci/run runs it with --ignored"]
fn fast_models_traces_agree_with_their_encoded_snapshots() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/tarmac");
    assert!(
        corpus.join("quicksort.tarmac").exists(),
        "{}: not present (this test needs ../shared)",
        corpus.display()
    );
    for (prog, protocol) in [("quicksort", "etmv4"), ("calltest32", "ptm"), ("calltest64", "ete")] {
        let tarmac = corpus.join(format!("{prog}.tarmac")).to_string_lossy().into_owned();
        let elf = corpus.join(format!("{prog}.elf")).to_string_lossy().into_owned();
        let snap = tmp(&format!("fm-{prog}"));
        let _ = std::fs::remove_dir_all(&snap);
        ok(run(
            env!("CARGO_BIN_EXE_trc_gen"),
            &[
                "-protocol",
                protocol,
                "-tarmac",
                &tarmac,
                "-elf",
                &elf,
                "-seed",
                "1",
                "-out",
                snap.to_str().unwrap(),
            ],
        ));
        let from_tarmac = ok(trc_cov(&["coverage", "--elf", &elf, "--tarmac", &tarmac]));
        assert!(total_covered(&from_tarmac) > 15, "{prog}");
        assert_eq!(
            from_tarmac,
            ok(trc_cov(&[
                "coverage",
                "--elf",
                &elf,
                "--snapshot",
                snap.to_str().unwrap()
            ])),
            "{prog}"
        );
    }
}
