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

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;
use crate::lister;
use serde_json::value::RawValue;

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

/// The lines after the banner: those after the line that follows
/// `Test Command Line:-` when it is among the first [`BANNER_WINDOW`]
/// lines, else all of them.
pub fn strip_banner<T: AsRef<str>>(lines: &[T]) -> &[T] {
    match lines
        .iter()
        .take(BANNER_WINDOW)
        .position(|l| l.as_ref().starts_with(COMMAND_LINE_MARK))
    {
        Some(i) => lines.get(i + 2..).unwrap_or(&[]),
        None => lines,
    }
}

/// Where two listings first differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// 1-based line number after the banner (the conformance runner's
    /// "listing line").
    pub line: usize,
    /// The expected line there (`None`: the expected listing ended).
    pub expected: Option<String>,
    /// The produced line there (`None`: the produced listing ended).
    pub got: Option<String>,
    /// Lines around it, as (0-based line index after the banner, text).
    pub expected_context: Vec<(usize, String)>,
    pub got_context: Vec<(usize, String)>,
}

/// The result of comparing a listing with its expected listing.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Lines after the banner.
    pub expected_lines: usize,
    pub got_lines: usize,
    /// `None` when the listings match.
    pub first_difference: Option<Difference>,
    /// Share of expected lines matched before the first difference.
    pub prefix: f64,
    /// Share of lines both listings hold, order ignored (over the longer).
    pub overlap: f64,
    /// The `Idx:` lines (packets and elements) are the same.
    pub trace_same: bool,
    /// All the other lines are the same.
    pub rest_same: bool,
}

impl Comparison {
    pub fn matches(&self) -> bool {
        self.first_difference.is_none()
    }
}

/// Compares expected lines, fed one at a time (banner included), with a
/// produced listing held in memory.
struct Comparer<'g> {
    got: Vec<&'g str>,
    counts: HashMap<&'g str, u32>,
    context: usize,
    // Banner handling on the expected side.
    header: Vec<String>,
    banner_done: bool,
    skip_next: bool,
    // State.
    n: usize,
    common: usize,
    first: Option<usize>,
    first_expected: Option<String>,
    before: std::collections::VecDeque<(usize, String)>,
    after: Vec<(usize, String)>,
    trace_pos: usize,
    rest_pos: usize,
    trace_same: bool,
    rest_same: bool,
}

fn is_trace_line(l: &str) -> bool {
    l.starts_with("Idx:")
}

impl<'g> Comparer<'g> {
    fn new(got_listing: &'g str, context: usize) -> Self {
        let all: Vec<&str> = got_listing.split('\n').collect();
        let got = strip_banner(&all).to_vec();
        let mut counts: HashMap<&str, u32> = HashMap::with_capacity(got.len());
        for l in &got {
            *counts.entry(l).or_default() += 1;
        }
        Comparer {
            got,
            counts,
            context,
            header: Vec::new(),
            banner_done: false,
            skip_next: false,
            n: 0,
            common: 0,
            first: None,
            first_expected: None,
            before: Default::default(),
            after: Vec::new(),
            trace_pos: 0,
            rest_pos: 0,
            trace_same: true,
            rest_same: true,
        }
    }

    /// Takes the next raw expected line.
    fn push(&mut self, line: &str) {
        if self.banner_done {
            self.feed(line);
        } else if self.skip_next {
            self.skip_next = false;
            self.banner_done = true;
        } else if line.starts_with(COMMAND_LINE_MARK) {
            self.header.clear();
            self.skip_next = true;
        } else {
            self.header.push(line.to_string());
            if self.header.len() == BANNER_WINDOW {
                self.flush_header();
            }
        }
    }

    fn flush_header(&mut self) {
        self.banner_done = true;
        for l in std::mem::take(&mut self.header) {
            self.feed(&l);
        }
    }

