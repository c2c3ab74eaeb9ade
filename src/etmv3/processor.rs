//! ETMv3 packet processor: bytes to [`Etmv3Packet`]s.
//!
//! Before the first A-sync, skipped bytes go out as NOTSYNC packets of at
//! most 16 bytes (runs of zeros longer than an A-sync are split off as
//! NOTSYNC too). After it, each header byte selects a packet type whose
//! payload is gathered across input blocks. Reserved headers, data
//! packets while data trace is off and malformed packets are logged and
//! passed on as error packets (I_RESERVED, BAD_TRACEMODE, BAD_SEQUENCE).

use super::Etmv3Config;
use super::packet::{Etmv3Packet, Etmv3PktType};
use crate::arch::Isa;
use crate::datapath::{DatapathResp, TrcIndex};
use crate::decoder::{DecodeContext, PacketOut, PacketProcessor};
use crate::errcode::ErrCode;
use crate::hooks::EntryKind;
use crate::logger::ErrLink;
use crate::pktproc::{PktError, ProcState as State};
use crate::ptm::shared::ISyncReason;

/// Data packet header bit: a data address follows.
const DATA_ADDR_EXPECTED_FLAG: u8 = 0x20;

/// ETMv3 packet processor (OpenCSD's `EtmV3PktProcImpl`).
pub struct Etmv3Processor {
    cfg: Etmv3Config,
    trace_id: u8,
    err: ErrLink,

    state: State,
    pkt: Etmv3Packet,
    raw: Vec<u8>,
    pkt_index: TrcIndex,
    /// Read position in `raw` while extracting fields.
    raw_idx: usize,

    // a leading part of `raw` to send first (split zeros)
    part: Vec<u8>,
    send_part: bool,
    post_part_state: State,
    post_part_type: Etmv3PktType,

    stream_sync: bool,
    start_of_sync: bool,

    // per-packet gathering state
    bytes_expected: usize,
    branch_needs_exception: bool,
    isync_got_cc: bool,
    isync_get_lsip: bool,
    isync_info_idx: usize,
    expect_data_addr: bool,
    found_data_addr: bool,
    /// The last byte of a run of P-headers the decoder took, whose packet
    /// is built only when the next packet starts (see
    /// [`phdr_run_taken`](Self::phdr_run_taken)).
    phdr_last: Option<u8>,
}

impl Etmv3Processor {
    /// A packet processor for one ETMv3 source, reporting errors through the tree's log.
    pub fn new(cfg: Etmv3Config, ctx: &DecodeContext) -> Etmv3Processor {
        let err = ctx.packet_processor_err_link("PKTP_ETMV3");
        Etmv3Processor::with_err_link(cfg, err)
    }

    pub(crate) fn with_err_link(cfg: Etmv3Config, err: ErrLink) -> Etmv3Processor {
        let mut p = Etmv3Processor {
            cfg,
            trace_id: cfg.trace_id(),
            err,
            state: State::WaitSync,
            pkt: Etmv3Packet::default(),
            raw: Vec::with_capacity(32),
            pkt_index: 0,
            raw_idx: 0,
            part: Vec::with_capacity(16),
            send_part: false,
            post_part_state: State::WaitSync,
            post_part_type: Etmv3PktType::NotSync,
            stream_sync: false,
            start_of_sync: false,
            bytes_expected: 0,
            branch_needs_exception: false,
            isync_got_cc: false,
            isync_get_lsip: false,
            isync_info_idx: 0,
            expect_data_addr: false,
            found_data_addr: false,
            phdr_last: None,
        };
        p.init_processor_state();
        p
    }

    fn init_processor_state(&mut self) {
        self.stream_sync = false;
        self.state = State::WaitSync;
        self.start_of_sync = false;
        self.pkt = Etmv3Packet::default();
        self.init_packet_state();
        self.send_part = false;
        self.phdr_last = None;
    }

    fn init_packet_state(&mut self) {
        self.bytes_expected = 0;
        self.branch_needs_exception = false;
        self.isync_got_cc = false;
        self.isync_get_lsip = false;
        self.isync_info_idx = 0;
        self.expect_data_addr = false;
        self.found_data_addr = false;
        self.raw.clear();
        self.raw_idx = 0;
        self.pkt.clear();
    }

