//! The protocol packet structs of OpenCSD's headers (`ocsd_etmv4_i_pkt`,
//! `ocsd_etmv3_pkt`, `ocsd_ptm_pkt`, `ocsd_stm_pkt`, `ocsd_itm_pkt`; ETE
//! uses ETMv4's), filled from the library's packets and read back into
//! them (for `ocsd_pkt_str`). `tests/layout.rs` checks sizes, offsets and
//! bit-field positions against the C headers. Bit-fields are carried as
//! the `uint32_t` word the compiler packs them into (from bit 0 up, as GCC
//! and Clang do on little-endian targets).

use coresight_decode::arch::Isa;
use coresight_decode::etmv3::{Etmv3Packet, Etmv3PktType};
use coresight_decode::etmv4::EtmV4Packet;
use coresight_decode::etmv4::PktType as E4;
use coresight_decode::etmv4::{Atoms, ExceptionInfo, PktContext, QInfo, TraceInfo, VAddr};
use coresight_decode::itm::{ItmPacket, ItmPktType};
use coresight_decode::printers::TracePacket;
use coresight_decode::ptm::{ISyncReason, PtmPacket, PtmPktType};
use coresight_decode::stm::{StmPacket, StmPktType, StmTsType};

/// `ocsd_pkt_vaddr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdPktVaddr {
    /// `VA_32BIT` (0) or `VA_64BIT` (1).
    pub size: u32,
    pub val: u64,
    pub pkt_bits: u8,
    pub valid_bits: u8,
}

/// `ocsd_pkt_atom`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdPktAtom {
    pub en_bits: u32,
    pub num: u8,
}

// ------------------------------------------------------------------ ETMv4

/// `etmv4_context_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv4Context {
    /// EL (bits 1:0), SF (2), NS (3), updated (4), updated_c (5),
    /// updated_v (6), NSE (7).
    pub bits: u32,
    pub ctxt_id: u32,
    pub vmid: u32,
}

/// The `ts` member of `ocsd_etmv4_i_pkt`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv4Ts {
    pub timestamp: u64,
    pub bits_changed: u8,
}

/// The `cond_instr` member.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv4CondInstr {
    pub cond_c_key: u32,
    pub num_c_elem: u8,
    /// cond_key_set (bit 0), f3_final_elem (1), f2_cond_incr (2).
    pub bits: u32,
}

/// The `cond_result` member.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv4CondResult {
    pub cond_r_key_0: u32,
    pub cond_r_key_1: u32,
    pub bits: u32,
}

/// The `Q_pkt` member.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv4Q {
    pub q_count: u32,
    /// addr_present (bit 0), addr_match (1), count_present (2), q_type (6:3).
    pub bits: u32,
}

/// The `ite_pkt` member (1.8.x).
#[cfg(feature = "opencsd-1-8")]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv4Ite {
    pub el: u8,
    pub value: u64,
}

/// `ocsd_etmv4_i_pkt` (ETMv4 and ETE).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdEtmv4IPkt {
    pub pkt_type: u32,
    pub v_addr: OcsdPktVaddr,
    pub v_addr_isa: u8,
    pub context: Etmv4Context,
    pub ts: Etmv4Ts,
    pub cc_threshold: u32,
    pub atom: OcsdPktAtom,
    pub cycle_count: u32,
    pub curr_spec_depth: u32,
    pub p0_key: u32,
    pub commit_elements: u32,
    pub cancel_elements: u32,
    /// `etmv4_trace_info_t`: the INFO section in bits 15:0; 1.8.x keeps
    /// initial_t_info in bit 16 and spec_field_present in bit 17 (this
    /// library sets them in 1.3.x too, above the bits 1.3.x names).
    pub trace_info: u32,
    /// exceptionType (bits 9:0), addr_interp (11:10), m_fault_pending
    /// (12), m_type (13).
    pub exception_info: u32,
    pub addr_exact_match_idx: u8,
    pub dsm_val: u8,
    pub event_val: u8,
    pub cond_instr: Etmv4CondInstr,
    pub cond_result: Etmv4CondResult,
    pub q_pkt: Etmv4Q,
    #[cfg(feature = "opencsd-1-8")]
    pub ite_pkt: Etmv4Ite,
    /// `pkt_valid`: see [`e4valid`].
    pub pkt_valid: u32,
    pub err_type: u32,
    pub err_hdr_val: u8,
    pub protocol_version: u8,
}

