//! Decoded elements as JSON Lines: one object per element, with the
//! element's trace index and trace ID, its kind (`type`) and only the
//! fields that kind carries. The object is written from the typed element
//! ([`coresight_decode::Element`], converted from the decoders' generic
//! element at the edge): `type` is [`Element::kind_name`], and each field
//! is one of the variant's, left out where the variant's `Option` is
//! `None`.
//!
//! Addresses, data values and timestamps are strings in hex (`"0x8000"`):
//! they are 64-bit values, and many JSON readers (JavaScript, `jq`) hold
//! numbers as doubles, which cannot represent them all. Counts, indices and
//! small numbers are JSON numbers. Optional fields are left out when the
//! trace did not give them.
//!
//! The schema, every kind with its fields, is `docs/json-lines.md`
//! (checked against these writers by `tests/json_schema.rs`). Every JSON
//! writer of the project goes through [`write_element`] (the tree's
//! elements) or [`write_decoded`] (the pull API's), one serialiser.

use std::fmt;
use std::io::{self, Write};

use coresight_decode::Decoded;
use coresight_decode::arch::{InstrSubType, InstrType, Isa, SecurityState};
use coresight_decode::element::{self, Element, Event, ItmMessage};
use coresight_decode::element::{DataAccessKind, MemTrans, TraceElement, TraceOnReason, UnsyncInfo};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// A 64-bit value written as a hex string.
struct Hex(u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("0x{:x}", self.0))
    }
}

/// Writes one element as a JSON object and a newline.
pub fn write_element(out: &mut dyn Write, index: u64, trace_id: u8, elem: &TraceElement) -> io::Result<()> {
    let mut w = &mut *out;
    // `io::Error::from` keeps an I/O error as it was (a closed pipe stays
    // `BrokenPipe`, which the tools end on quietly).
    serde_json::to_writer(&mut w, &JsonElement { index, trace_id, elem }).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// An element with where it came from, serialised as the module says.
pub struct JsonElement<'a> {
    /// Trace index (byte offset of the packet or frame).
    pub index: u64,
    /// Trace ID of the source.
    pub trace_id: u8,
    /// The element.
    pub elem: &'a TraceElement,
}

fn isa_name(i: Isa) -> &'static str {
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

fn unsync_name(u: UnsyncInfo) -> &'static str {
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

fn security_name(s: SecurityState) -> &'static str {
    match s {
        SecurityState::Secure => "secure",
        SecurityState::NonSecure => "non_secure",
        SecurityState::Root => "root",
        SecurityState::Realm => "realm",
    }
}

fn instr_type_name(t: InstrType) -> &'static str {
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

fn instr_subtype_name(t: InstrSubType) -> &'static str {
    match t {
        InstrSubType::None => "none",
        InstrSubType::BranchLink => "branch_link",
        InstrSubType::V8Ret => "ret",
        InstrSubType::V8Eret => "eret",
        InstrSubType::V7ImpliedRet => "implied_ret",
        _ => "other",
    }
}

/// The `last` object of an instruction range.
struct Last(element::LastInstr);

impl Serialize for Last {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let l = &self.0;
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("executed", &l.executed)?;
        m.serialize_entry("size", &l.size)?;
        m.serialize_entry("kind", instr_type_name(l.kind))?;
        m.serialize_entry("subtype", instr_subtype_name(l.subtype))?;
        m.serialize_entry("conditional", &l.conditional)?;
        m.end()
    }
}

/// A software message's payload.
struct Payload(element::SwPayload);

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = &self.0;
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("bits", &p.bits)?;
        m.serialize_entry("value", &Hex(p.value))?;
        m.serialize_entry("packets", &p.packets)?;
        m.end()
    }
}

impl Serialize for JsonElement<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_element(self.index, self.trace_id, Element::from_generic(self.elem), s)
    }
}

/// A typed element from the pull API, serialised as the module says
/// (the same object as [`JsonElement`] of its generic form).
pub struct JsonDecoded<'a>(pub &'a Decoded);

impl Serialize for JsonDecoded<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_element(self.0.index, self.0.trace_id, self.0.element, s)
    }
}

