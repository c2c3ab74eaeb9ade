//! The C types that cross the boundary, laid out as OpenCSD's headers lay
//! them out: Debian's 1.3.x by default, 1.8.x with the `opencsd-1-8`
//! feature. `tests/layout.rs` checks sizes and offsets against the C
//! headers. C enums are `int` on every ABI this library targets, so they
//! are carried as `i32`/`u32` and converted where they are used.

use std::ffi::{c_char, c_int, c_void};

/// `ocsd_err_t`.
pub type OcsdErr = c_int;
/// `ocsd_datapath_resp_t`.
pub type OcsdResp = c_int;
/// `ocsd_trc_index_t`: 32 bits, as OpenCSD builds it by default (without
/// `ENABLE_LARGE_TRACE_SOURCES`): Debian's 1.3.3 library stores 4 bytes
/// through `ocsd_get_last_err`'s index pointer, and 1.8.0's header declares
/// `uint32_t`.
pub type TrcIndex = u32;
/// `ocsd_vaddr_t` (64-bit build of OpenCSD).
pub type VAddr = u64;
/// `dcd_tree_handle_t`.
pub type TreeHandle = *mut c_void;

pub const OCSD_OK: OcsdErr = 0;
pub const OCSD_ERR_FAIL: OcsdErr = 1;
pub const OCSD_ERR_NOT_INIT: OcsdErr = 3;
pub const OCSD_ERR_INVALID_ID: OcsdErr = 4;
pub const OCSD_ERR_BAD_HANDLE: OcsdErr = 5;
pub const OCSD_ERR_INVALID_PARAM_VAL: OcsdErr = 6;
pub const OCSD_ERR_INVALID_PARAM_TYPE: OcsdErr = 7;
pub const OCSD_ERR_FILE_ERROR: OcsdErr = 8;
pub const OCSD_ERR_NO_PROTOCOL: OcsdErr = 9;
pub const OCSD_ERR_DCDREG_NAME_REPEAT: OcsdErr = 39;
pub const OCSD_ERR_DCDREG_NAME_UNKNOWN: OcsdErr = 40;
pub const OCSD_ERR_DCDREG_TOOMANY: OcsdErr = 42;
pub const OCSD_ERR_DCD_INTERFACE_UNUSED: OcsdErr = 43;

pub const OCSD_RESP_CONT: OcsdResp = 0;
pub const OCSD_RESP_FATAL_NOT_INIT: OcsdResp = 6;
pub const OCSD_RESP_FATAL_INVALID_OP: OcsdResp = 7;
pub const OCSD_RESP_FATAL_INVALID_PARAM: OcsdResp = 8;
pub const OCSD_RESP_FATAL_SYS_ERR: OcsdResp = 10;

/// `ocsd_dcd_tree_src_t`.
pub const OCSD_TRC_SRC_FRAME_FORMATTED: c_int = 0;
pub const OCSD_TRC_SRC_SINGLE: c_int = 1;

/// Deformatter configuration flags (`OCSD_DFRMTR_*`).
pub const OCSD_DFRMTR_HAS_FSYNCS: u32 = 0x01;
pub const OCSD_DFRMTR_HAS_HSYNCS: u32 = 0x02;
pub const OCSD_DFRMTR_FRAME_MEM_ALIGN: u32 = 0x04;
pub const OCSD_DFRMTR_PACKED_RAW_OUT: u32 = 0x08;
pub const OCSD_DFRMTR_UNPACKED_RAW_OUT: u32 = 0x10;
pub const OCSD_DFRMTR_RESET_ON_4X_FSYNC: u32 = 0x20;
pub const OCSD_DFRMTR_VALID_MASK: u32 = 0x3f;

/// Decoder creation flags (`OCSD_CREATE_FLG_*`).
pub const OCSD_CREATE_FLG_PACKET_PROC: c_int = 0x01;
pub const OCSD_CREATE_FLG_FULL_DECODER: c_int = 0x02;

