//! PTM packet processor: bytes to [`PtmPacket`]s.
//!
//! Until the first A-sync the processor hands the monitor the bytes it
//! skips, in runs of at most 16 (per input block), and the packet sink a
//! single NOTSYNC packet. After that, each header byte selects a packet
//! type whose payload is gathered across input blocks; a finished packet
//! goes to the monitor and the sink. A header 0x00 that does not start a
//! valid A-sync gives a BAD_SEQUENCE packet (and an error); reserved
//! headers give RESERVED packets, which the decoder answers by waiting
//! for the next synchronisation.

use super::PtmConfig;
use super::packet::{PtmPacket, PtmPktType};
use super::shared::ISyncReason;
use crate::arch::Isa;
use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::{DecodeContext, PacketOut, PacketProcessor};
use crate::deformatter::overread;
use crate::errcode::ErrCode;
use crate::hooks::EntryKind;
use crate::logger::ErrLink;
use crate::pktproc::{PktError, ProcState as State, bin_to_gray, gray_to_bin};

/// A-sync: at least this many 0x00 bytes, then 0x80.
const ASYNC_REQ_0: u32 = 5;
/// Zeros beyond an A-sync's five that are tolerated before some are dropped.
const ASYNC_PAD_0_LIMIT: u32 = 11;
/// Unsynchronised bytes handed to the monitor in one go, at most.
const UNSYNC_PKT_MAX: usize = 16;
/// Most bytes shown for a run of unsynchronised bytes that runs past the
/// end of its block.
const UNSYNC_SHOWN_MAX: usize = 48;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AsyncResult {
    /// Five zeros then 0x80.
    Async,
    /// More than five zeros then 0x80.
    AsyncExtra0,
    /// A byte other than 0x00 / 0x80, or 0x80 too early.
    NotAsync,
    /// A long run of zeros: drop some.
    Throw0,
    /// Out of input.
    Incomplete,
}

/// PTM packet processor (OpenCSD's `TrcPktProcPtm`).
pub struct PtmProcessor {
    cfg: PtmConfig,
    trace_id: u8,
    err: ErrLink,
    /// Held between blocks while zeros that may start an A-sync are
    /// pending: only then can the next block's listing show bytes from past
    /// its end (see [`block_memory`]). Held no longer, as the deformatter
    /// copies its record for every block of an interested ID.
    overread: Option<overread::Interest>,

    state: State,
    pkt: PtmPacket,
    /// Raw bytes of the packet being built.
    raw: Vec<u8>,
    pkt_index: TrcIndex,
    /// Packet type selected by the current header byte.
    hdr_type: PtmPktType,

    // synchronisation
    wait_async_start: bool,
    async_raw_op: bool,
    sent_not_sync: bool,
    async_0: u32,

    /// AltISA bit of the last exception byte; carries over between packets.
    excep_alt_isa: bool,

    // per-packet gathering state
    num_pkt_bytes_req: usize,
    need_cc: bool,
    got_cc: bool,
    got_cc_bytes: usize,
    num_ctxt_bytes: usize,
    got_ctxt_bytes: usize,
    got_ts_bytes: bool,
    ts_byte_max: usize,
    got_addr_bytes: bool,
    num_addr_bytes: usize,
    got_excep_bytes: bool,
    num_excep_bytes: usize,
    addr_pkt_isa: Isa,
}

impl PtmProcessor {
    /// A packet processor for one PTM source, reporting errors through the tree's log.
    pub fn new(cfg: PtmConfig, ctx: &DecodeContext) -> PtmProcessor {
        let err = ctx.packet_processor_err_link("PKTP_PTM");
        PtmProcessor::with_err_link(cfg, err)
    }

    pub(crate) fn with_err_link(cfg: PtmConfig, err: ErrLink) -> PtmProcessor {
        let mut p = PtmProcessor {
            cfg,
            trace_id: cfg.trace_id(),
            err,
            overread: None,
            state: State::WaitSync,
            pkt: PtmPacket::default(),
            raw: Vec::with_capacity(32),
            pkt_index: 0,
            hdr_type: PtmPktType::Reserved,
            wait_async_start: false,
            async_raw_op: false,
            sent_not_sync: false,
            async_0: 0,
            excep_alt_isa: false,
            num_pkt_bytes_req: 0,
            need_cc: false,
            got_cc: false,
            got_cc_bytes: 0,
            num_ctxt_bytes: 0,
            got_ctxt_bytes: 0,
            got_ts_bytes: false,
            ts_byte_max: 0,
            got_addr_bytes: false,
            num_addr_bytes: 0,
            got_excep_bytes: false,
            num_excep_bytes: 0,
            addr_pkt_isa: Isa::Unknown,
        };
        p.init_processor_state();
        p
    }

    fn init_processor_state(&mut self) {
        self.state = State::WaitSync;
        self.overread = None;
        self.hdr_type = PtmPktType::Reserved;
        self.async_0 = 0;
        self.wait_async_start = false;
        self.async_raw_op = false;
        self.sent_not_sync = false;
        self.excep_alt_isa = false;
        self.pkt = PtmPacket::default();
        self.pkt.clear();
        self.raw.clear();
    }

