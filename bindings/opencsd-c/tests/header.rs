//! The crate's header (`include/opencsd_c_api.h`) against the Rust
//! source: every `ocsd_*` function the library exports (`#[unsafe(no_mangle)]`
//! on a `pub extern "C" fn` or `pub unsafe extern "C" fn`) is declared in
//! the header with the same number of parameters, and the header declares
//! no function the library lacks. Reads text only: nothing to install.

use std::collections::BTreeMap;
use std::path::Path;

/// The text between the parenthesis at `open` and its match.
fn paren_body(s: &str, open: usize) -> &str {
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &s[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses after {:?}", &s[open..(open + 40).min(s.len())]);
}

/// Parameters in a parameter list: commas outside any bracket, a trailing
/// comma not counted; `void` alone (C) is none.
fn count_params(list: &str) -> usize {
    let t = list.trim();
    if t.is_empty() || t == "void" {
        return 0;
    }
    let (mut depth, mut n, mut last_non_space) = (0i32, 1, ' ');
    for c in t.chars() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => n += 1,
            _ => {}
        }
        if !c.is_whitespace() {
            last_non_space = c;
        }
    }
    if last_non_space == ',' { n - 1 } else { n }
}

fn strip_comments(s: &str, line: &str, block: Option<(&str, &str)>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    if let Some((open, close)) = block {
        let mut joined = String::new();
        while let Some(a) = rest.find(open) {
            joined.push_str(&rest[..a]);
            rest = &rest[a + open.len()..];
            rest = &rest[rest.find(close).map_or(rest.len(), |b| b + close.len())..];
        }
        joined.push_str(rest);
        for l in joined.lines() {
            out.push_str(l.split(line).next().unwrap_or(""));
            out.push('\n');
        }
    } else {
        for l in s.lines() {
            out.push_str(l.split(line).next().unwrap_or(""));
            out.push('\n');
        }
    }
    out
}

/// `ocsd_*` functions exported by the Rust source, with their parameter
/// counts.
fn rust_exports() -> BTreeMap<String, usize> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut m = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let src = strip_comments(&std::fs::read_to_string(&path).unwrap(), "//", None);
        let mut at = 0;
        while let Some(p) = src[at..].find("#[unsafe(no_mangle)]") {
            let start = at + p;
            at = start + 1;
            // The item the attribute is on: up to its parameter list.
            let item = &src[start..];
            let Some(fn_at) = item.find(" fn ") else { continue };
            let head = &item[..fn_at];
            assert!(
                head.contains("pub extern \"C\"") || head.contains("pub unsafe extern \"C\""),
                "{}: no_mangle on something not a `pub extern \"C\" fn`: {head}",
                path.display()
            );
            let name_at = fn_at + 4;
            let open = name_at + item[name_at..].find('(').unwrap();
            let name = item[name_at..open].trim().to_string();
            if name.starts_with("ocsd_") {
                let n = count_params(paren_body(item, open));
                assert!(m.insert(name.clone(), n).is_none(), "{name} exported twice");
            }
        }
    }
    m
}

/// Functions the header declares (`OCSD_C_API ... ocsd_name(...);`), with
/// their parameter counts.
fn header_decls() -> BTreeMap<String, usize> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/opencsd_c_api.h");
    let src = strip_comments(&std::fs::read_to_string(path).unwrap(), "//", Some(("/*", "*/")));
    let mut m = BTreeMap::new();
    let mut at = 0;
    while let Some(p) = src[at..].find("OCSD_C_API ") {
        let start = at + p;
        at = start + 1;
        // The macro's own definitions (`#define OCSD_C_API ...`).
        if src[..start].ends_with("#define ") {
            continue;
        }
        let decl = &src[start..];
        let open = decl.find('(').unwrap();
        let name = decl[..open]
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap()
            .to_string();
        let n = count_params(paren_body(decl, open));
        assert!(m.insert(name.clone(), n).is_none(), "{name} declared twice");
    }
    m
}

#[test]
fn parameter_counting() {
    assert_eq!(count_params(" void "), 0);
    assert_eq!(count_params(""), 0);
    assert_eq!(
        count_params("a: u8,\n b: Option<unsafe extern \"C\" fn(x: u8, y: u8)>,\n"),
        2
    );
    assert_eq!(count_params("const char *name, ocsd_extern_dcd_fact_t *p"), 2);
}

#[test]
fn header_declares_every_export_with_its_parameter_count() {
    let rust = rust_exports();
    let header = header_decls();
    assert!(rust.len() >= 30, "only {} exports found: {rust:?}", rust.len());
    let mut bad = Vec::new();
    for (name, n) in &rust {
        match header.get(name) {
            Some(h) if h == n => {}
            Some(h) => bad.push(format!("{name}: {n} parameters in Rust, {h} in the header")),
            None => bad.push(format!("{name}: exported, not in the header")),
        }
    }
    for name in header.keys().filter(|k| !rust.contains_key(*k)) {
        bad.push(format!("{name}: in the header, not exported"));
    }
    println!("{} functions compared", rust.len());
    assert!(bad.is_empty(), "header and exports differ:\n{}", bad.join("\n"));
}
