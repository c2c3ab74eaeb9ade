//! Profiles, call trees and flame graphs against the outputs of Arm's
//! tarmac-trace-utilities on the programs in `fixtures/calls` (AArch64,
//! A32 and T32, each traced in the Fast Models, ES and gem5 styles): with
//! mapping symbols, two static functions of one name and a call into the
//! middle of a function. `fixtures/calls/make.sh` made the traces and the
//! goldens.

use std::path::{Path, PathBuf};

use coresight_tarmac::Reader;
use coresight_tarmac::calls::{CallAnalyzer, CallTree, Naming};
use coresight_tarmac::symbols::{Symbol, Symbols};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/calls")
}

fn tree_of(text: &str) -> (CallAnalyzer, CallTree) {
    let mut r = Reader::new(text.as_bytes());
    let mut a = CallAnalyzer::new();
    while let Some(rec) = r.next_record().unwrap() {
        a.feed(&rec);
    }
    let t = a.finish();
    (a, t)
}

#[test]
fn every_style_and_architecture_equals_upstream() {
    for arch in ["a64", "a32", "t32"] {
        let syms = Symbols::from_elf_file(&dir().join(format!("{arch}.elf"))).unwrap();
        for style in ["fm", "es", "gem5"] {
            let name = format!("{arch}-{style}");
            let text = std::fs::read_to_string(dir().join(format!("{name}.tarmac"))).unwrap();
            let (_, tree) = tree_of(&text);
            let golden = |tool: &str| std::fs::read_to_string(dir().join(format!("{name}.{tool}"))).unwrap();
            let mut out = Vec::new();
            tree.write_profile(&mut out, Naming::new(Some(&syms))).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), golden("profile"), "{name} profile");
            let mut out = Vec::new();
            tree.write_calltree(&mut out, Naming::new(Some(&syms))).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), golden("calltree"), "{name} calltree");
            let mut out = Vec::new();
            tree.write_flamegraph(&mut out, Naming::new(Some(&syms))).unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                golden("flamegraph"),
                "{name} flamegraph"
            );
        }
    }
}

#[test]
fn the_goldens_show_what_they_are_for() {
    let ct = std::fs::read_to_string(dir().join("a64-fm.calltree")).unwrap();
    // Two static functions named helper, told apart by address.
    assert!(
        ct.contains(": helper@0x400124\n") && ct.contains(": helper@0x4001e0\n"),
        "{ct}"
    );
    // skip_fn entered one instruction in: upstream prints the address.
    assert!(ct.contains(": skip_fn + 0x40021c\n"), "{ct}");
    // No mapping symbol names anything.
    assert!(!ct.contains('$'), "{ct}");
    // gem5's A64 trace has its 16-byte accesses (STP/LDP), read as such.
    let gem5 = std::fs::read_to_string(dir().join("a64-gem5.tarmac")).unwrap();
    let mut r = Reader::new(gem5.as_bytes());
    let (mut writes, mut reads) = (0, 0);
    while let Some(rec) = r.next_record().unwrap() {
        if let coresight_tarmac::RecordKind::Memory(m) = rec.kind
            && m.size == 16
        {
            assert!(m.value.is_some(), "line {}", rec.line);
            if m.read { reads += 1 } else { writes += 1 }
        }
    }
    assert_eq!(
        (writes, reads),
        (gem5.matches(" cs MW16 ").count(), gem5.matches(" cs MR16 ").count())
    );
    assert!(writes > 10 && reads > 10, "{writes} {reads}");
}

fn sym(addr: u64, size: u64, name: &str) -> Symbol {
    Symbol {
        addr,
        size,
        name: name.into(),
    }
}