/// Bits of `ocsd_etmv4_i_pkt.pkt_valid`.
pub mod e4valid {
    pub const CONTEXT: u32 = 1 << 0;
    pub const TS: u32 = 1 << 1;
    pub const SPEC_DEPTH: u32 = 1 << 2;
    pub const P0_KEY: u32 = 1 << 3;
    pub const COND_C_KEY: u32 = 1 << 4;
    pub const COND_R_KEY: u32 = 1 << 5;
    pub const TRACE_INFO: u32 = 1 << 6;
    pub const CC_THRESH: u32 = 1 << 7;
    pub const CC: u32 = 1 << 8;
    pub const COMMIT_ELEM: u32 = 1 << 9;
    /// 1.8.x only.
    pub const CANCEL_ELEM: u32 = 1 << 10;
}

/// `ocsd_etmv4_i_pkt_type` values, with the library's packet type for each.
const E4_TYPES: [(E4, u32); 70] = [
    (E4::NotSync, 0x200),
    (E4::IncompleteEot, 0x201),
    (E4::NoErrType, 0x202),
    (E4::BadSequence, 0x300),
    (E4::BadTraceMode, 0x301),
    (E4::Reserved, 0x302),
    (E4::ReservedCfg, 0x303),
    (E4::Extension, 0x00),
    (E4::TraceInfo, 0x01),
    (E4::Timestamp, 0x02),
    (E4::TraceOn, 0x04),
    (E4::FuncRet, 0x05),
    (E4::Except, 0x06),
    (E4::ExceptRtn, 0x07),
    (E4::Ite, 0x09),
    (E4::TransSt, 0x0a),
    (E4::TransCommit, 0x0b),
    (E4::CcntF1, 0x0e),
    (E4::CcntF2, 0x0c),
    (E4::CcntF3, 0x10),
    (E4::NumDsMkr, 0x20),
    (E4::UnnumDsMkr, 0x28),
    (E4::Commit, 0x2d),
    (E4::CancelF1, 0x2e),
    (E4::CancelF1Mispred, 0x2f),
    (E4::Mispredict, 0x30),
    (E4::CancelF2, 0x34),
    (E4::CancelF3, 0x38),
    (E4::CondIF2, 0x40),
    (E4::CondFlush, 0x43),
    (E4::CondResF4, 0x44),
    (E4::CondResF2, 0x48),
    (E4::CondResF3, 0x50),
    (E4::CondResF1, 0x68),
    (E4::CondIF1, 0x6c),
    (E4::CondIF3, 0x6d),
    (E4::Ignore, 0x70),
    (E4::Event, 0x71),
    (E4::Ctxt, 0x80),
    (E4::AddrCtxtL32IS0, 0x82),
    (E4::AddrCtxtL32IS1, 0x83),
    (E4::AddrCtxtL64IS0, 0x85),
    (E4::AddrCtxtL64IS1, 0x86),
    (E4::TsMarker, 0x88),
    (E4::AddrMatch, 0x90),
    (E4::AddrSIS0, 0x95),
    (E4::AddrSIS1, 0x96),
    (E4::AddrL32IS0, 0x9a),
    (E4::AddrL32IS1, 0x9b),
    (E4::AddrL64IS0, 0x9d),
    (E4::AddrL64IS1, 0x9e),
    (E4::Q, 0xa0),
    (E4::SrcAddrMatch, 0xb0),
    (E4::SrcAddrSIS0, 0xb4),
    (E4::SrcAddrSIS1, 0xb5),
    (E4::SrcAddrL32IS0, 0xb6),
    (E4::SrcAddrL32IS1, 0xb7),
    (E4::SrcAddrL64IS0, 0xb8),
    (E4::SrcAddrL64IS1, 0xb9),
    (E4::AtomF6, 0xc0),
    (E4::AtomF5, 0xd5),
    (E4::AtomF2, 0xd8),
    (E4::AtomF4, 0xdc),
    (E4::AtomF1, 0xf6),
    (E4::AtomF3, 0xf8),
    (E4::Async, 0x100),
    (E4::Discard, 0x103),
    (E4::Overflow, 0x105),
    (E4::PeReset, 0x400),
    (E4::TransFail, 0x401),
];

fn e4_type_to_c(t: E4) -> u32 {
    E4_TYPES.iter().find(|(r, _)| *r == t).map_or(0x302, |&(_, c)| c)
}

fn e4_type_from_c(v: u32) -> E4 {
    E4_TYPES.iter().find(|(_, c)| *c == v).map_or(E4::Reserved, |&(r, _)| r)
}

fn vaddr_to_c(a: &VAddr) -> OcsdPktVaddr {
    OcsdPktVaddr {
        size: a.is_64 as u32,
        val: a.val,
        pkt_bits: a.pkt_bits,
        valid_bits: a.valid_bits,
    }
}

