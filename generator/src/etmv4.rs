//! ETMv4 instruction trace encoder for generated executions.
//!
//! A random program (A64 for A-profile, T32 for M-profile) is walked
//! ([`flow::walk`]) and the walk encoded as an ETMv4 trace unit with
//! instruction trace only (no speculation: TRCIDR8.MAXSPEC = 0) emits it:
//!
//! - alignment sync and Trace Info at the start and periodically, with the
//!   cycle count threshold when cycle counting is on, followed by a full
//!   timestamp when timestamps are on;
//! - Trace On and an address with context where trace starts or restarts
//!   (trace is filtered off now and then);
//! - an atom per waypoint, packed into the largest format that fits
//!   (formats 1 to 6);
//! - an address after each taken indirect branch, compressed against the
//!   previous address or, when it is one of the last three, an exact
//!   match; with the return stack on, none for a return to the stacked
//!   address; with branch broadcast on, one after every taken branch;
//! - exceptions: an Exception packet with the type and the preferred
//!   return address, then the handler's address; M-profile exception
//!   returns add an Exception Return packet after their atom;
//! - a context (alone or with the address) whenever the exception level,
//!   security state, context ID or VMID changes;
//! - cycle count packets and timestamps (with a cycle count when cycle
//!   counting is on) between waypoints.
//!
//! Every option is on, off or chosen from the seed ([`Etmv4Options`]) and
//! the device registers say what was used. The truth is what the project's
//! ETMv4 decoder (exact against OpenCSD) reports for correct trace: see
//! `TruthLog` for how elements that are not waypoints are ordered.

use super::flow::{self, Cause, Ctx, End, Event, Program, Seg, Term, WalkCfg};
use super::{GenOptions, GenProtocol, Generated, Rng, Truth, a64, layout_buffer, t32m};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, DumpSpec, SnapshotSpec};
use coresight_decode::element::MemTrans;

/// Register values of the original, option-less configuration.
pub const TRCCONFIGR: u64 = 0xC1; // context ID and VMID tracing
pub const TRCIDR0: u64 = 0x2800_0EA1;
pub const TRCIDR1: u64 = 0x4100_F403;
pub const TRCIDR2: u64 = 0x0000_0488; // 64-bit addresses, 32-bit CID, 8-bit VMID

/// Whether an option is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Choice {
    /// Chosen from the seed.
    #[default]
    Random,
    On,
    Off,
}

impl Choice {
    /// Whether the option is used (drawing from `rng` for `Random`).
    pub fn pick(self, rng: &mut Rng) -> bool {
        match self {
            Choice::On => true,
            Choice::Off => false,
            Choice::Random => rng.chance(1, 2),
        }
    }
}

/// ETMv4 trace unit options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Etmv4Options {
    /// Cycle counting (TRCCONFIGR.CCI): cycle count packets, the Trace
    /// Info threshold, cycle counts in timestamps.
    pub cycle_counting: Choice,
    /// Global timestamps (TRCCONFIGR.TS).
    pub timestamps: Choice,
    /// Return stack (TRCCONFIGR.RS). Not used with branch broadcast.
    pub return_stack: Choice,
    /// Branch broadcast (TRCCONFIGR.BB).
    pub branch_broadcast: Choice,
    /// Exceptions and exception returns.
    pub exceptions: Choice,
    /// Context changes: exception level, security state, context ID, VMID.
    pub context_changes: Choice,
    /// Exact-match address packets (address history of 3).
    pub exact_match: Choice,
    /// Atom formats 4 and 5.
    pub atom_f45: Choice,
    /// With the return stack on, still let an exception at the target of
    /// an indirect branch stand for the target's address (Exception packet
    /// E1:E0 = 0b10). Valid trace that OpenCSD 1.8.0 mis-decodes: it pops
    /// the return stack there. Off by default.
    pub implied_target_with_rs: bool,
}

/// Option names, as `trc_gen` takes them.
pub const OPTION_NAMES: &[&str] = &["cc", "ts", "rs", "bb", "exc", "ctxt", "match", "f45"];

impl Etmv4Options {
    /// Every option set to `c`.
    pub fn all(c: Choice) -> Self {
        Etmv4Options {
            cycle_counting: c,
            timestamps: c,
            return_stack: c,
            branch_broadcast: c,
            exceptions: c,
            context_changes: c,
            exact_match: c,
            atom_f45: c,
            implied_target_with_rs: false,
        }
    }

    fn slot(&mut self, name: &str) -> Option<&mut Choice> {
        Some(match name {
            "cc" => &mut self.cycle_counting,
            "ts" => &mut self.timestamps,
            "rs" => &mut self.return_stack,
            "bb" => &mut self.branch_broadcast,
            "exc" => &mut self.exceptions,
            "ctxt" => &mut self.context_changes,
            "match" => &mut self.exact_match,
            "f45" => &mut self.atom_f45,
            _ => return None,
        })
    }

    /// Sets option `name` (one of [`OPTION_NAMES`]); false if unknown.
    pub fn set(&mut self, name: &str, c: Choice) -> bool {
        match self.slot(name) {
            Some(s) => {
                *s = c;
                true
            }
            None => false,
        }
    }

