//! Snapshot reading: a good snapshot parsed in full, and broken ones that
//! must give an error naming the file, the line and what was expected.

mod common;

use std::path::Path;

use common::{temp_dir, write_files};
use coresight_decode::builder::TreeBuilder;
use coresight_decode::decoder::DecodeMode;
use coresight_decode::error::Error;
use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;
use coresight_decode::snapshot::{Snapshot, SnapshotError, SnapshotWarning, WarningKind, parse_number};

const SNAPSHOT_INI: &str = "; test snapshot\n[snapshot]\nversion=1.0\ndescription=unit test\n\n[device_list]\ndevice0=cpu_0.ini\ndevice1=etm_0.ini\ndevice2=stm.ini\n\n[trace]\nmetadata=trace.ini\n";
const CPU_INI: &str = "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A53\n\n[regs]\nPC(size:64)=0xFFFFFFC000081000\nSP(size:64)=0\n\n[dump1]\nfile=mem.bin\naddress=0x1000\nlength=0x10\n\n[dump.text]\nfile=mem2.bin\naddress=0x8000\noffset=4\nlength=8\nspace=EL1N\n";
const ETM_INI: &str = "[device]\nname=etm_0\nclass=trace_source\ntype=ETM4.2\n\n[regs]\nTRCCONFIGR(id:0x4)=0x00000001\nTRCTRACEIDR(id:0x10)=0x10\nTRCIDR0(id:0x78)=0x28000EA1\nTRCIDR1=0x4100F403\nTRCIDR2(id:0x7A)=0x20001088\nTRCIDR8=0\nTRCIDR9=0\nTRCIDR10=0\nTRCIDR11=0\nTRCIDR12=0\nTRCIDR13=0\n";
const STM_INI: &str = "[device]\nname=STM_0\nclass=trace_source\ntype=STM\n[regs]\nSTMTCSR(0x3A0)=0x00200007\n";
const TRACE_INI: &str = "[trace_buffers]\nbuffers=buffer1,buffer0,\n\n[buffer0]\nname=ETB_0\nfile=a.bin,b.bin\nformat=coresight\n\n[buffer1]\nname=ETB_1\nfile=c.bin\nformat=source_data\n\n[source_buffers]\netm_0=ETB_0\nSTM_0=ETB_0\n\n[core_trace_sources]\ncpu_0=etm_0\n";

fn good_snapshot(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    write_files(
        &dir,
        &[
            ("snapshot.ini", SNAPSHOT_INI.as_bytes()),
            ("cpu_0.ini", CPU_INI.as_bytes()),
            ("etm_0.ini", ETM_INI.as_bytes()),
            ("stm.ini", STM_INI.as_bytes()),
            ("trace.ini", TRACE_INI.as_bytes()),
            ("mem.bin", &[0u8; 0x20]),
            ("mem2.bin", &[1u8; 0x11]),
            ("a.bin", &[0u8; 16]),
            ("b.bin", &[0u8; 16]),
            ("c.bin", &[0u8; 4]),
        ],
    );
    dir
}

#[test]
fn numbers_parse_as_c_does() {
    assert_eq!(parse_number("0x1F"), Some(31));
    assert_eq!(parse_number("0X1f"), Some(31));
    assert_eq!(parse_number("17"), Some(17));
    assert_eq!(parse_number("017"), Some(15));
    assert_eq!(parse_number("0"), Some(0));
    assert_eq!(parse_number("0xFFFFFFFFFFFFFFFF"), Some(u64::MAX));
    assert_eq!(parse_number("1O"), None);
    assert_eq!(parse_number(""), None);
}

#[test]
fn good_snapshot_is_read_in_full() {
    let dir = good_snapshot("ss_good");
    let ss = Snapshot::load(&dir).unwrap();
    assert_eq!(ss.version, "1.0");
    assert_eq!(ss.description, "unit test");
    assert_eq!(ss.devices.len(), 3);
    let cpu = ss.device("cpu_0").unwrap();
    assert!(cpu.is_core());
    assert_eq!(cpu.device_type, "Cortex-A53");
    assert_eq!(cpu.regs[0].name, "PC");
    assert_eq!(cpu.regs[0].decoration.as_deref(), Some("size:64"));
    assert_eq!(cpu.regs[0].value, 0xFFFF_FFC0_0008_1000);
    assert_eq!(cpu.dumps.len(), 2);
    assert_eq!(
        (cpu.dumps[0].address, cpu.dumps[0].length, cpu.dumps[0].offset),
        (0x1000, 0x10, 0)
    );
    assert_eq!(
        (
            cpu.dumps[1].file.as_str(),
            cpu.dumps[1].offset,
            cpu.dumps[1].space.as_str()
        ),
        ("mem2.bin", 4, "EL1N")
    );
    let etm = ss.device("etm_0").unwrap();
    assert_eq!(
        etm.regs
            .iter()
            .find(|r| r.name == "TRCIDR0")
            .unwrap()
            .decoration
            .as_deref(),
        Some("id:0x78")
    );
    // Buffers come in section order; multi-file buffers keep their files.
    assert_eq!(ss.buffer_names(), vec!["ETB_0", "ETB_1"]);
    assert_eq!(ss.buffer("ETB_0").unwrap().files, vec!["a.bin", "b.bin"]);
    // Sources sorted by name, with their cores.
    assert_eq!(ss.sources_of("ETB_0"), vec![("STM_0", None), ("etm_0", Some("cpu_0"))]);
    assert!(ss.path_of("a.bin").ends_with("ss_good/a.bin"));
}

