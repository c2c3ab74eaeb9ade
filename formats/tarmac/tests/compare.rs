//! `compare` on generated traces: a loop body run over and over (so the
//! same instructions recur), with drops, inserts and changes, or with
//! instructions reordered within the window.

use coresight_tarmac::Reader;
use coresight_tarmac::compare::{self, CompareOptions, CompareReport, DiffKind};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn trace(pcs: &[u64]) -> String {
    pcs.iter()
        .enumerate()
        .map(|(n, pc)| format!("{t} clk IT ({t}) {pc:08x} d503201f O EL1h_n : NOP\n", t = n + 1))
        .collect()
}

/// `reach`: an instruction matches an equal one fewer than `reach` places
/// away (the option's window is `reach - 1`).
fn run(a: &[u64], b: &[u64], reach: usize) -> CompareReport {
    let (ta, tb) = (trace(a), trace(b));
    let mut ra = Reader::new(ta.as_bytes());
    let mut rb = Reader::new(tb.as_bytes());
    let o = CompareOptions {
        window: reach - 1,
        skip_time: true,
        show: usize::MAX,
        context: 1,
        ..Default::default()
    };
    compare::compare(&mut ra, &mut rb, &o).unwrap()
}

/// A loop of 8 different instructions, with a detour now and then: the
/// same addresses recur every 8 instructions or so.
fn program(rng: &mut Rng, len: usize) -> Vec<u64> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let body = if rng.below(4) == 0 { 0x2000 } else { 0x1000 };
        v.extend((0..8).map(|k| body + 4 * k));
    }
    v.truncate(len);
    v
}

#[test]
fn drops_inserts_and_changes_are_each_one_difference_at_their_place() {
    let mut checked = 0;
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let a = program(&mut rng, 400);
        // Windows longer than the loop, too: a partner a loop iteration away
        // must not hide a drop, insert or change.
        let window = [1, 2, 3, 4, 16, 64][rng.below(6) as usize];
        // Edits at least 16 instructions apart, none in the last 8.
        let mut b = Vec::new();
        let mut want = Vec::new();
        let mut next_edit = 4 + rng.below(16) as usize;
        let mut fresh = 0x9000;
        for (i, &pc) in a.iter().enumerate() {
            if i != next_edit || i + 8 >= a.len() {
                b.push(pc);
                continue;
            }
            next_edit = i + 16 + rng.below(24) as usize;
            fresh += 4;
            let kind = match rng.below(3) {
                0 => DiffKind::OnlyInA,
                1 => {
                    b.push(fresh);
                    b.push(pc);
                    DiffKind::OnlyInB
                }
                _ => {
                    b.push(fresh);
                    DiffKind::Changed
                }
            };
            // Index in A of the instruction dropped or changed, or before
            // which one was inserted.
            want.push((kind, i as u64));
        }
        let rep = run(&a, &b, window);
        let got: Vec<(DiffKind, u64)> = rep.shown.iter().map(|d| (d.kind, d.index_a)).collect();
        assert_eq!(got, want, "seed {seed}, window {window}:\n{}", rep.text("a", "b"));
        assert_eq!(rep.differences, want.len() as u64);
        // Every instruction not dropped or changed is matched.
        let lost = want.iter().filter(|w| w.0 != DiffKind::OnlyInB).count();
        assert_eq!(rep.matched, (a.len() - lost) as u64, "seed {seed}");
        // Where it happened in B, too: an inserted or changed instruction
        // is shown there, the fresh address.
        for d in &rep.shown {
            if d.kind != DiffKind::OnlyInA {
                assert!(d.b.at.is_some_and(|i| i.addr >= 0x9000), "seed {seed}: {d:?}");
            } else {
                assert!(d.b.at.is_none() && d.a.at.is_some(), "seed {seed}: {d:?}");
            }
        }
        checked += want.len();
    }
    assert!(checked > 1000, "only {checked} edits checked");
}

#[test]
fn reordering_within_the_window_is_the_same_and_beyond_it_is_not() {
    let mut moves = 0;
    for seed in 1..=100u64 {
        let mut rng = Rng(seed.wrapping_mul(0xd1b5_4a32_d192_ed03) | 1);
        let a = program(&mut rng, 300);
        let window = 2 + rng.below(3) as usize;
        // Shuffle within blocks of `window`: no instruction moves `window`
        // places or more.
        let mut b = a.clone();
        for block in b.chunks_mut(window) {
            for k in (1..block.len()).rev() {
                block.swap(k, rng.below(k as u64 + 1) as usize);
            }
        }
        let rep = run(&a, &b, window);
        assert!(rep.same(), "seed {seed}, window {window}:\n{}", rep.text("a", "b"));
        assert_eq!(rep.matched, a.len() as u64);
        // One instruction moved exactly `window` places later: two
        // differences, where it was and where it went.
        let mut c = a.clone();
        let from = 20 + rng.below(200) as usize;
        let m = c.remove(from);
        c.insert(from + window, m);
        let rep = run(&a, &c, window);
        let moved = a[from] != a[from + window] && a[from..=from + window].iter().filter(|&&p| p == m).count() == 1;
        if moved {
            moves += 1;
            let got: Vec<(DiffKind, u64, u64)> = rep.shown.iter().map(|d| (d.kind, d.index_a, d.index_b)).collect();
            assert_eq!(
                got,
                [
                    (DiffKind::OnlyInA, from as u64, from as u64),
                    (DiffKind::OnlyInB, (from + window + 1) as u64, (from + window) as u64)
                ],
                "seed {seed}, window {window}:\n{}",
                rep.text("a", "b")
            );
        }
        // One window more and it matches.
        assert!(run(&a, &c, window + 1).same(), "seed {seed}");
    }
    assert!(moves > 90, "only {moves} moves checked");
}

#[test]
fn traces_that_differ_everywhere_end_and_count_every_instruction() {
    let a: Vec<u64> = (0..5000).map(|k| 0x1000 + 4 * (k % 97)).collect();
    let b: Vec<u64> = (0..4000).map(|k| 0x8000 + 4 * (k % 89)).collect();
    for window in [1, 8] {
        let rep = run(&a, &b, window);
        assert_eq!(rep.matched, 0);
        // Changed pairs, then the rest of the longer one.
        assert_eq!(rep.differences, 5000, "window {window}");
    }
    let rep = run(&a, &[], 4);
    assert_eq!((rep.matched, rep.differences), (0, 5000));
    assert_eq!(rep.shown[0].kind, DiffKind::OnlyInA);
}