    fn send(&mut self) {
        self.state = State::SendPkt;
    }

    /// Moves the first `n` raw bytes out to be sent on their own first.
    fn set_part_packet(&mut self, n: usize, next_state: State, next_type: Etmv3PktType) {
        let n = n.min(self.raw.len());
        self.part.clear();
        self.part.extend(self.raw.drain(..n));
        self.send_part = true;
        self.post_part_state = next_state;
        self.post_part_type = next_type;
    }

    fn output_packet(&mut self, out: &mut PacketOut<'_, Etmv3Packet>) -> DatapathResp {
        if !self.send_part {
            let resp = out.emit(self.pkt_index, &self.pkt, &self.raw);
            self.state = if self.stream_sync {
                State::ProcHdr
            } else {
                State::WaitSync
            };
            self.raw.clear();
            resp
        } else {
            let resp = out.emit(self.pkt_index, &self.pkt, &self.part);
            self.state = self.post_part_state;
            self.pkt_index += self.part.len() as u64;
            self.send_part = false;
            self.pkt.pkt_type = self.post_part_type;
            resp
        }
    }

    /// Leaves the processor as if the P-header packets the decoder took as
    /// bytes had been built and sent, the last being `last` at `index`.
    /// The last packet's fields are kept (a later packet shows those it
    /// does not set), but built only when a packet follows: most runs are
    /// followed by another run, which makes them moot.
    #[inline]
    fn phdr_run_taken(&mut self, index: TrcIndex, last: u8) {
        self.raw.clear();
        self.pkt_index = index;
        self.phdr_last = Some(last);
    }

    /// Builds the packet of the last P-header a run left (see
    /// [`phdr_run_taken`](Self::phdr_run_taken)); the packet state is
    /// started afresh next, as after any sent packet.
    #[inline]
    fn settle_phdr_run(&mut self) {
        if let Some(last) = self.phdr_last.take() {
            self.pkt.clear();
            self.pkt.pkt_type = Etmv3PktType::PHdr;
            self.pkt.update_atoms_from_phdr(last, self.cfg.cycle_accurate());
        }
    }

    /// Looks for the first A-sync; returns the bytes used.
    fn wait_for_sync(&mut self, data: &[u8]) -> usize {
        let mut used = 0;
        let mut send_block = false;
        while !send_block && used < data.len() {
            let b = data[used];
            used += 1;
            if self.start_of_sync {
                self.raw.push(b);
                if b == 0x80 && self.raw.len() >= 6 {
                    send_block = true;
                    if self.raw.len() > 6 {
                        // Extra leading zeros: send them as not synchronised,
                        // then see the 0x80 again after the last five.
                        self.raw.pop();
                        used -= 1;
                        self.set_part_packet(self.raw.len() - 5, State::WaitSync, Etmv3PktType::NotSync);
                    } else {
                        self.stream_sync = true;
                        self.pkt.pkt_type = Etmv3PktType::ASync;
                    }
                } else if b != 0x00 {
                    self.start_of_sync = false;
                } else if self.raw.len() >= 13 {
                    self.set_part_packet(8, State::WaitSync, Etmv3PktType::NotSync);
                    send_block = true;
                }
            } else if b == 0x00 {
                if self.raw.is_empty() {
                    self.raw.push(b);
                    self.start_of_sync = true;
                } else {
                    // Send what we have; this zero starts again next time.
                    used -= 1;
                    send_block = true;
                    self.pkt.pkt_type = Etmv3PktType::NotSync;
                }
            } else {
                self.raw.push(b);
                if used == data.len() || self.raw.len() == 16 {
                    send_block = true;
                    self.pkt.pkt_type = Etmv3PktType::NotSync;
                }
            }
        }
        if send_block {
            self.send();
        }
        used
    }