    /// Reads the next input byte into the packet.
    fn read_byte(&mut self, data: &[u8], pos: &mut usize) -> Option<u8> {
        let b = *data.get(*pos)?;
        *pos += 1;
        self.raw.push(b);
        Some(b)
    }

    fn malformed(&mut self, msg: &'static str) -> PktError {
        self.pkt.set_err_type(PtmPktType::BadSequence);
        PktError::bad_sequence(msg)
    }

    fn output_packet(&mut self, out: &mut PacketOut<'_, PtmPacket>) -> DatapathResp {
        let resp = out.emit(self.pkt_index, &self.pkt, &self.raw);
        self.raw.clear();
        resp
    }

    // ---- synchronisation ----

    /// Reads bytes while they may form an A-sync.
    fn find_async(&mut self, data: &[u8], pos: &mut usize) -> AsyncResult {
        loop {
            let Some(b) = self.read_byte(data, pos) else {
                return AsyncResult::Incomplete;
            };
            if b == 0x00 {
                self.async_0 += 1;
                if self.async_0 >= ASYNC_PAD_0_LIMIT + ASYNC_REQ_0 {
                    return AsyncResult::Throw0;
                }
            } else {
                return match (b, self.async_0) {
                    (0x80, 5) => AsyncResult::Async,
                    (0x80, n) if n > 5 => AsyncResult::AsyncExtra0,
                    _ => AsyncResult::NotAsync,
                };
            }
        }
    }

    /// Skips unsynchronised bytes up to and including the first A-sync.
    fn wait_async(&mut self, data: &[u8], pos: &mut usize, out: &mut PacketOut<'_, PtmPacket>) -> DatapathResp {
        // Zeros that pended a partial A-sync at the end of the previous block.
        const SPARE_ZEROS: [u8; 16] = [0; 16];
        let mut resp = DatapathResp::Cont;
        let mut scanning = true;
        let mut send_unsynced = false;
        let mut have_async = false;
        let mut unsynced = 0usize;
        let mut unsynced_start = 0usize;
        let bytes_on_entry = self.raw.len();

        while scanning && resp.is_cont() {
            if self.wait_async_start {
                match self.find_async(data, pos) {
                    AsyncResult::Async | AsyncResult::AsyncExtra0 => {
                        self.state = State::SendPkt;
                        self.wait_async_start = false;
                        send_unsynced = true;
                        have_async = true;
                        scanning = false;
                    }
                    AsyncResult::Throw0 => {
                        unsynced += ASYNC_PAD_0_LIMIT as usize;
                        self.wait_async_start = false;
                        let n = (ASYNC_PAD_0_LIMIT as usize).min(self.raw.len());
                        self.raw.drain(..n);
                    }
                    AsyncResult::NotAsync => {
                        unsynced += self.raw.len();
                        self.wait_async_start = false;
                        self.raw.clear();
                    }
                    AsyncResult::Incomplete => {
                        send_unsynced = true;
                        scanning = false;
                    }
                }
            } else {
                // Bytes other than zero cannot start an A-sync: a run of them
                // is skipped in one step, as far as the next zero or as many
                // as complete a hand-over to the monitor (there is room for
                // one at least: a full hand-over went out at the end of the
                // last step).
                let rest = data.get(*pos..).unwrap_or(&[]);
                let room = UNSYNC_PKT_MAX.saturating_sub(unsynced).max(1);
                let run = rest.iter().take(room).take_while(|&&b| b != 0x00).count();
                if run > 0 {
                    *pos += run;
                    unsynced += run;
                } else if !rest.is_empty() {
                    *pos += 1;
                    self.wait_async_start = true;
                    self.raw.push(0);
                    self.async_0 = 1;
                }
            }

            if unsynced >= UNSYNC_PKT_MAX {
                send_unsynced = true;
            }
            if *pos >= data.len() {
                send_unsynced = true;
                scanning = false;
            }

            if send_unsynced && unsynced > 0 {
                if self.async_raw_op
                    && let Some(mon) = out.mon.as_mut()
                {
                    if bytes_on_entry > 0 {
                        let n = bytes_on_entry.min(SPARE_ZEROS.len());
                        mon.raw_packet_data_mon(DatapathOp::Data, self.pkt_index, Some(&self.pkt), &SPARE_ZEROS[..n]);
                        self.pkt_index += bytes_on_entry as u64;
                    }
                    let end = unsynced_start + unsynced;
                    if end <= data.len() {
                        mon.raw_packet_data_mon(
                            DatapathOp::Data,
                            self.pkt_index,
                            Some(&self.pkt),
                            &data[unsynced_start..end],
                        );
                    } else {
                        // Zeros pending from the previous block that did not
                        // start an A-sync are counted again with this block's
                        // bytes, so OpenCSD lists bytes from past its end.
                        let mut buf = [0u8; UNSYNC_SHOWN_MAX];
                        let n = unsynced.min(UNSYNC_SHOWN_MAX);
                        block_memory(data, unsynced_start, &mut buf[..n]);
                        mon.raw_packet_data_mon(DatapathOp::Data, self.pkt_index, Some(&self.pkt), &buf[..n]);
                    }
                }
                if !self.sent_not_sync {
                    if let Some(sink) = out.sink.as_mut() {
                        resp = sink.packet_data_in(DatapathOp::Data, self.pkt_index, Some(&self.pkt));
                    }
                    self.sent_not_sync = true;
                }
                unsynced_start += unsynced;
                self.pkt_index += unsynced as u64;
                unsynced = 0;
                send_unsynced = false;
            }

            if have_async {
                self.pkt.pkt_type = PtmPktType::ASync;
            }
        }
        resp
    }

