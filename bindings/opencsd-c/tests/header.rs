//! The crate's header (`include/opencsd_c_api.h`) against the Rust
//! source, for each ABI: every `ocsd_*` function the library exports in
//! that build (`#[unsafe(no_mangle)]` on a `pub extern "C" fn` or `pub
//! unsafe extern "C" fn`, under `#[cfg(feature = "opencsd-1-8")]` for the
//! 1.8.x build only) is declared in the header's variant for it (the
//! `OCSD_C_API_ABI_1_8` sections in or out) with the same number of
//! parameters, and the header declares no function the library lacks. The
//! pkg-config data of each ABI names its version and its header variant.
//! Reads text only: nothing to install.

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

/// The two ABIs the library builds for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Abi {
    V1_3,
    V1_8,
}

/// `ocsd_*` functions exported by the Rust source in the build for `abi`,
/// with their parameter counts.
fn rust_exports(abi: Abi) -> BTreeMap<String, usize> {
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
            // The attributes before this one: a cfg on the feature.
            let attrs = src[..start].trim_end();
            let only_18 = attrs.ends_with("#[cfg(feature = \"opencsd-1-8\")]");
            let not_18 = attrs.ends_with("#[cfg(not(feature = \"opencsd-1-8\"))]");
            if (only_18 && abi == Abi::V1_3) || (not_18 && abi == Abi::V1_8) {
                continue;
            }
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

/// The header's text for `abi`: `#ifdef OCSD_C_API_ABI_1_8` / `#ifndef`
/// sections (with their `#else`) kept or dropped; other conditionals kept
/// whole.
fn header_variant(src: &str, abi: Abi) -> String {
    // One entry per open conditional: Some(keep) for the ABI's own,
    // None for any other (both branches kept).
    let mut stack: Vec<Option<bool>> = Vec::new();
    let mut out = String::new();
    for line in src.lines() {
        let t = line.trim();
        let on_18 = abi == Abi::V1_8;
        if t == "#ifdef OCSD_C_API_ABI_1_8" {
            stack.push(Some(on_18));
        } else if t == "#ifndef OCSD_C_API_ABI_1_8" {
            stack.push(Some(!on_18));
        } else if t.starts_with("#if") {
            stack.push(None);
        } else if t.starts_with("#else") {
            if let Some(Some(k)) = stack.last_mut() {
                *k = !*k;
            }
        } else if t.starts_with("#endif") {
            assert!(stack.pop().is_some(), "#endif without #if");
        } else if stack.iter().all(|k| k.unwrap_or(true)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(stack.is_empty(), "unterminated conditional in the header");
    out
}

fn header_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/opencsd_c_api.h");
    strip_comments(&std::fs::read_to_string(path).unwrap(), "//", Some(("/*", "*/")))
}

/// Functions the header's variant for `abi` declares (`OCSD_C_API ...
/// ocsd_name(...);`), with their parameter counts.
fn header_decls(abi: Abi) -> BTreeMap<String, usize> {
    let src = header_variant(&header_text(), abi);
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
fn header_variants_keep_their_sections() {
    let src = "a\n#ifdef OCSD_C_API_ABI_1_8\nb\n#else\nc\n#ifdef __cplusplus\nd\n#endif\n#endif\ne\n";
    assert_eq!(header_variant(src, Abi::V1_8), "a\nb\ne\n");
    assert_eq!(header_variant(src, Abi::V1_3), "a\nc\nd\ne\n");
}

#[test]
fn header_declares_every_export_with_its_parameter_count() {
    for abi in [Abi::V1_3, Abi::V1_8] {
        compare_exports(abi);
    }
    // The one function only 1.8.x has.
    assert!(!header_decls(Abi::V1_3).contains_key("ocsd_dt_set_mem_acc_cacheing"));
    assert!(rust_exports(Abi::V1_8).contains_key("ocsd_dt_set_mem_acc_cacheing"));
}

/// The version macros of the header's variant for `abi`.
fn header_version(abi: Abi) -> String {
    let src = header_variant(&header_text(), abi);
    let line = src
        .lines()
        .find(|l| l.starts_with("#define OCSD_VER_STRING "))
        .expect("OCSD_VER_STRING in the header");
    line.trim_start_matches("#define OCSD_VER_STRING ")
        .trim()
        .trim_matches('"')
        .to_string()
}

/// The pkg-config file for `abi` names that ABI's version, selects the
/// header's variant for it, and points at the installed header.
#[test]
fn pkg_config_data_matches_each_abi() {
    for (abi, dir, version) in [(Abi::V1_3, "1.3", "1.3.3"), (Abi::V1_8, "1.8", "1.8.0")] {
        assert_eq!(header_version(abi), version);
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("pkgconfig/{dir}/opencsd_c_api.pc"));
        let pc = std::fs::read_to_string(&path).unwrap();
        let field = |name: &str| {
            pc.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("{}: no {name}", path.display()))
                .trim()
                .to_string()
        };
        assert_eq!(field("Version:"), version, "{}", path.display());
        let cflags = field("Cflags:");
        assert_eq!(
            cflags.split_whitespace().any(|f| f == "-DOCSD_C_API_ABI_1_8"),
            abi == Abi::V1_8,
            "{}: {cflags}",
            path.display()
        );
        assert!(cflags.split_whitespace().any(|f| f == "-I${includedir}"), "{cflags}");
        assert_eq!(field("Libs:"), "-L${libdir} -lopencsd_c_api");
        assert_eq!(field("includedir="), "${prefix}/include/coresight-opencsd-c");
    }
    // And the library reports the version of the ABI it is built for.
    let built = if cfg!(feature = "opencsd-1-8") {
        Abi::V1_8
    } else {
        Abi::V1_3
    };
    assert_eq!(
        opencsd_c_api::abi::OCSD_VER_STRING.to_str().unwrap(),
        header_version(built)
    );
}

fn compare_exports(abi: Abi) {
    let rust = rust_exports(abi);
    let header = header_decls(abi);
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
    println!("{abi:?}: {} functions compared", rust.len());
    assert!(
        bad.is_empty(),
        "{abi:?}: header and exports differ:\n{}",
        bad.join("\n")
    );
}