    fn process_header(&mut self, b: u8) -> Result<(), PktError> {
        use Etmv3PktType as T;
        self.settle_phdr_run();
        self.init_packet_state();
        self.raw.push(b);
        self.state = State::ProcData;

        if b & 0x01 != 0 {
            self.pkt.pkt_type = T::BranchAddress;
            self.branch_needs_exception = false;
            if b & 0x80 == 0 {
                self.on_branch_address()?;
                self.send();
            }
        } else if is_phdr(b) {
            self.pkt.pkt_type = T::PHdr;
            if !self.pkt.update_atoms_from_phdr(b, self.cfg.cycle_accurate()) {
                return Err(PktError::header("Invalid P-Header."));
            }
            self.send();
        } else if b & 0xf3 == 0x00 {
            match b {
                0x00 => self.pkt.pkt_type = T::ASync,
                0x04 => self.pkt.pkt_type = T::CycleCount,
                0x08 => {
                    self.pkt.pkt_type = T::ISync;
                    self.isync_got_cc = false;
                    self.isync_get_lsip = false;
                }
                _ => {
                    self.pkt.pkt_type = T::Trigger;
                    self.send();
                }
            }
        } else if b & 0x03 == 0x00 {
            if b & 0x93 == 0x00 {
                // Out of order data.
                if !self.cfg.data_value_trace() {
                    self.pkt.set_err_type(T::BadTraceMode);
                    return Err(PktError::header(
                        "Invalid data trace header (out of order data) - not tracing data values.",
                    ));
                }
                self.pkt.pkt_type = T::OooData;
                let size = (b >> 2) & 3;
                if size == 0 {
                    self.pkt.data_ooo_tag = (b >> 5) & 3;
                    self.pkt.set_data_value(0);
                    self.send();
                } else {
                    self.bytes_expected = 1 + if size == 3 { 4 } else { size as usize };
                }
            } else if b == 0x70 {
                self.pkt.pkt_type = T::ISyncCycle;
                self.isync_got_cc = false;
                self.isync_get_lsip = false;
            } else if b == 0x50 {
                if !self.cfg.data_value_trace() {
                    self.pkt.set_err_type(T::BadTraceMode);
                    return Err(PktError::header(
                        "Invalid data trace header (store failed) - not tracing data values.",
                    ));
                }
                self.pkt.pkt_type = T::StoreFail;
                self.send();
            } else if b & 0xd3 == 0x50 {
                self.pkt.pkt_type = T::OooAddrPlc;
                if !self.cfg.data_trace() {
                    self.pkt.set_err_type(T::BadTraceMode);
                    return Err(PktError::header(
                        "Invalid data trace header (out of order placeholder) - not tracing data.",
                    ));
                }
                self.expect_data_addr = b & DATA_ADDR_EXPECTED_FLAG != 0 && self.cfg.data_addr_trace();
                self.found_data_addr = false;
                self.pkt.data_ooo_tag = (b >> 2) & 3;
                if !self.expect_data_addr {
                    self.send();
                }
            } else if b == 0x3c {
                self.pkt.pkt_type = T::Vmid;
            } else {
                self.pkt.set_err_type(T::Reserved);
                return Err(PktError::header("Packet header reserved encoding"));
            }
        } else if b & 0xd3 == 0x02 {
            let size = (b >> 2) & 3;
            if !self.cfg.data_trace() {
                self.pkt.set_err_type(T::BadTraceMode);
                return Err(PktError::header(
                    "Invalid data trace header (normal data) - not tracing data.",
                ));
            }
            self.pkt.pkt_type = T::NormData;
            self.expect_data_addr = b & DATA_ADDR_EXPECTED_FLAG != 0 && self.cfg.data_addr_trace();
            self.found_data_addr = false;
            self.bytes_expected = 1 + if size == 3 { 4 } else { size as usize };
            if !self.expect_data_addr && self.bytes_expected == 1 {
                self.pkt.set_data_value(0);
                self.send();
            }
        } else if b == 0x62 {
            if !self.cfg.data_trace() {
                self.pkt.set_err_type(T::BadTraceMode);
                return Err(PktError::header(
                    "Invalid data trace header (data suppressed) - not tracing data.",
                ));
            }
            self.pkt.pkt_type = T::DataSuppressed;
            self.send();
        } else if b & 0xef == 0x6a {
            if !self.cfg.data_trace() {
                self.pkt.set_err_type(T::BadTraceMode);
                return Err(PktError::header(
                    "Invalid data trace header (value not traced) - not tracing data.",
                ));
            }
            self.pkt.pkt_type = T::ValNotTraced;
            self.expect_data_addr = b & DATA_ADDR_EXPECTED_FLAG != 0 && self.cfg.data_addr_trace();
            self.found_data_addr = false;
            if !self.expect_data_addr {
                self.send();
            }
        } else if b == 0x66 {
            self.pkt.pkt_type = T::Ignore;
            self.send();
        } else if b == 0x6e {
            self.pkt.pkt_type = T::ContextId;
            self.bytes_expected = 1 + self.cfg.ctxt_id_bytes();
        } else if b == 0x76 {
            self.pkt.pkt_type = T::ExceptionExit;
            self.send();
        } else if b == 0x7e {
            self.pkt.pkt_type = T::ExceptionEntry;
            self.send();
        } else if b & 0xfb == 0x42 {
            self.pkt.pkt_type = T::Timestamp;
        } else {
            self.pkt.set_err_type(T::Reserved);
            return Err(PktError::header("Packet header reserved encoding."));
        }
        Ok(())
    }