    /// Takes the next expected line after the banner.
    fn feed(&mut self, line: &str) {
        let i = self.n;
        self.n += 1;
        match self.first {
            None if self.got.get(i) == Some(&line) => {
                if self.context > 0 {
                    if self.before.len() == self.context {
                        self.before.pop_front();
                    }
                    self.before.push_back((i, line.to_string()));
                }
            }
            None => {
                self.first = Some(i);
                self.first_expected = Some(line.to_string());
                self.after.push((i, line.to_string()));
            }
            Some(f) if i <= f.saturating_add(self.context) => self.after.push((i, line.to_string())),
            Some(_) => {}
        }
        if let Some(c) = self.counts.get_mut(line)
            && *c > 0
        {
            *c -= 1;
            self.common += 1;
        }
        let trace = is_trace_line(line);
        let (pos, same) = if trace {
            (&mut self.trace_pos, &mut self.trace_same)
        } else {
            (&mut self.rest_pos, &mut self.rest_same)
        };
        if *same {
            while *pos < self.got.len() && is_trace_line(self.got[*pos]) != trace {
                *pos += 1;
            }
            if self.got.get(*pos) == Some(&line) {
                *pos += 1;
            } else {
                *same = false;
            }
        }
    }

    fn finish(mut self) -> Comparison {
        if !self.banner_done && !self.skip_next {
            self.flush_header();
        }
        let (ne, ng) = (self.n, self.got.len());
        if self.first.is_none() && ne != ng {
            self.first = Some(ne.min(ng));
        }
        for (pos, want_trace, same) in [
            (self.trace_pos, true, &mut self.trace_same),
            (self.rest_pos, false, &mut self.rest_same),
        ] {
            if *same && self.got[pos.min(ng)..].iter().any(|l| is_trace_line(l) == want_trace) {
                *same = false;
            }
        }
        let prefix = self.first.unwrap_or(ne) as f64 / ne.max(1) as f64;
        let overlap = self.common as f64 / ne.max(ng).max(1) as f64;
        let first_difference = self.first.map(|f| {
            let lo = f.saturating_sub(self.context);
            let hi = f.saturating_add(self.context).saturating_add(1).min(ng);
            let mut expected_context: Vec<(usize, String)> =
                self.before.into_iter().filter(|(i, _)| *i >= lo).collect();
            expected_context.extend(self.after);
            Difference {
                line: f + 1,
                expected: self.first_expected,
                got: self.got.get(f).map(|s| s.to_string()),
                expected_context,
                got_context: (lo.min(hi)..hi).map(|i| (i, self.got[i].to_string())).collect(),
            }
        });
        Comparison {
            expected_lines: ne,
            got_lines: ng,
            first_difference,
            prefix,
            overlap,
            trace_same: self.trace_same,
            rest_same: self.rest_same,
        }
    }
}

/// Compares an expected listing, read from `expected` line by line (its
/// banner included), with a produced listing (banner included), keeping
/// `context` lines either side of the first difference.
pub fn compare(expected: &mut dyn BufRead, got: &str, context: usize) -> io::Result<Comparison> {
    let mut c = Comparer::new(got, context);
    for_each_line(expected, |l| {
        c.push(l);
        true
    })?;
    Ok(c.finish())
}

