//! Generated perf.data recordings read back by the perf.data reader give what was written,
//! and their AUX trace decodes to the generator's truth. One test runs Debian's `perf script`
//! on them (ignored by default: it needs the linux-perf package).

use coresight_generator::BufferLayout;
use coresight_generator::etmv4::{Choice, Etmv4Options};
use coresight_generator::perf_data::{
    PID_BASE, PerfOptions, PerfProtocol, PerfRecording, TEXT_ADDR, check_perf_data, generate_perf_data,
};
use coresight_generator::{Truth, execution::elf_images};
use coresight_perf_data::{AuxFormat, Recording, ThreadEventKind, TraceUnit};

fn opts(protocol: PerfProtocol, layout: BufferLayout, cpus: u32, seed: u64) -> PerfOptions {
    PerfOptions {
        seed,
        protocol,
        layout,
        cpus,
        length: 300,
        elf_path: "/tmp/trc_gen_test_prog".into(),
        ..PerfOptions::default()
    }
}

const KINDS: [(PerfProtocol, BufferLayout); 4] = [
    (PerfProtocol::Etmv4, BufferLayout::Formatted),
    (PerfProtocol::Etmv4, BufferLayout::Unformatted),
    (PerfProtocol::Ete, BufferLayout::Formatted),
    (PerfProtocol::Ete, BufferLayout::Unformatted),
];

/// The reader gives back the configuration, maps, threads and buffers written.
fn read_back(r: &PerfRecording, o: &PerfOptions) {
    let rec = Recording::parse(&r.perf_data).unwrap_or_else(|e| panic!("{e}"));
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    let cs = rec.cs_etm.as_ref().expect("cs_etm info");
    assert_eq!(cs.cpus.len(), o.cpus as usize);
    for c in &r.cpus {
        let got = cs.cpu(c.cpu).expect("a block per CPU");
        assert_eq!(got, &c.config);
        assert_eq!(got.trace_id(), c.trace_id);
        match (o.protocol, got.unit) {
            (PerfProtocol::Etmv4, TraceUnit::Etmv4(e)) | (PerfProtocol::Ete, TraceUnit::Ete(e)) => {
                // Context IDs traced, no VMID (perf would take it for the PID).
                assert_ne!(e.trcconfigr & 1 << 6, 0);
                assert_eq!(e.trcconfigr & 1 << 7, 0);
            }
            (p, u) => panic!("{p:?} generated, {u:?} read"),
        }
        // Each process maps the ELF, with its build id.
        let m = rec
            .maps
            .iter()
            .find(|m| m.pid == c.pid as i32)
            .expect("an MMAP2 per process");
        assert_eq!(
            (m.start, m.pgoff, m.filename.as_str()),
            (TEXT_ADDR, r.elf.text_offset, o.elf_path.as_str())
        );
        assert_eq!(m.build_id.map(|b| b.as_bytes().to_vec()), Some(r.elf.build_id.to_vec()));
        assert!(
            rec.thread_events
                .iter()
                .any(|t| t.pid == c.pid as i32 && matches!(t.kind, ThreadEventKind::Comm { .. }))
        );
    }
    assert_eq!(
        rec.build_id_for(&o.elf_path).map(|b| b.as_bytes().to_vec()),
        Some(r.elf.build_id.to_vec())
    );
    assert_eq!(rec.buffers.len(), r.buffers.len());
    for (got, want) in rec.buffers.iter().zip(&r.buffers) {
        assert_eq!(
            (got.cpu, got.aux_offset, got.size),
            (want.cpu, want.aux_offset, want.size)
        );
        let format = match o.layout {
            BufferLayout::Formatted => AuxFormat::Formatted,
            BufferLayout::Unformatted => AuxFormat::Raw,
        };
        assert_eq!(got.format, format);
        assert!(!got.discontinuous);
    }
    // The ELF's code is what the trace ran.
    let images = elf_images(&r.elf.bytes).unwrap();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].0, TEXT_ADDR);
    for c in &r.cpus {
        for f in &c.functions {
            assert!(f.addr >= TEXT_ADDR && f.addr + f.size <= TEXT_ADDR + images[0].1.len() as u64);
        }
    }
}

#[test]
fn every_kind_reads_back_and_decodes_to_the_truth() {
    for (protocol, layout) in KINDS {
        for cpus in [1, 2, 3] {
            for seed in 1..4 {
                let o = opts(protocol, layout, cpus, seed);
                let r = generate_perf_data(&o).unwrap();
                read_back(&r, &o);
                let what = format!("{protocol:?} {layout:?} {cpus} CPUs seed {seed}");
                let n = check_perf_data(&r).unwrap_or_else(|e| panic!("{what}: {e}"));
                let want: usize = r.cpus.iter().map(|c| c.truth.len()).sum();
                assert!(n >= want && want > 0, "{what}: {n} items decoded, {want} in the truth");
            }
        }
    }
}

