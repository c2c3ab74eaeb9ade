//! trc_regress on small libraries made here from generated snapshots: a
//! clean run passes, a flipped trace bit fails with the first differing
//! line shown both ways, xz expected listings are read, and setup mistakes
//! give errors naming the file and line.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;

use coresight_generator::{GenOptions, generate};
use coresight_tools::regress::{
    Case, RunOptions, Verdict, compare_texts, discover_library, load_case_list, main_with_args, run_case,
};

fn write_snapshot(dir: &Path, seed: u64) {
    let g = generate(&GenOptions {
        seed,
        length: 60,
        ..GenOptions::default()
    });
    g.spec.write_to(dir).unwrap();
}

/// Runs the program's entry point; returns (status, report).
fn trc_regress(args: &[&str]) -> (i32, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    let status = main_with_args(&args, &mut out);
    (status, String::from_utf8(out).unwrap())
}

fn last_line(report: &str) -> &str {
    report.trim_end_matches('\n').lines().last().unwrap_or("")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Flips one bit in the middle of a snapshot's trace buffer.
fn flip_trace_bit(snapshot: &Path) {
    let path = snapshot.join("trace.bin");
    let mut data = fs::read(&path).unwrap();
    assert!(data.len() > 64, "generated buffer too small: {} bytes", data.len());
    let i = data.len() / 2;
    data[i] ^= 0x04;
    fs::write(&path, data).unwrap();
}

fn xz_compress(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut w = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(6)).unwrap();
    w.write_all(data).unwrap();
    w.finish().unwrap()
}

#[test]
fn a_library_is_blessed_then_passes_then_a_flipped_bit_fails() {
    let root = common::temp_dir("regress-library");
    let lib = root.join("lib");
    write_snapshot(&lib.join("gen1"), 11);

    // Without an expected listing nothing runs, and the report says so.
    let (status, report) = trc_regress(&[s(&lib)]);
    assert_eq!(status, 0, "{report}");
    assert!(
        report.contains("1 snapshot(s) without an expected listing skipped"),
        "{report}"
    );
    assert_eq!(last_line(&report), "0 passed, 0 failed");

    // Write mode makes it, with the default arguments.
    let (status, report) = trc_regress(&["--write", s(&lib)]);
    assert_eq!(status, 0, "{report}");
    assert!(report.contains("1 expected listing(s) written"), "{report}");
    let expected = fs::read_to_string(lib.join("gen1/expected.ppl")).unwrap();
    assert!(
        expected.contains("Test Command Line:-\ntrc_pkt_lister   -ss_dir  ./  -decode  -no_time_print  \n"),
        "{expected}"
    );
    assert!(
        expected.contains("OCSD_GEN_TRC_ELEM_INSTR_RANGE"),
        "not a decoded listing:\n{expected}"
    );

    // A clean run passes; the summary and JSON files say so.
    let tsv = root.join("summary.tsv");
    let json = root.join("report.json");
    let (status, report) = trc_regress(&[s(&lib), "--summary-tsv", s(&tsv), "--json", s(&json)]);
    assert_eq!(status, 0, "{report}");
    assert!(
        report.lines().any(|l| l.starts_with("gen1 ") && l.contains(" PASS ")),
        "{report}"
    );
    assert_eq!(last_line(&report), "1 passed, 0 failed");
    assert_eq!(fs::read_to_string(&tsv).unwrap(), "gen1\tPASS\n");
    assert!(fs::read_to_string(&json).unwrap().contains("\"result\": \"PASS\""));

    // Writing again changes nothing.
    let (status, report) = trc_regress(&["--write", s(&lib)]);
    assert_eq!(status, 0, "{report}");
    assert!(report.contains("0 expected listing(s) written"), "{report}");

    flip_trace_bit(&lib.join("gen1"));

    // The library API: the case fails at a line shown both ways.
    let found = discover_library(&lib, false).unwrap();
    assert_eq!(found.cases.len(), 1);
    let case = &found.cases[0];
    assert_eq!(case.name, "gen1");
    assert_eq!(case.args, vec!["-ss_dir", "./", "-decode", "-no_time_print"]);
    assert_eq!(
        fs::canonicalize(&case.run_dir).unwrap(),
        fs::canonicalize(lib.join("gen1")).unwrap()
    );
    let keep = root.join("kept");
    fs::create_dir_all(&keep).unwrap();
    let o = run_case(
        case,
        &RunOptions {
            context: 2,
            keep: Some(keep.clone()),
            write: false,
        },
    );
    assert_eq!(o.verdict, Verdict::Fail, "{o:?}");
    let c = o.comparison.as_ref().unwrap();
    let d = c.first_difference.as_ref().unwrap();
    let (e, g) = (d.expected.as_deref().unwrap(), d.got.as_deref().unwrap());
    assert_ne!(e, g);
    assert!(d.line > 1 && c.prefix > 0.0 && c.prefix < 1.0, "{c:?}");
    assert!(c.overlap > 0.5 && c.overlap < 1.0, "{c:?}");
    // The kept listing is what the lister produced, and it differs there.
    let kept = fs::read_to_string(keep.join("gen1.ppl")).unwrap();
    assert!(!compare_texts(&expected, &kept, 0).matches());
    assert_eq!(
        compare_texts(&expected, &kept, 0)
            .first_difference
            .unwrap()
            .got
            .as_deref(),
        Some(g)
    );

    // The program reports it, with both versions, and exits 1.
    let (status, report) = trc_regress(&[s(&lib), "--summary-tsv", s(&tsv)]);
    assert_eq!(status, 1, "{report}");
    assert!(
        report.contains(&format!("first difference at listing line {}", d.line)),
        "{report}"
    );
    // With context, lines are shown up to 200 characters, as the conformance runner does.
    let clip = |l: &str| l.chars().take(200).collect::<String>();
    assert!(report.contains(&format!("    expected > {}\n", clip(e))), "{report}");
    assert!(report.contains(&format!("    got      > {}\n", clip(g))), "{report}");
    assert_eq!(last_line(&report), "0 passed, 1 failed");
    assert_eq!(fs::read_to_string(&tsv).unwrap(), "gen1\tFAIL\n");
}

