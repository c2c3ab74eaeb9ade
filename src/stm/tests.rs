//! STM unit tests: hand-built nibble streams, exact packets and elements.

use crate::datapath::{DatapathOp, DatapathResp};
use crate::decoder::{DecodeMode, Pipeline, TraceComponent};
use crate::interfaces::TrcDataIn;
use crate::test_rig::{Rig, feed_ignoring_errors};

use super::*;

/// Packs nibbles given in stream order (hex digits, spaces ignored) into
/// bytes, low nibble first.
fn nib(s: &str) -> Vec<u8> {
    let n: Vec<u8> = s
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c.to_digit(16).expect("hex digit") as u8)
        .collect();
    assert!(n.len().is_multiple_of(2), "odd nibble count in test stream");
    n.chunks(2).map(|p| p[0] | (p[1] << 4)).collect()
}

/// 21 F nibbles then 0.
const ASYNC: &str = "FFFFFFFFFFFFFFFFFFFFF0";

/// The STM pipeline for trace ID 0x20, on tree slot 0x20 (errors come
/// from `PKTP_STM_0032`): packets listed and, if `decode`, elements.
fn stm(decode: bool) -> (Rig, Pipeline<StmProcessor>) {
    let mut rig = Rig::new(if decode {
        DecodeMode::FullDecode
    } else {
        DecodeMode::PacketsOnly
    });
    rig.ctx.instance_id = Some(0x20);
    let mut p = create_pipeline(StmConfig::with_trace_id(0x20), &rig.ctx);
    rig.monitor(&mut p, 0x20);
    (rig, p)
}

/// Decodes `data` (one block, then end of trace) and returns the listing.
fn listing(data: &[u8]) -> String {
    let (rig, mut p) = stm(true);
    rig.listing(&mut p, data)
}

/// The lines every stream below starts with: ASYNC at 0, VERSION 3 at 11.
const SYNC_V3: &str =
    "Idx:0; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:0; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:11; ID:20; [0x0f 0x30 ];\tVERSION:Version packet; Ver=3
";

fn v3(rest: &str) -> Vec<u8> {
    nib(&format!("{ASYNC} F003 {rest}"))
}

fn expect(data: &[u8], lines: &str) {
    assert_eq!(listing(data), lines);
}

#[test]
fn sync_version_freq_null() {
    expect(
        &v3("F08 01234567 0"),
        &format!(
            "{SYNC_V3}Idx:13; ID:20; [0x0f 0x08 0x21 0x43 0x65 0x07 ];\tFREQ:Frequency packet; Freq=19088743Hz
Idx:13; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x01234567; Freq)
Idx:19; ID:20; [0x00 ];\tNULL:Null packet
Idx:19; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        ),
    );
}

#[test]
fn master_channel_and_plain_data() {
    let s = "141 323 C5 4ab 51234 6deadbeef 70123456789abcdef F31234 356 401 102 403";
    expect(
        &v3(s),
        &format!(
            "{SYNC_V3}Idx:13; ID:20; [0x41 0x31 ];\tM8:Set current master; Master=0x41
Idx:15; ID:20; [0x30 0x32 ];\tC8:Set current channel; Chan=0x0023
Idx:16; ID:20; [0x5c ];\tD4:4 bit data; Data=0x5
Idx:16; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x23) 0x5; )
Idx:17; ID:20; [0xa4 0x5b ];\tD8:8 bit data; Data=0xab
Idx:17; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x23) 0xab; )
Idx:19; ID:20; [0x50 0x21 0x43 ];\tD16:16 bit data; Data=0x1234
Idx:19; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x23) 0x1234; )
Idx:21; ID:20; [0xd6 0xae 0xbd 0xee 0x7f ];\tD32:32 bit data; Data=0xdeadbeef
Idx:21; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x23) 0xdeadbeef; )
Idx:26; ID:20; [0x70 0x10 0x32 0x54 0x76 0x98 0xba 0xdc 0xfe ];\tD64:64 bit data; Data=0x0123456789abcdef
Idx:26; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x23) 0x0123456789abcdef; )
Idx:34; ID:20; [0x3f 0x21 0x43 ];\tC16:Set current channel; Chan=0x1234
Idx:37; ID:20; [0x53 0x46 ];\tC8:Set current channel; Chan=0x1256
Idx:39; ID:20; [0x40 0x10 ];\tD8:8 bit data; Data=0x01
Idx:39; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x41; Ch:0x1256) 0x01; )
Idx:40; ID:20; [0x01 0x42 ];\tM8:Set current master; Master=0x02
Idx:42; ID:20; [0x40 0x30 ];\tD8:8 bit data; Data=0x03
Idx:42; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x02; Ch:0x00) 0x03; )
Idx:42; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        ),
    );
}

