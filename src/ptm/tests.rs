//! PTM packet processor and decoder tests on hand-built trace.

use super::{PtmConfig, PtmDecoder, PtmProcessor};
use crate::arch::{ArchProfile, ArchVersion, CoreProfile};
use crate::datapath::DatapathOp;
use crate::decoder::{DecodeMode, Pipeline};
use crate::interfaces::TrcDataIn;
use crate::test_rig::{Rig, lines};

const ETMCR_CYCLE_ACC: u32 = 1 << 12;
const ETMCR_CTXTID_4: u32 = 3 << 14;
const ETMCR_RET_STACK: u32 = 1 << 29;
const CCER_RET_STACK: u32 = 1 << 23;
const CCER_TS_BINARY: u32 = 1 << 28;
/// PTM 1.1.
const IDR_PTM11: u32 = 0x411C_F312;

fn config(ctrl: u32, ccer: u32) -> PtmConfig {
    PtmConfig {
        reg_ctrl: ctrl,
        reg_idr: IDR_PTM11,
        reg_ccer: ccer,
        reg_trc_id: 0,
        arch: ArchProfile::new(ArchVersion::V7, CoreProfile::CortexA),
    }
}

/// Packet processor only, packets printed with their bytes.
fn packets(rig: &Rig, cfg: PtmConfig) -> Pipeline<PtmProcessor> {
    let mut p = Pipeline::new("PTM", PtmProcessor::new(cfg, &rig.ctx), None);
    rig.monitor(&mut p, 0);
    p
}

/// Processor and decoder.
fn decoder(rig: &Rig, cfg: PtmConfig) -> Pipeline<PtmProcessor> {
    let dec = PtmDecoder::new(cfg, &rig.ctx);
    let mut p = Pipeline::new("PTM", PtmProcessor::new(cfg, &rig.ctx), Some(Box::new(dec)));
    rig.monitor(&mut p, 0);
    p
}

const ASYNC: [u8; 6] = [0, 0, 0, 0, 0, 0x80];

/// Every packet type (not cycle accurate), every branch address size and
/// ISA, exceptions, then a bad A-sync and an incomplete packet.
const ALL_PACKETS: &[u8] = &[
    0x11, 0x22, 0x00, 0x33, // not synchronised
    0x00, 0x00, 0x00, 0x00, 0x00, 0x80, // A-sync
    0x08, 0x01, 0x10, 0x00, 0x80, 0x28, 0x78, 0x56, 0x34, 0x12, // I-sync, Thumb, context ID
    0x05, // branch, 1 byte
    0x81, 0x05, // 2 bytes
    0x81, 0x80, 0x05, // 3 bytes
    0x81, 0x80, 0x80, 0x05, // 4 bytes
    0x81, 0x80, 0x80, 0x80, 0x04, // 5 bytes, to ARM
    0x81, 0x80, 0x80, 0x80, 0x44, 0x1d, // with an exception
    0x81, 0x80, 0x80, 0x80, 0x44, 0x9d, 0x20, // two exception bytes, Hyp
    0x81, 0x80, 0x80, 0x80, 0x50, 0x40, // Thumb + AltISA: ThumbEE (Hyp carries over)
    0x83, 0x80, 0x80, 0x80, 0x21, // Jazelle
    0x72, 0x08, // waypoint update
    0x80, 0x8a, 0x90, 0xa4, 0xc0, // atoms, formats 1 to 5
    0x42, 0x81, 0x01, // timestamp
    0x6e, 0x78, 0x56, 0x34, 0x12, // context ID
    0x3c, 0x07, // VMID
    0x0c, 0x66, 0x76, 0x02, // trigger, ignore, exception return, reserved
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, // A-sync with an extra zero
    0x00, 0x00, 0x05, // bad A-sync
    0x81, 0x80, // incomplete
];

