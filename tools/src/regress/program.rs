//! The `trc_regress` program: its command line, the report (a table row
//! per case, the first difference) and the JSON results.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::value::RawValue;

use super::{
    CASE_LIST, Case, Outcome, RunOptions, SetupError, Verdict, absolute, discover_library, load_case_list, run_case,
};

/// The `--only` filter: a regular expression (`regex-lite` syntax, Perl
/// style as Python's `re`) searched anywhere in the case name. The error
/// names the pattern and says what is wrong.
pub fn name_filter(src: &str) -> Result<regex_lite::Regex, String> {
    regex_lite::Regex::new(src).map_err(|e| format!("bad pattern '{src}': {e}"))
}

/// `trc_regress --help`.
pub const USAGE: &str = "\
trc_regress: decode a set of snapshots with the lister (in-process) and
compare each listing with its expected listing, as the conformance runner
does.

Usage: trc_regress [OPTIONS] DIR

DIR is either
  a case list: a folder holding cases.tsv (one case a line: name, TAB, the
    lister arguments; NAME=VALUE words are environment settings for the
    case; '#' lines are comments) and expected/<case>.ppl.xz or
    expected/<case>.ppl. Cases run from DIR.
  a snapshot library (any other folder): every folder under it holding a
    snapshot.ini and an expected.ppl (or expected.ppl.xz) beside it is a
    case. Its lister arguments are those recorded on the expected listing's
    'Test Command Line:-' line (output options dropped), by default
    '-ss_dir ./ -decode -no_time_print'; the lister runs from the folder
    above the snapshot from which the recorded -ss_dir leads to it.

A listing matches when its lines after the banner (up to and including the
line after 'Test Command Line:-') equal the expected ones. 'trace' compares
the 'Idx:' lines only, 'rest' the others; 'prefix' is the share of expected
lines matched before the first difference, 'overlap' the share of lines both
hold, order ignored. The last line printed is 'N passed, M failed'.

Exit status: 0 every case passed; 1 a case failed, or DIR, its case list or
a file to write could not be read or written (or the case list is
malformed); 2 bad usage. Errors go to standard error.

Options:
  --cases            DIR is a case list (default: when DIR/cases.tsv exists)
  --library          DIR is a snapshot library
  --only PATTERN     run only the cases whose name matches PATTERN, a
                     regular expression searched anywhere in the name
                     (as Python's re.search: . [] \\d \\w \\s ^ $ ( ) | * + ? {m,n})
  --keep DIR         keep each produced listing as DIR/<case>.ppl ('/' in
                     library case names becomes '__')
  --diff N           show N lines of context around the first difference
                     (default 3)
  --write, --bless   (re)write the expected listing of every case whose
                     listing differs (or has none) from what the lister now
                     produces: a plain .ppl (expected/<case>.ppl, or
                     expected.ppl beside the snapshot), removing an .xz one;
                     in a library, snapshots without one get one too
  --summary-tsv FILE write 'case<TAB>PASS|FAIL' for each case
  --json FILE        write the results as JSON
  -h, --help         this text
  -V, --version      print the version

Environment: each case sees its own NAME=VALUE settings, then the process
environment (OPENCSD_INSTR_RANGE_LIMIT, OPENCSD_ERR_ON_AA64_BAD_OPCODE).
";

/// The most context lines `--diff` takes.
pub const MAX_CONTEXT: usize = 100_000;

/// Which kind of folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolderKind {
    Auto,
    CaseList,
    Library,
}

/// Parsed command line.
#[derive(Clone, Debug)]
pub struct Cli {
    pub dir: PathBuf,
    pub kind: FolderKind,
    pub only: Option<regex_lite::Regex>,
    pub run: RunOptions,
    pub summary_tsv: Option<PathBuf>,
    pub json: Option<PathBuf>,
}

/// The options as clap reads them; `--help` prints [`USAGE`].
#[derive(clap::Parser, Debug)]
#[command(name = "trc_regress", version, override_help = USAGE)]
struct Args {
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The last of --cases and --library counts.
    #[arg(long, overrides_with = "library")]
    cases: bool,
    #[arg(long, overrides_with = "cases")]
    library: bool,
    #[arg(long, value_name = "PATTERN", value_parser = name_filter)]
    only: Option<regex_lite::Regex>,
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = parse_context)]
    diff: usize,
    #[arg(long, alias = "bless")]
    write: bool,
    #[arg(long, value_name = "FILE")]
    summary_tsv: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse_context(v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|&n| n <= MAX_CONTEXT)
        .ok_or_else(|| format!("--diff wants a number of lines up to {MAX_CONTEXT}, not '{v}'"))
}

