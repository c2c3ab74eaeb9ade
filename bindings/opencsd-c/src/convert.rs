//! Conversions between the library's elements and the C structs, and the
//! printer text of the OpenCSD version this build follows.

use coresight_decode::arch::{ExceptionLevel, InstrSubType, InstrType, Isa, SecurityState};
use coresight_decode::datapath::DatapathResp;
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::element::{EventType, MemTrans, PeContext, SwTraceInfo, TraceOnReason, UnsyncInfo};
#[cfg(feature = "opencsd-1-8")]
use coresight_decode::element::{ItmInfo, ItmPktKind};
use coresight_decode::error::ErrCode;
use coresight_decode::memory::MemSpace;
use std::ffi::{c_char, c_int};

use crate::abi::{self, OcsdGenericTraceElem, OcsdPeContext, OcsdResp, elem, flag};

fn isa_from_c(v: u32) -> Isa {
    match v {
        0 => Isa::Arm,
        1 => Isa::Thumb2,
        2 => Isa::Aarch64,
        3 => Isa::Tee,
        4 => Isa::Jazelle,
        5 => Isa::Custom,
        _ => Isa::default(),
    }
}

/// The C element kind of `t`, or `None` for kinds the ABI lacks (1.3.x
/// has no INSTRUMENTATION or ITMTRACE; no ABI has DATA_ACCESS).
pub fn elem_type_to_c(t: ElemType) -> Option<u32> {
    Some(match t {
        ElemType::Unknown => elem::UNKNOWN,
        ElemType::NoSync => elem::NO_SYNC,
        ElemType::TraceOn => elem::TRACE_ON,
        ElemType::EoTrace => elem::EO_TRACE,
        ElemType::PeContext => elem::PE_CONTEXT,
        ElemType::InstrRange => elem::INSTR_RANGE,
        ElemType::IRangeNoPath => elem::I_RANGE_NOPATH,
        ElemType::AddrNacc => elem::ADDR_NACC,
        ElemType::AddrUnknown => elem::ADDR_UNKNOWN,
        ElemType::Exception => elem::EXCEPTION,
        ElemType::ExceptionRet => elem::EXCEPTION_RET,
        ElemType::Timestamp => elem::TIMESTAMP,
        ElemType::CycleCount => elem::CYCLE_COUNT,
        ElemType::Event => elem::EVENT,
        ElemType::SwTrace => elem::SWTRACE,
        ElemType::SyncMarker => elem::SYNC_MARKER,
        ElemType::MemTrans => elem::MEMTRANS,
        #[cfg(feature = "opencsd-1-8")]
        ElemType::Instrumentation => elem::INSTRUMENTATION,
        #[cfg(feature = "opencsd-1-8")]
        ElemType::ItmTrace => elem::ITMTRACE,
        ElemType::Custom => elem::CUSTOM,
        _ => return None,
    })
}

fn elem_type_from_c(v: u32) -> ElemType {
    match v {
        elem::NO_SYNC => ElemType::NoSync,
        elem::TRACE_ON => ElemType::TraceOn,
        elem::EO_TRACE => ElemType::EoTrace,
        elem::PE_CONTEXT => ElemType::PeContext,
        elem::INSTR_RANGE => ElemType::InstrRange,
        elem::I_RANGE_NOPATH => ElemType::IRangeNoPath,
        elem::ADDR_NACC => ElemType::AddrNacc,
        elem::ADDR_UNKNOWN => ElemType::AddrUnknown,
        elem::EXCEPTION => ElemType::Exception,
        elem::EXCEPTION_RET => ElemType::ExceptionRet,
        elem::TIMESTAMP => ElemType::Timestamp,
        elem::CYCLE_COUNT => ElemType::CycleCount,
        elem::EVENT => ElemType::Event,
        elem::SWTRACE => ElemType::SwTrace,
        elem::SYNC_MARKER => ElemType::SyncMarker,
        elem::MEMTRANS => ElemType::MemTrans,
        #[cfg(feature = "opencsd-1-8")]
        elem::INSTRUMENTATION => ElemType::Instrumentation,
        #[cfg(feature = "opencsd-1-8")]
        elem::ITMTRACE => ElemType::ItmTrace,
        elem::CUSTOM => ElemType::Custom,
        _ => ElemType::Unknown,
    }
}

