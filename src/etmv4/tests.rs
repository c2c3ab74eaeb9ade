//! Unit tests for the ETMv4 packet processor and decoder: hand-built byte
//! sequences with their exact packet texts, and small programs in memory
//! with their exact generic elements.

use crate::shared::Lock;
use std::sync::Arc;

use super::config::EtmV4Config;
use super::packet::EtmV4Packet;
use super::processor::EtmV4PktProc;
use super::*;
use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::{DecodeContext, DecodeMode, DecoderOptions, ElemRouter, PacketOut, PacketProcessor};
use crate::element::TraceElement;
use crate::errcode::Severity;
use crate::instr::ArmInstrDecoder;
use crate::interfaces::{PktDataIn, PktRawDataMon, TrcGenElemIn};
use crate::logger::{ErrLink, ErrorLogger, MsgLogger};
use crate::memory::{BufferAccessor, MemAccMapper, MemSpace};
use crate::printers::TracePacket;
use crate::shared::{Shared, shared};

/// Packet monitor writing the raw-bytes view into the same text as the
/// error log (which, as in OpenCSD, has no line break of its own).
pub(crate) struct Mon(pub(crate) Shared<MsgLogger>);

impl PktRawDataMon<EtmV4Packet> for Mon {
    fn raw_packet_data_mon(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&EtmV4Packet>, raw: &[u8]) {
        if let (DatapathOp::Data, Some(p)) = (op, pkt) {
            let mut l = format!("Idx:{index}; [");
            for b in raw {
                l.push_str(&format!("0x{b:02x} "));
            }
            l.push_str("];\t");
            p.write_desc(&mut l);
            l.push('\n');
            self.0.borrow_mut().log_msg(&l);
        }
    }
}

/// Packet sink: counts packets (the decoder's view), answering `resp`.
struct Sink {
    count: Arc<Lock<usize>>,
    resp: DatapathResp,
}

impl PktDataIn<EtmV4Packet> for Sink {
    fn packet_data_in(&mut self, op: DatapathOp, _index: TrcIndex, _pkt: Option<&EtmV4Packet>) -> DatapathResp {
        if op == DatapathOp::Data {
            *self.count.borrow_mut() += 1;
        }
        self.resp
    }
}

/// A processor whose errors and monitored packets go to one text.
pub(crate) fn proc_with_log(cfg: EtmV4Config) -> (EtmV4PktProc, Shared<MsgLogger>) {
    let out = shared(MsgLogger::capture());
    let log = shared(ErrorLogger::new(Severity::Info, Some(out.clone())));
    (
        EtmV4PktProc::new(cfg, Some(ErrLink::new(&log, "PKTP_ETMV4I_0001"))),
        out,
    )
}

/// Runs `data` through a packet processor for `cfg`; returns the listing
/// (errors inline, as the lister shows them).
pub(crate) fn list_packets(cfg: EtmV4Config, data: &[u8]) -> String {
    // One byte at a time: packets split across blocks must come out whole.
    list_packets_in_blocks(cfg, data, 1)
}

/// [`list_packets`] with the data given in blocks of `block` bytes.
fn list_packets_in_blocks(cfg: EtmV4Config, data: &[u8], block: usize) -> String {
    let (mut proc, text) = proc_with_log(cfg);
    let mut mon = Mon(text.clone());
    let count = Arc::new(Lock::new(0));
    let mut sink = Sink {
        count,
        resp: DatapathResp::Cont,
    };
    for (i, b) in data.chunks(block).enumerate() {
        let mut out = PacketOut {
            mon: Some(&mut mon),
            sink: Some(&mut sink),
        };
        let (r, used) = proc.process((i * block) as u64, b, &mut out);
        assert!(r.is_cont());
        assert_eq!(used, b.len());
    }
    let mut out = PacketOut {
        mon: Some(&mut mon),
        sink: Some(&mut sink),
    };
    proc.eot(&mut out);
    text.borrow().captured().to_string()
}

fn a_cfg() -> EtmV4Config {
    // ETMv4.4 on a v8 A-profile core: 64-bit addresses, 32-bit context ID,
    // 8-bit VMID, ignore packets.
    EtmV4Config {
        idr0: 0x2800_0EA1,
        idr1: 0x4100_F440,
        idr2: 0x0000_0488,
        configr: 0xC1,
        traceidr: 0x01,
        arch: ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA),
        ..Default::default()
    }
}

pub(crate) const ASYNC: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];

pub(crate) fn with_sync(rest: &[u8]) -> Vec<u8> {
    let mut v = ASYNC.to_vec();
    v.extend_from_slice(rest);
    v
}

/// Lines of `text` after the async and first trace info.
pub(crate) fn body(text: &str) -> Vec<&str> {
    text.lines().skip(2).collect()
}

#[test]
fn sync_trace_info_and_trace_on() {
    let t = list_packets(a_cfg(), &with_sync(&[0x01, 0x00, 0x04, 0x01, 0x01, 0x00]));
    assert_eq!(
        t,
        "Idx:0; [0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x80 ];\tI_ASYNC : Alignment Synchronisation.\n\
         Idx:12; [0x01 0x00 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }; Decoder Sync point TINFO\n\
         Idx:14; [0x04 ];\tI_TRACE_ON : Trace On.\n\
         Idx:15; [0x01 0x01 0x00 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }\n"
    );
}

#[test]
fn trace_info_sections() {
    // Control byte: INFO, KEY, SPEC and CYCT present. INFO has CC enabled.
    let t = list_packets(a_cfg(), &with_sync(&[0x01, 0x0F, 0x01, 0x05, 0x03, 0x90, 0x01]));
    assert!(t.contains("I_TRACE_INFO : Trace Info.; INFO=0x1 { CC.1 }; CC_THRESHOLD=0x90; INIT SPEC DEPTH=3; Decoder Sync point TINFO\n"), "{t}");
    // Extended control byte.
    let t = list_packets(a_cfg(), &with_sync(&[0x01, 0x81, 0x00, 0x00]));
    assert!(
        t.contains(
            "[0x01 0x81 0x00 0x00 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }; Decoder Sync point TINFO\n"
        ),
        "{t}"
    );
}

#[test]
fn unsynchronised_data_then_sync() {
    let mut data = vec![0x95, 0xaf, 0x31, 0xf7, 0x95, 0x84, 0x27, 0xf7, 0x11, 0x22, 0x00, 0xfd];
    data.extend_from_slice(&ASYNC);
    let t = list_packets(a_cfg(), &data);
    assert_eq!(
        t,
        "Idx:0; [0x95 0xaf 0x31 0xf7 0x95 0x84 0x27 0xf7 ];\tI_NOT_SYNC : I Stream not synchronised\n\
         Idx:8; [0x11 0x22 ];\tI_NOT_SYNC : I Stream not synchronised\n\
         Idx:10; [0x00 0xfd ];\tI_NOT_SYNC : I Stream not synchronised\n\
         Idx:12; [0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x80 ];\tI_ASYNC : Alignment Synchronisation.\n"
    );
}

#[test]
fn leading_extra_zeros_before_sync() {
    let mut data = vec![0x00, 0x00];
    data.extend_from_slice(&ASYNC);
    let t = list_packets(a_cfg(), &data);
    assert_eq!(
        t,
        "Idx:0; [0x00 ];\tI_ASYNC : Alignment Synchronisation.\n\
         Idx:0; [0x00 ];\tI_ASYNC : Alignment Synchronisation.\n\
         Idx:0; [0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x80 ];\tI_ASYNC : Alignment Synchronisation.\n"
    );
}

