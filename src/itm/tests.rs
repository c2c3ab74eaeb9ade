//! ITM unit tests: hand-built byte streams, exact packets and elements.

use crate::datapath::{DatapathOp, DatapathResp};
use crate::decoder::{DecodeMode, Pipeline};
use crate::interfaces::TrcDataIn;
use crate::test_rig::{Rig, feed_ignoring_errors};

use super::*;

const ASYNC: [u8; 6] = [0, 0, 0, 0, 0, 0x80];

/// The ITM pipeline for `ITMTCR` = `tcr`: packets listed and, if
/// `decode`, elements.
fn itm(decode: bool, tcr: u32) -> (Rig, Pipeline<ItmProcessor>) {
    let rig = Rig::new(if decode {
        DecodeMode::FullDecode
    } else {
        DecodeMode::PacketsOnly
    });
    let mut p = create_pipeline(ItmConfig { tcr }, &rig.ctx);
    rig.monitor(&mut p, 0);
    (rig, p)
}

fn listing_cfg(tcr: u32, data: &[u8]) -> String {
    let (rig, mut p) = itm(true, tcr);
    rig.listing(&mut p, data)
}

fn listing(data: &[u8]) -> String {
    listing_cfg(0, data)
}

/// ASYNC at index 0 then `rest`.
fn synced(rest: &[u8]) -> Vec<u8> {
    let mut v = ASYNC.to_vec();
    v.extend_from_slice(rest);
    v
}

const SYNC: &str = "Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:0; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tITM_ASYNC: ; 'Alignment synchronisation packet'
";

const EOT: &str = "ID:0\tEND OF TRACE DATA\n";

#[test]
fn notsync_sync_overflow_and_software_packets() {
    let mut s = vec![0x12, 0x00, 0x34];
    s.extend(ASYNC);
    s.extend([
        0x70, 0x09, 0xac, 0x0a, 0x45, 0x23, 0x0b, 0x23, 0x01, 0x89, 0x67, 0xf9, 0x55,
    ]);
    assert_eq!(
        listing(&s),
        "Idx:0; ID:0; [0x12 ];\tITM_NOTSYNC: ; 'ITM data stream not synchronised'
Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:1; ID:0; [0x00 0x34 ];\tITM_NOTSYNC: ; 'ITM data stream not synchronised'
Idx:3; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tITM_ASYNC: ; 'Alignment synchronisation packet'
Idx:9; ID:0; [0x70 ];\tITM_OVERFLOW: ; 'ITM overflow packet'
Idx:10; ID:0; [0x09 0xac ];\tITM_SWIT: {src id: 0x01}  0xac; 'Software Stimulus write packet'
Idx:10; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_OVERFLOW; ITM_SWIT (ch: 0x1; Data: 0xac) )
Idx:12; ID:0; [0x0a 0x45 0x23 ];\tITM_SWIT: {src id: 0x01}  0x2345; 'Software Stimulus write packet'
Idx:12; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x1; Data: 0x2345) )
Idx:15; ID:0; [0x0b 0x23 0x01 0x89 0x67 ];\tITM_SWIT: {src id: 0x01}  0x67890123; 'Software Stimulus write packet'
Idx:15; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x1; Data: 0x67890123) )
Idx:20; ID:0; [0xf9 0x55 ];\tITM_SWIT: {src id: 0x1f}  0x55; 'Software Stimulus write packet'
Idx:20; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x1f; Data: 0x55) )
Idx:20; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:0\tEND OF TRACE DATA
"
    );
}