fn context_from_c(c: &OcsdPeContext) -> PeContext {
    PeContext {
        security: match c.security_level {
            1 => SecurityState::NonSecure,
            2 => SecurityState::Root,
            3 => SecurityState::Realm,
            _ => SecurityState::Secure,
        },
        exception_level: match c.exception_level {
            0..=3 => ExceptionLevel::from_number(c.exception_level as u8),
            _ => ExceptionLevel::Unknown,
        },
        el_valid: c.flags & 8 != 0,
        bits64: c.flags & 1 != 0,
        context_id: c.context_id,
        ctxt_id_valid: c.flags & 2 != 0,
        vmid: c.vmid,
        vmid_valid: c.flags & 4 != 0,
        hart: None,
        interrupts_enabled: None,
    }
}

fn instr_type_from_c(v: u32) -> InstrType {
    match v {
        1 => InstrType::Branch,
        2 => InstrType::BranchIndirect,
        3 => InstrType::Isb,
        4 => InstrType::DsbDmb,
        5 => InstrType::WfiWfe,
        6 => InstrType::Tstart,
        _ => InstrType::Other,
    }
}

fn instr_subtype_from_c(v: u32) -> InstrSubType {
    match v {
        1 => InstrSubType::BranchLink,
        2 => InstrSubType::V8Ret,
        3 => InstrSubType::V8Eret,
        4 => InstrSubType::V7ImpliedRet,
        _ => InstrSubType::None,
    }
}

fn swt_to_c(s: &SwTraceInfo) -> abi::OcsdSwtInfo {
    abi::OcsdSwtInfo {
        swt_master_id: s.master_id,
        swt_channel_id: s.channel_id,
        swt_flag_bits: s.payload_bits as u32
            | (s.payload_num_packets as u32) << 8
            | (s.marker as u32) << 16
            | (s.has_timestamp as u32) << 17
            | (s.master_err as u32) << 19
            | (s.global_err as u32) << 20
            | (s.trigger as u32) << 21
            | (s.frequency as u32) << 22
            | (s.id_valid as u32) << 23,
    }
}

fn swt_from_c(s: &abi::OcsdSwtInfo) -> SwTraceInfo {
    let b = s.swt_flag_bits;
    SwTraceInfo {
        master_id: s.swt_master_id,
        channel_id: s.swt_channel_id,
        payload_bits: (b & 0xff) as u8,
        payload_num_packets: (b >> 8 & 0xff) as u8,
        marker: b >> 16 & 1 != 0,
        has_timestamp: b >> 17 & 1 != 0,
        master_err: b >> 19 & 1 != 0,
        global_err: b >> 20 & 1 != 0,
        trigger: b >> 21 & 1 != 0,
        frequency: b >> 22 & 1 != 0,
        id_valid: b >> 23 & 1 != 0,
    }
}

/// No C element kind for this library kind.
const NO_KIND: u32 = u32::MAX;

