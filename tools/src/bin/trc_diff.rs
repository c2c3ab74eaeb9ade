//! `trc_diff`: the differential harness. Generates `trc_gen` snapshots (every
//! protocol, random option sets, clean and with 1 to 4 damaged bytes), lists
//! each with our `trc_pkt_lister` and with OpenCSD's under the same arguments,
//! and reports every difference, classified and tallied per protocol, with
//! the smallest reproducer of each class kept on disk.
//!
//! ```text
//! trc_diff --opencsd PATH [--ours PATH] [--count N] [--seed S] [--jobs N] [--out DIR]
//! ```
//!
//! Without `--opencsd` (or `OPENCSD_LISTER` in the environment) it does not
//! pass quietly: it says why and exits with status 2. Exit status 0: every
//! difference is one the README lists as intentional; 1: some are not.
//! See `tools/REGRESS.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coresight_generator::etmv4::{self, Etmv4Options};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Rng, generate};

const USAGE: &str = "\
usage: trc_diff --opencsd PATH [--ours PATH] [--count N] [--seed S] [--jobs N] [--out DIR]
                [--protocol NAME]... [--keep-all]

Lists generated snapshots with our trc_pkt_lister and OpenCSD 1.8.0's and
reports every difference, per protocol and class.

  --opencsd PATH  OpenCSD's trc_pkt_lister (or OPENCSD_LISTER in the environment)
  --ours PATH     ours (default: trc_pkt_lister beside this program)
  --count N       snapshots to generate (default 1000); each is listed 3 times:
                  packets only, -decode, and -decode or packets with random options
  --seed S        first seed (default 1); case i uses seed S+i
  --jobs N        listings run at once (default 2)
  --out DIR       where reproducers and the report go (default trc_diff.out)
  --protocol P    only this protocol (etmv4, etmv4m, ete, ptm, etmv3, tc2, stm, itm); repeatable
  --keep-all      keep every listing with a difference not listed as intentional
                  (OUT/all/<seed>-<listing>/), not only the smallest per class

Exit status: 0 every difference is a listed intentional one; 1 some are not;
2 bad usage or no OpenCSD lister given (nothing was compared).";

const PROTOCOLS: &[&str] = &["etmv4", "etmv4m", "ete", "ptm", "etmv3", "tc2", "stm", "itm"];

/// One generated case: its snapshot and the listings to compare.
struct Case {
    seed: u64,
    protocol: &'static str,
    damaged: usize,
    listings: Vec<Vec<String>>,
}

/// A class of difference: its name, whether the README lists it as an
/// intentional difference, and a test on one hunk (the lister arguments, our
/// lines, OpenCSD's).
struct Rule {
    name: &'static str,
    intentional: bool,
    test: fn(&Ctx, &[&str], &[&str]) -> bool,
}

/// What a rule knows of the listing besides the hunk.
struct Ctx<'a> {
    args: &'a [String],
    protocol: &'static str,
}

fn any(lines: &[&str], pat: &str) -> bool {
    lines.iter().any(|l| l.contains(pat))
}

fn has(c: &Ctx, opt: &str) -> bool {
    c.args.iter().any(|a| a == opt)
}

/// Both sides have the same number of lines, each pair equal once `mask`
/// has blanked what may differ in them.
fn same_but<T: AsRef<str>>(u: &[&str], o: &[T], mask: fn(&str) -> String) -> bool {
    u.len() == o.len() && u.iter().zip(o).all(|(a, b)| mask(a) == mask(b.as_ref()))
}

