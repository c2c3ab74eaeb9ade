//! Decoding recordings made in the test: generated ETMv4/ETE executions laid out as perf.data
//! (coresight-generator's `perf_data`), checked against the generator's truth; AutoFDO counts,
//! saturation and `--binary`; perf script lines of a hand-made case; damaged recordings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coresight_decode::arch::InstrType;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_generator::perf_data::{PerfOptions, PerfProtocol, PerfRecording, generate_perf_data};
use coresight_generator::{BufferLayout, Rng, Truth, damage};
use coresight_perf_data::autofdo::{AutoFdoProfile, BinaryKey, Regex, add_recording};
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::decode::{DecodeOptions, ElementInfo, Event, RecordingDecoder};
use coresight_perf_data::memory::Model;
use coresight_perf_data::script::{Fields, Itrace, ScriptWriter};
use coresight_perf_data::{CpuConfig, CsEtmInfo, Etmv4Config, Recording, SampleFields, Writer, WriterOptions};

/// A folder of its own for a test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("perf-data-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A generated recording and a symbol folder holding its ELF.
fn generated(
    seed: u64,
    layout: BufferLayout,
    protocol: PerfProtocol,
    cpus: u32,
    name: &str,
) -> (PerfRecording, PathBuf) {
    let opts = PerfOptions {
        seed,
        protocol,
        layout,
        cpus,
        length: 150,
        elf_path: "/data/local/tmp/gen_prog".into(),
        ..Default::default()
    };
    let r = generate_perf_data(&opts).unwrap();
    let dir = scratch(name);
    std::fs::write(dir.join("gen_prog"), &r.elf.bytes).unwrap();
    (r, dir)
}

fn search(dir: &Path) -> SymbolSearch {
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    s.add_symdir(dir).unwrap();
    s
}

fn ranges(truth: &[Truth]) -> Vec<(u64, u64, u32, bool)> {
    truth
        .iter()
        .filter_map(|t| match *t {
            Truth::Range {
                start,
                end,
                count,
                exec,
            } => Some((start, end, count, exec)),
            _ => None,
        })
        .collect()
}

/// Decodes and gathers each CPU's instruction ranges, checking they carry the CPU's process.
fn decoded_ranges(r: &PerfRecording, dir: &Path) -> HashMap<u32, Vec<(u64, u64, u32, bool)>> {
    let rec = Recording::parse(&r.perf_data).unwrap();
    let model = Arc::new(Model::new(&rec, search(dir)));
    let mut dec = RecordingDecoder::new(&rec, model, DecodeOptions::default()).unwrap();
    let mut got: HashMap<u32, Vec<_>> = HashMap::new();
    let pids: HashMap<u32, u32> = r.cpus.iter().map(|c| (c.cpu, c.pid)).collect();
    dec.run(&mut |ev| {
        if let Event::Element(info, e) = ev
            && e.elem_type == ElemType::InstrRange
        {
            assert_eq!(info.pid as u32, pids[&info.cpu], "{info:?}");
            got.entry(info.cpu)
                .or_default()
                .push((e.st_addr, e.en_addr, e.num_instr_range, e.last_instr_exec));
        }
    });
    assert_eq!(dec.summary.memory_gaps, 0, "{:?} {:?}", dec.summary, dec.warnings);
    assert!(dec.missing_binaries().is_empty());
    got
}

#[test]
fn formatted_and_raw_recordings_decode_to_the_truth() {
    for (seed, layout, protocol) in [
        (1, BufferLayout::Formatted, PerfProtocol::Etmv4),
        (2, BufferLayout::Unformatted, PerfProtocol::Etmv4),
        (3, BufferLayout::Formatted, PerfProtocol::Ete),
        (4, BufferLayout::Unformatted, PerfProtocol::Ete),
    ] {
        let (r, dir) = generated(seed, layout, protocol, 2, &format!("truth{seed}"));
        let got = decoded_ranges(&r, &dir);
        for c in &r.cpus {
            let mut want = Vec::new();
            for b in &r.buffers {
                let of_cpu = match layout {
                    BufferLayout::Formatted => true,
                    BufferLayout::Unformatted => b.cpu == Some(c.cpu),
                };
                if of_cpu {
                    want.extend(ranges(&r.buffer_truth(b, c.cpu)));
                }
            }
            assert!(!want.is_empty());
            assert_eq!(
                got.get(&c.cpu).cloned().unwrap_or_default(),
                want,
                "seed {seed} cpu {}",
                c.cpu
            );
        }
    }
}

