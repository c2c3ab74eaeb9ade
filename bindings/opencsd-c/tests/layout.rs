//! The Rust declarations of the C structs against OpenCSD's headers: a C
//! program compiled against the installed headers prints each struct's
//! size and each field's offset (and the bit of each flag), and they must
//! equal what the Rust side gives. The headers come from Debian's
//! `libopencsd-dev` (`/usr/include`), or from `OPENCSD_INCLUDE` (a folder
//! holding `opencsd/`, e.g. 1.8.0's for the `opencsd-1-8` feature).

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::process::Command;

use opencsd_c_api::abi::*;

const C_PROGRAM: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <opencsd/c_api/opencsd_c_api.h>
#include <opencsd/etmv4/trc_pkt_types_etmv4.h>
#include <opencsd/etmv3/trc_pkt_types_etmv3.h>
#include <opencsd/ptm/trc_pkt_types_ptm.h>
#include <opencsd/stm/trc_pkt_types_stm.h>
#ifdef OCSD_BUILTIN_DCD_ITM
#include <opencsd/itm/trc_pkt_types_itm.h>
#endif
#define S(t) printf("size %s %zu\n", #t, sizeof(t));
#define O(t, f) printf("off %s.%s %zu\n", #t, #f, offsetof(t, f));
/* The 32-bit word (at byte `at`) a bit-field lives in, with the field set
 * to all ones: the field's mask. */
