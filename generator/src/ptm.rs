//! PTM (Program Flow Trace, PFT 1.0 / 1.1) encoder for generated A32/T32
//! executions, as a Cortex-A15 (or A9) PTM traces them.
//!
//! PTM traces waypoints only. Each direct branch, ISB or not-taken
//! indirect branch gives an atom (packed five to a packet, or one per
//! packet with a cycle count when cycle-accurate). A taken indirect branch
//! gives a branch address packet instead (its address compressed against
//! the last address output, in full with the instruction set when that
//! changes), unless the return stack is on and the target is the address
//! its last call pushed: then it is an E atom. With branch broadcast, taken
//! direct branches give branch address packets too. An exception that
//! interrupts a block gives a waypoint update packet for the last
//! instruction executed (if any since the last waypoint), then a branch
//! address packet with the exception and the vector address; an exception
//! return is an indirect branch followed by an exception return packet.
//!
//! The stream starts with an A-sync and an I-sync (Trace Enable); A-sync
//! and I-sync (Periodic) recur every few hundred bytes at a waypoint.
//! Trace filtered off at a waypoint restarts at a later one with an
//! I-sync (Trace Enable). Timestamps follow I-syncs and come now and then,
//! compressed against the last one (natural binary or Gray code, 48 or 64
//! bits); context ID changes give context ID packets, and VMID packets
//! come with virtualization.
//!
//! The truth is one range per waypoint, as a PTM decoder outputs it: from
//! the instruction after the previous waypoint (or where trace started or
//! an exception returned to) up to the waypoint, with the atom; a waypoint
//! update closes a range at the given instruction, executed.

use super::a32t32::{self, IsaMix, Program, ProgramConfig, SegEnd, Source, Term, WalkConfig, walk};
use super::{GenOptions, Generated, Rng, Truth};
use coresight_decode::arch::Isa;

/// What to put in a PTM trace; `None` is chosen at random from the seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtmGenOptions {
    pub isa: Option<IsaMix>,
    /// Return stack (ETMCR bit 29): returns to the last call's address
    /// are E atoms.
    pub return_stack: Option<bool>,
    /// Branch broadcast (ETMCR bit 8): taken direct branches give
    /// addresses. (Never together with the return stack, which is
    /// UNPREDICTABLE: branch broadcast wins.)
    pub branch_broadcast: Option<bool>,
    /// Cycle-accurate (ETMCR bit 12).
    pub cycle_accurate: Option<bool>,
    /// Timestamps (ETMCR bit 28).
    pub timestamps: Option<bool>,
    /// Context ID (ETMCR bits 15:14: 1, 2 or 4 bytes) and VMID (bit 30).
    pub context_id: Option<bool>,
    /// IRQs, FIQs, SVCs and data aborts, with their handlers and returns.
    pub exceptions: Option<bool>,
    /// Trace filtered on and off.
    pub trace_filter: Option<bool>,
    /// PFT 1.0 (Cortex-A9) rather than PFT 1.1 (Cortex-A15).
    pub pft10: Option<bool>,
}

/// Parses an option value: `1`/`on`/`yes`/`true`, `0`/`off`/`no`/`false`,
/// or `random`.
pub(crate) fn parse_flag(value: &str) -> Result<Option<bool>, String> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" | "" => Ok(Some(true)),
        "0" | "off" | "no" | "false" => Ok(Some(false)),
        "random" | "rand" | "any" => Ok(None),
        v => Err(format!("bad value `{v}` (want 1, 0 or random)")),
    }
}

pub(crate) fn parse_isa(value: &str) -> Result<Option<IsaMix>, String> {
    match value.to_ascii_lowercase().as_str() {
        "random" | "rand" | "any" => Ok(None),
        v => IsaMix::from_name(v)
            .map(Some)
            .ok_or_else(|| format!("bad ISA `{v}` (want a32, t32, mixed or random)")),
    }
}

impl PtmGenOptions {
    /// Option names for `set`.
    pub const NAMES: &'static str = "isa, retstack, bbroadcast, cycleacc, timestamps, ctxid, exceptions, filter, pft10";