#[test]
fn per_thread_recording() {
    let o = PerfOptions {
        per_thread: true,
        ..opts(PerfProtocol::Etmv4, BufferLayout::Formatted, 1, 5)
    };
    let r = generate_perf_data(&o).unwrap();
    let rec = Recording::parse(&r.perf_data).unwrap();
    // No CPU or time in the samples; the buffer is the thread's.
    assert_eq!(rec.attrs()[0].sample_type & (0x4 | 0x80), 0);
    assert_eq!(rec.buffers[0].cpu, None);
    assert_eq!(rec.buffers[0].tid, Some(PID_BASE));
    check_perf_data(&r).unwrap();
    assert!(generate_perf_data(&PerfOptions { cpus: 2, ..o.clone() }).is_err());
}

#[test]
fn copies_fill_the_asked_size() {
    let o = PerfOptions {
        min_aux_bytes: 300_000,
        etmv4: Etmv4Options::all(Choice::Off),
        ..opts(PerfProtocol::Ete, BufferLayout::Unformatted, 2, 9)
    };
    let r = generate_perf_data(&o).unwrap();
    assert!(r.aux_bytes() >= 300_000);
    // Every buffer holds whole copies of its CPU's trace.
    for b in &r.buffers {
        let c = r.cpus.iter().find(|c| Some(c.cpu) == b.cpu).unwrap();
        assert_eq!(b.size as usize, b.copies * c.trace.len());
    }
    assert_eq!(
        check_perf_data(&r).unwrap(),
        r.buffers
            .iter()
            .map(|b| b.copies * r.cpus.iter().find(|c| Some(c.cpu) == b.cpu).unwrap().truth.len())
            .sum::<usize>()
    );
}

#[test]
fn same_seed_same_file() {
    let o = opts(PerfProtocol::Etmv4, BufferLayout::Formatted, 2, 11);
    let a = generate_perf_data(&o).unwrap();
    let b = generate_perf_data(&o).unwrap();
    assert_eq!(a.perf_data, b.perf_data);
    assert_eq!(a.elf.bytes, b.elf.bytes);
    let c = generate_perf_data(&PerfOptions { seed: 12, ..o }).unwrap();
    assert_ne!(a.elf.build_id, c.elf.build_id);
}

/// Taken branches as perf's `--itrace=b` reports them, from a CPU's truth: the first range
/// starts from 0 (trace on), then each taken branch goes to the next range's start. (The
/// generated trace is never filtered off, so the contexts that periodic syncs restate are no
/// gaps.)
fn expected_branches(truth: &[Truth]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut prev: Option<(u64, bool)> = None;
    for t in truth {
        if let Truth::Range { start, end, exec, .. } = *t {
            match prev {
                None => out.push((0, start)),
                Some((last, true)) => out.push((last, start)),
                Some(_) => {}
            }
            prev = Some((end - 4, exec));
        }
    }
    out
}

