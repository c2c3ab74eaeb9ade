//! ETMv3 packet processor and decoder tests on hand-built trace.

use super::{Etmv3Config, Etmv3Decoder, Etmv3Processor};
use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
use crate::datapath::DatapathOp;
use crate::decoder::{DecodeMode, Pipeline};
use crate::interfaces::TrcDataIn;
use crate::test_rig::{Rig, lines};

const ETMCR_DATA_VALUE: u32 = 0x4;
const ETMCR_DATA_ADDR: u32 = 0x8;
const ETMCR_CYCLE_ACC: u32 = 1 << 12;
const ETMCR_CTXTID_1: u32 = 1 << 14;
/// ETMv3.5, standard branch encoding.
const IDR_ETM35: u32 = 0x410C_F250;
/// ETMv3.5 with the alternative branch encoding.
const IDR_ETM35_ALT: u32 = 0x411C_F250;

fn config(ctrl: u32, idr: u32) -> Etmv3Config {
    Etmv3Config {
        reg_ctrl: ctrl,
        reg_idr: idr,
        reg_ccer: 0,
        reg_trc_id: 0,
        arch: ArchProfile::new(ArchVersion::V7, CoreProfile::CortexA),
    }
}

fn packets(rig: &Rig, cfg: Etmv3Config) -> Pipeline<Etmv3Processor> {
    let mut p = Pipeline::new("ETMV3", Etmv3Processor::new(cfg, &rig.ctx), None);
    rig.monitor(&mut p, 0);
    p
}

fn decoder(rig: &Rig, cfg: Etmv3Config) -> Pipeline<Etmv3Processor> {
    let dec = Etmv3Decoder::new(cfg, &rig.ctx);
    let mut p = Pipeline::new("ETMV3", Etmv3Processor::new(cfg, &rig.ctx), Some(Box::new(dec)));
    rig.monitor(&mut p, 0);
    p
}

/// Each line of a listing without its packet index and bytes (an error
/// logged before a packet stays in front of it).
fn descs(listing: &str) -> Vec<String> {
    listing
        .lines()
        .map(|l| match (l.find("Idx:"), l.split_once('\t')) {
            (Some(at), Some((_, desc))) => format!("{}{desc}", &l[..at]),
            _ => l.to_string(),
        })
        .collect()
}

const ALL_PACKETS: &[u8] = &[
    0x11, 0x22, // not synchronised
    0x00, 0x00, 0x00, 0x00, 0x00, 0x80, // A-sync
    0x08, 0x42, 0x28, 0x01, 0x10, 0x00, 0x80, // I-sync: context ID, Thumb
    0x05, // branch, 1 byte
    0x81, 0x05, // 2 bytes
    0x81, 0x80, 0x80, 0x80, 0x08, // 5 bytes, to ARM
    0x81, 0x80, 0x80, 0x80, 0x48, 0x1d, // exception
    0x81, 0x80, 0x80, 0x80, 0x48, 0xa3, 0x20, // exception, cancel, Hyp
    0x81, 0x80, 0x80, 0x80, 0x10, // to Thumb
    0x81, 0x80, 0x80, 0x80, 0x20, // to Jazelle
    0x81, 0x80, 0x80, 0x80, 0xc8, // original byte-5 exception encoding
    0x84, 0xc4, 0x80, 0xbc, 0x82, 0x8e, // P-headers, formats 1 and 2
    0x04, 0x81, 0x01, // cycle count
    0x0c, // trigger
    0x6e, 0x55, // context ID
    0x3c, 0x07, // VMID
    0x42, 0x81, 0x01, // timestamp
    0x7e, 0x76, 0x66, // exception entry, exit, ignore
    0x14, // reserved
    0x02, // data while not tracing data
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, // A-sync with an extra zero
    0x00, 0x00, 0x05, // A-sync cut short; 0x05 is a branch
    0x08, 0x28, // incomplete I-sync
];