#[test]
fn timestamp_and_cycle_counts() {
    let mut cfg = a_cfg();
    cfg.idr0 &= !0x2000_0000; // commit sections present
    let t = list_packets(
        cfg.clone(),
        &with_sync(&[0x01, 0x00, 0x02, 0xc0, 0xa1, 0xc5, 0x97, 0x80, 0x80, 0x00]),
    );
    assert_eq!(
        body(&t)[0],
        "Idx:14; [0x02 0xc0 0xa1 0xc5 0x97 0x80 0x80 0x00 ];\tI_TIMESTAMP : Timestamp.; Updated val = 0x2f150c0"
    );
    // Timestamp with cycle count; CC size 12 bits masks the count.
    let t = list_packets(cfg.clone(), &with_sync(&[0x01, 0x00, 0x03, 0x05, 0xff, 0x7f]));
    assert_eq!(
        body(&t)[0],
        "Idx:14; [0x03 0x05 0xff 0x7f ];\tI_TIMESTAMP : Timestamp.; Updated val = 0x5; CC=0xfff"
    );
    // Cycle counts: F1 with commit and count, F1 unknown count, F2, F3.
    let t = list_packets(
        cfg,
        &with_sync(&[0x01, 0x00, 0x0e, 0x02, 0x10, 0x0f, 0x01, 0x0c, 0x34, 0x17]),
    );
    let b = body(&t);
    assert_eq!(
        b[0],
        "Idx:14; [0x0e 0x02 0x10 ];\tI_CCNT_F1 : Cycle Count format 1.; Count=0x10; Commit(2)"
    );
    assert_eq!(
        b[1],
        "Idx:17; [0x0f 0x01 ];\tI_CCNT_F1 : Cycle Count format 1.; Count=0x0; Commit(1)"
    );
    assert_eq!(
        b[2],
        "Idx:19; [0x0c 0x34 ];\tI_CCNT_F2 : Cycle Count format 2.; Count=0x4; Commit(4)"
    );
    assert_eq!(
        b[3],
        "Idx:21; [0x17 ];\tI_CCNT_F3 : Cycle Count format 3.; Count=0x3; Commit(2)"
    );
    // COMMOPT=1: no commit sections.
    let t = list_packets(a_cfg(), &with_sync(&[0x01, 0x00, 0x0e, 0x10, 0x0d, 0xf6]));
    let b = body(&t);
    assert_eq!(
        b[0],
        "Idx:14; [0x0e 0x10 ];\tI_CCNT_F1 : Cycle Count format 1.; Count=0x10"
    );
    assert_eq!(
        b[1],
        "Idx:16; [0x0d 0xf6 ];\tI_CCNT_F2 : Cycle Count format 2.; Count=0x6"
    );
}

#[test]
fn speculation_packets() {
    let t = list_packets(
        a_cfg(),
        &with_sync(&[0x01, 0x00, 0x2d, 0x74, 0x2e, 0x03, 0x2f, 0x02, 0x30, 0x31, 0x35, 0x3b]),
    );
    let b = body(&t);
    assert_eq!(b[0], "Idx:14; [0x2d 0x74 ];\tI_COMMIT : Commit; Commit(116)");
    assert_eq!(b[1], "Idx:16; [0x2e 0x03 ];\tI_CANCEL_F1 : Cancel Format 1.; Cancel(3)");
    assert_eq!(
        b[2],
        "Idx:18; [0x2f 0x02 ];\tI_CANCEL_F1_MISPRED : Cancel Format 1 + Mispredict.; Cancel(2), Mispredict"
    );
    assert_eq!(b[3], "Idx:20; [0x30 ];\tI_MISPREDICT : Mispredict.; Mispredict");
    assert_eq!(
        b[4],
        "Idx:21; [0x31 ];\tI_MISPREDICT : Mispredict.; Atom: E, Mispredict"
    );
    assert_eq!(
        b[5],
        "Idx:22; [0x35 ];\tI_CANCEL_F2 : Cancel Format 2.; Atom: E, Cancel(1), Mispredict"
    );
    assert_eq!(
        b[6],
        "Idx:23; [0x3b ];\tI_CANCEL_F3 : Cancel Format 3.; Atom: E, Cancel(3), Mispredict"
    );
}

#[test]
fn exceptions_and_returns() {
    let t = list_packets(a_cfg(), &with_sync(&[0x01, 0x00, 0x06, 0x05, 0x06, 0x5c, 0x07]));
    let b = body(&t);
    assert_eq!(
        b[0],
        "Idx:14; [0x06 0x05 ];\tI_EXCEPT : Exception.;  Call; Ret Addr Follows;"
    );
    assert_eq!(
        b[1],
        "Idx:16; [0x06 0x5c ];\tI_EXCEPT : Exception.;  IRQ; Ret Addr Follows, Match Prev;"
    );
    assert_eq!(b[2], "Idx:18; [0x07 ];\tI_EXCEPT_RTN : Exception Return.");
    // M profile: extended exception number and fault pending.
    let mut m = a_cfg();
    m.arch = ArchProfile::new(ArchVersion::V8r3, CoreProfile::CortexM);
    let t = list_packets(m, &with_sync(&[0x01, 0x00, 0x06, 0xb6, 0x30, 0x06, 0x07]));
    let b = body(&t);
    assert_eq!(
        b[0],
        "Idx:14; [0x06 0xb6 0x30 ];\tI_EXCEPT : Exception.;  IRQ27; Fault Pending;"
    );
    assert_eq!(
        b[1],
        "Idx:17; [0x06 0x07 ];\tI_EXCEPT : Exception.;  HardFault; Ret Addr Follows;"
    );
}

#[test]
fn events_ignore_and_function_return() {
    let t = list_packets(a_cfg(), &with_sync(&[0x01, 0x00, 0x71, 0x7f, 0x70]));
    let b = body(&t);
    assert_eq!(b[0], "Idx:14; [0x71 ];\tI_EVENT : Trace Event.");
    assert_eq!(b[1], "Idx:15; [0x7f ];\tI_EVENT : Trace Event.");
    assert_eq!(b[2], "Idx:16; [0x70 ];\tI_IGNORE : Ignore.");
    // v8-M: function return packet.
    let mut m = a_cfg();
    m.arch = ArchProfile::new(ArchVersion::V8r3, CoreProfile::CortexM);
    let t = list_packets(m, &with_sync(&[0x01, 0x00, 0x05]));
    assert_eq!(body(&t)[0], "Idx:14; [0x05 ];\tI_FUNC_RET : V8M - function return.");
}

#[test]
fn context_packets() {
    let t = list_packets(
        a_cfg(),
        &with_sync(&[0x01, 0x00, 0x80, 0x81, 0x31, 0x81, 0xf2, 0x07, 0x78, 0x56, 0x34, 0x12]),
    );
    let b = body(&t);
    assert_eq!(b[0], "Idx:14; [0x80 ];\tI_CTXT : Context Packet.; Ctxt: Same");
    assert_eq!(
        b[1],
        "Idx:15; [0x81 0x31 ];\tI_CTXT : Context Packet.; Ctxt: AArch64,EL1, NS; "
    );
    assert_eq!(
        b[2],
        "Idx:17; [0x81 0xf2 0x07 0x78 0x56 0x34 0x12 ];\tI_CTXT : Context Packet.; Ctxt: AArch64,EL2, NS; CID=0x12345678; VMID=0x0007; "
    );
}

