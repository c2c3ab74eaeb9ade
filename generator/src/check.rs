//! Decodes a generated snapshot in memory and compares the result with
//! its truth.

use super::{Generated, Truth};
use crate::snapshot_writer::DeviceSpec;
use coresight_decode::arch::ArchProfile;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{CoreConfig, DecodeMode, SourceConfig};
use coresight_decode::deformatter::DeformatterConfig;
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::memory::{BufferAccessor, MemSpace};
use coresight_decode::tree::{DecodeTree, SourceFormat};

/// Collects the truth items of decoded elements.
struct Collect(coresight_decode::shared::Shared<Vec<Truth>>);

impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, elem: &TraceElement) -> DatapathResp {
        if let Some(t) = Truth::from_element(elem) {
            self.0.borrow_mut().push(t);
        }
        DatapathResp::Cont
    }
}

fn source_config(dev: &DeviceSpec, core: Option<&DeviceSpec>) -> SourceConfig {
    SourceConfig {
        name: dev.name.clone(),
        device_type: dev.device_type.clone(),
        regs: dev
            .regs
            .iter()
            .map(|(n, v)| (n.split('(').next().unwrap_or(n).to_string(), *v))
            .collect(),
        core: core.map(|c| CoreConfig {
            name: c.name.clone(),
            core_type: c.device_type.clone(),
            profile: ArchProfile::from_core_name(&c.device_type).unwrap_or_default(),
        }),
    }
}

/// Decodes a generated snapshot, without files. Returns the truth items of
/// the elements, in order. A snapshot with several buffers is decoded as
/// `trc_pkt_lister -multi_session` does: one decode tree, built for the
/// first buffer's sources, takes each buffer in turn (end of trace, then a
/// reset, after each); each buffer's items follow a [`Truth::Session`].
pub fn decode(g: &Generated) -> Result<Vec<Truth>, String> {
    let got = coresight_decode::shared::shared(Vec::new());
    decode_into(g, Box::new(Collect(got.clone())), |n| {
        got.borrow_mut().push(Truth::Session(n))
    })?;
    let v = got.borrow().clone();
    Ok(comparable(v, g.truth.iter().any(Truth::is_detail)))
}

/// Decodes a generated snapshot's first buffer's sources (every buffer in
/// turn), handing the elements to `sink`.
pub fn decode_with(g: &Generated, sink: Box<dyn TrcGenElemIn>) -> Result<(), String> {
    decode_into(g, sink, |_| {})
}

