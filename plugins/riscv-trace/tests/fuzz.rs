//! Mutation fuzzing: damaged trace buffers, odd register values and
//! mangled device files must never panic or hang the plug-in; whatever
//! comes out stays bounded by the input.

mod common;

use std::path::Path;

use common::*;
use coresight_decode::builder::TreeBuilder;
use coresight_decode::decoder::DecodeMode;
use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;
use coresight_decode::snapshot::Snapshot;
use riscv_trace::config::{CoreIsa, RiscvTraceConfig, TraceReg};
use riscv_trace::encoder::Encoded;

fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(6) {
        if data.is_empty() {
            data.push(rng.next_u64() as u8);
        }
        let at = rng.below(data.len() as u64) as usize;
        match rng.below(6) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data[at] = rng.next_u64() as u8,
            2 => {
                let n = (rng.below(16) as usize).min(data.len() - at);
                for b in &mut data[at..at + n] {
                    *b = [0x00, 0xdd, 0xee, 0xff, 0x11][rng.below(5) as usize];
                }
            }
            3 => data.truncate(at),
            4 => {
                let b = rng.next_u64() as u8;
                data.insert(at, b);
            }
            _ => {
                let n = (rng.below(8) as usize).min(data.len() - at);
                data.drain(at..at + n);
            }
        }
    }
}

/// Decodes `data` with `config`; the element count is bounded by the input.
fn decode_bounded(p: &Program, data: Vec<u8>, config: RiscvTraceConfig, wait: u32, chunk: usize) {
    let nibbles = data.len() as u64 * 2;
    let enc = Encoded { data, config };
    let elems = decode(&enc, p, wait, chunk);
    // Each packet walks at most the whole program (then loses sync).
    let bound = (nibbles + 8) * (p.starts.len() as u64 + 8);
    assert!(
        (elems.len() as u64) <= bound,
        "{} elements from {nibbles} nibbles",
        elems.len()
    );
    assert_eq!(elems.last().map(|(_, e)| e.elem_type), Some(ElemType::EoTrace));
}

#[test]
fn damaged_trace_never_panics_or_hangs() {
    let isas = [
        CoreIsa {
            xlen: 32,
            compressed: true,
        },
        CoreIsa {
            xlen: 64,
            compressed: false,
        },
        CoreIsa {
            xlen: 64,
            compressed: true,
        },
    ];
    let mut runs = 0;
    for seed in 0..60u64 {
        let mut rng = Rng::new(0xf00d + seed);
        let isa = isas[(seed % 3) as usize];
        let p = random_program(&mut rng, isa, 0x4000_0000, 120);
        let steps = random_execution(&mut rng, &p, 400, 1 + seed % 3);
        let trace = TraceReg::SUPPORTED | ((rng.next_u64() as u32 & 0xff) << 16);
        let words = [24, 40, 400, 4000][rng.below(4) as usize];
        let enc = encode(&p, trace, words, &steps);
        for m in 0..12 {
            let mut data = enc.data.clone();
            mutate(&mut rng, &mut data);
            let mut config = enc.config;
            if m % 3 == 0 {
                // Another reading of the same bytes: other options, another
                // write pointer, wrapped or not.
                config.trace = TraceReg(rng.next_u64() as u32);
                config.tbufwrite = config.tbufstart + 4 * rng.below(config.buffer_words() + 1);
            }
            let (wait, chunk) = [(0, 4096), (1, 1), (3, 7)][m % 3];
            decode_bounded(&p, data, config, wait, chunk);
            runs += 1;
        }
        // Pure noise as well.
        let noise: Vec<u8> = (0..rng.below(2000)).map(|_| rng.next_u64() as u8).collect();
        let mut config = enc.config;
        config.trace = TraceReg(rng.next_u64() as u32);
        decode_bounded(&p, noise, config, 0, 64);
    }
    assert_eq!(runs, 720);
}

const GOOD_DEVICE: &str = "[device]\nname=rvtrace_0\nclass=trace_source\ntype=RISCV_TRACE\n[regs]\n";

/// Files that stay the same in every round.
fn fixed_files(dir: &Path, p: &Program) {
    let files: [(&str, &[u8]); 3] = [
        ("snapshot.ini", b"[snapshot]\nversion=1.0\n[device_list]\ndevice0=cpu_0.ini\ndevice1=rvtrace_0.ini\n[trace]\nmetadata=trace.ini\n"),
        (
            "trace.ini",
            b"[trace_buffers]\nbuffers=buffer0\n[buffer0]\nname=tbuf\nfile=trace.bin\nformat=source_data\n[source_buffers]\nrvtrace_0=tbuf\n[core_trace_sources]\ncpu_0=rvtrace_0\n",
        ),
        ("text.bin", &p.bytes),
    ];
    for (n, d) in files {
        std::fs::write(dir.join(n), d).unwrap();
    }
}

