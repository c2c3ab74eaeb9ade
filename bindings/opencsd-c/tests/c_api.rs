//! The exported functions called as C would call them, with nothing
//! installed: the project's own snapshots decoded through the C API with
//! the library's printers must list what `trc_pkt_lister` lists
//! (`expected.ppl` beside each snapshot), in this build's OpenCSD text.

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

use opencsd_c_api::abi::*;
use opencsd_c_api::*;

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../snapshots")
}

unsafe extern "C" fn collect(ctx: *const c_void, msg: *const c_char, len: c_int) {
    // SAFETY: the test registered a `String` as context; `msg` holds `len`
    // bytes.
    unsafe {
        let out = &mut *(ctx as *mut String);
        let bytes = std::slice::from_raw_parts(msg.cast::<u8>(), len as usize);
        out.push_str(std::str::from_utf8(bytes).unwrap());
    }
}

fn num(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// Decodes `name` through the C API; returns the listing text.
fn decode_through_c_api(name: &str) -> String {
    decode_with(name, |_, _, _| {})
}

/// Decodes `name` through the C API, calling `setup` with the tree, the
/// decoders' trace IDs and the memory images' (address, memory space)
/// before the data goes in; returns the listing text.
fn decode_with(name: &str, setup: impl FnOnce(TreeHandle, &[u8], &[(u64, c_int)])) -> String {
    let dir = snapshots().join(name);
    let man = Command::new(env!("CARGO_BIN_EXE_ocsd_snapshot_manifest"))
        .arg(&dir)
        .output()
        .unwrap();
    assert!(man.status.success());
    let man = String::from_utf8(man.stdout).unwrap();
    let mut text = Box::new(String::new());
    let mut tree: TreeHandle = std::ptr::null_mut();
    let mut trace = Vec::new();
    let mut single = false;
    let (mut ids, mut images) = (Vec::new(), Vec::new());
    for line in man.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[0] {
            "buffer" => {
                single = w[1] == "single";
                let src = if single {
                    OCSD_TRC_SRC_SINGLE
                } else {
                    OCSD_TRC_SRC_FRAME_FORMATTED
                };
                tree = ocsd_create_dcd_tree(src, num(w[2]) as u32);
                assert!(!tree.is_null());
                let ctx: *mut String = &mut *text;
                assert_eq!(
                    ocsd_def_errlog_set_strprint_cb(tree, ctx.cast(), Some(collect)),
                    OCSD_OK
                );
                for f in &w[3..] {
                    trace.extend(std::fs::read(f).unwrap());
                }
            }
            "decoder" => {
                let v: Vec<u32> = w[2..].iter().map(|s| num(s) as u32).collect();
                let mut csid = 0u8;
                let name = CString::new(w[1]).unwrap();
                let flags = OCSD_CREATE_FLG_FULL_DECODER;
                // SAFETY: each config struct is the named protocol's.
                let err = unsafe {
                    match w[1] {
                        "ETMV4I" => {
                            let c = OcsdEtmv4Cfg {
                                reg_idr0: v[0],
                                reg_idr1: v[1],
                                reg_idr2: v[2],
                                reg_idr8: v[3],
                                reg_idr9: v[4],
                                reg_idr10: v[5],
                                reg_idr11: v[6],
                                reg_idr12: v[7],
                                reg_idr13: v[8],
                                reg_configr: v[9],
                                reg_traceidr: v[10],
                                arch_ver: v[11] as i32,
                                core_prof: v[12] as i32,
                            };
                            ocsd_dt_create_decoder(
                                tree,
                                name.as_ptr(),
                                flags,
                                (&c as *const OcsdEtmv4Cfg).cast(),
                                &mut csid,
                            )
                        }
                        "ETE" => {
                            let c = OcsdEteCfg {
                                reg_idr0: v[0],
                                reg_idr1: v[1],
                                reg_idr2: v[2],
                                reg_idr8: v[3],
                                reg_devarch: v[4],
                                reg_configr: v[5],
                                reg_traceidr: v[6],
                                arch_ver: v[7] as i32,
                                core_prof: v[8] as i32,
                            };
                            ocsd_dt_create_decoder(
                                tree,
                                name.as_ptr(),
                                flags,
                                (&c as *const OcsdEteCfg).cast(),
                                &mut csid,
                            )
                        }
                        "ETMV3" | "PTM" => {
                            let c = OcsdEtmv3Cfg {
                                reg_idr: v[0],
                                reg_ctrl: v[1],
                                reg_ccer: v[2],
                                reg_trc_id: v[3],
                                arch_ver: v[4] as i32,
                                core_prof: v[5] as i32,
                            };
                            ocsd_dt_create_decoder(
                                tree,
                                name.as_ptr(),
                                flags,
                                (&c as *const OcsdEtmv3Cfg).cast(),
                                &mut csid,
                            )
                        }
                        "ITM" => {
                            let c = OcsdItmCfg { reg_tcr: v[0] };
                            ocsd_dt_create_decoder(
                                tree,
                                name.as_ptr(),
                                flags,
                                (&c as *const OcsdItmCfg).cast(),
                                &mut csid,
                            )
                        }
                        other => panic!("no test config for {other}"),
                    }
                };
                assert_eq!(err, OCSD_OK, "creating {}", w[1]);
                ids.push(csid);
                // As trc_pkt_lister: a single-source tree's decoder is
                // named by its slot, 0 (the printer prints the ID it is given).
                let id = if single { 0 } else { csid };
                assert_eq!(ocsd_dt_set_pkt_protocol_printer(tree, id, 1), OCSD_OK);
            }
            "mem" => {
                let region = OcsdFileMemRegion {
                    file_offset: num(w[3]) as usize,
                    start_address: num(w[2]),
                    region_size: num(w[4]) as usize,
                };
                let path = CString::new(w[5]).unwrap();
                // SAFETY: one region, a NUL-terminated path.
                let err =
                    unsafe { ocsd_dt_add_binfile_region_mem_acc(tree, &region, 1, num(w[1]) as c_int, path.as_ptr()) };
                assert_eq!(err, OCSD_OK);
                images.push((num(w[2]), num(w[1]) as c_int));
            }
            _ => {}
        }
    }
    assert_eq!(ocsd_dt_set_gen_elem_printer(tree), OCSD_OK);
    setup(tree, &ids, &images);
    let mut pos = 0usize;
    while pos < trace.len() {
        let mut used = 0u32;
        let block = (trace.len() - pos).min(1000) as u32;
        // SAFETY: `block` bytes at `pos` of the buffer.
        let r = unsafe { ocsd_dt_process_data(tree, 0, pos as TrcIndex, block, trace[pos..].as_ptr(), &mut used) };
        assert!(r < 6, "fatal response {r}");
        pos += used as usize;
    }
    // SAFETY: end of trace takes no data.
    unsafe { ocsd_dt_process_data(tree, 1, 0, 0, std::ptr::null(), std::ptr::null_mut()) };
    ocsd_destroy_dcd_tree(tree);
    *text
}

