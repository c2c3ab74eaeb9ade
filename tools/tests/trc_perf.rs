//! trc_perf's command line: help, version, exit statuses, and a profile of a recording made
//! here (a generated execution written as perf.data, with its ELF in a symbol folder).

use std::path::PathBuf;
use std::process::Command;

use coresight_generator::BufferLayout;
use coresight_generator::perf_data::{PerfOptions, generate_perf_data};

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
    for cmd in ["info", "autofdo", "script", "decode", "dump"] {
        assert!(text.contains(cmd), "{text}");
    }
    for cmd in ["info", "autofdo", "script", "decode", "dump"] {
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
    assert!(dump.contains("CoreSight ETM Trace data: size"), "{dump}");
    assert!(dump.contains("\tIdx:"), "{dump}");
}
