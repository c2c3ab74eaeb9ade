//! Calls where this library once answered differently from OpenCSD's
//! (issue 49, items 18-21), through the exported functions, with what
//! Debian's libopencsd1 1.3.3 (and OpenCSD 1.8.0 built from source) answer
//! to the same calls (`ctest/api_diffs.c` makes them from C;
//! `scripts/check.sh ctest` compares its lines with Debian's library's).
//! The trace is the `etmv4-a64` snapshot's (formatted, ETMv4 on trace ID
//! 0x15, two code images).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

use opencsd_c_api::abi::*;
use opencsd_c_api::*;

fn snapshot() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/etmv4-a64")
}

fn trace() -> Vec<u8> {
    std::fs::read(snapshot().join("trace.bin")).unwrap()
}

/// The snapshot's ETMv4 configuration.
fn etm_cfg() -> OcsdEtmv4Cfg {
    OcsdEtmv4Cfg {
        reg_idr0: 0x20000EC1,
        reg_idr1: 0x4100F411,
        reg_idr2: 0x04001088,
        reg_idr8: 0,
        reg_idr9: 0,
        reg_idr10: 0,
        reg_idr11: 0,
        reg_idr12: 0,
        reg_idr13: 0,
        reg_configr: 0x1081,
        reg_traceidr: 0x15,
        arch_ver: 0x0800,
        core_prof: 3,
    }
}

const ETMV4I: &CStr = c"ETMV4I";

/// What the callbacks saw, the tree's text among it.
#[derive(Default)]
struct Seen {
    text: String,
    elems: usize,
    /// Answer WAIT to the end-of-trace element (once).
    wait_on_eot: bool,
    mon_ops: [usize; 4],
    pkts: Vec<String>,
}

unsafe extern "C" fn text_cb(ctx: *const c_void, msg: *const c_char, len: c_int) {
    // SAFETY: a `Seen` context; `len` bytes at `msg`.
    unsafe {
        let s = &mut *(ctx as *mut Seen);
        let b = std::slice::from_raw_parts(msg.cast::<u8>(), len as usize);
        s.text.push_str(std::str::from_utf8(b).unwrap());
    }
}

unsafe extern "C" fn elem_cb(ctx: *const c_void, _idx: TrcIndex, _id: u8, e: *const OcsdGenericTraceElem) -> c_int {
    // SAFETY: a `Seen` context and the library's element.
    let (s, e) = unsafe { (&mut *(ctx as *mut Seen), &*e) };
    s.elems += 1;
    if e.elem_type == abi::elem::EO_TRACE && s.wait_on_eot {
        s.wait_on_eot = false;
        return 3; // OCSD_RESP_WAIT
    }
    OCSD_RESP_CONT
}

unsafe extern "C" fn mon_cb(ctx: *const c_void, op: c_int, _idx: TrcIndex, _p: *const c_void, _n: u32, _d: *const u8) {
    // SAFETY: a `Seen` context.
    let s = unsafe { &mut *(ctx as *mut Seen) };
    s.mon_ops[op as usize] += 1;
}

unsafe extern "C" fn pkt_cb(ctx: *const c_void, op: c_int, idx: TrcIndex, pkt: *const c_void) -> c_int {
    // SAFETY: a `Seen` context; the library's ETMv4 packet.
    unsafe {
        let s = &mut *(ctx as *mut Seen);
        let mut buf = [0 as c_char; 512];
        if op == 0 && ocsd_pkt_str(OCSD_PROTOCOL_ETMV4I, pkt, buf.as_mut_ptr(), 512) == OCSD_OK {
            let t = CStr::from_ptr(buf.as_ptr()).to_str().unwrap();
            s.pkts.push(format!("{idx}: {t}"));
        }
    }
    OCSD_RESP_CONT
}

/// A formatted, memory-aligned tree with the snapshot's ETMv4 as a full
/// decoder, its text and elements going to `seen`.
fn etm_tree(seen: &mut Seen) -> TreeHandle {
    let t = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
    assert!(!t.is_null());
    let cfg = etm_cfg();
    let mut csid = 0u8;
    let ctx: *mut Seen = seen;
    // SAFETY: the ETMv4 config struct and an ID location.
    let e = unsafe {
        ocsd_dt_create_decoder(
            t,
            ETMV4I.as_ptr(),
            OCSD_CREATE_FLG_FULL_DECODER,
            (&cfg as *const OcsdEtmv4Cfg).cast(),
            &mut csid,
        )
    };
    assert_eq!((e, csid), (OCSD_OK, 0x15));
    assert_eq!(ocsd_def_errlog_set_strprint_cb(t, ctx.cast(), Some(text_cb)), OCSD_OK);
    assert_eq!(ocsd_dt_set_gen_elem_outfn(t, Some(elem_cb), ctx.cast()), OCSD_OK);
    t
}

