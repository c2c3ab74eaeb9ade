//! ITM packet processor: bytes to [`ItmPacket`]s.
//!
//! ITM packets start with a header byte: bits 1:0 non-zero for a source
//! packet (software stimulus, or hardware/DWT when bit 2 is set) with 1, 2
//! or 4 payload bytes; `0x00` starts a synchronisation packet (at least
//! five `0x00` then `0x80`); `0x70` is overflow; other `xxxx0000` headers
//! are local timestamps; `0x94`/`0xb4` global timestamps; `xxxx1x00`
//! extensions. Timestamps and extensions carry continuation-coded
//! payloads (bit 7 set: another byte follows).
//!
//! Before the first synchronisation packet bytes are shown to the packet
//! monitor as NOTSYNC packets (in runs of at most eight) and one NOTSYNC
//! packet goes to the decoder, as OpenCSD does.

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::{PacketOut, PacketProcessor};
use crate::hooks::EntryKind;
use crate::logger::ErrLink;
use crate::pktproc::{Input, PktError, ProcState as State};

use super::packet::{ItmPacket, ItmPktType};

/// The routine that reads the current packet's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Source,
    LocalTs,
    GlobalTs1,
    GlobalTs2,
    Extension,
    Async,
}

/// The ITM packet processor.
pub struct ItmProcessor {
    trace_id: u8,
    err: Option<ErrLink>,

    state: State,
    step: Step,
    pkt: ItmPacket,
    stream_sync: bool,
    packet_index: TrcIndex,
    header: u8,
    /// The current packet's bytes (all of them: payloads are read back
    /// from here).
    raw: Vec<u8>,

    sent_notsync: bool,
    sync_start: bool,
    dump_unsynced: usize,
}

impl ItmProcessor {
    /// A processor for the source with CoreSight trace ID `trace_id`
    /// (used in error reports).
    pub(crate) fn new(trace_id: u8) -> Self {
        let mut p = ItmProcessor {
            trace_id,
            err: None,
            state: State::WaitSync,
            step: Step::Source,
            pkt: ItmPacket::default(),
            stream_sync: false,
            packet_index: 0,
            header: 0,
            raw: Vec::with_capacity(16),
            sent_notsync: false,
            sync_start: false,
            dump_unsynced: 0,
        };
        p.init_processor_state();
        p
    }

    /// Where errors are logged.
    pub(crate) fn set_error_link(&mut self, err: ErrLink) {
        self.err = Some(err);
    }

    fn init_processor_state(&mut self) {
        self.state = State::WaitSync;
        self.stream_sync = false;
        self.init_next_packet();
        self.sent_notsync = false;
        self.sync_start = false;
        self.dump_unsynced = 0;
    }

    fn init_next_packet(&mut self) {
        self.raw.clear();
        self.pkt.init();
    }

    fn read_byte(&mut self, inp: &mut Input) -> Option<u8> {
        let b = *inp.data.get(inp.used)?;
        inp.used += 1;
        self.raw.push(b);
        Some(b)
    }

    fn bad_sequence(&mut self, msg: &'static str) -> PktError {
        self.pkt.set_err(ItmPktType::BadSequence);
        PktError::bad_sequence(msg)
    }

    fn log(&self, e: &PktError) {
        if let Some(l) = &self.err {
            e.log(l, self.packet_index, self.trace_id);
        }
    }

    fn emit(&mut self, out: &mut PacketOut<'_, ItmPacket>) -> DatapathResp {
        if !self.raw.is_empty()
            && let Some(m) = out.mon.as_mut()
        {
            m.raw_packet_data_mon(DatapathOp::Data, self.packet_index, Some(&self.pkt), &self.raw);
        }
        let resp = match out.sink.as_mut() {
            Some(s) => s.packet_data_in(DatapathOp::Data, self.packet_index, Some(&self.pkt)),
            None => DatapathResp::Cont,
        };
        self.init_next_packet();
        self.state = if self.stream_sync {
            State::ProcHdr
        } else {
            State::WaitSync
        };
        resp
    }

    /// Shows the unsynchronised bytes gathered so far to the monitor (and
    /// the first time, a NOTSYNC packet to the decoder), then drops them.
    fn flush_unsynced(&mut self, out: &mut PacketOut<'_, ItmPacket>) -> DatapathResp {
        let n = self.dump_unsynced.min(self.raw.len());
        if n > 0
            && let Some(m) = out.mon.as_mut()
        {
            m.raw_packet_data_mon(DatapathOp::Data, self.packet_index, Some(&self.pkt), &self.raw[..n]);
        }
        let mut resp = DatapathResp::Cont;
        if !self.sent_notsync {
            if let Some(s) = out.sink.as_mut() {
                resp = s.packet_data_in(DatapathOp::Data, self.packet_index, Some(&self.pkt));
            }
            self.sent_notsync = true;
        }
        self.raw.drain(..n);
        self.dump_unsynced = 0;
        resp
    }