/// C element kind by the library's (`ElemType as usize`), built from
/// [`elem_type_to_c`] so the table cannot disagree with it.
const ELEM_KIND: [u32; 64] = {
    let mut t = [NO_KIND; 64];
    let all = [
        ElemType::Unknown,
        ElemType::NoSync,
        ElemType::TraceOn,
        ElemType::EoTrace,
        ElemType::PeContext,
        ElemType::InstrRange,
        ElemType::IRangeNoPath,
        ElemType::AddrNacc,
        ElemType::AddrUnknown,
        ElemType::Exception,
        ElemType::ExceptionRet,
        ElemType::Timestamp,
        ElemType::CycleCount,
        ElemType::Event,
        ElemType::SwTrace,
        ElemType::SyncMarker,
        ElemType::MemTrans,
        #[cfg(feature = "opencsd-1-8")]
        ElemType::Instrumentation,
        #[cfg(feature = "opencsd-1-8")]
        ElemType::ItmTrace,
        ElemType::Custom,
    ];
    let mut i = 0;
    while i < all.len() {
        t[all[i] as usize] = match all[i] {
            ElemType::Unknown => elem::UNKNOWN,
            ElemType::NoSync => elem::NO_SYNC,
            ElemType::TraceOn => elem::TRACE_ON,
            ElemType::EoTrace => elem::EO_TRACE,
            ElemType::PeContext => elem::PE_CONTEXT,
            ElemType::InstrRange => elem::INSTR_RANGE,
            ElemType::IRangeNoPath => elem::I_RANGE_NOPATH,
            ElemType::AddrNacc => elem::ADDR_NACC,
            ElemType::AddrUnknown => elem::ADDR_UNKNOWN,
            ElemType::Exception => elem::EXCEPTION,
            ElemType::ExceptionRet => elem::EXCEPTION_RET,
            ElemType::Timestamp => elem::TIMESTAMP,
            ElemType::CycleCount => elem::CYCLE_COUNT,
            ElemType::Event => elem::EVENT,
            ElemType::SwTrace => elem::SWTRACE,
            ElemType::SyncMarker => elem::SYNC_MARKER,
            ElemType::MemTrans => elem::MEMTRANS,
            #[cfg(feature = "opencsd-1-8")]
            ElemType::Instrumentation => elem::INSTRUMENTATION,
            #[cfg(feature = "opencsd-1-8")]
            ElemType::ItmTrace => elem::ITMTRACE,
            ElemType::Custom => elem::CUSTOM,
            _ => NO_KIND,
        };
        i += 1;
    }
    t
};

/// `ocsd_isa` by `Isa as usize`.
const ISA_C: [u32; 16] = {
    let mut t = [6; 16];
    t[Isa::Arm as usize] = 0;
    t[Isa::Thumb2 as usize] = 1;
    t[Isa::Aarch64 as usize] = 2;
    t[Isa::Tee as usize] = 3;
    t[Isa::Jazelle as usize] = 4;
    t[Isa::Custom as usize] = 5;
    t[Isa::RiscV as usize] = 5;
    t
};

/// [`ISA_C`] with one entry per `Isa`.
const ISA_RANGE_C: [u32; 8] = {
    let mut t = [0; 8];
    let mut i = 0;
    while i < 8 {
        t[i] = ISA_C[i];
        i += 1;
    }
    t
};
const _: () = assert!(Isa::Unknown as usize == 7, "ISA_RANGE_C has one entry per Isa");

const ITYPE_C: [u32; 8] = {
    let mut t = [0; 8];
    t[InstrType::Branch as usize] = 1;
    t[InstrType::BranchIndirect as usize] = 2;
    t[InstrType::Isb as usize] = 3;
    t[InstrType::DsbDmb as usize] = 4;
    t[InstrType::WfiWfe as usize] = 5;
    t[InstrType::Tstart as usize] = 6;
    t
};

const ISUB_C: [u32; 8] = {
    let mut t = [0; 8];
    t[InstrSubType::BranchLink as usize] = 1;
    t[InstrSubType::V8Ret as usize] = 2;
    t[InstrSubType::V8Eret as usize] = 3;
    t[InstrSubType::V7ImpliedRet as usize] = 4;
    t
};

/// Instruction types and subtypes are OpenCSD's values: an instruction
/// range converts them by a cast.
const _: () = {
    let mut i = 0;
    while i < 8 {
        assert!(ITYPE_C[i] as usize == i || i > InstrType::Tstart as usize);
        assert!(ISUB_C[i] as usize == i || i > InstrSubType::V7ImpliedRet as usize);
        i += 1;
    }
};

const SEC_C: [i32; 4] = {
    let mut t = [0; 4];
    t[SecurityState::NonSecure as usize] = 1;
    t[SecurityState::Root as usize] = 2;
    t[SecurityState::Realm as usize] = 3;
    t
};

const EL_C: [i32; 8] = {
    let mut t = [-1; 8];
    t[ExceptionLevel::El0 as usize] = 0;
    t[ExceptionLevel::El1 as usize] = 1;
    t[ExceptionLevel::El2 as usize] = 2;
    t[ExceptionLevel::El3 as usize] = 3;
    t
};

/// What [`elem_to_c`] may keep between elements (nothing yet: each
/// field is cheaper to convert than to compare).
#[derive(Default)]
pub struct ElemCache {}

