//! The library's public API, listed from its source, must equal
//! `tests/public-api.txt`: a change to the public surface (an item added,
//! removed or renamed, a signature, a field or a variant changed) fails
//! this test until the list is updated with
//! `PUBLIC_API_UPDATE=1 cargo test --test public_api`, so every change to
//! the API is seen in review and in the changelog.
//!
//! Items are followed from `src/lib.rs` through every module declaration
//! (a private module's `pub` items reach users through re-exports, which
//! are listed as `use` lines); `#[doc(hidden)]` and `#[cfg(test)]` items
//! are left out.

use std::path::{Path, PathBuf};

use quote::ToTokens;
use syn::{Attribute, Fields, ImplItem, Item, TraitItem, Visibility};

fn is_pub(v: &Visibility) -> bool {
    matches!(v, Visibility::Public(_))
}

fn skipped(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        let t = a.to_token_stream().to_string();
        t.contains("doc (hidden)") || t.contains("cfg (test)") || t.contains("cfg (doctest)")
    })
}

fn non_exhaustive(attrs: &[Attribute]) -> &'static str {
    if attrs.iter().any(|a| a.path().is_ident("non_exhaustive")) {
        "#[non_exhaustive] "
    } else {
        ""
    }
}

fn tokens(t: &impl ToTokens) -> String {
    t.to_token_stream().to_string()
}

fn fields(out: &mut Vec<String>, owner: &str, f: &Fields, all: bool) {
    for (i, field) in f.iter().enumerate() {
        if all || is_pub(&field.vis) {
            let name = field.ident.as_ref().map_or(i.to_string(), ToString::to_string);
            out.push(format!("field {owner}.{name}: {}", tokens(&field.ty)));
        }
    }
}

fn items(out: &mut Vec<String>, module: &str, file_dir: &Path, list: &[Item]) {
    for item in list {
        match item {
            // Private modules too: their `pub` items reach users through
            // re-exports (`pub use generic::*`), which name no item.
            Item::Mod(m) if !skipped(&m.attrs) => {
                let path = format!("{module}::{}", m.ident);
                out.push(format!("{} {path}", if is_pub(&m.vis) { "mod" } else { "private mod" }));
                match &m.content {
                    Some((_, inner)) => items(out, &path, &file_dir.join(m.ident.to_string()), inner),
                    None => {
                        let name = m.ident.to_string();
                        let (file, dir) = if file_dir.join(format!("{name}.rs")).exists() {
                            (file_dir.join(format!("{name}.rs")), file_dir.join(&name))
                        } else {
                            (file_dir.join(&name).join("mod.rs"), file_dir.join(&name))
                        };
                        module_file(out, &path, &file, &dir);
                    }
                }
            }
            Item::Use(u) if is_pub(&u.vis) && !skipped(&u.attrs) => {
                out.push(format!("use {module}: {}", tokens(&u.tree)))
            }
            Item::Fn(f) if is_pub(&f.vis) && !skipped(&f.attrs) => out.push(format!("fn {module}::{}", tokens(&f.sig))),
            Item::Struct(s) if is_pub(&s.vis) && !skipped(&s.attrs) => {
                let path = format!("{module}::{}", s.ident);
                out.push(format!(
                    "{}struct {path}{}",
                    non_exhaustive(&s.attrs),
                    tokens(&s.generics)
                ));
                fields(out, &path, &s.fields, false);
            }
            Item::Enum(e) if is_pub(&e.vis) && !skipped(&e.attrs) => {
                let path = format!("{module}::{}", e.ident);
                out.push(format!(
                    "{}enum {path}{}",
                    non_exhaustive(&e.attrs),
                    tokens(&e.generics)
                ));
                for v in &e.variants {
                    out.push(format!("variant {path}::{}", v.ident));
                    fields(out, &format!("{path}::{}", v.ident), &v.fields, true);
                }
            }
            Item::Trait(t) if is_pub(&t.vis) && !skipped(&t.attrs) => {
                let path = format!("{module}::{}", t.ident);
                out.push(format!(
                    "trait {path}{}: {}",
                    tokens(&t.generics),
                    tokens(&t.supertraits)
                ));
                for ti in &t.items {
                    match ti {
                        TraitItem::Fn(f) => out.push(format!("fn {path}::{}", tokens(&f.sig))),
                        TraitItem::Type(ty) => out.push(format!("type {path}::{}", ty.ident)),
                        TraitItem::Const(c) => out.push(format!("const {path}::{}: {}", c.ident, tokens(&c.ty))),
                        _ => {}
                    }
                }
            }
            Item::Type(t) if is_pub(&t.vis) && !skipped(&t.attrs) => out.push(format!(
                "type {module}::{}{} = {}",
                t.ident,
                tokens(&t.generics),
                tokens(&t.ty)
            )),
            Item::Const(c) if is_pub(&c.vis) && !skipped(&c.attrs) => {
                out.push(format!("const {module}::{}: {}", c.ident, tokens(&c.ty)))
            }
            Item::Static(s) if is_pub(&s.vis) && !skipped(&s.attrs) => {
                out.push(format!("static {module}::{}: {}", s.ident, tokens(&s.ty)))
            }
            Item::Impl(i) if !skipped(&i.attrs) => {
                let ty = tokens(&i.self_ty);
                match &i.trait_ {
                    Some((_, tr, _)) => out.push(format!("impl {module}: {} for {ty}", tokens(tr))),
                    None => {
                        for ii in &i.items {
                            if let ImplItem::Fn(f) = ii
                                && is_pub(&f.vis)
                                && !skipped(&f.attrs)
                            {
                                out.push(format!("fn {module}::{ty}::{}", tokens(&f.sig)));
                            }
                            if let ImplItem::Const(c) = ii
                                && is_pub(&c.vis)
                                && !skipped(&c.attrs)
                            {
                                out.push(format!("const {module}::{ty}::{}: {}", c.ident, tokens(&c.ty)));
                            }
                        }
                    }
                }
            }
            Item::Macro(m) if !skipped(&m.attrs) => {
                // Items a macro makes (ErrCode's variants): the invocation's
                // text stands for them.
                out.push(format!("macro {module}: {}", tokens(&m.mac)))
            }
            _ => {}
        }
    }
}