/// What the command line asks for.
#[derive(Clone, Debug)]
pub enum Parsed {
    /// A run.
    Run(Cli),
    /// Print this text (`--help`, `--version`) and exit 0.
    Show(String),
}

/// Parses the arguments (without the program name). Errors are the
/// message to print (without the program name).
pub fn parse_cli(args: &[String]) -> Result<Parsed, String> {
    use clap::Parser;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    // `-help` was accepted before; clap would read it as -h -e -l -p.
    let args = args.iter().map(|a| if a == "-help" { "--help" } else { a.as_str() });
    let a = match Args::try_parse_from(std::iter::once("trc_regress").chain(args)) {
        Ok(a) => a,
        Err(e) => {
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Ok(Parsed::Show(e.render().to_string())),
                ErrorKind::UnknownArgument => match e.get(ContextKind::InvalidArg) {
                    Some(ContextValue::String(arg)) if arg.starts_with('-') => Err(format!("unknown option {arg}")),
                    _ => Err("give one folder".into()),
                },
                // The value parsers' own message.
                ErrorKind::ValueValidation if std::error::Error::source(&e).is_some() => {
                    Err(std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default())
                }
                // clap's own words, first line, without its `error: `.
                _ => {
                    let text = e.render().to_string();
                    let first = text.lines().next().unwrap_or_default();
                    Err(first.strip_prefix("error: ").unwrap_or(first).to_string())
                }
            };
        }
    };
    let dir = a
        .dir
        .ok_or("give the folder to run (a case list or a snapshot library)")?;
    let kind = match (a.cases, a.library) {
        (true, _) => FolderKind::CaseList,
        (_, true) => FolderKind::Library,
        _ => FolderKind::Auto,
    };
    Ok(Parsed::Run(Cli {
        dir: absolute(&dir),
        kind,
        only: a.only,
        run: RunOptions {
            context: a.diff,
            keep: a.keep.as_deref().map(absolute),
            write: a.write,
        },
        summary_tsv: a.summary_tsv.as_deref().map(absolute),
        json: a.json.as_deref().map(absolute),
    }))
}

/// The first difference in the JSON results.
#[derive(serde::Serialize)]
struct JsonDifference<'a> {
    line: usize,
    expected: &'a Option<String>,
    got: &'a Option<String>,
}

/// One case in the JSON results; the comparison's fields are there when
/// an expected listing was read.
#[derive(serde::Serialize)]
struct JsonOutcome<'a> {
    case: &'a str,
    result: &'static str,
    seconds: Box<RawValue>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    comparison: Option<JsonComparison<'a>>,
    notes: &'a [String],
}

#[derive(serde::Serialize)]
struct JsonComparison<'a> {
    trace_same: bool,
    rest_same: bool,
    prefix: Box<RawValue>,
    overlap: Box<RawValue>,
    expected_lines: usize,
    got_lines: usize,
    first_difference: Option<JsonDifference<'a>>,
}

/// A number written with `digits` decimals, as the report gives it.
fn fixed(x: f64, digits: usize) -> Box<RawValue> {
    let text = if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "null".into()
    };
    // A finite number in decimal notation is valid JSON.
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The layout of the results file: one case a line, each object on one
/// line with `", "` and `": "` between its parts.
#[derive(Default)]
struct OneCaseALine {
    depth: usize,
    any: bool,
}

impl serde_json::ser::Formatter for OneCaseALine {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        w.write_all(if self.depth == 1 { b"[\n" } else { b"[" })
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        w.write_all(if self.depth == 0 && self.any { b"\n]" } else { b"]" })
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if self.depth == 1 {
            self.any = true;
            w.write_all(if first { b"  " } else { b",\n  " })
        } else if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// The results as a JSON array.
pub fn outcomes_json(outcomes: &[Outcome]) -> String {
    let items: Vec<JsonOutcome> = outcomes
        .iter()
        .map(|o| JsonOutcome {
            case: &o.name,
            result: o.verdict.label(),
            seconds: fixed(o.seconds, 3),
            comparison: o.comparison.as_ref().map(|c| JsonComparison {
                trace_same: c.trace_same,
                rest_same: c.rest_same,
                prefix: fixed(c.prefix, 6),
                overlap: fixed(c.overlap, 6),
                expected_lines: c.expected_lines,
                got_lines: c.got_lines,
                first_difference: c.first_difference.as_ref().map(|d| JsonDifference {
                    line: d.line,
                    expected: &d.expected,
                    got: &d.got,
                }),
            }),
            notes: &o.notes,
        })
        .collect();
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, OneCaseALine::default());
    // Serialising strings and numbers into memory cannot fail.
    let _ = serde::Serialize::serialize(&items, &mut ser);
    out.push(b'\n');
    String::from_utf8(out).unwrap_or_default()
}

