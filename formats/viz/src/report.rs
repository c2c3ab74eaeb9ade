//! The one-file HTML report: what the capture holds, its errors and gaps
//! with their byte offsets, the hottest functions, the flame graph (an
//! inline SVG) and a timeline of the busiest context (drawn by a little
//! inline script into an SVG). No network, nothing to install; the size
//! is bounded whatever the capture's: the flame graph leaves out frames
//! narrower than a minimum width, the timeline keeps the busiest stretch
//! and says so, the tables keep their first rows.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use crate::elements::Counts;
use crate::folded::{FlameOptions, flamegraph_svg, folded_lines};
use crate::input::Capture;
use crate::profile::{EventKind, Profile};
use crate::timeline::Timeline;

/// How big the report's parts may be.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Title (default: from the input).
    pub title: Option<String>,
    /// Rows of the hottest-functions table.
    pub hottest: usize,
    /// Rows of the errors and gaps tables.
    pub max_rows: usize,
    /// Flame graph frames narrower than this many pixels are left out.
    pub min_width: f64,
    /// Calls and returns drawn in the timeline at most.
    pub timeline_events: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            title: None,
            hottest: 25,
            max_rows: 100,
            min_width: 0.5,
            timeline_events: 4000,
        }
    }
}

/// Escapes text for HTML.
pub fn html(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}%", a as f64 * 100.0 / b as f64)
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums}.note{color:#555;font-style:italic}\
#flame svg{max-width:100%;height:auto}#timeline{border:1px solid #ccc;background:#fafafa}\
#timeline text{font:11px sans-serif;pointer-events:none}";

/// Draws the timeline: `TL.spans` are [depth, start, end, frame], in the
/// axis's units from `TL.t0` to `TL.t1`.
const SCRIPT: &str = r#"(function(){
var svg=document.getElementById('timeline');var NS='http://www.w3.org/2000/svg';
var W=1200,H=18,n=0,depth=0;TL.spans.forEach(function(s){if(s[0]>depth)depth=s[0];});
svg.setAttribute('width',W);svg.setAttribute('height',(depth+1)*H+22);
var span=Math.max(1,TL.t1-TL.t0);
function x(t){return (t-TL.t0)*W/span;}
TL.spans.forEach(function(s){var x0=x(s[1]),w=Math.max(0.5,x(s[2])-x0),name=TL.frames[s[3]];
var r=document.createElementNS(NS,'rect');r.setAttribute('x',x0);r.setAttribute('y',s[0]*H);
r.setAttribute('width',w);r.setAttribute('height',H-2);
var h=(s[3]*47)%360;r.setAttribute('fill','hsl('+h+',65%,62%)');
var tt=document.createElementNS(NS,'title');tt.textContent=name+' ('+(s[2]-s[1])+' '+TL.unit+')';r.appendChild(tt);
svg.appendChild(r);n++;
if(w>40){var t=document.createElementNS(NS,'text');t.setAttribute('x',x0+3);t.setAttribute('y',s[0]*H+12);
t.textContent=name.length*6.5>w-6?name.slice(0,Math.max(0,Math.floor((w-6)/6.5)-1))+'\u2026':name;svg.appendChild(t);}});
TL.gaps.forEach(function(g){var l=document.createElementNS(NS,'line');l.setAttribute('x1',x(g));l.setAttribute('x2',x(g));
l.setAttribute('y1',0);l.setAttribute('y2',(depth+1)*H);l.setAttribute('stroke','red');l.setAttribute('stroke-dasharray','3,2');svg.appendChild(l);});
var a=document.createElementNS(NS,'text');a.setAttribute('x',2);a.setAttribute('y',(depth+1)*H+16);
a.textContent=TL.t0+' \u2192 '+TL.t1+' '+TL.unit;svg.appendChild(a);
svg.setAttribute('data-spans',n);
})();"#;