#[test]
fn markers_and_natural_binary_timestamps() {
    let s = "107 309 F85a F51234 2ab D71c 0 FE E0 A89abcdefD0123456789abcd F71122334455667788E0000000000000100 0";
    expect(
        &v3(s),
        &format!(
            "{SYNC_V3}Idx:13; ID:20; [0x01 0x37 ];\tM8:Set current master; Master=0x07
Idx:15; ID:20; [0x30 0x90 ];\tC8:Set current channel; Chan=0x0009
Idx:16; ID:20; [0x8f 0xa5 ];\tD8M:8 bit data + marker; Data=0x5a
Idx:16; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x07; Ch:0x09) 0x5a; +Mrk )
Idx:18; ID:20; [0x5f 0x21 0x43 0xa2 0xdb ];\tD16TS:16 bit data + timestamp; Data=0x1234; TS=0x00000000000000AB ~[0xAB]
Idx:18; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x07; Ch:0x09) 0x1234;  [ TS=0x0000000000ab]; )
Idx:23; ID:20; [0xd0 0x17 0x0c ];\tD4MTS:4 bit data + marker + timestamp; Data=0x7; TS=0x00000000000000AC ~[0xC]
Idx:23; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x07; Ch:0x09) 0x7; +Mrk  [ TS=0x0000000000ac]; )
Idx:25; ID:20; [0x00 ];\tNULL:Null packet
Idx:25; ID:20; [0xef ];\tFLAG:Flag packet
Idx:25; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x07; Ch:0x09) +Mrk )
Idx:26; ID:20; [0x0e ];\tFLAGTS:Flag packet + timestamp; TS=0x00000000000000AC
Idx:26; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x07; Ch:0x09) +Mrk  [ TS=0x0000000000ac]; )
Idx:27; ID:20; [0x8a 0xa9 0xcb 0xed 0xdf 0x10 0x32 0x54 0x76 0x98 0xba 0xdc ];\tD32MTS:32 bit data + marker + timestamp; Data=0x89abcdef; TS=0x000123456789ABCD ~[0x123456789ABCD]
Idx:27; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x07; Ch:0x09) 0x89abcdef; +Mrk  [ TS=0x123456789abcd]; )
Idx:39; ID:20; [0x7f 0x11 0x22 0x33 0x44 0x55 0x66 0x77 0x88 0x0e 0x00 0x00 0x00 0x00 0x00 0x00 0x01 0x00 ];\tD64TS:64 bit data + timestamp; Data=0x1122334455667788; TS=0x0000000000000100 ~[0x100]
Idx:39; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x07; Ch:0x09) 0x1122334455667788;  [ TS=0x000000000100]; )
Idx:57; ID:20; [0x00 ];\tNULL:Null packet
Idx:57; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        ),
    );
}

#[test]
fn gray_timestamps() {
    // Version 4: timestamps are gray coded; updates replace low gray bits.
    expect(
        &nib(&format!("{ASYNC} F004 F412 15 F434 27f 0")),
        "Idx:0; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:0; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:11; ID:20; [0x0f 0x40 ];\tVERSION:Version packet; Ver=4
Idx:13; ID:20; [0x4f 0x21 0x51 ];\tD8TS:8 bit data + timestamp; Data=0x12; TS=0x0000000000000006 ~[0x6]
Idx:13; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x12;  [ TS=0x000000000006]; )
Idx:16; ID:20; [0x4f 0x43 0x72 0x0f ];\tD8TS:8 bit data + timestamp; Data=0x34; TS=0x0000000000000055 ~[0x55]
Idx:16; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x34;  [ TS=0x000000000055]; )
Idx:20; ID:20; [0x00 ];\tNULL:Null packet
Idx:20; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
",
    );
}

