//! Source line coverage: instruction coverage mapped to source lines with
//! the ELF's DWARF line tables, written as an lcov tracefile.
//!
//! A line is hit when an instruction the line table gives it ran (lcov's
//! `DA` count is 1 or 0: a flat trace says whether code ran, not how many
//! times). A function (`FN`/`FNDA`) is a routine, at the line of its first
//! instruction. Each conditional branch gives two `BRDA` branches, taken
//! and not taken: `1` if it went that way, `0` if not, `-` if it never ran.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use coresight_gnatcov::coverage::{Coverage, InsnState};
use gimli::{EndianSlice, RunTimeEndian};

/// Address ranges to (file, line).
#[derive(Debug)]
pub struct LineTable {
    /// Source file paths (normalised), by index.
    pub files: Vec<String>,
    /// (start, end, file index, line), sorted by start.
    pub rows: Vec<(u64, u64, usize, u32)>,
}

impl LineTable {
    /// The line table of an ELF file's `.debug_line` (an error without one).
    pub fn from_elf(bytes: &[u8]) -> Result<LineTable, String> {
        let elf = goblin::elf::Elf::parse(bytes).map_err(|e| format!("not an ELF file: {e}"))?;
        let endian = if elf.little_endian {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let section = |name: &str| -> &[u8] {
            elf.section_headers
                .iter()
                .find(|sh| {
                    elf.shdr_strtab.get_at(sh.sh_name) == Some(name)
                        && sh.sh_type != goblin::elf::section_header::SHT_NOBITS
                })
                .and_then(|sh| {
                    bytes.get(sh.sh_offset as usize..(sh.sh_offset as usize).checked_add(sh.sh_size as usize)?)
                })
                .unwrap_or(&[])
        };
        if section(".debug_line").is_empty() {
            return Err("no DWARF line table (.debug_line): build with -g".into());
        }
        let load = |id: gimli::SectionId| -> Result<EndianSlice<'_, RunTimeEndian>, gimli::Error> {
            Ok(EndianSlice::new(section(id.name()), endian))
        };
        let dwarf = gimli::Dwarf::load(load).map_err(|e| format!("DWARF: {e}"))?;
        let mut files: Vec<String> = Vec::new();
        let mut file_ids: BTreeMap<String, usize> = BTreeMap::new();
        let mut rows = Vec::new();
        let mut units = dwarf.units();
        while let Some(header) = units.next().map_err(|e| format!("DWARF unit: {e}"))? {
            let unit = dwarf.unit(header).map_err(|e| format!("DWARF unit: {e}"))?;
            let Some(program) = unit.line_program.clone() else {
                continue;
            };
            let comp_dir = unit
                .comp_dir
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut seq: Vec<(u64, usize, u32)> = Vec::new();
            let mut r = program.rows();
            while let Some((h, row)) = r.next_row().map_err(|e| format!("DWARF line program: {e}"))? {
                if row.end_sequence() {
                    for (i, &(a, f, l)) in seq.iter().enumerate() {
                        let end = seq.get(i + 1).map_or(row.address(), |n| n.0);
                        if end > a && l > 0 {
                            rows.push((a, end, f, l));
                        }
                    }
                    seq.clear();
                    continue;
                }
                let Some(file) = row.file(h) else { continue };
                let name = dwarf
                    .attr_string(&unit, file.path_name())
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let dir = file
                    .directory(h)
                    .and_then(|d| dwarf.attr_string(&unit, d).ok())
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let mut p = PathBuf::new();
                if !Path::new(&dir).is_absolute() {
                    p.push(&comp_dir);
                }
                p.push(&dir);
                p.push(&name);
                let path = normalise(&p);
                let id = *file_ids.entry(path.clone()).or_insert_with(|| {
                    files.push(path);
                    files.len() - 1
                });
                let line = row.line().map_or(0, |l| l.get() as u32);
                seq.push((row.address(), id, line));
            }
        }
        rows.sort_by_key(|r| (r.0, r.1));
        Ok(LineTable { files, rows })
    }

    /// File index and line of the instruction at `addr`.
    pub fn lookup(&self, addr: u64) -> Option<(usize, u32)> {
        let i = self.rows.partition_point(|r| r.0 <= addr);
        let r = self.rows.get(i.checked_sub(1)?)?;
        (addr < r.1).then_some((r.2, r.3))
    }
}

