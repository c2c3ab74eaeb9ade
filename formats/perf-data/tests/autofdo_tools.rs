//! The AutoFDO text we write, read by Debian's AutoFDO tools (package `autofdo`, 0.19):
//! `create_llvm_prof --profiler=text` and `create_gcov --profiler=text` must accept it, and
//! the per-function totals of the profiles they write must be what the generator's truth
//! says they are.
//!
//! The execution is a real one: `fixtures/autofdo/prog.c` built with `-gdwarf-4` for AArch64
//! and run under qemu-user (`fixtures/autofdo/make.sh` makes `prog.elf` and `prog.tarmac`),
//! encoded as a perf.data by the generator, decoded into an AutoFDO text profile by this
//! crate (what `trc_perf autofdo` writes).
//!
//! # What the tools count (AutoFDO 0.19: sample_reader.cc, profile.cc, instruction_map.cc,
//! symbol_map.cc, profile_writer.cc, llvm_profile_writer.cc, profile_reader.cc)
//!
//! Each executed range of the truth, `start..end` with `count` instructions, is one AutoFDO
//! range `a-b` (`a` = start, `b` = the address of its last instruction, `end - 4` for A64),
//! counted once per execution. Then:
//!
//! - **Attribution.** A range belongs to the function (ELF symbol of non-zero size) holding
//!   `a`; only that function's bytes are counted (`ProfileMaps` per function).
//! - **Counts per byte.** The instruction map of a function has an entry for *every byte
//!   address* of it (`BuildPerFunctionInstructionMap` steps by 1), so a range adds its count
//!   to each byte `a..=b` of its function: an A64 range of `n` instructions touches
//!   `4(n-1)+1` bytes. A byte with no source line (the last line-table row at or before it,
//!   rows at the same address: the last one; only rows inside functions where a range starts
//!   are read) is not counted.
//! - **Which functions are written.** `threshold = max(10, ⌊T·0.000005⌋)` where `T` is the sum
//!   over ranges of `count·(b-a)`; a function is processed if the same sum over its ranges
//!   is above the threshold, and written if its total (below) is also above it.
//! - **create_llvm_prof (text):** `function:total:head`, where total is the sum over the
//!   function's counted bytes of their counts times the duplication factor LLVM decodes from
//!   the line's discriminator (1 for GCC's small discriminators).
//! - **create_gcov (read back by dump_gcov):** per source position (line − the function's
//!   first line, discriminator) the *largest* count of a byte at that position; the total
//!   dump_gcov prints is the sum of those.
//! - **Head count (both):** the number of taken direct branches into the function's first
//!   address from a written function (the AutoFDO text's `from->to` lines; indirect branches
//!   are written with target 0 and count nowhere).
//!
//! `fixtures/autofdo/expected.txt` holds these numbers for the committed fixtures (the ranges
//! of an execution do not depend on the seed or trace unit that encodes it);
//! `expected_totals_follow_from_the_truth` recomputes them from the truth without the
//! tools, `autofdo_tools_accept_our_profile_and_agree_with_the_truth` runs the tools.
//! `scripts/autofdo_check.sh` does the same with `trc_gen` and `trc_perf` from the command
//! line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use coresight_generator::execution::insns_from_tarmac_file;
use coresight_generator::perf_data::{
    PerfOptions, PerfProtocol, PerfRecording, check_perf_data, generate_perf_data_from_execution,
};
use coresight_generator::{BufferLayout, Truth};
use coresight_perf_data::Recording;
use coresight_perf_data::autofdo::{AutoFdoProfile, add_recording};
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::decode::DecodeOptions;
use goblin::elf::Elf;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/autofdo")
        .join(name)
}

/// The fixture execution as a perf.data whose ELF is `elf_path`.
fn recording(seed: u64, protocol: PerfProtocol, layout: BufferLayout, elf_path: &Path) -> PerfRecording {
    let insns = insns_from_tarmac_file(&fixture("prog.tarmac")).expect("the Tarmac trace reads");
    let elf = std::fs::read(fixture("prog.elf")).expect("prog.elf");
    let o = PerfOptions {
        seed,
        protocol,
        layout,
        elf_path: elf_path.to_string_lossy().into_owned(),
        ..PerfOptions::default()
    };
    generate_perf_data_from_execution(&o, &insns, &elf).expect("a recording of the execution")
}

