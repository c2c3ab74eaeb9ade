//! STM packet processor: STPv2 nibbles to [`StmPacket`]s.
//!
//! STPv2 is a stream of 4-bit nibbles, the low nibble of each byte first.
//! A packet is a 1, 2 or 3 nibble opcode (`x`, `Fx`, `F0x`) followed by
//! its payload and, for the timestamped forms, a length nibble and that
//! many timestamp nibbles. Synchronisation is ASYNC: 21 or more `F`
//! nibbles then a `0`. Until the first ASYNC the data is listed as NOTSYNC
//! packets; afterwards an `FF` header must continue as an ASYNC.
//!
//! The processor follows OpenCSD's behaviour exactly, including which raw
//! bytes each listed packet shows: a packet that starts in the high nibble
//! of a byte shows that nibble as `0xN0`, and the ASYNC found while
//! unsynchronised is shown as the canonical `ff x10, 0f`.

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::{PacketOut, PacketProcessor};
use crate::deformatter::overread;
use crate::hooks::EntryKind;
use crate::logger::ErrLink;
use crate::pktproc::{Input, PktError, ProcState as State, bin_to_gray, gray_to_bin};

use super::packet::{StmPacket, StmPktType, StmTsType, low_mask};

/// Nibbles in an ASYNC: 21 `F` then `0`.
const ASYNC_NIBBLES: u8 = 22;

/// The routine that owns the packet being read; it is re-entered as more
/// nibbles arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// After `F`: the second opcode nibble.
    FExt,
    /// After `F0`: the third opcode nibble.
    F0Ext,
    Null,
    M8,
    Merr,
    C8,
    C16,
    Gerr,
    D4,
    D8,
    D16,
    D32,
    D64,
    Version,
    Trigger,
    Freq,
    Async,
    /// Timestamp length nibble and value.
    Ts,
}

/// The STM packet processor.
pub struct StmProcessor {
    trace_id: u8,
    err: Option<ErrLink>,
    /// Whether raw bytes are kept (a packet monitor is attached).
    mon: bool,
    _overread: overread::Interest,

    state: State,
    step: Step,
    pkt: StmPacket,
    needs_ts: bool,
    is_marker: bool,
    stream_sync: bool,

    num_nibbles: u8,
    nibble: u8,
    nibble_2nd: u8,
    nibble_2nd_valid: bool,
    num_data_nibbles: u8,
    packet_index: TrcIndex,

    raw: Vec<u8>,
    wait_sync_save_suppressed: bool,

    val8: u8,
    val16: u16,
    val32: u32,
    val64: u64,

    req_ts_nibbles: u8,
    curr_ts_nibbles: u8,
    ts_update_value: u64,
    ts_req_set: bool,

    num_f_nibbles: u8,
    sync_start: bool,
    is_sync: bool,
    sync_index: TrcIndex,

    /// Where the last block ended, when processing stopped (on a wait)
    /// with a nibble of its last byte still to read: a packet starting on
    /// that nibble takes this index, as it would have without the wait.
    held_nibble_index: Option<TrcIndex>,

    /// The byte of the held high nibble (`nibble_2nd`).
    second_at: TrcIndex,
    /// Where the current nibble is: its byte, and whether it is the high
    /// nibble.
    nibble_at: (TrcIndex, bool),
    /// Where the F nibbles of the sync being counted began.
    sync_nibble_at: (TrcIndex, bool),
    /// The next data block's first byte starts with a low nibble that
    /// belongs before the start: drop it ([`PacketProcessor::start_at_high_nibble`]).
    skip_low_nibble: bool,
}

