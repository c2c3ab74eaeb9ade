//! Packet processor tests on hand-written nibble streams: every header, the
//! fill rules of Value Sequences, resynchronisation, wrapped buffers.

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::decoder::{PacketOut, PacketProcessor};
use coresight_decode::interfaces::PktDataIn;
use coresight_decode::printers::TracePacket;

use crate::config::{CoreIsa, RiscvTraceConfig, TraceReg};
use crate::packet::RvPacket;
use crate::processor::RvProcessor;

/// Packs nibbles into words (first nibble in bits 3:0), padding with Nops
/// to `words` words.
fn pack(nibbles: &[u8], words: usize) -> Vec<u8> {
    let mut w = vec![0u32; words];
    for (i, &n) in nibbles.iter().enumerate() {
        w[i / 8] |= (n as u32 & 0xf) << (4 * (i % 8));
    }
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

struct Sink(Vec<(TrcIndex, String)>);

impl PktDataIn<RvPacket> for Sink {
    fn packet_data_in(
        &mut self,
        _op: coresight_decode::datapath::DatapathOp,
        index: TrcIndex,
        pkt: Option<&RvPacket>,
    ) -> DatapathResp {
        if let Some(p) = pkt {
            let mut s = String::new();
            p.write_desc(&mut s);
            self.0.push((index, s));
        }
        DatapathResp::Cont
    }
}

fn list(cfg: RiscvTraceConfig, data: &[u8]) -> Vec<(TrcIndex, String)> {
    let mut proc = RvProcessor::new(cfg);
    let mut sink = Sink(Vec::new());
    let mut out = PacketOut {
        mon: None,
        sink: Some(&mut sink),
    };
    let (r, used) = proc.process(0, data, &mut out);
    assert_eq!((r, used), (DatapathResp::Cont, data.len()));
    proc.eot(&mut out);
    sink.0
}

const RV64C: CoreIsa = CoreIsa {
    xlen: 64,
    compressed: true,
};

fn cfg(isa: CoreIsa, words: u64, write_words: u64, wrapped: bool) -> RiscvTraceConfig {
    let t = TraceReg::SUPPORTED | if wrapped { TraceReg::WRAPPED } else { 0 };
    RiscvTraceConfig::new(TraceReg(t), 0x1000, 0x1000 + 4 * words, 0x1000 + 4 * write_words, isa).unwrap()
}

fn descs(v: &[(TrcIndex, String)]) -> Vec<&str> {
    v.iter().map(|(_, s)| s.as_str()).collect()
}

#[test]
fn every_header_and_the_fill_rules() {
    #[rustfmt::skip]
    let nibbles = [
        4, 0,                       // Trace Enabled, version 0
        6, 0b1111,                  // Privilege: interrupt, M, IE
        1, 15, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // PC, 16 nibbles: 0x8000 << 1
        1, 0, 0x3,                  // PC, 1 nibble: low 4 bits of PC>>1 replaced
        2, 3, 5, 0, 0,              // Branch Taken, Not Taken, Trace Disabled, Nops
        7, 0, 0x2,                  // Change Hart 2 (zero filled)
        8, 1, 0x4, 0x3,             // Load Address 0x34: upper bits unknown
        10, 0, 0xf,                 // Load Data 0xf sign extended
        11, 1, 0xf, 0x7,            // Store Data 0x7f
        12, 2, 1, 2, 3,             // Timestamp 0x321, upper bits unknown
        9, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf, // Store Address, full: 0xf000..
        9, 0, 5,                    // Store Address: low nibble from here, the rest filled
    ];
    let got = list(cfg(RV64C, 32, 32, false), &pack(&nibbles, 32));
    assert_eq!(
        descs(&got),
        [
            "TRACE_ENABLED : version 0",
            "PRIVILEGE : M; IE; interrupt",
            "PC : 0x10000; (16 nibbles)",
            "PC : 0x10006; (1 nibbles)",
            "BRANCH_TAKEN",
            "BRANCH_NOT_TAKEN",
            "TRACE_DISABLED",
            "CHANGE_HART : 0x2",
            "LOAD_ADDR : 0x34; (2 nibbles, upper bits unknown)",
            "LOAD_DATA : 0xffffffffffffffff; (1 nibbles)",
            "STORE_DATA : 0x7f; (2 nibbles)",
            "TIMESTAMP : 0x321; (3 nibbles, upper bits unknown)",
            "STORE_ADDR : 0xf000000000000000; (16 nibbles)",
            "STORE_ADDR : 0xf000000000000005; (1 nibbles)",
        ]
    );
    // Index: the byte holding the header nibble.
    assert_eq!(got[2].0, 2);
    assert_eq!(got[3].0, 11);
}

#[test]
fn pc_width_follows_xlen_and_c() {
    // RV32 without C: PC[31:2], 8 nibbles cover it.
    let isa = CoreIsa {
        xlen: 32,
        compressed: false,
    };
    let got = list(
        cfg(isa, 24, 24, false),
        &pack(&[1, 7, 0xd, 0xc, 0xb, 0xa, 0, 0, 0, 0x3, 1, 0, 1], 24),
    );
    assert_eq!(
        descs(&got),
        ["PC : 0xc002af34; (8 nibbles)", "PC : 0xc002af04; (1 nibbles)"]
    );
}

#[test]
fn bad_headers_resync_at_the_next_sync_point() {
    // 24 words: sync points every 3 words (24 nibbles).
    let mut n = vec![4, 0, 2, 13, 2, 2, 2];
    n.resize(24, 3); // skipped: inside the damaged segment
    n.extend([3, 14, 2]);
    n.resize(48, 2);
    n.extend([5, 15]);
    n.resize(72, 0);
    n.push(4);
    n.push(7); // version 7: bad
    n.resize(96, 0);
    n.push(5);
    let got = list(cfg(RV64C, 24, 24, false), &pack(&n, 24));
    assert_eq!(
        descs(&got),
        [
            "TRACE_ENABLED : version 0",
            "BRANCH_TAKEN",
            "BAD_PACKET : reserved header 0xd; resync at next sync point",
            "BRANCH_NOT_TAKEN",
            "BAD_PACKET : custom header 0xe (length unknown); resync at next sync point",
            "TRACE_DISABLED",
            "BAD_PACKET : custom header 0xf (length unknown); resync at next sync point",
            "BAD_PACKET : trace version 7 (expected 0); resync at next sync point",
            "TRACE_DISABLED",
        ]
    );
    let mut proc = RvProcessor::new(cfg(RV64C, 24, 24, false));
    let mut sink = Sink(Vec::new());
    let data = pack(&n, 24);
    proc.process(
        0,
        &data,
        &mut PacketOut {
            mon: None,
            sink: Some(&mut sink),
        },
    );
    let s = proc.stats().unwrap();
    assert_eq!((s.bad_header_errs, s.bad_sequence_errs), (3, 1));
    assert_eq!(s.unsynced_bytes, (20 + 22 + 22 + 22) / 2);
}

#[test]
fn a_wrapped_buffer_starts_at_the_sync_point_after_the_write_pointer() {
    // 24 words, written up to word 4: the oldest trace starts at the sync
    // point at word 6, runs to the end and continues from the start.
    let mut n = vec![0u8; 192];
    n[..4].copy_from_slice(&[2, 2, 3, 3]); // newest: before tbufwrite
    n[32..36].copy_from_slice(&[7, 0, 9, 9]); // overwritten remains (skipped)
    n[48..50].copy_from_slice(&[4, 0]); // sync point 2
    n[190] = 5;
    let got = list(cfg(RV64C, 24, 4, true), &pack(&n, 24));
    assert_eq!(
        descs(&got),
        [
            "TRACE_ENABLED : version 0",
            "TRACE_DISABLED",
            "BRANCH_TAKEN",
            "BRANCH_TAKEN",
            "BRANCH_NOT_TAKEN",
            "BRANCH_NOT_TAKEN"
        ]
    );
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [24, 95, 0, 0, 1, 1]);
    // Not wrapped: only up to tbufwrite.
    let got = list(cfg(RV64C, 24, 4, false), &pack(&n, 24));
    assert_eq!(
        descs(&got),
        ["BRANCH_TAKEN", "BRANCH_TAKEN", "BRANCH_NOT_TAKEN", "BRANCH_NOT_TAKEN"]
    );
}