/// Fills `c` from the ETMv4 / ETE packet `p`.
pub fn etmv4_to_c(p: &EtmV4Packet, c: &mut OcsdEtmv4IPkt) {
    c.pkt_type = e4_type_to_c(p.pkt_type);
    c.v_addr = vaddr_to_c(&p.addr);
    c.v_addr_isa = p.addr_is;
    let x = &p.context;
    c.context = Etmv4Context {
        bits: (x.el as u32 & 3)
            | (x.sf as u32) << 2
            | (x.ns as u32) << 3
            | (x.updated as u32) << 4
            | (x.updated_c as u32) << 5
            | (x.updated_v as u32) << 6
            | (x.nse as u32) << 7,
        ctxt_id: x.ctxt_id,
        vmid: x.vmid,
    };
    c.ts = Etmv4Ts {
        timestamp: p.timestamp,
        bits_changed: p.ts_bits_changed,
    };
    c.cc_threshold = p.cc_threshold;
    c.atom = OcsdPktAtom {
        en_bits: p.atoms.en_bits,
        num: p.atoms.num,
    };
    c.cycle_count = p.cycle_count;
    c.curr_spec_depth = p.spec_depth;
    c.p0_key = p.p0_key;
    c.commit_elements = p.commit_elements;
    c.cancel_elements = p.cancel_elements;
    c.trace_info = (p.trace_info.val & 0xffff)
        | (p.trace_info.initial as u32) << 16
        | (p.trace_info.spec_field_present as u32) << 17;
    let e = &p.exception;
    c.exception_info = (e.exc_type as u32 & 0x3ff)
        | (e.addr_interp as u32 & 3) << 10
        | (e.m_fault_pending as u32) << 12
        | (e.m_type as u32) << 13;
    c.addr_exact_match_idx = p.exact_match_idx;
    c.dsm_val = p.dsm_val;
    c.event_val = p.event_val;
    c.q_pkt = Etmv4Q {
        q_count: p.q.count,
        bits: p.q.addr_present as u32
            | (p.q.addr_match as u32) << 1
            | (p.q.count_present as u32) << 2
            | (p.q.q_type as u32 & 0xf) << 3,
    };
    #[cfg(feature = "opencsd-1-8")]
    {
        c.ite_pkt = Etmv4Ite {
            el: p.ite_el,
            value: p.ite_value,
        };
    }
    use e4valid::*;
    let mut v = 0;
    for (on, bit) in [
        (p.context_valid, CONTEXT),
        (p.ts_valid, TS),
        (p.spec_depth_valid, SPEC_DEPTH),
        (p.cc_threshold_valid, CC_THRESH),
        (p.cc_valid, CC),
        (p.commit_valid, COMMIT_ELEM),
    ] {
        if on {
            v |= bit;
        }
    }
    c.pkt_valid = v;
    c.err_type = e4_type_to_c(p.err_type);
    c.err_hdr_val = p.err_hdr;
    c.protocol_version = p.protocol_version;
}