impl StmProcessor {
    /// A processor for the source with CoreSight trace ID `trace_id`
    /// (used in error reports).
    pub(crate) fn new(trace_id: u8) -> Self {
        let mut p = StmProcessor {
            trace_id,
            err: None,
            mon: false,
            _overread: overread::Interest::register(trace_id),
            state: State::WaitSync,
            step: Step::Null,
            pkt: StmPacket::start_state(),
            needs_ts: false,
            is_marker: false,
            stream_sync: false,
            num_nibbles: 0,
            nibble: 0,
            nibble_2nd: 0,
            nibble_2nd_valid: false,
            num_data_nibbles: 0,
            packet_index: 0,
            raw: Vec::with_capacity(64),
            wait_sync_save_suppressed: false,
            val8: 0,
            val16: 0,
            val32: 0,
            val64: 0,
            req_ts_nibbles: 0,
            curr_ts_nibbles: 0,
            ts_update_value: 0,
            ts_req_set: false,
            num_f_nibbles: 0,
            sync_start: false,
            is_sync: false,
            sync_index: 0,
            held_nibble_index: None,
            second_at: 0,
            nibble_at: (0, false),
            sync_nibble_at: (0, false),
            skip_low_nibble: false,
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
        self.clear_sync_count();
        self.pkt = StmPacket::start_state();
        self.nibble_2nd_valid = false;
        self.init_next_packet();
        self.wait_sync_save_suppressed = false;
        self.raw.clear();
        self.held_nibble_index = None;
    }

    fn init_next_packet(&mut self) {
        self.needs_ts = false;
        self.is_marker = false;
        self.num_nibbles = 0;
        self.num_data_nibbles = 0;
        self.pkt.init_next();
    }

    fn clear_sync_count(&mut self) {
        self.num_f_nibbles = 0;
        self.sync_start = false;
        self.is_sync = false;
    }

    fn save_byte(&mut self, b: u8) {
        if self.mon && !self.wait_sync_save_suppressed {
            self.raw.push(b);
        }
    }

    fn bad_sequence(&mut self, msg: &'static str) -> PktError {
        self.pkt.set_err(StmPktType::BadSequence);
        PktError::bad_sequence(msg)
    }

    fn reserved_header(&mut self) -> PktError {
        self.pkt.set_type(StmPktType::Reserved, false);
        PktError::header("STM: Unsupported or Reserved STPv2 Header")
    }

    /// For a sync whose first `F` is the high nibble of a byte: that byte.
    fn sync_high_nibble(&self) -> Option<TrcIndex> {
        let (at, high) = self.sync_nibble_at;
        high.then_some(at)
    }

    /// Counts `F` nibbles towards an ASYNC.
    fn check_sync_nibble(&mut self) {
        if self.nibble != 0xf {
            if !self.sync_start {
                return;
            }
            if self.nibble == 0 && self.num_f_nibbles >= 21 {
                // Sync found: the F count is kept.
                self.is_sync = true;
            } else {
                self.clear_sync_count();
            }
            return;
        }
        self.num_f_nibbles = self.num_f_nibbles.wrapping_add(1);
        if !self.sync_start {
            self.sync_start = true;
            self.sync_nibble_at = self.nibble_at;
            let back = (self.num_nibbles as i32 - 1) / 2;
            self.sync_index = self.packet_index.wrapping_add(back as TrcIndex);
        }
    }

    /// Next nibble (the high half of the last byte first); false when the
    /// block is used up.
    fn read_nibble(&mut self, inp: &mut Input) -> bool {
        if self.nibble_2nd_valid {
            self.nibble = self.nibble_2nd;
            self.nibble_2nd_valid = false;
            self.nibble_at = (self.second_at, true);
        } else if inp.more() {
            let b = inp.data[inp.used];
            let at = inp.index();
            inp.used += 1;
            self.save_byte(b);
            self.nibble_2nd = b >> 4;
            self.nibble_2nd_valid = true;
            self.second_at = at;
            self.nibble = b & 0xf;
            self.nibble_at = (at, false);
        } else {
            return false;
        }
        self.num_nibbles = self.num_nibbles.wrapping_add(1);
        self.check_sync_nibble();
        true
    }

    /// Index of the current read position: the next byte, or for a
    /// nibble held from a block that ended on a wait, that block's end.
    fn block_pos(&mut self, inp: &Input) -> TrcIndex {
        match self.held_nibble_index.take() {
            Some(i) if inp.used == 0 && self.nibble_2nd_valid => i,
            _ => inp.index(),
        }
    }

    fn send(&mut self) {
        self.state = State::SendPkt;
    }

    fn emit(&mut self, out: &mut PacketOut<'_, StmPacket>) -> DatapathResp {
        // The monitor never sees empty packets.
        if !self.raw.is_empty()
            && let Some(m) = out.mon.as_mut()
        {
            m.raw_packet_data_mon(DatapathOp::Data, self.packet_index, Some(&self.pkt), &self.raw);
        }
        let resp = match out.sink.as_mut() {
            Some(s) => s.packet_data_in(DatapathOp::Data, self.packet_index, Some(&self.pkt)),
            None => DatapathResp::Cont,
        };
        self.raw.clear();
        self.init_next_packet();
        if self.nibble_2nd_valid {
            // The next packet starts in the high nibble of this byte.
            let b = self.nibble_2nd << 4;
            self.save_byte(b);
        }
        self.state = if self.stream_sync {
            State::ProcHdr
        } else {
            State::WaitSync
        };
        resp
    }

    fn log(&self, e: &PktError) {
        if let Some(l) = &self.err {
            e.log(l, self.packet_index, self.trace_id);
        }
    }

    /// Looks for an ASYNC, listing what comes before it as NOTSYNC.
    fn wait_for_sync(&mut self, inp: &mut Input) {
        let start = inp.used;
        let mut got_data = true;
        self.packet_index = self.block_pos(inp);
        // A sync found last time (after data listed as NOTSYNC) is taken as
        // exactly the ASYNC's length now.
        self.num_nibbles = if self.is_sync {
            ASYNC_NIBBLES
        } else {
            self.num_f_nibbles
        };

        self.wait_sync_save_suppressed = true;
        while got_data && !self.is_sync {
            got_data = self.read_nibble(inp);
        }
        self.wait_sync_save_suppressed = false;

        if self.num_nibbles == 0 {
            return;
        }

        if !got_data || self.num_nibbles > ASYNC_NIBBLES {
            // Data before the sync (or no sync in this block): NOTSYNC. The
            // F nibbles that may start a sync are held back; OpenCSD counts
            // nibbles carried from the last block too, and so may list
            // bytes from past the end of this one.
            self.pkt.set_type(StmPktType::NotSync, false);
            if self.mon {
                let held = if self.is_sync {
                    ASYNC_NIBBLES
                } else {
                    self.num_f_nibbles
                };
                let nibbles = self.num_nibbles.wrapping_sub(held);
                let bytes = (nibbles / 2 + nibbles % 2) as usize;
                let avail = inp.data.len() - start;
                let in_block = bytes.min(avail);
                self.raw.extend_from_slice(&inp.data[start..start + in_block]);
                if bytes > in_block {
                    let mut past = [0u8; overread::IMAGE_MAX];
                    let n = overread::following_bytes(&mut past[..bytes - in_block]);
                    self.raw.extend_from_slice(&past[..n]);
                }
            }
        } else {
            self.pkt.set_type(StmPktType::Async, false);
            self.pkt.high_nibble_start = self.sync_high_nibble();
            self.stream_sync = true;
            self.clear_sync_count();
            self.packet_index = self.sync_index;
            if self.mon {
                // The sync may have started in an earlier block: show it whole.
                for _ in 0..10 {
                    self.save_byte(0xff);
                }
                self.save_byte(0x0f);
            }
        }
        self.send();
    }

    /// Runs the routine for the first header nibble.
    fn op1(&mut self, inp: &mut Input) -> Result<(), PktError> {
        match self.nibble {
            0x0 => self.run(Step::Null, inp),
            0x1 => self.run(Step::M8, inp),
            0x2 => self.run(Step::Merr, inp),
            0x3 => self.run(Step::C8, inp),
            0x4 => self.run(Step::D8, inp),
            0x5 => self.run(Step::D16, inp),
            0x6 => self.run(Step::D32, inp),
            0x7 => self.run(Step::D64, inp),
            0x8 => self.marker_ts(Step::D8, inp),
            0x9 => self.marker_ts(Step::D16, inp),
            0xa => self.marker_ts(Step::D32, inp),
            0xb => self.marker_ts(Step::D64, inp),
            0xc => self.run(Step::D4, inp),
            0xd => self.marker_ts(Step::D4, inp),
            0xe => {
                // FLAG with timestamp.
                self.needs_ts();
                self.pkt.set_type(StmPktType::Flag, false);
                self.run(Step::Ts, inp)
            }
            _ => self.run(Step::FExt, inp),
        }
    }

    /// Second nibble after `F`.
    fn op2(&mut self, inp: &mut Input) -> Result<(), PktError> {
        let (t, data_nibbles) = match self.nibble {
            0x0 => return self.run(Step::F0Ext, inp),
            0x2 => return self.run(Step::Gerr, inp),
            0x3 => return self.run(Step::C16, inp),
            0xe => {
                self.pkt.set_type(StmPktType::Flag, false);
                self.send();
                return Ok(());
            }
            0xf => return self.run(Step::Async, inp),
            0x4 | 0x8 => (StmPktType::D8, 4),
            0x5 | 0x9 => (StmPktType::D16, 6),
            0x6 | 0xa => (StmPktType::D32, 10),
            0x7 | 0xb => (StmPktType::D64, 18),
            0xc | 0xd => (StmPktType::D4, 3),
            _ => {
                self.pkt.set_d16(0x0f | (self.nibble as u16) << 4);
                return Err(self.reserved_header());
            }
        };
        // Fx data: 4..7 and C with timestamp, 8..B and D with marker.
        let marker = matches!(self.nibble, 0x8..=0xb | 0xd);
        if !marker {
            self.needs_ts();
        }
        self.pkt.set_type(t, marker);
        self.num_data_nibbles = data_nibbles;
        let step = match t {
            StmPktType::D4 => Step::D4,
            StmPktType::D8 => Step::D8,
            StmPktType::D16 => Step::D16,
            StmPktType::D32 => Step::D32,
            _ => Step::D64,
        };
        self.run(step, inp)
    }

    /// Third nibble after `F0`.
    fn op3(&mut self, inp: &mut Input) -> Result<(), PktError> {
        match self.nibble {
            0x0 => self.run(Step::Version, inp),
            0x1 => {
                self.needs_ts();
                self.run(Step::Null, inp)
            }
            0x6 => self.run(Step::Trigger, inp),
            0x7 => {
                self.needs_ts();
                self.run(Step::Trigger, inp)
            }
            0x8 => self.run(Step::Freq, inp),
            n => {
                self.pkt.set_d16(0x00f | (n as u16) << 8);
                Err(self.reserved_header())
            }
        }
    }

    /// One-nibble data headers with marker and timestamp.
    fn marker_ts(&mut self, step: Step, inp: &mut Input) -> Result<(), PktError> {
        self.needs_ts();
        self.is_marker = true;
        self.run(step, inp)
    }

    fn needs_ts(&mut self) {
        self.needs_ts = true;
        self.req_ts_nibbles = 0;
        self.curr_ts_nibbles = 0;
        self.ts_update_value = 0;
        self.ts_req_set = false;
    }

    /// Data complete: read the timestamp if there is one, else send.
    fn data_done(&mut self, inp: &mut Input) -> Result<(), PktError> {
        if self.needs_ts {
            self.run(Step::Ts, inp)
        } else {
            self.send();
            Ok(())
        }
    }

    fn extract_val8(&mut self, upto: u8, inp: &mut Input) {
        while self.num_nibbles < upto && self.read_nibble(inp) {
            self.val8 = (self.val8 << 4) | self.nibble;
        }
    }
    fn extract_val16(&mut self, upto: u8, inp: &mut Input) {
        while self.num_nibbles < upto && self.read_nibble(inp) {
            self.val16 = (self.val16 << 4) | self.nibble as u16;
        }
    }
    fn extract_val32(&mut self, upto: u8, inp: &mut Input) {
        while self.num_nibbles < upto && self.read_nibble(inp) {
            self.val32 = (self.val32 << 4) | self.nibble as u32;
        }
    }
    fn extract_val64(&mut self, upto: u8, inp: &mut Input) {
        while self.num_nibbles < upto && self.read_nibble(inp) {
            self.val64 = (self.val64 << 4) | self.nibble as u64;
        }
    }

    /// Runs `step` as the current packet's routine.
    fn run(&mut self, step: Step, inp: &mut Input) -> Result<(), PktError> {
        self.step = step;
        match step {
            Step::FExt => {
                if self.read_nibble(inp) {
                    return self.op2(inp);
                }
            }
            Step::F0Ext => {
                if self.read_nibble(inp) {
                    return self.op3(inp);
                }
            }
            Step::Null => {
                self.pkt.set_type(StmPktType::Null, false);
                return self.data_done(inp);
            }
            Step::M8 => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::M8, false);
                }
                self.extract_val8(3, inp);
                if self.num_nibbles == 3 {
                    self.pkt.set_master(self.val8);
                    self.send();
                }
            }
            Step::Merr => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::Merr, false);
                }
                self.extract_val8(3, inp);
                if self.num_nibbles == 3 {
                    // MERR sets the current master's channel to 0.
                    self.pkt.set_channel(0, false);
                    self.pkt.set_d8(self.val8);
                    self.send();
                }
            }
            Step::C8 => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::C8, false);
                }
                self.extract_val8(3, inp);
                if self.num_nibbles == 3 {
                    self.pkt.set_channel(self.val8 as u16, true);
                    self.send();
                }
            }
            Step::Gerr => {
                if self.num_nibbles == 2 {
                    self.pkt.set_type(StmPktType::Gerr, false);
                }
                self.extract_val8(4, inp);
                if self.num_nibbles == 4 {
                    self.pkt.set_d8(self.val8);
                    // GERR sets the current master to 0.
                    self.pkt.set_master(0);
                    self.send();
                }
            }
            Step::C16 => {
                if self.num_nibbles == 2 {
                    self.pkt.set_type(StmPktType::C16, false);
                }
                self.extract_val16(6, inp);
                if self.num_nibbles == 6 {
                    self.pkt.set_channel(self.val16, false);
                    self.send();
                }
            }
            Step::D4 => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::D4, self.is_marker);
                    self.num_data_nibbles = 2;
                }
                if self.num_nibbles != self.num_data_nibbles && self.read_nibble(inp) {
                    self.pkt.set_d8(self.nibble & 0xf);
                    return self.data_done(inp);
                }
            }
            Step::D8 => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::D8, self.is_marker);
                    self.num_data_nibbles = 3;
                }
                self.extract_val8(self.num_data_nibbles, inp);
                if self.num_nibbles == self.num_data_nibbles {
                    self.pkt.set_d8(self.val8);
                    return self.data_done(inp);
                }
            }
            Step::D16 => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::D16, self.is_marker);
                    self.num_data_nibbles = 5;
                }
                self.extract_val16(self.num_data_nibbles, inp);
                if self.num_nibbles == self.num_data_nibbles {
                    self.pkt.set_d16(self.val16);
                    return self.data_done(inp);
                }
            }
            Step::D32 => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::D32, self.is_marker);
                    self.num_data_nibbles = 9;
                }
                self.extract_val32(self.num_data_nibbles, inp);
                if self.num_nibbles == self.num_data_nibbles {
                    self.pkt.set_d32(self.val32);
                    return self.data_done(inp);
                }
            }
            Step::D64 => {
                if self.num_nibbles == 1 {
                    self.pkt.set_type(StmPktType::D64, self.is_marker);
                    self.num_data_nibbles = 17;
                }
                self.extract_val64(self.num_data_nibbles, inp);
                if self.num_nibbles == self.num_data_nibbles {
                    self.pkt.set_d64(self.val64);
                    return self.data_done(inp);
                }
            }
            Step::Version => {
                if self.num_nibbles == 3 {
                    self.pkt.set_type(StmPktType::Version, false);
                }
                if self.read_nibble(inp) {
                    self.pkt.set_d8(self.nibble);
                    match self.nibble {
                        3 => self.pkt.on_version(StmTsType::NatBinary),
                        4 => self.pkt.on_version(StmTsType::Gray),
                        _ => return Err(self.bad_sequence("STM VERSION packet : unrecognised version number.")),
                    }
                    self.send();
                }
            }
            Step::Trigger => {
                if self.num_nibbles == 3 {
                    self.pkt.set_type(StmPktType::Trig, false);
                }
                self.extract_val8(5, inp);
                if self.num_nibbles == 5 {
                    self.pkt.set_d8(self.val8);
                    return self.data_done(inp);
                }
            }
            Step::Freq => {
                if self.num_nibbles == 3 {
                    self.pkt.set_type(StmPktType::Freq, false);
                    self.val32 = 0;
                }
                self.extract_val32(11, inp);
                if self.num_nibbles == 11 {
                    self.pkt.set_d32(self.val32);
                    self.send();
                }
            }
            Step::Async => {
                // `FF`: must go on to be an ASYNC.
                while self.read_nibble(inp) {
                    if self.is_sync {
                        self.stream_sync = true;
                        self.pkt.set_type(StmPktType::Async, false);
                        self.pkt.high_nibble_start = self.sync_high_nibble();
                        self.clear_sync_count();
                        self.send();
                        break;
                    } else if !self.sync_start {
                        return Err(self.bad_sequence("STM: Invalid ASYNC sequence"));
                    }
                }
            }
            Step::Ts => return self.extract_ts(inp),
        }
        Ok(())
    }

    fn extract_ts(&mut self, inp: &mut Input) -> Result<(), PktError> {
        if !self.ts_req_set && self.read_nibble(inp) {
            self.req_ts_nibbles = match self.nibble {
                0xd => 14,
                0xe => 16,
                0xf => return Err(self.bad_sequence("STM: Invalid timestamp size 0xF")),
                n => n,
            };
            self.ts_req_set = true;
        }
        if !self.ts_req_set {
            return Ok(());
        }
        while self.curr_ts_nibbles < self.req_ts_nibbles && self.read_nibble(inp) {
            self.ts_update_value = (self.ts_update_value << 4) | self.nibble as u64;
            self.curr_ts_nibbles += 1;
        }
        if self.curr_ts_nibbles == self.req_ts_nibbles {
            let bits = self.req_ts_nibbles * 4;
            match self.pkt.ts_type {
                StmTsType::Gray => {
                    let mask = low_mask(bits);
                    let gray = (bin_to_gray(self.pkt.timestamp, 64) & !mask) | (self.ts_update_value & mask);
                    self.pkt.set_ts(gray_to_bin(gray, 64), bits);
                }
                StmTsType::NatBinary => self.pkt.set_ts(self.ts_update_value, bits),
                StmTsType::Unknown => return Err(self.bad_sequence("STM: unknown timestamp encoding")),
            }
            self.send();
        }
        Ok(())
    }
}