    /// Sets option `name` from a `-opt` value: 1, 0 or random (`all` sets
    /// every option; `rs_implied` takes 1 or 0).
    pub fn set_value(&mut self, name: &str, value: &str) -> Result<(), String> {
        let c = match value.to_ascii_lowercase().as_str() {
            "1" | "on" | "yes" | "true" | "" => Choice::On,
            "0" | "off" | "no" | "false" => Choice::Off,
            "random" | "rand" | "any" => Choice::Random,
            v => return Err(format!("bad value `{v}` (want 1, 0 or random)")),
        };
        match name {
            "all" => {
                *self = Etmv4Options {
                    implied_target_with_rs: self.implied_target_with_rs,
                    ..Etmv4Options::all(c)
                }
            }
            "rs_implied" => self.implied_target_with_rs = c == Choice::On,
            n if self.set(n, c) => {}
            n => {
                return Err(format!(
                    "unknown option `{n}` (ETMv4: all, {}, rs_implied)",
                    OPTION_NAMES.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// This with option `name` set to `c`.
    pub fn with(mut self, name: &str, c: Choice) -> Self {
        assert!(self.set(name, c), "unknown ETMv4 option {name}");
        self
    }
}

/// The configuration a generated trace uses.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub(super) m_profile: bool,
    pub(super) cc: bool,
    pub(super) cc_threshold: u32,
    pub(super) cc_bits: u32,
    pub(super) ts: bool,
    pub(super) ts_bits: u32,
    pub(super) rs: bool,
    pub(super) bb: bool,
    pub(super) exceptions: bool,
    pub(super) ctx_changes: bool,
    pub(super) exact: bool,
    pub(super) f45: bool,
    pub(super) implied_target_with_rs: bool,
    pub(super) cid: bool,
    /// VMID tracing width (0: off).
    pub(super) vmid_bits: u32,
    pub(super) vmid_size_field: u32,
    pub(super) minor: u32,
    /// ETE only (see [`super::ete`]); all off for ETMv4.
    pub(super) ete: EteConfig,
    /// Never filter trace off (a given execution is traced whole).
    pub(super) continuous: bool,
}

/// What an ETE adds to the trace (nothing for an ETMv4).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct EteConfig {
    /// An ETE: ERETs are reported as exception returns.
    pub(super) on: bool,
    /// Timestamp markers before timestamps (TRCIDR0.TSMARK, ETE 1.1).
    pub(super) ts_marker: bool,
    /// Transactions traced (Transaction Start, Commit, Failure).
    pub(super) tme: bool,
    /// Transaction Start is a P0 element (TRCIDR0.COMMTRANS = 0).
    pub(super) trans_p0: bool,
    /// Instrumentation packets (ETE 1.3).
    pub(super) ite: bool,
    /// Realm and Root security states.
    pub(super) rme: bool,
    /// WFI/WFE/WFIT/WFET are waypoints (TRCIDR2.WFXMODE).
    pub(super) wfx: bool,
}

impl Config {
    pub(super) fn pick(rng: &mut Rng, o: &Etmv4Options, m_profile: bool) -> Config {
        let cc = o.cycle_counting.pick(rng);
        let ts = o.timestamps.pick(rng);
        let bb = o.branch_broadcast.pick(rng);
        // Returns to stacked addresses would still need their address
        // with branch broadcast: the two are not combined.
        let rs = o.return_stack.pick(rng) && !bb;
        let exceptions = o.exceptions.pick(rng);
        let ctx_changes = o.context_changes.pick(rng);
        let exact = o.exact_match.pick(rng);
        let f45 = o.atom_f45.pick(rng);
        let minor = if m_profile { 5 } else { rng.below(3) as u32 };
        let cid = !m_profile && rng.chance(2, 3);
        let (vmid_bits, vmid_size_field) = if m_profile {
            (0, 0)
        } else {
            let sizes: &[(u32, u32)] = if minor == 0 {
                &[(8, 1)]
            } else {
                &[(8, 1), (16, 2), (32, 4)]
            };
            let s = sizes[rng.below(sizes.len() as u64) as usize];
            if rng.chance(1, 2) { s } else { (0, s.1) }
        };
        let cc_threshold = match rng.below(3) {
            0 => 1 + rng.below(15) as u32,
            1 => 1 + rng.below(256) as u32,
            _ => 1 + rng.below(4095) as u32,
        };
        let cc_bits = 12 + rng.below(9) as u32;
        let ts_bits = if rng.chance(1, 2) { 48 } else { 64 };
        Config {
            m_profile,
            cc,
            cc_threshold,
            cc_bits,
            ts,
            ts_bits,
            rs,
            bb,
            exceptions,
            ctx_changes,
            exact,
            f45,
            implied_target_with_rs: o.implied_target_with_rs,
            cid,
            vmid_bits,
            vmid_size_field,
            minor,
            ete: EteConfig::default(),
            continuous: false,
        }
    }

    /// Short description for the snapshot and failure messages.
    pub(super) fn describe(&self) -> String {
        let mut v = vec![if self.m_profile { "M-profile" } else { "A-profile" }.to_string()];
        for (on, name) in [
            (self.cc, "cc"),
            (self.ts, "ts"),
            (self.rs, "rs"),
            (self.bb, "bb"),
            (self.exceptions, "exc"),
            (self.ctx_changes, "ctxt"),
            (self.exact, "match"),
            (self.f45, "f45"),
            (self.cid, "cid"),
        ] {
            if on {
                v.push(name.into());
            }
        }
        if self.vmid_bits > 0 {
            v.push(format!("vmid{}", self.vmid_bits));
        }
        let e = &self.ete;
        for (on, name) in [
            (e.ts_marker, "tsmark"),
            (e.tme, if e.trans_p0 { "tme(p0)" } else { "tme" }),
            (e.ite, "ite"),
            (e.rme, "rme"),
            (e.wfx, "wfx"),
        ] {
            if on {
                v.push(name.into());
            }
        }
        v.join(" ")
    }

    /// Context as traced: fields that are not traced read as `None`.
    fn traced(&self, c: Ctx) -> TracedCtx {
        TracedCtx {
            el: c.el,
            secure: c.secure,
            nse: c.nse,
            aarch64: c.aarch64,
            cid: self.cid.then_some(c.cid),
            vmid: (self.vmid_bits > 0).then(|| c.vmid & mask32(self.vmid_bits)),
        }
    }
}

fn mask32(bits: u32) -> u32 {
    if bits >= 32 { u32::MAX } else { (1 << bits) - 1 }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TracedCtx {
    el: u8,
    secure: bool,
    nse: bool,
    aarch64: bool,
    cid: Option<u32>,
    vmid: Option<u32>,
}

/// A context as a packet carries it.
#[derive(Clone, Copy, Debug)]
pub struct PktCtx {
    pub el: u8,
    pub ns: bool,
    /// ETE: Realm (with `ns`) or Root.
    pub nse: bool,
    pub sf: bool,
    /// VMID and its size in bytes.
    pub vmid: Option<(u32, usize)>,
    pub cid: Option<u32>,
}

impl PktCtx {
    fn bytes(&self) -> Vec<u8> {
        let mut v = vec![
            self.el & 3
                | (self.nse as u8) << 3
                | (self.sf as u8) << 4
                | (self.ns as u8) << 5
                | (self.vmid.is_some() as u8) << 6
                | (self.cid.is_some() as u8) << 7,
        ];
        if let Some((id, n)) = self.vmid {
            v.extend_from_slice(&id.to_le_bytes()[..n]);
        }
        if let Some(c) = self.cid {
            v.extend_from_slice(&c.to_le_bytes());
        }
        v
    }
}

/// A continuation-coded field: 7 bits a byte, bit 7 set while more follow.
fn cont(out: &mut Vec<u8>, mut v: u32) {
    loop {
        let more = v >> 7 != 0;
        out.push((v & 0x7f) as u8 | if more { 0x80 } else { 0 });
        v >>= 7;
        if !more {
            break;
        }
    }
}

/// Emits ETMv4 packets, keeping the state the protocol compresses against.
pub struct Encoder {
    pub out: Vec<u8>,
    atoms: Vec<bool>,
    /// Address history, most recent first: (address, instruction set).
    hist: [(u64, u8); 3],
    since_sync: usize,
    sync_period: usize,
    /// Atom formats 4 and 5 may be used.
    pub f45: bool,
    /// Exact-match address packets may be used.
    pub exact: bool,
    /// Addresses are 64-bit (A64).
    pub is64: bool,
    /// The last timestamp sent since the last Trace Info.
    ts_prev: Option<u64>,
    /// SF of the last context packet (32-bit addresses keep the upper half
    /// of the previous one only in AArch64).
    pkt_sf: Option<bool>,
    /// Choose a longer-than-needed encoding now and then.
    pub vary: Option<Rng>,
}

impl Encoder {
    pub fn new(sync_period: usize) -> Self {
        Encoder {
            out: Vec::new(),
            atoms: Vec::new(),
            hist: [(0, 0); 3],
            since_sync: 0,
            sync_period,
            f45: false,
            exact: false,
            is64: true,
            ts_prev: None,
            pkt_sf: None,
            vary: None,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
        self.since_sync += bytes.len();
    }

    fn vary(&mut self, num: u64, den: u64) -> bool {
        self.vary.as_mut().is_some_and(|r| r.chance(num, den))
    }

    /// Alignment synchronisation and a Trace Info packet. The address
    /// history and the timestamp start again.
    pub fn sync_with(&mut self, cc_threshold: Option<u32>) {
        self.sync_info(cc_threshold, false);
    }

    /// [`Encoder::sync_with`], saying (ETE: INFO.TSTATE) whether the PE is
    /// in a transaction.
    pub fn sync_info(&mut self, cc_threshold: Option<u32>, tstate: bool) {
        self.flush_atoms();
        let mut a = [0u8; 12];
        a[11] = 0x80;
        self.put(&a);
        let mut p = vec![0x01];
        let info = (cc_threshold.is_some() as u32) | (tstate as u32) << 6;
        match cc_threshold {
            Some(t) => {
                // INFO (cycle counting on) and CYCT sections.
                p.push(0x09);
                cont(&mut p, info);
                cont(&mut p, t);
            }
            None if info == 0 && self.vary(1, 2) => p.push(0x00),
            None => {
                p.push(0x01);
                cont(&mut p, info);
            }
        }
        self.put(&p);
        self.hist = [(0, 0); 3];
        self.ts_prev = None;
        self.since_sync = 0;
    }

    /// Alignment synchronisation and Trace Info, without cycle counting.
    pub fn sync(&mut self) {
        self.sync_with(None);
    }

    /// Whether a periodic sync is due.
    pub fn sync_due(&self) -> bool {
        self.since_sync >= self.sync_period
    }

    pub fn trace_on(&mut self) {
        self.flush_atoms();
        self.put(&[0x04]);
    }

    fn push_hist(&mut self, addr: u64, is: u8) {
        self.hist = [(addr, is), self.hist[0], self.hist[1]];
    }

    /// Address bytes of a long packet: 4 or 8.
    fn long_bytes(addr: u64, is: u8, n: usize) -> Vec<u8> {
        let mut v = if is == 0 {
            vec![((addr >> 2) & 0x7f) as u8, ((addr >> 9) & 0x7f) as u8]
        } else {
            vec![((addr >> 1) & 0x7f) as u8, (addr >> 8) as u8]
        };
        v.extend_from_slice(&addr.to_le_bytes()[2..n]);
        v
    }

    /// Address with context (long form).
    pub fn addr_ctx(&mut self, addr: u64, is: u8, ctx: &PktCtx) {
        self.flush_atoms();
        let last = self.hist[0].0;
        let short32 = !self.is64 || (self.pkt_sf == Some(true) && last >> 32 == addr >> 32 && self.vary(1, 4));
        let (hdr, n) = match (short32, is) {
            (true, 0) => (0x82, 4),
            (true, _) => (0x83, 4),
            (false, 0) => (0x85, 8),
            (false, _) => (0x86, 8),
        };
        let mut p = vec![hdr];
        p.extend(Self::long_bytes(addr, is, n));
        p.extend(ctx.bytes());
        self.put(&p);
        self.push_hist(addr, is);
        self.pkt_sf = Some(ctx.sf);
    }

    /// Address with context for an A64 address at EL1 NS, VMID 0 and
    /// context ID 0 (the original generator's only context).
    pub fn addr_with_context(&mut self, addr: u64) {
        self.addr_ctx(
            addr,
            0,
            &PktCtx {
                el: 1,
                ns: true,
                nse: false,
                sf: true,
                vmid: Some((0, 1)),
                cid: Some(0),
            },
        );
    }

    /// A context packet carrying context information.
    pub fn context(&mut self, ctx: &PktCtx) {
        self.flush_atoms();
        let mut p = vec![0x81];
        p.extend(ctx.bytes());
        self.put(&p);
        self.pkt_sf = Some(ctx.sf);
    }

    /// An address packet for an A64 (IS0) address.
    pub fn address(&mut self, addr: u64) {
        self.address_is(addr, 0);
    }

    /// An address packet: an exact match if the address is in the history,
    /// else compressed against the last address.
    pub fn address_is(&mut self, addr: u64, is: u8) {
        self.flush_atoms();
        if self.exact
            && let Some(i) = self.hist.iter().position(|&h| h == (addr, is))
        {
            self.put(&[0x90 | i as u8]);
            self.push_hist(addr, is);
            return;
        }
        let last = self.hist[0].0;
        let (s1, s2) = if is == 0 { (9, 17) } else { (8, 16) };
        let long32_ok = !self.is64 || (self.pkt_sf == Some(true) && last >> 32 == addr >> 32);
        let mut forms: Vec<u8> = Vec::new();
        if last >> s1 == addr >> s1 {
            forms.push(1);
        }
        if last >> s2 == addr >> s2 {
            forms.push(2);
        }
        if long32_ok {
            forms.push(4);
        }
        if self.is64 {
            forms.push(8);
        }
        let pick = if forms.len() > 1 && self.vary(1, 8) {
            let r = self
                .vary
                .as_mut()
                .map_or(0, |r| r.below(forms.len() as u64 - 1) as usize);
            forms[1 + r]
        } else {
            forms[0]
        };
        let short_hdr = if is == 0 { 0x95 } else { 0x96 };
        let b0 = if is == 0 {
            ((addr >> 2) & 0x7f) as u8
        } else {
            ((addr >> 1) & 0x7f) as u8
        };
        let p: Vec<u8> = match pick {
            1 => vec![short_hdr, b0],
            2 => vec![short_hdr, 0x80 | b0, (addr >> s1) as u8],
            4 => {
                let mut v = vec![if is == 0 { 0x9a } else { 0x9b }];
                v.extend(Self::long_bytes(addr, is, 4));
                v
            }
            _ => {
                let mut v = vec![if is == 0 { 0x9d } else { 0x9e }];
                v.extend(Self::long_bytes(addr, is, 8));
                v
            }
        };
        self.put(&p);
        self.push_hist(addr, is);
    }

    /// An Exception packet. `interp`: 1 when the return address follows,
    /// 2 when it also is the target of the last branch.
    pub fn exception(&mut self, number: u16, interp: u8) {
        self.flush_atoms();
        let (e1, e0) = ((interp >> 1) & 1, interp & 1);
        let more = number >= 32;
        let b1 = (more as u8) << 7 | e1 << 6 | ((number & 0x1f) as u8) << 1 | e0;
        if more {
            self.put(&[0x06, b1, ((number >> 5) & 0x1f) as u8]);
        } else {
            self.put(&[0x06, b1]);
        }
    }

    /// An Exception Return packet.
    pub fn except_rtn(&mut self) {
        self.flush_atoms();
        self.put(&[0x07]);
    }

    /// ETE: a Timestamp Marker packet.
    pub fn ts_marker(&mut self) {
        self.flush_atoms();
        self.put(&[0x88]);
    }

    /// ETE: an Instrumentation packet (exception level and value).
    pub fn ite(&mut self, el: u8, value: u64) {
        self.flush_atoms();
        let mut p = vec![0x09, el];
        p.extend_from_slice(&value.to_le_bytes());
        self.put(&p);
    }

    /// ETE: Transaction Start.
    pub fn trans_start(&mut self) {
        self.flush_atoms();
        self.put(&[0x0a]);
    }

    /// ETE: Transaction Commit.
    pub fn trans_commit(&mut self) {
        self.flush_atoms();
        self.put(&[0x0b]);
    }

    /// ETE: Transaction Failure, an Exception packet of type 0x18 saying an
    /// address follows. It is sent in the three-byte form (upper type bits
    /// zero), which reads the same whether or not a decoder expects the
    /// third byte for this type (OpenCSD always reads three). The address
    /// history then holds zero, as the packet sets the address to zero.
    pub fn trans_fail(&mut self) {
        self.flush_atoms();
        self.put(&[0x06, 0x80 | 0x18 << 1 | 1, 0x00]);
        self.push_hist(0, 0);
    }

    /// A cycle count packet for `count` cycles beyond the threshold.
    pub fn cycle_count(&mut self, count: u32) {
        self.flush_atoms();
        let wide = self.vary(1, 6);
        if count <= 3 && !wide {
            self.put(&[0x10 | count as u8]);
        } else if count <= 15 && !(wide && self.vary(1, 2)) {
            self.put(&[0x0c, count as u8]);
        } else {
            let mut p = vec![0x0e];
            cont(&mut p, count);
            self.put(&p);
        }
    }

    /// A timestamp packet: the low bits that changed since the last one
    /// (all of them after a Trace Info), and the cycle count if given.
    pub fn timestamp(&mut self, ts: u64, cc: Option<u32>) {
        self.flush_atoms();
        let groups = |n: u32| -> bool {
            match self.ts_prev {
                Some(p) => ts >> (7 * n) == p >> (7 * n),
                None => ts >> (7 * n) == 0,
            }
        };
        let n = (1..=8).find(|&n| groups(n)).unwrap_or(9);
        let mut p = vec![0x02 | cc.is_some() as u8];
        for i in 0..n {
            if i == 8 {
                p.push((ts >> 56) as u8);
            } else {
                p.push(((ts >> (7 * i)) & 0x7f) as u8 | if i + 1 < n { 0x80 } else { 0 });
            }
        }
        if let Some(c) = cc {
            cont(&mut p, c);
        }
        self.put(&p);
        self.ts_prev = Some(ts);
    }

    /// Queues an atom (true: E, taken).
    pub fn atom(&mut self, taken: bool) {
        self.atoms.push(taken);
    }

    /// Writes the queued atoms, each packet the format covering most.
    pub fn flush_atoms(&mut self) {
        let atoms = std::mem::take(&mut self.atoms);
        let mut i = 0;
        while i < atoms.len() {
            let (n, hdr) = best_atom_packet(&atoms[i..], self.f45);
            self.put(&[hdr]);
            i += n;
        }
    }
}

/// The atom packet covering the most of `rest` (oldest first): atoms used
/// and header byte.
fn best_atom_packet(rest: &[bool], f45: bool) -> (usize, u8) {
    const E: bool = true;
    const N: bool = false;
    let bits = |n: usize| {
        rest[..n]
            .iter()
            .enumerate()
            .fold(0u8, |acc, (j, &e)| acc | (e as u8) << j)
    };
    let mut best = match rest.len() {
        1 => (1, 0xf6 | bits(1)),
        2 => (2, 0xd8 | bits(2)),
        _ => (3, 0xf8 | bits(3)),
    };
    let lead = rest.iter().take_while(|&&a| a).count();
    // Format 6: 3 to 23 E atoms, then one E or N.
    let k = if lead < rest.len() {
        lead.min(23)
    } else {
        lead.saturating_sub(1).min(23)
    };
    if k >= 3 && k + 1 > best.0 {
        best = (k + 1, 0xc0 | (!rest[k] as u8) << 5 | (k - 3) as u8);
    }
    if f45 {
        const F5: [([bool; 5], u8); 4] = [
            ([N, E, E, E, E], 0xf5),
            ([N, N, N, N, N], 0xd5),
            ([N, E, N, E, N], 0xd6),
            ([E, N, E, N, E], 0xd7),
        ];
        const F4: [([bool; 4], u8); 4] = [
            ([N, E, E, E], 0xdc),
            ([N, N, N, N], 0xdd),
            ([N, E, N, E], 0xde),
            ([E, N, E, N], 0xdf),
        ];
        if rest.len() >= 5
            && best.0 < 5
            && let Some(&(_, h)) = F5.iter().find(|(p, _)| p[..] == rest[..5])
        {
            best = (5, h);
        }
        if rest.len() >= 4
            && best.0 < 4
            && let Some(&(_, h)) = F4.iter().find(|(p, _)| p[..] == rest[..4])
        {
            best = (4, h);
        }
    }
    best
}

/// Return stack as the decoder keeps it: 16 entries, the oldest dropped
/// when full.
pub(super) struct RetStack {
    active: bool,
    v: Vec<u64>,
}

impl RetStack {
    fn push(&mut self, a: u64) {
        if self.active {
            if self.v.len() == 16 {
                self.v.remove(0);
            }
            self.v.push(a);
        }
    }
    fn flush(&mut self) {
        self.v.clear();
    }
}

/// An item waiting for the next P0 element.
pub(super) enum Pend {
    Item(Truth),
    TraceOn,
    ExcRet,
}

/// Builds the truth in the order the decoder reports it.
///
/// Without speculation the decoder commits each P0 element (atom,
/// exception) as its packet arrives, and with it every element queued
/// before it: contexts, cycle counts, timestamps, Trace On, exception
/// returns (a non-P0 element on Armv8-M), so these come out in packet
/// order, just before the next waypoint's range. At the end of the trace
/// the queue is emptied up to the first Trace On or exception return:
/// timestamps and cycle counts are reported, contexts are not.
///
/// ETE's elements are not P0 either, but for a Transaction Start when
/// TRCIDR0.COMMTRANS is 0: timestamp markers, instrumentation, transaction
/// commits and failures wait like timestamps (and are reported at the end
/// of the trace); Transaction Starts that are not P0, and the transaction
/// state of the first Trace Info, wait like contexts (and are not).
pub(super) struct TruthLog {
    pub(super) out: Vec<Truth>,
    pub(super) pend: Vec<Pend>,
}

impl TruthLog {
    fn pend(&mut self, p: Pend) {
        self.pend.push(p);
    }
    fn p0(&mut self, items: impl IntoIterator<Item = Truth>) {
        for p in self.pend.drain(..) {
            match p {
                Pend::Item(t) => self.out.push(t),
                Pend::ExcRet => self.out.push(Truth::ExceptionReturn),
                Pend::TraceOn => {}
            }
        }
        self.out.extend(items);
    }
    pub(super) fn finish(mut self) -> Vec<Truth> {
        for p in self.pend {
            match p {
                Pend::TraceOn | Pend::ExcRet => break,
                Pend::Item(Truth::Context { .. } | Truth::MemTrans(MemTrans::Start | MemTrans::TraceInit)) => {}
                Pend::Item(t) => self.out.push(t),
            }
        }
        self.out
    }
}

/// Architectural exception number of a cause.
fn exception_number(rng: &mut Rng, cause: Cause, m_profile: bool) -> u16 {
    let pick = |rng: &mut Rng, v: &[u16]| v[rng.below(v.len() as u64) as usize];
    if m_profile {
        match cause {
            // External interrupts 0-7 are types 0x10-0x17, 8-495 are 0x208-0x3ef.
            Cause::Irq => match rng.below(496) as u16 {
                n @ 0..=7 => 0x10 + n,
                n => 0x200 + n,
            },
            Cause::Fiq => pick(rng, &[2, 14, 15]), // NMI, PendSV, SysTick
            Cause::Call => 11,                     // SVC
            Cause::DataFault => pick(rng, &[4, 5]),
            Cause::Trap => pick(rng, &[3, 6]),
        }
    } else {
        match cause {
            Cause::Irq => 0xE,
            Cause::Fiq => 0xF,
            Cause::Call => 0x2,
            Cause::DataFault => pick(rng, &[0xC, 0xA]),
            Cause::Trap => 0x3,
        }
    }
}

/// What a generated trace contains beyond its packets (for coverage tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Returns to the stacked address, traced without an address.
    pub rs_hits: usize,
    /// Exceptions whose return address is also the last branch target.
    pub prev_same: usize,
    /// Context packets sent alone (then an address packet).
    pub ctxt_alone: usize,
    /// Context changes (not counting restatements after sync or trace on).
    pub ctxt_changes: usize,
    pub exceptions: usize,
    pub exception_returns: usize,
    /// ETE.
    pub ts_markers: usize,
    pub ites: usize,
    pub wfx: usize,
    pub tx_starts: usize,
    pub tx_nested: usize,
    pub tx_commits: usize,
    pub tx_fails: usize,
    /// Trace Info packets sent inside a transaction (the first: Init).
    pub tx_infos: usize,
    pub tx_inits: usize,
    pub realm_root: usize,
}

impl Stats {
    /// Adds another trace's counts.
    pub fn add(&mut self, o: &Stats) {
        self.rs_hits += o.rs_hits;
        self.prev_same += o.prev_same;
        self.ctxt_alone += o.ctxt_alone;
        self.ctxt_changes += o.ctxt_changes;
        self.exceptions += o.exceptions;
        self.exception_returns += o.exception_returns;
        self.ts_markers += o.ts_markers;
        self.ites += o.ites;
        self.wfx += o.wfx;
        self.tx_starts += o.tx_starts;
        self.tx_nested += o.tx_nested;
        self.tx_commits += o.tx_commits;
        self.tx_fails += o.tx_fails;
        self.tx_infos += o.tx_infos;
        self.tx_inits += o.tx_inits;
        self.realm_root += o.realm_root;
    }
}

/// The encoding of one walk (or, for a multi-session ETE snapshot, of one
/// session's part of it).
pub(super) struct Gen<'a> {
    pub(super) stats: Stats,
    pub(super) cfg: &'a Config,
    pub(super) enc: Encoder,
    pub(super) log: TruthLog,
    pub(super) rs: RetStack,
    known: Option<TracedCtx>,
    need_addr: bool,
    tracing: bool,
    pub(super) ts: u64,
    is: u8,
    /// Instruction set (IS) of each segment's code, when it varies (A32 and
    /// T32 in one execution); empty: `is` throughout.
    seg_is: Vec<u8>,
    /// ETE: a Trace Info has been sent (only the first one's transaction
    /// state gives an element).
    synced_once: bool,
}

impl<'a> Gen<'a> {
    /// An encoder for `cfg` whose timestamps start at `ts`.
    pub(super) fn new(cfg: &'a Config, enc: Encoder, ts: u64, capacity: usize) -> Self {
        Gen {
            stats: Stats::default(),
            cfg,
            enc,
            log: TruthLog {
                out: Vec::with_capacity(capacity),
                pend: Vec::new(),
            },
            rs: RetStack {
                active: cfg.rs,
                v: Vec::new(),
            },
            known: None,
            need_addr: true,
            tracing: false,
            ts,
            is: cfg.m_profile as u8,
            seg_is: Vec::new(),
            synced_once: false,
        }
    }

    /// Encodes `segs`: a sync first, then each segment (the first one
    /// traced). Returns the trace and its truth.
    pub(super) fn run(mut self, rng: &mut Rng, segs: &[Seg]) -> (Vec<u8>, Vec<Truth>, Stats, u64) {
        let mut out = Vec::new();
        // The capacity asked for goes to the whole truth, not the pieces.
        let mut truth = Vec::with_capacity(std::mem::take(&mut self.log.out).capacity());
        let (stats, ts) = self.run_stream(rng, segs.iter(), &mut |b: &[u8], t: &[Truth]| {
            out.extend_from_slice(b);
            truth.extend_from_slice(t);
            true
        });
        (out, truth, stats, ts)
    }

    /// [`Gen::run`] handing the trace and its truth to `out` a piece at a
    /// time, as they are made (a few tens of kilobytes at most held); a
    /// false return from `out` stops the encoding. Returns what the trace
    /// contains and the last timestamp.
    pub(super) fn run_stream<S: std::borrow::Borrow<Seg>>(
        mut self,
        rng: &mut Rng,
        segs: impl Iterator<Item = S>,
        out: &mut dyn FnMut(&[u8], &[Truth]) -> bool,
    ) -> (Stats, u64) {
        /// Trace bytes or truth items held before they are handed on.
        const PIECE: usize = 1 << 15;
        let mut segs = segs.peekable();
        self.sync(rng, segs.peek().is_some_and(|s| s.borrow().tx_depth > 0));
        let mut i = 0;
        while let Some(s) = segs.next() {
            if let Some(&is) = self.seg_is.get(i) {
                self.is = is;
            }
            self.segment(rng, s.borrow(), segs.peek().map(|n| n.borrow()), i == 0);
            i += 1;
            if self.enc.out.len() >= PIECE || self.log.out.len() >= PIECE {
                let go_on = out(&self.enc.out, &self.log.out);
                self.enc.out.clear();
                self.log.out.clear();
                if !go_on {
                    return (self.stats, self.ts);
                }
            }
        }
        self.enc.flush_atoms();
        let Gen {
            enc, log, stats, ts, ..
        } = self;
        out(&enc.out, &log.finish());
        (stats, ts)
    }

    fn pkt_ctx(&self, t: &TracedCtx, with_c: bool, with_v: bool) -> PktCtx {
        PktCtx {
            el: t.el,
            ns: !t.secure,
            nse: t.nse,
            sf: t.aarch64,
            vmid: t
                .vmid
                .filter(|_| with_v)
                .map(|v| (v, (self.cfg.vmid_bits / 8) as usize)),
            cid: t.cid.filter(|_| with_c),
        }
    }

    /// A context with the address `addr`: one Address with Context
    /// packet, or a Context packet and an address packet.
    fn ctx_with_addr(&mut self, rng: &mut Rng, addr: u64, ctx: Ctx, full: bool) {
        let t = self.cfg.traced(ctx);
        let old = self.known;
        let with_c = full || old.is_none_or(|o| o.cid != t.cid) || rng.chance(1, 2);
        let with_v = full || old.is_none_or(|o| o.vmid != t.vmid) || rng.chance(1, 2);
        let p = self.pkt_ctx(&t, with_c, with_v);
        if !full {
            self.stats.ctxt_changes += 1;
        }
        if !full && rng.chance(1, 3) {
            // Context then address, or address then context (as ETE does
            // after an exception return): both come before the next P0
            // element.
            self.stats.ctxt_alone += 1;
            if rng.chance(1, 2) {
                self.enc.context(&p);
                self.enc.address_is(addr, self.is);
            } else {
                self.enc.address_is(addr, self.is);
                self.enc.context(&p);
            }
        } else {
            self.enc.addr_ctx(addr, self.is, &p);
        }
        self.known = Some(t);
        self.stats.realm_root += t.nse as usize;
        let security = ctx.security();
        self.log.pend(Pend::Item(Truth::Context {
            el: t.el,
            security,
            aarch64: t.aarch64,
            ctxt_id: t.cid,
            vmid: t.vmid,
        }));
        self.need_addr = false;
    }

    /// Sync and Trace Info (`in_tx`: the PE is in a transaction), then a
    /// timestamp when timestamps are on.
    fn sync(&mut self, rng: &mut Rng, in_tx: bool) {
        let tstate = self.cfg.ete.on && in_tx;
        self.enc.sync_info(self.cfg.cc.then_some(self.cfg.cc_threshold), tstate);
        self.stats.tx_infos += tstate as usize;
        if tstate && !self.synced_once {
            // Decode starts inside a transaction.
            self.stats.tx_inits += 1;
            self.log.pend(Pend::Item(Truth::MemTrans(MemTrans::TraceInit)));
        }
        self.synced_once = true;
        self.rs.flush();
        if self.cfg.ts {
            self.timestamp(rng);
        }
    }

    fn timestamp(&mut self, rng: &mut Rng) {
        let step = match rng.below(4) {
            0 => rng.below(1 << 7),
            1 => rng.below(1 << 14),
            2 => rng.below(1 << 28),
            _ => rng.below(1 << 40),
        };
        let limit = if self.cfg.ts_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.cfg.ts_bits) - 1
        };
        self.ts = self.ts.saturating_add(1 + step).min(limit);
        let cc = self.cfg.cc.then(|| rng.below(1 << self.cfg.cc_bits) as u32);
        if self.cfg.ete.ts_marker {
            // ETE 1.1: the marker says where the timestamp was taken.
            self.enc.ts_marker();
            self.log.pend(Pend::Item(Truth::TsMarker));
            self.stats.ts_markers += 1;
        }
        self.enc.timestamp(self.ts, cc);
        self.log.pend(Pend::Item(Truth::Timestamp { ts: self.ts, cc }));
    }

    /// ETE packets for what happened inside a segment.
    fn events(&mut self, s: &Seg) {
        for e in &s.events {
            match *e {
                Event::TxCommit => {
                    self.enc.trans_commit();
                    self.log.pend(Pend::Item(Truth::MemTrans(MemTrans::Commit)));
                    self.stats.tx_commits += 1;
                }
                Event::Ite(value) => {
                    self.enc.ite(s.ctx.el, value);
                    self.log
                        .pend(Pend::Item(Truth::Instrumentation { el: s.ctx.el, value }));
                    self.stats.ites += 1;
                }
            }
        }
    }

    fn segment(&mut self, rng: &mut Rng, s: &Seg, next: Option<&Seg>, first: bool) {
        let cfg = self.cfg;
        let mut restart = false;
        if !self.tracing {
            if !first && !rng.chance(1, 3) {
                return;
            }
            self.tracing = true;
            restart = true;
        }
        let synced = self.enc.sync_due();
        if synced {
            self.sync(rng, s.tx_depth > 0);
        }
        if restart {
            self.enc.trace_on();
            self.log.pend(Pend::TraceOn);
            self.rs.flush();
        }
        let t = cfg.traced(s.ctx);
        let tx_fail = matches!(s.how, End::TxFail { .. });
        let mut prev_same = false;
        if restart || synced {
            self.ctx_with_addr(rng, s.start, s.ctx, true);
        } else if self.known != Some(t) {
            self.ctx_with_addr(rng, s.start, s.ctx, false);
        } else if self.need_addr && !tx_fail {
            // (A failing transaction's restart address stands for it.)
            let at_exception = matches!(s.how, End::Exception { .. }) && s.count == 0;
            // An exception before the first instruction at the target of
            // a branch whose address is still owed can stand for it
            // (E1:E0 = 0b10: the return address is also that target). Not
            // with the return stack unless asked: OpenCSD (and so the
            // project's decoder) then pops the return stack although the
            // implied address element cancels the pop.
            if at_exception && (!cfg.rs || cfg.implied_target_with_rs) && rng.chance(1, 2) {
                prev_same = true;
            } else {
                self.enc.address_is(s.start, self.is);
                self.need_addr = false;
            }
        }
        self.events(s);

        let range = |exec: bool| Truth::Range {
            start: s.start,
            end: s.end,
            count: s.count,
            exec,
        };
        match s.how {
            End::Branch { taken, term, next: to } => {
                self.enc.atom(taken);
                let eret = cfg.ete.on && taken && term == Term::ExcRet;
                if eret {
                    // ETE: the decoder marks an ERET's atom as an
                    // exception return.
                    self.log.p0([range(taken), Truth::ExceptionReturn]);
                } else {
                    self.log.p0([range(taken)]);
                }
                if taken {
                    if term.is_link() {
                        self.rs.push(s.end);
                    }
                    if term.is_indirect() {
                        // Exception returns and branches that change the
                        // context always give their target, as would a
                        // return just before a transaction fails (programs
                        // have no calls inside transactions): the decoder
                        // only pops its return stack at the next P0
                        // element, and the failure's address would come
                        // first, cancelling the pop.
                        let ctx_change = next.is_some_and(|n| cfg.traced(n.ctx) != t);
                        let fail_next = next.is_some_and(|n| matches!(n.how, End::TxFail { .. }));
                        if self.rs.active
                            && !ctx_change
                            && !fail_next
                            && term != Term::ExcRet
                            && self.rs.v.last() == Some(&to)
                        {
                            // Return to the stacked address: no address.
                            self.rs.v.pop();
                            self.stats.rs_hits += 1;
                        } else {
                            self.need_addr = true;
                        }
                    } else if cfg.bb {
                        self.need_addr = true;
                    }
                }
                if term == Term::ExcRet {
                    self.stats.exception_returns += 1;
                }
                if term == Term::ExcRet && cfg.m_profile {
                    self.enc.except_rtn();
                    self.log.pend(Pend::ExcRet);
                }
            }
            End::Exception { cause, .. } => {
                let number = exception_number(rng, cause, cfg.m_profile);
                self.stats.exceptions += 1;
                self.stats.prev_same += prev_same as usize;
                self.enc.exception(number, if prev_same { 2 } else { 1 });
                self.enc.address_is(s.end, self.is);
                let mut items = Vec::with_capacity(2);
                if s.count > 0 {
                    // The range ends where the exception was taken.
                    items.push(range(true));
                }
                items.push(Truth::Exception {
                    number: number as u32,
                    ret_addr: s.end,
                });
                self.log.p0(items);
                // The handler's address follows.
                self.need_addr = true;
            }
            End::Wfx => {
                // Traced as a taken branch to the next instruction.
                self.enc.atom(true);
                self.log.p0([range(true)]);
                self.stats.wfx += 1;
            }
            End::Tstart { outer } => {
                // TSTART is a waypoint; the outer one starts a transaction.
                self.enc.atom(true);
                self.log.p0([range(true)]);
                if outer {
                    self.enc.trans_start();
                    let item = Truth::MemTrans(MemTrans::Start);
                    if cfg.ete.trans_p0 {
                        self.log.p0([item]);
                    } else {
                        self.log.pend(Pend::Item(item));
                    }
                    self.stats.tx_starts += 1;
                } else {
                    self.stats.tx_nested += 1;
                }
            }
            End::TxFail { resume } => {
                // The failure, then where execution resumes. The
                // instructions since the last waypoint are not traced.
                self.enc.trans_fail();
                self.log.pend(Pend::Item(Truth::MemTrans(MemTrans::Fail)));
                self.enc.address_is(resume, self.is);
                self.need_addr = false;
                self.stats.tx_fails += 1;
            }
        }

        if cfg.cc && rng.chance(1, 6) {
            let delta = match rng.below(4) {
                0 => rng.below(4),
                1 => rng.below(16),
                2 => rng.below(1 << 10),
                _ => rng.below(1 << 20),
            } as u32;
            self.enc.cycle_count(delta);
            self.log.pend(Pend::Item(Truth::CycleCount(cfg.cc_threshold + delta)));
        }
        if cfg.ts && rng.chance(1, 16) {
            self.timestamp(rng);
        }
        // Now and then, trace is filtered off for a while.
        if rng.chance(1, 40) && !cfg.continuous {
            self.enc.flush_atoms();
            self.tracing = false;
        }
    }
}

/// Generates an ETMv4 snapshot: an A64 program on an A-profile core, or
/// (for [`GenProtocol::Etmv4M`]) a T32 program on an M-profile core.
pub fn generate(opts: &GenOptions) -> Generated {
    generate_with(opts, &Etmv4Options::default())
}

/// [`generate`] with the trace unit options `etmv4` (those left `Random`
/// are chosen from the seed).
pub fn generate_with(opts: &GenOptions, etmv4: &Etmv4Options) -> Generated {
    generate_with_stats(opts, etmv4).0
}

/// [`generate_with`], also saying what the trace contains.
pub fn generate_with_stats(opts: &GenOptions, etmv4: &Etmv4Options) -> (Generated, Stats) {
    let mut p = plan(opts, etmv4);
    let segs = flow::walk(&mut p.rng, &p.prog, &p.wcfg, p.steps);
    let rng = &mut p.rng;
    let (enc, ts) = encoder(rng, &p.cfg, p.m_profile);
    let (out, truth, stats, _) = Gen::new(&p.cfg, enc, ts, segs.len() * 2).run(rng, &segs);
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let (data, format) = layout_buffer(opts.layout, trace_id, &out, rng);
    let spec = snapshot(opts, &p, trace_id, format, data);
    (Generated { spec, truth }, stats)
}

/// What an ETMv4 snapshot is made from, before its walk.
pub(super) struct Plan {
    /// The random numbers, as choosing the configuration and the program
    /// left them.
    pub(super) rng: Rng,
    pub(super) cfg: Config,
    pub(super) m_profile: bool,
    pub(super) core_name: &'static str,
    pub(super) prog: Program,
    pub(super) wcfg: WalkCfg,
    /// Segments to walk.
    pub(super) steps: usize,
}

/// The configuration and program of [`generate_with_stats`].
pub(super) fn plan(opts: &GenOptions, etmv4: &Etmv4Options) -> Plan {
    let m_profile = opts.protocol == GenProtocol::Etmv4M;
    let mut rng = Rng::new(if m_profile {
        opts.seed ^ 0x4d00_0000_0000
    } else {
        opts.seed
    });
    let mut cfg = Config::pick(&mut rng, etmv4, m_profile);

    // The program.
    let n_blocks = 20 + rng.below(60) as usize;
    let (core_name, prog, start_ctx) = if m_profile {
        let (name, lob) = match rng.below(3) {
            0 => ("Cortex-M55", true),
            1 => ("Cortex-M85", true),
            _ => ("Cortex-M33", false),
        };
        if !lob {
            // Armv8.0-M: ETMv4.2.
            cfg.minor = 2;
        }
        let base = [0x0000_0400u64, 0x0800_0000, 0x1000_0200][rng.below(3) as usize];
        let hbase = [0x0002_0000u64, 0x0c00_0000, 0x3000_0000][rng.below(3) as usize];
        let prog = t32m::flow_program(
            &mut rng,
            base,
            n_blocks,
            cfg.exceptions.then_some(hbase),
            cfg.exceptions,
            lob,
        );
        (
            name,
            prog,
            Ctx {
                el: 0,
                secure: rng.chance(1, 2),
                nse: false,
                aarch64: false,
                cid: 0,
                vmid: 0,
            },
        )
    } else {
        let name = ["Cortex-A53", "Cortex-A57", "Cortex-A72"][rng.below(3) as usize];
        let base = [0x0000_0000_0040_0000u64, 0xffff_ffc0_0008_0000, 0x0000_007f_9d80_0000][rng.below(3) as usize];
        let hbase = [0xffff_ffc0_0001_0800u64, 0x0000_0000_8000_0000, 0xffff_0000_0010_0000][rng.below(3) as usize];
        let prog = a64::flow_program(
            &mut rng,
            base,
            n_blocks,
            cfg.exceptions.then_some(hbase),
            cfg.exceptions,
        );
        let el = if cfg.exceptions && !cfg.ctx_changes {
            1
        } else {
            rng.below(2) as u8
        };
        let secure = !cfg.ctx_changes && rng.chance(1, 4);
        (
            name,
            prog,
            Ctx {
                el,
                secure,
                nse: false,
                aarch64: true,
                cid: rng.next_u64() as u32,
                vmid: rng.next_u64() as u32,
            },
        )
    };
    let wcfg = WalkCfg::basic(cfg.exceptions, cfg.ctx_changes, m_profile, 2, start_ctx);
    Plan {
        rng,
        cfg,
        m_profile,
        core_name,
        prog,
        wcfg,
        steps: opts.length.max(1),
    }
}

/// The encoder of a walk, and the first timestamp.
pub(super) fn encoder(rng: &mut Rng, cfg: &Config, m_profile: bool) -> (Encoder, u64) {
    let mut enc = Encoder::new(256 + rng.below(1024) as usize);
    enc.f45 = cfg.f45;
    enc.exact = cfg.exact;
    enc.is64 = !m_profile;
    enc.vary = Some(Rng::new(rng.next_u64()));
    // Now and then near the top of a 64-bit timestamp (nine-byte packets).
    let ts = if cfg.ts_bits == 64 && rng.chance(1, 4) {
        u64::MAX - rng.below(1 << 44)
    } else {
        rng.below(1 << 40)
    };
    (enc, ts)
}

/// The snapshot of [`generate_with_stats`], its buffer `data` in `format`
/// (the registers' random choices drawn from `p.rng`, as the trace and
/// its layout left it).
pub(super) fn snapshot(opts: &GenOptions, p: &Plan, trace_id: u8, format: &str, data: Vec<u8>) -> SnapshotSpec {
    let mut rng = p.rng.clone();
    let (rng, cfg, core_name, prog) = (&mut rng, &p.cfg, p.core_name, &p.prog);
    let mut core = DeviceSpec::core("cpu_0", core_name);
    for (i, (addr, code)) in prog.images.iter().enumerate() {
        core.dumps.push(DumpSpec {
            file: format!("code{i}.bin"),
            address: *addr,
            data: code.clone(),
            space: String::new(),
        });
    }
    let etm = DeviceSpec::trace_source("etm_0", "ETM4.0", registers(rng, cfg, trace_id));
    SnapshotSpec {
        description: format!(
            "trc_gen {} seed {}: {}",
            opts.protocol.name(),
            opts.seed,
            cfg.describe()
        ),
        devices: vec![core, etm],
        buffers: vec![BufferSpec {
            name: "ETB_0".into(),
            file: "trace.bin".into(),
            format: format.into(),
            data,
        }],
        source_buffers: vec![("etm_0".into(), "ETB_0".into())],
        core_trace_sources: vec![("cpu_0".into(), "etm_0".into())],
    }
}

/// Encodes a given execution (segments of a real program's run, see
/// [`super::execution`]) as ETMv4 trace: trace unit options from `seed`,
/// trace never filtered off, the memory image `images`.
pub(super) fn generate_given(
    seed: u64,
    o: &Etmv4Options,
    segs: &[Seg],
    images: &[(u64, Vec<u8>)],
    layout: super::BufferLayout,
    aarch64: bool,
    seg_is: Vec<u8>,
) -> Generated {
    let mut rng = Rng::new(seed);
    let mut cfg = Config::pick(&mut rng, o, false);
    cfg.continuous = true;
    let mut enc = Encoder::new(256 + rng.below(1024) as usize);
    enc.f45 = cfg.f45;
    enc.exact = cfg.exact;
    enc.is64 = aarch64;
    enc.vary = Some(Rng::new(rng.next_u64()));
    let ts = rng.below(1 << 40);
    let mut g = Gen::new(&cfg, enc, ts, segs.len() * 2);
    // Addresses of T32 code are IS1.
    g.seg_is = seg_is;
    let (out, truth, _, _) = g.run(&mut rng, segs);
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let (data, format) = layout_buffer(layout, trace_id, &out, &mut rng);
    let mut core = DeviceSpec::core("cpu_0", if aarch64 { "Cortex-A53" } else { "Cortex-A32" });
    for (i, (addr, code)) in images.iter().enumerate() {
        core.dumps.push(DumpSpec {
            file: format!("mem{i}.bin"),
            address: *addr,
            data: code.clone(),
            space: String::new(),
        });
    }
    let etm = DeviceSpec::trace_source("etm_0", "ETM4.0", registers(&mut rng, &cfg, trace_id));
    let spec = SnapshotSpec {
        description: format!("trc_gen etmv4 from an execution, seed {seed}: {}", cfg.describe()),
        devices: vec![core, etm],
        buffers: vec![BufferSpec {
            name: "ETB_0".into(),
            file: "trace.bin".into(),
            format: format.into(),
            data,
        }],
        source_buffers: vec![("etm_0".into(), "ETB_0".into())],
        core_trace_sources: vec![("cpu_0".into(), "etm_0".into())],
    };
    Generated { spec, truth }
}

/// Trace unit registers for `cfg`: what is enabled is implemented, what is
/// not may or may not be.
pub(super) fn registers(rng: &mut Rng, cfg: &Config, trace_id: u8) -> Vec<(String, u64)> {
    let maybe = |rng: &mut Rng, on: bool| on || rng.chance(1, 2);
    let bb_impl = maybe(rng, cfg.bb);
    let cond_impl = rng.chance(1, 2);
    let cci_impl = maybe(rng, cfg.cc);
    let rs_impl = maybe(rng, cfg.rs);
    let tssize: u32 = if cfg.ts {
        if cfg.ts_bits == 48 { 0x6 } else { 0x8 }
    } else {
        [0, 0x6, 0x8][rng.below(3) as usize]
    };
    // COMMOPT = 1: cycle count packets carry no commit count (there is
    // nothing to commit without speculation).
    let commopt = if cci_impl { 1 } else { rng.below(2) as u32 };
    let idr0 = 0x1
        | (bb_impl as u32) << 5
        | (cond_impl as u32) << 6
        | (cci_impl as u32) << 7
        | (rs_impl as u32) << 9
        | (rng.below(4) as u32) << 10
        | tssize << 24
        | commopt << 29;
    let idr1 = 0x4100_F400 | cfg.minor << 4 | rng.below(4) as u32;
    let ccsize = cfg.cc_bits - 12;
    let idr2 = if cfg.m_profile {
        0x4
    } else {
        0x8 | 0x4 << 5 | cfg.vmid_size_field << 10
    } | ccsize << 25;
    let configr = 0x1
        | (cfg.bb as u32) << 3
        | (cfg.cc as u32) << 4
        | (cfg.cid as u32) << 6
        | ((cfg.vmid_bits > 0) as u32) << 7
        | (cfg.ts as u32) << 11
        | (cfg.rs as u32) << 12;
    let mut regs: Vec<(String, u64)> = vec![
        ("TRCCONFIGR".into(), configr as u64),
        ("TRCTRACEIDR".into(), trace_id as u64),
        ("TRCIDR0".into(), idr0 as u64),
        ("TRCIDR1".into(), idr1 as u64),
        ("TRCIDR2".into(), idr2 as u64),
        ("TRCIDR8".into(), 0),
        ("TRCIDR9".into(), 0),
        ("TRCIDR10".into(), 0),
        ("TRCIDR11".into(), 0),
        ("TRCIDR12".into(), 0),
        ("TRCIDR13".into(), 0),
    ];
    if cfg.cc {
        regs.push(("TRCCCCTLR".into(), cfg.cc_threshold as u64));
    }
    regs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(atoms: &[bool], f45: bool) -> Vec<u8> {
        let mut e = Encoder::new(1 << 20);
        e.f45 = f45;
        for &a in atoms {
            e.atom(a);
        }
        e.flush_atoms();
        e.out
    }

    #[test]
    fn atoms_pack_into_the_largest_formats() {
        const E: bool = true;
        const N: bool = false;
        // Five E then N: format 6, final atom N.
        assert_eq!(packed(&[E, E, E, E, E, N], false), vec![0xc0 | 0x20 | 2]);
        assert_eq!(packed(&[N, E], false), vec![0xda]);
        assert_eq!(packed(&[E, E, N, E], false), vec![0xfb, 0xf7]);
        assert_eq!(packed(&[E; 24], false), vec![0xd4]);
        assert_eq!(packed(&[E; 4], false), vec![0xc0]);
        // Formats 4 and 5.
        assert_eq!(packed(&[N, E, E, E, E], true), vec![0xf5]);
        assert_eq!(packed(&[N, N, N, N, N], true), vec![0xd5]);
        assert_eq!(packed(&[N, E, N, E, N], true), vec![0xd6]);
        assert_eq!(packed(&[E, N, E, N, E], true), vec![0xd7]);
        assert_eq!(packed(&[N, E, E, E], true), vec![0xdc]);
        assert_eq!(packed(&[N, N, N, N, E], true), vec![0xdd, 0xf7]);
        assert_eq!(packed(&[N, E, N, E], true), vec![0xde]);
        assert_eq!(packed(&[E, N, E, N], true), vec![0xdf]);
        assert_eq!(packed(&[N, N, N, N, N], false), vec![0xf8, 0xd8]);
    }

    /// The atom packets decode to the atoms they were made from.
    #[test]
    fn atom_packets_decode_to_their_atoms() {
        use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
        use coresight_decode::decoder::{PacketOut, PacketProcessor};
        use coresight_decode::etmv4::{EtmV4Config, EtmV4Packet, EtmV4PktProc};
        use coresight_decode::interfaces::PktDataIn;
        use coresight_decode::shared::Lock;
        use std::sync::Arc;
        struct Sink(Arc<Lock<Vec<bool>>>);
        impl PktDataIn<EtmV4Packet> for Sink {
            fn packet_data_in(&mut self, _op: DatapathOp, _i: TrcIndex, p: Option<&EtmV4Packet>) -> DatapathResp {
                if let Some(p) = p
                    && p.pkt_type.is_atom()
                {
                    for j in 0..p.atoms.num {
                        self.0.borrow_mut().push(p.atoms.en_bits >> j & 1 != 0);
                    }
                }
                DatapathResp::Cont
            }
        }
        let mut rng = Rng::new(9);
        for _ in 0..200 {
            let n = 1 + rng.below(60) as usize;
            let atoms: Vec<bool> = (0..n).map(|_| rng.chance(2, 3)).collect();
            let mut e = Encoder::new(1 << 20);
            e.f45 = true;
            e.sync();
            for &a in &atoms {
                e.atom(a);
            }
            e.flush_atoms();
            let got = Arc::new(Lock::new(Vec::new()));
            let mut proc = EtmV4PktProc::new(EtmV4Config::default(), None);
            let mut sink = Sink(got.clone());
            let mut out = PacketOut {
                mon: None,
                sink: Some(&mut sink),
            };
            proc.process(0, &e.out, &mut out);
            assert_eq!(*got.borrow(), atoms);
        }
    }

    #[test]
    fn addresses_compress_against_the_last_one() {
        let mut e = Encoder::new(1 << 20);
        let sent = |e: &mut Encoder, addr: u64| {
            e.out.clear();
            e.address(addr);
            e.out.clone()
        };
        assert_eq!(
            sent(&mut e, 0xFFFF_FFC0_0059_4AC0),
            vec![0x9d, 0x30, 0x25, 0x59, 0x00, 0xc0, 0xff, 0xff, 0xff]
        );
        e.pkt_sf = Some(true);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_0059_2B58), vec![0x95, 0xd6, 0x95]);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_0059_2B64), vec![0x95, 0x59]);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_005A_C4C8), vec![0x9a, 0x32, 0x62, 0x5a, 0x00]);
        // Exact matches: the last three addresses.
        e.exact = true;
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_0059_2B64), vec![0x91]);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_0059_2B64), vec![0x90]);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_005A_C4C8), vec![0x92]);
        // T32 (IS1): halfword granules.
        let mut t = Encoder::new(1 << 20);
        t.is64 = false;
        t.out.clear();
        t.address_is(0x4F9A02, 1);
        assert_eq!(t.out, vec![0x9b, 0x01, 0x9a, 0x4f, 0x00]);
        t.out.clear();
        t.address_is(0x4F9A40, 1);
        assert_eq!(t.out, vec![0x96, 0x20]);
        t.out.clear();
        t.address_is(0x4F1E00, 1);
        assert_eq!(t.out, vec![0x96, 0x80, 0x1e]);
    }

    #[test]
    fn timestamps_send_the_low_bits_that_changed() {
        let mut e = Encoder::new(1 << 20);
        e.timestamp(0x1234, None);
        assert_eq!(e.out, vec![0x02, 0xb4, 0x24]);
        e.out.clear();
        e.timestamp(0x1250, Some(5));
        assert_eq!(e.out, vec![0x03, 0x50, 0x05]);
        e.out.clear();
        e.timestamp(0xff00_0000_0000_0000, None);
        assert_eq!(e.out.len(), 10);
        assert_eq!(e.out[9], 0xff);
    }

    /// Across a few seeds with every option on, every packet form and
    /// every feature the generator knows turns up.
    #[test]
    fn every_feature_turns_up() {
        use crate::BufferLayout;
        use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile};
        use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
        use coresight_decode::decoder::{PacketOut, PacketProcessor};
        use coresight_decode::etmv4::{EtmV4Config, EtmV4Packet, EtmV4PktProc, PktType};
        use coresight_decode::interfaces::PktDataIn;
        use coresight_decode::shared::Lock;
        use std::collections::BTreeSet;
        use std::sync::Arc;
        struct Sink(Arc<Lock<BTreeSet<String>>>);
        impl PktDataIn<EtmV4Packet> for Sink {
            fn packet_data_in(&mut self, _op: DatapathOp, _i: TrcIndex, p: Option<&EtmV4Packet>) -> DatapathResp {
                if let Some(p) = p {
                    let mut name = p.pkt_type.name().to_string();
                    match p.pkt_type {
                        PktType::Timestamp => name += if p.cc_valid { "+cc" } else { "" },
                        PktType::Except => name += &format!("/{}", p.exception.addr_interp),
                        PktType::AtomF6 => {
                            name += if p.atoms.en_bits >> (p.atoms.num - 1) & 1 == 0 {
                                "N"
                            } else {
                                "E"
                            }
                        }
                        PktType::AddrMatch => name += &format!("{}", p.exact_match_idx),
                        _ => {}
                    }
                    self.0.borrow_mut().insert(name);
                }
                DatapathResp::Cont
            }
        }
        for (protocol, expect) in [
            (
                GenProtocol::Etmv4,
                &[
                    "I_ADDR_CTXT_L_64IS0",
                    "I_ADDR_CTXT_L_32IS0",
                    "I_CTXT",
                    "I_ADDR_S_IS0",
                    "I_ADDR_L_32IS0",
                    "I_ADDR_L_64IS0",
                    "I_EXCEPT/1",
                    "I_EXCEPT/2",
                ][..],
            ),
            (
                GenProtocol::Etmv4M,
                &[
                    "I_ADDR_CTXT_L_32IS1",
                    "I_CTXT",
                    "I_ADDR_S_IS1",
                    "I_ADDR_L_32IS1",
                    "I_EXCEPT/1",
                    "I_EXCEPT/2",
                    "I_EXCEPT_RTN",
                ][..],
            ),
        ] {
            let seen = Arc::new(Lock::new(BTreeSet::new()));
            let mut total = Stats::default();
            for seed in 0..24 {
                let mut etmv4 = Etmv4Options::all(Choice::On);
                etmv4.cycle_counting = if seed % 3 == 0 { Choice::Off } else { Choice::On };
                etmv4.exceptions = if seed % 5 == 4 { Choice::Off } else { Choice::On };
                // Return stack and branch broadcast exclude each other,
                // and the previous-target exception form needs the stack off.
                etmv4.branch_broadcast = if seed % 2 == 0 { Choice::On } else { Choice::Off };
                etmv4.return_stack = if seed % 4 == 1 { Choice::On } else { Choice::Off };
                let opts = GenOptions {
                    seed,
                    protocol,
                    layout: BufferLayout::Unformatted,
                    length: 400,
                };
                let (g, st) = generate_with_stats(&opts, &etmv4);
                total.rs_hits += st.rs_hits;
                total.prev_same += st.prev_same;
                total.ctxt_alone += st.ctxt_alone;
                total.ctxt_changes += st.ctxt_changes;
                total.exceptions += st.exceptions;
                total.exception_returns += st.exception_returns;
                let etm = &g.spec.devices[1];
                let reg = |n: &str| etm.regs.iter().find(|(k, _)| k == n).map_or(0, |r| r.1 as u32);
                let cfg = EtmV4Config {
                    idr0: reg("TRCIDR0"),
                    idr1: reg("TRCIDR1"),
                    idr2: reg("TRCIDR2"),
                    configr: reg("TRCCONFIGR"),
                    traceidr: reg("TRCTRACEIDR"),
                    arch: if protocol == GenProtocol::Etmv4M {
                        ArchProfile::new(ArchVersion::V8r3, CoreProfile::CortexM)
                    } else {
                        ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA)
                    },
                    ..Default::default()
                };
                let mut proc = EtmV4PktProc::new(cfg, None);
                let mut sink = Sink(seen.clone());
                let mut out = PacketOut {
                    mon: None,
                    sink: Some(&mut sink),
                };
                let data = &g.spec.buffers[0].data;
                let (_, used) = proc.process(0, data, &mut out);
                assert_eq!(used, data.len());
            }
            let seen = seen.borrow();
            let common = [
                "I_ASYNC",
                "I_TRACE_INFO",
                "I_TRACE_ON",
                "I_TIMESTAMP",
                "I_TIMESTAMP+cc",
                "I_CCNT_F1",
                "I_CCNT_F2",
                "I_CCNT_F3",
                "I_ADDR_MATCH0",
                "I_ADDR_MATCH1",
                "I_ADDR_MATCH2",
                "I_ATOM_F1",
                "I_ATOM_F2",
                "I_ATOM_F3",
                "I_ATOM_F4",
                "I_ATOM_F5",
                "I_ATOM_F6E",
                "I_ATOM_F6N",
            ];
            for name in common.iter().chain(expect) {
                assert!(seen.contains(*name), "{protocol:?}: no {name} in {seen:?}");
            }
            assert!(
                !seen
                    .iter()
                    .any(|n| n.starts_with("I_BAD") || n.starts_with("I_RESERVED")),
                "{seen:?}"
            );
            assert!(
                total.rs_hits > 10 && total.prev_same > 0 && total.ctxt_alone > 0,
                "{protocol:?}: {total:?}"
            );
            assert!(
                total.ctxt_changes > 10 && total.exceptions > 10 && total.exception_returns > 10,
                "{protocol:?}: {total:?}"
            );
        }
    }

    #[test]
    fn exception_packets() {
        let mut e = Encoder::new(1 << 20);
        e.exception(0xE, 1);
        assert_eq!(e.out, vec![0x06, 0x1d]);
        e.out.clear();
        e.exception(0x3, 2);
        assert_eq!(e.out, vec![0x06, 0x46]);
        e.out.clear();
        e.exception(16 + 40, 1);
        assert_eq!(e.out, vec![0x06, 0x80 | (56 & 0x1f) << 1 | 1, 1]);
    }
}
