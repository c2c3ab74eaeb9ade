//! Custom decoders registered from C (`ocsd_register_custom_decoder`
//! with an `ocsd_extern_dcd_fact_t`): each becomes a `DecoderFactory` in
//! the library's `DecoderRegistry`, and its decoders are components of the
//! decode tree that call the C decoder with the trace bytes and give it
//! the library's services (element output, error log, memory) through
//! the `ocsd_extern_dcd_cb_fns` callbacks.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::{Arc, Mutex};

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::{
    DecodeContext, DecodeMode, DecoderFactory, DecoderRegistry, RegSpec, SourceConfig, TraceComponent,
};
use coresight_decode::error::{ErrCode, Severity, TraceError};
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::logger::ErrLink;
use coresight_decode::printers::PacketPrinter;

use crate::abi::{self, OcsdErr, OcsdGenericTraceElem, OcsdResp, TrcIndex as CIndex, VAddr};

/// `fnTraceDataIn`.
type FnTraceDataIn = Option<
    unsafe extern "C" fn(
        decoder_handle: *const c_void,
        op: c_int,
        index: CIndex,
        size: u32,
        data: *const u8,
        used: *mut u32,
    ) -> OcsdResp,
>;
/// `fnUpdatePktMonFlags`.
type FnUpdatePktMonFlags = Option<unsafe extern "C" fn(decoder_handle: *const c_void, flags: c_int)>;

/// `ocsd_extern_dcd_inst_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OcsdExternDcdInst {
    pub fn_data_in: FnTraceDataIn,
    pub fn_update_pkt_mon: FnUpdatePktMonFlags,
    pub decoder_handle: *mut c_void,
    pub p_decoder_name: *mut c_char,
    pub cs_id: u8,
}

type FnGenElemOpCb =
    unsafe extern "C" fn(lib: *const c_void, index: CIndex, id: u8, elem: *const OcsdGenericTraceElem) -> OcsdResp;
type FnLogErrorCb =
    unsafe extern "C" fn(lib: *const c_void, sev: c_int, code: OcsdErr, idx: CIndex, chan: u8, msg: *const c_char);
type FnLogMsgCb = unsafe extern "C" fn(lib: *const c_void, sev: c_int, msg: *const c_char);
type FnDecodeArmInstCb = unsafe extern "C" fn(lib: *const c_void, info: *mut c_void) -> OcsdErr;
type FnMemAccessCb = unsafe extern "C" fn(
    lib: *const c_void,
    address: VAddr,
    trace_id: u8,
    mem_space: c_int,
    num_bytes: *mut u32,
    buf: *mut u8,
) -> OcsdErr;
type FnPktMonCb =
    unsafe extern "C" fn(lib: *const c_void, op: c_int, index: CIndex, pkt: *const c_void, size: u32, data: *const u8);
type FnPktDataSinkCb =
    unsafe extern "C" fn(lib: *const c_void, op: c_int, index: CIndex, pkt: *const c_void) -> OcsdResp;

/// `ocsd_extern_dcd_cb_fns`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OcsdExternDcdCbFns {
    pub fn_gen_elem_out: Option<FnGenElemOpCb>,
    pub fn_log_error: Option<FnLogErrorCb>,
    pub fn_log_msg: Option<FnLogMsgCb>,
    pub fn_arm_instruction_decode: Option<FnDecodeArmInstCb>,
    pub fn_memory_access: Option<FnMemAccessCb>,
    pub fn_packet_mon: Option<FnPktMonCb>,
    pub fn_packet_data_sink: Option<FnPktDataSinkCb>,
    pub packet_cb_flags: c_int,
    pub lib_context: *const c_void,
}

type FnCreate = unsafe extern "C" fn(
    flags: c_int,
    cfg: *const c_void,
    cbs: *const OcsdExternDcdCbFns,
    inst: *mut OcsdExternDcdInst,
) -> OcsdErr;
type FnDestroy = unsafe extern "C" fn(handle: *const c_void) -> OcsdErr;
type FnCsid = unsafe extern "C" fn(cfg: *const c_void, csid: *mut u8) -> OcsdErr;
type FnPktToString = unsafe extern "C" fn(pkt: *const c_void, buf: *mut c_char, len: c_int) -> OcsdErr;

/// `ocsd_extern_dcd_fact_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OcsdExternDcdFact {
    pub create_decoder: Option<FnCreate>,
    pub destroy_decoder: Option<FnDestroy>,
    pub csid_from_config: Option<FnCsid>,
    pub pkt_to_string: Option<FnPktToString>,
    pub protocol_id: c_int,
}

