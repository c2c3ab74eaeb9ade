/*
 * opencsd_c_api.h: the C API of coresight-opencsd-c (libopencsd_c_api.so.1),
 * in one header, for either ABI the library is built with:
 *
 *   - by default OpenCSD 1.3.x's names, values and struct layouts (Debian's
 *     libopencsd-dev 1.3.3), as the library's default build;
 *   - with OCSD_C_API_ABI_1_8 defined (-DOCSD_C_API_ABI_1_8), OpenCSD
 *     1.8.x's, for the library built with `--features opencsd-1-8`.
 *
 * The pkg-config data (pkgconfig/) gives the matching flags for each build.
 *
 * Written for this library (not copied from OpenCSD); the names and the
 * layouts are OpenCSD's, which is what makes a program built against this
 * header run on OpenCSD's library too and the other way round.
 * tests/header.rs checks that every ocsd_* function the library exports is
 * declared here with the same number of parameters, and the reverse;
 * tests/layout.rs compiles against this header and compares every struct
 * size, offset and bit-field with the Rust declarations.
 *
 * Programs that include OpenCSD's paths (<opencsd/c_api/opencsd_c_api.h>,
 * <opencsd/etmv4/trc_pkt_types_etmv4.h>, ...) find forwarding headers under
 * include/opencsd/ that include this one.
 *
 * Trace indexes (ocsd_trc_index_t) are 32-bit, as in OpenCSD's default
 * build (Debian's among them): the library is built that way, so
 * ENABLE_LARGE_TRACE_SOURCES (OpenCSD's switch to 64-bit indexes) is refused.
 */
#ifndef COSD_OPENCSD_C_API_H
#define COSD_OPENCSD_C_API_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>

/* Marks the OpenCSD include guards as taken, so that a program mixing this
 * header with one of OpenCSD's gets one definition of each type. */
#define ARM_OPENCSD_C_API_H_INCLUDED
#define ARM_OCSD_C_API_TYPES_H_INCLUDED
#define ARM_OCSD_C_API_CUSTOM_H_INCLUDED
#define ARM_OCSD_IF_TYPES_H_INCLUDED
#define ARM_OCSD_IF_VERSION_H_INCLUDED
#define ARM_TRC_GEN_ELEM_TYPES_H_INCLUDED
#define ARM_TRC_PKT_TYPES_H_INCLUDED
#define ARM_TRC_PKT_TYPES_ETMV4_H_INCLUDED
#define ARM_TRC_PKT_TYPES_ETE_H_INCLUDED
#define ARM_TRC_ETM3_PKT_TYPES_ETMV3_H_INCLUDED
#define ARM_TRC_PKT_PTM_TYPES_H_INCLUDED
#define ARM_TRC_PKT_TYPES_STM_H_INCLUDED
#define ARM_TRC_PKT_TYPES_ITM_H_INCLUDED

#ifdef __cplusplus
#define OCSD_C_API extern "C"
#else
#define OCSD_C_API
#endif

/* ---- Version --------------------------------------------------------- */

#define OCSD_VER_MAJOR 0x1
#ifdef OCSD_C_API_ABI_1_8
#define OCSD_VER_MINOR 0x8
#define OCSD_VER_PATCH 0x0
#define OCSD_VER_STRING "1.8.0"
#else
#define OCSD_VER_MINOR 0x3
#define OCSD_VER_PATCH 0x3
#define OCSD_VER_STRING "1.3.3"
#endif
#define OCSD_VER_NUM ((OCSD_VER_MAJOR << 16) | (OCSD_VER_MINOR << 8) | OCSD_VER_PATCH)
#define OCSD_LIB_NAME "OpenCSD Library"
#define OCSD_LIB_SHORT_NAME "OCSD"

/* ---- Basic types ----------------------------------------------------- */

#ifdef ENABLE_LARGE_TRACE_SOURCES
#error "coresight-opencsd-c's libopencsd_c_api.so.1 has 32-bit trace indexes (OpenCSD's default build)"
#endif
typedef uint32_t ocsd_trc_index_t;
#define OCSD_TRC_IDX_STR PRIu32
#define OCSD_BAD_TRC_INDEX ((ocsd_trc_index_t)-1)
#define OCSD_BAD_CS_SRC_ID ((uint8_t)-1)
#define OCSD_IS_VALID_CS_SRC_ID(id) (((id) > 0) && ((id) < 0x70))
#define OCSD_IS_RESERVED_CS_SRC_ID(id) (((id) == 0) || (((id) >= 0x70) && ((id) <= 0x7F)))

typedef uint64_t ocsd_vaddr_t;
#define OCSD_MAX_VA_BITSIZE 64
#define OCSD_VA_MASK ~0ULL
#define OCSD_BIT_MASK(bits) ((bits) == OCSD_MAX_VA_BITSIZE) ? OCSD_VA_MASK : ((ocsd_vaddr_t)1 << (bits)) - 1

typedef unsigned int ocsd_hndl_rdr_t;
typedef unsigned int ocsd_hndl_err_log_t;
#define OCSD_INVALID_HANDLE (unsigned int)-1

/* Error codes: consecutive from OCSD_OK. */
typedef enum _ocsd_err_t {
    OCSD_OK = 0, OCSD_ERR_FAIL, OCSD_ERR_MEM, OCSD_ERR_NOT_INIT, OCSD_ERR_INVALID_ID,
    OCSD_ERR_BAD_HANDLE, OCSD_ERR_INVALID_PARAM_VAL, OCSD_ERR_INVALID_PARAM_TYPE,
    OCSD_ERR_FILE_ERROR, OCSD_ERR_NO_PROTOCOL,
    OCSD_ERR_ATTACH_TOO_MANY, OCSD_ERR_ATTACH_INVALID_PARAM, OCSD_ERR_ATTACH_COMP_NOT_FOUND,
    OCSD_ERR_RDR_FILE_NOT_FOUND, OCSD_ERR_RDR_INVALID_INIT, OCSD_ERR_RDR_NO_DECODER,
    OCSD_ERR_DATA_DECODE_FATAL, OCSD_ERR_DFMTR_NOTCONTTRACE, OCSD_ERR_DFMTR_BAD_FHSYNC,
    OCSD_ERR_BAD_PACKET_SEQ, OCSD_ERR_INVALID_PCKT_HDR, OCSD_ERR_PKT_INTERP_FAIL,
    OCSD_ERR_UNSUPPORTED_ISA, OCSD_ERR_HW_CFG_UNSUPP, OCSD_ERR_UNSUPP_DECODE_PKT,
    OCSD_ERR_BAD_DECODE_PKT, OCSD_ERR_COMMIT_PKT_OVERRUN, OCSD_ERR_MEM_NACC,
    OCSD_ERR_RET_STACK_OVERFLOW, OCSD_ERR_DCDT_NO_FORMATTER,
    OCSD_ERR_MEM_ACC_OVERLAP, OCSD_ERR_MEM_ACC_FILE_NOT_FOUND, OCSD_ERR_MEM_ACC_FILE_DIFF_RANGE,
    OCSD_ERR_MEM_ACC_RANGE_INVALID, OCSD_ERR_MEM_ACC_BAD_LEN,
    OCSD_ERR_TEST_SNAPSHOT_PARSE, OCSD_ERR_TEST_SNAPSHOT_PARSE_INFO, OCSD_ERR_TEST_SNAPSHOT_READ,
    OCSD_ERR_TEST_SS_TO_DECODER,
    OCSD_ERR_DCDREG_NAME_REPEAT, OCSD_ERR_DCDREG_NAME_UNKNOWN, OCSD_ERR_DCDREG_TYPE_UNKNOWN,
    OCSD_ERR_DCDREG_TOOMANY, OCSD_ERR_DCD_INTERFACE_UNUSED,
#ifdef OCSD_C_API_ABI_1_8
    OCSD_ERR_INVALID_OPCODE, OCSD_ERR_I_RANGE_LIMIT_OVERRUN, OCSD_ERR_BAD_DECODE_IMAGE,
#endif
    OCSD_ERR_LAST
} ocsd_err_t;

typedef enum _ocsd_err_severity_t {
    OCSD_ERR_SEV_NONE, OCSD_ERR_SEV_ERROR, OCSD_ERR_SEV_WARN, OCSD_ERR_SEV_INFO,
} ocsd_err_severity_t;

