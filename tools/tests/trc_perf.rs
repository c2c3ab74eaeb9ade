//! trc_perf's command line: help, version, exit statuses, and a profile of a recording made
//! here (a generated execution written as perf.data, with its ELF in a symbol folder).

use std::path::PathBuf;
use std::process::Command;

use coresight_generator::BufferLayout;
use coresight_generator::perf_data::{PerfOptions, generate_perf_data};

mod perf_fixtures;
use perf_fixtures::{fixture_recording, listed, unxz};

fn trc_perf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trc_perf"))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trc_perf-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn help_and_version() {
    let o = trc_perf().arg("--help").output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for cmd in ["info", "autofdo", "script", "decode", "coverage", "dump"] {
        assert!(text.contains(cmd), "{text}");
    }
    for cmd in ["info", "autofdo", "script", "decode", "coverage", "dump"] {
        let o = trc_perf().args([cmd, "--help"]).output().unwrap();
        assert!(o.status.success(), "{cmd}");
    }
    let o = trc_perf().arg("--version").output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("trc_perf "));
}

#[test]
fn exit_statuses() {
    let o = trc_perf().args(["info", "-i", "/no/such/perf.data"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("trc_perf: ") && err.contains("/no/such/perf.data"),
        "{err}"
    );

    let o = trc_perf().args(["autofdo", "--no-such-option"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = trc_perf().arg("frobnicate").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = trc_perf().args(["script", "--itrace", "i0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = trc_perf()
        .args(["autofdo", "--binary", "(", "-i", "x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn profile_script_decode_and_dump_of_a_generated_recording() {
    let dir = scratch("gen");
    let r = generate_perf_data(&PerfOptions {
        seed: 5,
        layout: BufferLayout::Formatted,
        cpus: 2,
        elf_path: "/data/local/tmp/gen_prog".into(),
        ..Default::default()
    })
    .unwrap();
    let syms = dir.join("syms");
    std::fs::create_dir_all(&syms).unwrap();
    std::fs::write(syms.join("gen_prog"), &r.elf.bytes).unwrap();
    let data = dir.join("perf.data");
    std::fs::write(&data, &r.perf_data).unwrap();
    let list = dir.join("list");
    std::fs::write(&list, format!("{}\n", data.display())).unwrap();

    let run = |args: &[&str]| {
        let o = trc_perf().args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let d = data.to_str().unwrap();
    let s = syms.to_str().unwrap();
    let one = run(&["autofdo", "-i", d, "--symdir", s, "--no-recorded-paths"]);
    assert!(one.ends_with("// /data/local/tmp/gen_prog\n\n"), "{one}");
    // The same file twice (a list, and commas) doubles every count.
    let at_list = format!("@{}", list.display());
    let two = run(&["autofdo", "-i", &at_list, "-i", d, "--symdir", s, "--no-recorded-paths"]);
    let doubled: String = one
        .lines()
        .map(|l| match l.rsplit_once(':') {
            Some((a, n)) if !l.starts_with("//") => format!("{a}:{}\n", 2 * n.parse::<u64>().unwrap()),
            _ => format!("{l}\n"),
        })
        .collect();
    assert_eq!(two, doubled);
    let none = run(&["autofdo", "-i", d, "--symdir", s, "--binary", "no_such"]);
    assert_eq!(none, "");

    let info = run(&["info", "-i", d]);
    assert!(info.contains("cpu 0: ETMV4I trace ID 0x10, context IDs"), "{info}");
    let script = run(&[
        "script",
        "-i",
        d,
        "--symdir",
        s,
        "--itrace",
        "b",
        "-F",
        "comm,tid,cpu,ip,sym,dso,addr",
    ]);
    assert!(script.lines().count() > 10 && script.contains(" => "), "{script}");
    let json = run(&["decode", "-i", d, "--symdir", s]);
    assert!(json.lines().all(|l| l.starts_with("{\"buffer\":") && l.ends_with('}')));
    assert!(json.contains("\"cpu\":1"));
    let dump = run(&["dump", "-i", d]);
    assert!(dump.contains("CoreSight ETMV4I Trace data: size 0x"), "{dump}");
    assert!(dump.contains("\tIdx:"), "{dump}");
}

/// A generated 1-CPU recording in a scratch folder: (folder, perf.data, symbol folder).
fn one_cpu(seed: u64, name: &str) -> (coresight_generator::perf_data::PerfRecording, PathBuf, PathBuf) {
    let dir = scratch(name);
    let r = generate_perf_data(&PerfOptions {
        seed,
        length: 80,
        elf_path: "/data/local/tmp/gen_prog".into(),
        ..Default::default()
    })
    .unwrap();
    let syms = dir.join("syms");
    std::fs::create_dir_all(&syms).unwrap();
    std::fs::write(syms.join("gen_prog"), &r.elf.bytes).unwrap();
    let data = dir.join("perf.data");
    std::fs::write(&data, &r.perf_data).unwrap();
    (r, data, syms)
}

/// The instructions of the truth of every buffer: (address, executed).
fn truth_instructions(r: &coresight_generator::perf_data::PerfRecording) -> Vec<(u64, bool)> {
    use coresight_generator::Truth;
    let mut out = Vec::new();
    for b in &r.buffers {
        for t in r.buffer_truth(b, r.cpus[0].cpu) {
            if let Truth::Range { start, count, exec, .. } = t {
                for i in 0..u64::from(count) {
                    out.push((start + 4 * i, exec || i + 1 < u64::from(count)));
                }
            }
        }
    }
    out
}

#[test]
fn tarmac_of_a_recording_is_the_truth_with_the_binary_s_opcodes() {
    let (r, data, syms) = one_cpu(21, "tarmac");
    let o = trc_perf()
        .args(["decode", "--format", "tarmac", "--no-recorded-paths", "--symdir"])
        .arg(&syms)
        .arg("-i")
        .arg(&data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let e = &r.elf;
    let opcode = |a: u64| {
        let at = (e.text_offset + a - e.text_addr) as usize;
        u32::from_le_bytes(e.bytes[at..at + 4].try_into().unwrap())
    };
    let want: Vec<String> = truth_instructions(&r)
        .iter()
        .enumerate()
        .map(|(n, &(a, exec))| {
            format!(
                "{} ({}) {a:08x} {:08x} O EL0t_n : ",
                if exec { "IT" } else { "IS" },
                n + 1,
                opcode(a)
            )
        })
        .collect();
    assert!(want.len() > 50);
    // Each line: TIME tic, then what the truth gives.
    let got: Vec<String> = text
        .lines()
        .map(|l| {
            let (time, rest) = l.split_once(" tic ").unwrap_or_else(|| panic!("{l}"));
            assert!(time.parse::<u64>().is_ok(), "{l}");
            rest.to_string()
        })
        .collect();
    assert_eq!(got, want);

    // The element listing and JSON have one line per element.
    let run = |fmt: &str| {
        let o = trc_perf()
            .args(["decode", "--no-recorded-paths", "--format", fmt, "--symdir"])
            .arg(&syms)
            .arg("-i")
            .arg(&data)
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    let listing = run("text");
    let json = run("json");
    assert_eq!(listing.lines().count(), json.lines().count());
    assert!(
        listing.starts_with("Idx:0; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC("),
        "{listing}"
    );
    let ranges = listing
        .lines()
        .filter(|l| l.contains("OCSD_GEN_TRC_ELEM_INSTR_RANGE("))
        .count();
    assert_eq!(ranges, json.matches("\"type\":\"instr_range\"").count());
}

#[test]
fn coverage_of_a_recording_covers_exactly_the_truth() {
    use coresight_gnatcov::coverage::{CodeImage, Coverage, Execution, InsnState};
    let (r, data, syms) = one_cpu(22, "coverage");
    let out = data.parent().unwrap().join("cov");
    let o = trc_perf()
        .args(["coverage", "--no-recorded-paths", "--symdir"])
        .arg(&syms)
        .arg("-i")
        .arg(&data)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    // The generated ELF has no DWARF: a gnatcov trace, and no lcov tracefile.
    assert!(err.contains("gen_prog.trace ("), "{err}");
    assert!(err.contains("no lcov tracefile: no DWARF line table"), "{err}");
    assert!(!out.join("gen_prog.info").exists());
    let t = coresight_gnatcov::format::read_file(out.join("gen_prog.trace")).unwrap();
    let img = CodeImage::from_elf(&r.elf.bytes).unwrap();
    let entries: Vec<_> = t.entries().copied().collect();
    let x = Execution::from_entries(&img, &entries);
    let cov = Coverage::compute(&img, &x);
    let mut covered: Vec<u64> = cov
        .routines
        .iter()
        .flat_map(|rc| rc.insns.iter())
        .filter(|i| i.state != InsnState::NotCovered)
        .map(|i| i.insn.addr)
        .collect();
    covered.sort_unstable();
    let all: std::collections::HashSet<u64> = cov
        .routines
        .iter()
        .flat_map(|rc| rc.insns.iter().map(|i| i.insn.addr))
        .collect();
    let mut want: Vec<u64> = truth_instructions(&r).iter().map(|x| x.0).collect();
    want.sort_unstable();
    want.dedup();
    assert!(want.iter().all(|a| all.contains(a)), "truth outside the routines");
    assert_eq!(covered, want);
}

#[test]
fn kallsyms_that_hide_addresses_are_refused() {
    let (_, data, _) = one_cpu(23, "kallsyms");
    let k = data.parent().unwrap().join("kallsyms");
    std::fs::write(&k, "0000000000000000 T _text\n").unwrap();
    let o = trc_perf()
        .arg("script")
        .arg("-i")
        .arg(&data)
        .arg("--kallsyms")
        .arg(&k)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "trc_perf: --kallsyms {}: 1 text symbols, all at address 0 (the kernel hid them: read it as root, or with kptr_restrict 0)\n",
            k.display()
        )
    );
    let o = trc_perf()
        .arg("script")
        .arg("-i")
        .arg(&data)
        .args(["--vmlinux", "/no/such/vmlinux"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "trc_perf: --vmlinux /no/such/vmlinux: not a file\n"
    );
}

/// The kinds and cases of the perf script fixtures (tools/tests/fixtures/perf_script).
fn fixture_lines(name: &str) -> Vec<(String, String)> {
    listed("perf_script", name)
}

/// Debian perf 6.1's `perf script` on trc_gen's recordings (fixtures made by make.sh beside
/// them): `trc_perf script --as-perf-6.1` prints the same bytes for every kind (ETMv4 and
/// ETE, formatted and raw, 1 to 4 CPUs, timed, untimed and per-thread) and every case
/// (--itrace b, c, e, i100, i1, with perf's default fields and many -F lists), and refuses
/// (exit 2, perf's message) the fields perf refuses. Without --as-perf-6.1, perf's samples
/// come in the same order in ours on single-CPU kinds (ours may have more: the branches
/// perf 6.1 drops at a buffer's end). known_differences.txt lists the cases where our
/// reproduction of perf's bugs is not yet exact: they must still differ (so the list is
/// kept true).
#[test]
fn script_prints_what_debian_perf_prints() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf_script");
    let known: Vec<(String, String)> = fixture_lines("known_differences.txt");
    let is_known = |kind: &str, n: usize| {
        known
            .iter()
            .any(|(k, rest)| k == kind && rest.split_whitespace().next() == Some(&n.to_string()))
    };
    let cases = fixture_lines("cases.txt");
    let dir = scratch("fixtures");
    let (mut same, mut refused, mut still_known) = (0, 0, 0);
    let mut failures = Vec::new();
    for (kind, args) in fixture_lines("kinds.txt") {
        let kdir = dir.join(&kind);
        std::fs::create_dir_all(kdir.join("symfs/trc_gen")).unwrap();
        let data = kdir.join("perf.data");
        fixture_recording(&args, &data);
        std::fs::rename(kdir.join("perf.data.elf"), kdir.join("symfs/trc_gen/prog")).unwrap();
        let single_cpu = kind.ends_with("1cpu") || kind.ends_with("perthread");
        for (n, (itrace, fields)) in cases.iter().enumerate() {
            let n = n + 1;
            let run = |as_perf: bool| {
                let mut c = trc_perf();
                c.arg("script")
                    .arg("-i")
                    .arg(&data)
                    .arg("--symdir")
                    .arg(kdir.join("symfs"));
                c.args(["--no-recorded-paths", &format!("--itrace={itrace}")]);
                if fields != "-" {
                    c.args(["-F", fields]);
                }
                if as_perf {
                    c.arg("--as-perf-6.1");
                }
                c.output().unwrap()
            };
            let what = format!("{kind} case {n} (--itrace={itrace} -F {fields})");
            let refusal = fixtures.join(&kind).join(format!("{n}.refused"));
            if refusal.exists() {
                let want = std::fs::read_to_string(&refusal).unwrap();
                for as_perf in [true, false] {
                    let o = run(as_perf);
                    let err = String::from_utf8_lossy(&o.stderr);
                    if o.status.code() != Some(2) || !err.contains(want.trim()) {
                        failures.push(format!("{what}: perf refuses with {want:?}; trc_perf: {err}"));
                    }
                }
                refused += 1;
                continue;
            }
            let want = unxz(&fixtures.join(&kind).join(format!("{n}.txt.xz")));
            let o = run(true);
            assert!(o.status.success(), "{what}: {}", String::from_utf8_lossy(&o.stderr));
            let got = String::from_utf8_lossy(&o.stdout);
            if is_known(&kind, n) {
                if got == want {
                    failures.push(format!(
                        "{what}: now the same as perf: take it out of known_differences.txt"
                    ));
                }
                still_known += 1;
            } else if got != want {
                let first = want.lines().zip(got.lines()).position(|(a, b)| a != b);
                failures.push(format!(
                    "{what}: {} lines from perf, {} from trc_perf --as-perf-6.1; first difference at line {}",
                    want.lines().count(),
                    got.lines().count(),
                    first.map_or("(one is a prefix)".into(), |i| (i + 1).to_string())
                ));
            } else {
                same += 1;
            }
            if single_cpu {
                // perf's samples, in order, within ours; with a branch stack, but the last:
                // the one the end of trace makes holds what perf lost and we decode.
                let o = run(false);
                let ours = String::from_utf8_lossy(&o.stdout);
                let mut it = ours.lines();
                let n_want = want.lines().count() - usize::from(itrace.contains('l'));
                if let Some(missing) = want.lines().take(n_want).find(|l| !it.any(|m| m == *l)) {
                    failures.push(format!(
                        "{what}: perf's line not in trc_perf's output, in order: {missing}"
                    ));
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(same > 200 && refused > 10, "{same} same, {refused} refused");
    println!("perf script fixtures: {same} the same, {refused} refused as perf does, {still_known} known differences");
}

/// Every branch sample `trc_perf script --itrace=b` makes is a branch the generator's
/// execution took: from the last instruction of a range that ended taken to the start of
/// the next range of the same CPU (samples to or from 0 mark the gaps). Over recordings of
/// every kind, with and without timestamps; a stale packet at the end of a buffer once gave
/// `400120 => 4000a4` on seed 7, where 0x400120 was a branch not taken.
#[test]
fn every_branch_sample_is_a_branch_the_program_took() {
    use std::collections::HashSet;
    let dir = scratch("truth");
    let mut checked = 0usize;
    for seed in [3u64, 7, 11] {
        for kind in [
            &["--cpus", "1"][..],
            &["--cpus", "2"],
            &["--cpus", "2", "--unformatted"],
            &["--cpus", "2", "--untimed"],
            &["--per-thread"],
        ] {
            let data = dir.join(format!("s{seed}-{}.data", kind.join("")));
            let o = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
                .args(["--protocol", "etmv4", "--seed", &seed.to_string(), "--perf-data"])
                .arg(&data)
                .args(kind)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            // The taken branches of each CPU's truth: (last instruction, next range's start).
            let mut taken: Vec<HashSet<(u64, u64)>> = Vec::new();
            for cpu in 0.. {
                let Ok(text) = std::fs::read_to_string(format!("{}.cpu{cpu}.truth.txt", data.display())) else {
                    break;
                };
                let ranges: Vec<(u64, u64, bool)> = text
                    .lines()
                    .filter_map(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        (f.first() == Some(&"range")).then(|| {
                            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
                            (hex(f[1]), hex(f[2]), f[4] == "E")
                        })
                    })
                    .collect();
                let mut set = HashSet::new();
                // The trace repeats in copies: the last range is followed by the first.
                for (i, r) in ranges.iter().enumerate() {
                    let next = ranges[(i + 1) % ranges.len()];
                    if r.2 {
                        set.insert((r.1 - 4, next.0));
                    }
                }
                taken.push(set);
            }
            let o = trc_perf()
                .arg("script")
                .arg(&data)
                .args(["--itrace=b", "-F", "tid,ip,addr", "--symdir"])
                .arg(&dir)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let text = String::from_utf8(o.stdout).unwrap();
            assert!(text.lines().count() > 20, "{kind:?} seed {seed}: {text}");
            for line in text.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                let (tid, from, to) = (
                    f[0].parse::<usize>().unwrap(),
                    u64::from_str_radix(f[1], 16).unwrap(),
                    u64::from_str_radix(f[3], 16).unwrap(),
                );
                if from == 0 || to == 0 {
                    continue;
                }
                let cpu = tid - 4000;
                assert!(
                    taken[cpu].contains(&(from, to)),
                    "{kind:?} seed {seed}: '{line}' is no branch CPU {cpu} took"
                );
                checked += 1;
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(checked > 1000, "{checked}");
}

/// Every `trc_perf` command of the perf sections of README.md and formats/perf-data/README.md
/// runs as written (in a folder holding the perf.data, ./prog and symbols/prog they name) and
/// exits 0; .ci/run also runs the AutoFDO tools' commands there
/// (formats/perf-data/scripts/readme_check.sh).
#[test]
fn readme_perf_commands_run_as_written() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut commands = Vec::new();
    for readme in ["README.md", "formats/perf-data/README.md"] {
        let text = std::fs::read_to_string(root.join(readme)).unwrap();
        let mut in_sh = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_sh = line == "```sh";
                continue;
            }
            if in_sh && line.starts_with("trc_perf ") {
                commands.push(line.to_string());
            }
        }
    }
    assert!(commands.len() >= 8, "{commands:?}");
    let dir = scratch("readme");
    let o = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["--protocol", "etmv4", "--seed", "2", "--perf-data", "perf.data"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::create_dir_all(dir.join("symbols")).unwrap();
    std::fs::copy(dir.join("perf.data.elf"), dir.join("prog")).unwrap();
    std::fs::copy(dir.join("perf.data.elf"), dir.join("symbols/prog")).unwrap();
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_trc_perf"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    for c in &commands {
        let o = Command::new("sh")
            .arg("-c")
            .arg(c)
            .env("PATH", &path)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{c}: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(std::fs::metadata(dir.join("prog.afdo.txt")).unwrap().len() > 100);
    assert!(std::fs::metadata(dir.join("elements.jsonl")).unwrap().len() > 100);
    std::fs::remove_dir_all(&dir).ok();
}

/// A dump's buffers: each AUXTRACE record's line and the lines after it.
fn buffers(dump: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for l in dump.lines() {
        if l.contains(" PERF_RECORD_AUXTRACE size: ") {
            out.push((l, Vec::new()));
        } else if let Some(b) = out.last_mut() {
            b.1.push(l);
        }
    }
    out
}

/// The kinds of the perf dump fixtures (tools/tests/fixtures/perf_dump/kinds.txt).
fn dump_kinds() -> Vec<(String, String)> {
    listed("perf_dump", "kinds.txt")
}

/// Debian perf 6.1's `perf report -D` on trc_gen's recordings (the AUXTRACE part of it, kept
/// by make.sh beside the fixtures): `trc_perf dump --as-perf-6.1` prints the same bytes for
/// every kind (ETMv4 and ETE, formatted and raw, 1, 2 and 4 CPUs, untimed, per-thread). Without
/// --as-perf-6.1 the lines are the same once put in OpenCSD 1.3.3's words, but for the raw
/// buffers of CPUs other than the first, which perf 6.1 decodes with the first CPU's
/// configuration and labels with its trace ID: ours carry their own CPU's.
#[test]
fn dump_prints_what_debian_perf_prints() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf_dump");
    let dir = scratch("dump-fixtures");
    let mut failures = Vec::new();
    let (mut kinds, mut lines, mut own_ids) = (0, 0, 0);
    for (kind, args) in dump_kinds() {
        let data = dir.join(format!("{kind}.data"));
        fixture_recording(&args, &data);
        let want = unxz(&fixtures.join(format!("{kind}.txt.xz")));
        let run = |as_perf: bool| {
            let mut c = trc_perf();
            c.arg("dump").arg(&data);
            if as_perf {
                c.arg("--as-perf-6.1");
            }
            let o = c.output().unwrap();
            assert!(o.status.success(), "{kind}: {}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout).unwrap()
        };
        let got = run(true);
        if got != want {
            let first = want.lines().zip(got.lines()).position(|(a, b)| a != b);
            failures.push(format!(
                "{kind}: {} lines from perf, {} from trc_perf dump --as-perf-6.1; first difference at line {}",
                want.lines().count(),
                got.lines().count(),
                first.map_or("(one is a prefix)".into(), |i| (i + 1).to_string())
            ));
        }
        // Our own wording and trace IDs.
        let info = {
            let o = trc_perf().arg("info").arg(&data).output().unwrap();
            String::from_utf8(o.stdout).unwrap()
        };
        let id_of_cpu = |cpu: &str| -> Option<String> {
            let line = info.lines().find(|l| l.starts_with(&format!("cpu {cpu}: ")))?;
            let id = line
                .split("trace ID 0x")
                .nth(1)?
                .split(|c: char| !c.is_ascii_hexdigit())
                .next()?;
            Some(format!("ID:{id};"))
        };
        let ours = run(false);
        let (perf_buffers, our_buffers) = (buffers(&want), buffers(&ours));
        if perf_buffers.len() != our_buffers.len() {
            failures.push(format!("{kind}: without --as-perf-6.1, other buffers than perf's"));
        }
        for ((header, w), (our_header, o)) in perf_buffers.iter().zip(&our_buffers) {
            let cpu = header.rsplit("cpu: ").next().unwrap_or_default();
            let own = id_of_cpu(cpu);
            if kind.contains("-raw-") && own != id_of_cpu("0") && cpu != "-1" {
                // Decoded with its own CPU's configuration: its own trace ID on every packet
                // (what perf 6.1 decodes with the first CPU's may differ in places too).
                let own = own.unwrap_or_default();
                own_ids += o.iter().filter(|l| l.starts_with("\tIdx:") && l.contains(&own)).count();
                if header != our_header || o.iter().any(|l| l.starts_with("\tIdx:") && !l.contains(&own)) {
                    failures.push(format!(
                        "{kind}: without --as-perf-6.1, a packet of CPU {cpu} without {own}"
                    ));
                }
                continue;
            }
            let o: Vec<String> = o
                .iter()
                .map(|l| coresight_decode::printers::opencsd_1_3_text(l).into_owned())
                .collect();
            if header != our_header || *w != o {
                failures.push(format!(
                    "{kind}: without --as-perf-6.1, in 1.3.3's words, not perf's lines: {our_header}"
                ));
            }
        }
        kinds += 1;
        lines += want.lines().count();
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        kinds >= 20 && own_ids > 100,
        "{kinds} kinds, {own_ids} lines with their own CPU's trace ID"
    );
    println!(
        "perf dump fixtures: {kinds} kinds, {lines} lines the same as perf's; {own_ids} raw-buffer packets with their own CPU's trace ID without --as-perf-6.1"
    );
}

/// perf report -D numbers a CPU's packets on from its AUX area's offset: its first buffer from
/// 0, the next from the first's size (seen with Debian perf 6.1 on trc_gen's 10 MiB
/// recordings, whose areas are cut into 4 MiB buffers; too large for a fixture).
#[test]
fn dump_numbers_a_cpus_next_buffer_on_from_its_aux_offset() {
    let dir = scratch("dump-offsets");
    let data = dir.join("two.data");
    let o = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args([
            "--protocol",
            "etmv4",
            "--unformatted",
            "--seed",
            "9",
            "--length",
            "40",
            "--size",
            "5M",
        ])
        .arg("--perf-data")
        .arg(&data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = trc_perf().arg("dump").arg(&data).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dump = String::from_utf8(o.stdout).unwrap();
    let bufs = buffers(&dump);
    assert_eq!(
        bufs.len(),
        2,
        "{}",
        bufs.iter().map(|b| b.0).collect::<Vec<_>>().join("\n")
    );
    for (header, lines) in &bufs {
        let offset = header
            .split("offset: ")
            .nth(1)
            .and_then(|v| v.split_whitespace().next())
            .unwrap();
        let offset = u64::from_str_radix(offset.trim_start_matches("0x"), 16).unwrap();
        let first = lines.iter().find(|l| l.starts_with("\tIdx:")).unwrap();
        assert!(first.starts_with(&format!("\tIdx:{offset};")), "{header}\n{first}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The peak memory of `trc_perf dump` on a 256 MiB recording (4 CPUs' formatted trace in
/// 4 MiB buffers), measured by GNU time: under a fixed ceiling, whatever the recording's size
/// (dump streams its output and lets go of each buffer's pages once decoded).
#[test]
#[ignore = "writes a 256 MiB recording and needs GNU time; run by .ci/run"]
fn dump_peak_memory_is_bounded() {
    const CEILING_KB: u64 = 64 * 1024;
    let dir = scratch("dump-memory");
    let data = dir.join("big.data");
    let o = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args([
            "--protocol",
            "etmv4",
            "--cpus",
            "4",
            "--seed",
            "5",
            "--length",
            "40",
            "--size",
            "256M",
        ])
        .arg("--perf-data")
        .arg(&data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::metadata(&data).unwrap().len();
    for as_perf in [false, true] {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-f", "peak %M"])
            .arg(env!("CARGO_BIN_EXE_trc_perf"))
            .arg("dump")
            .arg(&data);
        if as_perf {
            c.arg("--as-perf-6.1");
        }
        let o = c
            .stdout(std::process::Stdio::null())
            .output()
            .expect("GNU time at /usr/bin/time");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let kb: u64 = err
            .lines()
            .find_map(|l| l.strip_prefix("peak "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no peak in {err}"));
        println!(
            "trc_perf dump{}: peak RSS {kb} kB for a {bytes}-byte recording",
            if as_perf { " --as-perf-6.1" } else { "" }
        );
        assert!(kb < CEILING_KB, "peak {kb} kB, over the {CEILING_KB} kB ceiling");
    }
    std::fs::remove_dir_all(&dir).ok();
}