#[test]
fn tree_from_snapshot_maps_memory_and_places_decoders() {
    let dir = good_snapshot("ss_tree");
    let ss = Snapshot::load(&dir).unwrap();
    let out = shared(MsgLogger::capture());
    let tree = TreeBuilder::new(&ss)
        .build("ETB_0", DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(out.clone()))
        })
        .unwrap();
    let ids: Vec<(u8, &str)> = tree.elements().map(|(id, e)| (id, e.protocol.as_str())).collect();
    assert_eq!(ids, vec![(0x10, "ETMV4I"), (0x20, "STM")]);
    let mut map = String::new();
    tree.describe_mapped_ranges(&mut map);
    let p = |f: &str| format!("{}{}", ss.dir, f);
    assert_eq!(
        map,
        format!(
            "Gen_Info : Mapped Memory Accessors\n\
             Gen_Info : FileAcc; Range::0x1000:100f; Mem Space::Any\nFilename={}\n\
             Gen_Info : FileAcc; Range::0x8000:8007; Mem Space::EL1N\nFilename={}\n\
             Gen_Info : ========================\n",
            p("mem.bin"),
            p("mem2.bin")
        )
    );
    assert_eq!(out.borrow().captured(), "");
}

#[test]
fn tree_builder_logs_problems_as_opencsd_does() {
    let dir = good_snapshot("ss_tree_problems");
    // Unknown core, a missing register, a missing memory file.
    write_files(
        &dir,
        &[
            (
                "cpu_0.ini",
                b"[device]\nname=cpu_0\nclass=core\ntype=Cortex-Z99\n[dump]\nfile=nothere.bin\naddress=0\n",
            ),
            (
                "stm.ini",
                b"[device]\nname=STM_0\nclass=trace_source\ntype=STM\n[regs]\n",
            ),
        ],
    );
    let ss = Snapshot::load(&dir).unwrap();
    let out = shared(MsgLogger::capture());
    let tree = TreeBuilder::new(&ss)
        .build("ETB_0", DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(out.clone()))
        })
        .unwrap_err();
    assert!(matches!(tree, coresight_decode::Error::NoDecoder { .. }), "{tree:?}");
    assert_eq!(
        out.borrow().captured(),
        "ss2_dcdtree : Error:Missing STMTCSR\n\
         ss2_dcdtree : 0x0026 (OCSD_ERR_TEST_SS_TO_DECODER) [test snapshot to decode tree conversion error]; Failed to create decoder for none core source STM_0.\n\
         ss2_dcdtree : 0x0026 (OCSD_ERR_TEST_SS_TO_DECODER) [test snapshot to decode tree conversion error]; Unrecognized Core name Cortex-Z99. Cannot evaluate profile or architecture.\
         ss2_dcdtree : 0x0026 (OCSD_ERR_TEST_SS_TO_DECODER) [test snapshot to decode tree conversion error]; Failed to create decoder for source etm_0.\n"
    );
}

fn broken(name: &str, file: &str, contents: &str) -> SnapshotError {
    let dir = good_snapshot(name);
    write_files(&dir, &[(file, contents.as_bytes())]);
    Snapshot::load(&dir).expect_err("broken snapshot must not load")
}

fn assert_snapshot_err(e: SnapshotError, file: &str, line: Option<usize>, text: &str) {
    let msg = e.to_string();
    assert!(e.path.ends_with(file), "{msg}");
    assert_eq!(e.line, line, "{msg}");
    assert!(e.message.contains(text), "{msg}");
    // Displayed as path:line: message, on one line, with no Rust debug text.
    let expect = match line {
        Some(l) => format!("{}:{l}: {}", e.path.display(), e.message),
        None => format!("{}: {}", e.path.display(), e.message),
    };
    assert_eq!(msg, expect);
    assert!(
        !msg.contains('\n') && !msg.contains("Some(") && !msg.contains("\"["),
        "{msg}"
    );
}