const ALL_PACKETS_LISTING: &[&str] = &[
    "Idx:0; ID:0; [0x11 0x22 0x00 0x33 ];\tNOTSYNC : PTM Not Synchronised; ",
    "Idx:4; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
    "Idx:10; ID:0; [0x08 0x01 0x10 0x00 0x80 0x28 0x78 0x56 0x34 0x12 ];\tISYNC : Instruction Synchronisation packet; (Trace Enable); Addr=0x80001000; NS;  CtxtID=12345678; ISA=Thumb2; ",
    "Idx:20; ID:0; [0x05 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80001004 ~[0x4]; ",
    "Idx:21; ID:0; [0x81 0x05 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80000280 ~[0x280]; ",
    "Idx:23; ID:0; [0x81 0x80 0x05 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80014000 ~[0x14000]; ",
    "Idx:26; ID:0; [0x81 0x80 0x80 0x05 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80A00000 ~[0xA00000]; ",
    "Idx:30; ID:0; [0x81 0x80 0x80 0x80 0x04 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80000000 ~[0x80000000]; ISA=ARM(32); ",
    "Idx:35; ID:0; [0x81 0x80 0x80 0x80 0x44 0x1d ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80000000 ~[0x80000000]; NS; Excep=IRQ [0e]; ",
    "Idx:41; ID:0; [0x81 0x80 0x80 0x80 0x44 0x9d 0x20 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80000000 ~[0x80000000]; NS; Hyp; Excep=IRQ [0e]; ",
    "Idx:48; ID:0; [0x81 0x80 0x80 0x80 0x50 0x40 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x00000000 ~[0x0]; ISA=ThumbEE; S; Hyp; Excep=No Exception [00]; ",
    "Idx:54; ID:0; [0x83 0x80 0x80 0x80 0x21 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x08000001 ~[0x8000001]; ISA=Jazelle; ",
    "Idx:59; ID:0; [0x72 0x08 ];\tWP_UPDATE : Waypoint update packet; Addr=0x08000004 ~[0x4]; ",
    "Idx:61; ID:0; [0x80 ];\tATOM : Atom packet; E; ",
    "Idx:62; ID:0; [0x8a ];\tATOM : Atom packet; EN; ",
    "Idx:63; ID:0; [0x90 ];\tATOM : Atom packet; EEE; ",
    "Idx:64; ID:0; [0xa4 ];\tATOM : Atom packet; EENE; ",
    "Idx:65; ID:0; [0xc0 ];\tATOM : Atom packet; EEEEE; ",
    "Idx:66; ID:0; [0x42 0x81 0x01 ];\tTIMESTAMP : Timestamp packet; TS=0x0000000000000081 ~[0x81](129); ",
    "Idx:69; ID:0; [0x6e 0x78 0x56 0x34 0x12 ];\tCTXTID : Context ID packet; CtxtID=0x12345678; ",
    "Idx:74; ID:0; [0x3c 0x07 ];\tVMID : VM ID packet; VMID=0x07; ",
    "Idx:76; ID:0; [0x0c ];\tTRIGGER : Trigger Event packet; ",
    "Idx:77; ID:0; [0x66 ];\tIGNORE : Ignore packet; ",
    "Idx:78; ID:0; [0x76 ];\tERET : Exception return packet; ",
    "Idx:79; ID:0; [0x02 ];\tRESERVED : Reserved Packet Header; ",
    "Idx:80; ID:0; [0x00 0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
    "PKTP_PTM_0000 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx=87; CS ID=00; Bad Async packet\
     Idx:87; ID:0; [0x00 0x00 0x05 ];\tBAD_SEQUENCE : Invalid sequence in packet; [ASYNC]; ",
    "Idx:90; ID:0; [0x81 0x80 ];\tINCOMPLETE_EOT : Incomplete packet flushed at end of trace; ",
    "ID:0\tEND OF TRACE DATA",
];

#[test]
fn every_packet_type() {
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(ETMCR_CTXTID_4, CCER_TS_BINARY));
    assert_eq!(rig.listing(&mut p, ALL_PACKETS), lines(ALL_PACKETS_LISTING));
}

#[test]
fn packets_split_across_blocks() {
    // From the A-sync on, any block size gives the same packets.
    for block in [1, 2, 3, 7] {
        let rig = Rig::new(DecodeMode::PacketsOnly);
        let mut p = packets(&rig, config(ETMCR_CTXTID_4, CCER_TS_BINARY));
        rig.feed(&mut p, 4, &ALL_PACKETS[4..], block);
        rig.eot(&mut p);
        assert_eq!(rig.take(), lines(&ALL_PACKETS_LISTING[1..]), "block size {block}");
    }
}