    // ---- packets ----

    /// Continues the packet the current header started.
    fn run_packet(&mut self, data: &[u8], pos: &mut usize) -> Result<(), PktError> {
        match self.hdr_type {
            PtmPktType::ASync => self.pkt_async(data, pos),
            PtmPktType::ISync => self.pkt_isync(data, pos),
            PtmPktType::WaypointUpdate => {
                self.pkt_wp_update(data, pos);
                Ok(())
            }
            PtmPktType::ContextId => {
                self.pkt_ctxt_id(data, pos);
                Ok(())
            }
            PtmPktType::Vmid => {
                if let Some(b) = self.read_byte(data, pos) {
                    self.pkt.update_vmid(b);
                    self.state = State::SendPkt;
                }
                Ok(())
            }
            PtmPktType::Atom => self.pkt_atom(data, pos),
            PtmPktType::Timestamp => self.pkt_timestamp(data, pos),
            PtmPktType::BranchAddress => self.pkt_branch(data, pos),
            // Trigger, Ignore, ExceptionReturn, Reserved: no payload.
            _ => {
                self.state = State::SendPkt;
                Ok(())
            }
        }
    }

    fn pkt_async(&mut self, data: &[u8], pos: &mut usize) -> Result<(), PktError> {
        if self.raw.len() == 1 {
            self.async_0 = 1;
        }
        match self.find_async(data, pos) {
            AsyncResult::Async | AsyncResult::AsyncExtra0 => {
                self.state = State::SendPkt;
                Ok(())
            }
            AsyncResult::Throw0 | AsyncResult::NotAsync => Err(self.malformed("Bad Async packet")),
            AsyncResult::Incomplete => Ok(()),
        }
    }

    fn pkt_isync(&mut self, data: &[u8], pos: &mut usize) -> Result<(), PktError> {
        if self.raw.len() == 1 {
            self.num_ctxt_bytes = self.cfg.ctxt_id_bytes();
            self.got_ctxt_bytes = 0;
            self.num_pkt_bytes_req = 6 + self.num_ctxt_bytes;
        }
        let mut done = false;
        while !done {
            let Some(b) = self.read_byte(data, pos) else { break };
            let idx = self.raw.len() - 1;
            if idx == 5 {
                // Information byte.
                let reason = (b >> 5) & 3;
                self.pkt.isync_reason = ISyncReason::from_bits(reason);
                self.pkt.update_ns(b & 0x08 != 0);
                self.pkt.update_alt_isa(b & 0x04 != 0);
                self.pkt.update_hyp(b & 0x02 != 0);
                let isa = if self.raw[1] & 1 != 0 {
                    if b & 0x04 != 0 { Isa::Tee } else { Isa::Thumb2 }
                } else {
                    Isa::Arm
                };
                self.pkt.update_isa(isa);
                // A periodic I-sync has no cycle count.
                self.need_cc = reason != 0 && self.cfg.cycle_accurate();
                self.got_cc = false;
                if self.need_cc {
                    self.num_pkt_bytes_req += 1;
                }
                self.got_cc_bytes = 0;
            } else if idx > 5 {
                if self.need_cc && !self.got_cc {
                    self.got_cc = if idx == 6 {
                        b & 0x40 == 0
                    } else {
                        b & 0x80 == 0 || idx == 10
                    };
                    self.got_cc_bytes += 1;
                    if !self.got_cc {
                        self.num_pkt_bytes_req += 1;
                    }
                } else if self.num_ctxt_bytes > self.got_ctxt_bytes {
                    self.got_ctxt_bytes += 1;
                }
            }
            done = self.num_pkt_bytes_req == self.raw.len();
        }
        if done {
            let addr = u32::from(self.raw[1] & 0xfe)
                | u32::from(self.raw[2]) << 8
                | u32::from(self.raw[3]) << 16
                | u32::from(self.raw[4]) << 24;
            self.pkt.update_address(u64::from(addr), 32);
            let mut opt_idx = 6;
            if self.need_cc {
                let cc = self.extract_cycle_count(opt_idx)?;
                self.pkt.set_cycle_count(cc);
                opt_idx += self.got_cc_bytes;
            }
            if self.num_ctxt_bytes > 0 {
                let id = self.extract_ctxt_id(opt_idx)?;
                self.pkt.update_context_id(id);
            }
            self.state = State::SendPkt;
        }
        Ok(())
    }