/// The library's ETMv4 / ETE packet for a C packet.
pub fn etmv4_from_c(c: &OcsdEtmv4IPkt) -> EtmV4Packet {
    let mut p = EtmV4Packet::default();
    p.pkt_type = e4_type_from_c(c.pkt_type);
    p.err_type = e4_type_from_c(c.err_type);
    p.err_hdr = c.err_hdr_val;
    p.protocol_version = c.protocol_version;
    p.addr = VAddr {
        val: c.v_addr.val,
        pkt_bits: c.v_addr.pkt_bits,
        valid_bits: c.v_addr.valid_bits,
        is_64: c.v_addr.size != 0,
    };
    p.addr_is = c.v_addr_isa;
    let b = c.context.bits;
    p.context = PktContext {
        el: (b & 3) as u8,
        sf: b & 1 << 2 != 0,
        ns: b & 1 << 3 != 0,
        nse: b & 1 << 7 != 0,
        updated: b & 1 << 4 != 0,
        updated_c: b & 1 << 5 != 0,
        updated_v: b & 1 << 6 != 0,
        ctxt_id: c.context.ctxt_id,
        vmid: c.context.vmid,
    };
    let v = c.pkt_valid;
    p.context_valid = v & e4valid::CONTEXT != 0;
    p.timestamp = c.ts.timestamp;
    p.ts_bits_changed = c.ts.bits_changed;
    p.ts_valid = v & e4valid::TS != 0;
    p.trace_info = TraceInfo {
        val: c.trace_info & 0xffff,
        initial: c.trace_info & 1 << 16 != 0,
        spec_field_present: c.trace_info & 1 << 17 != 0,
    };
    p.cc_threshold = c.cc_threshold;
    p.cc_threshold_valid = v & e4valid::CC_THRESH != 0;
    p.spec_depth = c.curr_spec_depth;
    p.spec_depth_valid = v & e4valid::SPEC_DEPTH != 0;
    p.p0_key = c.p0_key;
    p.cycle_count = c.cycle_count;
    p.cc_valid = v & e4valid::CC != 0;
    p.commit_elements = c.commit_elements;
    p.commit_valid = v & e4valid::COMMIT_ELEM != 0;
    p.cancel_elements = c.cancel_elements;
    p.atoms = Atoms {
        en_bits: c.atom.en_bits,
        num: c.atom.num,
    };
    let e = c.exception_info;
    p.exception = ExceptionInfo {
        exc_type: (e & 0x3ff) as u16,
        addr_interp: (e >> 10 & 3) as u8,
        m_fault_pending: e & 1 << 12 != 0,
        m_type: e & 1 << 13 != 0,
    };
    p.exact_match_idx = c.addr_exact_match_idx;
    p.event_val = c.event_val;
    p.dsm_val = c.dsm_val;
    let q = c.q_pkt.bits;
    p.q = QInfo {
        count: c.q_pkt.q_count,
        q_type: (q >> 3 & 0xf) as u8,
        count_present: q & 4 != 0,
        addr_present: q & 1 != 0,
        addr_match: q & 2 != 0,
    };
    #[cfg(feature = "opencsd-1-8")]
    {
        p.ite_el = c.ite_pkt.el;
        p.ite_value = c.ite_pkt.value;
    }
    p
}

// ------------------------------------------------------------ ETMv3 / PTM

/// `ocsd_isa` from the library's.
pub fn isa_to_c(isa: Isa) -> u32 {
    match isa {
        Isa::Arm => 0,
        Isa::Thumb2 => 1,
        Isa::Aarch64 => 2,
        Isa::Tee => 3,
        Isa::Jazelle => 4,
        Isa::Custom | Isa::RiscV => 5,
        _ => 6,
    }
}

/// The library's ISA from `ocsd_isa`.
pub fn isa_from_c(v: u32) -> Isa {
    match v {
        0 => Isa::Arm,
        1 => Isa::Thumb2,
        2 => Isa::Aarch64,
        3 => Isa::Tee,
        4 => Isa::Jazelle,
        5 => Isa::Custom,
        _ => Isa::Unknown,
    }
}

fn isync_to_c(r: ISyncReason) -> u32 {
    match r {
        ISyncReason::Periodic => 0,
        ISyncReason::TraceEnable => 1,
        ISyncReason::RestartOverflow => 2,
        ISyncReason::DebugExit => 3,
    }
}

fn isync_from_c(v: u32) -> ISyncReason {
    match v {
        1 => ISyncReason::TraceEnable,
        2 => ISyncReason::RestartOverflow,
        3 => ISyncReason::DebugExit,
        _ => ISyncReason::Periodic,
    }
}

/// `etmv3_context_t` and `ptm_context_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct V7Context {
    /// curr_alt_isa (bit 0), curr_NS (1), curr_Hyp (2), updated (3),
    /// updated_c (4), updated_v (5).
    pub bits: u32,
    pub ctxt_id: u32,
    pub vmid: u8,
}

/// `etmv3_isync_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv3Isync {
    pub reason: u32,
    /// has_cycle_count (bit 0), has_LSipAddress (1), no_address (2).
    pub bits: u32,
}

/// `ocsd_etmv3_excep`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv3Excep {
    /// `ocsd_armv7_exception`.
    pub exc_type: u32,
    pub number: u16,
    /// present (bit 0), cancel (1), cm_type (2), cm_resume (6:3),
    /// cm_irq_n (15:7).
    pub bits: u32,
}

/// `etmv3_data_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Etmv3Data {
    pub value: u32,
    pub addr: OcsdPktVaddr,
    /// ooo_tag (bits 1:0), be (2), update_be (3), update_addr (4),
    /// update_dval (5).
    pub bits: u32,
}

/// `ocsd_etmv3_pkt`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdEtmv3Pkt {
    pub pkt_type: u32,
    pub curr_isa: u32,
    pub prev_isa: u32,
    pub context: V7Context,
    pub addr: OcsdPktVaddr,
    pub isync_info: Etmv3Isync,
    pub exception: Etmv3Excep,
    pub atom: OcsdPktAtom,
    pub p_hdr_fmt: u8,
    pub cycle_count: u32,
    pub timestamp: u64,
    pub ts_update_bits: u8,
    pub data: Etmv3Data,
    pub err_type: u32,
}