#[test]
fn cycle_accurate_packets() {
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(ETMCR_CYCLE_ACC, CCER_TS_BINARY));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x08, 0x00, 0x10, 0x00, 0x80, 0x00, // periodic I-sync: no cycle count
        0x08, 0x00, 0x10, 0x00, 0x80, 0x20, 0x45, 0x02, // I-sync with a 2-byte cycle count
        0x84, // atom E, 1 cycle
        0xc6, 0x05, // atom N, 2-byte count
        0x05, 0x08, // 1-byte branch + count
        0x81, 0x80, 0x80, 0x80, 0x44, 0x1d, 0x48, 0x01, // 5-byte branch, exception, count
        0x42, 0x05, 0x08, // timestamp + count
        0xc2, 0xff, 0xff, 0xff, 0xff, // atom with a 5-byte count
    ];
    rig.feed(&mut p, 0, trace, trace.len());
    assert_eq!(
        rig.take(),
        lines(&[
            "Idx:0; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
            "Idx:6; ID:0; [0x08 0x00 0x10 0x00 0x80 0x00 ];\tISYNC : Instruction Synchronisation packet; (Periodic); Addr=0x80001000; S;  ISA=ARM(32); ",
            "Idx:12; ID:0; [0x08 0x00 0x10 0x00 0x80 0x20 0x45 0x02 ];\tISYNC : Instruction Synchronisation packet; (Trace Enable); Addr=0x80001000; S;  ISA=ARM(32); Cycles=33; ",
            "Idx:20; ID:0; [0x84 ];\tATOM : Atom packet; E; Cycles=1; ",
            "Idx:21; ID:0; [0xc6 0x05 ];\tATOM : Atom packet; N; Cycles=81; ",
            "Idx:23; ID:0; [0x05 0x08 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80001008 ~[0x8]; Cycles=2; ",
            "Idx:25; ID:0; [0x81 0x80 0x80 0x80 0x44 0x1d 0x48 0x01 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x80000000 ~[0x80000000]; NS; Excep=IRQ [0e]; Cycles=18; ",
            "Idx:33; ID:0; [0x42 0x05 0x08 ];\tTIMESTAMP : Timestamp packet; TS=0x0000000000000005 ~[0x5](5); Cycles=2; ",
            "Idx:36; ID:0; [0xc2 0xff 0xff 0xff 0xff ];\tATOM : Atom packet; N; Cycles=4294967280; ",
        ])
    );
}

#[test]
fn gray_coded_timestamps() {
    // PTM 1.1 without natural-binary timestamps: the packets update the
    // Gray code of the timestamp.
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(0, 0));
    let trace: &[u8] = &[0, 0, 0, 0, 0, 0x80, 0x42, 0x03, 0x42, 0x01];
    rig.feed(&mut p, 0, trace, trace.len());
    let out = rig.take();
    let ts: Vec<&str> = out.lines().skip(1).map(|l| l.split('\t').nth(1).unwrap()).collect();
    assert_eq!(
        ts,
        [
            "TIMESTAMP : Timestamp packet; TS=0x0000000000000002 ~[0x2](2); ",
            "TIMESTAMP : Timestamp packet; TS=0x0000000000000001 ~[0x1](1); "
        ]
    );
}

#[test]
fn unsynchronised_runs() {
    // Runs of skipped bytes are shown 16 at most (or up to the end of the
    // block); a long run of zeros is not an A-sync: OpenCSD drops 11 of
    // them and then loses count.
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(0, CCER_TS_BINARY));
    let mut trace: Vec<u8> = (1..=20).collect();
    trace.extend([0u8; 20]);
    trace.push(0x80);
    rig.feed(&mut p, 0, &trace, trace.len());
    let zeros = "0x00 ".repeat(20);
    assert_eq!(
        rig.take(),
        lines(&[
            "Idx:0; ID:0; [0x01 0x02 0x03 0x04 0x05 0x06 0x07 0x08 0x09 0x0a 0x0b 0x0c 0x0d 0x0e 0x0f 0x10 ];\tNOTSYNC : PTM Not Synchronised; ",
            &format!("Idx:16; ID:0; [0x11 0x12 0x13 0x14 {zeros}0x80 ];\tNOTSYNC : PTM Not Synchronised; "),
        ])
    );
}

