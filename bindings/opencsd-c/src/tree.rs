//! The state behind a C decode-tree handle, the library-wide default
//! logger, and the sinks that call back into C.

use std::collections::HashSet;
use std::ffi::{CString, c_int, c_void};
use std::io::Write as _;
use std::sync::{Mutex, MutexGuard};

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::TraceElement;
use coresight_decode::errcode::{Severity, TraceError};
use coresight_decode::interfaces::TrcGenElemIn;
use coresight_decode::logger::{MsgLogger, Shared};
use coresight_decode::tree::DecodeTree;

use crate::abi::{self, FnDefLoggerPrintStrCb, FnTraceElemIn, OcsdErr, OcsdGenericTraceElem};
use crate::convert;

/// The library's default logger (OpenCSD keeps one per process): its
/// verbosity, where its text goes, and the last error it saw.
pub struct DefaultLog {
    pub verbosity: Severity,
    pub out_flags: c_int,
    pub file: Option<std::fs::File>,
    pub last_error: Option<TraceError>,
}

static DEFAULT_LOG: Mutex<DefaultLog> = Mutex::new(DefaultLog {
    verbosity: Severity::Error,
    out_flags: 0,
    file: None,
    last_error: None,
});

/// The default logger. A panic while it was held leaves it usable: its
/// fields are each valid on their own.
pub fn default_log() -> MutexGuard<'static, DefaultLog> {
    DEFAULT_LOG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the default logger writes anywhere (its output flags are not
/// zero), readable without its lock.
pub static DEFAULT_OUTPUT_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Live tree handles: a handle not in here is refused rather than
/// dereferenced.
static HANDLES: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

pub fn register_handle(p: usize) {
    HANDLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashSet::new)
        .insert(p);
}

pub fn unregister_handle(p: usize) -> bool {
    let mut handles = HANDLES.lock().unwrap_or_else(|e| e.into_inner());
    let removed = handles.as_mut().is_some_and(|s| s.remove(&p));
    // With no tree left the table goes too: a program that destroys its
    // trees leaves nothing of the library's allocated at exit.
    if handles.as_ref().is_some_and(HashSet::is_empty) {
        *handles = None;
    }
    removed
}

pub fn is_handle(p: usize) -> bool {
    HANDLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_some_and(|s| s.contains(&p))
}

/// A C string-print callback (`ocsd_def_errlog_set_strprint_cb`).
#[derive(Clone, Copy, Default)]
pub struct PrintCb {
    pub cb: FnDefLoggerPrintStrCb,
    /// The client's context pointer, kept as an address so the sinks that
    /// hold it can move between threads with the tree.
    pub ctx: usize,
}

/// What the C API can do to a decoder it created, whatever its protocol
/// (the packet callbacks attach through it).
pub trait PktAttach: Send {
    /// Attaches a C callback (`OCSD_C_API_CB_PKT_SINK` or `_MON`).
    fn attach(&self, kind: c_int, f: *mut c_void, ctx: usize, text: TextOut) -> OcsdErr;
}

