//! The state behind a C decode-tree handle, the library-wide default
//! logger, and the sinks that call back into C.

use std::collections::HashSet;
use std::ffi::{CString, c_int, c_void};
use std::io::Write as _;
use std::sync::{Mutex, MutexGuard};

use coresight_decode::datapath::{DatapathResp, TrcIndex};
use coresight_decode::element::{ElemType, TraceElement};
use coresight_decode::error::{Severity, TraceError};
use coresight_decode::interfaces::TrcGenElemIn;
use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::Shared;
use coresight_decode::tree::DecodeTree;

use crate::abi::{self, FnDefLoggerPrintStrCb, FnTraceElemIn, OcsdErr, OcsdGenericTraceElem};
use crate::convert;

/// The library's default logger (OpenCSD keeps one per process): its
/// verbosity, where its text goes, and the last error it saw.
pub struct DefaultLog {
    pub verbosity: Severity,
    /// `ocsd_def_errlog_init` has made the output logger (OpenCSD has none
    /// until then, and configuring its output is `OCSD_ERR_NOT_INIT`).
    pub output_logger: bool,
    pub out_flags: c_int,
    pub file: Option<std::fs::File>,
    pub last_error: Option<TraceError>,
}

static DEFAULT_LOG: Mutex<DefaultLog> = Mutex::new(DefaultLog {
    verbosity: Severity::Error,
    output_logger: false,
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

// C's stdio, which the client's own printf shares: library text written
// through it keeps its place among the client's lines whatever the
// buffering (Rust's stdout has a buffer of its own).
unsafe extern "C" {
    static mut stdout: *mut c_void;
    static mut stderr: *mut c_void;
    fn fwrite(ptr: *const c_void, size: usize, n: usize, stream: *mut c_void) -> usize;
    fn fflush(stream: *mut c_void) -> c_int;
}

/// Writes `text` to C's `stdout` (or `stderr`) and flushes it, as
/// OpenCSD's logger does after each message. Before stderr, stdout is
/// flushed: OpenCSD writes to C++'s `cerr`, tied to `cout`.
fn c_stdio_write(to_stderr: bool, text: &[u8]) {
    // SAFETY: libc's streams, read afresh (a client may reopen them);
    // `text` is valid for its length.
    unsafe {
        let out = stdout;
        let f = if to_stderr {
            fflush(out);
            stderr
        } else {
            out
        };
        fwrite(text.as_ptr().cast(), 1, text.len(), f);
        fflush(f);
    }
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
                c_stdio_write(false, line.as_bytes());
            }
            if log.out_flags & abi::C_API_MSGLOGOUT_FLG_STDERR != 0 {
                c_stdio_write(true, line.as_bytes());
            }
            if log.out_flags & abi::C_API_MSGLOGOUT_FLG_FILE != 0
                && let Some(f) = log.file.as_mut()
            {
                let _ = f.write_all(line.as_bytes());
            }
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
    /// The tree has a memory map: OpenCSD makes one at the first
    /// `ocsd_dt_add_*_mem_acc` call, and until then memory calls are
    /// `OCSD_ERR_NOT_INIT` and full decoders cannot start.
    pub mem_mapped: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The frame deformatter's name for errors the C API finds in its
    /// input (made at the first).
    pub dfmt_err: Option<coresight_decode::logger::ErrLink>,
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

impl ElemCallback {
    /// A sink calling `f` with `ctx`, its element [range
    /// ready](convert::set_range_ready) from the start.
    pub fn new(f: FnTraceElemIn, ctx: usize, text: TextOut) -> Self {
        let mut elem = Box::<OcsdGenericTraceElem>::default();
        convert::set_range_ready(&mut elem);
        ElemCallback {
            f,
            ctx,
            text,
            elem,
            payload: Box::new([0; 8]),
            cache: convert::ElemCache::default(),
        }
    }

    /// Hands one element other than an instruction range to the callback
    /// (rare: kept out of the range loop, which passes only the pair's
    /// address), then leaves the sink's element [range
    /// ready](convert::set_range_ready) again.
    #[inline(never)]
    fn other_to_c(&mut self, pair: &(TrcIndex, TraceElement), trace_id: u8) -> abi::OcsdResp {
        self.other_elem_to_c(pair.0, &pair.1, trace_id)
    }

    /// [`other_to_c`](Self::other_to_c) with the index and element apart.
    #[inline(always)]
    fn other_elem_to_c(&mut self, index: TrcIndex, elem: &TraceElement, trace_id: u8) -> abi::OcsdResp {
        let mut r = abi::OCSD_RESP_CONT;
        if let Some(f) = self.f
            && convert::elem_to_c_full(elem, &mut self.elem, &mut self.payload, &mut self.cache)
        {
            // SAFETY: the client registered `f` for `ctx`; the element
            // lives in this sink for the duration of the call.
            r = unsafe { f(self.ctx as *const c_void, index as abi::TrcIndex, trace_id, &*self.elem) };
        }
        convert::set_range_ready(&mut self.elem);
        r
    }
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
        let ctx = self.ctx as *const c_void;
        // No element counter in the loop (the position comes from the
        // iterator when the client stops early): one register less to
        // keep across the call into C.
        let mut it = elems.iter();
        while let Some(pair) = it.next() {
            let (index, elem) = pair;
            let r = if elem.elem_type == ElemType::InstrRange {
                // The sink's element is range ready between elements
                // (set so where made, and again after any other kind).
                let c = &mut *self.elem;
                debug_assert!(convert::is_range_ready(c));
                convert::range_fields_to_c(elem, c);
                // SAFETY: the client registered `f` for `ctx`; the element
                // lives in this sink for the duration of the call.
                unsafe { f(ctx, *index as abi::TrcIndex, trace_id, &*c) }
            } else {
                self.other_to_c(pair, trace_id)
            };
            if r != abi::OCSD_RESP_CONT {
                let r = crate::convert::resp_from_c(r);
                if !r.is_cont() {
                    return (r, elems.len() - it.len());
                }
            }
        }
        (DatapathResp::Cont, elems.len())
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
        if elem.elem_type != ElemType::InstrRange {
            return crate::convert::resp_from_c(self.other_elem_to_c(index, elem, trace_id));
        }
        convert::range_fields_to_c(elem, &mut self.elem);
        // SAFETY: the client registered `f` for `ctx`; the element lives
        // in this sink for the duration of the call.
        let r = unsafe { f(self.ctx as *const c_void, index as abi::TrcIndex, trace_id, &*self.elem) };
        crate::convert::resp_from_c(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{elem, flag};
    use coresight_decode::arch::{InstrSubType, InstrType, Isa};
    use coresight_decode::shared::shared;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    /// What the callback read of one element: the fields its kind uses.
    #[derive(Debug, PartialEq)]
    struct Seen {
        idx: abi::TrcIndex,
        id: u8,
        elem_type: u32,
        isa: u32,
        addrs: (u64, u64),
        word: u32,
        last_i: (u32, u32),
        flags: u32,
        cc: Option<u32>,
        ts: Option<u64>,
        extended: Option<u8>,
    }

    unsafe extern "C" fn record(
        ctx: *const c_void,
        idx: abi::TrcIndex,
        id: u8,
        e: *const OcsdGenericTraceElem,
    ) -> abi::OcsdResp {
        // SAFETY: the test registered a `Vec<Seen>` as context; the sink
        // hands a valid element for the duration of the call.
        let (out, e) = unsafe { (&mut *(ctx as *mut Vec<Seen>), &*e) };
        out.push(Seen {
            idx,
            id,
            elem_type: e.elem_type,
            isa: e.isa,
            addrs: (e.st_addr, e.en_addr),
            // SAFETY: every payload member is plain integers.
            word: unsafe { e.payload.word },
            last_i: (e.last_i_type, e.last_i_subtype),
            flags: e.flag_bits,
            cc: (e.flag_bits & flag::HAS_CC != 0).then_some(e.cycle_count),
            ts: (e.flag_bits & flag::HAS_TS != 0).then_some(e.timestamp),
            // SAFETY: with the flag set the pointer holds the payload.
            extended: (e.flag_bits & flag::EXTENDED_DATA != 0).then(|| unsafe { *e.ptr_extended_data.cast::<u8>() }),
        });
        abi::OCSD_RESP_CONT
    }

    fn range(st: u64, n: u32, exec: bool) -> TraceElement {
        let mut e = TraceElement::new(ElemType::InstrRange);
        e.isa = Isa::Aarch64;
        e.st_addr = st;
        e.en_addr = st + 4 * n as u64;
        e.num_instr_range = n;
        e.last_i_type = InstrType::Branch;
        e.last_i_subtype = InstrSubType::BranchLink;
        e.last_instr_exec = exec;
        e.last_instr_sz = 4;
        e
    }

    fn seen_range(idx: abi::TrcIndex, st: u64, n: u32, exec: bool) -> Seen {
        Seen {
            idx,
            id: 0x10,
            elem_type: elem::INSTR_RANGE,
            isa: 2,
            addrs: (st, st + 4 * n as u64),
            word: n,
            last_i: (1, 1),
            flags: exec as u32 | 4 << flag::LAST_INSTR_SZ_SHIFT,
            cc: None,
            ts: None,
            extended: None,
        }
    }

    /// Ranges after other kinds (a software trace element with extended
    /// data, a range with a cycle count and timestamp) carry only their own
    /// flags and no extended data, whether they come in a run or one by
    /// one (as when text has a reader).
    #[test]
    fn ranges_after_other_kinds_carry_their_own_fields() {
        let mut sw = TraceElement::new(ElemType::SwTrace);
        sw.sw_trace.payload_bits = 8;
        sw.sw_trace.payload_num_packets = 1;
        sw.sw_payload = 0xa5;
        let mut timed = range(0x3000, 3, false);
        timed.set_cycle_count(77);
        timed.timestamp = 0x1234;
        timed.has_ts = true;
        let elems = [
            (1, range(0x1000, 2, true)),
            (2, sw),
            (3, range(0x2000, 5, false)),
            (4, timed),
            (5, range(0x4000, 1, true)),
        ];
        let mut timed_seen = seen_range(4, 0x3000, 3, false);
        timed_seen.flags |= flag::HAS_CC | flag::HAS_TS;
        timed_seen.cc = Some(77);
        timed_seen.ts = Some(0x1234);
        for by_run in [true, false] {
            let mut out: Vec<Seen> = Vec::new();
            let readers = Arc::new(AtomicBool::new(!by_run));
            let text = TextOut {
                capture: shared(MsgLogger::capture()),
                print: shared(PrintCb::default()),
                readers,
            };
            let mut sink = ElemCallback::new(Some(record), &mut out as *mut Vec<Seen> as usize, text);
            assert_eq!(sink.trace_elems_in(0x10, &elems), (DatapathResp::Cont, 5));
            assert!(convert::is_range_ready(&sink.elem));
            drop(sink);
            assert_eq!(out.len(), 5, "by run: {by_run}");
            assert_eq!(out[0], seen_range(1, 0x1000, 2, true));
            assert_eq!(out[1].elem_type, elem::SWTRACE);
            assert_eq!(out[1].extended, Some(0xa5));
            assert_eq!(out[2], seen_range(3, 0x2000, 5, false));
            assert_eq!(out[3], timed_seen);
            assert_eq!(out[4], seen_range(5, 0x4000, 1, true));
        }
    }
}