/// Fills `c` from `e`. `payload` receives the software trace payload
/// bytes that `ptr_extended_data` points at; it must outlive the use of
/// `c` (the sink keeps both). `cache` must be used with this `c` only.
/// Returns `false` for an element the ABI cannot carry.
///
/// `c` is the sink's one element, used again for every element, as
/// OpenCSD hands its callback element objects it reuses. An instruction
/// range (nearly every element of a trace) writes only what OpenCSD sets
/// for one: see [`range_to_c`]. Any other kind writes every field.
#[inline(always)]
pub fn elem_to_c(e: &TraceElement, c: &mut OcsdGenericTraceElem, payload: &mut [u8; 8], cache: &mut ElemCache) -> bool {
    if e.elem_type == ElemType::InstrRange {
        range_to_c(e, c);
        return true;
    }
    elem_to_c_full(e, c, payload, cache)
}

/// An instruction range into `c`: the fields OpenCSD's decoders set on
/// one (`setType` clears the flags, the payload word and the extended data
/// pointer; then the range, its instruction count, the ISA, the last
/// instruction's type, subtype, size, execution and condition, and a cycle
/// count or timestamp where flagged). The context, the rest of the payload,
/// and the cycle count and timestamp when not flagged keep what earlier
/// elements left, as in OpenCSD's reused element objects: neither perf nor
/// the element printer reads them on a range.
#[inline(always)]
pub fn range_to_c(e: &TraceElement, c: &mut OcsdGenericTraceElem) {
    set_range_ready(c);
    range_fields_to_c(e, c);
}

/// Makes `c` an instruction range with no extended data: what
/// [`range_fields_to_c`] expects to find. A sink keeps its element so
/// between elements, so that the ranges that make up nearly all of a
/// trace do not write these two fields again each time.
#[inline(always)]
pub fn set_range_ready(c: &mut OcsdGenericTraceElem) {
    c.elem_type = elem::INSTR_RANGE;
    c.ptr_extended_data = std::ptr::null();
}

/// Whether `c` is as [`set_range_ready`] leaves it.
pub fn is_range_ready(c: &OcsdGenericTraceElem) -> bool {
    c.elem_type == elem::INSTR_RANGE && c.ptr_extended_data.is_null()
}

/// [`range_to_c`] into an element already [range ready](set_range_ready):
/// the fields that differ from range to range.
#[inline(always)]
pub fn range_fields_to_c(e: &TraceElement, c: &mut OcsdGenericTraceElem) {
    // Indexed by the enum's value, below the table's length: no mask,
    // no bounds check.
    c.isa = ISA_RANGE_C[e.isa as usize];
    c.st_addr = e.st_addr;
    c.en_addr = e.en_addr;
    // The library's instruction types and subtypes are OpenCSD's values
    // (checked where ITYPE_C and ISUB_C are built).
    c.last_i_type = e.last_i_type as u32;
    c.last_i_subtype = e.last_i_subtype as u32;
    c.payload.word = e.num_instr_range;
    c.flag_bits = e.last_instr_exec as u32
        | ((e.last_instr_sz as u32) << flag::LAST_INSTR_SZ_SHIFT & flag::LAST_INSTR_SZ_MASK)
        | (e.last_instr_cond as u32) << 10;
    // A cycle count or timestamp on a range is rare: one test of both
    // flags here, their bits and values out of line.
    if e.has_cc | e.has_ts {
        range_cc_ts_to_c(e, c);
    }
}

/// The cycle count and timestamp of a range that has either.
#[cold]
#[inline(never)]
fn range_cc_ts_to_c(e: &TraceElement, c: &mut OcsdGenericTraceElem) {
    c.flag_bits |= (e.has_cc as u32) << 4 | (e.has_ts as u32) << 9;
    c.cycle_count = e.cycle_count;
    c.timestamp = e.timestamp;
}