typedef enum _ocsd_datapath_op_t {
    OCSD_OP_DATA = 0, OCSD_OP_EOT, OCSD_OP_FLUSH, OCSD_OP_RESET,
} ocsd_datapath_op_t;

typedef enum _ocsd_datapath_resp_t {
    OCSD_RESP_CONT, OCSD_RESP_WARN_CONT, OCSD_RESP_ERR_CONT,
    OCSD_RESP_WAIT, OCSD_RESP_WARN_WAIT, OCSD_RESP_ERR_WAIT,
    OCSD_RESP_FATAL_NOT_INIT, OCSD_RESP_FATAL_INVALID_OP, OCSD_RESP_FATAL_INVALID_PARAM,
    OCSD_RESP_FATAL_INVALID_DATA, OCSD_RESP_FATAL_SYS_ERR,
} ocsd_datapath_resp_t;

#define OCSD_DATA_RESP_IS_FATAL(x) ((x) >= OCSD_RESP_FATAL_NOT_INIT)
#define OCSD_DATA_RESP_IS_WARN(x) (((x) == OCSD_RESP_WARN_CONT) || ((x) == OCSD_RESP_WARN_WAIT))
#define OCSD_DATA_RESP_IS_ERR(x) (((x) == OCSD_RESP_ERR_CONT) || ((x) == OCSD_RESP_ERR_WAIT))
#define OCSD_DATA_RESP_IS_WARN_OR_ERR(x) (OCSD_DATA_RESP_IS_ERR(x) || OCSD_DATA_RESP_IS_WARN(x))
#define OCSD_DATA_RESP_IS_CONT(x) ((x) < OCSD_RESP_WAIT)
#define OCSD_DATA_RESP_IS_WAIT(x) (((x) >= OCSD_RESP_WAIT) && ((x) < OCSD_RESP_FATAL_NOT_INIT))

typedef enum _rcdtl_rawframe_elem_t {
    OCSD_FRM_NONE, OCSD_FRM_PACKED, OCSD_FRM_HSYNC, OCSD_FRM_FSYNC, OCSD_FRM_ID_DATA,
} ocsd_rawframe_elem_t;

typedef enum _ocsd_dcd_tree_src_t {
    OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_TRC_SRC_SINGLE,
} ocsd_dcd_tree_src_t;

/* Frame deformatter configuration flags. */
#define OCSD_DFRMTR_HAS_FSYNCS 0x01
#define OCSD_DFRMTR_HAS_HSYNCS 0x02
#define OCSD_DFRMTR_FRAME_MEM_ALIGN 0x04
#define OCSD_DFRMTR_PACKED_RAW_OUT 0x08
#define OCSD_DFRMTR_UNPACKED_RAW_OUT 0x10
#define OCSD_DFRMTR_RESET_ON_4X_FSYNC 0x20
#define OCSD_DFRMTR_VALID_MASK 0x3F
#define OCSD_DFRMTR_FRAME_SIZE 0x10

#define OCSD_CMPNAME_PREFIX_SOURCE_READER "SRDR"
#define OCSD_CMPNAME_PREFIX_FRAMEDEFORMATTER "DFMT"
#define OCSD_CMPNAME_PREFIX_PKTPROC "PKTP"
#define OCSD_CMPNAME_PREFIX_PKTDEC "PDEC"

typedef enum _ocsd_arch_version {
    ARCH_UNKNOWN = 0x0000, ARCH_CUSTOM = 0x0001, ARCH_V7 = 0x0700, ARCH_V8 = 0x0800,
    ARCH_V8r3 = 0x0803, ARCH_AA64 = 0x0864, ARCH_V8_max = ARCH_AA64,
} ocsd_arch_version_t;
#define OCSD_IS_V8_ARCH(arch) (((arch) >= ARCH_V8) && ((arch) <= ARCH_V8_max))
#define OCSD_IS_ARCH_MINVER(arch, min_arch) ((arch) >= (min_arch))

typedef enum _ocsd_core_profile {
    profile_Unknown, profile_CortexM, profile_CortexR, profile_CortexA, profile_Custom,
} ocsd_core_profile_t;

typedef struct _ocsd_arch_profile_t {
    ocsd_arch_version_t arch;
    ocsd_core_profile_t profile;
} ocsd_arch_profile_t;

typedef enum _ocsd_isa {
    ocsd_isa_arm, ocsd_isa_thumb2, ocsd_isa_aarch64, ocsd_isa_tee, ocsd_isa_jazelle,
    ocsd_isa_custom, ocsd_isa_unknown
} ocsd_isa;

typedef enum _ocsd_sec_level {
    ocsd_sec_secure, ocsd_sec_nonsecure, ocsd_sec_root, ocsd_sec_realm,
} ocsd_sec_level;

typedef enum _ocsd_ex_level {
    ocsd_EL_unknown = -1, ocsd_EL0 = 0, ocsd_EL1, ocsd_EL2, ocsd_EL3,
} ocsd_ex_level;

typedef enum _ocsd_instr_type {
    OCSD_INSTR_OTHER, OCSD_INSTR_BR, OCSD_INSTR_BR_INDIRECT, OCSD_INSTR_ISB,
    OCSD_INSTR_DSB_DMB, OCSD_INSTR_WFI_WFE, OCSD_INSTR_TSTART,
} ocsd_instr_type;

typedef enum _ocsd_instr_subtype {
    OCSD_S_INSTR_NONE, OCSD_S_INSTR_BR_LINK, OCSD_S_INSTR_V8_RET, OCSD_S_INSTR_V8_ERET,
    OCSD_S_INSTR_V7_IMPLIED_RET,
} ocsd_instr_subtype;

/* An instruction for a custom decoder's decode callback (which this library
 * does not offer: it returns OCSD_ERR_DCD_INTERFACE_UNUSED). */
typedef struct _ocsd_instr_info {
    ocsd_arch_profile_t pe_type;
    ocsd_isa isa;
    ocsd_vaddr_t instr_addr;
    uint32_t opcode;
    uint8_t dsb_dmb_waypoints;
    uint8_t wfi_wfe_branch;
#ifdef OCSD_C_API_ABI_1_8
    uint8_t track_it_block;
#endif
    ocsd_instr_type type;
    ocsd_vaddr_t branch_addr;
    ocsd_isa next_isa;
    uint8_t instr_size;
    uint8_t is_conditional;
    uint8_t is_link;
    uint8_t thumb_it_conditions;
    ocsd_instr_subtype sub_type;
} ocsd_instr_info;

typedef struct _ocsd_pe_context {
    ocsd_sec_level security_level;
    ocsd_ex_level exception_level;
    uint32_t context_id;
    uint32_t vmid;
    struct {
        uint32_t bits64 : 1;
        uint32_t ctxt_id_valid : 1;
        uint32_t vmid_valid : 1;
        uint32_t el_valid : 1;
    };
} ocsd_pe_context;

/* Memory spaces: one bit each; S, N, R and ANY are unions of them. */
typedef enum _ocsd_mem_space_acc_t {
#ifdef OCSD_C_API_ABI_1_8
    OCSD_MEM_SPACE_NONE = 0x0, OCSD_MEM_SPACE_EL1S = 0x1, OCSD_MEM_SPACE_EL1N = 0x2,
    OCSD_MEM_SPACE_EL2 = 0x4, OCSD_MEM_SPACE_EL3 = 0x8, OCSD_MEM_SPACE_EL2S = 0x10,
    OCSD_MEM_SPACE_EL1R = 0x20, OCSD_MEM_SPACE_EL2R = 0x40, OCSD_MEM_SPACE_ROOT = 0x80,
    OCSD_MEM_SPACE_S = 0x19, OCSD_MEM_SPACE_N = 0x6, OCSD_MEM_SPACE_R = 0x60,
    OCSD_MEM_SPACE_ANY = 0xFF,
#else
    /* 1.3.x: no realm or root spaces; "any" is the five spaces it has. */
    OCSD_MEM_SPACE_EL1S = 0x1, OCSD_MEM_SPACE_EL1N = 0x2, OCSD_MEM_SPACE_EL2 = 0x4,
    OCSD_MEM_SPACE_EL3 = 0x8, OCSD_MEM_SPACE_EL2S = 0x10, OCSD_MEM_SPACE_S = 0x19,
    OCSD_MEM_SPACE_N = 0x6, OCSD_MEM_SPACE_ANY = 0x1F,
#endif
} ocsd_mem_space_acc_t;

