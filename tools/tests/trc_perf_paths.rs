//! One answer on every path of trc_perf. Each recording kind `trc_gen --perf-data` writes
//! (tools/tests/fixtures/perf_script/kinds.txt: ETMv4 and ETE, formatted and raw, 1 to 4
//! CPUs, untimed, per-thread), in file and pipe mode, clean and with its AUX data damaged
//! (bytes changed, a buffer's end zeroed, the file cut inside its last AUX buffer, from a
//! seeded generator): `trc_perf script` (default, `--itrace=i1`, `--itrace=b`) of the file
//! must equal the pipe form's read from standard input; `trc_perf autofdo` of the file, of
//! the pipe form streamed from standard input, and of the branch list made from the file
//! (`--output branch-list`, then autofdo of it) must be one profile. On clean recordings
//! the instruction samples are the generator's truth instruction by instruction, and the
//! branch samples its taken branches, per thread. No run may crash (exit status 0, or 1
//! with a message).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use coresight_generator::Rng;
use coresight_perf_data::{PerfFile, Record};

mod perf_fixtures;
use perf_fixtures::{fixture_recording, listed};

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("trc_perf_paths").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What a run of trc_perf gave: its exit status and standard output, or its message.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Out(String),
    Failed(String),
}

impl Answer {
    fn out(&self) -> &str {
        match self {
            Answer::Out(s) => s,
            Answer::Failed(e) => panic!("expected output, got the error {e}"),
        }
    }
}

/// Runs trc_perf with `args`, feeding it `stdin` in small writes (as a pipe from a recording
/// perf delivers it). A crash or an exit status other than 0 and 1 fails the test; a
/// failure must say something on standard error.
fn run(args: &[&str], stdin: Option<&Path>, what: &str) -> Answer {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trc_perf"));
    cmd.args(args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().unwrap();
    let feeder = stdin.map(|p| {
        let bytes = std::fs::read(p).unwrap();
        let mut s = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            for c in bytes.chunks(4093) {
                if s.write_all(c).is_err() {
                    break;
                }
            }
        })
    });
    let o = child.wait_with_output().unwrap();
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    match o.status.code() {
        Some(0) => Answer::Out(String::from_utf8(o.stdout).unwrap()),
        Some(1) => {
            assert!(
                err.starts_with("trc_perf: "),
                "{what}: exit status 1 without a message: {err}"
            );
            // The error's first line; the file's name in it is the path's own.
            Answer::Failed(err.lines().next().unwrap_or("").to_string())
        }
        s => panic!("{what}: trc_perf exit status {s:?}: {err}"),
    }
}

/// The AUX payloads of a recording: (file offset, size).
fn aux_payloads(bytes: &[u8]) -> Vec<(usize, usize)> {
    let f = PerfFile::parse(bytes).unwrap();
    f.records()
        .filter_map(|r| match r.ok()?.record {
            Record::Auxtrace(a) => Some((a.data_offset as usize, a.size as usize)),
            _ => None,
        })
        .collect()
}

/// How a recording's AUX data is damaged; the same in its file and pipe forms, which hold
/// the same AUX payloads.
#[derive(Clone, Copy, Debug)]
enum Damage {
    None,
    /// This many bytes of each payload changed (seeded).
    Bytes(u64, usize),
    /// Each payload's second half zeroed: its end lost, as in a buffer not yet written.
    ZeroedEnd,
    /// The file cut in the middle of its last AUX payload.
    Cut,
}

