//! Folded stacks (`flamegraph.pl`'s input) and the flame and icicle graph
//! SVGs drawn from them by `inferno`.

use std::io::{self, Write};

use inferno::flamegraph::{self, Direction, Options};

use crate::profile::{Axis, NONE, Profile};

/// Each distinct stack with its own weight on `axis`, sorted by the
/// stack's text byte by byte (as `tarmac-flamegraph` sorts them). Stacks
/// start with the context's name when the profile has several contexts.
pub fn folded_lines(p: &Profile, axis: Axis) -> Vec<(String, u64)> {
    let k = axis.slot();
    // Context names lead the stacks when more than one context ran code.
    let mut ran = vec![false; p.contexts.len()];
    for n in &p.nodes {
        if n.depth == 1 {
            ran[n.ctx as usize] = true;
        }
    }
    let multi = ran.iter().filter(|&&r| r).count() > 1;
    let mut path: Vec<Option<String>> = vec![None; p.nodes.len()];
    let mut lines = Vec::new();
    for (i, n) in p.nodes.iter().enumerate() {
        let name = p.frames.name(n.frame);
        let text = if n.parent == NONE {
            if !multi {
                // One context: its stacks start at their outermost function.
                if n.own[k] > 0 {
                    lines.push((name.to_string(), n.own[k]));
                }
                continue;
            }
            name.to_string()
        } else {
            match &path[n.parent as usize] {
                Some(pp) => format!("{pp};{name}"),
                None => name.to_string(),
            }
        };
        if n.parent != NONE || n.own[k] > 0 {
            lines.push((text.clone(), n.own[k]));
        }
        path[i] = Some(text);
    }
    lines.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    lines
}

/// Writes folded stacks: `frame;frame;frame weight` per line.
pub fn write_folded(p: &Profile, axis: Axis, out: &mut dyn Write) -> io::Result<()> {
    for (path, w) in folded_lines(p, axis) {
        writeln!(out, "{path} {w}")?;
    }
    Ok(())
}

/// How to draw a flame graph.
#[derive(Clone, Debug)]
pub struct FlameOptions {
    /// The title at the top.
    pub title: String,
    /// A line under it (what the time axis is).
    pub subtitle: Option<String>,
    /// Icicle graph: the outermost functions at the top.
    pub icicle: bool,
    /// Frames narrower than this many pixels are left out (keeps large
    /// profiles small).
    pub min_width: f64,
    /// Width in pixels.
    pub width: usize,
    /// Leave out inferno's script (for an SVG inlined in a page: its
    /// script expects to be the whole document).
    pub no_javascript: bool,
    /// What the weights count.
    pub count_name: String,
}

impl Default for FlameOptions {
    fn default() -> Self {
        FlameOptions {
            title: "Flame Graph".into(),
            subtitle: None,
            icicle: false,
            min_width: 0.1,
            width: 1200,
            no_javascript: false,
            count_name: "samples".into(),
        }
    }
}

/// Draws `lines` (folded stacks) as an SVG flame or icicle graph.
pub fn flamegraph_svg(lines: &[(String, u64)], o: &FlameOptions, out: &mut dyn Write) -> io::Result<()> {
    let mut opt = Options::default();
    opt.title = o.title.clone();
    opt.subtitle = o.subtitle.clone();
    opt.count_name = o.count_name.clone();
    opt.min_width = o.min_width;
    opt.image_width = Some(o.width);
    opt.no_javascript = o.no_javascript;
    opt.deterministic = true;
    opt.hash = true;
    if o.icicle {
        opt.direction = Direction::Inverted;
    }
    let text: Vec<String> = lines
        .iter()
        .filter(|(_, w)| *w > 0)
        .map(|(p, w)| format!("{p} {w}"))
        .collect();
    flamegraph::from_lines(&mut opt, text.iter().map(String::as_str), out).map_err(io::Error::other)
}