/// The snapshot's two code images.
fn add_code(t: TreeHandle) {
    for (at, f) in [(0xFFFFFFC000080000u64, "code0.bin"), (0xFFFFFFC000010800, "code1.bin")] {
        let path = CString::new(snapshot().join(f).to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(
            unsafe { ocsd_dt_add_binfile_mem_acc(t, at, 0x1f, path.as_ptr()) },
            OCSD_OK
        );
    }
}

/// Sends `data` in one block: the response and the bytes taken.
fn data(t: TreeHandle, data: &[u8]) -> (c_int, u32) {
    let mut used = 0;
    // SAFETY: `data` holds its length in bytes.
    let r = unsafe { ocsd_dt_process_data(t, 0, 0, data.len() as u32, data.as_ptr(), &mut used) };
    (r, used)
}

fn op(t: TreeHandle, op: c_int) -> c_int {
    // SAFETY: no data with EOT or FLUSH.
    unsafe { ocsd_dt_process_data(t, op, 0, 0, std::ptr::null(), std::ptr::null_mut()) }
}

/// Item 18: the element callback answers WAIT on the last element (the
/// end of trace), the client flushes it out and sends nothing more; the
/// packet monitor has been told of the end of trace (Debian's 1.3.3 and
/// 1.8.0: EOT answers 3, the flush 0, 115 elements, 114 packets and one
/// EOT to the monitor).
#[test]
fn the_monitor_sees_the_end_of_trace_when_the_last_element_waits() {
    let mut seen = Box::new(Seen {
        wait_on_eot: true,
        ..Seen::default()
    });
    let t = etm_tree(&mut seen);
    add_code(t);
    let ctx: *mut Seen = &mut *seen;
    assert_eq!(
        ocsd_dt_attach_packet_callback(t, 0x15, OCSD_C_API_CB_PKT_MON, mon_cb as *mut c_void, ctx.cast()),
        OCSD_OK
    );
    let trace = trace();
    assert_eq!(data(t, &trace), (OCSD_RESP_CONT, trace.len() as u32));
    assert_eq!(op(t, 1), 3);
    assert_eq!(op(t, 2), OCSD_RESP_CONT);
    ocsd_destroy_dcd_tree(t);
    assert_eq!(seen.elems, 115);
    assert_eq!(seen.mon_ops, [114, 1, 0, 0]);
}

/// Item 20: a full decoder on a tree that never had memory added stops at
/// its first packet (after the first 16-byte frame), as OpenCSD's: fatal
/// not-initialised, with the decoder's error.
#[test]
fn a_full_decoder_without_memory_is_not_initialised() {
    let mut seen = Box::new(Seen::default());
    let t = etm_tree(&mut seen);
    assert_eq!(data(t, &trace()), (OCSD_RESP_FATAL_NOT_INIT, 16));
    ocsd_destroy_dcd_tree(t);
    assert_eq!(
        seen.text,
        "DCD_ETMV4_0021 : 0x0003 (OCSD_ERR_NOT_INIT) [Component not initialised.]; \
         No memory access interface attached and enabled"
    );
    assert_eq!(seen.elems, 0);
}

/// Item 20: a memory-aligned tree takes whole 16-byte frames only; a
/// block of another size is refused whole (fatal invalid data, nothing
/// taken) with the deformatter's error.
#[test]
fn a_memory_aligned_tree_refuses_a_cut_frame() {
    let mut seen = Box::new(Seen::default());
    let t = etm_tree(&mut seen);
    add_code(t);
    assert_eq!(data(t, &trace()[..40]), (9, 0));
    ocsd_destroy_dcd_tree(t);
    assert_eq!(
        seen.text,
        "DFMT_CSFRAMES : 0x0006 (OCSD_ERR_INVALID_PARAM_VAL) [Invalid value parameter passed to component.]; \
         Input block incorrect size, must be 16 byte multiple"
    );
    assert_eq!(seen.elems, 0);
}

/// Items 20 and 21: until memory is first added a tree has no memory map:
/// listing the mapped ranges prints nothing and removing an accessor is
/// OCSD_ERR_NOT_INIT; after, the heading is listed and an address no image
/// holds is OCSD_ERR_INVALID_PARAM_VAL.
#[test]
fn no_memory_map_before_memory_is_added() {
    let mut seen = Box::new(Seen::default());
    let t = etm_tree(&mut seen);
    ocsd_tl_log_mapped_mem_ranges(t);
    assert_eq!(seen.text, "");
    assert_eq!(ocsd_dt_remove_mem_acc(t, 0x1000, 0x1f), OCSD_ERR_NOT_INIT);
    let bytes = [0u8; 16];
    // SAFETY: a 16-byte buffer.
    assert_eq!(
        unsafe { ocsd_dt_add_buffer_mem_acc(t, 0x8000, 0x1f, bytes.as_ptr(), 16) },
        OCSD_OK
    );
    assert_eq!(ocsd_dt_remove_mem_acc(t, 0x1000, 0x1f), OCSD_ERR_INVALID_PARAM_VAL);
    assert_eq!(ocsd_dt_remove_mem_acc(t, 0x8000, 0x1f), OCSD_OK);
    ocsd_tl_log_mapped_mem_ranges(t);
    ocsd_destroy_dcd_tree(t);
    assert_eq!(
        seen.text,
        "Gen_Info : Mapped Memory Accessors\nGen_Info : ========================\n"
    );
}

/// Item 21: OpenCSD's codes for decoder creation and statistics. Flags
/// asking for neither a packet processor nor a full decoder are an
/// invalid value; so is a null ID pointer (which crashes OpenCSD), and
/// neither makes a decoder. An unknown source type makes a tree without
/// a frame deformatter. Statistics of an ID with no decoder are an
/// invalid value.
#[test]
fn decoder_creation_and_statistics_codes() {
    let cfg = etm_cfg();
    let p: *const c_void = (&cfg as *const OcsdEtmv4Cfg).cast();
    let t = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
    let mut csid = 0x99u8;
    // SAFETY: the ETMv4 config struct; an ID location or null.
    unsafe {
        assert_eq!(
            ocsd_dt_create_decoder(t, ETMV4I.as_ptr(), 0, p, &mut csid),
            OCSD_ERR_INVALID_PARAM_VAL
        );
        assert_eq!(csid, 0x99);
        assert_eq!(
            ocsd_dt_create_decoder(
                t,
                ETMV4I.as_ptr(),
                OCSD_CREATE_FLG_FULL_DECODER,
                p,
                std::ptr::null_mut()
            ),
            OCSD_ERR_INVALID_PARAM_VAL
        );
        assert_eq!(
            ocsd_dt_create_decoder(t, ETMV4I.as_ptr(), OCSD_CREATE_FLG_FULL_DECODER, p, &mut csid),
            OCSD_OK
        );
        assert_eq!(csid, 0x15);
        let mut stats: *mut OcsdDecodeStats = std::ptr::null_mut();
        assert_eq!(ocsd_dt_get_decode_stats(t, 0x15, &mut stats), OCSD_OK);
        assert_eq!(
            ocsd_dt_get_decode_stats(t, 0x33, &mut stats),
            OCSD_ERR_INVALID_PARAM_VAL
        );
        assert_eq!(ocsd_dt_reset_decode_stats(t, 0x33), OCSD_ERR_INVALID_PARAM_VAL);
    }
    ocsd_destroy_dcd_tree(t);

    // Source type 5: a tree like a single-source one, its decoder in slot 0.
    let t = ocsd_create_dcd_tree(5, 0);
    assert!(!t.is_null());
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            ocsd_dt_create_decoder(t, ETMV4I.as_ptr(), OCSD_CREATE_FLG_PACKET_PROC, p, &mut csid),
            OCSD_OK
        );
    }
    let mut seen = Box::new(Seen::default());
    let ctx: *mut Seen = &mut *seen;
    assert_eq!(
        ocsd_dt_attach_packet_callback(t, 0, OCSD_C_API_CB_PKT_SINK, pkt_cb as *mut c_void, ctx.cast()),
        OCSD_OK
    );
    // Unformatted: the ETMv4 bytes of the snapshot's first frame.
    assert_eq!(data(t, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]).0, OCSD_RESP_CONT);
    ocsd_destroy_dcd_tree(t);
    assert_eq!(seen.pkts, ["0: I_ASYNC : Alignment Synchronisation."]);
}