/// `a/./b/../c` as `a/c` (without touching the file system).
fn normalise(p: &Path) -> String {
    let mut out: Vec<String> = Vec::new();
    let abs = p.is_absolute();
    for c in p.components() {
        match c {
            std::path::Component::CurDir | std::path::Component::RootDir | std::path::Component::Prefix(_) => {}
            std::path::Component::ParentDir => {
                if out.last().is_some_and(|l| l != "..") {
                    out.pop();
                } else if !abs {
                    out.push("..".into());
                }
            }
            std::path::Component::Normal(s) => out.push(s.to_string_lossy().into_owned()),
        }
    }
    let s = out.join("/");
    if abs { format!("/{s}") } else { s }
}

#[derive(Default)]
struct FileCov {
    /// line -> hit
    lines: BTreeMap<u32, bool>,
    /// (line, name, hit)
    functions: Vec<(u32, String, bool)>,
    /// (line, taken, not taken) per conditional branch; None: never ran.
    branches: Vec<(u32, Option<(bool, bool)>)>,
}

/// The lcov tracefile of `cov` (files in name order).
pub fn tracefile(test_name: &str, cov: &Coverage, lines: &LineTable) -> String {
    let mut files: BTreeMap<usize, FileCov> = BTreeMap::new();
    for rc in &cov.routines {
        if let Some((f, l)) = rc.insns.first().and_then(|i| lines.lookup(i.insn.addr)) {
            files
                .entry(f)
                .or_default()
                .functions
                .push((l, rc.routine.name.clone(), rc.summary.covered > 0));
        }
        for ic in &rc.insns {
            let Some((f, l)) = lines.lookup(ic.insn.addr) else {
                continue;
            };
            let fc = files.entry(f).or_default();
            let ran = ic.state != InsnState::NotCovered;
            *fc.lines.entry(l).or_default() |= ran;
            if ic.insn.cond_branch {
                let o = match ic.state {
                    InsnState::NotCovered => None,
                    InsnState::BothTaken => Some((true, true)),
                    InsnState::BranchTaken => Some((true, false)),
                    InsnState::FallthroughTaken => Some((false, true)),
                    InsnState::Covered => Some((false, false)),
                };
                fc.branches.push((l, o));
            }
        }
    }
    let mut order: Vec<(&str, &FileCov)> = files.iter().map(|(f, c)| (lines.files[*f].as_str(), c)).collect();
    order.sort_by_key(|x| x.0);
    let mut out = String::new();
    for (name, fc) in order {
        let _ = writeln!(out, "TN:{test_name}\nSF:{name}");
        for (l, n, _) in &fc.functions {
            let _ = writeln!(out, "FN:{l},{n}");
        }
        for (_, n, hit) in &fc.functions {
            let _ = writeln!(out, "FNDA:{},{n}", *hit as u32);
        }
        let _ = writeln!(
            out,
            "FNF:{}\nFNH:{}",
            fc.functions.len(),
            fc.functions.iter().filter(|f| f.2).count()
        );
        let mut block_of_line: BTreeMap<u32, u32> = BTreeMap::new();
        let (mut brf, mut brh) = (0, 0);
        let mut branches = fc.branches.clone();
        branches.sort_by_key(|b| b.0);
        for (l, o) in branches {
            let block = block_of_line.entry(l).or_default();
            for (k, way) in [0, 1].into_iter().zip([o.map(|x| x.0), o.map(|x| x.1)]) {
                let v = match way {
                    None => "-".to_string(),
                    Some(w) => (w as u32).to_string(),
                };
                brf += 1;
                brh += (way == Some(true)) as u32;
                let _ = writeln!(out, "BRDA:{l},{block},{k},{v}");
            }
            *block += 1;
        }
        let _ = writeln!(out, "BRF:{brf}\nBRH:{brh}");
        for (l, hit) in &fc.lines {
            let _ = writeln!(out, "DA:{l},{}", *hit as u32);
        }
        let _ = writeln!(
            out,
            "LF:{}\nLH:{}\nend_of_record",
            fc.lines.len(),
            fc.lines.values().filter(|h| **h).count()
        );
    }
    out
}