/// Operational flags that change decoding (`OCSD_OPFLG_*`, 1.8.x).
pub const OCSD_OPFLG_PKTDEC_HALT_BAD_PKTS: c_int = 0x200;
pub const OCSD_OPFLG_N_UNCOND_DIR_BR_CHK: c_int = 0x400;
pub const OCSD_OPFLG_STRICT_N_UNCOND_BR_CHK: c_int = 0x800;
pub const OCSD_OPFLG_CHK_RANGE_CONTINUE: c_int = 0x1000;
/// ETMv4/ETE: error on bad AArch64 opcodes (`ETM4_OPFLG_PKTDEC_AA64_OPCODE_CHK`).
pub const ETM4_OPFLG_PKTDEC_AA64_OPCODE_CHK: c_int = 0x0002_0000;

/// Logger output flags (`C_API_MSGLOGOUT_FLG_*`).
pub const C_API_MSGLOGOUT_FLG_FILE: c_int = 0x1;
pub const C_API_MSGLOGOUT_FLG_STDERR: c_int = 0x2;
pub const C_API_MSGLOGOUT_FLG_STDOUT: c_int = 0x4;
pub const C_API_MSGLOGOUT_MASK: c_int = 0x7;

/// `ocsd_c_api_cb_types`.
pub const OCSD_C_API_CB_PKT_SINK: c_int = 0;
pub const OCSD_C_API_CB_PKT_MON: c_int = 1;

/// `ocsd_trace_protocol_t`.
pub const OCSD_PROTOCOL_ETMV3: c_int = 1;
pub const OCSD_PROTOCOL_ETMV4I: c_int = 2;
pub const OCSD_PROTOCOL_PTM: c_int = 4;
pub const OCSD_PROTOCOL_STM: c_int = 5;
pub const OCSD_PROTOCOL_ETE: c_int = 6;
pub const OCSD_PROTOCOL_ITM: c_int = 7;
pub const OCSD_PROTOCOL_CUSTOM_0: c_int = 100;
pub const OCSD_PROTOCOL_END: c_int = 110;

/// The version this build reports: the ABI it follows.
#[cfg(not(feature = "opencsd-1-8"))]
pub const OCSD_VER_NUM: u32 = 0x0001_0303;
#[cfg(not(feature = "opencsd-1-8"))]
pub const OCSD_VER_STRING: &std::ffi::CStr = c"1.3.3";
#[cfg(feature = "opencsd-1-8")]
pub const OCSD_VER_NUM: u32 = 0x0001_0800;
#[cfg(feature = "opencsd-1-8")]
pub const OCSD_VER_STRING: &std::ffi::CStr = c"1.8.0";

/// `ocsd_gen_trc_elem_t` values. 1.8.x inserted INSTRUMENTATION and
/// ITMTRACE before CUSTOM.
pub mod elem {
    pub const UNKNOWN: u32 = 0;
    pub const NO_SYNC: u32 = 1;
    pub const TRACE_ON: u32 = 2;
    pub const EO_TRACE: u32 = 3;
    pub const PE_CONTEXT: u32 = 4;
    pub const INSTR_RANGE: u32 = 5;
    pub const I_RANGE_NOPATH: u32 = 6;
    pub const ADDR_NACC: u32 = 7;
    pub const ADDR_UNKNOWN: u32 = 8;
    pub const EXCEPTION: u32 = 9;
    pub const EXCEPTION_RET: u32 = 10;
    pub const TIMESTAMP: u32 = 11;
    pub const CYCLE_COUNT: u32 = 12;
    pub const EVENT: u32 = 13;
    pub const SWTRACE: u32 = 14;
    pub const SYNC_MARKER: u32 = 15;
    pub const MEMTRANS: u32 = 16;
    #[cfg(feature = "opencsd-1-8")]
    pub const INSTRUMENTATION: u32 = 17;
    #[cfg(feature = "opencsd-1-8")]
    pub const ITMTRACE: u32 = 18;
    #[cfg(feature = "opencsd-1-8")]
    pub const CUSTOM: u32 = 19;
    #[cfg(not(feature = "opencsd-1-8"))]
    pub const CUSTOM: u32 = 17;
}

/// `unsync_info_t`'s UNSYNC_EOT: 1.8.x put UNSYNC_BAD_IMAGE before it.
pub const UNSYNC_EOT: u32 = if cfg!(feature = "opencsd-1-8") { 7 } else { 6 };
/// 1.8.x's `UNSYNC_BAD_IMAGE`; 1.3.x has none (a value no element holds).
pub const UNSYNC_BAD_IMAGE: u32 = if cfg!(feature = "opencsd-1-8") { 6 } else { u32::MAX };