    /// Sets an option by name (`isa=t32`, `retstack=1`, ...).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let flag = || parse_flag(value);
        match name.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "isa" => self.isa = parse_isa(value)?,
            "retstack" | "returnstack" => self.return_stack = flag()?,
            "bbroadcast" | "branchbroadcast" | "bb" => self.branch_broadcast = flag()?,
            "cycleacc" | "cycleaccurate" | "ca" => self.cycle_accurate = flag()?,
            "timestamps" | "ts" => self.timestamps = flag()?,
            "ctxid" | "contextid" => self.context_id = flag()?,
            "exceptions" | "exc" => self.exceptions = flag()?,
            "filter" | "tracefilter" => self.trace_filter = flag()?,
            "pft10" => self.pft10 = flag()?,
            n => return Err(format!("unknown PTM option `{n}` (options: {})", Self::NAMES)),
        }
        Ok(())
    }
}

/// `v`, or if it is not set a random choice true `num` times in `den`
/// (drawn either way, so the seed's sequence does not depend on `v`).
pub(crate) fn pick(rng: &mut Rng, v: Option<bool>, num: u64, den: u64) -> bool {
    let r = rng.chance(num, den);
    v.unwrap_or(r)
}

pub(crate) fn pick_isa(rng: &mut Rng, v: Option<IsaMix>) -> IsaMix {
    let r = [IsaMix::A32, IsaMix::T32, IsaMix::Mixed][rng.below(3) as usize];
    v.unwrap_or(r)
}

/// A resolved configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PtmConfig {
    pub isa: IsaMix,
    pub ret_stack: bool,
    pub branch_broadcast: bool,
    pub cycle_accurate: bool,
    pub timestamps: bool,
    pub ctxt_bytes: usize,
    pub vmid: bool,
    pub exceptions: bool,
    pub filter: bool,
    pub pft10: bool,
    /// Timestamps are 64 bits (else 48).
    pub ts64: bool,
    /// Timestamps are natural binary (else Gray code).
    pub ts_binary: bool,
    /// Non-secure state.
    pub ns: bool,
}

impl PtmConfig {
    pub(crate) fn resolve(rng: &mut Rng, o: &PtmGenOptions) -> PtmConfig {
        let isa = pick_isa(rng, o.isa);
        let branch_broadcast = pick(rng, o.branch_broadcast, 1, 4);
        let ret_stack = pick(rng, o.return_stack, 1, 2) && !branch_broadcast;
        let cycle_accurate = pick(rng, o.cycle_accurate, 1, 2);
        let timestamps = pick(rng, o.timestamps, 1, 2);
        let ctx = pick(rng, o.context_id, 1, 2);
        let ctxt_bytes = if ctx { [1, 2, 4][rng.below(3) as usize] } else { 0 };
        let vmid = ctx && rng.chance(1, 2);
        let exceptions = pick(rng, o.exceptions, 1, 2);
        let filter = pick(rng, o.trace_filter, 1, 3);
        let pft10 = pick(rng, o.pft10, 1, 5);
        let ts64 = !pft10 && rng.chance(2, 3);
        let ts_binary = pft10 || rng.chance(2, 3);
        PtmConfig {
            isa,
            ret_stack,
            branch_broadcast,
            cycle_accurate,
            timestamps,
            ctxt_bytes,
            vmid,
            exceptions,
            filter,
            pft10,
            ts64,
            ts_binary,
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
        (self.branch_broadcast as u64) << 8
            | (self.cycle_accurate as u64) << 12
            | ctxt << 14
            | (self.timestamps as u64) << 28
            | (self.ret_stack as u64) << 29
            | (self.vmid as u64) << 30
    }
    pub(crate) fn etmidr(&self) -> u64 {
        if self.pft10 { 0x411C_F300 } else { 0x411C_F312 }
    }
    /// Timestamps and return stack implemented, virtualization (A15), the
    /// timestamp size and encoding.
    pub(crate) fn etmccer(&self) -> u64 {
        let virt = !self.pft10;
        0x00C0_1AC2 | (virt as u64) << 26 | (self.ts_binary as u64) << 28 | (self.ts64 as u64) << 29
    }
    pub(crate) fn core_type(&self) -> &'static str {
        if self.pft10 { "Cortex-A9" } else { "Cortex-A15" }
    }
    pub(crate) fn device_type(&self) -> &'static str {
        if self.pft10 { "PTM1.0" } else { "PTM1.1" }
    }
}