    fn process_payload(&mut self, b: u8, pos: &mut usize) -> Result<(), PktError> {
        use Etmv3PktType as T;
        self.raw.push(b);
        let top = b & 0x80 != 0;
        match self.pkt.pkt_type {
            T::BranchAddress => {
                let done = if self.cfg.alt_branch() {
                    if top {
                        false
                    } else if !self.branch_needs_exception {
                        if b & 0xc0 == 0x40 {
                            self.branch_needs_exception = true;
                            false
                        } else {
                            true
                        }
                    } else {
                        true
                    }
                } else if self.raw.len() == 5 {
                    if b & 0xc0 == 0x40 {
                        self.branch_needs_exception = true;
                        false
                    } else {
                        true
                    }
                } else {
                    !top
                };
                if done {
                    self.on_branch_address()?;
                    self.send();
                }
            }
            T::ASync => {
                if b == 0x00 {
                    if self.raw.len() > 5 {
                        // One zero too many: it goes out as a bad packet, the
                        // rest stays an A-sync candidate.
                        self.pkt.set_err_type(T::BadSequence);
                        self.set_part_packet(1, State::ProcData, T::ASync);
                        return Err(PktError::bad_sequence("A-Sync ?: Extra 0x00 in sequence"));
                    }
                } else if b == 0x80 && self.raw.len() == 6 {
                    self.send();
                    self.stream_sync = true;
                } else {
                    // This byte starts the next packet.
                    self.pkt.set_err_type(T::BadSequence);
                    *pos -= 1;
                    self.raw.pop();
                    return Err(PktError::bad_sequence("A-Sync ? : Unexpected byte in sequence"));
                }
            }
            T::CycleCount => {
                if !top || self.raw.len() >= 6 {
                    self.raw_idx = 1;
                    let cc = self.extract_cycle_count()?;
                    self.pkt.cycle_count = cc;
                    self.send();
                }
            }
            T::ISyncCycle | T::ISync => {
                if self.pkt.pkt_type == T::ISyncCycle && !self.isync_got_cc {
                    if !top || self.raw.len() >= 6 {
                        self.isync_got_cc = true;
                    }
                    return Ok(());
                }
                if self.bytes_expected == 0 {
                    let cc_bytes = self.raw.len() - 2;
                    let ctxt_bytes = self.cfg.ctxt_id_bytes();
                    self.bytes_expected = if self.cfg.instr_trace() {
                        cc_bytes + 6 + ctxt_bytes
                    } else {
                        2 + ctxt_bytes
                    };
                    self.isync_info_idx = 1 + cc_bytes + ctxt_bytes;
                }
                if self.raw.len() - 1 == self.isync_info_idx {
                    self.isync_get_lsip = self.raw[self.isync_info_idx] & 0x80 != 0;
                }
                if self.raw.len() >= self.bytes_expected && (!self.isync_get_lsip || !top) {
                    self.on_isync()?;
                }
            }
            T::NormData => {
                if self.expect_data_addr && !self.found_data_addr {
                    if !top {
                        self.found_data_addr = true;
                        self.bytes_expected += self.raw.len() - 1;
                    }
                } else if self.bytes_expected == self.raw.len() {
                    self.raw_idx = 1;
                    if self.expect_data_addr {
                        self.extract_and_update_data_addr()?;
                    }
                    let v = self.extract_data_value((self.raw[0] >> 2) & 3)?;
                    self.pkt.set_data_value(v);
                    self.send();
                }
            }
            T::OooData => {
                if self.bytes_expected == self.raw.len() {
                    self.raw_idx = 1;
                    let v = self.extract_data_value((self.raw[0] >> 2) & 3)?;
                    self.pkt.set_data_value(v);
                    self.pkt.data_ooo_tag = (self.raw[0] >> 5) & 3;
                    self.send();
                }
                if self.bytes_expected < self.raw.len() {
                    return Err(PktError::bad_sequence("Malformed out of order data packet."));
                }
            }
            T::ValNotTraced | T::OooAddrPlc => {
                if self.expect_data_addr && !top {
                    self.raw_idx = 1;
                    self.extract_and_update_data_addr()?;
                    self.send();
                }
            }
            T::ContextId => {
                if self.bytes_expected == self.raw.len() {
                    self.raw_idx = 1;
                    let id = self.extract_ctxt_id()?;
                    self.pkt.update_context_id(id);
                    self.send();
                }
                if self.bytes_expected < self.raw.len() {
                    return Err(PktError::bad_sequence("Malformed context id packet."));
                }
            }
            T::Timestamp => {
                if !top {
                    self.raw_idx = 1;
                    let (ts, bits) = self.extract_timestamp()?;
                    self.pkt.update_timestamp(ts, bits);
                    self.send();
                }
            }
            T::Vmid => {
                self.pkt.update_vmid(b);
                self.send();
            }
            _ => {
                return Err(PktError {
                    code: ErrCode::PktInterpFail,
                    msg: "Interpreter failed - cannot process payload for unexpected or unsupported packet.",
                });
            }
        }
        Ok(())
    }