impl PacketProcessor for StmProcessor {
    type Packet = StmPacket;
    fn index_entries(pkt: &StmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
        index_entries_of(pkt, emit);
    }
    fn error_link(&self) -> Option<&ErrLink> {
        self.err.as_ref()
    }

    fn process(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, StmPacket>) -> (DatapathResp, usize) {
        self.mon = out.mon.is_some();
        let mut inp = Input::new(data, index);
        if self.skip_low_nibble && inp.more() {
            // Starting at a sync point in the high nibble of this byte: the
            // high nibble is held as it is in a decode from the start, and
            // the packet starting on it takes the next byte's index, as it
            // does there.
            self.skip_low_nibble = false;
            let b = data[0];
            inp.used = 1;
            self.nibble_2nd = b >> 4;
            self.nibble_2nd_valid = true;
            self.second_at = index;
        }
        let mut resp = DatapathResp::Cont;
        while (inp.more() || self.nibble_2nd_valid || self.state == State::SendPkt) && resp.is_cont() {
            let r = match self.state {
                State::WaitSync => {
                    self.wait_for_sync(&mut inp);
                    Ok(())
                }
                State::ProcHdr => {
                    self.packet_index = self.block_pos(&inp);
                    if self.read_nibble(&mut inp) {
                        self.state = State::ProcData;
                        self.op1(&mut inp)
                    } else {
                        Ok(())
                    }
                }
                State::ProcData => self.run(self.step, &mut inp),
                State::SendPkt => Ok(()),
            };
            match r {
                Ok(()) => {
                    if self.state == State::SendPkt {
                        resp = self.emit(out);
                    }
                }
                Err(e) => {
                    // Bad packets go on to the decoder, which decides what
                    // to do; the processor carries on with the next header.
                    self.log(&e);
                    resp = self.emit(out);
                }
            }
        }
        if self.nibble_2nd_valid && inp.used == data.len() && matches!(self.state, State::ProcHdr | State::WaitSync) {
            self.held_nibble_index = Some(index + data.len() as TrcIndex);
        }
        (resp, inp.used)
    }