#[test]
fn names_as_upstream_prints_them() {
    let mut s = Symbols::default();
    for x in [
        sym(0, 0, "$d"),
        sym(0x100, 0, "lowest"),
        sym(0x1000, 0x20, "f"),
        sym(0x1000, 0, "$x.14"),
        sym(0x2000, 0x10, "st"),
        sym(0x3000, 0x10, "st"),
        sym(0x4000, 0, "$a"),
    ] {
        s.add(x);
    }
    let name = |addr, offsets| {
        let mut o = String::new();
        s.write_function_name(&mut o, addr, offsets).unwrap();
        o
    };
    assert_eq!(name(0x1000, true), "f");
    assert_eq!(name(0x1008, true), "f + 0x1008");
    assert_eq!(name(0x1008, false), "f");
    assert_eq!(name(0x2000, true), "st@0x2000");
    assert_eq!(name(0x3004, true), "st@0x3000 + 0x3004");
    // Past f's size, the nearest label below is `f` still (never `$a`).
    assert_eq!(name(0x4004, true), "st@0x3000 + 0x4004");
    // The lowest symbol is never examined, as upstream; `$d` at 0 does
    // not count as the lowest.
    assert_eq!(name(0x100, true), "");
}

/// A link register written, then two transfers of control: the first (far
/// from the link register) is no call, and it uses the write up, so the
/// second (with the link register just past it) is no call either.
/// Counting only from the last recognised call, as this crate did before,
/// made the second a call, returned from at 0x2008.
const TWO_TRANSFERS: &str = "\
1 clk IT (1) 00001000 d503201f O EL1h_n : NOP
1 clk R X30 0000000000002008
2 clk IT (2) 00001004 14000000 O EL1h_n : B 0x2000
3 clk IT (3) 00002000 14000000 O EL1h_n : B 0x5000
4 clk IT (4) 00005000 14000000 O EL1h_n : B 0x2008
5 clk IT (5) 00002008 d503201f O EL1h_n : NOP
";

#[test]
fn a_transfer_of_control_uses_up_the_link_register_write() {
    let (a, tree) = tree_of(TWO_TRANSFERS);
    assert_eq!(a.calls_and_returns().count(), 0);
    assert_eq!(tree.acts.len(), 1);
    // Without the first transfer, the branch at 0x2000 is a call.
    let one = "\
1 clk IT (1) 00001ffc d503201f O EL1h_n : NOP
1 clk R X30 0000000000002008
3 clk IT (3) 00002000 14000000 O EL1h_n : B 0x5000
4 clk IT (4) 00005000 14000000 O EL1h_n : B 0x2008
5 clk IT (5) 00002008 d503201f O EL1h_n : NOP
";
    let (a, tree) = tree_of(one);
    assert_eq!(a.calls_and_returns().collect::<Vec<_>>(), [(4, 1), (5, -1)]);
    assert_eq!(tree.acts.len(), 2);
}

/// A function's name as the outputs print it (`name`, `name@0xADDR`,
/// `name + 0xPC`) with its plain name replaced as `names` says.
fn renamed_frame(frame: &str, names: &[(&str, &str)]) -> String {
    for (from, to) in names {
        if let Some(rest) = frame.strip_prefix(from)
            && (rest.is_empty() || rest.starts_with('@') || rest.starts_with(" + "))
        {
            return format!("{to}{rest}");
        }
    }
    frame.to_string()
}

/// Upstream's golden output of `tool` with the functions' names replaced
/// as `names` says; the flame graph's stacks sorted again by name, as its
/// lines are.
fn renamed(golden: &str, tool: &str, names: &[(&str, &str)]) -> String {
    let mut lines: Vec<(Vec<String>, String)> = Vec::new();
    for (i, line) in golden.lines().enumerate() {
        let new = match tool {
            "flamegraph" => {
                let (stack, count) = line.rsplit_once(' ').unwrap();
                let frames: Vec<String> = stack.split(';').map(|f| renamed_frame(f, names)).collect();
                let l = format!("{} {count}", frames.join(";"));
                lines.push((frames, l));
                continue;
            }
            // The name is the last column, 36 characters in.
            "profile" if i > 0 => format!("{}{}", &line[..36], renamed_frame(&line[36..], names)),
            "calltree" if line.trim_start().starts_with("o ") => {
                let (head, name) = line.rsplit_once(" : ").unwrap();
                format!("{head} : {}", renamed_frame(name, names))
            }
            _ => line.to_string(),
        };
        lines.push((Vec::new(), new));
    }
    if tool == "flamegraph" {
        lines.sort();
    }
    lines.into_iter().map(|(_, l)| l + "\n").collect()
}