/// The register a custom decoder's `SourceConfig` carries: the address of
/// the client's config struct, which only the client's functions read.
const CFG_PTR_REG: &str = "C_API_CONFIG_STRUCT";

/// One registered C decoder type.
struct CustomFactory {
    name: String,
    fact: OcsdExternDcdFact,
}

// SAFETY: the factory holds only the client's function pointers, which
// OpenCSD's API lets the library call from whichever thread decodes.
unsafe impl Send for CustomFactory {}
// SAFETY: as above; nothing in it is written after registration.
unsafe impl Sync for CustomFactory {}

fn cfg_ptr(cfg: &SourceConfig) -> *const c_void {
    cfg.reg(CFG_PTR_REG).unwrap_or(0) as usize as *const c_void
}

impl DecoderFactory for CustomFactory {
    fn protocol_name(&self) -> &str {
        &self.name
    }
    fn device_types(&self) -> &[&str] {
        &[]
    }
    fn registers(&self) -> &[RegSpec] {
        &[]
    }
    fn trace_id(&self, cfg: &SourceConfig) -> u8 {
        let mut id = 0u8;
        if let Some(f) = self.fact.csid_from_config {
            // SAFETY: the client's function on the client's config struct.
            unsafe { f(cfg_ptr(cfg), &mut id) };
        }
        id
    }
    fn create(&self, cfg: &SourceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, TraceError> {
        let fail = |code: ErrCode| TraceError::new(Severity::Error, code);
        let create = self.fact.create_decoder.ok_or_else(|| fail(ErrCode::NotInit))?;
        let mut lib = Box::new(LibContext {
            ctx: ctx.clone(),
            err: ErrLink::new(&ctx.err_log, ctx.component_name(&self.name)),
            cbs: Arc::default(),
            elem: TraceElementBuf::default(),
        });
        let cbs = Box::new(OcsdExternDcdCbFns {
            fn_gen_elem_out: Some(cb_gen_elem),
            fn_log_error: Some(cb_log_error),
            fn_log_msg: Some(cb_log_msg),
            fn_arm_instruction_decode: Some(cb_instr_decode),
            fn_memory_access: Some(cb_mem_access),
            fn_packet_mon: Some(cb_pkt_mon),
            fn_packet_data_sink: Some(cb_pkt_sink),
            packet_cb_flags: 0,
            lib_context: (&mut *lib as *mut LibContext).cast_const().cast(),
        });
        let mut inst = OcsdExternDcdInst {
            fn_data_in: None,
            fn_update_pkt_mon: None,
            decoder_handle: std::ptr::null_mut(),
            p_decoder_name: std::ptr::null_mut(),
            cs_id: 0,
        };
        let flags = match ctx.mode {
            DecodeMode::FullDecode => abi::OCSD_CREATE_FLG_FULL_DECODER,
            DecodeMode::PacketsOnly => abi::OCSD_CREATE_FLG_PACKET_PROC,
        };
        // SAFETY: the client's create function with its config struct and
        // the callback block, which lives as long as the decoder.
        let r = unsafe { create(flags, cfg_ptr(cfg), &*cbs, &mut inst) };
        if r != abi::OCSD_OK {
            return Err(TraceError::new(Severity::Error, code_of(r)));
        }
        if inst.fn_data_in.is_none() || inst.fn_update_pkt_mon.is_none() {
            if let Some(d) = self.fact.destroy_decoder {
                // SAFETY: the instance the client just created.
                unsafe { d(inst.decoder_handle) };
            }
            return Err(fail(ErrCode::NotInit));
        }
        *LAST_CREATED.lock().unwrap_or_else(|e| e.into_inner()) = Some(CustomHandle {
            cbs: lib.cbs.clone(),
            update: inst.fn_update_pkt_mon,
            handle: inst.decoder_handle as usize,
        });
        Ok(Box::new(CustomComponent {
            name: self.name.clone(),
            inst,
            destroy: self.fact.destroy_decoder,
            _cbs: cbs,
            _lib: lib,
        }))
    }
}

fn code_of(v: OcsdErr) -> ErrCode {
    crate::convert::code_from_c(v).unwrap_or(ErrCode::Fail)
}

/// Room for the element a C decoder hands back, as the library's.
#[derive(Default)]
struct TraceElementBuf(Option<coresight_decode::element::TraceElement>);

/// What a C decoder's callbacks reach: the tree's services, and the C
/// client's packet callbacks when attached.
struct LibContext {
    ctx: DecodeContext,
    err: ErrLink,
    cbs: Arc<Mutex<PktCbs>>,
    elem: TraceElementBuf,
}

/// The client's packet callbacks on one custom decoder.
#[derive(Default)]
struct PktCbs {
    mon: Option<(crate::pktcb::FnPktDataMon, usize)>,
    sink: Option<(crate::pktcb::FnPktDataIn, usize)>,
}

/// The C API's handle on a custom decoder, for packet callbacks.
pub struct CustomHandle {
    cbs: Arc<Mutex<PktCbs>>,
    update: FnUpdatePktMonFlags,
    handle: usize,
}

impl crate::tree::PktAttach for CustomHandle {
    fn attach(&self, kind: c_int, f: *mut c_void, ctx: usize, _text: crate::tree::TextOut) -> OcsdErr {
        let mut c = self.cbs.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            // SAFETY: the client passes a `FnDefPktDataIn` for a sink.
            abi::OCSD_C_API_CB_PKT_SINK => {
                c.sink = (!f.is_null()).then(|| {
                    (
                        unsafe { std::mem::transmute::<*mut c_void, crate::pktcb::FnPktDataIn>(f) },
                        ctx,
                    )
                })
            }
            // SAFETY: the client passes a `FnDefPktDataMon` for a monitor.
            abi::OCSD_C_API_CB_PKT_MON => {
                c.mon = (!f.is_null()).then(|| {
                    (
                        unsafe { std::mem::transmute::<*mut c_void, crate::pktcb::FnPktDataMon>(f) },
                        ctx,
                    )
                })
            }
            _ => return abi::OCSD_ERR_INVALID_PARAM_VAL,
        }
        let flags = (c.mon.is_some() as c_int) | (c.sink.is_some() as c_int) << 1;
        drop(c);
        if let Some(u) = self.update {
            // SAFETY: the client's function on its own instance.
            unsafe { u(self.handle as *const c_void, flags) };
        }
        abi::OCSD_OK
    }
}