    fn eot(&mut self, out: &mut PacketOut<'_, StmPacket>) -> DatapathResp {
        // A high nibble still held when a wait stopped the last block is
        // processed now, as it would have been without the wait: its
        // packet, and the end of trace's index, must not depend on waits.
        if self.nibble_2nd_valid {
            let (r, _) = self.process(self.held_nibble_index.unwrap_or(0), &[], out);
            if !r.is_cont() {
                return r;
            }
        }
        self.mon = out.mon.is_some();
        if self.num_nibbles > 0 {
            self.pkt.set_err(StmPktType::IncompleteEot);
            // Nothing is left to deliver after this packet, so a wait
            // asked for by its consumer is already satisfied.
            let r = self.emit(out);
            return if r.is_wait() { DatapathResp::Cont } else { r };
        }
        DatapathResp::Cont
    }

    fn reset(&mut self, _index: TrcIndex) {
        self.init_processor_state();
    }

    fn start_at_high_nibble(&mut self) -> bool {
        self.skip_low_nibble = true;
        true
    }
}

/// The stream index entries of one STM packet: bad, reserved and
/// incomplete packets make none, as they are not listed under a name. A
/// data, flag or trigger packet with a timestamp makes a timestamp entry
/// too.
fn index_entries_of(p: &crate::stm::StmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::stm::StmPktType as T;
    match p.pkt_type {
        // A sync starting in a high nibble: where, so a decoder can start
        // there (see `EntryKind::Sync`).
        T::Async => emit(EntryKind::Sync, p.high_nibble_start.map_or(0, |b| b << 1 | 1)),
        T::Trig => emit(EntryKind::Trigger, p.payload & 0xff),
        T::M8 => emit(EntryKind::Master, p.master as u64),
        T::C8 | T::C16 => emit(EntryKind::Channel, p.channel as u64),
        T::Gerr | T::Merr => emit(EntryKind::Overflow, p.payload & 0xff),
        _ => {}
    }
    // Only these packet types carry a timestamp (the listing's `TS` suffix).
    if p.has_ts && matches!(p.pkt_type, T::Trig | T::Flag | T::D4 | T::D8 | T::D16 | T::D32 | T::D64) {
        emit(EntryKind::Timestamp, p.timestamp);
    }
}