#[test]
fn broken_files_name_file_line_and_problem() {
    assert_snapshot_err(
        broken(
            "ss_missing_buf",
            "trace.ini",
            "[trace_buffers]\nbuffers=buffer0,buffer9\n[buffer0]\nname=B\nfile=a.bin\nformat=coresight\n",
        ),
        "trace.ini",
        Some(2),
        "buffer 'buffer9' is listed but has no [buffer9] section",
    );
    assert_snapshot_err(
        broken(
            "ss_unknown_buffer",
            "trace.ini",
            "[trace_buffers]\nbuffers=buffer0\n[buffer0]\nname=B\nfile=a.bin\nformat=coresight\n[source_buffers]\netm_0=NOPE\n",
        ),
        "trace.ini",
        Some(8),
        "source 'etm_0' writes to unknown buffer 'NOPE'",
    );
    assert_snapshot_err(
        broken("ss_no_list", "snapshot.ini", "[snapshot]\nversion=1\n"),
        "snapshot.ini",
        None,
        "missing [device_list]",
    );
}

/// The snapshot `good_snapshot` makes with `file` replaced, loaded: it must
/// load, with warnings.
fn damaged(name: &str, file: &str, contents: &str) -> Snapshot {
    let dir = good_snapshot(name);
    write_files(&dir, &[(file, contents.as_bytes())]);
    Snapshot::load(&dir).expect("a snapshot with one bad device file loads the others")
}

/// The warnings as `file:line: warning: message` with the directory left
/// out.
fn warning_lines(ss: &Snapshot) -> Vec<String> {
    ss.warnings()
        .iter()
        .map(|w| w.to_string().replacen(&ss.dir, "", 2))
        .collect()
}

fn device_names(ss: &Snapshot) -> Vec<&str> {
    ss.devices.iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn a_bad_device_file_leaves_that_device_out_with_a_warning() {
    // OpenCSD's reader logs a device file it cannot open and reads the
    // others; the sources they describe still decode.
    for (name, file, contents, want) in [
        (
            "ss_no_addr",
            "cpu_0.ini",
            "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A53\n\n[dump1]\nfile=mem.bin\n",
            "cpu_0.ini:6: warning: [dump1] has no 'address=': expected the dump's address; device file 'cpu_0.ini' is left out and the sources it describes are not decoded",
        ),
        (
            "ss_no_device",
            "stm.ini",
            "[regs]\nA=1\n",
            "stm.ini: warning: missing [device] section: expected name, class and type; device file 'stm.ini' is left out and the sources it describes are not decoded",
        ),
        (
            "ss_no_type",
            "stm.ini",
            "[device]\nname=STM_0\nclass=trace_source\n",
            "stm.ini:1: warning: [device] has no 'type=': expected the device's type; device file 'stm.ini' is left out and the sources it describes are not decoded",
        ),
        (
            "ss_syntax",
            "stm.ini",
            "[device\nname=x\n",
            "stm.ini:1: warning: expected a section header '[name]', found '[device' (no closing ']'); device file 'stm.ini' is left out and the sources it describes are not decoded",
        ),
    ] {
        let ss = damaged(name, file, contents);
        assert_eq!(warning_lines(&ss), [want], "{name}");
        let left = match file {
            "cpu_0.ini" => ["etm_0", "STM_0"],
            _ => ["cpu_0", "etm_0"],
        };
        assert_eq!(device_names(&ss), left, "{name}");
    }
}

#[test]
fn an_unreadable_device_file_is_a_warning_naming_the_device_list_line() {
    let ss = damaged(
        "ss_missing_dev",
        "snapshot.ini",
        "[device_list]\ndevice0=cpu_0.ini\ndevice1=gone.ini\ndevice2=etm_0.ini\n[trace]\nmetadata=trace.ini\n",
    );
    let w = &ss.warnings()[0];
    assert_eq!(w.line, Some(3));
    let WarningKind::UnreadableDevice { file, path, .. } = &w.kind else {
        panic!("{w}")
    };
    assert_eq!((file.as_str(), path.clone()), ("gone.ini", ss.path_of("gone.ini")));
    let text = w.to_string();
    assert!(
        text.starts_with(&format!(
            "{}snapshot.ini:3: warning: device file 'gone.ini' cannot be read ({}gone.ini: ",
            ss.dir, ss.dir
        )) && text.ends_with("; its device is left out and the sources it describes are not decoded"),
        "{text}"
    );
    assert_eq!(ss.warnings().len(), 1, "{:?}", warning_lines(&ss));
    assert_eq!(device_names(&ss), ["cpu_0", "etm_0"]);
    // The ETM still decodes: its tree builds.
    assert!(ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).is_ok());
}