/// `line` with the value after each `key` (up to `;`, `)`, `]` or a space) blanked.
fn blank_after(line: &str, key: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find(key) {
        out.push_str(&rest[..i + key.len()]);
        rest = &rest[i + key.len()..];
        let end = rest.find([';', ')', ']', ' ']).unwrap_or(rest.len());
        out.push('#');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `line` with what the intentional PTM/ETMv3 differences change blanked:
/// the VMID (OpenCSD's is a character, perhaps a `;`: the rest of the line
/// goes), timestamp values (Gray-coded in OpenCSD), the ISA and the range
/// of an ETMv3 range element never filled in.
fn blank_intentional(line: &str) -> String {
    let mut l = blank_after(&blank_unset_range(line), "ISA=");
    if let Some(i) = l.find("VMID=0x") {
        l.truncate(i + 7);
    }
    match l.split_once("TS=") {
        Some((a, b)) => format!("{a}TS=#{}", b.split_once(';').map(|x| x.1).unwrap_or("")),
        None => l,
    }
}

/// Our lines with the packet processors' error messages taken out (ours
/// logs them with -decode; OpenCSD attaches its logger to the decoders only).
fn without_pktp(u: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    for l in u {
        if l.starts_with("ERROR:") || l.is_empty() {
            continue;
        }
        let mut l = l.to_string();
        while let Some(i) = l.find("PKTP_") {
            match l[i..].find("Idx:") {
                Some(j) => l.replace_range(i..i + j, ""),
                None => l.truncate(i),
            }
        }
        if !l.is_empty() {
            v.push(l);
        }
    }
    v
}

/// OpenCSD's listing under forced waits is not its listing without them.
const TEST_WAITS_CLASS: &str = "opencsd-test-waits (OpenCSD drops elements, warns or misnumbers under -test_waits)";

/// The classes known so far, first match wins. A hunk no rule knows is
/// reported under a class named after its first lines with numbers blanked.
const RULES: &[Rule] = &[
    Rule {
        name: "opencsd-crash (OpenCSD dies on a signal: -test_waits in packet mode, -macc_cache_*)",
        intentional: true,
        test: |_, _, o| any(o, "<OpenCSD killed by signal"),
    },
    Rule {
        name: "opencsd-unknown-core (OpenCSD 1.8.0 does not know the core name: no decoder)",
        intentional: true,
        test: |_, _, o| any(o, "Unrecognized Core name"),
    },
    Rule {
        name: TEST_WAITS_CLASS,
        intentional: true,
        test: |a, _, o| has(a, "-test_waits") && (o.is_empty() || any(o, "expected WAIT response")),
    },
    Rule {
        name: "opencsd-typo (OpenCSD's OCSD_ERR_HW_CFG_UNSUPP text says `decodUer`)",
        intentional: true,
        test: |_, u, o| any(o, "decodUer") && same_but(u, o, |l| l.replace("decodUer", "decoder")),
    },
    Rule {
        name: "opencsd-vmid-as-character (OpenCSD prints an 8-bit VMID as a character)",
        intentional: true,
        test: |_, u, o| any(u, "VMID=0x") && any(o, "VMID=0x") && same_but(u, &vmid_lines_joined(o), blank_vmid_packet),
    },
    Rule {
        name: "opencsd-ptm-gray-timestamp (OpenCSD never converts Gray-coded PTM timestamps)",
        intentional: true,
        test: |c, u, o| {
            matches!(c.protocol, "ptm" | "tc2")
                && any(u, "TIMESTAMP")
                && same_but(u, o, |l| match l.split_once("TS=") {
                    Some((a, b)) => format!("{a}TS=#{}", b.split_once(';').map(|x| x.1).unwrap_or("")),
                    None => l.to_string(),
                })
        },
    },
    Rule {
        name: "opencsd-uninitialised-isa (OpenCSD prints the ISA of an element it never set)",
        intentional: true,
        test: |_, u, o| any(u, "ISA=Unk") && same_but(u, o, |l| blank_after(l, "ISA=")),
    },
    Rule {
        name: UNSET_RANGE_CLASS,
        intentional: true,
        test: |c, u, o| {
            matches!(c.protocol, "tc2" | "etmv3") && any(u, UNSET_RANGE) && same_but(u, o, blank_unset_range)
        },
    },
    Rule {
        name: "opencsd-several (more than one of the intentional PTM/ETMv3 differences above in one listing)",
        intentional: true,
        test: |c, u, o| {
            matches!(c.protocol, "ptm" | "tc2" | "etmv3") && same_but(u, &vmid_lines_joined(o), blank_intentional)
        },
    },
    Rule {
        name: M_PROFILE_CLASS,
        intentional: true,
        test: |c, u, o| c.protocol == "etmv4m" && (any(o, "(ISA=A64)") || (any(o, "(ISA=A32)") && any(u, "(ISA=T32)"))),
    },
    Rule {
        name: "ptm-no-sync-reason (PTM NO_SYNC [init-decoder] where OpenCSD says [undefined])",
        intentional: false,
        test: |_, u, o| any(u, "NO_SYNC( [init-decoder])") && any(o, "NO_SYNC( [undefined])"),
    },
    Rule {
        name: "reserved-cfg-no-error (no error for I_RESERVED_CFG headers in packet mode)",
        intentional: false,
        test: |_, u, o| any(u, "I_RESERVED_CFG") && any(o, "OCSD_ERR_INVALID_PCKT_HDR"),
    },
    Rule {
        name: "missing-init-spec-depth (TRACE_INFO lacks `INIT SPEC DEPTH=n; Decoder Sync point TINFO`)",
        intentional: false,
        test: |_, u, o| any(o, "INIT SPEC DEPTH") && !any(u, "INIT SPEC DEPTH"),
    },
    Rule {
        name: "fatal-error-prefix (`ERROR:` and a newline before the last fatal error)",
        intentional: false,
        test: |_, u, o| {
            u.iter().any(|l| {
                l.strip_prefix("ERROR:")
                    .is_some_and(|r| o.iter().any(|x| x.contains(r)))
            })
        },
    },
    Rule {
        name: "stats-availability (-stats: per-ID statistics where OpenCSD has none)",
        intentional: false,
        test: |_, u, o| any(u, "Decode stats ID") && any(o, "Decode stats unavailable"),
    },
    Rule {
        name: "ret-stack-overflow-without-cs-id (our return-stack overflow error lacks `CS ID=nn; `)",
        intentional: false,
        test: |_, u, o| any(u, "OCSD_ERR_RET_STACK_OVERFLOW") && any(o, "OCSD_ERR_RET_STACK_OVERFLOW"),
    },
    Rule {
        name: "stats-unsynced-bytes (-stats: unsynced bytes where OpenCSD reports 0)",
        intentional: false,
        test: |_, u, o| any(u, "Unsynced Bytes") && any(o, "Unsynced Bytes"),
    },
    Rule {
        name: "direct-br-cond-text (-direct_br_cond: error text, line break, NO_SYNC reason)",
        intentional: false,
        test: |a, _, _| has(a, "-direct_br_cond") || has(a, "-strict_br_cond"),
    },
    Rule {
        name: "pktp-errors-under-decode (packet-processor errors logged with -decode)",
        intentional: false,
        test: |a, u, o| {
            (has(a, "-decode") || has(a, "-decode_only"))
                && any(u, "PKTP_")
                && !any(o, "PKTP_")
                && without_pktp(u) == without_pktp(o)
        },
    },
    Rule {
        name: "last-error-line (`ERROR:` and blank lines at the end differ)",
        intentional: false,
        test: |_, u, o| u.iter().chain(o).all(|l| l.is_empty() || l.starts_with("ERROR:")),
    },
    Rule {
        name: "component-suffix-0000 (unformatted captures: PKTP_x_0000 / DCD_x_0000)",
        intentional: false,
        test: |_, u, o| any(u, "_0000 :") && !any(o, "_0000 :"),
    },
];

/// OpenCSD's lines with those its VMID packet text broke rejoined: a VMID
/// of 0x0a printed as a character ends the line (`VMID=0x0` then `; ` for
/// PTM, `VMID=0x` then an empty line for ETMv3).
fn vmid_lines_joined<'a>(o: &[&'a str]) -> Vec<std::borrow::Cow<'a, str>> {
    let mut v = Vec::with_capacity(o.len());
    let mut i = 0;
    while i < o.len() {
        let l = o[i];
        let next = o.get(i + 1).copied();
        if (l.ends_with("VM ID packet; VMID=0x0") && next == Some("; "))
            || (l.ends_with("VMID change.; VMID=0x") && next == Some(""))
        {
            v.push(format!("{l}\n{}", next.unwrap_or("")).into());
            i += 2;
        } else {
            v.push(l.into());
            i += 1;
        }
    }
    v
}

