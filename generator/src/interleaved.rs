//! Several ETMv4 trace units in one formatted buffer: what a funnel makes
//! of a many-core system's trace. Each source runs its own A64 program at
//! its own addresses (so one memory map holds them all), with its own
//! trace unit options drawn from the seed, and its bytes are interleaved
//! in uneven pieces in CoreSight frames.

use crate::etmv4::{self, Config, Encoder, Etmv4Options, Gen};
use crate::flow::{self, Ctx, WalkCfg};
use crate::formatter::{FormatterConfig, FrameFormatter};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, DumpSpec, SnapshotSpec};
use crate::{Generated, Rng, Truth, a64};

/// The most sources: trace IDs 0x10 up to 0x6f.
pub const MAX_SOURCES: u32 = 96;

/// One source's part of an interleaved capture.
#[derive(Clone, Debug)]
pub struct SourceTruth {
    pub trace_id: u8,
    /// The trace unit options, as a snapshot description gives them.
    pub description: String,
    /// What this source's elements decode to, in order.
    pub truth: Vec<Truth>,
}

/// Generates `sources` ETMv4 sources (A-profile, A64 code) interleaved in
/// one formatted buffer, trace IDs 0x10 upwards. `length` is each source's
/// approximate number of waypoints. The snapshot's [`Generated::truth`] is
/// empty: each source's truth is in the list returned with it, as the
/// order between sources is the funnel's.
pub fn generate(
    seed: u64,
    sources: u32,
    length: usize,
    o: &Etmv4Options,
) -> Result<(Generated, Vec<SourceTruth>), String> {
    if sources == 0 || sources > MAX_SOURCES {
        return Err(format!("{sources} sources: between 1 and {MAX_SOURCES} have trace IDs"));
    }
    let mut devices = Vec::new();
    let mut links = Vec::new();
    let mut cores = Vec::new();
    let mut streams = Vec::new();
    let mut truths = Vec::new();
    for k in 0..sources {
        let mut rng = Rng::new(seed.wrapping_add(u64::from(k).wrapping_mul(0x1_0000_0001)) ^ 0x5eed_1e4f);
        let cfg = Config::pick(&mut rng, o, false);
        // A megabyte of address space each for the code and the handlers.
        let base = 0x40_0000 + u64::from(k) * 0x10_0000;
        let hbase = 0x8000_0000 + u64::from(k) * 0x10_0000;
        let n_blocks = 20 + rng.below(60) as usize;
        let prog = a64::flow_program(
            &mut rng,
            base,
            n_blocks,
            cfg.exceptions.then_some(hbase),
            cfg.exceptions,
        );
        let start = Ctx {
            el: if cfg.exceptions && !cfg.ctx_changes {
                1
            } else {
                rng.below(2) as u8
            },
            secure: !cfg.ctx_changes && rng.chance(1, 4),
            nse: false,
            aarch64: true,
            cid: rng.next_u64() as u32,
            vmid: rng.next_u64() as u32,
        };
        let wcfg = WalkCfg::basic(cfg.exceptions, cfg.ctx_changes, false, 2, start);
        let segs = flow::walk(&mut rng, &prog, &wcfg, length.max(1));
        let trace = encode(&cfg, &mut rng, &segs);
        let trace_id = 0x10 + k as u8;
        let core_name = ["Cortex-A53", "Cortex-A57", "Cortex-A72"][rng.below(3) as usize];
        let mut core = DeviceSpec::core(&format!("cpu_{k}"), core_name);
        for (i, (addr, code)) in prog.images.iter().enumerate() {
            core.dumps.push(DumpSpec {
                file: format!("code{k}_{i}.bin"),
                address: *addr,
                data: code.clone(),
                space: String::new(),
            });
        }
        let etm = DeviceSpec::trace_source(
            &format!("etm_{k}"),
            "ETM4.0",
            etmv4::registers(&mut rng, &cfg, trace_id),
        );
        links.push((etm.name.clone(), "ETB_0".to_string()));
        cores.push((core.name.clone(), etm.name.clone()));
        devices.push(core);
        devices.push(etm);
        truths.push(SourceTruth {
            trace_id,
            description: cfg.describe(),
            truth: trace.1,
        });
        streams.push((trace_id, trace.0));
    }
    let mut rng = Rng::new(seed ^ 0xf0_11e1);
    let data = interleave(&streams, &mut rng);
    let spec = SnapshotSpec {
        description: format!("trc_gen etmv4 seed {seed}: {sources} sources interleaved"),
        devices,
        buffers: vec![BufferSpec {
            name: "ETB_0".into(),
            file: "trace.bin".into(),
            format: "coresight".into(),
            data,
        }],
        source_buffers: links,
        core_trace_sources: cores,
    };
    Ok((
        Generated {
            spec,
            truth: Vec::new(),
        },
        truths,
    ))
}

/// One source's execution as trace bytes and truth.
fn encode(cfg: &Config, rng: &mut Rng, segs: &[flow::Seg]) -> (Vec<u8>, Vec<Truth>) {
    let mut enc = Encoder::new(256 + rng.below(1024) as usize);
    enc.f45 = cfg.f45;
    enc.exact = cfg.exact;
    enc.is64 = true;
    enc.vary = Some(Rng::new(rng.next_u64()));
    let ts = rng.below(1 << 40);
    let (out, truth, _, _) = Gen::new(cfg, enc, ts, segs.len() * 2).run(rng, segs);
    (out, truth)
}

/// The sources' streams in CoreSight frames, in uneven pieces taken from a
/// source drawn at random each time.
fn interleave(streams: &[(u8, Vec<u8>)], rng: &mut Rng) -> Vec<u8> {
    let mut f = FrameFormatter::new(FormatterConfig::default());
    let mut at = vec![0usize; streams.len()];
    loop {
        let left: Vec<usize> = (0..streams.len()).filter(|&i| at[i] < streams[i].1.len()).collect();
        if left.is_empty() {
            break;
        }
        let i = left[rng.below(left.len() as u64) as usize];
        let (id, t) = &streams[i];
        let n = (1 + rng.below(48) as usize).min(t.len() - at[i]);
        f.push(*id, &t[at[i]..at[i] + n]);
        at[i] += n;
    }
    f.finish()
}