#[test]
fn a_device_given_twice_keeps_the_later_as_opencsd_does() {
    let dir = good_snapshot("ss_dup_device");
    write_files(
        &dir,
        &[
            (
                "snapshot.ini",
                "[device_list]\ndevice0=cpu_0.ini\ndevice1=etm_0.ini\ndevice2=etm_b.ini\ndevice3=stm.ini\n[trace]\nmetadata=trace.ini\n".as_bytes(),
            ),
            ("etm_b.ini", ETM_INI.replace("=0x10\n", "=0x22\n").as_bytes()),
        ],
    );
    let ss = Snapshot::load(&dir).unwrap();
    assert_eq!(
        warning_lines(&ss),
        [
            "snapshot.ini:4: warning: device 'etm_0' of 'etm_b.ini' was already given by 'etm_0.ini'; the later one is used (expected each device once)"
        ]
    );
    assert_eq!(device_names(&ss), ["cpu_0", "etm_0", "STM_0"]);
    let etm = ss.device("etm_0").unwrap();
    assert_eq!(etm.file, "etm_b.ini");
    assert_eq!(etm.regs.iter().find(|r| r.name == "TRCTRACEIDR").unwrap().value, 0x22);
}

#[test]
fn a_register_that_is_not_a_number_is_read_as_strtoul_reads_it() {
    let ss = damaged(
        "ss_bad_reg",
        "etm_0.ini",
        "[device]\nname=etm_0\nclass=trace_source\ntype=ETM4\n[regs]\nTRCIDR0=0x12\nTRCIDR1=banana\nTRCIDR2=0x4100zz\nTRCIDR3= -1\nTRCIDR4=0x\nTRCIDR5=99999999999999999999\n",
    );
    let regs: Vec<(&str, u64)> = ss
        .device("etm_0")
        .unwrap()
        .regs
        .iter()
        .map(|r| (r.name.as_str(), r.value))
        .collect();
    assert_eq!(
        regs,
        [
            ("TRCIDR0", 0x12),
            ("TRCIDR1", 0),
            ("TRCIDR2", 0x4100),
            ("TRCIDR3", u64::MAX),
            ("TRCIDR4", 0),
            ("TRCIDR5", u64::MAX)
        ]
    );
    assert_eq!(
        warning_lines(&ss),
        [
            "etm_0.ini:7: warning: register TRCIDR1: expected a number (decimal or 0x hex), found 'banana'; read as 0x0",
            "etm_0.ini:8: warning: register TRCIDR2: expected a number (decimal or 0x hex), found '0x4100zz'; read as 0x4100",
            "etm_0.ini:9: warning: register TRCIDR3: expected a number (decimal or 0x hex), found '-1'; read as 0xffffffffffffffff",
            "etm_0.ini:10: warning: register TRCIDR4: expected a number (decimal or 0x hex), found '0x'; read as 0x0",
            "etm_0.ini:11: warning: register TRCIDR5: expected a number (decimal or 0x hex), found '99999999999999999999'; read as 0xffffffffffffffff",
        ]
    );
}

#[test]
fn a_missing_or_unknown_buffer_format_is_read_as_coresight() {
    for (format, line, want) in [
        (
            "",
            3,
            "trace.ini:3: warning: [buffer0] has no 'format=' (expected coresight, dstream_coresight or source_data); the buffer is decoded as coresight",
        ),
        (
            "format=tpiu_magic\n",
            6,
            "trace.ini:6: warning: [buffer0] format=tpiu_magic: unknown buffer format (expected coresight, dstream_coresight or source_data); the buffer is decoded as coresight",
        ),
    ] {
        let ss = damaged(
            &format!("ss_format_{line}"),
            "trace.ini",
            &format!(
                "[trace_buffers]\nbuffers=buffer0\n[buffer0]\nname=ETB_0\nfile=a.bin,b.bin\n{format}[source_buffers]\netm_0=ETB_0\n[core_trace_sources]\ncpu_0=etm_0\n"
            ),
        );
        assert_eq!(warning_lines(&ss), [want]);
        assert_eq!(ss.warnings()[0].line, Some(line));
        assert_eq!(ss.buffer("ETB_0").unwrap().format, "coresight");
        assert!(ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).is_ok());
    }
}

