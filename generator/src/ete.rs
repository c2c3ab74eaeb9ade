//! ETE (Armv9 Embedded Trace Extension) trace of generated A64 executions.
//!
//! An Armv9 core (`ARM-AA64`, Cortex-A710, ...) runs a random A64 program
//! ([`a64::flow_program_ext`]) walked by [`flow::walk`]; an ETE traces it,
//! usually captured by TRBE straight to memory (unformatted), sometimes
//! through a formatter. The encoding is ETMv4's ([`super::etmv4`]: sync and
//! Trace Info, Trace On, compressed addresses, packed atoms, contexts,
//! exceptions, cycle counts, timestamps, return stack, branch broadcast,
//! exact matches), with what ETE adds, each on, off or from the seed
//! ([`EteOptions`]):
//!
//! - Trace Info with the transaction state (TSTATE): when decode starts
//!   inside a transaction the decoder reports it (MEMTRANS Init);
//! - timestamp markers (ETE 1.1, TRCIDR0.TSMARK) before each timestamp;
//! - transactions (FEAT_TME): TSTART is a waypoint (an E atom) and the
//!   outer one sends Transaction Start (a P0 element when
//!   TRCIDR0.COMMTRANS is 0), the outer TCOMMIT sends Transaction Commit,
//!   a failure (TCANCEL or a conflict) sends Transaction Failure and the
//!   address execution resumes at (after the outer TSTART);
//! - instrumentation (ETE 1.3, FEAT_ITE): each TRCIT sends its exception
//!   level and value;
//! - Realm and Root security states (RME) in contexts: EL3 is Root, lower
//!   levels Non-secure or Realm, the monitor switching worlds;
//! - WFI, WFE, WFIT and WFET as waypoints (TRCIDR2.WFXMODE);
//! - ERETs, which the decoder reports as exception returns;
//! - several sessions: the walk cut into buffers (with gaps), each starting
//!   with its own sync, decoded in turn as `-multi_session` does (the
//!   truth marks each buffer's start with `session N`).
//!
//! The registers (TRCCONFIGR, TRCTRACEIDR, TRCDEVARCH with the ETE
//! revision, TRCIDR0/1/2/8) say what was used. The truth is what the
//! project's ETE decoder (exact against OpenCSD on the ETE corpus) reports
//! for correct trace; see `etmv4::TruthLog` for the order of elements that
//! are not waypoints.
//!
//! Not generated: speculation (TRCIDR8.MAXSPEC is 0), source-address
//! packets, Q elements, events, PE resets (OpenCSD's decoder has no case
//! for them and resynchronises), exceptions inside transactions.

use super::a64::{self, Armv9Extras};
use super::etmv4::{Choice, Config, Encoder, EteConfig, Etmv4Options, Gen, Stats};
use super::flow::{self, Ctx, Program, Seg, WalkCfg};
use super::{GenOptions, Generated, Rng, Truth, layout_buffer};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, DumpSpec, SnapshotSpec};

/// ETE options: those ETMv4 has and ETE keeps, and ETE's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EteOptions {
    /// Cycle counts, timestamps, return stack, branch broadcast,
    /// exceptions, context changes, exact matches, atom formats 4 and 5.
    pub etmv4: Etmv4Options,
    /// Timestamp markers (ETE 1.1; timestamps on with them).
    pub ts_marker: Choice,
    /// Transactional memory (TSTART, TCOMMIT, TCANCEL).
    pub tme: Choice,
    /// Instrumentation (TRCIT, ETE 1.3).
    pub ite: Choice,
    /// Realm and Root security states.
    pub rme: Choice,
    /// WFI/WFE/WFIT/WFET traced as waypoints.
    pub wfx: Choice,
    /// Several trace buffers decoded in turn.
    pub multi_session: Choice,
    /// Number of sessions when there are several (2 to 4 from the seed
    /// when not given).
    pub sessions: Option<usize>,
}

/// ETE's own option names, as `trc_gen` takes them (besides ETMv4's).
pub const OPTION_NAMES: &[&str] = &["tsmark", "tme", "ite", "rme", "wfx", "multi"];