fn idx_lines(s: &str) -> Vec<String> {
    s.lines()
        .filter(|l| l.starts_with("Idx:"))
        .map(|l| opencsd_c_api::convert::to_1_3_text_if_default(l).into_owned())
        .collect()
}

fn check(name: &str) {
    let got = decode_through_c_api(name);
    let expected = std::fs::read_to_string(snapshots().join(name).join("expected.ppl")).unwrap();
    let exp = idx_lines(&expected);
    let got: Vec<String> = got
        .lines()
        .filter(|l| l.starts_with("Idx:"))
        .map(str::to_string)
        .collect();
    assert!(!exp.is_empty());
    assert_eq!(exp.len(), got.len(), "{name}: line count");
    for (i, (e, g)) in exp.iter().zip(&got).enumerate() {
        assert_eq!(e, g, "{name}: line {}", i + 1);
    }
}

#[test]
fn etmv4_through_the_c_api() {
    check("etmv4-a64");
}

#[test]
fn ete_through_the_c_api() {
    check("ete-all-options");
}

#[test]
fn etmv3_through_the_c_api() {
    check("etmv3-cycle-accurate");
}

#[test]
fn bad_handles_and_pointers_give_opencsd_codes() {
    let bogus = 0x1234usize as TreeHandle;
    assert_eq!(ocsd_dt_set_gen_elem_printer(std::ptr::null_mut()), OCSD_ERR_BAD_HANDLE);
    assert_eq!(ocsd_dt_set_gen_elem_printer(bogus), OCSD_ERR_BAD_HANDLE);
    let mut used = 0;
    // SAFETY: deliberately bad arguments; none is dereferenced.
    unsafe {
        assert_eq!(ocsd_dt_process_data(bogus, 0, 0, 4, [0u8; 4].as_ptr(), &mut used), 6);
        assert_eq!(
            ocsd_dt_process_data(bogus, 0, 0, 4, std::ptr::null(), &mut used),
            OCSD_RESP_FATAL_INVALID_PARAM
        );
        assert_eq!(
            ocsd_dt_create_decoder(bogus, std::ptr::null(), 0, std::ptr::null(), std::ptr::null_mut()),
            OCSD_ERR_INVALID_PARAM_VAL
        );
        assert_eq!(
            ocsd_gen_elem_str(std::ptr::null(), std::ptr::null_mut(), 0),
            OCSD_ERR_INVALID_PARAM_VAL
        );
    }
    ocsd_destroy_dcd_tree(bogus);
    let t = ocsd_create_dcd_tree(OCSD_TRC_SRC_SINGLE, 0);
    ocsd_destroy_dcd_tree(t);
    // A freed handle is refused, not used.
    assert_eq!(ocsd_dt_set_gen_elem_printer(t), OCSD_ERR_BAD_HANDLE);
    // An unknown source type makes a tree without a frame deformatter, as
    // OpenCSD's (tests/opencsd_diffs.rs); bad deformatter flags make none.
    let t = ocsd_create_dcd_tree(7, 0);
    assert!(!t.is_null());
    ocsd_destroy_dcd_tree(t);
    assert!(ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, 0).is_null());
}