#[test]
fn trigger_and_null_timestamp() {
    expect(
        &v3("F06a5 F075a13 F01212"),
        &format!(
            "{SYNC_V3}Idx:13; ID:20; [0x0f 0xa6 0xf5 ];\tTRIG:Trigger packet; TrigData=0xa5
Idx:13; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0xa5; Trig )
Idx:16; ID:20; [0xf0 0x70 0xa5 0x31 ];\tTRIGTS:Trigger packet + timestamp; TrigData=0x5a; TS=0x0000000000000003 ~[0x3]
Idx:16; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x5a; Trig  [ TS=0x000000000003]; )
Idx:19; ID:20; [0x0f 0x21 0x21 ];\tNULL:Null packet; TS=0x0000000000000012 ~[0x12]
Idx:19; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??)  [ TS=0x000000000012]; )
Idx:19; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        ),
    );
}

#[test]
fn master_and_global_errors() {
    // MERR clears the channel; GERR clears the master and the ids' validity.
    expect(
        &v3("105 307 209 411 F20a 422 106 433 0"),
        &format!(
            "{SYNC_V3}Idx:13; ID:20; [0x01 0x35 ];\tM8:Set current master; Master=0x05
Idx:15; ID:20; [0x30 0x70 ];\tC8:Set current channel; Chan=0x0007
Idx:16; ID:20; [0x02 0x49 ];\tMERR:Master Error
Idx:16; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x05; Ch:0x00) 0x09; {{Master Error.}})
Idx:18; ID:20; [0x40 0x11 ];\tD8:8 bit data; Data=0x11
Idx:18; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x05; Ch:0x00) 0x11; )
Idx:19; ID:20; [0x2f 0xa0 ];\tGERR:Global Error
Idx:19; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE({{Global Error.}})
Idx:21; ID:20; [0x24 0x12 ];\tD8:8 bit data; Data=0x22
Idx:21; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x22; )
Idx:23; ID:20; [0x10 0x60 ];\tM8:Set current master; Master=0x06
Idx:24; ID:20; [0x34 0x03 ];\tD8:8 bit data; Data=0x33
Idx:24; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x06; Ch:0x00) 0x33; )
Idx:26; ID:20; [0x00 ];\tNULL:Null packet
Idx:26; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        ),
    );
}

const RESERVED_ERR: &str = "PKTP_STM_0032 : 0x0014 (OCSD_ERR_INVALID_PCKT_HDR) [Invalid packet header]; TrcIdx={}; CS ID=20; STM: Unsupported or Reserved STPv2 Header";

fn reserved_err(idx: u32) -> String {
    RESERVED_ERR.replace("{}", &idx.to_string())
}

#[test]
fn reserved_headers_listed_and_processing_goes_on() {
    // Packet listing only: the processor reports each reserved header and
    // carries on with the next.
    let (rig, mut p) = stm(false);
    assert_eq!(rig.send(&mut p, 0, &v3("F1 F02 F09 412 0")), DatapathResp::Cont);
    rig.eot(&mut p);
    let sync = "Idx:0; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:11; ID:20; [0x0f 0x30 ];\tVERSION:Version packet; Ver=3
";
    assert_eq!(
        rig.take(),
        format!(
            "{sync}{}Idx:13; ID:20; [0x1f ];\tRESERVED:Reserved Packet Header
{}Idx:14; ID:20; [0x0f 0xf2 ];\tRESERVED:Reserved Packet Header
{}Idx:16; ID:20; [0xf0 0x90 ];\tRESERVED:Reserved Packet Header
Idx:17; ID:20; [0x14 0x02 ];\tD8:8 bit data; Data=0x12
Idx:19; ID:20; [0x00 ];\tNULL:Null packet
ID:20\tEND OF TRACE DATA
",
            reserved_err(13),
            reserved_err(14),
            reserved_err(16)
        )
    );
}

