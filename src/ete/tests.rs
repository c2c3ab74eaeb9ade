//! ETE unit tests: hand-built byte streams with their exact packets, and
//! small A64 programs with their exact generic elements. The ETMv4 test
//! helpers are shared (ETE runs on the same processor and decoder).

use crate::shared::Lock;
use std::sync::Arc;

use super::*;
use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
use crate::datapath::DatapathOp;
use crate::decoder::{DecodeContext, DecodeMode, DecoderOptions, ElemRouter};
use crate::errcode::Severity;
use crate::etmv4::tests::{ASYNC, DecodeRun, NOP, a64, body, decode, list_packets, with_sync};
use crate::instr::ArmInstrDecoder;
use crate::logger::{ErrorLogger, MsgLogger};
use crate::memory::{BufferAccessor, MemAccMapper, MemSpace};
use crate::shared::shared;

// ---------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------

/// ETE 1.3 (TRCDEVARCH 0x47735A13) on an Armv9 core: 64-bit addresses,
/// 32-bit context ID and VMID (both traced), TS markers, full Q support,
/// WFx as branches, transaction start a P0 element, no speculation.
fn ete_cfg() -> EtmV4Config {
    EtmV4Config {
        idr0: 0x28c1_cea1,
        idr1: 0x4100_fff0,
        idr2: 0xd000_1088,
        configr: 0xc1,
        traceidr: 0x02,
        devarch: Some(0x4773_5a13),
        arch: ArchProfile::new(ArchVersion::Aa64, CoreProfile::CortexA),
        ..Default::default()
    }
}

/// The same unit as ETE 1.0: no TS marker or instrumentation packets.
fn ete10_cfg() -> EtmV4Config {
    EtmV4Config {
        devarch: Some(0x4770_5a13),
        ..ete_cfg()
    }
}

fn source(regs: &[(&str, u64)]) -> SourceConfig {
    SourceConfig {
        regs: regs.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        ..Default::default()
    }
}

#[test]
fn factory_and_configuration_from_registers() {
    let f = factory();
    assert_eq!(f.protocol_name(), "ETE");
    assert_eq!(f.device_types(), ["ETE"]);
    assert!(f.is_pe_trace());
    let regs = [
        ("TRCCONFIGR", 0x8001),
        ("TRCTRACEIDR", 0x22),
        ("TRCDEVARCH", 0x4771_5a13),
        ("TRCIDR0", 0x2881_cea1),
        ("TRCIDR1", 0x4100_fff0),
        ("TRCIDR2", 0xd000_1088),
        ("TRCIDR8", 0x4),
    ];
    let src = source(&regs);
    assert_eq!(f.trace_id(&src), 0x22);
    let c = config_from_source(&src);
    // Version from TRCDEVARCH (TRCIDR1 of an ETE reads 15.15).
    assert_eq!((c.major_version(), c.minor_version(), c.full_version()), (5, 1, 0x51));
    assert!(c.is_ete() && c.ete_has_ts_marker());
    assert_eq!((c.ia_size_max(), c.cid_size(), c.vmid_size()), (64, 32, 32));
    assert_eq!(c.max_spec_depth(), 4);
    assert!(c.wfi_wfe_branch() && c.comm_trans_p0());
    // No keyed speculation registers on ETE.
    assert_eq!((c.idr9, c.idr10, c.idr11, c.idr12, c.idr13), (0, 0, 0, 0, 0));

    // Without TRCDEVARCH: ETE 1.0. A 32-bit VMID is still 32 bits there.
    let c = config_from_source(&source(&regs[..2]));
    assert_eq!(c.devarch, Some(crate::etmv4::config::ETE_DEFAULT_DEVARCH));
    assert_eq!(c.full_version(), 0x50);
    let c = config_from_source(&source(&[("TRCIDR2", 0xd000_1088)]));
    assert_eq!(c.vmid_size(), 32);
    assert!(!c.ete_has_ts_marker());
    // ETE 1.1 without TRCIDR0.TSMARK: timestamps are not held back.
    let c = EtmV4Config {
        idr0: 0x2801_cea1,
        ..ete_cfg()
    };
    assert!(!c.ete_has_ts_marker());
}

// ---------------------------------------------------------------------
// Packets
// ---------------------------------------------------------------------

#[test]
fn trace_info_with_transaction_state_and_sections() {
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[0x01, 0x01, 0x40, 0x01, 0x09, 0x01, 0x05, 0x01, 0x05, 0x00, 0x03]),
    );
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[1],
        "Idx:12; [0x01 0x01 0x40 ];\tI_TRACE_INFO : Trace Info.; INFO=0x40 { CC.0, TSTATE.1 }; Decoder Sync point TINFO"
    );
    assert_eq!(
        lines[2],
        "Idx:15; [0x01 0x09 0x01 0x05 ];\tI_TRACE_INFO : Trace Info.; INFO=0x1 { CC.1, TSTATE.0 }; CC_THRESHOLD=0x5"
    );
    // Speculation depth shows on the first trace info only.
    assert_eq!(
        lines[3],
        "Idx:19; [0x01 0x05 0x00 0x03 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0, TSTATE.0 }"
    );
    let t = list_packets(ete_cfg(), &with_sync(&[0x01, 0x05, 0x00, 0x03]));
    assert_eq!(
        t.lines().nth(1).unwrap(),
        "Idx:12; [0x01 0x05 0x00 0x03 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0, TSTATE.0 }; INIT SPEC DEPTH=3; Decoder Sync point TINFO"
    );
}