#define W(t, f, at) { t x; memset(&x, 0, sizeof x); x.f = ~0u; unsigned v; \
    memcpy(&v, (char *)&x + (at), 4); printf("bits %s.%s %u\n", #t, #f, v); }
#define B(f) { ocsd_generic_trace_elem e; memset(&e, 0, sizeof e); e.f = 1; \
    printf("bit %s %u\n", #f, e.flag_bits); }
int main(void) {
    S(ocsd_generic_trace_elem) S(ocsd_pe_context) S(ocsd_swt_info_t) S(ocsd_etmv4_cfg)
    S(ocsd_ete_cfg) S(ocsd_etmv3_cfg) S(ocsd_ptm_cfg) S(ocsd_stm_cfg) S(ocsd_file_mem_region_t)
    S(ocsd_decode_stats_t) S(ocsd_demux_stats_t)
    O(ocsd_generic_trace_elem, elem_type) O(ocsd_generic_trace_elem, isa)
    O(ocsd_generic_trace_elem, st_addr) O(ocsd_generic_trace_elem, en_addr)
    O(ocsd_generic_trace_elem, context) O(ocsd_generic_trace_elem, timestamp)
    O(ocsd_generic_trace_elem, cycle_count) O(ocsd_generic_trace_elem, last_i_type)
    O(ocsd_generic_trace_elem, last_i_subtype) O(ocsd_generic_trace_elem, flag_bits)
    O(ocsd_generic_trace_elem, exception_number) O(ocsd_generic_trace_elem, ptr_extended_data)
    O(ocsd_pe_context, security_level) O(ocsd_pe_context, exception_level)
    O(ocsd_pe_context, context_id) O(ocsd_pe_context, vmid)
    O(ocsd_etmv4_cfg, reg_idr0) O(ocsd_etmv4_cfg, reg_idr13) O(ocsd_etmv4_cfg, reg_configr)
    O(ocsd_etmv4_cfg, reg_traceidr) O(ocsd_etmv4_cfg, arch_ver) O(ocsd_etmv4_cfg, core_prof)
    O(ocsd_ete_cfg, reg_devarch) O(ocsd_ete_cfg, reg_traceidr) O(ocsd_ete_cfg, core_prof)
    O(ocsd_etmv3_cfg, reg_trc_id) O(ocsd_etmv3_cfg, core_prof)
    O(ocsd_stm_cfg, reg_hwev_mast) O(ocsd_stm_cfg, hw_event)
    O(ocsd_file_mem_region_t, start_address) O(ocsd_file_mem_region_t, region_size)
    O(ocsd_decode_stats_t, channel_total) O(ocsd_decode_stats_t, bad_sequence_errs)
    O(ocsd_decode_stats_t, demux)
    B(last_instr_exec) B(has_cc) B(cpu_freq_change) B(excep_ret_addr) B(excep_data_marker)
    B(extended_data) B(has_ts) B(last_instr_cond) B(excep_ret_addr_br_tgt)
    { ocsd_generic_trace_elem e; memset(&e, 0, sizeof e); e.last_instr_sz = 7;
      printf("bit last_instr_sz %u\n", e.flag_bits); }
    { ocsd_pe_context c; memset(&c, 0, sizeof c); c.bits64 = 1; c.ctxt_id_valid = 1;
      unsigned v; memcpy(&v, (char *)&c + offsetof(ocsd_pe_context, vmid) + 4, 4);
      printf("bit ctx_bits64_ctxtid %u\n", v); }
    S(ocsd_etmv4_i_pkt) S(ocsd_etmv3_pkt) S(ocsd_ptm_pkt) S(ocsd_stm_pkt) S(ocsd_pkt_vaddr) S(ocsd_pkt_atom)
    O(ocsd_etmv4_i_pkt, type) O(ocsd_etmv4_i_pkt, v_addr) O(ocsd_etmv4_i_pkt, v_addr_ISA)
    O(ocsd_etmv4_i_pkt, context) O(ocsd_etmv4_i_pkt, context.ctxtID) O(ocsd_etmv4_i_pkt, context.VMID)
    O(ocsd_etmv4_i_pkt, ts) O(ocsd_etmv4_i_pkt, ts.bits_changed) O(ocsd_etmv4_i_pkt, cc_threshold)
    O(ocsd_etmv4_i_pkt, atom) O(ocsd_etmv4_i_pkt, cycle_count) O(ocsd_etmv4_i_pkt, curr_spec_depth)
    O(ocsd_etmv4_i_pkt, p0_key) O(ocsd_etmv4_i_pkt, commit_elements) O(ocsd_etmv4_i_pkt, cancel_elements)
    O(ocsd_etmv4_i_pkt, trace_info) O(ocsd_etmv4_i_pkt, exception_info) O(ocsd_etmv4_i_pkt, addr_exact_match_idx)
    O(ocsd_etmv4_i_pkt, dsm_val) O(ocsd_etmv4_i_pkt, event_val) O(ocsd_etmv4_i_pkt, cond_instr)
    O(ocsd_etmv4_i_pkt, cond_instr.num_c_elem) O(ocsd_etmv4_i_pkt, cond_result) O(ocsd_etmv4_i_pkt, Q_pkt)
    O(ocsd_etmv4_i_pkt, pkt_valid) O(ocsd_etmv4_i_pkt, err_type) O(ocsd_etmv4_i_pkt, err_hdr_val)
    O(ocsd_etmv4_i_pkt, protocol_version)
    O(ocsd_etmv3_pkt, curr_isa) O(ocsd_etmv3_pkt, prev_isa) O(ocsd_etmv3_pkt, context) O(ocsd_etmv3_pkt, addr)
    O(ocsd_etmv3_pkt, isync_info) O(ocsd_etmv3_pkt, exception) O(ocsd_etmv3_pkt, exception.number)
    O(ocsd_etmv3_pkt, atom) O(ocsd_etmv3_pkt, p_hdr_fmt) O(ocsd_etmv3_pkt, cycle_count) O(ocsd_etmv3_pkt, timestamp)
    O(ocsd_etmv3_pkt, ts_update_bits) O(ocsd_etmv3_pkt, data) O(ocsd_etmv3_pkt, data.addr) O(ocsd_etmv3_pkt, err_type)
    O(ocsd_ptm_pkt, curr_isa) O(ocsd_ptm_pkt, addr) O(ocsd_ptm_pkt, context) O(ocsd_ptm_pkt, context.VMID)
    O(ocsd_ptm_pkt, atom) O(ocsd_ptm_pkt, i_sync_reason) O(ocsd_ptm_pkt, cycle_count) O(ocsd_ptm_pkt, cc_valid)
    O(ocsd_ptm_pkt, timestamp) O(ocsd_ptm_pkt, ts_update_bits) O(ocsd_ptm_pkt, exception) O(ocsd_ptm_pkt, err_type)
    O(ocsd_stm_pkt, master) O(ocsd_stm_pkt, channel) O(ocsd_stm_pkt, timestamp) O(ocsd_stm_pkt, pkt_ts_bits)
    O(ocsd_stm_pkt, pkt_has_ts) O(ocsd_stm_pkt, ts_type) O(ocsd_stm_pkt, pkt_has_marker) O(ocsd_stm_pkt, payload)
    O(ocsd_stm_pkt, err_type)
    W(ocsd_etmv4_i_pkt, context.EL, offsetof(ocsd_etmv4_i_pkt, context)) W(ocsd_etmv4_i_pkt, context.SF, offsetof(ocsd_etmv4_i_pkt, context))
    W(ocsd_etmv4_i_pkt, context.NS, offsetof(ocsd_etmv4_i_pkt, context)) W(ocsd_etmv4_i_pkt, context.updated, offsetof(ocsd_etmv4_i_pkt, context))
    W(ocsd_etmv4_i_pkt, context.updated_c, offsetof(ocsd_etmv4_i_pkt, context)) W(ocsd_etmv4_i_pkt, context.updated_v, offsetof(ocsd_etmv4_i_pkt, context))
    W(ocsd_etmv4_i_pkt, context.NSE, offsetof(ocsd_etmv4_i_pkt, context))
    W(ocsd_etmv4_i_pkt, exception_info.exceptionType, offsetof(ocsd_etmv4_i_pkt, exception_info))
    W(ocsd_etmv4_i_pkt, exception_info.addr_interp, offsetof(ocsd_etmv4_i_pkt, exception_info))
    W(ocsd_etmv4_i_pkt, exception_info.m_fault_pending, offsetof(ocsd_etmv4_i_pkt, exception_info))
    W(ocsd_etmv4_i_pkt, exception_info.m_type, offsetof(ocsd_etmv4_i_pkt, exception_info))
    W(ocsd_etmv4_i_pkt, Q_pkt.addr_present, offsetof(ocsd_etmv4_i_pkt, Q_pkt) + 4) W(ocsd_etmv4_i_pkt, Q_pkt.q_type, offsetof(ocsd_etmv4_i_pkt, Q_pkt) + 4)
    W(ocsd_etmv4_i_pkt, pkt_valid.bits.context_valid, offsetof(ocsd_etmv4_i_pkt, pkt_valid)) W(ocsd_etmv4_i_pkt, pkt_valid.bits.cc_valid, offsetof(ocsd_etmv4_i_pkt, pkt_valid))
    W(ocsd_etmv4_i_pkt, pkt_valid.bits.commit_elem_valid, offsetof(ocsd_etmv4_i_pkt, pkt_valid))
    W(ocsd_etmv4_i_pkt, trace_info.bits.in_trans_state, offsetof(ocsd_etmv4_i_pkt, trace_info))
    W(ocsd_etmv3_pkt, context.curr_NS, offsetof(ocsd_etmv3_pkt, context)) W(ocsd_etmv3_pkt, context.updated_v, offsetof(ocsd_etmv3_pkt, context))
    W(ocsd_etmv3_pkt, exception.bits.cm_irq_n, offsetof(ocsd_etmv3_pkt, exception.bits)) W(ocsd_etmv3_pkt, exception.bits.cm_resume, offsetof(ocsd_etmv3_pkt, exception.bits))
    W(ocsd_etmv3_pkt, data.update_dval, offsetof(ocsd_etmv3_pkt, data.addr) + sizeof(ocsd_pkt_vaddr)) W(ocsd_etmv3_pkt, data.ooo_tag, offsetof(ocsd_etmv3_pkt, data.addr) + sizeof(ocsd_pkt_vaddr))
    W(ocsd_etmv3_pkt, isync_info.no_address, offsetof(ocsd_etmv3_pkt, isync_info) + 4)
    /* Enum values that moved between versions, and the version. */
    printf("val OCSD_VER_NUM %u\n", (unsigned)OCSD_VER_NUM);
    printf("val UNSYNC_EOT %u\n", (unsigned)UNSYNC_EOT);
    printf("val OCSD_GEN_TRC_ELEM_CUSTOM %u\n", (unsigned)OCSD_GEN_TRC_ELEM_CUSTOM);
#ifdef OCSD_BUILTIN_DCD_ITM
    S(ocsd_itm_pkt) O(ocsd_itm_pkt, src_id) O(ocsd_itm_pkt, value) O(ocsd_itm_pkt, val_sz) O(ocsd_itm_pkt, val_ext)
    O(ocsd_itm_pkt, err_type) O(ocsd_etmv4_i_pkt, ite_pkt) O(ocsd_etmv4_i_pkt, ite_pkt.value)
    W(ocsd_etmv4_i_pkt, pkt_valid.bits.cancel_elem_valid, offsetof(ocsd_etmv4_i_pkt, pkt_valid))
    W(ocsd_etmv4_i_pkt, trace_info.bits.initial_t_info, offsetof(ocsd_etmv4_i_pkt, trace_info))
    W(ocsd_etmv4_i_pkt, trace_info.bits.spec_field_present, offsetof(ocsd_etmv4_i_pkt, trace_info))
    S(ocsd_itm_cfg)
    O(ocsd_generic_trace_elem, sw_ite) O(ocsd_generic_trace_elem, swt_itm)
    S(trace_sw_ite_t) S(swt_itm_info)
#endif
    return 0;
}
"#;

fn rust_values() -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let mut s = |k: &str, v: usize| {
        m.insert(k.to_string(), v as u64);
    };
    s("size ocsd_generic_trace_elem", size_of::<OcsdGenericTraceElem>());
    s("val OCSD_VER_NUM", OCSD_VER_NUM as usize);
    s("val UNSYNC_EOT", UNSYNC_EOT as usize);
    s("val OCSD_GEN_TRC_ELEM_CUSTOM", elem::CUSTOM as usize);
    s("size ocsd_pe_context", size_of::<OcsdPeContext>());
    s("size ocsd_swt_info_t", size_of::<OcsdSwtInfo>());
    s("size ocsd_etmv4_cfg", size_of::<OcsdEtmv4Cfg>());
    s("size ocsd_ete_cfg", size_of::<OcsdEteCfg>());
    s("size ocsd_etmv3_cfg", size_of::<OcsdEtmv3Cfg>());
    s("size ocsd_ptm_cfg", size_of::<OcsdEtmv3Cfg>());
    s("size ocsd_stm_cfg", size_of::<OcsdStmCfg>());
    s("size ocsd_file_mem_region_t", size_of::<OcsdFileMemRegion>());
    s("size ocsd_decode_stats_t", size_of::<OcsdDecodeStats>());
    s("size ocsd_demux_stats_t", size_of::<OcsdDemuxStats>());
    type E = OcsdGenericTraceElem;
    s("off ocsd_generic_trace_elem.elem_type", offset_of!(E, elem_type));
    s("off ocsd_generic_trace_elem.isa", offset_of!(E, isa));
    s("off ocsd_generic_trace_elem.st_addr", offset_of!(E, st_addr));
    s("off ocsd_generic_trace_elem.en_addr", offset_of!(E, en_addr));
    s("off ocsd_generic_trace_elem.context", offset_of!(E, context));
    s("off ocsd_generic_trace_elem.timestamp", offset_of!(E, timestamp));
    s("off ocsd_generic_trace_elem.cycle_count", offset_of!(E, cycle_count));
    s("off ocsd_generic_trace_elem.last_i_type", offset_of!(E, last_i_type));
    s(
        "off ocsd_generic_trace_elem.last_i_subtype",
        offset_of!(E, last_i_subtype),
    );
    s("off ocsd_generic_trace_elem.flag_bits", offset_of!(E, flag_bits));
    s("off ocsd_generic_trace_elem.exception_number", offset_of!(E, payload));
    s(
        "off ocsd_generic_trace_elem.ptr_extended_data",
        offset_of!(E, ptr_extended_data),
    );
    s(
        "off ocsd_pe_context.security_level",
        offset_of!(OcsdPeContext, security_level),
    );
    s(
        "off ocsd_pe_context.exception_level",
        offset_of!(OcsdPeContext, exception_level),
    );
    s("off ocsd_pe_context.context_id", offset_of!(OcsdPeContext, context_id));
    s("off ocsd_pe_context.vmid", offset_of!(OcsdPeContext, vmid));
    s("off ocsd_etmv4_cfg.reg_idr0", offset_of!(OcsdEtmv4Cfg, reg_idr0));
    s("off ocsd_etmv4_cfg.reg_idr13", offset_of!(OcsdEtmv4Cfg, reg_idr13));
    s("off ocsd_etmv4_cfg.reg_configr", offset_of!(OcsdEtmv4Cfg, reg_configr));
    s(
        "off ocsd_etmv4_cfg.reg_traceidr",
        offset_of!(OcsdEtmv4Cfg, reg_traceidr),
    );
    s("off ocsd_etmv4_cfg.arch_ver", offset_of!(OcsdEtmv4Cfg, arch_ver));
    s("off ocsd_etmv4_cfg.core_prof", offset_of!(OcsdEtmv4Cfg, core_prof));
    s("off ocsd_ete_cfg.reg_devarch", offset_of!(OcsdEteCfg, reg_devarch));
    s("off ocsd_ete_cfg.reg_traceidr", offset_of!(OcsdEteCfg, reg_traceidr));
    s("off ocsd_ete_cfg.core_prof", offset_of!(OcsdEteCfg, core_prof));
    s("off ocsd_etmv3_cfg.reg_trc_id", offset_of!(OcsdEtmv3Cfg, reg_trc_id));
    s("off ocsd_etmv3_cfg.core_prof", offset_of!(OcsdEtmv3Cfg, core_prof));
    s("off ocsd_stm_cfg.reg_hwev_mast", offset_of!(OcsdStmCfg, reg_hwev_mast));
    s("off ocsd_stm_cfg.hw_event", offset_of!(OcsdStmCfg, hw_event));
    s(
        "off ocsd_file_mem_region_t.start_address",
        offset_of!(OcsdFileMemRegion, start_address),
    );
    s(
        "off ocsd_file_mem_region_t.region_size",
        offset_of!(OcsdFileMemRegion, region_size),
    );
    s(
        "off ocsd_decode_stats_t.channel_total",
        offset_of!(OcsdDecodeStats, channel_total),
    );
    s(
        "off ocsd_decode_stats_t.bad_sequence_errs",
        offset_of!(OcsdDecodeStats, bad_sequence_errs),
    );
    s("off ocsd_decode_stats_t.demux", offset_of!(OcsdDecodeStats, demux));
    s("bit last_instr_exec", flag::LAST_INSTR_EXEC as usize);
    s("bit has_cc", flag::HAS_CC as usize);
    s("bit cpu_freq_change", flag::CPU_FREQ_CHANGE as usize);
    s("bit excep_ret_addr", flag::EXCEP_RET_ADDR as usize);
    s("bit excep_data_marker", flag::EXCEP_DATA_MARKER as usize);
    s("bit extended_data", flag::EXTENDED_DATA as usize);
    s("bit has_ts", flag::HAS_TS as usize);
    s("bit last_instr_cond", flag::LAST_INSTR_COND as usize);
    s("bit excep_ret_addr_br_tgt", flag::EXCEP_RET_ADDR_BR_TGT as usize);
    s("bit last_instr_sz", flag::LAST_INSTR_SZ_MASK as usize);
    // The PE context's bit-field word: bits64 (bit 0) and ctxt_id_valid (1).
    s("bit ctx_bits64_ctxtid", 0b11);
    #[cfg(feature = "opencsd-1-8")]
    {
        s("size ocsd_itm_cfg", size_of::<OcsdItmCfg>());
        s("off ocsd_generic_trace_elem.sw_ite", offset_of!(E, payload));
        s("off ocsd_generic_trace_elem.swt_itm", offset_of!(E, payload));
        s("size trace_sw_ite_t", size_of::<TraceSwIte>());
        s("size swt_itm_info", size_of::<SwtItmInfo>());
    }
    {
        use opencsd_c_api::packets::*;
        type P4 = OcsdEtmv4IPkt;
        s("size ocsd_etmv4_i_pkt", size_of::<P4>());
        s("size ocsd_etmv3_pkt", size_of::<OcsdEtmv3Pkt>());
        s("size ocsd_ptm_pkt", size_of::<OcsdPtmPkt>());
        s("size ocsd_stm_pkt", size_of::<OcsdStmPkt>());
        s("size ocsd_pkt_vaddr", size_of::<OcsdPktVaddr>());
        s("size ocsd_pkt_atom", size_of::<OcsdPktAtom>());
        let ctx = offset_of!(P4, context);
        for (k, v) in [
            ("type", offset_of!(P4, pkt_type)),
            ("v_addr", offset_of!(P4, v_addr)),
            ("v_addr_ISA", offset_of!(P4, v_addr_isa)),
            ("context", ctx),
            ("context.ctxtID", ctx + offset_of!(Etmv4Context, ctxt_id)),
            ("context.VMID", ctx + offset_of!(Etmv4Context, vmid)),
            ("ts", offset_of!(P4, ts)),
            (
                "ts.bits_changed",
                offset_of!(P4, ts) + offset_of!(Etmv4Ts, bits_changed),
            ),
            ("cc_threshold", offset_of!(P4, cc_threshold)),
            ("atom", offset_of!(P4, atom)),
            ("cycle_count", offset_of!(P4, cycle_count)),
            ("curr_spec_depth", offset_of!(P4, curr_spec_depth)),
            ("p0_key", offset_of!(P4, p0_key)),
            ("commit_elements", offset_of!(P4, commit_elements)),
            ("cancel_elements", offset_of!(P4, cancel_elements)),
            ("trace_info", offset_of!(P4, trace_info)),
            ("exception_info", offset_of!(P4, exception_info)),
            ("addr_exact_match_idx", offset_of!(P4, addr_exact_match_idx)),
            ("dsm_val", offset_of!(P4, dsm_val)),
            ("event_val", offset_of!(P4, event_val)),
            ("cond_instr", offset_of!(P4, cond_instr)),
            (
                "cond_instr.num_c_elem",
                offset_of!(P4, cond_instr) + offset_of!(Etmv4CondInstr, num_c_elem),
            ),
            ("cond_result", offset_of!(P4, cond_result)),
            ("Q_pkt", offset_of!(P4, q_pkt)),
            ("pkt_valid", offset_of!(P4, pkt_valid)),
            ("err_type", offset_of!(P4, err_type)),
            ("err_hdr_val", offset_of!(P4, err_hdr_val)),
            ("protocol_version", offset_of!(P4, protocol_version)),
        ] {
            s(&format!("off ocsd_etmv4_i_pkt.{k}"), v);
        }
        type P3 = OcsdEtmv3Pkt;
        for (k, v) in [
            ("curr_isa", offset_of!(P3, curr_isa)),
            ("prev_isa", offset_of!(P3, prev_isa)),
            ("context", offset_of!(P3, context)),
            ("addr", offset_of!(P3, addr)),
            ("isync_info", offset_of!(P3, isync_info)),
            ("exception", offset_of!(P3, exception)),
            (
                "exception.number",
                offset_of!(P3, exception) + offset_of!(Etmv3Excep, number),
            ),
            ("atom", offset_of!(P3, atom)),
            ("p_hdr_fmt", offset_of!(P3, p_hdr_fmt)),
            ("cycle_count", offset_of!(P3, cycle_count)),
            ("timestamp", offset_of!(P3, timestamp)),
            ("ts_update_bits", offset_of!(P3, ts_update_bits)),
            ("data", offset_of!(P3, data)),
            ("data.addr", offset_of!(P3, data) + offset_of!(Etmv3Data, addr)),
            ("err_type", offset_of!(P3, err_type)),
        ] {
            s(&format!("off ocsd_etmv3_pkt.{k}"), v);
        }
        type PP = OcsdPtmPkt;
        for (k, v) in [
            ("curr_isa", offset_of!(PP, curr_isa)),
            ("addr", offset_of!(PP, addr)),
            ("context", offset_of!(PP, context)),
            ("context.VMID", offset_of!(PP, context) + offset_of!(V7Context, vmid)),
            ("atom", offset_of!(PP, atom)),
            ("i_sync_reason", offset_of!(PP, i_sync_reason)),
            ("cycle_count", offset_of!(PP, cycle_count)),
            ("cc_valid", offset_of!(PP, cc_valid)),
            ("timestamp", offset_of!(PP, timestamp)),
            ("ts_update_bits", offset_of!(PP, ts_update_bits)),
            ("exception", offset_of!(PP, exception)),
            ("err_type", offset_of!(PP, err_type)),
        ] {
            s(&format!("off ocsd_ptm_pkt.{k}"), v);
        }
        type PS = OcsdStmPkt;
        for (k, v) in [
            ("master", offset_of!(PS, master)),
            ("channel", offset_of!(PS, channel)),
            ("timestamp", offset_of!(PS, timestamp)),
            ("pkt_ts_bits", offset_of!(PS, pkt_ts_bits)),
            ("pkt_has_ts", offset_of!(PS, pkt_has_ts)),
            ("ts_type", offset_of!(PS, ts_type)),
            ("pkt_has_marker", offset_of!(PS, pkt_has_marker)),
            ("payload", offset_of!(PS, payload)),
            ("err_type", offset_of!(PS, err_type)),
        ] {
            s(&format!("off ocsd_stm_pkt.{k}"), v);
        }
        // Bit-field masks in their words, as this library packs them.
        for (k, v) in [
            ("ocsd_etmv4_i_pkt.context.EL", 0x3),
            ("ocsd_etmv4_i_pkt.context.SF", 1 << 2),
            ("ocsd_etmv4_i_pkt.context.NS", 1 << 3),
            ("ocsd_etmv4_i_pkt.context.updated", 1 << 4),
            ("ocsd_etmv4_i_pkt.context.updated_c", 1 << 5),
            ("ocsd_etmv4_i_pkt.context.updated_v", 1 << 6),
            ("ocsd_etmv4_i_pkt.context.NSE", 1 << 7),
            ("ocsd_etmv4_i_pkt.exception_info.exceptionType", 0x3ff),
            ("ocsd_etmv4_i_pkt.exception_info.addr_interp", 0x3 << 10),
            ("ocsd_etmv4_i_pkt.exception_info.m_fault_pending", 1 << 12),
            ("ocsd_etmv4_i_pkt.exception_info.m_type", 1 << 13),
            ("ocsd_etmv4_i_pkt.Q_pkt.addr_present", 1),
            ("ocsd_etmv4_i_pkt.Q_pkt.q_type", 0xf << 3),
            (
                "ocsd_etmv4_i_pkt.pkt_valid.bits.context_valid",
                e4valid::CONTEXT as usize,
            ),
            ("ocsd_etmv4_i_pkt.pkt_valid.bits.cc_valid", e4valid::CC as usize),
            (
                "ocsd_etmv4_i_pkt.pkt_valid.bits.commit_elem_valid",
                e4valid::COMMIT_ELEM as usize,
            ),
            ("ocsd_etmv4_i_pkt.trace_info.bits.in_trans_state", 1 << 6),
            ("ocsd_etmv3_pkt.context.curr_NS", 1 << 1),
            ("ocsd_etmv3_pkt.context.updated_v", 1 << 5),
            ("ocsd_etmv3_pkt.exception.bits.cm_irq_n", 0x1ff << 7),
            ("ocsd_etmv3_pkt.exception.bits.cm_resume", 0xf << 3),
            ("ocsd_etmv3_pkt.data.update_dval", 1 << 5),
            ("ocsd_etmv3_pkt.data.ooo_tag", 0x3),
            ("ocsd_etmv3_pkt.isync_info.no_address", 1 << 2),
        ] {
            s(&format!("bits {k}"), v);
        }
        #[cfg(feature = "opencsd-1-8")]
        {
            s("size ocsd_itm_pkt", size_of::<OcsdItmPkt>());
            for (k, v) in [
                ("ocsd_itm_pkt.src_id", offset_of!(OcsdItmPkt, src_id)),
                ("ocsd_itm_pkt.value", offset_of!(OcsdItmPkt, value)),
                ("ocsd_itm_pkt.val_sz", offset_of!(OcsdItmPkt, val_sz)),
                ("ocsd_itm_pkt.val_ext", offset_of!(OcsdItmPkt, val_ext)),
                ("ocsd_itm_pkt.err_type", offset_of!(OcsdItmPkt, err_type)),
                ("ocsd_etmv4_i_pkt.ite_pkt", offset_of!(P4, ite_pkt)),
                (
                    "ocsd_etmv4_i_pkt.ite_pkt.value",
                    offset_of!(P4, ite_pkt) + offset_of!(Etmv4Ite, value),
                ),
            ] {
                s(&format!("off {k}"), v);
            }
            s(
                "bits ocsd_etmv4_i_pkt.pkt_valid.bits.cancel_elem_valid",
                e4valid::CANCEL_ELEM as usize,
            );
            s("bits ocsd_etmv4_i_pkt.trace_info.bits.initial_t_info", 1 << 16);
            s("bits ocsd_etmv4_i_pkt.trace_info.bits.spec_field_present", 1 << 17);
        }
    }
    m
}

#[test]
#[ignore = "needs libopencsd-dev (or OPENCSD_INCLUDE) and a C compiler; scripts/check.sh runs it"]
fn struct_layouts_match_the_c_headers() {
    let include = std::env::var("OPENCSD_INCLUDE").unwrap_or_else(|_| "/usr/include".to_string());
    compare_with(&include, &[]);
}

/// The crate's own header (`include/opencsd_c_api.h`) against the Rust
/// declarations, in every `cargo test`: its 1.3.x variant in the default
/// build, its 1.8.x variant (`-DOCSD_C_API_ABI_1_8`) in the 1.8.x build
/// (with a C compiler; without one the test says so and passes).
#[test]
fn struct_layouts_match_the_crate_header() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    if Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("no C compiler ({cc}): the crate header's layouts are not checked");
        return;
    }
    let defines: &[&str] = if cfg!(feature = "opencsd-1-8") {
        &["-DOCSD_C_API_ABI_1_8"]
    } else {
        &[]
    };
    compare_with(concat!(env!("CARGO_MANIFEST_DIR"), "/include"), defines);
}

