//! Source line coverage of a real program: a small C program for AArch64
//! (tests/fixtures/cov-a64, rebuilt by its make.sh) whose execution under
//! qemu-aarch64, one instruction per block, was turned into a gnatcov
//! flat trace. binutils' addr2line gave the source line of every executed
//! instruction: our DWARF line mapping must agree for each, and the lcov
//! tracefile must mark exactly those lines hit.

#[allow(dead_code)]
#[path = "../trc_cov/lcov.rs"]
mod lcov;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cov-a64").join(name)
}

/// (address, line) per executed instruction, from addr2line.
fn oracle() -> Vec<(u64, u32)> {
    let text = std::fs::read_to_string(fixture("executed_lines.txt")).unwrap();
    text.lines()
        .map(|l| {
            let (a, loc) = l.split_once('\t').unwrap();
            // `file:line`, sometimes followed by ` (discriminator N)`.
            let loc = loc.split(" (").next().unwrap();
            let (file, line) = loc.rsplit_once(':').unwrap();
            assert!(file.ends_with("prog.c"), "{l}");
            (u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap(), line.trim().parse().unwrap())
        })
        .collect()
}

fn line_of(src: &str, text: &str) -> u32 {
    src.lines().position(|l| l.contains(text)).unwrap_or_else(|| panic!("no `{text}` in prog.c")) as u32 + 1
}

#[test]
fn every_executed_instruction_maps_to_its_line() {
    let table = lcov::LineTable::from_elf(&std::fs::read(fixture("prog.elf")).unwrap()).unwrap();
    let executed = oracle();
    assert!(executed.len() > 40, "{}", executed.len());
    for (addr, line) in &executed {
        let (f, l) = table.lookup(*addr).unwrap_or_else(|| panic!("{addr:#x}: no line"));
        assert_eq!(table.files[f], "prog.c");
        assert_eq!(l, *line, "{addr:#x}");
    }
    // Not an ELF, and an ELF without DWARF.
    assert!(lcov::LineTable::from_elf(b"#!/bin/sh").unwrap_err().starts_with("not an ELF file"));
}

#[test]
fn lcov_tracefile_marks_the_lines_that_ran() {
    let out = Command::new(env!("CARGO_BIN_EXE_trc_cov"))
        .args(["lcov", "--test-name", "qemu", "--elf"])
        .arg(fixture("prog.elf"))
        .arg(fixture("prog.trace"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let info = String::from_utf8(out.stdout).unwrap();
    assert!(info.starts_with("TN:qemu\nSF:prog.c\n"), "{info}");
    assert!(info.ends_with("end_of_record\n"));
    let hit: BTreeSet<u32> = info.lines().filter_map(|l| l.strip_prefix("DA:")?.strip_suffix(",1")?.parse().ok()).collect();
    let missed: BTreeSet<u32> = info.lines().filter_map(|l| l.strip_prefix("DA:")?.strip_suffix(",0")?.parse().ok()).collect();
    let want: BTreeSet<u32> = oracle().iter().map(|x| x.1).collect();
    assert_eq!(hit, want, "lines hit = lines of executed instructions");
    assert!(hit.is_disjoint(&missed));
    let src = std::fs::read_to_string(fixture("prog.c")).unwrap();
    for never in ["return v * 3 + 1;", "a = never_called(a);"] {
        assert!(missed.contains(&line_of(&src, never)), "{never}");
    }
    assert!(info.contains("\nFNDA:0,never_called\n") && info.contains("\nFNDA:1,main\n") && info.contains("\nFNDA:1,classify\n"));
    assert!(info.contains("\nFNF:6\nFNH:5\n"), "{info}");
    // `if (v < 0)`: classify(5) and classify(-2) went both ways.
    let l = line_of(&src, "if (v < 0)");
    assert!(info.contains(&format!("\nBRDA:{l},0,0,1\nBRDA:{l},0,1,1\n")), "{info}");
    // `if (s > 100)` is false: the branch over its body was always taken.
    let l = line_of(&src, "if (s > 100)");
    assert!(info.contains(&format!("\nBRDA:{l},0,0,1\nBRDA:{l},0,1,0\n")), "{info}");
    assert!(info.contains(&format!("\nLF:{}\nLH:{}\n", hit.len() + missed.len(), want.len())), "{info}");
}