    /// ISA of a 5th address byte.
    fn isa_of_5th_byte(b: u8) -> Isa {
        if b & 0x20 == 0x20 {
            Isa::Jazelle
        } else if b & 0x30 == 0x10 {
            Isa::Thumb2
        } else {
            Isa::Arm
        }
    }

    /// Final ISA of an address packet, with the AltISA bit of any
    /// exception byte (Thumb2 / ThumbEE).
    fn resolve_addr_isa(&mut self) {
        if self.addr_pkt_isa == Isa::Unknown {
            self.addr_pkt_isa = self.pkt.curr_isa;
        }
        if self.got_excep_bytes {
            if self.addr_pkt_isa == Isa::Tee && !self.excep_alt_isa {
                self.addr_pkt_isa = Isa::Thumb2;
            } else if self.addr_pkt_isa == Isa::Thumb2 && self.excep_alt_isa {
                self.addr_pkt_isa = Isa::Tee;
            }
        }
        self.pkt.update_isa(self.addr_pkt_isa);
    }

    fn pkt_wp_update(&mut self, data: &[u8], pos: &mut usize) {
        if self.raw.len() == 1 {
            self.got_addr_bytes = false;
            self.num_addr_bytes = 0;
            self.got_excep_bytes = false;
            self.num_excep_bytes = 0;
            self.addr_pkt_isa = Isa::Unknown;
        }
        let mut done = false;
        while !done {
            let Some(b) = self.read_byte(data, pos) else { break };
            let idx = self.raw.len() - 1;
            if !self.got_addr_bytes {
                if idx <= 4 {
                    if b & 0x80 == 0 {
                        self.got_addr_bytes = true;
                        done = true;
                        self.got_excep_bytes = true;
                    }
                } else {
                    if b & 0x40 == 0 {
                        self.got_excep_bytes = true;
                    }
                    self.got_addr_bytes = true;
                    done = self.got_excep_bytes;
                    self.addr_pkt_isa = Self::isa_of_5th_byte(b);
                }
                self.num_addr_bytes += 1;
            } else if !self.got_excep_bytes {
                self.excep_alt_isa = b & 0x40 != 0;
                self.got_excep_bytes = true;
                self.num_excep_bytes += 1;
                done = true;
            }
        }
        if done {
            self.resolve_addr_isa();
            let (addr, bits) = self.extract_address(1);
            self.pkt.update_address(u64::from(addr), bits);
            self.state = State::SendPkt;
        }
    }

    fn pkt_ctxt_id(&mut self, data: &[u8], pos: &mut usize) {
        if self.raw.len() == 1 {
            self.num_ctxt_bytes = self.cfg.ctxt_id_bytes();
            self.got_ctxt_bytes = 0;
        }
        while self.got_ctxt_bytes < self.num_ctxt_bytes {
            if self.read_byte(data, pos).is_none() {
                return;
            }
            self.got_ctxt_bytes += 1;
        }
        let mut id = 0;
        for (i, b) in self.raw[1..].iter().take(self.num_ctxt_bytes).enumerate() {
            id |= u32::from(*b) << (8 * i);
        }
        self.pkt.update_context_id(id);
        self.state = State::SendPkt;
    }

    fn pkt_atom(&mut self, data: &[u8], pos: &mut usize) -> Result<(), PktError> {
        let hdr = self.raw[0];
        if !self.cfg.cycle_accurate() {
            self.pkt.set_atoms_from_header(hdr);
            self.state = State::SendPkt;
            return Ok(());
        }
        // Cycle accurate: one atom, a cycle count in the header and up to
        // four more bytes.
        let mut all = hdr & 0x40 == 0;
        while !all {
            let Some(b) = self.read_byte(data, pos) else { break };
            all = b & 0x80 == 0 || self.raw.len() == 5;
        }
        if all {
            let cc = self.extract_cycle_count(0)?;
            self.pkt.set_cycle_count(cc);
            self.pkt.set_ca_atom_from_header(hdr);
            self.state = State::SendPkt;
        }
        Ok(())
    }

    fn pkt_timestamp(&mut self, data: &[u8], pos: &mut usize) -> Result<(), PktError> {
        if self.raw.len() == 1 {
            self.got_ts_bytes = false;
            self.need_cc = self.cfg.cycle_accurate();
            self.got_cc_bytes = 0;
            self.ts_byte_max = if self.cfg.ts_64bit() { 10 } else { 8 };
        }
        let mut done = false;
        while !done {
            let Some(b) = self.read_byte(data, pos) else { break };
            if !self.got_ts_bytes {
                if b & 0x80 == 0 || self.raw.len() == self.ts_byte_max {
                    self.got_ts_bytes = true;
                    done = !self.need_cc;
                }
            } else {
                let cont = if self.got_cc_bytes == 0 { 0x40 } else { 0x80 };
                if b & cont == 0 {
                    done = true;
                }
                self.got_cc_bytes += 1;
                if self.got_cc_bytes == 5 {
                    done = true;
                }
            }
        }
        if done {
            let (mut ts, bits, end) = self.extract_ts()?;
            if self.need_cc {
                let cc = self.extract_cycle_count(end)?;
                self.pkt.set_cycle_count(cc);
            }
            if !self.cfg.ts_binary() {
                // Gray-coded: the packet replaces the low bits of the code.
                let size = if self.cfg.ts_64bit() { 64 } else { 48 };
                let mut gray = bin_to_gray(self.pkt.timestamp, size);
                if bits == 64 {
                    gray = ts;
                } else {
                    let mask = (1u64 << bits) - 1;
                    gray = (gray & !mask) | (ts & mask);
                }
                ts = gray_to_bin(gray, size);
            }
            self.pkt.update_timestamp(ts, bits);
            self.state = State::SendPkt;
        }
        Ok(())
    }