#[test]
fn element_to_string_round_trip() {
    let mut e = OcsdGenericTraceElem::default();
    // SAFETY: a valid element and buffer.
    unsafe {
        ocsd_gen_elem_init(&mut e, abi::elem::INSTR_RANGE as c_int);
        e.st_addr = 0x1000;
        e.en_addr = 0x1008;
        e.isa = 2;
        e.payload.word = 2;
        e.flag_bits = flag::LAST_INSTR_EXEC | 4 << flag::LAST_INSTR_SZ_SHIFT;
        let mut buf = [0 as c_char; 256];
        assert_eq!(ocsd_gen_elem_str(&e, buf.as_mut_ptr(), buf.len() as c_int), OCSD_OK);
        let s = std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap();
        assert_eq!(
            s,
            "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1008] num_i(2) last_sz(4) (ISA=A64) E --- )"
        );
    }
}

/// `ocsd_trc_index_t` is 32 bits, as in OpenCSD's builds: the last error's
/// index fills 4 bytes and no more, and with no error it is OpenCSD's bad
/// index with trace ID 0xff and an empty message.
#[test]
fn last_error_index_is_32_bits() {
    let mut words = [0x5555_5555u32; 2];
    let mut id = 0u8;
    let mut msg = [b'x' as c_char; 16];
    // SAFETY: an index location of 4 bytes (in an array of two words), a
    // byte, and a 16-byte buffer.
    let r = unsafe { ocsd_get_last_err(words.as_mut_ptr(), &mut id, msg.as_mut_ptr(), 16) };
    assert_eq!(r, OCSD_OK);
    assert_eq!(words[1], 0x5555_5555, "wrote past a 32-bit index");
    if words[0] == u32::MAX {
        assert_eq!((id, msg[0]), (0xff, 0));
    }
}

fn count(text: &str, what: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("Idx:") && l.contains(what))
        .count()
}