typedef uint32_t (*Fn_MemAcc_CB)(const void *p_context, const ocsd_vaddr_t address,
                                 const ocsd_mem_space_acc_t mem_space, const uint32_t reqBytes,
                                 uint8_t *byteBuffer);
typedef uint32_t (*Fn_MemAccID_CB)(const void *p_context, const ocsd_vaddr_t address,
                                   const ocsd_mem_space_acc_t mem_space, const uint8_t trcID,
                                   const uint32_t reqBytes, uint8_t *byteBuffer);

typedef struct _ocsd_file_mem_region {
    size_t file_offset;
    ocsd_vaddr_t start_address;
    size_t region_size;
} ocsd_file_mem_region_t;

/* Operational flags (create_flags of ocsd_dt_create_decoder). */
#define OCSD_OPFLG_PKTPROC_NOFWD_BAD_PKTS 0x00000010
#define OCSD_OPFLG_PKTPROC_NOMON_BAD_PKTS 0x00000020
#define OCSD_OPFLG_PKTPROC_ERR_BAD_PKTS 0x00000040
#define OCSD_OPFLG_PKTPROC_UNSYNC_ON_BAD_PKTS 0x00000080
#define OCSD_OPFLG_PKTPROC_COMMON                                                    \
    (OCSD_OPFLG_PKTPROC_NOFWD_BAD_PKTS | OCSD_OPFLG_PKTPROC_NOMON_BAD_PKTS |         \
     OCSD_OPFLG_PKTPROC_ERR_BAD_PKTS | OCSD_OPFLG_PKTPROC_UNSYNC_ON_BAD_PKTS)
#define OCSD_OPFLG_COMP_MODE_MASK 0xFFFF0000
#define OCSD_OPFLG_PKTDEC_ERROR_BAD_PKTS 0x00000100
#define OCSD_OPFLG_PKTDEC_HALT_BAD_PKTS 0x00000200
#ifdef OCSD_C_API_ABI_1_8
#define OCSD_OPFLG_N_UNCOND_DIR_BR_CHK 0x00000400
#define OCSD_OPFLG_STRICT_N_UNCOND_BR_CHK 0x00000800
#define OCSD_OPFLG_CHK_RANGE_CONTINUE 0x00001000
#define OCSD_OPFLG_N_UNCOND_CHK_NO_THUMB 0x00002000
#define OCSD_OPFLG_PKTDEC_COMMON                                                     \
    (OCSD_OPFLG_PKTDEC_ERROR_BAD_PKTS | OCSD_OPFLG_PKTDEC_HALT_BAD_PKTS |            \
     OCSD_OPFLG_N_UNCOND_DIR_BR_CHK | OCSD_OPFLG_STRICT_N_UNCOND_BR_CHK |            \
     OCSD_OPFLG_CHK_RANGE_CONTINUE | OCSD_OPFLG_N_UNCOND_CHK_NO_THUMB)
#else
#define OCSD_OPFLG_PKTDEC_COMMON (OCSD_OPFLG_PKTDEC_ERROR_BAD_PKTS | OCSD_OPFLG_PKTDEC_HALT_BAD_PKTS)
#endif

#define OCSD_CREATE_FLG_PACKET_PROC 0x01
#define OCSD_CREATE_FLG_FULL_DECODER 0x02
#define OCSD_CREATE_FLG_INST_ID 0x04

/* Decoder names for ocsd_dt_create_decoder. */
#define OCSD_BUILTIN_DCD_STM "STM"
#define OCSD_BUILTIN_DCD_ETMV3 "ETMV3"
#define OCSD_BUILTIN_DCD_ETMV4I "ETMV4I"
#define OCSD_BUILTIN_DCD_ETMV4D "ETMV4D"
#define OCSD_BUILTIN_DCD_PTM "PTM"
#define OCSD_BUILTIN_DCD_ETE "ETE"
#ifdef OCSD_C_API_ABI_1_8
#define OCSD_BUILTIN_DCD_ITM "ITM"
#endif

typedef enum _ocsd_trace_protocol_t {
    OCSD_PROTOCOL_UNKNOWN = 0, OCSD_PROTOCOL_ETMV3, OCSD_PROTOCOL_ETMV4I, OCSD_PROTOCOL_ETMV4D,
    OCSD_PROTOCOL_PTM, OCSD_PROTOCOL_STM, OCSD_PROTOCOL_ETE,
#ifdef OCSD_C_API_ABI_1_8
    OCSD_PROTOCOL_ITM,
#endif
    OCSD_PROTOCOL_BUILTIN_END,
    OCSD_PROTOCOL_CUSTOM_0 = 100, OCSD_PROTOCOL_CUSTOM_1, OCSD_PROTOCOL_CUSTOM_2,
    OCSD_PROTOCOL_CUSTOM_3, OCSD_PROTOCOL_CUSTOM_4, OCSD_PROTOCOL_CUSTOM_5,
    OCSD_PROTOCOL_CUSTOM_6, OCSD_PROTOCOL_CUSTOM_7, OCSD_PROTOCOL_CUSTOM_8,
    OCSD_PROTOCOL_CUSTOM_9,
    OCSD_PROTOCOL_END
} ocsd_trace_protocol_t;
#define OCSD_PROTOCOL_IS_BUILTIN(P) (((P) > OCSD_PROTOCOL_UNKNOWN) && ((P) < OCSD_PROTOCOL_BUILTIN_END))
#define OCSD_PROTOCOL_IS_CUSTOM(P) (((P) >= OCSD_PROTOCOL_CUSTOM_0) && ((P) < OCSD_PROTOCOL_END))

/* Software trace (STM, ITM) element details. */
typedef struct _ocsd_swt_info {
    uint16_t swt_master_id;
    uint16_t swt_channel_id;
    union {
        struct {
            uint32_t swt_payload_pkt_bitsize : 8;
            uint32_t swt_payload_num_packets : 8;
            uint32_t swt_marker_packet : 1;
            uint32_t swt_has_timestamp : 1;
            uint32_t swt_marker_first : 1;
            uint32_t swt_master_err : 1;
            uint32_t swt_global_err : 1;
            uint32_t swt_trigger_event : 1;
            uint32_t swt_frequency : 1;
            uint32_t swt_id_valid : 1;
        };
        uint32_t swt_flag_bits;
    };
} ocsd_swt_info_t;
#define SWT_ID_VALID_MASK (0x1 << 23)

typedef struct _ocsd_demux_stats {
    uint64_t valid_id_bytes;
    uint64_t no_id_bytes;
    uint64_t reserved_id_bytes;
    uint64_t unknown_id_bytes;
    uint64_t frame_bytes;
} ocsd_demux_stats_t;

typedef struct _ocsd_decode_stats {
    uint32_t version;
    uint16_t revision;
    uint64_t channel_total;
    uint64_t channel_unsynced;
    uint32_t bad_header_errs;
    uint32_t bad_sequence_errs;
    ocsd_demux_stats_t demux;
} ocsd_decode_stats_t;
#define OCSD_STATS_REVISION 0x1

/* ---- Generic trace elements ------------------------------------------ */

typedef enum _ocsd_gen_trc_elem_t {
    OCSD_GEN_TRC_ELEM_UNKNOWN = 0, OCSD_GEN_TRC_ELEM_NO_SYNC, OCSD_GEN_TRC_ELEM_TRACE_ON,
    OCSD_GEN_TRC_ELEM_EO_TRACE, OCSD_GEN_TRC_ELEM_PE_CONTEXT, OCSD_GEN_TRC_ELEM_INSTR_RANGE,
    OCSD_GEN_TRC_ELEM_I_RANGE_NOPATH, OCSD_GEN_TRC_ELEM_ADDR_NACC, OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN,
    OCSD_GEN_TRC_ELEM_EXCEPTION, OCSD_GEN_TRC_ELEM_EXCEPTION_RET, OCSD_GEN_TRC_ELEM_TIMESTAMP,
    OCSD_GEN_TRC_ELEM_CYCLE_COUNT, OCSD_GEN_TRC_ELEM_EVENT, OCSD_GEN_TRC_ELEM_SWTRACE,
    OCSD_GEN_TRC_ELEM_SYNC_MARKER, OCSD_GEN_TRC_ELEM_MEMTRANS,
#ifdef OCSD_C_API_ABI_1_8
    OCSD_GEN_TRC_ELEM_INSTRUMENTATION, OCSD_GEN_TRC_ELEM_ITMTRACE,
#endif
    OCSD_GEN_TRC_ELEM_CUSTOM,
} ocsd_gen_trc_elem_t;

