//! Memory of `tarmac` on deep call chains: the analyser keeps the calls
//! found, never the trace, and the outputs are written as they are made.
//! Peak RSS is measured by GNU time (`/usr/bin/time -f %M`), so these
//! tests are ignored and run by .ci/run (which installs `time`).

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Writes an AArch64 trace of a call chain `depth` deep: main calls f at
/// 0x2000, which lowers the stack pointer and calls itself, down to the
/// bottom, then every level returns (each call's link register write, and
/// the stack pointer back at its value, are what make it a call).
fn deep_chain(path: &Path, depth: u64) {
    let mut w = BufWriter::new(std::fs::File::create(path).unwrap());
    let mut t = 1u64;
    let mut sp = 0x8000_0000u64;
    // An instruction, then the registers it wrote, at one time.
    let mut insn = |w: &mut BufWriter<std::fs::File>, addr: u32, enc: u32, text: &str, regs: &[(&str, u64)]| {
        writeln!(w, "{t} clk IT ({t}) {addr:08x} {enc:08x} O EL1h_n : {text}").unwrap();
        for (r, v) in regs {
            writeln!(w, "{t} clk R {r} {v:016x}").unwrap();
        }
        t += 1;
    };
    writeln!(w, "0 clk R SP_EL0 {sp:016x}").unwrap();
    insn(&mut w, 0x1000, 0x94000400, "BL 0x2000", &[("X30", 0x1004)]);
    for k in 0..depth {
        sp -= 16;
        insn(&mut w, 0x2000, 0xd10043ff, "SUB sp,sp,#16", &[("SP_EL0", sp)]);
        if k + 1 < depth {
            insn(&mut w, 0x2004, 0x97ffffff, "BL 0x2000", &[("X30", 0x2008)]);
        } else {
            insn(&mut w, 0x2004, 0xd503201f, "NOP", &[]);
        }
    }
    for _ in 0..depth {
        sp += 16;
        insn(&mut w, 0x2008, 0x910043ff, "ADD sp,sp,#16", &[("SP_EL0", sp)]);
        insn(&mut w, 0x200c, 0xd65f03c0, "RET", &[]);
    }
    insn(&mut w, 0x1004, 0xd503201f, "NOP", &[]);
    w.flush().unwrap();
}

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tarmac-memory-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `tarmac ARGS` under GNU time; gives the peak RSS in KiB, the
/// count of bytes written and the first and last lines of the output,
/// unindented (read as it comes, never held).
fn run_measured(dir: &Path, args: &[&str]) -> (u64, u64, String, String) {
    let rss_file = dir.join("rss");
    let mut child = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss_file)
        .arg(env!("CARGO_BIN_EXE_tarmac"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let (mut first, mut last, mut line) = (String::new(), String::new(), Vec::new());
    let mut bytes = 0u64;
    loop {
        line.clear();
        let n = out.by_ref().take(1 << 22).read_until(b'\n', &mut line).unwrap();
        if n == 0 {
            break;
        }
        bytes += n as u64;
        // Lines without their indentation (a call tree's are as deep as
        // the call).
        let text = String::from_utf8_lossy(&line[..n]).trim_start().to_string();
        if first.is_empty() {
            first = text.clone();
        }
        last = text;
    }
    assert!(child.wait().unwrap().success(), "{args:?}");
    let rss = std::fs::read_to_string(&rss_file).unwrap().trim().parse().unwrap();
    (rss, bytes, first, last)
}

/// The analyser on a 200,000-deep chain: the profile (whose output is
/// small) in under 100 MB; the call tree and the flame graph of a
/// 10,000-deep chain (their outputs grow as the square of the depth:
/// 400 MB and 350 MB here, 80 GB for the call tree at 200,000) in under
/// 100 MB too, written as made.
#[test]
#[ignore]
fn deep_call_chains_in_bounded_memory() {
    let dir = temp_dir();
    let deep = dir.join("deep.tarmac");
    deep_chain(&deep, 200_000);
    let (rss, _, first, last) = run_measured(&dir, &["profile", deep.to_str().unwrap()]);
    assert_eq!(first, "Address     Count       Time        Function name\n");
    assert_eq!(last, "0x2000      200000      80000400000 \n");
    assert!(rss < 100 << 10, "profile of a 200,000-deep chain: {rss} KiB");
    eprintln!("profile, 200,000 deep: {rss} KiB");
    deep_chain(&deep, 10_000);
    let (rss, bytes, first, last) = run_measured(&dir, &["calltree", deep.to_str().unwrap()]);
    // The root (the whole trace: 40,002 steps, 70,003 lines), then the
    // deepest call last: its SUB at t:20000 (line 40000: 2 + 4 lines per
    // level above it), its NOP, ADD and RET (t:20003, line 40005).
    assert_eq!(first, "o t:1 l:2 pc:0x1000 - t:40002 l:70003 pc:0x1004 : \n");
    assert_eq!(last, "o t:20000 l:40000 pc:0x2000 - t:20003 l:40005 pc:0x200c : \n");
    assert!(bytes > 400_000_000, "{bytes}");
    assert!(rss < 100 << 10, "calltree of a 10,000-deep chain: {rss} KiB");
    eprintln!("calltree, 10,000 deep: {rss} KiB for {bytes} bytes");
    let (rss, bytes, first, _) = run_measured(&dir, &["flamegraph", deep.to_str().unwrap()]);
    assert!(first.starts_with("0x1000 "), "{first}");
    assert!(rss < 100 << 10, "flamegraph of a 10,000-deep chain: {rss} KiB");
    eprintln!("flamegraph, 10,000 deep: {rss} KiB for {bytes} bytes");
    std::fs::remove_dir_all(&dir).ok();
}