#[test]
fn a_removed_decoder_lists_nothing() {
    let full = decode_through_c_api("etmv4-a64");
    assert!(count(&full, "OCSD_GEN_TRC_ELEM_INSTR_RANGE") > 0);
    let text = decode_with("etmv4-a64", |tree, ids, _| {
        assert_eq!(ids.len(), 1);
        assert_eq!(ocsd_dt_remove_decoder(tree, ids[0]), OCSD_OK);
        // Gone: no packet callback to attach, and removing again is no
        // error (as OpenCSD's removeDecoder).
        assert_eq!(
            ocsd_dt_attach_packet_callback(
                tree,
                ids[0],
                OCSD_C_API_CB_PKT_MON,
                std::ptr::null_mut(),
                std::ptr::null()
            ),
            OCSD_ERR_INVALID_ID
        );
        assert_eq!(ocsd_dt_remove_decoder(tree, ids[0]), OCSD_OK);
        // Not a trace source's ID (OpenCSD's OCSD_IS_VALID_CS_SRC_ID).
        for bad in [0, 0x70, 0x7f, 0x80] {
            assert_eq!(ocsd_dt_remove_decoder(tree, bad), OCSD_ERR_INVALID_ID);
        }
    });
    assert_eq!(count(&text, ""), 0, "{text}");
    assert_eq!(ocsd_dt_remove_decoder(std::ptr::null_mut(), 0x10), OCSD_ERR_BAD_HANDLE);
}

#[test]
fn a_removed_memory_image_is_not_read() {
    let full = decode_through_c_api("etmv4-a64");
    assert_eq!(count(&full, "OCSD_GEN_TRC_ELEM_ADDR_NACC"), 0);
    let mut log = Box::new(String::new());
    // The listing goes to `log` too, after the mapped ranges.
    decode_with("etmv4-a64", |tree, _, images| {
        assert!(!images.is_empty());
        for &(at, space) in images {
            // Any address of an image names it, in its memory space.
            assert_eq!(ocsd_dt_remove_mem_acc(tree, at + 4, space), OCSD_OK);
            assert_eq!(ocsd_dt_remove_mem_acc(tree, at + 4, space), OCSD_ERR_INVALID_PARAM_VAL);
        }
        let ctx: *mut String = &mut *log;
        assert_eq!(
            ocsd_def_errlog_set_strprint_cb(tree, ctx.cast(), Some(collect)),
            OCSD_OK
        );
        ocsd_tl_log_mapped_mem_ranges(tree);
    });
    assert!(
        log.starts_with("Gen_Info : Mapped Memory Accessors\nGen_Info : ========================\nIdx:"),
        "{log}"
    );
    assert_eq!(count(&log, "OCSD_GEN_TRC_ELEM_INSTR_RANGE"), 0);
    assert!(count(&log, "OCSD_GEN_TRC_ELEM_ADDR_NACC") > 0, "{log}");
    assert_eq!(ocsd_dt_remove_mem_acc(std::ptr::null_mut(), 0, 0), OCSD_ERR_BAD_HANDLE);
}

/// Element callback: each element as `ocsd_gen_elem_str` describes it, in
/// the listing's line format.
unsafe extern "C" fn elem_lines(ctx: *const c_void, idx: TrcIndex, id: u8, e: *const OcsdGenericTraceElem) -> c_int {
    let mut buf = [0 as c_char; 512];
    // SAFETY: the test registered a `String` as context; the library hands
    // a valid element for the duration of the call.
    unsafe {
        assert_eq!(ocsd_gen_elem_str(e, buf.as_mut_ptr(), buf.len() as c_int), OCSD_OK);
        let s = std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap();
        let out = &mut *(ctx as *mut String);
        out.push_str(&format!("Idx:{idx}; ID:{id:x}; {s}\n"));
    }
    OCSD_RESP_CONT
}