typedef enum _trace_on_reason_t {
    TRACE_ON_NORMAL = 0, TRACE_ON_OVERFLOW, TRACE_ON_EX_DEBUG,
} trace_on_reason_t;

typedef struct _trace_event_t {
    uint16_t ev_type;
    uint16_t ev_number;
} trace_event_t;

typedef enum _unsync_info_t {
    UNSYNC_UNKNOWN, UNSYNC_INIT_DECODER, UNSYNC_RESET_DECODER, UNSYNC_OVERFLOW,
    UNSYNC_DISCARD, UNSYNC_BAD_PACKET,
#ifdef OCSD_C_API_ABI_1_8
    UNSYNC_BAD_IMAGE,
#endif
    UNSYNC_EOT,
} unsync_info_t;

typedef enum _trace_sync_marker_t {
    ELEM_MARKER_TS,
} trace_sync_marker_t;

typedef struct _trace_marker_payload_t {
    trace_sync_marker_t type;
    uint32_t value;
} trace_marker_payload_t;

typedef enum _memtrans_t {
    OCSD_MEM_TRANS_TRACE_INIT, OCSD_MEM_TRANS_START, OCSD_MEM_TRANS_COMMIT, OCSD_MEM_TRANS_FAIL,
} trace_memtrans_t;

#ifdef OCSD_C_API_ABI_1_8
typedef struct _sw_ite_t {
    uint8_t el;
    uint64_t value;
} trace_sw_ite_t;

typedef enum _swt_itm_type {
    SWIT_PAYLOAD, DWT_PAYLOAD, TS_SYNC, TS_DELAY, TS_PKT_DELAY, TS_PKT_TS_DELAY, TS_GLOBAL,
} swt_itm_type;

typedef struct _swt_itm_info {
    swt_itm_type pkt_type;
    uint8_t payload_src_id;
    uint8_t payload_size;
    uint32_t value;
    uint8_t overflow;
} swt_itm_info;
#endif

typedef struct _ocsd_generic_trace_elem {
    ocsd_gen_trc_elem_t elem_type;
    ocsd_isa isa;
    ocsd_vaddr_t st_addr;
    ocsd_vaddr_t en_addr;
    ocsd_pe_context context;
    uint64_t timestamp;
    uint32_t cycle_count;
    ocsd_instr_type last_i_type;
    ocsd_instr_subtype last_i_subtype;
    union {
        struct {
            uint32_t last_instr_exec : 1;
            uint32_t last_instr_sz : 3;
            uint32_t has_cc : 1;
            uint32_t cpu_freq_change : 1;
            uint32_t excep_ret_addr : 1;
            uint32_t excep_data_marker : 1;
            uint32_t extended_data : 1;
            uint32_t has_ts : 1;
            uint32_t last_instr_cond : 1;
            uint32_t excep_ret_addr_br_tgt : 1;
            uint32_t excep_M_tail_chain : 1;
        };
        uint32_t flag_bits;
    };
    /* What the element kind carries. */
    union {
        uint32_t exception_number;
        trace_event_t trace_event;
        trace_on_reason_t trace_on_reason;
        ocsd_swt_info_t sw_trace_info;
        uint32_t num_instr_range;
        unsync_info_t unsync_eot_info;
        trace_marker_payload_t sync_marker;
        trace_memtrans_t mem_trans;
#ifdef OCSD_C_API_ABI_1_8
        trace_sw_ite_t sw_ite;
        swt_itm_info swt_itm;
#endif
    };
    const void *ptr_extended_data;
} ocsd_generic_trace_elem;

typedef enum _event_t {
    EVENT_UNKNOWN = 0, EVENT_TRIGGER, EVENT_NUMBERED
} event_t;

/* ---- Packets: common parts ------------------------------------------- */

typedef enum _ocsd_pkt_va_size { VA_32BIT, VA_64BIT } ocsd_pkt_va_size;

typedef struct _ocsd_pkt_vaddr {
    ocsd_pkt_va_size size;
    ocsd_vaddr_t val;
    uint8_t pkt_bits;
    uint8_t valid_bits;
} ocsd_pkt_vaddr;

typedef struct _ocsd_pkt_byte_sz_val {
    uint32_t val;
    uint8_t size_bytes;
    uint8_t valid_bytes;
} ocsd_pkt_byte_sz_val;

typedef enum _ocsd_pkt_atm_type { ATOM_PATTERN, ATOM_REPEAT } ocsd_pkt_atm_type;
typedef enum _ocsd_atm_val { ATOM_N, ATOM_E } ocsd_atm_val;

typedef struct _ocsd_pkt_atom {
    uint32_t En_bits;
    uint8_t num;
} ocsd_pkt_atom;

typedef enum _ocsd_iSync_reason {
    iSync_Periodic = 0, iSync_TraceEnable, iSync_TraceRestartAfterOverflow, iSync_DebugExit
} ocsd_iSync_reason;

typedef enum _ocsd_armv7_exception {
    Excp_Reserved, Excp_NoException, Excp_Reset, Excp_IRQ, Excp_FIQ, Excp_AsyncDAbort,
    Excp_DebugHalt, Excp_Jazelle, Excp_SVC, Excp_SMC, Excp_Hyp, Excp_Undef, Excp_PrefAbort,
    Excp_Generic, Excp_SyncDataAbort, Excp_CMUsageFault, Excp_CMNMI, Excp_CMDebugMonitor,
    Excp_CMMemManage, Excp_CMPendSV, Excp_CMSysTick, Excp_CMBusFault, Excp_CMHardFault,
    Excp_CMIRQn, Excp_ThumbEECheckFail,
} ocsd_armv7_exception;

/* ---- ETMv4 and ETE ---------------------------------------------------- */