const ALL_PACKETS_LISTING: &[&str] = &[
    "Idx:0; ID:0; [0x11 0x22 ];\tNOTSYNC : Trace Stream not synchronised",
    "Idx:2; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.",
    "Idx:8; ID:0; [0x08 0x42 0x28 0x01 0x10 0x00 0x80 ];\tI_SYNC : Instruction Packet synchronisation.; (Trace Enable); Addr=0x80001000; NS;  CtxtID=42; ISA=Thumb2; ",
    "Idx:15; ID:0; [0x05 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x80001004 ~[0x4]; ",
    "Idx:16; ID:0; [0x81 0x05 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x80000280 ~[0x280]; ",
    "Idx:18; ID:0; [0x81 0x80 0x80 0x80 0x08 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; ISA=ARM(32); ",
    "Idx:23; ID:0; [0x81 0x80 0x80 0x80 0x48 0x1d ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; NS; Exception=IRQ; ",
    "Idx:29; ID:0; [0x81 0x80 0x80 0x80 0x48 0xa3 0x20 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; NS; Hyp; Exception=Debug Halt; ; Cancel prev instr",
    "Idx:36; ID:0; [0x81 0x80 0x80 0x80 0x10 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; ISA=Thumb2; ",
    "Idx:41; ID:0; [0x81 0x80 0x80 0x80 0x20 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; ISA=Jazelle; ",
    "Idx:46; ID:0; [0x81 0x80 0x80 0x80 0xc8 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; ISA=ARM(32); Exception=Debug Halt; ; Cancel prev instr",
    "Idx:51; ID:0; [0x84 ];\tP_HDR : Atom P-header.; E",
    "Idx:52; ID:0; [0xc4 ];\tP_HDR : Atom P-header.; EN",
    "Idx:53; ID:0; [0x80 ];\tP_HDR : Atom P-header.; ",
    "Idx:54; ID:0; [0xbc ];\tP_HDR : Atom P-header.; EEEEEEEEEEEEEEE",
    "Idx:55; ID:0; [0x82 ];\tP_HDR : Atom P-header.; EE",
    "Idx:56; ID:0; [0x8e ];\tP_HDR : Atom P-header.; NN",
    "Idx:57; ID:0; [0x04 0x81 0x01 ];\tCYCLE_COUNT : Cycle Count.; Cycles=129",
    "Idx:60; ID:0; [0x0c ];\tTRIGGER : Trace Trigger Event.",
    "Idx:61; ID:0; [0x6e 0x55 ];\tCONTEXT_ID : Context ID change.; CtxtID=0x55",
    "Idx:63; ID:0; [0x3c 0x07 ];\tVMID : VMID change.; VMID=0x7",
    "Idx:65; ID:0; [0x42 0x81 0x01 ];\tTIMESTAMP : Timestamp Value.; TS=0x81 (129) ",
    "Idx:68; ID:0; [0x7e ];\tEXCEPTION_ENTRY : Exception entry data marker.",
    "Idx:69; ID:0; [0x76 ];\tEXCEPTION_EXIT : Exception return.",
    "Idx:70; ID:0; [0x66 ];\tIGNORE : Packet ignored.",
    "PKTP_ETMV3_0000 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=71; CS ID=00; Packet header reserved encoding\
     Idx:71; ID:0; [0x14 ];\tI_RESERVED : Reserved Packet Header",
    "PKTP_ETMV3_0000 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=72; CS ID=00; Invalid data trace header (normal data) - not tracing data.\
     Idx:72; ID:0; [0x02 ];\tBAD_TRACEMODE : Invalid packet type for this trace mode.[I_RESERVED]",
    "PKTP_ETMV3_0000 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx=73; CS ID=00; A-Sync ?: Extra 0x00 in sequence\
     Idx:73; ID:0; [0x00 ];\tBAD_SEQUENCE : Invalid sequence for packet type.[A_SYNC]",
    "Idx:74; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.",
    "PKTP_ETMV3_0000 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx=80; CS ID=00; A-Sync ? : Unexpected byte in sequence\
     Idx:80; ID:0; [0x00 0x00 ];\tBAD_SEQUENCE : Invalid sequence for packet type.[A_SYNC]",
    "Idx:82; ID:0; [0x05 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000008 ~[0x8]; ",
    "Idx:83; ID:0; [0x08 0x28 ];\tI_SYNC : Instruction Packet synchronisation.; (Trace Enable); Addr=0x00000008; NS; Hyp; ISA=ARM(32); ",
    "ID:0\tEND OF TRACE DATA",
];

