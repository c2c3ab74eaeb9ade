//! Regression runs: decode a set of snapshots with the lister, in-process,
//! and compare each listing with a stored expected listing, line by line,
//! exactly as the conformance runner compares them.
//!
//! Two kinds of folder hold the cases:
//!
//! * a **case list**: a folder with a `cases.tsv` (one case a line: the
//!   case name, a TAB, the lister arguments; `NAME=VALUE` words are
//!   environment settings for that case; `#` lines are comments) and
//!   `expected/<case>.ppl.xz` or `expected/<case>.ppl`. Cases run from that
//!   folder, so `-ss_dir ./snapshots/x` is relative to it ([`load_case_list`]).
//! * a **snapshot library**: any folder; every directory under it holding
//!   a `snapshot.ini` and an `expected.ppl` (or `expected.ppl.xz`) beside it
//!   is a case, whose lister arguments are read from the expected listing's
//!   `Test Command Line:-` line ([`discover_library`]).
//!
//! A listing matches when, after the banner (every line up to and including
//! the one after `Test Command Line:-`, looked for in the first 40 lines),
//! its lines (split on `\n`) equal the expected ones ([`compare`]). Expected
//! listings are read as a stream (xz ones decompressed on the fly), so only
//! the produced listing is held in memory.
//!
//! [`main_with_args`] is the `trc_regress` program.
//!
//! The module's parts: case lists, libraries and runs here; the comparison
//! of a listing with its expected listing in `comparison.rs`; the program's
//! command line and report in `program.rs`.

mod comparison;
mod program;

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;

use crate::lister;

pub use comparison::{Comparison, Difference, compare, compare_texts, strip_banner};
pub use program::{
    Cli, FolderKind, MAX_CONTEXT, Parsed, USAGE, format_outcome, load_cases, main_with_args, main_with_streams,
    name_filter, outcomes_json, parse_cli, table_header,
};

/// The program name given to the lister as `argv[0]` (it appears in the
/// banner of written listings, as in OpenCSD's).
pub const LISTER_NAME: &str = "trc_pkt_lister";

/// Lister arguments for a library snapshot whose expected listing records
/// no command line (and for new ones in write mode).
pub const DEFAULT_ARGS: &[&str] = &["-ss_dir", "./", "-decode", "-no_time_print"];

/// The banner's `Test Command Line:-` line is looked for in this many first
/// lines of a listing.
pub const BANNER_WINDOW: usize = 40;

/// The name of a library snapshot's expected listing.
pub const LIBRARY_EXPECTED: &str = "expected.ppl";

/// The case list file of a case-list folder.
pub const CASE_LIST: &str = "cases.tsv";

const COMMAND_LINE_MARK: &str = "Test Command Line:-";

/// A problem with the case list or the library itself (not with one case's
/// result): names the file and, where there is one, the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl SetupError {
    fn new(path: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        SetupError {
            path: path.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(n) => write!(f, "{}:{}: {}", self.path.display(), n, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for SetupError {}

/// One regression case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The case name (`cases.tsv` name, or the snapshot's path below the
    /// library folder with `/` separators).
    pub name: String,
    /// The folder the lister runs from (absolute).
    pub run_dir: PathBuf,
    /// The lister arguments (without `argv[0]`).
    pub args: Vec<String>,
    /// Environment settings for this case; other names are looked up in
    /// the process environment, as a child process would inherit them.
    pub env: Vec<(String, String)>,
    /// The plain expected listing (`.../<case>.ppl` or `.../expected.ppl`);
    /// an xz one is the same path with `.xz` added, and is read first when
    /// both exist (as the conformance runner does).
    pub expected: PathBuf,
    /// Where the case comes from, for messages (`cases.tsv:12`, ...).
    pub origin: String,
    /// Things worth saying that do not by themselves fail the case.
    pub warnings: Vec<String>,
    /// A reason the case cannot run at all (it then fails).
    pub problem: Option<String>,
}

impl Case {
    /// The xz form of the expected listing.
    pub fn expected_xz(&self) -> PathBuf {
        xz_path(&self.expected)
    }

    /// The expected listing that exists, xz first.
    pub fn expected_file(&self) -> Option<PathBuf> {
        [self.expected_xz(), self.expected.clone()]
            .into_iter()
            .find(|p| p.is_file())
    }

    /// The argument vector the lister is given (`argv[0]` first).
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(LISTER_NAME.to_string())
            .chain(self.args.iter().cloned())
            .collect()
    }

    /// Looks up an environment setting: the case's own, then the process's.
    pub fn env_lookup(&self, name: &str) -> Option<String> {
        match self.env.iter().find(|(k, _)| k == name) {
            Some((_, v)) => Some(v.clone()),
            None => std::env::var(name).ok(),
        }
    }
}

fn xz_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(".xz");
    PathBuf::from(s)
}