#[test]
fn bad_packet_is_fatal_to_decode_then_resync() {
    // With the decoder, a reserved header stops the data path (as in
    // OpenCSD, which logs no packet processor error in full decode: its
    // error logger is attached to the decoder only); a client that carries
    // on gets NO_SYNC [bad-packet] and decode resumes at the next ASYNC.
    let (rig, mut p) = stm(true);
    let first = v3("F1 00");
    let (resp, used) = p.trace_data_in(DatapathOp::Data, 0, &first);
    assert_eq!(resp, DatapathResp::FatalInvalidData);
    assert_eq!(used, 14);
    assert_eq!(
        rig.take(),
        format!("{SYNC_V3}Idx:13; ID:20; [0x1f ];\tRESERVED:Reserved Packet Header\n")
    );
    assert_eq!(rig.send(&mut p, 14, &first[14..]), DatapathResp::Cont);
    let more = nib(&format!("412 0 {ASYNC} 412 0"));
    assert_eq!(rig.send(&mut p, 15, &more), DatapathResp::Cont);
    rig.eot(&mut p);
    assert_eq!(
        rig.take(),
        "Idx:14; ID:20; [0x00 ];\tNULL:Null packet
Idx:14; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [bad-packet])
Idx:15; ID:20; [0x00 ];\tNULL:Null packet
Idx:15; ID:20; [0x14 0x02 ];\tD8:8 bit data; Data=0x12
Idx:17; ID:20; [0x00 ];\tNULL:Null packet
Idx:17; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:28; ID:20; [0x14 0x02 ];\tD8:8 bit data; Data=0x12
Idx:28; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x12; )
Idx:30; ID:20; [0x00 ];\tNULL:Null packet
Idx:30; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
    );
}

fn bad_seq_err(idx: u32, msg: &str) -> String {
    format!("PKTP_STM_0032 : 0x0013 (OCSD_ERR_BAD_PACKET_SEQ) [Bad packet sequence]; TrcIdx={idx}; CS ID=20; {msg}")
}

#[test]
fn bad_sequences() {
    // Unknown version, timestamp size F, a timestamp before any VERSION
    // (encoding unknown), and FF not followed by an ASYNC. Listed packets
    // only, so processing goes on after each.
    let cases: [(String, String); 4] = [
        (
            format!("{ASYNC} F005 412 0"),
            format!(
                "{}Idx:11; ID:20; [0x0f 0x50 ];\tBAD_SEQUENCE:Invalid sequence in packet[VERSION]
Idx:13; ID:20; [0x14 0x02 ];\tD8:8 bit data; Data=0x12
Idx:15; ID:20; [0x00 ];\tNULL:Null packet
",
                bad_seq_err(11, "STM VERSION packet : unrecognised version number.")
            ),
        ),
        (
            format!("{ASYNC} F003 F412F 0"),
            format!(
                "Idx:11; ID:20; [0x0f 0x30 ];\tVERSION:Version packet; Ver=3
{}Idx:13; ID:20; [0x4f 0x21 0x0f ];\tBAD_SEQUENCE:Invalid sequence in packet[D8]
Idx:16; ID:20; [0x00 ];\tNULL:Null packet
",
                bad_seq_err(13, "STM: Invalid timestamp size 0xF")
            ),
        ),
        (
            format!("{ASYNC} F412 13"),
            format!(
                "{}Idx:11; ID:20; [0x4f 0x21 0x31 ];\tBAD_SEQUENCE:Invalid sequence in packet[D8]
",
                bad_seq_err(11, "STM: unknown timestamp encoding")
            ),
        ),
        (
            format!("{ASYNC} F003 FF1 412 00"),
            format!(
                "Idx:11; ID:20; [0x0f 0x30 ];\tVERSION:Version packet; Ver=3
{}Idx:13; ID:20; [0xff 0x41 ];\tBAD_SEQUENCE:Invalid sequence in packet[VERSION]
Idx:15; ID:20; [0x40 0x21 ];\tD8:8 bit data; Data=0x12
Idx:16; ID:20; [0x00 ];\tNULL:Null packet
Idx:17; ID:20; [0x00 ];\tNULL:Null packet
",
                bad_seq_err(13, "STM: Invalid ASYNC sequence")
            ),
        ),
    ];
    let sync = "Idx:0; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet\n";
    for (stream, lines) in cases {
        let (rig, mut p) = stm(false);
        assert_eq!(rig.send(&mut p, 0, &nib(&stream)), DatapathResp::Cont);
        assert_eq!(rig.take(), format!("{sync}{lines}"), "stream {stream}");
    }
}

#[test]
fn notsync_data_before_async() {
    // Bytes before the sync are listed as NOTSYNC; the ASYNC is shown
    // whole and indexed at its first F.
    expect(
        &nib(&format!("1234 {ASYNC} F003")),
        "Idx:0; ID:20; [0x21 0x43 ];\tNOTSYNC:STM not synchronised
Idx:0; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:2; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:13; ID:20; [0x0f 0x30 ];\tVERSION:Version packet; Ver=3
Idx:13; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
",
    );
}

