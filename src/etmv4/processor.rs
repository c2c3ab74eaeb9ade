//! ETMv4 / ETE packet processor: trace bytes to [`EtmV4Packet`]s.
//!
//! Bytes are taken one at a time; the first byte of a packet picks a
//! parser from a 256-entry header table built from the configuration
//! (headers reserved in this configuration, and the ETE-only packets when
//! the unit is not an ETE, map to the reserved-header parser). Until an
//! alignment synchronisation sequence is seen, data is passed on as
//! `I_NOT_SYNC` in runs of up to eight bytes, as OpenCSD does.

use crate::datapath::{DatapathResp, TrcIndex};
use crate::decoder::{PacketOut, PacketProcessor, ProcStats};
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::hooks::EntryKind;
use crate::interfaces::RunAddr;
use crate::logger::ErrLink;

use super::config::EtmV4Config;
use super::packet::{Atoms, EtmV4Packet, PktType};

/// Parser for the bytes of one packet kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parser {
    NotSync,
    NoPayload,
    Reserved,
    InvalidCfg,
    Extension,
    Async,
    TraceInfo,
    Timestamp,
    Exception,
    CycleCount,
    Speculation,
    CondInstr,
    CondResult,
    Context,
    AddrCtxt,
    ShortAddr,
    LongAddr,
    Q,
    Atom,
    Ite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Header,
    Data,
    SendPacket,
    SendUnsynced,
}

// Trace info section flags.
const TINFO_INFO: u8 = 0x01;
const TINFO_KEY: u8 = 0x02;
const TINFO_SPEC: u8 = 0x04;
const TINFO_CYCT: u8 = 0x08;
const TINFO_WNDW: u8 = 0x10;
const TINFO_CTRL: u8 = 0x20;
const TINFO_ALL_SECT: u8 = 0x1F;
const TINFO_ALL: u8 = 0x3F;

/// Per-packet parsing progress.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    tinfo_flags: u8,
    tinfo_ctrl_bytes: usize,
    ts_done: bool,
    cc_done: bool,
    ts_bytes: u32,
    excep_size: usize,
    count_done: bool,
    commit_done: bool,
    has_count: bool,
    f1_p1_done: bool,
    f1_p2_done: bool,
    f1_has_p2: bool,
    vmid_bytes: u32,
    ctxtid_bytes: u32,
    addr_bytes: u32,
    addr_is: u8,
    addr_64: bool,
    ctxt_info_done: bool,
    addr_done: bool,
    q_type: u8,
    q_has_addr: bool,
    q_addr_short: bool,
    q_addr_match: bool,
    q_qe: u8,
}

/// The ETMv4 / ETE packet processor.
pub struct EtmV4PktProc {
    cfg: EtmV4Config,
    table: [(PktType, Parser); 256],
    /// The atoms of each atom packet header byte (the packet is its header).
    atom_table: [Atoms; 256],
    pkt: EtmV4Packet,
    buf: Vec<u8>,
    state: State,
    parser: Parser,
    is_sync: bool,
    first_trace_info: bool,
    sent_notsync: bool,
    packet_index: TrcIndex,
    block_index: TrcIndex,
    /// Bytes of the current block used so far.
    processed: usize,
    dump_unsynced: usize,
    /// Bytes processed while not synchronised (for statistics).
    unsynced_total: u64,
    update_unsync_index: TrcIndex,
    p: Progress,
    err: Option<ErrLink>,
    trace_id: u8,
    /// The next packet is an address packet of a run of atom packets that
    /// the decoder left, followed by an atom packet (see
    /// [`Self::atom_run`]).
    addr_in_run: bool,
    /// The address packets of the run of atom packets at hand.
    run_addrs: Vec<RunAddr>,
    /// Under OpenCSD's flow control (see [`Self::set_opencsd_flow`]).
    opencsd_flow: bool,
}

impl EtmV4PktProc {
    /// Whether an alignment synchronisation has been seen.
    #[cfg(test)]
    pub(crate) fn is_synced(&self) -> bool {
        self.is_sync
    }

    /// A processor for `cfg`; errors go to `err` when given.
    pub fn new(cfg: EtmV4Config, err: Option<ErrLink>) -> Self {
        let table = build_table(&cfg);
        let atom_table = atom_table_of(&table);
        let trace_id = cfg.trace_id();
        let mut pkt = EtmV4Packet::default();
        pkt.protocol_version = cfg.full_version();
        pkt.reset_addr_stack();
        pkt.init_start_state();
        let mut p = EtmV4PktProc {
            cfg,
            table,
            atom_table,
            pkt,
            buf: Vec::with_capacity(32),
            state: State::Header,
            parser: Parser::NotSync,
            is_sync: false,
            first_trace_info: false,
            sent_notsync: false,
            packet_index: 0,
            block_index: 0,
            processed: 0,
            dump_unsynced: 0,
            unsynced_total: 0,
            update_unsync_index: 0,
            p: Progress::default(),
            err,
            trace_id,
            addr_in_run: false,
            run_addrs: Vec::new(),
            opencsd_flow: false,
        };
        p.init_processor_state();
        p
    }

    /// Under OpenCSD's flow control (see
    /// [`DecoderOptions::opencsd_flow`](crate::decoder::DecoderOptions::opencsd_flow))
    /// a run of packets never takes the last byte of a block: that packet
    /// goes to the decoder on its own, its elements sent after it, as with
    /// a packet monitor attached. A wait that stops the processor with the
    /// whole block taken then leaves the decoder holding what OpenCSD's
    /// would, that packet's elements; a wait before it leaves bytes to
    /// give again, and the elements come out in the same order.
    pub fn set_opencsd_flow(&mut self, on: bool) {
        self.opencsd_flow = on;
    }

    fn init_packet_state(&mut self) {
        self.buf.clear();
        self.pkt.init_next_packet();
        self.update_unsync_index = 0;
    }

    fn init_processor_state(&mut self) {
        self.init_packet_state();
        self.addr_in_run = false;
        self.parser = Parser::NotSync;
        self.packet_index = 0;
        self.is_sync = false;
        self.first_trace_info = false;
        self.sent_notsync = false;
        self.state = State::Header;
        self.pkt.init_start_state();
    }

    fn log(&self, code: ErrCode, msg: &str) {
        if let Some(e) = &self.err {
            e.log(
                &TraceError::new(Severity::Error, code)
                    .at(self.packet_index)
                    .on_id(self.trace_id)
                    .with_message(msg),
            );
        }
    }