/// An absolute form of `p` (relative to the current directory).
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// True for a `cases.tsv` word that is an environment setting
/// (`[A-Z_][A-Z0-9_]*=...`).
pub fn is_env_word(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Parses one `cases.tsv` line. `Ok(None)` for blank and comment lines;
/// `Err` with the reason for a bad line.
#[allow(clippy::type_complexity)]
pub fn parse_case_line(line: &str) -> Result<Option<(String, Vec<(String, String)>, Vec<String>)>, String> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.trim().is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let Some((name, rest)) = line.split_once('\t') else {
        return Err("no TAB between the case name and the lister arguments".into());
    };
    if name.is_empty() {
        return Err("empty case name".into());
    }
    if name.contains(['/', '\\']) || name == "." || name == ".." || name.chars().any(char::is_whitespace) {
        return Err(format!("bad case name '{name}' (it names a file in expected/)"));
    }
    let (mut env, mut args) = (Vec::new(), Vec::new());
    for word in rest.split_whitespace() {
        if is_env_word(word) {
            let (k, v) = word.split_once('=').unwrap_or((word, ""));
            env.push((k.to_string(), v.to_string()));
        } else {
            args.push(word.to_string());
        }
    }
    Ok(Some((name.to_string(), env, args)))
}

/// The value of a `-ss_dir` argument, if given.
fn ss_dir_arg(args: &[String]) -> Option<&str> {
    let i = args.iter().position(|a| a == "-ss_dir")?;
    args.get(i + 1).map(String::as_str)
}

/// Reads a case-list folder's `cases.tsv`.
pub fn load_case_list(folder: &Path) -> Result<Vec<Case>, SetupError> {
    let folder = absolute(folder);
    let path = folder.join(CASE_LIST);
    let bytes = fs::read(&path).map_err(|e| SetupError::new(&path, None, format!("cannot read: {e}")))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut cases: Vec<Case> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, line) in text.split('\n').enumerate() {
        let n = i + 1;
        let parsed = parse_case_line(line).map_err(|m| SetupError::new(&path, Some(n), m))?;
        let Some((name, env, args)) = parsed else { continue };
        if let Some(prev) = seen.insert(name.clone(), n) {
            return Err(SetupError::new(
                &path,
                Some(n),
                format!("case '{name}' is already defined on line {prev}"),
            ));
        }
        let origin = format!("{}:{n}", path.display());
        let mut warnings = Vec::new();
        if let Some(ss) = ss_dir_arg(&args)
            && !folder.join(ss).is_dir()
        {
            warnings.push(format!("snapshot folder {ss} (from {origin}) not found"));
        }
        let expected = folder.join("expected").join(format!("{name}.ppl"));
        cases.push(Case {
            name,
            run_dir: folder.clone(),
            args,
            env,
            expected,
            origin,
            warnings,
            problem: None,
        });
    }
    Ok(cases)
}

/// The snapshots of a library.
#[derive(Clone, Debug, Default)]
pub struct Library {
    /// Snapshots with an expected listing (or all, when asked for).
    pub cases: Vec<Case>,
    /// Snapshot folders without an expected listing (not made into cases).
    pub without_expected: Vec<PathBuf>,
    /// Folders that could not be read while searching.
    pub unreadable: Vec<String>,
}

/// The lister arguments recorded on the `Test Command Line:-` line among
/// a listing's first lines: the words after the program name, without the
/// output options (`-logfilename X`, `-logstdout`, `-logstderr`,
/// `-logfile`). `None` when there is no such line.
pub fn recorded_args(first_lines: &[String]) -> Option<Vec<String>> {
    let i = first_lines
        .iter()
        .take(BANNER_WINDOW)
        .position(|l| l.starts_with(COMMAND_LINE_MARK))?;
    let cmd = first_lines.get(i + 1).map(String::as_str).unwrap_or("");
    let mut words = cmd.split_whitespace().skip(1);
    let mut args = Vec::new();
    while let Some(w) = words.next() {
        match w {
            "-logstdout" | "-logstderr" | "-logfile" => {}
            "-logfilename" => {
                words.next();
            }
            _ => args.push(w.to_string()),
        }
    }
    Some(args)
}