#[test]
fn address_packets_and_history() {
    let data = with_sync(&[
        0x01, 0x00, // trace info resets the address history
        0x9d, 0x12, 0x5a, 0xfe, 0xff, 0x00, 0x00, 0x00, 0x00, // long 64 IS0
        0x95, 0xaf, 0x17, // short IS0, two bytes
        0x95, 0x3d, // short IS0, one byte
        0x9a, 0x1c, 0x4b, 0x08, 0x00, // long 32 IS0
        0x90, 0x92, // exact match [0], [2]
        0x96, 0x05, // short IS1
        0x9b, 0x03, 0x80, 0x00, 0x00, // long 32 IS1
    ]);
    let t = list_packets(a_cfg(), &data);
    let b = body(&t);
    assert_eq!(
        b[0],
        "Idx:14; [0x9d 0x12 0x5a 0xfe 0xff 0x00 0x00 0x00 0x00 ];\tI_ADDR_L_64IS0 : Address, Long, 64 bit, IS0.; Addr=0x00000000FFFEB448; "
    );
    assert_eq!(
        b[1],
        "Idx:23; [0x95 0xaf 0x17 ];\tI_ADDR_S_IS0 : Address, Short, IS0.; Addr=0x00000000FFFE2EBC ~[0x2EBC]"
    );
    assert_eq!(
        b[2],
        "Idx:26; [0x95 0x3d ];\tI_ADDR_S_IS0 : Address, Short, IS0.; Addr=0x00000000FFFE2EF4 ~[0xF4]"
    );
    assert_eq!(
        b[3],
        "Idx:28; [0x9a 0x1c 0x4b 0x08 0x00 ];\tI_ADDR_L_32IS0 : Address, Long, 32 bit, IS0.; Addr=0x0000000000089670; "
    );
    assert_eq!(
        b[4],
        "Idx:33; [0x90 ];\tI_ADDR_MATCH : Exact Address Match., [0]; Addr=0x0000000000089670; "
    );
    // History now: 89670, 89670, FFFE2EF4.
    assert_eq!(
        b[5],
        "Idx:34; [0x92 ];\tI_ADDR_MATCH : Exact Address Match., [2]; Addr=0x00000000FFFE2EF4; "
    );
    assert_eq!(
        b[6],
        "Idx:35; [0x96 0x05 ];\tI_ADDR_S_IS1 : Address, Short, IS1.; Addr=0x00000000FFFE2E0A ~[0xA]"
    );
    assert_eq!(
        b[7],
        "Idx:37; [0x9b 0x03 0x80 0x00 0x00 ];\tI_ADDR_L_32IS1 : Address, Long, 32 bit, IS1.; Addr=0x0000000000008006; "
    );
    // Address packets whole in a block are taken in one step, those split
    // across blocks byte by byte: the same packets either way.
    for block in [2, 3, 4, 5, 7, data.len()] {
        assert_eq!(list_packets_in_blocks(a_cfg(), &data, block), t, "blocks of {block}");
    }
}

#[test]
fn address_with_context_packets() {
    let data = with_sync(&[
        0x01, 0x00, //
        0x85, 0x00, 0x1a, 0x08, 0x00, 0xc0, 0xff, 0xff, 0xff, 0xf1, 0x00, 0x10, 0x00, 0x00,
        0x00, // 64 IS0 + VMID + CID
        0x83, 0x01, 0x9a, 0x4f, 0x00, 0x00, // 32 IS1, AArch32 EL0 S
        0x82, 0x04, 0x00, 0x01, 0x00, 0x21, // 32 IS0, AArch32 EL1 NS
        0x86, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x30, // 64 IS1
    ]);
    let t = list_packets(a_cfg(), &data);
    let b = body(&t);
    assert_eq!(
        b[0],
        "Idx:14; [0x85 0x00 0x1a 0x08 0x00 0xc0 0xff 0xff 0xff 0xf1 0x00 0x10 0x00 0x00 0x00 ];\tI_ADDR_CTXT_L_64IS0 : Address & Context, Long, 64 bit, IS0.; Addr=0xFFFFFFC000083400; Ctxt: AArch64,EL1, NS; CID=0x00000010; VMID=0x0000; "
    );
    assert_eq!(
        b[1],
        "Idx:29; [0x83 0x01 0x9a 0x4f 0x00 0x00 ];\tI_ADDR_CTXT_L_32IS1 : Address & Context, Long, 32 bit, IS1.; Addr=0xFFFFFFC0004F9A02; Ctxt: AArch32, EL0, S; "
    );
    assert_eq!(
        b[2],
        "Idx:35; [0x82 0x04 0x00 0x01 0x00 0x21 ];\tI_ADDR_CTXT_L_32IS0 : Address & Context, Long, 32 bit, IS0.; Addr=0x0000000000010010; Ctxt: AArch32, EL1, NS; "
    );
    assert_eq!(
        b[3],
        "Idx:41; [0x86 0x01 0x00 0x00 0x01 0x00 0x00 0x00 0x00 0x30 ];\tI_ADDR_CTXT_L_64IS1 : Address & Context, Long, 64 bit, IS1.; Addr=0x0000000001000002; Ctxt: AArch64,EL0, NS; "
    );
}

#[test]
fn atom_formats() {
    let t = list_packets(
        a_cfg(),
        &with_sync(&[
            0x01, 0x00, 0xf7, 0xf6, 0xda, 0xfd, 0xdc, 0xdd, 0xde, 0xdf, 0xd5, 0xd6, 0xd7, 0xf5, 0xe0, 0xe4, 0xd4,
        ]),
    );
    let atoms: Vec<String> = body(&t)
        .iter()
        .take(15)
        .map(|l| l.split('\t').nth(1).unwrap_or("").to_string())
        .collect();
    assert_eq!(
        atoms,
        [
            "I_ATOM_F1 : Atom format 1.; E",
            "I_ATOM_F1 : Atom format 1.; N",
            "I_ATOM_F2 : Atom format 2.; NE",
            "I_ATOM_F3 : Atom format 3.; ENE",
            "I_ATOM_F4 : Atom format 4.; NEEE",
            "I_ATOM_F4 : Atom format 4.; NNNN",
            "I_ATOM_F4 : Atom format 4.; NENE",
            "I_ATOM_F4 : Atom format 4.; ENEN",
            "I_ATOM_F5 : Atom format 5.; NNNNN",
            "I_ATOM_F5 : Atom format 5.; NENEN",
            "I_ATOM_F5 : Atom format 5.; ENENE",
            "I_ATOM_F5 : Atom format 5.; NEEEE",
            "I_ATOM_F6 : Atom format 6.; EEEN",
            "I_ATOM_F6 : Atom format 6.; EEEEEEEN",
            "I_ATOM_F6 : Atom format 6.; EEEEEEEEEEEEEEEEEEEEEEEE",
        ]
    );
}

#[test]
fn q_packets() {
    let mut cfg = a_cfg();
    cfg.idr0 |= 0x3 << 15; // full Q support
    let data = with_sync(&[
        0x01, 0x00, 0x9a, 0x00, 0x08, 0x00, 0x00, 0xa0, 0x05, 0xa5, 0x10, 0x03, 0xaf, 0xac, 0x81, 0x01,
    ]);
    let t = list_packets(cfg, &data);
    let b = body(&t);
    assert_eq!(
        b[1],
        "Idx:19; [0xa0 0x05 ];\tI_Q : Q Packet.; Count(5); [0]; Addr=0x0000000000001000 ~[0x1000]"
    );
    assert_eq!(
        b[2],
        "Idx:21; [0xa5 0x10 0x03 ];\tI_Q : Q Packet.; Count(3); Addr=0x0000000000001040 ~[0x40]"
    );
    assert_eq!(b[3], "Idx:24; [0xaf ];\tI_Q : Q Packet.; Count(Unknown)");
    assert_eq!(b[4], "Idx:25; [0xac 0x81 0x01 ];\tI_Q : Q Packet.; Count(129)");
}