#[test]
fn transaction_marker_reset_and_fail_packets() {
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[0x01, 0x00, 0x0a, 0x0b, 0x88, 0x06, 0x30, 0x00, 0x06, 0x00, 0x00]),
    );
    assert_eq!(
        body(&t),
        [
            "Idx:14; [0x0a ];\tI_TRANS_ST : Transaction Start.",
            "Idx:15; [0x0b ];\tI_TRANS_COMMIT : Transaction Commit.",
            "Idx:16; [0x88 ];\tI_TS_MARKER : Timestamp Marker",
            // Exception types 0x18 and 0 always take three bytes on ETE.
            "Idx:17; [0x06 0x30 0x00 ];\tI_TRANS_FAIL : Transaction Fail.",
            "Idx:20; [0x06 0x00 0x00 ];\tI_PE_RESET : PE Reset.",
        ]
    );
}

#[test]
fn exception_forms_and_exception_return_on_ete() {
    // Short form (address follows), extended form (third byte), and the
    // ETMv4 exception return header, reserved on ETE: an invalid header
    // error, as OpenCSD 1.8.0 raises, and passed on to the decoder.
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[0x01, 0x00, 0x06, 0x1d, 0x06, 0x9c, 0x00, 0x06, 0x9f, 0x01, 0x07, 0xf7]),
    );
    assert_eq!(
        body(&t),
        [
            "Idx:14; [0x06 0x1d ];\tI_EXCEPT : Exception.;  IRQ; Ret Addr Follows;",
            "Idx:16; [0x06 0x9c 0x00 ];\tI_EXCEPT : Exception.;  IRQ;",
            "Idx:19; [0x06 0x9f 0x01 ];\tI_EXCEPT : Exception.;  Reserved; Ret Addr Follows;",
            "PKTP_ETMV4I_0001 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=22; CS ID=02; Idx:22; [0x07 ];\tI_RESERVED_CFG : Reserved header for current configuration.[I_EXCEPT_RTN]",
            "Idx:23; [0xf7 ];\tI_ATOM_F1 : Atom format 1.; E",
        ]
    );
}

#[test]
fn instrumentation_packet() {
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[
            0x01, 0x00, 0x09, 0x02, 0xf0, 0xde, 0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12, 0xf6,
        ]),
    );
    assert_eq!(
        body(&t),
        [
            "Idx:14; [0x09 0x02 0xf0 0xde 0xbc 0x9a 0x78 0x56 0x34 0x12 ];\tI_ITE : Instrumentation; EL2; Payload=0x123456789abcdef0",
            "Idx:24; [0xf6 ];\tI_ATOM_F1 : Atom format 1.; N",
        ]
    );
    // Cut short by the end of the trace.
    let t = list_packets(ete_cfg(), &with_sync(&[0x01, 0x00, 0x09, 0x01, 0x02]));
    assert_eq!(
        body(&t),
        ["Idx:14; [0x09 0x01 0x02 ];\tI_INCOMPLETE_EOT : Incomplete packet at end of trace.[I_ITE]"]
    );
}

#[test]
fn packets_reserved_before_ete_1_3_and_on_etmv4() {
    // Before ETE 1.3 there is no instrumentation: the header is reserved
    // (processor error) and decode carries on. Timestamp marker packets
    // exist from ETMv4.6, so on any ETE.
    let t = list_packets(ete10_cfg(), &with_sync(&[0x01, 0x00, 0x88, 0x09, 0xf7]));
    assert_eq!(
        body(&t),
        [
            "Idx:14; [0x88 ];\tI_TS_MARKER : Timestamp Marker",
            "PKTP_ETMV4I_0001 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=15; CS ID=02; Idx:15; [0x09 ];\tI_RESERVED : Reserved Packet Header",
            "Idx:16; [0xf7 ];\tI_ATOM_F1 : Atom format 1.; E",
        ]
    );
    let cfg = EtmV4Config {
        devarch: Some(0x4772_5a13),
        ..ete_cfg()
    };
    let t = list_packets(cfg, &with_sync(&[0x01, 0x00, 0x09]));
    assert!(
        body(&t)[0].ends_with("Idx:14; [0x09 ];\tI_RESERVED : Reserved Packet Header"),
        "{t}"
    );
    // An ETMv4.2 unit knows none of the ETE packets: source addresses and
    // transactions are reserved too.
    let etm = EtmV4Config {
        idr1: 0x4100_f420,
        devarch: None,
        ..ete_cfg()
    };
    let t = list_packets(etm, &with_sync(&[0x01, 0x00, 0x0a, 0xb4, 0x01, 0xf7]));
    let b = body(&t);
    assert!(
        b[0].ends_with("[0x0a ];\tI_RESERVED : Reserved Packet Header"),
        "{}",
        b[0]
    );
    assert!(
        b[1].ends_with("[0xb4 ];\tI_RESERVED : Reserved Packet Header"),
        "{}",
        b[1]
    );
}