#[test]
fn unsynchronised_runs_broken_by_zeros() {
    // Zeros that start no A-sync count with the bytes around them towards
    // the 16 shown at a time; a run is shown up to the block's end.
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(0, CCER_TS_BINARY));
    let mut trace: Vec<u8> = (1..=5).collect();
    trace.push(0x00);
    trace.extend(6..=0x20);
    trace.extend([0x00, 0x00, 0x21, 0x00, 0x22, 0x23]);
    trace.extend(ASYNC);
    rig.feed(&mut p, 0, &trace[..30], 30);
    rig.feed(&mut p, 30, &trace[30..], trace.len() - 30);
    assert_eq!(
        rig.take(),
        lines(&[
            "Idx:0; ID:0; [0x01 0x02 0x03 0x04 0x05 0x00 0x06 0x07 0x08 0x09 0x0a 0x0b 0x0c 0x0d 0x0e 0x0f ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:16; ID:0; [0x10 0x11 0x12 0x13 0x14 0x15 0x16 0x17 0x18 0x19 0x1a 0x1b 0x1c 0x1d ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:30; ID:0; [0x1e 0x1f 0x20 0x00 0x00 0x21 0x00 0x22 0x23 ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:39; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
        ])
    );
}

#[test]
fn zeros_pending_across_blocks() {
    // Zeros at the end of one block that turn out not to start an A-sync
    // are shown again with the next block's bytes (OpenCSD's count).
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let mut p = packets(&rig, config(0, CCER_TS_BINARY));
    rig.feed(&mut p, 0, &[0x11, 0x00, 0x00], 3);
    rig.feed(&mut p, 3, &[0x22, 0x33, 0x44, 0x55], 4);
    rig.feed(&mut p, 7, &ASYNC, 6);
    assert_eq!(
        rig.take(),
        lines(&[
            "Idx:0; ID:0; [0x11 ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:1; ID:0; [0x00 0x00 ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:3; ID:0; [0x22 0x33 0x44 0x55 0x00 0x00 ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:7; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
        ])
    );
}

#[test]
fn not_sync_packet_goes_to_the_sink_once() {
    // In decode mode the decoder sees one NOTSYNC packet, however many runs.
    let rig = Rig::new(DecodeMode::FullDecode);
    let mut p = decoder(&rig, config(0, CCER_TS_BINARY));
    let trace: Vec<u8> = (1..=40).collect();
    rig.feed(&mut p, 0, &trace, 10);
    let out = rig.take();
    assert_eq!(out.matches("NOTSYNC").count(), 4);
    assert_eq!(out.matches("OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])").count(), 1);
}

/// [`Rig::map_arm_program`], and a vector table at 0.
fn map_arm_program(rig: &Rig) {
    rig.map_arm_program();
    rig.map_words(
        0x0,
        &[
            0xe320_f000, // 0: nop
            0xe320_f000, // 4: nop
            0xea00_0400, // 8: b 0x1010
        ],
    );
}

/// Decode of an ARM program with the return stack on.
const ARM_TRACE: &[u8] = &[
    0, 0, 0, 0, 0, 0x80, // A-sync
    0x08, 0x00, 0x10, 0x00, 0x00, 0x20, // I-sync 0x1000, trace enable
    0x88, // EE: the call, then the return (from the return stack)
    0x80, // E: the loop branch
    0x81, 0x80, 0x80, 0x80, 0x40, 0x1d, // IRQ to 0x0
    0x72, 0x02, // waypoint update at 0x4
    0x80, // E: b 0x1010
    0x82, // N: bx lr not taken
    0x81, 0x80, 0x01, // branch to 0x8000: range from 0x1018 is not mapped
    0x80, // 0x8000 is not mapped either
    0x0c, 0x76, 0x6e, 0x3c, 0x05, // trigger, exception return, context ID, VMID
    0x02, // reserved: resynchronise
    0x80, // ignored until then
];