#[test]
fn every_packet_type() {
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(ETMCR_CTXTID_1, IDR_ETM35));
    assert_eq!(rig.listing(&mut p, ALL_PACKETS), lines(ALL_PACKETS_LISTING));
}

#[test]
fn packets_split_across_blocks() {
    for block in [1, 2, 5] {
        let rig = Rig::new(DecodeMode::PacketsOnly);
        let mut p = packets(&rig, config(ETMCR_CTXTID_1, IDR_ETM35));
        rig.feed(&mut p, 2, &ALL_PACKETS[2..], block);
        rig.eot(&mut p);
        assert_eq!(rig.take(), lines(&ALL_PACKETS_LISTING[1..]), "block size {block}");
    }
}

#[test]
fn cycle_accurate_p_headers() {
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(ETMCR_CYCLE_ACC, IDR_ETM35));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x84, 0xc8, // format 1
        0x82, 0x8e, // format 2
        0x92, 0x96, // format 4
        0xa0, 0xfc, // format 3
        0x80, 0xa2, // invalid
        0x70, 0x8f, 0x3c, 0x21, 0x99, 0xf6, 0x04, 0xc0, // I-sync with cycle count
        0x04, 0x05, // cycle count
    ];
    rig.feed(&mut p, 0, trace, trace.len());
    assert_eq!(
        descs(&rig.take()),
        [
            "A_SYNC : Alignment Synchronisation.",
            "P_HDR : Atom P-header.; WE; Cycles=1",
            "P_HDR : Atom P-header.; WEWEWN; Cycles=3",
            "P_HDR : Atom P-header.; WEE; Cycles=1",
            "P_HDR : Atom P-header.; WNN; Cycles=1",
            "P_HDR : Atom P-header.; E",
            "P_HDR : Atom P-header.; N",
            "P_HDR : Atom P-header.; W; Cycles=1",
            "P_HDR : Atom P-header.; WWWWWWWWE; Cycles=8",
            "PKTP_ETMV3_0000 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=14; CS ID=00; Invalid P-Header.P_HDR : Atom P-header.; ",
            "PKTP_ETMV3_0000 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=15; CS ID=00; Invalid P-Header.P_HDR : Atom P-header.; ",
            "I_SYNC_CYCLE : Instruction Packet synchronisation with cycle count.; (Trace Enable); Addr=0xc004f698; S;  ISA=Thumb2; Cycles=7695; ",
            "CYCLE_COUNT : Cycle Count.; Cycles=5",
        ]
    );
}

#[test]
fn alternative_branch_encoding_and_load_store_isync() {
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(0, IDR_ETM35_ALT));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x08, 0x80, 0x00, 0x10, 0x00, 0x80, 0x05, // I-sync with a load/store-in-progress address
        0x81, 0x45, 0x1d, // 2-byte branch with an exception byte
        0x81, 0x05, // 2-byte branch: bit 6 clear, no exception
    ];
    rig.feed(&mut p, 0, trace, trace.len());
    assert_eq!(
        descs(&rig.take()),
        [
            "A_SYNC : Alignment Synchronisation.",
            "I_SYNC : Instruction Packet synchronisation.; (Periodic); Addr=0x80001008; S;  ISA=ARM(32); ",
            "BRANCH_ADDRESS : Branch address.; Addr=0x80000500 ~[0x500]; NS; Exception=IRQ; ",
            "BRANCH_ADDRESS : Branch address.; Addr=0x80000500 ~[0x500]; ",
        ]
    );
}