/// Every field of `c` from `e` (the element kinds other than instruction
/// ranges: rare, so kept out of the element loop).
#[inline(never)]
pub(crate) fn elem_to_c_full(
    e: &TraceElement,
    c: &mut OcsdGenericTraceElem,
    payload: &mut [u8; 8],
    cache: &mut ElemCache,
) -> bool {
    let t = ELEM_KIND[e.elem_type as usize & 63];
    if t == NO_KIND {
        return false;
    }
    c.elem_type = t;
    c.isa = ISA_C[e.isa as usize & 15];
    c.st_addr = e.st_addr;
    c.en_addr = e.en_addr;
    // Comparing contexts costs more than converting one (the library's
    // context has optional fields the C one lacks): convert every time,
    // from tables.
    {
        let x = &e.context;
        c.context = OcsdPeContext {
            security_level: SEC_C[x.security as usize & 3],
            exception_level: EL_C[x.exception_level as usize & 7],
            context_id: x.context_id,
            vmid: x.vmid,
            flags: x.bits64 as u32
                | (x.ctxt_id_valid as u32) << 1
                | (x.vmid_valid as u32) << 2
                | (x.el_valid as u32) << 3,
        };
    }
    let _ = cache;
    c.timestamp = e.timestamp;
    c.cycle_count = e.cycle_count;
    c.last_i_type = ITYPE_C[e.last_i_type as usize & 7];
    c.last_i_subtype = ISUB_C[e.last_i_subtype as usize & 7];
    c.flag_bits = (e.last_instr_exec as u32)
        | ((e.last_instr_sz as u32) << flag::LAST_INSTR_SZ_SHIFT & flag::LAST_INSTR_SZ_MASK)
        | (e.has_cc as u32) << 4
        | (e.excep_ret_addr as u32) << 6
        | (e.has_ts as u32) << 9
        | (e.last_instr_cond as u32) << 10
        | (e.excep_ret_addr_br_tgt as u32) << 11;
    c.ptr_extended_data = std::ptr::null();
    if e.elem_type == ElemType::IRangeNoPath {
        let mut raw = [0; abi::PAYLOAD_WORDS];
        raw[0] = e.num_instr_range;
        c.payload.raw = raw;
    } else {
        other_payload(e, c, payload);
    }
    true
}

/// The payload of the element kinds other than instruction ranges.
fn other_payload(e: &TraceElement, c: &mut OcsdGenericTraceElem, payload: &mut [u8; 8]) {
    let mut p = abi::ElemPayload {
        raw: [0; abi::PAYLOAD_WORDS],
    };
    match e.elem_type {
        ElemType::Exception => p.word = e.exception_number,
        ElemType::Event => {
            let ev_type = match e.event_type {
                EventType::Unknown => 0,
                EventType::Trigger => 1,
                EventType::Numbered => 2,
                // A kind OpenCSD's ABI has no number for.
                _ => 0,
            };
            p.trace_event = [ev_type, e.event_number];
        }
        ElemType::TraceOn => {
            p.word = match e.trace_on_reason {
                TraceOnReason::Normal => 0,
                TraceOnReason::Overflow => 1,
                TraceOnReason::ExDebug => 2,
                _ => 0,
            }
        }
        ElemType::SwTrace => {
            p.sw_trace_info = swt_to_c(&e.sw_trace);
            if e.sw_trace.payload_bits > 0 {
                *payload = e.sw_payload.to_le_bytes();
                c.ptr_extended_data = payload.as_ptr().cast();
                c.flag_bits |= flag::EXTENDED_DATA;
            }
        }
        ElemType::NoSync | ElemType::EoTrace => {
            p.word = match e.unsync_info {
                UnsyncInfo::Unknown => 0,
                UnsyncInfo::InitDecoder => 1,
                UnsyncInfo::ResetDecoder => 2,
                UnsyncInfo::Overflow => 3,
                UnsyncInfo::Discard => 4,
                UnsyncInfo::BadPacket => 5,
                // 1.3.x has no UNSYNC_BAD_IMAGE: a bad packet there.
                UnsyncInfo::BadImage if cfg!(feature = "opencsd-1-8") => abi::UNSYNC_BAD_IMAGE,
                UnsyncInfo::BadImage => 5,
                UnsyncInfo::Eot => abi::UNSYNC_EOT,
                _ => 0,
            }
        }
        ElemType::SyncMarker => p.sync_marker = [0, e.sync_marker_value],
        ElemType::MemTrans => {
            p.word = match e.mem_trans {
                MemTrans::TraceInit => 0,
                MemTrans::Start => 1,
                MemTrans::Commit => 2,
                MemTrans::Fail => 3,
            }
        }
        // 1.8.x keeps the memory space of an inaccessible address in the
        // exception number; 1.3.x had no place for it.
        ElemType::AddrNacc if cfg!(feature = "opencsd-1-8") => p.word = e.mem_space.bits() as u32,
        #[cfg(feature = "opencsd-1-8")]
        ElemType::Instrumentation => {
            p.sw_ite = abi::TraceSwIte {
                el: e.ite_el,
                value: e.ite_value,
            }
        }
        #[cfg(feature = "opencsd-1-8")]
        ElemType::ItmTrace => p.swt_itm = itm_to_c(&e.itm),
        _ => {}
    }
    c.payload = p;
}