    // ---- field extraction ----

    fn next_raw(&mut self) -> Result<u8, PktError> {
        let b = *self
            .raw
            .get(self.raw_idx)
            .ok_or_else(|| PktError::bad_sequence("Malformed Packet - oversized packet."))?;
        self.raw_idx += 1;
        Ok(b)
    }

    fn on_branch_address(&mut self) -> Result<(), PktError> {
        let (value, bits) = self.extract_branch_address()?;
        self.pkt.update_address(u64::from(value), bits);
        Ok(())
    }

    /// A compressed branch address at `raw_idx`, with any exception bytes
    /// and the ISA of a 5-byte address. Returns the address bits and their
    /// number.
    fn extract_branch_address(&mut self) -> Result<(u32, u8), PktError> {
        const DEPRECATED_EXCEPTIONS: usize = 8;
        let mut more = true;
        let mut count = 0;
        let mut bits = 0u32;
        let mut value = 0u32;
        let mut byte = 0u8;
        while more && count < 4 {
            let mut b = self.next_raw()?;
            more = b & 0x80 != 0;
            let shift = bits;
            if count == 0 {
                b = (b & !0x81) >> 1;
                bits += 6;
            } else if self.cfg.alt_branch() && !more {
                // Last address byte: bit 6 says exception bytes follow.
                if b & 0x40 != 0 {
                    self.extract_exception()?;
                }
                b &= 0x3f;
                bits += 6;
            } else {
                b &= 0x7f;
                bits += 7;
            }
            value |= u32::from(b) << shift;
            count += 1;
        }
        let byte5 = more;
        if byte5 {
            byte = self.next_raw()?;
            if byte & 0x80 != 0 {
                // Original encoding: an Arm-state exception in byte 5.
                let num = (byte >> 3) & 0x7;
                debug_assert!((num as usize) < DEPRECATED_EXCEPTIONS);
                self.pkt.update_isa(Isa::Arm);
                self.pkt.exception = super::packet::Etmv3Exception {
                    present: true,
                    cancel: byte & 0x40 != 0,
                    cm_type: self.cfg.is_v7m(),
                    cm_resume: 0,
                    cm_irq_n: 0,
                    number: u16::from(num),
                };
            } else {
                if byte & 0x40 != 0 {
                    self.extract_exception()?;
                }
                if byte & 0xb8 == 0x08 {
                    self.pkt.update_isa(Isa::Arm);
                } else if byte & 0xb0 == 0x10 {
                    let isa = if self.pkt.alt_isa { Isa::Tee } else { Isa::Thumb2 };
                    self.pkt.update_isa(isa);
                } else if byte & 0xa0 == 0x20 {
                    self.pkt.update_isa(Isa::Jazelle);
                } else {
                    return Err(PktError::bad_sequence("Malformed Packet - Unknown ISA."));
                }
            }
        }
        // (byte 5 mask, bits in byte 5, alignment shift) by ISA.
        let (mask, nbits, align) = match self.pkt.curr_isa {
            Isa::Thumb2 | Isa::Tee => (0x0f, 4, 1),
            Isa::Jazelle => (0x1f, 5, 0),
            _ => (0x07, 3, 2),
        };
        if byte5 {
            value |= u32::from(byte & mask).checked_shl(bits).unwrap_or(0);
            bits += nbits;
        }
        value = value.checked_shl(align).unwrap_or(0);
        bits += align;
        Ok((value, bits as u8))
    }

