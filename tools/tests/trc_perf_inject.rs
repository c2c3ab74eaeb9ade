//! `trc_perf inject`: the perf.data it writes holds, record for record, the samples Debian
//! perf 6.1 prints for the same recording and `--itrace` (the fixtures of
//! `fixtures/perf_script`, made by its make.sh with Debian's perf). The file is read back
//! here with the perf-data crate and its samples printed as `perf script -F ip,period,brstack`
//! prints them; `.ci/run` (formats/perf-data/scripts/inject_check.sh) also has Debian's perf
//! and AutoFDO's create_llvm_prof and create_gcov read it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use coresight_perf_data::PerfFile;

mod perf_fixtures;
use perf_fixtures::{fixture_recording, unxz};

fn trc_perf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trc_perf"))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trc_perf_inject-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perf_script")
}

/// The non-comment lines of a perf_script fixture list, split into first word and rest.
fn listed(name: &str) -> Vec<(String, String)> {
    perf_fixtures::listed("perf_script", name)
}

/// A fixture kind's recording (as make.sh makes it) in `dir`, its ELF under `dir/symfs`.
fn recording(args: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("symfs/trc_gen")).unwrap();
    let data = dir.join("perf.data");
    fixture_recording(args, &data);
    std::fs::rename(dir.join("perf.data.elf"), dir.join("symfs/trc_gen/prog")).unwrap();
    data
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The samples of an injected file as `perf script -F ip,period,brstack` prints them (the
/// samples of the synthesised instructions event, in file order: they all have one time),
/// with the event's name and `sample_type`.
fn samples_as_perf_prints(file: &[u8]) -> (String, u64) {
    let f = PerfFile::parse(file).expect("the injected file parses");
    assert_eq!(f.attrs.len(), 2, "the trace event and the instructions event");
    let attr = &f.attrs[1];
    assert_eq!(
        (attr.kind, attr.config),
        (0, 1),
        "PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS"
    );
    let t = attr.sample_type;
    let branch_sample_type = u64_at(file, attr.offset as usize + 72);
    let hw_index = branch_sample_type & (1 << 17) != 0;
    let mut out = String::new();
    for r in f.records() {
        let r = r.expect("records parse");
        assert!(
            ![11, 12, 70, 71].contains(&r.kind),
            "trace records (AUX, ITRACE_START, AUXTRACE_INFO, AUXTRACE) are left out"
        );
        if r.kind != 9 {
            continue;
        }
        assert_eq!(r.attr_index, 1, "every sample is the instructions event's");
        let at = r.offset as usize;
        let size = u16::from_le_bytes([file[at + 6], file[at + 7]]) as usize;
        let body = &file[at + 8..at + size];
        let mut p = 0;
        let mut take = || {
            p += 8;
            u64_at(body, p - 8)
        };
        let (mut ip, mut period) = (0, 0);
        assert_eq!(t & !0x10bcf, 0, "only the sample fields perf's cs_etm synthesises");
        // The record's order: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD,
        // then the branch stack; one u64 each.
        for bit in [16, 0, 1, 2, 3, 6, 9, 7, 8] {
            if t & (1 << bit) != 0 {
                let v = take();
                match bit {
                    0 => ip = v,
                    8 => period = v,
                    _ => {}
                }
            }
        }
        let _ = write!(out, "{period:>10}  {ip:>16x}");
        if t & (1 << 11) != 0 {
            let nr = take();
            if hw_index {
                take();
            }
            for _ in 0..nr {
                let (from, to, flags) = (take(), take(), take());
                assert_eq!(flags, 2, "predicted, nothing else");
                let _ = write!(out, " 0x{from:x}/0x{to:x}/P/-/-/0/ ");
            }
        }
        assert_eq!(p, body.len(), "the record holds the sample and nothing else");
        out.push('\n');
    }
    (out, t)
}

/// For every fixture kind perf's output is reproduced for, the case `--itrace=i10il8 -F
/// ip,period,brstack`: the injected file's samples are perf's, and so are they with the
/// hardware index perf 5.7+ writes.
#[test]
fn injected_samples_are_the_ones_debian_perf_prints() {
    let cases = listed("cases.txt");
    let n = 1 + cases
        .iter()
        .position(|(i, f)| i == "i10il8" && f == "ip,period,brstack")
        .expect("cases.txt has i10il8 ip,period,brstack");
    let known = listed("known_differences.txt");
    let dir = scratch("kinds");
    let mut checked = 0;
    for (kind, args) in listed("kinds.txt") {
        if known
            .iter()
            .any(|(k, rest)| *k == kind && rest.split_whitespace().next() == Some(&n.to_string()))
        {
            continue;
        }
        let kdir = dir.join(&kind);
        let data = recording(&args, &kdir);
        let want = unxz(&fixtures().join(&kind).join(format!("{n}.txt.xz")));
        for hw_index in [false, true] {
            let out = kdir.join("inj.data");
            let mut c = trc_perf();
            c.arg("inject").arg(&data).arg("--symfs").arg(kdir.join("symfs"));
            c.args(["--no-recorded-paths", "--as-perf-6.1", "--itrace=i10il8", "-o"])
                .arg(&out);
            if hw_index {
                c.arg("--hw-index");
            }
            let o = c.output().unwrap();
            assert!(o.status.success(), "{kind}: {}", String::from_utf8_lossy(&o.stderr));
            let (got, t) = samples_as_perf_prints(&std::fs::read(&out).unwrap());
            assert_eq!(
                got, want,
                "{kind} (hw index: {hw_index}): the injected samples are not perf's"
            );
            assert_ne!(t & (1 << 11), 0, "{kind}: BRANCH_STACK in sample_type");
            checked += 1;
        }
    }
    assert!(checked >= 30, "{checked} recordings checked");
}

/// What a user gets wrong is said: no output file named (clap: exit 2), an `--itrace` perf
/// would refuse, a branch stack too long.
#[test]
fn inject_refuses_what_perf_refuses() {
    let dir = scratch("refuse");
    let data = recording("--protocol etmv4 --cpus 1", &dir);
    let o = trc_perf().arg("inject").arg(&data).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--output <FILE>"));
    for (itrace, why) in [
        ("i100l64", "Bad Instruction Tracing options 'i100l64'"),
        ("il0", "Bad Instruction Tracing options 'il0'"),
        ("il1025", "Bad Instruction Tracing options 'il1025'"),
    ] {
        let o = trc_perf()
            .arg("inject")
            .arg(&data)
            .arg(format!("--itrace={itrace}"))
            .arg("-o")
            .arg(dir.join("x.data"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--itrace={itrace}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "--itrace={itrace}");
        assert!(!dir.join("x.data").exists(), "no output written on a refusal");
    }
}