#[cfg(feature = "opencsd-1-8")]
fn itm_to_c(i: &ItmInfo) -> abi::SwtItmInfo {
    abi::SwtItmInfo {
        pkt_type: match i.kind {
            ItmPktKind::Swit => 0,
            ItmPktKind::Dwt => 1,
            ItmPktKind::TsLocal => 2 + (i.ts_relation as u32 & 3),
            ItmPktKind::TsGlobal => 6,
            // A kind OpenCSD 1.8 has no number for: none of its values.
            _ => u32::MAX,
        },
        payload_src_id: i.channel_or_desc,
        payload_size: i.payload_size,
        value: i.value,
        overflow: i.overflow as u8,
    }
}

#[cfg(feature = "opencsd-1-8")]
fn itm_from_c(i: &abi::SwtItmInfo) -> ItmInfo {
    let (kind, ts_relation) = match i.pkt_type {
        0 => (ItmPktKind::Swit, 0),
        1 => (ItmPktKind::Dwt, 0),
        t @ 2..=5 => (ItmPktKind::TsLocal, (t - 2) as u8),
        _ => (ItmPktKind::TsGlobal, 0),
    };
    ItmInfo {
        kind,
        channel_or_desc: i.payload_src_id,
        payload_size: i.payload_size,
        overflow: i.overflow != 0,
        ts_relation,
        value: i.value,
    }
}