impl EteOptions {
    /// Every trace option (ETE's and ETMv4's; not `multi`) set to `c`.
    pub fn all(c: Choice) -> Self {
        EteOptions {
            etmv4: Etmv4Options::all(c),
            ts_marker: c,
            tme: c,
            ite: c,
            rme: c,
            wfx: c,
            multi_session: Choice::Random,
            sessions: None,
        }
    }

    fn slot(&mut self, name: &str) -> Option<&mut Choice> {
        Some(match name {
            "tsmark" => &mut self.ts_marker,
            "tme" => &mut self.tme,
            "ite" => &mut self.ite,
            "rme" => &mut self.rme,
            "wfx" => &mut self.wfx,
            "multi" => &mut self.multi_session,
            _ => return None,
        })
    }

    /// Sets option `name` (one of [`OPTION_NAMES`] or ETMv4's) to `c`;
    /// false if unknown.
    pub fn set(&mut self, name: &str, c: Choice) -> bool {
        match self.slot(name) {
            Some(s) => {
                *s = c;
                true
            }
            None => self.etmv4.set(name, c),
        }
    }

    /// This with option `name` set to `c`.
    pub fn with(mut self, name: &str, c: Choice) -> Self {
        assert!(self.set(name, c), "unknown ETE option {name}");
        self
    }

    /// Sets option `name` from a `-opt` value: 1, 0 or random; `all` sets
    /// every trace option, `sessions` takes a count (1 for one buffer).
    pub fn set_value(&mut self, name: &str, value: &str) -> Result<(), String> {
        if name == "sessions" {
            let n: usize = value
                .parse()
                .map_err(|_| format!("bad value `{value}` (want a number of sessions, 1 to 16)"))?;
            if !(1..=16).contains(&n) {
                return Err(format!("bad value `{value}` (want a number of sessions, 1 to 16)"));
            }
            self.sessions = Some(n);
            self.multi_session = if n > 1 { Choice::On } else { Choice::Off };
            return Ok(());
        }
        let c = match value.to_ascii_lowercase().as_str() {
            "1" | "on" | "yes" | "true" | "" => Choice::On,
            "0" | "off" | "no" | "false" => Choice::Off,
            "random" | "rand" | "any" => Choice::Random,
            v => return Err(format!("bad value `{v}` (want 1, 0 or random)")),
        };
        if name == "all" {
            let keep = (self.multi_session, self.sessions);
            let implied = self.etmv4.implied_target_with_rs;
            *self = EteOptions::all(c);
            (self.multi_session, self.sessions) = keep;
            self.etmv4.implied_target_with_rs = implied;
            return Ok(());
        }
        if self.set(name, c) {
            return Ok(());
        }
        self.etmv4.set_value(name, value).map_err(|_| {
            format!(
                "unknown option `{name}` (ETE: all, {}, {}, sessions=N, rs_implied)",
                OPTION_NAMES.join(", "),
                super::etmv4::OPTION_NAMES.join(", ")
            )
        })
    }
}

/// Armv9 cores an ETE traces.
pub(super) const CORES: &[&str] = &["ARM-AA64", "Cortex-A710", "Cortex-X2", "Neoverse-N2", "Cortex-A520"];

/// Picks the configuration: ETMv4's choices, then ETE's.
pub(super) fn pick_config(rng: &mut Rng, o: &EteOptions) -> (Config, u32) {
    let mut cfg = Config::pick(rng, &o.etmv4, false);
    // ETE traces a 32-bit VMID when it traces one.
    cfg.vmid_size_field = 4;
    cfg.vmid_bits = if rng.chance(1, 2) { 32 } else { 0 };
    let ts_marker = o.ts_marker.pick(rng);
    if ts_marker {
        cfg.ts = true;
    }
    let ete = EteConfig {
        on: true,
        ts_marker,
        tme: o.tme.pick(rng),
        trans_p0: rng.chance(1, 2),
        ite: o.ite.pick(rng),
        rme: o.rme.pick(rng),
        wfx: o.wfx.pick(rng),
    };
    // ETE revision (TRCDEVARCH.REVISION): 1 for timestamp markers, 3 for
    // instrumentation.
    let revision = if ete.ite {
        3
    } else if ete.ts_marker {
        1 + rng.below(3) as u32
    } else {
        rng.below(4) as u32
    };
    cfg.ete = ete;
    (cfg, revision)
}