#[test]
fn sync_with_extra_f_nibbles() {
    // More than 21 F before the 0: the extra ones go out as NOTSYNC, then
    // the ASYNC (which here starts with the held high nibble of the byte
    // holding the sync's 0, shown as OpenCSD shows it).
    let f23 = "F".repeat(23);
    expect(
        &nib(&format!("1{f23}0 F003 0")),
        "Idx:0; ID:20; [0xf1 0xff ];\tNOTSYNC:STM not synchronised
Idx:0; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:0; ID:20; [0xf0 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:13; ID:20; [0xf0 0x00 0x03 ];\tVERSION:Version packet; Ver=3
Idx:15; ID:20; [0x00 ];\tNULL:Null packet
Idx:15; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
",
    );
}

#[test]
fn sync_split_across_blocks() {
    let (rig, mut p) = stm(true);
    let all = nib(&format!("12 FFFF {} 0 F003", "F".repeat(17)));
    rig.send(&mut p, 0, &all[..3]);
    rig.send(&mut p, 3, &all[3..]);
    rig.eot(&mut p);
    assert_eq!(
        rig.take(),
        "Idx:0; ID:20; [0x21 ];\tNOTSYNC:STM not synchronised
Idx:0; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:1; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:12; ID:20; [0x0f 0x30 ];\tVERSION:Version packet; Ver=3
Idx:12; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
    );
}

#[test]
fn notsync_counts_nibbles_carried_from_the_last_block() {
    // F nibbles held at the end of one block are counted again in the
    // next: OpenCSD lists that many bytes, reading past the block. What
    // lies there is shown when known (see the deformatter test below);
    // for an unformatted block nothing more is shown.
    let (rig, mut p) = stm(true);
    rig.send(&mut p, 0, &nib("12FF"));
    rig.send(&mut p, 2, &nib("3456"));
    assert_eq!(
        rig.take(),
        "Idx:0; ID:20; [0x21 ];\tNOTSYNC:STM not synchronised
Idx:0; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
Idx:2; ID:20; [0x43 0x65 ];\tNOTSYNC:STM not synchronised
"
    );
}

#[test]
fn notsync_overread_shows_deformatter_record() {
    use crate::deformatter::{DeformatterConfig, FrameDeformatter};
    use crate::test_rig::IdStreamTable;
    // Frame 1: ID 0x20, then 14 bytes ending in twelve F nibbles. Frame 2:
    // 15 bytes without F. The second NOTSYNC lists 21 bytes: its 15 and
    // what follows them in OpenCSD's record (valid = 15, used = 0).
    let mut frames = vec![
        0x41, 0x21, 0x42, 0x65, 0x86, 0xa9, 0xca, 0xed, 0x0e, 0xff, 0xfe, 0xff, 0xfe, 0xff, 0xfe, 0xfe,
    ];
    frames.extend([
        0x12, 0x34, 0x56, 0x78, 0x12, 0x34, 0x56, 0x78, 0x12, 0x34, 0x56, 0x78, 0x12, 0x34, 0x56, 0x00,
    ]);
    let (rig, p) = stm(false);
    let mut table = IdStreamTable::default();
    table.attach(0x20, Box::new(p)).unwrap();
    let mut d = FrameDeformatter::new(DeformatterConfig::mem_aligned());
    let (resp, used) = d.trace_data_in(DatapathOp::Data, 0, &frames, &mut table);
    assert_eq!((resp, used), (DatapathResp::Cont, 32));
    assert_eq!(
        rig.take(),
        "Idx:0; ID:20; [0x21 0x43 0x65 0x87 0xa9 0xcb 0xed 0x0f ];\tNOTSYNC:STM not synchronised
Idx:16; ID:20; [0x12 0x34 0x56 0x78 0x12 0x34 0x56 0x78 0x12 0x34 0x56 0x78 0x12 0x34 0x56 0x0f 0x00 0x00 0x00 0x00 0x00 ];\tNOTSYNC:STM not synchronised
"
    );
}

#[test]
fn incomplete_packet_at_end_of_trace() {
    expect(
        &v3("612340"),
        &format!(
            "{SYNC_V3}Idx:13; ID:20; [0x16 0x32 0x04 ];\tINCOMPLETE_EOT:Incomplete packet flushed at end of trace[D32]
Idx:13; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        ),
    );
}

#[test]
fn reset_needs_a_new_async() {
    let (rig, mut p) = stm(true);
    rig.send(&mut p, 0, &v3("412 0"));
    p.trace_data_in(DatapathOp::Reset, 16, &[]);
    rig.send(&mut p, 16, &nib(&format!("4321 {ASYNC} F003 456 0")));
    rig.eot(&mut p);
    assert_eq!(
        rig.take(),
        format!(
            "{SYNC_V3}Idx:13; ID:20; [0x14 0x02 ];\tD8:8 bit data; Data=0x12
Idx:13; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x12; )
Idx:15; ID:20; [0x00 ];\tNULL:Null packet
ID:20\tRESET operation on trace decode path
Idx:16; ID:20; [0x34 0x12 ];\tNOTSYNC:STM not synchronised
Idx:16; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [reset-decoder])
Idx:18; ID:20; [0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0xff 0x0f ];\tASYNC:Alignment synchronisation packet
Idx:29; ID:20; [0x0f 0x30 ];\tVERSION:Version packet; Ver=3
Idx:31; ID:20; [0x54 0x06 ];\tD8:8 bit data; Data=0x56
Idx:31; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x56; )
Idx:33; ID:20; [0x00 ];\tNULL:Null packet
Idx:33; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        )
    );
}

