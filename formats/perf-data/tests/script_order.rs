//! The order of `perf script` samples across CPUs: a generated 2-CPU recording with
//! timestamps (each CPU's trace in its own raw AUX buffer), an instruction sample for every
//! instruction, and the order expected from the truth: perf's time estimate of each range
//! (the first timestamp less the instructions before it, then the latest timestamp plus the
//! instructions since; a timestamp before the trace-on that starts the trace times nothing,
//! the gap resetting the estimate), the CPUs merged on it with perf's ties (with two queues: the one not
//! just taken wins, the first queue at the start).

use std::path::PathBuf;
use std::sync::Arc;

use coresight_generator::perf_data::{PerfOptions, PerfProtocol, generate_perf_data};
use coresight_generator::{BufferLayout, Truth};
use coresight_perf_data::Recording;
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::decode::{DecodeOptions, RecordingDecoder};
use coresight_perf_data::memory::Model;
use coresight_perf_data::script::{PerfOrder, ScriptWriter, perf_sample_time, write_in_perf_order};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("perf-data-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A CPU's instructions in groups, each group the packets perf takes at one time estimate.
fn groups(truth: &[Truth]) -> Vec<(u64, Vec<u64>)> {
    let (mut cs, mut next, mut count) = (0u64, 0u64, 0u64);
    let mut out: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut before: Vec<u64> = Vec::new();
    // The trace starts with a timestamp and then trace on: a gap, which forgets the time.
    let mut started = false;
    for t in truth {
        match *t {
            Truth::Context { .. } => started = true,
            Truth::Timestamp { ts, .. } if started => {
                if cs != 0 {
                    next = ts;
                } else {
                    cs = ts.saturating_sub(count);
                    next = ts;
                    count = 0;
                    out.push((cs, std::mem::take(&mut before)));
                }
            }
            Truth::Range { start, count: n, .. } => {
                let addrs = (0..u64::from(n)).map(|k| start + 4 * k);
                if cs == 0 {
                    count += u64::from(n);
                    before.extend(addrs);
                } else {
                    cs = next;
                    next += u64::from(n);
                    out.push((cs, addrs.collect()));
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn two_cpus_are_merged_in_time_order() {
    let dir = scratch("order");
    let opts = PerfOptions {
        seed: 5,
        protocol: PerfProtocol::Etmv4,
        layout: BufferLayout::Unformatted,
        cpus: 2,
        length: 300,
        elf_path: "/data/local/tmp/gen_prog".into(),
        ..Default::default()
    };
    let r = generate_perf_data(&opts).unwrap();
    std::fs::write(dir.join("gen_prog"), &r.elf.bytes).unwrap();
    let rec = Recording::parse(&r.perf_data).unwrap();
    let mut search = SymbolSearch::new();
    search.recorded_paths = false;
    search.add_symdir(&dir).unwrap();
    let model = Arc::new(Model::new(&rec, search));
    let mut dec = RecordingDecoder::new(&rec, model.clone(), DecodeOptions::default()).unwrap();
    let mut w = ScriptWriter::new(
        &model,
        dec.cpus().len(),
        Vec::new(),
        "i1".parse().unwrap(),
        "cpu,ip".parse().unwrap(),
        "",
        &[],
        perf_sample_time(&rec),
    );
    write_in_perf_order(&mut dec, &mut w, PerfOrder::default(), &mut |_| {}).unwrap();
    let text = String::from_utf8(w.into_inner()).unwrap();
    let got: Vec<(usize, u64)> = text
        .lines()
        .map(|l| {
            let (cpu, ip) = l.trim().split_once(' ').unwrap();
            let cpu: usize = cpu.trim_matches(|c| c == '[' || c == ']').parse().unwrap();
            (cpu, u64::from_str_radix(ip.trim(), 16).unwrap())
        })
        .collect();

    // Each CPU's groups, cut to the instructions decoded (the last may be held back).
    let mut per_cpu: Vec<Vec<(u64, Vec<u64>)>> = r.cpus.iter().map(|c| groups(&c.truth)).collect();
    for (cpu, g) in per_cpu.iter_mut().enumerate() {
        let want: usize = g.iter().map(|x| x.1.len()).sum();
        let mut left = got.iter().filter(|x| x.0 == cpu).count();
        assert!(left + 16 >= want, "CPU {cpu}: {left} of {want} instructions decoded");
        for x in g.iter_mut() {
            x.1.truncate(left);
            left -= x.1.len();
        }
        g.retain(|x| !x.1.is_empty());
    }
    // The merge perf makes of two queues.
    let mut expected = Vec::new();
    let mut at = [0usize, 0];
    let mut last: Option<usize> = None;
    loop {
        let head = |c: usize| per_cpu[c].get(at[c]).map(|x| x.0);
        let pick = match (head(0), head(1)) {
            (None, None) => break,
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (Some(a), Some(b)) if a != b => usize::from(b < a),
            _ => match last {
                Some(l) => 1 - l,
                None => 0,
            },
        };
        expected.extend(per_cpu[pick][at[pick]].1.iter().map(|&a| (pick, a)));
        at[pick] += 1;
        last = Some(pick);
    }
    if let Some(i) = (0..got.len().max(expected.len())).find(|&i| got.get(i) != expected.get(i)) {
        panic!(
            "sample {i}: expected {:?}, got {:?}\n{}",
            expected.get(i),
            got.get(i),
            text.lines()
                .skip(i.saturating_sub(3))
                .take(8)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    // The CPUs do take turns: the order is not one CPU after the other.
    let switches = got.windows(2).filter(|w| w[0].0 != w[1].0).count();
    assert!(switches >= 4, "only {switches} changes of CPU in {} samples", got.len());
}