/// Writes one element of the pull API as a JSON object and a newline.
pub fn write_decoded(out: &mut dyn Write, d: &Decoded) -> io::Result<()> {
    let mut w = &mut *out;
    serde_json::to_writer(&mut w, &JsonDecoded(d)).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// The one serialiser every JSON writer goes through.
fn serialize_element<S: Serializer>(index: u64, trace_id: u8, el: Element, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(None)?;
    m.serialize_entry("index", &index)?;
    m.serialize_entry("trace_id", &trace_id)?;
    m.serialize_entry("type", el.kind_name())?;
    match el {
        Element::Unknown | Element::AddrUnknown { .. } | Element::ExceptionRet { .. } | Element::CycleCount { .. } => {}
        Element::NoSync { reason } | Element::EoTrace { reason } => m.serialize_entry("reason", unsync_name(reason))?,
        Element::TraceOn { reason, .. } => {
            let reason = match reason {
                TraceOnReason::Normal => "normal",
                TraceOnReason::Overflow => "overflow",
                TraceOnReason::ExDebug => "debug_restart",
                _ => "other",
            };
            m.serialize_entry("reason", reason)?;
        }
        Element::PeContext { isa, context: c, .. } => {
            m.serialize_entry("isa", isa_name(isa))?;
            if isa != Isa::RiscV {
                m.serialize_entry("security", security_name(c.security))?;
            }
            if let Some(n) = c.exception_level.and_then(|l| l.number()) {
                m.serialize_entry("exception_level", &n)?;
            }
            m.serialize_entry("bits64", &c.bits64)?;
            if let Some(v) = c.context_id {
                m.serialize_entry("context_id", &Hex(v as u64))?;
            }
            if let Some(v) = c.vmid {
                m.serialize_entry("vmid", &Hex(v as u64))?;
            }
            if let Some(h) = c.hart {
                m.serialize_entry("hart", &h)?;
            }
            if let Some(ie) = c.interrupts_enabled {
                m.serialize_entry("interrupts_enabled", &ie)?;
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
            m.serialize_entry("isa", isa_name(isa))?;
            m.serialize_entry("start", &Hex(start))?;
            m.serialize_entry("end", &Hex(end))?;
            m.serialize_entry("num_instr", &num_instr)?;
            m.serialize_entry("last", &Last(last))?;
        }
        Element::IRangeNoPath {
            isa,
            start,
            next,
            num_instr,
        } => {
            m.serialize_entry("isa", isa_name(isa))?;
            m.serialize_entry("start", &Hex(start))?;
            m.serialize_entry("next", &Hex(next))?;
            m.serialize_entry("num_instr", &num_instr)?;
        }
        Element::AddrNacc { addr, mem_space, .. } => {
            m.serialize_entry("addr", &Hex(addr))?;
            m.serialize_entry("mem_space", &mem_space.to_string())?;
        }
        Element::Exception {
            number,
            preferred_return,
            return_is_branch_target,
            ..
        } => {
            m.serialize_entry("number", &number)?;
            if let Some(a) = preferred_return {
                m.serialize_entry("preferred_return", &Hex(a))?;
            }
            m.serialize_entry("return_is_branch_target", &return_is_branch_target)?;
        }
        Element::Timestamp { timestamp, .. } => m.serialize_entry("timestamp", &Hex(timestamp))?,
        Element::Event(ev) => match ev {
            Event::Trigger => m.serialize_entry("event", "trigger")?,
            Event::Numbered(n) => {
                m.serialize_entry("event", "numbered")?;
                m.serialize_entry("number", &n)?;
            }
            // A kind added later reads as unknown here until it is named.
            _ => m.serialize_entry("event", "unknown")?,
        },
        Element::SwTrace(sw) => {
            if let Some(src) = sw.source {
                m.serialize_entry("master", &src.master)?;
                m.serialize_entry("channel", &src.channel)?;
            }
            if let Some(p) = sw.payload {
                m.serialize_entry("payload", &Payload(p))?;
            }
            m.serialize_entry("marker", &sw.marker)?;
            m.serialize_entry("trigger", &sw.trigger)?;
            m.serialize_entry("frequency", &sw.frequency)?;
            m.serialize_entry("global_error", &sw.global_error)?;
            m.serialize_entry("master_error", &sw.master_error)?;
            if let Some(t) = sw.timestamp {
                m.serialize_entry("timestamp", &Hex(t))?;
            }
        }
        Element::SyncMarker { value } => m.serialize_entry("value", &Hex(value as u64))?,
        Element::MemTrans { op } => {
            let op = match op {
                MemTrans::TraceInit => "init",
                MemTrans::Start => "start",
                MemTrans::Commit => "commit",
                MemTrans::Fail => "fail",
            };
            m.serialize_entry("op", op)?;
        }
        Element::Instrumentation { el, value } => {
            m.serialize_entry("el", &el)?;
            m.serialize_entry("value", &Hex(value))?;
        }
        Element::ItmTrace(itm) => {
            match itm.message {
                ItmMessage::Software { port, size, value } => {
                    m.serialize_entry("message", "software")?;
                    m.serialize_entry("port", &port)?;
                    m.serialize_entry("size", &size)?;
                    m.serialize_entry("value", &Hex(value as u64))?;
                }
                ItmMessage::Hardware {
                    discriminator,
                    size,
                    value,
                } => {
                    m.serialize_entry("message", "hardware")?;
                    m.serialize_entry("discriminator", &discriminator)?;
                    m.serialize_entry("size", &size)?;
                    m.serialize_entry("value", &Hex(value as u64))?;
                }
                ItmMessage::LocalTimestamp {
                    delta,
                    relation,
                    timestamp,
                    ..
                } => {
                    m.serialize_entry("message", "local_timestamp")?;
                    m.serialize_entry("delta", &Hex(delta as u64))?;
                    let rel =
                        ["sync", "timestamp_delayed", "packet_delayed", "both_delayed"][(relation.bits() & 3) as usize];
                    m.serialize_entry("relation", rel)?;
                    m.serialize_entry("timestamp", &Hex(timestamp))?;
                }
                ItmMessage::GlobalTimestamp { timestamp } => {
                    m.serialize_entry("message", "global_timestamp")?;
                    m.serialize_entry("timestamp", &Hex(timestamp))?;
                }
            }
            m.serialize_entry("overflow", &itm.overflow)?;
        }
        Element::Custom { kind, value, text } => {
            m.serialize_entry("custom_kind", &kind)?;
            m.serialize_entry("value", &Hex(value))?;
            if let Some(t) = text {
                m.serialize_entry("text", t)?;
            }
        }
        Element::DataAccess(d) => {
            m.serialize_entry(
                "kind",
                if d.kind == DataAccessKind::Load {
                    "load"
                } else {
                    "store"
                },
            )?;
            if let Some(a) = d.addr {
                m.serialize_entry("addr", &Hex(a))?;
            }
            if let Some(v) = d.value {
                m.serialize_entry("value", &Hex(v))?;
            }
        }
        // A kind added to the library later: its type name only.
        _ => {}
    }
    if let Some(cc) = el.cycle_count() {
        m.serialize_entry("cycle_count", &cc)?;
    }
    m.end()
}

impl fmt::Display for JsonElement<'_> {
    /// The JSON object on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&s)
    }
}