    fn send_unsynced(&mut self, out: &mut PacketOut<'_, EtmV4Packet>) -> DatapathResp {
        // Unsynced bytes are counted as they are dumped, as OpenCSD counts
        // them: not the sync packet's own bytes, nor those left at the end.
        self.unsynced_total += self.dump_unsynced as u64;
        let n = self.dump_unsynced.min(self.buf.len());
        if let Some(m) = out.mon.as_mut() {
            m.raw_packet_data_mon(
                crate::datapath::DatapathOp::Data,
                self.packet_index,
                Some(&self.pkt),
                &self.buf[..n],
            );
        }
        let mut resp = DatapathResp::Cont;
        if !self.sent_notsync {
            if let Some(s) = out.sink.as_mut() {
                resp = s.packet_data_in(crate::datapath::DatapathOp::Data, self.packet_index, Some(&self.pkt));
            }
            self.sent_notsync = true;
        }
        self.buf.drain(..n);
        resp
    }

    /// Feeds one byte (already appended to `buf`) to the current parser.
    fn parse_byte(&mut self, b: u8) -> Result<(), ErrCode> {
        match self.parser {
            Parser::NotSync => self.p_not_sync(b),
            Parser::NoPayload => self.p_no_payload(b),
            Parser::Reserved => {
                self.pkt.set_err_type(PktType::Reserved, b);
                return Err(ErrCode::InvalidPcktHdr);
            }
            Parser::InvalidCfg => {
                // A bad header as a reserved one is (logged, counted), and
                // passed on to the decoder, which decides.
                self.pkt.set_err_type(PktType::ReservedCfg, b);
                return Err(ErrCode::InvalidPcktHdr);
            }
            Parser::Extension => self.p_extension(b),
            Parser::Async => self.p_async(b),
            Parser::TraceInfo => return self.p_trace_info(b),
            Parser::Timestamp => return self.p_timestamp(b),
            Parser::Exception => self.p_exception(b),
            Parser::CycleCount => return self.p_cycle_count(b),
            Parser::Speculation => return self.p_speculation(b),
            Parser::CondInstr => return self.p_cond_instr(b),
            Parser::CondResult => return self.p_cond_result(b),
            Parser::Context => self.p_context(b),
            Parser::AddrCtxt => self.p_addr_ctxt(b),
            Parser::ShortAddr => self.p_short_addr(b),
            Parser::LongAddr => self.p_long_addr(b),
            Parser::Q => return self.p_q(b),
            Parser::Atom => self.p_atom(b),
            Parser::Ite => self.p_ite(),
        }
        Ok(())
    }

    fn bad_sequence(&mut self) -> ErrCode {
        self.pkt.set_err_type(PktType::BadSequence, 0);
        ErrCode::BadPacketSeq
    }

    /// A continuation-bit field of up to `limit` bytes at `start`.
    fn cont_field(&mut self, start: usize, limit: usize) -> Result<(u32, usize), ErrCode> {
        let mut value = 0u32;
        let mut i = 0;
        loop {
            if i >= limit {
                return Ok((value, i));
            }
            let Some(&b) = self.buf.get(start + i) else {
                self.log_bad_seq("Invalid 32 bit continuation fields in packet");
                return Err(self.bad_sequence());
            };
            value |= ((b & 0x7F) as u32).wrapping_shl(7 * i as u32);
            i += 1;
            if b & 0x80 == 0 {
                return Ok((value, i));
            }
        }
    }

    fn log_bad_seq(&self, msg: &str) {
        self.log(ErrCode::BadPacketSeq, msg);
    }

    // ---- parsers ----

    fn p_not_sync(&mut self, b: u8) {
        let here = self.block_index + self.processed as u64;
        if b == 0x00 {
            if self.buf.len() > 1 {
                self.dump_unsynced = self.buf.len() - 1;
                self.state = State::SendUnsynced;
                self.update_unsync_index = here - 1;
            } else {
                self.packet_index = here - 1;
            }
            self.parser = self.table[0].1;
        } else if self.buf.len() >= 8 {
            self.dump_unsynced = self.buf.len();
            self.state = State::SendUnsynced;
            self.update_unsync_index = here;
        }
    }

    fn p_no_payload(&mut self, b: u8) {
        match self.pkt.pkt_type {
            PktType::AddrMatch | PktType::SrcAddrMatch => self.pkt.set_exact_match(b & 0x3),
            PktType::Event => self.pkt.event_val = b & 0xF,
            PktType::NumDsMkr | PktType::UnnumDsMkr => self.pkt.dsm_val = b & 0x7,
            _ => {}
        }
        self.state = State::SendPacket;
    }

    fn p_extension(&mut self, b: u8) {
        if self.buf.len() != 2 {
            return;
        }
        if !self.is_sync && b != 0 {
            self.parser = Parser::NotSync;
            self.pkt.pkt_type = PktType::NotSync;
            return;
        }
        match b {
            0x03 => {
                self.pkt.pkt_type = PktType::Discard;
                self.state = State::SendPacket;
            }
            0x05 => {
                self.pkt.pkt_type = PktType::Overflow;
                self.state = State::SendPacket;
            }
            0x00 => {
                self.pkt.pkt_type = PktType::Async;
                self.parser = Parser::Async;
            }
            _ => {
                self.pkt.err_type = self.pkt.pkt_type;
                self.pkt.pkt_type = PktType::BadSequence;
                self.state = State::SendPacket;
            }
        }
    }

    fn p_async(&mut self, b: u8) {
        let n = self.buf.len();
        if b != 0 {
            if !self.is_sync && n != 12 {
                self.parser = Parser::NotSync;
                self.pkt.pkt_type = PktType::NotSync;
                return;
            }
            self.state = State::SendPacket;
            if n != 12 || b != 0x80 {
                self.pkt.pkt_type = PktType::BadSequence;
                self.pkt.err_type = PktType::Async;
            } else {
                self.is_sync = true;
            }
        } else if n == 12 {
            if !self.is_sync {
                // Extra leading zeros before a sync: pass one on as unsynced.
                self.dump_unsynced = 1;
                self.state = State::SendUnsynced;
            } else {
                self.pkt.pkt_type = PktType::BadSequence;
                self.pkt.err_type = PktType::Async;
                self.state = State::SendPacket;
            }
        }
    }