fn err_str(code: c_int) -> String {
    let mut buf = [0 as c_char; 256];
    // SAFETY: a 256-byte buffer.
    unsafe {
        ocsd_err_str(code, buf.as_mut_ptr(), 256);
        CStr::from_ptr(buf.as_ptr()).to_str().unwrap().to_string()
    }
}

/// Item 21: `ocsd_err_str` gives OpenCSD's error string: "; " after the
/// description, and "(unknown)" for a code it has no name for (from 44 in
/// 1.3.x, which has no OCSD_ERR_INVALID_OPCODE).
#[test]
fn error_strings_in_opencsd_form() {
    assert_eq!(err_str(0), "0x0000 (OCSD_OK) [No Error.]; ");
    assert_eq!(
        err_str(4),
        "0x0004 (OCSD_ERR_INVALID_ID) [Invalid CoreSight Trace Source ID.]; "
    );
    assert_eq!(err_str(0x50), "0x0050 (unknown); ");
    assert_eq!(err_str(0x1234), "0x1234 (unknown); ");
    if cfg!(feature = "opencsd-1-8") {
        assert_eq!(
            err_str(44),
            "0x002c (OCSD_ERR_INVALID_OPCODE) [Illegal Opode found while decoding program memory.]; "
        );
    } else {
        assert_eq!(err_str(44), "0x002c (unknown); ");
    }
}