#[test]
fn missing_directory_is_an_io_error_naming_the_file() {
    let e = Snapshot::load(Path::new(env!("CARGO_TARGET_TMPDIR")).join("does_not_exist")).unwrap_err();
    let msg = e.to_string();
    assert_eq!(e.io, Some(std::io::ErrorKind::NotFound), "{msg}");
    assert!(msg.ends_with("does_not_exist/snapshot.ini: no such file"), "{msg}");
    // Through the crate's error type too.
    let e: Error = e.into();
    assert_eq!(e.to_string(), msg);
}

/// A snapshot with `dumps` dump sections in its core and `buffers` trace
/// buffers (each with its own source).
fn big_snapshot(name: &str, dumps: usize, buffers: usize) -> std::path::PathBuf {
    let dir = temp_dir(name);
    let mut cpu = String::from("[device]\nname=cpu_0\nclass=core\ntype=Cortex-A53\n");
    for i in 0..dumps {
        cpu.push_str(&format!(
            "\n[dump{i}]\nfile=mem.bin\naddress=0x{:x}\nlength=0x10\n",
            0x1000 + 0x10 * i
        ));
    }
    let mut trace = String::from("[trace_buffers]\nbuffers=");
    trace.push_str(&(0..buffers).map(|i| format!("buffer{i}")).collect::<Vec<_>>().join(","));
    trace.push('\n');
    for i in 0..buffers {
        trace.push_str(&format!("\n[buffer{i}]\nname=ETB_{i}\nfile=a.bin\nformat=coresight\n"));
    }
    trace.push_str("\n[source_buffers]\n");
    for i in 0..buffers {
        trace.push_str(&format!("STM_{i}=ETB_{i}\n"));
    }
    write_files(
        &dir,
        &[
            (
                "snapshot.ini",
                b"[snapshot]\nversion=1.0\n[device_list]\ndevice0=cpu_0.ini\n[trace]\nmetadata=trace.ini\n",
            ),
            ("cpu_0.ini", cpu.as_bytes()),
            ("trace.ini", trace.as_bytes()),
            ("mem.bin", &[0u8; 0x10]),
            ("a.bin", &[0u8; 16]),
        ],
    );
    dir
}

fn load_time(dir: &Path, dumps: usize, buffers: usize) -> std::time::Duration {
    // The best of five: scheduling noise only ever adds time (CI may run
    // beside other work).
    (0..5)
        .map(|_| {
            let t = std::time::Instant::now();
            let ss = Snapshot::load(dir).unwrap();
            let elapsed = t.elapsed();
            assert_eq!(ss.devices[0].dumps.len(), dumps);
            assert_eq!(ss.buffers.len(), buffers);
            elapsed
        })
        .min()
        .unwrap()
}

#[test]
fn loading_is_linear_in_sections_and_buffers() {
    // Issue 15, defect 4: each [dump] section and each buffer rescanned
    // the whole file (24,000 dumps: 22.5 s; 8,000 buffers: 7 s). Eight
    // times the sections must take about eight times as long, not 64;
    // the bound allows for a noisy machine.
    let small = big_snapshot("linear_small", 3000, 1000);
    let large = big_snapshot("linear_large", 24000, 8000);
    let t_small = load_time(&small, 3000, 1000);
    let t_large = load_time(&large, 24000, 8000);
    eprintln!("3,000 dumps and 1,000 buffers: {t_small:?}; 24,000 and 8,000: {t_large:?}");
    assert!(
        t_large < t_small * 24 + std::time::Duration::from_millis(50),
        "8x the sections took {t_large:?} against {t_small:?}: not linear"
    );
    assert!(
        t_large < std::time::Duration::from_secs(3),
        "24,000 dumps and 8,000 buffers took {t_large:?}"
    );
}

#[test]
fn byte_order_mark_and_empty_file_lists() {
    // A UTF-8 byte-order mark before the first section is not part of
    // its name.
    let dir = good_snapshot("bom");
    let mut t = b"\xef\xbb\xbf".to_vec();
    t.extend_from_slice(TRACE_INI.as_bytes());
    std::fs::write(dir.join("trace.ini"), &t).unwrap();
    let ss = Snapshot::load(&dir).unwrap();
    assert_eq!(ss.buffer_names(), ["ETB_0", "ETB_1"]);

    // file=,,, names no file: an error, not an empty buffer.
    let e = broken(
        "empty_file_list",
        "trace.ini",
        &TRACE_INI.replace("file=c.bin", "file=,,,"),
    );
    assert_snapshot_err(e, "trace.ini", Some(11), "[buffer1] file= names no file");
}

