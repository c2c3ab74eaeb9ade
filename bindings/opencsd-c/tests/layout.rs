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
#ifdef OCSD_BUILTIN_DCD_ITM
#include <opencsd/itm/trc_pkt_types_itm.h>
#endif
#define S(t) printf("size %s %zu\n", #t, sizeof(t));
#define O(t, f) printf("off %s.%s %zu\n", #t, #f, offsetof(t, f));
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
#ifdef OCSD_BUILTIN_DCD_ITM
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
    m
}

#[test]
#[ignore = "needs libopencsd-dev (or OPENCSD_INCLUDE) and a C compiler; scripts/check.sh runs it"]
fn struct_layouts_match_the_c_headers() {
    let include = std::env::var("OPENCSD_INCLUDE").unwrap_or_else(|_| "/usr/include".to_string());
    assert!(
        std::path::Path::new(&include)
            .join("opencsd/c_api/opencsd_c_api.h")
            .exists(),
        "no OpenCSD headers under {include}"
    );
    let dir = std::env::temp_dir().join(format!("ocsd-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, C_PROGRAM).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let st = Command::new(&cc)
        .arg(format!("-I{include}"))
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