fn round_files(dir: &Path, device: &str, core: &str, trace: &[u8]) {
    for (n, d) in [
        ("cpu_0.ini", core.as_bytes()),
        ("rvtrace_0.ini", device.as_bytes()),
        ("trace.bin", trace),
    ] {
        std::fs::write(dir.join(n), d).unwrap();
    }
}

#[test]
fn mangled_device_files_never_panic() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rv_fuzz_ini");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(77);
    let p = random_program(
        &mut rng,
        CoreIsa {
            xlen: 64,
            compressed: true,
        },
        0x1_0000,
        100,
    );
    let steps = random_execution(&mut rng, &p, 300, 2);
    let enc = encode(&p, TraceReg::SUPPORTED | TraceReg::EMIT_ALL, 200, &steps);
    let c = enc.config;
    let values = [
        0,
        1,
        3,
        4,
        0x60,
        c.tbufstart,
        c.tbufend,
        c.tbufwrite,
        u32::MAX as u64,
        u64::MAX,
        u64::MAX - 3,
        1 << 40,
        1 << 63,
    ];
    let names = [
        "trace",
        "tbufstart",
        "tbufend",
        "tbufwrite",
        "traceid",
        "TRACE",
        "tbufEnd",
    ];
    let cores = [
        "RV64GC",
        "RV32IMAC",
        "rv64g",
        "RV128GC",
        "RV",
        "Cortex-A53",
        "RV64GC_zba",
        "",
    ];
    fixed_files(&dir, &p);
    let mut built = 0;
    for round in 0..250 {
        let mut regs = vec![
            ("trace".to_string(), c.trace.0 as u64),
            ("tbufstart".to_string(), c.tbufstart),
            ("tbufend".to_string(), c.tbufend),
            ("tbufwrite".to_string(), c.tbufwrite),
        ];
        for _ in 0..rng.below(3) {
            match rng.below(3) {
                0 if !regs.is_empty() => {
                    let i = rng.below(regs.len() as u64) as usize;
                    regs.remove(i);
                }
                1 => {
                    let n = names[rng.below(names.len() as u64) as usize].to_string();
                    regs.push((n, values[rng.below(values.len() as u64) as usize]));
                }
                _ if !regs.is_empty() => {
                    let i = rng.below(regs.len() as u64) as usize;
                    regs[i].1 = if rng.chance(1, 2) {
                        values[rng.below(values.len() as u64) as usize]
                    } else {
                        rng.next_u64()
                    };
                }
                _ => {}
            }
        }
        let mut device = GOOD_DEVICE.to_string();
        for (n, v) in &regs {
            device.push_str(&format!("{n}=0x{v:x}\n"));
        }
        let mut bytes = device.into_bytes();
        if round % 2 == 1 {
            mutate(&mut rng, &mut bytes);
        }
        let core_type = cores[rng.below(cores.len() as u64) as usize];
        let core = format!(
            "[device]\nname=cpu_0\nclass=core\ntype={core_type}\n[dump1]\nfile=text.bin\naddress=0x{:x}\n",
            p.base
        );
        let mut trace = enc.data.clone();
        if round % 3 == 0 {
            mutate(&mut rng, &mut trace);
        }
        round_files(&dir, &String::from_utf8_lossy(&bytes), &core, &trace);
        let Ok(ss) = Snapshot::load(&dir) else { continue };
        let log = shared(MsgLogger::capture());
        for mode in [DecodeMode::FullDecode, DecodeMode::PacketsOnly] {
            let tree = TreeBuilder::with_registry(&ss, riscv_trace::registry())
                .build("tbuf", mode, |t| t.set_error_output(Some(log.clone())));
            if let Ok(mut tree) = tree {
                built += 1;
                if mode == DecodeMode::PacketsOnly {
                    tree.attach_packet_printer(0, log.clone(), false, 0).unwrap();
                }
                run_tree(&mut tree, &trace, 333);
            }
        }
    }
    // Enough of the rounds kept a usable configuration to decode something.
    assert!(built > 25, "{built} trees built");
}