#[test]
fn notsync_runs_of_eight_and_end_of_block() {
    // Without a sync: bytes go to the monitor eight at a time and at the
    // end of each block; only the first NOTSYNC reaches the decoder.
    let (rig, mut p) = itm(true, 0);
    rig.send(&mut p, 0, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    rig.send(&mut p, 10, &[11, 0, 0]);
    rig.send(&mut p, 13, &[0, 0, 0, 0x80, 0x70]);
    assert_eq!(
        rig.take(),
        "Idx:0; ID:0; [0x01 0x02 0x03 0x04 0x05 0x06 0x07 0x08 ];\tITM_NOTSYNC: ; 'ITM data stream not synchronised'
Idx:0; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:0; ID:0; [0x09 0x0a ];\tITM_NOTSYNC: ; 'ITM data stream not synchronised'
Idx:10; ID:0; [0x0b ];\tITM_NOTSYNC: ; 'ITM data stream not synchronised'
Idx:11; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tITM_ASYNC: ; 'Alignment synchronisation packet'
Idx:17; ID:0; [0x70 ];\tITM_OVERFLOW: ; 'ITM overflow packet'
"
    );
}

#[test]
fn hardware_source_packets() {
    let s = synced(&[
        0x05, 0x3f, // event counters, all flags
        0x0e, 0x05, 0x20, // exception 5 exited
        0x0e, 0x07, 0x00, // exception 7, function 0
        0x17, 0x00, 0x10, 0x00, 0x08, // PC sample
        0x15, 0x00, // PC sample (sleeping)
        0x47, 0x78, 0x56, 0x34, 0x12, // data trace PC value, comparator 0
        0x5e, 0x34, 0x12, // data trace address, comparator 1
        0xbd, 0x99, // data value write, comparator 3
        0x86, 0x66, 0x55, // data value read, comparator 0
        0x1d, 0x01, // discriminator 3: reserved
        0xc5, 0x02, // discriminator 24: reserved
    ]);
    assert_eq!(
        listing(&s),
        format!(
            "{SYNC}Idx:6; ID:0; [0x05 0x3f ];\tITM_DWT: {{desc: 0x00}} [Event Counter: 0x3f; Flags:  CPI  EXC  Sleep  LSU  Fold  CYC ] ; 'DWT hardware stimulus write'
Idx:6; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x0; Data: 0x3f) )
Idx:8; ID:0; [0x0e 0x05 0x20 ];\tITM_DWT: {{desc: 0x01}} [Exception Num:  0x0005(exited) ]; 'DWT hardware stimulus write'
Idx:8; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x1; Data: 0x2005) )
Idx:11; ID:0; [0x0e 0x07 0x00 ];\tITM_DWT: {{desc: 0x01}} [Exception Num:  0x0007(reserved) ]; 'DWT hardware stimulus write'
Idx:11; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x1; Data: 0x0007) )
Idx:14; ID:0; [0x17 0x00 0x10 0x00 0x08 ];\tITM_DWT: {{desc: 0x02}} [PC Sample: 0x08001000] ; 'DWT hardware stimulus write'
Idx:14; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x2; Data: 0x08001000) )
Idx:19; ID:0; [0x15 0x00 ];\tITM_DWT: {{desc: 0x02}} [PC Sample: 0x00] ; 'DWT hardware stimulus write'
Idx:19; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x2; Data: 0x00) )
Idx:21; ID:0; [0x47 0x78 0x56 0x34 0x12 ];\tITM_DWT: {{desc: 0x08}} [Data Trc: comp=0; PC Value=0x12345678 ] ; 'DWT hardware stimulus write'
Idx:21; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x8; Data: 0x12345678) )
Idx:26; ID:0; [0x5e 0x34 0x12 ];\tITM_DWT: {{desc: 0x0b}} [Data Trc: comp=1; Address=0x1234 ] ; 'DWT hardware stimulus write'
Idx:26; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0xb; Data: 0x1234) )
Idx:29; ID:0; [0xbd 0x99 ];\tITM_DWT: {{desc: 0x17}} [Data Trc: comp=3; Val write: 0x99] ; 'DWT hardware stimulus write'
Idx:29; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x17; Data: 0x99) )
Idx:31; ID:0; [0x86 0x66 0x55 ];\tITM_DWT: {{desc: 0x10}} [Data Trc: comp=0; Val read: 0x5566] ; 'DWT hardware stimulus write'
Idx:31; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x10; Data: 0x5566) )
Idx:34; ID:0; [0x1d 0x01 ];\tITM_DWT: {{desc: 0x03}} [Reserved discriminator value] ; 'DWT hardware stimulus write'
Idx:34; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x3; Data: 0x01) )
Idx:36; ID:0; [0xc5 0x02 ];\tITM_DWT: {{desc: 0x18}} [Reserved discriminator value] ; 'DWT hardware stimulus write'
Idx:36; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_DWT (desc: 0x18; Data: 0x02) )
Idx:36; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
{EOT}"
        )
    );
}