/// The library's element for a C element (for `ocsd_gen_elem_str`).
///
/// # Safety
/// `c.ptr_extended_data`, when the extended-data flag is set on a
/// software trace element, points at the payload's bytes.
pub unsafe fn elem_from_c(c: &OcsdGenericTraceElem) -> TraceElement {
    let f = c.flag_bits;
    let mut e = TraceElement::new(elem_type_from_c(c.elem_type));
    e.isa = isa_from_c(c.isa);
    e.st_addr = c.st_addr;
    e.en_addr = c.en_addr;
    e.context = context_from_c(&c.context);
    e.timestamp = c.timestamp;
    e.cycle_count = c.cycle_count;
    e.has_cc = f & flag::HAS_CC != 0;
    e.last_i_type = instr_type_from_c(c.last_i_type);
    e.last_i_subtype = instr_subtype_from_c(c.last_i_subtype);
    e.last_instr_exec = f & flag::LAST_INSTR_EXEC != 0;
    e.last_instr_sz = ((f & flag::LAST_INSTR_SZ_MASK) >> flag::LAST_INSTR_SZ_SHIFT) as u8;
    e.last_instr_cond = f & flag::LAST_INSTR_COND != 0;
    e.excep_ret_addr = f & flag::EXCEP_RET_ADDR != 0;
    e.excep_ret_addr_br_tgt = f & flag::EXCEP_RET_ADDR_BR_TGT != 0;
    e.has_ts = f & flag::HAS_TS != 0;
    let p = c.payload;
    // SAFETY: every union member is plain integers, so reading any of
    // them is reading initialised bytes of the right size.
    let word = unsafe { p.word };
    e.exception_number = word;
    e.num_instr_range = word;
    match e.elem_type {
        ElemType::Event => {
            // SAFETY: as above.
            let [t, n] = unsafe { p.trace_event };
            e.event_type = match t {
                1 => EventType::Trigger,
                2 => EventType::Numbered,
                _ => EventType::Unknown,
            };
            e.event_number = n;
        }
        ElemType::TraceOn => {
            e.trace_on_reason = match word {
                1 => TraceOnReason::Overflow,
                2 => TraceOnReason::ExDebug,
                _ => TraceOnReason::Normal,
            }
        }
        ElemType::NoSync | ElemType::EoTrace => {
            e.unsync_info = match word {
                1 => UnsyncInfo::InitDecoder,
                2 => UnsyncInfo::ResetDecoder,
                3 => UnsyncInfo::Overflow,
                4 => UnsyncInfo::Discard,
                5 => UnsyncInfo::BadPacket,
                abi::UNSYNC_EOT => UnsyncInfo::Eot,
                abi::UNSYNC_BAD_IMAGE => UnsyncInfo::BadImage,
                _ => UnsyncInfo::Unknown,
            }
        }
        ElemType::SwTrace => {
            // SAFETY: as above.
            e.sw_trace = swt_from_c(unsafe { &p.sw_trace_info });
            let bytes = (e.sw_trace.payload_bits as usize * e.sw_trace.payload_num_packets.max(1) as usize)
                .div_ceil(8)
                .min(8);
            if f & flag::EXTENDED_DATA != 0 && !c.ptr_extended_data.is_null() {
                let mut buf = [0u8; 8];
                // SAFETY: the caller guarantees the pointer holds the
                // payload, which is at most `bytes` long.
                unsafe { std::ptr::copy_nonoverlapping(c.ptr_extended_data.cast::<u8>(), buf.as_mut_ptr(), bytes) };
                e.sw_payload = u64::from_le_bytes(buf);
            }
        }
        // SAFETY: as above.
        ElemType::SyncMarker => e.sync_marker_value = unsafe { p.sync_marker[1] },
        ElemType::MemTrans => {
            e.mem_trans = match word {
                1 => MemTrans::Start,
                2 => MemTrans::Commit,
                3 => MemTrans::Fail,
                _ => MemTrans::TraceInit,
            }
        }
        ElemType::AddrNacc => e.mem_space = MemSpace::from_bits(word as u8),
        #[cfg(feature = "opencsd-1-8")]
        ElemType::Instrumentation => {
            // SAFETY: as above.
            let ite = unsafe { p.sw_ite };
            e.ite_el = ite.el;
            e.ite_value = ite.value;
        }
        // SAFETY: as above.
        #[cfg(feature = "opencsd-1-8")]
        ElemType::ItmTrace => e.itm = itm_from_c(unsafe { &p.swt_itm }),
        _ => {}
    }
    e
}

/// The description of an element as this build's OpenCSD version prints
/// it.
pub fn elem_text(e: &TraceElement) -> String {
    let mut s = String::with_capacity(96);
    e.write_to(&mut s);
    if cfg!(feature = "opencsd-1-8") {
        s
    } else {
        to_1_3_text(&s).into_owned()
    }
}

/// Rewrites one line of 1.8.0 printer text (packet or element) into
/// 1.3.3's: the library's own rewrite,
/// [`coresight_decode::printers::opencsd_1_3_text`] (which says what
/// differs).
pub fn to_1_3_text(line: &str) -> std::borrow::Cow<'_, str> {
    coresight_decode::printers::opencsd_1_3_text(line)
}

/// [`to_1_3_text`] in a 1.3.x build; the line unchanged in a 1.8.x one.
pub fn to_1_3_text_if_default(line: &str) -> std::borrow::Cow<'_, str> {
    if cfg!(feature = "opencsd-1-8") {
        std::borrow::Cow::Borrowed(line)
    } else {
        to_1_3_text(line)
    }
}

/// A datapath response for C.
pub(crate) fn resp_to_c(r: DatapathResp) -> OcsdResp {
    match r {
        DatapathResp::Cont => 0,
        DatapathResp::WarnCont => 1,
        DatapathResp::ErrCont => 2,
        DatapathResp::Wait => 3,
        DatapathResp::WarnWait => 4,
        DatapathResp::ErrWait => 5,
        DatapathResp::FatalNotInit => 6,
        DatapathResp::FatalInvalidOp => 7,
        DatapathResp::FatalInvalidParam => 8,
        DatapathResp::FatalInvalidData => 9,
        DatapathResp::FatalSysErr => 10,
    }
}