/// Decodes a generated snapshot in memory into `out`, which sees every
/// element. With several buffers, `session(n)` is called before buffer
/// `n` (from 1) is decoded.
pub fn decode_into(g: &Generated, out: Box<dyn TrcGenElemIn>, mut session: impl FnMut(u32)) -> Result<(), String> {
    let spec = &g.spec;
    let buf = spec.buffers.first().ok_or("no buffer")?;
    let format = if buf.format == "source_data" {
        SourceFormat::Single
    } else {
        SourceFormat::Formatted(DeformatterConfig::mem_aligned())
    };
    let mut tree = DecodeTree::new(format, DecodeMode::FullDecode);
    for (src, b) in &spec.source_buffers {
        if b != &buf.name {
            continue;
        }
        let dev = spec
            .devices
            .iter()
            .find(|d| &d.name == src)
            .ok_or_else(|| format!("no device {src}"))?;
        let core = spec
            .core_trace_sources
            .iter()
            .find(|(_, s)| s == src)
            .and_then(|(c, _)| spec.devices.iter().find(|d| &d.name == c));
        let factory = tree
            .registry()
            .for_device_type(&dev.device_type)
            .ok_or_else(|| format!("no protocol for {}", dev.device_type))?;
        let name = factory.protocol_name().to_string();
        tree.create_decoder(&name, &source_config(dev, core))
            .map_err(|e| e.to_string())?;
        if let Some(core) = core {
            let mapper = tree.mem_mapper().ok_or("no memory mapper")?.clone();
            for d in &core.dumps {
                let space = MemSpace::from_snapshot_name(&d.space).unwrap_or(MemSpace::ANY);
                let acc = BufferAccessor::new(d.address, d.data.clone(), space).map_err(|e| e.to_string())?;
                mapper
                    .borrow_mut()
                    .add_accessor(Box::new(acc))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    tree.set_gen_elem_out(out);
    let multi = spec.buffers.len() > 1;
    for (n, b) in spec.buffers.iter().enumerate() {
        if multi {
            session(n as u32 + 1);
        }
        feed(&mut tree, &b.data).map_err(|e| if multi { format!("buffer {}: {e}", n + 1) } else { e })?;
        if multi {
            tree.trace_data_in(DatapathOp::Reset, 0, &[]);
        }
    }
    Ok(())
}

/// Pushes one buffer through a tree, then the end of trace.
fn feed(tree: &mut DecodeTree, data: &[u8]) -> Result<(), String> {
    let mut idx = 0usize;
    while idx < data.len() {
        let (r, used) = tree.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..]);
        if r.is_fatal() {
            return Err(format!("fatal response {r:?} at index {idx}"));
        }
        if used == 0 && !r.is_wait() {
            return Err(format!("no progress at index {idx}"));
        }
        idx += used;
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    Ok(())
}

/// Decodes and compares with the truth. The error names the first
/// differing item.
pub fn check(g: &Generated) -> Result<usize, String> {
    let got = decode(g)?;
    for (i, (want, have)) in g.truth.iter().zip(got.iter()).enumerate() {
        if want != have {
            return Err(format!("item {i}: expected `{want}`, decoded `{have}`"));
        }
    }
    if got.len() != g.truth.len() {
        let i = got.len().min(g.truth.len());
        return Err(match (g.truth.get(i), got.get(i)) {
            (Some(w), None) => format!(
                "item {i}: expected `{w}`, decoded nothing more ({} of {})",
                got.len(),
                g.truth.len()
            ),
            (None, Some(h)) => format!("item {i}: expected nothing more, decoded `{h}`"),
            _ => unreachable!(),
        });
    }
    Ok(got.len())
}

/// Decoded items to compare with a truth: exceptions, contexts, cycle
/// counts and timestamps ([`Truth::is_detail`]) count only when the truth
/// models them (generators that do not leave them out).
pub fn comparable(mut decoded: Vec<Truth>, truth_models_details: bool) -> Vec<Truth> {
    if !truth_models_details {
        decoded.retain(|t| !t.is_detail());
    }
    decoded
}

/// Decodes a snapshot directory and returns the truth items of the
/// elements (to compare with a generated `truth.txt`): its first buffer or,
/// when it has several, all of them in turn as [`decode`] does. When the
/// directory has a `truth.txt` (or `truth.txt.gz`) without exceptions, contexts, cycle counts,
/// timestamps or ETE elements, those are left out ([`comparable`]).
pub fn decode_dir(dir: &std::path::Path) -> Result<Vec<Truth>, String> {
    let ss = coresight_decode::snapshot::Snapshot::load(dir).map_err(|e| e.to_string())?;
    let names: Vec<String> = ss.buffer_names().iter().map(|s| s.to_string()).collect();
    let name = names.first().ok_or("no trace buffer")?;
    let mut tree = ss
        .build_tree(name, DecodeMode::FullDecode, |_| {})
        .map_err(|e| e.to_string())?;
    let got = coresight_decode::shared::shared(Vec::new());
    tree.set_gen_elem_out(Box::new(Collect(got.clone())));
    let multi = names.len() > 1;
    for (n, name) in names.iter().enumerate() {
        let buf = ss.buffer(name).ok_or("no trace buffer")?.clone();
        let mut data = Vec::new();
        for p in ss.buffer_paths(&buf) {
            data.extend(std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?);
        }
        if multi {
            got.borrow_mut().push(Truth::Session(n as u32 + 1));
        }
        let mut idx = 0usize;
        while idx < data.len() {
            let (r, used) = tree.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..]);
            if r.is_fatal() || used == 0 {
                return Err(format!("decode stopped at index {idx} of {name} ({r:?})"));
            }
            idx += used;
        }
        tree.trace_data_in(DatapathOp::Eot, 0, &[]);
        if multi {
            tree.trace_data_in(DatapathOp::Reset, 0, &[]);
        }
    }
    let v = got.borrow().clone();
    use std::io::BufRead as _;
    let models_details = match crate::truth_file::open_truth(dir) {
        Ok(t) => t
            .lines()
            .map_while(Result::ok)
            .any(|l| !l.is_empty() && !l.starts_with("range ") && !l.starts_with("msg ") && !l.starts_with("session ")),
        Err(_) => true,
    };
    Ok(comparable(v, models_details))
}