#[test]
fn local_timestamps_with_prescaler() {
    // SWOENA with TSPrescale 2: local timestamps count in 16s. An
    // overflow restarts the count.
    let s = synced(&[
        0x30, 0xd0, 0x05, 0xe0, 0x81, 0x01, 0xf0, 0x80, 0x80, 0x80, 0x01, 0x70, 0x10,
    ]);
    assert_eq!(
        listing_cfg(0x0000_0210, &s),
        format!(
            "{SYNC}Idx:6; ID:0; [0x30 ];\tITM_TS_LOCAL: 0x03 {{ TS Sync }}; 'Local Timestamp'
Idx:6; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x00000003, {{ TS Sync}}; TS cumulative: 0x0000000000000030) )
Idx:7; ID:0; [0xd0 0x05 ];\tITM_TS_LOCAL: 0x05 {{ TS Delayed }}; 'Local Timestamp'
Idx:7; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x00000005, {{ TS Delay}}; TS cumulative: 0x0000000000000080) )
Idx:9; ID:0; [0xe0 0x81 0x01 ];\tITM_TS_LOCAL: 0x0081 {{ TS Sync, Packet Delayed }}; 'Local Timestamp'
Idx:9; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x00000081, {{ Packet Delay}}; TS cumulative: 0x0000000000000890) )
Idx:12; ID:0; [0xf0 0x80 0x80 0x80 0x01 ];\tITM_TS_LOCAL: 0x00200000 {{ TS Delayed, Packet Delayed }}; 'Local Timestamp'
Idx:12; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x00200000, {{ TS and Packet Delay}}; TS cumulative: 0x0000000002000890) )
Idx:17; ID:0; [0x70 ];\tITM_OVERFLOW: ; 'ITM overflow packet'
Idx:18; ID:0; [0x10 ];\tITM_TS_LOCAL: 0x01 {{ TS Sync }}; 'Local Timestamp'
Idx:18; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_OVERFLOW; ITM_TS_LOCAL ( TS delta: 0x00000001, {{ TS Sync}}; TS cumulative: 0x0000000000000010) )
Idx:18; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
{EOT}"
        )
    );
}

#[test]
fn global_timestamps() {
    // GTS1 before any GTS2 waits for it; a wrap waits for the next GTS2.
    let s = synced(&[
        0x94, 0xd6, 0x34, // GTS1 [13:0], not sent
        0xb4, 0x81, 0x82, 0x83, 0x04, // GTS2 [47:26]
        0x94, 0x11, // GTS1 [6:0]
        0x94, 0x81, 0x82, 0x83, 0x64, // GTS1 [25:0], clock change and wrap: not sent
        0xb4, 0x81, 0x80, 0x80, 0x80, 0x80, 0x01, // GTS2 [63:26]
    ]);
    assert_eq!(
        listing(&s),
        format!(
            "{SYNC}Idx:6; ID:0; [0x94 0xd6 0x34 ];\tITM_GTS_1: {{ TS bits [13:0]}} 0x1a56; 'Global Timestamp [25:0]'
Idx:9; ID:0; [0xb4 0x81 0x82 0x83 0x04 ];\tITM_GTS_2: {{ TS bits [47:26]}} 0x0080c101; 'Global Timestamp [{{63|42}}:26]'
Idx:9; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_GLOBAL ( TS: 0x0002030404001a56) )
Idx:14; ID:0; [0x94 0x11 ];\tITM_GTS_1: {{ TS bits [6:0]}} 0x11; 'Global Timestamp [25:0]'
Idx:14; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_GLOBAL ( TS: 0x0002030404001a11) )
Idx:16; ID:0; [0x94 0x81 0x82 0x83 0x04 ];\tITM_GTS_1: {{ TS bits [25:0], Clk change, Clk wrap}} 0x0080c101; 'Global Timestamp [25:0]'
Idx:21; ID:0; [0xb4 0x81 0x80 0x80 0x80 0x80 0x01 ];\tITM_GTS_2: {{ TS bits [63:26]}} 0x0800000001; 'Global Timestamp [{{63|42}}:26]'
Idx:21; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_GLOBAL ( TS: 0x200000000480c101) )
Idx:21; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
{EOT}"
        )
    );
}

#[test]
fn extension_packets_and_stimulus_page() {
    let s = synced(&[
        0x38, // stimulus page 3
        0x11, 0x77, // port 2 -> channel 0x62
        0x0c, // hardware source extension: not a page
        0x98, 0x05, // 10-bit software extension: not a page
        0x11, 0x78, // still page 3
        0x08, // page 0
        0x11, 0x79,
    ]);
    assert_eq!(
        listing(&s),
        format!(
            "{SYNC}Idx:6; ID:0; [0x38 ];\tITM_EXTENSION: {{stim port page}} 0x03; 'Extension packet'
Idx:7; ID:0; [0x11 0x77 ];\tITM_SWIT: {{src id: 0x02}}  0x77; 'Software Stimulus write packet'
Idx:7; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x62; Data: 0x77) )
Idx:9; ID:0; [0x0c ];\tITM_EXTENSION: {{unknown extension type, 3 bits }} 0x0; 'Extension packet'
Idx:10; ID:0; [0x98 0x05 ];\tITM_EXTENSION: {{unknown extension type, 10 bits }} 0x029; 'Extension packet'
Idx:12; ID:0; [0x11 0x78 ];\tITM_SWIT: {{src id: 0x02}}  0x78; 'Software Stimulus write packet'
Idx:12; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x62; Data: 0x78) )
Idx:14; ID:0; [0x08 ];\tITM_EXTENSION: {{stim port page}} 0x00; 'Extension packet'
Idx:15; ID:0; [0x11 0x79 ];\tITM_SWIT: {{src id: 0x02}}  0x79; 'Software Stimulus write packet'
Idx:15; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x2; Data: 0x79) )
Idx:15; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
{EOT}"
        )
    );
}