/// The return stack as the trace unit (and so the decoder) keeps it.
#[derive(Clone, Debug, Default)]
pub(crate) struct RetStack {
    entries: [(u32, Option<Isa>); 16],
    head: usize,
    count: i32,
}

impl RetStack {
    pub(crate) fn push(&mut self, addr: u32, isa: Isa) {
        self.head = (self.head + 1) % 16;
        self.entries[self.head] = (addr, Some(isa));
        self.count = (self.count + 1).min(16);
    }
    pub(crate) fn top(&self) -> Option<(u32, Isa)> {
        (self.count > 0).then(|| (self.entries[self.head].0, self.entries[self.head].1.unwrap_or(Isa::Arm)))
    }
    pub(crate) fn pop(&mut self) {
        if self.count > 0 {
            self.head = (self.head + 15) % 16;
            self.count -= 1;
        }
    }
    pub(crate) fn flush(&mut self) {
        self.count = 0;
    }
}

/// A cycle count as PTM puts it in atom, branch, I-sync and timestamp
/// packets: 4 bits in the first byte (bits 5:2, more in bit 6) over
/// `first`, then 7 bits a byte (more in bit 7), five bytes at most.
pub(crate) fn cc_bytes(cc: u32, first: u8, out: &mut Vec<u8>) {
    let mut rest = cc >> 4;
    out.push(first | ((cc & 0xf) as u8) << 2 | ((rest != 0) as u8) << 6);
    let mut n = 1;
    while rest != 0 {
        n += 1;
        let more = rest >> 7 != 0 && n < 5;
        out.push((rest & 0x7f) as u8 | (more as u8) << 7);
        rest >>= 7;
        if n == 5 {
            break;
        }
    }
}

/// A random cycle count: mostly small, sometimes large.
pub(crate) fn random_cc(rng: &mut Rng) -> u32 {
    match rng.below(20) {
        0 => rng.range(16, 3000) as u32,
        1 => 0,
        _ => rng.range(1, 15) as u32,
    }
}

/// The PTM encoder.
pub(crate) struct PtmEncoder {
    cfg: PtmConfig,
    pub out: Vec<u8>,
    /// Atoms not yet output: (E, cycle count, truth item).
    atoms: Vec<(bool, u32, usize)>,
    pub truth: Vec<(usize, Truth)>,
    /// The cycle count each truth item's range gets (cycle-accurate).
    pub cc: Vec<Option<u32>>,
    /// Cycle count of the last branch address packet.
    last_cc: Option<u32>,
    /// Timestamps output, in order.
    pub timestamps: Vec<u64>,
    /// How often each feature was used.
    pub stats: std::collections::BTreeMap<&'static str, usize>,
    /// Address and ISA of the last address output (the compression base).
    addr: u32,
    isa: Isa,
    ts: u64,
    ts_out: u64,
    ctxt_id: u32,
    vmid: u8,
    pub rs: RetStack,
    since_sync: usize,
    sync_period: usize,
}

impl PtmEncoder {
    pub(crate) fn new(cfg: PtmConfig, rng: &mut Rng) -> PtmEncoder {
        let ts = 0x82_f9d0_0000 + rng.below(1 << 24);
        let ctxt_id = (rng.next_u64() as u32) & ctxt_mask(cfg.ctxt_bytes);
        PtmEncoder {
            cfg,
            out: Vec::new(),
            atoms: Vec::new(),
            truth: Vec::new(),
            cc: Vec::new(),
            last_cc: None,
            timestamps: Vec::new(),
            stats: Default::default(),
            addr: 0,
            isa: Isa::Unknown,
            ts,
            ts_out: 0,
            ctxt_id,
            vmid: rng.below(256) as u8,
            rs: RetStack::default(),
            since_sync: 0,
            sync_period: 256 + rng.below(768) as usize,
        }
    }

    pub(crate) fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    /// A truth item output by the packet ending at `at`, with the cycle
    /// count of its range.
    pub(crate) fn item(&mut self, at: usize, item: Truth, cc: Option<u32>) {
        self.truth.push((at, item));
        self.cc.push(cc);
    }

    fn put(&mut self, bytes: &[u8]) -> usize {
        self.out.extend_from_slice(bytes);
        self.since_sync += bytes.len();
        self.out.len() - 1
    }

    pub(crate) fn sync_due(&self) -> bool {
        self.since_sync >= self.sync_period
    }

