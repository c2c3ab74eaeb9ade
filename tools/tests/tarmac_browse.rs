//! `tarmac browse` driven in tmux: keys sent with `send-keys`, the screen
//! read with `capture-pane`, and the registers shown checked against the
//! trace's own `R` lines at the instruction shown. Needs tmux (installed
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
