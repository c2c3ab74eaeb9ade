//! The exported functions of `opencsd_c_api.h`. This is the FFI edge:
//! pointers from C are checked and dereferenced here, and nothing below
//! sees them.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile};
use coresight_decode::datapath::DatapathOp;
use coresight_decode::decoder::{CoreConfig, DecodeMode, DecoderOptions, SourceConfig};
use coresight_decode::deformatter::DeformatterConfig;
use coresight_decode::error::{ErrCode, Severity};
use coresight_decode::logger::{ErrorLogger, MsgLogger};
use coresight_decode::memory::{BufferAccessor, CacheConfig, CallbackAccessor, MemSpace, MemoryError};
use coresight_decode::printers::{GenElemPrinter, PacketPrinter, RawFramePrinter};
use coresight_decode::shared::shared;
use coresight_decode::tree::{DecodeTree, SourceFormat};

use crate::abi::*;
use crate::convert::{self, code_from_c, copy_out, resp_to_c};
use crate::tree::{CTree, ElemCallback, PrintCb, TextOut, default_log, is_handle, register_handle, unregister_handle};
use coresight_decode::error::TraceError;
use coresight_decode::logger::ErrLink;

/// Runs `f` on the tree behind `handle`, or returns `bad` for a null,
/// unknown or poisoned handle. A panic inside is caught (and poisons the
/// tree): it never unwinds into C.
fn with_tree<R>(handle: TreeHandle, bad: R, f: impl FnOnce(&mut CTree) -> R) -> R {
    if handle.is_null() || !is_handle(handle as usize) {
        return bad;
    }
    // SAFETY: the handle is one `ocsd_create_dcd_tree` returned and
    // `ocsd_destroy_dcd_tree` has not freed (it is in the live set). The
    // C API is not thread-safe for one tree (as OpenCSD's is not), so no
    // other reference to it exists during the call.
    let t = unsafe { &mut *(handle as *mut CTree) };
    if t.poisoned {
        return bad;
    }
    match catch_unwind(AssertUnwindSafe(|| f(t))) {
        Ok(r) => r,
        Err(_) => {
            t.poisoned = true;
            bad
        }
    }
}

/// Runs `f`, turning a panic into `bad`.
fn guarded<R>(bad: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(bad)
}

fn err_code(e: ErrCode) -> OcsdErr {
    e.code() as OcsdErr
}

fn mem_err(e: MemoryError) -> OcsdErr {
    err_code(e.code())
}

/// A memory space from C. 1.3.x's "any" (0x1f) predates the realm and
/// root spaces, which it also meant.
fn space_from_c(v: c_int) -> MemSpace {
    if !cfg!(feature = "opencsd-1-8") && v & 0x1f == 0x1f {
        return MemSpace::ANY;
    }
    MemSpace::from_bits(v as u8)
}

/// A memory space for C: 1.3.x knows only the low five bits.
fn space_to_c(s: MemSpace) -> c_int {
    if cfg!(feature = "opencsd-1-8") {
        s.bits() as c_int
    } else {
        (s.bits() & 0x1f) as c_int
    }
}