/// Item 21: an `I_ADDR_CTXT_L_32IS1` packet through `ocsd_pkt_str`: 1.3.3
/// describes it with the IS0 packet's words, 1.8.0 with its own.
#[test]
fn address_and_context_32_bit_is1_text() {
    let t = ocsd_create_dcd_tree(OCSD_TRC_SRC_SINGLE, 0);
    let cfg = etm_cfg();
    let mut csid = 0u8;
    // SAFETY: the ETMv4 config struct and an ID location.
    let e = unsafe {
        ocsd_dt_create_decoder(
            t,
            ETMV4I.as_ptr(),
            OCSD_CREATE_FLG_PACKET_PROC,
            (&cfg as *const OcsdEtmv4Cfg).cast(),
            &mut csid,
        )
    };
    assert_eq!(e, OCSD_OK);
    let mut seen = Box::new(Seen::default());
    let ctx: *mut Seen = &mut *seen;
    assert_eq!(
        ocsd_dt_attach_packet_callback(t, csid, OCSD_C_API_CB_PKT_SINK, pkt_cb as *mut c_void, ctx.cast()),
        OCSD_OK
    );
    let pkts = [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, // I_ASYNC
        0x01, 0x00, // I_TRACE_INFO
        0x83, 0x01, 0x9a, 0x4f, 0x00, 0x00, // I_ADDR_CTXT_L_32IS1
    ];
    assert_eq!(data(t, &pkts), (OCSD_RESP_CONT, pkts.len() as u32));
    assert_eq!(op(t, 1), OCSD_RESP_CONT);
    ocsd_destroy_dcd_tree(t);
    let is = if cfg!(feature = "opencsd-1-8") { "IS1" } else { "IS0" };
    assert_eq!(
        seen.pkts[2],
        format!(
            "14: I_ADDR_CTXT_L_32IS1 : Address & Context, Long, 32 bit, {is}.; \
             Addr=0x00000000004F9A02; Ctxt: AArch32, EL0, S; "
        )
    );
}

// ---- the default logger: one process-wide, so each case runs alone in a
// child process (this test binary again, running `default_logger_child`).

const CHILD: &str = "OCSD_DIFFS_CHILD";

unsafe extern "C" {
    fn printf(fmt: *const c_char, ...) -> c_int;
}

fn c_printf(s: &CStr) {
    // SAFETY: a format with one string argument.
    unsafe { printf(c"%s".as_ptr(), s.as_ptr()) };
}