    pub(crate) fn async_(&mut self) {
        self.flush_atoms();
        self.put(&[0, 0, 0, 0, 0, 0x80]);
        self.since_sync = 0;
        self.count("async");
    }

    /// I-sync: reason 0 periodic, 1 trace enable.
    pub(crate) fn isync(&mut self, addr: u32, isa: Isa, reason: u8, rng: &mut Rng) {
        self.flush_atoms();
        let thumb = (isa == Isa::Thumb2) as u8;
        let mut p = vec![
            0x08,
            (addr as u8 & 0xfe) | thumb,
            (addr >> 8) as u8,
            (addr >> 16) as u8,
            (addr >> 24) as u8,
        ];
        p.push(reason << 5 | (self.cfg.ns as u8) << 3 | 1);
        self.count(if reason == 0 {
            "isync periodic"
        } else {
            "isync trace enable"
        });
        if reason != 0 && self.cfg.cycle_accurate {
            let cc = random_cc(rng);
            cc_bytes(cc, 0, &mut p);
        }
        p.extend_from_slice(&self.ctxt_id.to_le_bytes()[..self.cfg.ctxt_bytes]);
        self.put(&p);
        self.addr = addr;
        self.isa = isa;
        self.rs.flush();
    }

    /// Queues an atom for truth item `item`.
    pub(crate) fn atom(&mut self, e: bool, item: Truth, rng: &mut Rng) {
        let id = self.truth.len();
        let cc = if self.cfg.cycle_accurate { random_cc(rng) } else { 0 };
        self.item(usize::MAX, item, self.cfg.cycle_accurate.then_some(cc));
        self.count(if e { "atom E" } else { "atom N" });
        self.atoms.push((e, cc, id));
        if self.cfg.cycle_accurate || self.atoms.len() == 5 {
            self.flush_atoms();
        }
    }

    /// Outputs the queued atoms: one per packet with its cycle count, or
    /// up to five a packet (oldest in the highest bit used; a set bit is N).
    pub(crate) fn flush_atoms(&mut self) {
        let atoms = std::mem::take(&mut self.atoms);
        if self.cfg.cycle_accurate {
            for (e, cc, id) in atoms {
                let mut p = Vec::with_capacity(5);
                cc_bytes(cc, 0x80 | (!e as u8) << 1, &mut p);
                let at = self.put(&p);
                self.truth[id].0 = at;
            }
            return;
        }
        for group in atoms.chunks(5) {
            let n = group.len();
            let mut hdr: u8 = [0x80, 0x88, 0x90, 0xa0, 0xc0][n - 1];
            for (i, &(e, _, _)) in group.iter().enumerate() {
                hdr |= (!e as u8) << (n - i);
            }
            let at = self.put(&[hdr]);
            for &(_, _, id) in group {
                self.truth[id].0 = at;
            }
        }
    }

    /// Address bytes of a branch address or waypoint update packet,
    /// compressed against the last address output; the first byte has
    /// bit 0 set. `exception`: the last address byte says exception bytes
    /// follow.
    fn addr_bytes(&mut self, addr: u32, isa: Isa, exception: bool, out: &mut Vec<u8>) {
        let covered: [u32; 4] = if isa == Isa::Arm {
            [8, 14, 21, 28]
        } else {
            [7, 13, 20, 27]
        };
        let diff = addr ^ self.addr;
        if isa != self.isa {
            self.count("address with ISA change");
        }
        let mut n = 5;
        if isa == self.isa {
            for k in 1..=4 {
                // An exception needs a byte after the header.
                if (k > 1 || !exception) && diff >> covered[k - 1] == 0 {
                    n = k;
                    break;
                }
            }
        }
        let v = if isa == Isa::Arm { addr >> 1 } else { addr };
        out.push((v as u8 & 0x7e) | 1 | ((n > 1) as u8) << 7);
        for i in 1..n {
            let b = if i == 4 {
                let hi = if isa == Isa::Arm {
                    0x08 | (addr >> 29) as u8 & 0x7
                } else {
                    0x10 | (addr >> 28) as u8 & 0xf
                };
                hi | (exception as u8) << 6
            } else if i == n - 1 {
                (v >> (7 * i)) as u8 & 0x3f | (exception as u8) << 6
            } else {
                (v >> (7 * i)) as u8 & 0x7f | 0x80
            };
            out.push(b);
        }
        self.addr = addr;
        self.isa = isa;
    }