#[test]
fn data_trace_packets_are_listed() {
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(ETMCR_DATA_VALUE | ETMCR_DATA_ADDR, IDR_ETM35));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x06, 0x55, // normal data, 1 byte
        0x26, 0x12, 0x34, // normal data with an address
        0x24, 0x77, // out of order data
        0x60, // out of order data, no value
        0x50, // store failed
        0x54, // out of order placeholder
        0x74, 0x05, // placeholder with an address
        0x62, // data suppressed
        0x6a, 0x03, // value not traced (an address always follows)
        0x7a, 0x04, // value not traced
    ];
    rig.feed(&mut p, 0, trace, trace.len());
    assert_eq!(
        descs(&rig.take()),
        [
            "A_SYNC : Alignment Synchronisation.",
            "NORM_DATA : Data trace packet.; Val=0x55",
            "NORM_DATA : Data trace packet.; Addr=0x????????0 (-1:0); Val=0x34",
            "OOO_DATA : Out of Order data value packet.; Val=0x77; OO_Tag=0x1",
            "OOO_DATA : Out of Order data value packet.; Val=0x0; OO_Tag=0x3",
            "STORE_FAIL : Data Store Failed.",
            "OOO_ADDR_PLC : Out of Order data address placeholder.; OO_Tag=0x1",
            "OOO_ADDR_PLC : Out of Order data address placeholder.; Addr=0x????????0 (-1:0); OO_Tag=0x1",
            "DATA_SUPPRESSED : Data trace suppressed.",
            "VAL_NOT_TRACED : Data trace value not traced.; Addr=0x????????0 (-1:0)",
            "VAL_NOT_TRACED : Data trace value not traced.; Addr=0x????????0 (-1:0)",
        ]
    );
}

#[test]
fn unsynchronised_data_and_long_zero_runs() {
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(0, IDR_ETM35));
    let mut trace: Vec<u8> = (1..=18).collect();
    trace.extend([0u8; 14]);
    trace.push(0x80);
    rig.feed(&mut p, 0, &trace, trace.len());
    assert_eq!(
        rig.take(),
        lines(&[
            "Idx:0; ID:0; [0x01 0x02 0x03 0x04 0x05 0x06 0x07 0x08 0x09 0x0a 0x0b 0x0c 0x0d 0x0e 0x0f 0x10 ];\tNOTSYNC : Trace Stream not synchronised",
            "Idx:16; ID:0; [0x11 0x12 ];\tNOTSYNC : Trace Stream not synchronised",
            "Idx:18; ID:0; [0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 ];\tNOTSYNC : Trace Stream not synchronised",
            "Idx:26; ID:0; [0x00 ];\tNOTSYNC : Trace Stream not synchronised",
            "Idx:27; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.",
        ])
    );
}

const ARM_TRACE: &[u8] = &[
    0, 0, 0, 0, 0, 0x80, // A-sync
    0x08, 0x42, 0x20, 0x00, 0x10, 0x00, 0x00, // I-sync 0x1000, context ID
    0x88, // EE: mov, bl
    0xc4, // EN: add, bx lr not taken
    0x84, // 0x1018 is not mapped
    0x84, // no address
    0x84, // no address, already said
    0x85, 0x10, // branch to 0x1008
    0x84, // E: b 0x1008 (held back)
    0x76, // exception return (held back with the range)
    0x81, 0x80, 0x80, 0x80, 0x48, 0x3c, // IRQ cancelling the last instruction
    0x42, 0x05, // timestamp
    0x6e, 0x42, 0x0c, 0x04, 0x03, 0x3c, 0x09, 0x7e, // context ID, trigger, cycle count, VMID, exception entry
    0x08, 0x42, 0x00, 0x00, 0x10, 0x00, 0x00, // periodic I-sync
];