    fn p_trace_info(&mut self, b: u8) -> Result<(), ErrCode> {
        let n = self.buf.len();
        if n == 1 {
            self.p.tinfo_flags = 0;
            self.p.tinfo_ctrl_bytes = 1;
        } else if n == 2 {
            self.p.tinfo_flags = !b & TINFO_ALL_SECT;
            if b & 0x80 == 0 {
                self.p.tinfo_flags |= TINFO_CTRL;
            }
        } else {
            let done = b & 0x80 == 0;
            let f = &mut self.p.tinfo_flags;
            if *f & TINFO_CTRL == 0 {
                if done {
                    *f |= TINFO_CTRL;
                }
                self.p.tinfo_ctrl_bytes += 1;
            } else {
                for sect in [TINFO_INFO, TINFO_KEY, TINFO_SPEC, TINFO_CYCT, TINFO_WNDW] {
                    if *f & sect == 0 {
                        if done {
                            *f |= sect;
                        }
                        break;
                    }
                }
            }
        }
        if self.p.tinfo_flags != TINFO_ALL {
            return Ok(());
        }
        let mut idx = self.p.tinfo_ctrl_bytes + 1;
        let present = self.buf[1] & TINFO_ALL_SECT;
        self.pkt.clear_trace_info();
        for sect in [TINFO_INFO, TINFO_KEY, TINFO_SPEC, TINFO_CYCT, TINFO_WNDW] {
            if present & sect != 0 && idx < self.buf.len() {
                let (v, used) = self.cont_field(idx, 5)?;
                idx += used;
                match sect {
                    TINFO_INFO => self.pkt.set_trace_info(v),
                    TINFO_KEY => self.pkt.p0_key = v,
                    TINFO_SPEC => self.pkt.set_spec_depth(v),
                    TINFO_CYCT => self.pkt.set_cc_threshold(v),
                    _ => {} // commit window: not used
                }
            }
        }
        // OpenCSD keeps these two flags in bits 17 and 16 of the INFO
        // value, and an INFO field that long (INFO is 16 bits) sets them:
        // the listing shows what OpenCSD's does.
        let info = self.pkt.trace_info.val;
        self.pkt.trace_info.spec_field_present = present & TINFO_SPEC != 0 || info & (1 << 17) != 0;
        self.pkt.trace_info.initial = !self.first_trace_info || info & (1 << 16) != 0;
        self.first_trace_info = true;
        self.state = State::SendPacket;
        Ok(())
    }

    fn p_timestamp(&mut self, b: u8) -> Result<(), ErrCode> {
        if self.buf.len() == 1 {
            self.p.cc_done = b & 1 == 0;
            self.p.ts_done = false;
            self.p.ts_bytes = 0;
        } else if !self.p.ts_done {
            self.p.ts_bytes += 1;
            self.p.ts_done = self.p.ts_bytes == 9 || b & 0x80 == 0;
        } else if !self.p.cc_done {
            self.p.cc_done = b & 0x80 == 0;
        }
        if !(self.p.ts_done && self.p.cc_done) {
            return Ok(());
        }
        // Timestamp field: 7 bits a byte, the ninth byte has all 8.
        let mut value = 0u64;
        let mut i = 0usize;
        loop {
            let Some(&tb) = self.buf.get(1 + i) else {
                self.log_bad_seq("Invalid 64 bit continuation fields in packet");
                return Err(self.bad_sequence());
            };
            if i == 8 {
                value |= (tb as u64) << 56;
                i += 1;
                break;
            }
            value |= ((tb & 0x7F) as u64) << (7 * i);
            i += 1;
            if tb & 0x80 == 0 {
                break;
            }
        }
        let mut bits = if i < 9 { (i * 7) as u8 } else { 64 };
        if !self.pkt.ts_valid && self.first_trace_info {
            bits = 64;
        }
        self.pkt.set_ts(value, bits);
        if self.buf[0] & 1 != 0 {
            let (count, _) = self.cont_field(1 + i, 3)?;
            let mask = ((1u64 << self.cfg.cc_size()) - 1) as u32;
            self.pkt.set_cycle_count(count & mask);
        }
        self.state = State::SendPacket;
        Ok(())
    }

    fn p_exception(&mut self, b: u8) {
        let ete = self.cfg.is_ete();
        match self.buf.len() {
            1 => self.p.excep_size = 3,
            2 => {
                if b & 0x80 == 0 {
                    self.p.excep_size = 2;
                }
                // ETE: PE reset and transaction failure carry a third byte.
                let t = (b >> 1) & 0x1F;
                if ete && (t == 0 || t == 0x18) {
                    self.p.excep_size = 3;
                }
            }
            _ => {}
        }
        if self.buf.len() != self.p.excep_size {
            return;
        }
        let b1 = self.buf[1];
        let mut exc_type = ((b1 >> 1) & 0x1F) as u16;
        let addr_interp = ((b1 & 0x40) >> 5) | (b1 & 1);
        let mut fault_pending = false;
        if b1 & 0x80 != 0 {
            let b2 = self.buf[2];
            exc_type |= ((b2 & 0x1F) as u16) << 5;
            fault_pending = (b2 >> 5) & 1 != 0;
        }
        self.pkt.exception.exc_type = exc_type;
        self.pkt.exception.addr_interp = addr_interp;
        self.pkt.exception.m_fault_pending = fault_pending;
        self.pkt.exception.m_type = self.cfg.is_m_profile();
        self.state = State::SendPacket;
        if ete && (exc_type == 0 || exc_type == 0x18) {
            self.pkt.set_64bit_addr(0, 0);
            self.pkt.pkt_type = if exc_type == 0x18 {
                PktType::TransFail
            } else {
                PktType::PeReset
            };
        }
    }

    fn p_cycle_count(&mut self, b: u8) -> Result<(), ErrCode> {
        let fmt = self.pkt.pkt_type;
        let n = self.buf.len();
        let commit_opt1 = self.cfg.commit_opt1();
        if n == 1 {
            self.p.count_done = false;
            self.p.commit_done = false;
            self.p.has_count = true;
            match fmt {
                PktType::CcntF3 => {
                    if !commit_opt1 {
                        self.pkt.set_commit(((b >> 2) & 0x3) as u32 + 1);
                    }
                    let cc = self.pkt.cc_threshold().wrapping_add((b & 0x3) as u32);
                    self.pkt.set_cycle_count(cc);
                    self.state = State::SendPacket;
                    return Ok(());
                }
                PktType::CcntF1 => {
                    if b & 1 != 0 {
                        self.p.has_count = false;
                        self.p.count_done = true;
                    }
                    if commit_opt1 {
                        self.p.commit_done = true;
                    }
                }
                _ => {}
            }
        } else if fmt == PktType::CcntF2 && n == 2 {
            if !commit_opt1 {
                let offset: i64 = if self.buf[0] & 1 != 0 {
                    self.cfg.max_spec_depth() as i64 - 15
                } else {
                    1
                };
                let commit = ((b >> 4) & 0xF) as i64 + offset;
                self.pkt.set_commit(commit as u32);
            }
            let cc = self.pkt.cc_threshold().wrapping_add((b & 0xF) as u32);
            self.pkt.set_cycle_count(cc);
            self.state = State::SendPacket;
            return Ok(());
        } else if !self.p.commit_done {
            self.p.commit_done = b & 0x80 == 0;
        } else if !self.p.count_done {
            self.p.count_done = b & 0x80 == 0;
        }
        if fmt == PktType::CcntF1 && self.p.commit_done && self.p.count_done {
            let mut idx = 1;
            if !commit_opt1 {
                let (v, used) = self.cont_field(idx, 5)?;
                idx += used;
                self.pkt.set_commit(v);
            }
            if self.p.has_count {
                let (v, _) = self.cont_field(idx, 3)?;
                let cc = v.wrapping_add(self.pkt.cc_threshold());
                self.pkt.set_cycle_count(cc);
            } else {
                // Unknown count (after an overflow) is shown as 0.
                self.pkt.set_cycle_count(0);
            }
            self.state = State::SendPacket;
        }
        Ok(())
    }