    /// A branch address packet, perhaps with an exception; returns the
    /// index of its last byte.
    pub(crate) fn branch(&mut self, addr: u32, isa: Isa, exception: Option<u16>, rng: &mut Rng) -> usize {
        self.flush_atoms();
        let mut p = Vec::with_capacity(12);
        self.addr_bytes(addr, isa, exception.is_some(), &mut p);
        if let Some(num) = exception {
            p.push(self.cfg.ns as u8 | ((num & 0xf) as u8) << 1);
            self.count("exception");
        }
        self.count(match p.len() - exception.is_some() as usize {
            1 => "branch address 1 byte",
            2..=4 => "branch address 2-4 bytes",
            _ => "branch address 5 bytes",
        });
        self.last_cc = None;
        if self.cfg.cycle_accurate {
            let cc = random_cc(rng);
            cc_bytes(cc, 0, &mut p);
            self.last_cc = Some(cc);
        }
        self.put(&p)
    }

    /// A waypoint update packet for the instruction at `addr`.
    pub(crate) fn wp_update(&mut self, addr: u32, isa: Isa) -> usize {
        self.flush_atoms();
        let mut p = vec![0x72];
        self.addr_bytes(addr, isa, false, &mut p);
        self.count("waypoint update");
        self.put(&p)
    }

    pub(crate) fn exception_return(&mut self) {
        self.flush_atoms();
        self.put(&[0x76]);
        self.count("exception return");
    }

    /// A timestamp packet after time moves on, compressed against the last
    /// one output.
    pub(crate) fn timestamp(&mut self, rng: &mut Rng, full: bool) {
        self.flush_atoms();
        self.ts += rng.range(1, 5000);
        let (cur, last) = if self.cfg.ts_binary {
            (self.ts, self.ts_out)
        } else {
            (a32t32::gray(self.ts), a32t32::gray(self.ts_out))
        };
        let need = a32t32::bits_needed(cur ^ last).max(1);
        let (max_bytes, last_bits) = if self.cfg.ts64 { (9, 8) } else { (7, 6) };
        let n = if full || need > 7 * (max_bytes - 1) {
            max_bytes
        } else {
            need.div_ceil(7)
        };
        let mut p = vec![0x42];
        for i in 0..n {
            let v = (cur >> (7 * i)) as u8;
            if i == max_bytes - 1 {
                p.push(if last_bits == 8 { v } else { v & 0x3f });
            } else {
                p.push(v & 0x7f | ((i + 1 < n) as u8) << 7);
            }
        }
        if self.cfg.cycle_accurate {
            cc_bytes(random_cc(rng), 0, &mut p);
        }
        self.put(&p);
        self.ts_out = self.ts;
        self.timestamps.push(self.ts);
        self.count(if n == max_bytes { "timestamp full" } else { "timestamp" });
    }

    pub(crate) fn context_change(&mut self, rng: &mut Rng) {
        if self.cfg.ctxt_bytes == 0 {
            return;
        }
        self.flush_atoms();
        self.ctxt_id = (rng.next_u64() as u32) & ctxt_mask(self.cfg.ctxt_bytes);
        let mut p = vec![0x6e];
        p.extend_from_slice(&self.ctxt_id.to_le_bytes()[..self.cfg.ctxt_bytes]);
        self.put(&p);
        self.count("context ID");
    }

    pub(crate) fn vmid_change(&mut self, rng: &mut Rng) {
        if !self.cfg.vmid {
            return;
        }
        self.flush_atoms();
        self.vmid = rng.below(256) as u8;
        self.put(&[0x3c, self.vmid]);
        self.count("VMID");
    }
}

fn ctxt_mask(bytes: usize) -> u32 {
    match bytes {
        0 => 0,
        4 => u32::MAX,
        n => (1u32 << (8 * n)) - 1,
    }
}