const ARM_LISTING: &[&str] = &[
    "Idx:0; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.",
    "Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
    "Idx:6; ID:0; [0x08 0x42 0x20 0x00 0x10 0x00 0x00 ];\tI_SYNC : Instruction Packet synchronisation.; (Trace Enable); Addr=0x00001000; S;  CtxtID=42; ISA=ARM(32); ",
    "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
    "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; CTXTID=0x42; )",
    "Idx:13; ID:0; [0x88 ];\tP_HDR : Atom P-header.; EE",
    "Idx:13; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1004] num_i(1) last_sz(4) (ISA=A32) E --- )",
    "Idx:13; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1004:[0x1008] num_i(1) last_sz(4) (ISA=A32) E BR  b+link )",
    "Idx:14; ID:0; [0xc4 ];\tP_HDR : Atom P-header.; EN",
    "Idx:14; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1014] num_i(1) last_sz(4) (ISA=A32) E --- )",
    "Idx:14; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1014:[0x1018] num_i(1) last_sz(4) (ISA=A32) N iBR V7:impl ret)",
    "Idx:15; ID:0; [0x84 ];\tP_HDR : Atom P-header.; E",
    "Idx:15; ID:0; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x1018; Memspace [0x19:Any S] )",
    "Idx:16; ID:0; [0x84 ];\tP_HDR : Atom P-header.; E",
    "Idx:16; ID:0; OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN()",
    "Idx:17; ID:0; [0x84 ];\tP_HDR : Atom P-header.; E",
    "Idx:18; ID:0; [0x85 0x10 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00001008 ~[0x1008]; ",
    "Idx:20; ID:0; [0x84 ];\tP_HDR : Atom P-header.; E",
    "Idx:21; ID:0; [0x76 ];\tEXCEPTION_EXIT : Exception return.",
    "Idx:22; ID:0; [0x81 0x80 0x80 0x80 0x48 0x3c ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; S; Exception=IRQ; ; Cancel prev instr",
    "Idx:28; ID:0; [0x42 0x05 ];\tTIMESTAMP : Timestamp Value.; TS=0x5 (5) ",
    "Idx:22; ID:0; OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x0e) )",
    "Idx:28; ID:0; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000005]; )",
    "Idx:30; ID:0; [0x6e 0x42 ];\tCONTEXT_ID : Context ID change.; CtxtID=0x42",
    "Idx:30; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; CTXTID=0x42; )",
    "Idx:32; ID:0; [0x0c ];\tTRIGGER : Trace Trigger Event.",
    "Idx:32; ID:0; OCSD_GEN_TRC_ELEM_EVENT( Trigger; )",
    "Idx:33; ID:0; [0x04 0x03 ];\tCYCLE_COUNT : Cycle Count.; Cycles=3",
    "Idx:33; ID:0; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=3]; )",
    "Idx:35; ID:0; [0x3c 0x09 ];\tVMID : VMID change.; VMID=0x9",
    "Idx:35; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; VMID=0x9; CTXTID=0x42; )",
    "Idx:37; ID:0; [0x7e ];\tEXCEPTION_ENTRY : Exception entry data marker.",
    // A reused element: starting it cleared the exception number the last
    // ADDR_NACC's memory space had left in its slot (OpenCSD's setType).
    "Idx:37; ID:0; OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x00) )",
    "Idx:38; ID:0; [0x08 0x42 0x00 0x00 0x10 0x00 0x00 ];\tI_SYNC : Instruction Packet synchronisation.; (Periodic); Addr=0x00001000; S;  CtxtID=42; ISA=ARM(32); ",
    "Idx:38; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; VMID=0x9; CTXTID=0x42; )",
    "Idx:38; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
    "ID:0\tEND OF TRACE DATA",
];

#[test]
fn decode_arm_exceptions_and_cancel() {
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map_arm_program();
    let mut p = decoder(&rig, config(ETMCR_CTXTID_1, IDR_ETM35));
    assert_eq!(rig.listing(&mut p, ARM_TRACE), lines(ARM_LISTING));
}

#[test]
fn decode_is_the_same_with_waits() {
    for waits in [1, 3, 8, 30] {
        let rig = Rig::new(DecodeMode::FullDecode);
        rig.map_arm_program();
        rig.elems.borrow_mut().set_test_waits(waits);
        let mut p = decoder(&rig, config(ETMCR_CTXTID_1, IDR_ETM35));
        rig.feed(&mut p, 0, ARM_TRACE, 4);
        rig.eot(&mut p);
        assert_eq!(rig.take(), lines(ARM_LISTING), "{waits} waits");
    }
}