typedef enum _ocsd_etmv4_i_pkt_type {
    /* Not packets: decoder states and errors. */
    ETM4_PKT_I_NOTSYNC = 0x200, ETM4_PKT_I_INCOMPLETE_EOT, ETM4_PKT_I_NO_ERR_TYPE,
    ETM4_PKT_I_BAD_SEQUENCE = 0x300, ETM4_PKT_I_BAD_TRACEMODE, ETM4_PKT_I_RESERVED,
    ETM4_PKT_I_RESERVED_CFG,
    /* Packets, by header byte. */
    ETM4_PKT_I_EXTENSION = 0x00, ETM4_PKT_I_TRACE_INFO = 0x01, ETM4_PKT_I_TIMESTAMP = 0x02,
    ETM4_PKT_I_TRACE_ON = 0x04, ETM4_PKT_I_FUNC_RET = 0x05, ETM4_PKT_I_EXCEPT = 0x06,
#ifdef OCSD_C_API_ABI_1_8
    ETM4_PKT_I_EXCEPT_RTN = 0x07, ETE_PKT_I_ITE = 0x09, ETE_PKT_I_TRANS_ST = 0x0A,
#else
    ETM4_PKT_I_EXCEPT_RTN = 0x07, ETE_PKT_I_COMMIT_WIN_MV = 0x09, ETE_PKT_I_TRANS_ST = 0x0A,
#endif
    ETE_PKT_I_TRANS_COMMIT = 0x0B, ETM4_PKT_I_CCNT_F2 = 0x0C, ETM4_PKT_I_CCNT_F1 = 0x0E,
    ETM4_PKT_I_CCNT_F3 = 0x10, ETM4_PKT_I_NUM_DS_MKR = 0x20, ETM4_PKT_I_UNNUM_DS_MKR = 0x28,
    ETM4_PKT_I_COMMIT = 0x2D, ETM4_PKT_I_CANCEL_F1 = 0x2E, ETM4_PKT_I_CANCEL_F1_MISPRED = 0x2F,
    ETM4_PKT_I_MISPREDICT = 0x30, ETM4_PKT_I_CANCEL_F2 = 0x34, ETM4_PKT_I_CANCEL_F3 = 0x38,
    ETM4_PKT_I_COND_I_F2 = 0x40, ETM4_PKT_I_COND_FLUSH = 0x43, ETM4_PKT_I_COND_RES_F4 = 0x44,
    ETM4_PKT_I_COND_RES_F2 = 0x48, ETM4_PKT_I_COND_RES_F3 = 0x50, ETM4_PKT_I_COND_RES_F1 = 0x68,
    ETM4_PKT_I_COND_I_F1 = 0x6C, ETM4_PKT_I_COND_I_F3 = 0x6D, ETM4_PKT_I_IGNORE = 0x70,
    ETM4_PKT_I_EVENT = 0x71, ETM4_PKT_I_CTXT = 0x80, ETM4_PKT_I_ADDR_CTXT_L_32IS0 = 0x82,
    ETM4_PKT_I_ADDR_CTXT_L_32IS1, ETM4_PKT_I_ADDR_CTXT_L_64IS0 = 0x85,
    ETM4_PKT_I_ADDR_CTXT_L_64IS1, ETE_PKT_I_TS_MARKER = 0x88, ETM4_PKT_I_ADDR_MATCH = 0x90,
    ETM4_PKT_I_ADDR_S_IS0 = 0x95, ETM4_PKT_I_ADDR_S_IS1, ETM4_PKT_I_ADDR_L_32IS0 = 0x9A,
    ETM4_PKT_I_ADDR_L_32IS1, ETM4_PKT_I_ADDR_L_64IS0 = 0x9D, ETM4_PKT_I_ADDR_L_64IS1,
    ETM4_PKT_I_Q = 0xA0, ETE_PKT_I_SRC_ADDR_MATCH = 0xB0, ETE_PKT_I_SRC_ADDR_S_IS0 = 0xB4,
    ETE_PKT_I_SRC_ADDR_S_IS1 = 0xB5, ETE_PKT_I_SRC_ADDR_L_32IS0 = 0xB6,
    ETE_PKT_I_SRC_ADDR_L_32IS1 = 0xB7, ETE_PKT_I_SRC_ADDR_L_64IS0 = 0xB8,
    ETE_PKT_I_SRC_ADDR_L_64IS1 = 0xB9, ETM4_PKT_I_ATOM_F6 = 0xC0, ETM4_PKT_I_ATOM_F5 = 0xD5,
    ETM4_PKT_I_ATOM_F2 = 0xD8, ETM4_PKT_I_ATOM_F4 = 0xDC, ETM4_PKT_I_ATOM_F1 = 0xF6,
    ETM4_PKT_I_ATOM_F3 = 0xF8,
    /* Extension packets. */
    ETM4_PKT_I_ASYNC = 0x100, ETM4_PKT_I_DISCARD = 0x103, ETM4_PKT_I_OVERFLOW = 0x105,
    ETE_PKT_I_PE_RESET = 0x400, ETE_PKT_I_TRANS_FAIL = 0x401,
} ocsd_etmv4_i_pkt_type;

typedef union _etmv4_trace_info_t {
    uint32_t val;
    struct {
        uint32_t cc_enabled : 1;
        uint32_t cond_enabled : 3;
        uint32_t p0_load : 1;
        uint32_t p0_store : 1;
        uint32_t in_trans_state : 1;
#ifdef OCSD_C_API_ABI_1_8
        uint32_t pad : 9;
        uint32_t initial_t_info : 1;
        uint32_t spec_field_present : 1;
#endif
    } bits;
} etmv4_trace_info_t;

typedef struct _etmv4_context_t {
    struct {
        uint32_t EL : 2;
        uint32_t SF : 1;
        uint32_t NS : 1;
        uint32_t updated : 1;
        uint32_t updated_c : 1;
        uint32_t updated_v : 1;
        uint32_t NSE : 1;
    };
    uint32_t ctxtID;
    uint32_t VMID;
} etmv4_context_t;

typedef struct _etmv4_addr_val_t {
    ocsd_vaddr_t val;
    uint8_t isa;
} etmv4_addr_val_t;

typedef struct _ocsd_etmv4_i_pkt {
    ocsd_etmv4_i_pkt_type type;
    ocsd_pkt_vaddr v_addr;
    uint8_t v_addr_ISA;
    etmv4_context_t context;
    struct {
        uint64_t timestamp;
        uint8_t bits_changed;
    } ts;
    uint32_t cc_threshold;
    ocsd_pkt_atom atom;
    uint32_t cycle_count;
    uint32_t curr_spec_depth;
    uint32_t p0_key;
    uint32_t commit_elements;
    uint32_t cancel_elements;
    etmv4_trace_info_t trace_info;
    struct {
        uint32_t exceptionType : 10;
        uint32_t addr_interp : 2;
        uint32_t m_fault_pending : 1;
        uint32_t m_type : 1;
    } exception_info;
    uint8_t addr_exact_match_idx;
    uint8_t dsm_val;
    uint8_t event_val;
    struct {
        uint32_t cond_c_key;
        uint8_t num_c_elem;
        struct {
            uint32_t cond_key_set : 1;
            uint32_t f3_final_elem : 1;
            uint32_t f2_cond_incr : 1;
        };
    } cond_instr;
    struct {
        uint32_t cond_r_key_0;
        uint32_t cond_r_key_1;
        struct {
            uint32_t res_0 : 4;
            uint32_t res_1 : 4;
            uint32_t ci_0 : 1;
            uint32_t ci_1 : 1;
            uint32_t key_res_0_set : 1;
            uint32_t key_res_1_set : 1;
            uint32_t f2_key_incr : 2;
            uint32_t f2f4_token : 2;
            uint32_t f3_tokens : 12;
        };
    } cond_result;
    struct {
        uint32_t q_count;
        struct {
            uint32_t addr_present : 1;
            uint32_t addr_match : 1;
            uint32_t count_present : 1;
            uint32_t q_type : 4;
        };
    } Q_pkt;
#ifdef OCSD_C_API_ABI_1_8
    struct {
        uint8_t el;
        uint64_t value;
    } ite_pkt;
#endif
    union {
        uint32_t val;
        struct {
            uint32_t context_valid : 1;
            uint32_t ts_valid : 1;
            uint32_t spec_depth_valid : 1;
            uint32_t p0_key_valid : 1;
            uint32_t cond_c_key_valid : 1;
            uint32_t cond_r_key_valid : 1;
            uint32_t trace_info_valid : 1;
            uint32_t cc_thresh_valid : 1;
            uint32_t cc_valid : 1;
            uint32_t commit_elem_valid : 1;
#ifdef OCSD_C_API_ABI_1_8
            uint32_t cancel_elem_valid : 1;
#endif
        } bits;
    } pkt_valid;
    ocsd_etmv4_i_pkt_type err_type;
    uint8_t err_hdr_val;
    uint8_t protocol_version;
} ocsd_etmv4_i_pkt;

typedef enum _ocsd_etmv4_d_pkt_type {
    ETM4_PKT_D_NOTSYNC = 0x200, ETM4_PKT_D_BAD_SEQUENCE, ETM4_PKT_D_BAD_TRACEMODE,
    ETM4_PKT_D_RESERVED, ETM4_PKT_D_INCOMPLETE_EOT, ETM4_PKT_D_NO_HEADER, ETM4_PKT_D_NO_ERR_TYPE,
    ETM4_PKT_DNUM_DS_MKR = 0x111, ETM4_PKT_D_EXTENSION = 0x00, ETM4_PKT_DUNNUM_DS_MKR = 0x01,
    ETM4_PKT_DEVENT = 0x04, ETM4_PKT_DTIMESTAMP = 0x02, ETM4_PKT_DADDR_P1_F1 = 0x70,
    ETM4_PKT_DADDR_P1_F2 = 0x80, ETM4_PKT_DADDR_P1_F3 = 0x14, ETM4_PKT_DADDR_P1_F4 = 0x60,
    ETM4_PKT_DADDR_P1_F5 = 0xF8, ETM4_PKT_DADDR_P1_F6 = 0xF6, ETM4_PKT_DADDR_P1_F7 = 0xF5,
    ETM4_PKT_DVAL_P2_F1 = 0x20, ETM4_PKT_DVAL_P2_F2 = 0x30, ETM4_PKT_DVAL_P2_F3 = 0x40,
    ETM4_PKT_DVAL_P2_F4 = 0x10, ETM4_PKT_DVAL_P2_F5 = 0x18, ETM4_PKT_DVAL_P2_F6 = 0x38,
    ETM4_PKT_DSUPPRESSION = 0x03, ETM4_PKT_DTRACE_INFO = 0x101, ETM4_PKT_D_ASYNC = 0x100,
    ETM4_PKT_D_DISCARD = 0x103, ETM4_PKT_D_OVERFLOW = 0x105
} ocsd_etmv4_d_pkt_type;