fn clip(s: &str) -> String {
    s.chars().take(200).collect()
}

/// The report lines for one case (its table row, notes, difference).
pub fn format_outcome(o: &Outcome, context: usize) -> String {
    let mut s = String::new();
    match &o.comparison {
        Some(c) => {
            let _ = writeln!(
                s,
                "{:<30} {:<6} {:>5} {:>5} {:>6.1}% {:>6.1}% {:>8} {:>8.2}",
                o.name,
                o.verdict.label(),
                if c.trace_same { "same" } else { "diff" },
                if c.rest_same { "same" } else { "diff" },
                100.0 * c.prefix,
                100.0 * c.overlap,
                c.expected_lines,
                o.seconds
            );
        }
        None => {
            let _ = writeln!(
                s,
                "{:<30} {:<6} {:>5} {:>5} {:>7} {:>7} {:>8} {:>8.2}",
                o.name,
                o.verdict.label(),
                "-",
                "-",
                "-",
                "-",
                "-",
                o.seconds
            );
        }
    }
    for n in &o.notes {
        let _ = writeln!(s, "    {n}");
    }
    if let Some(d) = o.comparison.as_ref().and_then(|c| c.first_difference.as_ref()) {
        let _ = writeln!(s, "    first difference at listing line {}", d.line);
        if context == 0 {
            let show = |l: &Option<String>| l.clone().unwrap_or_else(|| "(end of listing)".into());
            let _ = writeln!(s, "    expected > {}", show(&d.expected));
            let _ = writeln!(s, "    got      > {}", show(&d.got));
        } else {
            for (tag, lines, ended) in [
                ("expected", &d.expected_context, d.expected.is_none()),
                ("got     ", &d.got_context, d.got.is_none()),
            ] {
                for (i, l) in lines {
                    let _ = writeln!(s, "    {tag} {} {}", if *i + 1 == d.line { ">" } else { " " }, clip(l));
                }
                if ended {
                    let _ = writeln!(s, "    {tag} > (end of listing)");
                }
            }
        }
    }
    s
}

/// The table header.
pub fn table_header() -> String {
    format!(
        "{:<30} {:<6} {:>5} {:>5} {:>7} {:>7} {:>8} {:>8}",
        "case", "result", "trace", "rest", "prefix", "overlap", "lines", "seconds"
    )
}

/// Loads the cases a command line asks for (before `--only`). Returns the
/// cases and lines to print before the table.
pub fn load_cases(cli: &Cli) -> Result<(Vec<Case>, Vec<String>), SetupError> {
    let kind = match cli.kind {
        FolderKind::Auto if cli.dir.join(CASE_LIST).is_file() => FolderKind::CaseList,
        FolderKind::Auto => FolderKind::Library,
        k => k,
    };
    if kind == FolderKind::CaseList {
        return Ok((load_case_list(&cli.dir)?, Vec::new()));
    }
    let lib = discover_library(&cli.dir, cli.run.write)?;
    let mut notes = Vec::new();
    for u in &lib.unreadable {
        notes.push(format!("warning: cannot read folder {u}"));
    }
    if !lib.without_expected.is_empty() {
        notes.push(format!(
            "note: {} snapshot(s) without an expected listing skipped (--write makes one), e.g. {}",
            lib.without_expected.len(),
            lib.without_expected[0].display()
        ));
    }
    Ok((lib.cases, notes))
}

/// The `trc_regress` program: runs with `args` (without the program name),
/// writes its report to `out`, returns the exit status.
pub fn main_with_args(args: &[String], out: &mut dyn Write) -> i32 {
    main_with_streams(args, out, None)
}