/// `ocsd_pe_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdPeContext {
    pub security_level: i32,
    pub exception_level: i32,
    pub context_id: u32,
    pub vmid: u32,
    /// bits64 (bit 0), ctxt_id_valid (1), vmid_valid (2), el_valid (3).
    pub flags: u32,
}

/// `ocsd_swt_info_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdSwtInfo {
    pub swt_master_id: u16,
    pub swt_channel_id: u16,
    pub swt_flag_bits: u32,
}

/// `trace_sw_ite_t` (1.8.x).
#[cfg(feature = "opencsd-1-8")]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceSwIte {
    pub el: u8,
    pub value: u64,
}

/// `swt_itm_info` (1.8.x).
#[cfg(feature = "opencsd-1-8")]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SwtItmInfo {
    pub pkt_type: u32,
    pub payload_src_id: u8,
    pub payload_size: u8,
    pub value: u32,
    pub overflow: u8,
}

/// The element's per-kind payload union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ElemPayload {
    /// exception_number, trace_on_reason, num_instr_range,
    /// unsync_eot_info, mem_trans, and the ADDR_NACC memory space (1.8.x).
    pub word: u32,
    /// trace_event: ev_type, ev_number.
    pub trace_event: [u16; 2],
    pub sw_trace_info: OcsdSwtInfo,
    /// sync_marker: type, value.
    pub sync_marker: [u32; 2],
    #[cfg(feature = "opencsd-1-8")]
    pub sw_ite: TraceSwIte,
    #[cfg(feature = "opencsd-1-8")]
    pub swt_itm: SwtItmInfo,
    /// The union's bytes as words (written whole by the element
    /// conversion, so nothing of a previous element is left).
    pub raw: [u32; PAYLOAD_WORDS],
}

/// Size of the element payload union in 32-bit words: 8 bytes in 1.3.x,
/// 16 in 1.8.x (`trace_sw_ite_t` holds a `uint64_t` after a byte).
#[cfg(not(feature = "opencsd-1-8"))]
pub const PAYLOAD_WORDS: usize = 2;
#[cfg(feature = "opencsd-1-8")]
pub const PAYLOAD_WORDS: usize = 4;

impl Default for ElemPayload {
    fn default() -> Self {
        // SAFETY: every member is plain integers, for which all-zero bytes
        // are a valid value.
        unsafe { std::mem::zeroed() }
    }
}

/// `ocsd_generic_trace_elem`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OcsdGenericTraceElem {
    pub elem_type: u32,
    pub isa: u32,
    pub st_addr: VAddr,
    pub en_addr: VAddr,
    pub context: OcsdPeContext,
    pub timestamp: u64,
    pub cycle_count: u32,
    pub last_i_type: u32,
    pub last_i_subtype: u32,
    /// The per-element flag bit-field (see [`flag`]).
    pub flag_bits: u32,
    pub payload: ElemPayload,
    pub ptr_extended_data: *const c_void,
}

// SAFETY: the only pointer, `ptr_extended_data`, points at bytes owned
// by whoever owns the element (this library's sinks keep both together)
// and is only read; moving the element between threads moves neither.
unsafe impl Send for OcsdGenericTraceElem {}

impl Default for OcsdGenericTraceElem {
    fn default() -> Self {
        OcsdGenericTraceElem {
            elem_type: 0,
            isa: 6, // ocsd_isa_unknown
            st_addr: 0,
            en_addr: 0,
            context: OcsdPeContext::default(),
            timestamp: 0,
            cycle_count: 0,
            last_i_type: 0,
            last_i_subtype: 0,
            flag_bits: 0,
            payload: ElemPayload::default(),
            ptr_extended_data: std::ptr::null(),
        }
    }
}

