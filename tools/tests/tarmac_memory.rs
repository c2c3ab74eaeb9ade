//! Memory of `tarmac` on deep call chains: the analyser keeps the calls
//! found, never the trace, and the outputs are written as they are made.
//! Peak RSS is measured by GNU time (`/usr/bin/time -f %M`), so these
//! tests are ignored and run by .ci/run (which installs `time`).

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// A folder of the test's own: the tests run at once, and each removes its
/// folder when done.
fn temp_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tarmac-memory-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What a run of `tarmac` did: peak RSS in KiB, bytes written, the first
/// and last lines written (unindented) and when the first byte came.
struct Run {
    rss: u64,
    bytes: u64,
    first: String,
    last: String,
    first_byte: Duration,
}

/// Runs `tarmac ARGS` under GNU time, its output read as it comes (never
/// held).
fn run_measured(dir: &Path, args: &[&str]) -> Run {
    let start = Instant::now();
    let mut first_byte = None;
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
        first_byte.get_or_insert_with(|| start.elapsed());
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
    Run {
        rss,
        bytes,
        first,
        last,
        first_byte: first_byte.unwrap_or_default(),
    }
}

/// Peak RSS at three depths, a doubling apart: the growth must be linear
/// (the second doubling costs no more than twice the first, give or take a
/// MiB of allocator noise) and, carried on to 200,000 deep, under 100 MB.
/// Gives the KiB per level.
fn assert_linear(what: &str, rss: [(u64, u64); 3]) -> u64 {
    let [(d0, r0), (d1, r1), (d2, r2)] = rss;
    assert_eq!((d1, d2), (2 * d0, 4 * d0));
    let (g1, g2) = (r1.saturating_sub(r0), r2.saturating_sub(r1));
    assert!(
        g2 <= 2 * g1 + 1024,
        "{what}: {r0}, {r1}, {r2} KiB at {d0}, {d1}, {d2} deep: grows faster than the depth"
    );
    let per_level = g2.div_ceil(d2 - d1).max(1);
    let at_200k = r2 + (200_000 - d2) * g2 / (d2 - d1);
    assert!(at_200k < 100 << 10, "{what}: {at_200k} KiB at 200,000 deep, carried on");
    eprintln!("{what}: {r0}, {r1}, {r2} KiB at {d0}, {d1}, {d2} deep; {at_200k} KiB at 200,000, carried on");
    per_level
}

/// The analyser on a 200,000-deep chain: the profile (whose output is
/// small) in under 100 MB. The call tree and the flame graph, whose
/// outputs grow as the square of the depth (80 GB and 140 GB at 200,000
/// deep: minutes), at 5,000, 10,000 and 20,000 deep (1.6 GB of call tree
/// at 20,000): their memory grows linearly with the depth and, carried on,
/// stays under 100 MB at 200,000.
#[test]
#[ignore]
fn deep_call_chains_in_bounded_memory() {
    let dir = temp_dir("deep");
    let deep = dir.join("deep.tarmac");
    deep_chain(&deep, 200_000);
    let r = run_measured(&dir, &["profile", deep.to_str().unwrap()]);
    assert_eq!(r.first, "Address     Count       Time        Function name\n");
    assert_eq!(r.last, "0x2000      200000      80000400000 \n");
    assert!(r.rss < 100 << 10, "profile of a 200,000-deep chain: {} KiB", r.rss);
    eprintln!("profile, 200,000 deep: {} KiB", r.rss);
    let mut calltree = [(0, 0); 3];
    let mut flamegraph = [(0, 0); 3];
    for (k, depth) in [5_000, 10_000, 20_000].into_iter().enumerate() {
        deep_chain(&deep, depth);
        let r = run_measured(&dir, &["calltree", deep.to_str().unwrap()]);
        // The root (the whole trace: 4d + 2 steps, 7d + 3 lines), then the
        // deepest call last: its SUB at t:2d (line 4d: 2 + 4 lines per
        // level above it), its NOP, ADD and RET (t:2d + 3, line 4d + 5).
        assert_eq!(
            r.first,
            format!(
                "o t:1 l:2 pc:0x1000 - t:{} l:{} pc:0x1004 : \n",
                4 * depth + 2,
                7 * depth + 3
            )
        );
        assert_eq!(
            r.last,
            format!(
                "o t:{} l:{} pc:0x2000 - t:{} l:{} pc:0x200c : \n",
                2 * depth,
                4 * depth,
                2 * depth + 3,
                4 * depth + 5
            )
        );
        // The output grows as the square of the depth.
        assert!(r.bytes > 4 * depth * depth, "{}", r.bytes);
        calltree[k] = (depth, r.rss);
        let r = run_measured(&dir, &["flamegraph", deep.to_str().unwrap()]);
        assert!(r.first.starts_with("0x1000 "), "{}", r.first);
        assert_eq!(
            r.last,
            format!(
                "{} 3\n",
                vec!["0x2000"; depth as usize + 1]
                    .join(";")
                    .replacen("0x2000", "0x1000", 1)
            )
        );
        flamegraph[k] = (depth, r.rss);
    }
    assert_linear("calltree", calltree);
    assert_linear("flamegraph", flamegraph);
    std::fs::remove_dir_all(&dir).ok();
}

/// `tarmac decode` streams: on a generated capture and on the same capture
/// 16 times over (each copy starts with its A-Sync), peak memory is the
/// same within a MiB and under 50 MB, and the first line comes within a
/// second.
#[test]
#[ignore]
fn decode_streams_in_memory_independent_of_the_capture_size() {
    let dir = temp_dir("decode");
    let one = dir.join("one");
    let st = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["--protocol", "etmv4", "--seed", "3", "--length", "20000", "--out"])
        .arg(&one)
        .output()
        .unwrap();
    assert!(st.status.success());
    std::fs::remove_file(one.join("truth.txt")).ok();
    let many = dir.join("many");
    std::fs::create_dir_all(&many).unwrap();
    for e in std::fs::read_dir(&one).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), many.join(e.file_name())).unwrap();
    }
    let trace = std::fs::read(one.join("trace.bin")).unwrap();
    std::fs::write(many.join("trace.bin"), trace.repeat(16)).unwrap();
    let small = run_measured(&dir, &["decode", one.to_str().unwrap(), "--no-disasm"]);
    let big = run_measured(&dir, &["decode", many.to_str().unwrap(), "--no-disasm"]);
    // Each copy decodes to the same instructions (16 times the lines give
    // or take the first copy's lines before its first sync).
    assert!(big.bytes > 15 * small.bytes, "{} {}", big.bytes, small.bytes);
    assert!(
        big.rss < 50 << 10,
        "decode of {} KiB: {} KiB",
        (16 * trace.len()) >> 10,
        big.rss
    );
    assert!(
        big.rss <= small.rss + 1024,
        "decode: {} KiB for the capture, {} KiB for it 16 times",
        small.rss,
        big.rss
    );
    assert!(
        big.first_byte < Duration::from_secs(1),
        "first line after {:?}",
        big.first_byte
    );
    // With disassembly (capstone), too.
    let dis = run_measured(&dir, &["decode", one.to_str().unwrap()]);
    assert!(dis.rss < 50 << 10, "{} KiB", dis.rss);
    assert!(
        dis.first_byte < Duration::from_secs(1),
        "first line after {:?}",
        dis.first_byte
    );
    eprintln!(
        "decode: {} KiB for {} KiB of capture, {} KiB for 16 times that; first line after {:?}",
        small.rss,
        trace.len() >> 10,
        big.rss,
        big.first_byte
    );
    std::fs::remove_dir_all(&dir).ok();
}