/// A PTM or ETMv3 VMID packet line cut where the VMID begins (it is the
/// packet text's last field); other lines as they are.
fn blank_vmid_packet(line: &str) -> String {
    match line.find("VMID=0x") {
        Some(i) if line.contains("VM ID packet") || line.contains("VMID change.") => line[..i + 7].to_string(),
        _ => line.to_string(),
    }
}

/// What we print for an ETMv3 instruction range never filled in in a slot
/// of the element list never used before: the element's initial values.
const UNSET_RANGE: &str = "INSTR_RANGE(exec range=0xffffffffffffffff:[0xffffffffffffffff] num_i(0) last_sz(0)";

const UNSET_RANGE_CLASS: &str =
    "opencsd-uninitialised-range (ETMv3: OpenCSD prints a range it never set, from uninitialised memory)";

/// An ETMv3 range element with no instruction (`num_i(0) last_sz(0)`) cut
/// to its index, trace ID and cycle count: the addresses, ISA and
/// instruction type are whatever the memory held.
fn blank_unset_range(line: &str) -> String {
    let Some(i) = line.find("INSTR_RANGE(exec range=") else {
        return line.to_string();
    };
    if !line.contains(" num_i(0) last_sz(0) ") {
        return line.to_string();
    }
    let cc = line.find(" [CC=").map(|j| &line[j..]).unwrap_or(")");
    format!("{}INSTR_RANGE(#{cc}", &line[..i])
}

/// An M-profile core with no A64 or A32 (see the README).
const M_PROFILE_CLASS: &str = "opencsd-m-profile-isa (OpenCSD follows an M-profile core's code as A64 or A32)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Asked-for help and version are answers, not errors: stdout, status 0.
    if let Some(a) = args
        .iter()
        .find(|a| matches!(a.as_str(), "-h" | "--help" | "-V" | "--version"))
    {
        if a.starts_with("-h") || a == "--help" {
            print!("{USAGE}");
        } else {
            println!("trc_diff {}", env!("CARGO_PKG_VERSION"));
        }
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(m) => {
            eprintln!("trc_diff: {m}");
            ExitCode::from(2)
        }
    }
}