    fn p_speculation(&mut self, b: u8) -> Result<(), ErrCode> {
        if self.buf.len() == 1 {
            match self.pkt.pkt_type {
                PktType::Mispredict | PktType::CancelF2 => {
                    match b & 0x3 {
                        1 => self.pkt.set_atoms(0x1, 1),
                        2 => self.pkt.set_atoms(0x3, 2),
                        3 => self.pkt.set_atoms(0x0, 1),
                        _ => {}
                    }
                    self.pkt.cancel_elements = if self.pkt.pkt_type == PktType::CancelF2 { 1 } else { 0 };
                    self.state = State::SendPacket;
                }
                PktType::CancelF3 => {
                    if b & 1 != 0 {
                        self.pkt.set_atoms(0x1, 1);
                    }
                    self.pkt.cancel_elements = ((b >> 1) & 0x3) as u32 + 2;
                    self.state = State::SendPacket;
                }
                _ => {}
            }
        } else if b & 0x80 == 0 {
            let (v, _) = self.cont_field(1, 5)?;
            if self.pkt.pkt_type == PktType::Commit {
                self.pkt.set_commit(v);
            } else {
                self.pkt.cancel_elements = v;
            }
            self.state = State::SendPacket;
        }
        Ok(())
    }

    fn p_cond_instr(&mut self, b: u8) -> Result<(), ErrCode> {
        let n = self.buf.len();
        let mut f1_done = false;
        if n == 1 {
            if self.pkt.pkt_type == PktType::CondIF2 {
                self.state = State::SendPacket;
            }
        } else if n == 2 && self.pkt.pkt_type == PktType::CondIF3 {
            self.state = State::SendPacket;
        } else {
            f1_done = b & 0x80 == 0;
        }
        if f1_done {
            self.cont_field(1, 5)?;
            self.state = State::SendPacket;
        }
        Ok(())
    }

    fn p_cond_result(&mut self, b: u8) -> Result<(), ErrCode> {
        let n = self.buf.len();
        if n == 1 {
            self.p.f1_p1_done = false;
            self.p.f1_p2_done = false;
            self.p.f1_has_p2 = false;
            match self.pkt.pkt_type {
                PktType::CondResF1 => {
                    self.p.f1_has_p2 = true;
                    if b & 0xFC == 0x6C {
                        self.p.f1_p2_done = true;
                        self.p.f1_has_p2 = false;
                    }
                }
                PktType::CondResF2 | PktType::CondResF4 => self.state = State::SendPacket,
                _ => {}
            }
        } else if self.pkt.pkt_type == PktType::CondResF3 && n == 2 {
            self.state = State::SendPacket;
        } else {
            if !self.p.f1_p1_done {
                self.p.f1_p1_done = b & 0x80 == 0;
            } else if !self.p.f1_p2_done {
                self.p.f1_p2_done = b & 0x80 == 0;
            }
            if self.p.f1_p1_done && self.p.f1_p2_done {
                // Key / result payloads: checked for completeness only.
                let mut idx = 1;
                let parts = if self.p.f1_has_p2 { 2 } else { 1 };
                for _ in 0..parts {
                    let mut used = 0;
                    loop {
                        let Some(&rb) = self.buf.get(idx + used) else {
                            self.log_bad_seq("Invalid continuation fields in packet");
                            return Err(self.bad_sequence());
                        };
                        used += 1;
                        if rb & 0x80 == 0 || used >= 6 {
                            break;
                        }
                    }
                    idx += used;
                }
                self.state = State::SendPacket;
            }
        }
        Ok(())
    }

    fn p_context(&mut self, b: u8) {
        let n = self.buf.len();
        let mut send = false;
        if n == 1 {
            if b & 1 == 0 {
                self.pkt.set_context_info(false, 0, false, false, false);
                self.state = State::SendPacket;
            }
        } else if n == 2 {
            if b & 0xC0 == 0 {
                send = true;
            } else {
                self.p.vmid_bytes = if b & 0x40 != 0 { self.cfg.vmid_size() / 8 } else { 0 };
                self.p.ctxtid_bytes = if b & 0x80 != 0 { self.cfg.cid_size() / 8 } else { 0 };
            }
        } else {
            if self.p.vmid_bytes > 0 {
                self.p.vmid_bytes -= 1;
            } else if self.p.ctxtid_bytes > 0 {
                self.p.ctxtid_bytes -= 1;
            }
            send = self.p.vmid_bytes == 0 && self.p.ctxtid_bytes == 0;
        }
        if send {
            self.extract_context(1);
            self.state = State::SendPacket;
        }
    }

    fn extract_context(&mut self, at: usize) {
        let info = self.buf[at];
        self.pkt.set_context_info(
            true,
            info & 0x3,
            (info >> 5) & 1 != 0,
            (info >> 4) & 1 != 0,
            (info >> 3) & 1 != 0,
        );
        let n_vmid = if info & 0x40 != 0 { self.cfg.vmid_size() / 8 } else { 0 } as usize;
        let n_cid = if info & 0x80 != 0 { self.cfg.cid_size() / 8 } else { 0 } as usize;
        let mut idx = at + 1;
        if n_vmid > 0 {
            let v = le_bytes(&self.buf[idx..idx + n_vmid]);
            idx += n_vmid;
            self.pkt.set_vmid(v);
        }
        if n_cid > 0 {
            let v = le_bytes(&self.buf[idx..idx + n_cid]);
            self.pkt.set_ctxt_id(v);
        }
    }

    fn p_addr_ctxt(&mut self, b: u8) {
        if self.buf.len() == 1 {
            self.p.addr_is = 0;
            self.p.addr_bytes = 4;
            self.p.addr_64 = false;
            self.p.vmid_bytes = 0;
            self.p.ctxtid_bytes = 0;
            self.p.ctxt_info_done = false;
            match self.pkt.pkt_type {
                PktType::AddrCtxtL32IS1 => self.p.addr_is = 1,
                PktType::AddrCtxtL64IS1 => {
                    self.p.addr_is = 1;
                    self.p.addr_bytes = 8;
                    self.p.addr_64 = true;
                }
                PktType::AddrCtxtL64IS0 => {
                    self.p.addr_bytes = 8;
                    self.p.addr_64 = true;
                }
                _ => {}
            }
            return;
        }
        if self.p.addr_bytes == 0 {
            if !self.p.ctxt_info_done {
                self.p.ctxt_info_done = true;
                self.p.vmid_bytes = if b & 0x40 != 0 { self.cfg.vmid_size() / 8 } else { 0 };
                self.p.ctxtid_bytes = if b & 0x80 != 0 { self.cfg.cid_size() / 8 } else { 0 };
            } else if self.p.vmid_bytes > 0 {
                self.p.vmid_bytes -= 1;
            } else if self.p.ctxtid_bytes > 0 {
                self.p.ctxtid_bytes -= 1;
            }
        } else {
            self.p.addr_bytes -= 1;
        }
        if self.p.addr_bytes == 0 && self.p.ctxt_info_done && self.p.vmid_bytes == 0 && self.p.ctxtid_bytes == 0 {
            let is = self.p.addr_is;
            let used = if self.p.addr_64 {
                let v = long_addr64(&self.buf[1..9], is);
                self.pkt.set_64bit_addr(v, is);
                8
            } else {
                let v = long_addr32(&self.buf[1..5], is);
                self.pkt.set_32bit_addr(v, is);
                4
            };
            self.extract_context(1 + used);
            self.state = State::SendPacket;
        }
    }