const ARM_LISTING: &[&str] = &[
    "Idx:0; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
    "Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
    "Idx:6; ID:0; [0x08 0x00 0x10 0x00 0x00 0x20 ];\tISYNC : Instruction Synchronisation packet; (Trace Enable); Addr=0x00001000; S;  ISA=ARM(32); ",
    "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
    "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; )",
    "Idx:12; ID:0; [0x88 ];\tATOM : Atom packet; EE; ",
    "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1008] num_i(2) last_sz(4) (ISA=A32) E BR  b+link )",
    "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A32) E iBR V7:impl ret)",
    "Idx:13; ID:0; [0x80 ];\tATOM : Atom packet; E; ",
    "Idx:13; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1008:[0x100c] num_i(1) last_sz(4) (ISA=A32) E BR  )",
    "Idx:14; ID:0; [0x81 0x80 0x80 0x80 0x40 0x1d ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x00000000 ~[0x0]; NS; Excep=IRQ [0e]; ",
    "Idx:14; ID:0; OCSD_GEN_TRC_ELEM_EXCEPTION(pref ret addr:0x1008; excep num (0x0e) )",
    "Idx:20; ID:0; [0x72 0x02 ];\tWP_UPDATE : Waypoint update packet; Addr=0x00000004 ~[0x4]; ",
    "Idx:20; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x0:[0x8] num_i(2) last_sz(4) (ISA=A32) E --- )",
    "Idx:22; ID:0; [0x80 ];\tATOM : Atom packet; E; ",
    "Idx:22; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x8:[0xc] num_i(1) last_sz(4) (ISA=A32) E BR  )",
    "Idx:23; ID:0; [0x82 ];\tATOM : Atom packet; N; ",
    "Idx:23; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A32) N iBR V7:impl ret)",
    "Idx:24; ID:0; [0x81 0x80 0x01 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x00008000 ~[0x8000]; ",
    "Idx:24; ID:0; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x1018; Memspace [0x19:Any S] )",
    "Idx:27; ID:0; [0x80 ];\tATOM : Atom packet; E; ",
    "Idx:27; ID:0; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0x8000; Memspace [0x19:Any S] )",
    "Idx:28; ID:0; [0x0c ];\tTRIGGER : Trigger Event packet; ",
    "Idx:28; ID:0; OCSD_GEN_TRC_ELEM_EVENT( Trigger; )",
    "Idx:29; ID:0; [0x76 ];\tERET : Exception return packet; ",
    "Idx:29; ID:0; OCSD_GEN_TRC_ELEM_EXCEPTION_RET()",
    "Idx:30; ID:0; [0x6e ];\tCTXTID : Context ID packet; CtxtID=0x00000000; ",
    "Idx:30; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; CTXTID=0x0; )",
    "Idx:31; ID:0; [0x3c 0x05 ];\tVMID : VM ID packet; VMID=0x05; ",
    "Idx:31; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; VMID=0x5; CTXTID=0x0; )",
    "Idx:33; ID:0; [0x02 ];\tRESERVED : Reserved Packet Header; ",
    "Idx:33; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [undefined])",
    "Idx:34; ID:0; [0x80 ];\tATOM : Atom packet; E; ",
    "Idx:34; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
    "ID:0\tEND OF TRACE DATA",
];

#[test]
fn decode_arm_with_return_stack() {
    let rig = Rig::new(DecodeMode::FullDecode);
    map_arm_program(&rig);
    let mut p = decoder(&rig, config(ETMCR_RET_STACK, CCER_RET_STACK | CCER_TS_BINARY));
    assert_eq!(rig.listing(&mut p, ARM_TRACE), lines(ARM_LISTING));
}

#[test]
fn decode_is_the_same_with_waits() {
    for waits in [1, 2, 5, 40] {
        let rig = Rig::new(DecodeMode::FullDecode);
        map_arm_program(&rig);
        rig.elems.borrow_mut().set_test_waits(waits);
        let mut p = decoder(&rig, config(ETMCR_RET_STACK, CCER_RET_STACK | CCER_TS_BINARY));
        rig.feed(&mut p, 0, ARM_TRACE, 3);
        rig.eot(&mut p);
        assert_eq!(rig.take(), lines(ARM_LISTING), "{waits} waits");
    }
}