#[test]
fn ini_that_is_not_a_regular_file_is_refused() {
    // A FIFO would block the reader forever; a directory reads as nothing.
    let dir = good_snapshot("fifo_ini");
    std::fs::remove_file(dir.join("trace.ini")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(dir.join("trace.ini"))
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    let e = Snapshot::load(&dir).unwrap_err().to_string();
    assert!(e.contains("trace.ini") && e.contains("FIFO"), "{e}");
    // A device file that is not a regular file leaves its device out.
    std::fs::remove_file(dir.join("trace.ini")).unwrap();
    write_files(&dir, &[("trace.ini", TRACE_INI.as_bytes())]);
    std::fs::remove_file(dir.join("cpu_0.ini")).unwrap();
    std::fs::create_dir(dir.join("cpu_0.ini")).unwrap();
    let ss = Snapshot::load(&dir).unwrap();
    let w = ss.warnings()[0].to_string();
    assert!(
        w.contains("device file 'cpu_0.ini' cannot be read") && w.contains("directory"),
        "{w}"
    );
    assert!(ss.device("cpu_0").is_none());
}

#[test]
fn malformed_line_names_file_line_and_what_was_expected() {
    // In a device file: a warning, the device left out.
    let ss = damaged(
        "ss_bad_line",
        "cpu_0.ini",
        "[device]\nname=cpu_0\nclass core\ntype=Cortex-A53\n",
    );
    let path = ss.path_of("cpu_0.ini").display().to_string();
    assert!(path.ends_with("ss_bad_line/cpu_0.ini"), "{path}");
    assert_eq!(
        ss.warnings()[0].to_string(),
        format!(
            "{path}:3: warning: expected 'key=value', a '[section]' header or a comment (';' or '#'), found 'class core'; device file 'cpu_0.ini' is left out and the sources it describes are not decoded"
        )
    );
    let e = broken("ss_no_key", "trace.ini", "[trace_buffers]\n=buffer0\n");
    assert_eq!(
        e.to_string(),
        format!("{}:2: expected a key before '=', found '=buffer0'", e.path.display())
    );
    let ss = damaged("ss_after_header", "stm.ini", "[device] name=STM_0\n");
    assert_eq!(
        ss.warnings()[0].to_string(),
        format!(
            "{}:1: warning: expected nothing after the section header [device], found 'name=STM_0'; device file 'stm.ini' is left out and the sources it describes are not decoded",
            ss.path_of("stm.ini").display()
        )
    );
}

#[test]
fn duplicate_section_is_a_warning_naming_file_and_lines() {
    let dir = good_snapshot("ss_dup_section");
    // A second [regs] section: its registers are read with the first's.
    write_files(
        &dir,
        &[(
            "stm.ini",
            b"[device]\nname=STM_0\nclass=trace_source\ntype=STM\n[regs]\nSTMTCSR=0x00200007\n\n[Regs]\nSTMHEMCR=1\n",
        )],
    );
    let ss = Snapshot::load(&dir).unwrap();
    let path = ss.path_of("stm.ini");
    assert_eq!(
        ss.warnings(),
        [SnapshotWarning {
            path: path.clone(),
            line: Some(8),
            kind: WarningKind::DuplicateSection {
                section: "Regs".into(),
                first_line: 5
            },
        }]
    );
    assert_eq!(
        ss.warnings()[0].to_string(),
        format!(
            "{}:8: warning: section [Regs] appears again (first on line 5); its entries are read as part of the first",
            path.display()
        )
    );
    let regs: Vec<&str> = ss
        .device("STM_0")
        .unwrap()
        .regs
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(regs, ["STMTCSR", "STMHEMCR"]);

    // An entry before any section header belongs to none.
    write_files(
        &dir,
        &[(
            "stm.ini",
            b"; STM\nname=STM_0\n[device]\nname=STM_0\nclass=trace_source\ntype=STM\n[regs]\nSTMTCSR=1\n",
        )],
    );
    let ss = Snapshot::load(&dir).unwrap();
    assert_eq!(
        ss.warnings().iter().map(ToString::to_string).collect::<Vec<_>>(),
        [format!(
            "{}:2: warning: 'name=' comes before any [section] header; it is ignored (expected it inside a section)",
            path.display()
        )]
    );
}

#[test]
fn duplicate_key_is_a_warning_and_the_first_value_is_used() {
    let dir = good_snapshot("ss_dup_key");
    write_files(
        &dir,
        &[
            (
                "stm.ini",
                b"[device]\nname=STM_0\nclass=trace_source\ntype=STM\n[regs]\nSTMTCSR=0x00200007\nstmtcsr=0x00300007\n",
            ),
            // A core traced by two sources repeats its key by design: no warning.
            (
                "trace.ini",
                TRACE_INI
                    .replace("cpu_0=etm_0\n", "cpu_0=etm_0\ncpu_0=STM_0\n")
                    .as_bytes(),
            ),
        ],
    );
    let ss = Snapshot::load(&dir).unwrap();
    let path = ss.path_of("stm.ini");
    assert_eq!(
        ss.warnings(),
        [SnapshotWarning {
            path: path.clone(),
            line: Some(7),
            kind: WarningKind::DuplicateKey {
                section: "regs".into(),
                key: "stmtcsr".into(),
                first_line: 6
            },
        }]
    );
    assert_eq!(
        ss.warnings()[0].to_string(),
        format!(
            "{}:7: warning: key 'stmtcsr' appears again in [regs] (first on line 6); the first value is used and this line is ignored",
            path.display()
        )
    );
    let stm = ss.device("STM_0").unwrap();
    assert_eq!(stm.regs.len(), 1);
    assert_eq!(stm.regs[0].value, 0x0020_0007);
    assert_eq!(
        ss.core_trace_sources,
        [
            ("cpu_0".to_string(), "etm_0".to_string()),
            ("cpu_0".to_string(), "STM_0".to_string())
        ]
    );
}

#[test]
fn missing_memory_dump_is_a_warning_returned_to_the_library_user() {
    let dir = good_snapshot("ss_missing_dump");
    std::fs::remove_file(dir.join("mem2.bin")).unwrap();
    let ss = Snapshot::load(&dir).unwrap();
    let ini = ss.path_of("cpu_0.ini");
    let dump = ss.path_of("mem2.bin");
    assert_eq!(
        ss.warnings(),
        [SnapshotWarning {
            path: ini.clone(),
            line: Some(16),
            kind: WarningKind::MissingDump {
                file: "mem2.bin".into(),
                path: dump.clone(),
                reason: "no such file".into()
            },
        }]
    );
    assert_eq!(
        ss.warnings()[0].to_string(),
        format!(
            "{}:16: warning: memory dump file 'mem2.bin' cannot be read ({}: no such file); the memory it holds is not mapped",
            ini.display(),
            dump.display()
        )
    );
    // The tree is still built, with the dump that is there; the listing
    // keeps OpenCSD's message for the one that is not.
    let out = shared(MsgLogger::capture());
    let tree = TreeBuilder::new(&ss)
        .build("ETB_0", DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(out.clone()))
        })
        .unwrap();
    assert_eq!(tree.mem_mapper().unwrap().borrow().len(), 1);
    assert_eq!(
        out.borrow().captured(),
        format!(
            "ss2_dcdtree : 0x0003 (OCSD_ERR_NOT_INIT) [Component not initialised.]; Failed to create memory accessor for file {}.",
            dump.display()
        )
    );

    // A dump section mapping more than its file holds.
    let dir = good_snapshot("ss_short_dump");
    write_files(&dir, &[("mem.bin", &[0u8; 8])]);
    let ss = Snapshot::load(&dir).unwrap();
    assert_eq!(
        ss.warnings().iter().map(ToString::to_string).collect::<Vec<_>>(),
        [format!(
            "{}:11: warning: memory dump 'mem.bin': 16 bytes from offset 0 run past the end of the file (8 bytes); the dump is not mapped",
            ss.path_of("cpu_0.ini").display()
        )]
    );
}

