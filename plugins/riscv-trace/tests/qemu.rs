//! Real programs: executions of small C programs under qemu-riscv64 (the
//! fixtures made by `scripts/make_fixtures.sh`) are encoded, decoded with
//! the ELF file as the memory image, and compared with QEMU's instruction
//! stream. `RISCV_TRACE_FIXTURES=DIR` runs the same checks on fixtures
//! regenerated into DIR (CI does this to show the script still works).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::*;
use coresight_decode::memory::MemSpace;
use riscv_trace::config::TraceReg;
use riscv_trace::encoder::{Executed, Mode};
use riscv_trace::instr::classify;

fn fixtures_dir() -> PathBuf {
    match std::env::var_os("RISCV_TRACE_FIXTURES") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
    }
}

fn read_pcs(path: &Path) -> Vec<u64> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut text = String::new();
    lzma_rust2::XzReader::new(f, false).read_to_string(&mut text).unwrap();
    text.lines()
        .map(|l| u64::from_str_radix(l.trim(), 16).unwrap_or_else(|_| panic!("{}: bad line '{l}'", path.display())))
        .collect()
}

/// QEMU's executed PCs as an instruction stream (user mode, one hart), with
/// a timestamp every 97 instructions.
fn execution(p: &Program, pcs: &[u64]) -> Vec<Executed> {
    let user = Mode { prv: 0, ie: false };
    pcs.iter()
        .enumerate()
        .map(|(i, &pc)| {
            let size = classify(p.isa, pc, p.fetch(pc).expect("executed PC inside the ELF's text"))
                .unwrap()
                .size as u64;
            Executed {
                hart: 0,
                pc,
                next_pc: pcs.get(i + 1).copied().unwrap_or(pc + size),
                mode: user,
                next_mode: user,
                interrupt: None,
                timestamp: (i % 97 == 0).then_some(1000 + 3 * i as u64),
                access: None,
            }
        })
        .collect()
}

const CONFIGS: [u32; 4] = [
    TraceReg::SUPPORTED | TraceReg::EMIT_ALL,
    TraceReg::SUPPORTED | TraceReg::EMIT_PC,
    TraceReg::SUPPORTED | TraceReg::EMIT_PC | TraceReg::EMIT_BRANCH | TraceReg::EMIT_PRIV | TraceReg::EMIT_TIMESTAMP,
    TraceReg::SUPPORTED | TraceReg::EMIT_PC | TraceReg::EMIT_PRIV | TraceReg::EMIT_TIMESTAMP,
];

#[test]
fn qemu_executions_round_trip_with_the_elf_as_memory() {
    let dir = fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".elf").map(str::to_string))
        .collect();
    names.sort();
    if std::env::var_os("RISCV_TRACE_FIXTURES").is_none() {
        assert_eq!(names, ["calls", "sort", "strings"]);
    }
    assert!(!names.is_empty(), "no fixtures in {}", dir.display());
    let mut with_c = [false; 2];
    for name in &names {
        let elf_path = dir.join(format!("{name}.elf"));
        let p = program_from_elf(&std::fs::read(&elf_path).unwrap());
        with_c[p.isa.compressed as usize] = true;
        let pcs = read_pcs(&dir.join(format!("{name}.pcs.xz")));
        assert!(pcs.len() > 1000, "{name}: {} instructions", pcs.len());
        let steps = execution(&p, &pcs);
        for trace in CONFIGS {
            let enc = encode(&p, trace, pcs.len() as u64 * 6 + 64, &steps);
            let elems = decode_with(&enc, 0, 4096, |tree| {
                let n = tree
                    .mem_mapper()
                    .unwrap()
                    .borrow_mut()
                    .add_elf_file(&elf_path, MemSpace::ANY)
                    .unwrap();
                assert!(n > 0);
            });
            let what = format!("{name} trace=0x{trace:x}");
            assert_eq!(trouble(&elems), Vec::<String>::new(), "{what}");
            let got = observe(&elems, &p, true);
            let want = expect(&steps, &p, trace);
            assert_same(&got, &want, &what);
            // The instruction stream is QEMU's, address for address.
            let decoded: Vec<u64> = got.instrs.iter().map(|&(_, a)| a).collect();
            assert_eq!(decoded, pcs, "{what}");
            assert!(got.branches.len() > 50, "{what}: {} branches", got.branches.len());
            if TraceReg(trace).emit_timestamp() {
                assert_eq!(got.timestamps.len(), pcs.len().div_ceil(97), "{what}");
            }
            if TraceReg(trace).emit_priv() {
                assert_eq!(got.modes, [(0, 0, 0, false)], "{what}: user mode throughout");
            }
        }
    }
    if std::env::var_os("RISCV_TRACE_FIXTURES").is_none() {
        assert_eq!(with_c, [true, true], "programs with and without C");
    }
}