/// The handle on the custom decoder created last (taken by the C API
/// right after it has the registry create one).
static LAST_CREATED: Mutex<Option<CustomHandle>> = Mutex::new(None);

/// Takes the handle on the custom decoder just created.
pub fn take_last_created() -> Option<CustomHandle> {
    LAST_CREATED.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// # Safety
/// `lib` is the context this module gave the decoder.
unsafe fn lib_of<'a>(lib: *const c_void) -> Option<&'a mut LibContext> {
    // SAFETY: the decoder calls back only while the library is calling it
    // (inside `trace_data_in`), when nothing else touches the context.
    unsafe { lib.cast_mut().cast::<LibContext>().as_mut() }
}

unsafe extern "C" fn cb_gen_elem(
    lib: *const c_void,
    index: CIndex,
    id: u8,
    elem: *const OcsdGenericTraceElem,
) -> OcsdResp {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: our context; the decoder's element.
        let (Some(l), Some(e)) = (unsafe { lib_of(lib) }, unsafe { elem.as_ref() }) else {
            return abi::OCSD_RESP_FATAL_INVALID_PARAM;
        };
        // SAFETY: the element's extended data is the decoder's.
        let el = l.elem.0.insert(unsafe { crate::convert::elem_from_c(e) });
        let r = l.ctx.elem_out.borrow_mut().trace_elem_in(u64::from(index), id, el);
        crate::convert::resp_to_c(r)
    }))
    .unwrap_or(abi::OCSD_RESP_FATAL_SYS_ERR)
}

fn severity(v: c_int) -> Severity {
    match v {
        0 => Severity::None,
        1 => Severity::Error,
        2 => Severity::Warn,
        _ => Severity::Info,
    }
}

unsafe extern "C" fn cb_log_error(
    lib: *const c_void,
    sev: c_int,
    code: OcsdErr,
    idx: CIndex,
    chan: u8,
    msg: *const c_char,
) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: our context.
        let Some(l) = (unsafe { lib_of(lib) }) else { return };
        let mut e = TraceError::new(severity(sev), code_of(code));
        if idx != CIndex::MAX {
            e = e.at(u64::from(idx));
        }
        if chan < 0x80 {
            e = e.on_id(chan);
        }
        if !msg.is_null() {
            // SAFETY: a NUL-terminated message from the decoder.
            e = e.with_message(unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned());
        }
        l.err.log(&e);
    }));
}

