//! On generated traces (`coresight_generator`, whose truth is the executed
//! ranges in order): the call tree and the call depth over time that the
//! element path builds from the decoded trace equal those of the truth,
//! also with an overflow in the middle of the trace.
//!
//! The truth's calls and returns are read from the program's memory: the
//! last instruction of each executed range classified from its A64
//! encoding (BL, BLR: call; RET: return; ERET: exception return), the
//! truth's exceptions as calls to their handlers.

use std::collections::BTreeMap;

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::{ElemType, TraceElement, TraceOnReason};
use coresight_decode::interfaces::TrcGenElemIn;
use coresight_decode::logger::{Shared, shared};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Generated, Truth, generate};
use coresight_viz::elements::ElementStacks;
use coresight_viz::profile::{EventKind, Limits};
use coresight_viz::symbols::Symbolizer;
use coresight_viz::timeline::Timeline;

struct Collect(Shared<Vec<(TrcIndex, u8, TraceElement)>>);
impl TrcGenElemIn for Collect {
    fn trace_elem_in(&mut self, index: TrcIndex, id: u8, e: &TraceElement) -> DatapathResp {
        self.0.borrow_mut().push((index, id, *e));
        DatapathResp::Cont
    }
}

fn elements(g: &Generated) -> Vec<(TrcIndex, u8, TraceElement)> {
    let got = shared(Vec::new());
    coresight_generator::check::decode_with(g, Box::new(Collect(got.clone()))).unwrap();
    got.borrow().clone()
}