typedef struct _ocsd_etmv4_d_pkt {
    ocsd_etmv4_d_pkt_type type;
    ocsd_pkt_vaddr d_addr;
    uint64_t pkt_val;
    ocsd_etmv4_d_pkt_type err_type;
} ocsd_etmv4_d_pkt;

typedef struct _ocsd_etmv4_cfg {
    uint32_t reg_idr0;
    uint32_t reg_idr1;
    uint32_t reg_idr2;
    uint32_t reg_idr8;
    uint32_t reg_idr9;
    uint32_t reg_idr10;
    uint32_t reg_idr11;
    uint32_t reg_idr12;
    uint32_t reg_idr13;
    uint32_t reg_configr;
    uint32_t reg_traceidr;
    ocsd_arch_version_t arch_ver;
    ocsd_core_profile_t core_prof;
} ocsd_etmv4_cfg;

#define ETE_ARCH_VERSION 0x5
#define ETE_OPFLG_PKTDEC_SRCADDR_N_ATOMS 0x00010000
#ifdef OCSD_C_API_ABI_1_8
#define ETM4_OPFLG_PKTDEC_AA64_OPCODE_CHK 0x00020000
#define ETE_ETM4_OPFLG_MASK (ETE_OPFLG_PKTDEC_SRCADDR_N_ATOMS | ETM4_OPFLG_PKTDEC_AA64_OPCODE_CHK)
#endif

typedef struct _ocsd_ete_cfg {
    uint32_t reg_idr0;
    uint32_t reg_idr1;
    uint32_t reg_idr2;
    uint32_t reg_idr8;
    uint32_t reg_devarch;
    uint32_t reg_configr;
    uint32_t reg_traceidr;
    ocsd_arch_version_t arch_ver;
    ocsd_core_profile_t core_prof;
} ocsd_ete_cfg;

/* ---- ETMv3 ------------------------------------------------------------ */

typedef enum _ocsd_etmv3_pkt_type {
    ETM3_PKT_NOERROR, ETM3_PKT_NOTSYNC, ETM3_PKT_INCOMPLETE_EOT, ETM3_PKT_BRANCH_ADDRESS,
    ETM3_PKT_A_SYNC, ETM3_PKT_CYCLE_COUNT, ETM3_PKT_I_SYNC, ETM3_PKT_I_SYNC_CYCLE,
    ETM3_PKT_TRIGGER, ETM3_PKT_P_HDR, ETM3_PKT_STORE_FAIL, ETM3_PKT_OOO_DATA,
    ETM3_PKT_OOO_ADDR_PLC, ETM3_PKT_NORM_DATA, ETM3_PKT_DATA_SUPPRESSED, ETM3_PKT_VAL_NOT_TRACED,
    ETM3_PKT_IGNORE, ETM3_PKT_CONTEXT_ID, ETM3_PKT_VMID, ETM3_PKT_EXCEPTION_ENTRY,
    ETM3_PKT_EXCEPTION_EXIT, ETM3_PKT_TIMESTAMP, ETM3_PKT_BRANCH_OR_BYPASS_EOT,
    ETM3_PKT_BAD_SEQUENCE, ETM3_PKT_BAD_TRACEMODE, ETM3_PKT_RESERVED
} ocsd_etmv3_pkt_type;

typedef struct _ocsd_etmv3_excep {
    ocsd_armv7_exception type;
    uint16_t number;
    struct {
        uint32_t present : 1;
        uint32_t cancel : 1;
        uint32_t cm_type : 1;
        uint32_t cm_resume : 4;
        uint32_t cm_irq_n : 9;
    } bits;
} ocsd_etmv3_excep;

typedef struct _etmv3_context_t {
    struct {
        uint32_t curr_alt_isa : 1;
        uint32_t curr_NS : 1;
        uint32_t curr_Hyp : 1;
        uint32_t updated : 1;
        uint32_t updated_c : 1;
        uint32_t updated_v : 1;
    };
    uint32_t ctxtID;
    uint8_t VMID;
} etmv3_context_t;

typedef struct _etmv3_data_t {
    uint32_t value;
    ocsd_pkt_vaddr addr;
    struct {
        uint32_t ooo_tag : 2;
        uint32_t be : 1;
        uint32_t update_be : 1;
        uint32_t update_addr : 1;
        uint32_t update_dval : 1;
    };
} etmv3_data_t;

typedef struct _etmv3_isync_t {
    ocsd_iSync_reason reason;
    struct {
        uint32_t has_cycle_count : 1;
        uint32_t has_LSipAddress : 1;
        uint32_t no_address : 1;
    };
} etmv3_isync_t;

typedef struct _ocsd_etmv3_pkt {
    ocsd_etmv3_pkt_type type;
    ocsd_isa curr_isa;
    ocsd_isa prev_isa;
    etmv3_context_t context;
    ocsd_pkt_vaddr addr;
    etmv3_isync_t isync_info;
    ocsd_etmv3_excep exception;
    ocsd_pkt_atom atom;
    uint8_t p_hdr_fmt;
    uint32_t cycle_count;
    uint64_t timestamp;
    uint8_t ts_update_bits;
    etmv3_data_t data;
    ocsd_etmv3_pkt_type err_type;
} ocsd_etmv3_pkt;

typedef struct _ocsd_etmv3_cfg {
    uint32_t reg_idr;
    uint32_t reg_ctrl;
    uint32_t reg_ccer;
    uint32_t reg_trc_id;
    ocsd_arch_version_t arch_ver;
    ocsd_core_profile_t core_prof;
} ocsd_etmv3_cfg;
#define DATA_ADDR_EXPECTED_FLAG 0x20

/* ---- PTM -------------------------------------------------------------- */

typedef enum _ocsd_ptm_pkt_type {
    PTM_PKT_NOTSYNC, PTM_PKT_INCOMPLETE_EOT, PTM_PKT_NOERROR, PTM_PKT_BRANCH_ADDRESS,
    PTM_PKT_A_SYNC, PTM_PKT_I_SYNC, PTM_PKT_TRIGGER, PTM_PKT_WPOINT_UPDATE, PTM_PKT_IGNORE,
    PTM_PKT_CONTEXT_ID, PTM_PKT_VMID, PTM_PKT_ATOM, PTM_PKT_TIMESTAMP, PTM_PKT_EXCEPTION_RET,
    PTM_PKT_BRANCH_OR_BYPASS_EOT, PTM_PKT_TPIU_PAD_EOB, PTM_PKT_BAD_SEQUENCE, PTM_PKT_RESERVED,
} ocsd_ptm_pkt_type;

typedef struct _ptm_context_t {
    struct {
        uint32_t curr_alt_isa : 1;
        uint32_t curr_NS : 1;
        uint32_t curr_Hyp : 1;
        uint32_t updated : 1;
        uint32_t updated_c : 1;
        uint32_t updated_v : 1;
    };
    uint32_t ctxtID;
    uint8_t VMID;
} ptm_context_t;

typedef struct _ocsd_ptm_excep {
    ocsd_armv7_exception type;
    uint16_t number;
    struct {
        uint32_t present : 1;
    } bits;
} ocsd_ptm_excep;

typedef struct _ocsd_ptm_pkt {
    ocsd_ptm_pkt_type type;
    ocsd_isa curr_isa;
    ocsd_isa prev_isa;
    ocsd_pkt_vaddr addr;
    ptm_context_t context;
    ocsd_pkt_atom atom;
    ocsd_iSync_reason i_sync_reason;
    uint32_t cycle_count;
    uint8_t cc_valid;
    uint64_t timestamp;
    uint8_t ts_update_bits;
    ocsd_ptm_excep exception;
    ocsd_ptm_pkt_type err_type;
} ocsd_ptm_pkt;