#[test]
fn source_address_packets() {
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[
            0x01, 0x00, //
            0xb8, 0x00, 0x08, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, // long 64, IS0: 0x401000
            0xb4, 0x05, // short IS0: low 9 bits 0x014
            0xb1, // match: history entry 1 (0x401000)
            0xb5, 0x7c, // short IS1: low 8 bits 0xf8
            0xb4, 0x85, 0x02, // short IS0, two bytes: low 17 bits 0x00414
            0xb9, 0x01, 0x10, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, // long 64, IS1: 0x401002
            0xb6, 0x00, 0x08, 0x00, 0x20, // long 32, IS0: 0x20001000
            0xb7, 0x01, 0x10, 0x00, 0x20, // long 32, IS1: 0x20001002
            0xb2, // match: history entry 2
        ]),
    );
    assert_eq!(
        body(&t),
        [
            "Idx:14; [0xb8 0x00 0x08 0x40 0x00 0x00 0x00 0x00 0x00 ];\tI_SRC_ADDR_L_64IS0 : Source Address, Long, 64 bit, IS0.; Addr=0x0000000000401000; ",
            "Idx:23; [0xb4 0x05 ];\tI_SRC_ADDR_S_IS0 : Source Address, Short, IS0.; Addr=0x0000000000401014 ~[0x14]",
            "Idx:25; [0xb1 ];\tI_SRC_ADDR_MATCH : Exact Source Address Match., [1]; Addr=0x0000000000401000; ",
            "Idx:26; [0xb5 0x7c ];\tI_SRC_ADDR_S_IS1 : Source Address, Short, IS1.; Addr=0x00000000004010F8 ~[0xF8]",
            "Idx:28; [0xb4 0x85 0x02 ];\tI_SRC_ADDR_S_IS0 : Source Address, Short, IS0.; Addr=0x0000000000400414 ~[0x414]",
            "Idx:31; [0xb9 0x01 0x10 0x40 0x00 0x00 0x00 0x00 0x00 ];\tI_SRC_ADDR_L_64IS1 : Source Address, Long, 64 bit, IS1.; Addr=0x0000000000401002; ",
            // OpenCSD 1.8.0 spells this packet's name "SCR".
            "Idx:40; [0xb6 0x00 0x08 0x00 0x20 ];\tI_SCR_ADDR_L_32IS0 : Source Address, Long, 32 bit, IS0.; Addr=0x0000000020001000; ",
            "Idx:45; [0xb7 0x01 0x10 0x00 0x20 ];\tI_SRC_ADDR_L_32IS1 : Source Address, Long, 32 bit, IS1.; Addr=0x0000000020001002; ",
            "Idx:50; [0xb2 ];\tI_SRC_ADDR_MATCH : Exact Source Address Match., [2]; Addr=0x0000000000401002; ",
        ]
    );
}

#[test]
fn source_address_match_before_any_address_is_zero() {
    // No trace info after the async: the first packets are bad sequences,
    // then an exact match reads an address history nothing has filled.
    // OpenCSD starts the history at zero with all 64 bits known.
    let t = list_packets(ete_cfg(), &with_sync(&[0xb1]));
    let line = t
        .lines()
        .find(|l| l.contains("I_SRC_ADDR_MATCH"))
        .unwrap_or_else(|| panic!("{t}"));
    assert_eq!(
        line, "Idx:12; [0xb1 ];\tI_SRC_ADDR_MATCH : Exact Source Address Match., [1]; Addr=0x0000000000000000; ",
        "{t}"
    );
}

#[test]
fn context_packets_with_realm_root_and_32_bit_vmid() {
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[
            0x01, 0x00, //
            0x81, 0x39, // EL1, AArch64, NS + NSE: Realm
            0x81, 0x1b, // EL3, AArch64, NSE only: Root
            0x81, 0x11, // EL1, AArch64, Secure
            0x81, 0xf1, 0x78, 0x56, 0x34, 0x12, 0x44, 0x33, 0x22, 0x11, // NS EL1, VMID and CID
            0x80, // same context
        ]),
    );
    assert_eq!(
        body(&t),
        [
            "Idx:14; [0x81 0x39 ];\tI_CTXT : Context Packet.; Ctxt: AArch64,EL1, Realm; ",
            "Idx:16; [0x81 0x1b ];\tI_CTXT : Context Packet.; Ctxt: AArch64,EL3, Root; ",
            "Idx:18; [0x81 0x11 ];\tI_CTXT : Context Packet.; Ctxt: AArch64,EL1, S; ",
            "Idx:20; [0x81 0xf1 0x78 0x56 0x34 0x12 0x44 0x33 0x22 0x11 ];\tI_CTXT : Context Packet.; Ctxt: AArch64,EL1, NS; CID=0x11223344; VMID=0x12345678; ",
            "Idx:30; [0x80 ];\tI_CTXT : Context Packet.; Ctxt: Same",
        ]
    );
}