/// The 32-bit word at `addr` in the snapshot's memory dumps.
fn word(g: &Generated, addr: u64) -> Option<u32> {
    for d in g.spec.devices.iter().flat_map(|d| &d.dumps) {
        if addr >= d.address && addr + 4 <= d.address + d.data.len() as u64 {
            let o = (addr - d.address) as usize;
            return Some(u32::from_le_bytes(d.data[o..o + 4].try_into().unwrap()));
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Flow {
    Call(u64),
    Exception(u64),
    Return,
    ExceptionReturn,
}

/// A context: (context ID, VMID) where traced.
type Ctx = (Option<u32>, Option<u32>);
/// Per context, (depth, callee entry) per activation in the order they
/// began; and the depth at the start of every range.
type Tree = (BTreeMap<Ctx, Vec<(usize, u64)>>, Vec<usize>);

/// The truth's call tree, one stack per context.
fn truth_tree(g: &Generated) -> Tree {
    let mut acts: BTreeMap<Ctx, Vec<(usize, u64)>> = BTreeMap::new();
    let mut depths = Vec::new();
    // Per context: (return address, entered by an exception).
    let mut stacks: BTreeMap<Ctx, Vec<(u64, bool)>> = BTreeMap::new();
    let mut ctx: Ctx = (None, None);
    let mut pending: Option<Flow> = None;
    for t in &g.truth {
        match *t {
            Truth::Range { start, end, exec, .. } => {
                let stack = stacks.entry(ctx).or_default();
                let acts = acts.entry(ctx).or_default();
                let from = match pending {
                    Some(Flow::Call(ret)) => ret - 4,
                    Some(Flow::Exception(ret)) => ret,
                    _ => 0,
                };
                if from != 0 && acts.is_empty() {
                    // The context begins with a call or an exception: the
                    // function it was in is its outermost.
                    acts.push((0, from));
                }
                match pending.take() {
                    Some(Flow::Call(ret)) => {
                        stack.push((ret, false));
                        acts.push((stack.len(), start));
                    }
                    Some(Flow::Exception(ret)) => {
                        stack.push((ret, true));
                        acts.push((stack.len(), start));
                    }
                    Some(f @ (Flow::Return | Flow::ExceptionReturn)) => {
                        let found = if f == Flow::Return {
                            stack.iter().rposition(|e| e.0 == start)
                        } else {
                            stack.iter().rposition(|e| e.1)
                        };
                        match found {
                            Some(i) => stack.truncate(i),
                            // The walk's own call stack holds 64 calls at
                            // most, is not kept per context, and a return
                            // with none goes anywhere: a return that
                            // matches no call leaves the innermost call,
                            // or replaces the outermost function.
                            None if !stack.is_empty() => {
                                stack.pop();
                            }
                            None => acts.push((0, start)),
                        }
                    }
                    None => {}
                }
                if acts.is_empty() {
                    acts.push((0, start));
                }
                depths.push(stack.len());
                let w = word(g, end - 4).unwrap();
                if exec {
                    pending = if w & 0xfc00_0000 == 0x9400_0000 || w & 0xffff_fc1f == 0xd63f_0000 {
                        Some(Flow::Call(end))
                    } else if w & 0xffff_fc1f == 0xd65f_0000 {
                        Some(Flow::Return)
                    } else if w == 0xd69f_03e0 {
                        Some(Flow::ExceptionReturn)
                    } else {
                        None
                    };
                }
            }
            Truth::Exception { ret_addr, .. } => {
                if let Some(Flow::Call(ret)) = pending {
                    // The exception came before the callee's first instruction.
                    let stack = stacks.entry(ctx).or_default();
                    let acts = acts.entry(ctx).or_default();
                    if acts.is_empty() {
                        acts.push((0, ret - 4));
                    }
                    stack.push((ret, false));
                    acts.push((stack.len(), ret_addr));
                }
                pending = Some(Flow::Exception(ret_addr));
            }
            Truth::ExceptionReturn => pending = Some(Flow::ExceptionReturn),
            Truth::Context { ctxt_id, vmid, .. } => ctx = (ctxt_id, vmid),
            Truth::Session(_) => pending = None,
            _ => {}
        }
    }
    acts.retain(|_, v| !v.is_empty());
    (acts, depths)
}

/// Ours, from the timeline's events and the stacks as the elements go by.
fn our_tree(els: &[(TrcIndex, u8, TraceElement)]) -> (Tree, u64) {
    let mut s = ElementStacks::new(Symbolizer::new(), Limits::default());
    let mut depths = Vec::new();
    for (i, id, e) in els {
        s.element(*id as u64, || format!("id {id}"), *i, e);
        if e.elem_type == ElemType::InstrRange {
            let c = s.profile.active(0).unwrap();
            depths.push(s.profile.contexts[c as usize].depth() - 1);
        }
    }
    s.finish();
    let tl = Timeline::all(&s.profile);
    let p = &s.profile;
    let mut acts: BTreeMap<Ctx, Vec<(usize, u64)>> = BTreeMap::new();
    for e in tl.events.iter().filter(|e| e.kind == EventKind::Open) {
        let key = p.contexts[e.ctx as usize].key;
        let ctx = (
            ((key >> 64) & 1 == 1).then_some(key as u32),
            ((key >> 65) & 1 == 1).then_some((key >> 32) as u32),
        );
        let n = &p.nodes[e.node as usize];
        let name = p.frames.name(n.frame);
        acts.entry(ctx)
            .or_default()
            .push((n.depth as usize - 1, u64::from_str_radix(&name[2..], 16).unwrap()));
    }
    ((acts, depths), p.gap_count)
}

fn a64_protocols() -> Vec<GenProtocol> {
    vec![GenProtocol::Etmv4, GenProtocol::Ete(Default::default())]
}

#[test]
fn call_tree_equals_the_truth() {
    let mut checked = 0;
    for protocol in a64_protocols() {
        for seed in 1..=12 {
            let g = generate(&GenOptions {
                seed,
                protocol,
                layout: BufferLayout::Formatted,
                length: 400,
            });
            let (tacts, tdepths) = truth_tree(&g);
            let ((acts, depths), _) = our_tree(&elements(&g));
            assert_eq!(depths, tdepths, "{} seed {seed}: depth over time", protocol.name());
            assert_eq!(acts, tacts, "{} seed {seed}: call tree", protocol.name());
            assert!(
                tacts.values().map(Vec::len).sum::<usize>() > 5,
                "{} seed {seed}: few calls",
                protocol.name()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
}

#[test]
fn call_tree_survives_an_overflow() {
    let g = generate(&GenOptions {
        seed: 3,
        protocol: GenProtocol::Etmv4,
        layout: BufferLayout::Formatted,
        length: 400,
    });
    let (tacts, tdepths) = truth_tree(&g);
    let mut els = elements(&g);
    // An overflow between two ranges halfway: the trace unit lost nothing
    // here, so the stack kept across it must go on matching the truth.
    let ranges: Vec<usize> = (0..els.len())
        .filter(|&i| els[i].2.elem_type == ElemType::InstrRange)
        .collect();
    let at = ranges[ranges.len() / 2] + 1;
    let mut on = TraceElement::new(ElemType::TraceOn);
    on.trace_on_reason = TraceOnReason::Overflow;
    let (idx, id, _) = els[at - 1];
    els.insert(at, (idx, id, on));
    let ((acts, depths), gaps) = our_tree(&els);
    assert_eq!(gaps, 1);
    assert_eq!(depths, tdepths);
    assert_eq!(acts, tacts);
}
