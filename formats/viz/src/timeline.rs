//! Timelines of calls and returns: the Trace Event Format (the JSON that
//! Perfetto's UI, `chrome://tracing` and speedscope open) and speedscope's
//! own file format, from a profile's events; and the choice of the
//! busiest stretch for the report.

use std::io::{self, Write};

use crate::profile::{Axis, Event, EventKind, NONE, Profile};

/// Events made ready to draw: each context's calls balanced (frames open
/// when the kept stretch begins are opened at its start, those still open
/// at its end closed there), in the order they happened.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// The events.
    pub events: Vec<Event>,
    /// What was left out, when something was (for the outputs to say).
    pub note: Option<String>,
}

/// Opens and closes frames so that `ev` keeps balanced: the stack of
/// `ctx` before the stretch is the chain of `before` (a node, or NONE).
fn chain(p: &Profile, node: u32, out: &mut Vec<u32>) {
    out.clear();
    let mut n = node;
    while n != NONE && p.nodes[n as usize].parent != NONE {
        out.push(n);
        n = p.nodes[n as usize].parent;
    }
    out.reverse();
}

/// The stack an event leaves behind.
fn after(p: &Profile, e: &Event) -> u32 {
    match e.kind {
        EventKind::Open | EventKind::Gap => e.node,
        EventKind::Close => p.nodes[e.node as usize].parent,
    }
}

/// The stack an event finds.
fn before(p: &Profile, e: &Event) -> u32 {
    match e.kind {
        EventKind::Open => p.nodes[e.node as usize].parent,
        EventKind::Close | EventKind::Gap => e.node,
    }
}

/// Balances one context's stretch of events into `out`.
fn balance(p: &Profile, ev: &[Event], out: &mut Vec<Event>) {
    let (Some(first), Some(last)) = (ev.first(), ev.last()) else {
        return;
    };
    let mut c = Vec::new();
    chain(p, before(p, first), &mut c);
    for &n in &c {
        out.push(Event {
            kind: EventKind::Open,
            node: n,
            ..*first
        });
    }
    out.extend_from_slice(ev);
    chain(p, after(p, last), &mut c);
    for &n in c.iter().rev() {
        out.push(Event {
            kind: EventKind::Close,
            node: n,
            ..*last
        });
    }
}

impl Timeline {
    /// Every event kept (all contexts).
    pub fn all(p: &Profile) -> Timeline {
        let mut t = Timeline::default();
        for c in 0..p.contexts.len() as u32 {
            let ev: Vec<Event> = p.events.iter().filter(|e| e.ctx == c).copied().collect();
            balance(p, &ev, &mut t.events);
        }
        if p.events_dropped > 0 {
            t.note = Some(format!(
                "the timeline holds the first {} calls and returns; {} later ones were left out",
                p.events.len(),
                p.events_dropped
            ));
        }
        t
    }

    /// The busiest context's densest stretch of at most `max` events: the
    /// context with the most calls, and in it the `max` consecutive events
    /// that happened in the shortest time on `axis`.
    pub fn busiest(p: &Profile, axis: Axis, max: usize) -> Timeline {
        let mut t = Timeline::default();
        let mut per = vec![0u64; p.contexts.len()];
        for e in &p.events {
            if e.kind == EventKind::Open {
                per[e.ctx as usize] += 1;
            }
        }
        let Some((ctx, _)) = per.iter().enumerate().max_by_key(|&(i, n)| (*n, std::cmp::Reverse(i))) else {
            return t;
        };
        let ev: Vec<Event> = p.events.iter().filter(|e| e.ctx == ctx as u32).copied().collect();
        // Contexts without a call or return (code that was not followed):
        // an empty timeline.
        if ev.is_empty() {
            return t;
        }
        let k = axis.slot();
        let max = max.max(2);
        let (start, end) = if ev.len() <= max {
            (0, ev.len())
        } else {
            let mut best = (u64::MAX, 0usize);
            for i in 0..=ev.len() - max {
                let span = ev[i + max - 1].t[k].saturating_sub(ev[i].t[k]);
                if span < best.0 {
                    best = (span, i);
                }
            }
            (best.1, best.1 + max)
        };
        balance(p, &ev[start..end], &mut t.events);
        let name = &p.contexts[ctx].name;
        if start > 0 || end < ev.len() || p.events_dropped > 0 || p.contexts.len() > 1 {
            let (a, b) = (ev[start].t[k], ev[end - 1].t[k]);
            t.note = Some(format!(
                "the busiest stretch only: {} of the {} calls and returns of context \"{name}\" (the busiest of {}), \
                 from {a} to {b} {}{}",
                end - start,
                ev.len(),
                p.contexts.len(),
                axis.unit(),
                if p.events_dropped > 0 {
                    format!(
                        "; {} events after the first {} were not kept",
                        p.events_dropped,
                        p.events.len()
                    )
                } else {
                    String::new()
                }
            ));
        }
        t
    }
}