unsafe extern "C" fn cb_log_msg(lib: *const c_void, sev: c_int, msg: *const c_char) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: our context, and a NUL-terminated message.
        let (Some(l), false) = (unsafe { lib_of(lib) }, msg.is_null()) else {
            return;
        };
        // SAFETY: checked non-null above.
        let text = unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned();
        l.err
            .log(&TraceError::new(severity(sev), ErrCode::Ok).with_message(text));
    }));
}

unsafe extern "C" fn cb_instr_decode(_lib: *const c_void, _info: *mut c_void) -> OcsdErr {
    // The library's instruction classifier has no `ocsd_instr_info` form
    // yet: a custom decoder that needs it must classify for itself.
    abi::OCSD_ERR_DCD_INTERFACE_UNUSED
}

unsafe extern "C" fn cb_mem_access(
    lib: *const c_void,
    address: VAddr,
    trace_id: u8,
    mem_space: c_int,
    num_bytes: *mut u32,
    buf: *mut u8,
) -> OcsdErr {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: our context and the decoder's output locations.
        let (Some(l), Some(n)) = (unsafe { lib_of(lib) }, unsafe { num_bytes.as_mut() }) else {
            return abi::OCSD_ERR_INVALID_PARAM_VAL;
        };
        let Some(mem) = l.ctx.mem.as_ref() else {
            *n = 0;
            return abi::OCSD_ERR_DCD_INTERFACE_UNUSED;
        };
        if buf.is_null() {
            return abi::OCSD_ERR_INVALID_PARAM_VAL;
        }
        // SAFETY: the decoder's buffer of `*n` bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(buf, *n as usize) };
        let space = coresight_decode::memory::MemSpace::from_bits(mem_space as u8);
        match mem.borrow_mut().read_target_memory(address, trace_id, space, out) {
            Ok(got) => {
                *n = got as u32;
                abi::OCSD_OK
            }
            Err(e) => {
                *n = 0;
                e.code() as OcsdErr
            }
        }
    }))
    .unwrap_or(abi::OCSD_ERR_FAIL)
}

unsafe extern "C" fn cb_pkt_mon(
    lib: *const c_void,
    op: c_int,
    index: CIndex,
    pkt: *const c_void,
    size: u32,
    data: *const u8,
) {
    // SAFETY: our context.
    if let Some(l) = unsafe { lib_of(lib) }
        && let Some((f, ctx)) = l.cbs.lock().unwrap_or_else(|e| e.into_inner()).mon
    {
        // SAFETY: the client's monitor, given what the decoder gave.
        unsafe { f(ctx as *const c_void, op, index, pkt, size, data) };
    }
}

unsafe extern "C" fn cb_pkt_sink(lib: *const c_void, op: c_int, index: CIndex, pkt: *const c_void) -> OcsdResp {
    // SAFETY: our context.
    match unsafe { lib_of(lib) } {
        // SAFETY: the client's sink, given what the decoder gave.
        Some(l) => match l.cbs.lock().unwrap_or_else(|e| e.into_inner()).sink {
            Some((f, ctx)) => unsafe { f(ctx as *const c_void, op, index, pkt) },
            None => abi::OCSD_RESP_CONT,
        },
        None => abi::OCSD_RESP_FATAL_INVALID_PARAM,
    }
}

/// A C decoder in the tree.
struct CustomComponent {
    name: String,
    inst: OcsdExternDcdInst,
    destroy: Option<FnDestroy>,
    _cbs: Box<OcsdExternDcdCbFns>,
    _lib: Box<LibContext>,
}

// SAFETY: the decoder instance is only used through `&mut self` (one
// thread at a time), as OpenCSD uses its decoders.
unsafe impl Send for CustomComponent {}

impl Drop for CustomComponent {
    fn drop(&mut self) {
        if let Some(d) = self.destroy {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // SAFETY: the instance created for this component, freed once.
                unsafe { d(self.inst.decoder_handle) };
            }));
        }
    }
}

