//! Damaged Tarmac text (bytes changed, lines cut and repeated) read,
//! analysed for calls, printed and turned into coverage: errors name a
//! line; nothing panics or hangs.

use std::time::{Duration, Instant};

use coresight_generator::{Rng, damage};

const TARMAC_SEED: &str = "\
Tarmac Text Rev 3t
0 clk cpu0 E 00000000 00000001 CoreEvent_Reset
1 clk IT (1) 00008000 d2a00200 O EL3h_s : MOV      x0,#0x100000
1 clk R X0 0000000000100000
2 clk IT (2) 00008004 9100001f O EL3h_s : MOV      sp,x0
2 clk R SP_EL3 0000000000100000
3 clk IT (3) 00008008 94000001 O EL3h_s : BL       {pc}+4 ; 0x800c
3 clk R X30 000000000000800C
4 clk IS (4) 0000800c 54ffffa1 O EL3h_s : B.NE     {pc}-0xc
5 clk IT (5) 0000800a:00000000800a,00000000800c e8900c00 T svc_s : LDM      r0,{r10,r11}
6 clk MR8 0000c7c8:00000000c7c8 00000000_0000ca68
7 clk MW16 4001c440 4050d645c8ac92fc c04ce8c2677550b4
8 clk R Z0 401c0000_00000000_40180000_00000000
9 clk R P1 0101
10 clk R V0<127:64> ffeeddccbbaa9988
11 clk R Q0 -------- -------- 3ff6a09e 667f3bcd
12 clk R cpsr 1220023cd
13 clk R FPCR 01230123:23452345
14 clk MR4 dfdfdfcf (ABORTED)
     17000 ns  ES  EXC [0x00] Reset
                    BR (00000000) A
     41000 ns  ES  (00000000:e59ff018) A svc:            LDR      pc,{pc}+0x20 ; 0x20
                    LD 00000020  ........ ........ ##...... 00000080     0000000020    NM ISH INC
                       00000010  00000000 00000007 ........ ........  NS:000000009884cfa0   NM ISH IWBRWA
     800000 ns  ES  (000001a4:03a06a01) A svc:     CCFAIL MOVEQ    r6,#0x1000
      3041 cyc IT (00022a7c:00000006) 00022a7c     48f6 T16 LDR      r0,[pc,#984]
      3039 cyc MNW4___D 2002fa00 efbeefbe
1340833 ns MNW4____ (00000050:000000a8) 05011000 00000003
1359353 ns MCW4___R (01000250:000000bb) TRANSFER 00000000
     307754 tic ES  (0000aaaaabaf59f0:--------) O el0t_ns:
        10.356000us R PSR f1000003
271ns R r13 20001fff (MSP)
40 clk R DC CISW 00000000:00000000
6000001 cs R08 0000007f99d14af4 4305000042ea0000
6379085 cs W04 X ffffffbdc3c15c30 010c010b
7 clk FD 00008000
8 clk MU4_ADD 00001000 1 2
9 clk SIGNAL: SIGNAL=Abort STATE=N
";

fn mutate_text(rng: &mut Rng, data: &mut Vec<u8>) {
    damage(rng, data);
    // Also damage at the token level: drop, repeat or swap a word, or
    // put punctuation in.
    for _ in 0..rng.below(4) {
        let at = rng.below(data.len() as u64) as usize;
        match rng.below(3) {
            0 => data.insert(at, b":()[],<>_-.#x"[rng.below(13) as usize]),
            1 => {
                let end = data[at..]
                    .iter()
                    .position(|&c| c == b' ' || c == b'\n')
                    .map_or(data.len(), |p| at + p);
                data.drain(at..end);
            }
            _ => {
                let w: Vec<u8> = data[at..]
                    .iter()
                    .take_while(|&&c| c != b' ' && c != b'\n')
                    .copied()
                    .collect();
                data.splice(at..at, w);
            }
        }
    }
}

#[test]
fn damaged_tarmac_never_panics() {
    use coresight_gnatcov::export::{FlatTraceBuilder, Merge};
    use coresight_tarmac::calls::CallAnalyzer;
    use coresight_tarmac::events::EventPrinter;
    use coresight_tarmac::ranges::RangeBuilder;
    use coresight_tarmac::{Iset, Reader, ReaderOptions, RecordKind};
    let start = Instant::now();
    let mut errors = 0;
    for seed in 0..6000u64 {
        let mut rng = Rng::new(seed ^ 0x7a7a);
        let mut data = TARMAC_SEED.as_bytes().to_vec();
        mutate_text(&mut rng, &mut data);
        let opts = ReaderOptions {
            implicit_iset: (seed % 2 == 0).then_some(Iset::Thumb),
        };
        let mut r = Reader::with_options(&data[..], opts);
        let mut calls = CallAnalyzer::new().with_log();
        let mut printer = EventPrinter::new();
        let mut out = String::new();
        // Instructions as trace elements, into the coverage builder.
        let (mut ranges, mut flat) = (RangeBuilder::new(0), FlatTraceBuilder::new(Merge::All));
        for _ in 0..10_000 {
            match r.next_record() {
                Ok(Some(rec)) => {
                    calls.feed(&rec);
                    printer.write(&rec, &mut out);
                    match rec.kind {
                        RecordKind::Instruction(i) => ranges.instruction(&i, &mut flat),
                        RecordKind::Exception { .. } => ranges.exception(&mut flat),
                        _ => {}
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    // Errors name a line of the input.
                    assert!(e.line >= 1 && e.line <= r.line_number(), "seed {seed}: {e}");
                    assert!(e.to_string().starts_with(&format!("line {}", e.line)));
                    errors += 1;
                }
            }
        }
        ranges.finish(&mut flat);
        flat.finish();
        assert!(flat.entries(None).iter().all(|e| e.size > 0), "seed {seed}");
        let tree = calls.finish();
        let _ = (
            tree.calltree_text(None),
            tree.profile_text(None),
            tree.flamegraph_text(None),
        );
        assert!(start.elapsed() < Duration::from_secs(60), "too slow at seed {seed}");
    }
    assert!(errors > 100, "mutations should make some malformed records ({errors})");
}