    fn p_short_addr(&mut self, b: u8) {
        let n = self.buf.len();
        if n == 1 {
            self.p.addr_done = false;
            self.short_addr_start();
        } else if !self.p.addr_done {
            self.p.addr_done = n == 3 || b & 0x80 == 0;
        }
        if self.p.addr_done {
            self.short_addr_done();
        }
    }

    /// What a short address packet's header says of its address.
    fn short_addr_start(&mut self) {
        self.p.addr_is = matches!(self.pkt.pkt_type, PktType::AddrSIS1 | PktType::SrcAddrSIS1) as u8;
    }

    /// A short address packet whole in `buf`.
    fn short_addr_done(&mut self) {
        let (v, bits, _) = short_addr(&self.buf[1..], self.p.addr_is);
        self.pkt.update_short_addr(v, self.p.addr_is, bits);
        self.state = State::SendPacket;
    }

    fn p_long_addr(&mut self, _b: u8) {
        if self.buf.len() == 1 {
            self.long_addr_start();
        }
        if self.buf.len() == 1 + self.p.addr_bytes as usize {
            self.long_addr_done();
        }
    }

    /// What a long address packet's header says of its address.
    fn long_addr_start(&mut self) {
        use PktType::*;
        let t = self.pkt.pkt_type;
        self.p.addr_is = matches!(t, AddrL32IS1 | SrcAddrL32IS1 | AddrL64IS1 | SrcAddrL64IS1) as u8;
        self.p.addr_64 = matches!(t, AddrL64IS0 | AddrL64IS1 | SrcAddrL64IS0 | SrcAddrL64IS1);
        self.p.addr_bytes = if self.p.addr_64 { 8 } else { 4 };
    }

    /// A long address packet whole in `buf`.
    fn long_addr_done(&mut self) {
        let is = self.p.addr_is;
        if self.p.addr_64 {
            let v = long_addr64(&self.buf[1..9], is);
            self.pkt.set_64bit_addr(v, is);
        } else {
            let v = long_addr32(&self.buf[1..5], is);
            self.pkt.set_32bit_addr(v, is);
        }
        self.state = State::SendPacket;
    }

    /// An address packet (short or long) whose bytes are all in `rest`,
    /// its header first: taken whole, as the byte-by-byte parse would
    /// leave it, and its length returned. `None` (nothing done) for any
    /// other packet, or one that goes on past `rest`.
    #[inline]
    fn whole_addr_packet(&mut self, rest: &[u8]) -> Option<usize> {
        let len = match self.parser {
            Parser::ShortAddr => 2 + (*rest.get(1)? >> 7) as usize,
            Parser::LongAddr => {
                self.long_addr_start();
                1 + self.p.addr_bytes as usize
            }
            _ => return None,
        };
        let bytes = rest.get(..len)?;
        self.buf.extend_from_slice(bytes);
        if self.parser == Parser::ShortAddr {
            self.p.addr_done = true;
            self.short_addr_start();
            self.short_addr_done();
        } else {
            self.long_addr_done();
        }
        Some(len)
    }

    fn p_q(&mut self, b: u8) -> Result<(), ErrCode> {
        if self.buf.len() == 1 {
            let p = &mut self.p;
            p.q_type = b & 0xF;
            p.addr_bytes = 0;
            p.count_done = false;
            p.q_has_addr = false;
            p.q_addr_short = true;
            p.q_addr_match = false;
            p.addr_is = 1;
            p.q_qe = 0;
            match p.q_type {
                0x0..=0x2 => {
                    p.q_addr_match = true;
                    p.q_has_addr = true;
                    p.q_qe = p.q_type & 0x3;
                }
                0xC => {}
                0x5 | 0x6 => {
                    if p.q_type == 0x5 {
                        p.addr_is = 0;
                    }
                    p.q_has_addr = true;
                    p.addr_bytes = 2;
                }
                0xA | 0xB => {
                    if p.q_type == 0xA {
                        p.addr_is = 0;
                    }
                    p.q_has_addr = true;
                    p.q_addr_short = false;
                    p.addr_bytes = 4;
                }
                0xF => p.count_done = true,
                _ => {
                    self.pkt.err_type = self.pkt.pkt_type;
                    self.pkt.pkt_type = PktType::BadSequence;
                    self.state = State::SendPacket;
                    return Ok(());
                }
            }
        } else if self.p.addr_bytes > 0 {
            if self.p.q_addr_short && self.p.addr_bytes == 2 && b & 0x80 == 0 {
                self.p.addr_bytes -= 1;
            }
            self.p.addr_bytes -= 1;
        } else if !self.p.count_done {
            self.p.count_done = b & 0x80 == 0;
        }
        if self.p.addr_bytes == 0 && self.p.count_done {
            let mut idx = 1;
            let is = self.p.addr_is;
            if self.p.q_has_addr {
                if self.p.q_addr_match {
                    self.pkt.set_exact_match(self.p.q_qe);
                } else if self.p.q_addr_short {
                    let (v, bits, used) = short_addr(&self.buf[1..], is);
                    idx += used;
                    self.pkt.update_short_addr(v, is, bits);
                } else {
                    let v = long_addr32(&self.buf[1..5], is);
                    idx += 4;
                    self.pkt.set_32bit_addr(v, is);
                }
            }
            if self.p.q_type != 0xF {
                let (count, _) = self.cont_field(idx, 5)?;
                self.pkt.q = super::packet::QInfo {
                    count,
                    q_type: self.p.q_type,
                    count_present: true,
                    addr_present: self.p.q_has_addr,
                    addr_match: self.p.q_addr_match,
                };
            } else {
                self.pkt.q = super::packet::QInfo {
                    count: 0,
                    q_type: 0xF,
                    count_present: false,
                    addr_present: false,
                    addr_match: false,
                };
            }
            self.state = State::SendPacket;
        }
        Ok(())
    }