/// ETE registers for `cfg`: what is enabled is implemented, what is not
/// may or may not be.
pub(super) fn registers(rng: &mut Rng, cfg: &Config, revision: u32, trace_id: u8) -> Vec<(String, u64)> {
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
    // COMMOPT = 1: no commit sections (nothing is speculative).
    let commopt = if cci_impl { 1 } else { rng.below(2) as u32 };
    let idr0 = 0x1
        | (bb_impl as u32) << 5
        | (cond_impl as u32) << 6
        | (cci_impl as u32) << 7
        | (rs_impl as u32) << 9
        | (rng.below(4) as u32) << 10
        | (cfg.ete.ts_marker as u32) << 23
        | tssize << 24
        | commopt << 29
        | (!cfg.ete.trans_p0 as u32) << 30;
    // ETE: TRCIDR1's version fields read 0xF; TRCDEVARCH has the version.
    let idr1 = 0x4100_FFF0 | rng.below(4) as u32;
    let ccsize = cfg.cc_bits - 12;
    // 64-bit addresses, 32-bit context ID and VMID.
    let idr2 = 0x8 | 0x4 << 5 | cfg.vmid_size_field << 10 | ccsize << 25 | (cfg.ete.wfx as u32) << 31;
    let devarch = 0x4770_5A13 | revision << 16;
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
        ("TRCDEVARCH".into(), devarch as u64),
        ("TRCIDR0".into(), idr0 as u64),
        ("TRCIDR1".into(), idr1 as u64),
        ("TRCIDR2".into(), idr2 as u64),
        ("TRCIDR8".into(), 0),
    ];
    if cfg.cc {
        regs.push(("TRCCCCTLR".into(), cfg.cc_threshold as u64));
    }
    regs
}

/// Generates an ETE snapshot, options from the seed.
pub fn generate(opts: &GenOptions) -> Generated {
    generate_with(opts, &EteOptions::default())
}

/// [`generate`] with the options `o` (those left `Random` are chosen from
/// the seed).
pub fn generate_with(opts: &GenOptions, o: &EteOptions) -> Generated {
    generate_with_stats(opts, o).0
}

/// [`generate_with`], also saying what the trace contains.
pub fn generate_with_stats(opts: &GenOptions, o: &EteOptions) -> (Generated, Stats) {
    let mut p = plan(opts, o);
    let segs = flow::walk(&mut p.rng, &p.prog, &p.wcfg, p.steps);
    let rng = &mut p.rng;

    // Sessions: the walk cut in pieces, with untraced gaps between them.
    let parts: Vec<&[Seg]> = session_windows(rng, &p.cfg, p.sessions, segs.len())
        .into_iter()
        .map(|w| &segs[w.start_in(|j| segs[j].tx_depth > 0)..w.end])
        .collect();

    // The trace: each session starts afresh.
    let mut ts = first_timestamp(rng, &p.cfg);
    let mut stats = Stats::default();
    let mut truth = Vec::with_capacity(segs.len() * 2 + p.sessions);
    let mut traces = Vec::with_capacity(p.sessions);
    for (i, part) in parts.iter().enumerate() {
        let enc = encoder(rng, &p.cfg);
        let (out, t, st, ts_end) = Gen::new(&p.cfg, enc, ts, part.len() * 2).run(rng, part);
        ts = ts_end;
        stats.add(&st);
        if p.sessions > 1 {
            truth.push(Truth::Session(i as u32 + 1));
        }
        truth.extend(t);
        traces.push(out);
    }

    // The snapshot.
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let regs = registers(rng, &p.cfg, p.revision, trace_id);
    let data = traces
        .iter()
        .map(|out| {
            let (data, format) = layout_buffer(opts.layout, trace_id, out, rng);
            (format, data)
        })
        .collect();
    (
        Generated {
            spec: snapshot(opts, &p, &regs, data),
            truth,
        },
        stats,
    )
}