/// The truth items of a decode listing (`trc_pkt_lister -decode` output):
/// instruction ranges, exceptions and exception returns, contexts, cycle
/// counts, timestamps, timestamp markers, transactional memory and
/// instrumentation elements, and `-multi_session`'s buffer headers as
/// [`Truth::Session`]. Software trace messages are not read back. Lines
/// that do not parse are skipped.
pub fn truth_from_listing(text: &str) -> Vec<Truth> {
    text.lines().filter_map(truth_from_line).collect()
}

fn hex(s: &str) -> Option<u64> {
    let s = s.trim();
    u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

/// The text between `open` and the next `close` after it.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let rest = &s[s.find(open)? + open.len()..];
    Some(&rest[..rest.find(close)?])
}

fn truth_from_line(line: &str) -> Option<Truth> {
    use coresight_decode::arch::SecurityState;
    use coresight_decode::element::MemTrans;
    if let Some(rest) = line.strip_prefix("####### Multi Session decode: Buffer ") {
        return rest.split_whitespace().next()?.parse().ok().map(Truth::Session);
    }
    let at = line.find("OCSD_GEN_TRC_ELEM_")?;
    let elem = &line[at + "OCSD_GEN_TRC_ELEM_".len()..];
    let open = elem.find('(')?;
    let (name, body) = (&elem[..open], &elem[open + 1..elem.rfind(')')?]);
    let cc = || between(body, "[CC=", "]").and_then(|v| v.parse().ok());
    Some(match name {
        "INSTR_RANGE" => {
            let start = hex(between(body, "range=", ":")?)?;
            let end = hex(between(body, ":[", "]")?)?;
            let count = between(body, "num_i(", ")")?.parse().ok()?;
            let after_isa = &body[body.find("(ISA=")?..];
            let exec = match after_isa[after_isa.find(") ")? + 2..].chars().next()? {
                'E' => true,
                'N' => false,
                _ => return None,
            };
            Truth::Range {
                start,
                end,
                count,
                exec,
            }
        }
        "EXCEPTION" => {
            let ret_addr = between(body, "pref ret addr:", ";")
                .and_then(|a| hex(a.split(' ').next()?))
                .unwrap_or(0);
            let number = hex(between(body, "excep num (", ")")?)? as u32;
            Truth::Exception { number, ret_addr }
        }
        "EXCEPTION_RET" => Truth::ExceptionReturn,
        "PE_CONTEXT" => {
            let ctx = &body[body.find(") ")? + 2..];
            let (el, rest) = match ctx.strip_prefix("EL") {
                Some(r) => (r[..1].parse().ok()?, &r[1..]),
                None => (0xff, ctx),
            };
            let security = match rest.split(';').next()?.trim() {
                "S" => SecurityState::Secure,
                "N" => SecurityState::NonSecure,
                "Root" => SecurityState::Root,
                "Realm" => SecurityState::Realm,
                _ => return None,
            };
            Truth::Context {
                el,
                security,
                aarch64: rest.contains("64-bit;"),
                ctxt_id: between(rest, "CTXTID=", ";").and_then(hex).map(|v| v as u32),
                vmid: between(rest, "VMID=", ";").and_then(hex).map(|v| v as u32),
            }
        }
        "CYCLE_COUNT" => Truth::CycleCount(cc()?),
        "TIMESTAMP" => Truth::Timestamp {
            ts: hex(between(body, "TS=", "]")?)?,
            cc: cc(),
        },
        "SYNC_MARKER" => Truth::TsMarker,
        "MEMTRANS" => Truth::MemTrans(match body.trim() {
            "Init" => MemTrans::TraceInit,
            "Start" => MemTrans::Start,
            "Commit" => MemTrans::Commit,
            "Fail" => MemTrans::Fail,
            _ => return None,
        }),
        "INSTRUMENTATION" => {
            let (el, value) = body.split_once("; ")?;
            Truth::Instrumentation {
                el: el.strip_prefix("EL")?.parse().ok()?,
                value: hex(value)?,
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coresight_decode::arch::SecurityState;
    use coresight_decode::element::MemTrans;

    #[test]
    fn listing_lines_read_back() {
        let text = "\
####### Multi Session decode: Buffer 2 of 3; Source name = ETB_2.
Idx:21; ID:1; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xc3488:[0xc3490] num_i(2) last_sz(4) (ISA=A64) E TSTART)
Idx:23; ID:1; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xc3490:[0xc3494] num_i(1) last_sz(4) (ISA=A64) N BR   <cond>)
Idx:22; ID:1; OCSD_GEN_TRC_ELEM_MEMTRANS(Start)
Idx:42; ID:1; OCSD_GEN_TRC_ELEM_INSTRUMENTATION(EL1; 0x00000000000fffff)
Idx:21; ID:1; OCSD_GEN_TRC_ELEM_SYNC_MARKER( [Timestamp marker(0x00000000)])
Idx:22; ID:1; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0xfffffffff0006592]; )
Idx:9; ID:10; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000001234];  [CC=77]; )
Idx:9; ID:10; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=12]; )
Idx:15; ID:1; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; )
Idx:15; ID:1; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL2Realm; 64-bit; VMID=0x1234; CTXTID=0x99; )
Idx:7; ID:1; OCSD_GEN_TRC_ELEM_EXCEPTION(pref ret addr:0x400010 [addr also prev br tgt]; excep num (0x0e) )
Idx:7; ID:1; OCSD_GEN_TRC_ELEM_EXCEPTION_RET()
Idx:0; ID:1; OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])
";
        let got = truth_from_listing(text);
        assert_eq!(
            got,
            vec![
                Truth::Session(2),
                Truth::Range {
                    start: 0xc3488,
                    end: 0xc3490,
                    count: 2,
                    exec: true
                },
                Truth::Range {
                    start: 0xc3490,
                    end: 0xc3494,
                    count: 1,
                    exec: false
                },
                Truth::MemTrans(MemTrans::Start),
                Truth::Instrumentation { el: 1, value: 0xfffff },
                Truth::TsMarker,
                Truth::Timestamp {
                    ts: 0xfffffffff0006592,
                    cc: None
                },
                Truth::Timestamp {
                    ts: 0x1234,
                    cc: Some(77)
                },
                Truth::CycleCount(12),
                Truth::Context {
                    el: 1,
                    security: SecurityState::NonSecure,
                    aarch64: true,
                    ctxt_id: None,
                    vmid: None
                },
                Truth::Context {
                    el: 2,
                    security: SecurityState::Realm,
                    aarch64: true,
                    ctxt_id: Some(0x99),
                    vmid: Some(0x1234)
                },
                Truth::Exception {
                    number: 0xe,
                    ret_addr: 0x400010
                },
                Truth::ExceptionReturn,
            ]
        );
    }
}