    fn p_atom(&mut self, b: u8) {
        self.pkt.atoms = self.atom_table[b as usize];
        self.state = State::SendPacket;
    }

    /// A run of atom packets, most of the trace, from the header at
    /// `processed`: each is one byte. Without a monitor the sink is offered
    /// the run's bytes to decode straight (see
    /// [`PktDataIn::packet_run_in`](crate::interfaces::PktDataIn::packet_run_in));
    /// a packet it leaves is built and sent here, and it is offered the
    /// rest. Between two atom packets the packet's one-packet fields stay
    /// clear (an atom packet sets only its atoms).
    ///
    /// Without a monitor, an address packet whole in the block between two
    /// atom packets (an indirect branch's target, most often) does not end
    /// the run: it is parsed here, its address given with the run's bytes,
    /// so the decoder goes on through it. Should the decoder leave one, it
    /// is built and sent by the caller, marked as followed by an atom
    /// packet.
    #[inline]
    fn atom_run(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, EtmV4Packet>) -> DatapathResp {
        let start = self.processed;
        let mut no_mon = out.mon.is_none();
        // Under OpenCSD's flow control the run stops short of the block's
        // last byte, and a packet that is the last byte goes alone.
        let data = match self.opencsd_flow {
            true if start + 1 < data.len() => &data[..data.len() - 1],
            true => {
                no_mon = false;
                data
            }
            false => data,
        };
        // The run's end, and its address packets parsed ahead (the address
        // state before them kept, should the decoder stop before one).
        self.run_addrs.clear();
        let mut saved = None;
        let mut end = start;
        loop {
            end += data[end..]
                .iter()
                .position(|&n| self.table[n as usize].1 != Parser::Atom)
                .unwrap_or(data.len() - end);
            if !no_mon {
                break;
            }
            let Some((t, len)) = self.address_then_atom(&data[end..]) else {
                break;
            };
            saved.get_or_insert_with(|| self.pkt.addr_state());
            apply_address(&mut self.pkt, t, &data[end..end + len]);
            self.run_addrs.push(RunAddr {
                index: index + end as u64,
                addr: self.pkt.addr.val,
                is: self.pkt.addr_is,
                len: len as u8,
            });
            end += len;
        }
        // Addresses taken by the decoder.
        let mut taken = 0;
        let resp = loop {
            if no_mon && let Some(s) = out.sink.as_mut() {
                let at = index + self.processed as u64;
                let (r, n) = s.packet_run_in(at, &data[self.processed..end], &self.run_addrs[taken..]);
                self.processed += n.min(end - self.processed);
                let upto = index + self.processed as u64;
                taken += self.run_addrs[taken..].iter().take_while(|a| a.index < upto).count();
                if !r.is_cont() || self.processed == end {
                    break r;
                }
            }
            let b = data[self.processed];
            if no_mon && self.table[b as usize].1 != Parser::Atom {
                // An address packet the decoder left: the caller builds it.
                self.addr_in_run = true;
                break DatapathResp::Cont;
            }
            self.packet_index = index + self.processed as u64;
            self.pkt.pkt_type = self.table[b as usize].0;
            self.processed += 1;
            self.p_atom(b);
            self.pkt.atom_run_continues = no_mon && self.processed < end;
            let r = out.emit(self.packet_index, &self.pkt, std::slice::from_ref(&b));
            if !r.is_cont() || self.processed == end {
                break r;
            }
        };
        // The address state is as the packets taken leave it.
        if let Some(saved) = saved
            && taken < self.run_addrs.len()
        {
            self.pkt.set_addr_state(&saved);
            for a in &self.run_addrs[..taken] {
                let at = (a.index - index) as usize;
                let t = self.table[data[at] as usize].0;
                apply_address(&mut self.pkt, t, &data[at..at + a.len as usize]);
            }
        }
        // Where the last packet taken starts, as if each had been sent.
        let last = index + self.processed as u64 - 1;
        self.packet_index = match taken.checked_sub(1).and_then(|k| self.run_addrs.get(k)) {
            Some(a) if a.index + u64::from(a.len) == last + 1 => a.index,
            _ => last,
        };
        // What init_packet_state clears that an atom packet sets (its
        // buffer is not used).
        self.pkt.atoms.num = 0;
        self.pkt.atom_run_continues = false;
        self.state = State::Header;
        resp
    }

    /// The type and length of the address packet (short, long or exact
    /// match, no context) that `rest` starts with, when its bytes are all
    /// there and the header of an atom packet follows.
    #[inline]
    fn address_then_atom(&self, rest: &[u8]) -> Option<(PktType, usize)> {
        use PktType::*;
        let t = self.table[*rest.first()? as usize].0;
        let len = match t {
            AddrMatch => 1,
            AddrSIS0 | AddrSIS1 => 2 + usize::from(*rest.get(1)? >> 7),
            AddrL32IS0 | AddrL32IS1 => 5,
            AddrL64IS0 | AddrL64IS1 => 9,
            _ => return None,
        };
        rest.get(len)
            .is_some_and(|&n| self.table[n as usize].1 == Parser::Atom)
            .then_some((t, len))
    }

    fn p_ite(&mut self) {
        if self.buf.len() == 10 {
            self.pkt.ite_el = self.buf[1];
            self.pkt.ite_value = u64::from_le_bytes(self.buf[2..10].try_into().unwrap_or([0; 8]));
            self.state = State::SendPacket;
        }
    }
}

fn le_bytes(b: &[u8]) -> u32 {
    b.iter().enumerate().fold(0u32, |v, (i, &x)| v | (x as u32) << (8 * i))
}

/// A short address field: value, bits it updates, bytes used.
/// Takes the whole address packet `b` (short, long or exact match, no
/// context) of type `t` into `pkt`, as its packet's parse does.
fn apply_address(pkt: &mut EtmV4Packet, t: PktType, b: &[u8]) {
    use PktType::*;
    match t {
        AddrMatch => pkt.set_exact_match(b[0] & 0x3),
        AddrSIS0 | AddrSIS1 => {
            let is = u8::from(t == AddrSIS1);
            let (v, bits, _) = short_addr(&b[1..], is);
            pkt.update_short_addr(v, is, bits);
        }
        AddrL32IS0 | AddrL32IS1 => {
            let is = u8::from(t == AddrL32IS1);
            pkt.set_32bit_addr(long_addr32(&b[1..5], is), is);
        }
        AddrL64IS0 | AddrL64IS1 => {
            let is = u8::from(t == AddrL64IS1);
            pkt.set_64bit_addr(long_addr64(&b[1..9], is), is);
        }
        _ => {}
    }
}

fn short_addr(b: &[u8], is: u8) -> (u32, u8, usize) {
    let shift = if is == 0 { 2 } else { 1 };
    let mut v = ((b[0] & 0x7F) as u32) << shift;
    let mut bits = 7u8;
    let mut used = 1;
    if b[0] & 0x80 != 0 {
        v |= (b[1] as u32) << (7 + shift);
        bits += 8;
        used = 2;
    }
    (v, bits + shift as u8, used)
}

