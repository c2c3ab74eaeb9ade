//! Printers that turn packets, elements and raw frames into OpenCSD's
//! listing lines.

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::element::TraceElement;
use crate::format_pool::{line_start, pool_of, write_elem_line};
use crate::interfaces::{PktDataIn, PktRawDataMon, RawFrameKind, TrcGenElemIn, TrcRawFrameIn};
use crate::logger::MsgLogger;
use crate::shared::Shared;
use crate::text::{Line, TextBuf, TextOut};

/// A packet that can describe itself the way OpenCSD's packet `toString`
/// does (the text after the raw bytes in a listing).
pub trait TracePacket {
    /// Appends the packet's description to `out` (without a newline).
    fn write_desc(&self, out: &mut String);

    /// Appends the same description to a listing's buffer. The default
    /// writes it with [`write_desc`](Self::write_desc) into `scratch` (a
    /// string the caller keeps, so nothing is allocated per packet) and
    /// copies it; a protocol whose packets are listed by the million
    /// writes the frequent ones straight into `out`.
    #[inline]
    fn write_text(&self, out: &mut TextBuf, scratch: &mut String) {
        scratch.clear();
        self.write_desc(scratch);
        out.put_str(scratch);
    }

    /// Writes the description into a line window when this packet is
    /// one the protocol writes that way (true), or nothing (false: the
    /// caller uses [`write_text`](Self::write_text)).
    #[inline]
    fn write_line(&self, out: &mut Line<'_>) -> bool {
        let _ = out;
        false
    }
}

/// A packet monitor's line after its start, up to the description:
/// ` [0x.. ];\t`.
#[inline(always)]
fn mon_start<W: TextOut>(t: &mut W, raw: &[u8]) {
    t.put(b" [");
    for &b in raw {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        t.put(&[b'0', b'x', DIGITS[(b >> 4) as usize], DIGITS[(b & 0xf) as usize], b' ']);
    }
    t.put(b"];\t");
}

/// Counts down forced `Wait` responses (the lister's `-test_waits N`: the
/// first N items answer `Wait`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TestWaits {
    remaining: u32,
}

impl TestWaits {
    /// A counter forcing `n` waits.
    pub(crate) fn new(n: u32) -> Self {
        TestWaits { remaining: n }
    }
    /// Waits still to be forced.
    pub(crate) fn remaining(&self) -> u32 {
        self.remaining
    }
    fn next(&mut self) -> DatapathResp {
        if self.remaining > 0 {
            self.remaining -= 1;
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
    }
}

/// Prints packets of one trace ID: as the packet sink in packet-only mode
/// (`Idx:..; ID:..;\tdesc`), or as a monitor with raw bytes
/// (`Idx:..; ID:..; [0x.. ];\tdesc`).
pub struct PacketPrinter {
    trace_id: u8,
    out: Shared<MsgLogger>,
    waits: TestWaits,
    mute: bool,
    line: String,
}

impl PacketPrinter {
    /// A printer for trace ID `trace_id`, writing its lines to `out`.
    pub fn new(trace_id: u8, out: Shared<MsgLogger>) -> Self {
        PacketPrinter {
            trace_id,
            out,
            waits: TestWaits::default(),
            mute: false,
            line: String::with_capacity(256),
        }
    }

    /// Forces `Wait` on the first `n` packets (packet-only mode).
    pub fn set_test_waits(&mut self, n: u32) {
        self.waits = TestWaits::new(n);
    }

    /// Prints nothing (profiling); as a packet sink it still answers
    /// with its forced waits.
    pub fn set_mute(&mut self, mute: bool) {
        self.mute = mute;
    }