fn damage(path: &Path, d: Damage) {
    let mut bytes = std::fs::read(path).unwrap();
    let payloads = aux_payloads(&bytes);
    assert!(!payloads.is_empty(), "{}: no AUX data", path.display());
    match d {
        Damage::None => return,
        Damage::Bytes(seed, n) => {
            let mut rng = Rng::new(seed);
            for &(at, size) in &payloads {
                for _ in 0..n {
                    let k = at + rng.below(size as u64) as usize;
                    bytes[k] ^= 1 | rng.next_u64() as u8;
                }
            }
        }
        Damage::ZeroedEnd => {
            for &(at, size) in &payloads {
                bytes[at + size / 2..at + size].fill(0);
            }
        }
        Damage::Cut => {
            let &(at, size) = payloads.last().unwrap();
            bytes.truncate(at + size / 2);
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// One CPU's truth (`trc_gen`'s `FILE.cpuN.truth.txt`): its ranges (start, end, taken).
fn truth_ranges(data: &Path, cpu: usize) -> Option<Vec<(u64, u64, bool)>> {
    let text = std::fs::read_to_string(format!("{}.cpu{cpu}.truth.txt", data.display())).ok()?;
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    Some(
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.first() == Some(&"range")).then(|| (hex(f[1]), hex(f[2]), f[4] == "E"))
            })
            .collect(),
    )
}

/// Samples per thread, in order: `TID A` or `TID A => B` lines, A and B hex.
fn per_thread(script: &str) -> Vec<Vec<(u64, u64)>> {
    let mut out: Vec<Vec<(u64, u64)>> = Vec::new();
    for line in script.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let cpu = f[0].parse::<usize>().unwrap() - 4000;
        let a = u64::from_str_radix(f[1], 16).unwrap();
        let b = f.get(3).map_or(0, |b| u64::from_str_radix(b, 16).unwrap());
        if out.len() <= cpu {
            out.resize(cpu + 1, Vec::new());
        }
        out[cpu].push((a, b));
    }
    out
}

/// `--itrace=i1` and `--itrace=b` of a clean recording against the truth: each thread's
/// instruction samples are its truth's instructions, and its branch samples its taken
/// branches (from the last instruction of a range to the next range's start), with a branch
/// from 0 to the first range where the trace starts and one from the last instruction to 0
/// where it ends; both in whole copies of the truth (the
/// generator repeats a CPU's trace to fill its buffer).
fn check_truth(data: &Path, i1: &str, b: &str, timeless: bool, what: &str) {
    let i1 = per_thread(i1);
    let b = per_thread(b);
    let mut cpus = 0;
    for cpu in 0.. {
        let Some(ranges) = truth_ranges(data, cpu) else {
            break;
        };
        cpus += 1;
        let instrs: Vec<(u64, u64)> = ranges
            .iter()
            .flat_map(|&(s, e, _)| (s..e).step_by(4).map(|a| (a, 0)))
            .collect();
        let got = i1.get(cpu).cloned().unwrap_or_default();
        assert!(
            !got.is_empty() && got.len() % instrs.len() == 0,
            "{what}: CPU {cpu}: {} instruction samples, not whole copies of the truth's {}",
            got.len(),
            instrs.len()
        );
        let copies = got.len() / instrs.len();
        assert!(
            got == instrs.repeat(copies),
            "{what}: CPU {cpu}: instruction samples differ from the truth"
        );
        // Taken branches over the copies, the last range followed by the next copy's first.
        let all: Vec<(u64, u64, bool)> = ranges.repeat(copies);
        let mut want = vec![(0, all[0].0)];
        for (i, r) in all.iter().enumerate() {
            match all.get(i + 1) {
                Some(n) if r.2 => want.push((r.1 - 4, n.0)),
                Some(_) => {}
                // Where the trace ends, a branch to 0 from its last instruction, taken or
                // not; a timeless decode (untimed or per-thread) has none.
                None if !timeless => want.push((r.1 - 4, 0)),
                None => {}
            }
        }
        let got_b = b.get(cpu).cloned().unwrap_or_default();
        assert!(
            got_b == want,
            "{what}: CPU {cpu}: branch samples differ from the truth's taken branches:\n{got_b:x?}\n{want:x?}"
        );
    }
    assert!(cpus > 0, "{what}: no truth");
}