    /// At least five `0x00` (counting the header) then `0x80`. Returns
    /// whether the sequence completed; `Err` on any other byte.
    fn read_async_seq(&mut self, inp: &mut Input) -> Result<bool, ()> {
        while self.raw.len() < 5 {
            match self.read_byte(inp) {
                None => return Ok(false),
                Some(0) => {}
                Some(_) => return Err(()),
            }
        }
        loop {
            match self.read_byte(inp) {
                None => return Ok(false),
                Some(0x80) => return Ok(true),
                Some(0) => {}
                Some(_) => return Err(()),
            }
        }
    }

    fn wait_for_sync(&mut self, inp: &mut Input, out: &mut PacketOut<'_, ItmPacket>) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        self.pkt.pkt_type = ItmPktType::NotSync;
        self.dump_unsynced = 0;
        if !self.sync_start {
            self.packet_index = inp.index();
        }
        while !self.stream_sync && inp.more() && resp.is_cont() {
            if self.sync_start {
                match self.read_async_seq(inp) {
                    Ok(true) => {
                        self.stream_sync = true;
                        self.pkt.pkt_type = ItmPktType::Async;
                        self.state = State::SendPkt;
                    }
                    Ok(false) => {}
                    Err(()) => {
                        // Not a sync after all: back to looking for one.
                        self.dump_unsynced = self.raw.len();
                        self.sync_start = false;
                    }
                }
            }
            if !self.sync_start {
                let Some(b) = self.read_byte(inp) else { break };
                if b == 0 {
                    // A possible sync: list what came before it.
                    self.sync_start = true;
                    resp = self.flush_unsynced(out);
                    self.packet_index = inp.index() - 1;
                } else {
                    self.dump_unsynced += 1;
                    if self.dump_unsynced >= 8 {
                        resp = self.flush_unsynced(out);
                    }
                }
            }
        }
        if !self.stream_sync && !self.sync_start {
            resp = self.flush_unsynced(out);
        }
        resp
    }

    fn process_header(&mut self, inp: &mut Input) -> Result<(), PktError> {
        let Some(h) = self.read_byte(inp) else { return Ok(()) };
        self.header = h;
        let (t, step) = if h & 0x03 != 0 {
            (
                if h & 0x04 != 0 {
                    ItmPktType::Dwt
                } else {
                    ItmPktType::Swit
                },
                Step::Source,
            )
        } else if h & 0x0f == 0 {
            match h {
                0x00 => (ItmPktType::Async, Step::Async),
                0x70 => {
                    self.pkt.pkt_type = ItmPktType::Overflow;
                    self.state = State::SendPkt;
                    return Ok(());
                }
                _ => (ItmPktType::TsLocal, Step::LocalTs),
            }
        } else if h & 0x0b == 0x08 {
            (ItmPktType::Extension, Step::Extension)
        } else if h & 0xdf == 0x94 {
            if h & 0x20 == 0 {
                (ItmPktType::TsGlobal1, Step::GlobalTs1)
            } else {
                (ItmPktType::TsGlobal2, Step::GlobalTs2)
            }
        } else {
            self.pkt.pkt_type = ItmPktType::Reserved;
            return Err(PktError::header(""));
        };
        self.pkt.pkt_type = t;
        self.step = step;
        self.state = State::ProcData;
        Ok(())
    }

    /// Reads continuation-coded bytes until one without bit 7 or until the
    /// packet holds `limit` bytes. Returns whether the last byte was seen.
    fn read_cont_bytes(&mut self, limit: usize, inp: &mut Input) -> bool {
        while self.raw.len() < limit {
            match self.read_byte(inp) {
                None => return false,
                Some(b) if b & 0x80 == 0 => return true,
                Some(_) => {}
            }
        }
        false
    }

    /// The 7-bit groups of the payload bytes, least significant first.
    fn cont_value(&self) -> u64 {
        self.raw[1..]
            .iter()
            .enumerate()
            .fold(0u64, |v, (i, b)| v | ((*b as u64 & 0x7f) << (7 * i)))
    }