/// Encodes a walk through `prog`; returns the stream and its truth.
pub(crate) fn encode(cfg: PtmConfig, prog: &Program, segs: &[a32t32::Seg], rng: &mut Rng) -> PtmEncoder {
    let mut enc = PtmEncoder::new(cfg, rng);
    let mut tracing = false;
    for (si, seg) in segs.iter().enumerate() {
        let b = &prog.blocks[seg.block];
        let first = &b.instrs[seg.start];
        let start_addr = first.addr as u32;
        if !tracing {
            // Trace starts (or restarts) at a waypoint boundary.
            if si == 0 || (cfg.filter && rng.chance(1, 4)) {
                tracing = true;
                enc.async_();
                enc.isync(start_addr, b.isa, 1, rng);
                if cfg.timestamps {
                    enc.timestamp(rng, true);
                }
            } else {
                continue;
            }
        } else if enc.sync_due() {
            enc.async_();
            enc.isync(start_addr, b.isa, 0, rng);
            if cfg.timestamps {
                enc.timestamp(rng, true);
            }
        }
        if cfg.timestamps && rng.chance(1, 25) {
            enc.timestamp(rng, false);
        }
        if rng.chance(1, 60) {
            enc.context_change(rng);
        }
        if rng.chance(1, 80) {
            enc.vmid_change(rng);
        }
        match seg.end {
            SegEnd::Exception { at, kind, vector } => {
                if at > seg.start {
                    // The last instruction executed becomes a waypoint.
                    let last = &b.instrs[at - 1];
                    let item = Truth::Range {
                        start: first.addr,
                        end: last.end(),
                        count: (at - seg.start) as u32,
                        exec: true,
                    };
                    let i = enc.wp_update(last.addr as u32, b.isa);
                    enc.item(i, item, None);
                }
                let v = &prog.blocks[vector];
                enc.branch(v.addr as u32, v.isa, Some(kind.number()), rng);
            }
            SegEnd::Term {
                taken,
                next,
                next_start,
            } => {
                let ti = b.term_index();
                let item = Truth::Range {
                    start: first.addr,
                    end: b.end(),
                    count: (ti + 1 - seg.start) as u32,
                    exec: taken,
                };
                let nb = &prog.blocks[next];
                let target = nb.instrs[next_start].addr as u32;
                if b.term.is_indirect() {
                    if !taken {
                        enc.atom(false, item, rng);
                    } else {
                        if cfg.ret_stack && enc.rs.top() == Some((target, nb.isa)) {
                            enc.atom(true, item, rng);
                            enc.rs.pop();
                            enc.count("return stack hit");
                        } else {
                            let i = enc.branch(target, nb.isa, None, rng);
                            let cc = enc.last_cc;
                            enc.item(i, item, cc);
                        }
                        if b.term.is_call() && cfg.ret_stack {
                            enc.rs.push(b.end() as u32, b.isa);
                        }
                        if b.term == Term::ExcRet {
                            enc.exception_return();
                        }
                    }
                } else {
                    if cfg.branch_broadcast && taken && b.term.is_branch() {
                        let i = enc.branch(target, nb.isa, None, rng);
                        let cc = enc.last_cc;
                        enc.item(i, item, cc);
                        enc.count("broadcast direct branch");
                    } else {
                        enc.atom(taken, item, rng);
                    }
                    if taken && b.term.is_call() && cfg.ret_stack {
                        enc.rs.push(b.end() as u32, b.isa);
                    }
                }
                // Trace filtered off at this waypoint, for a while.
                if cfg.filter && rng.chance(1, 30) {
                    enc.flush_atoms();
                    tracing = false;
                    enc.count("trace off");
                }
            }
        }
    }
    enc.flush_atoms();
    enc
}

/// One PTM source: the trace unit, its core and program, its trace.
pub(crate) fn source(
    opts: &PtmGenOptions,
    rng: &mut Rng,
    length: usize,
    base: u64,
    trace_id: u8,
    names: (&str, &str),
) -> Source {
    build(opts, rng, length, base, trace_id, names).0
}