    /// Exception bytes after a branch address.
    fn extract_exception(&mut self) -> Result<(), PktError> {
        let v7m = self.cfg.is_v7m();
        let mut b = self.next_raw()?;
        self.pkt.update_ns(b & 0x1 != 0);
        let mut num = u16::from((b >> 1) & 0xf);
        let cancel = b & 0x20 != 0;
        self.pkt.update_alt_isa(b & 0x40 != 0);
        let mut resume = 0u8;
        if b & 0x80 != 0 {
            b = self.next_raw()?;
            let mut byte2 = false;
            if b & 0x40 != 0 {
                byte2 = true;
            } else {
                if v7m {
                    num |= u16::from(b & 0x1f) << 4;
                }
                self.pkt.update_hyp(b & 0x20 != 0);
                if b & 0x80 != 0 {
                    b = self.next_raw()?;
                    byte2 = true;
                }
            }
            if byte2 {
                resume = b & 0xf;
            }
        }
        let mut irq_n = 0u16;
        if v7m {
            num &= 0x1ff;
            let is_irq = match num {
                1..=8 => true,
                n => n >= 0x18,
            };
            if is_irq {
                irq_n = if num > 0x18 {
                    num - 0x10
                } else if num == 0x008 {
                    0
                } else {
                    num
                };
            }
        } else {
            num &= 0xf;
        }
        self.pkt.exception = super::packet::Etmv3Exception {
            present: true,
            cancel,
            cm_type: v7m,
            cm_resume: resume,
            cm_irq_n: irq_n,
            number: num,
        };
        Ok(())
    }

    fn extract_ctxt_id(&mut self) -> Result<u32, PktError> {
        let size = self.cfg.ctxt_id_bytes();
        if self.raw_idx + size > self.raw.len() {
            return Err(PktError::bad_sequence("Too few bytes to extract context ID."));
        }
        let mut id = 0u32;
        for i in 0..size {
            id |= u32::from(self.raw[self.raw_idx + i]) << (8 * i);
        }
        self.raw_idx += size;
        Ok(id)
    }

    fn extract_timestamp(&mut self) -> Result<(u64, u8), PktError> {
        let full = self.cfg.ts_64bit();
        let max_bytes = if full { 9 } else { 7 };
        let mut ts = 0u64;
        let mut bits = 0u8;
        let mut n = 0usize;
        let mut mask = 0x7fu8;
        let mut iter_bits = 7u8;
        let mut more = true;
        while n < max_bytes && more {
            let Some(&b) = self.raw.get(self.raw_idx + n) else {
                return Err(PktError::bad_sequence("Insufficient bytes to extract timestamp."));
            };
            ts |= u64::from(b & mask) << (7 * n);
            n += 1;
            bits += iter_bits;
            more = b & 0x80 != 0;
            if n == max_bytes - 1 {
                mask = if full { 0xff } else { 0x3f };
                iter_bits = if full { 8 } else { 6 };
            }
        }
        self.raw_idx += n;
        Ok((ts, bits))
    }