    fn non_data(&mut self, op: DatapathOp) {
        if self.mute {
            return;
        }
        let text = match op {
            DatapathOp::Eot => "END OF TRACE DATA",
            DatapathOp::Reset => "RESET operation on trace decode path",
            _ => return,
        };
        let mut out = self.out.borrow_mut();
        let t = out.text();
        t.put(b"ID:");
        t.hex(self.trace_id as u64);
        t.ascii(b'\t');
        t.put_str(text);
        t.ascii(b'\n');
    }
}

impl<P: TracePacket> PktDataIn<P> for PacketPrinter {
    fn packet_data_in(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&P>) -> DatapathResp {
        match (op, pkt) {
            (DatapathOp::Data, Some(_)) if self.mute => self.waits.next(),
            (DatapathOp::Data, Some(pkt)) => {
                let mut out = self.out.borrow_mut();
                let t = out.text();
                line_start(t, index, self.trace_id);
                t.ascii(b'\t');
                pkt.write_text(t, &mut self.line);
                t.ascii(b'\n');
                drop(out);
                self.waits.next()
            }
            (op, _) => {
                self.non_data(op);
                DatapathResp::Cont
            }
        }
    }
}

impl<P: TracePacket> PktRawDataMon<P> for PacketPrinter {
    fn raw_packet_data_mon(&mut self, op: DatapathOp, index: TrcIndex, pkt: Option<&P>, raw: &[u8]) {
        match (op, pkt) {
            (DatapathOp::Data, Some(_)) if self.mute => {}
            (DatapathOp::Data, Some(pkt)) => {
                let mut out = self.out.borrow_mut();
                let t = out.text();
                let mut l = t.line();
                l.idx_start(index, self.trace_id);
                mon_start(&mut l, raw);
                if pkt.write_line(&mut l) {
                    l.ascii(b'\n');
                    if l.finish() {
                        return;
                    }
                }
                line_start(t, index, self.trace_id);
                mon_start(t, raw);
                pkt.write_text(t, &mut self.line);
                t.ascii(b'\n');
            }
            (op, _) => self.non_data(op),
        }
    }
}

/// Prints generic elements: `Idx:..; ID:..; OCSD_GEN_TRC_ELEM_...(...)`.
pub struct GenElemPrinter {
    out: Shared<MsgLogger>,
    waits: TestWaits,
    need_ack: bool,
    mute: bool,
    count: u64,
}

impl GenElemPrinter {
    /// A printer writing its lines to `out`.
    pub fn new(out: Shared<MsgLogger>) -> Self {
        GenElemPrinter {
            out,
            waits: TestWaits::default(),
            need_ack: false,
            mute: false,
            count: 0,
        }
    }
    /// Forces `Wait` on the first `n` elements.
    pub fn set_test_waits(&mut self, n: u32) {
        self.waits = TestWaits::new(n);
    }
    /// A `Wait` was returned and not yet acknowledged by the caller.
    pub fn need_ack_wait(&self) -> bool {
        self.need_ack
    }
    /// The caller has seen the `Wait`: the next element is expected.
    pub fn ack_wait(&mut self) {
        self.need_ack = false;
    }
    /// Counts elements without printing them (profiling).
    pub fn set_mute(&mut self, mute: bool) {
        self.mute = mute;
    }
    /// Number of elements received (printed or muted).
    pub fn element_count(&self) -> u64 {
        self.count
    }
}

impl TrcGenElemIn for GenElemPrinter {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.count += 1;
        if !self.mute {
            let mut out = self.out.borrow_mut();
            match pool_of(&mut out) {
                Some(pool) => pool.elem(index, trace_id, elem),
                None => write_elem_line(out.text(), index, trace_id, elem),
            }
        }
        if self.need_ack {
            self.out
                .borrow_mut()
                .log_msg("ERROR: Generic Element Printer; New element without previous _WAIT acknowledged\n");
            self.need_ack = false;
        }
        let resp = self.waits.next();
        if resp.is_wait() {
            self.need_ack = true;
        }
        resp
    }

    /// With no forced wait to give and none to report, a run of elements
    /// is counted and (unless muted) printed with one borrow of the
    /// output; otherwise they go one by one.
    #[inline]
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        if !self.need_ack && self.waits.remaining() == 0 {
            self.count += elems.len() as u64;
            if !self.mute {
                self.print_run(trace_id, elems);
            }
            return (DatapathResp::Cont, elems.len());
        }
        self.elems_one_by_one(trace_id, elems)
    }
}

impl GenElemPrinter {
    /// Prints a run of elements with one borrow of the output.
    #[inline(never)]
    fn print_run(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) {
        let mut out = self.out.borrow_mut();
        if let Some(pool) = pool_of(&mut out) {
            pool.elems(trace_id, elems);
            return;
        }
        for (index, elem) in elems {
            write_elem_line(out.text(), *index, trace_id, elem);
        }
    }

    #[inline(never)]
    fn elems_one_by_one(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        crate::interfaces::elems_one_by_one(self, trace_id, elems)
    }
}

/// Prints raw frames and unpacked per-ID data
/// (`Frame Data; Index    N;    RAW_PACKED; ff ff ...`).
pub struct RawFramePrinter {
    out: Shared<MsgLogger>,
}

impl RawFramePrinter {
    /// A printer writing its lines to `out`.
    pub fn new(out: Shared<MsgLogger>) -> Self {
        RawFramePrinter { out }
    }
}