#[test]
fn q_packets_and_reserved_q_types() {
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[
            0x01, 0x00, //
            0x9d, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // address 0x1000
            0xa0, 0x05, // Q, exact match [0], count 5
            0xa6, 0x10, 0x03, // Q, short IS1 address, count 3
            0xab, 0x01, 0x20, 0x00, 0x00, 0x81, 0x01, // Q, long IS1 address, count 129
            0xac, 0x07, // Q, count only
            0xaf, // Q, count unknown
            0xa3, // reserved Q type
            0xf7,
        ]),
    );
    let b = body(&t);
    assert_eq!(
        b[1..],
        [
            "Idx:23; [0xa0 0x05 ];\tI_Q : Q Packet.; Count(5); [0]; Addr=0x0000000000001000",
            "Idx:25; [0xa6 0x10 0x03 ];\tI_Q : Q Packet.; Count(3); Addr=0x0000000000001020 ~[0x20]",
            "Idx:28; [0xab 0x01 0x20 0x00 0x00 0x81 0x01 ];\tI_Q : Q Packet.; Count(129); Addr=0x0000000000002002 ~[0x2002]",
            "Idx:35; [0xac 0x07 ];\tI_Q : Q Packet.; Count(7)",
            "Idx:37; [0xaf ];\tI_Q : Q Packet.; Count(Unknown)",
            "PKTP_ETMV4I_0001 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=38; CS ID=02; Idx:38; [0xa3 ];\tI_RESERVED : Reserved Packet Header",
            "Idx:39; [0xf7 ];\tI_ATOM_F1 : Atom format 1.; E",
        ]
    );
}

#[test]
fn bad_sequences_resync_in_an_ete_stream() {
    // A broken async in the middle of the stream and an unknown extension:
    // each becomes a bad-sequence packet and the next packet parses.
    let t = list_packets(
        ete_cfg(),
        &with_sync(&[0x01, 0x00, 0x00, 0x00, 0x00, 0x42, 0x00, 0x09, 0x88, 0x0a]),
    );
    assert_eq!(
        body(&t),
        [
            "Idx:14; [0x00 0x00 0x00 0x42 ];\tI_BAD_SEQUENCE : Invalid Sequence in packet.[I_ASYNC]",
            "Idx:18; [0x00 0x09 ];\tI_BAD_SEQUENCE : Invalid Sequence in packet.[I_EXTENSION]",
            "Idx:20; [0x88 ];\tI_TS_MARKER : Timestamp Marker",
            "Idx:21; [0x0a ];\tI_TRANS_ST : Transaction Start.",
        ]
    );
}

// ---------------------------------------------------------------------
// Decoder
// ---------------------------------------------------------------------

const ERET: u32 = 0xd69f_03e0;
const RETAA: u32 = 0xd65f_0bff;
const WFET_X0: u32 = 0xd503_1000;

/// A64 program at 0x1000.
fn program() -> Vec<u8> {
    a64(&[
        NOP,         // 0x1000
        NOP,         // 0x1004
        0x1400_0002, // 0x1008 b 0x1010
        NOP,         // 0x100c
        NOP,         // 0x1010
        0x9400_0003, // 0x1014 bl 0x1020
        NOP,         // 0x1018
        NOP,         // 0x101c
        RETAA,       // 0x1020
        WFET_X0,     // 0x1024
        NOP,         // 0x1028
        ERET,        // 0x102c
        NOP,         // 0x1030
        0xd400_0001, // 0x1034 svc #0
        NOP,         // 0x1038
    ])
}

/// Async, trace info, trace on, and address + context: 0x1000 in the
/// context given by `info` (EL, SF, NS, NSE bits; no VMID or CID).
fn preamble_ctxt(info: u8) -> Vec<u8> {
    with_sync(&[
        0x01, 0x00, 0x04, 0x85, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, info,
    ])
}

/// The preamble at AArch64 EL1 Non-secure.
fn preamble() -> Vec<u8> {
    preamble_ctxt(0x31)
}

fn run(cfg: EtmV4Config, rest: &[u8], options: DecoderOptions) -> DecodeRun {
    let mut t = preamble();
    t.extend_from_slice(rest);
    let r = decode(cfg.clone(), &[(0x1000, program())], &t, options, 0);
    // Every run is also made with the element sink waiting on each
    // element: the elements and errors must be the same.
    let w = decode(cfg, &[(0x1000, program())], &t, options, 10_000);
    assert_eq!(w.elems, r.elems, "listing differs with waits");
    assert_eq!(w.errors, r.errors, "errors differ with waits");
    r
}

