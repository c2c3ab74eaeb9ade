//! `trc_decode`: decodes the trace of a snapshot and prints the generic
//! elements, optionally with the instructions of each executed range
//! disassembled.
//!
//! ```text
//! trc_decode -ss_dir DIR [-src_name BUFFER] [-id ID]... [-disasm] [-max_instr N]
//! ```


use coresight_decode::shared::Lock;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::elem::{ElemType, TraceElement};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::{shared, MsgLogger};
use coresight_decode::memory::MemSpace;
use coresight_decode::snapshot::{Snapshot, TreeBuilder};

/// Collects elements; they are printed after each block, when target
/// memory is free to read for the disassembly.
struct Collect(Arc<Lock<Vec<(TrcIndex, u8, TraceElement)>>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, trace_id, elem.clone()));
        DatapathResp::Cont
    }
}

struct Opts {
    ss_dir: String,
    src_name: Option<String>,
    ids: Vec<u8>,
    disasm: bool,
    max_instr: usize,
}

fn usage() -> &'static str {
    "usage: trc_decode -ss_dir DIR [-src_name BUFFER] [-id ID]... [-disasm] [-max_instr N]\n"
}

fn parse() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let mut o = Opts { ss_dir: String::new(), src_name: None, ids: Vec::new(), disasm: false, max_instr: 64 };
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "-ss_dir" => o.ss_dir = val()?,
            "-src_name" => o.src_name = Some(val()?),
            "-id" => {
                let v = val()?;
                let n = coresight_decode::snapshot::parse_number(&v).filter(|n| *n < 0x80).ok_or(format!("-id: bad trace ID '{v}'"))?;
                o.ids.push(n as u8);
            }
            "-disasm" => o.disasm = true,
            "-max_instr" => {
                let v = val()?;
                o.max_instr = v.parse().map_err(|_| format!("-max_instr: bad number '{v}'"))?;
            }
            "-h" | "-help" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.ss_dir.is_empty() {
        return Err("-ss_dir is required".into());
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("trc_decode: {e}");
            }
            eprint!("{}", usage());
            return ExitCode::from(2);
        }
    };
    let ss = match Snapshot::load(&o.ss_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("trc_decode: {e}");
            return ExitCode::FAILURE;
        }
    };
    let names = ss.buffer_names();
    let Some(buffer) = o.src_name.as_deref().or(names.first().copied()).and_then(|n| ss.buffer(n)) else {
        eprintln!("trc_decode: no such trace buffer (the snapshot has: {})", names.join(", "));
        return ExitCode::FAILURE;
    };
    let errors = shared(MsgLogger::capture());
    // Plug-in protocols (RISC-V trace) decode like the built-in ones.
    let builder = TreeBuilder::with_registry(&ss, riscv_trace::registry());
    let mut tree = match builder.build(&buffer.name, DecodeMode::FullDecode, |t| t.set_error_output(Some(errors.clone()))) {
        Ok(Some(t)) => t,
        Ok(None) => {
            eprintln!("trc_decode: no decodable trace source in buffer {}", buffer.name);
            eprint!("{}", errors.borrow().captured());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("trc_decode: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !o.ids.is_empty() {
        tree.set_id_filter(Some(&o.ids));
    }
    let got = Arc::new(Lock::new(Vec::new()));
    tree.set_gen_elem_out(Box::new(Collect(got.clone())));
    #[cfg(feature = "disasm")]
    let dis = if o.disasm {
        match coresight_decode::disasm::Disassembler::new() {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("trc_decode: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    #[cfg(not(feature = "disasm"))]
    if o.disasm {
        eprintln!("trc_decode: built without the `disasm` feature");
        return ExitCode::FAILURE;
    }

    let mut data = Vec::new();
    for p in ss.buffer_paths(buffer) {
        match std::fs::read(&p) {
            Ok(mut d) => data.append(&mut d),
            Err(e) => {
                eprintln!("trc_decode: {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let mut text = String::new();
    let mut code: Vec<u8> = Vec::new();
    let mut print = |tree: &coresight_decode::tree::DecodeTree, out: &mut String| {
        for (index, id, e) in got.borrow_mut().drain(..) {
            let _ = write!(out, "Idx:{index}; ID:{id:x}; ");
            e.write_to(out);
            out.push('\n');
            #[cfg(feature = "disasm")]
            if let (Some(d), ElemType::InstrRange, Some(m)) = (dis.as_ref(), e.elem_type, tree.mem_mapper()) {
                let len = (e.en_addr.saturating_sub(e.st_addr) as usize).min(o.max_instr * 4);
                code.resize(len, 0);
                let n = m.borrow_mut().read(e.st_addr, MemSpace::ANY, &mut code);
                d.write(e.isa, e.st_addr, &code[..n], o.max_instr, out);
            }
            #[cfg(not(feature = "disasm"))]
            let _ = (&tree, &mut code, ElemType::InstrRange, MemSpace::ANY);
        }
        print!("{out}");
        out.clear();
    };
    let step = 1024;
    let mut idx = 0usize;
    let mut resp = DatapathResp::Cont;
    while idx < data.len() && !resp.is_fatal() {
        let end = (idx + step).min(data.len());
        let (r, used) = tree.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..end]);
        resp = r;
        idx += used;
        print(&tree, &mut text);
        if used == 0 {
            break;
        }
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    print(&tree, &mut text);
    let errs = errors.borrow().captured().to_string();
    if !errs.is_empty() {
        eprintln!("{errs}");
    }
    if resp.is_fatal() {
        eprintln!("trc_decode: decode stopped at byte {idx}: {resp:?}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