#[test]
fn decode_thumb_cycle_accurate() {
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map(
        0x2000,
        &[
            0x01, 0x20, // 2000: movs r0, #1
            0x00, 0xf0, 0x01, 0xf8, // 2002: bl 0x2008
            0xfe, 0xe7, // 2006: b 0x2006
            0x01, 0x30, // 2008: adds r0, #1
            0x70, 0x47, // 200a: bx lr
            0x00, 0xbf, 0x00, 0xbf, 0x00, 0xbf, 0x00, 0xbf, // 200c: nops
        ],
    );
    let mut p = decoder(&rig, config(ETMCR_CYCLE_ACC, IDR_ETM35));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x42, 0x05, // timestamp before the I-sync
        0xa4, // cycles before the I-sync
        0x70, 0x05, 0x20, 0x01, 0x20, 0x00, 0x00, // I-sync 0x2000 Thumb, 5 cycles
        0x88, // WEWE: movs, bl
        0x92, // E (format 4): adds, held back
        0x8e, // WNN: bx lr, nop not executed
        0xa0, // W
        0xfc, // 8 W then E
    ];
    assert_eq!(
        rig.listing(&mut p, trace),
        lines(&[
            "Idx:0; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.",
            "Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            "Idx:6; ID:0; [0x42 0x05 ];\tTIMESTAMP : Timestamp Value.; TS=0x5 (5) ",
            "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000005]; )",
            "Idx:8; ID:0; [0xa4 ];\tP_HDR : Atom P-header.; WW; Cycles=2",
            "Idx:8; ID:0; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=2]; )",
            "Idx:9; ID:0; [0x70 0x05 0x20 0x01 0x20 0x00 0x00 ];\tI_SYNC_CYCLE : Instruction Packet synchronisation with cycle count.; (Trace Enable); Addr=0x00002000; S;  ISA=Thumb2; Cycles=5; ",
            "Idx:9; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:9; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) S; 32-bit;  [CC=5]; )",
            "Idx:16; ID:0; [0x88 ];\tP_HDR : Atom P-header.; WEWE; Cycles=2",
            "Idx:16; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2000:[0x2002] num_i(1) last_sz(2) (ISA=T32) E ---  [CC=1]; )",
            "Idx:16; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2002:[0x2006] num_i(1) last_sz(4) (ISA=T32) E BR  b+link  [CC=1]; )",
            "Idx:17; ID:0; [0x92 ];\tP_HDR : Atom P-header.; E",
            "Idx:18; ID:0; [0x8e ];\tP_HDR : Atom P-header.; WNN; Cycles=1",
            "Idx:17; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2008:[0x200a] num_i(1) last_sz(2) (ISA=T32) E ---  [CC=0]; )",
            "Idx:18; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x200a:[0x200c] num_i(1) last_sz(2) (ISA=T32) N iBR V7:impl ret [CC=1]; )",
            "Idx:18; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x200c:[0x200e] num_i(1) last_sz(2) (ISA=T32) N ---  [CC=0]; )",
            "Idx:19; ID:0; [0xa0 ];\tP_HDR : Atom P-header.; W; Cycles=1",
            "Idx:19; ID:0; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=1]; )",
            "Idx:20; ID:0; [0xfc ];\tP_HDR : Atom P-header.; WWWWWWWWE; Cycles=8",
            "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x200e:[0x2010] num_i(1) last_sz(2) (ISA=T32) E ---  [CC=8]; )",
            "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
            "ID:0\tEND OF TRACE DATA",
        ])
    );
}

#[test]
fn reserved_header_stops_the_decoder() {
    // OpenCSD's ETMv3 decoder answers a reserved header with a fatal
    // response after logging it, and resets to unsynchronised. The packet
    // processor's own error is not logged in full decode (OpenCSD attaches
    // the error logger to the decoder only).
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map_arm_program();
    let mut p = decoder(&rig, config(0, IDR_ETM35));
    let trace: &[u8] = &[0, 0, 0, 0, 0, 0x80, 0x08, 0x20, 0x00, 0x10, 0x00, 0x00, 0x14, 0x84];
    let (resp, used) = p.trace_data_in(DatapathOp::Data, 0, trace);
    assert!(resp.is_fatal());
    assert_eq!(used, 13, "stops after the reserved header");
    let out = rig.take();
    assert!(
        out.ends_with(
            "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; )\n\
             Idx:12; ID:0; [0x14 ];\tI_RESERVED : Reserved Packet Header\n\
             DCD_ETMV3_0000 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx=12; CS ID=00; \
             Reserved or unknown packet ID."
        ),
        "{out}"
    );
    // The decoder starts again from an A-sync.
    rig.feed(&mut p, 20, &trace[..12], 12);
    assert_eq!(
        descs(&rig.take()),
        [
            "A_SYNC : Alignment Synchronisation.",
            "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])",
            "I_SYNC : Instruction Packet synchronisation.; (Trace Enable); Addr=0x00001000; S;  ISA=ARM(32); ",
            "Idx:26; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:26; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; )",
        ]
    );
}