/// Every path over one kind: the file and pipe forms written, damaged as `d` says, decoded.
/// Gives the instruction samples seen, and whether the streamed script came in another
/// order (the documented difference), and whether the branch-list route gave another
/// profile (a known difference on damaged recordings).
fn check_kind(dir: &Path, kind: &str, args: &str, d: Damage) -> (usize, bool, bool) {
    let kdir = dir.join(format!("{kind}-{d:?}").replace(['(', ')', ',', ' '], "_"));
    std::fs::create_dir_all(kdir.join("symfs/trc_gen")).unwrap();
    let file = kdir.join("file.data");
    let pipe = kdir.join("pipe.data");
    fixture_recording(args, &file);
    fixture_recording(&format!("{args} --pipe"), &pipe);
    std::fs::rename(kdir.join("file.data.elf"), kdir.join("symfs/trc_gen/prog")).unwrap();
    let (fb, pb) = (std::fs::read(&file).unwrap(), std::fs::read(&pipe).unwrap());
    let (fp, pp) = (aux_payloads(&fb), aux_payloads(&pb));
    let payload = |b: &[u8], &(at, n): &(usize, usize)| b[at..at + n].to_vec();
    assert!(
        fp.iter()
            .map(|p| payload(&fb, p))
            .eq(pp.iter().map(|p| payload(&pb, p))),
        "{kind}: file and pipe forms hold other AUX data"
    );
    damage(&file, d);
    damage(&pipe, d);
    let symfs = kdir.join("symfs");
    let (f, s) = (file.to_str().unwrap(), symfs.to_str().unwrap());
    let what = |p: &str| format!("{kind} ({args}), {d:?}: {p}");
    // Timed recordings of per-CPU buffers (raw, several CPUs): the streamed script's order
    // and times are its own (see `both`).
    let timeless = args.contains("--untimed") || args.contains("--per-thread");
    let streamed_order_differs = !timeless && args.contains("--unformatted") && !args.contains("--cpus 1");
    let order_differed = std::cell::Cell::new(false);
    let list_differed = std::cell::Cell::new(false);
    let both = |cmd: &[&str]| -> Answer {
        let from_file = run(
            &[cmd, &[f, "--symfs", s]].concat(),
            None,
            &what(&format!("{cmd:?} file")),
        );
        let from_pipe = run(
            &[cmd, &["-", "--symfs", s]].concat(),
            Some(&pipe),
            &what(&format!("{cmd:?} pipe")),
        );
        match (&from_file, &from_pipe) {
            (Answer::Out(a), Answer::Out(b)) if a != b && streamed_order_differs => {
                // Documented (trc_perf's script_stream): each CPU's buffer printed as it
                // arrives, with the time of the stream so far. The same samples, and each
                // thread's in the same order.
                let of = |s: &str| {
                    let mut v: Vec<String> = s.lines().map(without_time).collect();
                    v.sort();
                    v
                };
                assert!(
                    of(a) == of(b),
                    "{}: the streamed pipe form has other samples",
                    what(&format!("{cmd:?}"))
                );
                assert!(
                    per_thread_lines(a) == per_thread_lines(b),
                    "{}: the streamed pipe form has a thread's samples in another order",
                    what(&format!("{cmd:?}"))
                );
                order_differed.set(true);
            }
            (Answer::Out(a), Answer::Out(b)) => {
                assert!(
                    a == b,
                    "{}: the pipe form through standard input differs",
                    what(&format!("{cmd:?}"))
                );
            }
            // The error names the file one way and standard input the other; each says it.
            (Answer::Failed(a), Answer::Failed(b)) => {
                assert!(
                    matches!(d, Damage::Cut) && a.contains(f) && b.contains("standard input"),
                    "{}: failed on both forms: {a} / {b}",
                    what(&format!("{cmd:?}"))
                );
            }
            _ => panic!(
                "{}: one form failed: file {from_file:?}, pipe {from_pipe:?}",
                what(&format!("{cmd:?}"))
            ),
        }
        from_file
    };
    both(&["script"]);
    let i1 = both(&["script", "--itrace=i1", "-F", "tid,ip"]);
    let b = both(&["script", "--itrace=b", "-F", "tid,ip,addr"]);
    let profile = both(&["autofdo"]);
    // The branch-list route, from the file form.
    let list = kdir.join("branch.list");
    let l = list.to_str().unwrap();
    let _ = std::fs::remove_file(&list);
    let made = run(
        &["autofdo", f, "--symfs", s, "--output", "branch-list", "-o", l],
        None,
        &what("branch list"),
    );
    match (&profile, &made) {
        // As simpleperf, no file for no branch: then the profile is empty too.
        (Answer::Out(p), Answer::Out(_)) if !list.exists() => {
            assert!(
                p.is_empty(),
                "{}: no branch list, but a profile:\n{p}",
                what("branch list")
            );
        }
        (Answer::Out(p), Answer::Out(_)) => {
            let from_list = run(&["autofdo", l, "--symfs", s], None, &what("autofdo of the branch list"));
            // Known difference: a branch list keeps each direct branch's taken bit and
            // takes its target from the binary, so damaged trace that contradicts the
            // binary (etmv4-raw-2cpu, 3 bytes changed per buffer, seed 7: a taken direct
            // branch at 0x4022ac followed by an address packet elsewhere) is rebuilt as the
            // binary says, with other range and branch counts than the decode's. Clean
            // recordings give one profile.
            if from_list.out() != p && !matches!(d, Damage::None) {
                list_differed.set(true);
            } else {
                assert!(
                    from_list.out() == p,
                    "{}: autofdo of the branch list differs from autofdo of the recording",
                    what("branch list")
                );
            }
        }
        (Answer::Failed(a), Answer::Failed(b)) => assert_eq!(a, b, "{}", what("branch list")),
        _ => panic!("{}: autofdo {profile:?}, branch list {made:?}", what("branch list")),
    }
    if matches!(d, Damage::None) {
        check_truth(&file, i1.out(), b.out(), timeless, &what("truth"));
    }
    let n = match i1 {
        Answer::Out(s) => s.lines().count(),
        Answer::Failed(_) => 0,
    };
    (n, order_differed.get(), list_differed.get())
}