const E3_TYPES: [Etmv3PktType; 22] = {
    use Etmv3PktType::*;
    [
        NoError,
        NotSync,
        IncompleteEot,
        BranchAddress,
        ASync,
        CycleCount,
        ISync,
        ISyncCycle,
        Trigger,
        PHdr,
        StoreFail,
        OooData,
        OooAddrPlc,
        NormData,
        DataSuppressed,
        ValNotTraced,
        Ignore,
        ContextId,
        Vmid,
        ExceptionEntry,
        ExceptionExit,
        Timestamp,
    ]
};

fn e3_type_to_c(t: Etmv3PktType) -> u32 {
    // 22 is ETM3_PKT_BRANCH_OR_BYPASS_EOT, which the library does not make.
    match t {
        Etmv3PktType::BadSequence => 23,
        Etmv3PktType::BadTraceMode => 24,
        Etmv3PktType::Reserved => 25,
        t => E3_TYPES.iter().position(|x| *x == t).unwrap_or(25) as u32,
    }
}

fn e3_type_from_c(v: u32) -> Etmv3PktType {
    match v {
        23 => Etmv3PktType::BadSequence,
        24 => Etmv3PktType::BadTraceMode,
        v => E3_TYPES.get(v as usize).copied().unwrap_or(Etmv3PktType::Reserved),
    }
}

// One argument a bit of the C context word: clearer than a struct of them.
#[allow(clippy::too_many_arguments)]
fn v7_context(alt: bool, ns: bool, hyp: bool, upd: bool, upd_c: bool, upd_v: bool, cid: u32, vmid: u8) -> V7Context {
    V7Context {
        bits: alt as u32
            | (ns as u32) << 1
            | (hyp as u32) << 2
            | (upd as u32) << 3
            | (upd_c as u32) << 4
            | (upd_v as u32) << 5,
        ctxt_id: cid,
        vmid,
    }
}

fn addr32(val: u64, pkt_bits: u8, valid_bits: u8) -> OcsdPktVaddr {
    OcsdPktVaddr {
        size: 0,
        val,
        pkt_bits,
        valid_bits,
    }
}

/// Fills `c` from the ETMv3 packet `p`.
pub fn etmv3_to_c(p: &Etmv3Packet, c: &mut OcsdEtmv3Pkt) {
    c.pkt_type = e3_type_to_c(p.pkt_type);
    c.err_type = e3_type_to_c(p.err_type);
    c.curr_isa = isa_to_c(p.curr_isa);
    c.prev_isa = isa_to_c(p.prev_isa);
    c.context = v7_context(
        p.alt_isa,
        p.ns,
        p.hyp,
        p.ctx_updated,
        p.ctxt_id_updated,
        p.vmid_updated,
        p.context_id,
        p.vmid,
    );
    c.addr = addr32(p.addr, p.addr_pkt_bits, p.addr_valid_bits);
    c.isync_info = Etmv3Isync {
        reason: isync_to_c(p.isync_reason),
        bits: p.isync_has_cc as u32 | (p.isync_has_lsip as u32) << 1 | (p.isync_no_addr as u32) << 2,
    };
    let e = &p.exception;
    c.exception = Etmv3Excep {
        exc_type: if e.cm_type { 23 } else { e.number as u32 },
        number: e.number,
        bits: e.present as u32
            | (e.cancel as u32) << 1
            | (e.cm_type as u32) << 2
            | (e.cm_resume as u32 & 0xf) << 3
            | (e.cm_irq_n as u32 & 0x1ff) << 7,
    };
    c.atom = OcsdPktAtom {
        en_bits: p.atom_bits,
        num: p.atom_num,
    };
    c.p_hdr_fmt = p.p_hdr_fmt;
    c.cycle_count = p.cycle_count;
    c.timestamp = p.timestamp;
    c.ts_update_bits = p.ts_update_bits;
    c.data = Etmv3Data {
        value: p.data_value,
        addr: addr32(p.data_addr, p.data_addr_pkt_bits, p.data_addr_valid_bits),
        bits: (p.data_ooo_tag as u32 & 3)
            | (p.data_be as u32) << 2
            | (p.data_update_be as u32) << 3
            | (p.data_update_addr as u32) << 4
            | (p.data_update_value as u32) << 5,
    };
}