/// [`main_with_args`] with errors written to `err` (the program's standard
/// error) instead of `out`, when given.
pub fn main_with_streams(args: &[String], out: &mut dyn Write, mut err: Option<&mut dyn Write>) -> i32 {
    let mut error = |out: &mut dyn Write, msg: std::fmt::Arguments| {
        let _ = match err.as_deref_mut() {
            Some(e) => writeln!(e, "{msg}"),
            None => writeln!(out, "{msg}"),
        };
    };
    let cli = match parse_cli(args) {
        Ok(Parsed::Run(c)) => c,
        Ok(Parsed::Show(text)) => {
            let _ = out.write_all(text.as_bytes());
            return 0;
        }
        Err(e) => {
            error(
                out,
                format_args!("trc_regress: {e}\n(trc_regress --help for the options)"),
            );
            return 2;
        }
    };
    // The folder or its case list cannot be read, or is malformed: a
    // failure of the input, not of the command line.
    let (mut cases, pre) = match load_cases(&cli) {
        Ok(x) => x,
        Err(e) => {
            error(out, format_args!("trc_regress: {e}"));
            return 1;
        }
    };
    if let Some(p) = &cli.only {
        cases.retain(|c| p.is_match(&c.name));
    }
    if let Some(k) = &cli.run.keep
        && let Err(e) = fs::create_dir_all(k)
    {
        error(out, format_args!("trc_regress: cannot create {}: {e}", k.display()));
        return 1;
    }
    for l in &pre {
        let _ = writeln!(out, "{l}");
    }
    if cases.is_empty() {
        let _ = writeln!(out, "no case to run in {}", cli.dir.display());
    }
    let _ = writeln!(out, "{}", table_header());
    let mut outcomes = Vec::with_capacity(cases.len());
    for case in &cases {
        let o = run_case(case, &cli.run);
        let _ = out.write_all(format_outcome(&o, cli.run.context).as_bytes());
        let _ = out.flush();
        outcomes.push(o);
    }
    let mut status = 0;
    if let Some(p) = &cli.summary_tsv {
        let text: String = outcomes
            .iter()
            .map(|o| format!("{}\t{}\n", o.name, if o.passed() { "PASS" } else { "FAIL" }))
            .collect();
        if let Err(e) = fs::write(p, text) {
            error(out, format_args!("trc_regress: cannot write {}: {e}", p.display()));
            status = 1;
        }
    }
    if let Some(p) = &cli.json
        && let Err(e) = fs::write(p, outcomes_json(&outcomes))
    {
        error(out, format_args!("trc_regress: cannot write {}: {e}", p.display()));
        status = 1;
    }
    let passed = outcomes.iter().filter(|o| o.passed()).count();
    let failed = outcomes.len() - passed;
    let wrote = outcomes.iter().filter(|o| o.verdict == Verdict::Wrote).count();
    if cli.run.write {
        let _ = writeln!(out, "{wrote} expected listing(s) written");
    }
    let _ = writeln!(out, "{passed} passed, {failed} failed");
    let _ = out.flush();
    if failed > 0 { 1 } else { status }
}

#[cfg(test)]
mod tests {
    use super::super::compare_texts;
    use super::*;

    const HEAD: &str = "banner\nTest Command Line:-\nprog -x\n";

