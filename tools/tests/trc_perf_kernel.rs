//! trc_perf on kernel recordings that trc_gen writes (`--space kernel|module`): the same
//! branches through the kernel image, the module's file and perf's kcore folder (`--kcore`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trc_perf_kernel-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// trc_gen's kernel recording of `space` as DIR/k.data (with k.data.elf, k.data.kcore_dir and,
/// for a module, kgen.ko).
fn generate(dir: &Path, space: &str) -> PathBuf {
    let file = dir.join("k.data");
    let o = Command::new(env!("CARGO_BIN_EXE_trc_gen"))
        .args([
            "--protocol",
            "etmv4",
            "--seed",
            "5",
            "--cpus",
            "2",
            "--length",
            "150",
            "--space",
            space,
        ])
        .arg("--perf-data")
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    file
}

/// `trc_perf script` branch lines of `file` with `extra` options.
fn script(file: &Path, extra: &[&std::ffi::OsStr]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_trc_perf"))
        .arg("script")
        .arg(file)
        .args([
            "--itrace",
            "b",
            "-F",
            "tid,ip,sym,symoff,dso,addr",
            "--no-recorded-paths",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn kernel_recording_through_vmlinux_and_kcore() {
    let dir = scratch("kernel");
    let file = generate(&dir, "kernel");
    let elf = dir.join("k.data.elf");
    let kcore = dir.join("k.data.kcore_dir");
    let want = script(&file, &["--vmlinux".as_ref(), elf.as_os_str()]);
    assert!(want.lines().count() > 40, "{want}");
    assert!(want.contains(" cpu0_") && want.contains(" cpu1_") && want.contains("([kernel.kallsyms])"));
    let got = script(&file, &["--kcore".as_ref(), kcore.as_os_str()]);
    assert_eq!(got, want);
    // The folder beside the recording (FILE.kcore_dir) is found without --kcore, as perf
    // finds it.
    assert_eq!(script(&file, &[]), want);
    // Nothing to read the kernel's code from: no lines.
    std::fs::rename(&kcore, dir.join("elsewhere")).unwrap();
    assert_eq!(script(&file, &[]), "");
}

#[test]
fn module_recording_through_its_file_and_kcore() {
    let dir = scratch("module");
    let file = generate(&dir, "module");
    let ko = dir.join("kgen.ko");
    assert!(ko.is_file());
    let kcore = dir.join("k.data.kcore_dir");
    let want = script(&file, &["--symdir".as_ref(), dir.as_os_str()]);
    assert!(want.lines().count() > 40, "{want}");
    let recorded = format!("({})", std::fs::canonicalize(&ko).unwrap().display());
    assert!(want.contains(&recorded), "{want}");
    // kcore alone: kallsyms names the functions and the module.
    let got = script(&file, &["--kcore".as_ref(), kcore.as_os_str()]);
    assert_eq!(got, want.replace(&recorded, "([kgen])"));

    let o = Command::new(env!("CARGO_BIN_EXE_trc_perf"))
        .arg("script")
        .arg(&file)
        .args(["--kcore", "/no/such/kcore_dir"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("kcore folder /no/such/kcore_dir") && err.contains("/no/such/kcore_dir/kcore"),
        "{err}"
    );
}

/// Through a module, branch lists give the direct route's AutoFDO text: their start addresses
/// are the module's own (its layout), as the direct route's are.
#[test]
fn module_branch_lists_give_the_direct_profile() {
    let dir = scratch("module-branch-list");
    let file = generate(&dir, "module");
    let autofdo = |args: &[&std::ffi::OsStr]| {
        let o = Command::new(env!("CARGO_BIN_EXE_trc_perf"))
            .arg("autofdo")
            .args(args)
            .arg("--symdir")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let direct = autofdo(&[file.as_os_str()]);
    assert!(direct.contains("kgen.ko"), "{direct}");
    let lists = dir.join("k.branches");
    autofdo(&[
        file.as_os_str(),
        "--output".as_ref(),
        "branch-list".as_ref(),
        "-o".as_ref(),
        lists.as_os_str(),
    ]);
    assert_eq!(autofdo(&[lists.as_os_str()]), direct);
}
