//! Test rig shared by the protocol tests (PTM, ETMv3, STM, ITM): a decode
//! context whose packet printer, element printer and error logger all
//! write into one captured listing, as the lister's would, and the ways of
//! feeding a component that the lister uses (blocks, waits, end of trace).

use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::{DecodeContext, DecodeMode, ElemRouter, TraceComponent};
use crate::deformatter::IdStreamSink;
use crate::errcode::{ErrCode, Severity};
use crate::instr::ArmInstrDecoder;
use crate::interfaces::{InstrDecode, TargetMemAccess, TrcDataIn};
use crate::logger::{ErrorLogger, MsgLogger};
use crate::memory::{BufferAccessor, MemAccMapper, MemSpace};
use crate::printers::{GenElemPrinter, PacketPrinter};
use crate::shared::{Shared, shared};

pub(crate) struct Rig {
    pub out: Shared<MsgLogger>,
    pub mapper: Shared<MemAccMapper>,
    pub elems: Shared<GenElemPrinter>,
    pub ctx: DecodeContext,
}

impl Rig {
    pub(crate) fn new(mode: DecodeMode) -> Rig {
        let out = shared(MsgLogger::capture());
        let err_log = shared(ErrorLogger::new(Severity::Info, Some(out.clone())));
        let elems = shared(GenElemPrinter::new(out.clone()));
        let elem_out = shared(ElemRouter::default());
        elem_out.borrow_mut().set(Some(Box::new(elems.clone())));
        let mapper = shared(MemAccMapper::default());
        let instr: Shared<dyn InstrDecode> = shared(ArmInstrDecoder::new());
        let ctx = DecodeContext {
            mode,
            instance_id: Some(0),
            mem: Some(mapper.clone() as Shared<dyn TargetMemAccess>),
            instr,
            elem_out,
            err_log,
            options: Default::default(),
        };
        Rig {
            out,
            mapper,
            elems,
            ctx,
        }
    }

    /// Maps `bytes` at `addr` in every memory space.
    pub(crate) fn map(&self, addr: u64, bytes: &[u8]) {
        let acc = BufferAccessor::new(addr, bytes.to_vec(), MemSpace::ANY).unwrap();
        self.mapper.borrow_mut().add_accessor(Box::new(acc)).unwrap();
    }

    /// Maps little-endian 32-bit words (A32 code) at `addr`.
    pub(crate) fn map_words(&self, addr: u64, words: &[u32]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.map(addr, &bytes);
    }

    /// Maps the A32 program the PTM and ETMv3 decode tests follow: a
    /// call, a return and a loop.
    pub(crate) fn map_arm_program(&self) {
        self.map_words(
            0x1000,
            &[
                0xe3a0_0001, // 1000: mov r0, #1
                0xeb00_0001, // 1004: bl 0x1010
                0xeaff_fffe, // 1008: b 0x1008
                0xe320_f000, // 100c: nop
                0xe280_0001, // 1010: add r0, r0, #1
                0xe12f_ff1e, // 1014: bx lr
            ],
        );
    }

    /// Prints packets with their raw bytes, as `trc_pkt_lister -decode` does.
    pub(crate) fn monitor(&self, comp: &mut dyn TraceComponent, id: u8) {
        comp.attach_packet_printer(PacketPrinter::new(id, self.out.clone()), true)
            .unwrap();
    }

    /// Sends `data` as one block at `index`, flushing whenever a wait is
    /// asked for; stops at a fatal response, and returns the last response.
    pub(crate) fn send(&self, comp: &mut dyn TraceComponent, index: TrcIndex, data: &[u8]) -> DatapathResp {
        let mut done = 0;
        let mut resp = DatapathResp::Cont;
        while done < data.len() && !resp.is_fatal() {
            if resp.is_wait() {
                resp = self.flush(comp);
                continue;
            }
            let (r, used) = comp.trace_data_in(DatapathOp::Data, index + done as TrcIndex, &data[done..]);
            done += used;
            resp = r;
        }
        if resp.is_wait() {
            resp = self.flush(comp);
        }
        resp
    }

    /// Sends `data` in blocks of `block` bytes from trace index `index`
    /// (see [`Rig::send`]); no response may be fatal.
    pub(crate) fn feed(&self, comp: &mut dyn TraceComponent, index: TrcIndex, data: &[u8], block: usize) {
        for (n, chunk) in data.chunks(block).enumerate() {
            let resp = self.send(comp, index + (n * block) as TrcIndex, chunk);
            assert!(!resp.is_fatal(), "fatal response {resp:?}");
        }
    }