/// What an ETE snapshot is made from, before its walk.
pub(super) struct Plan {
    /// The random numbers, as choosing the configuration and the program
    /// left them.
    pub(super) rng: Rng,
    pub(super) cfg: Config,
    pub(super) revision: u32,
    /// Trace sessions (buffers), 1 or more.
    pub(super) sessions: usize,
    pub(super) core_name: &'static str,
    pub(super) prog: Program,
    pub(super) wcfg: WalkCfg,
    /// Segments to walk.
    pub(super) steps: usize,
}

/// The configuration and program of [`generate_with_stats`].
pub(super) fn plan(opts: &GenOptions, o: &EteOptions) -> Plan {
    let mut rng = Rng::new(opts.seed ^ 0x0e7e_0000_0000);
    let (cfg, revision) = pick_config(&mut rng, o);
    let sessions = if o.multi_session.pick(&mut rng) {
        o.sessions.unwrap_or(2 + rng.below(3) as usize).max(2)
    } else {
        1
    };

    // The program: WFx instructions whether or not they are waypoints.
    let core_name = CORES[rng.below(CORES.len() as u64) as usize];
    let n_blocks = 20 + rng.below(60) as usize;
    let base = [0x0000_0000_0040_0000u64, 0xffff_ffc0_0008_0000, 0x0000_007f_9d80_0000][rng.below(3) as usize];
    let hbase = [0xffff_ffc0_0001_0800u64, 0x0000_0000_8000_0000, 0xffff_8000_0010_0000][rng.below(3) as usize];
    let extras = Armv9Extras {
        wfx: cfg.ete.wfx || rng.chance(1, 2),
        tme: cfg.ete.tme,
        ite: cfg.ete.ite,
    };
    let prog = a64::flow_program_ext(
        &mut rng,
        base,
        n_blocks,
        cfg.exceptions.then_some(hbase),
        cfg.exceptions,
        &extras,
    );
    let el = if cfg.exceptions && !cfg.ctx_changes {
        1
    } else {
        rng.below(2) as u8
    };
    let (secure, nse) = if cfg.ete.rme {
        (false, rng.chance(1, 2))
    } else {
        (!cfg.ctx_changes && rng.chance(1, 4), false)
    };
    let start_ctx = Ctx {
        el,
        secure,
        nse,
        aarch64: true,
        cid: rng.next_u64() as u32,
        vmid: rng.next_u64() as u32,
    };
    let wcfg = WalkCfg {
        wfx_waypoints: cfg.ete.wfx,
        rme: cfg.ete.rme,
        ..WalkCfg::basic(cfg.exceptions, cfg.ctx_changes, false, 2, start_ctx)
    };
    Plan {
        rng,
        cfg,
        revision,
        sessions,
        core_name,
        prog,
        wcfg,
        steps: opts.length.max(sessions),
    }
}

/// The segments of the walk one session traces: from `start` (or, when
/// `tx_start`, the first segment inside a transaction in
/// `start..tx_limit`, if any) to `end`.
pub(super) struct SessionWindow {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) tx_start: bool,
    pub(super) tx_limit: usize,
}

impl SessionWindow {
    /// The first segment traced, given which segments are in a transaction.
    pub(super) fn start_in(&self, in_tx: impl Fn(usize) -> bool) -> usize {
        if self.tx_start {
            (self.start..self.tx_limit).find(|&j| in_tx(j)).unwrap_or(self.start)
        } else {
            self.start
        }
    }
}

/// Cuts a walk of `n` segments into `sessions` windows with untraced gaps
/// between them. With transactions, a session often starts inside one
/// (its first Trace Info then says so).
pub(super) fn session_windows(rng: &mut Rng, cfg: &Config, sessions: usize, n: usize) -> Vec<SessionWindow> {
    let per = n / sessions;
    (0..sessions)
        .map(|i| {
            let end = if i + 1 == sessions { n } else { (i + 1) * per };
            let gap = if i == 0 {
                0
            } else {
                rng.below(per as u64 / 4 + 1) as usize
            };
            let start = (i * per + gap).min(end - 1);
            SessionWindow {
                start,
                end,
                tx_start: cfg.ete.tme && rng.chance(1, 2),
                tx_limit: (start + per / 2).min(end - 1),
            }
        })
        .collect()
}

