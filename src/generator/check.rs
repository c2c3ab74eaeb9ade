//! Decodes a generated snapshot in memory and compares the result with
//! its truth.

use std::cell::RefCell;
use std::rc::Rc;

use super::{Generated, Truth};
use crate::arch::ArchProfile;
use crate::datapath::{DatapathOp, DatapathResp, TrcIndex};
use crate::decoder::{CoreConfig, DecodeMode, SourceConfig};
use crate::deformatter::DeformatterConfig;
use crate::elem::TraceElement;
use crate::interfaces::{TrcDataIn, TrcGenElemIn};
use crate::memory::{BufferAccessor, MemSpace};
use crate::snapshot_writer::DeviceSpec;
use crate::tree::{DecodeTree, SourceFormat};

/// Collects the truth items of decoded elements.
struct Collect(Rc<RefCell<Vec<Truth>>>);

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
        regs: dev.regs.iter().map(|(n, v)| (n.split('(').next().unwrap_or(n).to_string(), *v)).collect(),
        core: core.map(|c| CoreConfig {
            name: c.name.clone(),
            core_type: c.device_type.clone(),
            profile: ArchProfile::from_core_name(&c.device_type).unwrap_or_default(),
        }),
    }
}

/// Decodes the first buffer of a generated snapshot, without files.
/// Returns the truth items of the elements, in order.
pub fn decode(g: &Generated) -> Result<Vec<Truth>, String> {
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
        let dev = spec.devices.iter().find(|d| &d.name == src).ok_or_else(|| format!("no device {src}"))?;
        let core = spec.core_trace_sources.iter().find(|(_, s)| s == src).and_then(|(c, _)| spec.devices.iter().find(|d| &d.name == c));
        let factory = tree.registry().for_device_type(&dev.device_type).ok_or_else(|| format!("no protocol for {}", dev.device_type))?;
        let name = factory.protocol_name().to_string();
        tree.create_decoder(&name, &source_config(dev, core)).map_err(|e| e.to_string())?;
        if let Some(core) = core {
            let mapper = tree.mem_mapper().ok_or("no memory mapper")?.clone();
            for d in &core.dumps {
                let space = MemSpace::from_snapshot_name(&d.space).unwrap_or(MemSpace::ANY);
                let acc = BufferAccessor::new(d.address, d.data.clone(), space).map_err(|e| e.to_string())?;
                mapper.borrow_mut().add_accessor(Box::new(acc)).map_err(|e| e.to_string())?;
            }
        }
    }
    let got = Rc::new(RefCell::new(Vec::new()));
    tree.set_gen_elem_out(Box::new(Collect(got.clone())));
    let data = &buf.data;
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
    let v = got.borrow().clone();
    Ok(comparable(v, g.truth.iter().any(Truth::is_detail)))
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
            (Some(w), None) => format!("item {i}: expected `{w}`, decoded nothing more ({} of {})", got.len(), g.truth.len()),
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

/// Decodes the first buffer of a snapshot directory and returns the truth
/// items of the elements (to compare with a generated `truth.txt`). When the
/// directory has a `truth.txt` without exceptions, contexts, cycle counts or
/// timestamps, those are left out ([`comparable`]).
pub fn decode_dir(dir: &std::path::Path) -> Result<Vec<Truth>, String> {
    let ss = crate::snapshot::Snapshot::load(dir).map_err(|e| e.to_string())?;
    let name = ss.buffer_names().first().map(|s| s.to_string()).ok_or("no trace buffer")?;
    let buf = ss.buffer(&name).ok_or("no trace buffer")?.clone();
    let mut tree = ss.build_tree(&name, DecodeMode::FullDecode, |_| {}).map_err(|e| e.to_string())?.ok_or("no decodable source")?;
    let got = Rc::new(RefCell::new(Vec::new()));
    tree.set_gen_elem_out(Box::new(Collect(got.clone())));
    let mut data = Vec::new();
    for p in ss.buffer_paths(&buf) {
        data.extend(std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    let mut idx = 0usize;
    while idx < data.len() {
        let (r, used) = tree.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..]);
        if r.is_fatal() || used == 0 {
            return Err(format!("decode stopped at index {idx} ({r:?})"));
        }
        idx += used;
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    let v = got.borrow().clone();
    let models_details = match std::fs::read_to_string(dir.join("truth.txt")) {
        Ok(t) => t.lines().any(|l| !l.is_empty() && !l.starts_with("range ") && !l.starts_with("msg ")),
        Err(_) => true,
    };
    Ok(comparable(v, models_details))
}