/// The library's ETMv3 packet for a C packet.
pub fn etmv3_from_c(c: &OcsdEtmv3Pkt) -> Etmv3Packet {
    let mut p = Etmv3Packet {
        pkt_type: e3_type_from_c(c.pkt_type),
        err_type: e3_type_from_c(c.err_type),
        addr: c.addr.val,
        addr_valid_bits: c.addr.valid_bits,
        addr_pkt_bits: c.addr.pkt_bits,
        curr_isa: isa_from_c(c.curr_isa),
        prev_isa: isa_from_c(c.prev_isa),
        ..Etmv3Packet::default()
    };
    let b = c.context.bits;
    p.alt_isa = b & 1 != 0;
    p.ns = b & 2 != 0;
    p.hyp = b & 4 != 0;
    p.ctx_updated = b & 8 != 0;
    p.ctxt_id_updated = b & 16 != 0;
    p.vmid_updated = b & 32 != 0;
    p.context_id = c.context.ctxt_id;
    p.vmid = c.context.vmid;
    p.isync_reason = isync_from_c(c.isync_info.reason);
    let i = c.isync_info.bits;
    p.isync_has_cc = i & 1 != 0;
    p.isync_has_lsip = i & 2 != 0;
    p.isync_no_addr = i & 4 != 0;
    let e = c.exception.bits;
    p.exception.present = e & 1 != 0;
    p.exception.cancel = e & 2 != 0;
    p.exception.cm_type = e & 4 != 0;
    p.exception.cm_resume = (e >> 3 & 0xf) as u8;
    p.exception.cm_irq_n = (e >> 7 & 0x1ff) as u16;
    p.exception.number = c.exception.number;
    p.atom_bits = c.atom.en_bits;
    p.atom_num = c.atom.num;
    p.p_hdr_fmt = c.p_hdr_fmt;
    p.cycle_count = c.cycle_count;
    p.timestamp = c.timestamp;
    p.ts_update_bits = c.ts_update_bits;
    p.data_value = c.data.value;
    p.data_addr = c.data.addr.val;
    p.data_addr_valid_bits = c.data.addr.valid_bits;
    p.data_addr_pkt_bits = c.data.addr.pkt_bits;
    let d = c.data.bits;
    p.data_ooo_tag = (d & 3) as u8;
    p.data_be = d & 4 != 0;
    p.data_update_be = d & 8 != 0;
    p.data_update_addr = d & 16 != 0;
    p.data_update_value = d & 32 != 0;
    p
}

/// `ocsd_ptm_excep`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PtmExcep {
    pub exc_type: u32,
    pub number: u16,
    /// present (bit 0).
    pub bits: u32,
}

/// `ocsd_ptm_pkt`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdPtmPkt {
    pub pkt_type: u32,
    pub curr_isa: u32,
    pub prev_isa: u32,
    pub addr: OcsdPktVaddr,
    pub context: V7Context,
    pub atom: OcsdPktAtom,
    pub i_sync_reason: u32,
    pub cycle_count: u32,
    pub cc_valid: u8,
    pub timestamp: u64,
    pub ts_update_bits: u8,
    pub exception: PtmExcep,
    pub err_type: u32,
}

fn ptm_type_to_c(t: PtmPktType) -> u32 {
    use PtmPktType::*;
    match t {
        NotSync => 0,
        IncompleteEot => 1,
        NoError => 2,
        BranchAddress => 3,
        ASync => 4,
        ISync => 5,
        Trigger => 6,
        WaypointUpdate => 7,
        Ignore => 8,
        ContextId => 9,
        Vmid => 10,
        Atom => 11,
        Timestamp => 12,
        ExceptionReturn => 13,
        BadSequence => 16,
        Reserved => 17,
    }
}

fn ptm_type_from_c(v: u32) -> PtmPktType {
    use PtmPktType::*;
    match v {
        0 => NotSync,
        1 => IncompleteEot,
        2 => NoError,
        3 => BranchAddress,
        4 => ASync,
        5 => ISync,
        6 => Trigger,
        7 => WaypointUpdate,
        8 => Ignore,
        9 => ContextId,
        10 => Vmid,
        11 => Atom,
        12 => Timestamp,
        13 => ExceptionReturn,
        16 => BadSequence,
        _ => Reserved,
    }
}

