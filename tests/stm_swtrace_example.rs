//! The `swtrace` example on tiny hand-made streams.

#[allow(dead_code)]
#[path = "../examples/swtrace.rs"]
mod swtrace;

use swtrace::{Options, Protocol, run};

/// Packs nibbles (stream order, hex digits) into bytes, low nibble first.
fn nib(s: &str) -> Vec<u8> {
    let n: Vec<u8> = s
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_digit(16).unwrap() as u8)
        .collect();
    assert!(n.len().is_multiple_of(2));
    n.chunks(2).map(|p| p[0] | (p[1] << 4)).collect()
}

const ASYNC: &str = "FFFFFFFFFFFFFFFFFFFFF0";

fn stm_opts() -> Options {
    Options {
        protocol: Protocol::Stm,
        formatted: None,
        id: 0,
        tcr: 0,
        all: false,
    }
}

/// The stream of the example's documentation: ASYNC, VERSION, master 0x41,
/// channel 0x23, D8 0xab, D32 0xdeadbeef with marker and timestamp 0x12.
fn doc_stream() -> Vec<u8> {
    nib(&format!("{ASYNC} F003 141 323 4ab Adeadbeef212 0"))
}

const DOC_OUTPUT: &str = "master 0x41 channel 0x0023  D8  0xab
master 0x41 channel 0x0023  D32 0xdeadbeef  marker  ts=0x12
";

#[test]
fn stm_raw_stream() {
    assert_eq!(run(&stm_opts(), &doc_stream()), (DOC_OUTPUT.to_string(), 0));
}

#[test]
fn stm_flag_trigger_frequency_and_errors() {
    let s = nib(&format!("{ASYNC} F003 F08 0124f800 141 FE F0605 F20a 405"));
    let (text, errors) = run(&stm_opts(), &s);
    assert_eq!(
        text,
        "master ??   channel ??      frequency 19200000 Hz
master 0x41 channel 0x0000  FLAG
master 0x41 channel 0x0000  TRIG 0x05
! global error (masters lost trace)
master ??   channel ??      D8  0x05
"
    );
    assert_eq!(errors, 0);
}

/// Frames `data` for trace ID `id` as a formatter would (16-byte frames,
/// the ID in the first byte, NULL packets as padding).
fn frames(id: u8, data: &[u8]) -> Vec<u8> {
    let mut slots = vec![None];
    slots.extend(data.iter().map(|b| Some(*b)));
    while slots.len() % 15 != 0 {
        slots.push(Some(0));
    }
    let mut out = Vec::new();
    for f in slots.chunks(15) {
        let mut frame = [0u8; 16];
        for (i, s) in f.iter().enumerate() {
            match s {
                None => frame[i] = (id << 1) | 1,
                Some(b) if i % 2 == 0 => {
                    frame[i] = b & !1;
                    frame[15] |= (b & 1) << (i / 2);
                }
                Some(b) => frame[i] = *b,
            }
        }
        out.extend(frame);
    }
    out
}

#[test]
fn stm_formatted_frames() {
    let opts = Options {
        formatted: Some(false),
        id: 0x20,
        ..stm_opts()
    };
    assert_eq!(run(&opts, &frames(0x20, &doc_stream())), (DOC_OUTPUT.to_string(), 0));
    // Another ID's trace is not this source's.
    assert_eq!(run(&opts, &frames(0x21, &doc_stream())).0, "");
}

#[test]
fn stm_resynchronises_after_bad_data() {
    // A reserved header (F1) stops decode; the example resets and picks up
    // at the next ASYNC.
    let s = nib(&format!("{ASYNC} F003 141 4ab F1 {ASYNC} F003 141 4cd"));
    let (text, errors) = run(&stm_opts(), &s);
    assert_eq!(
        text,
        "master 0x41 channel 0x0000  D8  0xab
! bad data near byte 17: resynchronising
master 0x41 channel 0x0000  D8  0xcd
"
    );
    assert_eq!(errors, 1);
}

#[test]
fn itm_messages_take_the_following_timestamp() {
    let mut s = vec![0, 0, 0, 0, 0, 0x80];
    s.extend([0x19, 0xbb, 0x20]); // port 3, then local TS 2
    s.extend([0x0a, 0x45, 0x23, 0x0b, 0x23, 0x01, 0x89, 0x67, 0xd0, 0x0d]); // two writes, TS +13
    s.extend([0x05, 0x15]); // DWT event counter (shown with --all)
    s.extend([0x28, 0x52, 0x45, 0x23]); // stimulus page 2, port 10 -> 74
    let opts = Options {
        protocol: Protocol::Itm,
        ..stm_opts()
    };
    assert_eq!(
        run(&opts, &s).0,
        "port 3   D8  0xbb  ts=0x2
port 1   D16 0x2345  ts=0xf
port 1   D32 0x67890123  ts=0xf
port 74  D16 0x2345
"
    );
    let all = Options { all: true, ..opts };
    assert_eq!(
        run(&all, &s).0,
        "port 3   D8  0xbb  ts=0x2
port 1   D16 0x2345  ts=0xf
port 1   D32 0x67890123  ts=0xf
hw 0x00  D8  0x15
port 74  D16 0x2345
"
    );
}