    fn pkt_branch(&mut self, data: &[u8], pos: &mut usize) -> Result<(), PktError> {
        let mut done = false;
        if self.raw.len() == 1 {
            self.got_addr_bytes = false;
            self.num_addr_bytes = 1;
            self.need_cc = self.cfg.cycle_accurate();
            self.got_cc_bytes = 0;
            self.got_excep_bytes = false;
            self.num_excep_bytes = 0;
            self.addr_pkt_isa = Isa::Unknown;
            if self.raw[0] & 0x80 == 0 {
                // The header is the whole address.
                self.got_addr_bytes = true;
                done = !self.need_cc;
                self.got_excep_bytes = true;
            }
        }
        while !done {
            let Some(b) = self.read_byte(data, pos) else { break };
            let idx = self.raw.len() - 1;
            if !self.got_addr_bytes {
                if idx < 4 {
                    if b & 0x80 == 0 {
                        if b & 0x40 == 0 {
                            self.got_excep_bytes = true;
                        }
                        self.got_addr_bytes = true;
                        done = self.got_excep_bytes && !self.need_cc;
                    }
                } else {
                    if b & 0x40 == 0 {
                        self.got_excep_bytes = true;
                    }
                    self.got_addr_bytes = true;
                    done = self.got_excep_bytes && !self.need_cc;
                    self.addr_pkt_isa = Self::isa_of_5th_byte(b);
                }
                self.num_addr_bytes += 1;
            } else if !self.got_excep_bytes {
                if self.num_excep_bytes == 0 {
                    if b & 0x80 == 0 {
                        self.got_excep_bytes = true;
                    }
                    self.excep_alt_isa = b & 0x40 != 0;
                } else {
                    self.got_excep_bytes = true;
                }
                self.num_excep_bytes += 1;
                if self.got_excep_bytes && !self.need_cc {
                    done = true;
                }
            } else if self.need_cc {
                done = if self.got_cc_bytes == 0 {
                    b & 0x40 == 0
                } else {
                    b & 0x80 == 0 || self.got_cc_bytes == 4
                };
                self.got_cc_bytes += 1;
            } else {
                return Err(self.malformed("sequencing error analysing branch packet"));
            }
        }
        if done {
            self.resolve_addr_isa();
            let (addr, bits) = self.extract_address(0);
            self.pkt.update_address(u64::from(addr), bits);

            if self.num_excep_bytes > 0 {
                let e1 = self.raw[self.num_addr_bytes];
                let mut num = u16::from((e1 >> 1) & 0xf);
                self.pkt.update_ns(e1 & 1 != 0);
                if self.num_excep_bytes > 1 {
                    let e2 = self.raw[self.num_addr_bytes + 1];
                    self.pkt.update_hyp((e2 >> 5) & 1 != 0);
                    num |= u16::from(e2 & 0x1f) << 4;
                }
                self.pkt.exception_present = true;
                self.pkt.exception_number = num;
            }
            if self.need_cc {
                let cc = self.extract_cycle_count(self.num_addr_bytes + self.num_excep_bytes)?;
                self.pkt.set_cycle_count(cc);
            }
            self.state = State::SendPkt;
        }
        Ok(())
    }

    // ---- packets whole in one block ----

    /// The packet at the start of `p` (`p` not empty) if it is of a common
    /// type and all its bytes are in `p`: `self.pkt` is set as the byte by
    /// byte gathering (`run_packet`) would set it, and its length is
    /// returned. `None` (nothing changed) leaves the packet to that
    /// gathering: other types, errors, and packets that run past `p`.
    #[inline]
    fn whole_packet(&mut self, p: &[u8]) -> Option<usize> {
        let hdr = p[0];
        let ca = self.cfg.cycle_accurate();
        let len = match hdr {
            0x08 => return self.whole_isync(p),
            0x0c | 0x66 | 0x76 => 1,
            h if h & 0x01 == 0x01 => return self.whole_branch(p),
            h if h & 0x81 == 0x80 => {
                if !ca {
                    self.pkt.set_atoms_from_header(hdr);
                    1
                } else {
                    let len = cc_len(p, 0, 5)?;
                    let cc = cycle_count(&p[..len])?;
                    self.pkt.set_cycle_count(cc);
                    self.pkt.set_ca_atom_from_header(hdr);
                    len
                }
            }
            _ => return None,
        };
        self.hdr_type = PtmPktType::from_header(hdr);
        self.pkt.pkt_type = self.hdr_type;
        Some(len)
    }