/// Runs Debian's perf script on generated files and checks what it decodes against the truth:
/// instruction samples inside the ELF's functions, branch samples that are the truth's taken
/// branches, in order, from the first on.
#[test]
#[ignore = "needs Debian linux-perf; .ci/run runs it with --ignored"]
fn debian_perf_script_decodes_generated_files() {
    let dir = std::env::temp_dir().join(format!("trc_gen_perf_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (protocol, layout) in KINDS {
        // perf 6.1 decodes every unformatted (TRBE) buffer with the first CPU's trace unit
        // configuration and trace ID, so several CPUs' raw streams are only checked for the
        // first CPU (see the report in formats/perf-data/scripts/perf_script_check.sh).
        for cpus in [1, 2] {
            let name = format!(
                "{}-{}-{cpus}cpu",
                protocol.name(),
                if layout == BufferLayout::Formatted {
                    "fmt"
                } else {
                    "raw"
                }
            );
            let file = dir.join(format!("{name}.data"));
            let elf = dir.join(format!("{name}.elf"));
            let o = PerfOptions {
                elf_path: elf.to_string_lossy().into_owned(),
                ..opts(protocol, layout, cpus, 3)
            };
            let r = generate_perf_data(&o).unwrap();
            std::fs::write(&file, &r.perf_data).unwrap();
            std::fs::write(&elf, &r.elf.bytes).unwrap();
            let run = |args: &[&str]| {
                let out = std::process::Command::new("perf")
                    .arg("script")
                    .arg("-i")
                    .arg(&file)
                    .args(args)
                    .env("HOME", &dir)
                    .output()
                    .expect("perf runs (apt-get install linux-perf)");
                assert!(
                    out.status.success(),
                    "{name}: perf script {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8(out.stdout).unwrap()
            };
            // Instructions: every sample inside a generated function of its CPU's program.
            let insns = run(&["--itrace=i100", "-F", "tid,ip,sym,dso"]);
            let mut n_insns = 0;
            for line in insns.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                let tid: u32 = f[0].parse().unwrap();
                let ip = u64::from_str_radix(f[1], 16).unwrap();
                let c = &r.cpus[(tid - PID_BASE) as usize];
                let func = c
                    .functions
                    .iter()
                    .find(|x| ip >= x.addr && ip < x.addr + x.size)
                    .unwrap_or_else(|| panic!("{name}: {line}: not in a function of CPU {}", c.cpu));
                assert_eq!(f[2], func.name, "{name}: {line}");
                n_insns += 1;
            }
            assert!(n_insns > 0, "{name}: no instruction samples");
            // Branches: the truth's, in order.
            let branches = run(&["--itrace=b", "-F", "tid,ip,addr"]);
            for c in &r.cpus {
                if layout == BufferLayout::Unformatted && c.cpu > 0 {
                    continue;
                }
                let got: Vec<(u64, u64)> = branches
                    .lines()
                    .filter_map(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        (f.len() == 4 && f[0] == c.pid.to_string()).then(|| {
                            (
                                u64::from_str_radix(f[1], 16).unwrap(),
                                u64::from_str_radix(f[3], 16).unwrap(),
                            )
                        })
                    })
                    .collect();
                let want = expected_branches(&c.truth);
                assert!(got.len() > 10, "{name}: CPU {}: {} branch samples", c.cpu, got.len());
                // The first real branch (after the trace-on sample) is the truth's.
                assert_eq!(got[1], want[1], "{name}: CPU {}: first branch", c.cpu);
                // perf leaves out a few branches at the end of a buffer: compare what it gives.
                assert!(
                    got.len() + 16 >= want.len(),
                    "{name}: CPU {}: {} of {}",
                    c.cpu,
                    got.len(),
                    want.len()
                );
                if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
                    panic!(
                        "{name}: CPU {}: branch {i}: perf {:x?}, truth {:x?} (perf {:x?}, truth {:x?} around it)",
                        c.cpu,
                        got[i],
                        want[i],
                        &got[i.saturating_sub(2)..(i + 3).min(got.len())],
                        &want[i.saturating_sub(2)..(i + 3).min(want.len())]
                    );
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kernel_and_module_recordings_decode_to_the_truth() {
    use coresight_generator::perf_data::{KERNEL_TEXT, MODULE_BASE, MODULE_NAME, PerfSpace};
    for (space, path) in [
        (PerfSpace::Kernel, "/tmp/unused"),
        (PerfSpace::Module, "/lib/modules/6.1.0/extra/kgen.ko"),
    ] {
        for (protocol, layout) in KINDS {
            let o = PerfOptions {
                space,
                elf_path: path.into(),
                ..opts(protocol, layout, 2, 31)
            };
            let r = generate_perf_data(&o).unwrap();
            let n = check_perf_data(&r).unwrap_or_else(|e| panic!("{space:?} {protocol:?} {layout:?}: {e}"));
            assert!(n > 100);
            let rec = Recording::parse(&r.perf_data).unwrap();
            // One map, the kernel's (pid -1), before the trace.
            let maps: Vec<_> = rec.maps.iter().filter(|m| m.executable).collect();
            assert_eq!(maps.len(), 1);
            assert_eq!(maps[0].pid, -1);
            let k = r.kernel.as_ref().unwrap();
            match space {
                PerfSpace::Kernel => {
                    assert_eq!(maps[0].filename, "[kernel.kallsyms]_text");
                    assert_eq!((maps[0].start, maps[0].pgoff), (KERNEL_TEXT, KERNEL_TEXT));
                    assert!(k.module.is_none());
                }
                _ => {
                    assert_eq!(maps[0].filename, path);
                    assert_eq!((maps[0].start, maps[0].pgoff), (MODULE_BASE, 0));
                    assert!(k.modules.starts_with(&format!("{MODULE_NAME} ")));
                    assert!(k.kallsyms.contains(&format!("\t[{MODULE_NAME}]")));
                    let m = k.module.as_ref().unwrap();
                    assert_eq!(
                        maps[0].build_id.map(|b| b.as_bytes().to_vec()),
                        Some(m.build_id.to_vec())
                    );
                }
            }
            // kcore holds the code at its addresses.
            let segs = elf_images(&k.kcore).unwrap();
            let f = &r.cpus[0].functions[0];
            assert!(
                segs.iter()
                    .any(|(a, b)| *a <= f.addr && f.addr + f.size <= a + b.len() as u64),
                "{space:?}: {:#x} not in kcore",
                f.addr
            );
        }
    }
}