/// Compares two listings held in memory.
pub fn compare_texts(expected: &str, got: &str, context: usize) -> Comparison {
    let mut c = Comparer::new(got, context);
    for l in expected.split('\n') {
        c.push(l);
    }
    c.finish()
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

// ---------------------------------------------------------------------------
// Case name filter.

/// The `--only` filter: a regular expression (`regex-lite` syntax, Perl
/// style as Python's `re`) searched anywhere in the case name. The error
/// names the pattern and says what is wrong.
pub fn name_filter(src: &str) -> Result<regex_lite::Regex, String> {
    regex_lite::Regex::new(src).map_err(|e| format!("bad pattern '{src}': {e}"))
}

// ---------------------------------------------------------------------------
// The program.

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
    use super::*;

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
    fn banner_is_stripped_as_the_conformance_runner_does() {
        let l = ["a", "Test Command Line:-", "cmd", "body1", "body2"];
        assert_eq!(strip_banner(&l), &["body1", "body2"]);
        let l = ["a", "Test Command Line:-"];
        assert!(strip_banner(&l).is_empty());
        let no_banner = ["x", "y"];
        assert_eq!(strip_banner(&no_banner), &["x", "y"]);
        // The mark is only looked for in the first 40 lines.
        let mut late: Vec<String> = (0..40).map(|i| format!("l{i}")).collect();
        late.push("Test Command Line:-".into());
        late.push("cmd".into());
        assert_eq!(strip_banner(&late).len(), 42);
        let c = compare_texts(&late.join("\n"), &late.join("\n"), 0);
        assert!(c.matches());
        assert_eq!(c.expected_lines, 42);
    }

    const HEAD: &str = "banner\nTest Command Line:-\nprog -x\n";

    #[test]
    fn identical_listings_match() {
        let t = format!("{HEAD}Idx:1; a\nrest\nIdx:2; b\n");
        let c = compare_texts(&t, &t, 3);
        assert!(c.matches());
        assert_eq!((c.prefix, c.overlap, c.trace_same, c.rest_same), (1.0, 1.0, true, true));
        // Split on \n: the trailing empty line counts.
        assert_eq!(c.expected_lines, 4);
        // The banner itself may differ.
        let other = "other banner\nTest Command Line:-\nsomething else\nIdx:1; a\nrest\nIdx:2; b\n";
        assert!(compare_texts(&t, other, 3).matches());
    }

    #[test]
    fn the_first_difference_prefix_and_overlap_are_the_runners() {
        let e = format!("{HEAD}l1\nIdx:2\nl3\nIdx:4");
        let g = format!("{HEAD}l1\nIdx:2\nX3\nIdx:4");
        let c = compare_texts(&e, &g, 1);
        let d = c.first_difference.clone().unwrap();
        assert_eq!(d.line, 3);
        assert_eq!(d.expected.as_deref(), Some("l3"));
        assert_eq!(d.got.as_deref(), Some("X3"));
        assert_eq!(
            d.expected_context,
            vec![(1, "Idx:2".into()), (2, "l3".into()), (3, "Idx:4".into())]
        );
        assert_eq!(
            d.got_context,
            vec![(1, "Idx:2".into()), (2, "X3".into()), (3, "Idx:4".into())]
        );
        assert_eq!(c.prefix, 0.5);
        assert_eq!(c.overlap, 0.75);
        assert!(c.trace_same);
        assert!(!c.rest_same);
    }

    #[test]
    fn a_shorter_or_longer_listing_differs_where_it_ends() {
        let e = format!("{HEAD}a\nb\nc");
        let g = format!("{HEAD}a\nb");
        let c = compare_texts(&e, &g, 2);
        let d = c.first_difference.clone().unwrap();
        assert_eq!((d.line, d.expected.as_deref(), d.got.as_deref()), (3, Some("c"), None));
        assert!((c.prefix - 2.0 / 3.0).abs() < 1e-9);
        assert!((c.overlap - 2.0 / 3.0).abs() < 1e-9);
        assert!(!c.rest_same);
        let c = compare_texts(&g, &e, 2);
        let d = c.first_difference.clone().unwrap();
        assert_eq!((d.line, d.expected.as_deref(), d.got.as_deref()), (3, None, Some("c")));
        assert_eq!(c.prefix, 1.0);
        assert!(c.trace_same && !c.rest_same);
        // An extra trace line only spoils 'trace'.
        let c = compare_texts(&format!("{HEAD}a"), &format!("{HEAD}a\nIdx:9"), 0);
        assert!(!c.trace_same && c.rest_same && !c.matches());
    }

    #[test]
    fn overlap_counts_repeated_lines_once_each() {
        let c = compare_texts(&format!("{HEAD}x\nx\ny"), &format!("{HEAD}x\ny\ny"), 0);
        assert!((c.overlap - 2.0 / 3.0).abs() < 1e-9);
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