/// Per-function numbers the tools report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    /// create_llvm_prof's `function:total:head`.
    llvm_total: u64,
    llvm_head: u64,
    /// dump_gcov's `function total:N head:M` on create_gcov's output.
    gcov_total: u64,
    gcov_head: u64,
}

/// One row of the line table: address, line, discriminator, end of a sequence.
#[derive(Debug, Clone, Copy)]
struct Row {
    addr: u64,
    line: u64,
    disc: u64,
    end_sequence: bool,
}

fn uleb(d: &[u8], p: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = d[*p];
        *p += 1;
        if shift < 64 {
            v |= u64::from(b & 0x7f) << shift;
        }
        shift += 7;
        if b & 0x80 == 0 {
            return v;
        }
    }
}

fn sleb(d: &[u8], p: &mut usize) -> i64 {
    let (mut v, mut shift) = (0i64, 0);
    loop {
        let b = d[*p];
        *p += 1;
        if shift < 64 {
            v |= i64::from(b & 0x7f) << shift;
        }
        shift += 7;
        if b & 0x80 == 0 {
            if shift < 64 && b & 0x40 != 0 {
                v |= -1i64 << shift;
            }
            return v;
        }
    }
}

fn le(d: &[u8], p: &mut usize, n: usize) -> u64 {
    let v = d[*p..*p + n].iter().rev().fold(0u64, |a, &b| a << 8 | u64::from(b));
    *p += n;
    v
}

/// The rows of a DWARF 2-4 `.debug_line` section (all units), in program order.
fn line_rows(d: &[u8]) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut unit = 0usize;
    while unit < d.len() {
        let mut p = unit;
        let mut len = le(d, &mut p, 4);
        let off = if len == 0xffff_ffff {
            len = le(d, &mut p, 8);
            8
        } else {
            4
        };
        let end = p + len as usize;
        let version = le(d, &mut p, 2);
        assert!(
            (2..=4).contains(&version),
            "line table version {version}: DWARF 2 to 4 read here"
        );
        let header_len = le(d, &mut p, off) as usize;
        let program = p + header_len;
        let min_len = u64::from(d[p]);
        p += 1;
        if version >= 4 {
            p += 1; // maximum operations per instruction
        }
        // (default_is_stmt at d[p]: statements or not, the tools take every row.)
        let line_base = i64::from(d[p + 1] as i8);
        let line_range = u64::from(d[p + 2]);
        let opcode_base = d[p + 3];
        let lengths = &d[p + 4..p + 4 + usize::from(opcode_base) - 1];
        p = program;
        let (mut addr, mut line, mut disc) = (0u64, 1i64, 0u64);
        while p < end {
            let op = d[p];
            p += 1;
            let mut emit = |addr: u64, line: i64, disc: &mut u64, end_sequence: bool| {
                rows.push(Row {
                    addr,
                    line: line as u64,
                    disc: *disc,
                    end_sequence,
                });
                *disc = 0;
            };
            if op >= opcode_base {
                let adj = u64::from(op - opcode_base);
                addr += adj / line_range * min_len;
                line += line_base + (adj % line_range) as i64;
                emit(addr, line, &mut disc, false);
                continue;
            }
            match op {
                0 => {
                    let n = uleb(d, &mut p) as usize;
                    let next = p + n;
                    match d[p] {
                        1 => {
                            emit(addr, line, &mut disc, true);
                            (addr, line, disc) = (0, 1, 0);
                        }
                        2 => {
                            let mut q = p + 1;
                            addr = le(d, &mut q, n - 1);
                        }
                        4 => {
                            let mut q = p + 1;
                            disc = uleb(d, &mut q);
                        }
                        _ => {}
                    }
                    p = next;
                }
                1 => emit(addr, line, &mut disc, false),
                2 => addr += uleb(d, &mut p) * min_len,
                3 => line += sleb(d, &mut p),
                8 => addr += (255 - u64::from(opcode_base)) / line_range * min_len,
                9 => addr += le(d, &mut p, 2),
                _ => {
                    for _ in 0..lengths[usize::from(op) - 1] {
                        uleb(d, &mut p);
                    }
                }
            }
        }
        unit = end;
    }
    rows
}