#[test]
fn a_case_list_reads_xz_expected_listings_and_gives_each_case_its_environment() {
    let root = common::temp_dir("regress-caselist");
    write_snapshot(&root.join("snapshots/s1"), 21);
    fs::write(
        root.join("cases.tsv"),
        "# case\targs\n\
         plain\t-ss_dir ./snapshots/s1 -decode -no_time_print\n\
         \n\
         limited\tOPENCSD_INSTR_RANGE_LIMIT=2 -ss_dir ./snapshots/s1 -decode -no_time_print\n",
    )
    .unwrap();

    let (status, report) = trc_regress(&["--bless", s(&root)]);
    assert_eq!(status, 0, "{report}");
    assert!(report.contains("2 expected listing(s) written"), "{report}");
    let plain = fs::read_to_string(root.join("expected/plain.ppl")).unwrap();
    let limited = fs::read_to_string(root.join("expected/limited.ppl")).unwrap();
    assert!(
        plain.contains("Trace Packet Lister : reading snapshot from path ./snapshots/s1\n"),
        "{plain}"
    );
    // The range limit reached the lister through the case's environment.
    assert_ne!(plain, limited);
    assert!(limited.contains("OCSD_ERR_I_RANGE_LIMIT_OVERRUN"), "{limited}");
    assert_eq!(
        std::env::var("OPENCSD_INSTR_RANGE_LIMIT").ok(),
        None,
        "the process environment was changed"
    );

    // Replace the plain expected listing by an xz one: still passes.
    fs::write(root.join("expected/plain.ppl.xz"), xz_compress(plain.as_bytes())).unwrap();
    fs::remove_file(root.join("expected/plain.ppl")).unwrap();
    let (status, report) = trc_regress(&[s(&root), "--only", "^plain$"]);
    assert_eq!(status, 0, "{report}");
    assert_eq!(last_line(&report), "1 passed, 0 failed");

    // An xz expected listing with one line changed fails at that line.
    let lines: Vec<&str> = plain.split('\n').collect();
    let at = lines.iter().position(|l| l.starts_with("Idx:")).unwrap() + 5;
    let mut changed = lines.clone();
    let edited = format!("{} (edited)", lines[at]);
    changed[at] = &edited;
    fs::write(
        root.join("expected/plain.ppl.xz"),
        xz_compress(changed.join("\n").as_bytes()),
    )
    .unwrap();
    let cases = load_case_list(&root).unwrap();
    assert_eq!(
        cases.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        vec!["plain", "limited"]
    );
    assert_eq!(
        cases[1].env,
        vec![("OPENCSD_INSTR_RANGE_LIMIT".to_string(), "2".to_string())]
    );
    let o = run_case(
        &cases[0],
        &RunOptions {
            context: 1,
            ..Default::default()
        },
    );
    assert_eq!(o.verdict, Verdict::Fail);
    let d = o.comparison.as_ref().unwrap().first_difference.clone().unwrap();
    let banner = lines.iter().position(|l| l.starts_with("Test Command Line:-")).unwrap() + 2;
    assert_eq!(d.line, at - banner + 1);
    assert_eq!(d.expected.as_deref(), Some(edited.as_str()));
    assert_eq!(d.got.as_deref(), Some(lines[at]));

    // A damaged xz file fails its case with a note naming it.
    fs::write(root.join("expected/plain.ppl.xz"), b"\xfd7zXZ\0 not really xz").unwrap();
    let (status, report) = trc_regress(&[s(&root)]);
    assert_eq!(status, 1, "{report}");
    assert!(report.contains("plain.ppl.xz"), "{report}");
    assert_eq!(last_line(&report), "1 passed, 1 failed");

    // Writing replaces the xz listing by a plain one.
    let (status, report) = trc_regress(&[s(&root), "--write", "--only", "plain"]);
    assert_eq!(status, 0, "{report}");
    assert!(!root.join("expected/plain.ppl.xz").exists());
    assert_eq!(fs::read_to_string(root.join("expected/plain.ppl")).unwrap(), plain);
}

