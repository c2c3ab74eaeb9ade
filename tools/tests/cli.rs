//! Command-line conventions of every program (trc_regress's are checked
//! in trc_regress_program.rs): `--help` (exit 0, each
//! option explained), `--version`, bad usage (exit 2, message on stderr),
//! a missing snapshot or file (exit 1, message on stderr naming it); and
//! trc_decode's outputs: JSON Lines against the text decode, threads,
//! `--elf` images, Tarmac.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs a program from a scratch folder (trc_pkt_lister writes its
/// default log file to the current folder).
fn run(bin: &str, args: &[&str]) -> Out {
    let cwd = scratch("cwd");
    let o = Command::new(bin).args(args).current_dir(&cwd).output().unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A folder of this test process, made empty. The tests of one process
/// share folders, so none is removed while they run; those of earlier test
/// processes that have ended are removed on the first call (on Linux, where
/// `/proc` says which have).
fn scratch(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(|| {
        if !Path::new("/proc/self").exists() {
            return;
        }
        for e in std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("coresight-cli-")
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid
                && pid != std::process::id()
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
    let d = std::env::temp_dir().join(format!("coresight-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

const LISTER: &str = env!("CARGO_BIN_EXE_trc_pkt_lister");
const DECODE: &str = env!("CARGO_BIN_EXE_trc_decode");
const GEN: &str = env!("CARGO_BIN_EXE_trc_gen");
const BENCH: &str = env!("CARGO_BIN_EXE_trc_bench");
const COV: &str = env!("CARGO_BIN_EXE_trc_cov");
const TARMAC: &str = env!("CARGO_BIN_EXE_tarmac");
const INDEX: &str = env!("CARGO_BIN_EXE_trc_index");

/// Checks that `help` names `option` where options are listed, with an
/// explanation on its line or the next.
fn explained(help: &str, option: &str) -> bool {
    let lines: Vec<&str> = help.lines().collect();
    lines.iter().enumerate().any(|(i, l)| {
        let t = l.trim_start();
        if !(t.starts_with('-') && t.split([' ', ',', '=']).any(|w| w == option)) {
            return false;
        }
        // The words after the option's spelling (and its value name).
        let rest: Vec<&str> = t
            .split_whitespace()
            .skip_while(|w| w.starts_with('-') || w.starts_with('<') || w.ends_with(','))
            .collect();
        let next = lines.get(i + 1).map(|n| n.trim()).unwrap_or("");
        rest.len() >= 2 || (!next.is_empty() && !next.starts_with('-'))
    })
}

#[test]
fn every_program_explains_every_option_in_its_help() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            DECODE,
            &["--help"],
            &[
                "--snapshot",
                "--source",
                "--id",
                "--format",
                "--elf",
                "--threads",
                "--disasm",
                "--max-instr",
                "--output",
                "--progress",
                "--help",
                "--version",
            ],
        ),
        (
            GEN,
            &["--help"],
            &[
                "--protocol",
                "--seed",
                "--out",
                "--length",
                "--unformatted",
                "--opt",
                "--tarmac",
                "--elf",
                "--help",
                "--version",
            ],
        ),
        (
            BENCH,
            &["--help"],
            &["--snapshot", "--source", "--iter", "--block", "--help", "--version"],
        ),
        (
            COV,
            &["export", "--help"],
            &[
                "--snapshot",
                "--tarmac",
                "--implicit-thumb",
                "--source",
                "--elf",
                "--per-id",
                "--big-endian",
                "--output",
            ],
        ),
        (
            COV,
            &["coverage", "--help"],
            &[
                "--elf",
                "--snapshot",
                "--tarmac",
                "--implicit-thumb",
                "--isa",
                "--routines",
                "--summary",
            ],
        ),
        (
            COV,
            &["lcov", "--help"],
            &["--elf", "--snapshot", "--tarmac", "--output", "--test-name"],
        ),
        (
            TARMAC,
            &["decode", "--help"],
            &[
                "--output",
                "--flow",
                "--exceptions",
                "--trace-matcher",
                "--no-disasm",
                "--link-registers",
            ],
        ),
        (
            TARMAC,
            &["compare", "--help"],
            &[
                "--window",
                "--skip-time",
                "--ignore-ccfail",
                "--start",
                "--boot",
                "--skip-remainder",
                "--stop-first",
                "--context",
                "--show",
                "--registers",
                "--memory",
            ],
        ),
        (TARMAC, &["dump", "--help"], &["--implicit-thumb", "--events"]),
        (INDEX, &["--help"], &["--help", "--version"]),
        (
            INDEX,
            &["build", "--help"],
            &["--source", "--index", "--granularity", "--limit"],
        ),
        (
            INDEX,
            &["decode", "--help"],
            &["--source", "--index", "--id", "--from", "--to", "--from-ts", "--to-ts"],
        ),
        (INDEX, &["query", "syncs", "--help"], &["--id", "--at"]),
        (INDEX, &["query", "time", "--help"], &["--id", "--from-ts", "--to-ts"]),
        (INDEX, &["query", "ids", "--help"], &["--from", "--to"]),
        (INDEX, &["correlate", "--help"], &["--ids"]),
        (
            LISTER,
            &["--help"],
            &[
                "-ss_dir",
                "-ss_verbose",
                "-id",
                "-src_name",
                "-multi_session",
                "-dstream_format",
                "-tpiu",
                "-tpiu_hsync",
                "-decode",
                "-decode_only",
                "-pkt_mon",
                "-o_raw_packed",
                "-o_raw_unpacked",
                "-stats",
                "-no_time_print",
                "-src_addr_n",
                "-aa64_opcode_chk",
                "-direct_br_cond",
                "-strict_br_cond",
                "-range_cont",
                "-halt_err",
                "-test_waits",
                "-profile",
                "-threads",
                "-macc_cache_disable",
                "-macc_cache_p_size",
                "-macc_cache_p_num",
                "-logstdout",
                "-logstderr",
                "-logfile",
                "-logfilename",
                "--help",
                "--version",
            ],
        ),
    ];
    for (bin, args, options) in cases {
        let o = run(bin, args);
        let name = Path::new(bin).file_name().unwrap().to_string_lossy();
        assert_eq!(o.code, Some(0), "{name} {args:?}: {}", o.stderr);
        for opt in *options {
            assert!(
                explained(&o.stdout, opt),
                "{name} {args:?} does not explain {opt}:\n{}",
                o.stdout
            );
        }
        // Every program says what its exit statuses mean.
        if args.len() == 1 {
            let words = o.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(words.contains("xit status"), "{name}: {}", o.stdout);
        }
    }
    // The subcommands of the programs that have them are listed.
    for (bin, subs) in [
        (COV, &["dump", "export", "coverage", "lcov"][..]),
        (
            TARMAC,
            &["profile", "calltree", "flamegraph", "compare", "decode", "dump"],
        ),
    ] {
        let o = run(bin, &["--help"]);
        assert_eq!(o.code, Some(0));
        for s in subs {
            assert!(o.stdout.contains(s), "{}", o.stdout);
        }
    }
}

#[test]
fn every_program_prints_its_version() {
    let v = env!("CARGO_PKG_VERSION");
    for (bin, want) in [
        (DECODE, format!("trc_decode {v}")),
        (GEN, format!("trc_gen {v}")),
        (BENCH, format!("trc_bench {v}")),
        (COV, format!("trc_cov {v}")),
        (TARMAC, format!("tarmac {v}")),
        (INDEX, format!("trc_index {v}")),
        (LISTER, format!("trc_pkt_lister (coresight-decode) {v}")),
    ] {
        let o = run(bin, &["--version"]);
        assert_eq!((o.code, o.stdout.trim()), (Some(0), want.as_str()), "{}", o.stderr);
    }
}

#[test]
fn bad_usage_exits_2_with_a_message_on_stderr() {
    let snap = repo().join("snapshots/etmv4-a64");
    let snap = snap.to_str().unwrap();
    let cases: &[(&str, &[&str], &str)] = &[
        (DECODE, &["--bogus", snap], "--bogus"),
        (DECODE, &[snap, "--format", "xml"], "xml"),
        (DECODE, &[snap, "--id", "0x105"], "trace IDs are 0x0 to 0x6f"),
        (DECODE, &[snap, "--threads", "0"], "--threads"),
        (DECODE, &[], "SNAPSHOT"),
        (GEN, &["--bogus"], "--bogus"),
        (GEN, &["--protocol", "nope", "--out", "x"], "unknown protocol 'nope'"),
        (
            GEN,
            &["--protocol", "ptm", "--opt", "nope=1", "--out", "x"],
            "--opt nope=1",
        ),
        (BENCH, &["--bogus", snap], "--bogus"),
        (BENCH, &[snap, "--iter", "0"], "--iter"),
        (COV, &["coverage", "--bogus"], "--bogus"),
        (TARMAC, &["profile"], "<TRACE>"),
        (INDEX, &["build", "--bogus"], "--bogus"),
        (
            LISTER,
            &["-ss_dir", snap, "-id", "zz"],
            "invalid ID number 'zz' on -id option",
        ),
        (
            LISTER,
            &["-ss_dir", snap, "-id", "0x105"],
            "invalid ID number 0x105 on -id option",
        ),
        (LISTER, &["-ss_dir", snap, "-threads", "0"], "-threads"),
        (LISTER, &["-ss_dir"], "Missing directory string on -ss_dir option"),
    ];
    for (bin, args, says) in cases {
        let o = run(bin, args);
        let name = Path::new(bin).file_name().unwrap().to_string_lossy();
        assert_eq!(o.code, Some(2), "{name} {args:?}: {}{}", o.stdout, o.stderr);
        assert!(o.stderr.contains(says), "{name} {args:?}: stderr {:?}", o.stderr);
    }
    // The lister's listing still carries OpenCSD's message.
    let o = run(LISTER, &["-ss_dir", snap, "-id", "zz", "-logstdout"]);
    assert!(
        o.stdout
            .contains("Trace Packet Lister : Error: invalid ID number 'zz' on -id option\n"),
        "{}",
        o.stdout
    );
    // An unknown lister option is ignored, as OpenCSD does, with a warning.
    let o = run(LISTER, &["-ss_dir", snap, "-decode", "-frobnicate", "-logstdout"]);
    assert_eq!(o.code, Some(0));
    assert!(
        o.stdout
            .contains("Trace Packet Lister : Warning: Ignored unknown option -frobnicate.\n")
    );
    assert!(o.stderr.contains("unknown option -frobnicate ignored"), "{}", o.stderr);
}

#[test]
fn a_missing_snapshot_or_file_exits_1_naming_it_on_stderr() {
    let gone = scratch("gone").join("no-such-snapshot");
    let g = gone.to_str().unwrap();
    let cases: &[(&str, &[&str])] = &[
        (DECODE, &[g]),
        (DECODE, &["--snapshot", g, "--format", "json"]),
        (BENCH, &[g]),
        (GEN, &["--protocol", "etmv4", "--tarmac", g, "--elf", g, "--out", "x"]),
        (COV, &["dump", g]),
        (TARMAC, &["profile", g]),
        (INDEX, &["build", g]),
        (LISTER, &["-ss_dir", g, "-decode"]),
    ];
    for (bin, args) in cases {
        let o = run(bin, args);
        let name = Path::new(bin).file_name().unwrap().to_string_lossy();
        assert_eq!(o.code, Some(1), "{name} {args:?}: {}{}", o.stdout, o.stderr);
        assert!(o.stderr.contains(g), "{name} {args:?}: stderr {:?}", o.stderr);
    }
    // The lister's listing keeps OpenCSD's line.
    let o = run(LISTER, &["-ss_dir", g, "-logstdout"]);
    assert!(
        o.stdout
            .contains(&format!("Trace Packet Lister : Snapshot path{g} not found\n")),
        "{}",
        o.stdout
    );

    // A snapshot whose trace file is missing: the listing says what
    // OpenCSD says, stderr names the file.
    let snap = scratch("no-trace");
    copy_dir(&repo().join("snapshots/etmv4-a64"), &snap);
    std::fs::remove_file(snap.join("trace.bin")).unwrap();
    let o = run(LISTER, &["-ss_dir", snap.to_str().unwrap(), "-decode", "-logstdout"]);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert!(
        o.stdout
            .contains("Trace Packet Lister : Error : Unable to open trace buffer.\n"),
        "{}",
        o.stdout
    );
    let file = snap.join("trace.bin");
    assert!(
        o.stderr
            .contains(&format!("cannot read trace buffer file {}", file.display())),
        "{}",
        o.stderr
    );
    let o = run(DECODE, &[snap.to_str().unwrap()]);
    assert_eq!(o.code, Some(1));
    assert!(o.stderr.contains(&file.display().to_string()), "{}", o.stderr);
    // A trace source name that is not in the snapshot.
    let o = run(
        DECODE,
        &[repo().join("snapshots/etmv4-a64").to_str().unwrap(), "--source", "NOPE"],
    );
    assert_eq!(o.code, Some(1));
    assert!(
        o.stderr.contains("no trace buffer named NOPE") && o.stderr.contains("ETB_0"),
        "{}",
        o.stderr
    );
    // An image that is not there, or not an ELF file without an address.
    let o = run(
        DECODE,
        &[repo().join("snapshots/etmv4-a64").to_str().unwrap(), "--elf", g],
    );
    assert_eq!(o.code, Some(1));
    assert!(o.stderr.contains(g), "{}", o.stderr);
    let not_elf = snap.join("snapshot.ini");
    let o = run(
        DECODE,
        &[
            repo().join("snapshots/etmv4-a64").to_str().unwrap(),
            "--elf",
            not_elf.to_str().unwrap(),
        ],
    );
    assert_eq!(o.code, Some(1));
    assert!(
        o.stderr
            .contains("is not an ELF file; for a raw binary give its load address"),
        "{}",
        o.stderr
    );
}

#[test]
fn the_lister_exits_1_on_a_fatal_data_path_error() {
    // An empty frame block after an ID switch stops OpenCSD's data path
    // (see tools/tests/lister.rs); the lister says so in the listing and
    // exits 1.
    let snap = scratch("fatal");
    copy_dir(&repo().join("snapshots/etmv4-a64"), &snap);
    let mut trace = std::fs::read(snap.join("trace.bin")).unwrap();
    trace.extend_from_slice(&[0x21, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2b, 0x00, 0x21, 0x40]);
    std::fs::write(snap.join("trace.bin"), trace).unwrap();
    let o = run(LISTER, &["-ss_dir", snap.to_str().unwrap(), "-decode", "-logstdout"]);
    assert_eq!(o.code, Some(1));
    assert!(o.stdout.contains("Trace Packet Lister : Data Path fatal error\n"));
    // The packet processor's error is not logged in full decode (OpenCSD
    // logs only the decoders'), so stderr names where it stopped.
    assert!(
        o.stderr
            .contains("decode stopped by a fatal error after 464 bytes of trace"),
        "{}",
        o.stderr
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Generates a snapshot with trc_gen.
fn generate(name: &str, args: &[&str]) -> PathBuf {
    let dir = scratch("gen").join(name);
    let mut a = args.to_vec();
    a.extend(["--out", dir.to_str().unwrap()]);
    let o = run(GEN, &a);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    dir
}

/// The element name of the lister's text for a JSON `type`.
fn opencsd_name(t: &str) -> String {
    let n = match t {
        "itm_trace" => "ITMTRACE",
        "mem_trans" => "MEMTRANS",
        other => return format!("OCSD_GEN_TRC_ELEM_{}", other.to_uppercase()),
    };
    format!("OCSD_GEN_TRC_ELEM_{n}")
}

fn hex(v: &serde_json::Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("{v} is not a hex string"));
    u64::from_str_radix(s.strip_prefix("0x").unwrap(), 16).unwrap()
}

#[test]
fn json_lines_carry_the_elements_of_the_text_decode() {
    let snaps = [
        generate("etmv4", &["--protocol", "etmv4", "--seed", "5", "--opt", "all=1"]),
        generate("ete", &["--protocol", "ete", "--seed", "3", "--opt", "all=1"]),
        generate("tc2", &["--protocol", "tc2", "--seed", "2"]),
        generate("stm", &["--protocol", "stm", "--seed", "4"]),
        generate("itm", &["--protocol", "itm", "--seed", "4"]),
        generate("etmv4m", &["--protocol", "etmv4m", "--seed", "6", "--unformatted"]),
        repo().join("plugins/riscv-trace/snapshots/qemu-calls"),
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for snap in &snaps {
        let s = snap.to_str().unwrap();
        let text = run(DECODE, &[s, "--threads", "1"]);
        assert_eq!(text.code, Some(0), "{s}: {}", text.stderr);
        let json = run(DECODE, &[s, "--format", "json", "--threads", "1"]);
        assert_eq!(json.code, Some(0), "{s}: {}", json.stderr);
        let (tl, jl): (Vec<&str>, Vec<&str>) = (text.stdout.lines().collect(), json.stdout.lines().collect());
        assert_eq!(tl.len(), jl.len(), "{s}");
        assert!(tl.len() > 20, "{s}: {}", text.stdout);
        // The text decode is the lister's element listing.
        let listing = run(LISTER, &["-ss_dir", s, "-decode_only", "-no_time_print", "-logstdout"]);
        let elems: Vec<&str> = listing.stdout.lines().filter(|l| l.starts_with("Idx:")).collect();
        assert_eq!(tl, elems, "{s}");
        for (t, j) in tl.iter().zip(&jl) {
            let v: serde_json::Value = serde_json::from_str(j).unwrap_or_else(|e| panic!("{s}: {j}: {e}"));
            let ty = v["type"].as_str().unwrap();
            kinds.insert(ty.to_string());
            let head = format!(
                "Idx:{}; ID:{:x}; {}(",
                v["index"],
                v["trace_id"].as_u64().unwrap(),
                opencsd_name(ty)
            );
            assert!(t.starts_with(&head), "{s}: {t} / {j}");
            // The fields say what the text says.
            match ty {
                "instr_range" => {
                    let want = format!(
                        "exec range=0x{:x}:[0x{:x}] num_i({}) last_sz({})",
                        hex(&v["start"]),
                        hex(&v["end"]),
                        v["num_instr"],
                        v["last"]["size"]
                    );
                    assert!(t.contains(&want), "{t} / {j}");
                }
                "exception" => {
                    let num = format!("excep num (0x{:02x})", v["number"].as_u64().unwrap());
                    assert!(t.contains(&num), "{t} / {j}");
                    assert_eq!(
                        v.get("preferred_return").is_some(),
                        t.contains("pref ret addr:"),
                        "{t} / {j}"
                    );
                }
                "timestamp" => assert!(
                    t.contains(&format!("[ TS=0x{:012x}]", hex(&v["timestamp"]))),
                    "{t} / {j}"
                ),
                "pe_context" => {
                    assert_eq!(v.get("context_id").is_some(), t.contains("CTXTID="), "{t} / {j}");
                    assert_eq!(v.get("vmid").is_some(), t.contains("VMID="), "{t} / {j}");
                }
                _ => {}
            }
            assert_eq!(v.get("cycle_count").is_some(), t.contains("[CC="), "{t} / {j}");
        }
    }
    for k in [
        "instr_range",
        "pe_context",
        "exception",
        "timestamp",
        "swtrace",
        "itm_trace",
        "no_sync",
        "trace_on",
        "eo_trace",
    ] {
        assert!(
            kinds.contains(k),
            "no {k} element in the generated snapshots: {kinds:?}"
        );
    }
}

#[test]
fn threads_give_the_same_output() {
    let snap = generate("tc2-threads", &["--protocol", "tc2", "--seed", "8", "--length", "400"]);
    let s = snap.to_str().unwrap();
    for format in ["text", "json"] {
        let one = run(DECODE, &[s, "--format", format, "--threads", "1"]);
        let four = run(DECODE, &[s, "--format", format, "--threads", "4"]);
        assert_eq!(one.code, Some(0));
        assert_eq!(four.code, Some(0), "{}", four.stderr);
        assert!(one.stdout.lines().count() > 100);
        assert_eq!(one.stdout, four.stdout, "{format}");
    }
    // An ID filter keeps that ID's elements only, on threads or not.
    let all = run(DECODE, &[s, "--format", "json"]);
    let ids = |t: &str| -> std::collections::BTreeSet<u64> {
        t.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["trace_id"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    };
    let all_ids = ids(&all.stdout);
    assert!(all_ids.len() > 2, "{}", all.stdout);
    let (first, second) = (all_ids.iter().next().unwrap(), all_ids.iter().nth(1).unwrap());
    let id = format!("0x{first:x}");
    let one = run(DECODE, &[s, "--format", "json", "--id", &id]);
    assert_eq!(
        ids(&one.stdout).into_iter().collect::<Vec<_>>(),
        [*first],
        "{}",
        one.stderr
    );
    let two_ids = [id.clone(), format!("{second}")];
    let two = run(
        DECODE,
        &[
            s,
            "--format",
            "json",
            "--id",
            &two_ids[0],
            "--id",
            &two_ids[1],
            "--threads",
            "2",
        ],
    );
    let serial = run(
        DECODE,
        &[
            s,
            "--format",
            "json",
            "--id",
            &two_ids[0],
            "--id",
            &two_ids[1],
            "--threads",
            "1",
        ],
    );
    assert_eq!(ids(&two.stdout).into_iter().collect::<Vec<_>>(), [*first, *second]);
    assert_eq!(two.stdout, serial.stdout);
    let kept: Vec<&str> = all
        .stdout
        .lines()
        .filter(|l| l.contains(&format!("\"trace_id\":{first},")) || l.contains(&format!("\"trace_id\":{second},")))
        .collect();
    assert_eq!(two.stdout.lines().collect::<Vec<_>>(), kept);
}

#[test]
fn elf_and_raw_images_stand_in_for_memory_dumps() {
    // A snapshot of a real execution, with the ELF's segments as dumps.
    let fixtures = repo().join("formats/tarmac/tests/fixtures");
    let elf = fixtures.join("prog64.elf");
    let snap = generate(
        "prog64",
        &[
            "--protocol",
            "ete",
            "--tarmac",
            fixtures.join("prog64.tarmac").to_str().unwrap(),
            "--elf",
            elf.to_str().unwrap(),
        ],
    );
    let with_dumps = run(DECODE, &[snap.to_str().unwrap()]);
    assert_eq!(with_dumps.code, Some(0));
    assert!(!with_dumps.stdout.contains("ADDR_NACC"));

    // The same snapshot without its dumps: the core's device file loses
    // its dump sections, the dump files go elsewhere.
    let bare = scratch("gen").join("prog64-bare");
    copy_dir(&snap, &bare);
    let core = std::fs::read_to_string(bare.join("cpu_0.ini")).unwrap();
    let mut dumps = Vec::new();
    let mut kept = String::new();
    let mut in_dump = false;
    let (mut file, mut addr) = (String::new(), String::new());
    for line in core.lines().chain(["[end]"]) {
        if line.starts_with('[') {
            if in_dump {
                dumps.push((std::mem::take(&mut file), std::mem::take(&mut addr)));
            }
            in_dump = line.starts_with("[dump");
        }
        if in_dump {
            if let Some(f) = line.strip_prefix("file=") {
                file = f.to_string();
            }
            if let Some(a) = line.strip_prefix("address=") {
                addr = a.to_string();
            }
        } else if line != "[end]" {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    assert!(!dumps.is_empty(), "{core}");
    std::fs::write(bare.join("cpu_0.ini"), kept).unwrap();
    let raw = scratch("gen").join("prog64-raw");
    std::fs::create_dir_all(&raw).unwrap();
    let mut raw_args = Vec::new();
    for (f, a) in &dumps {
        std::fs::rename(bare.join(f), raw.join(f)).unwrap();
        raw_args.push(format!("{}@{a}", raw.join(f).display()));
    }
    let b = bare.to_str().unwrap();
    let without = run(DECODE, &[b]);
    assert_eq!(without.code, Some(0));
    assert!(without.stdout.contains("ADDR_NACC"), "{}", without.stdout);

    let with_elf = run(DECODE, &[b, "--elf", elf.to_str().unwrap()]);
    assert_eq!(with_elf.code, Some(0), "{}", with_elf.stderr);
    assert_eq!(with_elf.stdout, with_dumps.stdout);

    let mut args = vec![b];
    for r in &raw_args {
        args.extend(["--elf", r.as_str()]);
    }
    let with_raw = run(DECODE, &args);
    assert_eq!(with_raw.code, Some(0), "{}", with_raw.stderr);
    assert_eq!(with_raw.stdout, with_dumps.stdout);

    // Tarmac output with disassembly is what `tarmac decode` writes.
    let t = run(DECODE, &[snap.to_str().unwrap(), "--format", "tarmac", "--disasm"]);
    let want = run(TARMAC, &["decode", snap.to_str().unwrap()]);
    assert_eq!((t.code, want.code), (Some(0), Some(0)), "{}{}", t.stderr, want.stderr);
    assert!(t.stdout.lines().count() > 100);
    assert_eq!(t.stdout, want.stdout);
    let t = run(DECODE, &[b, "--format", "tarmac", "--elf", elf.to_str().unwrap()]);
    assert_eq!(t.code, Some(0), "{}", t.stderr);
    let no_disasm = run(TARMAC, &["decode", snap.to_str().unwrap(), "--no-disasm"]);
    assert_eq!(t.stdout, no_disasm.stdout);
}

#[test]
fn old_single_dash_options_still_work_with_a_note() {
    let snap = repo().join("snapshots/etmv4-a64");
    let s = snap.to_str().unwrap();
    let new = run(DECODE, &["--snapshot", s, "--id", "0x15"]);
    let old = run(DECODE, &["-ss_dir", s, "-id", "0x15"]);
    assert_eq!((new.code, old.code), (Some(0), Some(0)));
    assert_eq!(new.stdout, old.stdout);
    assert!(
        old.stderr.contains("trc_decode: note: -ss_dir is now --snapshot"),
        "{}",
        old.stderr
    );
    assert!(new.stderr.is_empty(), "{}", new.stderr);
}

#[test]
fn snapshot_warnings_go_to_stderr_and_the_decode_goes_on() {
    // A memory dump that is not there: a warning naming the device file,
    // its line and the dump; exit 0 (the rest decodes).
    let snap = scratch("missing-dump");
    copy_dir(&repo().join("snapshots/etmv4-a64"), &snap);
    std::fs::remove_file(snap.join("code0.bin")).unwrap();
    let s = snap.to_str().unwrap();
    let want = format!(
        "{}:7: warning: memory dump file 'code0.bin' cannot be read",
        snap.join("cpu_0.ini").display()
    );
    for (bin, args) in [
        (DECODE, vec![s]),
        (LISTER, vec!["-ss_dir", s, "-decode", "-logstdout"]),
        (BENCH, vec![s, "--iter", "1"]),
        (TARMAC, vec!["decode", s]),
    ] {
        let o = run(bin, &args);
        let name = Path::new(bin).file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(o.code, Some(0), "{name}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("{name}: {want}")), "{name}: {}", o.stderr);
        // The lister's listing keeps to OpenCSD's lines.
        assert!(!o.stdout.contains("warning:"), "{name}: {}", o.stdout);
    }
    // trc_decode does not repeat it as OpenCSD's accessor error.
    let o = run(DECODE, &[s]);
    assert!(!o.stderr.contains("OCSD_ERR_NOT_INIT"), "{}", o.stderr);
}

#[test]
fn a_closed_pipe_ends_the_decode_quietly() {
    // `trc_decode ... | head -1`: the reader goes away after one line,
    // long before the decode has written its megabytes.
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = generate("long", &["--protocol", "etmv4", "--seed", "9", "--length", "40000"]);
    for format in ["text", "json", "tarmac"] {
        let mut child = Command::new(DECODE)
            .args(["--format", format, dir.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{format}: no output");
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{format}");
    }
}

#[test]
fn trc_gen_writes_its_truth_plain_compressed_or_not_at_all() {
    use coresight_generator::Truth;
    use coresight_generator::check::decode_dir;
    use coresight_generator::truth_file::open_truth;
    use std::io::Read as _;
    for protocol in ["etmv4", "ptm"] {
        let base = ["--protocol", protocol, "--seed", "5", "--length", "3000"];
        let plain = generate(&format!("{protocol}-plain"), &base);
        let want = std::fs::read_to_string(plain.join("truth.txt")).unwrap();
        // Into the same folder: each form replaces the other.
        let dir = generate(&format!("{protocol}-forms"), &base);
        let gz = generate(&format!("{protocol}-forms"), &[&base[..], &["--truth-gz"]].concat());
        assert_eq!(gz, dir);
        assert!(!dir.join("truth.txt").exists() && dir.join("truth.txt.gz").exists());
        let mut got = String::new();
        open_truth(&dir).unwrap().read_to_string(&mut got).unwrap();
        assert_eq!(got, want, "{protocol}: truth.txt.gz holds truth.txt");
        assert_eq!(
            std::fs::read(dir.join("trace.bin")).unwrap(),
            std::fs::read(plain.join("trace.bin")).unwrap()
        );
        // The compressed truth is what the decode gives.
        let decoded: Vec<String> = decode_dir(&dir).unwrap().iter().map(Truth::to_string).collect();
        assert_eq!(decoded, want.lines().collect::<Vec<_>>(), "{protocol}");
        generate(&format!("{protocol}-forms"), &[&base[..], &["--no-truth"]].concat());
        assert!(!dir.join("truth.txt").exists() && !dir.join("truth.txt.gz").exists());
        assert!(dir.join("trace.bin").exists());
    }
}