#[test]
fn a_sequence_cut_by_the_end_is_reported() {
    let got = list(cfg(RV64C, 24, 1, false), &pack(&[4, 0, 1, 15, 1, 2, 3, 4], 24));
    assert_eq!(
        descs(&got),
        [
            "TRACE_ENABLED : version 0",
            "BAD_PACKET : trace ends inside a sequence; resync at next sync point"
        ]
    );
}

#[test]
fn an_unchecked_configuration_does_not_panic() {
    let isa = RV64C;
    for (start, end, write) in [
        (0x1000, 0x800, 0x900),
        (0, 0, 0),
        (0x1000, 0x1004, u64::MAX),
        (u64::MAX - 3, 0, 7),
    ] {
        for wrapped in [false, true] {
            let t = TraceReg(TraceReg::SUPPORTED | if wrapped { TraceReg::WRAPPED } else { 0 });
            let cfg = RiscvTraceConfig {
                trace: t,
                tbufstart: start,
                tbufend: end,
                tbufwrite: write,
                isa,
                trace_id: 0,
            };
            assert!(cfg.validate().is_err());
            let mut proc = RvProcessor::new(cfg);
            let mut sink = Sink(Vec::new());
            let mut out = PacketOut {
                mon: None,
                sink: Some(&mut sink),
            };
            let data = pack(&[4, 0, 2, 13, 3, 1, 15], 30);
            assert_eq!(proc.process(0, &data, &mut out).1, data.len());
            proc.eot(&mut out);
        }
    }
}