#[test]
fn same_listing_with_waits_and_one_byte_blocks() {
    let s = v3("107 309 F85a F51234 2ab D71c 0 FE E0 F06a5 F075a13 F01212 105 209 F20a 422 0 612340");
    let plain = listing(&s);
    for waits in [1, 2, 5, 100] {
        let (rig, mut p) = stm(true);
        rig.elems.borrow_mut().set_test_waits(waits);
        // Sync in one block (where blocks split unsynchronised data
        // changes what is listed), then a byte at a time.
        rig.feed(&mut p, 0, &s[..13], 13);
        rig.feed(&mut p, 13, &s[13..], 1);
        rig.eot(&mut p);
        assert_eq!(rig.take(), plain, "test_waits {waits}");
    }
}

#[test]
fn factory_reads_stmtcsr() {
    let f = factory();
    assert_eq!(f.protocol_name(), "STM");
    let cfg = crate::decoder::SourceConfig {
        regs: vec![("STMTCSR".into(), 0x00A0_0007)],
        ..Default::default()
    };
    assert_eq!(f.trace_id(&cfg), 0x20);
    assert_eq!(StmConfig { tcsr: 0x00A0_0007 }.trace_id(), 0x20);
    assert_eq!(StmConfig::with_trace_id(0x10).tcsr, 0x0010_0000);
}

#[test]
fn remaining_data_variants() {
    // D4M, D4TS, D16M, D32M, D64M, D8MTS, D16MTS, D64MTS, D32TS.
    expect(
        &v3("FD3 FC512 F9abcd FA01234567 FB0123456789abcdef 81213 9123414 B111122223333444415 F689abcdef16 0"),
        &format!(
            "{SYNC_V3}Idx:13; ID:20; [0xdf 0xf3 ];\tD4M:4 bit data + marker; Data=0x3
Idx:13; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x3; +Mrk )
Idx:15; ID:20; [0xf0 0x5c 0x21 ];\tD4TS:4 bit data + timestamp; Data=0x5; TS=0x0000000000000002 ~[0x2]
Idx:15; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x5;  [ TS=0x000000000002]; )
Idx:17; ID:20; [0x9f 0xba 0xdc ];\tD16M:16 bit data + marker; Data=0xabcd
Idx:17; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0xabcd; +Mrk )
Idx:20; ID:20; [0xaf 0x10 0x32 0x54 0x76 ];\tD32M:32 bit data + marker; Data=0x01234567
Idx:20; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x01234567; +Mrk )
Idx:25; ID:20; [0xbf 0x10 0x32 0x54 0x76 0x98 0xba 0xdc 0xfe ];\tD64M:64 bit data + marker; Data=0x0123456789abcdef
Idx:25; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x0123456789abcdef; +Mrk )
Idx:34; ID:20; [0x18 0x12 0x93 ];\tD8MTS:8 bit data + marker + timestamp; Data=0x12; TS=0x0000000000000003 ~[0x3]
Idx:34; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x12; +Mrk  [ TS=0x000000000003]; )
Idx:37; ID:20; [0x90 0x21 0x43 0x41 ];\tD16MTS:16 bit data + marker + timestamp; Data=0x1234; TS=0x0000000000000004 ~[0x4]
Idx:37; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x1234; +Mrk  [ TS=0x000000000004]; )
Idx:40; ID:20; [0x1b 0x11 0x21 0x22 0x32 0x33 0x43 0x44 0x14 0xf5 ];\tD64MTS:64 bit data + marker + timestamp; Data=0x1111222233334444; TS=0x0000000000000005 ~[0x5]
Idx:40; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x1111222233334444; +Mrk  [ TS=0x000000000005]; )
Idx:50; ID:20; [0xf0 0x86 0xa9 0xcb 0xed 0x1f 0x06 ];\tD32TS:32 bit data + timestamp; Data=0x89abcdef; TS=0x0000000000000006 ~[0x6]
Idx:50; ID:20; OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x89abcdef;  [ TS=0x000000000006]; )
Idx:56; ID:20; [0x00 ];\tNULL:Null packet
Idx:56; ID:20; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])
ID:20\tEND OF TRACE DATA
"
        ),
    );
}

