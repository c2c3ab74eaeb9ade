//! Decoded elements as JSON Lines: one object per element, with the
//! element's trace index and trace ID, its kind (`type`) and only the
//! fields that kind carries.
//!
//! Addresses, data values and timestamps are strings in hex (`"0x8000"`):
//! they are 64-bit values, and many JSON readers (JavaScript, `jq`) hold
//! numbers as doubles, which cannot represent them all. Counts, indices and
//! small numbers are JSON numbers. Optional fields are left out when the
//! trace did not give them.
//!
//! The object for each kind:
//!
//! | `type` | fields |
//! | --- | --- |
//! | `no_sync`, `eo_trace` | `reason` |
//! | `trace_on` | `reason`, `cycle_count`? |
//! | `pe_context` | `isa`, `security`, `exception_level`?, `bits64`, `context_id`?, `vmid`?, `hart`?, `interrupts_enabled`?, `cycle_count`? |
//! | `instr_range` | `isa`, `start`, `end`, `num_instr`, `last` (`executed`, `size`, `kind`, `subtype`, `conditional`), `cycle_count`? |
//! | `i_range_nopath` | `isa`, `start`, `next`, `num_instr` |
//! | `addr_nacc` | `addr`, `mem_space` |
//! | `addr_unknown`, `exception_ret`, `cycle_count` | `cycle_count`? |
//! | `exception` | `number`, `preferred_return`?, `return_is_branch_target`, `cycle_count`? |
//! | `timestamp` | `timestamp`, `cycle_count`? |
//! | `event` | `event` (`trigger`, `numbered`, `unknown`), `number`? |
//! | `swtrace` | `master`?, `channel`?, `payload`? (`bits`, `value`, `packets`), `marker`, `trigger`, `frequency`, `global_error`, `master_error`, `timestamp`? |
//! | `sync_marker` | `value` |
//! | `mem_trans` | `op` |
//! | `instrumentation` | `el`, `value` |
//! | `itm_trace` | `message` (`software`, `hardware`, `local_timestamp`, `global_timestamp`) and its fields, `overflow` |
//! | `custom` | `text`? |
//! | `data_access` | `kind`, `addr`?, `value`? |

use std::fmt;
use std::io::{self, Write};

use coresight_decode::arch::{InstrSubType, InstrType, Isa, SecurityState};
use coresight_decode::elem::{
    DataAccessKind, ElemType, EventType, ItmPktKind, MemTrans, TraceElement, TraceOnReason, UnsyncInfo,
};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

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
    serde_json::to_writer(&mut w, &JsonElement { index, trace_id, elem }).map_err(io::Error::other)?;
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

/// The `type` name of an element kind.
pub fn type_name(t: ElemType) -> &'static str {
    match t {
        ElemType::Unknown => "unknown",
        ElemType::NoSync => "no_sync",
        ElemType::TraceOn => "trace_on",
        ElemType::EoTrace => "eo_trace",
        ElemType::PeContext => "pe_context",
        ElemType::InstrRange => "instr_range",
        ElemType::IRangeNoPath => "i_range_nopath",
        ElemType::AddrNacc => "addr_nacc",
        ElemType::AddrUnknown => "addr_unknown",
        ElemType::Exception => "exception",
        ElemType::ExceptionRet => "exception_ret",
        ElemType::Timestamp => "timestamp",
        ElemType::CycleCount => "cycle_count",
        ElemType::Event => "event",
        ElemType::SwTrace => "swtrace",
        ElemType::SyncMarker => "sync_marker",
        ElemType::MemTrans => "mem_trans",
        ElemType::Instrumentation => "instrumentation",
        ElemType::ItmTrace => "itm_trace",
        ElemType::Custom => "custom",
        ElemType::DataAccess => "data_access",
    }
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
        UnsyncInfo::Eot => "end_of_trace",
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
    }
}

fn instr_subtype_name(t: InstrSubType) -> &'static str {
    match t {
        InstrSubType::None => "none",
        InstrSubType::BranchLink => "branch_link",
        InstrSubType::V8Ret => "ret",
        InstrSubType::V8Eret => "eret",
        InstrSubType::V7ImpliedRet => "implied_ret",
    }
}