/// Fills `c` from the PTM packet `p`.
pub fn ptm_to_c(p: &PtmPacket, c: &mut OcsdPtmPkt) {
    c.pkt_type = ptm_type_to_c(p.pkt_type);
    c.err_type = ptm_type_to_c(p.err_type);
    c.curr_isa = isa_to_c(p.curr_isa);
    c.prev_isa = isa_to_c(p.prev_isa);
    c.addr = addr32(p.addr, p.addr_pkt_bits, p.addr_valid_bits);
    c.context = v7_context(
        p.alt_isa,
        p.ns,
        p.hyp,
        p.ctx_updated,
        p.ctxt_id_updated,
        p.vmid_updated,
        p.context_id,
        p.vmid,
    );
    c.atom = OcsdPktAtom {
        en_bits: p.atom_bits,
        num: p.atom_num,
    };
    c.i_sync_reason = isync_to_c(p.isync_reason);
    c.cycle_count = p.cycle_count;
    c.cc_valid = p.cc_valid as u8;
    c.timestamp = p.timestamp;
    c.ts_update_bits = p.ts_update_bits;
    c.exception = PtmExcep {
        exc_type: p.exception_number as u32,
        number: p.exception_number,
        bits: p.exception_present as u32,
    };
}

/// The library's PTM packet for a C packet.
pub fn ptm_from_c(c: &OcsdPtmPkt) -> PtmPacket {
    let b = c.context.bits;
    PtmPacket {
        pkt_type: ptm_type_from_c(c.pkt_type),
        err_type: ptm_type_from_c(c.err_type),
        addr: c.addr.val,
        addr_valid_bits: c.addr.valid_bits,
        addr_pkt_bits: c.addr.pkt_bits,
        curr_isa: isa_from_c(c.curr_isa),
        prev_isa: isa_from_c(c.prev_isa),
        alt_isa: b & 1 != 0,
        ns: b & 2 != 0,
        hyp: b & 4 != 0,
        ctx_updated: b & 8 != 0,
        ctxt_id_updated: b & 16 != 0,
        vmid_updated: b & 32 != 0,
        context_id: c.context.ctxt_id,
        vmid: c.context.vmid,
        timestamp: c.timestamp,
        ts_update_bits: c.ts_update_bits,
        atom_num: c.atom.num,
        atom_bits: c.atom.en_bits,
        cycle_count: c.cycle_count,
        cc_valid: c.cc_valid != 0,
        exception_present: c.exception.bits & 1 != 0,
        exception_number: c.exception.number,
        isync_reason: isync_from_c(c.i_sync_reason),
    }
}

// -------------------------------------------------------------- STM / ITM

/// `ocsd_stm_pkt`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdStmPkt {
    pub pkt_type: u32,
    pub master: u8,
    pub channel: u16,
    pub timestamp: u64,
    pub pkt_ts_bits: u8,
    pub pkt_has_ts: u8,
    pub ts_type: u32,
    pub pkt_has_marker: u8,
    /// The payload union (D8 / D16 / D32 / D64), little-endian.
    pub payload: u64,
    pub err_type: u32,
}

const STM_TYPES: [StmPktType; 21] = {
    use StmPktType::*;
    [
        NotSync,
        IncompleteEot,
        NoErrType,
        Async,
        Version,
        Freq,
        Null,
        Trig,
        Gerr,
        Merr,
        M8,
        C8,
        C16,
        Flag,
        D4,
        D8,
        D16,
        D32,
        D64,
        BadSequence,
        Reserved,
    ]
};

fn stm_type_to_c(t: StmPktType) -> u32 {
    STM_TYPES.iter().position(|x| *x == t).unwrap_or(20) as u32
}

fn stm_type_from_c(v: u32) -> StmPktType {
    STM_TYPES.get(v as usize).copied().unwrap_or(StmPktType::Reserved)
}

/// Fills `c` from the STM packet `p`.
pub fn stm_to_c(p: &StmPacket, c: &mut OcsdStmPkt) {
    *c = OcsdStmPkt {
        pkt_type: stm_type_to_c(p.pkt_type),
        master: p.master,
        channel: p.channel,
        timestamp: p.timestamp,
        pkt_ts_bits: p.ts_bits,
        pkt_has_ts: p.has_ts as u8,
        ts_type: match p.ts_type {
            StmTsType::Unknown => 0,
            StmTsType::NatBinary => 1,
            StmTsType::Gray => 2,
        },
        pkt_has_marker: p.marker as u8,
        payload: p.payload,
        err_type: stm_type_to_c(p.err_type),
    };
}

/// The library's STM packet for a C packet.
pub fn stm_from_c(c: &OcsdStmPkt) -> StmPacket {
    StmPacket {
        pkt_type: stm_type_from_c(c.pkt_type),
        err_type: stm_type_from_c(c.err_type),
        master: c.master,
        channel: c.channel,
        timestamp: c.timestamp,
        ts_bits: c.pkt_ts_bits,
        has_ts: c.pkt_has_ts != 0,
        ts_type: match c.ts_type {
            1 => StmTsType::NatBinary,
            2 => StmTsType::Gray,
            _ => StmTsType::Unknown,
        },
        marker: c.pkt_has_marker != 0,
        payload: c.payload,
        // Not in OpenCSD's packet (used only by a stream index).
        high_nibble_start: None,
    }
}