#[test]
fn overflow_discard_and_bad_sequences() {
    let data = with_sync(&[
        0x01, 0x00, 0x00, 0x05, 0x00, 0x03, 0x00, 0x07, 0x00, 0x00, 0x00, 0x13, 0xf7,
    ]);
    let t = list_packets(a_cfg(), &data);
    let b = body(&t);
    assert_eq!(b[0], "Idx:14; [0x00 0x05 ];\tI_OVERFLOW : Overflow.");
    assert_eq!(b[1], "Idx:16; [0x00 0x03 ];\tI_DISCARD : Discard.");
    assert_eq!(
        b[2],
        "Idx:18; [0x00 0x07 ];\tI_BAD_SEQUENCE : Invalid Sequence in packet.[I_EXTENSION]"
    );
    assert_eq!(
        b[3],
        "Idx:20; [0x00 0x00 0x00 0x13 ];\tI_BAD_SEQUENCE : Invalid Sequence in packet.[I_ASYNC]"
    );
    assert_eq!(b[4], "Idx:24; [0xf7 ];\tI_ATOM_F1 : Atom format 1.; E");
}

#[test]
fn reserved_headers_raise_errors_and_resync() {
    // 0xa5: Q packet, reserved without Q support; 0x70: ignore, reserved
    // before ETMv4.3; 0x40: conditional, reserved when not configured.
    let mut cfg = a_cfg();
    cfg.idr1 = 0x4100_F410;
    let t = list_packets(cfg, &with_sync(&[0x01, 0x00, 0xa5, 0x2d, 0x74, 0x70, 0x40, 0xfe]));
    let b = body(&t);
    assert_eq!(
        b[0],
        "PKTP_ETMV4I_0001 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=14; CS ID=01; Idx:14; [0xa5 ];\tI_RESERVED : Reserved Packet Header"
    );
    assert_eq!(b[1], "Idx:15; [0x2d 0x74 ];\tI_COMMIT : Commit; Commit(116)");
    assert_eq!(
        b[2],
        "PKTP_ETMV4I_0001 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=17; CS ID=01; Idx:17; [0x70 ];\tI_RESERVED : Reserved Packet Header"
    );
    // Reserved in this configuration only: the same error (OpenCSD 1.8.0
    // raises it for both kinds), and passed on to the decoder.
    assert_eq!(
        b[3],
        "PKTP_ETMV4I_0001 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=18; CS ID=01; Idx:18; [0x40 ];\tI_RESERVED_CFG : Reserved header for current configuration.[I_COND_I_F2]"
    );
    assert_eq!(b[4], "Idx:19; [0xfe ];\tI_ATOM_F3 : Atom format 3.; NEE");
}

#[test]
fn incomplete_packet_at_end_of_trace() {
    let t = list_packets(a_cfg(), &with_sync(&[0x01, 0x00, 0x9d, 0x12, 0x5a]));
    assert_eq!(
        body(&t)[0],
        "Idx:14; [0x9d 0x12 0x5a ];\tI_INCOMPLETE_EOT : Incomplete packet at end of trace.[I_ADDR_L_64IS0]"
    );
}

#[test]
fn reset_loses_sync_and_waits_stop_processing() {
    let (mut proc, text) = proc_with_log(a_cfg());
    let mut mon = Mon(text.clone());
    let count = Arc::new(Lock::new(0));
    let mut sink = Sink {
        count: count.clone(),
        resp: DatapathResp::Wait,
    };
    let data = with_sync(&[0xf7, 0xf6, 0xf7]);
    let mut out = PacketOut {
        mon: Some(&mut mon),
        sink: Some(&mut sink),
    };
    // Each packet is followed by a wait: one packet per call.
    let (r, used) = proc.process(0, &data, &mut out);
    assert_eq!((r, used), (DatapathResp::Wait, 12));
    let (r, used) = proc.process(12, &data[12..], &mut out);
    assert_eq!((r, used), (DatapathResp::Wait, 1));
    assert!(proc.is_synced());
    proc.reset(0);
    assert!(!proc.is_synced());
    let (r, used) = proc.process(13, &data[13..], &mut out);
    assert_eq!((r, used), (DatapathResp::Cont, 2));
    assert_eq!(*count.borrow(), 2);
    let t = text.borrow().captured().to_string();
    assert!(t.ends_with("Idx:12; [0xf7 ];\tI_ATOM_F1 : Atom format 1.; E\n"), "{t}");
}

// ---------------------------------------------------------------------
// Decoder
// ---------------------------------------------------------------------

/// Captures elements as the lister prints them.
/// Element lines, waits still to answer, and how many elements each sink
/// call took.
struct ElemLog(Arc<Lock<Vec<String>>>, u32, Arc<Lock<Vec<usize>>>);

impl TrcGenElemIn for ElemLog {
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        let (r, n) = crate::interfaces::elems_one_by_one(self, trace_id, elems);
        self.2.borrow_mut().push(n);
        (r, n)
    }
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        let mut s = format!("Idx:{index}; ID:{trace_id:x}; ");
        elem.write_to(&mut s);
        self.0.borrow_mut().push(s);
        if self.1 > 0 {
            self.1 -= 1;
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
    }
}

pub(crate) struct DecodeRun {
    pub(crate) elems: Vec<String>,
    pub(crate) errors: String,
    /// How many elements each call to the sink took.
    pub(crate) sink_calls: Vec<usize>,
    /// Each time the decoder stopped for a wait with the whole block
    /// given taken: the bytes taken, and how many elements the sink had
    /// been given.
    pub(crate) waits_at_block_end: Vec<(usize, usize)>,
    /// The fatal response that stopped the decode (with no end of trace
    /// after it), when one did.
    pub(crate) fatal: Option<DatapathResp>,
}

/// Decodes `trace` for `cfg` against `images` (address, bytes), with the
/// element sink answering `Wait` `waits` times.
pub(crate) fn decode(
    cfg: EtmV4Config,
    images: &[(u64, Vec<u8>)],
    trace: &[u8],
    options: DecoderOptions,
    waits: u32,
) -> DecodeRun {
    decode_as(cfg, images, trace, options, waits, Feed::Bytes, usize::MAX)
}

/// A decoder that is given every packet built: it does not take atom
/// packets as bytes.
struct Built(Box<dyn PktDataIn<EtmV4Packet>>);

impl PktDataIn<EtmV4Packet> for Built {
    fn packet_data_in(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&EtmV4Packet>) -> DatapathResp {
        self.0.packet_data_in(op, index, pkt)
    }
    fn packet_in(&mut self, index: TrcIndex, pkt: &EtmV4Packet) -> DatapathResp {
        self.0.packet_in(index, pkt)
    }
}

/// How the decoder is given atom packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Feed {
    /// As bytes, several held and sent together (no monitor).
    Bytes,
    /// Each packet built, several held and sent together.
    Built,
    /// Each packet built, its elements sent after it: a packet monitor is
    /// attached (as `trc_pkt_lister -decode` does).
    Monitor,
}

/// A packet monitor that ignores what it sees.
struct NoMon;

impl PktRawDataMon<EtmV4Packet> for NoMon {
    fn raw_packet_data_mon(&mut self, _: DatapathOp, _: TrcIndex, _: Option<&EtmV4Packet>, _: &[u8]) {}
}

/// [`decode`], given `block` bytes at a time, atom packets as `feed` says.
fn decode_as(
    cfg: EtmV4Config,
    images: &[(u64, Vec<u8>)],
    trace: &[u8],
    options: DecoderOptions,
    waits: u32,
    feed: Feed,
    block: usize,
) -> DecodeRun {
    let run = decode_run(cfg, images, trace, options, waits, feed, block);
    assert_eq!(run.fatal, None, "{:?}\n{}", run.elems, run.errors);
    run
}