fn long_addr32(b: &[u8], is: u8) -> u32 {
    let low = if is == 0 {
        (((b[0] & 0x7F) as u32) << 2) | (((b[1] & 0x7F) as u32) << 9)
    } else {
        (((b[0] & 0x7F) as u32) << 1) | ((b[1] as u32) << 8)
    };
    low | (b[2] as u32) << 16 | (b[3] as u32) << 24
}

fn long_addr64(b: &[u8], is: u8) -> u64 {
    let mut v = long_addr32(&b[..4], is) as u64;
    for (i, &x) in b[4..8].iter().enumerate() {
        v |= (x as u64) << (32 + 8 * i);
    }
    v
}

/// The atoms of each header byte in a header table (none for headers of
/// other packets).
fn atom_table_of(table: &[(PktType, Parser); 256]) -> [Atoms; 256] {
    let mut atom_table = [Atoms::default(); 256];
    for (b, (t, a)) in table.iter().zip(&mut atom_table).enumerate() {
        *a = atoms_of(t.0, b as u8);
    }
    atom_table
}

/// The atoms of each header byte for a configuration, as its packet
/// processor reads them: what the decoder takes atom packets by when it
/// is given their bytes.
pub(super) fn atom_table(cfg: &EtmV4Config) -> [Atoms; 256] {
    atom_table_of(&build_table(cfg))
}

/// The atoms of a one-byte atom packet of type `t` (none for other types).
fn atoms_of(t: PktType, b: u8) -> Atoms {
    const F4: [u32; 4] = [0xE, 0x0, 0xA, 0x5];
    let (en_bits, num) = match t {
        PktType::AtomF1 => ((b & 1) as u32, 1),
        PktType::AtomF2 => ((b & 3) as u32, 2),
        PktType::AtomF3 => ((b & 7) as u32, 3),
        PktType::AtomF4 => (F4[(b & 3) as usize], 4),
        PktType::AtomF5 => match ((b & 0x20) >> 3) | (b & 0x3) {
            5 => (0x1E, 5),
            1 => (0x00, 5),
            2 => (0x0A, 5),
            3 => (0x15, 5),
            _ => (0, 0),
        },
        PktType::AtomF6 => {
            // Bits 4:0 of an F6 header are at most 0x14: at most 24 atoms.
            let count = (b & 0x1F) as u32 + 3;
            let mut pattern = (1u64 << count) - 1;
            if b & 0x20 == 0 {
                pattern |= 1 << count;
            }
            (pattern as u32, count as u8 + 1)
        }
        _ => (0, 0),
    };
    Atoms { en_bits, num }
}

/// The header table for a configuration.
fn build_table(cfg: &EtmV4Config) -> [(PktType, Parser); 256] {
    use Parser as P;
    use PktType as T;
    let mut t = [(T::Reserved, P::Reserved); 256];
    let ete = cfg.is_ete();
    let ver = cfg.full_version();

    t[0x00] = (T::Extension, P::Extension);
    t[0x01] = (T::TraceInfo, P::TraceInfo);
    t[0x02] = (T::Timestamp, P::Timestamp);
    t[0x03] = (T::Timestamp, P::Timestamp);
    t[0x04] = (T::TraceOn, P::NoPayload);
    t[0x05] = (
        T::FuncRet,
        if cfg.is_m_profile() && cfg.is_v8_arch() && ver >= 0x42 {
            P::NoPayload
        } else {
            P::Reserved
        },
    );
    t[0x06] = (T::Except, P::Exception);
    t[0x07] = (T::ExceptRtn, if ete { P::InvalidCfg } else { P::NoPayload });
    if ete {
        t[0x0A] = (T::TransSt, P::NoPayload);
        t[0x0B] = (T::TransCommit, P::NoPayload);
        if cfg.minor_version() >= 3 {
            t[0x09] = (T::Ite, P::Ite);
        }
    }
    for i in 0..4 {
        t[0x0C + i] = (if i >= 2 { T::CcntF1 } else { T::CcntF2 }, P::CycleCount);
    }
    for e in &mut t[0x10..0x20] {
        *e = (T::CcntF3, P::CycleCount);
    }
    let data = if cfg.enabled_data_trace() {
        P::NoPayload
    } else {
        P::InvalidCfg
    };
    for e in &mut t[0x20..0x28] {
        *e = (T::NumDsMkr, data);
    }
    for e in &mut t[0x28..0x2D] {
        *e = (T::UnnumDsMkr, data);
    }
    t[0x2D] = (T::Commit, P::Speculation);
    t[0x2E] = (T::CancelF1, P::Speculation);
    t[0x2F] = (T::CancelF1Mispred, P::Speculation);
    for e in &mut t[0x30..0x34] {
        *e = (T::Mispredict, P::Speculation);
    }
    for e in &mut t[0x34..0x38] {
        *e = (T::CancelF2, P::Speculation);
    }
    for e in &mut t[0x38..0x40] {
        *e = (T::CancelF3, P::Speculation);
    }
    let cond = cfg.has_cond_trace() && cfg.enabled_cond_trace() != super::config::CondTrace::Disabled;
    let ci = if cond { P::CondInstr } else { P::InvalidCfg };
    let cr = if cond { P::CondResult } else { P::InvalidCfg };
    for e in &mut t[0x40..0x43] {
        *e = (T::CondIF2, ci);
    }
    t[0x43] = (T::CondFlush, if cond { P::NoPayload } else { P::InvalidCfg });
    for e in &mut t[0x44..0x47] {
        *e = (T::CondResF4, cr);
    }
    for e in &mut t[0x48..0x4B] {
        *e = (T::CondResF2, cr);
    }
    for e in &mut t[0x4C..0x4F] {
        *e = (T::CondResF2, cr);
    }
    for e in &mut t[0x50..0x60] {
        *e = (T::CondResF3, cr);
    }
    for e in &mut t[0x68..0x6C] {
        *e = (T::CondResF1, cr);
    }
    t[0x6C] = (T::CondIF1, ci);
    t[0x6D] = (T::CondIF3, ci);
    t[0x6E] = (T::CondResF1, cr);
    t[0x6F] = (T::CondResF1, cr);
    if ver >= 0x43 {
        t[0x70] = (T::Ignore, P::NoPayload);
    }
    for e in &mut t[0x71..0x80] {
        *e = (T::Event, P::NoPayload);
    }
    t[0x80] = (T::Ctxt, P::Context);
    t[0x81] = (T::Ctxt, P::Context);
    t[0x82] = (T::AddrCtxtL32IS0, P::AddrCtxt);
    t[0x83] = (T::AddrCtxtL32IS1, P::AddrCtxt);
    t[0x85] = (T::AddrCtxtL64IS0, P::AddrCtxt);
    t[0x86] = (T::AddrCtxtL64IS1, P::AddrCtxt);
    if ver >= 0x46 {
        t[0x88] = (T::TsMarker, P::NoPayload);
    }
    for e in &mut t[0x90..0x93] {
        *e = (T::AddrMatch, P::NoPayload);
    }
    t[0x95] = (T::AddrSIS0, P::ShortAddr);
    t[0x96] = (T::AddrSIS1, P::ShortAddr);
    t[0x9A] = (T::AddrL32IS0, P::LongAddr);
    t[0x9B] = (T::AddrL32IS1, P::LongAddr);
    t[0x9D] = (T::AddrL64IS0, P::LongAddr);
    t[0x9E] = (T::AddrL64IS1, P::LongAddr);
    for i in 0..16usize {
        let reserved = matches!(i, 0x3 | 0x4 | 0x7 | 0x8 | 0x9 | 0xD | 0xE);
        t[0xA0 + i] = (
            T::Q,
            if !reserved && cfg.has_q_elem() {
                P::Q
            } else {
                P::Reserved
            },
        );
    }
    if ver >= 0x50 {
        for e in &mut t[0xB0..0xB3] {
            *e = (T::SrcAddrMatch, P::NoPayload);
        }
        t[0xB4] = (T::SrcAddrSIS0, P::ShortAddr);
        t[0xB5] = (T::SrcAddrSIS1, P::ShortAddr);
        t[0xB6] = (T::SrcAddrL32IS0, P::LongAddr);
        t[0xB7] = (T::SrcAddrL32IS1, P::LongAddr);
        t[0xB8] = (T::SrcAddrL64IS0, P::LongAddr);
        t[0xB9] = (T::SrcAddrL64IS1, P::LongAddr);
    }
    for e in &mut t[0xC0..=0xD4] {
        *e = (T::AtomF6, P::Atom);
    }
    for e in &mut t[0xD5..=0xD7] {
        *e = (T::AtomF5, P::Atom);
    }
    for e in &mut t[0xD8..=0xDB] {
        *e = (T::AtomF2, P::Atom);
    }
    for e in &mut t[0xDC..=0xDF] {
        *e = (T::AtomF4, P::Atom);
    }
    for e in &mut t[0xE0..=0xF4] {
        *e = (T::AtomF6, P::Atom);
    }
    t[0xF5] = (T::AtomF5, P::Atom);
    t[0xF6] = (T::AtomF1, P::Atom);
    t[0xF7] = (T::AtomF1, P::Atom);
    for e in &mut t[0xF8..=0xFF] {
        *e = (T::AtomF3, P::Atom);
    }
    t
}