    fn extract_and_update_data_addr(&mut self) -> Result<(), PktError> {
        let mut addr = 0u32;
        let mut bits = 0u8;
        let mut be = None;
        for n in 0..5 {
            let b = self.next_raw()? & if n == 4 { 0x0f } else { 0x7f };
            addr |= u32::from(b) << (n * 7);
            if n == 4 {
                bits += 4;
                be = Some((b >> 4) & 1 != 0);
                break;
            }
            bits += 7;
            // The continuation bit was masked off with the value.
            if b & 0x80 == 0 {
                break;
            }
        }
        self.pkt.update_data_address(addr, bits);
        if let Some(be) = be {
            self.pkt.update_data_endian(be);
        }
        Ok(())
    }

    fn extract_data_value(&mut self, size_code: u8) -> Result<u32, PktError> {
        let bytes = [0usize, 1, 2, 4][(size_code & 3) as usize];
        let mut v = 0u32;
        for i in 0..bytes {
            v |= u32::from(self.next_raw()?) << (i * 8);
        }
        Ok(v)
    }

    fn extract_cycle_count(&mut self) -> Result<u32, PktError> {
        let mut cc = 0u32;
        let mut mask = 0x7fu8;
        for n in 0..5 {
            let b = self.next_raw()?;
            cc |= u32::from(b & mask) << (7 * n);
            if n == 3 {
                mask = 0x0f;
            }
            if b & 0x80 == 0 {
                break;
            }
        }
        Ok(cc)
    }

    fn on_isync(&mut self) -> Result<(), PktError> {
        self.raw_idx = 1;
        if self.isync_got_cc {
            let cc = self.extract_cycle_count()?;
            self.pkt.cycle_count = cc;
            self.pkt.isync_has_cc = true;
        }
        if self.cfg.ctxt_id_bytes() != 0 {
            let id = self.extract_ctxt_id()?;
            self.pkt.update_context_id(id);
        }
        let info = self.next_raw()?;
        self.pkt.isync_reason = ISyncReason::from_bits((info >> 5) & 3);
        let jazelle = info & 0x10 != 0;
        let alt_isa = self.cfg.minor_rev() >= 3 && info & 0x04 != 0;
        self.pkt.update_ns(info & 0x08 != 0);
        if self.cfg.has_virt_ext() {
            self.pkt.update_hyp(info & 0x02 != 0);
        }
        if self.cfg.instr_trace() {
            let mut addr = 0u32;
            for i in 0..4 {
                addr |= u32::from(self.next_raw()?) << (8 * i);
            }
            let thumb = addr & 1 != 0;
            addr &= !1;
            self.pkt.update_address(u64::from(addr), 32);
            let isa = if jazelle {
                Isa::Jazelle
            } else if thumb {
                if alt_isa { Isa::Tee } else { Isa::Thumb2 }
            } else {
                Isa::Arm
            };
            self.pkt.update_isa(isa);
            if self.isync_get_lsip {
                // Address of a load/store in progress, compressed against
                // the main one.
                let (lsip, bits) = self.extract_branch_address()?;
                self.pkt.update_data_address(addr, 32);
                self.pkt.update_data_address(lsip, bits);
            }
        } else {
            self.pkt.isync_no_addr = true;
        }
        self.send();
        Ok(())
    }

    fn log(&self, e: &PktError) {
        e.log(&self.err, self.pkt_index, self.trace_id);
    }
}

impl PacketProcessor for Etmv3Processor {
    type Packet = Etmv3Packet;
    fn index_entries(pkt: &Etmv3Packet, emit: &mut dyn FnMut(EntryKind, u64)) {
        index_entries_of(pkt, emit);
    }
    fn error_link(&self) -> Option<&ErrLink> {
        Some(&self.err)
    }