/// The `last` object of an instruction range.
struct LastInstr<'a>(&'a TraceElement);

impl Serialize for LastInstr<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("executed", &e.last_instr_exec)?;
        m.serialize_entry("size", &e.last_instr_sz)?;
        m.serialize_entry("kind", instr_type_name(e.last_i_type))?;
        m.serialize_entry("subtype", instr_subtype_name(e.last_i_subtype))?;
        m.serialize_entry("conditional", &e.last_instr_cond)?;
        m.end()
    }
}

/// A software message's payload.
struct SwPayload<'a>(&'a TraceElement);

impl Serialize for SwPayload<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let bits = e.sw_trace.payload_bits;
        let value = if bits >= 64 { e.sw_payload } else { e.sw_payload & ((1u64 << bits) - 1) };
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("bits", &bits)?;
        m.serialize_entry("value", &Hex(value))?;
        m.serialize_entry("packets", &e.sw_trace.payload_num_packets)?;
        m.end()
    }
}

impl Serialize for JsonElement<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.elem;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("index", &self.index)?;
        m.serialize_entry("trace_id", &self.trace_id)?;
        m.serialize_entry("type", type_name(e.elem_type))?;
        // The cycle count, for the kinds that carry one.
        let cc = e.has_cc.then_some(e.cycle_count);
        match e.elem_type {
            ElemType::Unknown => {}
            ElemType::NoSync | ElemType::EoTrace => m.serialize_entry("reason", unsync_name(e.unsync_info))?,
            ElemType::TraceOn => {
                let reason = match e.trace_on_reason {
                    TraceOnReason::Normal => "normal",
                    TraceOnReason::Overflow => "overflow",
                    TraceOnReason::ExDebug => "debug_restart",
                };
                m.serialize_entry("reason", reason)?;
            }
            ElemType::PeContext => {
                let c = &e.context;
                m.serialize_entry("isa", isa_name(e.isa))?;
                if e.isa != Isa::RiscV {
                    m.serialize_entry("security", security_name(c.security))?;
                }
                if c.el_valid
                    && let Some(n) = c.exception_level.number()
                {
                    m.serialize_entry("exception_level", &n)?;
                }
                m.serialize_entry("bits64", &c.bits64)?;
                if c.ctxt_id_valid {
                    m.serialize_entry("context_id", &Hex(c.context_id as u64))?;
                }
                if c.vmid_valid {
                    m.serialize_entry("vmid", &Hex(c.vmid as u64))?;
                }
                if let Some(h) = c.hart {
                    m.serialize_entry("hart", &h)?;
                }
                if let Some(ie) = c.interrupts_enabled {
                    m.serialize_entry("interrupts_enabled", &ie)?;
                }
            }
            ElemType::InstrRange => {
                m.serialize_entry("isa", isa_name(e.isa))?;
                m.serialize_entry("start", &Hex(e.st_addr))?;
                m.serialize_entry("end", &Hex(e.en_addr))?;
                m.serialize_entry("num_instr", &e.num_instr_range)?;
                m.serialize_entry("last", &LastInstr(e))?;
            }
            ElemType::IRangeNoPath => {
                m.serialize_entry("isa", isa_name(e.isa))?;
                m.serialize_entry("start", &Hex(e.st_addr))?;
                m.serialize_entry("next", &Hex(e.en_addr))?;
                m.serialize_entry("num_instr", &e.num_instr_range)?;
            }
            ElemType::AddrNacc => {
                m.serialize_entry("addr", &Hex(e.st_addr))?;
                m.serialize_entry("mem_space", &e.mem_space.to_string())?;
            }
            ElemType::AddrUnknown | ElemType::ExceptionRet | ElemType::CycleCount => {}
            ElemType::Exception => {
                m.serialize_entry("number", &e.exception_number)?;
                if e.excep_ret_addr {
                    m.serialize_entry("preferred_return", &Hex(e.en_addr))?;
                }
                m.serialize_entry("return_is_branch_target", &(e.excep_ret_addr && e.excep_ret_addr_br_tgt))?;
            }
            ElemType::Timestamp => m.serialize_entry("timestamp", &Hex(e.timestamp))?,
            ElemType::Event => match e.event_type {
                EventType::Trigger => m.serialize_entry("event", "trigger")?,
                EventType::Numbered => {
                    m.serialize_entry("event", "numbered")?;
                    m.serialize_entry("number", &e.event_number)?;
                }
                EventType::Unknown => m.serialize_entry("event", "unknown")?,
            },
            ElemType::SwTrace => {
                let sw = &e.sw_trace;
                if sw.id_valid {
                    m.serialize_entry("master", &sw.master_id)?;
                    m.serialize_entry("channel", &sw.channel_id)?;
                }
                if sw.payload_bits > 0 {
                    m.serialize_entry("payload", &SwPayload(e))?;
                }
                m.serialize_entry("marker", &sw.marker)?;
                m.serialize_entry("trigger", &sw.trigger)?;
                m.serialize_entry("frequency", &sw.frequency)?;
                m.serialize_entry("global_error", &sw.global_err)?;
                m.serialize_entry("master_error", &sw.master_err)?;
                if sw.has_timestamp {
                    m.serialize_entry("timestamp", &Hex(e.timestamp))?;
                }
            }
            ElemType::SyncMarker => m.serialize_entry("value", &Hex(e.sync_marker_value as u64))?,
            ElemType::MemTrans => {
                let op = match e.mem_trans {
                    MemTrans::TraceInit => "init",
                    MemTrans::Start => "start",
                    MemTrans::Commit => "commit",
                    MemTrans::Fail => "fail",
                };
                m.serialize_entry("op", op)?;
            }
            ElemType::Instrumentation => {
                m.serialize_entry("el", &e.ite_el)?;
                m.serialize_entry("value", &Hex(e.ite_value))?;
            }
            ElemType::ItmTrace => {
                let itm = &e.itm;
                match itm.kind {
                    ItmPktKind::Swit => {
                        m.serialize_entry("message", "software")?;
                        m.serialize_entry("port", &itm.channel_or_desc)?;
                        m.serialize_entry("size", &itm.payload_size)?;
                        m.serialize_entry("value", &Hex(itm.value as u64))?;
                    }
                    ItmPktKind::Dwt => {
                        m.serialize_entry("message", "hardware")?;
                        m.serialize_entry("discriminator", &itm.channel_or_desc)?;
                        m.serialize_entry("size", &itm.payload_size)?;
                        m.serialize_entry("value", &Hex(itm.value as u64))?;
                    }
                    ItmPktKind::TsLocal => {
                        m.serialize_entry("message", "local_timestamp")?;
                        m.serialize_entry("delta", &Hex(itm.value as u64))?;
                        let rel = ["sync", "timestamp_delayed", "packet_delayed", "both_delayed"][(itm.ts_relation & 3) as usize];
                        m.serialize_entry("relation", rel)?;
                        m.serialize_entry("timestamp", &Hex(e.timestamp))?;
                    }
                    ItmPktKind::TsGlobal => {
                        m.serialize_entry("message", "global_timestamp")?;
                        m.serialize_entry("timestamp", &Hex(e.timestamp))?;
                    }
                }
                m.serialize_entry("overflow", &itm.overflow)?;
            }
            ElemType::Custom => {
                if let Some(t) = e.custom_text {
                    m.serialize_entry("text", t)?;
                }
            }
            ElemType::DataAccess => {
                let d = &e.data;
                m.serialize_entry("kind", if d.kind == DataAccessKind::Load { "load" } else { "store" })?;
                if let Some(a) = d.addr {
                    m.serialize_entry("addr", &Hex(a))?;
                }
                if let Some(v) = d.value {
                    m.serialize_entry("value", &Hex(v))?;
                }
            }
        }
        let with_cc = matches!(
            e.elem_type,
            ElemType::TraceOn
                | ElemType::PeContext
                | ElemType::InstrRange
                | ElemType::AddrUnknown
                | ElemType::Exception
                | ElemType::ExceptionRet
                | ElemType::Timestamp
                | ElemType::CycleCount
        );
        if with_cc && let Some(cc) = cc {
            m.serialize_entry("cycle_count", &cc)?;
        }
        m.end()
    }
}

impl fmt::Display for JsonElement<'_> {
    /// The JSON object on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&s)
    }
}