struct Opts {
    opencsd: PathBuf,
    ours: PathBuf,
    count: u64,
    seed: u64,
    jobs: usize,
    out: PathBuf,
    protocols: Vec<&'static str>,
    keep_all: bool,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut opencsd = std::env::var_os("OPENCSD_LISTER").map(PathBuf::from);
    let mut ours = None;
    let mut count = 1000;
    let mut seed = 1;
    let mut jobs = 2;
    let mut out = PathBuf::from("trc_diff.out");
    let mut protocols = Vec::new();
    let mut keep_all = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("{a} needs a value\n{USAGE}"));
        let num = |v: String| v.parse::<u64>().map_err(|_| format!("{a}: `{v}` is not a number"));
        match a.as_str() {
            "--opencsd" => opencsd = Some(PathBuf::from(val()?)),
            "--ours" => ours = Some(PathBuf::from(val()?)),
            "--count" => count = num(val()?)?,
            "--seed" => seed = num(val()?)?,
            "--jobs" => jobs = num(val()?)?.clamp(1, 64) as usize,
            "--out" => out = PathBuf::from(val()?),
            "--protocol" => {
                let v = val()?;
                let p = PROTOCOLS
                    .iter()
                    .find(|p| **p == v)
                    .ok_or_else(|| format!("unknown protocol {v}: one of {}", PROTOCOLS.join(", ")))?;
                protocols.push(*p);
            }
            "--keep-all" => keep_all = true,
            _ => return Err(format!("unknown option {a}\n{USAGE}")),
        }
    }
    let opencsd = opencsd.ok_or_else(|| {
        "SKIPPED, nothing compared: no OpenCSD trc_pkt_lister given (--opencsd PATH or OPENCSD_LISTER)".to_string()
    })?;
    if !opencsd.is_file() {
        return Err(format!("OpenCSD lister {} not found", opencsd.display()));
    }
    let ours = match ours {
        Some(p) => p,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this program: {e}"))?
            .with_file_name("trc_pkt_lister"),
    };
    if !ours.is_file() {
        return Err(format!("our lister {} not found (--ours PATH)", ours.display()));
    }
    if protocols.is_empty() {
        protocols = PROTOCOLS.to_vec();
    }
    Ok(Opts {
        opencsd: std::fs::canonicalize(&opencsd).unwrap_or(opencsd),
        ours: std::fs::canonicalize(&ours).unwrap_or(ours),
        count,
        seed,
        jobs,
        out,
        protocols,
        keep_all,
    })
}

