//! The library's layers import only downwards.
//!
//! The layer list is read from `ARCHITECTURE.md` (its ```layers block: one
//! layer a line, bottom first, `name: module module ...`). Every `crate::`
//! path in every file of `src/` is checked against it: a module may name
//! modules of its own layer and of the layers below, never above. Modules
//! of one layer must not import each other in a loop either. A module
//! missing from the list, or listed but absent, is an error too, so the
//! list stays the whole map.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One layer: its name and its top-level modules.
struct Layer {
    name: String,
    modules: Vec<String>,
}

/// The ```layers block of `ARCHITECTURE.md`.
fn read_layers(text: &str) -> Result<Vec<Layer>, String> {
    let start = text
        .find("```layers\n")
        .ok_or("ARCHITECTURE.md has no ```layers block")?
        + "```layers\n".len();
    let len = text[start..]
        .find("```")
        .ok_or("ARCHITECTURE.md: the ```layers block is not closed")?;
    let mut layers = Vec::new();
    for (n, line) in text[start..start + len].lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (name, mods) = line.split_once(':').ok_or_else(|| {
            format!(
                "ARCHITECTURE.md layers line {}: expected 'name: module ...', found '{line}'",
                n + 1
            )
        })?;
        layers.push(Layer {
            name: name.trim().to_string(),
            modules: mods.split_whitespace().map(str::to_string).collect(),
        });
    }
    Ok(layers)
}

/// The text with comments (line and block) and string literals blanked,
/// line breaks kept, so that line numbers stay right.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('"' or '\n'), not a lifetime.
            let end = text[i + 1..].find('\'').map_or(b.len(), |k| i + 2 + k);
            i = end.max(i + 1);
            out.push_str("' '");
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The top-level modules a file's code names through `crate::`, each with
/// the line it is named on.
fn imports(code: &str) -> Vec<(String, usize)> {
    let ident = |s: &str| {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<String>()
    };
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("crate::") {
        let at = from + k;
        from = at + "crate::".len();
        // `$crate::` in a macro, or a path like `coresight_decode::...`.
        if at > 0 && (code.as_bytes()[at - 1].is_ascii_alphanumeric() || matches!(code.as_bytes()[at - 1], b'_' | b'$'))
        {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // use crate::{a, b::c, d::{e, f}}: the first segment of each item.
            let mut depth = 0;
            let mut item_start = true;
            for (j, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && depth == 0 && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[j..]);
                        if !name.is_empty() {
                            found.push((name, line_of(from + 1 + j)));
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.push((name, line_of(at)));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Every breach of the layering in the crate whose sources are in `src`:
/// upward imports (`file:line: ...`), loops within a layer, and modules
/// missing from or absent for the list.
fn check(src: &Path, layers: &[Layer]) -> Vec<String> {
    let mut level: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for (n, layer) in layers.iter().enumerate() {
        for m in &layer.modules {
            if level.insert(m, n).is_some() {
                problems.push(format!("module '{m}' is listed in two layers"));
            }
        }
    }
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut present = BTreeSet::new();
    // Edges between modules of the same layer, for the loop check.
    let mut same_layer: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let rel = path.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue; // the crate root: re-exports from every layer
        }
        present.insert(module.clone());
        let Some(&mine) = level.get(module.as_str()) else {
            problems.push(format!(
                "src/{}: module '{module}' is in no layer of ARCHITECTURE.md",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(path).unwrap();
        for (target, line) in imports(&code_only(&text)) {
            if target == module {
                continue;
            }
            match level.get(target.as_str()) {
                // Not a module of ours: a crate-root item such as a macro
                // or a re-export at the root.
                None => {}
                Some(&theirs) if theirs > mine => problems.push(format!(
                    "src/{}:{line}: '{module}' (layer {}) imports crate::{target} (layer {}, above it)",
                    rel.display(),
                    layers[mine].name,
                    layers[theirs].name
                )),
                Some(&theirs) if theirs == mine => {
                    same_layer.entry(module.clone()).or_default().insert(target.clone());
                }
                Some(_) => {}
            }
        }
    }
    for m in level.keys() {
        if !present.contains(*m) {
            problems.push(format!("ARCHITECTURE.md lists module '{m}', which src/ does not have"));
        }
    }
    problems.extend(
        loops(&same_layer)
            .into_iter()
            .map(|l| format!("modules import each other in a loop: {}", l.join(" -> "))),
    );
    problems
}

/// Loops in a module graph: for each module on one, the path back to it.
fn loops(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn reach(
        edges: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        goal: &str,
        seen: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> bool {
        for next in edges.get(from).into_iter().flatten() {
            if next == goal {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if reach(edges, next, goal, seen, path) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut found = Vec::new();
    for m in edges.keys() {
        let mut path = vec![m.clone()];
        if reach(edges, m, m, &mut BTreeSet::new(), &mut path) {
            found.push(path);
        }
    }
    found
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_library_imports_only_downwards() {
    let arch = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let layers = read_layers(&arch).unwrap();
    assert!(layers.len() >= 5, "ARCHITECTURE.md lists {} layers", layers.len());
    let problems = check(&root().join("src"), &layers);
    assert!(problems.is_empty(), "layering broken:\n{}", problems.join("\n"));
}

/// A tree with an upward import, a loop within a layer and an unlisted
/// module fails, naming the file and line.
#[test]
fn an_upward_import_is_caught() {
    let dir = std::env::temp_dir().join(format!("layers-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("low")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(dir.join(p), t).unwrap();
    write("lib.rs", "pub mod low;\npub mod high;\npub mod a;\npub mod b;\n");
    write(
        "low/mod.rs",
        "//! crate::high in a comment is fine\nuse std::fmt;\nconst S: &str = \"crate::high\";\n\nuse crate::{\n    a::X,\n    high::Thing,\n};\n",
    );
    write("high.rs", "use crate::low::Low;\n");
    write("a.rs", "use crate::b::B;\n");
    write("b.rs", "pub fn f() { crate::a::g() }\n");
    write("extra.rs", "\n");
    let layers = read_layers("```layers\nbottom: low a b\ntop: high\n```\n").unwrap();
    let problems = check(&dir, &layers);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        problems,
        [
            "src/extra.rs: module 'extra' is in no layer of ARCHITECTURE.md",
            "src/low/mod.rs:7: 'low' (layer bottom) imports crate::high (layer top, above it)",
            "modules import each other in a loop: a -> b -> a",
            "modules import each other in a loop: b -> a -> b",
        ]
    );
}