/// Compiles the layout program against the OpenCSD headers under
/// `include` (with `defines`) and compares its sizes, offsets and bits
/// with the Rust side.
fn compare_with(include: &str, defines: &[&str]) {
    assert!(
        std::path::Path::new(include)
            .join("opencsd/c_api/opencsd_c_api.h")
            .exists(),
        "no OpenCSD headers under {include}"
    );
    let dir = std::env::temp_dir().join(format!("ocsd-layout-{}-{}", std::process::id(), include.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let st = Command::new(&cc)
        .arg(format!("-I{include}"))
        .args(defines)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "{cc} failed on the layout program");
    let out = Command::new(&exe).output().expect("run the layout program");
    let text = String::from_utf8(out.stdout).unwrap();
    let rust = rust_values();
    let mut c = BTreeMap::new();
    for line in text.lines() {
        let (k, v) = line.rsplit_once(' ').unwrap();
        c.insert(k.to_string(), v.parse::<u64>().unwrap());
    }
    let mut bad = Vec::new();
    for (k, v) in &c {
        match rust.get(k) {
            Some(r) if r == v => {}
            Some(r) => bad.push(format!("{k}: C {v}, Rust {r}")),
            None => bad.push(format!("{k}: C {v}, not checked on the Rust side")),
        }
    }
    for k in rust.keys().filter(|k| !c.contains_key(*k)) {
        bad.push(format!("{k}: not in these headers"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{} sizes, offsets and bits compared", c.len());
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
}