/// The generated snapshot of case `seed`, written to `dir`.
fn make_case(seed: u64, protocols: &[&'static str], dir: &Path) -> Result<Case, String> {
    let mut rng = Rng::new(seed ^ 0xd1ff);
    let name = protocols[rng.below(protocols.len() as u64) as usize];
    let mut protocol = GenProtocol::from_name(name).ok_or("protocol")?;
    let formatted = name == "tc2" || rng.chance(1, 2);
    let mut opts = GenOptions {
        seed,
        protocol,
        layout: if formatted {
            BufferLayout::Formatted
        } else {
            BufferLayout::Unformatted
        },
        length: 4 + rng.below(120) as usize,
    };
    let all = rng.chance(1, 4);
    let g = match protocol {
        GenProtocol::Etmv4 | GenProtocol::Etmv4M => {
            let mut o = Etmv4Options::default();
            if all {
                let _ = o.set_value("all", "1");
                let _ = o.set_value("bb", if rng.chance(1, 2) { "1" } else { "0" });
            }
            etmv4::generate_with(&opts, &o)
        }
        _ => {
            if all && !matches!(protocol, GenProtocol::Stm | GenProtocol::Itm | GenProtocol::Tc2) {
                let _ = protocol.set_option("all", "1");
                if matches!(protocol, GenProtocol::Ptm(_) | GenProtocol::Etmv3(_)) {
                    for n in ["cycleacc", "timestamps", "ctxid", "exceptions"] {
                        let _ = protocol.set_option(n, "1");
                    }
                }
                opts.protocol = protocol;
            }
            generate(&opts)
        }
    };
    let mut spec = g.spec;
    // Three times in four, a core OpenCSD 1.8.0 does not know is renamed to
    // its architecture, so that the trace is compared rather than refused.
    if rng.chance(3, 4) {
        for d in &mut spec.devices {
            let arch = match d.device_type.as_str() {
                "Cortex-A710" | "Cortex-X2" | "Neoverse-N2" | "Cortex-A520" => "ARMv9.0-A",
                "Cortex-M85" => "ARMv8.1-M",
                _ => continue,
            };
            d.device_type = arch.into();
        }
    }
    let damaged = if rng.chance(1, 2) { 1 + rng.below(4) as usize } else { 0 };
    for _ in 0..damaged {
        let b = rng.below(spec.buffers.len() as u64) as usize;
        let data = &mut spec.buffers[b].data;
        if data.is_empty() {
            continue;
        }
        let at = rng.below(data.len() as u64) as usize;
        if rng.chance(1, 2) {
            data[at] ^= 1 << rng.below(8);
        } else {
            data[at] = rng.next_u64() as u8;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    spec.write_to(dir).map_err(|e| e.to_string())?;

    let base = |mode: &[&str]| {
        // Relative to the work folder the listers run in, so that the
        // listings (which name it) are those of the kept reproducer.
        let mut v: Vec<String> = vec!["-ss_dir".into(), "snapshot".into(), "-no_time_print".into()];
        v.extend(mode.iter().map(|s| s.to_string()));
        if spec.buffers.len() > 1 {
            v.push("-multi_session".into());
        }
        v
    };
    let mut listings = vec![base(&[]), base(&["-decode"])];
    let mut extra = base(if rng.chance(1, 3) { &[] } else { &["-decode"] });
    const EXTRAS: &[&[&str]] = &[
        &["-decode_only"],
        &["-stats"],
        &["-direct_br_cond"],
        &["-strict_br_cond"],
        &["-range_cont"],
        &["-halt_err"],
        &["-aa64_opcode_chk"],
        &["-src_addr_n"],
        &["-o_raw_unpacked"],
        &["-o_raw_packed"],
        &["-test_waits", "5"],
        &["-macc_cache_p_num", "4"],
        &["-macc_cache_disable"],
        &["-macc_cache_p_size", "1024"],
    ];
    for _ in 0..1 + rng.below(2) {
        extra.extend(
            EXTRAS[rng.below(EXTRAS.len() as u64) as usize]
                .iter()
                .map(|s| s.to_string()),
        );
    }
    listings.push(extra);
    Ok(Case {
        seed,
        protocol: name,
        damaged,
        listings,
    })
}

/// Runs a lister, returning its listing after the banner (or a line saying
/// how it died).
fn list(label: &str, program: &Path, args: &[String], log: &Path) -> Vec<String> {
    let _ = std::fs::remove_file(log);
    let child = Command::new(program)
        .current_dir(log.parent().unwrap_or(Path::new(".")))
        .args(args)
        .arg("-logfilename")
        .arg(log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return vec![format!("<cannot run {}: {e}>", program.display())],
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() > Duration::from_secs(60) => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break None,
        }
    };
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.split('\n').collect();
    let mut body: Vec<String> = coresight_tools::regress::strip_banner(&lines)
        .iter()
        .map(|s| s.to_string())
        .collect();
    match status.map(|s| killed_by(&s)) {
        None => body.push("<timed out after 60 s>".into()),
        Some(Some(sig)) => body.push(format!("<{label} killed by signal {sig}>")),
        Some(None) => {}
    }
    body
}

/// The signal that ended a program (Unix); other systems have none.
#[cfg(unix)]
fn killed_by(s: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    s.signal()
}

#[cfg(not(unix))]
fn killed_by(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// The hunks where `a` (ours) and `b` (OpenCSD's) differ: (ours, theirs).
fn hunks<'a>(a: &'a [String], b: &'a [String]) -> Vec<(Vec<&'a str>, Vec<&'a str>)> {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let a = &a[pre..a.len() - suf];
    let b = &b[pre..b.len() - suf];
    if a.is_empty() && b.is_empty() {
        return Vec::new();
    }
    let whole = || {
        vec![(
            a.iter().map(|s| s.as_str()).collect(),
            b.iter().map(|s| s.as_str()).collect(),
        )]
    };
    if a.len() * b.len() > 4_000_000 {
        return whole();
    }
    // Longest common subsequence, then the runs between its lines.
    let (n, m) = (a.len(), b.len());
    let mut t = vec![0u32; (n + 1) * (m + 1)];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i * (m + 1) + j] = if a[i] == b[j] {
                t[(i + 1) * (m + 1) + j + 1] + 1
            } else {
                t[(i + 1) * (m + 1) + j].max(t[i * (m + 1) + j + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut ha, mut hb): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            if !ha.is_empty() || !hb.is_empty() {
                out.push((std::mem::take(&mut ha), std::mem::take(&mut hb)));
            }
            i += 1;
            j += 1;
        } else if j < m && (i == n || t[i * (m + 1) + j + 1] >= t[(i + 1) * (m + 1) + j]) {
            hb.push(&b[j]);
            j += 1;
        } else {
            ha.push(&a[i]);
            i += 1;
        }
    }
    if !ha.is_empty() || !hb.is_empty() {
        out.push((ha, hb));
    }
    out
}

/// A class name for a hunk no rule knows: its first line, numbers blanked.
fn unknown_class(u: &[&str], o: &[&str]) -> String {
    let blank = |l: &str| -> String {
        let mut s = String::new();
        let mut chars = l.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '0' && chars.peek() == Some(&'x') {
                chars.next();
                while chars.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                    chars.next();
                }
                s.push_str("0x#");
            } else if c.is_ascii_digit() {
                while chars.peek().is_some_and(|c| c.is_ascii_digit()) {
                    chars.next();
                }
                s.push('#');
            } else {
                s.push(c);
            }
        }
        // Packet bytes and indexes vary; what follows the tab names the packet.
        let s = s.rsplit_once('\t').map(|x| x.1.to_string()).unwrap_or(s);
        s.chars().take(70).collect()
    };
    format!(
        "unclassified: ours `{}` / OpenCSD `{}`",
        u.first().map(|l| blank(l)).unwrap_or_default(),
        o.first().map(|l| blank(l)).unwrap_or_default()
    )
}