#[test]
fn autofdo_counts_follow_the_truth() {
    let (r, dir) = generated(7, BufferLayout::Formatted, PerfProtocol::Etmv4, 2, "afdo");
    let rec = Recording::parse(&r.perf_data).unwrap();
    let mut p = AutoFdoProfile::new(None);
    let report = add_recording(&rec, search(&dir), DecodeOptions::default(), &mut p, &mut |_| {}).unwrap();
    assert!(report.missing.is_empty());
    assert_eq!(p.binaries.len(), 1);
    let (key, b) = p.binaries.iter().next().unwrap();
    assert_eq!(key.path, "/data/local/tmp/gen_prog");
    assert!(key.build_id.starts_with("0x") && key.build_id.len() == 42);

    // Every range of the truth counts once, at its ELF virtual addresses (the generator
    // loads its ELF with file offsets equal to addresses less the text segment's start, so
    // runtime address - map start + page offset gives the offset; the ELF's segment gives the
    // virtual address).
    let img = coresight_perf_data::elf::ElfImage::from_bytes(&dir.join("gen_prog"), r.elf.bytes.clone()).unwrap();
    let map = rec.maps.iter().find(|m| m.executable).unwrap();
    let vaddr = |a: u64| img.offset_to_vaddr(a - map.start + map.pgoff) - img.first_load_vaddr();
    let mut want: HashMap<(u64, u64), u64> = HashMap::new();
    let mut taken = 0u64;
    for c in &r.cpus {
        for bf in &r.buffers {
            for (s, e, _, exec) in ranges(&r.buffer_truth(bf, c.cpu)) {
                *want.entry((vaddr(s), vaddr(e - 4))).or_default() += 1;
                taken += u64::from(exec);
            }
        }
    }
    let first = b.first_load_vaddr;
    let got: HashMap<(u64, u64), u64> = b
        .ranges
        .iter()
        .map(|(&(s, e), &n)| ((s - first, e - first), n))
        .collect();
    assert_eq!(got, want);
    // Branches start at range ends; taken branches are at most the executed waypoints (a
    // range may end in an executed ISB or other non-branch waypoint).
    let ends: std::collections::HashSet<u64> = b.ranges.keys().map(|&(_, e)| e).collect();
    assert!(b.branches.keys().all(|(f, _)| ends.contains(f)));
    let branch_total: u64 = b.branches.values().sum();
    assert!(branch_total > 0 && branch_total <= taken, "{branch_total} {taken}");

    // The text names the binary after its counts.
    let text = p.to_text();
    assert!(text.ends_with(&format!(
        "// build_id: {}\n// /data/local/tmp/gen_prog\n\n",
        key.build_id
    )));

    // --binary: a filter that does not match keeps nothing; one that does keeps it all.
    let mut none = AutoFdoProfile::new(Some(Regex::new("no_such_binary").unwrap()));
    add_recording(&rec, search(&dir), DecodeOptions::default(), &mut none, &mut |_| {}).unwrap();
    assert_eq!(none.to_text(), "");
    let mut some = AutoFdoProfile::new(Some(Regex::new("gen_.*og$").unwrap()));
    add_recording(&rec, search(&dir), DecodeOptions::default(), &mut some, &mut |_| {}).unwrap();
    assert_eq!(some.to_text(), text);

    // Two recordings add up.
    let mut twice = p.clone();
    twice.merge(&p);
    let (k2, b2) = twice.binaries.iter().next().unwrap();
    assert_eq!(k2, key);
    assert!(b2.ranges.iter().all(|(a, n)| *n == 2 * b.ranges[a]));
}

#[test]
fn counts_saturate_with_a_warning() {
    let key = BinaryKey {
        path: "/bin/x".into(),
        build_id: format!("0x{}", "0".repeat(40)),
    };
    let mut a = AutoFdoProfile::new(None);
    a.add_range(&key, 0, 0x100, 0x10c, u64::MAX - 1);
    a.add_branch(&key, 0, 0x10c, 0x100, u64::MAX);
    assert_eq!(a.overflows, 0);
    let mut b = AutoFdoProfile::new(None);
    b.add_range(&key, 0, 0x100, 0x10c, 5);
    b.add_branch(&key, 0, 0x10c, 0x100, 1);
    a.merge(&b);
    assert_eq!(a.overflows, 2);
    assert_eq!(
        a.to_text(),
        format!(
            "1\n100-10c:18446744073709551615\n0\n1\n10c->100:18446744073709551615\n// build_id: 0x{}\n// /bin/x\n\n",
            "0".repeat(40)
        )
    );
}