fn bad_seq(idx: u32, msg: &str) -> String {
    format!("PKTP_ITM_0000 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx={idx}; CS ID=00; {msg}")
}

#[test]
fn errors_listed_and_processing_goes_on() {
    // Packet listing only: every error is reported, the bad packet listed
    // and the next header read.
    let s = synced(&[
        0x04, // reserved header
        0xc0, 0x80, 0x80, 0x80, 0x80, // local TS too long
        0x94, 0x80, 0x80, 0x80, 0x80, // GTS1 too long
        0xb4, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, // GTS2 too long
        0x88, 0x80, 0x80, 0x80, 0x80, // extension too long
        0x00, 0x00, 0x12, // bad sync
        0x09, 0x42,
    ]);
    let (rig, mut p) = itm(false, 0);
    assert_eq!(rig.send(&mut p, 0, &s), DatapathResp::Cont);
    rig.eot(&mut p);
    assert_eq!(
        rig.take(),
        format!(
            "Idx:0; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tITM_ASYNC: ; 'Alignment synchronisation packet'
PKTP_ITM_0000 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx=6; CS ID=00; Idx:6; ID:0; [0x04 ];\tITM_RESERVED: ; 'Reserved Packet Header'
{}Idx:7; ID:0; [0xc0 0x80 0x80 0x80 0x80 ];\tITM_BAD_SEQUENCE: [Init type: ITM_TS_LOCAL] ; 'Invalid sequence in packet'
{}Idx:12; ID:0; [0x94 0x80 0x80 0x80 0x80 ];\tITM_BAD_SEQUENCE: [Init type: ITM_GTS_1] ; 'Invalid sequence in packet'
{}Idx:17; ID:0; [0xb4 0x80 0x80 0x80 0x80 0x80 0x80 ];\tITM_BAD_SEQUENCE: [Init type: ITM_GTS_2] ; 'Invalid sequence in packet'
{}Idx:24; ID:0; [0x88 0x80 0x80 0x80 0x80 ];\tITM_BAD_SEQUENCE: [Init type: ITM_EXTENSION] ; 'Invalid sequence in packet'
{}Idx:29; ID:0; [0x00 0x00 0x12 ];\tITM_BAD_SEQUENCE: [Init type: ITM_ASYNC] ; 'Invalid sequence in packet'
Idx:32; ID:0; [0x09 0x42 ];\tITM_SWIT: {{src id: 0x01}}  0x42; 'Software Stimulus write packet'
{EOT}",
            bad_seq(7, "Local TS packet: Payload continuation value too long"),
            bad_seq(12, "GTS1 packet: Payload continuation value too long"),
            bad_seq(17, "GTS2 packet: Payload continuation value too long"),
            bad_seq(24, "Extension packet: Payload continuation value too long"),
            bad_seq(29, "Async Packet: unexpected none zero value"),
        )
    );
}

#[test]
fn bad_packet_is_fatal_to_decode_then_resync() {
    let (rig, mut p) = itm(true, 0);
    let (resp, used) = p.trace_data_in(DatapathOp::Data, 0, &synced(&[0x04, 0x09, 0x42]));
    assert_eq!((resp, used), (DatapathResp::FatalInvalidData, 7));
    rig.take();
    let mut rest = vec![0x09, 0x42];
    rest.extend(ASYNC);
    rest.extend([0x09, 0x43]);
    assert_eq!(rig.send(&mut p, 7, &rest), DatapathResp::Cont);
    rig.eot(&mut p);
    assert_eq!(
        rig.take(),
        "Idx:7; ID:0; [0x09 0x42 ];\tITM_SWIT: {src id: 0x01}  0x42; 'Software Stimulus write packet'
Idx:7; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])
Idx:9; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tITM_ASYNC: ; 'Alignment synchronisation packet'
Idx:15; ID:0; [0x09 0x43 ];\tITM_SWIT: {src id: 0x01}  0x43; 'Software Stimulus write packet'
Idx:15; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x1; Data: 0x43) )
Idx:15; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:0\tEND OF TRACE DATA
"
    );
}