/// The hunks of a listing, as [`hunks`], except where OpenCSD was killed
/// by a signal: its listing is then compared as far as it got, and the
/// last hunk (what we listed beyond that point) carries the signal line.
fn hunks_to_crash<'a>(a: &'a [String], b: &'a [String]) -> Vec<(Vec<&'a str>, Vec<&'a str>)> {
    let Some((marker, rest)) = b
        .split_last()
        .filter(|(m, _)| m.starts_with("<OpenCSD killed by signal"))
    else {
        return hunks(a, b);
    };
    let end = rest.iter().rposition(|l| !l.is_empty()).map_or(0, |i| i + 1);
    let mut hs = hunks(a, &rest[..end]);
    let ends_ours = |h: &(Vec<&str>, Vec<&str>)| matches!((h.0.last(), a.last()), (Some(x), Some(y)) if std::ptr::eq(x.as_ptr(), y.as_ptr()));
    match hs.last_mut() {
        Some(h) if ends_ours(h) => h.1.push(marker),
        _ => hs.push((Vec::new(), vec![marker])),
    }
    hs
}

/// The classes of a listing's hunks. Once OpenCSD has followed an M-profile
/// core's code as A64 or A32, the program flow it lists differs from there
/// on: later hunks of element and packet lines are of that class too.
fn classify_listing(c: &Ctx, hs: &[(Vec<&str>, Vec<&str>)]) -> Vec<(String, bool)> {
    let mut m_profile = false;
    hs.iter()
        .map(|(u, o)| {
            let only_trace = u.iter().chain(o).all(|l| l.starts_with("Idx:"));
            if m_profile && only_trace {
                return (M_PROFILE_CLASS.to_string(), true);
            }
            let class = classify(c, u, o);
            m_profile |= class.0 == M_PROFILE_CLASS;
            class
        })
        .collect()
}

fn classify(c: &Ctx, u: &[&str], o: &[&str]) -> (String, bool) {
    for r in RULES {
        if (r.test)(c, u, o) {
            return (r.name.to_string(), r.intentional);
        }
    }
    (unknown_class(u, o), false)
}

/// One class: intentional or not, listings per protocol, and the reproducer
/// kept (its folder and snapshot size).
type ClassTally = (bool, BTreeMap<&'static str, usize>, Option<(PathBuf, u64)>);

#[derive(Default)]
struct Tally {
    /// protocol -> (listings, differing, differing with a non-intentional class)
    per_protocol: BTreeMap<&'static str, (usize, usize, usize)>,
    /// class -> (intentional, protocol -> listings, reproducer dir, its trace size)
    classes: BTreeMap<String, ClassTally>,
}

fn trace_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(u64::MAX)
}

fn slug(class: &str) -> String {
    let s: String = class
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(60)
        .collect();
    let mut h: u32 = 2166136261;
    for b in class.bytes() {
        h = (h ^ b as u32).wrapping_mul(16777619);
    }
    format!("{s}_{h:08x}")
}

/// Keeps the snapshot as the reproducer of `class` if it is the smallest so far.
fn keep_reproducer(
    tally: &Mutex<Tally>,
    out: &Path,
    class: &str,
    snap: &Path,
    case: &Case,
    args: &[String],
    (ours, theirs): (&[String], &[String]),
) {
    let size = trace_size(snap);
    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    let entry = t.classes.get_mut(class).expect("class tallied first");
    if entry.2.as_ref().is_some_and(|(_, s)| *s <= size) {
        return;
    }
    let dir = out.join("repro").join(slug(class));
    let _ = std::fs::remove_dir_all(&dir);
    let ss = dir.join("snapshot");
    if std::fs::create_dir_all(&ss).is_err() {
        return;
    }
    if let Ok(d) = std::fs::read_dir(snap) {
        for e in d.flatten() {
            let _ = std::fs::copy(e.path(), ss.join(e.file_name()));
        }
    }
    let _ = std::fs::write(dir.join("args.txt"), format!("{}\n", args.join(" ")));
    let _ = std::fs::write(
        dir.join("class.txt"),
        format!(
            "{class}\n{} seed {}, {} damaged bytes\n",
            case.protocol, case.seed, case.damaged
        ),
    );
    let _ = std::fs::write(dir.join("ours.ppl"), ours.join("\n"));
    let _ = std::fs::write(dir.join("opencsd.ppl"), theirs.join("\n"));
    entry.2 = Some((dir, size));
}

