//! `cargo install --path tools` installs every program: the programs cargo
//! finds in this crate (its `[[bin]]` sections and `src/bin/`, discovered as
//! cargo discovers them) are exactly those the README's "Installing the
//! programs" paragraph names, those of its table of programs, and those of
//! this crate's description. None needs a feature `cargo install` would not
//! turn on. `.ci/run` runs the real `cargo install --path tools` and checks
//! the installed list against `src/bin/` too.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn tools_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The spans between backquotes in `text`.
fn backquoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The programs of this crate as cargo finds them: `src/main.rs` (named
/// after the package), `src/bin/NAME.rs`, `src/bin/NAME/main.rs`, and the
/// `[[bin]]` sections of Cargo.toml.
fn cargo_programs(manifest: &str) -> BTreeSet<String> {
    let mut bins = BTreeSet::new();
    // Discovery is on unless the manifest turns it off.
    let autobins = !manifest.lines().any(|l| l.replace(' ', "") == "autobins=false");
    if autobins {
        if tools_dir().join("src/main.rs").is_file() {
            bins.insert("coresight-tools".to_string());
        }
        for entry in fs::read_dir(tools_dir().join("src/bin")).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.extension().is_some_and(|e| e == "rs") || path.join("main.rs").is_file() {
                bins.insert(name);
            }
        }
    }
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(v) = line.strip_prefix("name") {
            let name = v.trim_start().trim_start_matches('=').trim().trim_matches('"');
            bins.insert(name.to_string());
        }
    }
    bins
}

#[test]
fn cargo_install_path_tools_installs_every_program_the_readme_lists() {
    let manifest = read(&tools_dir().join("Cargo.toml"));
    let readme = read(&tools_dir().join("../README.md"));
    let bins = cargo_programs(&manifest);
    // The ones that used to live in a crate of their own.
    for p in ["trc_regress", "trc_diff", "trc_pkt_lister"] {
        assert!(bins.contains(p), "{p} is not a program of coresight-tools: {bins:?}");
    }
    // cargo install builds the default features; a program that needs
    // another would be left out silently.
    assert!(
        !manifest.contains("required-features"),
        "a program of tools/Cargo.toml has required-features: cargo install may leave it out"
    );

    // README: "`cargo install --path tools` ... installs every program (`a`, `b`, ...)".
    let para = readme
        .split("\n\n")
        .find(|p| p.starts_with("**Installing the programs:**"))
        .expect("README has an 'Installing the programs' paragraph");
    assert!(para.contains("`cargo install --path tools`"), "{para}");
    let listed = para
        .split_once("installs every program (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list)
        .unwrap_or_else(|| panic!("no 'installs every program (...)' in: {para}"));
    let install_list: BTreeSet<String> = backquoted(listed).into_iter().map(String::from).collect();
    assert_eq!(
        install_list, bins,
        "README's install paragraph against the crate's programs"
    );

    // README's table of programs under "## Command-line tools".
    let section = readme
        .split_once("\n## Command-line tools\n")
        .map(|(_, s)| s.split("\n## ").next().unwrap_or(s))
        .expect("README has a 'Command-line tools' section");
    let header = "| program | what it does |";
    let table = section
        .split_once(header)
        .map(|(_, t)| t)
        .expect("its table of programs");
    let table_list: BTreeSet<String> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| backquoted(l).first().map(|s| s.to_string()))
        .collect();
    assert_eq!(
        table_list, bins,
        "README's table of programs against the crate's programs"
    );

    // The crate's description lists them for crates.io.
    let description = manifest
        .lines()
        .find_map(|l| l.strip_prefix("description = \""))
        .and_then(|d| d.split_once(": "))
        .map(|(_, list)| list.trim_end_matches('"'))
        .expect("a description naming the programs after ': '");
    let described: BTreeSet<String> = description.split(", ").map(String::from).collect();
    assert_eq!(
        described, bins,
        "tools/Cargo.toml's description against the crate's programs"
    );
}