/// Writes the report.
pub fn write_report(
    p: &Profile,
    cap: &Capture,
    counts: Option<&Counts>,
    o: &ReportOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let axis = p.axis();
    let k = axis.slot();
    let title = o
        .title
        .clone()
        .unwrap_or_else(|| format!("Trace report: {}", cap.input));
    let mut h = String::with_capacity(64 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        html(&title),
        html(&title)
    );
    // What the capture holds.
    let totals = p.totals(axis);
    let grand: u64 = p.contexts.iter().map(|c| totals[c.node as usize]).sum();
    h.push_str("<h2>What the capture holds</h2>\n<table id=\"summary\">\n");
    let row = |h: &mut String, k: &str, v: String| {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", html(k), html(&v));
    };
    row(&mut h, "input", format!("{} ({})", cap.input, cap.kind));
    let protos: Vec<String> = {
        let mut v: Vec<String> = cap.sources.iter().map(|s| s.protocol.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    row(&mut h, "protocols", protos.join(", "));
    for s in &cap.sources {
        let id = if s.trace_id != 0 {
            format!("trace ID 0x{:x}", s.trace_id)
        } else {
            "no trace ID".into()
        };
        row(&mut h, "source", format!("{}: {}, {id}", s.name, s.protocol));
    }
    row(&mut h, "trace bytes", cap.bytes.to_string());
    if let Some(c) = counts {
        row(&mut h, "elements", c.elements.to_string());
        row(&mut h, "instruction ranges", c.ranges.to_string());
        row(&mut h, "instructions", c.instructions.to_string());
        row(&mut h, "exceptions", c.exceptions.to_string());
        match c.ts_span {
            Some((a, b)) => row(
                &mut h,
                "timestamps",
                format!("{} (from {a} to {b}: {} ticks)", c.timestamps, b - a),
            ),
            None => row(&mut h, "timestamps", "none".into()),
        }
    }
    row(
        &mut h,
        "time axis",
        format!("{}; total {grand} {}", axis.describe(), axis.unit()),
    );
    row(
        &mut h,
        "contexts",
        format!(
            "{}: {}",
            p.contexts.len(),
            p.contexts
                .iter()
                .map(|c| format!(
                    "{} ({} calls{})",
                    c.name,
                    c.calls,
                    if c.broken > 0 {
                        format!(", stack broken {} times", c.broken)
                    } else {
                        String::new()
                    }
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    );
    row(&mut h, "distinct call stacks", p.nodes.len().to_string());
    h.push_str("</table>\n");

    // Errors and gaps.
    let _ = writeln!(
        h,
        "<h2>Errors and gaps</h2>\n<p>{} decoder errors, {} gaps in the trace (overflows, lost synchronisation, \
         missing memory images); call stacks are kept across gaps and marked broken.</p>",
        cap.errors_total, p.gap_count
    );
    // Without the program's code the decoder follows no instruction: the
    // gaps above cannot show it, this count does.
    if let Some(c) = counts.filter(|c| c.addr_nacc > 0) {
        let _ = writeln!(
            h,
            "<p id=\"missing-memory\">{} ADDR_NACC elements: the trace went to addresses no memory image holds, \
             and the instructions there could not be followed. Give the program's images (--elf FILE).</p>",
            c.addr_nacc
        );
    }
    if !cap.warnings.is_empty() {
        h.push_str("<ul id=\"warnings\">");
        for w in cap.warnings.iter().take(o.max_rows) {
            let _ = write!(h, "<li>{}</li>", html(w));
        }
        h.push_str("</ul>\n");
    }
    if !cap.errors.is_empty() {
        h.push_str("<table id=\"errors\"><tr><th>byte offset</th><th>error</th></tr>\n");
        for (off, e) in cap.errors.iter().take(o.max_rows) {
            let _ = writeln!(h, "<tr><td class=\"n\">0x{off:x}</td><td>{}</td></tr>", html(e));
        }
        h.push_str("</table>\n");
        if cap.errors_total > o.max_rows.min(cap.errors.len()) as u64 {
            let _ = writeln!(
                h,
                "<p class=\"note\">the first {} errors only</p>",
                o.max_rows.min(cap.errors.len())
            );
        }
    }
    if !p.gaps.is_empty() {
        h.push_str("<table id=\"gaps\"><tr><th>byte offset</th><th>source</th><th>gap</th></tr>\n");
        for g in p.gaps.iter().take(o.max_rows) {
            let _ = writeln!(
                h,
                "<tr><td class=\"n\">0x{:x}</td><td>{}</td><td>{}</td></tr>",
                g.offset,
                html(&g.source),
                html(&g.what)
            );
        }
        h.push_str("</table>\n");
        if p.gap_count > o.max_rows.min(p.gaps.len()) as u64 {
            let _ = writeln!(
                h,
                "<p class=\"note\">the first {} gaps only</p>",
                o.max_rows.min(p.gaps.len())
            );
        }
    }

    // Hottest functions.
    let hot = p.hottest(axis);
    let _ = writeln!(
        h,
        "<h2>Hottest functions</h2>\n<table id=\"hottest\"><tr><th>function</th><th>self ({})</th><th>self %</th>\
         <th>with callees</th><th>calls</th></tr>",
        html(axis.unit())
    );
    for (f, own, total, calls) in hot.iter().take(o.hottest) {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{own}</td><td class=\"n\">{}</td><td class=\"n\">{total}</td><td class=\"n\">{calls}</td></tr>",
            html(p.frames.name(*f)),
            pct(*own, grand)
        );
    }
    h.push_str("</table>\n");
    out.write_all(h.as_bytes())?;
    h.clear();

    // Flame graph.
    let _ = writeln!(
        h,
        "<h2>Flame graph</h2>\n<p class=\"note\">{}; frames narrower than {} px are left out. Hover a frame for its weight.</p>\n<div id=\"flame\">",
        html(axis.describe()),
        o.min_width
    );
    out.write_all(h.as_bytes())?;
    h.clear();
    let lines = folded_lines(p, axis);
    let fo = FlameOptions {
        title: "Flame Graph".into(),
        subtitle: Some(axis.describe().into()),
        icicle: false,
        min_width: o.min_width,
        width: 1200,
        no_javascript: true,
        count_name: axis.unit().into(),
    };
    if lines.is_empty() {
        // inferno refuses an empty graph; the report says why there is none.
        let why = match counts {
            Some(c) if c.addr_nacc > 0 => "the code the trace runs through is not mapped (see Errors and gaps)",
            _ => "the trace holds no instructions that were followed",
        };
        let _ = write!(out, "<p class=\"note\" id=\"no-stacks\">No call stacks: {why}.</p>");
    } else {
        let mut svg = Vec::new();
        flamegraph_svg(&lines, &fo, &mut svg)?;
        // Inline: the XML declaration and doctype belong to a file, not a page.
        let svg = String::from_utf8_lossy(&svg);
        let start = svg.find("<svg").unwrap_or(0);
        out.write_all(svg[start..].as_bytes())?;
    }
    out.write_all(b"</div>\n")?;

    // Timeline.
    let tl = Timeline::busiest(p, axis, o.timeline_events);
    let mut spans: Vec<(usize, u64, u64, u32)> = Vec::new();
    let mut open: Vec<(u32, u64)> = Vec::new();
    let mut gaps = Vec::new();
    let mut used: HashMap<u32, u32> = HashMap::new();
    let mut frame_names: Vec<&str> = Vec::new();
    let (mut t0, mut t1) = (u64::MAX, 0u64);
    for e in &tl.events {
        let t = e.t[k];
        t0 = t0.min(t);
        t1 = t1.max(t);
        match e.kind {
            EventKind::Open => open.push((e.node, t)),
            EventKind::Close => {
                if let Some((n, s)) = open.pop() {
                    let f = p.nodes[n as usize].frame;
                    let next = used.len() as u32;
                    let fi = *used.entry(f).or_insert_with(|| {
                        frame_names.push(p.frames.name(f));
                        next
                    });
                    spans.push((open.len(), s, t, fi));
                }
            }
            EventKind::Gap => gaps.push(t),
        }
    }
    if t0 == u64::MAX {
        t0 = 0;
    }
    let _ = writeln!(
        h,
        "<h2>Timeline</h2>\n<p class=\"note\" id=\"timeline-note\">{}{}. Calls nest downwards; red dashes are gaps in the trace. Hover a call for its name and length.</p>\n<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\"></svg>\n<script>var TL={{\"unit\":",
        html(axis.describe()),
        tl.note.as_deref().map(|n| format!("; {}", html(n))).unwrap_or_default()
    );
    out.write_all(h.as_bytes())?;
    h.clear();
    crate::timeline::json_str(out, axis.unit())?;
    write!(out, ",\"t0\":{t0},\"t1\":{t1},\"frames\":[")?;
    for (i, n) in frame_names.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        crate::timeline::json_str(out, n)?;
    }
    out.write_all(b"],\"spans\":[")?;
    for (i, (d, s, e, f)) in spans.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write!(out, "[{d},{s},{e},{f}]")?;
    }
    out.write_all(b"],\"gaps\":[")?;
    for (i, g) in gaps.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write!(out, "{g}")?;
    }
    out.write_all(b"]};\n")?;
    out.write_all(SCRIPT.as_bytes())?;
    out.write_all(b"\n</script>\n")?;
    let _ = writeln!(
        h,
        "<p class=\"note\">Made by trc_viz from {} with {}.</p>\n</body></html>",
        html(&cap.input),
        html(axis.describe())
    );
    out.write_all(h.as_bytes())
}