/// Keeps one listing with its snapshot in `dir` (`--keep-all`).
fn keep_listing(
    dir: &Path,
    classes: &[(String, bool)],
    snap: &Path,
    case: &Case,
    args: &[String],
    (ours, theirs): (&[String], &[String]),
) {
    let ss = dir.join("snapshot");
    let _ = std::fs::remove_dir_all(dir);
    if std::fs::create_dir_all(&ss).is_err() {
        return;
    }
    if let Ok(d) = std::fs::read_dir(snap) {
        for e in d.flatten() {
            let _ = std::fs::copy(e.path(), ss.join(e.file_name()));
        }
    }
    let names: Vec<&str> = classes.iter().map(|c| c.0.as_str()).collect();
    let _ = std::fs::write(dir.join("args.txt"), format!("{}\n", args.join(" ")));
    let _ = std::fs::write(
        dir.join("class.txt"),
        format!(
            "{}\n{} seed {}, {} damaged bytes\n",
            names.join("\n"),
            case.protocol,
            case.seed,
            case.damaged
        ),
    );
    let _ = std::fs::write(dir.join("ours.ppl"), ours.join("\n"));
    let _ = std::fs::write(dir.join("opencsd.ppl"), theirs.join("\n"));
}

fn run(args: &[String]) -> Result<bool, String> {
    let o = Arc::new(parse(args)?);
    std::fs::create_dir_all(o.out.join("work")).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut threads = Vec::new();
    for w in 0..o.jobs {
        let (o, tally, next, done) = (o.clone(), tally.clone(), next.clone(), done.clone());
        threads.push(std::thread::spawn(move || {
            let work = o.out.join("work").join(format!("w{w}"));
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as u64;
                if i >= o.count {
                    break;
                }
                let snap = work.join("snapshot");
                let case = match make_case(o.seed + i, &o.protocols, &snap) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("trc_diff: seed {}: cannot write the snapshot: {e}", o.seed + i);
                        continue;
                    }
                };
                for (n, args) in case.listings.iter().enumerate() {
                    let ours = list("ours", &o.ours, args, &work.join("ours.ppl"));
                    let theirs = list("OpenCSD", &o.opencsd, args, &work.join("opencsd.ppl"));
                    let hs = hunks_to_crash(&ours, &theirs);
                    let ctx = Ctx {
                        args,
                        protocol: case.protocol,
                    };
                    let mut classes = classify_listing(&ctx, &hs);
                    classes.sort();
                    classes.dedup();
                    // Under -test_waits OpenCSD's own listing changes (lost
                    // elements, wrong indexes): where its listing without
                    // forced waits is ours, the difference is OpenCSD's.
                    if classes.iter().any(|c| !c.1) && args.iter().any(|a| a == "-test_waits") {
                        let mut plain = Vec::new();
                        let mut it = args.iter();
                        while let Some(a) = it.next() {
                            if a == "-test_waits" {
                                it.next();
                            } else {
                                plain.push(a.clone());
                            }
                        }
                        let unwaited = list("OpenCSD", &o.opencsd, &plain, &work.join("opencsd-nowait.ppl"));
                        if hunks(&ours, &unwaited).is_empty() {
                            classes = vec![(TEST_WAITS_CLASS.to_string(), true)];
                        }
                    }
                    {
                        let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
                        let p = t.per_protocol.entry(case.protocol).or_default();
                        p.0 += 1;
                        if !classes.is_empty() {
                            p.1 += 1;
                        }
                        if classes.iter().any(|c| !c.1) {
                            p.2 += 1;
                        }
                        for (c, intentional) in &classes {
                            let e = t
                                .classes
                                .entry(c.clone())
                                .or_insert((*intentional, BTreeMap::new(), None));
                            *e.1.entry(case.protocol).or_default() += 1;
                        }
                    }
                    if o.keep_all && classes.iter().any(|c| !c.1) {
                        let dir = o.out.join("all").join(format!("{}-{n}", case.seed));
                        keep_listing(&dir, &classes, &snap, &case, args, (&ours, &theirs));
                    }
                    for (c, _) in &classes {
                        keep_reproducer(&tally, &o.out, c, &snap, &case, args, (&ours, &theirs));
                    }
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n % 500 == 0 {
                    eprintln!("trc_diff: {n} snapshots, {:.0} s", start.elapsed().as_secs_f64());
                }
            }
        }));
    }
    for t in threads {
        let _ = t.join();
    }
    let t = tally.lock().unwrap_or_else(|e| e.into_inner());
    let mut r = String::new();
    let _ = writeln!(
        r,
        "trc_diff: ours {} vs OpenCSD {}; seeds {}..{}\n",
        o.ours.display(),
        o.opencsd.display(),
        o.seed,
        o.seed + o.count
    );
    let _ = writeln!(
        r,
        "{:<8} {:>9} {:>9} {:>15}",
        "protocol", "listings", "differ", "not intentional"
    );
    let mut tot = (0, 0, 0);
    for (p, (n, d, u)) in &t.per_protocol {
        let _ = writeln!(r, "{p:<8} {n:>9} {d:>9} {u:>15}");
        tot = (tot.0 + n, tot.1 + d, tot.2 + u);
    }
    let _ = writeln!(r, "{:<8} {:>9} {:>9} {:>15}\n", "total", tot.0, tot.1, tot.2);
    for (c, (intentional, per, repro)) in &t.classes {
        let _ = writeln!(
            r,
            "{} {c}",
            if *intentional { "[intentional]" } else { "[DIFFERENCE] " }
        );
        let counts: Vec<String> = per.iter().map(|(p, n)| format!("{p} {n}")).collect();
        let _ = writeln!(r, "    listings: {}", counts.join(", "));
        if let Some((d, _)) = repro {
            let _ = writeln!(r, "    reproducer: {}", d.display());
        }
    }
    print!("{r}");
    let _ = std::fs::write(o.out.join("report.txt"), &r);
    let _ = std::fs::remove_dir_all(o.out.join("work"));
    Ok(tot.2 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx<'a>(args: &'a [String], protocol: &'static str) -> Ctx<'a> {
        Ctx { args, protocol }
    }

    #[test]
    fn a_vmid_of_0x0a_that_broke_opencsds_line_is_a_vmid_character() {
        let u = ["Idx:87; ID:16;\tVM ID packet; VMID=0x0a; "];
        let o = ["Idx:87; ID:16;\tVM ID packet; VMID=0x0", "; "];
        let (class, intentional) = classify(&ctx(&[], "ptm"), &u, &o);
        assert!(class.starts_with("opencsd-vmid-as-character"), "{class}");
        assert!(intentional);
        // Another line after it is not swallowed.
        let o = ["Idx:87; ID:16;\tVMID change.; VMID=0x", "Idx:88; ID:16;\tnext"];
        assert_eq!(vmid_lines_joined(&o).len(), 2);
    }

    #[test]
    fn an_unset_etmv3_range_matches_any_range_with_the_same_cycle_count() {
        let u = [
            "Idx:19; ID:2a; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xffffffffffffffff:[0xffffffffffffffff] num_i(0) last_sz(0) (ISA=Unk) N ---  [CC=1]; )",
        ];
        let o = [
            "Idx:19; ID:2a; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x558126abed60:[0x0] num_i(0) last_sz(0) (ISA=A32) N  [CC=1]; )",
        ];
        assert_eq!(
            classify(&ctx(&[], "etmv3"), &u, &o),
            (UNSET_RANGE_CLASS.to_string(), true)
        );
        // Not with another cycle count, nor on a range that has instructions.
        let o2 = [
            "Idx:19; ID:2a; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x0:[0x0] num_i(0) last_sz(0) (ISA=A32) N  [CC=2]; )",
        ];
        assert!(!classify(&ctx(&[], "etmv3"), &u, &o2).1);
        let o3 = [
            "Idx:19; ID:2a; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x0:[0x4] num_i(1) last_sz(4) (ISA=A32) E  [CC=1]; )",
        ];
        assert!(!classify(&ctx(&[], "etmv3"), &u, &o3).1);
    }

    #[test]
    fn what_we_list_after_opencsd_died_is_one_hunk_with_the_signal() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let ours = s(&["a", "b", "c", "", "d"]);
        let theirs = s(&["a", "b", "", "<OpenCSD killed by signal 11>"]);
        let hs = hunks_to_crash(&ours, &theirs);
        assert_eq!(hs, vec![(vec!["c", "", "d"], vec!["<OpenCSD killed by signal 11>"])]);
        // A difference before the crash stays a hunk of its own.
        let theirs = s(&["a", "x", "c", "<OpenCSD killed by signal 11>"]);
        let hs = hunks_to_crash(&ours, &theirs);
        assert_eq!(hs.len(), 2);
        assert_eq!(hs[0], (vec!["b"], vec!["x"]));
    }

    #[test]
    fn hunks_after_an_m_profile_isa_switch_are_of_its_class() {
        let args = [];
        let c = ctx(&args, "etmv4m");
        let hs = vec![
            (
                vec!["Idx:79; ID:1a; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) EL3N; 64-bit; )"],
                vec!["Idx:79; ID:1a; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL3N; 64-bit; )"],
            ),
            (vec!["Idx:103; ID:1a; OCSD_GEN_TRC_ELEM_INSTR_RANGE(...)"], vec![]),
            (vec!["DCD_ETMV4 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ)"], vec![]),
        ];
        let classes = classify_listing(&c, &hs);
        assert_eq!(classes[0], (M_PROFILE_CLASS.to_string(), true));
        assert_eq!(classes[1], (M_PROFILE_CLASS.to_string(), true));
        assert!(!classes[2].1, "an error line is not explained by the ISA");
    }
}
