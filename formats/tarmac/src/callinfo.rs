//! Every execution of a function or address, in the form of upstream's
//! `tarmac-callinfo`: for each function named (or address given), its
//! symbol and each time an instruction at its address was executed, with
//! the node's time, line and byte offset in the trace. Optionally, for
//! each execution, who called: the call that entered the function there,
//! or the function it ran in.
//!
//! The executions are those [`CallAnalyzer::with_watch`] keeps while the
//! trace is read; the queries are resolved to addresses before, with
//! [`Query::address`].

use std::io::{self, Write};

use super::calls::{CallAnalyzer, CallTree, Execution, Naming};
use super::symbols::{Symbol, Symbols};

/// One thing asked about: a hex address (`0x...`, as upstream takes it:
/// lower-case `x`, at least one digit) or a symbol name (`name#N` for
/// the `N`th of several of one name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// An address.
    Addr(u64),
    /// A symbol name.
    Name(String),
}

impl Query {
    /// Reads an argument as upstream does: `0x` and hex digits (that fit in
    /// 64 bits) is an address, anything else a name.
    pub fn parse(s: &str) -> Query {
        match s.strip_prefix("0x") {
            Some(h) if !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()) => match u64::from_str_radix(h, 16) {
                Ok(a) => Query::Addr(a),
                Err(_) => Query::Name(s.to_string()),
            },
            _ => Query::Name(s.to_string()),
        }
    }

    /// The address whose executions answer the query (bit 0 clear), if
    /// any: a name needs `symbols`.
    pub fn address(&self, symbols: Option<&Symbols>) -> Option<u64> {
        match self {
            Query::Addr(a) => Some(a & !1),
            Query::Name(n) => symbols?.find_by_name(n).map(|s| s.addr & !1),
        }
    }
}

/// The activations of a call tree with each one's caller, to say who
/// called at a given line.
struct Callers<'a> {
    tree: &'a CallTree,
    parent: Vec<usize>,
}

impl<'a> Callers<'a> {
    fn new(tree: &'a CallTree) -> Self {
        let mut parent = Vec::with_capacity(tree.acts.len());
        let mut stack: Vec<usize> = Vec::new();
        for (i, a) in tree.acts.iter().enumerate() {
            stack.truncate(a.depth as usize);
            parent.push(stack.last().copied().unwrap_or(i));
            stack.push(i);
        }
        Callers { tree, parent }
    }

    /// The innermost activation running at `line`: the last to begin at or
    /// before it that had not yet returned.
    fn at(&self, line: u64) -> Option<usize> {
        let acts = &self.tree.acts;
        let mut i = acts.partition_point(|a| a.entry.line <= line).checked_sub(1)?;
        loop {
            if acts[i].exit.line >= line || acts[i].depth == 0 {
                return Some(i);
            }
            let p = self.parent[i];
            if p == i {
                return Some(i);
            }
            i = p;
        }
    }
}

/// Writes the answer to each query in upstream's form, the executions
/// being those the analyser kept. With `callers`, each execution is
/// followed by the call that entered a function there (`called from
/// NAME at t:.. l:.. pc:0x..`) or else the function it ran in (`in NAME,
/// entered at t:.. l:..`).
pub fn write_callinfo(
    out: &mut dyn Write,
    queries: &[Query],
    symbols: Option<&Symbols>,
    analyzer: &CallAnalyzer,
    callers: Option<(&CallTree, Naming)>,
) -> io::Result<()> {
    let callers = callers.map(|(t, n)| (Callers::new(t), n));
    let execs = analyzer.executions();
    for q in queries {
        let addr = match q {
            Query::Addr(a) => a & !1,
            Query::Name(name) => {
                let Some(syms) = symbols else {
                    writeln!(out, "No image, symbol '{name}' can not be looked up !")?;
                    continue;
                };
                let Some(Symbol { addr, size, .. }) = syms.find_by_name(name) else {
                    writeln!(out, "Symbol '{name}' not found !")?;
                    continue;
                };
                writeln!(out, "Symbol '{name}' at 0x{addr:x} ({size} bytes) called from :")?;
                addr & !1
            }
        };
        for e in execs.iter().filter(|e| e.addr == addr) {
            writeln!(out, " - time: {} (line:{}, pos:{})", e.time, e.line, e.pos)?;
            if let Some((c, naming)) = &callers {
                write_caller(out, c, naming, e)?;
            }
        }
    }
    Ok(())
}

fn write_caller(out: &mut dyn Write, c: &Callers, naming: &Naming, e: &Execution) -> io::Result<()> {
    let Some(i) = c.at(e.line) else {
        return writeln!(out, "   before the first instruction");
    };
    let acts = &c.tree.acts;
    let name = |pc: u64| {
        let mut s = String::new();
        if !naming.write(&mut s, pc) {
            s = format!("0x{pc:x}");
        }
        s
    };
    let a = &acts[i];
    if a.entry.line == e.line && a.depth > 0 {
        let caller = &acts[c.parent[i]];
        writeln!(
            out,
            "   called from {} at t:{} l:{} pc:0x{:x}",
            name(caller.entry.pc),
            a.call.time,
            a.call.line,
            a.call.pc
        )
    } else {
        writeln!(
            out,
            "   in {}, entered at t:{} l:{}",
            name(a.entry.pc),
            a.entry.time,
            a.entry.line
        )
    }
}