/// The folder to run a library snapshot's lister from, so that its
/// recorded `-ss_dir` (or the lister's default `./`) leads to the snapshot
/// and the listing shows the same path. When no folder above the snapshot
/// does, the arguments are changed to `-ss_dir ./` and a warning says so.
fn plan_library_run(snapshot: &Path, args: &mut Vec<String>) -> (PathBuf, Option<String>) {
    let target = fs::canonicalize(snapshot).unwrap_or_else(|_| snapshot.to_path_buf());
    let pos = args.iter().position(|a| a == "-ss_dir");
    let recorded = match pos {
        Some(i) => args.get(i + 1).cloned().unwrap_or_default(),
        None => "./".to_string(),
    };
    let leads_there = |dir: &Path| fs::canonicalize(dir.join(&recorded)).is_ok_and(|p| p == target);
    if !recorded.is_empty() {
        if Path::new(&recorded).is_absolute() {
            if leads_there(Path::new("/")) {
                return (snapshot.to_path_buf(), None);
            }
        } else if let Some(dir) = snapshot.ancestors().find(|d| leads_there(d)) {
            return (dir.to_path_buf(), None);
        }
    }
    let warning = format!(
        "the recorded '-ss_dir {recorded}' does not lead to this snapshot from any folder above it: \
         running with '-ss_dir ./' from the snapshot (--write records that)"
    );
    match pos {
        Some(i) if i + 1 < args.len() => args[i + 1] = "./".to_string(),
        Some(i) => args.insert(i + 1, "./".to_string()),
        None => {
            args.insert(0, "./".to_string());
            args.insert(0, "-ss_dir".to_string());
        }
    }
    (snapshot.to_path_buf(), Some(warning))
}

/// Finds every snapshot (a directory with a `snapshot.ini`) under `root`,
/// in name order. Those with an expected listing beside them become
/// cases; with `include_without_expected` (write mode) the others do too,
/// with [`DEFAULT_ARGS`].
pub fn discover_library(root: &Path, include_without_expected: bool) -> Result<Library, SetupError> {
    let root = absolute(root);
    if !root.is_dir() {
        return Err(SetupError::new(&root, None, "not a folder"));
    }
    let mut lib = Library::default();
    let mut snapshots = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if dir == root => return Err(SetupError::new(&root, None, format!("cannot read: {e}"))),
            Err(e) => {
                lib.unreadable.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        if dir.join("snapshot.ini").is_file() {
            snapshots.push(dir.clone());
        }
        let mut subdirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        subdirs.sort();
        stack.extend(subdirs.into_iter().rev());
    }
    snapshots.sort();
    if snapshots.is_empty() {
        return Err(SetupError::new(
            &root,
            None,
            "no snapshot (a folder with snapshot.ini) under this folder",
        ));
    }
    for snap in snapshots {
        let name = match snap.strip_prefix(&root) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            _ => snap
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| ".".into()),
        };
        let expected = snap.join(LIBRARY_EXPECTED);
        let mut case = Case {
            name,
            run_dir: snap.clone(),
            args: Vec::new(),
            env: Vec::new(),
            expected: expected.clone(),
            origin: snap.display().to_string(),
            warnings: Vec::new(),
            problem: None,
        };
        let existing = case.expected_file();
        let mut args = match &existing {
            None if !include_without_expected => {
                lib.without_expected.push(snap);
                continue;
            }
            None => None,
            Some(file) => match read_first_lines(file, BANNER_WINDOW + 1) {
                Ok(lines) => recorded_args(&lines),
                // In write mode a broken listing is replaced.
                Err(e) if include_without_expected => {
                    case.warnings.push(format!("{e}: running with the default arguments"));
                    None
                }
                Err(e) => {
                    case.problem = Some(e);
                    None
                }
            },
        }
        .unwrap_or_else(|| DEFAULT_ARGS.iter().map(|s| s.to_string()).collect());
        let (run_dir, warning) = plan_library_run(&snap, &mut args);
        case.run_dir = run_dir;
        case.args = args;
        case.warnings.extend(warning);
        lib.cases.push(case);
    }
    Ok(lib)
}

/// Opens an expected listing for reading as text lines: xz files (by
/// their `.xz` name) are decompressed as they are read.
pub fn open_listing(path: &Path) -> Result<Box<dyn BufRead>, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let file = BufReader::with_capacity(1 << 16, file);
    if path.extension().is_some_and(|e| e == "xz") {
        Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            lzma_rust2::XzReader::new(file, true),
        )))
    } else {
        Ok(Box::new(file))
    }
}