/// [`decode_as`], stopping at a fatal response as a decode tree's user
/// does (no end of trace after it).
fn decode_run(
    cfg: EtmV4Config,
    images: &[(u64, Vec<u8>)],
    trace: &[u8],
    options: DecoderOptions,
    waits: u32,
    feed: Feed,
    block: usize,
) -> DecodeRun {
    let mut mapper = MemAccMapper::default();
    for (addr, bytes) in images {
        mapper
            .add_accessor(Box::new(
                BufferAccessor::new(*addr, bytes.clone(), MemSpace::ANY).unwrap(),
            ))
            .unwrap();
    }
    let err_out = shared(MsgLogger::capture());
    let err_log = shared(ErrorLogger::new(Severity::Info, Some(err_out.clone())));
    let elems = Arc::new(Lock::new(Vec::new()));
    let router = shared(ElemRouter::default());
    let calls = Arc::new(Lock::new(Vec::new()));
    router
        .borrow_mut()
        .set(Some(Box::new(ElemLog(elems.clone(), waits, calls.clone()))));
    let ctx = DecodeContext {
        mode: DecodeMode::FullDecode,
        instance_id: Some(cfg.trace_id()),
        mem: Some(shared(mapper)),
        instr: shared(ArmInstrDecoder::new()),
        elem_out: router,
        err_log,
        options,
    };
    let mut comp = create_component("ETMV4I", cfg.clone(), &ctx).unwrap();
    if feed != Feed::Bytes {
        let dec: Box<dyn PktDataIn<EtmV4Packet>> = Box::new(decoder::EtmV4Decoder::new(cfg.clone(), &ctx));
        let err = ctx.packet_processor_err_link("PKTP_ETMV4I");
        let proc = EtmV4PktProc::new(cfg, Some(err));
        let mut p = crate::decoder::Pipeline::new("ETMV4I", proc, Some(Box::new(Built(dec))));
        if feed == Feed::Monitor {
            p.set_monitor(Some(Box::new(NoMon)));
        }
        comp = Box::new(p);
    }
    let mut done = 0;
    let mut waits_at_block_end = Vec::new();
    let mut fatal = None;
    while done < trace.len() {
        let end = trace.len().min(done.saturating_add(block));
        let (r, used) = comp.trace_data_in(DatapathOp::Data, done as u64, &trace[done..end]);
        done += used;
        let mut r = r;
        if r.is_wait() && done == end {
            waits_at_block_end.push((done, elems.borrow().len()));
        }
        while r.is_wait() {
            r = comp.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        }
        if r.is_fatal() {
            fatal = Some(r);
            break;
        }
    }
    let mut r = if fatal.is_some() {
        DatapathResp::Cont
    } else {
        comp.trace_data_in(DatapathOp::Eot, 0, &[]).0
    };
    while r.is_wait() {
        r = comp.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        if r.is_cont() {
            r = comp.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        }
    }
    let e = elems.borrow().clone();
    let errors = err_out.borrow().captured().to_string();
    let sink_calls = calls.borrow().clone();
    DecodeRun {
        elems: e,
        errors,
        sink_calls,
        waits_at_block_end,
        fatal,
    }
}

pub(crate) fn a64(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub(crate) const NOP: u32 = 0xd503_201f;

/// A64 program at 0x1000.
fn a64_program() -> Vec<u8> {
    a64(&[
        NOP,         // 0x1000
        NOP,         // 0x1004
        0x1400_0002, // 0x1008 b 0x1010
        NOP,         // 0x100c
        0xb400_0080, // 0x1010 cbz x0, 0x1020
        0xd65f_03c0, // 0x1014 ret
        NOP,         // 0x1018
        NOP,         // 0x101c
        NOP,         // 0x1020
        0xd61f_0020, // 0x1024 br x1
        0x9400_0002, // 0x1028 bl 0x1030
        0x0000_0000, // 0x102c (zero: bad opcode when checked)
        NOP,         // 0x1030
        0xd400_0001, // 0x1034 svc #0
        NOP,         // 0x1038
    ])
}

/// Trace preamble: async, trace info, trace on, address + context
/// (0x1000, AArch64 EL1 NS).
fn preamble() -> Vec<u8> {
    with_sync(&[
        0x01, 0x00, 0x04, 0x85, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x31,
    ])
}

fn cfg_dec() -> EtmV4Config {
    EtmV4Config {
        traceidr: 0x10,
        ..a_cfg()
    }
}

#[test]
fn decode_atoms_branches_and_address() {
    let mut t = preamble();
    t.extend_from_slice(&[
        0xf7, // E: 0x1000..0x100c, b taken
        0xf6, // N: cbz not taken
        0xf7, // E: ret taken
        0x95, 0x08, // address 0x1020
        0xf7, // E: br x1 taken
    ]);
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        run.elems,
        [
            "Idx:0; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            "Idx:14; ID:10; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:15; ID:10; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )",
            "Idx:25; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:26; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1014] num_i(1) last_sz(4) (ISA=A64) N BR   <cond>)",
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1014:[0x1018] num_i(1) last_sz(4) (ISA=A64) E iBR A64:ret )",
            "Idx:30; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1020:[0x1028] num_i(2) last_sz(4) (ISA=A64) E iBR )",
            "Idx:30; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert_eq!(run.errors, "");
    // The same with the sink waiting on every element.
    let waited = decode(
        cfg_dec(),
        &[(0x1000, a64_program())],
        &t,
        DecoderOptions::default(),
        1000,
    );
    assert_eq!(waited.elems, run.elems);
}

#[test]
fn an_address_between_atom_runs_does_not_end_the_run() {
    // With no packet monitor, the ranges of the atoms on both sides of an
    // indirect branch's target address go to the sink in one call; with
    // a monitor each packet's go in their own, and an address packet the
    // block's end splits ends the run. The elements are the same.
    let body = [
        0xf7, // E: 0x1000..0x100c, b taken
        0xf6, // N: cbz not taken
        0xf7, // E: ret taken
        0x95, 0x08, // short address 0x1020
        0xf7, // E: br x1 taken
        0x9a, 0x0a, 0x08, 0x00, 0x00, // long address 0x1028
        0xf7, // E: bl taken
    ];
    // Twice: the second time the code walked is remembered, and the atoms
    // take the fast path.
    let mut t = preamble();
    t.extend_from_slice(&body);
    t.extend_from_slice(&preamble());
    t.extend_from_slice(&body);
    let program = [(0x1000, a64_program())];
    let run = |waits, feed, block| decode_as(cfg_dec(), &program, &t, DecoderOptions::default(), waits, feed, block);
    let bytes = run(0, Feed::Bytes, usize::MAX);
    let ranges: Vec<_> = bytes
        .elems
        .iter()
        .filter(|e| e.contains("INSTR_RANGE"))
        .cloned()
        .collect();
    let pass = [
        (25, "0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  "),
        (26, "0x1010:[0x1014] num_i(1) last_sz(4) (ISA=A64) N BR   <cond>"),
        (27, "0x1014:[0x1018] num_i(1) last_sz(4) (ISA=A64) E iBR A64:ret "),
        (30, "0x1020:[0x1028] num_i(2) last_sz(4) (ISA=A64) E iBR "),
        (36, "0x1028:[0x102c] num_i(1) last_sz(4) (ISA=A64) E BR  b+link "),
    ];
    let second = t.len() - body.len() - 25;
    let want: Vec<_> = [0, second]
        .iter()
        .flat_map(|off| {
            pass.iter()
                .map(move |(i, r)| format!("Idx:{}; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range={r})", i + off))
        })
        .collect();
    assert_eq!(ranges, want);
    // The second pass: its first range, after the sync's elements, goes
    // alone; the other four, on both sides of two addresses, in one call;
    // then the end of trace.
    assert_eq!(bytes.sink_calls[bytes.sink_calls.len() - 3..], [1, 4, 1]);
    let monitor = run(0, Feed::Monitor, usize::MAX);
    assert_eq!(monitor.elems, bytes.elems);
    assert_eq!(monitor.sink_calls[monitor.sink_calls.len() - 6..], [1; 6]);
    // The second short address's last byte in the next block: the run
    // ends before that address.
    let split = run(0, Feed::Bytes, t.len() - 8);
    assert_eq!(split.elems, bytes.elems);
    assert_eq!(split.sink_calls[split.sink_calls.len() - 4..], [1, 2, 2, 1]);
    // A sink that waits on every element gets them all the same.
    let waited = run(1000, Feed::Bytes, usize::MAX);
    assert_eq!(waited.elems, bytes.elems);
    // Under OpenCSD's flow control a run never takes a block's last
    // byte, so a wait with the whole block taken leaves the decoder
    // holding what it holds with a monitor (OpenCSD's flow): a program
    // that drops what the decoder holds then (perf 6.1) loses the same.
    let flow = DecoderOptions {
        opencsd_flow: true,
        ..DecoderOptions::default()
    };
    for block in [usize::MAX, 8, 11, 13] {
        let by_monitor = run(1000, Feed::Monitor, block);
        let by_runs = run(1000, Feed::Bytes, block);
        let opencsd = decode_as(cfg_dec(), &program, &t, flow, 1000, Feed::Bytes, block);
        assert_eq!(opencsd.elems, bytes.elems);
        assert!(!by_monitor.waits_at_block_end.is_empty());
        assert_eq!(opencsd.waits_at_block_end, by_monitor.waits_at_block_end);
        if block == usize::MAX {
            // Without it the last run takes the block's end: the wait
            // there comes with 3 of the run's elements still held.
            assert_eq!(by_runs.waits_at_block_end, [(74, 12)]);
            assert_eq!(by_monitor.waits_at_block_end, [(74, 15)]);
        }
    }
    // The second pass's runs still go to the sink in one call (but for
    // the last atom, which goes alone).
    let opencsd = decode_as(cfg_dec(), &program, &t, flow, 0, Feed::Bytes, usize::MAX);
    assert_eq!(opencsd.elems, bytes.elems);
    assert_eq!(opencsd.sink_calls[opencsd.sink_calls.len() - 4..], [1, 3, 1, 1]);
}