#[test]
fn formatted_buffer_of_440_bytes_warns_of_its_8_byte_tail() {
    let dir = good_snapshot("ss_partial_frame");
    // ETB_0 is a.bin then b.bin: 16 + 424 bytes.
    write_files(&dir, &[("b.bin", &[0u8; 424])]);
    let ss = Snapshot::load(&dir).unwrap();
    let b = ss.path_of("b.bin");
    assert_eq!(
        ss.warnings(),
        [SnapshotWarning {
            path: b.clone(),
            line: None,
            kind: WarningKind::PartialFrame {
                buffer: "ETB_0".into(),
                offset: 432,
                length: 8
            },
        }]
    );
    assert_eq!(
        ss.warnings()[0].to_string(),
        format!(
            "{}: warning: trace buffer ETB_0 ends with 8 bytes at byte 432 that are not a whole 16-byte frame; \
             the frames before them are decoded, these bytes are not",
            b.display()
        )
    );
    // An unformatted buffer has no frames to end inside.
    write_files(&dir, &[("b.bin", &[0u8; 16]), ("c.bin", &[0u8; 5])]);
    assert_eq!(Snapshot::load(&dir).unwrap().warnings(), []);
}

#[test]
fn good_snapshot_has_no_warnings() {
    let ss = Snapshot::load(good_snapshot("ss_no_warnings")).unwrap();
    assert_eq!(ss.warnings(), []);
}

