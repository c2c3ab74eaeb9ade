//! ETMv3 (3.5) instruction trace encoder for generated A32/T32
//! executions, as a Cortex-A7 ETM traces them.
//!
//! ETMv3 gives every instruction an atom: E when it executed (passed its
//! condition), N when it failed its condition (or a branch was not taken).
//! Atoms go out in P-headers: without cycle accuracy format 1 (up to 15 E
//! then an optional N) and format 2 (any two); cycle-accurate, format 1
//! (atoms a cycle each), format 2 (a cycle, then two atoms), format 3
//! (waits, then an optional E) and format 4 (an atom in the same cycle).
//! A taken indirect branch, and a direct branch that changes instruction
//! set (BLX `<label>`), is followed by a branch address packet compressed
//! against the last address output (original or, with ETMIDR bit 20, the
//! alternative encoding); an exception is a branch address packet to the
//! vector with exception bytes (a data abort cancels the load or store
//! traced just before it); an exception return's atom is followed by an
//! exception exit packet, then the branch address.
//!
//! The stream starts with A-sync and I-sync (Trace Enable; with a cycle
//! count when cycle-accurate); A-sync and I-sync (Periodic) recur every
//! few hundred bytes at any instruction. Trace filtered off after any
//! instruction restarts at a later one with an I-sync (Trace Enable).
//! Timestamps follow syncs and come now and then, compressed against the
//! last one; context ID and VMID changes give their packets.
//!
//! The truth is one range per instruction, as OpenCSD's ETMv3 decoder
//! outputs it. To merge several sources in decode order, the encoder also
//! works out when the decoder outputs each range: it holds back the last
//! range of a P-header while it is the only element waiting (an exception
//! may cancel it), so this mirrors its element list.

use std::collections::VecDeque;

use super::a32t32::{self, ExcKind, IsaMix, Program, ProgramConfig, SegEnd, Source, Term, WalkConfig, walk};
use super::ptm::{parse_flag, parse_isa, pick, pick_isa};
use super::{GenOptions, Generated, Rng, Truth};
use coresight_decode::arch::Isa;

/// What to put in an ETMv3 trace; `None` is chosen at random from the
/// seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Etmv3GenOptions {
    pub isa: Option<IsaMix>,
    /// Cycle-accurate (ETMCR bit 12): P-headers with waits, I-syncs with
    /// cycle counts.
    pub cycle_accurate: Option<bool>,
    /// Timestamps (ETMCR bit 28).
    pub timestamps: Option<bool>,
    /// Context ID (ETMCR bits 15:14: 1, 2 or 4 bytes) and VMID (bit 30).
    pub context_id: Option<bool>,
    /// IRQs, FIQs and SVCs, with their handlers and returns.
    pub exceptions: Option<bool>,
    /// Data aborts too, which cancel the aborted instruction's atom. Off
    /// unless asked for: OpenCSD only cancels an instruction it still
    /// holds back, so it mostly outputs it anyway (see the report of
    /// `cancelled_atoms_shared_with_other_atoms`).
    pub data_aborts: Option<bool>,
    /// Trace filtered on and off.
    pub trace_filter: Option<bool>,
    /// The alternative branch address encoding (ETMIDR bit 20).
    pub alt_branch: Option<bool>,
}

impl Etmv3GenOptions {
    pub const NAMES: &'static str = "isa, cycleacc, timestamps, ctxid, exceptions, aborts, filter, altbranch";

    /// Sets an option by name (`isa=t32`, `cycleacc=1`, ...).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let flag = || parse_flag(value);
        match name.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "isa" => self.isa = parse_isa(value)?,
            "cycleacc" | "cycleaccurate" | "ca" => self.cycle_accurate = flag()?,
            "timestamps" | "ts" => self.timestamps = flag()?,
            "ctxid" | "contextid" => self.context_id = flag()?,
            "exceptions" | "exc" => self.exceptions = flag()?,
            "aborts" | "dataaborts" => self.data_aborts = flag()?,
            "filter" | "tracefilter" => self.trace_filter = flag()?,
            "altbranch" => self.alt_branch = flag()?,
            n => return Err(format!("unknown ETMv3 option `{n}` (options: {})", Self::NAMES)),
        }
        Ok(())
    }
}

/// A resolved configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Etmv3Config {
    pub isa: IsaMix,
    pub cycle_accurate: bool,
    pub timestamps: bool,
    pub ctxt_bytes: usize,
    pub vmid: bool,
    pub exceptions: bool,
    pub data_aborts: bool,
    pub filter: bool,
    pub alt_branch: bool,
    pub ts64: bool,
    pub ns: bool,
}