/// A PTM source and the encoder that made it (for its statistics).
pub(crate) fn build(
    opts: &PtmGenOptions,
    rng: &mut Rng,
    length: usize,
    base: u64,
    trace_id: u8,
    names: (&str, &str),
) -> (Source, PtmEncoder) {
    let cfg = PtmConfig::resolve(rng, opts);
    let pcfg = ProgramConfig {
        base,
        blocks: 20 + rng.below(60) as usize,
        isa: cfg.isa,
        exceptions: cfg.exceptions,
    };
    let prog = Program::generate(rng, &pcfg);
    let wcfg = if cfg.exceptions {
        WalkConfig {
            irq_period: 30 + rng.below(60),
            abort_period: 8 + rng.below(20),
        }
    } else {
        WalkConfig {
            irq_period: 0,
            abort_period: 0,
        }
    };
    let segs = walk(rng, &prog, length.max(1), &wcfg);
    let enc = encode(cfg, &prog, &segs, rng);
    let core = a32t32::core_device(names.0, cfg.core_type(), &prog, &format!("mem_{}", names.0));
    let device = a32t32::etm_device(
        names.1,
        cfg.device_type(),
        cfg.etmcr(),
        cfg.etmidr(),
        cfg.etmccer(),
        trace_id,
    );
    let src = Source {
        trace_id,
        device,
        core,
        bytes: enc.out.clone(),
        truth: enc.truth.clone(),
    };
    (src, enc)
}

/// Encodes a given execution (see [`super::execution`]) as PTM trace:
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
    let o = PtmGenOptions {
        isa: Some(isa),
        exceptions: Some(false),
        trace_filter: Some(false),
        ..Default::default()
    };
    let cfg = PtmConfig::resolve(&mut rng, &o);
    let enc = encode(cfg, prog, segs, &mut rng);
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let mut core = crate::snapshot_writer::DeviceSpec::core("cpu_0", cfg.core_type());
    for (i, (addr, data)) in images.iter().enumerate() {
        core.dumps.push(crate::snapshot_writer::DumpSpec {
            file: format!("mem{i}.bin"),
            address: *addr,
            data: data.clone(),
            space: String::new(),
        });
    }
    let device = a32t32::etm_device(
        "PTM_0",
        cfg.device_type(),
        cfg.etmcr(),
        cfg.etmidr(),
        cfg.etmccer(),
        trace_id,
    );
    let src = Source {
        trace_id,
        device,
        core,
        bytes: enc.out.clone(),
        truth: enc.truth.clone(),
    };
    a32t32::snapshot(
        format!("trc_gen ptm from an execution, seed {seed}"),
        vec![src],
        formatted,
        &mut rng,
    )
}