#[test]
fn decode_thumb_cycle_accurate_without_return_stack() {
    let rig = Rig::new(DecodeMode::FullDecode);
    rig.map(
        0x2000,
        &[
            0x01, 0x20, // 2000: movs r0, #1
            0x00, 0xf0, 0x01, 0xf8, // 2002: bl 0x2008
            0xfe, 0xe7, // 2006: b 0x2006
            0x01, 0x30, // 2008: adds r0, #1
            0x70, 0x47, // 200a: bx lr
            0x00, 0xbf, // 200c: nop (4 bytes are read even for a 16-bit instruction)
        ],
    );
    // The return stack is implemented but not enabled.
    let mut p = decoder(&rig, config(ETMCR_CYCLE_ACC, CCER_RET_STACK | CCER_TS_BINARY));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x08, 0x01, 0x20, 0x00, 0x00, 0x20, 0x04, // I-sync 0x2000 Thumb, 1 cycle
        0x88, // E: bl
        0x84, // E: bx lr, address needed
        0x84, // no address: ignored
        0x07, 0x04, // branch to 0x2006
        0x84, // E: b 0x2006
        0x42, 0x80, 0x01, 0x08, // timestamp
        0x08, 0x07, 0x20, 0x00, 0x00, 0x00, // periodic I-sync: nothing new
    ];
    assert_eq!(
        rig.listing(&mut p, trace),
        lines(&[
            "Idx:0; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
            "Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])",
            "Idx:6; ID:0; [0x08 0x01 0x20 0x00 0x00 0x20 0x04 ];\tISYNC : Instruction Synchronisation packet; (Trace Enable); Addr=0x00002000; S;  ISA=Thumb2; Cycles=1; ",
            "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter] [CC=1]; )",
            "Idx:6; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=T32) S; 32-bit; )",
            "Idx:13; ID:0; [0x88 ];\tATOM : Atom packet; E; Cycles=2; ",
            "Idx:13; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2000:[0x2006] num_i(2) last_sz(4) (ISA=T32) E BR  b+link  [CC=2]; )",
            "Idx:14; ID:0; [0x84 ];\tATOM : Atom packet; E; Cycles=1; ",
            "Idx:14; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2008:[0x200c] num_i(2) last_sz(2) (ISA=T32) E iBR V7:impl ret [CC=1]; )",
            "Idx:15; ID:0; [0x84 ];\tATOM : Atom packet; E; Cycles=1; ",
            "Idx:16; ID:0; [0x07 0x04 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x00002006 ~[0x6]; Cycles=1; ",
            "Idx:18; ID:0; [0x84 ];\tATOM : Atom packet; E; Cycles=1; ",
            "Idx:18; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x2006:[0x2008] num_i(1) last_sz(2) (ISA=T32) E BR   [CC=1]; )",
            "Idx:19; ID:0; [0x42 0x80 0x01 0x08 ];\tTIMESTAMP : Timestamp packet; TS=0x0000000000000080 ~[0x80](128); Cycles=2; ",
            "Idx:19; ID:0; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000080];  [CC=2]; )",
            "Idx:23; ID:0; [0x08 0x07 0x20 0x00 0x00 0x00 ];\tISYNC : Instruction Synchronisation packet; (Periodic); Addr=0x00002006; S;  ISA=Thumb2; ",
            "Idx:23; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])",
            "ID:0\tEND OF TRACE DATA",
        ])
    );
}

#[test]
fn return_stack_underflow_is_fatal() {
    let rig = Rig::new(DecodeMode::FullDecode);
    map_arm_program(&rig);
    let mut p = decoder(&rig, config(ETMCR_RET_STACK, CCER_RET_STACK | CCER_TS_BINARY));
    // I-sync at the add, then E on the bx lr with nothing pushed.
    let trace: &[u8] = &[0, 0, 0, 0, 0, 0x80, 0x08, 0x10, 0x10, 0x00, 0x00, 0x20, 0x80];
    let (resp, used) = p.trace_data_in(DatapathOp::Data, 0, trace);
    assert!(resp.is_fatal());
    assert_eq!(used, trace.len());
    let out = rig.take();
    assert!(
        out.ends_with(
            "Idx:12; ID:0; [0x80 ];\tATOM : Atom packet; E; \nDCD_PTM_0000 : 0x001c (OCSD_ERR_RET_STACK_OVERFLOW) \
             [Internal return stack overflow checks failed - popped more than we pushed.]; TrcIdx=12; CS ID=00; \
             Return stack error processing atom packet."
        ),
        "{out}"
    );
}