impl Etmv3Config {
    pub(crate) fn resolve(rng: &mut Rng, o: &Etmv3GenOptions) -> Etmv3Config {
        let cycle_accurate = pick(rng, o.cycle_accurate, 1, 2);
        let timestamps = pick(rng, o.timestamps, 1, 2);
        let ctx = pick(rng, o.context_id, 1, 2);
        let exceptions = pick(rng, o.exceptions, 1, 2);
        let data_aborts = o.data_aborts.unwrap_or(false);
        let filter = pick(rng, o.trace_filter, 1, 3);
        let alt_branch = pick(rng, o.alt_branch, 1, 2);
        let isa = pick_isa(rng, o.isa);
        let ctxt_bytes = if ctx { [1, 2, 4][rng.below(3) as usize] } else { 0 };
        Etmv3Config {
            isa,
            cycle_accurate,
            timestamps,
            ctxt_bytes,
            vmid: ctx && rng.chance(1, 2),
            exceptions: exceptions || data_aborts,
            data_aborts,
            filter,
            alt_branch,
            ts64: rng.chance(2, 3),
            ns: rng.chance(1, 2),
        }
    }

    pub(crate) fn etmcr(&self) -> u64 {
        let ctxt = match self.ctxt_bytes {
            0 => 0,
            1 => 1,
            2 => 2,
            _ => 3,
        };
        // Port size and selection bits as a Cortex-A7 ETM is set up.
        0x860
            | (self.cycle_accurate as u64) << 12
            | ctxt << 14
            | (self.timestamps as u64) << 28
            | (self.vmid as u64) << 30
    }
    /// ETMv3.5 on a Cortex-A7.
    pub(crate) fn etmidr(&self) -> u64 {
        0x410C_F250 | (self.alt_branch as u64) << 20
    }
    /// Timestamps and virtualization implemented; timestamp size.
    pub(crate) fn etmccer(&self) -> u64 {
        0x1440_08F2 | (self.ts64 as u64) << 29
    }
}

/// An element in the decoder's output list: the truth item of a range
/// (`None` for other elements), and whether it is a range.
type Elem = (Option<usize>, bool);

/// What a packet does to the decoder's element list.
enum ListOp<'a> {
    /// A P-header's elements.
    PHdr(&'a [Elem]),
    /// A branch address, cancelling or not, with an exception or not.
    Branch {
        cancel: bool,
        exception: bool,
    },
    /// A packet adding `n` elements that are not ranges.
    Others(usize),
    ExceptionExit,
    EndOfTrace,
}

/// OpenCSD's ETMv3 element list, as far as when ranges go out: elements
/// are queued, the newest may be held back (pended) while nothing else is
/// queued, then released or cancelled by the next packet.
#[derive(Default)]
struct ListModel {
    items: VecDeque<Elem>,
    pend: usize,
}

impl ListModel {
    fn pend_last(&mut self, n: usize) {
        if n >= self.items.len() {
            self.pend = n;
        }
    }

    /// Applies a packet whose last byte is at `at`; `sent` gets the truth
    /// items output, `cancelled` those dropped.
    fn packet(&mut self, op: ListOp<'_>, at: usize, sent: &mut Vec<(usize, usize)>, cancelled: &mut Vec<usize>) {
        match op {
            ListOp::Branch { cancel, exception } => {
                if cancel {
                    // The held-back count stays, as in OpenCSD.
                    let keep = self.items.len().saturating_sub(self.pend);
                    for (id, _) in self.items.drain(keep..) {
                        cancelled.extend(id);
                    }
                } else {
                    self.pend = 0;
                }
                if exception {
                    self.items.push_back((None, false));
                }
            }
            ListOp::PHdr(elems) => {
                self.pend = 0;
                self.items.extend(elems.iter().copied());
                if elems.last().is_some_and(|e| e.1) {
                    self.pend_last(1);
                }
            }
            ListOp::Others(n) => {
                self.pend = 0;
                self.items.extend(std::iter::repeat_n((None, false), n));
            }
            ListOp::ExceptionExit => {
                self.pend = 0;
                self.items.push_back((None, false));
                let len = self.items.len();
                let n = if len > 1 && self.items[len - 2].1 { 2 } else { 1 };
                self.pend_last(n);
            }
            ListOp::EndOfTrace => {
                self.items.push_back((None, false));
                self.pend = 0;
            }
        }
        while self.items.len() > self.pend {
            if let Some((Some(id), _)) = self.items.pop_front() {
                sent.push((at, id));
            }
        }
    }
}

/// An atom waiting for its P-header.
#[derive(Clone, Copy)]
struct Atom {
    e: bool,
    /// Cycles since the previous atom (cycle-accurate).
    cycles: u32,
    item: usize,
}

