//! Packet processor: trace buffer bytes to [`RvPacket`]s.
//!
//! Nibbles are taken from each 32-bit little-endian word, bits 3:0 first,
//! which is byte order with the low nibble of each byte first. The buffer
//! is the snapshot's trace file, its byte 0 at `tbufstart`:
//!
//! - not wrapped: the trace is nibbles from the start up to `tbufwrite`;
//!   what lies beyond is stale and skipped;
//! - wrapped: the oldest complete trace starts at the first synchronisation
//!   point at or after `tbufwrite`, runs to the buffer end, and continues
//!   from the start up to `tbufwrite`. The bytes before `tbufwrite` arrive
//!   first, so they are held and decoded at the end of the trace.
//!
//! A reserved or custom header, or a Trace Enabled packet with a version
//! other than 0, is reported as [`RvPacket::Bad`] and the processor skips
//! to the next synchronisation point, where a header is guaranteed.

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::decoder::{PacketOut, PacketProcessor, ProcStats};

use crate::config::RiscvTraceConfig;
use crate::packet::{BadReason, Privilege, RvPacket, SeqValue, header};

fn low_mask(bits: u32) -> u64 {
    if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

/// The last value of a kind, and whether all its bits are known.
#[derive(Clone, Copy, Debug, Default)]
struct Last {
    value: u64,
    known: bool,
}

impl Last {
    /// Fills the bits above the sequence's from this value (the "missing
    /// bits from the last value" rule), for a field `width` bits wide.
    fn fill(&mut self, acc: u64, nibbles: u8, width: u32) -> SeqValue {
        let got = 4 * nibbles as u32;
        let (value, known) = if got >= width {
            (acc & low_mask(width), true)
        } else {
            (
                (self.value & !low_mask(got) & low_mask(width)) | (acc & low_mask(got)),
                self.known,
            )
        };
        *self = Last { value, known };
        SeqValue { value, nibbles, known }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Header,
    Size(u8),
    Value { hdr: u8, need: u8, got: u8, acc: u64 },
    Version,
    Privilege,
}

/// The nibble parser, shared by the live and the held (replayed) parts.
struct Parser {
    cfg: RiscvTraceConfig,
    state: State,
    /// Skipping to the next synchronisation point.
    resync: bool,
    pc: Last,
    load_addr: Last,
    store_addr: Last,
    timestamp: Last,
    /// Byte offset of the current packet's header.
    hdr_index: TrcIndex,
    raw: [u8; 16],
    raw_len: usize,
    raw_last: Option<u64>,
    unsynced_nibbles: u64,
    bad_headers: u64,
    bad_sequences: u64,
}

impl Parser {
    fn new(cfg: RiscvTraceConfig) -> Parser {
        Parser {
            cfg,
            state: State::Header,
            resync: false,
            pc: Last::default(),
            load_addr: Last::default(),
            store_addr: Last::default(),
            timestamp: Last::default(),
            hdr_index: 0,
            raw: [0; 16],
            raw_len: 0,
            raw_last: None,
            unsynced_nibbles: 0,
            bad_headers: 0,
            bad_sequences: 0,
        }
    }

    fn in_sequence(&self) -> bool {
        self.state != State::Header
    }

    /// One nibble at buffer nibble `pos` (in byte `byte_off`, value `byte`).
    fn nibble(&mut self, pos: u64, byte_off: u64, byte: u8, n: u8) -> Option<RvPacket> {
        if self.resync {
            if !self.cfg.is_sync_point(pos) {
                self.unsynced_nibbles += 1;
                return None;
            }
            self.resync = false;
            self.state = State::Header;
        }
        if self.state == State::Header {
            self.hdr_index = byte_off;
            self.raw_len = 0;
            self.raw_last = None;
        }
        if self.raw_last != Some(byte_off) && self.raw_len < self.raw.len() {
            self.raw[self.raw_len] = byte;
            self.raw_len += 1;
            self.raw_last = Some(byte_off);
        }
        match self.state {
            State::Header => match n {
                header::NOP => None,
                header::BRANCH_TAKEN => Some(RvPacket::BranchTaken),
                header::BRANCH_NOT_TAKEN => Some(RvPacket::BranchNotTaken),
                header::TRACE_DISABLED => Some(RvPacket::TraceDisabled),
                header::TRACE_ENABLED => {
                    self.state = State::Version;
                    None
                }
                header::PRIVILEGE => {
                    self.state = State::Privilege;
                    None
                }
                h if header::has_value(h) => {
                    self.state = State::Size(h);
                    None
                }
                h => {
                    self.bad_headers += 1;
                    self.resync = true;
                    Some(RvPacket::Bad(BadReason::Header(h)))
                }
            },
            State::Version => {
                self.state = State::Header;
                if n == 0 {
                    Some(RvPacket::TraceEnabled { version: 0 })
                } else {
                    self.bad_sequences += 1;
                    self.resync = true;
                    Some(RvPacket::Bad(BadReason::Version(n)))
                }
            }
            State::Privilege => {
                self.state = State::Header;
                Some(RvPacket::Privilege(Privilege::from_nibble(n)))
            }
            State::Size(hdr) => {
                self.state = State::Value {
                    hdr,
                    need: n + 1,
                    got: 0,
                    acc: 0,
                };
                None
            }
            State::Value { hdr, need, got, acc } => {
                let acc = acc | ((n as u64) << (4 * got as u32));
                let got = got + 1;
                if got < need {
                    self.state = State::Value { hdr, need, got, acc };
                    return None;
                }
                self.state = State::Header;
                Some(self.finish_value(hdr, need, acc))
            }
        }
    }

    fn finish_value(&mut self, hdr: u8, nibbles: u8, acc: u64) -> RvPacket {
        let isa = self.cfg.isa;
        let xlen = isa.xlen as u32;
        match hdr {
            header::PC => {
                let shift = isa.pc_shift();
                let mut v = self.pc.fill(acc, nibbles, xlen - shift);
                v.value = (v.value << shift) & isa.mask();
                RvPacket::Pc(v)
            }
            header::LOAD_ADDR => RvPacket::LoadAddr(self.load_addr.fill(acc, nibbles, xlen)),
            header::STORE_ADDR => RvPacket::StoreAddr(self.store_addr.fill(acc, nibbles, xlen)),
            header::TIMESTAMP => RvPacket::Timestamp(self.timestamp.fill(acc, nibbles, 64)),
            header::CHANGE_HART => RvPacket::ChangeHart(acc),
            _ => {
                // Load and Store Data: sign extended.
                let got = 4 * nibbles as u32;
                let value = if got >= xlen {
                    acc & isa.mask()
                } else {
                    let s = 64 - got;
                    ((((acc << s) as i64) >> s) as u64) & isa.mask()
                };
                let v = SeqValue {
                    value,
                    nibbles,
                    known: true,
                };
                if hdr == header::LOAD_DATA {
                    RvPacket::LoadData(v)
                } else {
                    RvPacket::StoreData(v)
                }
            }
        }
    }

    /// The end of the trace: a sequence left open is reported once.
    fn finish(&mut self) -> Option<RvPacket> {
        if self.in_sequence() && !self.resync {
            self.state = State::Header;
            self.bad_sequences += 1;
            return Some(RvPacket::Bad(BadReason::Truncated));
        }
        None
    }
}

/// The RISC-V trace packet processor.
pub struct RvProcessor {
    cfg: RiscvTraceConfig,
    parser: Parser,
    /// Bytes taken so far (the buffer offset of the next byte).
    off: u64,
    /// The low nibble of byte `off` has been taken (a packet ended there
    /// and its sink asked to wait).
    half: bool,
    /// First nibble of the live part of a wrapped buffer.
    start_nib: u64,
    /// Wrapped: bytes before `tbufwrite`, decoded at the end.
    held: Vec<u8>,
    /// Next held nibble to decode at the end of the trace.
    replay_nib: u64,
    /// The end of the trace has been fully processed.
    ended: bool,
}

impl RvProcessor {
    pub fn new(cfg: RiscvTraceConfig) -> RvProcessor {
        let write_nib = cfg.write_offset() * 2;
        let start_nib = if cfg.trace.wrapped() {
            cfg.next_sync_point(write_nib)
        } else {
            0
        };
        RvProcessor {
            cfg,
            parser: Parser::new(cfg),
            off: 0,
            half: false,
            start_nib,
            held: Vec::new(),
            replay_nib: 0,
            ended: false,
        }
    }

    fn write_nib(&self) -> u64 {
        self.cfg.write_offset() * 2
    }

    /// The live nibble at `pos`: decoded, held for the end, or skipped.
    fn live_nibble(&mut self, pos: u64, byte_off: u64, byte: u8, n: u8) -> Option<RvPacket> {
        let wn = self.write_nib();
        if pos >= self.cfg.buffer_nibbles() {
            self.parser.unsynced_nibbles += 1;
            return None;
        }
        if !self.cfg.trace.wrapped() {
            if pos < wn {
                return self.parser.nibble(pos, byte_off, byte, n);
            }
            self.parser.unsynced_nibbles += 1;
            return None;
        }
        if pos < wn {
            if pos.is_multiple_of(2) {
                self.held.push(byte);
            }
            return None;
        }
        if pos < self.start_nib {
            self.parser.unsynced_nibbles += 1;
            return None;
        }
        self.parser.nibble(pos, byte_off, byte, n)
    }

    fn raw(&self) -> &[u8] {
        &self.parser.raw[..self.parser.raw_len]
    }
}

impl PacketProcessor for RvProcessor {
    type Packet = RvPacket;

    fn process(&mut self, _index: TrcIndex, data: &[u8], out: &mut PacketOut<'_, RvPacket>) -> (DatapathResp, usize) {
        self.ended = false;
        for (i, &b) in data.iter().enumerate() {
            let byte_off = self.off;
            let first = if self.half { 1 } else { 0 };
            for k in first..2u8 {
                let n = (b >> (4 * k)) & 0xf;
                if let Some(p) = self.live_nibble(byte_off * 2 + k as u64, byte_off, b, n) {
                    let resp = out.emit(self.parser.hdr_index, &p, self.raw());
                    if !resp.is_cont() {
                        if k == 0 {
                            self.half = true;
                            return (resp, i);
                        }
                        self.half = false;
                        self.off += 1;
                        return (resp, i + 1);
                    }
                }
            }
            self.half = false;
            self.off += 1;
        }
        (DatapathResp::Cont, data.len())
    }

    fn eot(&mut self, out: &mut PacketOut<'_, RvPacket>) -> DatapathResp {
        if self.ended {
            return DatapathResp::Cont;
        }
        if self.cfg.trace.wrapped() {
            let end = (self.held.len() as u64 * 2).min(self.write_nib());
            while self.replay_nib < end {
                let pos = self.replay_nib;
                let byte = self.held[(pos / 2) as usize];
                let n = (byte >> (4 * (pos % 2))) & 0xf;
                self.replay_nib += 1;
                if let Some(p) = self.parser.nibble(pos, pos / 2, byte, n) {
                    let resp = out.emit(self.parser.hdr_index, &p, self.raw());
                    if !resp.is_cont() {
                        return resp;
                    }
                }
            }
        }
        self.ended = true;
        if let Some(p) = self.parser.finish() {
            return out.emit(self.parser.hdr_index, &p, self.raw());
        }
        DatapathResp::Cont
    }

    fn reset(&mut self, _index: TrcIndex) {
        let stats = (
            self.parser.unsynced_nibbles,
            self.parser.bad_headers,
            self.parser.bad_sequences,
        );
        *self = RvProcessor::new(self.cfg);
        (
            self.parser.unsynced_nibbles,
            self.parser.bad_headers,
            self.parser.bad_sequences,
        ) = stats;
    }

    fn stats(&self) -> Option<ProcStats> {
        Some(ProcStats {
            unsynced_bytes: self.parser.unsynced_nibbles / 2,
            bad_header_errs: self.parser.bad_headers,
            bad_sequence_errs: self.parser.bad_sequences,
        })
    }
}