/// LLVM's duplication factor of a discriminator (`DILocation::
/// getDuplicationFactorFromDiscriminator`, without flow-sensitive discriminators).
fn duplication_factor(d: u64) -> u64 {
    let prefix = |u: u64| {
        if u & 1 != 0 {
            0
        } else {
            let u = u >> 1;
            if u & 0x20 != 0 {
                ((u >> 1) & 0xfe0) | (u & 0x1f)
            } else {
                u & 0x1f
            }
        }
    };
    let next = if d & 1 == 0 { d >> 7 } else { d >> 1 };
    match prefix(next) {
        0 => 1,
        f => f,
    }
}

/// Whether the A64 instruction `op` is a direct branch (B, BL, B.cond, CB(N)Z, TB(N)Z).
fn direct_branch(op: u32) -> bool {
    op & 0x7c00_0000 == 0x1400_0000
        || op & 0xff00_0010 == 0x5400_0000
        || op & 0x7e00_0000 == 0x3400_0000
        || op & 0x7e00_0000 == 0x3600_0000
}

/// A processed function's sums: the LLVM total, the plain byte total, the largest byte count
/// per source position (line, discriminator).
type Sums = (u64, u64, BTreeMap<(u64, u64), u64>);

/// What the AutoFDO tools report per function for `truth` (one execution of A64 code in
/// the ELF `elf`), following the rule of this file's doc.
fn expected_totals(truth: &[Truth], elf: &[u8]) -> BTreeMap<String, Totals> {
    let e = Elf::parse(elf).expect("prog.elf parses");
    // Symbols of non-zero size: start → (name, size).
    let mut symbols: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    for s in e.syms.iter() {
        if s.st_size == 0 {
            continue;
        }
        if let Some(name) = e.strtab.get_at(s.st_name) {
            symbols.entry(s.st_value).or_insert((name.to_string(), s.st_size));
        }
    }
    let function_of = |a: u64| {
        symbols
            .range(..=a)
            .next_back()
            .filter(|(s, (_, n))| a < *s + *n)
            .map(|(s, (name, n))| (*s, name.clone(), *n))
    };
    let code = |a: u64| -> u32 {
        let ph = e
            .program_headers
            .iter()
            .find(|p| {
                p.p_type == goblin::elf::program_header::PT_LOAD && a >= p.p_vaddr && a + 4 <= p.p_vaddr + p.p_filesz
            })
            .expect("code in a loadable segment");
        let o = (a - ph.p_vaddr + ph.p_offset) as usize;
        u32::from_le_bytes(elf[o..o + 4].try_into().unwrap())
    };
    // The ranges, as AutoFDO's text gives them: (a, b) → executions; and the direct taken
    // branches (from, to) → times.
    let ranges: Vec<(u64, u64, bool)> = truth
        .iter()
        .filter_map(|t| match *t {
            Truth::Range { start, end, exec, .. } => Some((start, end - 4, exec)),
            _ => None,
        })
        .collect();
    let mut range_counts: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut branches: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for (k, &(a, b, exec)) in ranges.iter().enumerate() {
        *range_counts.entry((a, b)).or_default() += 1;
        if exec
            && direct_branch(code(b))
            && let Some(&(next, _, _)) = ranges.get(k + 1)
        {
            *branches.entry((b, next)).or_default() += 1;
        }
    }
    // Emission threshold.
    let all: u64 = range_counts.iter().map(|((a, b), c)| c * (b - a)).sum();
    let threshold = ((all as f64 * 0.000005) as u64).max(10);
    // Per function: its ranges' (b-a)·count sum and the count of each byte.
    let mut aggregated: BTreeMap<u64, u64> = BTreeMap::new();
    let mut bytes: BTreeMap<u64, BTreeMap<u64, u64>> = BTreeMap::new();
    for (&(a, b), &c) in &range_counts {
        let Some((start, _, size)) = function_of(a) else {
            continue;
        };
        *aggregated.entry(start).or_default() += c * (b - a);
        let counts = bytes.entry(start).or_default();
        for x in a..=b.min(start + size - 1) {
            *counts.entry(x).or_default() += c;
        }
    }
    // The line table, rows only inside functions where a range starts (the last row at an
    // address wins).
    let debug_line = e
        .section_headers
        .iter()
        .find(|s| e.shdr_strtab.get_at(s.sh_name) == Some(".debug_line"))
        .expect("prog.elf has .debug_line (built with -g)");
    let d = &elf[debug_line.sh_offset as usize..(debug_line.sh_offset + debug_line.sh_size) as usize];
    let sampled: BTreeSet<u64> = bytes.keys().copied().collect();
    let mut lines: BTreeMap<u64, Option<(u64, u64)>> = BTreeMap::new();
    for r in line_rows(d) {
        let in_sampled = function_of(r.addr).is_some_and(|(s, _, _)| sampled.contains(&s));
        if in_sampled {
            lines.insert(r.addr, (!r.end_sequence).then_some((r.line, r.disc)));
        }
    }
    let line_of = |x: u64| lines.range(..=x).next_back().and_then(|(_, l)| *l);
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    let processed: BTreeSet<u64> = aggregated
        .iter()
        .filter(|(_, agg)| **agg > threshold)
        .map(|(s, _)| *s)
        .collect();
    let mut sums: BTreeMap<u64, Sums> = BTreeMap::new();
    for &f in &processed {
        let entry = sums.entry(f).or_default();
        for (&x, &c) in &bytes[&f] {
            let Some((line, disc)) = line_of(x) else { continue };
            entry.0 += c * duplication_factor(disc);
            entry.1 += c;
            let m = entry.2.entry((line, disc)).or_default();
            *m = (*m).max(c);
        }
    }
    let written_llvm = |f: &u64| sums.get(f).is_some_and(|s| s.0 > threshold);
    let written_gcov = |f: &u64| sums.get(f).is_some_and(|s| s.1 > threshold);
    for (f, (llvm, _, positions)) in &sums {
        let name = symbols[f].0.clone();
        // Heads: taken direct branches to the start from a processed function's line.
        let head: u64 = branches
            .iter()
            .filter(|((from, to), _)| to == f && function_of(*from).is_some_and(|(s, _, _)| processed.contains(&s)))
            .map(|(_, c)| *c)
            .sum();
        // dump_gcov lists the functions whose total is not 0.
        let gcov_total: u64 = positions.values().sum();
        let gcov = written_gcov(f) && gcov_total > 0;
        let t = Totals {
            llvm_total: if written_llvm(f) { *llvm } else { 0 },
            llvm_head: if written_llvm(f) { head } else { 0 },
            gcov_total: if gcov { gcov_total } else { 0 },
            gcov_head: if gcov { head } else { 0 },
        };
        if t != Totals::default() {
            out.insert(name, t);
        }
    }
    out
}

