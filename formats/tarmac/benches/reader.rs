//! Tarmac reader throughput (bytes of Tarmac text per second).
//!
//! `cargo bench --bench tarmac_reader` reads a synthetic Fast Models style
//! trace (instruction, register and memory lines in the proportions of a
//! real one) and an ES-style one with load/store diagrams.

use coresight_tarmac::Reader;
use coresight_tarmac::calls::CallAnalyzer;
use divan::counter::BytesCount;

fn main() {
    divan::main();
}

fn fast_models(lines: usize) -> String {
    let mut s = String::with_capacity(lines * 60);
    let mut t = 0u64;
    let mut pc = 0x8000u64;
    while s.len() < lines * 60 {
        t += 1;
        pc += 4;
        s.push_str(&format!(
            "{t} clk IT ({t}) {pc:08x} a9be57fe O EL3h_s : STP      x30,x21,[sp,#-0x20]!\n"
        ));
        s.push_str(&format!("{t} clk MW8 000fffd0:0000000fffd0 00000000_{pc:08x}\n"));
        s.push_str(&format!("{t} clk R SP_EL3 00000000000FFFD0\n"));
        t += 1;
        pc += 4;
        s.push_str(&format!(
            "{t} clk IT ({t}) {pc:08x} f100083f O EL3h_s : CMP      x1,#2\n"
        ));
        s.push_str(&format!("{t} clk R cpsr 200003cd\n"));
        s.push_str(&format!("{t} clk R X19 {:016X}\n", t * 0x1234));
    }
    s
}

fn es_style(lines: usize) -> String {
    let mut s = String::with_capacity(lines * 90);
    let mut t = 0u64;
    while s.len() < lines * 90 {
        t += 2;
        s.push_str(&format!(
            "{t:>11} ns  ES  ({:016x}:a9be7bfd) O el3h_s:         STP      x29,x30,[sp,#-0x20]!\n",
            0x1b0 + t
        ));
        s.push_str("                    ST 0000000004001b60 02000000 00000000 00000000 00000020    S:0004001b60    nGnRnE OSH\n");
        s.push_str("                    R SP_EL3 0000000004001b60\n");
    }
    s
}

fn read_all(text: &str) -> usize {
    let mut r = Reader::new(text.as_bytes());
    let mut n = 0;
    while let Some(rec) = r.next_record().unwrap() {
        n += divan::black_box(rec.line) as usize & 1;
    }
    n
}

#[divan::bench]
fn read_fast_models(b: divan::Bencher) {
    let text = fast_models(200_000);
    b.counter(BytesCount::new(text.len())).bench(|| read_all(&text));
}

#[divan::bench]
fn read_es_diagrams(b: divan::Bencher) {
    let text = es_style(100_000);
    b.counter(BytesCount::new(text.len())).bench(|| read_all(&text));
}

#[divan::bench]
fn read_and_find_calls(b: divan::Bencher) {
    let text = fast_models(200_000);
    b.counter(BytesCount::new(text.len())).bench(|| {
        let mut r = Reader::new(text.as_bytes());
        let mut a = CallAnalyzer::new();
        while let Some(rec) = r.next_record().unwrap() {
            a.feed(&rec);
        }
        a.calls_and_returns().count()
    });
}