    /// A block that starts with a run of P-headers (most of a busy
    /// source's blocks are no more than that) hands it on here, without
    /// the setting up of the byte-at-a-time processing.
    #[inline]
    fn process(&mut self, index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, Etmv3Packet>) -> (DatapathResp, usize) {
        let mut pos = 0;
        if self.state == State::ProcHdr
            && data.first().copied().is_some_and(is_phdr)
            && let Some((r, n)) = out.offer_run(index, data, is_phdr)
        {
            pos = n;
            self.phdr_run_taken(index + pos as u64 - 1, data[pos - 1]);
            if pos == data.len() || !r.is_cont() {
                return (r, pos);
            }
        }
        let (r, n) = self.process_bytes(index + pos as u64, &data[pos..], out);
        (r, pos + n)
    }

    fn eot(&mut self, out: &mut PacketOut<'_, Etmv3Packet>) -> DatapathResp {
        if self.raw.is_empty() {
            return DatapathResp::Cont;
        }
        let resp = self.output_packet(out);
        self.init_packet_state();
        resp
    }

    fn reset(&mut self, _index: TrcIndex) {
        self.init_processor_state();
    }
}

impl Etmv3Processor {
    /// [`PacketProcessor::process`] a byte at a time, but for runs of
    /// P-headers.
    #[inline(never)]
    fn process_bytes(
        &mut self,
        index: TrcIndex,
        data: &[u8],
        out: &mut PacketOut<'_, Etmv3Packet>,
    ) -> (DatapathResp, usize) {
        let mut pos = 0usize;
        let mut resp = DatapathResp::Cont;
        while (pos < data.len() || self.state == State::SendPkt) && resp.is_cont() {
            let result = match self.state {
                State::WaitSync => {
                    if !self.start_of_sync {
                        self.pkt_index = index + pos as u64;
                    }
                    let n = self.wait_for_sync(&data[pos..]);
                    pos += n;
                    Ok(())
                }
                State::ProcHdr => {
                    let b = data[pos];
                    // A run of P-headers (most of the trace) goes to the
                    // decoder as its bytes; what it leaves is built here.
                    if is_phdr(b)
                        && let Some((r, n)) = out.offer_run(index + pos as u64, &data[pos..], is_phdr)
                    {
                        pos += n;
                        self.phdr_run_taken(index + pos as u64 - 1, data[pos - 1]);
                        resp = r;
                        continue;
                    }
                    self.pkt_index = index + pos as u64;
                    pos += 1;
                    self.process_header(b)
                }
                State::ProcData => {
                    let b = data[pos];
                    pos += 1;
                    self.process_payload(b, &mut pos)
                }
                State::SendPkt => {
                    resp = self.output_packet(out);
                    Ok(())
                }
            };
            if let Err(e) = result {
                self.log(&e);
                if matches!(e.code, ErrCode::BadPacketSeq | ErrCode::InvalidPcktHdr) {
                    // Bad packets go on to the decoder.
                    self.state = State::SendPkt;
                } else {
                    resp = DatapathResp::FatalInvalidData;
                }
            }
        }
        (resp, pos)
    }
}

/// Whether `b` is a P-header's header byte (`1xxx xxx0`).
#[inline(always)]
fn is_phdr(b: u8) -> bool {
    b & 0x81 == 0x80
}

/// The stream index entries of one ETMv3 packet: bad, reserved and
/// incomplete packets make none, as they are not listed under a name.
fn index_entries_of(p: &crate::etmv3::Etmv3Packet, emit: &mut dyn FnMut(EntryKind, u64)) {
    use crate::etmv3::Etmv3PktType as T;
    match p.pkt_type {
        T::ASync => emit(EntryKind::Sync, 0),
        T::ISync | T::ISyncCycle => emit(EntryKind::InstrSync, p.addr),
        T::Trigger => emit(EntryKind::Trigger, 0),
        T::Timestamp => emit(EntryKind::Timestamp, p.timestamp),
        T::ContextId => emit(EntryKind::Context, p.context_id as u64),
        T::Vmid => emit(EntryKind::Vmid, u64::from(p.vmid)),
        T::ExceptionEntry => emit(EntryKind::Exception, 0),
        _ => {}
    }
}