/// `fixtures/autofdo/expected.txt`: `function llvm_total llvm_head gcov_total gcov_head`.
fn committed_expected() -> BTreeMap<String, Totals> {
    let text = std::fs::read_to_string(fixture("expected.txt")).expect("expected.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 5, "expected.txt: `{l}`");
            let n = |i: usize| f[i].parse::<u64>().expect("a number");
            (
                f[0].to_string(),
                Totals {
                    llvm_total: n(1),
                    llvm_head: n(2),
                    gcov_total: n(3),
                    gcov_head: n(4),
                },
            )
        })
        .collect()
}

fn show(t: &BTreeMap<String, Totals>) -> String {
    t.iter()
        .map(|(n, t)| {
            format!(
                "{n} {} {} {} {}\n",
                t.llvm_total, t.llvm_head, t.gcov_total, t.gcov_head
            )
        })
        .collect()
}

/// A fresh folder under the target directory.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("a scratch folder");
    d
}

#[test]
fn expected_totals_follow_from_the_truth() {
    let dir = scratch("autofdo_expected");
    let elf = std::fs::read(fixture("prog.elf")).expect("prog.elf");
    let want = committed_expected();
    for (seed, protocol, layout) in [
        (1, PerfProtocol::Etmv4, BufferLayout::Formatted),
        (2, PerfProtocol::Ete, BufferLayout::Unformatted),
    ] {
        let r = recording(seed, protocol, layout, &dir.join("prog.elf"));
        // The recording decodes to its truth (this project's decoder).
        check_perf_data(&r).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let got = expected_totals(&r.cpus[0].truth, &elf);
        assert_eq!(
            show(&got),
            show(&want),
            "seed {seed}: the truth's totals (left) are not expected.txt's"
        );
    }
}

