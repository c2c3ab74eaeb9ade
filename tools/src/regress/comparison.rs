//! A produced listing against its expected listing: the first difference
//! with lines around it, and how much of the two agree.

use std::collections::HashMap;
use std::io::{self, BufRead};

use super::{BANNER_WINDOW, COMMAND_LINE_MARK, for_each_line};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