impl TrcRawFrameIn for RawFramePrinter {
    fn trace_raw_frame_in(
        &mut self,
        op: DatapathOp,
        index: TrcIndex,
        kind: RawFrameKind,
        data: &[u8],
        trace_id: Option<u8>,
    ) {
        if op != DatapathOp::Data {
            return;
        }
        let mut out = self.out.borrow_mut();
        let t = out.text();
        t.put(b"Frame Data; Index");
        t.dec_right(index, 7);
        t.put(b"; ");
        match kind {
            RawFrameKind::Packed => t.put(b"   RAW_PACKED; "),
            RawFrameKind::HSync => t.put(b"        HSYNC; "),
            RawFrameKind::FSync => t.put(b"        FSYNC; "),
            RawFrameKind::IdData => {
                t.put(b"  ID_DATA[");
                match trace_id {
                    Some(id) => {
                        t.put(b"0x");
                        t.hex2(id);
                    }
                    None => t.put(b"????"),
                }
                t.put(b"]; ");
            }
        }
        for (i, &b) in data.iter().enumerate() {
            if i > 0 && i % 16 == 0 {
                t.ascii(b'\n');
            }
            t.hex2(b);
            t.ascii(b' ');
        }
        t.ascii(b'\n');
    }
}

/// Where a listing line (a packet's or an element's, as these printers write
/// them: OpenCSD 1.8.0's wording) says more than OpenCSD 1.3.3's printers
/// did: the bytes to leave out for 1.3.3's line, or `None` when the two
/// versions print the same. Three descriptions differ between the versions
/// (measured against Debian's 1.3.3 `trc_pkt_lister` and perf 6.1, which
/// is built on it): 1.3.3 gives no memory space with ADDR_NACC elements,
/// no commit count with ETMv4 cycle count packets and no sync-point note
/// with trace info packets.
pub fn opencsd_1_3_cut(line: &str) -> Option<std::ops::Range<usize>> {
    if let Some(at) = line.find("OCSD_GEN_TRC_ELEM_ADDR_NACC(")
        && let Some(ms) = line[at..].find("; Memspace [")
    {
        let start = at + ms;
        // Up to the `]`, keeping the space before the element's `)`.
        return line[start..].find("] )").map(|close| start..start + close + 1);
    }
    if line.contains("I_TRACE_INFO") {
        const NOTE: &str = "; Decoder Sync point TINFO";
        if let Some(at) = line.find(NOTE) {
            return Some(at..at + NOTE.len());
        }
    }
    if line.contains("I_CCNT_F")
        && let Some(at) = line.rfind("; Commit(")
        && line[at..].trim_end().ends_with(')')
        && let Some(close) = line[at..].find(')')
    {
        return Some(at..at + close + 1);
    }
    None
}