/// Runs a tool; panics with its output if it fails. (`--logtostderr` keeps glog's log files
/// out of /tmp; what they log is a warning that the binary has no GCC compilation info,
/// a Google GCC branch feature.)
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (apt-get install autofdo)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{text}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `name:total:head` lines of create_llvm_prof's text output (functions at the top level).
fn llvm_totals(text: &str) -> BTreeMap<String, (u64, u64)> {
    text.lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .map(|l| {
            let mut f = l.rsplitn(3, ':');
            let head = f.next().and_then(|v| v.parse().ok()).expect("a head count");
            let total = f.next().and_then(|v| v.parse().ok()).expect("a total");
            (f.next().expect("a name").to_string(), (total, head))
        })
        .collect()
}

/// `name total:N head:M` lines of dump_gcov.
fn gcov_totals(text: &str) -> BTreeMap<String, (u64, u64)> {
    text.lines()
        .filter(|l| !l.starts_with(' ') && l.contains(" total:") && l.contains(" head:"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |s: &str, p: &str| s.strip_prefix(p).and_then(|v| v.parse().ok()).expect("a count");
            (f[0].to_string(), (n(f[1], "total:"), n(f[2], "head:")))
        })
        .collect()
}

#[test]
#[ignore = "needs Debian autofdo and the aarch64 cross compiler; .ci/run runs it with --ignored"]
fn autofdo_tools_accept_our_profile_and_agree_with_the_truth() {
    let elf_bytes = std::fs::read(fixture("prog.elf")).expect("prog.elf");
    for (seed, protocol, layout) in [
        (1, PerfProtocol::Etmv4, BufferLayout::Formatted),
        (2, PerfProtocol::Ete, BufferLayout::Unformatted),
    ] {
        let dir = scratch(&format!("autofdo_tools_{seed}"));
        let elf_path = dir.join("prog.elf");
        std::fs::write(&elf_path, &elf_bytes).unwrap();
        let r = recording(seed, protocol, layout, &elf_path);
        std::fs::write(dir.join("perf.data"), &r.perf_data).unwrap();

        // Our profile, as `trc_perf autofdo -i perf.data --symdir DIR` writes it.
        let rec = Recording::parse(&r.perf_data).expect("the recording parses");
        let mut search = SymbolSearch::new();
        search.add_symdir(&dir).expect("the symdir");
        let mut profile = AutoFdoProfile::new(None);
        let report = add_recording(&rec, search, DecodeOptions::default(), &mut profile, &mut |_| {})
            .expect("the recording decodes");
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        std::fs::write(dir.join("prof.txt"), profile.to_text()).unwrap();

        run(
            &dir,
            "create_llvm_prof",
            &[
                "--logtostderr",
                "--profiler=text",
                "--profile=prof.txt",
                "--binary=prog.elf",
                "--out=prof.llvm.txt",
                "--format=text",
            ],
        );
        run(
            &dir,
            "create_gcov",
            &[
                "--logtostderr",
                "--profiler=text",
                "--profile=prof.txt",
                "--binary=prog.elf",
                "--gcov=prog.gcov",
            ],
        );
        let dump = run(&dir, "dump_gcov", &["--logtostderr", "prog.gcov"]);
        std::fs::write(dir.join("prog.gcov.txt"), &dump).unwrap();
        let llvm = llvm_totals(&std::fs::read_to_string(dir.join("prof.llvm.txt")).unwrap());
        let gcov = gcov_totals(&dump);

        let want = expected_totals(&r.cpus[0].truth, &elf_bytes);
        let mut got: BTreeMap<String, Totals> = BTreeMap::new();
        for (n, (t, h)) in &llvm {
            let e = got.entry(n.clone()).or_default();
            (e.llvm_total, e.llvm_head) = (*t, *h);
        }
        for (n, (t, h)) in &gcov {
            let e = got.entry(n.clone()).or_default();
            (e.gcov_total, e.gcov_head) = (*t, *h);
        }
        assert_eq!(
            show(&got),
            show(&want),
            "seed {seed}: the tools' totals (left: function llvm_total llvm_head gcov_total gcov_head) \
             are not the truth's (right); files in {}",
            dir.display()
        );
        assert!(want.len() >= 6, "every function of prog.c is in the profile: {want:?}");
    }
}