impl PacketProcessor for EtmV4PktProc {
    type Packet = EtmV4Packet;
    fn index_entries(pkt: &EtmV4Packet, emit: &mut dyn FnMut(EntryKind, u64)) {
        index_entries_of(pkt, emit);
    }
    fn error_link(&self) -> Option<&ErrLink> {
        self.err.as_ref()
    }

    fn process(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, EtmV4Packet>) -> (DatapathResp, usize) {
        self.block_index = index;
        self.processed = 0;
        let mut resp = DatapathResp::Cont;
        while (self.processed < data.len() || self.state == State::SendPacket) && resp.is_cont() {
            match self.state {
                State::Header | State::Data => {
                    if self.state == State::Header {
                        self.packet_index = index + self.processed as u64;
                        if self.is_sync {
                            let b = data[self.processed];
                            let (t, p) = self.table[b as usize];
                            self.pkt.pkt_type = t;
                            self.parser = p;
                            if p == Parser::Atom {
                                resp = self.atom_run(index, data, out);
                                continue;
                            }
                            if let Some(len) = self.whole_addr_packet(&data[self.processed..]) {
                                self.processed += len;
                                continue;
                            }
                        } else {
                            self.parser = Parser::NotSync;
                            self.pkt.pkt_type = PktType::NotSync;
                        }
                        self.state = State::Data;
                    }
                    while self.processed < data.len() && self.state == State::Data {
                        let b = data[self.processed];
                        self.buf.push(b);
                        self.processed += 1;
                        if let Err(code) = self.parse_byte(b) {
                            if code == ErrCode::InvalidPcktHdr {
                                self.log(code, "");
                            }
                            // Invalid packets go on to the decoder, which decides.
                            self.state = State::SendPacket;
                        }
                    }
                }
                State::SendPacket => {
                    self.pkt.atom_run_continues = std::mem::take(&mut self.addr_in_run);
                    resp = out.emit(self.packet_index, &self.pkt, &self.buf);
                    self.init_packet_state();
                    self.state = State::Header;
                }
                State::SendUnsynced => {
                    resp = self.send_unsynced(out);
                    if self.update_unsync_index != 0 {
                        self.packet_index = self.update_unsync_index;
                        self.update_unsync_index = 0;
                    }
                    self.state = State::Data;
                }
            }
        }
        (resp, self.processed)
    }

    fn eot(&mut self, out: &mut PacketOut<'_, EtmV4Packet>) -> DatapathResp {
        let mut resp = DatapathResp::Cont;
        if !self.buf.is_empty() {
            self.pkt.set_err_type(PktType::IncompleteEot, 0);
            resp = out.emit(self.packet_index, &self.pkt, &self.buf);
            self.init_packet_state();
        }
        resp
    }

    fn stats(&self) -> Option<ProcStats> {
        Some(match &self.err {
            Some(link) => ProcStats::with_errors(self.unsynced_total, link),
            None => ProcStats {
                unsynced_bytes: self.unsynced_total,
                ..ProcStats::default()
            },
        })
    }

    fn reset(&mut self, _index: TrcIndex) {
        self.init_processor_state();
    }
}

/// The stream index entries of one ETMv4 or ETE packet: bad, reserved and
/// incomplete packets make none, as they are not listed under a name.
fn index_entries_of(p: &crate::etmv4::packet::EtmV4Packet, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::etmv4::packet::PktType as T;
    match p.pkt_type {
        T::Async => emit(EntryKind::Sync, 0),
        T::TraceInfo => emit(
            EntryKind::TraceInfo,
            if p.spec_depth_valid { p.spec_depth as u64 } else { 0 },
        ),
        T::Timestamp => emit(EntryKind::Timestamp, p.timestamp),
        T::Event => emit(EntryKind::Event, p.event_val as u64),
        T::Ctxt | T::AddrCtxtL32IS0 | T::AddrCtxtL32IS1 | T::AddrCtxtL64IS0 | T::AddrCtxtL64IS1 => {
            emit(EntryKind::Context, p.context.ctxt_id as u64)
        }
        T::Except => emit(EntryKind::Exception, p.exception.exc_type as u64),
        T::Overflow => emit(EntryKind::Overflow, 0),
        _ => {}
    }
}