/// Decodes `buffer` of the snapshot in `dir` (full decode, in 1024-byte
/// blocks as the lister reads them): the elements printed one a line, and
/// what the tree logged.
fn decode_lines(dir: &Path, buffer: &str) -> (Vec<String>, String) {
    use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
    use coresight_decode::element::TraceElement;
    use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
    use std::sync::{Arc, Mutex};

    struct Lines(Arc<Mutex<Vec<String>>>);
    impl TrcGenElemIn for Lines {
        fn trace_elem_in(&mut self, index: TrcIndex, trace_id: u8, elem: &TraceElement) -> DatapathResp {
            let mut s = format!("Idx:{index}; ID:{trace_id:x}; ");
            elem.write_to(&mut s);
            self.0.lock().unwrap().push(s);
            DatapathResp::Cont
        }
    }
    let ss = Snapshot::load(dir).unwrap();
    let log = shared(MsgLogger::capture());
    let mut tree = TreeBuilder::new(&ss)
        .build(buffer, DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(log.clone()))
        })
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    tree.set_gen_elem_out(Box::new(Lines(lines.clone())));
    let data: Vec<u8> = ss
        .buffer_paths(ss.buffer(buffer).unwrap())
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect();
    let mut at = 0;
    while at < data.len() {
        let end = (at + 1024).min(data.len());
        let (resp, used) = tree.trace_data_in(DatapathOp::Data, at as TrcIndex, &data[at..end]);
        assert!(resp.is_cont(), "{resp:?} at {at}");
        at += used;
    }
    assert!(tree.trace_data_in(DatapathOp::Eot, 0, &[]).0.is_cont());
    let lines = lines.lock().unwrap().clone();
    let text = log.borrow().captured().to_string();
    (lines, text)
}

#[test]
fn formatted_buffer_of_440_bytes_decodes_its_27_whole_frames() {
    // The ETMv4 snapshot of snapshots/ (a formatted buffer), cut to 440
    // bytes: the tree decodes exactly what it decodes from the 432 bytes
    // of the 27 whole frames, and logs the 8 bytes left over.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/etmv4-a64");
    let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    let trace = &files
        .iter()
        .find(|(n, _)| n == "trace.bin")
        .expect("the snapshot has trace.bin")
        .1;
    assert!(trace.len() >= 448, "{}", trace.len());
    let copy = |name: &str, len: usize| {
        let dir = temp_dir(name);
        for (n, bytes) in &files {
            let bytes = if n == "trace.bin" { &bytes[..len] } else { &bytes[..] };
            write_files(&dir, &[(n.as_str(), bytes)]);
        }
        dir
    };
    let whole = copy("ss_440_whole", 432);
    let cut = copy("ss_440_cut", 440);
    let ss = Snapshot::load(&cut).unwrap();
    assert_eq!(
        ss.warnings(),
        [SnapshotWarning {
            path: ss.path_of("trace.bin"),
            line: None,
            kind: WarningKind::PartialFrame {
                buffer: ss.buffer_names()[0].to_string(),
                offset: 432,
                length: 8
            },
        }]
    );
    let buffer = ss.buffer_names()[0].to_string();
    let (expect, expect_log) = decode_lines(&whole, &buffer);
    let (got, got_log) = decode_lines(&cut, &buffer);
    assert!(expect.len() > 20, "{expect:?}");
    assert!(expect.iter().any(|l| l.contains("INSTR_RANGE")), "{expect:?}");
    assert_eq!(got, expect);
    // The tail is reported as the end of trace comes, before the decoders
    // finish.
    assert_eq!(
        got_log,
        format!(
            "DFMT_CSFRAMES : 0x0006 (OCSD_ERR_INVALID_PARAM_VAL) [Invalid value parameter passed to component.]; \
             TrcIdx=432; Incomplete frame at end of trace: 8 bytes not decoded (frames are 16 bytes).\n{expect_log}"
        )
    );
}

#[test]
fn unknown_buffer_names_the_snapshot_and_the_buffers_it_has() {
    let dir = good_snapshot("ss_unknown_buffer_name");
    let ss = Snapshot::load(&dir).unwrap();
    let e = TreeBuilder::new(&ss)
        .build("ETB_9", DecodeMode::FullDecode, |_| {})
        .expect_err("no such buffer");
    assert_eq!(
        e.to_string(),
        "no trace buffer named 'ETB_9' in the snapshot (it has: ETB_0, ETB_1)"
    );
}