/// The first timestamp: now and then near the top of a 64-bit one.
pub(super) fn first_timestamp(rng: &mut Rng, cfg: &Config) -> u64 {
    if cfg.ts_bits == 64 && rng.chance(1, 4) {
        u64::MAX - rng.below(1 << 44)
    } else {
        rng.below(1 << 40)
    }
}

/// The encoder of a session.
pub(super) fn encoder(rng: &mut Rng, cfg: &Config) -> Encoder {
    let mut enc = Encoder::new(256 + rng.below(1024) as usize);
    enc.f45 = cfg.f45;
    enc.exact = cfg.exact;
    enc.is64 = true;
    enc.vary = Some(Rng::new(rng.next_u64()));
    enc
}

/// The buffer file of session `i` (from 0) of `sessions`: its source, its
/// buffer and its file names.
pub(super) fn session_names(i: usize, sessions: usize) -> (String, String, String) {
    if sessions == 1 {
        ("ete_0".to_string(), "ETB_0".to_string(), "trace.bin".to_string())
    } else {
        (
            format!("ete_0_s{}", i + 1),
            format!("ETB_{}", i + 1),
            format!("session{}.bin", i + 1),
        )
    }
}

/// The snapshot of [`generate_with_stats`]: its sources' registers `regs`
/// and each session's buffer (format, data).
pub(super) fn snapshot(
    opts: &GenOptions,
    p: &Plan,
    regs: &[(String, u64)],
    buffers_data: Vec<(&str, Vec<u8>)>,
) -> SnapshotSpec {
    let (sessions, core_name, cfg, revision) = (p.sessions, p.core_name, &p.cfg, p.revision);
    let mut core = DeviceSpec::core("cpu_0", core_name);
    for (i, (addr, code)) in p.prog.images.iter().enumerate() {
        core.dumps.push(DumpSpec {
            file: format!("code{i}.bin"),
            address: *addr,
            data: code.clone(),
            space: String::new(),
        });
    }
    let mut devices = vec![core];
    let mut buffers = Vec::with_capacity(sessions);
    let mut source_buffers = Vec::with_capacity(sessions);
    let mut core_trace_sources = Vec::with_capacity(sessions);
    for (i, (format, data)) in buffers_data.into_iter().enumerate() {
        let (dev, buf, file) = session_names(i, sessions);
        devices.push(DeviceSpec::trace_source(&dev, "ETE", regs.to_vec()));
        buffers.push(BufferSpec {
            name: buf.clone(),
            file,
            format: format.into(),
            data,
        });
        source_buffers.push((dev.clone(), buf));
        core_trace_sources.push(("cpu_0".to_string(), dev));
    }
    let mut description = format!(
        "trc_gen ete seed {}: {} {} ETE rev {revision}",
        opts.seed,
        core_name,
        cfg.describe()
    );
    if sessions > 1 {
        description += &format!(", {sessions} sessions");
    }
    SnapshotSpec {
        description,
        devices,
        buffers,
        source_buffers,
        core_trace_sources,
    }
}