#[test]
fn decode_memory_not_accessible() {
    let mut t = preamble();
    t.extend_from_slice(&[0xf7, 0x9a, 0x00, 0x40, 0x00, 0x00, 0xf7]); // E, address 0x8000 (unmapped), E
    let run = decode(
        cfg_dec(),
        &[(0x1000, a64_program()[..12].to_vec())],
        &t,
        DecoderOptions::default(),
        0,
    );
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:25; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:31; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x8000; Memspace [0x2:EL1N] )",
            "Idx:31; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    // Walking off the end of an image: the range so far, then NACC.
    let mut t = preamble();
    t.extend_from_slice(&[0x95, 0x01, 0xf7]); // address 0x1004 (9 bits), E
    let run = decode(
        cfg_dec(),
        &[(0x1000, a64(&[NOP, NOP, NOP]))],
        &t,
        DecoderOptions::default(),
        0,
    );
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1004:[0x100c] num_i(2) last_sz(4) (ISA=A64) E --- )",
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x100c; Memspace [0x2:EL1N] )",
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_exception_with_return_address() {
    let mut t = preamble();
    t.extend_from_slice(&[
        0x95, 0x0c, // address 0x1030
        0x06, 0x05, // exception: call, address follows
        0x95, 0x0e, // preferred return address 0x1038 (after the svc)
        0x9a, 0x00, 0x00, 0x02, 0x00, // vector 0x20000 (unmapped)
        0xf7, // E
    ]);
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1030:[0x1038] num_i(2) last_sz(4) (ISA=A64) E --- )",
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_EXCEPTION(pref ret addr:0x1038; excep num (0x02) )",
            "Idx:36; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x20000; Memspace [0x2:EL1N] )",
            "Idx:36; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_timestamp_cycle_count_event_and_exception_return() {
    let mut cfg = cfg_dec();
    cfg.configr |= 1 << 4; // cycle counting: timestamps carry a count
    let mut t = preamble();
    t.extend_from_slice(&[0x03, 0x10, 0x20, 0x72, 0x07, 0x0e, 0x05, 0xf7]);
    let run = decode(cfg, &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        &run.elems[1..],
        [
            "Idx:14; ID:10; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:15; ID:10; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )",
            "Idx:25; ID:10; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000010];  [CC=32]; )",
            "Idx:28; ID:10; OCSD_GEN_TRC_ELEM_EVENT( Numbered:2; )",
            "Idx:29; ID:10; OCSD_GEN_TRC_ELEM_EXCEPTION_RET()",
            "Idx:30; ID:10; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=5]; )",
            "Idx:32; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:32; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_bad_opcode_error_and_resync() {
    let mut t = preamble();
    t.extend_from_slice(&[0x95, 0x0a, 0xf6, 0xf7, 0xf7]); // address 0x1028; N (bl), E, E
    t.extend_from_slice(&ASYNC);
    t.extend_from_slice(&[0x01, 0x00, 0x9d, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf7]);
    let opts = DecoderOptions {
        aa64_opcode_check: true,
        ..Default::default()
    };
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, opts, 0);
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1028:[0x102c] num_i(1) last_sz(4) (ISA=A64) N BR  b+link )",
            "Idx:28; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])",
            // After the next sync no context has been seen: atoms wait.
            "Idx:53; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert_eq!(
        run.errors,
        "DCD_ETMV4_0016 : 0x002c (OCSD_ERR_INVALID_OPCODE) [Illegal Opode found while decoding program memory.]; TrcIdx=28; CS ID=10; Error processing atom packet."
    );
    // Without the check the zero word is an ordinary instruction.
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert!(
        run.elems[4].contains("exec range=0x102c:[0x103c] num_i(4)"),
        "{:?}",
        run.elems
    );
}

#[test]
fn decode_range_limit() {
    let mut t = preamble();
    t.extend_from_slice(&[0x95, 0x0c, 0xf7]); // 0x1030: nop, svc (not a waypoint), nop, then off the image
    let opts = DecoderOptions {
        instr_range_limit: 2,
        ..Default::default()
    };
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, opts, 0);
    assert_eq!(run.elems[3], "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])");
    assert_eq!(
        run.errors,
        "DCD_ETMV4_0016 : 0x002d (OCSD_ERR_I_RANGE_LIMIT_OVERRUN) [An optional limit on consecutive instructions in range during decode has been exceeded.]; Decode Instruction Range Limit Overrun\
         DCD_ETMV4_0016 : 0x002d (OCSD_ERR_I_RANGE_LIMIT_OVERRUN) [An optional limit on consecutive instructions in range during decode has been exceeded.]; TrcIdx=27; CS ID=10; Error processing atom packet."
    );
}

#[test]
fn decode_range_limit_in_an_exception_stops_the_decode() {
    // Walking from 0x1030 to the exception's return address 0x1038 takes
    // two instructions, past a limit of one. OpenCSD gives up the data
    // path there (an atom's overrun only resynchronises).
    let mut t = preamble();
    t.extend_from_slice(&[
        0x95, 0x0c, // address 0x1030
        0x06, 0x05, // exception: call, address follows
        0x95, 0x0e, // preferred return address 0x1038
        0xf7, // E: never reached
    ]);
    let opts = DecoderOptions {
        instr_range_limit: 1,
        ..Default::default()
    };
    let run = decode_run(
        cfg_dec(),
        &[(0x1000, a64_program())],
        &t,
        opts,
        0,
        Feed::Bytes,
        usize::MAX,
    );
    assert_eq!(run.fatal, Some(DatapathResp::FatalInvalidData), "{:?}", run.elems);
    assert_eq!(run.elems.len(), 3, "nothing after the exception: {:?}", run.elems);
    assert_eq!(
        run.errors,
        "DCD_ETMV4_0016 : 0x002d (OCSD_ERR_I_RANGE_LIMIT_OVERRUN) [An optional limit on consecutive instructions in range during decode has been exceeded.]; Decode Instruction Range Limit Overrun\
         DCD_ETMV4_0016 : 0x002d (OCSD_ERR_I_RANGE_LIMIT_OVERRUN) [An optional limit on consecutive instructions in range during decode has been exceeded.]; TrcIdx=27; CS ID=10; Error processing exception packet."
    );
}