/// `ocsd_itm_pkt` (1.8.x).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdItmPkt {
    pub pkt_type: u32,
    pub src_id: u8,
    pub value: u32,
    pub val_sz: u8,
    pub val_ext: u8,
    pub err_type: u32,
}

const ITM_TYPES: [ItmPktType; 13] = {
    use ItmPktType::*;
    [
        NotSync,
        IncompleteEot,
        NoErrType,
        Async,
        Overflow,
        Swit,
        Dwt,
        TsLocal,
        TsGlobal1,
        TsGlobal2,
        Extension,
        BadSequence,
        Reserved,
    ]
};

/// Fills `c` from the ITM packet `p`.
pub fn itm_to_c(p: &ItmPacket, c: &mut OcsdItmPkt) {
    let ty = |t: ItmPktType| ITM_TYPES.iter().position(|x| *x == t).unwrap_or(12) as u32;
    *c = OcsdItmPkt {
        pkt_type: ty(p.pkt_type),
        src_id: p.src_id,
        value: p.value,
        val_sz: p.val_sz,
        val_ext: p.val_ext,
        err_type: ty(p.err_type),
    };
}

/// The library's ITM packet for a C packet.
pub fn itm_from_c(c: &OcsdItmPkt) -> ItmPacket {
    let ty = |v: u32| ITM_TYPES.get(v as usize).copied().unwrap_or(ItmPktType::Reserved);
    ItmPacket {
        pkt_type: ty(c.pkt_type),
        src_id: c.src_id,
        value: c.value,
        val_sz: c.val_sz,
        val_ext: c.val_ext,
        err_type: ty(c.err_type),
    }
}

// --------------------------------------------------------------- common

/// A library packet type with its C struct.
pub trait CPacket: TracePacket + Send + 'static {
    /// The C struct.
    type C: Copy + Default + Send + 'static;
    /// Fills the C struct.
    fn to_c(&self, c: &mut Self::C);
}

impl CPacket for EtmV4Packet {
    type C = OcsdEtmv4IPkt;
    fn to_c(&self, c: &mut OcsdEtmv4IPkt) {
        etmv4_to_c(self, c)
    }
}
impl CPacket for Etmv3Packet {
    type C = OcsdEtmv3Pkt;
    fn to_c(&self, c: &mut OcsdEtmv3Pkt) {
        etmv3_to_c(self, c)
    }
}
impl CPacket for PtmPacket {
    type C = OcsdPtmPkt;
    fn to_c(&self, c: &mut OcsdPtmPkt) {
        ptm_to_c(self, c)
    }
}
impl CPacket for StmPacket {
    type C = OcsdStmPkt;
    fn to_c(&self, c: &mut OcsdStmPkt) {
        stm_to_c(self, c)
    }
}
impl CPacket for ItmPacket {
    type C = OcsdItmPkt;
    fn to_c(&self, c: &mut OcsdItmPkt) {
        itm_to_c(self, c)
    }
}

/// The printer's description of the packet struct `p` of protocol
/// `protocol` (`ocsd_trace_protocol_t`), or `None` for a protocol without
/// a packet struct here.
///
/// # Safety
/// `p` points at the packet struct of `protocol`.
pub unsafe fn packet_text(protocol: i32, p: *const std::ffi::c_void) -> Option<String> {
    let mut s = String::with_capacity(128);
    // SAFETY: the struct of `protocol` (caller); each is read as a copy.
    unsafe {
        match protocol {
            crate::abi::OCSD_PROTOCOL_ETMV4I | crate::abi::OCSD_PROTOCOL_ETE => {
                etmv4_from_c(&*p.cast::<OcsdEtmv4IPkt>()).write_desc(&mut s)
            }
            crate::abi::OCSD_PROTOCOL_ETMV3 => etmv3_from_c(&*p.cast::<OcsdEtmv3Pkt>()).write_desc(&mut s),
            crate::abi::OCSD_PROTOCOL_PTM => ptm_from_c(&*p.cast::<OcsdPtmPkt>()).write_desc(&mut s),
            crate::abi::OCSD_PROTOCOL_STM => stm_from_c(&*p.cast::<OcsdStmPkt>()).write_desc(&mut s),
            #[cfg(feature = "opencsd-1-8")]
            crate::abi::OCSD_PROTOCOL_ITM => itm_from_c(&*p.cast::<OcsdItmPkt>()).write_desc(&mut s),
            _ => return None,
        }
    }
    Some(s)
}