impl TrcDataIn for CustomComponent {
    fn trace_data_in(&mut self, op: DatapathOp, index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        let Some(f) = self.inst.fn_data_in else {
            return (DatapathResp::FatalNotInit, 0);
        };
        let op = match op {
            DatapathOp::Data => 0,
            DatapathOp::Eot => 1,
            DatapathOp::Flush => 2,
            DatapathOp::Reset => 3,
        };
        let mut used = 0u32;
        let p = if data.is_empty() {
            std::ptr::null()
        } else {
            data.as_ptr()
        };
        // SAFETY: the client's decoder with its handle and our bytes.
        let r = unsafe {
            f(
                self.inst.decoder_handle,
                op,
                index as CIndex,
                data.len() as u32,
                p,
                &mut used,
            )
        };
        (crate::convert::resp_from_c(r), (used as usize).min(data.len()))
    }
}

impl TraceComponent for CustomComponent {
    fn protocol_name(&self) -> &str {
        &self.name
    }
    fn attach_packet_printer(&mut self, _printer: PacketPrinter, _monitor: bool) -> Result<(), ErrCode> {
        // The library cannot read a custom packet: the client prints them
        // through a packet callback and `ocsd_pkt_str`.
        Err(ErrCode::DcdInterfaceUnused)
    }
}

/// Registered custom decoders: (name, factory, protocol ID).
static CUSTOM: Mutex<Vec<(String, OcsdExternDcdFact)>> = Mutex::new(Vec::new());

fn custom() -> std::sync::MutexGuard<'static, Vec<(String, OcsdExternDcdFact)>> {
    CUSTOM.lock().unwrap_or_else(|e| e.into_inner())
}

/// The registry decoders are created from: the built-in protocols and the
/// registered custom ones.
pub fn registry() -> DecoderRegistry {
    let mut r = DecoderRegistry::builtin();
    for (name, fact) in custom().iter() {
        let _ = r.register(Arc::new(CustomFactory {
            name: name.clone(),
            fact: *fact,
        }));
    }
    r
}

/// A config struct of a custom protocol as a `SourceConfig`.
pub fn source_config(cfg: *const c_void) -> SourceConfig {
    SourceConfig {
        name: String::new(),
        device_type: String::new(),
        regs: vec![(CFG_PTR_REG.to_string(), cfg as usize as u64)],
        core: None,
    }
}

/// Whether `name` is a registered custom decoder.
pub fn is_custom(name: &str) -> bool {
    custom().iter().any(|(n, _)| n == name)
}

/// `ocsd_register_custom_decoder`.
///
/// # Safety
/// `fact` points at the client's factory struct.
pub unsafe fn register(name: &str, fact: *mut OcsdExternDcdFact) -> OcsdErr {
    let mut list = custom();
    if list.iter().any(|(n, _)| n == name) || DecoderRegistry::builtin().find(name).is_some() {
        return abi::OCSD_ERR_DCDREG_NAME_REPEAT;
    }
    // SAFETY: the client's struct (caller).
    let f = unsafe { &mut *fact };
    if f.create_decoder.is_none() || f.destroy_decoder.is_none() || f.csid_from_config.is_none() {
        return abi::OCSD_ERR_INVALID_PARAM_VAL;
    }
    let id = abi::OCSD_PROTOCOL_CUSTOM_0 + list.len() as c_int;
    if id >= abi::OCSD_PROTOCOL_END {
        return abi::OCSD_ERR_DCDREG_TOOMANY;
    }
    f.protocol_id = id;
    list.push((name.to_string(), *f));
    abi::OCSD_OK
}

/// `ocsd_deregister_decoders`: forgets the custom decoders.
pub fn deregister_all() {
    let mut list = custom();
    list.clear();
    list.shrink_to_fit();
}

/// `ocsd_cust_protocol_to_str`.
///
/// # Safety
/// `pkt` is a packet of the protocol; `buf` holds `len` bytes.
pub unsafe fn protocol_to_str(protocol: c_int, pkt: *const c_void, buf: *mut c_char, len: c_int) -> OcsdErr {
    let f = custom()
        .iter()
        .find(|(_, f)| f.protocol_id == protocol)
        .map(|(_, f)| f.pkt_to_string);
    match f {
        // SAFETY: the client's printer on its own packet and our caller's buffer.
        Some(Some(p)) => unsafe { p(pkt, buf, len) },
        Some(None) => {
            let s = format!("CUSTOM_PKT[]: print unsupported; protocol({protocol}).");
            // SAFETY: the caller's buffer.
            unsafe { crate::convert::copy_out(&s, buf, len) };
            abi::OCSD_OK
        }
        None => abi::OCSD_ERR_NO_PROTOCOL,
    }
}