fn module_file(out: &mut Vec<String>, module: &str, file: &Path, dir: &Path) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    items(out, module, dir, &parsed.items);
}

fn public_api() -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    module_file(&mut out, "coresight_decode", &src.join("lib.rs"), &src);
    out.sort();
    out.dedup();
    out.join("\n") + "\n"
}

#[test]
fn the_public_api_is_the_one_recorded() {
    let recorded = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/public-api.txt");
    let now = public_api();
    if std::env::var_os("PUBLIC_API_UPDATE").is_some() {
        std::fs::write(&recorded, &now).unwrap();
        return;
    }
    let before = std::fs::read_to_string(&recorded).unwrap_or_default();
    if before != now {
        let old: std::collections::BTreeSet<&str> = before.lines().collect();
        let new: std::collections::BTreeSet<&str> = now.lines().collect();
        let mut diff = String::new();
        for l in old.difference(&new) {
            diff.push_str(&format!("- {l}\n"));
        }
        for l in new.difference(&old) {
            diff.push_str(&format!("+ {l}\n"));
        }
        panic!(
            "the public API changed (update tests/public-api.txt with PUBLIC_API_UPDATE=1 cargo test --test public_api, and say so in CHANGELOG.md):\n{diff}"
        );
    }
}

/// The lister sees an item added to a module, a field made public and a
/// variant added, and not items that are private, hidden or only for
/// tests.
#[test]
fn the_listing_sees_what_a_user_sees() {
    let src = syn::parse_file(
        r#"
        pub mod a {
            pub struct S { pub x: u32, y: u8 }
            #[non_exhaustive] pub enum E { One, Two(u8) }
            impl S { pub fn new() -> S { todo!() } fn private(&self) {} }
            #[doc(hidden)] pub fn hidden() {}
            #[cfg(test)] pub fn for_tests() {}
            pub(crate) fn inner() {}
        }
        mod private { pub fn f() {} }
        pub use a::S as T;
        "#,
    )
    .unwrap();
    let mut out = Vec::new();
    items(&mut out, "k", Path::new("/nonexistent"), &src.items);
    out.sort();
    assert_eq!(
        out,
        [
            "#[non_exhaustive] enum k::a::E",
            "field k::a::E::Two.0: u8",
            "field k::a::S.x: u32",
            "fn k::a::S::fn new () -> S",
            "fn k::private::fn f ()",
            "mod k::a",
            "private mod k::private",
            "struct k::a::S",
            "use k: a :: S as T",
            "variant k::a::E::One",
            "variant k::a::E::Two",
        ]
    );
}