/// The AArch64 program's image with C++ and Rust mangled names
/// (`fixtures/demangle/make.sh`): without demangling, the outputs name the
/// functions by their mangled names; with it, as C++ and Rust print them,
/// and the two `helper(int)` still apart by address.
#[test]
fn demangled_names_of_cpp_and_rust_functions() {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/demangle/a64-mangled.elf");
    let mut syms = Symbols::from_elf_file(&d).unwrap();
    let text = std::fs::read_to_string(dir().join("a64-fm.tarmac")).unwrap();
    let (_, tree) = tree_of(&text);
    let mangled = [
        ("fib", "_ZN4demo3fibEi"),
        ("helper", "_ZL6helperi"),
        ("other", "_ZN7mycrate5other17h0123456789abcdefE"),
    ];
    let demangled = [
        ("fib", "demo::fib(int)"),
        ("helper", "helper(int)"),
        ("other", "mycrate::other"),
    ];
    for (names, demangle) in [(&mangled, false), (&demangled, true)] {
        if demangle {
            syms.demangle();
        }
        for tool in ["profile", "calltree", "flamegraph"] {
            let golden = std::fs::read_to_string(dir().join(format!("a64-fm.{tool}"))).unwrap();
            let mut out = Vec::new();
            let n = Naming::new(Some(&syms));
            match tool {
                "profile" => tree.write_profile(&mut out, n),
                "calltree" => tree.write_calltree(&mut out, n),
                _ => tree.write_flamegraph(&mut out, n),
            }
            .unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                renamed(&golden, tool, names),
                "{tool}, demangle {demangle}"
            );
        }
    }
    assert_eq!(
        renamed("_start;fib;fib 63\n", "flamegraph", &demangled),
        "_start;demo::fib(int);demo::fib(int) 63\n"
    );
}

#[test]
fn demangle_leaves_other_names_alone() {
    use coresight_tarmac::symbols::demangle;
    assert_eq!(demangle("_ZN4demo3fibEi").as_deref(), Some("demo::fib(int)"));
    assert_eq!(
        demangle("_ZN7mycrate5other17h0123456789abcdefE").as_deref(),
        Some("mycrate::other")
    );
    assert_eq!(demangle("_RNvCs1234_7mycrate5other").as_deref(), Some("mycrate::other"));
    for plain in ["main", "_start", "_Z", "_Zgarbage", "$x", ""] {
        assert_eq!(demangle(plain), None, "{plain}");
    }
}

/// `tarmac-callinfo`'s answers on every trace, for each function by name
/// (`helper#1` the second static helper; `helper#2` and `nope` not found),
/// skip_fn's second instruction by address (executed in both calls of
/// skip_fn), an address never executed and an upper-case `0X`, which
/// upstream takes for a name (`fixtures/calls/callinfo.sh`).
#[test]
fn callinfo_equals_upstream_on_every_trace() {
    use coresight_tarmac::callinfo::{Query, write_callinfo};
    for (arch, step) in [("a64", 4), ("a32", 4), ("t32", 2)] {
        let syms = Symbols::from_elf_file(&dir().join(format!("{arch}.elf"))).unwrap();
        let mid = format!("{:#x}", (syms.find_by_name("skip_fn").unwrap().addr & !1) + step);
        let args = [
            "_start", "fib", "helper", "helper#1", "helper#2", "other", "skip_fn", "nope", &mid, "0x1", "0X10",
        ];
        let queries: Vec<Query> = args.iter().map(|a| Query::parse(a)).collect();
        assert_eq!(queries[8], Query::Addr(u64::from_str_radix(&mid[2..], 16).unwrap()));
        assert_eq!(queries[10], Query::Name("0X10".into()));
        for style in ["fm", "es", "gem5"] {
            let name = format!("{arch}-{style}");
            let text = std::fs::read(dir().join(format!("{name}.tarmac"))).unwrap();
            let mut r = Reader::new(&text[..]);
            let mut a = CallAnalyzer::new().with_watch(queries.iter().filter_map(|q| q.address(Some(&syms))));
            while let Some((pos, rec)) = r.next_record_with_offset().unwrap() {
                a.feed_at(&rec, pos);
            }
            let mut out = Vec::new();
            write_callinfo(&mut out, &queries, Some(&syms), &a, None).unwrap();
            let golden = std::fs::read_to_string(dir().join(format!("{name}.callinfo"))).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), golden, "{name}");
        }
    }
}