/// `line` in OpenCSD 1.3.3's wording (see [`opencsd_1_3_cut`]). Besides
/// the cuts, 1.3.3 describes an `I_ADDR_CTXT_L_32IS1` packet with the
/// IS0 packet's words ("32 bit, IS0.").
pub fn opencsd_1_3_text(line: &str) -> std::borrow::Cow<'_, str> {
    const IS1: &str = "I_ADDR_CTXT_L_32IS1 : Address & Context, Long, 32 bit, IS1.";
    if let Some(at) = line.find(IS1) {
        let digit = at + IS1.len() - 2;
        let mut s = String::with_capacity(line.len());
        s.push_str(&line[..digit]);
        s.push('0');
        s.push_str(&line[digit + 1..]);
        return std::borrow::Cow::Owned(s);
    }
    match opencsd_1_3_cut(line) {
        Some(cut) => {
            let mut s = String::with_capacity(line.len());
            s.push_str(&line[..cut.start]);
            s.push_str(&line[cut.end..]);
            std::borrow::Cow::Owned(s)
        }
        None => std::borrow::Cow::Borrowed(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::{ElemType, UnsyncInfo};
    use crate::shared::shared;

    struct P;
    impl TracePacket for P {
        fn write_desc(&self, out: &mut String) {
            out.push_str("I_ASYNC : Alignment Synchronisation.");
        }
    }

    #[test]
    fn packet_lines() {
        let out = shared(MsgLogger::capture());
        let mut p = PacketPrinter::new(0x10, out.clone());
        PktRawDataMon::<P>::raw_packet_data_mon(&mut p, DatapathOp::Data, 4, Some(&P), &[0x00, 0x80]);
        assert_eq!(
            PktDataIn::<P>::packet_data_in(&mut p, DatapathOp::Data, 16, Some(&P)),
            DatapathResp::Cont
        );
        PktRawDataMon::<P>::raw_packet_data_mon(&mut p, DatapathOp::Eot, 0, None, &[]);
        PktDataIn::<P>::packet_data_in(&mut p, DatapathOp::Reset, 0, None);
        assert_eq!(
            out.borrow().captured(),
            "Idx:4; ID:10; [0x00 0x80 ];\tI_ASYNC : Alignment Synchronisation.\n\
             Idx:16; ID:10;\tI_ASYNC : Alignment Synchronisation.\n\
             ID:10\tEND OF TRACE DATA\n\
             ID:10\tRESET operation on trace decode path\n"
        );
    }

    #[test]
    fn element_lines_and_test_waits() {
        let out = shared(MsgLogger::capture());
        let mut p = GenElemPrinter::new(out.clone());
        p.set_test_waits(1);
        let mut e = TraceElement::new(ElemType::NoSync);
        e.unsync_info = UnsyncInfo::InitDecoder;
        assert_eq!(p.trace_elem_in(86, 0x10, &e), DatapathResp::Wait);
        assert!(p.need_ack_wait());
        p.ack_wait();
        assert_eq!(p.trace_elem_in(87, 0x10, &e), DatapathResp::Cont);
        assert_eq!(
            out.borrow().captured(),
            "Idx:86; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])\nIdx:87; ID:10; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])\n"
        );
    }

    #[test]
    fn raw_frame_lines() {
        let out = shared(MsgLogger::capture());
        let mut p = RawFramePrinter::new(out.clone());
        let frame: Vec<u8> = [0xff, 0xff, 0xff, 0x7f, 0x03]
            .into_iter()
            .chain(std::iter::repeat_n(0, 15))
            .collect();
        p.trace_raw_frame_in(DatapathOp::Data, 0, RawFrameKind::Packed, &frame, None);
        p.trace_raw_frame_in(DatapathOp::Data, 4, RawFrameKind::IdData, &[0, 0x80], Some(1));
        p.trace_raw_frame_in(DatapathOp::Data, 4, RawFrameKind::IdData, &[0xd4], None);
        assert_eq!(
            out.borrow().captured(),
            "Frame Data; Index      0;    RAW_PACKED; ff ff ff 7f 03 00 00 00 00 00 00 00 00 00 00 00 \n00 00 00 00 \n\
             Frame Data; Index      4;   ID_DATA[0x01]; 00 80 \n\
             Frame Data; Index      4;   ID_DATA[????]; d4 \n"
        );
    }

    #[test]
    fn opencsd_1_3_wording() {
        assert_eq!(
            opencsd_1_3_text("Idx:1; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0xffffffc000081000; Memspace [0x4:EL2N] )\n"),
            "Idx:1; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0xffffffc000081000 )\n"
        );
        assert_eq!(
            opencsd_1_3_text(
                "Idx:1; ID:10; [0x01 0x01 0x00 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }; Decoder Sync point TINFO\n"
            ),
            "Idx:1; ID:10; [0x01 0x01 0x00 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }\n"
        );
        assert_eq!(
            opencsd_1_3_text("Idx:9; ID:10;\tI_CCNT_F2 : Cycle Count format 2.; Count=0x1; Commit(1)"),
            "Idx:9; ID:10;\tI_CCNT_F2 : Cycle Count format 2.; Count=0x1"
        );
        assert_eq!(
            opencsd_1_3_cut("Idx:9; ID:10;\tI_CCNT_F1 : Cycle Count format 1.; Commit(2"),
            None
        );
        assert_eq!(
            opencsd_1_3_cut("Idx:0; ID:10;\tI_ASYNC : Alignment Synchronisation."),
            None
        );
        assert_eq!(
            opencsd_1_3_text(
                "Idx:14; [0x83 0x01 0x9a 0x4f 0x00 0x00 ];\tI_ADDR_CTXT_L_32IS1 : Address & Context, Long, 32 bit, IS1.; Addr=0x00000000004F9A02; "
            ),
            "Idx:14; [0x83 0x01 0x9a 0x4f 0x00 0x00 ];\tI_ADDR_CTXT_L_32IS1 : Address & Context, Long, 32 bit, IS0.; Addr=0x00000000004F9A02; "
        );
        assert_eq!(opencsd_1_3_text("plain\n"), "plain\n");
    }
}