    /// Whether `b` is a whole atom packet, header only.
    #[inline]
    fn is_one_byte_atom(&self, b: u8) -> bool {
        let mask = if self.cfg.cycle_accurate() { 0xc1 } else { 0x81 };
        b & mask == 0x80
    }

    /// A run of one-byte atom packets was taken as bytes, the last `hdr`
    /// at `index`: the processor is left as sending them would have left
    /// it.
    fn atom_run_taken(&mut self, index: TrcIndex, hdr: u8) {
        self.pkt_index = index;
        self.hdr_type = PtmPktType::Atom;
        self.pkt.pkt_type = PtmPktType::Atom;
        if self.cfg.cycle_accurate() {
            self.pkt.set_cycle_count(super::decoder::one_byte_atom_cycles(hdr));
            self.pkt.set_ca_atom_from_header(hdr);
        } else {
            self.pkt.set_atoms_from_header(hdr);
        }
        self.pkt.clear();
    }

    /// An I-sync whole in `p` (see [`whole_packet`](Self::whole_packet)).
    fn whole_isync(&mut self, p: &[u8]) -> Option<usize> {
        let info = *p.get(5)?;
        let reason = (info >> 5) & 3;
        let need_cc = reason != 0 && self.cfg.cycle_accurate();
        let cc_end = if need_cc { cc_len(p, 6, 5)? } else { 6 };
        let len = cc_end + self.cfg.ctxt_id_bytes();
        let p = p.get(..len)?;
        self.hdr_type = PtmPktType::ISync;
        self.pkt.pkt_type = PtmPktType::ISync;
        self.pkt.isync_reason = ISyncReason::from_bits(reason);
        self.pkt.update_ns(info & 0x08 != 0);
        self.pkt.update_alt_isa(info & 0x04 != 0);
        self.pkt.update_hyp(info & 0x02 != 0);
        let isa = if p[1] & 1 != 0 {
            if info & 0x04 != 0 { Isa::Tee } else { Isa::Thumb2 }
        } else {
            Isa::Arm
        };
        self.pkt.update_isa(isa);
        let addr = u32::from(p[1] & 0xfe) | u32::from(p[2]) << 8 | u32::from(p[3]) << 16 | u32::from(p[4]) << 24;
        self.pkt.update_address(u64::from(addr), 32);
        if need_cc {
            self.pkt.set_cycle_count(cycle_count(&p[6..cc_end])?);
        }
        if cc_end < len {
            let mut id = 0u32;
            for (i, b) in p[cc_end..].iter().enumerate() {
                id |= u32::from(*b) << (8 * i);
            }
            self.pkt.update_context_id(id);
        }
        Some(len)
    }

    /// A branch address packet whole in `p` (see
    /// [`whole_packet`](Self::whole_packet)), read as `pkt_branch` reads it.
    fn whole_branch(&mut self, p: &[u8]) -> Option<usize> {
        let need_cc = self.cfg.cycle_accurate();
        let mut num_addr = 1;
        let mut num_excep = 0;
        let mut addr_isa = Isa::Unknown;
        let mut alt_isa = self.excep_alt_isa;
        if p[0] & 0x80 != 0 {
            // Address bytes: up to four more, the last without bit 7 (or
            // the fifth); bit 6 clear in the last says no exception bytes.
            let got_excep = loop {
                let b = *p.get(num_addr)?;
                num_addr += 1;
                if num_addr == 5 {
                    addr_isa = Self::isa_of_5th_byte(b);
                    break b & 0x40 == 0;
                }
                if b & 0x80 == 0 {
                    break b & 0x40 == 0;
                }
            };
            if !got_excep {
                let e1 = *p.get(num_addr)?;
                alt_isa = e1 & 0x40 != 0;
                num_excep = if e1 & 0x80 == 0 { 1 } else { 2 };
                p.get(num_addr + num_excep - 1)?;
            }
        }
        let opt = num_addr + num_excep;
        let len = if need_cc { cc_len(p, opt, 5)? } else { opt };
        let cc = if need_cc {
            Some(cycle_count(&p[opt..len])?)
        } else {
            None
        };

        // All there: the packet as `pkt_branch` completes it.
        self.hdr_type = PtmPktType::BranchAddress;
        self.pkt.pkt_type = PtmPktType::BranchAddress;
        self.excep_alt_isa = alt_isa;
        self.got_excep_bytes = true;
        self.num_addr_bytes = num_addr;
        self.addr_pkt_isa = addr_isa;
        self.resolve_addr_isa();
        let (addr, bits) = address_bits(p, num_addr, self.addr_pkt_isa);
        self.pkt.update_address(u64::from(addr), bits);
        if num_excep > 0 {
            let e1 = p[num_addr];
            let mut num = u16::from((e1 >> 1) & 0xf);
            self.pkt.update_ns(e1 & 1 != 0);
            if num_excep > 1 {
                let e2 = p[num_addr + 1];
                self.pkt.update_hyp((e2 >> 5) & 1 != 0);
                num |= u16::from(e2 & 0x1f) << 4;
            }
            self.pkt.exception_present = true;
            self.pkt.exception_number = num;
        }
        if let Some(cc) = cc {
            self.pkt.set_cycle_count(cc);
        }
        Some(len)
    }