/// Bits of `flag_bits` (the header's bit-field, allocated from bit 0 up
/// as GCC and Clang do on little-endian targets).
pub mod flag {
    pub const LAST_INSTR_EXEC: u32 = 1 << 0;
    pub const LAST_INSTR_SZ_SHIFT: u32 = 1;
    pub const LAST_INSTR_SZ_MASK: u32 = 0x7 << 1;
    pub const HAS_CC: u32 = 1 << 4;
    pub const CPU_FREQ_CHANGE: u32 = 1 << 5;
    pub const EXCEP_RET_ADDR: u32 = 1 << 6;
    pub const EXCEP_DATA_MARKER: u32 = 1 << 7;
    pub const EXTENDED_DATA: u32 = 1 << 8;
    pub const HAS_TS: u32 = 1 << 9;
    pub const LAST_INSTR_COND: u32 = 1 << 10;
    pub const EXCEP_RET_ADDR_BR_TGT: u32 = 1 << 11;
}

/// `ocsd_etmv4_cfg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdEtmv4Cfg {
    pub reg_idr0: u32,
    pub reg_idr1: u32,
    pub reg_idr2: u32,
    pub reg_idr8: u32,
    pub reg_idr9: u32,
    pub reg_idr10: u32,
    pub reg_idr11: u32,
    pub reg_idr12: u32,
    pub reg_idr13: u32,
    pub reg_configr: u32,
    pub reg_traceidr: u32,
    pub arch_ver: i32,
    pub core_prof: i32,
}

/// `ocsd_ete_cfg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdEteCfg {
    pub reg_idr0: u32,
    pub reg_idr1: u32,
    pub reg_idr2: u32,
    pub reg_idr8: u32,
    pub reg_devarch: u32,
    pub reg_configr: u32,
    pub reg_traceidr: u32,
    pub arch_ver: i32,
    pub core_prof: i32,
}

/// `ocsd_etmv3_cfg` and `ocsd_ptm_cfg` (the same four registers).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdEtmv3Cfg {
    pub reg_idr: u32,
    pub reg_ctrl: u32,
    pub reg_ccer: u32,
    pub reg_trc_id: u32,
    pub arch_ver: i32,
    pub core_prof: i32,
}

/// `ocsd_stm_cfg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdStmCfg {
    pub reg_tcsr: u32,
    pub reg_feat3r: u32,
    pub reg_devid: u32,
    pub reg_feat1r: u32,
    pub reg_hwev_mast: u32,
    pub hw_event: i32,
}

/// `ocsd_itm_cfg` (1.8.x).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdItmCfg {
    pub reg_tcr: u32,
}

/// `ocsd_file_mem_region_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdFileMemRegion {
    pub file_offset: usize,
    pub start_address: VAddr,
    pub region_size: usize,
}

/// `ocsd_demux_stats_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdDemuxStats {
    pub valid_id_bytes: u64,
    pub no_id_bytes: u64,
    pub reserved_id_bytes: u64,
    pub unknown_id_bytes: u64,
    pub frame_bytes: u64,
}

/// `ocsd_decode_stats_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OcsdDecodeStats {
    pub version: u32,
    pub revision: u16,
    pub channel_total: u64,
    pub channel_unsynced: u64,
    pub bad_header_errs: u32,
    pub bad_sequence_errs: u32,
    pub demux: OcsdDemuxStats,
}

/// `FnTraceElemIn`.
pub type FnTraceElemIn = Option<
    unsafe extern "C" fn(
        p_context: *const c_void,
        index_sop: TrcIndex,
        trc_chan_id: u8,
        elem: *const OcsdGenericTraceElem,
    ) -> OcsdResp,
>;
/// `FnDefLoggerPrintStrCB`.
pub type FnDefLoggerPrintStrCb =
    Option<unsafe extern "C" fn(p_context: *const c_void, psz_msg_str: *const c_char, str_len: c_int)>;
/// `Fn_MemAcc_CB`.
pub type FnMemAccCb = Option<
    unsafe extern "C" fn(
        p_context: *const c_void,
        address: VAddr,
        mem_space: c_int,
        req_bytes: u32,
        byte_buffer: *mut u8,
    ) -> u32,
>;
/// `Fn_MemAccID_CB`.
pub type FnMemAccIdCb = Option<
    unsafe extern "C" fn(
        p_context: *const c_void,
        address: VAddr,
        mem_space: c_int,
        trc_id: u8,
        req_bytes: u32,
        byte_buffer: *mut u8,
    ) -> u32,
>;