#[test]
fn incomplete_packet_at_end_of_trace() {
    assert_eq!(
        listing(&synced(&[0x0b, 0x01])),
        format!(
            "{SYNC}Idx:6; ID:0; [0x0b 0x01 ];\tITM_INCOMPLETE_EOT: [Init type: ITM_SWIT] ; 'Incomplete packet flushed at end of trace'
Idx:6; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
{EOT}"
        )
    );
}

#[test]
fn reset_needs_a_new_sync() {
    let (rig, mut p) = itm(true, 0);
    rig.send(&mut p, 0, &synced(&[0x10, 0x09, 0x01]));
    p.trace_data_in(DatapathOp::Reset, 9, &[]);
    let mut more = vec![0x09, 0x02];
    more.extend(ASYNC);
    more.extend([0x09, 0x03]);
    rig.send(&mut p, 9, &more);
    assert_eq!(
        rig.take(),
        format!(
            "{SYNC}Idx:6; ID:0; [0x10 ];\tITM_TS_LOCAL: 0x01 {{ TS Sync }}; 'Local Timestamp'
Idx:6; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x00000001, {{ TS Sync}}; TS cumulative: 0x0000000000000001) )
Idx:7; ID:0; [0x09 0x01 ];\tITM_SWIT: {{src id: 0x01}}  0x01; 'Software Stimulus write packet'
Idx:7; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x1; Data: 0x01) )
ID:0\tRESET operation on trace decode path
Idx:9; ID:0; [0x09 0x02 ];\tITM_NOTSYNC: ; 'ITM data stream not synchronised'
Idx:11; ID:0; [0x00 0x00 0x00 0x00 0x00 0x80 ];\tITM_ASYNC: ; 'Alignment synchronisation packet'
Idx:11; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [reset-decoder])
Idx:17; ID:0; [0x09 0x03 ];\tITM_SWIT: {{src id: 0x01}}  0x03; 'Software Stimulus write packet'
Idx:17; ID:0; OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x1; Data: 0x03) )
"
        )
    );
}

#[test]
fn same_listing_with_waits_and_one_byte_blocks() {
    let s = synced(&[
        0x70, 0x09, 0xac, 0x30, 0x0e, 0x05, 0x20, 0x94, 0xd6, 0x34, 0xb4, 0x81, 0x82, 0x83, 0x04, 0x94, 0x11, 0x38,
        0x11, 0x77, 0xd0, 0x05, 0x0b, 0x01,
    ]);
    let plain = listing(&s);
    for waits in [1, 2, 5, 100] {
        let (rig, mut p) = itm(true, 0);
        rig.elems.borrow_mut().set_test_waits(waits);
        rig.feed(&mut p, 0, &s, 1);
        rig.eot(&mut p);
        assert_eq!(rig.take(), plain, "test_waits {waits}");
    }
}

#[test]
fn arbitrary_bytes_never_panic_or_stall() {
    let mut x: u32 = 0x9e37_79b9;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let mut data = Vec::with_capacity(40_000);
    while data.len() < 40_000 {
        let r = rnd();
        if r % 32 == 0 {
            data.extend(std::iter::repeat_n(0, (r >> 8) as usize % 8));
            data.push(0x80);
        } else {
            data.push((r >> 8) as u8);
        }
    }
    for decode in [false, true] {
        let (_rig, mut p) = itm(decode, 0);
        feed_ignoring_errors(&mut p, &data);
    }
}

#[test]
fn factory_reads_itmtcr() {
    let f = factory();
    assert_eq!(f.protocol_name(), "ITM");
    let cfg = crate::decoder::SourceConfig {
        regs: vec![("ITMTCR".into(), 0x0020_0000)],
        ..Default::default()
    };
    assert_eq!(f.trace_id(&cfg), 0x20);
    assert_eq!(ItmConfig::with_trace_id(0x20).trace_id(), 0x20);
    // The prescaler applies only with SWOENA (bit 4).
    assert_eq!(ItmConfig { tcr: 0x300 }.ts_prescale(), 1);
    assert_eq!(
        [0x010, 0x110, 0x210, 0x310].map(|tcr| ItmConfig { tcr }.ts_prescale()),
        [1, 4, 16, 64]
    );
}
