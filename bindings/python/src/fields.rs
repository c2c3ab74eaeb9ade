//! The fields of a typed element, by name: the names and nesting of the
//! JSON Lines form of `trc_decode --format json`, with integers as
//! integers (not hex strings).

use coresight_decode::arch::{InstrSubType, InstrType, Isa, SecurityState};
use coresight_decode::element::{
    DataAccessKind, Element, Event, ItmMessage, LastInstr, MemTrans, TraceOnReason, UnsyncInfo,
};

/// A field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    U(u64),
    B(bool),
    S(&'static str),
    Text(String),
    Map(Vec<(&'static str, Val)>),
}

pub fn isa_name(i: Isa) -> &'static str {
    match i {
        Isa::Arm => "a32",
        Isa::Thumb2 => "t32",
        Isa::Aarch64 => "a64",
        Isa::Tee => "tee",
        Isa::Jazelle => "jazelle",
        Isa::Custom => "custom",
        Isa::RiscV => "riscv",
        Isa::Unknown => "unknown",
    }
}

pub fn unsync_name(u: UnsyncInfo) -> &'static str {
    match u {
        UnsyncInfo::Unknown => "unknown",
        UnsyncInfo::InitDecoder => "init_decoder",
        UnsyncInfo::ResetDecoder => "reset_decoder",
        UnsyncInfo::Overflow => "overflow",
        UnsyncInfo::Discard => "discard",
        UnsyncInfo::BadPacket => "bad_packet",
        UnsyncInfo::BadImage => "bad_program_image",
        UnsyncInfo::Eot => "end_of_trace",
        _ => "other",
    }
}

pub fn security_name(s: SecurityState) -> &'static str {
    match s {
        SecurityState::Secure => "secure",
        SecurityState::NonSecure => "non_secure",
        SecurityState::Root => "root",
        SecurityState::Realm => "realm",
    }
}

pub fn instr_type_name(t: InstrType) -> &'static str {
    match t {
        InstrType::Other => "other",
        InstrType::Branch => "branch",
        InstrType::BranchIndirect => "indirect_branch",
        InstrType::Isb => "isb",
        InstrType::DsbDmb => "dsb_dmb",
        InstrType::WfiWfe => "wfi_wfe",
        InstrType::Tstart => "tstart",
        _ => "other",
    }
}

pub fn instr_subtype_name(t: InstrSubType) -> &'static str {
    match t {
        InstrSubType::None => "none",
        InstrSubType::BranchLink => "branch_link",
        InstrSubType::V8Ret => "ret",
        InstrSubType::V8Eret => "eret",
        InstrSubType::V7ImpliedRet => "implied_ret",
        _ => "other",
    }
}

fn last_map(l: &LastInstr) -> Val {
    Val::Map(vec![
        ("executed", Val::B(l.executed)),
        ("size", Val::U(l.size.into())),
        ("kind", Val::S(instr_type_name(l.kind))),
        ("subtype", Val::S(instr_subtype_name(l.subtype))),
        ("conditional", Val::B(l.conditional)),
    ])
}