/// Runs the child case `case` with stdout and stderr to files (one file
/// for both with `one_file`); returns them.
fn run_child(case: &str, one_file: bool) -> (String, String) {
    let dir = std::env::temp_dir().join(format!("ocsd-diffs-{}-{case}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, err) = (dir.join("out"), dir.join("err"));
    let out_file = std::fs::File::create(&out).unwrap();
    let err_file = if one_file {
        out_file.try_clone().unwrap()
    } else {
        std::fs::File::create(&err).unwrap()
    };
    let st = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "default_logger_child",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(CHILD, case)
        .stdout(out_file)
        .stderr(err_file)
        .status()
        .unwrap();
    let r = (
        std::fs::read_to_string(&out).unwrap(),
        std::fs::read_to_string(&err).unwrap_or_default(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(st.success(), "child {case} failed:\n{}\n{}", r.0, r.1);
    r
}

fn config_output(flags: c_int) -> c_int {
    // SAFETY: no file name.
    unsafe { ocsd_def_errlog_config_output(flags, std::ptr::null()) }
}

fn last_err() -> (c_int, String) {
    let mut idx = 0;
    let mut id = 0;
    let mut msg = [0 as c_char; 256];
    // SAFETY: output locations and a 256-byte buffer.
    unsafe {
        let e = ocsd_get_last_err(&mut idx, &mut id, msg.as_mut_ptr(), 256);
        (e, CStr::from_ptr(msg.as_ptr()).to_str().unwrap().to_string())
    }
}

/// Not a test of its own: the body of the child processes.
#[test]
fn default_logger_child() {
    let Ok(case) = std::env::var(CHILD) else {
        return;
    };
    let mut seen = Box::new(Seen::default());
    match case.as_str() {
        "init" => {
            // No output logger before `ocsd_def_errlog_init(.., 1)`.
            assert_eq!(config_output(C_API_MSGLOGOUT_FLG_STDOUT), 3);
            assert_eq!(ocsd_def_errlog_init(1, 0), OCSD_OK);
            assert_eq!(config_output(C_API_MSGLOGOUT_FLG_STDOUT), 3);
            assert_eq!(ocsd_def_errlog_init(1, 1), OCSD_OK);
            // The new output logger writes to stderr.
            let t = etm_tree(&mut seen);
            assert_eq!(ocsd_def_errlog_set_strprint_cb(t, std::ptr::null_mut(), None), OCSD_OK);
            assert_eq!(data(t, &trace()).0, OCSD_RESP_FATAL_NOT_INIT);
            ocsd_destroy_dcd_tree(t);
            assert_eq!(
                last_err(),
                (
                    OCSD_ERR_NOT_INIT,
                    "0x0003 (OCSD_ERR_NOT_INIT) [Component not initialised.]; \
                     No memory access interface attached and enabled"
                        .to_string()
                )
            );
        }
        "stdio" => {
            assert_eq!(ocsd_def_errlog_init(1, 1), OCSD_OK);
            assert_eq!(config_output(C_API_MSGLOGOUT_FLG_STDOUT), OCSD_OK);
            c_printf(c"| before\n");
            let t = etm_tree(&mut seen);
            assert_eq!(ocsd_def_errlog_set_strprint_cb(t, std::ptr::null_mut(), None), OCSD_OK);
            add_code(t);
            assert_eq!(data(t, &trace()[..40]), (9, 0));
            c_printf(c"| after\n");
            // SAFETY: a NUL-terminated message.
            unsafe { ocsd_def_errlog_msgout(c"| message\n".as_ptr()) };
            ocsd_destroy_dcd_tree(t);
        }
        "tied" => {
            // Text for stderr first flushes stdout (OpenCSD's `cerr` is
            // tied to `cout`).
            assert_eq!(ocsd_def_errlog_init(1, 1), OCSD_OK);
            c_printf(c"| before\n");
            let t = etm_tree(&mut seen);
            assert_eq!(ocsd_def_errlog_set_strprint_cb(t, std::ptr::null_mut(), None), OCSD_OK);
            assert_eq!(data(t, &trace()).0, OCSD_RESP_FATAL_NOT_INIT);
            ocsd_destroy_dcd_tree(t);
        }
        other => panic!("no child case {other}"),
    }
}

/// Item 19: `ocsd_def_errlog_init(sev, 1)` makes an output logger that
/// writes to stderr (OpenCSD's default), and configuring output before it
/// is OCSD_ERR_NOT_INIT.
#[test]
fn the_default_output_logger_writes_to_stderr() {
    let (_, err) = run_child("init", false);
    assert_eq!(
        err,
        "DCD_ETMV4_0021 : 0x0003 (OCSD_ERR_NOT_INIT) [Component not initialised.]; \
         No memory access interface attached and enabled"
    );
}

/// Item 19: library text goes through C's stdout, in order with the
/// program's own printf lines when stdout is a file (fully buffered).
#[test]
fn library_text_keeps_its_place_among_printf_lines() {
    let (out, _) = run_child("stdio", false);
    let at = out.find("| before").unwrap_or_else(|| panic!("{out}"));
    let expected = "| before\n\
         DFMT_CSFRAMES : 0x0006 (OCSD_ERR_INVALID_PARAM_VAL) [Invalid value parameter passed to component.]; \
         Input block incorrect size, must be 16 byte multiple| after\n\
         | message\n";
    assert!(out[at..].starts_with(expected), "{out}");
}

/// Item 19: with stdout and stderr in one file, the program's lines
/// before the library's stderr text come before it.
#[test]
fn stderr_text_follows_the_programs_earlier_lines() {
    let (out, _) = run_child("tied", true);
    let at = out.find("| before").unwrap_or_else(|| panic!("{out}"));
    let expected = "| before\n\
         DCD_ETMV4_0021 : 0x0003 (OCSD_ERR_NOT_INIT) [Component not initialised.]; \
         No memory access interface attached and enabled";
    assert!(out[at..].starts_with(expected), "{out}");
}