/// A script line without its time (`SECONDS.MICROS:`).
fn without_time(l: &str) -> String {
    l.split_whitespace()
        .filter(|w| !(w.ends_with(':') && w.trim_end_matches(':').parse::<f64>().is_ok() && w.contains('.')))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A script's lines grouped by thread (the first word all digits), each group in order.
fn per_thread_lines(s: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut m = std::collections::BTreeMap::<String, Vec<String>>::new();
    for l in s.lines() {
        let tid = l
            .split_whitespace()
            .find(|w| w.chars().all(|c| c.is_ascii_digit()))
            .unwrap_or("")
            .to_string();
        m.entry(tid).or_default().push(without_time(l));
    }
    m
}

#[test]
fn every_recording_kind_gives_one_answer_on_every_path() {
    let dir = scratch("kinds");
    let kinds = listed("perf_script", "kinds.txt");
    assert!(kinds.len() >= 18, "{kinds:?}");
    let mut clean = 0;
    let mut damaged = 0;
    let mut order_differed = 0;
    let mut list_differed = 0;
    for (k, (kind, args)) in kinds.iter().enumerate() {
        let (n, o, _) = check_kind(&dir, kind, args, Damage::None);
        clean += n;
        order_differed += usize::from(o);
        // One kind of damage per recording kind, in turn, with a seed of its own.
        let d = match k % 3 {
            0 => Damage::Bytes(k as u64 + 1, 3),
            1 => Damage::ZeroedEnd,
            _ => Damage::Cut,
        };
        let (n, _, l) = check_kind(&dir, kind, args, d);
        damaged += n;
        list_differed += usize::from(l);
    }
    // The known difference still is one (else take it out of `check_kind`).
    assert!(
        list_differed > 0,
        "the branch-list route gives the recording's profile on every damaged recording now"
    );
    // The documented difference is still one (else take it out of `both`).
    assert!(
        order_differed > 0,
        "the streamed script of raw multi-CPU recordings is the file's now"
    );
    assert!(clean > 5000, "only {clean} instruction samples on clean recordings");
    assert!(
        damaged > 1000,
        "only {damaged} instruction samples on damaged recordings"
    );
    // TRC_PERF_PATHS_KEEP=1 keeps the recordings (in the test target's tmp/trc_perf_paths).
    if std::env::var_os("TRC_PERF_PATHS_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