    fn run(&mut self, inp: &mut Input) -> Result<(), PktError> {
        let h = self.header;
        match self.step {
            Step::Source => {
                let want = match h & 3 {
                    3 => 4,
                    n => n as usize,
                };
                if self.raw.len() == 1 {
                    self.pkt.src_id = (h >> 3) & 0x1f;
                }
                while self.raw.len() - 1 < want && self.read_byte(inp).is_some() {}
                if self.raw.len() - 1 == want {
                    let v = self.raw[1..].iter().rev().fold(0u32, |v, b| (v << 8) | *b as u32);
                    self.pkt.set_value(v, want as u8);
                    self.state = State::SendPkt;
                }
            }
            Step::LocalTs => {
                if self.raw.len() == 1 {
                    if h & 0x80 != 0 {
                        self.pkt.src_id = (h >> 4) & 3;
                    } else {
                        // One byte: value in the header, TC = sync.
                        self.pkt.src_id = 0;
                        self.pkt.set_value(((h >> 4) & 7) as u32, 1);
                        self.state = State::SendPkt;
                        return Ok(());
                    }
                }
                if self.read_cont_bytes(5, inp) {
                    self.pkt.set_value(self.cont_value() as u32, (self.raw.len() - 1) as u8);
                    self.state = State::SendPkt;
                } else if self.raw.len() == 5 {
                    return Err(self.bad_sequence("Local TS packet: Payload continuation value too long"));
                }
            }
            Step::GlobalTs1 => {
                if self.read_cont_bytes(5, inp) {
                    if self.raw.len() == 5 {
                        // The last byte carries the wrap and clock change bits.
                        let b = self.raw[4];
                        self.pkt.src_id = (b >> 5) & 3;
                        self.raw[4] = b & 0x1f;
                    }
                    self.pkt.set_value(self.cont_value() as u32, (self.raw.len() - 1) as u8);
                    self.state = State::SendPkt;
                } else if self.raw.len() == 5 {
                    return Err(self.bad_sequence("GTS1 packet: Payload continuation value too long"));
                }
            }
            Step::GlobalTs2 => {
                if self.read_cont_bytes(7, inp) {
                    if self.raw.len() <= 5 {
                        self.pkt.set_value(self.cont_value() as u32, (self.raw.len() - 1) as u8);
                    } else {
                        self.pkt.set_ext_value(self.cont_value());
                    }
                    self.state = State::SendPkt;
                } else if self.raw.len() == 7 {
                    return Err(self.bad_sequence("GTS2 packet: Payload continuation value too long"));
                }
            }
            Step::Extension => {
                const N_BITS: [u8; 5] = [2, 9, 16, 23, 31];
                let done = h & 0x80 == 0 || self.read_cont_bytes(5, inp);
                if done {
                    let mut src = N_BITS[self.raw.len() - 1];
                    if h & 0x04 != 0 {
                        src |= 0x80;
                    }
                    self.pkt.src_id = src;
                    let mut v = 0u32;
                    if self.raw.len() > 1 {
                        v = (self.cont_value() as u32) << 3;
                    }
                    v |= ((h >> 4) & 7) as u32;
                    self.pkt.set_value(v, 4);
                    self.state = State::SendPkt;
                } else if self.raw.len() == 5 {
                    return Err(self.bad_sequence("Extension packet: Payload continuation value too long"));
                }
            }
            Step::Async => match self.read_async_seq(inp) {
                Ok(true) => self.state = State::SendPkt,
                Ok(false) => {}
                Err(()) => return Err(self.bad_sequence("Async Packet: unexpected none zero value")),
            },
        }
        Ok(())
    }
}

impl PacketProcessor for ItmProcessor {
    type Packet = ItmPacket;
    fn index_entries(pkt: &ItmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
        index_entries_of(pkt, emit);
    }
    fn error_link(&self) -> Option<&ErrLink> {
        self.err.as_ref()
    }

    fn process(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, ItmPacket>) -> (DatapathResp, usize) {
        let mut inp = Input::new(data, index);
        let mut resp = DatapathResp::Cont;
        while (inp.more() || self.state == State::SendPkt) && resp.is_cont() {
            let r = match self.state {
                State::WaitSync => {
                    resp = self.wait_for_sync(&mut inp, out);
                    Ok(())
                }
                State::ProcHdr => {
                    self.packet_index = inp.index();
                    match self.process_header(&mut inp) {
                        Ok(()) if self.state == State::ProcData => self.run(&mut inp),
                        r => r,
                    }
                }
                State::ProcData => self.run(&mut inp),
                State::SendPkt => Ok(()),
            };
            match r {
                Ok(()) => {
                    if self.state == State::SendPkt && resp.is_cont() {
                        resp = self.emit(out);
                    }
                }
                Err(e) => {
                    self.log(&e);
                    resp = self.emit(out);
                }
            }
        }
        (resp, inp.used)
    }

    fn eot(&mut self, out: &mut PacketOut<'_, ItmPacket>) -> DatapathResp {
        if self.state == State::ProcData {
            self.pkt.set_err(ItmPktType::IncompleteEot);
            // Nothing is left to deliver after this packet.
            let r = self.emit(out);
            return if r.is_wait() { DatapathResp::Cont } else { r };
        }
        DatapathResp::Cont
    }

    fn reset(&mut self, _index: TrcIndex) {
        self.init_processor_state();
    }
}

/// The stream index entries of one ITM packet: bad, reserved and
/// incomplete packets make none, as they are not listed under a name.
fn index_entries_of(p: &crate::itm::ItmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::itm::ItmPktType as T;
    match p.pkt_type {
        T::Async => emit(EntryKind::Sync, 0),
        T::TsGlobal1 | T::TsGlobal2 => emit(EntryKind::Timestamp, p.ext_value()),
        T::TsLocal => emit(EntryKind::LocalTimestamp, p.value as u64),
        T::Overflow => emit(EntryKind::Overflow, 0),
        _ => {}
    }
}