#[test]
fn data_configuration_is_reported() {
    let rig = Rig::new(DecodeMode::FullDecode);
    let _p = decoder(&rig, config(ETMCR_DATA_VALUE, IDR_ETM35));
    assert_eq!(
        rig.take(),
        "DCD_ETMV3_0000 : 0x0017 (OCSD_ERR_HW_CFG_UNSUPP) [Programmed trace configuration not supported by decoder.]; \
         ETMv3 trace decoder : data trace decode not yet supported"
    );
}

#[test]
fn reset_restarts_synchronisation() {
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map_arm_program();
    let mut p = decoder(&rig, config(ETMCR_CTXTID_1, IDR_ETM35));
    rig.feed(&mut p, 0, &ARM_TRACE[..14], 14);
    rig.take();
    p.trace_data_in(DatapathOp::Reset, 0, &[]);
    rig.feed(&mut p, 100, &[0x84], 1);
    rig.feed(&mut p, 101, &ARM_TRACE[..13], 13);
    assert_eq!(
        rig.take(),
        lines(&[
            "ID:0\tRESET operation on trace decode path",
            "Idx:100; ID:0; [0x84 ];\tNOTSYNC : Trace Stream not synchronised",
            "Idx:100; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [reset-decoder])",
            "Idx:101; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tA_SYNC : Alignment Synchronisation.",
            "Idx:107; ID:0; [0x08 0x42 0x20 0x00 0x10 0x00 0x00 ];\tI_SYNC : Instruction Packet synchronisation.; (Trace Enable); Addr=0x00001000; S;  CtxtID=42; ISA=ARM(32); ",
            "Idx:107; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:107; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; CTXTID=0x42; )",
        ])
    );
}

#[test]
fn random_bytes_never_panic() {
    use crate::test_rig::{feed_ignoring_errors, noise};
    let configs = [
        config(0, IDR_ETM35),
        config(ETMCR_CYCLE_ACC | ETMCR_CTXTID_1, IDR_ETM35_ALT),
        config(ETMCR_DATA_VALUE | ETMCR_DATA_ADDR | (3 << 14), IDR_ETM35),
        config(ETMCR_CYCLE_ACC | ETMCR_DATA_ADDR, IDR_ETM35_ALT),
    ];
    for (n, cfg) in configs.into_iter().enumerate() {
        let rig = Rig::new(DecodeMode::FullDecode);
        rig.map_arm_program();
        let mut p = decoder(&rig, cfg);
        let mut data = Vec::new();
        for chunk in 0..64u64 {
            data.extend_from_slice(&[0, 0, 0, 0, 0, 0x80, 0x08]);
            data.extend(std::iter::repeat_n(0, cfg.ctxt_id_bytes()));
            data.extend_from_slice(&[0x20, 0x00, 0x10, 0x00, 0x00]);
            data.extend_from_slice(&[0x84, 0x88, 0xc4, 0x84]);
            data.extend(noise(chunk * 11 + n as u64, 256));
        }
        feed_ignoring_errors(&mut p, &data);
        let out = rig.take();
        assert!(out.contains("EO_TRACE"));
        assert!(out.contains("INSTR_RANGE"), "config {n}: no code was followed");
    }
}

#[test]
fn exception_changes_security_state() {
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map_arm_program();
    let mut p = decoder(&rig, config(0, IDR_ETM35));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x08, 0x20, 0x00, 0x10, 0x00, 0x00, // I-sync 0x1000, secure
        0x81, 0x80, 0x80, 0x80, 0x48, 0x9d, 0x20, // IRQ to 0x0, non-secure, Hyp
        0x84, // 0x0 is not mapped
    ];
    rig.feed(&mut p, 0, trace, trace.len());
    let out = rig.take();
    let tail: Vec<&str> = out.lines().skip(5).collect();
    assert_eq!(
        tail,
        [
            "Idx:12; ID:0; [0x81 0x80 0x80 0x80 0x48 0x9d 0x20 ];\tBRANCH_ADDRESS : Branch address.; Addr=0x00000000 ~[0x0]; NS; Hyp; Exception=IRQ; ",
            // The context element's ISA is whatever its (fresh) ring slot held.
            "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=Unk) EL2N; 32-bit; )",
            "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_EXCEPTION(excep num (0x0e) )",
            "Idx:19; ID:0; [0x84 ];\tP_HDR : Atom P-header.; E",
            "Idx:19; ID:0; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x0; Memspace [0x6:Any NS] )",
        ]
    );
}