const TRACE_ON: &str = "Idx:14; ID:2; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])";
const CTXT_EL1N: &str = "Idx:15; ID:2; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )";

#[test]
fn decode_atoms_with_pointer_authentication_wfet_and_eret() {
    // Atom format 3, N N E (oldest first): b and bl not taken (no image
    // checks asked for), the authenticated return taken.
    let r = run(ete_cfg(), &[0xfc], DecoderOptions::default());
    assert_eq!(
        r.elems,
        [
            "Idx:0; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            TRACE_ON,
            CTXT_EL1N,
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) N BR  )",
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x100c:[0x1018] num_i(3) last_sz(4) (ISA=A64) N BR  b+link )",
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1018:[0x1024] num_i(3) last_sz(4) (ISA=A64) E iBR A64:ret )",
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert_eq!(r.errors, "");

    // Taken branches; the authenticated return goes to the address that
    // follows; WFET is a waypoint (TRCIDR2.WFXMODE); an E atom on ERET is
    // followed by an exception return element on ETE.
    let r = run(
        ete_cfg(),
        &[
            0xdb, // E E: b, bl
            0xf7, // E: retaa
            0x95, 0x09, // address 0x1024
            0xdb, // E E: wfet, eret
        ],
        DecoderOptions::default(),
    );
    assert_eq!(
        r.elems[3..],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A64) E BR  b+link )",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1020:[0x1024] num_i(1) last_sz(4) (ISA=A64) E iBR A64:ret )",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1024:[0x1028] num_i(1) last_sz(4) (ISA=A64) E WFI.WFE)",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1028:[0x1030] num_i(2) last_sz(4) (ISA=A64) E iBR A64:eret )",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_EXCEPTION_RET()",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_source_addresses() {
    let rest = [
        0xb4, 0x02, // source 0x1008 (b)
        0xb4, 0x05, // source 0x1014 (bl)
        0xb4, 0x08, // source 0x1020 (retaa)
        0x95, 0x06, // target 0x1018
        0xb4, 0x0b, // source 0x102c (eret), through retaa and wfet not taken
    ];
    let r = run(ete_cfg(), &rest, DecoderOptions::default());
    assert_eq!(
        r.elems[3..],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:27; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A64) E BR  b+link )",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1020:[0x1024] num_i(1) last_sz(4) (ISA=A64) E iBR A64:ret )",
            // No exception return element for a source address.
            "Idx:33; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1018:[0x1030] num_i(6) last_sz(4) (ISA=A64) E iBR A64:eret )",
            "Idx:33; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    // With -src_addr_n, the waypoints passed on the way are N ranges.
    let opts = DecoderOptions {
        src_addr_n: true,
        ..Default::default()
    };
    let r = run(ete_cfg(), &rest, opts);
    assert_eq!(
        r.elems[6..],
        [
            "Idx:33; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1018:[0x1024] num_i(3) last_sz(4) (ISA=A64) N iBR A64:ret )",
            "Idx:33; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1024:[0x1028] num_i(1) last_sz(4) (ISA=A64) N WFI.WFE)",
            "Idx:33; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1028:[0x1030] num_i(2) last_sz(4) (ISA=A64) E iBR A64:eret )",
            "Idx:33; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    // A source address behind the current address starts its range at
    // the source; one outside the image is not accessible.
    let r = run(
        ete_cfg(),
        &[0xb4, 0x05, 0xb4, 0x02, 0xb8, 0x00, 0x40, 0, 0, 0, 0, 0, 0],
        DecoderOptions::default(),
    );
    assert_eq!(
        r.elems[3..],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1018] num_i(6) last_sz(4) (ISA=A64) E BR  b+link )",
            "Idx:27; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1008:[0x100c] num_i(1) last_sz(4) (ISA=A64) E BR  )",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x8000; Memspace [0x2:EL1N] )",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_timestamp_markers() {
    // ETE 1.3 with TRCIDR0.TSMARK: timestamps before the first marker are
    // not reported.
    let rest = [0x02, 0x10, 0x88, 0x02, 0x20, 0xf7];
    let r = run(ete_cfg(), &rest, DecoderOptions::default());
    assert_eq!(
        r.elems[3..],
        [
            "Idx:27; ID:2; OCSD_GEN_TRC_ELEM_SYNC_MARKER( [Timestamp marker(0x00000000)])",
            "Idx:28; ID:2; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000020]; )",
            "Idx:30; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:30; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    // ETE 1.0 has no markers: every timestamp is reported.
    let r = run(ete10_cfg(), &[0x02, 0x10, 0x02, 0x20, 0xf7], DecoderOptions::default());
    assert_eq!(
        r.elems[3..5],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000010]; )",
            "Idx:27; ID:2; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000020]; )",
        ]
    );
}