#[test]
fn unsupported_isa_waits_for_an_address() {
    let rig = Rig::new(DecodeMode::FullDecode);
    map_arm_program(&rig);
    rig.map(0x0800_0000, &[0; 8]);
    let mut p = decoder(&rig, config(0, CCER_TS_BINARY));
    let trace: &[u8] = &[
        0, 0, 0, 0, 0, 0x80, // A-sync
        0x08, 0x00, 0x10, 0x00, 0x00, 0x20, // I-sync 0x1000
        0x83, 0x80, 0x80, 0x80, 0x21, // branch to Jazelle: E on the bl first
        0x80, // Jazelle code: a warning, then wait for an address
        0x80, // ignored
    ];
    rig.feed(&mut p, 0, trace, trace.len());
    let out = rig.take();
    let tail: Vec<&str> = out.lines().skip(5).collect();
    assert_eq!(
        tail,
        [
            "Idx:12; ID:0; [0x83 0x80 0x80 0x80 0x21 ];\tBRANCH_ADDRESS : Branch address packet; Addr=0x08000001 ~[0x8000001]; ISA=Jazelle; ",
            "Idx:12; ID:0; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1008] num_i(2) last_sz(4) (ISA=A32) E BR  b+link )",
            "Idx:17; ID:0; [0x80 ];\tATOM : Atom packet; E; ",
            "DCD_PTM_0000 : 0x0016 (OCSD_ERR_UNSUPPORTED_ISA) [ISA not supported in decoder]; TrcIdx=17; CS ID=00; \
             Warning: unsupported instruction set processing atom packet.Idx:18; ID:0; [0x80 ];\tATOM : Atom packet; E; ",
        ]
    );
}

#[test]
fn reset_restarts_synchronisation() {
    let rig = Rig::new(DecodeMode::FullDecode);
    map_arm_program(&rig);
    let mut p = decoder(&rig, config(0, CCER_TS_BINARY));
    rig.feed(&mut p, 0, &ARM_TRACE[..13], 13);
    rig.take();
    p.trace_data_in(DatapathOp::Reset, 0, &[]);
    // Back to looking for an A-sync: a stray atom is not synchronised data.
    rig.feed(&mut p, 100, &[0x80], 1);
    rig.feed(&mut p, 101, &ARM_TRACE[..12], 12);
    assert_eq!(
        rig.take(),
        lines(&[
            "ID:0\tRESET operation on trace decode path",
            "Idx:100; ID:0; [0x80 ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:100; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [reset-decoder])",
            "Idx:101; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tASYNC : Alignment Synchronisation Packet; ",
            "Idx:107; ID:0; [0x08 0x00 0x10 0x00 0x00 0x20 ];\tISYNC : Instruction Synchronisation packet; (Trace Enable); Addr=0x00001000; S;  ISA=ARM(32); ",
            "Idx:107; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])",
            "Idx:107; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A32) S; 32-bit; )",
        ])
    );
}