#[test]
fn atoms_after_a_refused_isa_follow_the_last_next_isa() {
    // An I-sync says Jazelle (damaged trace): the classifier refuses the
    // first atom's instruction, and the atoms after it are decoded in the
    // ISA the last classified instruction left; before any, OpenCSD's
    // field is zero, A32.
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map(0x2000, &[0x00, 0x00, 0xa0, 0xe1, 0x00, 0x00, 0xa0, 0xe1]); // mov r0, r0 (A32) twice
    let mut p = decoder(&rig, config(0, IDR_ETM35));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x08, 0x30, 0x00, 0x20, 0x00, 0x00, // I-sync 0x2000, Jazelle
        0x8c, // EEE
    ];
    rig.feed(&mut p, 0, trace, trace.len());
    let out = rig.take();
    let tail: Vec<&str> = out.lines().skip(4).collect();
    assert_eq!(
        tail,
        [
            "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=Jaz) S; 32-bit; )",
            "Idx:12; ID:0; [0x8c ];\tP_HDR : Atom P-header.; EEE",
            // No instruction: the range keeps its fresh slot's values.
            "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xffffffffffffffff:[0xffffffffffffffff] num_i(0) last_sz(0) (ISA=Unk) N --- )",
            "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2000:[0x2004] num_i(1) last_sz(4) (ISA=A32) E --- )",
            "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2004:[0x2008] num_i(1) last_sz(4) (ISA=A32) E --- )",
        ]
    );
}

/// The element lines of `trace` decoded with a packet monitor (every
/// packet built and decoded on its own) or without one (runs of P-headers
/// taken as their bytes), fed in blocks of `block` bytes with a forced
/// wait every `waits` elements (0: none).
fn element_lines(trace: &[u8], monitor: bool, block: usize, waits: u32) -> Vec<String> {
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map_arm_program();
    rig.elems.borrow_mut().set_test_waits(waits);
    let cfg = config(ETMCR_CTXTID_1, IDR_ETM35);
    let dec = Etmv3Decoder::new(cfg, &rig.ctx);
    let mut p = Pipeline::new("ETMV3", Etmv3Processor::new(cfg, &rig.ctx), Some(Box::new(dec)));
    if monitor {
        rig.monitor(&mut p, 0);
    }
    rig.feed(&mut p, 0, trace, block);
    rig.eot(&mut p);
    rig.take()
        .lines()
        .filter(|l| l.contains("OCSD_GEN_TRC_ELEM"))
        .map(str::to_string)
        .collect()
}

#[test]
fn p_header_runs_taken_as_bytes_give_the_packet_at_a_time_elements() {
    // The A32 trace (ranges, a NACC, unknown addresses, an exception that
    // cancels a held-back range), then runs of P-headers long enough to
    // grow the element ring (16 atoms in one header), broken by branches
    // and a context ID whose element prints fields it leaves to the ring;
    // last, a cancelling exception after two one-atom headers.
    let mut trace = ARM_TRACE.to_vec();
    trace.extend_from_slice(&[0x81, 0x10]); // branch to 0x1000
    trace.extend_from_slice(&[0x88, 0x84, 0x84, 0x84, 0x88]);
    trace.extend_from_slice(&[0x81, 0x10]); // branch to 0x1000
    trace.extend_from_slice(&[0x88, 0xc4, 0x85, 0x10, 0xbc, 0xfc, 0x84, 0x88]);
    trace.extend_from_slice(&[0x6e, 0x43]); // context ID
    trace.extend_from_slice(&[0x85, 0x30, 0x88, 0x84, 0x84]);
    // Two one-atom headers: only the first range would be held back, so
    // the exception cancels nothing.
    trace.extend_from_slice(&[0x81, 0x10, 0x84, 0x84, 0x81, 0x80, 0x80, 0x80, 0x48, 0x3c]);
    let serial = element_lines(&trace, true, trace.len(), 0);
    assert!(serial.len() > 40, "{serial:#?}");
    for block in [1, 3, trace.len()] {
        for waits in [0, 1, 3] {
            assert_eq!(
                element_lines(&trace, false, block, waits),
                serial,
                "blocks of {block}, a wait every {waits}"
            );
        }
    }
}