/// The C element the callback receives (one the library reuses, as
/// OpenCSD's are) carries everything of each element: described with
/// `ocsd_gen_elem_str`, every element is the listing's element line.
#[test]
fn elements_through_the_c_struct_describe_as_listed() {
    for name in ["etmv4-a64", "ete-all-options", "etmv3-cycle-accurate"] {
        let mut lines = Box::new(String::new());
        decode_with(name, |tree, _, _| {
            // No text reader: the elements go to the callback in runs.
            assert_eq!(
                ocsd_def_errlog_set_strprint_cb(tree, std::ptr::null_mut(), None),
                OCSD_OK
            );
            let ctx: *mut String = &mut *lines;
            assert_eq!(ocsd_dt_set_gen_elem_outfn(tree, Some(elem_lines), ctx.cast()), OCSD_OK);
        });
        let expected = std::fs::read_to_string(snapshots().join(name).join("expected.ppl")).unwrap();
        let exp: Vec<String> = idx_lines(&expected).into_iter().filter(|l| !l.contains('\t')).collect();
        let got: Vec<&str> = lines.lines().collect();
        assert!(exp.len() > 10, "{name}");
        assert_eq!(exp.len(), got.len(), "{name}: element count");
        for (i, (e, g)) in exp.iter().zip(&got).enumerate() {
            assert_eq!(e, g, "{name}: element {}", i + 1);
        }
    }
}

#[test]
fn manifest_helper_answers_help_and_version_and_refuses_other_options() {
    let run = |arg: &str| {
        Command::new(env!("CARGO_BIN_EXE_ocsd_snapshot_manifest"))
            .arg(arg)
            .output()
            .unwrap()
    };
    let v = run("--version");
    assert_eq!(v.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&v.stdout),
        format!("ocsd_snapshot_manifest {}\n", env!("CARGO_PKG_VERSION"))
    );
    let h = run("--help");
    assert_eq!(h.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&h.stdout).starts_with("usage: ocsd_snapshot_manifest <snapshot directory>\n"));
    let bad = run("--frobnicate");
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "usage: ocsd_snapshot_manifest <snapshot directory>\n"
    );
}

#[test]
fn an_unsupported_etmv4_configuration_is_refused_at_creation() {
    // TRCCONFIGR.COND = 0b001: conditional loads traced. OpenCSD 1.8.0
    // returns OCSD_OK here and fails the first packet with
    // OCSD_ERR_NOT_INIT; the creation itself says what is wrong.
    let cfg = |configr: u32| OcsdEtmv4Cfg {
        reg_idr0: 0x2800_0EA1,
        reg_idr1: 0x4100_F403,
        reg_idr2: 0x488,
        reg_idr8: 0,
        reg_idr9: 0,
        reg_idr10: 0,
        reg_idr11: 0,
        reg_idr12: 0,
        reg_idr13: 0,
        reg_configr: configr,
        reg_traceidr: 0x10,
        arch_ver: 4,
        core_prof: 1,
    };
    let name = CString::new("ETMV4I").unwrap();
    let mut text = String::new();
    for (flags, configr, want) in [
        (OCSD_CREATE_FLG_FULL_DECODER, 0x1C1, 0x17),
        (OCSD_CREATE_FLG_PACKET_PROC, 0x1C1, OCSD_OK),
        (OCSD_CREATE_FLG_FULL_DECODER, 0xC1, OCSD_OK),
    ] {
        let tree = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
        assert!(!tree.is_null());
        let ctx: *mut String = &mut text;
        assert_eq!(
            ocsd_def_errlog_set_strprint_cb(tree, ctx.cast(), Some(collect)),
            OCSD_OK
        );
        let c = cfg(configr);
        let mut csid = 0u8;
        // SAFETY: an ETMv4 config struct for the ETMv4 decoder.
        let err = unsafe {
            ocsd_dt_create_decoder(
                tree,
                name.as_ptr(),
                flags,
                (&c as *const OcsdEtmv4Cfg).cast(),
                &mut csid,
            )
        };
        assert_eq!(err, want, "flags {flags:#x} TRCCONFIGR {configr:#x}");
        ocsd_destroy_dcd_tree(tree);
    }
    assert_eq!(
        text,
        "DCD_ETMV4_0016 : 0x0017 (OCSD_ERR_HW_CFG_UNSUPP) [Programmed trace configuration not supported by decoder.]; \
         TRCCONFIGR = 0x000001c1: COND (bits [10:8]) = 0b001 traces conditional non-branch instructions, which are \
         not decoded; only COND = 0b000 is"
    );
}