/// The element's fields (not its index, trace ID or kind), in the JSON
/// form's order; optional ones only when present.
pub fn fields(e: &Element) -> Vec<(&'static str, Val)> {
    let mut f: Vec<(&'static str, Val)> = Vec::new();
    match *e {
        Element::Unknown | Element::AddrUnknown { .. } | Element::ExceptionRet { .. } | Element::CycleCount { .. } => {}
        Element::NoSync { reason } | Element::EoTrace { reason } => f.push(("reason", Val::S(unsync_name(reason)))),
        Element::TraceOn { reason, .. } => f.push((
            "reason",
            Val::S(match reason {
                TraceOnReason::Normal => "normal",
                TraceOnReason::Overflow => "overflow",
                TraceOnReason::ExDebug => "debug_restart",
                _ => "other",
            }),
        )),
        Element::PeContext { isa, context: c, .. } => {
            f.push(("isa", Val::S(isa_name(isa))));
            if isa != Isa::RiscV {
                f.push(("security", Val::S(security_name(c.security))));
            }
            if let Some(n) = c.exception_level.and_then(|l| l.number()) {
                f.push(("exception_level", Val::U(n.into())));
            }
            f.push(("bits64", Val::B(c.bits64)));
            if let Some(v) = c.context_id {
                f.push(("context_id", Val::U(v.into())));
            }
            if let Some(v) = c.vmid {
                f.push(("vmid", Val::U(v.into())));
            }
            if let Some(h) = c.hart {
                f.push(("hart", Val::U(h)));
            }
            if let Some(b) = c.interrupts_enabled {
                f.push(("interrupts_enabled", Val::B(b)));
            }
        }
        Element::InstrRange {
            isa,
            start,
            end,
            num_instr,
            last,
            ..
        } => {
            f.push(("isa", Val::S(isa_name(isa))));
            f.push(("start", Val::U(start)));
            f.push(("end", Val::U(end)));
            f.push(("num_instr", Val::U(num_instr.into())));
            f.push(("last", last_map(&last)));
        }
        Element::IRangeNoPath {
            isa,
            start,
            next,
            num_instr,
        } => {
            f.push(("isa", Val::S(isa_name(isa))));
            f.push(("start", Val::U(start)));
            f.push(("next", Val::U(next)));
            f.push(("num_instr", Val::U(num_instr.into())));
        }
        Element::AddrNacc { addr, mem_space, .. } => {
            f.push(("addr", Val::U(addr)));
            f.push(("mem_space", Val::Text(mem_space.to_string())));
        }
        Element::Exception {
            number,
            preferred_return,
            return_is_branch_target,
            ..
        } => {
            f.push(("number", Val::U(number.into())));
            if let Some(a) = preferred_return {
                f.push(("preferred_return", Val::U(a)));
            }
            f.push(("return_is_branch_target", Val::B(return_is_branch_target)));
        }
        Element::Timestamp { timestamp, .. } => f.push(("timestamp", Val::U(timestamp))),
        Element::Event(ev) => match ev {
            Event::Trigger => f.push(("event", Val::S("trigger"))),
            Event::Numbered(n) => {
                f.push(("event", Val::S("numbered")));
                f.push(("number", Val::U(n.into())));
            }
            // A kind added later reads as unknown here until it is named.
            _ => f.push(("event", Val::S("unknown"))),
        },
        Element::SwTrace(sw) => {
            if let Some(s) = sw.source {
                f.push(("master", Val::U(s.master.into())));
                f.push(("channel", Val::U(s.channel.into())));
            }
            if let Some(p) = sw.payload {
                f.push((
                    "payload",
                    Val::Map(vec![
                        ("bits", Val::U(p.bits.into())),
                        ("value", Val::U(p.value)),
                        ("packets", Val::U(p.packets.into())),
                    ]),
                ));
            }
            f.push(("marker", Val::B(sw.marker)));
            f.push(("trigger", Val::B(sw.trigger)));
            f.push(("frequency", Val::B(sw.frequency)));
            f.push(("global_error", Val::B(sw.global_error)));
            f.push(("master_error", Val::B(sw.master_error)));
            if let Some(t) = sw.timestamp {
                f.push(("timestamp", Val::U(t)));
            }
        }
        Element::SyncMarker { value } => f.push(("value", Val::U(value.into()))),
        Element::MemTrans { op } => f.push((
            "op",
            Val::S(match op {
                MemTrans::TraceInit => "init",
                MemTrans::Start => "start",
                MemTrans::Commit => "commit",
                MemTrans::Fail => "fail",
            }),
        )),
        Element::Instrumentation { el, value } => {
            f.push(("el", Val::U(el.into())));
            f.push(("value", Val::U(value)));
        }
        Element::ItmTrace(itm) => {
            match itm.message {
                ItmMessage::Software { port, size, value } => {
                    f.push(("message", Val::S("software")));
                    f.push(("port", Val::U(port.into())));
                    f.push(("size", Val::U(size.into())));
                    f.push(("value", Val::U(value.into())));
                }
                ItmMessage::Hardware {
                    discriminator,
                    size,
                    value,
                } => {
                    f.push(("message", Val::S("hardware")));
                    f.push(("discriminator", Val::U(discriminator.into())));
                    f.push(("size", Val::U(size.into())));
                    f.push(("value", Val::U(value.into())));
                }
                ItmMessage::LocalTimestamp {
                    delta,
                    relation,
                    timestamp,
                    ..
                } => {
                    f.push(("message", Val::S("local_timestamp")));
                    f.push(("delta", Val::U(delta.into())));
                    let rel = match relation.bits() & 3 {
                        0 => "sync",
                        1 => "timestamp_delayed",
                        2 => "packet_delayed",
                        _ => "both_delayed",
                    };
                    f.push(("relation", Val::S(rel)));
                    f.push(("timestamp", Val::U(timestamp)));
                }
                ItmMessage::GlobalTimestamp { timestamp } => {
                    f.push(("message", Val::S("global_timestamp")));
                    f.push(("timestamp", Val::U(timestamp)));
                }
            }
            f.push(("overflow", Val::B(itm.overflow)));
        }
        Element::Custom { kind, value, text } => {
            f.push(("custom_kind", Val::U(kind.into())));
            f.push(("value", Val::U(value)));
            if let Some(t) = text {
                f.push(("text", Val::S(t)));
            }
        }
        Element::DataAccess(d) => {
            f.push((
                "kind",
                Val::S(if d.kind == DataAccessKind::Load {
                    "load"
                } else {
                    "store"
                }),
            ));
            if let Some(a) = d.addr {
                f.push(("addr", Val::U(a)));
            }
            if let Some(v) = d.value {
                f.push(("value", Val::U(v)));
            }
        }
        // A kind added to the library later: its kind name only.
        _ => {}
    }
    if let Some(cc) = e.cycle_count() {
        f.push(("cycle_count", Val::U(cc.into())));
    }
    f
}