/// Writes `s` as a JSON string (with its quotes).
pub fn json_str(out: &mut dyn Write, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        let esc: Option<&str> = match ch {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '<' => Some("\\u003c"),
            c if (c as u32) < 0x20 => None,
            _ => continue,
        };
        out.write_all(&s.as_bytes()[start..i])?;
        match esc {
            Some(e) => out.write_all(e.as_bytes())?,
            None => write!(out, "\\u{:04x}", ch as u32)?,
        }
        start = i + ch.len_utf8();
    }
    out.write_all(&s.as_bytes()[start..])?;
    out.write_all(b"\"")
}

/// Writes the Trace Event Format: one process per trace source, one
/// thread per context, `B`/`E` events per call, an instant event per gap.
/// `ts` is in the axis's units (written as microseconds, which the viewers
/// assume; `otherData` says what they are).
pub fn write_trace_events(p: &Profile, t: &Timeline, axis: Axis, out: &mut dyn Write) -> io::Result<()> {
    let k = axis.slot();
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"timeAxis\":")?;
    json_str(out, axis.describe())?;
    out.write_all(b",\"unit\":")?;
    json_str(out, &format!("1 us on the time axis is 1 of {}", axis.unit()))?;
    if let Some(n) = &t.note {
        out.write_all(b",\"note\":")?;
        json_str(out, n)?;
    }
    out.write_all(b"},\"traceEvents\":[")?;
    let mut first = true;
    let mut sep = |out: &mut dyn Write| -> io::Result<()> {
        if !first {
            out.write_all(b",\n")?;
        } else {
            out.write_all(b"\n")?;
        }
        first = false;
        Ok(())
    };
    for s in 0..p.source_count() as u32 {
        sep(out)?;
        write!(
            out,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{s},\"tid\":0,\"args\":{{\"name\":"
        )?;
        json_str(out, p.source_name(s))?;
        out.write_all(b"}}")?;
    }
    for (i, c) in p.contexts.iter().enumerate() {
        sep(out)?;
        write!(
            out,
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{i},\"args\":{{\"name\":",
            c.source
        )?;
        json_str(out, &c.name)?;
        out.write_all(b"}}")?;
    }
    for e in &t.events {
        let c = &p.contexts[e.ctx as usize];
        sep(out)?;
        let name = p.frames.name(p.nodes[e.node as usize].frame);
        match e.kind {
            EventKind::Open | EventKind::Close => {
                let ph = if e.kind == EventKind::Open { "B" } else { "E" };
                write!(
                    out,
                    "{{\"ph\":\"{ph}\",\"pid\":{},\"tid\":{},\"ts\":{},\"name\":",
                    c.source, e.ctx, e.t[k]
                )?;
                json_str(out, name)?;
                out.write_all(b"}")?;
            }
            EventKind::Gap => {
                write!(
                    out,
                    "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{},\"ts\":{},\"name\":\"trace gap (stack kept, marked broken)\"}}",
                    c.source, e.ctx, e.t[k]
                )?;
            }
        }
    }
    out.write_all(b"\n]}\n")
}

/// Writes speedscope's file format: shared frames and one evented profile
/// per context (contexts with no calls left out).
pub fn write_speedscope(p: &Profile, t: &Timeline, axis: Axis, name: &str, out: &mut dyn Write) -> io::Result<()> {
    let k = axis.slot();
    out.write_all(
        b"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"trc_viz\",\"name\":",
    )?;
    json_str(out, name)?;
    out.write_all(b",\"activeProfileIndex\":0,\"shared\":{\"frames\":[")?;
    for i in 0..p.frames.len() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"{\"name\":")?;
        json_str(out, p.frames.name(i as u32))?;
        out.write_all(b"}")?;
    }
    out.write_all(b"]},\"profiles\":[")?;
    let mut first = true;
    for (ci, c) in p.contexts.iter().enumerate() {
        let mut ev = t
            .events
            .iter()
            .filter(|e| e.ctx == ci as u32 && e.kind != EventKind::Gap)
            .peekable();
        let Some(start) = ev.peek().map(|e| e.t[k]) else {
            continue;
        };
        let end = t
            .events
            .iter()
            .filter(|e| e.ctx == ci as u32)
            .map(|e| e.t[k])
            .max()
            .unwrap_or(start);
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        out.write_all(b"\n{\"type\":\"evented\",\"name\":")?;
        let title = match &t.note {
            Some(_) => format!("{} ({}; busiest stretch)", c.name, axis.unit()),
            None => format!("{} ({})", c.name, axis.unit()),
        };
        json_str(out, &title)?;
        write!(
            out,
            ",\"unit\":\"none\",\"startValue\":{start},\"endValue\":{end},\"events\":["
        )?;
        for (j, e) in ev.enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            let ty = if e.kind == EventKind::Open { 'O' } else { 'C' };
            write!(
                out,
                "{{\"type\":\"{ty}\",\"frame\":{},\"at\":{}}}",
                p.nodes[e.node as usize].frame, e.t[k]
            )?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"\n]}\n")
}