    /// Acknowledges waits and flushes until the component answers other
    /// than wait.
    fn flush(&self, comp: &mut dyn TraceComponent) -> DatapathResp {
        let mut r = DatapathResp::Wait;
        while r.is_wait() {
            self.elems.borrow_mut().ack_wait();
            r = comp.trace_data_in(DatapathOp::Flush, 0, &[]).0;
        }
        r
    }

    /// End of trace, as the lister sends it: on a wait, flush until
    /// continue, then send EOT again. Returns the last response.
    pub(crate) fn eot(&self, comp: &mut dyn TraceComponent) -> DatapathResp {
        let mut r = comp.trace_data_in(DatapathOp::Eot, 0, &[]).0;
        while r.is_wait() {
            self.elems.borrow_mut().ack_wait();
            r = comp.trace_data_in(DatapathOp::Flush, 0, &[]).0;
            if r.is_cont() {
                r = comp.trace_data_in(DatapathOp::Eot, 0, &[]).0;
            }
        }
        r
    }

    /// The whole listing of `data` sent as one block from index 0 (no
    /// response may be fatal), then end of trace; clears it.
    pub(crate) fn listing(&self, comp: &mut dyn TraceComponent, data: &[u8]) -> String {
        self.feed(comp, 0, data, data.len().max(1));
        self.eot(comp);
        self.take()
    }

    /// The listing so far (and clears it).
    pub(crate) fn take(&self) -> String {
        self.out.borrow_mut().take_captured()
    }
}

/// Joins listing lines, each ending in a line break.
pub(crate) fn lines(l: &[&str]) -> String {
    let mut s = String::new();
    for line in l {
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// Deterministic pseudo-random bytes (xorshift), for robustness tests.
pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Feeds `data` in varying block sizes, carrying on after fatal responses
/// (a robustness check: nothing may panic or loop).
pub(crate) fn feed_ignoring_errors(comp: &mut dyn TraceComponent, data: &[u8]) {
    let mut at = 0;
    let mut block = 1;
    while at < data.len() {
        let end = (at + block).min(data.len());
        let mut pos = at;
        while pos < end {
            let (resp, used) = comp.trace_data_in(DatapathOp::Data, pos as TrcIndex, &data[pos..end]);
            assert!(used <= end - pos, "used more than it was given");
            pos += used;
            if resp.is_fatal() && used == 0 {
                // A fatal answer with nothing used: skip a byte.
                pos += 1;
            }
            if resp.is_wait() {
                comp.trace_data_in(DatapathOp::Flush, 0, &[]);
            }
        }
        at = end;
        block = block % 37 + 3;
    }
    comp.trace_data_in(DatapathOp::Eot, 0, &[]);
}

/// A table of per-ID consumers, for feeding a deformatter on its own.
pub(crate) struct IdStreamTable {
    streams: Vec<Option<Box<dyn TrcDataIn>>>,
}

impl Default for IdStreamTable {
    fn default() -> Self {
        IdStreamTable {
            streams: (0..128).map(|_| None).collect(),
        }
    }
}

impl IdStreamTable {
    /// Attaches `sink` to `id` (0..=127), replacing any previous one.
    pub(crate) fn attach(&mut self, id: u8, sink: Box<dyn TrcDataIn>) -> Result<(), ErrCode> {
        let slot = self.streams.get_mut(id as usize).ok_or(ErrCode::InvalidId)?;
        *slot = Some(sink);
        Ok(())
    }
}

impl IdStreamSink for IdStreamTable {
    fn is_attached(&self, id: u8) -> bool {
        matches!(self.streams.get(id as usize), Some(Some(_)))
    }
    fn id_data_in(&mut self, id: u8, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        match self.streams.get_mut(id as usize) {
            Some(Some(s)) => s.trace_data_in(DatapathOp::Data, index, data),
            _ => (DatapathResp::Cont, data.len()),
        }
    }
    fn all_ids_op(&mut self, op: DatapathOp, index: TrcIndex) -> DatapathResp {
        let mut worst = DatapathResp::Cont;
        for s in self.streams.iter_mut().flatten() {
            worst = worst.worst(s.trace_data_in(op, index, &[]).0);
        }
        worst
    }
}