#[test]
fn arbitrary_bytes_never_panic_or_stall() {
    // Pseudo-random data (with runs of F nibbles to hit sync paths), in
    // random block sizes, packets only and full decode.
    let mut x: u32 = 0x1234_5678;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let mut data = Vec::with_capacity(40_000);
    while data.len() < 40_000 {
        let r = rnd();
        if r % 16 == 0 {
            data.extend(std::iter::repeat_n(0xff, (r >> 8) as usize % 16));
            data.push(0x0f);
        } else {
            data.push((r >> 8) as u8);
        }
    }
    for decode in [false, true] {
        let (_rig, mut p) = stm(decode);
        feed_ignoring_errors(&mut p, &data);
    }
}

/// Collects stream index entries.
struct Entries(std::sync::Arc<std::sync::Mutex<Vec<crate::hooks::StreamEntry>>>);

impl crate::hooks::StreamIndexer for Entries {
    fn entry(&mut self, entry: crate::hooks::StreamEntry) {
        self.0.lock().unwrap().push(entry);
    }
}

#[test]
fn a_sync_in_a_high_nibble_is_indexed_where_it_starts_and_decoded_from_there() {
    // An odd number of nibbles before the second ASYNC: its first F is the
    // high nibble of byte 14; OpenCSD lists it at byte 15.
    let data = nib(&format!("{ASYNC} F003 141 {ASYNC} F003 141 323 4ab"));
    let (rig, mut p) = stm(true);
    let entries = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    p.attach_indexer(Box::new(Entries(entries.clone()))).unwrap();
    let full = rig.listing(&mut p, &data);
    let syncs: Vec<(u64, u64)> = entries
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.kind == crate::hooks::EntryKind::Sync)
        .map(|e| (e.index, e.value))
        .collect();
    // The first at byte 0 (value 0: start there); the second listed at 15,
    // starting in the high nibble of byte 14.
    assert_eq!(syncs, [(0, 0), (15, 14 << 1 | 1)]);
    let elements = |text: &str, from: u64| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("OCSD_GEN_TRC_ELEM_"))
            .filter(|l| l["Idx:".len()..l.find(';').unwrap()].parse::<u64>().unwrap() >= from)
            .map(str::to_string)
            .collect()
    };
    // Started at byte 14 in its high nibble: the decoder's NO_SYNC at the
    // sync point, then exactly the full decode's elements from there.
    let (rig, mut p) = stm(true);
    p.start_at_high_nibble().unwrap();
    rig.feed(&mut p, 14, &data[14..], data.len());
    rig.eot(&mut p);
    let window = rig.take();
    let mut want = vec!["Idx:15; ID:20; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])".to_string()];
    want.extend(elements(&full, 15));
    assert_eq!(want.len(), 3, "{full}");
    assert_eq!(elements(&window, 0), want, "{window}");
    // Started at its listed index, byte 15: the sync's first F is lost
    // and it is not found.
    let (rig, mut p) = stm(true);
    rig.feed(&mut p, 15, &data[15..], data.len());
    rig.eot(&mut p);
    assert!(!rig.take().contains("ASYNC"));
}