/// A client callback's response.
pub(crate) fn resp_from_c(r: OcsdResp) -> DatapathResp {
    match r {
        0 => DatapathResp::Cont,
        1 => DatapathResp::WarnCont,
        2 => DatapathResp::ErrCont,
        3 => DatapathResp::Wait,
        4 => DatapathResp::WarnWait,
        5 => DatapathResp::ErrWait,
        6 => DatapathResp::FatalNotInit,
        7 => DatapathResp::FatalInvalidOp,
        8 => DatapathResp::FatalInvalidParam,
        9 => DatapathResp::FatalInvalidData,
        _ => DatapathResp::FatalSysErr,
    }
}

/// Copies `s` into a C buffer of `size` bytes, truncated and NUL
/// terminated.
///
/// # Safety
/// `buf` is null or points at `size` writable bytes.
pub(crate) unsafe fn copy_out(s: &str, buf: *mut c_char, size: c_int) -> bool {
    if buf.is_null() || size <= 0 {
        return false;
    }
    let n = s.len().min(size as usize - 1);
    // SAFETY: `buf` holds `size` bytes (caller) and `n < size`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
    n == s.len()
}

/// An OpenCSD error code from C.
pub(crate) fn code_from_c(v: c_int) -> Option<ErrCode> {
    // The codes are dense from 0: walk them rather than keep a second table.
    use ErrCode::*;
    const ALL: [ErrCode; 47] = [
        Ok,
        Fail,
        Mem,
        NotInit,
        InvalidId,
        BadHandle,
        InvalidParamVal,
        InvalidParamType,
        FileError,
        NoProtocol,
        AttachTooMany,
        AttachInvalidParam,
        AttachCompNotFound,
        RdrFileNotFound,
        RdrInvalidInit,
        RdrNoDecoder,
        DataDecodeFatal,
        DfmtrNotContTrace,
        DfmtrBadFhSync,
        BadPacketSeq,
        InvalidPcktHdr,
        PktInterpFail,
        UnsupportedIsa,
        HwCfgUnsupp,
        UnsuppDecodePkt,
        BadDecodePkt,
        CommitPktOverrun,
        MemNacc,
        RetStackOverflow,
        DcdtNoFormatter,
        MemAccOverlap,
        MemAccFileNotFound,
        MemAccFileDiffRange,
        MemAccRangeInvalid,
        MemAccBadLen,
        TestSnapshotParse,
        TestSnapshotParseInfo,
        TestSnapshotRead,
        TestSsToDecoder,
        DcdregNameRepeat,
        DcdregNameUnknown,
        DcdregTypeUnknown,
        DcdregTooMany,
        DcdInterfaceUnused,
        InvalidOpcode,
        IRangeLimitOverrun,
        BadDecodeImage,
    ];
    ALL.iter().copied().find(|c| c.code() as c_int == v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_table_agrees_with_the_match() {
        for (i, &k) in ELEM_KIND.iter().enumerate() {
            if k != NO_KIND {
                let e = TraceElement::new(elem_type_from_c(k));
                assert_eq!(e.elem_type as usize, i);
                assert_eq!(elem_type_to_c(e.elem_type), Some(k));
            }
        }
    }

    #[test]
    fn text_1_3_rewrites() {
        assert_eq!(
            to_1_3_text("Idx:1; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0xffffffc000081000; Memspace [0x4:EL2N] )\n"),
            "Idx:1; ID:10; OCSD_GEN_TRC_ELEM_ADDR_NACC( 0xffffffc000081000 )\n"
        );
        assert_eq!(
            to_1_3_text(
                "Idx:1; ID:10; [0x01 0x01 0x00 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }; Decoder Sync point TINFO\n"
            ),
            "Idx:1; ID:10; [0x01 0x01 0x00 ];\tI_TRACE_INFO : Trace Info.; INFO=0x0 { CC.0 }\n"
        );
        assert_eq!(
            to_1_3_text("Idx:9; ID:10; [0x0e 0x01 ];\tI_CCNT_F2 : Cycle Count format 2.; Count=0x1; Commit(1)\n"),
            "Idx:9; ID:10; [0x0e 0x01 ];\tI_CCNT_F2 : Cycle Count format 2.; Count=0x1\n"
        );
        assert_eq!(to_1_3_text("plain\n"), "plain\n");
    }
}
