//! A snapshot with one bad part lists what the rest decodes, as OpenCSD's
//! trc_pkt_lister does: a device file that cannot be read (its source is
//! left out, with OpenCSD's two error lines), a buffer without `format=`
//! or with an unknown one, a device listed twice, a register with junk
//! after its number (each listed as if the snapshot were whole). Only a
//! snapshot of which nothing decodes fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;
use coresight_decode::snapshot::Snapshot;
use coresight_tools::lister;

/// A generated PTM + ETMv3 snapshot (two sources, each with its core).
fn snapshot(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args(["-protocol", "tc2", "-seed", "3", "-length", "2000", "-out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// (status, listing after the command line, standard error).
fn list(dir: &Path) -> (i32, String, String) {
    let out = shared(MsgLogger::capture());
    let argv: Vec<String> = [
        "trc_pkt_lister",
        "-ss_dir",
        dir.to_str().unwrap(),
        "-decode",
        "-no_time_print",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let echo = std::cell::RefCell::new(String::new());
    let status = lister::run_program(
        &argv,
        &|_| None,
        out.clone(),
        || std::sync::Arc::new(coresight_decode::decoder::DecoderRegistry::builtin()),
        &|s| echo.borrow_mut().push_str(s),
    );
    let text = out.borrow_mut().take_captured();
    let body = text
        .split_once("Test Command Line:-\n")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .map_or(text.clone(), |x| x.1.trim_start().to_string());
    // Paths name the snapshot's directory, which each case has its own.
    let body = body.replace(&dir.display().to_string(), "SNAPSHOT");
    (status, body, echo.into_inner())
}

fn edit(path: &Path, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    let new = f(text.clone());
    assert_ne!(new, text, "{}: the edit changed nothing", path.display());
    std::fs::write(path, new).unwrap();
}

#[test]
fn damage_opencsd_reads_past_lists_as_the_whole_snapshot() {
    let dir = snapshot("lister-damage-whole");
    let (status, whole, _) = list(&dir);
    assert_eq!(status, 0);
    assert!(whole.matches("OCSD_GEN_TRC_ELEM_INSTR_RANGE").count() > 20, "{whole}");
    let ss = Snapshot::load(&dir).unwrap();
    let etm = ss
        .devices
        .iter()
        .find(|d| d.class == "trace_source")
        .unwrap()
        .file
        .clone();
    let reg = ss.devices.iter().find(|d| d.class == "trace_source").unwrap().regs[0]
        .name
        .clone();
    type Edit = Box<dyn Fn(String) -> String>;
    let cases: [(&str, &str, Edit); 4] = [
        (
            "no-format",
            "trace.ini",
            Box::new(|t: String| t.replace("format=coresight\n", "")),
        ),
        (
            "unknown-format",
            "trace.ini",
            Box::new(|t: String| t.replace("format=coresight\n", "format=bogus\n")),
        ),
        (
            "device-twice",
            "snapshot.ini",
            Box::new(move |t: String| t.replace("[trace]", &format!("device99={etm}\n\n[trace]"))),
        ),
        (
            "register-junk",
            "",
            Box::new(move |t: String| {
                t.lines()
                    .map(|l| {
                        if l.starts_with(reg.as_str()) && l.contains('=') {
                            format!("{l}zz\n")
                        } else {
                            format!("{l}\n")
                        }
                    })
                    .collect()
            }),
        ),
    ];
    let etm_file = ss
        .devices
        .iter()
        .find(|d| d.class == "trace_source")
        .unwrap()
        .file
        .clone();
    for (name, file, f) in cases {
        let dir = snapshot(&format!("lister-damage-{name}"));
        let file = if file.is_empty() { etm_file.as_str() } else { file };
        edit(&dir.join(file), f);
        let (status, listing, echo) = list(&dir);
        assert_eq!(status, 0, "{name}: {echo}");
        assert_eq!(listing, whole, "{name}");
        assert!(
            echo.contains(": warning: "),
            "{name}: the damage is reported on stderr: {echo}"
        );
    }
}

#[test]
fn an_unreadable_device_file_leaves_its_source_out() {
    let dir = snapshot("lister-damage-unreadable");
    let (status, whole, _) = list(&dir);
    assert_eq!(status, 0);
    let ss = Snapshot::load(&dir).unwrap();
    let (src, _) = ss.sources_of(ss.buffer_names()[0])[0];
    let dev = ss.device(src).unwrap().file.clone();
    let gone_id = ss
        .device(src)
        .unwrap()
        .regs
        .iter()
        .find(|r| r.name.ends_with("TRACEIDR"))
        .unwrap()
        .value;
    std::fs::remove_file(dir.join(&dev)).unwrap();
    let (status, listing, echo) = list(&dir);
    assert_eq!(status, 0, "{echo}");
    let d = format!("{}/", dir.display());
    assert!(
        listing.starts_with(&format!(
            "Trace Packet Lister : reading snapshot from path SNAPSHOT\n\
             snapshot_reader : 0x0025 (OCSD_ERR_TEST_SNAPSHOT_READ) [test snapshot reader error]; Failed to open device file : SNAPSHOT/{dev}\n\
             Using ETB_0 as trace source\n\
             ss2_dcdtree : 0x0026 (OCSD_ERR_TEST_SS_TO_DECODER) [test snapshot to decode tree conversion error]; Failed to find device data for source {src}.\n",
        )),
        "{listing}"
    );
    assert!(
        echo.contains(&format!("{d}snapshot.ini:")) && echo.contains(&format!("device file '{dev}' cannot be read")),
        "{echo}"
    );
    // The other source lists as it did.
    let gone = format!("; ID:{gone_id:x}; ");
    let elements = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("Idx:") && l.contains("OCSD_GEN_TRC_ELEM_"))
            .map(str::to_string)
            .collect()
    };
    let want: Vec<String> = elements(&whole).into_iter().filter(|l| !l.contains(&gone)).collect();
    assert!(want.len() > 20);
    assert_eq!(elements(&listing), want);

    // Nothing left to decode: a failure.
    for (s, _) in ss.sources_of(ss.buffer_names()[0]) {
        let _ = std::fs::remove_file(dir.join(&ss.device(s).unwrap().file));
    }
    let (status, _, echo) = list(&dir);
    assert_eq!(status, 1, "{echo}");
}