typedef struct _ocsd_ptm_cfg {
    uint32_t reg_idr;
    uint32_t reg_ctrl;
    uint32_t reg_ccer;
    uint32_t reg_trc_id;
    ocsd_arch_version_t arch_ver;
    ocsd_core_profile_t core_prof;
} ocsd_ptm_cfg;

/* ---- STM -------------------------------------------------------------- */

typedef enum _ocsd_stm_pkt_type {
    STM_PKT_NOTSYNC, STM_PKT_INCOMPLETE_EOT, STM_PKT_NO_ERR_TYPE, STM_PKT_ASYNC, STM_PKT_VERSION,
    STM_PKT_FREQ, STM_PKT_NULL, STM_PKT_TRIG, STM_PKT_GERR, STM_PKT_MERR, STM_PKT_M8, STM_PKT_C8,
    STM_PKT_C16, STM_PKT_FLAG, STM_PKT_D4, STM_PKT_D8, STM_PKT_D16, STM_PKT_D32, STM_PKT_D64,
    STM_PKT_BAD_SEQUENCE, STM_PKT_RESERVED,
} ocsd_stm_pkt_type;

typedef enum _ocsd_stm_ts_type { STM_TS_UNKNOWN, STM_TS_NATBINARY, STM_TS_GREY } ocsd_stm_ts_type;

typedef struct _ocsd_stm_pkt {
    ocsd_stm_pkt_type type;
    uint8_t master;
    uint16_t channel;
    uint64_t timestamp;
    uint8_t pkt_ts_bits;
    uint8_t pkt_has_ts;
    ocsd_stm_ts_type ts_type;
    uint8_t pkt_has_marker;
    union {
        uint8_t D8;
        uint16_t D16;
        uint32_t D32;
        uint64_t D64;
    } payload;
    ocsd_stm_pkt_type err_type;
} ocsd_stm_pkt;

typedef enum _hw_event_feat {
    HwEvent_Unknown_Disabled, HwEvent_Enabled, HwEvent_UseRegisters
} hw_event_feat_t;

typedef struct _ocsd_stm_cfg {
    uint32_t reg_tcsr;
    uint32_t reg_feat3r;
    uint32_t reg_devid;
    uint32_t reg_feat1r;
    uint32_t reg_hwev_mast;
    hw_event_feat_t hw_event;
} ocsd_stm_cfg;

/* ---- ITM (1.8.x) ------------------------------------------------------ */

#ifdef OCSD_C_API_ABI_1_8

typedef enum _ocsd_itm_pkt_type {
    ITM_PKT_NOTSYNC, ITM_PKT_INCOMPLETE_EOT, ITM_PKT_NO_ERR_TYPE, ITM_PKT_ASYNC,
    ITM_PKT_OVERFLOW, ITM_PKT_SWIT, ITM_PKT_DWT, ITM_PKT_TS_LOCAL, ITM_PKT_TS_GLOBAL_1,
    ITM_PKT_TS_GLOBAL_2, ITM_PKT_EXTENSION, ITM_PKT_BAD_SEQUENCE, ITM_PKT_RESERVED,
} ocsd_itm_pkt_type;

typedef struct _ocsd_itm_pkt {
    ocsd_itm_pkt_type type;
    uint8_t src_id;
    uint32_t value;
    uint8_t val_sz;
    uint8_t val_ext;
    ocsd_itm_pkt_type err_type;
} ocsd_itm_pkt;

typedef struct _ocsd_itm_cfg {
    uint32_t reg_tcr;
} ocsd_itm_cfg;

typedef enum _ocsd_itm_dwt_ecntr {
    ITM_DWT_ECNTR_CPI = 0x01, ITM_DWT_ECNTR_EXC = 0x02, ITM_DWT_ECNTR_SLP = 0x04,
    ITM_DWT_ECNTR_LSU = 0x08, ITM_DWT_ECNTR_FLD = 0x10, ITM_DWT_ECNTR_CYC = 0x20,
} ocsd_itm_dwt_ecntr;
#endif

/* ---- C API types -------------------------------------------------------- */

typedef void *dcd_tree_handle_t;
#define C_API_INVALID_TREE_HANDLE (dcd_tree_handle_t)0

/* ocsd_def_errlog_config_output flags. */
#define C_API_MSGLOGOUT_FLG_NONE 0x0
#define C_API_MSGLOGOUT_FLG_FILE 0x1
#define C_API_MSGLOGOUT_FLG_STDERR 0x2
#define C_API_MSGLOGOUT_FLG_STDOUT 0x4
#define C_API_MSGLOGOUT_MASK 0x7

/* Generic elements out of a decode tree. */
typedef ocsd_datapath_resp_t (*FnTraceElemIn)(const void *p_context, const ocsd_trc_index_t index_sop,
                                              const uint8_t trc_chan_id,
                                              const ocsd_generic_trace_elem *elem);
/* Packets to a sink (p_packet_in: the protocol's packet struct). */
typedef ocsd_datapath_resp_t (*FnDefPktDataIn)(const void *p_context, const ocsd_datapath_op_t op,
                                               const ocsd_trc_index_t index_sop,
                                               const void *p_packet_in);
/* Packets to a monitor, with their bytes. */
typedef void (*FnDefPktDataMon)(const void *p_context, const ocsd_datapath_op_t op,
                                const ocsd_trc_index_t index_sop, const void *p_packet_in,
                                const uint32_t size, const uint8_t *p_data);
/* Printer and logger text. */
typedef void (*FnDefLoggerPrintStrCB)(const void *p_context, const char *psz_msg_str,
                                      const int str_len);

typedef enum _ocsd_c_api_cb_types {
    OCSD_C_API_CB_PKT_SINK,
    OCSD_C_API_CB_PKT_MON,
} ocsd_c_api_cb_types;

/* ---- Custom decoders ---------------------------------------------------- */

typedef ocsd_datapath_resp_t (*fnTraceDataIn)(const void *decoder_handle, const ocsd_datapath_op_t op,
                                              const ocsd_trc_index_t index, const uint32_t dataBlockSize,
                                              const uint8_t *pDataBlock, uint32_t *numBytesProcessed);
typedef void (*fnUpdatePktMonFlags)(const void *decoder_handle, const int flags);

#define OCSD_CUST_DCD_PKT_CB_USE_MON 0x1
#define OCSD_CUST_DCD_PKT_CB_USE_SINK 0x2

/* Filled in by a custom decoder's create function. */
typedef struct _ocsd_extern_dcd_inst {
    fnTraceDataIn fn_data_in;
    fnUpdatePktMonFlags fn_update_pkt_mon;
    void *decoder_handle;
    char *p_decoder_name;
    uint8_t cs_id;
} ocsd_extern_dcd_inst_t;

/* What the library offers a custom decoder. */
typedef ocsd_datapath_resp_t (*fnGenElemOpCB)(const void *lib_context, const ocsd_trc_index_t index_sop,
                                              const uint8_t trc_chan_id,
                                              const ocsd_generic_trace_elem *elem);
typedef void (*fnLogErrorCB)(const void *lib_context, const ocsd_err_severity_t filter_level,
                             const ocsd_err_t code, const ocsd_trc_index_t idx, const uint8_t chan_id,
                             const char *pMsg);
typedef void (*fnLogMsgCB)(const void *lib_context, const ocsd_err_severity_t filter_level,
                           const char *msg);
typedef ocsd_err_t (*fnDecodeArmInstCB)(const void *lib_context, ocsd_instr_info *instr_info);
typedef ocsd_err_t (*fnMemAccessCB)(const void *lib_context, const ocsd_vaddr_t address,
                                    const uint8_t cs_trace_id, const ocsd_mem_space_acc_t mem_space,
                                    uint32_t *num_bytes, uint8_t *p_buffer);
typedef void (*fnPktMonCB)(const void *lib_context, const ocsd_datapath_op_t op,
                           const ocsd_trc_index_t index_sop, const void *pkt, const uint32_t size,
                           const uint8_t *p_data);
typedef ocsd_datapath_resp_t (*fnPktDataSinkCB)(const void *lib_context, const ocsd_datapath_op_t op,
                                                const ocsd_trc_index_t index_sop, const void *pkt);