/// Where a tree's printers and error logger write: text is captured, then
/// handed on line by line (each line is one OpenCSD message) to the print
/// callback and the default logger's outputs, in this build's OpenCSD
/// version's wording.
#[derive(Clone)]
pub struct TextOut {
    pub capture: Shared<MsgLogger>,
    pub print: Shared<PrintCb>,
    /// Set when a print callback or default logger output is configured.
    pub readers: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TextOut {
    /// Whether text reaches anyone: a print callback or a default logger
    /// output. Read without locking the capture (the data path asks once
    /// an element).
    pub fn has_reader(&self) -> bool {
        self.readers.load(std::sync::atomic::Ordering::Relaxed)
            || DEFAULT_OUTPUT_ON.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn flush(&self) {
        let text = self.capture.borrow_mut().take_captured();
        if text.is_empty() {
            return;
        }
        let print = *self.print.borrow();
        let mut log = default_log();
        for line in text.split_inclusive('\n') {
            let line = if cfg!(feature = "opencsd-1-8") {
                std::borrow::Cow::Borrowed(line)
            } else {
                convert::to_1_3_text(line)
            };
            if let Some(cb) = print.cb
                && let Ok(c) = CString::new(line.as_bytes())
            {
                // SAFETY: the client registered `cb` for `ctx`; the string
                // is NUL terminated and lives across the call.
                unsafe { cb(print.ctx as *const c_void, c.as_ptr(), line.len() as c_int) };
            }
            if log.out_flags & abi::C_API_MSGLOGOUT_FLG_STDOUT != 0 {
                let _ = std::io::stdout().write_all(line.as_bytes());
            }
            if log.out_flags & abi::C_API_MSGLOGOUT_FLG_STDERR != 0 {
                let _ = std::io::stderr().write_all(line.as_bytes());
            }
            if log.out_flags & abi::C_API_MSGLOGOUT_FLG_FILE != 0
                && let Some(f) = log.file.as_mut()
            {
                let _ = f.write_all(line.as_bytes());
            }
        }
        if log.out_flags & abi::C_API_MSGLOGOUT_FLG_STDOUT != 0 {
            let _ = std::io::stdout().flush();
        }
    }
}

/// One C decode tree.
pub struct CTree {
    pub tree: DecodeTree,
    pub text: TextOut,
    /// Trace ID of the decoder on a single-source tree (slot 0 there).
    pub single_id: Shared<u8>,
    /// The block `ocsd_dt_get_decode_stats` hands out.
    pub stats: Box<abi::OcsdDecodeStats>,
    /// Set when a panic was caught inside the tree: it is not used again.
    pub poisoned: bool,
    /// The decoders this library built, by trace ID (CSID): a handle for
    /// packet callbacks, and the statistics at the last reset.
    pub decoders: Vec<DecoderEntry>,
}

/// A decoder the C API created.
pub struct DecoderEntry {
    pub csid: u8,
    /// `None` for a custom protocol's decoder (no packet struct here).
    pub attach: Option<Box<dyn PktAttach>>,
    /// Statistics at the last `ocsd_dt_reset_decode_stats`.
    pub stats_base: abi::OcsdDecodeStats,
}

/// Sends generic elements to a C callback (`ocsd_dt_set_gen_elem_outfn`).
pub struct ElemCallback {
    pub f: FnTraceElemIn,
    pub ctx: usize,
    pub text: TextOut,
    pub elem: Box<OcsdGenericTraceElem>,
    pub payload: Box<[u8; 8]>,
    pub cache: convert::ElemCache,
}

impl TrcGenElemIn for ElemCallback {
    fn trace_elems_in(&mut self, trace_id: u8, elems: &[(TrcIndex, TraceElement)]) -> (DatapathResp, usize) {
        if self.text.has_reader() {
            return coresight_decode::interfaces::elems_one_by_one(self, trace_id, elems);
        }
        // Nowhere for text to go: a run goes to the callback with no
        // check of the logger between its elements.
        let Some(f) = self.f else {
            return (DatapathResp::Cont, elems.len());
        };
        // The sink's parts borrowed once for the run: the loop then keeps
        // them in registers across the calls into C.
        let (ctx, c, payload, cache) = (
            self.ctx as *const c_void,
            &mut *self.elem,
            &mut *self.payload,
            &mut self.cache,
        );
        // No element counter in the loop (the position comes from the
        // iterator when the client stops early): one register less to
        // spill around the call into C.
        let mut it = elems.iter();
        while let Some((index, elem)) = it.next() {
            if !convert::elem_to_c(elem, c, payload, cache) {
                continue;
            }
            // SAFETY: the client registered `f` for `ctx`; the element
            // lives in this sink for the duration of the call.
            let r = unsafe { f(ctx, *index as abi::TrcIndex, trace_id, &*c) };
            if r != abi::OCSD_RESP_CONT {
                let r = crate::convert::resp_from_c(r);
                if !r.is_cont() {
                    return (r, elems.len() - it.len());
                }
            }
        }
        let n = elems.len();
        (DatapathResp::Cont, n)
    }

    fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
        // Text logged before this element (errors, printers) reaches the
        // client before the element does, as it would from OpenCSD. With
        // nowhere for text to go (perf's decode, for one) there is no
        // order to keep, and the element path skips the logger's lock.
        if self.text.has_reader() {
            self.text.flush();
        }
        let Some(f) = self.f else {
            return DatapathResp::Cont;
        };
        if !convert::elem_to_c(elem, &mut self.elem, &mut self.payload, &mut self.cache) {
            return DatapathResp::Cont;
        }
        // SAFETY: the client registered `f` for `ctx`; the element lives
        // in this sink for the duration of the call.
        let r = unsafe { f(self.ctx as *const c_void, index as abi::TrcIndex, trace_id, &*self.elem) };
        crate::convert::resp_from_c(r)
    }
}