#[test]
fn perf_script_lines_of_a_hand_made_trace() {
    // One process (42, "prog") with /tmp/prog mapped at 0x400000; no file for it, so no
    // symbols: perf prints [unknown].
    let etm = Etmv4Config {
        trcconfigr: 0x40,
        trctraceidr: 0x10,
        trcidr0: 0x2800_0ea1,
        trcidr1: 0x4100_f422,
        trcidr2: 0x2000_1088,
        trcidr8: 0,
        trcauthstatus: 0x8c,
        trcdevarch: None,
        ts_source: None,
    };
    let info = CsEtmInfo {
        version: 1,
        pmu_type: 8,
        num_cpus: 1,
        snapshot: false,
        cpus: vec![CpuConfig::etmv4(0, etm)],
        raw: vec![],
    };
    let mut w = Writer::new(WriterOptions::default());
    let at = SampleFields {
        pid: 42,
        tid: 42,
        time: 1,
        cpu: 0,
    };
    w.auxtrace_info(&info);
    w.comm(42, 42, "prog", true, at);
    w.mmap2(42, 42, 0x40_0000, 0x1000, 0, "/tmp/prog", None, at);
    w.aux(0, 16, 0, at);
    w.auxtrace(0, 1, 0, 42, 0, &[0u8; 16]);
    let bytes = w.finish();
    let rec = Recording::parse(&bytes).unwrap();
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    let model = Model::new(&rec, s);

    let range = |st: u64, en: u64, n: u32, t: InstrType| {
        let mut e = TraceElement::new(ElemType::InstrRange);
        e.st_addr = st;
        e.en_addr = en;
        e.num_instr_range = n;
        e.last_i_type = t;
        e.last_instr_exec = true;
        e.last_instr_sz = 4;
        e
    };
    let elems = [
        TraceElement::new(ElemType::TraceOn),
        range(0x40_0000, 0x40_0010, 4, InstrType::Branch),
        range(0x40_0100, 0x40_0108, 2, InstrType::BranchIndirect),
        TraceElement::new(ElemType::EoTrace),
    ];
    let fields: Fields = "comm,tid,cpu,period,event,ip,sym,dso,addr".parse().unwrap();
    let itrace: Itrace = "bi3".parse().unwrap();
    let mut sw = ScriptWriter::new(&model, 1, Vec::new(), itrace, fields, "", &[], None);
    sw.event(&Event::BufferStart {
        buffer: 0,
        aux: &rec.buffers[0],
    })
    .unwrap();
    let info = ElementInfo {
        buffer: 0,
        cpu: 0,
        stream: 0,
        trace_id: 0x10,
        index: 0,
        pid: 42,
        tid: 42,
    };
    for e in &elems {
        sw.event(&Event::Element(&info, e)).unwrap();
    }
    let text = String::from_utf8(sw.into_inner()).unwrap();
    let expected = concat!(
        // perf prints an instruction sample's address (0) when -F has addr.
        "            prog    42 [000]          3 instructions:                0           400008 [unknown] (/tmp/prog)\n",
        "            prog    42 [000]          1     branches:                 0 [unknown] ([unknown]) =>           400000 [unknown] (/tmp/prog)\n",
        "            prog    42 [000]          3 instructions:                0           400104 [unknown] (/tmp/prog)\n",
        "            prog    42 [000]          1     branches:            40000c [unknown] (/tmp/prog) =>           400100 [unknown] (/tmp/prog)\n",
        "            prog    42 [000]          1     branches:            400104 [unknown] (/tmp/prog) =>                0 [unknown] ([unknown])\n",
    );
    assert_eq!(text, expected);
}

#[test]
fn damaged_recordings_never_panic() {
    let (r, dir) = generated(11, BufferLayout::Formatted, PerfProtocol::Etmv4, 2, "damage");
    let (r2, _) = generated(12, BufferLayout::Unformatted, PerfProtocol::Ete, 2, "damage2");
    let mut rng = Rng::new(99);
    for (i, base) in [&r.perf_data, &r2.perf_data].iter().cycle().take(120).enumerate() {
        let mut data = base.to_vec();
        damage(&mut rng, &mut data);
        // Damage aimed at the AUX trace too: flip bytes in the second half of the file.
        if i % 2 == 0 && data.len() > 8 {
            let n = data.len();
            for _ in 0..8 {
                let k = n / 2 + rng.below((n / 2) as u64) as usize;
                data[k] ^= rng.next_u64() as u8;
            }
        }
        let Ok(rec) = Recording::parse(&data) else { continue };
        let mut p = AutoFdoProfile::new(None);
        let _ = add_recording(&rec, search(&dir), DecodeOptions::default(), &mut p, &mut |_| {});
        let _ = p.to_text();
        if let Ok(mut dec) =
            RecordingDecoder::new(&rec, Arc::new(Model::new(&rec, search(&dir))), DecodeOptions::default())
        {
            let model = dec.model().clone();
            let mut sw = ScriptWriter::new(
                &model,
                dec.cpus().len(),
                std::io::sink(),
                Itrace::default(),
                Fields::default(),
                "u",
                &[],
                coresight_perf_data::script::perf_sample_time(&rec),
            );
            dec.run(&mut |ev| {
                let _ = sw.event(&ev);
            });
        }
    }
}