    // ---- field extraction ----

    fn extract_ctxt_id(&mut self, idx: usize) -> Result<u32, PktError> {
        let mut id = 0u32;
        for i in 0..self.num_ctxt_bytes {
            let Some(&b) = self.raw.get(idx + i) else {
                return Err(self.malformed("Insufficient packet bytes for Context ID value."));
            };
            id |= u32::from(b) << (8 * i);
        }
        Ok(id)
    }

    /// The cycle count from `offset` in the packet (see [`cycle_count`]).
    fn extract_cycle_count(&mut self, offset: usize) -> Result<u32, PktError> {
        match cycle_count(self.raw.get(offset..).unwrap_or(&[])) {
            Some(cc) => Ok(cc),
            None => Err(self.malformed("Insufficient packet bytes for Cycle Count value.")),
        }
    }

    /// The timestamp value, how many bits it gives, and the index after it.
    fn extract_ts(&mut self) -> Result<(u64, u8, usize), PktError> {
        let full = self.cfg.ts_64bit();
        let (last_idx, last_mask, last_bits) = if full { (9, 0xff, 8) } else { (7, 0x3f, 6) };
        let mut ts = 0u64;
        let mut bits = 0u8;
        let mut shift = 0;
        let mut idx = 1;
        loop {
            let Some(&b) = self.raw.get(idx) else {
                return Err(self.malformed("Insufficient packet bytes for Timestamp value."));
            };
            let (val, more) = if idx < last_idx {
                bits += 7;
                (b & 0x7f, b & 0x80 != 0)
            } else {
                bits += last_bits;
                (b & last_mask, false)
            };
            ts |= u64::from(val) << shift;
            idx += 1;
            shift += 7;
            if !more {
                break;
            }
        }
        Ok((ts, bits, idx))
    }

    /// The address bits of a branch or waypoint packet whose address bytes
    /// start at `offset` (see [`address_bits`]).
    fn extract_address(&self, offset: usize) -> (u32, u8) {
        address_bits(
            self.raw.get(offset..).unwrap_or(&[]),
            self.num_addr_bytes,
            self.addr_pkt_isa,
        )
    }

    fn log(&self, e: &PktError) {
        e.log(&self.err, self.pkt_index, self.trace_id);
    }
}

/// The end of a cycle count starting at `start` in `p` (first byte's
/// continuation in bit 6, then in bit 7), of at most `max` bytes; `None`
/// when it runs past `p`.
#[inline]
fn cc_len(p: &[u8], start: usize, max: usize) -> Option<usize> {
    let mut i = start;
    loop {
        let b = *p.get(i)?;
        i += 1;
        let more = if i == start + 1 { b & 0x40 != 0 } else { b & 0x80 != 0 };
        if !more || i == start + max {
            return Some(i);
        }
    }
}

/// A cycle count: 4 bits in the first byte (continuation in bit 6), then 7
/// bits a byte (continuation in bit 7), five bytes at most; `None` when
/// `p` ends first.
fn cycle_count(p: &[u8]) -> Option<u32> {
    let mut cc = 0u32;
    let mut shift = 4;
    for n in 0..5 {
        let b = *p.get(n)?;
        let more = if n == 0 {
            cc = u32::from((b >> 2) & 0xf);
            b & 0x40 != 0
        } else {
            cc |= u32::from(b & 0x7f) << shift;
            shift += 7;
            b & 0x80 != 0
        };
        if !more {
            break;
        }
    }
    Some(cc)
}

/// The address bits of the first `num_addr_bytes` bytes of `p` (a branch
/// or waypoint packet's address bytes); the ISA decides the 5th byte and
/// the alignment.
fn address_bits(p: &[u8], num_addr_bytes: usize, isa: Isa) -> (u32, u8) {
    let mut value = 0u32;
    let mut total = 0u8;
    let mut next_shift = 0u32;
    for i in 0..num_addr_bytes {
        let (mask, nbits) = if i == 4 {
            match isa {
                Isa::Jazelle => (0x1f, 5),
                Isa::Arm => (0x07, 3),
                _ => (0x0f, 4),
            }
        } else if i == 0 {
            (0x7e, 7)
        } else if i == num_addr_bytes - 1 {
            (0x3f, 6)
        } else {
            (0x7f, 7)
        };
        let b = p.get(i).copied().unwrap_or(0);
        value |= u32::from(b & mask).checked_shl(next_shift).unwrap_or(0);
        total += nbits;
        if i == 0 {
            if isa == Isa::Jazelle {
                value >>= 1;
                next_shift = 6;
                total -= 1;
            } else {
                next_shift = 7;
            }
        } else {
            next_shift += 7;
        }
    }
    if isa == Isa::Arm {
        value <<= 1;
        total += 1;
    }
    (value, total)
}