#[test]
fn setup_mistakes_are_named_by_file_and_line() {
    let root = common::temp_dir("regress-setup");
    fs::write(
        root.join("cases.tsv"),
        "# header\nok\t-ss_dir ./snapshots/none -decode\nbad line without a tab\n",
    )
    .unwrap();
    let (status, report) = trc_regress(&[s(&root)]);
    assert_eq!(status, 1, "a malformed case list is a failure of the input: {report}");
    assert!(
        report.contains(&format!("{}:3: no TAB", root.join("cases.tsv").display())),
        "{report}"
    );

    fs::write(root.join("cases.tsv"), "a\t-decode\na\t-decode\n").unwrap();
    let (status, report) = trc_regress(&[s(&root)]);
    assert_eq!(status, 1);
    assert!(
        report.contains("cases.tsv:2: case 'a' is already defined on line 1"),
        "{report}"
    );

    // A missing snapshot and a missing expected listing fail the case, and say why.
    fs::write(root.join("cases.tsv"), "gone\t-ss_dir ./snapshots/none -decode\n").unwrap();
    let (status, report) = trc_regress(&[s(&root)]);
    assert_eq!(status, 1, "{report}");
    assert!(report.contains("snapshot folder ./snapshots/none"), "{report}");
    assert!(report.contains("no expected listing: neither"), "{report}");
    assert!(report.contains("expected/gone.ppl"), "{report}");
    assert_eq!(last_line(&report), "0 passed, 1 failed");

    // --cases on a folder without cases.tsv, a library without snapshots.
    let empty = root.join("empty");
    fs::create_dir_all(&empty).unwrap();
    let (status, report) = trc_regress(&["--cases", s(&empty)]);
    assert_eq!(status, 1);
    assert!(report.contains("cases.tsv: cannot read"), "{report}");
    let (status, report) = trc_regress(&[s(&empty)]);
    assert_eq!(status, 1);
    assert!(report.contains("no snapshot"), "{report}");
    let (status, report) = trc_regress(&[s(&root.join("nowhere"))]);
    assert_eq!(status, 1, "{report}");
    // Bad usage.
    let (status, _) = trc_regress(&[s(&root), "--only", "(unclosed"]);
    assert_eq!(status, 2);
}