fn severity_from_c(v: c_int) -> Severity {
    match v {
        0 => Severity::None,
        1 => Severity::Error,
        2 => Severity::Warn,
        _ => Severity::Info,
    }
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: NUL terminated (caller).
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

// ---------------------------------------------------------------- library

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_get_version() -> u32 {
    OCSD_VER_NUM
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_get_version_str() -> *const c_char {
    OCSD_VER_STRING.as_ptr()
}

// ---------------------------------------------------------- decode trees

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_create_dcd_tree(src_type: c_int, deformatter_cfg_flags: u32) -> TreeHandle {
    guarded(std::ptr::null_mut(), || {
        let format = match src_type {
            OCSD_TRC_SRC_FRAME_FORMATTED => {
                let f = deformatter_cfg_flags;
                let cfg = DeformatterConfig {
                    mem_aligned: f & OCSD_DFRMTR_FRAME_MEM_ALIGN != 0,
                    fsyncs: f & OCSD_DFRMTR_HAS_FSYNCS != 0,
                    hsyncs: f & OCSD_DFRMTR_HAS_HSYNCS != 0,
                    reset_on_4x_fsync: f & OCSD_DFRMTR_RESET_ON_4X_FSYNC != 0,
                    raw_packed: f & OCSD_DFRMTR_PACKED_RAW_OUT != 0,
                    raw_unpacked: f & OCSD_DFRMTR_UNPACKED_RAW_OUT != 0,
                };
                if f & !OCSD_DFRMTR_VALID_MASK != 0 || cfg.validate().is_err() {
                    return std::ptr::null_mut();
                }
                SourceFormat::Formatted(cfg)
            }
            // OpenCSD makes a tree without a frame deformatter for any
            // type but the formatted one.
            _ => SourceFormat::Single,
        };
        // Every decoder chooses packets-only or full decode when created
        // (OpenCSD's create flags), so the tree is made for full decode:
        // it then has the memory map that full decoders need.
        let mut tree = DecodeTree::new(format, DecodeMode::FullDecode);
        // OpenCSD hands empty frame blocks to decoders, fails on a first
        // block without a frame sync and logs no deformatter error; so
        // must a drop-in.
        tree.set_opencsd_empty_blocks(true);
        tree.set_opencsd_deformatter(true);
        let verbosity = default_log().verbosity;
        let text = TextOut {
            capture: shared(MsgLogger::capture()),
            print: shared(PrintCb::default()),
            readers: Arc::new(AtomicBool::new(false)),
        };
        *tree.error_logger().borrow_mut() = ErrorLogger::new(verbosity, Some(text.capture.clone()));
        let t = Box::new(CTree {
            tree,
            text,
            single_id: shared(0),
            stats: Box::default(),
            poisoned: false,
            mem_mapped: Arc::default(),
            dfmt_err: None,
            decoders: Vec::new(),
        });
        let p = Box::into_raw(t);
        register_handle(p as usize);
        p.cast()
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_destroy_dcd_tree(handle: TreeHandle) {
    guarded((), || {
        if handle.is_null() || !unregister_handle(handle as usize) {
            return;
        }
        // SAFETY: the handle was live (just removed from the live set),
        // so it is the box `ocsd_create_dcd_tree` leaked; freed once.
        let t = unsafe { Box::from_raw(handle as *mut CTree) };
        t.text.flush();
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_dt_process_data(
    handle: TreeHandle,
    op: c_int,
    index: TrcIndex,
    data_block_size: u32,
    p_data_block: *const u8,
    num_bytes_processed: *mut u32,
) -> OcsdResp {
    let op = match op {
        0 => DatapathOp::Data,
        1 => DatapathOp::Eot,
        2 => DatapathOp::Flush,
        3 => DatapathOp::Reset,
        _ => return OCSD_RESP_FATAL_INVALID_OP,
    };
    if op == DatapathOp::Data && (p_data_block.is_null() || data_block_size == 0 || num_bytes_processed.is_null()) {
        return OCSD_RESP_FATAL_INVALID_PARAM;
    }
    let data: &[u8] = if op == DatapathOp::Data {
        // SAFETY: non-null, and the client says it holds this many bytes.
        unsafe { std::slice::from_raw_parts(p_data_block, data_block_size as usize) }
    } else {
        &[]
    };
    let (resp, used) = with_tree(handle, (OCSD_RESP_FATAL_NOT_INIT, 0), |t| {
        if op == DatapathOp::Data
            && let SourceFormat::Formatted(cfg) = t.tree.format()
            && cfg.mem_aligned
            && !data.len().is_multiple_of(16)
        {
            // OpenCSD's deformatter takes memory-aligned frames in whole
            // frames only (the library's would keep the cut frame for the
            // next block).
            let link = t
                .dfmt_err
                .get_or_insert_with(|| ErrLink::new(t.tree.error_logger(), "DFMT_CSFRAMES"));
            link.log(
                &TraceError::new(Severity::Error, ErrCode::InvalidParamVal)
                    .with_message("Input block incorrect size, must be 16 byte multiple"),
            );
            t.text.flush();
            if let Some(e) = t.tree.error_logger().borrow().last_error() {
                default_log().last_error = Some(e.clone());
            }
            return (resp_to_c(coresight_decode::datapath::DatapathResp::FatalInvalidData), 0);
        }
        let (r, used) = coresight_decode::interfaces::TrcDataIn::trace_data_in(&mut t.tree, op, u64::from(index), data);
        t.text.flush();
        if let Some(e) = t.tree.error_logger().borrow().last_error() {
            default_log().last_error = Some(e.clone());
        }
        (resp_to_c(r), used as u32)
    });
    if !num_bytes_processed.is_null() {
        // SAFETY: non-null output pointer from the client.
        unsafe { *num_bytes_processed = used };
    }
    resp
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_set_gen_elem_outfn(
    handle: TreeHandle,
    p_fn: FnTraceElemIn,
    p_context: *const c_void,
) -> OcsdErr {
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        let sink = ElemCallback::new(p_fn, p_context as usize, t.text.clone());
        t.tree.set_gen_elem_out(Box::new(sink));
        OCSD_OK
    })
}

/// The register list a C config struct stands for, with the struct's
/// architecture and profile.
///
/// # Safety
/// `cfg` points at the config struct of protocol `name`.
unsafe fn source_config(name: &str, cfg: *const c_void) -> Option<SourceConfig> {
    fn profile(arch: i32, prof: i32) -> ArchProfile {
        let arch = match arch {
            0x0001 => ArchVersion::Custom,
            0x0700 => ArchVersion::V7,
            0x0800 => ArchVersion::V8,
            0x0803 => ArchVersion::V8r3,
            0x0864 => ArchVersion::Aa64,
            _ => ArchVersion::Unknown,
        };
        let profile = match prof {
            1 => CoreProfile::CortexM,
            2 => CoreProfile::CortexR,
            3 => CoreProfile::CortexA,
            4 => CoreProfile::Custom,
            _ => CoreProfile::Unknown,
        };
        ArchProfile::new(arch, profile)
    }
    let mut regs: Vec<(&str, u32)> = Vec::new();
    let mut arch = None;
    match name {
        "ETMV4I" => {
            // SAFETY: the protocol's config struct (caller).
            let c = unsafe { &*cfg.cast::<OcsdEtmv4Cfg>() };
            regs.extend([
                ("TRCIDR0", c.reg_idr0),
                ("TRCIDR1", c.reg_idr1),
                ("TRCIDR2", c.reg_idr2),
                ("TRCIDR8", c.reg_idr8),
                ("TRCIDR9", c.reg_idr9),
                ("TRCIDR10", c.reg_idr10),
                ("TRCIDR11", c.reg_idr11),
                ("TRCIDR12", c.reg_idr12),
                ("TRCIDR13", c.reg_idr13),
                ("TRCCONFIGR", c.reg_configr),
                ("TRCTRACEIDR", c.reg_traceidr),
            ]);
            arch = Some(profile(c.arch_ver, c.core_prof));
        }
        "ETE" => {
            // SAFETY: as above.
            let c = unsafe { &*cfg.cast::<OcsdEteCfg>() };
            regs.extend([
                ("TRCIDR0", c.reg_idr0),
                ("TRCIDR1", c.reg_idr1),
                ("TRCIDR2", c.reg_idr2),
                ("TRCIDR8", c.reg_idr8),
                ("TRCDEVARCH", c.reg_devarch),
                ("TRCCONFIGR", c.reg_configr),
                ("TRCTRACEIDR", c.reg_traceidr),
            ]);
            arch = Some(profile(c.arch_ver, c.core_prof));
        }
        "ETMV3" | "PTM" => {
            // SAFETY: as above (ETMv3's and PTM's structs are the same).
            let c = unsafe { &*cfg.cast::<OcsdEtmv3Cfg>() };
            regs.extend([
                ("ETMIDR", c.reg_idr),
                ("ETMCR", c.reg_ctrl),
                ("ETMCCER", c.reg_ccer),
                ("ETMTRACEIDR", c.reg_trc_id),
            ]);
            arch = Some(profile(c.arch_ver, c.core_prof));
        }
        "STM" => {
            // SAFETY: as above.
            let c = unsafe { &*cfg.cast::<OcsdStmCfg>() };
            regs.extend([
                ("STMTCSR", c.reg_tcsr),
                ("STMSPFEAT3R", c.reg_feat3r),
                ("STMDEVID", c.reg_devid),
                ("STMSPFEAT1R", c.reg_feat1r),
                ("STMHEMASTR", c.reg_hwev_mast),
            ]);
        }
        "ITM" => {
            // SAFETY: as above.
            let c = unsafe { &*cfg.cast::<OcsdItmCfg>() };
            regs.push(("ITMTCR", c.reg_tcr));
        }
        _ => return None,
    }
    Some(SourceConfig {
        name: String::new(),
        device_type: String::new(),
        regs: regs.into_iter().map(|(n, v)| (n.to_string(), v as u64)).collect(),
        core: arch.map(|profile| CoreConfig {
            name: String::new(),
            core_type: String::new(),
            profile,
        }),
    })
}

/// Decode options from OpenCSD's create flags (and, in 1.8.x, the
/// environment variables 1.8 reads when creating decoders).
fn options_from_flags(flags: c_int) -> DecoderOptions {
    let mut o = DecoderOptions {
        aa64_opcode_check: flags & ETM4_OPFLG_PKTDEC_AA64_OPCODE_CHK != 0,
        halt_on_error: flags & OCSD_OPFLG_PKTDEC_HALT_BAD_PKTS != 0,
        direct_br_cond: flags & OCSD_OPFLG_N_UNCOND_DIR_BR_CHK != 0,
        strict_br_cond: flags & OCSD_OPFLG_STRICT_N_UNCOND_BR_CHK != 0,
        range_cont: flags & OCSD_OPFLG_CHK_RANGE_CONTINUE != 0,
        // C clients (perf) rely on where OpenCSD stops when they wait.
        opencsd_flow: true,
        ..DecoderOptions::default()
    };
    if cfg!(feature = "opencsd-1-8") {
        if let Ok(v) = std::env::var("OPENCSD_INSTR_RANGE_LIMIT")
            && let Ok(n) = v.trim().parse::<u32>()
        {
            o.instr_range_limit = n;
        }
        if std::env::var_os("OPENCSD_ERR_ON_AA64_BAD_OPCODE").is_some() {
            o.aa64_opcode_check = true;
        }
    }
    o
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_dt_create_decoder(
    handle: TreeHandle,
    decoder_name: *const c_char,
    create_flags: c_int,
    decoder_cfg: *const c_void,
    p_csid: *mut u8,
) -> OcsdErr {
    // SAFETY: a NUL-terminated name from the client.
    let Some(name) = (unsafe { c_str(decoder_name) }) else {
        return OCSD_ERR_INVALID_PARAM_VAL;
    };
    // OpenCSD writes the ID through `p_csid` unchecked (a null one
    // crashes it): refused here before anything is made.
    if decoder_cfg.is_null() || p_csid.is_null() {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    // Neither a packet processor nor a full decoder: OpenCSD's managers
    // make nothing.
    if create_flags & (OCSD_CREATE_FLG_PACKET_PROC | OCSD_CREATE_FLG_FULL_DECODER) == 0 {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    let cfg = if crate::custom::is_custom(name) {
        crate::custom::source_config(decoder_cfg)
    } else {
        // SAFETY: the client passes the config struct of the named protocol.
        match unsafe { source_config(name, decoder_cfg) } {
            Some(c) => c,
            None => return OCSD_ERR_DCDREG_NAME_UNKNOWN,
        }
    };
    let r = with_tree(handle, Err(OCSD_ERR_BAD_HANDLE), |t| {
        let registry = crate::custom::registry();
        let factory = registry.find(name).ok_or(OCSD_ERR_DCDREG_NAME_UNKNOWN)?;
        let config_id = factory.trace_id(&cfg);
        let slot = match t.tree.format() {
            SourceFormat::Formatted(_) => config_id,
            SourceFormat::Single => 0,
        };
        if t.decoders.iter().any(|d| d.csid == config_id) {
            return Err(OCSD_ERR_ATTACH_TOO_MANY);
        }
        t.tree.set_decoder_options(options_from_flags(create_flags));
        let mut ctx = t.tree.decode_context();
        ctx.instance_id = match t.tree.format() {
            SourceFormat::Formatted(_) => Some(slot),
            SourceFormat::Single => None,
        };
        ctx.mode = if create_flags & OCSD_CREATE_FLG_FULL_DECODER != 0 {
            DecodeMode::FullDecode
        } else {
            DecodeMode::PacketsOnly
        };
        let (component, attach) = match crate::pktcb::build_builtin(factory.protocol_name(), &cfg, &ctx, &t.mem_mapped)
        {
            Some(Ok((c, a))) => (c, Some(a)),
            Some(Err(e)) => return Err(err_code(e.code)),
            None => {
                let c = factory.create(&cfg, &ctx).map_err(|e| err_code(e.code))?;
                let handle = crate::custom::take_last_created().map(|h| Box::new(h) as Box<dyn crate::tree::PktAttach>);
                (c, handle)
            }
        };
        t.tree
            .add_decoder(slot, factory.protocol_name(), component)
            .map_err(err_code)?;
        t.decoders.push(crate::tree::DecoderEntry {
            csid: config_id,
            attach,
            stats_base: OcsdDecodeStats::default(),
        });
        *t.single_id.borrow_mut() = config_id;
        Ok(config_id)
    });
    match r {
        Ok(id) => {
            // SAFETY: non-null output pointer from the client.
            unsafe { *p_csid = id };
            OCSD_OK
        }
        Err(e) => e,
    }
}

/// The tree slot of the decoder for `csid`.
fn slot_of(t: &CTree, csid: u8) -> u8 {
    match t.tree.format() {
        SourceFormat::Formatted(_) => csid,
        SourceFormat::Single => 0,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_remove_decoder(handle: TreeHandle, csid: u8) -> OcsdErr {
    // As OpenCSD: an ID with no decoder is no error; on a single-source
    // tree any ID names its one decoder; on a formatted one an ID that is
    // no trace source's (0, 0x70 and above) is refused.
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        if matches!(t.tree.format(), SourceFormat::Formatted(_)) && !(1..0x70).contains(&csid) {
            return OCSD_ERR_INVALID_ID;
        }
        remove_decoder(t, csid)
    })
}

/// Takes the decoder for `csid` out of the tree and out of the C API's list.
fn remove_decoder(t: &mut CTree, csid: u8) -> OcsdErr {
    match t.tree.remove_decoder(csid) {
        Ok(_) => {
            let single = matches!(t.tree.format(), SourceFormat::Single);
            t.decoders.retain(|d| !(single || d.csid == csid));
            OCSD_OK
        }
        Err(e) => err_code(e),
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_attach_packet_callback(
    handle: TreeHandle,
    csid: u8,
    callback_type: c_int,
    p_fn_callback_data: *mut c_void,
    p_context: *const c_void,
) -> OcsdErr {
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        // A single-source tree's decoder answers to its trace ID and to
        // slot 0.
        let single = matches!(t.tree.format(), SourceFormat::Single);
        let Some(d) = t.decoders.iter().find(|d| d.csid == csid || (single && csid == 0)) else {
            return OCSD_ERR_INVALID_ID;
        };
        if !matches!(callback_type, OCSD_C_API_CB_PKT_SINK | OCSD_C_API_CB_PKT_MON) {
            return OCSD_ERR_INVALID_PARAM_VAL;
        }
        match &d.attach {
            Some(a) => a.attach(callback_type, p_fn_callback_data, p_context as usize, t.text.clone()),
            // A custom decoder's packets are its own: OpenCSD has no
            // packet struct to hand on for them either.
            None => OCSD_ERR_DCD_INTERFACE_UNUSED,
        }
    })
}

/// Fills the tree's statistics block for `csid` (counted from its last
/// reset).
fn fill_stats(t: &mut CTree, csid: u8) -> Result<(), OcsdErr> {
    let slot = slot_of(t, csid);
    // No decoder there: OpenCSD finds no packet processor, an invalid value.
    let (_, e) = t
        .tree
        .elements()
        .find(|(id, _)| *id == slot)
        .ok_or(OCSD_ERR_INVALID_PARAM_VAL)?;
    let s = e.component.stats().ok_or(OCSD_ERR_NOT_INIT)?;
    let demux = t.tree.deformatter().map(|d| d.stats()).unwrap_or_default();
    let base = t
        .decoders
        .iter()
        .find(|d| d.csid == csid)
        .map(|d| d.stats_base)
        .unwrap_or_default();
    *t.stats = OcsdDecodeStats {
        version: OCSD_VER_NUM,
        revision: 1,
        channel_total: s.channel_total.wrapping_sub(base.channel_total),
        channel_unsynced: s.channel_unsynced.wrapping_sub(base.channel_unsynced),
        bad_header_errs: (s.bad_header_errs as u32).wrapping_sub(base.bad_header_errs),
        bad_sequence_errs: (s.bad_sequence_errs as u32).wrapping_sub(base.bad_sequence_errs),
        demux: OcsdDemuxStats {
            valid_id_bytes: demux.valid_id_bytes.wrapping_sub(base.demux.valid_id_bytes),
            no_id_bytes: demux.no_id_bytes.wrapping_sub(base.demux.no_id_bytes),
            reserved_id_bytes: demux.reserved_id_bytes.wrapping_sub(base.demux.reserved_id_bytes),
            unknown_id_bytes: demux.unknown_id_bytes.wrapping_sub(base.demux.unknown_id_bytes),
            frame_bytes: demux.frame_bytes.wrapping_sub(base.demux.frame_bytes),
        },
    };
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_dt_get_decode_stats(
    handle: TreeHandle,
    csid: u8,
    p_stats_block: *mut *mut OcsdDecodeStats,
) -> OcsdErr {
    if p_stats_block.is_null() {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    let r = with_tree(handle, Err(OCSD_ERR_BAD_HANDLE), |t| {
        fill_stats(t, csid)?;
        Ok(&mut *t.stats as *mut OcsdDecodeStats)
    });
    match r {
        Ok(p) => {
            // SAFETY: non-null output pointer from the client; the block
            // lives as long as the tree, as OpenCSD's does.
            unsafe { *p_stats_block = p };
            OCSD_OK
        }
        Err(e) => e,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_reset_decode_stats(handle: TreeHandle, csid: u8) -> OcsdErr {
    // The library's counters run on; the statistics handed out from now
    // on are counted from here (the counts now are kept and taken off).
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        if let Err(e) = fill_stats(t, csid) {
            return e;
        }
        let now = *t.stats;
        let Some(d) = t.decoders.iter_mut().find(|d| d.csid == csid) else {
            return OCSD_ERR_INVALID_PARAM_VAL;
        };
        let b = &mut d.stats_base;
        b.channel_total = b.channel_total.wrapping_add(now.channel_total);
        b.channel_unsynced = b.channel_unsynced.wrapping_add(now.channel_unsynced);
        b.bad_header_errs = b.bad_header_errs.wrapping_add(now.bad_header_errs);
        b.bad_sequence_errs = b.bad_sequence_errs.wrapping_add(now.bad_sequence_errs);
        let (bd, nd) = (&mut b.demux, now.demux);
        bd.valid_id_bytes = bd.valid_id_bytes.wrapping_add(nd.valid_id_bytes);
        bd.no_id_bytes = bd.no_id_bytes.wrapping_add(nd.no_id_bytes);
        bd.reserved_id_bytes = bd.reserved_id_bytes.wrapping_add(nd.reserved_id_bytes);
        bd.unknown_id_bytes = bd.unknown_id_bytes.wrapping_add(nd.unknown_id_bytes);
        bd.frame_bytes = bd.frame_bytes.wrapping_add(nd.frame_bytes);
        *t.stats = OcsdDecodeStats {
            version: now.version,
            revision: now.revision,
            ..OcsdDecodeStats::default()
        };
        OCSD_OK
    })
}

// ----------------------------------------------------------------- memory

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_dt_add_binfile_mem_acc(
    handle: TreeHandle,
    address: VAddr,
    mem_space: c_int,
    filepath: *const c_char,
) -> OcsdErr {
    // SAFETY: a NUL-terminated path from the client.
    let Some(path) = (unsafe { c_str(filepath) }) else {
        return OCSD_ERR_INVALID_PARAM_VAL;
    };
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        map_memory(t);
        match t
            .tree
            .add_file_region(Path::new(path), address, 0, 0, space_from_c(mem_space))
        {
            Ok(()) => OCSD_OK,
            Err(e) => mem_err(e),
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_dt_add_binfile_region_mem_acc(
    handle: TreeHandle,
    region_array: *const OcsdFileMemRegion,
    num_regions: c_int,
    mem_space: c_int,
    filepath: *const c_char,
) -> OcsdErr {
    // SAFETY: a NUL-terminated path from the client.
    let Some(path) = (unsafe { c_str(filepath) }) else {
        return OCSD_ERR_INVALID_PARAM_VAL;
    };
    if region_array.is_null() || num_regions < 1 {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    // SAFETY: the client passes `num_regions` regions.
    let regions = unsafe { std::slice::from_raw_parts(region_array, num_regions as usize) };
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        map_memory(t);
        for r in regions {
            if let Err(e) = t.tree.add_file_region(
                Path::new(path),
                r.start_address,
                r.file_offset as u64,
                r.region_size as u64,
                space_from_c(mem_space),
            ) {
                return mem_err(e);
            }
        }
        OCSD_OK
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_dt_add_buffer_mem_acc(
    handle: TreeHandle,
    address: VAddr,
    mem_space: c_int,
    p_mem_buffer: *const u8,
    mem_length: u32,
) -> OcsdErr {
    if p_mem_buffer.is_null() || mem_length == 0 {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    // SAFETY: the client's buffer of `mem_length` bytes. It is copied: the
    // library's accessors own their bytes.
    let bytes = unsafe { std::slice::from_raw_parts(p_mem_buffer, mem_length as usize) }.to_vec();
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        map_memory(t);
        let Some(m) = t.tree.mem_mapper() else {
            return OCSD_ERR_NOT_INIT;
        };
        match BufferAccessor::new(address, bytes, space_from_c(mem_space)) {
            Ok(acc) => m
                .borrow_mut()
                .add_accessor(Box::new(acc))
                .map_or_else(mem_err, |()| OCSD_OK),
            Err(e) => mem_err(e),
        }
    })
}

/// Makes the tree's memory map, as OpenCSD does at the first call adding
/// memory (whether or not the accessor is then taken): its full decoders
/// can start and the memory calls work from then on.
fn map_memory(t: &CTree) {
    t.mem_mapped.store(true, Ordering::Relaxed);
}

/// Whether the tree has its memory map (see [`map_memory`]).
fn memory_mapped(t: &CTree) -> bool {
    t.mem_mapped.load(Ordering::Relaxed)
}

/// A C memory callback, with or without the trace ID argument.
#[derive(Clone, Copy)]
enum MemCb {
    Plain(FnMemAccCb),
    WithId(FnMemAccIdCb),
}

fn add_callback_acc(
    handle: TreeHandle,
    st_address: VAddr,
    en_address: VAddr,
    mem_space: c_int,
    cb: MemCb,
    ctx: usize,
) -> OcsdErr {
    match cb {
        MemCb::Plain(None) | MemCb::WithId(None) => return OCSD_ERR_INVALID_PARAM_VAL,
        _ => {}
    }
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        map_memory(t);
        let position = t.tree.serial_position();
        let single = matches!(t.tree.format(), SourceFormat::Single).then(|| t.single_id.clone());
        let read = move |addr: u64, space: MemSpace, buf: &mut [u8]| -> usize {
            let n = buf.len() as u32;
            // SAFETY: the client registered the callback for `ctx`; `buf`
            // holds `n` writable bytes.
            let got = unsafe {
                match cb {
                    MemCb::Plain(Some(f)) => f(ctx as *const c_void, addr, space_to_c(space), n, buf.as_mut_ptr()),
                    MemCb::WithId(Some(f)) => {
                        // The decoder asking is the one the tree is feeding.
                        let id = match &single {
                            Some(id) => *id.borrow(),
                            None => position.borrow().trace_id,
                        };
                        f(ctx as *const c_void, addr, space_to_c(space), id, n, buf.as_mut_ptr())
                    }
                    _ => 0,
                }
            };
            got.min(n) as usize
        };
        let Some(m) = t.tree.mem_mapper() else {
            return OCSD_ERR_NOT_INIT;
        };
        match CallbackAccessor::new(st_address, en_address, space_from_c(mem_space), Box::new(read)) {
            Ok(acc) => {
                let mut m = m.borrow_mut();
                // A callback's memory can change between calls (perf maps
                // a different process at the same address), so it is read
                // every time, as OpenCSD 1.3 does, not through the cache.
                m.set_cache_config(CacheConfig {
                    enabled: false,
                    ..CacheConfig::default()
                });
                m.add_accessor(Box::new(acc)).map_or_else(mem_err, |()| OCSD_OK)
            }
            Err(e) => mem_err(e),
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_add_callback_mem_acc(
    handle: TreeHandle,
    st_address: VAddr,
    en_address: VAddr,
    mem_space: c_int,
    p_cb_func: FnMemAccCb,
    p_context: *const c_void,
) -> OcsdErr {
    add_callback_acc(
        handle,
        st_address,
        en_address,
        mem_space,
        MemCb::Plain(p_cb_func),
        p_context as usize,
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_add_callback_trcid_mem_acc(
    handle: TreeHandle,
    st_address: VAddr,
    en_address: VAddr,
    mem_space: c_int,
    p_cb_func: FnMemAccIdCb,
    p_context: *const c_void,
) -> OcsdErr {
    add_callback_acc(
        handle,
        st_address,
        en_address,
        mem_space,
        MemCb::WithId(p_cb_func),
        p_context as usize,
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_remove_mem_acc(handle: TreeHandle, st_address: VAddr, mem_space: c_int) -> OcsdErr {
    // OpenCSD removes the image holding the address (any address of it)
    // in a matching memory space; none there is OCSD_ERR_INVALID_PARAM_VAL.
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        if !memory_mapped(t) {
            return OCSD_ERR_NOT_INIT;
        }
        t.tree
            .remove_mem_acc(st_address, space_from_c(mem_space))
            .map_or_else(mem_err, |()| OCSD_OK)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_tl_log_mapped_mem_ranges(handle: TreeHandle) {
    with_tree(handle, (), |t| {
        // No memory map, nothing listed (not even the heading).
        if !memory_mapped(t) {
            return;
        }
        let mut s = String::new();
        t.tree.describe_mapped_ranges(&mut s);
        t.text.capture.borrow_mut().log_msg(&s);
        t.text.flush();
    })
}

/// Enables or disables the memory page cache (1.8.x).
#[cfg(feature = "opencsd-1-8")]
#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_set_mem_acc_cacheing(
    handle: TreeHandle,
    enable: c_int,
    page_size: u16,
    nr_pages: c_int,
) -> OcsdErr {
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        let Some(m) = t.tree.mem_mapper().filter(|_| memory_mapped(t)) else {
            return OCSD_ERR_NOT_INIT;
        };
        let d = CacheConfig::default();
        let cfg = CacheConfig {
            enabled: enable != 0,
            page_size: if page_size == 0 {
                d.page_size
            } else {
                page_size as usize
            },
            num_pages: if nr_pages <= 0 { d.num_pages } else { nr_pages as usize },
        };
        if enable != 0
            && (!(CacheConfig::MIN_PAGE_SIZE..=CacheConfig::MAX_PAGE_SIZE).contains(&cfg.page_size)
                || !(CacheConfig::MIN_PAGES..=CacheConfig::MAX_PAGES).contains(&cfg.num_pages))
        {
            return OCSD_ERR_INVALID_PARAM_VAL;
        }
        m.borrow_mut().set_cache_config(cfg);
        OCSD_OK
    })
}

// ------------------------------------------------------------ error logger

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_def_errlog_init(verbosity: c_int, create_output_logger: c_int) -> OcsdErr {
    guarded(OCSD_ERR_FAIL, || {
        let mut log = default_log();
        log.verbosity = severity_from_c(verbosity);
        if create_output_logger != 0 {
            // OpenCSD makes a new output logger, writing to stderr until
            // configured otherwise.
            log.output_logger = true;
            log.out_flags = C_API_MSGLOGOUT_FLG_STDERR;
            log.file = None;
            crate::tree::DEFAULT_OUTPUT_ON.store(true, Ordering::Relaxed);
        }
        OCSD_OK
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_def_errlog_config_output(output_flags: c_int, log_file_name: *const c_char) -> OcsdErr {
    // SAFETY: null or a NUL-terminated file name from the client.
    let name = unsafe { c_str(log_file_name) }.map(str::to_owned);
    guarded(OCSD_ERR_FAIL, || {
        let mut log = default_log();
        // No output logger made by `ocsd_def_errlog_init`: nothing to set.
        if !log.output_logger {
            return OCSD_ERR_NOT_INIT;
        }
        log.out_flags = output_flags & C_API_MSGLOGOUT_MASK;
        crate::tree::DEFAULT_OUTPUT_ON.store(log.out_flags != 0, Ordering::Relaxed);
        if output_flags & C_API_MSGLOGOUT_FLG_FILE != 0 {
            let name = name.unwrap_or_else(|| "ocsd_trace_decode.log".to_string());
            match std::fs::File::create(name) {
                Ok(f) => log.file = Some(f),
                Err(_) => return OCSD_ERR_FILE_ERROR,
            }
        }
        OCSD_OK
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_def_errlog_set_strprint_cb(
    handle: TreeHandle,
    p_context: *mut c_void,
    p_str_print_cb: FnDefLoggerPrintStrCb,
) -> OcsdErr {
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        *t.text.print.borrow_mut() = PrintCb {
            cb: p_str_print_cb,
            ctx: p_context as usize,
        };
        t.text.readers.store(p_str_print_cb.is_some(), Ordering::Relaxed);
        OCSD_OK
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_def_errlog_msgout(msg: *const c_char) {
    // SAFETY: a NUL-terminated message from the client.
    let Some(msg) = (unsafe { c_str(msg) }).map(str::to_owned) else {
        return;
    };
    guarded((), || {
        let mut out = MsgLogger::capture();
        out.log_msg(&msg);
        let text = TextOut {
            capture: shared(out),
            print: shared(PrintCb::default()),
            readers: Arc::new(AtomicBool::new(true)),
        };
        text.flush();
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_err_str(err: c_int, buffer: *mut c_char, buffer_size: c_int) {
    // OpenCSD's error string: the code, then "; " before a message (none here).
    // 1.3.x has no code from 44 on (OCSD_ERR_INVALID_OPCODE is 1.8's).
    let last_known = if cfg!(feature = "opencsd-1-8") { c_int::MAX } else { 43 };
    let text = guarded(String::new(), || match code_from_c(err).filter(|_| err <= last_known) {
        Some(c) => format!("{c}; "),
        None => format!("0x{err:04x} (unknown); "),
    });
    // SAFETY: the client's buffer of `buffer_size` bytes.
    unsafe { copy_out(&text, buffer, buffer_size) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_get_last_err(
    index: *mut TrcIndex,
    chan_id: *mut u8,
    message: *mut c_char,
    message_len: c_int,
) -> OcsdErr {
    let last = guarded(None, || default_log().last_error.clone());
    let Some(e) = last else {
        // No error: OpenCSD's bad index and trace ID, and an empty message.
        // SAFETY: null or the client's output locations.
        unsafe {
            if !index.is_null() {
                *index = TrcIndex::MAX;
            }
            if !chan_id.is_null() {
                *chan_id = 0xff;
            }
            copy_out("", message, message_len);
        }
        return OCSD_OK;
    };
    // SAFETY: null or the client's output locations.
    unsafe {
        if !index.is_null() {
            // A 32-bit index, as OpenCSD's: an error past 4 GiB of trace
            // wraps, as it would there.
            *index = e.index.map_or(TrcIndex::MAX, |i| i as TrcIndex);
        }
        if !chan_id.is_null() {
            *chan_id = e.trace_id.unwrap_or(0xff);
        }
        copy_out(&e.to_string(), message, message_len);
    }
    err_code(e.code)
}

// --------------------------------------------------------------- printers

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_pkt_str(
    pkt_protocol: c_int,
    p_pkt: *const c_void,
    buffer: *mut c_char,
    buffer_size: c_int,
) -> OcsdErr {
    if p_pkt.is_null() || buffer.is_null() || buffer_size <= 0 {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    if (OCSD_PROTOCOL_CUSTOM_0..OCSD_PROTOCOL_END).contains(&pkt_protocol) {
        // SAFETY: the client's packet and buffer, handed on as they came.
        return unsafe { crate::custom::protocol_to_str(pkt_protocol, p_pkt, buffer, buffer_size) };
    }
    // SAFETY: the client passes the packet struct of `pkt_protocol`.
    let text = guarded(None, || unsafe { crate::packets::packet_text(pkt_protocol, p_pkt) });
    let Some(text) = text else {
        return OCSD_ERR_NO_PROTOCOL;
    };
    let text = convert::to_1_3_text_if_default(&text);
    // SAFETY: the client's buffer of `buffer_size` bytes.
    unsafe { copy_out(&text, buffer, buffer_size) };
    OCSD_OK
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_gen_elem_str(
    p_pkt: *const OcsdGenericTraceElem,
    buffer: *mut c_char,
    buffer_size: c_int,
) -> OcsdErr {
    if p_pkt.is_null() || buffer.is_null() || buffer_size <= 0 {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    // SAFETY: the client's element; its extended data pointer is set as
    // this library sets it.
    let text = guarded(None, || {
        Some(convert::elem_text(&unsafe { convert::elem_from_c(&*p_pkt) }))
    });
    let Some(text) = text else {
        return OCSD_ERR_FAIL;
    };
    // SAFETY: the client's buffer of `buffer_size` bytes.
    unsafe { copy_out(&text, buffer, buffer_size) };
    OCSD_OK
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_gen_elem_init(p_pkt: *mut OcsdGenericTraceElem, elem_type: c_int) {
    if p_pkt.is_null() {
        return;
    }
    let mut e = OcsdGenericTraceElem {
        elem_type: elem_type as u32,
        ..Default::default()
    };
    e.context.exception_level = -1;
    // SAFETY: the client's element, written whole.
    unsafe { p_pkt.write(e) };
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_set_raw_frame_printer(handle: TreeHandle, flags: c_int) -> OcsdErr {
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        let out = t.text.capture.clone();
        let Some(d) = t.tree.deformatter_mut() else {
            return OCSD_ERR_DCDT_NO_FORMATTER_C;
        };
        let mut cfg = d.config();
        cfg.raw_packed |= flags as u32 & OCSD_DFRMTR_PACKED_RAW_OUT != 0;
        cfg.raw_unpacked |= flags as u32 & OCSD_DFRMTR_UNPACKED_RAW_OUT != 0;
        if let Err(e) = d.configure(cfg) {
            return err_code(e);
        }
        match t.tree.set_raw_frame_monitor(Box::new(RawFramePrinter::new(out))) {
            Ok(()) => OCSD_OK,
            Err(e) => err_code(e),
        }
    })
}

const OCSD_ERR_DCDT_NO_FORMATTER_C: OcsdErr = 29;
const OCSD_ERR_ATTACH_TOO_MANY: OcsdErr = 10;

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_set_gen_elem_printer(handle: TreeHandle) -> OcsdErr {
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        let printer = GenElemPrinter::new(t.text.capture.clone());
        t.tree.set_gen_elem_out(Box::new(printer));
        OCSD_OK
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_dt_set_pkt_protocol_printer(handle: TreeHandle, cs_id: u8, monitor: c_int) -> OcsdErr {
    with_tree(handle, OCSD_ERR_BAD_HANDLE, |t| {
        let slot = slot_of(t, cs_id);
        // The printer names the ID it was asked for, as OpenCSD's does: on
        // a single-source tree that is the caller's, whatever the slot.
        let printer = PacketPrinter::new(cs_id, t.text.capture.clone());
        match t.tree.attach_printer(slot, printer, monitor != 0) {
            Ok(()) => OCSD_OK,
            Err(e) => err_code(e),
        }
    })
}

// --------------------------------------------------------- custom decoders

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_register_custom_decoder(
    name: *const c_char,
    p_dcd_fact: *mut crate::custom::OcsdExternDcdFact,
) -> OcsdErr {
    // SAFETY: a NUL-terminated name from the client.
    let Some(name) = (unsafe { c_str(name) }).map(str::to_owned) else {
        return OCSD_ERR_INVALID_PARAM_VAL;
    };
    if p_dcd_fact.is_null() {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    // SAFETY: the client's factory struct, non-null.
    guarded(OCSD_ERR_FAIL, || unsafe { crate::custom::register(&name, p_dcd_fact) })
}

#[unsafe(no_mangle)]
pub extern "C" fn ocsd_deregister_decoders() -> OcsdErr {
    guarded(OCSD_ERR_FAIL, || {
        crate::custom::deregister_all();
        OCSD_OK
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ocsd_cust_protocol_to_str(
    pkt_protocol: c_int,
    trc_pkt: *const c_void,
    buffer: *mut c_char,
    buflen: c_int,
) -> OcsdErr {
    if trc_pkt.is_null() || buffer.is_null() || buflen <= 0 {
        return OCSD_ERR_INVALID_PARAM_VAL;
    }
    // SAFETY: the client's packet and buffer, handed to its own printer.
    guarded(OCSD_ERR_FAIL, || unsafe {
        crate::custom::protocol_to_str(pkt_protocol, trc_pkt, buffer, buflen)
    })
}