/// Fills `buf` with the memory from `start` bytes into the block `data`:
/// the block's bytes, then what follows the block as far as it is known
/// (see [`overread`]: for a formatted source, the deformatter's record),
/// zeros beyond.
fn block_memory(data: &[u8], start: usize, buf: &mut [u8]) {
    let mut after = [0u8; overread::IMAGE_MAX];
    let known = overread::following_bytes(&mut after);
    for (i, b) in buf.iter_mut().enumerate() {
        let at = start + i;
        *b = match at.checked_sub(data.len()) {
            None => data[at],
            Some(past) if past < known => after[past],
            Some(_) => 0,
        };
    }
}

impl PacketProcessor for PtmProcessor {
    type Packet = PtmPacket;
    fn index_entries(pkt: &PtmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
        index_entries_of(pkt, emit);
    }
    fn error_link(&self) -> Option<&ErrLink> {
        Some(&self.err)
    }

    fn process(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, PtmPacket>) -> (DatapathResp, usize) {
        let mut pos = 0usize;
        let mut resp = DatapathResp::Cont;
        while (pos < data.len() || self.state == State::SendPkt) && resp.is_cont() {
            match self.state {
                State::WaitSync => {
                    if !self.wait_async_start {
                        self.pkt_index = index + pos as u64;
                        self.pkt.pkt_type = PtmPktType::NotSync;
                        self.async_raw_op = out.mon.is_some();
                    }
                    resp = self.wait_async(data, &mut pos, out);
                }
                State::ProcHdr | State::ProcData => {
                    // A run of one-byte atom packets goes to the decoder as
                    // its bytes; what it leaves is built here.
                    if self.state == State::ProcHdr
                        && self.is_one_byte_atom(data[pos])
                        && let Some((r, n)) =
                            out.offer_run(index + pos as u64, &data[pos..], |b| self.is_one_byte_atom(b))
                    {
                        pos += n;
                        self.atom_run_taken(index + pos as u64 - 1, data[pos - 1]);
                        resp = r;
                        continue;
                    }
                    if self.state == State::ProcHdr
                        && let Some(n) = self.whole_packet(&data[pos..])
                    {
                        // A packet whole in the block: parsed from the
                        // block, not gathered byte by byte.
                        self.pkt_index = index + pos as u64;
                        resp = out.emit(self.pkt_index, &self.pkt, &data[pos..pos + n]);
                        pos += n;
                        self.pkt.clear();
                        continue;
                    }
                    if self.state == State::ProcHdr {
                        self.pkt_index = index + pos as u64;
                        let b = data[pos];
                        pos += 1;
                        self.raw.push(b);
                        self.hdr_type = PtmPktType::from_header(b);
                        self.pkt.pkt_type = self.hdr_type;
                        self.state = State::ProcData;
                    }
                    if let Err(e) = self.run_packet(data, &mut pos) {
                        self.log(&e);
                        if matches!(e.code, ErrCode::BadPacketSeq | ErrCode::InvalidPcktHdr) {
                            // Bad packets go on to the decoder, which resynchronises.
                            self.state = State::SendPkt;
                        } else {
                            resp = DatapathResp::FatalInvalidData;
                        }
                    }
                    // A packet complete goes out now, not on another turn
                    // of the loop.
                    if self.state == State::SendPkt {
                        resp = self.output_packet(out);
                        self.pkt.clear();
                        self.state = State::ProcHdr;
                    }
                }
                State::SendPkt => {
                    resp = self.output_packet(out);
                    self.pkt.clear();
                    self.state = State::ProcHdr;
                }
            }
        }
        // Bytes past a block's end are listed only when zeros carried over
        // from the block before did not start an A-sync (they are counted
        // again): ask for the deformatter's record just while such zeros
        // are pending.
        let pending = self.state == State::WaitSync && self.wait_async_start;
        if pending != self.overread.is_some() {
            self.overread = pending.then(|| overread::Interest::register(self.trace_id));
        }
        (resp, pos)
    }

    fn eot(&mut self, out: &mut PacketOut<'_, PtmPacket>) -> DatapathResp {
        if self.raw.is_empty() {
            return DatapathResp::Cont;
        }
        self.pkt.set_err_type(PtmPktType::IncompleteEot);
        self.output_packet(out)
    }

    fn reset(&mut self, _index: TrcIndex) {
        self.init_processor_state();
    }
}

/// The stream index entries of one PTM packet: bad, reserved and
/// incomplete packets make none, as they are not listed under a name.
fn index_entries_of(p: &crate::ptm::PtmPacket, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::ptm::PtmPktType as T;
    match p.pkt_type {
        T::ASync => emit(EntryKind::Sync, 0),
        T::ISync => emit(EntryKind::InstrSync, p.addr),
        T::Trigger => emit(EntryKind::Trigger, 0),
        T::Timestamp => emit(EntryKind::Timestamp, p.timestamp),
        T::ContextId => emit(EntryKind::Context, p.context_id as u64),
        T::Vmid => emit(EntryKind::Vmid, u64::from(p.vmid)),
        _ => {}
    }
}
