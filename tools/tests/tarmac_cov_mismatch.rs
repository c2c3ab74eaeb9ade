//! `trc_cov` with an executable that does not match a gnatcov trace's
//! header (file size, CRC32, machine): gnatcov's warning, and exit status
//! 1 unless `--allow-mismatch`. The trace is exported from a Tarmac
//! fixture, which names its ELF in the Info section.

use std::path::{Path, PathBuf};
use std::process::Command;

fn calls() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../formats/tarmac/tests/fixtures/calls")
}

fn trc_cov(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_trc_cov")).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_executable_that_does_not_match_the_trace_is_refused() {
    let dir = std::env::temp_dir().join(format!("trc-cov-mismatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (e64, e32) = (s(&calls().join("a64.elf")), s(&calls().join("a32.elf")));
    let trace = s(&dir.join("a64.trace"));
    let (code, _, err) = trc_cov(&[
        "export",
        "--tarmac",
        &s(&calls().join("a64-fm.tarmac")),
        "--elf",
        &e64,
        "-o",
        &trace,
    ]);
    assert_eq!(code, Some(0), "{err}");
    // The right executable: no warning.
    let (code, out, err) = trc_cov(&["coverage", "--elf", &e64, &trace]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    // One byte more: size and CRC32 differ.
    let longer = dir.join("longer.elf");
    let mut bytes = std::fs::read(&e64).unwrap();
    let (size, crc) = (bytes.len(), coresight_gnatcov::export::crc32(&bytes));
    bytes.push(0);
    let crc2 = coresight_gnatcov::export::crc32(&bytes);
    std::fs::write(&longer, &bytes).unwrap();
    let longer = s(&longer);
    let warning = format!(
        "trc_cov: warning: executable file {longer} does not seem to match trace file {trace} \
         (size {size} in the trace, {} in the file, CRC32 {crc} in the trace, {crc2} of the file)\n",
        size + 1
    );
    let (code, out, err) = trc_cov(&["coverage", "--elf", &longer, &trace]);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    assert_eq!(
        err,
        format!("{warning}trc_cov: the executable does not match the trace (--allow-mismatch to go on)\n")
    );
    let (code, out, err) = trc_cov(&["coverage", "--allow-mismatch", "--elf", &longer, &trace]);
    assert_eq!((code, err), (Some(0), warning));
    assert!(!out.is_empty());
    // Another architecture: the machine differs too.
    let (code, _, err) = trc_cov(&["lcov", "--elf", &e32, &trace]);
    assert_eq!(code, Some(1));
    assert!(err.contains(", machine 183 in the trace, 40 in the file)\n"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