/// Calls `f` on each line of `r` split on `\n` (the text after the last
/// `\n`, even empty, is the last line), decoded as UTF-8 with bad bytes
/// replaced; `f` returns false to stop early.
pub fn for_each_line(r: &mut dyn BufRead, mut f: impl FnMut(&str) -> bool) -> io::Result<()> {
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf)?;
        let complete = n > 0 && buf.last() == Some(&b'\n');
        if complete {
            buf.pop();
        }
        if !f(&String::from_utf8_lossy(&buf)) || !complete {
            return Ok(());
        }
    }
}

/// The first `n` lines of a listing file.
pub fn read_first_lines(path: &Path, n: usize) -> Result<Vec<String>, String> {
    let mut r = open_listing(path)?;
    let mut lines = Vec::new();
    for_each_line(&mut *r, |l| {
        lines.push(l.to_string());
        lines.len() < n
    })
    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(lines)
}

/// How a case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The listing matches the expected one.
    Pass,
    /// It does not, or the case could not run.
    Fail,
    /// Write mode: the expected listing was (re)written.
    Wrote,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Wrote => "WROTE",
        }
    }
}

/// The result of one case.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub name: String,
    pub verdict: Verdict,
    /// The comparison with the expected listing, when one was read.
    pub comparison: Option<Comparison>,
    /// Why it failed, and warnings.
    pub notes: Vec<String>,
    /// Time spent in the lister.
    pub seconds: f64,
}

impl Outcome {
    /// Pass or Wrote.
    pub fn passed(&self) -> bool {
        self.verdict != Verdict::Fail
    }
}

/// How cases are run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Lines of context kept around the first difference.
    pub context: usize,
    /// Keep each produced listing as `<dir>/<case>.ppl` (`/` in library
    /// case names becomes `__`).
    pub keep: Option<PathBuf>,
    /// Write the produced listing as the expected one when it differs
    /// (plain `.ppl`; an `.xz` expected listing is then removed, so that
    /// the new one is the one read).
    pub write: bool,
}

/// Restores the current directory when dropped.
struct CwdGuard(Option<PathBuf>);

impl CwdGuard {
    fn enter(dir: &Path) -> io::Result<CwdGuard> {
        let old = std::env::current_dir().ok();
        std::env::set_current_dir(dir)?;
        Ok(CwdGuard(old))
    }
}

impl Drop for CwdGuard {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = std::env::set_current_dir(d);
        }
    }
}

/// Serialises the runs of this module, which change the current directory.
static CWD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the lister in-process for a case, from its folder, with its
/// environment. Returns the exit status and the listing; `Err` when it
/// could not run or panicked (the listing produced so far is then lost).
///
/// The lister resolves the case's relative paths from the current
/// directory, so this changes the process's current directory for the
/// time of the run (and restores it). Runs through this module are
/// serialised; other threads of the program that use relative paths at
/// the same time would be affected.
pub fn run_lister(case: &Case) -> Result<(i32, String), String> {
    let argv = case.argv();
    let out = shared(MsgLogger::capture());
    let _lock = CWD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let guard = CwdGuard::enter(&case.run_dir).map_err(|e| format!("cannot enter {}: {e}", case.run_dir.display()))?;
    let env = |k: &str| case.env_lookup(k);
    let status = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lister::run(&argv, &env, out.clone())));
    drop(guard);
    match status {
        Ok(s) => Ok((s, out.borrow_mut().take_captured())),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            Err(format!("the lister panicked: {msg}"))
        }
    }
}

/// A file name for a case's kept listing.
pub fn keep_name(case_name: &str) -> String {
    format!("{}.ppl", case_name.replace('/', "__"))
}