#[test]
fn decode_speculation_commit_cancel_mispredict() {
    let mut cfg = cfg_dec();
    cfg.idr8 = 8; // speculation depth 8: atoms wait for commit
    let mut t = preamble();
    t.extend_from_slice(&[
        0xf7, // E (speculative)
        0xf7, // E (speculative)
        0x2e, 0x01, // cancel the newest
        0x31, // mispredict: E atom added, then flipped to N
        0x2d, 0x02, // commit 2: first E, then the mispredicted (N) atom
    ]);
    let run = decode(cfg, &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:25; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:29; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1014] num_i(1) last_sz(4) (ISA=A64) N BR   <cond>)",
            "Idx:30; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert_eq!(run.errors, "");
}

#[test]
fn cycle_count_commit_ignored_as_opencsd_1_3() {
    // COMMOPT 0: the CCNT_F3 packet commits 2 elements, and none is there.
    let mut cfg = cfg_dec();
    cfg.idr0 &= !0x2000_0000;
    let mut t = preamble();
    t.extend_from_slice(&[0x17, 0xf7]); // CCNT_F3 (count 3, commit 2), E
    let run = decode(
        cfg.clone(),
        &[(0x1000, a64_program())],
        &t,
        DecoderOptions::default(),
        0,
    );
    assert_eq!(
        run.errors,
        "DCD_ETMV4_0016 : 0x001a (OCSD_ERR_COMMIT_PKT_OVERRUN) [Overrun in commit packet stack - tried to commit more than available]; TrcIdx=25; CS ID=10; Not enough elements to commit"
    );
    let opts = DecoderOptions {
        ccnt_without_commit: true,
        ..Default::default()
    };
    let run = decode(cfg, &[(0x1000, a64_program())], &t, opts, 0);
    assert_eq!(run.errors, "");
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:25; ID:10; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=3]; )",
            "Idx:26; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:26; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_overflow_discards_and_resyncs() {
    let mut cfg = cfg_dec();
    cfg.idr8 = 8;
    let mut t = preamble();
    t.extend_from_slice(&[0xf7, 0x00, 0x05]);
    t.extend_from_slice(&ASYNC);
    t.extend_from_slice(&[
        0x01, 0x00, 0x04, 0x85, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x31, 0xf7, 0x2d, 0x01,
    ]);
    let run = decode(cfg, &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        &run.elems[1..],
        [
            "Idx:26; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [overflow])",
            "Idx:42; ID:10; OCSD_GEN_TRC_ELEM_TRACE_ON( [overflow])",
            "Idx:43; ID:10; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )",
            "Idx:53; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:54; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_bad_packet_resyncs() {
    let mut t = preamble();
    t.extend_from_slice(&[0xf7, 0xa5, 0xf7]);
    t.extend_from_slice(&ASYNC);
    t.extend_from_slice(&[0x01, 0x00]);
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:25; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])",
            "Idx:40; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert!(
        run.errors.contains("TrcIdx=26; CS ID=10; Reserved packet header"),
        "{}",
        run.errors
    );
}