#[test]
fn random_bytes_never_panic() {
    use crate::test_rig::{feed_ignoring_errors, noise};
    let configs = [
        config(0, 0),
        config(ETMCR_CYCLE_ACC | ETMCR_CTXTID_4, CCER_TS_BINARY),
        config(
            ETMCR_RET_STACK | ETMCR_CYCLE_ACC | (1 << 14),
            CCER_RET_STACK | (1 << 29) | (1 << 24),
        ),
    ];
    for (n, cfg) in configs.into_iter().enumerate() {
        let rig = Rig::new(DecodeMode::FullDecode);
        map_arm_program(&rig);
        let mut p = decoder(&rig, cfg);
        // Noise after an A-sync, an I-sync (with any cycle count and
        // context ID bytes) and a few atoms, so the decoder walks code too.
        let mut data = Vec::new();
        for chunk in 0..64u64 {
            data.extend_from_slice(&ASYNC);
            data.extend_from_slice(&[0x08, 0x00, 0x10, 0x00, 0x00, 0x00]);
            data.extend(std::iter::repeat_n(0, cfg.ctxt_id_bytes()));
            data.extend_from_slice(&[0x80, 0x88, 0x80, 0x82]);
            data.extend(noise(chunk * 7 + n as u64, 256));
        }
        feed_ignoring_errors(&mut p, &data);
        let out = rig.take();
        assert!(out.contains("EO_TRACE"));
        assert!(out.contains("INSTR_RANGE"), "config {n}: no code was followed");
    }
}

#[test]
fn unsynced_count_past_the_block_shows_the_deformatter_record() {
    use crate::datapath::DatapathResp;
    use crate::deformatter::{DeformatterConfig, FrameDeformatter};
    use crate::test_rig::IdStreamTable;
    // Two frames for trace ID 0x10. The first ends in two zeros that may
    // start an A-sync; the second has 8 bytes for the ID, and none is a
    // zero: OpenCSD counts the two zeros again with them, and lists 10
    // bytes, the last two from past the block: the stale bytes the first
    // frame left in the deformatter's record for the ID.
    let mut frames = vec![0x21];
    frames.extend([0x22; 12]);
    frames.extend([0x00, 0x00, 0x00]);
    frames.extend([0x22; 8]);
    frames.extend([0x61, 0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x00]);
    let rig = Rig::new(DecodeMode::PacketsOnly);
    let p = packets(
        &rig,
        PtmConfig {
            reg_trc_id: 0x10,
            ..config(0, CCER_TS_BINARY)
        },
    );
    let mut table = IdStreamTable::default();
    table.attach(0x10, Box::new(p)).unwrap();
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    assert_eq!(
        d.trace_data_in(DatapathOp::Data, 0, &frames, &mut table),
        (DatapathResp::Cont, 32)
    );
    assert_eq!(
        rig.take(),
        lines(&[
            "Idx:0; ID:0; [0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:12; ID:0; [0x00 0x00 ];\tNOTSYNC : PTM Not Synchronised; ",
            "Idx:14; ID:0; [0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 0x22 ];\tNOTSYNC : PTM Not Synchronised; ",
        ])
    );
}

#[test]
fn packets_whole_in_a_block_are_those_gathered_byte_by_byte() {
    // Packets whole in their block are parsed from it; fed a byte at a
    // time, every packet is gathered byte by byte. Random packets (after
    // an A-sync) under each configuration list the same either way,
    // errors included.
    use crate::test_rig::noise;
    let configs = [
        config(0, 0),
        config(ETMCR_CYCLE_ACC, CCER_TS_BINARY),
        config(ETMCR_CYCLE_ACC | ETMCR_CTXTID_4, 0),
        config(1 << 14, 1 << 29),
        config(ETMCR_CYCLE_ACC | (2 << 14), CCER_TS_BINARY | (1 << 29)),
    ];
    for (n, cfg) in configs.into_iter().enumerate() {
        let mut data = Vec::new();
        for chunk in 0..32u64 {
            data.extend_from_slice(&ASYNC);
            data.extend_from_slice(&[0x08, 0x00, 0x10, 0x00, 0x80, 0x20 | ((chunk as u8 & 3) << 5)]);
            data.extend(noise(chunk * 11 + n as u64, 200));
        }
        let whole = Rig::new(DecodeMode::PacketsOnly);
        let mut p = packets(&whole, cfg);
        let listed = whole.listing(&mut p, &data);
        let bytewise = Rig::new(DecodeMode::PacketsOnly);
        let mut p = packets(&bytewise, cfg);
        bytewise.feed(&mut p, 0, &data, 1);
        bytewise.eot(&mut p);
        let gathered = bytewise.take();
        assert!(listed.contains("BRANCH_ADDRESS") && listed.contains("ISYNC") && listed.contains("ATOM"));
        assert_eq!(listed, gathered, "config {n}");
    }
}
