//! Decode throughput benchmark.
//!
//! `trc_bench <snapshot dir> [-src <buffer name>] [-iter <N>] [-block <bytes>]`
//!
//! Decodes a snapshot's trace buffer fully (packets, program walk, generic
//! elements) with no output, and reports trace megabytes per second and
//! instructions per second (instructions counted from the instruction
//! ranges' instruction counts). The best of `N` runs is reported.


use coresight_decode::shared::Lock;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::elem::{ElemType, TraceElement};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::snapshot::{Snapshot, TreeBuilder};
use coresight_decode::tree::SourceFormat;

/// Counts elements and instructions.
#[derive(Default)]
struct Counter {
    elements: u64,
    instructions: u64,
}

struct CountSink(Arc<Lock<Counter>>);

impl TrcGenElemIn for CountSink {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        let mut c = self.0.borrow_mut();
        c.elements += 1;
        if elem.elem_type == ElemType::InstrRange {
            c.instructions += elem.num_instr_range as u64;
        }
        DatapathResp::Cont
    }
}

struct Run {
    seconds: f64,
    bytes: usize,
    elements: u64,
    instructions: u64,
}

fn run_once(ss: &Snapshot, source: &str, data: &[u8], block: usize) -> Result<Run, String> {
    // Plug-in protocols (RISC-V trace) are measured like built-in ones.
    let mut tree = TreeBuilder::with_registry(ss, riscv_trace::registry())
        .build(source, DecodeMode::FullDecode, |_| {})
        .map_err(|e| e.to_string())?
        .ok_or("no supported trace sources in the snapshot")?;
    if let SourceFormat::Formatted(mut cfg) = tree.format() {
        if !(cfg.fsyncs || cfg.hsyncs) {
            cfg.mem_aligned = true;
        }
        if let Some(d) = tree.deformatter_mut() {
            let _ = d.configure(cfg);
        }
    }
    let counter = Arc::new(Lock::new(Counter::default()));
    tree.set_gen_elem_out(Box::new(CountSink(counter.clone())));

    let start = Instant::now();
    let mut index: TrcIndex = 0;
    for chunk in data.chunks(block.max(1)) {
        let mut done = 0;
        while done < chunk.len() {
            let (resp, used) = tree.trace_data_in(DatapathOp::Data, index, &chunk[done..]);
            if resp.is_fatal() {
                return Err(format!("fatal decode error at index {index}"));
            }
            done += used;
            index += used as TrcIndex;
            if resp.is_wait() {
                tree.trace_data_in(DatapathOp::Flush, 0, &[]);
            }
        }
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    let seconds = start.elapsed().as_secs_f64();
    let c = counter.borrow();
    Ok(Run { seconds, bytes: data.len(), elements: c.elements, instructions: c.instructions })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut dir = None;
    let mut src = None;
    let mut iters = 3usize;
    let mut block = 1024usize;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-src" => {
                i += 1;
                src = args.get(i).cloned();
            }
            "-iter" => {
                i += 1;
                iters = args.get(i).and_then(|v| v.parse().ok()).unwrap_or(iters).max(1);
            }
            "-block" => {
                i += 1;
                block = args.get(i).and_then(|v| v.parse().ok()).unwrap_or(block).max(1);
            }
            a if !a.starts_with('-') && dir.is_none() => dir = Some(a.to_string()),
            a => {
                eprintln!("trc_bench: unknown argument '{a}'");
                return ExitCode::FAILURE;
            }
        }
        i += 1;
    }
    let Some(dir) = dir else {
        eprintln!("usage: trc_bench <snapshot dir> [-src <buffer name>] [-iter <N>] [-block <bytes>]");
        return ExitCode::FAILURE;
    };
    let ss = match Snapshot::load(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("trc_bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let source = match src {
        Some(s) => s,
        None => match ss.buffer_names().first() {
            Some(n) => n.to_string(),
            None => {
                eprintln!("trc_bench: no trace buffers in the snapshot");
                return ExitCode::FAILURE;
            }
        },
    };
    let Some(buf) = ss.buffer(&source) else {
        eprintln!("trc_bench: no buffer named '{source}'");
        return ExitCode::FAILURE;
    };
    let mut data = Vec::new();
    for p in ss.buffer_paths(buf) {
        match std::fs::read(&p) {
            Ok(d) => data.extend_from_slice(&d),
            Err(e) => {
                eprintln!("trc_bench: {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
        }
    }

    let mut best: Option<Run> = None;
    for _ in 0..iters {
        match run_once(&ss, &source, &data, block) {
            Ok(r) => {
                if best.as_ref().is_none_or(|b| r.seconds < b.seconds) {
                    best = Some(r);
                }
            }
            Err(e) => {
                eprintln!("trc_bench: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let Some(r) = best else { return ExitCode::FAILURE };
    let mb = r.bytes as f64 / (1024.0 * 1024.0);
    println!("trc_bench: {dir} (buffer {source}), best of {iters} runs, {block}-byte blocks");
    println!("  trace bytes   : {}", r.bytes);
    println!("  elements      : {}", r.elements);
    println!("  instructions  : {}", r.instructions);
    println!("  time          : {:.4} s", r.seconds);
    println!("  throughput    : {:.2} MB/s of trace", mb / r.seconds);
    println!("  instructions  : {:.2} M/s", r.instructions as f64 / r.seconds / 1e6);
    ExitCode::SUCCESS
}