#[test]
fn decode_m_profile_thumb() {
    // Cortex-M (v8.1-M), T32 at 0x2000.
    let cfg = EtmV4Config {
        idr0: 0x2800_06E1,
        idr1: 0x4100_F454,
        idr2: 0x0000_0004,
        configr: 0x1,
        traceidr: 0,
        arch: ArchProfile::new(ArchVersion::V8r3, CoreProfile::CortexM),
        ..Default::default()
    };
    let code: Vec<u8> = [
        0xbf00u16, // 0x2000 nop
        0x2800,    // 0x2002 cmp r0, #0
        0xd001,    // 0x2004 beq 0x200a
        0xbf00,    // 0x2006 nop
        0x4770,    // 0x2008 bx lr
        0xf000, 0xf802, // 0x200a bl 0x2012
        0xbf00, // 0x200e
        0xbf00, // 0x2010
        0x4770, // 0x2012 bx lr
    ]
    .iter()
    .flat_map(|h| h.to_le_bytes())
    .collect();
    let mut t = ASYNC.to_vec();
    t.extend_from_slice(&[0x01, 0x00, 0x83, 0x00, 0x20, 0x00, 0x00, 0x00]); // 0x2000 IS1, EL0 S
    t.extend_from_slice(&[0xf8]); // N N N
    let run = decode(cfg, &[(0x2000, code)], &t, DecoderOptions::default(), 0);
    assert_eq!(
        run.elems,
        [
            "Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            "Idx:14; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) EL0S; 32-bit; )",
            "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2000:[0x2006] num_i(3) last_sz(2) (ISA=T32) N BR   <cond>)",
            "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2006:[0x200a] num_i(2) last_sz(2) (ISA=T32) N iBR V7:impl ret)",
            "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x200a:[0x200e] num_i(1) last_sz(4) (ISA=T32) N BR  b+link )",
            "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_return_stack() {
    let mut cfg = cfg_dec();
    cfg.configr |= 1 << 12; // return stack on
    let mut t = preamble();
    // 0x1028 bl 0x1030 (E); 0x1030 nop, svc, nop, then 0x103c...: use an
    // address to reach the ret at 0x1014 and let the return stack supply
    // its target (no address packet after the ret).
    t.extend_from_slice(&[0x95, 0x0a, 0xf7, 0x95, 0x05, 0xf7, 0xf7]);
    let mut prog = a64_program();
    prog[0x38..0x3c].copy_from_slice(&0x1400_0000u32.to_le_bytes()); // 0x1038: b .
    let run = decode(cfg, &[(0x1000, prog)], &t, DecoderOptions::default(), 0);
    assert_eq!(
        &run.elems[3..],
        [
            "Idx:27; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1028:[0x102c] num_i(1) last_sz(4) (ISA=A64) E BR  b+link )",
            "Idx:30; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1014:[0x1018] num_i(1) last_sz(4) (ISA=A64) E iBR A64:ret )",
            // The return goes to 0x102c, after the call.
            "Idx:31; ID:10; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x102c:[0x103c] num_i(4) last_sz(4) (ISA=A64) E BR  )",
            "Idx:31; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn packets_only_component_lists_packets() {
    let ctx = DecodeContext {
        mode: DecodeMode::PacketsOnly,
        instance_id: Some(1),
        mem: None,
        instr: shared(ArmInstrDecoder::new()),
        elem_out: shared(ElemRouter::default()),
        err_log: shared(ErrorLogger::default()),
        options: DecoderOptions::default(),
    };
    let out = shared(MsgLogger::capture());
    let mut comp = create_component("ETMV4I", a_cfg(), &ctx).unwrap();
    comp.attach_packet_printer(crate::printers::PacketPrinter::new(1, out.clone()), false)
        .unwrap();
    let data = with_sync(&[0x01, 0x00, 0xf7]);
    let (r, used) = comp.trace_data_in(DatapathOp::Data, 0, &data);
    assert_eq!((r, used), (DatapathResp::Cont, data.len()));
    comp.trace_data_in(DatapathOp::Eot, 0, &[]);
    assert_eq!(
        out.borrow().captured(),
        "Idx:0; ID:1;\tI_ASYNC : Alignment Synchronisation.\n\
         Idx:12; ID:1;\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }; Decoder Sync point TINFO\n\
         Idx:14; ID:1;\tI_ATOM_F1 : Atom format 1.; E\n\
         ID:1\tEND OF TRACE DATA\n"
    );
}

#[test]
fn factory_reads_registers() {
    let f = factory();
    assert_eq!(f.protocol_name(), "ETMV4I");
    let cfg = crate::decoder::SourceConfig {
        regs: vec![
            ("TRCTRACEIDR".into(), 0x12),
            ("TRCIDR2".into(), 0x488),
            ("TRCCONFIGR".into(), 0xC1),
        ],
        ..Default::default()
    };
    assert_eq!(f.trace_id(&cfg), 0x12);
    let c = EtmV4Config::from_source(&cfg);
    assert_eq!((c.trace_id(), c.ia_size_max(), c.cid_size()), (0x12, 64, 32));
}

#[test]
fn decode_inconsistent_image_checks() {
    // N atom on the unconditional `b` at 0x1008.
    let mut t = preamble();
    t.extend_from_slice(&[0xf6]);
    let opts = DecoderOptions {
        direct_br_cond: true,
        ..Default::default()
    };
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, opts, 0);
    // OpenCSD 1.8.0's text and reason for it.
    assert_eq!(
        run.elems[3],
        "Idx:25; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-program-image])"
    );
    assert!(
        run.errors.contains("(OCSD_ERR_BAD_DECODE_IMAGE)")
            && run
                .errors
                .contains("TrcIdx=25; CS ID=10; Bad program image - N Atom on unconditional direct BR.\n"),
        "{}",
        run.errors
    );
    // Without the check the N atom is followed.
    let run = decode(cfg_dec(), &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert!(
        run.elems[3].contains("exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) N BR"),
        "{:?}",
        run.elems
    );
}

#[test]
fn random_input_never_panics() {
    // Pseudo-random bytes (some runs with sync sequences spliced in) through
    // processors and decoders of several configurations.
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut cfgs = vec![cfg_dec(), a_cfg()];
    let mut spec = cfg_dec();
    spec.idr8 = 16;
    spec.idr0 |= 0x3 << 15;
    spec.configr |= (1 << 12) | (1 << 4);
    spec.idr0 &= !0x2000_0000;
    cfgs.push(spec);
    let mut m = a_cfg();
    m.arch = ArchProfile::new(ArchVersion::V8r3, CoreProfile::CortexM);
    cfgs.push(m);
    let mut image = a64_program();
    for _ in 0..256 {
        image.extend_from_slice(&(next() as u32).to_le_bytes());
    }
    for (n, cfg) in cfgs.into_iter().enumerate() {
        for round in 0..4 {
            let mut data = Vec::new();
            for i in 0..3000 {
                if i % 400 == 0 {
                    data.extend_from_slice(&ASYNC);
                    data.extend_from_slice(&[0x01, 0x00, 0x04, 0x85, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0x31]);
                }
                data.push(next() as u8);
            }
            let opts = DecoderOptions {
                range_cont: round & 1 == 1,
                strict_br_cond: round & 2 == 2,
                ..Default::default()
            };
            let run = decode(
                cfg.clone(),
                &[(0x1000, image.clone())],
                &data,
                opts,
                (n * round) as u32 * 7,
            );
            assert!(
                run.elems.last().is_some_and(|e| e.contains("EO_TRACE")),
                "cfg {n} round {round}"
            );
        }
    }
}

#[test]
fn maximal_speculation_depth_and_trace_info_spec_field_stay_bounded() {
    // Found by the etmv4/ete fuzz targets (issue 15, defect 2): TRCIDR8 at
    // 0xFFFFFFFF and a Trace Info packet saying 0xFFFFFFFF elements are
    // already speculative pushed that many unseen elements (an abort
    // allocating gigabytes). They are one counted stack entry now, so
    // nothing grows; the implied commit of all but SPEC_DEPTH_LIMIT of them
    // takes them from the count, as OpenCSD would with the memory to hold
    // them, and what follows stays speculative behind them: no range is
    // output and no error is reported.
    let mut cfg = cfg_dec();
    cfg.idr8 = 0xFFFF_FFFF;
    let mut t = with_sync(&[0x01, 0x04, 0xff, 0xff, 0xff, 0xff, 0x0f]); // Trace Info, SPEC=0xffffffff
    t.extend_from_slice(&[
        0x04, 0x85, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x31, 0xf7, 0x2d, 0x01,
    ]);
    let run = decode(cfg, &[(0x1000, a64_program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        run.elems,
        [
            "Idx:0; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            "Idx:31; ID:10; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert!(run.errors.is_empty(), "{}", run.errors);
}

#[test]
fn atom_packets_taken_as_bytes_decode_as_built_packets() {
    // The decoder takes runs of atom packets straight from their bytes
    // (with no packet monitor attached); a decoder that does not is sent
    // each packet built; with a packet monitor each packet's elements are
    // sent after it (as in OpenCSD). All must give the same elements and
    // errors: over loops, calls, returns (with and without the return
    // stack), blocks not yet walked, unmapped addresses, runs past the
    // held-element limit, atoms after an indirect branch, stray bytes,
    // split blocks and waits. (A return-stack overflow in a packet after
    // held ones once let the packet's first ranges out without a monitor,
    // where the monitor's path and OpenCSD drop them with the reset.)
    let program = a64(&[
        NOP,         // 0x1000
        0x54ff_ffe1, // 0x1004 b.ne 0x1000
        0x9400_0004, // 0x1008 bl 0x1018
        0xb4ff_ffa0, // 0x100c cbz x0, 0x1000
        0x17ff_fffd, // 0x1010 b 0x1004
        NOP,         // 0x1014
        NOP,         // 0x1018
        0xd65f_03c0, // 0x101c ret
        0xd61f_0020, // 0x1020 br x1
        0x17ff_fff7, // 0x1024 b 0x1000
    ]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut t = preamble();
    for i in 0..6000 {
        let r = next();
        match r % 1000 {
            0..=599 => t.push(0xc0 | (r >> 16) as u8 & 0x3f),
            600..=849 => t.extend_from_slice(&[0x95, (r >> 16) as u8 % 11]),
            850..=899 => t.extend_from_slice(&[0xf4; 30]),
            900..=929 => t.extend_from_slice(&[0x95, 0x7f]),
            930..=932 => t.push((r >> 16) as u8),
            _ => t.extend_from_slice(&[0xf7, 0xf7, 0xdb, 0xff]),
        }
        if i % 300 == 299 {
            t.extend_from_slice(&preamble());
        }
    }
    let mut rs = cfg_dec();
    rs.configr |= 1 << 12;
    for cfg in [cfg_dec(), rs] {
        for (block, waits) in [(usize::MAX, 0), (1, 0), (7, 3), (4096, 100_000)] {
            let run = |feed| {
                decode_as(
                    cfg.clone(),
                    &[(0x1000, program.clone())],
                    &t,
                    DecoderOptions::default(),
                    waits,
                    feed,
                    block,
                )
            };
            let bytes = run(Feed::Bytes);
            let ranges = bytes.elems.iter().filter(|e| e.contains("INSTR_RANGE")).count();
            assert!(ranges > 5_000, "{ranges} ranges");
            for feed in [Feed::Built, Feed::Monitor] {
                let other = run(feed);
                for (n, (a, b)) in bytes.elems.iter().zip(&other.elems).enumerate() {
                    assert_eq!(a, b, "element {n}, block {block}, waits {waits}, {feed:?}");
                }
                assert_eq!(
                    bytes.elems.len(),
                    other.elems.len(),
                    "block {block} waits {waits} {feed:?}"
                );
                assert_eq!(bytes.errors, other.errors, "{feed:?}");
            }
        }
    }
}