/// Runs one case and compares (or, in write mode, writes) its listing.
pub fn run_case(case: &Case, opts: &RunOptions) -> Outcome {
    let mut out = Outcome {
        name: case.name.clone(),
        verdict: Verdict::Fail,
        comparison: None,
        notes: case.warnings.clone(),
        seconds: 0.0,
    };
    if let Some(p) = &case.problem {
        out.notes.push(p.clone());
        return out;
    }
    let t0 = Instant::now();
    let run = run_lister(case);
    out.seconds = t0.elapsed().as_secs_f64();
    let mut ran_ok = true;
    let listing = match run {
        Ok((0, l)) => l,
        Ok((status, l)) => {
            out.notes.push(format!("lister exit status {status}"));
            ran_ok = false;
            l
        }
        Err(e) => {
            out.notes.push(e);
            ran_ok = false;
            String::new()
        }
    };
    if let Some(dir) = &opts.keep {
        let path = dir.join(keep_name(&case.name));
        if let Err(e) = fs::write(&path, &listing) {
            out.notes
                .push(format!("cannot keep the listing as {}: {e}", path.display()));
        }
    }
    let mut read_ok = false;
    match case.expected_file() {
        None => out.notes.push(format!(
            "no expected listing: neither {} nor {} exists",
            case.expected_xz().display(),
            case.expected.display()
        )),
        Some(file) => match open_listing(&file).and_then(|mut r| {
            compare(&mut *r, &listing, opts.context).map_err(|e| format!("cannot read {}: {e}", file.display()))
        }) {
            Ok(c) => {
                read_ok = true;
                out.comparison = Some(c);
            }
            Err(e) => out.notes.push(e),
        },
    }
    let matches = read_ok && out.comparison.as_ref().is_some_and(Comparison::matches);
    if !opts.write {
        if matches && ran_ok {
            out.verdict = Verdict::Pass;
        }
        return out;
    }
    if !ran_ok {
        out.notes
            .push("expected listing not written: the lister did not run cleanly".into());
    } else if matches {
        out.verdict = Verdict::Pass;
    } else {
        match write_expected(case, &listing) {
            Ok(()) => {
                out.verdict = Verdict::Wrote;
                out.notes.push(format!("wrote {}", case.expected.display()));
            }
            Err(e) => out.notes.push(e),
        }
    }
    out
}

/// Writes `listing` as a case's plain expected listing, removing an xz one.
pub fn write_expected(case: &Case, listing: &str) -> Result<(), String> {
    if let Some(dir) = case.expected.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::write(&case.expected, listing).map_err(|e| format!("cannot write {}: {e}", case.expected.display()))?;
    let xz = case.expected_xz();
    if xz.exists() {
        fs::remove_file(&xz).map_err(|e| {
            format!(
                "wrote {} but cannot remove {}: {e}",
                case.expected.display(),
                xz.display()
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_words_are_upper_case_names() {
        assert!(is_env_word("OPENCSD_INSTR_RANGE_LIMIT=100"));
        assert!(is_env_word("_X="));
        assert!(!is_env_word("-ss_dir"));
        assert!(!is_env_word("lower=1"));
        assert!(!is_env_word("1ABC=1"));
        assert!(!is_env_word("A-B=1"));
    }

    #[test]
    fn case_lines_parse_into_env_and_args() {
        let (name, env, args) = parse_case_line("c1\tA=1 -ss_dir ./x  -decode B_2=two")
            .unwrap()
            .unwrap();
        assert_eq!(name, "c1");
        assert_eq!(env, vec![("A".into(), "1".into()), ("B_2".into(), "two".into())]);
        assert_eq!(args, vec!["-ss_dir", "./x", "-decode"]);
        assert_eq!(parse_case_line("# comment\tx"), Ok(None));
        assert_eq!(parse_case_line(""), Ok(None));
        assert_eq!(parse_case_line("name\t"), Ok(Some(("name".into(), vec![], vec![]))));
        assert!(parse_case_line("no tab here").unwrap_err().contains("no TAB"));
        assert!(parse_case_line("\t-decode").unwrap_err().contains("empty case name"));
        assert!(parse_case_line("a/b\t-decode").unwrap_err().contains("bad case name"));
    }

    #[test]
    fn recorded_args_drop_the_program_and_output_options() {
        let lines: Vec<String> = [
            "Trace Packet Lister: CS Decode library testing",
            "",
            "Test Command Line:-",
            "trc_pkt_lister   -ss_dir  ./snapshots/x  -decode  -logfilename  out.ppl  -logstdout  -no_time_print  ",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            recorded_args(&lines).unwrap(),
            vec!["-ss_dir", "./snapshots/x", "-decode", "-no_time_print"]
        );
        assert_eq!(recorded_args(&lines[..2]), None);
    }

    #[test]
    fn streaming_lines_split_like_python() {
        let mut lines = Vec::new();
        for_each_line(&mut io::Cursor::new(b"a\nb\xff\n\nc".to_vec()), |l| {
            lines.push(l.to_string());
            true
        })
        .unwrap();
        assert_eq!(lines, vec!["a", "b\u{fffd}", "", "c"]);
        lines.clear();
        for_each_line(&mut io::Cursor::new(b"a\n".to_vec()), |l| {
            lines.push(l.to_string());
            true
        })
        .unwrap();
        assert_eq!(lines, vec!["a", ""]);
    }
}