    fn pat(p: &str) -> regex_lite::Regex {
        name_filter(p).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn patterns_search_like_python_re() {
        let cases: &[(&str, &str, bool)] = &[
            ("juno", "juno_r1_1", true),
            ("juno", "TC2", false),
            ("^juno_r1_1$", "juno_r1_1", true),
            ("^juno_r1_1$", "juno_r1_1_rangelimit", false),
            ("TC2|juno", "TC2", true),
            ("TC2|juno", "a57", false),
            ("^(juno|TC2)$", "TC2", true),
            ("^(?:juno|TC2)$", "TC2x", false),
            ("r1_1(_range.*)?$", "juno_r1_1_rangelimit", true),
            ("r1_1(_range.*)?$", "juno_r1_1_badopcode", false),
            ("^0\\d+-", "001-ack_test", true),
            ("^0\\d+-", "a001-ack", false),
            ("[a-c]\\d{2}", "xa57", true),
            ("[a-c]\\d{2}", "xd57", false),
            ("[^0-9]{3}", "12ab3", false),
            ("[^0-9]{3}", "12abc", true),
            ("stm.only", "stm_only-2", true),
            ("a+b", "caaab", true),
            ("x*", "", true),
            ("(a*)*b", "aaaaaaaac", false),
            ("\\.", "a.b", true),
            ("\\.", "ab", false),
            ("", "anything", true),
        ];
        for &(p, t, want) in cases {
            assert_eq!(pat(p).is_match(t), want, "pattern {p:?} on {t:?}");
        }
    }

    #[test]
    fn bad_patterns_are_refused_with_a_reason() {
        for p in ["(abc", "abc)", "*a", "[abc", "a{2", "\\q", "(?=x)", "a{1,", "[z-a]"] {
            let e = name_filter(p).expect_err(p);
            assert!(e.starts_with(&format!("bad pattern '{p}'")), "{e}");
        }
    }

    #[test]
    fn cli_usage_errors() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(parse_cli(&s(&[])).unwrap_err().contains("give the folder"));
        assert!(
            parse_cli(&s(&["--bogus", "d"]))
                .unwrap_err()
                .contains("unknown option --bogus")
        );
        assert_eq!(
            parse_cli(&s(&["d", "--diff"])).unwrap_err(),
            "a value is required for '--diff <N>' but none was supplied"
        );
        assert!(parse_cli(&s(&["d", "--diff", "x"])).unwrap_err().contains("number"));
        assert!(
            parse_cli(&s(&["d", "--diff", "100001"]))
                .unwrap_err()
                .contains("up to 100000")
        );
        assert!(
            parse_cli(&s(&["d", "--only", "(x"]))
                .unwrap_err()
                .contains("bad pattern")
        );
        assert!(parse_cli(&s(&["d", "e"])).unwrap_err().contains("give one folder"));
        for help in ["--help", "-h", "-help"] {
            assert!(
                matches!(parse_cli(&s(&[help])), Ok(Parsed::Show(t)) if t == USAGE),
                "{help}"
            );
        }
        let Ok(Parsed::Run(c)) = parse_cli(&s(&["d", "--bless", "--diff", "0"])) else {
            panic!("not a run");
        };
        assert!(c.run.write && c.run.context == 0);
        // The last of --cases and --library counts, as before.
        let Ok(Parsed::Run(c)) = parse_cli(&s(&["--library", "d", "--cases"])) else {
            panic!("not a run");
        };
        assert_eq!(c.kind, FolderKind::CaseList);
        let mut out = Vec::new();
        assert_eq!(main_with_args(&s(&["--bogus"]), &mut out), 2);
    }

    #[test]
    fn json_results_escape_and_round() {
        let o = Outcome {
            name: "a\"b\\c\n\u{1}".into(),
            verdict: Verdict::Fail,
            comparison: Some(compare_texts(&format!("{HEAD}a\nb\nc"), &format!("{HEAD}a\nb"), 0)),
            notes: vec!["n".into()],
            seconds: 0.12345,
        };
        let text = outcomes_json(&[o]);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v[0]["case"], "a\"b\\c\n\u{1}");
        assert_eq!(v[0]["result"], "FAIL");
        assert_eq!(v[0]["seconds"], 0.123);
        assert_eq!(v[0]["prefix"], 0.666667);
        // One case a line, numbers with the report's decimals.
        assert_eq!(
            text,
            "[\n  {\"case\": \"a\\\"b\\\\c\\n\\u0001\", \"result\": \"FAIL\", \"seconds\": 0.123, \
             \"trace_same\": true, \"rest_same\": false, \"prefix\": 0.666667, \"overlap\": 0.666667, \
             \"expected_lines\": 3, \"got_lines\": 2, \"first_difference\": {\"line\": 3, \"expected\": \"c\", \
             \"got\": null}, \"notes\": [\"n\"]}\n]\n"
        );
        assert_eq!(v[0]["first_difference"]["line"], 3);
        assert_eq!(v[0]["first_difference"]["got"], serde_json::Value::Null);
        assert_eq!(v[0]["notes"][0], "n");
        let none = Outcome {
            name: "x".into(),
            verdict: Verdict::Fail,
            comparison: None,
            notes: vec![],
            seconds: 0.0,
        };
        let two = outcomes_json(&[none.clone(), none]);
        let one = "{\"case\": \"x\", \"result\": \"FAIL\", \"seconds\": 0.000, \"notes\": []}";
        assert_eq!(two, format!("[\n  {one},\n  {one}\n]\n"));
        assert_eq!(outcomes_json(&[]), "[\n]\n");
    }
}