#[test]
fn decode_transactions() {
    // Trace info in a transaction, start (a P0 element here), commit, and
    // a failed transaction; commit and fail are reported at the end of the
    // trace when nothing follows them.
    let mut t = with_sync(&[
        0x01, 0x01, 0x40, 0x04, 0x85, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x31,
    ]);
    t.extend_from_slice(&[0xf7, 0x0b, 0x0a, 0xf7, 0x06, 0x30, 0x00, 0x95, 0x04]);
    let r = decode(ete_cfg(), &[(0x1000, program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        r.elems,
        [
            "Idx:0; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            "Idx:12; ID:2; OCSD_GEN_TRC_ELEM_MEMTRANS(Init)",
            "Idx:15; ID:2; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:16; ID:2; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:27; ID:2; OCSD_GEN_TRC_ELEM_MEMTRANS(Commit)",
            "Idx:28; ID:2; OCSD_GEN_TRC_ELEM_MEMTRANS(Start)",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A64) E BR  b+link )",
            "Idx:30; ID:2; OCSD_GEN_TRC_ELEM_MEMTRANS(Fail)",
            "Idx:33; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    // With TRCIDR0.COMMTRANS set, transaction start is not a P0 element:
    // it waits for the next one.
    let cfg = EtmV4Config {
        idr0: ete_cfg().idr0 | 0x4000_0000,
        ..ete_cfg()
    };
    let r = run(cfg, &[0x0a, 0xf7], DecoderOptions::default());
    assert_eq!(
        r.elems[3..5],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_MEMTRANS(Start)",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
        ]
    );
}

#[test]
fn decode_instrumentation() {
    let r = run(
        ete_cfg(),
        &[0x09, 0x01, 0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0, 0xf7],
        DecoderOptions::default(),
    );
    assert_eq!(
        r.elems[3..5],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTRUMENTATION(EL1; 0x00000000deadbeef)",
            "Idx:35; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
        ]
    );
    // Pending at the end of the trace after committed trace: reported.
    let r = run(
        ete_cfg(),
        &[0xf7, 0x09, 0x00, 1, 0, 0, 0, 0, 0, 0, 0],
        DecoderOptions::default(),
    );
    assert_eq!(
        r.elems[3..],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_INSTRUMENTATION(EL0; 0x0000000000000001)",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    // Behind an uncommitted trace on: dropped with it at the end.
    let r = run(
        ete_cfg(),
        &[0x09, 0x00, 1, 0, 0, 0, 0, 0, 0, 0],
        DecoderOptions::default(),
    );
    assert_eq!(
        r.elems[1..],
        ["Idx:25; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])"]
    );
}

#[test]
fn decode_realm_and_root_contexts() {
    let mut t = preamble_ctxt(0x39); // EL1 Realm
    t.extend_from_slice(&[0xf7, 0x9d, 0x00, 0x40, 0, 0, 0, 0, 0, 0, 0xf7]); // E, address 0x8000, E
    let r = decode(ete_cfg(), &[(0x1000, program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        r.elems[2..],
        [
            "Idx:15; ID:2; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1Realm; 64-bit; )",
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:35; ID:2; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x8000; Memspace [0x20:EL1R] )",
            "Idx:35; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    let mut t = preamble_ctxt(0x1b); // EL3 Root
    t.extend_from_slice(&[0x9d, 0x00, 0x40, 0, 0, 0, 0, 0, 0, 0xf7]);
    let r = decode(ete_cfg(), &[(0x1000, program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        r.elems[2..],
        [
            "Idx:15; ID:2; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL3Root; 64-bit; )",
            "Idx:34; ID:2; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x8000; Memspace [0x80:Root] )",
            "Idx:34; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_exception_and_early_event() {
    // An event before the first trace info is kept on ETE.
    let mut t = ASYNC.to_vec();
    t.extend_from_slice(&[
        0x71, 0x01, 0x00, 0x04, 0x85, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x31,
    ]);
    t.extend_from_slice(&[
        0x95, 0x0c, // address 0x1030
        0x06, 0x05, // exception: call, address follows
        0x95, 0x0e, // preferred return address 0x1038 (after the svc)
        0x9d, 0x00, 0x40, 0, 0, 0, 0, 0, 0, // vector 0x8000 (unmapped)
        0xf7,
    ]);
    let r = decode(ete_cfg(), &[(0x1000, program())], &t, DecoderOptions::default(), 0);
    assert_eq!(
        r.elems,
        [
            "Idx:0; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            "Idx:12; ID:2; OCSD_GEN_TRC_ELEM_EVENT( Numbered:1; )",
            "Idx:15; ID:2; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:16; ID:2; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )",
            "Idx:28; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1030:[0x1038] num_i(2) last_sz(4) (ISA=A64) E --- )",
            "Idx:28; ID:2; OCSD_GEN_TRC_ELEM_EXCEPTION(pref ret addr:0x1038; excep num (0x02) )",
            "Idx:41; ID:2; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x8000; Memspace [0x2:EL1N] )",
            "Idx:41; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    // An ETMv4 decoder waits for the trace info before anything.
    let etm = EtmV4Config {
        idr1: 0x4100_f440,
        devarch: None,
        ..ete_cfg()
    };
    let r = decode(etm, &[(0x1000, program())], &t, DecoderOptions::default(), 0);
    assert!(!r.elems.iter().any(|e| e.contains("EVENT")), "{:?}", r.elems);
}

#[test]
fn decode_pe_reset_and_exception_return_header_are_bad_packets() {
    // OpenCSD's decoder has no case for a PE reset: it reports an unknown
    // packet and resynchronises; so for the reserved ERET header.
    let r = run(ete_cfg(), &[0xf7, 0x06, 0x00, 0x00, 0xf7], DecoderOptions::default());
    assert_eq!(
        r.elems[3..],
        [
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])",
            "Idx:29; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert_eq!(
        r.errors,
        "DCD_ETMV4_0002 : 0x0019 (OCSD_ERR_BAD_DECODE_PKT) [Reserved or unknown packet in decoder.]; TrcIdx=26; CS ID=02; Unknown packet type."
    );
    let r = run(ete_cfg(), &[0x07, 0xf7], DecoderOptions::default());
    assert_eq!(
        r.elems[1..],
        [
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])"
        ]
    );
    assert!(
        r.errors.ends_with("TrcIdx=25; CS ID=02; Unknown packet type."),
        "{}",
        r.errors
    );
    // After the next sync, decode resumes.
    let mut rest = vec![0x07];
    rest.extend_from_slice(&preamble()[..]);
    rest.push(0xf7);
    let r = run(ete_cfg(), &rest, DecoderOptions::default());
    assert_eq!(
        r.elems[1..],
        [
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])",
            "Idx:40; ID:2; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:41; ID:2; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )",
            "Idx:51; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:51; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn decode_speculation_with_source_addresses_and_transactions() {
    // Speculation depth 4: source addresses and transaction starts are P0
    // elements, resolved by commit and cancel packets.
    let cfg = EtmV4Config { idr8: 4, ..ete_cfg() };
    let r = run(
        cfg,
        &[
            0xb4, 0x02, // source 0x1008 (speculative)
            0x0a, // transaction start (speculative)
            0xb4, 0x05, // source 0x1014 (speculative)
            0x2e, 0x02, // cancel 2: the last source and the transaction start
            0x2d, 0x01, // commit 1: the first source
            0xb4, 0x05, // source 0x1014 again
            0x2d, 0x01, // commit it
        ],
        DecoderOptions::default(),
    );
    assert_eq!(
        r.elems[1..],
        [
            TRACE_ON,
            CTXT_EL1N,
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:34; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A64) E BR  b+link )",
            "Idx:36; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
    assert_eq!(r.errors, "");
    // Committing more than there is: an error, then resync.
    let cfg = EtmV4Config { idr8: 4, ..ete_cfg() };
    let r = run(cfg, &[0xb4, 0x02, 0x2d, 0x03, 0xf7], DecoderOptions::default());
    assert!(
        r.errors.contains("(OCSD_ERR_COMMIT_PKT_OVERRUN)") && r.errors.ends_with("Not enough elements to commit"),
        "{}",
        r.errors
    );
    assert!(
        r.elems.iter().any(|e| e.contains("NO_SYNC( [bad-packet])")),
        "{:?}",
        r.elems
    );
}

#[test]
fn discard_keeps_markers_but_drops_instrumentation() {
    let cfg = EtmV4Config { idr8: 4, ..ete_cfg() };
    let r = run(
        cfg,
        &[0xf7, 0x88, 0x09, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x03, 0xf7],
        DecoderOptions::default(),
    );
    // Nothing was committed: the discard flushes the marker only (trace
    // on and context were never output).
    assert_eq!(
        r.elems[1..],
        [
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_SYNC_MARKER( [Timestamp marker(0x00000000)])",
            "Idx:37; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [discard])",
            "Idx:39; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

/// Decodes `sessions` one after the other through one component, with a
/// reset between them (the lister's -multi_session).
fn decode_sessions(cfg: EtmV4Config, sessions: &[&[u8]]) -> Vec<String> {
    let mut mapper = MemAccMapper::default();
    mapper
        .add_accessor(Box::new(BufferAccessor::new(0x1000, program(), MemSpace::ANY).unwrap()))
        .unwrap();
    let err_out = shared(MsgLogger::capture());
    let elems = Arc::new(Lock::new(Vec::new()));
    let router = shared(ElemRouter::default());
    struct Log(Arc<Lock<Vec<String>>>);
    impl crate::interfaces::TrcGenElemIn for Log {
        fn trace_elem_in(
            &mut self,
            index: u64,
            trace_id: u8,
            elem: &crate::element::TraceElement,
        ) -> crate::datapath::DatapathResp {
            let mut s = format!("Idx:{index}; ID:{trace_id:x}; ");
            elem.write_to(&mut s);
            self.0.borrow_mut().push(s);
            crate::datapath::DatapathResp::Cont
        }
    }
    router.borrow_mut().set(Some(Box::new(Log(elems.clone()))));
    let ctx = DecodeContext {
        mode: DecodeMode::FullDecode,
        instance_id: Some(0),
        mem: Some(shared(mapper)),
        instr: shared(ArmInstrDecoder::new()),
        elem_out: router,
        err_log: shared(ErrorLogger::new(Severity::Info, Some(err_out))),
        options: DecoderOptions::default(),
    };
    let mut comp = create_component("ETE", cfg, &ctx).unwrap();
    for (n, s) in sessions.iter().enumerate() {
        if n > 0 {
            comp.trace_data_in(DatapathOp::Reset, 0, &[]);
        }
        let (r, used) = comp.trace_data_in(DatapathOp::Data, 0, s);
        assert!(r.is_cont() && used == s.len());
        comp.trace_data_in(DatapathOp::Eot, 0, &[]);
    }
    let e = elems.borrow();
    e.clone()
}

#[test]
fn multi_session_reset_between_buffers() {
    let mut first = preamble();
    first.extend_from_slice(&[0xf7, 0xb4, 0x05]); // E, then source 0x1014
    let mut second = preamble_ctxt(0x39);
    second.push(0xf7);
    // The first session ends inside nothing; the second starts over from
    // sync, in its own context. Elements carry the source's trace ID
    // (TRCTRACEIDR), not the tree slot.
    let e = decode_sessions(ete_cfg(), &[&first, &second]);
    assert_eq!(
        e,
        [
            "Idx:0; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            TRACE_ON,
            CTXT_EL1N,
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A64) E BR  b+link )",
            "Idx:26; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
            "Idx:0; ID:2; OCSD_GEN_TRC_ELEM_NO_SYNC( [reset-decoder])",
            TRACE_ON,
            "Idx:15; ID:2; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1Realm; 64-bit; )",
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x100c] num_i(3) last_sz(4) (ISA=A64) E BR  )",
            "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
        ]
    );
}

#[test]
fn random_input_never_panics() {
    // Pseudo-random bytes, with sync sequences spliced in, through ETE
    // processors and decoders of several configurations and options.
    let mut seed = 0x0bad_5eed_1234_5678u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let cfgs = [
        ete_cfg(),
        ete10_cfg(),
        EtmV4Config {
            idr8: 8,
            configr: 0x10c1 | (1 << 4),
            ..ete_cfg()
        },
        EtmV4Config {
            idr0: ete_cfg().idr0 | 0x4000_0000,
            idr8: 78,
            ..ete_cfg()
        },
    ];
    let mut image = program();
    for _ in 0..256 {
        image.extend_from_slice(&(next() as u32).to_le_bytes());
    }
    for (n, cfg) in cfgs.iter().enumerate() {
        for round in 0..3u32 {
            let mut data = Vec::new();
            for i in 0..3000 {
                if i % 500 == 0 {
                    data.extend_from_slice(&preamble());
                }
                data.push(next() as u8);
            }
            let opts = DecoderOptions {
                src_addr_n: round == 1,
                strict_br_cond: round == 2,
                ..Default::default()
            };
            let r = decode(
                cfg.clone(),
                &[(0x1000, image.clone())],
                &data,
                opts,
                round * 5 + n as u32,
            );
            assert!(
                r.elems.last().is_some_and(|e| e.contains("EO_TRACE")),
                "cfg {n} round {round}"
            );
        }
    }
}

#[test]
fn source_address_at_the_top_of_memory() {
    // Code in the last page of the address space; the source address is
    // its last instruction, so the range ends at 2^64 (its end address
    // wraps to 0). Issue 15, defect 1: the length was taken as `en - st`.
    const TOP: u64 = 0xFFFF_FFFF_FFFF_F000;
    let mut code = vec![NOP; 0x3ff];
    code.push(0x17FF_FC01); // 0xfffffffffffffffc: b 0xfffffffffffff000
    let mut t = with_sync(&[
        0x01, 0x00, 0x04, 0x85, 0x00, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x31,
    ]);
    t.extend_from_slice(&[0xb8, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]); // source 0xfffffffffffffffc
    t.push(0xf7); // E: the branch again, from its target
    let expect = [
        "Idx:25; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xfffffffffffff000:[0x0] num_i(1024) last_sz(4) (ISA=A64) E BR  )",
        "Idx:34; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xfffffffffffff000:[0x0] num_i(1024) last_sz(4) (ISA=A64) E BR  )",
        "Idx:34; ID:2; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
    ];
    for src_addr_n in [false, true] {
        let opts = DecoderOptions {
            src_addr_n,
            ..Default::default()
        };
        let r = decode(ete_cfg(), &[(TOP, a64(&code))], &t, opts, 0);
        assert_eq!(r.elems[3..], expect, "src_addr_n {src_addr_n}");
        assert_eq!(r.errors, "");
    }
}