/// The ETMv3 encoder.
pub(crate) struct Etmv3Encoder {
    cfg: Etmv3Config,
    pub out: Vec<u8>,
    atoms: Vec<Atom>,
    /// Every range made, in order.
    items: Vec<Truth>,
    /// Ranges of instructions that did not complete (aborted).
    not_executed: Vec<bool>,
    /// The cycle count each range gets (cycle-accurate).
    cc_out: Vec<u32>,
    /// Timestamps output, in order.
    pub timestamps: Vec<u64>,
    /// How often each feature was used.
    pub stats: std::collections::BTreeMap<&'static str, usize>,
    list: ListModel,
    sent: Vec<(usize, usize)>,
    cancelled: Vec<usize>,
    addr: u32,
    isa: Isa,
    ts: u64,
    ts_out: u64,
    ctxt_id: u32,
    since_sync: usize,
    sync_period: usize,
}

impl Etmv3Encoder {
    pub(crate) fn new(cfg: Etmv3Config, rng: &mut Rng) -> Etmv3Encoder {
        let mask = match cfg.ctxt_bytes {
            0 => 0,
            4 => u32::MAX,
            n => (1u32 << (8 * n)) - 1,
        };
        Etmv3Encoder {
            cfg,
            out: Vec::new(),
            atoms: Vec::new(),
            items: Vec::new(),
            not_executed: Vec::new(),
            cc_out: Vec::new(),
            timestamps: Vec::new(),
            stats: Default::default(),
            list: ListModel::default(),
            sent: Vec::new(),
            cancelled: Vec::new(),
            addr: 0,
            isa: Isa::Unknown,
            ts: 0x82_f9d0_0000 + rng.below(1 << 24),
            ts_out: 0,
            ctxt_id: rng.next_u64() as u32 & mask,
            since_sync: 0,
            sync_period: 256 + rng.below(768) as usize,
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    fn put(&mut self, bytes: &[u8], op: ListOp<'_>) {
        self.out.extend_from_slice(bytes);
        self.since_sync += bytes.len();
        let at = self.out.len() - 1;
        self.list.packet(op, at, &mut self.sent, &mut self.cancelled);
    }

    fn sync_due(&self) -> bool {
        self.since_sync >= self.sync_period
    }

    fn async_(&mut self, rng: &mut Rng) {
        self.flush_atoms();
        self.put(&[0, 0, 0, 0, 0, 0x80], ListOp::Others(0));
        self.since_sync = 0;
        self.count("async");
        // A cycle-accurate ETM may count cycles before the I-sync.
        if self.cfg.cycle_accurate && rng.chance(1, 3) {
            let w = rng.range(1, 8) as u8;
            self.put(&[0xa0 | (w - 1) << 2], ListOp::Others(1));
            self.count("waits before I-sync");
        }
    }

    /// I-sync: reason 0 periodic, 1 trace enable.
    fn isync(&mut self, addr: u32, isa: Isa, reason: u8, first: bool, rng: &mut Rng) {
        self.flush_atoms();
        let mut p = Vec::with_capacity(16);
        if reason != 0 && self.cfg.cycle_accurate {
            p.push(0x70);
            let mut cc = super::ptm::random_cc(rng);
            loop {
                let more = cc >> 7 != 0;
                p.push((cc & 0x7f) as u8 | (more as u8) << 7);
                cc >>= 7;
                if !more {
                    break;
                }
            }
        } else {
            p.push(0x08);
        }
        p.extend_from_slice(&self.ctxt_id.to_le_bytes()[..self.cfg.ctxt_bytes]);
        p.push(reason << 5 | (self.cfg.ns as u8) << 3 | 1);
        let a = addr | (isa == Isa::Thumb2) as u32;
        p.extend_from_slice(&a.to_le_bytes());
        // Trace on (unless periodic and in sync) and the context.
        let n = if reason != 0 || first { 2 } else { 1 };
        self.count(if reason == 0 {
            "isync periodic"
        } else {
            "isync trace enable"
        });
        self.put(&p, ListOp::Others(n));
        self.addr = addr;
        self.isa = isa;
    }

    /// Queues the atom of the instruction range `item`; `executed` false
    /// for an instruction that aborts.
    fn atom(&mut self, e: bool, item: Truth, executed: bool, rng: &mut Rng) {
        let id = self.items.len();
        self.items.push(item);
        self.not_executed.push(!executed);
        self.cc_out.push(0);
        self.count(if e { "atom E" } else { "atom N" });
        let cycles = if self.cfg.cycle_accurate {
            match rng.below(10) {
                0 => 0,
                1 => rng.range(2, 20) as u32,
                _ => 1,
            }
        } else {
            0
        };
        self.atoms.push(Atom { e, cycles, item: id });
        if self.atoms.len() >= 24 {
            self.flush_atoms();
        }
    }

    fn phdr(&mut self, hdr: u8, atoms: &[Atom]) {
        if self.cfg.cycle_accurate {
            // The cycle count the decoder gives each atom's range.
            let (fmt, per_atom): (&'static str, &dyn Fn(usize) -> u32) = match hdr & 0xa3 {
                0x80 => ("P-header format 1", &|_| 1),
                0x82 if hdr & 0x10 != 0 => ("P-header format 4", &|_| 0),
                0x82 => ("P-header format 2", &|i| (i == 0) as u32),
                _ => ("P-header format 3", &|_| u32::from((hdr >> 2) & 7) + 1),
            };
            self.count(fmt);
            for (i, a) in atoms.iter().enumerate() {
                self.cc_out[a.item] = per_atom(i);
            }
        } else {
            self.count(if hdr & 3 == 0 {
                "P-header format 1"
            } else {
                "P-header format 2"
            });
        }
        let elems: Vec<Elem> = if atoms.is_empty() {
            vec![(None, false)]
        } else {
            atoms.iter().map(|a| (Some(a.item), true)).collect()
        };
        self.put(&[hdr], ListOp::PHdr(&elems));
    }

    /// Outputs the queued atoms in P-headers.
    fn flush_atoms(&mut self) {
        let atoms = std::mem::take(&mut self.atoms);
        let mut i = 0;
        if !self.cfg.cycle_accurate {
            while i < atoms.len() {
                let k = atoms[i..].iter().take(15).take_while(|a| a.e).count();
                if k == 0 && i + 1 < atoms.len() {
                    // Format 2: two atoms, bit 3 the first; a set bit is N.
                    let hdr = 0x82 | (!atoms[i].e as u8) << 3 | (!atoms[i + 1].e as u8) << 2;
                    self.phdr(hdr, &atoms[i..i + 2]);
                    i += 2;
                } else {
                    // Format 1: k E atoms, then an N if one follows.
                    let n = (i + k < atoms.len() && !atoms[i + k].e) as usize;
                    let hdr = 0x80 | (k as u8) << 2 | (n as u8) << 6;
                    self.phdr(hdr, &atoms[i..i + k + n]);
                    i += k + n;
                }
            }
            return;
        }
        let mut cur = atoms;
        while i < cur.len() {
            let a = cur[i];
            if a.cycles == 0 {
                // Format 4: an atom in the same cycle as the last.
                self.phdr(0x92 | (!a.e as u8) << 2, &cur[i..i + 1]);
                i += 1;
            } else if a.cycles >= 2 {
                if a.e && a.cycles <= 8 {
                    // Format 3: waits, then the E atom.
                    self.phdr(0xa0 | ((a.cycles - 1) as u8) << 2 | 0x40, &cur[i..i + 1]);
                    i += 1;
                } else {
                    // Format 3 without an atom: the waits first.
                    let w = (a.cycles - 1).min(8);
                    self.phdr(0xa0 | ((w - 1) as u8) << 2, &[]);
                    cur[i].cycles -= w;
                }
            } else if i + 1 < cur.len() && cur[i + 1].cycles == 0 {
                // Format 2: a cycle, then two atoms.
                self.phdr(0x82 | (!a.e as u8) << 3 | (!cur[i + 1].e as u8) << 2, &cur[i..i + 2]);
                i += 2;
            } else {
                // Format 1: atoms a cycle each, up to 7 E then an N.
                let k = cur[i..].iter().take(7).take_while(|a| a.e && a.cycles == 1).count();
                let n = (i + k < cur.len() && !cur[i + k].e && cur[i + k].cycles == 1) as usize;
                self.phdr(0x80 | (k as u8) << 2 | (n as u8) << 6, &cur[i..i + k + n]);
                i += k + n;
            }
        }
    }

    /// A branch address packet, perhaps with an exception (number, cancel).
    fn branch(&mut self, addr: u32, isa: Isa, exception: Option<(u16, bool)>) {
        self.flush_atoms();
        let alt = self.cfg.alt_branch;
        let exc = exception.is_some();
        let covered: [u32; 4] = match (isa == Isa::Arm, alt) {
            (true, false) => [8, 15, 22, 29],
            (false, false) => [7, 14, 21, 28],
            (true, true) => [8, 14, 21, 28],
            (false, true) => [7, 13, 20, 27],
        };
        let diff = addr ^ self.addr;
        if isa != self.isa {
            self.count("address with ISA change");
        }
        let mut n = 5;
        // The original encoding only has exception bytes after five
        // address bytes; the alternative one after two or more.
        if isa == self.isa && (alt || !exc) {
            for k in 1..=4 {
                if (k > 1 || !exc) && diff >> covered[k - 1] == 0 {
                    n = k;
                    break;
                }
            }
        }
        let v = if isa == Isa::Arm { addr >> 2 } else { addr >> 1 };
        let mut p = Vec::with_capacity(8);
        p.push(((v & 0x3f) as u8) << 1 | 1 | ((n > 1) as u8) << 7);
        for i in 1..n {
            let shift = 6 + 7 * (i as u32 - 1);
            let b = if i == 4 {
                let hi = if isa == Isa::Arm {
                    0x08 | (v >> 27) as u8 & 0x7
                } else {
                    0x10 | (v >> 27) as u8 & 0xf
                };
                hi | (exc as u8) << 6
            } else if i == n - 1 {
                if alt {
                    (v >> shift) as u8 & 0x3f | (exc as u8) << 6
                } else {
                    (v >> shift) as u8 & 0x7f
                }
            } else {
                (v >> shift) as u8 & 0x7f | 0x80
            };
            p.push(b);
        }
        if let Some((num, cancel)) = exception {
            p.push(self.cfg.ns as u8 | ((num & 0xf) as u8) << 1 | (cancel as u8) << 5);
            self.count(if cancel { "exception cancelling" } else { "exception" });
        }
        self.count(match n {
            1 => "branch address 1 byte",
            2..=4 => "branch address 2-4 bytes",
            _ => "branch address 5 bytes",
        });
        self.addr = addr;
        self.isa = isa;
        let cancel = exception.is_some_and(|e| e.1);
        self.put(&p, ListOp::Branch { cancel, exception: exc });
    }

    fn exception_exit(&mut self) {
        self.flush_atoms();
        self.put(&[0x76], ListOp::ExceptionExit);
        self.count("exception exit");
    }

    fn timestamp(&mut self, rng: &mut Rng, full: bool) {
        self.flush_atoms();
        self.ts += rng.range(1, 5000);
        let need = a32t32::bits_needed(self.ts ^ self.ts_out).max(1);
        let (max_bytes, last_bits) = if self.cfg.ts64 { (9u32, 8u32) } else { (7, 6) };
        let n = if full || need > 7 * (max_bytes - 1) {
            max_bytes
        } else {
            need.div_ceil(7)
        };
        let mut p = vec![0x42];
        for i in 0..n {
            let v = (self.ts >> (7 * i)) as u8;
            if i == max_bytes - 1 {
                p.push(if last_bits == 8 { v } else { v & 0x3f });
            } else {
                p.push(v & 0x7f | ((i + 1 < n) as u8) << 7);
            }
        }
        self.put(&p, ListOp::Others(1));
        self.ts_out = self.ts;
        self.timestamps.push(self.ts);
        self.count("timestamp");
    }

    fn context_change(&mut self, rng: &mut Rng) {
        if self.cfg.ctxt_bytes == 0 {
            return;
        }
        self.flush_atoms();
        let mask = if self.cfg.ctxt_bytes == 4 {
            u32::MAX
        } else {
            (1u32 << (8 * self.cfg.ctxt_bytes)) - 1
        };
        self.ctxt_id = rng.next_u64() as u32 & mask;
        let mut p = vec![0x6e];
        p.extend_from_slice(&self.ctxt_id.to_le_bytes()[..self.cfg.ctxt_bytes]);
        self.put(&p, ListOp::Others(1));
        self.count("context ID");
    }

    fn vmid_change(&mut self, rng: &mut Rng) {
        if !self.cfg.vmid {
            return;
        }
        self.flush_atoms();
        let v = rng.below(256) as u8;
        self.put(&[0x3c, v], ListOp::Others(1));
        self.count("VMID");
    }

    /// Ends the trace; returns the truth: the ranges of instructions that
    /// executed, each with the index of the byte whose packet makes the
    /// decoder output it (`usize::MAX` at the end of trace).
    fn finish(&mut self) -> Vec<(usize, Truth)> {
        self.flush_atoms();
        self.list
            .packet(ListOp::EndOfTrace, usize::MAX, &mut self.sent, &mut self.cancelled);
        let cancelled = self.cancelled.len();
        self.stats.insert("range cancelled", cancelled);
        let quirk = self.sent.iter().filter(|(_, id)| self.not_executed[*id]).count();
        self.stats.insert("aborted range output anyway", quirk);
        self.sent
            .iter()
            .filter(|(_, id)| !self.not_executed[*id])
            .map(|&(at, id)| (at, self.items[id].clone()))
            .collect()
    }

    /// The cycle counts of the truth items' ranges, in order.
    #[cfg(test)]
    fn truth_cc(&self) -> Vec<u32> {
        self.sent
            .iter()
            .filter(|(_, id)| !self.not_executed[*id])
            .map(|&(_, id)| self.cc_out[id])
            .collect()
    }
}

/// Encodes a walk through `prog`; returns the encoder and the truth.
fn encode(
    cfg: Etmv3Config,
    prog: &Program,
    segs: &[a32t32::Seg],
    rng: &mut Rng,
) -> (Etmv3Encoder, Vec<(usize, Truth)>) {
    let mut enc = Etmv3Encoder::new(cfg, rng);
    let mut tracing = false;
    let mut first = true;
    for seg in segs {
        let b = &prog.blocks[seg.block];
        let ti = b.term_index();
        let exec_end = seg.exec_end(prog);
        for idx in seg.start..exec_end {
            let ins = &b.instrs[idx];
            if !tracing {
                if first || (cfg.filter && rng.chance(1, 20)) {
                    tracing = true;
                    enc.async_(rng);
                    enc.isync(ins.addr as u32, b.isa, 1, first, rng);
                    first = false;
                    if cfg.timestamps {
                        enc.timestamp(rng, true);
                    }
                } else {
                    continue;
                }
            } else if enc.sync_due() {
                enc.async_(rng);
                enc.isync(ins.addr as u32, b.isa, 0, false, rng);
                if cfg.timestamps {
                    enc.timestamp(rng, true);
                }
            } else if rng.chance(1, 150) {
                match rng.below(3) {
                    0 if cfg.timestamps => enc.timestamp(rng, false),
                    1 => enc.context_change(rng),
                    _ => enc.vmid_change(rng),
                }
            }
            if idx < ti {
                let pass = seg.passed(idx);
                let item = Truth::Range {
                    start: ins.addr,
                    end: ins.end(),
                    count: 1,
                    exec: pass,
                };
                enc.atom(pass, item, true, rng);
            } else {
                let SegEnd::Term {
                    taken,
                    next,
                    next_start,
                } = seg.end
                else {
                    unreachable!()
                };
                let item = Truth::Range {
                    start: ins.addr,
                    end: ins.end(),
                    count: 1,
                    exec: taken,
                };
                enc.atom(taken, item, true, rng);
                let needs_addr = taken && (b.term.is_indirect() || matches!(b.term, Term::Blx(_)));
                if needs_addr {
                    if b.term == Term::ExcRet {
                        enc.exception_exit();
                    }
                    let nb = &prog.blocks[next];
                    enc.branch(nb.instrs[next_start].addr as u32, nb.isa, None);
                }
            }
            if cfg.filter && rng.chance(1, 100) {
                enc.flush_atoms();
                tracing = false;
                enc.count("trace off");
            }
        }
        if let SegEnd::Exception { at, kind, vector } = seg.end {
            if !tracing {
                continue;
            }
            let cancel = kind == ExcKind::DataAbort;
            if cancel {
                // The aborted load or store is traced, then cancelled.
                let ins = &b.instrs[at];
                let item = Truth::Range {
                    start: ins.addr,
                    end: ins.end(),
                    count: 1,
                    exec: true,
                };
                enc.atom(true, item, false, rng);
            }
            let v = &prog.blocks[vector];
            enc.branch(v.addr as u32, v.isa, Some((kind.number(), cancel)));
        }
    }
    let truth = enc.finish();
    (enc, truth)
}

/// One ETMv3 source: the trace unit, its core and program, its trace.
pub(crate) fn source(
    opts: &Etmv3GenOptions,
    rng: &mut Rng,
    length: usize,
    base: u64,
    trace_id: u8,
    names: (&str, &str),
) -> Source {
    build(opts, rng, length, base, trace_id, names).0
}

/// An ETMv3 source and the encoder that made it (for its statistics).
fn build(
    opts: &Etmv3GenOptions,
    rng: &mut Rng,
    length: usize,
    base: u64,
    trace_id: u8,
    names: (&str, &str),
) -> (Source, Etmv3Encoder) {
    let cfg = Etmv3Config::resolve(rng, opts);
    let pcfg = ProgramConfig {
        base,
        blocks: 20 + rng.below(60) as usize,
        isa: cfg.isa,
        exceptions: cfg.exceptions,
    };
    let prog = Program::generate(rng, &pcfg);
    let wcfg = WalkConfig {
        irq_period: if cfg.exceptions { 30 + rng.below(60) } else { 0 },
        abort_period: if cfg.data_aborts { 6 + rng.below(10) } else { 0 },
    };
    let segs = walk(rng, &prog, length.max(1), &wcfg);
    let (enc, truth) = encode(cfg, &prog, &segs, rng);
    let core = a32t32::core_device(names.0, "Cortex-A7", &prog, &format!("mem_{}", names.0));
    let device = a32t32::etm_device(names.1, "ETM3.5", cfg.etmcr(), cfg.etmidr(), cfg.etmccer(), trace_id);
    (
        Source {
            trace_id,
            device,
            core,
            bytes: enc.out.clone(),
            truth,
        },
        enc,
    )
}

/// Encodes a given execution (see [`super::execution`]) as ETMv3 trace:
/// options from `seed`, no trace filtering, the memory image `images`.
pub(super) fn generate_given(
    seed: u64,
    isa: IsaMix,
    prog: &Program,
    segs: &[a32t32::Seg],
    images: &[(u64, Vec<u8>)],
    formatted: bool,
) -> Generated {
    let mut rng = Rng::new(seed);
    let o = Etmv3GenOptions {
        isa: Some(isa),
        exceptions: Some(false),
        data_aborts: Some(false),
        trace_filter: Some(false),
        ..Default::default()
    };
    let cfg = Etmv3Config::resolve(&mut rng, &o);
    let (enc, truth) = encode(cfg, prog, segs, &mut rng);
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let mut core = crate::snapshot_writer::DeviceSpec::core("cpu_0", "Cortex-A7");
    for (i, (addr, data)) in images.iter().enumerate() {
        core.dumps.push(crate::snapshot_writer::DumpSpec {
            file: format!("mem{i}.bin"),
            address: *addr,
            data: data.clone(),
            space: String::new(),
        });
    }
    let device = a32t32::etm_device("ETM_0", "ETM3.5", cfg.etmcr(), cfg.etmidr(), cfg.etmccer(), trace_id);
    let src = Source {
        trace_id,
        device,
        core,
        bytes: enc.out.clone(),
        truth,
    };
    a32t32::snapshot(
        format!("trc_gen etmv3 from an execution, seed {seed}"),
        vec![src],
        formatted,
        &mut rng,
    )
}

/// Generates an ETMv3 snapshot of a random A32/T32 program.
pub fn generate(opts: &GenOptions, etm: &Etmv3GenOptions) -> Generated {
    a32t32::single_source(opts, "etmv3", |rng, length, base, trace_id| {
        source(etm, rng, length, base, trace_id, ("cpu_0", "ETM_0"))
    })
}

/// Generates a TC2-like snapshot: Cortex-A15 PTMs and Cortex-A7 ETMv3s
/// (two to five sources) on their own trace IDs in one formatted buffer.
pub fn generate_multi(opts: &GenOptions) -> Generated {
    let mut rng = Rng::new(opts.seed);
    let n_ptm = 1 + rng.below(2) as usize;
    let n_etm = 1 + rng.below(3) as usize;
    let mut ids: Vec<u8> = (0x10..0x40).collect();
    let mut sources = Vec::new();
    for k in 0..n_ptm + n_etm {
        let id = ids.remove(rng.below(ids.len() as u64) as usize);
        let base = 0x8000_0000 + 0x0100_0000 * k as u64;
        let cpu = format!("cpu_{k}");
        let length = (opts.length / 2).max(1);
        let s = if k < n_ptm {
            super::ptm::source(
                &Default::default(),
                &mut rng,
                length,
                base,
                id,
                (&cpu, &format!("PTM_{k}")),
            )
        } else {
            source(
                &Default::default(),
                &mut rng,
                length,
                base,
                id,
                (&cpu, &format!("ETM_{k}")),
            )
        };
        sources.push(s);
    }
    a32t32::snapshot(format!("trc_gen tc2 seed {}", opts.seed), sources, true, &mut rng)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(ca: bool, alt: bool) -> Etmv3Config {
        Etmv3Config {
            isa: IsaMix::A32,
            cycle_accurate: ca,
            timestamps: false,
            ctxt_bytes: 0,
            vmid: false,
            exceptions: false,
            data_aborts: false,
            filter: false,
            alt_branch: alt,
            ts64: true,
            ns: false,
        }
    }

    fn item() -> Truth {
        Truth::Range {
            start: 0,
            end: 4,
            count: 1,
            exec: true,
        }
    }

    #[test]
    fn p_headers_pack_e_runs_then_an_n() {
        let mut rng = Rng::new(1);
        let mut e = Etmv3Encoder::new(cfg(false, false), &mut rng);
        for a in [true, true, true, false, false, true, false] {
            e.atom(a, item(), true, &mut rng);
        }
        e.flush_atoms();
        // EEEN (format 1), NE (format 2), N (format 1).
        assert_eq!(e.out, vec![0x80 | 3 << 2 | 0x40, 0x82 | 0x08, 0xc0]);
    }

    #[test]
    fn branch_addresses_in_both_encodings() {
        let mut rng = Rng::new(1);
        for alt in [false, true] {
            let mut e = Etmv3Encoder::new(cfg(false, alt), &mut rng);
            e.isync(0xc000_0000, Isa::Arm, 1, true, &mut rng);
            e.out.clear();
            e.branch(0xc000_2004, Isa::Arm, None);
            // Bits 13:2 changed: two bytes in both encodings.
            assert_eq!(e.out, vec![0x80 | 0x01 | (1 << 1), 0x20]);
            e.out.clear();
            e.branch(0xb6c3_3aac, Isa::Arm, None);
            assert_eq!(e.out, vec![0xd7, 0xba, 0x86, 0xdb, 0x0d]);
        }
        for alt in [false, true] {
            let mut e = Etmv3Encoder::new(cfg(false, alt), &mut rng);
            e.isync(0xc000_0000, Isa::Arm, 1, true, &mut rng);
            e.out.clear();
            // IRQ to 0xc0000018: the original encoding has exception bytes
            // only after five address bytes, the alternative one after two.
            e.branch(0xc000_0018, Isa::Arm, Some((14, false)));
            if alt {
                assert_eq!(e.out, vec![0x8d, 0x40, 0x1c]);
            } else {
                assert_eq!(e.out, vec![0x8d, 0x80, 0x80, 0x80, 0x4e, 0x1c]);
            }
            // Back to Thumb: five bytes with the ISA.
            e.out.clear();
            e.branch(0xc000_0102, Isa::Thumb2, None);
            assert_eq!(e.out, vec![0x83, 0x82, 0x80, 0x80, 0x1c]);
        }
    }

    #[test]
    fn a_lone_last_range_waits_for_the_next_packet() {
        let mut m = ListModel::default();
        let (mut sent, mut canc) = (Vec::new(), Vec::new());
        m.packet(
            ListOp::PHdr(&[(Some(0), true), (Some(1), true)]),
            5,
            &mut sent,
            &mut canc,
        );
        assert_eq!(sent, vec![(5, 0), (5, 1)]);
        m.packet(ListOp::PHdr(&[(Some(2), true)]), 6, &mut sent, &mut canc);
        assert_eq!(sent.len(), 2);
        m.packet(
            ListOp::Branch {
                cancel: true,
                exception: true,
            },
            9,
            &mut sent,
            &mut canc,
        );
        assert_eq!(canc, vec![2]);
        // The exception element stays behind the stale held-back count.
        m.packet(ListOp::PHdr(&[(Some(3), true)]), 10, &mut sent, &mut canc);
        assert_eq!(sent[2..], [(10, 3)]);
    }

    use super::a32t32::testing::{Stats, assert_only_when_on, count as get, sum_stats};
    use coresight_decode::element::ElemType;

    /// Statistics summed over seeds.
    fn stats(o: Etmv3GenOptions, seeds: std::ops::Range<u64>) -> Stats {
        sum_stats(seeds, |rng| {
            build(&o, rng, 150, 0x8000_0000, 0x10, ("cpu_0", "ETM_0")).1.stats
        })
    }

    fn with(f: impl Fn(&mut Etmv3GenOptions)) -> Etmv3GenOptions {
        let mut o = Etmv3GenOptions::default();
        f(&mut o);
        o
    }

    /// Each option shows in the trace when on, and not when off.
    #[test]
    fn each_option_shows_in_the_trace() {
        let on_off = |set: &dyn Fn(&mut Etmv3GenOptions, bool), keys: &[&str]| {
            assert_only_when_on(|v| stats(with(|o| set(o, v)), 0..12), keys)
        };
        on_off(
            &|o, v| o.cycle_accurate = Some(v),
            &["P-header format 3", "P-header format 4", "waits before I-sync"],
        );
        on_off(&|o, v| o.exceptions = Some(v), &["exception", "exception exit"]);
        on_off(
            &|o, v| o.data_aborts = Some(v),
            &["exception cancelling", "aborted range output anyway"],
        );
        on_off(&|o, v| o.trace_filter = Some(v), &["trace off"]);
        on_off(&|o, v| o.timestamps = Some(v), &["timestamp"]);
        on_off(&|o, v| o.context_id = Some(v), &["context ID", "VMID"]);
        let all = stats(Etmv3GenOptions::default(), 0..30);
        for k in [
            "atom N",
            "P-header format 1",
            "P-header format 2",
            "isync periodic",
            "branch address 1 byte",
            "branch address 2-4 bytes",
            "branch address 5 bytes",
            "address with ISA change",
        ] {
            assert!(get(&all, k) > 0, "{k} never seen: {all:?}");
        }
        // Now and then the aborted instruction is the one range held back,
        // and the decoder cancels it.
        let aborts = stats(with(|o| o.data_aborts = Some(true)), 0..40);
        assert!(get(&aborts, "range cancelled") > 0, "{aborts:?}");
    }

    #[test]
    fn cycle_counts_and_timestamps_decode_as_encoded() {
        for seed in 0..40 {
            let o = with(|o| {
                o.cycle_accurate = Some(seed % 4 != 0);
                o.timestamps = Some(true);
            });
            let mut rng = Rng::new(seed);
            let (src, enc) = build(&o, &mut rng, 100, 0x8000_0000, 0x10, ("cpu_0", "ETM_0"));
            let elems = a32t32::testing::decode_elements(&src);
            let ca = enc.cfg.cycle_accurate;
            let ranges: Vec<u32> = elems
                .iter()
                .filter(|e| e.elem_type == ElemType::InstrRange)
                .map(|e| {
                    assert_eq!(e.has_cc, ca, "seed {seed}");
                    e.cycle_count
                })
                .collect();
            if ca {
                assert_eq!(ranges, enc.truth_cc(), "seed {seed}");
            }
            let ts: Vec<u64> = elems
                .iter()
                .filter(|e| e.elem_type == ElemType::Timestamp)
                .map(|e| e.timestamp)
                .collect();
            assert_eq!(ts, enc.timestamps, "seed {seed}");
            assert!(!ts.is_empty());
        }
    }
}
