//! `tarmac browse` driven in tmux: keys sent with `send-keys`, the screen
//! read with `capture-pane`, and the registers shown checked against the
//! trace's own `R` lines at the instruction shown, the memory window
//! against its `MW`/`MR` lines, and a folded call's lines hidden. Needs tmux (installed
//! by .ci/run): `cargo test -p coresight-tools --test tarmac_browse -- --ignored`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tarmac/tests/fixtures/calls")
        .join(name)
}

/// The trace's lines, split in words.
fn words(text: &str) -> Vec<Vec<&str>> {
    text.lines().map(|l| l.split_whitespace().collect()).collect()
}

fn is_instruction(w: &[&str]) -> bool {
    matches!(w.get(2), Some(&"IT") | Some(&"IS"))
}

/// The registers as the trace says after the instruction at `line`: the
/// last `R` line of each up to the next instruction. Plain text handling,
/// independent of the library.
fn expected_regs(lines: &[Vec<&str>], line: usize) -> BTreeMap<String, String> {
    let mut regs = BTreeMap::new();
    for (i, w) in lines.iter().enumerate() {
        if i + 1 > line && is_instruction(w) {
            break;
        }
        if w.get(2) == Some(&"R") {
            regs.insert(w[3].to_uppercase(), w[4].to_lowercase());
        }
    }
    regs
}

/// The first instruction line at or after `line` for which `want` holds.
fn instruction_from(lines: &[Vec<&str>], line: usize, want: impl Fn(&[&str]) -> bool) -> usize {
    (line..=lines.len())
        .find(|&n| is_instruction(&lines[n - 1]) && want(&lines[n - 1]))
        .unwrap()
}

struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "b"])
    }
    /// Waits until the header says the browser is at `line` and the
    /// screen has stopped changing (tmux may show a frame half drawn); the
    /// screen.
    fn wait_line(&self, line: usize) -> String {
        let start = Instant::now();
        let mut last = String::new();
        loop {
            let s = self.screen();
            if s.starts_with(&format!("line {line} ")) && s == last {
                return s;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "not at line {line}:\n{s}");
            last = s;
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// The registers panel: the rightmost bordered column, `NAME VALUE` rows.
fn shown_regs(screen: &str) -> BTreeMap<String, String> {
    let mut regs = BTreeMap::new();
    for row in screen.lines() {
        let cells: Vec<&str> = row.split('│').collect();
        if cells.len() >= 4
            && let [name, value] = cells[3].split_whitespace().collect::<Vec<_>>()[..]
        {
            regs.insert(name.to_string(), value.to_string());
        }
    }
    regs
}

#[test]
#[ignore = "needs tmux"]
fn browser_shows_the_registers_of_the_trace_at_each_step_jump_and_search() {
    let text = std::fs::read_to_string(fixture("a64-fm.tarmac")).unwrap();
    let lines = words(&text);
    let dir = std::env::temp_dir().join(format!("tarmac-browse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let index = dir.join("a64-fm.tidx");
    let t = Tmux {
        socket: format!("tarmac-browse-{}", std::process::id()),
    };
    let cmd = format!(
        "{} browse {} --image {} --index={}",
        env!("CARGO_BIN_EXE_tarmac"),
        fixture("a64-fm.tarmac").display(),
        fixture("a64.elf").display(),
        index.display()
    );
    t.cmd(&["new-session", "-d", "-s", "b", "-x", "120", "-y", "40", &cmd]);
    let check = |line: usize| {
        let s = t.wait_line(line);
        assert_eq!(shown_regs(&s), expected_regs(&lines, line), "at line {line}:\n{s}");
    };
    let keys = |k: &[&str]| {
        let mut args = vec!["send-keys", "-t", "b"];
        args.extend_from_slice(k);
        t.cmd(&args);
    };
    // Starts at the first instruction.
    let first = instruction_from(&lines, 1, |_| true);
    check(first);
    // g 100: the first instruction at or after line 100.
    keys(&["g", "100", "Enter"]);
    let at = instruction_from(&lines, 100, |_| true);
    check(at);
    // Three steps forward, one back.
    keys(&["j", "j", "j"]);
    let mut n = at;
    for _ in 0..3 {
        n = instruction_from(&lines, n + 1, |_| true);
    }
    check(n);
    keys(&["k"]);
    let back = (1..n).rev().find(|&i| is_instruction(&lines[i - 1])).unwrap();
    check(back);
    // Search by symbol: fib is at 0x400130 in the image.
    keys(&["/", "fib", "Enter"]);
    let fib = instruction_from(&lines, back + 1, |w| w[4] == "00400130");
    assert_eq!(fib, 108);
    check(fib);
    // r: this call's return, n: fib's next call, as upstream's calltree
    // (a64-fm.calltree) gives them: fib entered at line 108 returns at 123,
    // next entered at 142.
    keys(&["r"]);
    check(123);
    keys(&["n"]);
    check(142);
    // g t50: the first instruction at time 50 or later.
    keys(&["g", "t50", "Enter"]);
    let t50 = instruction_from(&lines, 1, |w| w[0].parse::<u64>().unwrap() >= 50);
    check(t50);
    // Search by address.
    keys(&["/", "400154", "Enter"]);
    check(instruction_from(&lines, t50 + 1, |w| w[4] == "00400154"));
    keys(&["q"]);
    let start = Instant::now();
    while Command::new("tmux")
        .args(["-L", &t.socket, "has-session", "-t", "b"])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(start.elapsed() < Duration::from_secs(10), "q did not quit");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The index was built and saved for the next run.
    assert!(index.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The memory window's rows: `ADDRESS  b0 b1 ... b15` between the left
/// pane's borders, by address.
fn shown_memory(screen: &str) -> BTreeMap<u64, Vec<String>> {
    let mut rows = BTreeMap::new();
    for row in screen.lines() {
        let cells: Vec<&str> = row.split('│').collect();
        if cells.len() >= 2
            && let [addr, bytes @ ..] = &cells[1].split_whitespace().collect::<Vec<_>>()[..]
            && addr.len() == 16
            && bytes.len() == 16
            && let Ok(a) = u64::from_str_radix(addr, 16)
        {
            rows.insert(a, bytes.iter().map(|b| b.to_string()).collect());
        }
    }
    rows
}

/// The bytes from `addr` as the trace's `MW`/`MR` lines up to the next
/// instruction after `line` leave them (16-byte data: the high half first),
/// `--` where none wrote or read. Plain text handling.
fn expected_memory(lines: &[Vec<&str>], line: usize, addr: u64, len: u64) -> Vec<String> {
    let mut mem = vec!["--".to_string(); len as usize];
    for (i, w) in lines.iter().enumerate() {
        if i + 1 > line && is_instruction(w) {
            break;
        }
        let Some(size) = w.get(2).and_then(|t| t.strip_prefix("MW").or(t.strip_prefix("MR"))) else {
            continue;
        };
        let size: u64 = size.parse().unwrap();
        let at = u64::from_str_radix(w[3], 16).unwrap();
        let hex: String = w[4..].concat();
        for k in 0..size {
            // Byte k from the least significant end of the value.
            let end = hex.len() - 2 * k as usize;
            if let Some(off) = (at + k).checked_sub(addr).filter(|&o| o < len) {
                mem[off as usize] = hex[end - 2..end].to_string();
            }
        }
    }
    mem
}

#[test]
#[ignore = "needs tmux"]
fn browser_shows_memory_as_the_trace_wrote_it_and_folds_calls() {
    let trace = fixture("a64-gem5.tarmac");
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines = words(&text);
    let dir = std::env::temp_dir().join(format!("tarmac-browse-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = Tmux {
        socket: format!("tarmac-browse-mem-{}", std::process::id()),
    };
    let cmd = format!(
        "{} browse {} --image {} --index={}",
        env!("CARGO_BIN_EXE_tarmac"),
        trace.display(),
        fixture("a64.elf").display(),
        dir.join("a64-gem5.tidx").display()
    );
    t.cmd(&["new-session", "-d", "-s", "b", "-x", "120", "-y", "40", &cmd]);
    let keys = |k: &[&str]| {
        let mut args = vec!["send-keys", "-t", "b"];
        args.extend_from_slice(k);
        t.cmd(&args);
    };
    let addr = 0x55008007f0u64;
    let check_memory = |s: &str, line: usize| {
        let shown = shown_memory(s);
        let mut all = Vec::new();
        for r in 0..4 {
            all.extend(
                shown
                    .get(&(addr + 16 * r))
                    .unwrap_or_else(|| panic!("no row {r}:\n{s}"))
                    .clone(),
            );
        }
        assert_eq!(all, expected_memory(&lines, line, addr, 64), "at line {line}:\n{s}");
    };
    // Line 50 (time 10): stp x29, x30 writes the frame record at addr.
    t.wait_line(instruction_from(&lines, 1, |_| true));
    keys(&["g", "48", "Enter"]);
    t.wait_line(48);
    keys(&["m", "55008007f0", "Enter"]);
    let s = t.wait_line(48);
    check_memory(&s, 48);
    assert!(shown_memory(&s)[&addr].iter().all(|b| b == "--"), "{s}");
    keys(&["j"]);
    let s = t.wait_line(50);
    check_memory(&s, 50);
    assert_eq!(shown_memory(&s)[&addr][..8].join(" "), "10 08 80 00 55 00 00 00", "{s}");
    // Later, after more writes and reads, and back again.
    keys(&["g", "200", "Enter"]);
    let at = instruction_from(&lines, 200, |_| true);
    check_memory(&t.wait_line(at), at);
    keys(&["k"]);
    let back = (1..at).rev().find(|&i| is_instruction(&lines[i - 1])).unwrap();
    check_memory(&t.wait_line(back), back);
    // Fold the call fib is in at line 126 (called at line 117, its caller
    // resuming at 139): one row for lines 117-138, then step over it.
    keys(&["g", "126", "Enter"]);
    t.wait_line(126);
    keys(&["f"]);
    let s = t.wait_line(117);
    let trace_rows: Vec<&str> = s.lines().filter_map(|r| r.split('│').nth(1)).collect();
    assert!(
        trace_rows
            .iter()
            .any(|r| r.trim_end() == ">    117 + call of fib folded: lines 117-138"),
        "{s}"
    );
    let numbers: Vec<usize> = trace_rows
        .iter()
        .filter_map(|r| r.get(1..8).and_then(|n| n.trim().parse().ok()))
        .collect();
    assert!(numbers.contains(&116) && numbers.contains(&139), "{s}");
    assert!(numbers.iter().all(|n| !(118..=138).contains(n)), "{s}");
    keys(&["j"]);
    t.wait_line(139);
    keys(&["k"]);
    t.wait_line(117);
    // Unfold: its lines are back.
    keys(&["u"]);
    let start = Instant::now();
    loop {
        let s = t.screen();
        if s.contains("│     118 ") && !s.contains("folded") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "not unfolded:\n{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    keys(&["q"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn browse_without_a_terminal_fails_with_a_message_not_a_panic() {
    let trace = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "tarmac"))
        .expect("a Tarmac trace among the fixtures");
    let out = Command::new(env!("CARGO_BIN_EXE_tarmac"))
        .arg("browse")
        .arg(&trace)
        .arg(format!(
            "--index={}",
            std::env::temp_dir()
                .join(format!("browse-no-tty-{}.idx", std::process::id()))
                .display()
        ))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "tarmac: browse is interactive: it needs a terminal on standard input and output (`tarmac dump` prints the records)\n"
    );
}