#[test]
fn a_library_listing_recorded_from_another_folder_runs_from_that_folder() {
    let root = common::temp_dir("regress-recorded");
    let snap = root.join("lib/group/snap");
    write_snapshot(&snap, 31);
    // A listing made from the library folder, as `-ss_dir ./group/snap`.
    let made = Case {
        name: "made".into(),
        run_dir: root.join("lib"),
        args: ["-ss_dir", "./group/snap", "-decode", "-no_time_print"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        env: Vec::new(),
        expected: snap.join(coresight_tools::regress::LIBRARY_EXPECTED),
        origin: "test".into(),
        warnings: Vec::new(),
        problem: None,
    };
    assert_eq!(
        run_case(
            &made,
            &RunOptions {
                write: true,
                ..Default::default()
            }
        )
        .verdict,
        Verdict::Wrote
    );
    let listing = fs::read_to_string(&made.expected).unwrap();
    assert!(listing.contains("reading snapshot from path ./group/snap\n"));

    // Found from the library (or from any folder above it), it runs from
    // the folder the recorded path starts at, and passes.
    for top in [root.join("lib"), root.clone()] {
        let found = discover_library(&top, false).unwrap();
        assert_eq!(found.cases.len(), 1);
        let case = &found.cases[0];
        assert_eq!(case.args, made.args);
        assert_eq!(
            fs::canonicalize(&case.run_dir).unwrap(),
            fs::canonicalize(root.join("lib")).unwrap()
        );
        assert!(case.warnings.is_empty(), "{:?}", case.warnings);
        assert_eq!(run_case(case, &RunOptions::default()).verdict, Verdict::Pass);
    }
    assert_eq!(discover_library(&root, false).unwrap().cases[0].name, "lib/group/snap");

    // A recorded path that leads nowhere: run from the snapshot, warn, and
    // fail on the snapshot path line until rewritten.
    fs::write(&made.expected, listing.replace("./group/snap", "./moved/away")).unwrap();
    let found = discover_library(&root, false).unwrap();
    let case = &found.cases[0];
    assert_eq!(case.args[..2], ["-ss_dir".to_string(), "./".to_string()]);
    assert!(
        case.warnings[0].contains("'-ss_dir ./moved/away' does not lead to this snapshot"),
        "{:?}",
        case.warnings
    );
    let o = run_case(case, &RunOptions::default());
    assert_eq!(o.verdict, Verdict::Fail);
    let d = o.comparison.unwrap().first_difference.unwrap();
    assert_eq!(
        d.expected.as_deref(),
        Some("Trace Packet Lister : reading snapshot from path ./moved/away")
    );
    assert_eq!(
        d.got.as_deref(),
        Some("Trace Packet Lister : reading snapshot from path ./")
    );
    let (status, report) = trc_regress(&["--write", s(&root)]);
    assert_eq!(status, 0, "{report}");
    let (status, report) = trc_regress(&[s(&root)]);
    assert_eq!(status, 0, "{report}");
    assert!(!report.contains("does not lead"), "{report}");
}

#[test]
fn usage_and_help() {
    let (status, report) = trc_regress(&["--help"]);
    assert_eq!(status, 0);
    assert!(
        report.starts_with("trc_regress:") && report.contains("--summary-tsv FILE"),
        "{report}"
    );
    let (status, report) = trc_regress(&[]);
    assert_eq!(status, 2);
    assert!(report.contains("give the folder"), "{report}");
}