/// Encodes a given execution (see [`super::execution`]) as ETE trace:
/// options from `seed` (ETE's Armv9 extras off: the execution has none),
/// one session, trace never filtered off, the memory image `images`.
pub(super) fn generate_given(
    seed: u64,
    segs: &[super::flow::Seg],
    images: &[(u64, Vec<u8>)],
    layout: super::BufferLayout,
) -> Generated {
    let mut rng = Rng::new(seed ^ 0x0e7e_0000_0000);
    let o = EteOptions {
        tme: Choice::Off,
        ite: Choice::Off,
        wfx: Choice::Off,
        rme: Choice::Off,
        multi_session: Choice::Off,
        ..EteOptions::all(Choice::Random)
    };
    let o = EteOptions {
        etmv4: Etmv4Options {
            exceptions: Choice::Off,
            context_changes: Choice::Off,
            ..o.etmv4
        },
        ..o
    };
    let (mut cfg, revision) = pick_config(&mut rng, &o);
    cfg.continuous = true;
    let core_name = CORES[rng.below(CORES.len() as u64) as usize];
    let mut enc = Encoder::new(256 + rng.below(1024) as usize);
    enc.f45 = cfg.f45;
    enc.exact = cfg.exact;
    enc.is64 = true;
    enc.vary = Some(Rng::new(rng.next_u64()));
    let ts = rng.below(1 << 40);
    let (out, truth, _, _) = Gen::new(&cfg, enc, ts, segs.len() * 2).run(&mut rng, segs);
    let trace_id = 0x10 + rng.below(0x20) as u8;
    let mut core = DeviceSpec::core("cpu_0", core_name);
    for (i, (addr, code)) in images.iter().enumerate() {
        core.dumps.push(DumpSpec {
            file: format!("mem{i}.bin"),
            address: *addr,
            data: code.clone(),
            space: String::new(),
        });
    }
    let regs = registers(&mut rng, &cfg, revision, trace_id);
    let (data, format) = layout_buffer(layout, trace_id, &out, &mut rng);
    let spec = SnapshotSpec {
        description: format!(
            "trc_gen ete from an execution, seed {seed}: {core_name} {} ETE rev {revision}",
            cfg.describe()
        ),
        devices: vec![core, DeviceSpec::trace_source("ete_0", "ETE", regs)],
        buffers: vec![BufferSpec {
            name: "ETB_0".into(),
            file: "trace.bin".into(),
            format: format.into(),
            data,
        }],
        source_buffers: vec![("ete_0".into(), "ETB_0".into())],
        core_trace_sources: vec![("cpu_0".into(), "ete_0".into())],
    };
    Generated { spec, truth }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BufferLayout;
    use crate::check::check;

    fn opts(seed: u64) -> GenOptions {
        GenOptions {
            seed,
            protocol: super::super::GenProtocol::Ete(EteOptions::default()),
            layout: BufferLayout::Unformatted,
            length: 300,
        }
    }

    #[test]
    fn options_by_name() {
        let mut o = EteOptions::default();
        o.set_value("tme", "1").unwrap();
        o.set_value("cc", "0").unwrap();
        o.set_value("sessions", "3").unwrap();
        assert_eq!(o.tme, Choice::On);
        assert_eq!(o.etmv4.cycle_counting, Choice::Off);
        assert_eq!((o.multi_session, o.sessions), (Choice::On, Some(3)));
        o.set_value("all", "0").unwrap();
        assert_eq!(o.ite, Choice::Off);
        assert_eq!(o.etmv4.return_stack, Choice::Off);
        assert_eq!(o.sessions, Some(3));
        assert!(o.set_value("nonsense", "1").unwrap_err().contains("tsmark"));
        assert!(o.set_value("sessions", "0").is_err());
    }

    /// Registers say what the trace uses.
    #[test]
    fn registers_follow_the_options() {
        let on = EteOptions::all(Choice::On).with("bb", Choice::Off);
        let (g, _) = generate_with_stats(&opts(1), &on);
        let reg = |n: &str| {
            g.spec.devices[1]
                .regs
                .iter()
                .find(|(k, _)| k == n)
                .map(|r| r.1)
                .unwrap()
        };
        assert_eq!(g.spec.devices[1].device_type, "ETE");
        assert_eq!(reg("TRCDEVARCH"), 0x4773_5A13, "ITE needs ETE 1.3");
        assert_ne!(reg("TRCIDR0") & 1 << 23, 0, "TSMARK");
        assert_ne!(reg("TRCIDR2") & 1 << 31, 0, "WFXMODE");
        assert_eq!(reg("TRCCONFIGR") & 0x1818, 0x1810, "cc, ts, rs on; bb off");
        assert_eq!(reg("TRCIDR8"), 0);
        let off = generate_with(&opts(1), &EteOptions::all(Choice::Off));
        let reg = |n: &str| {
            off.spec.devices[1]
                .regs
                .iter()
                .find(|(k, _)| k == n)
                .map(|r| r.1)
                .unwrap()
        };
        assert_eq!(reg("TRCIDR0") & 1 << 23, 0);
        assert_eq!(reg("TRCIDR2") & 1 << 31, 0);
        assert_eq!(reg("TRCCONFIGR") & 0x1818, 0);
    }

    /// A few seeds with everything on: every ETE feature turns up, and
    /// the trace decodes to its truth.
    #[test]
    fn every_ete_feature_turns_up() {
        let mut total = Stats::default();
        for seed in 0..8 {
            let mut o = EteOptions::all(Choice::On);
            o.etmv4.branch_broadcast = Choice::Off;
            o.multi_session = if seed % 2 == 0 { Choice::On } else { Choice::Off };
            let (g, st) = generate_with_stats(&opts(seed), &o);
            if let Err(e) = check(&g) {
                panic!("seed {seed} ({}): {e}", g.spec.description);
            }
            total.add(&st);
        }
        let t = &total;
        assert!(t.ts_markers > 10 && t.ites > 10 && t.wfx > 10, "{t:?}");
        assert!(
            t.tx_starts > 10 && t.tx_nested > 0 && t.tx_commits > 5 && t.tx_fails > 5,
            "{t:?}"
        );
        assert!(t.realm_root > 10 && t.exception_returns > 10 && t.rs_hits > 5, "{t:?}");
    }

    /// Every ETE packet form the generator knows turns up, and nothing
    /// reads as a bad or reserved packet.
    #[test]
    fn every_ete_packet_turns_up() {
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
                        PktType::TraceInfo if p.trace_info.in_trans_state() => name += "+TSTATE",
                        PktType::Ctxt | PktType::AddrCtxtL64IS0 | PktType::AddrCtxtL32IS0
                            if p.context.updated && p.context.nse =>
                        {
                            name = format!(
                                "{}{}",
                                if p.context.ns { "Realm" } else { "Root" },
                                if p.pkt_type == PktType::Ctxt { "" } else { "+addr" }
                            )
                        }
                        _ => {}
                    }
                    self.0.borrow_mut().insert(name);
                }
                DatapathResp::Cont
            }
        }
        let seen = Arc::new(Lock::new(BTreeSet::new()));
        for seed in 0..12 {
            let o = EteOptions::all(Choice::On)
                .with("bb", Choice::Off)
                .with("multi", if seed % 3 == 0 { Choice::On } else { Choice::Off });
            let g = generate_with(&opts(seed), &o);
            let reg = |n: &str| {
                g.spec.devices[1]
                    .regs
                    .iter()
                    .find(|(k, _)| k == n)
                    .map_or(0, |r| r.1 as u32)
            };
            let cfg = EtmV4Config {
                idr0: reg("TRCIDR0"),
                idr1: reg("TRCIDR1"),
                idr2: reg("TRCIDR2"),
                configr: reg("TRCCONFIGR"),
                traceidr: reg("TRCTRACEIDR"),
                devarch: Some(reg("TRCDEVARCH")),
                arch: ArchProfile::new(ArchVersion::Aa64, CoreProfile::CortexA),
                ..Default::default()
            };
            for b in &g.spec.buffers {
                let mut proc = EtmV4PktProc::new(cfg.clone(), None);
                let mut sink = Sink(seen.clone());
                let mut out = PacketOut {
                    mon: None,
                    sink: Some(&mut sink),
                };
                let (_, used) = proc.process(0, &b.data, &mut out);
                assert_eq!(used, b.data.len());
            }
        }
        let seen = seen.borrow();
        for name in [
            "I_TRACE_INFO+TSTATE",
            "I_TS_MARKER",
            "I_TIMESTAMP",
            "I_ITE",
            "I_TRANS_ST",
            "I_TRANS_COMMIT",
            "I_TRANS_FAIL",
            "Realm",
            "Root",
            "Realm+addr",
            "Root+addr",
            "I_EXCEPT",
            "I_CCNT_F1",
            "I_ADDR_MATCH",
            "I_ATOM_F5",
        ] {
            assert!(seen.contains(name), "no {name} in {seen:?}");
        }
        assert!(
            !seen
                .iter()
                .any(|n| n.starts_with("I_BAD") || n.starts_with("I_RESERVED") || n == "I_EXCEPT_RTN"),
            "{seen:?}"
        );
    }
}