/// Generates a PTM snapshot of a random A32/T32 program.
pub fn generate(opts: &GenOptions, ptm: &PtmGenOptions) -> Generated {
    a32t32::single_source(opts, "ptm", |rng, length, base, trace_id| {
        source(ptm, rng, length, base, trace_id, ("cpu_0", "PTM_0"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(cfg: PtmConfig) -> PtmEncoder {
        PtmEncoder::new(cfg, &mut Rng::new(1))
    }

    fn cfg() -> PtmConfig {
        let mut c = PtmConfig::resolve(
            &mut Rng::new(3),
            &PtmGenOptions {
                isa: Some(IsaMix::A32),
                return_stack: Some(false),
                branch_broadcast: Some(false),
                cycle_accurate: Some(false),
                timestamps: Some(false),
                context_id: Some(false),
                exceptions: Some(false),
                trace_filter: Some(false),
                pft10: Some(false),
            },
        );
        c.ns = false;
        c
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
    fn atoms_pack_five_to_a_packet_oldest_highest() {
        let mut e = enc(cfg());
        let mut rng = Rng::new(1);
        for a in [true, true, false, true, true, false, true] {
            e.atom(a, item(), &mut rng);
        }
        e.flush_atoms();
        // EENEE: bits 5..1 = 0,0,1,0,0; then NE: bits 2..1 = 1,0.
        assert_eq!(e.out, vec![0xc0 | 0x08, 0x88 | 0x04]);
    }

    #[test]
    fn cycle_counts_span_bytes() {
        let mut v = Vec::new();
        cc_bytes(87, 0x82, &mut v);
        assert_eq!(v, vec![0xde, 0x05]);
        v.clear();
        cc_bytes(511, 0, &mut v);
        assert_eq!(v, vec![0x7c, 0x1f]);
        v.clear();
        cc_bytes(13, 0, &mut v);
        assert_eq!(v, vec![0x34]);
    }

    #[test]
    fn branch_addresses_compress_and_carry_the_isa() {
        let mut e = enc(cfg());
        let mut rng = Rng::new(1);
        e.isync(0x8000_0554, Isa::Arm, 1, &mut rng);
        e.out.clear();
        e.branch(0x8000_055c, Isa::Arm, None, &mut rng);
        assert_eq!(e.out, vec![0x2f]);
        e.out.clear();
        e.branch(0x8000_0558, Isa::Arm, None, &mut rng);
        assert_eq!(e.out, vec![0x2d]);
        e.out.clear();
        // To Thumb: in full, with the ISA.
        e.branch(0x8000_0f7c, Isa::Thumb2, None, &mut rng);
        assert_eq!(e.out, vec![0xfd, 0x9e, 0x80, 0x80, 0x18]);
        e.out.clear();
        // An exception needs at least two bytes; Debug Halt to 0, secure.
        e.branch(0, Isa::Arm, Some(1), &mut rng);
        assert_eq!(e.out, vec![0x81, 0x80, 0x80, 0x80, 0x48, 0x02]);
    }

    use super::a32t32::testing::{Stats, assert_only_when_on, count as get, sum_stats};
    use coresight_decode::element::ElemType;

    /// Statistics summed over seeds.
    fn stats(o: PtmGenOptions, seeds: std::ops::Range<u64>) -> Stats {
        sum_stats(seeds, |rng| {
            build(&o, rng, 200, 0x8000_0000, 0x10, ("cpu_0", "PTM_0")).1.stats
        })
    }

    fn with(f: impl Fn(&mut PtmGenOptions)) -> PtmGenOptions {
        let mut o = PtmGenOptions::default();
        f(&mut o);
        o
    }

    /// Each option shows in the trace when on, and not when off, so the
    /// round trips of each option test what they say.
    #[test]
    fn each_option_shows_in_the_trace() {
        let on_off = |set: &dyn Fn(&mut PtmGenOptions, bool), keys: &[&str]| {
            assert_only_when_on(|v| stats(with(|o| set(o, v)), 0..12), keys)
        };
        on_off(
            &|o, v| {
                o.return_stack = Some(v);
                o.branch_broadcast = Some(false);
            },
            &["return stack hit"],
        );
        on_off(&|o, v| o.branch_broadcast = Some(v), &["broadcast direct branch"]);
        on_off(
            &|o, v| o.exceptions = Some(v),
            &["exception", "waypoint update", "exception return"],
        );
        on_off(&|o, v| o.trace_filter = Some(v), &["trace off"]);
        on_off(&|o, v| o.timestamps = Some(v), &["timestamp"]);
        on_off(&|o, v| o.context_id = Some(v), &["context ID", "VMID"]);
        let all = stats(PtmGenOptions::default(), 0..30);
        for k in [
            "atom E",
            "atom N",
            "isync periodic",
            "branch address 1 byte",
            "branch address 2-4 bytes",
            "branch address 5 bytes",
            "address with ISA change",
            "timestamp full",
        ] {
            assert!(get(&all, k) > 0, "{k} never seen: {all:?}");
        }
        // Single-ISA programs (T32 ones have T32 vectors) never change
        // ISA; mixed ones do.
        for isa in [IsaMix::A32, IsaMix::T32] {
            let st = stats(with(|o| o.isa = Some(isa)), 0..10);
            assert_eq!(get(&st, "address with ISA change"), 0, "{isa:?} {st:?}");
        }
        let mixed = stats(with(|o| o.isa = Some(IsaMix::Mixed)), 0..10);
        assert!(get(&mixed, "address with ISA change") > 10, "{mixed:?}");
    }

    /// What the decoder makes of the cycle counts and timestamps (which
    /// the truth does not hold) is what was encoded.
    #[test]
    fn cycle_counts_and_timestamps_decode_as_encoded() {
        for seed in 0..40 {
            let o = with(|o| {
                o.cycle_accurate = Some(seed % 4 != 0);
                o.timestamps = Some(true);
            });
            let mut rng = Rng::new(seed);
            let (src, enc) = build(&o, &mut rng, 150, 0x8000_0000, 0x10, ("cpu_0", "PTM_0"));
            let elems = a32t32::testing::decode_elements(&src);
            let ranges: Vec<Option<u32>> = elems
                .iter()
                .filter(|e| e.elem_type == ElemType::InstrRange)
                .map(|e| e.has_cc.then_some(e.cycle_count))
                .collect();
            assert_eq!(ranges, enc.cc, "seed {seed}");
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