typedef struct _ocsd_extern_dcd_cb_fns {
    fnGenElemOpCB fn_gen_elem_out;
    fnLogErrorCB fn_log_error;
    fnLogMsgCB fn_log_msg;
    fnDecodeArmInstCB fn_arm_instruction_decode;
    fnMemAccessCB fn_memory_access;
    fnPktMonCB fn_packet_mon;
    fnPktDataSinkCB fn_packet_data_sink;
    int packetCBFlags;
    const void *lib_context;
} ocsd_extern_dcd_cb_fns;

/* A custom decoder factory, registered with ocsd_register_custom_decoder. */
typedef ocsd_err_t (*fnCreateCustomDecoder)(const int create_flags, const void *decoder_cfg,
                                            const ocsd_extern_dcd_cb_fns *p_lib_callbacks,
                                            ocsd_extern_dcd_inst_t *p_decoder_inst);
typedef ocsd_err_t (*fnDestroyCustomDecoder)(const void *decoder_handle);
typedef ocsd_err_t (*fnGetCSIDFromConfig)(const void *decoder_cfg, unsigned char *p_csid);
typedef ocsd_err_t (*fnPacketToString)(const void *trc_pkt, char *buffer, const int buflen);

typedef struct _ocsd_extern_dcd_fact {
    fnCreateCustomDecoder createDecoder;
    fnDestroyCustomDecoder destroyDecoder;
    fnGetCSIDFromConfig csidFromConfig;
    fnPacketToString pktToString;
    ocsd_trace_protocol_t protocol_id;
} ocsd_extern_dcd_fact_t;

/* ---- Functions ------------------------------------------------------------ */

/* Library version. */
OCSD_C_API uint32_t ocsd_get_version(void);
OCSD_C_API const char *ocsd_get_version_str(void);

/* Decode trees. */
OCSD_C_API dcd_tree_handle_t ocsd_create_dcd_tree(const ocsd_dcd_tree_src_t src_type,
                                                  const uint32_t deformatterCfgFlags);
OCSD_C_API void ocsd_destroy_dcd_tree(const dcd_tree_handle_t handle);
OCSD_C_API ocsd_datapath_resp_t ocsd_dt_process_data(const dcd_tree_handle_t handle,
                                                     const ocsd_datapath_op_t op,
                                                     const ocsd_trc_index_t index,
                                                     const uint32_t dataBlockSize,
                                                     const uint8_t *pDataBlock,
                                                     uint32_t *numBytesProcessed);
OCSD_C_API ocsd_err_t ocsd_dt_set_gen_elem_outfn(const dcd_tree_handle_t handle, FnTraceElemIn pFn,
                                                 const void *p_context);

/* Decoders. */
OCSD_C_API ocsd_err_t ocsd_dt_create_decoder(const dcd_tree_handle_t handle, const char *decoder_name,
                                             const int create_flags, const void *decoder_cfg,
                                             unsigned char *pCSID);
OCSD_C_API ocsd_err_t ocsd_dt_remove_decoder(const dcd_tree_handle_t handle, const unsigned char CSID);
OCSD_C_API ocsd_err_t ocsd_dt_attach_packet_callback(const dcd_tree_handle_t handle,
                                                     const unsigned char CSID,
                                                     const ocsd_c_api_cb_types callback_type,
                                                     void *p_fn_callback_data,
                                                     const void *p_context);
OCSD_C_API ocsd_err_t ocsd_dt_get_decode_stats(const dcd_tree_handle_t handle, const unsigned char CSID,
                                               ocsd_decode_stats_t **p_stats_block);
OCSD_C_API ocsd_err_t ocsd_dt_reset_decode_stats(const dcd_tree_handle_t handle,
                                                 const unsigned char CSID);

/* Memory images. */
OCSD_C_API ocsd_err_t ocsd_dt_add_binfile_mem_acc(const dcd_tree_handle_t handle,
                                                  const ocsd_vaddr_t address,
                                                  const ocsd_mem_space_acc_t mem_space,
                                                  const char *filepath);
OCSD_C_API ocsd_err_t ocsd_dt_add_binfile_region_mem_acc(const dcd_tree_handle_t handle,
                                                         const ocsd_file_mem_region_t *region_array,
                                                         const int num_regions,
                                                         const ocsd_mem_space_acc_t mem_space,
                                                         const char *filepath);
OCSD_C_API ocsd_err_t ocsd_dt_add_buffer_mem_acc(const dcd_tree_handle_t handle, const ocsd_vaddr_t address,
                                                 const ocsd_mem_space_acc_t mem_space,
                                                 const uint8_t *p_mem_buffer, const uint32_t mem_length);
OCSD_C_API ocsd_err_t ocsd_dt_add_callback_mem_acc(const dcd_tree_handle_t handle,
                                                   const ocsd_vaddr_t st_address,
                                                   const ocsd_vaddr_t en_address,
                                                   const ocsd_mem_space_acc_t mem_space,
                                                   Fn_MemAcc_CB p_cb_func, const void *p_context);
OCSD_C_API ocsd_err_t ocsd_dt_add_callback_trcid_mem_acc(const dcd_tree_handle_t handle,
                                                         const ocsd_vaddr_t st_address,
                                                         const ocsd_vaddr_t en_address,
                                                         const ocsd_mem_space_acc_t mem_space,
                                                         Fn_MemAccID_CB p_cb_func, const void *p_context);
OCSD_C_API ocsd_err_t ocsd_dt_remove_mem_acc(const dcd_tree_handle_t handle, const ocsd_vaddr_t st_address,
                                             const ocsd_mem_space_acc_t mem_space);
OCSD_C_API void ocsd_tl_log_mapped_mem_ranges(const dcd_tree_handle_t handle);
#ifdef OCSD_C_API_ABI_1_8
OCSD_C_API ocsd_err_t ocsd_dt_set_mem_acc_cacheing(const dcd_tree_handle_t handle, const int enable,
                                                   const uint16_t page_size, const int nr_pages);
#endif

/* The default error logger. */
OCSD_C_API ocsd_err_t ocsd_def_errlog_init(const ocsd_err_severity_t verbosity,
                                           const int create_output_logger);
OCSD_C_API ocsd_err_t ocsd_def_errlog_config_output(const int output_flags, const char *log_file_name);
OCSD_C_API ocsd_err_t ocsd_def_errlog_set_strprint_cb(const dcd_tree_handle_t handle, void *p_context,
                                                      FnDefLoggerPrintStrCB p_str_print_cb);
OCSD_C_API void ocsd_def_errlog_msgout(const char *msg);
OCSD_C_API void ocsd_err_str(const ocsd_err_t err, char *buffer, const int buffer_size);
OCSD_C_API ocsd_err_t ocsd_get_last_err(ocsd_trc_index_t *index, uint8_t *chan_id, char *message,
                                        const int message_len);

/* Printers. */
OCSD_C_API ocsd_err_t ocsd_pkt_str(const ocsd_trace_protocol_t pkt_protocol, const void *p_pkt,
                                   char *buffer, const int buffer_size);
OCSD_C_API ocsd_err_t ocsd_gen_elem_str(const ocsd_generic_trace_elem *p_pkt, char *buffer,
                                        const int buffer_size);
OCSD_C_API void ocsd_gen_elem_init(ocsd_generic_trace_elem *p_pkt, const ocsd_gen_trc_elem_t elem_type);
OCSD_C_API ocsd_err_t ocsd_dt_set_raw_frame_printer(const dcd_tree_handle_t handle, int flags);
OCSD_C_API ocsd_err_t ocsd_dt_set_gen_elem_printer(const dcd_tree_handle_t handle);
OCSD_C_API ocsd_err_t ocsd_dt_set_pkt_protocol_printer(const dcd_tree_handle_t handle, uint8_t cs_id,
                                                       int monitor);

/* Custom decoders. */
OCSD_C_API ocsd_err_t ocsd_register_custom_decoder(const char *name, ocsd_extern_dcd_fact_t *p_dcd_fact);
OCSD_C_API ocsd_err_t ocsd_deregister_decoders(void);
OCSD_C_API ocsd_err_t ocsd_cust_protocol_to_str(const ocsd_trace_protocol_t pkt_protocol,
                                                const void *trc_pkt, char *buffer, const int buflen);

#endif /* COSD_OPENCSD_C_API_H */
