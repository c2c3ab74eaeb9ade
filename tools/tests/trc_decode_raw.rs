//! trc_decode without a snapshot (`--raw` with the configuration on the
//! command line or in a file), from standard input, `--id` of a trace ID
//! the capture does not have, and `--symbols` (function names from ELF
//! files). The shipped snapshots are the reference: a raw decode of their
//! trace with their configuration gives the same lines.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DECODE: &str = env!("CARGO_BIN_EXE_trc_decode");

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run_with_input(args: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut child = Command::new(DECODE)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(data) = stdin {
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn run(args: &[&str]) -> Out {
    run_with_input(args, None)
}

fn snapshot(name: &str) -> String {
    format!("{}/../snapshots/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("coresight-decode-raw-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The etmv4-a64-unformatted snapshot's source, as options (its etm_0.ini
/// and cpu_0.ini; the trace ID left to --id or a register).
fn unformatted_options(ss: &str) -> Vec<String> {
    let mut v: Vec<String> = [
        "--raw",
        "TRACE",
        "--unformatted",
        "--protocol",
        "etmv4",
        "--core",
        "Cortex-A57",
        "--reg",
        "TRCCONFIGR=0x000000C1",
        "--reg",
        "TRCIDR0=0x20000861",
        "--reg",
        "TRCIDR1=0x4100F412",
        "--reg",
        "TRCIDR2=0x08001088",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v[1] = format!("{ss}/trace.bin");
    v
}

fn memory(ss: &str) -> Vec<String> {
    vec![
        "--memory".into(),
        format!("0x400000:{ss}/code0.bin"),
        "--memory".into(),
        format!("0xFFFF000000100000:{ss}/code1.bin"),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn raw_unformatted_buffer_decodes_as_its_snapshot() {
    let ss = snapshot("etmv4-a64-unformatted");
    let reference = run(&[&ss]);
    assert_eq!(reference.code, Some(0), "{}", reference.stderr);
    assert!(reference.stdout.lines().count() > 50);
    let mut args = unformatted_options(&ss);
    args.extend(["--reg".to_string(), "TRCTRACEIDR=0x2E".to_string()]);
    args.extend(memory(&ss));
    let raw = run(&strs(&args));
    assert_eq!(raw.code, Some(0), "{}", raw.stderr);
    assert_eq!(raw.stderr, "");
    assert_eq!(raw.stdout, reference.stdout);

    // The trace ID from --id; the trace from standard input.
    let mut args = unformatted_options(&ss);
    args[1] = "-".into();
    args.extend(["--id".to_string(), "0x2e".to_string()]);
    args.extend(memory(&ss));
    let data = std::fs::read(format!("{ss}/trace.bin")).unwrap();
    let piped = run_with_input(&strs(&args), Some(&data));
    assert_eq!(piped.code, Some(0), "{}", piped.stderr);
    assert_eq!(piped.stdout, reference.stdout);
}

#[test]
fn raw_formatted_buffer_with_a_config_file() {
    let ss = snapshot("etmv4-a64");
    let reference = run(&[&ss]);
    assert_eq!(reference.code, Some(0), "{}", reference.stderr);
    let dir = scratch("config");
    std::fs::copy(format!("{ss}/code0.bin"), dir.join("code0.bin")).unwrap();
    let cfg = dir.join("etm.cfg");
    std::fs::write(
        &cfg,
        "# etmv4-a64 as a configuration file\n\
         memory = 0xFFFFFFC000080000:code0.bin   # relative to this file\n\
         [source]\nprotocol = ETMV4I\ncore = Cortex-A57\n\
         TRCCONFIGR = 0x1081\nTRCTRACEIDR = 0x15\nTRCIDR0 = 0x20000EC1\nTRCIDR1 = 0x4100F411\nTRCIDR2 = 0x04001088\n",
    )
    .unwrap();
    let code1 = format!("0xFFFFFFC000010800:{ss}/code1.bin");
    let trace = format!("{ss}/trace.bin");
    let cfg = cfg.to_str().unwrap();
    let raw = run(&["--raw", &trace, "--config", cfg, "--memory", &code1]);
    assert_eq!(raw.code, Some(0), "{}", raw.stderr);
    assert_eq!(raw.stdout, reference.stdout);

    // A snapshot's configuration with its trace from standard input.
    let data = std::fs::read(&trace).unwrap();
    let piped = run_with_input(&[&ss, "--raw", "-"], Some(&data));
    assert_eq!(piped.code, Some(0), "{}", piped.stderr);
    assert_eq!(piped.stdout, reference.stdout);

    // An ID the configured trace does not have.
    let missing = run(&["--raw", &trace, "--config", cfg, "--id", "0x10"]);
    assert_eq!(missing.code, Some(1));
    assert_eq!(missing.stdout, "");
    assert_eq!(
        missing.stderr,
        "trc_decode: no trace ID 0x10 in the configured trace (its trace IDs: 0x15)\n"
    );
}

#[test]
fn an_id_the_capture_does_not_have_is_an_error_naming_those_it_has() {
    let ss = snapshot("etmv4-a64");
    let o = run(&[&ss, "--id", "0x10"]);
    assert_eq!(o.code, Some(1));
    assert_eq!(o.stdout, "");
    assert_eq!(
        o.stderr,
        format!("trc_decode: no trace ID 0x10 in buffer ETB_0 of {ss} (its trace IDs: 0x15)\n")
    );
    // One of two missing.
    let o = run(&[&ss, "--id", "0x15", "--id", "0x20"]);
    assert_eq!(o.code, Some(1));
    assert_eq!(
        o.stderr,
        format!("trc_decode: no trace ID 0x20 in buffer ETB_0 of {ss} (its trace IDs: 0x15)\n")
    );
    // The ID it has: the whole decode.
    let all = run(&[&ss]);
    let one = run(&[&ss, "--id", "0x15"]);
    assert_eq!(one.code, Some(0));
    assert_eq!(one.stdout, all.stdout);
    // An unformatted capture's one source, by its ID.
    let ss = snapshot("etmv4-a64-unformatted");
    let all = run(&[&ss]);
    let one = run(&[&ss, "--id", "0x2e"]);
    assert_eq!(one.code, Some(0));
    assert_eq!(one.stdout, all.stdout);
}

#[test]
fn raw_configuration_errors_are_usage_errors_that_say_what_is_missing() {
    let ss = snapshot("etmv4-a64-unformatted");
    let trace = format!("{ss}/trace.bin");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--raw", &trace],
            "trc_decode: --raw without a snapshot needs --protocol (or --config FILE) to say how to decode it\n",
        ),
        (
            &["--raw", &trace, "--protocol", "etmv9"],
            "trc_decode: unknown protocol 'etmv9' (known: etmv4i, ete, ptm, etmv3, stm, itm)\n",
        ),
        (
            &[
                "--raw",
                &trace,
                "--protocol",
                "etmv4",
                "--core",
                "Cortex-A57",
                "--id",
                "0x10",
            ],
            "trc_decode: source_0: protocol ETMV4I needs the registers TRCCONFIGR, TRCIDR0, TRCIDR2 (--reg NAME=VALUE)\n",
        ),
        (
            &["--raw", &trace, "--protocol", "etmv4", "--reg", "TRCIDR0=1"],
            "trc_decode: source_0: no trace ID: give --id ID (or the register, --reg TRCTRACEIDR=VALUE)\n",
        ),
        (
            &[
                "--raw",
                &trace,
                "--protocol",
                "stm",
                "--core",
                "Cortex-A57",
                "--id",
                "0x10",
            ],
            "trc_decode: source_0: protocol STM traces no core: --core is not for it\n",
        ),
    ];
    for (args, stderr) in cases {
        let o = run(args);
        assert_eq!((o.code, o.stderr.as_str()), (Some(2), *stderr), "{args:?}");
        assert_eq!(o.stdout, "");
    }
    // A bad --reg is refused by the option parser.
    let o = run(&["--raw", &trace, "--protocol", "etmv4", "--reg", "TRCIDR0"]);
    assert_eq!(o.code, Some(2));
    assert!(
        o.stderr
            .contains("'TRCIDR0' is not NAME=VALUE (a register name, '=' and its value)"),
        "{}",
        o.stderr
    );
    // A missing trace or memory file is a failure naming it.
    let o = run(&["--raw", "/nonexistent/t.bin", "--protocol", "stm", "--id", "0x10"]);
    assert_eq!(o.code, Some(1));
    assert!(
        o.stderr
            .starts_with("trc_decode: cannot read trace file /nonexistent/t.bin: "),
        "{}",
        o.stderr
    );
    let o = run(&[
        "--raw",
        &trace,
        "--protocol",
        "stm",
        "--id",
        "0x10",
        "--memory",
        "0x0:/nonexistent/m.bin",
    ]);
    assert_eq!(o.code, Some(1));
    assert!(
        o.stderr.starts_with("trc_decode: cannot read /nonexistent/m.bin: "),
        "{}",
        o.stderr
    );
}

// ---- A small ELF file (AArch64, little-endian) for --elf and --symbols ----

/// A symbol: name, value, size, `st_info` (bind << 4 | type).
type Sym<'a> = (&'a str, u64, u64, u8);
const FUNC_GLOBAL: u8 = 0x12;
const NOTYPE_GLOBAL: u8 = 0x10;
const NOTYPE_LOCAL: u8 = 0x00;

/// Writes an ELF64 executable: one PT_LOAD segment per (address, bytes),
/// and a symbol table.
fn write_elf(path: &Path, segments: &[(u64, Vec<u8>)], syms: &[Sym]) {
    let u16b = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&x.to_le_bytes());
    let u32b = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    let u64b = |v: &mut Vec<u8>, x: u64| v.extend_from_slice(&x.to_le_bytes());
    let phoff = 64u64;
    let mut data_off = phoff + 56 * segments.len() as u64;
    let mut seg_offsets = Vec::new();
    for (_, bytes) in segments {
        seg_offsets.push(data_off);
        data_off += bytes.len() as u64;
    }
    // .strtab and the symbols.
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for (name, value, size, info) in syms {
        let off = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
        u32b(&mut symtab, off);
        symtab.push(*info);
        symtab.push(0);
        u16b(&mut symtab, 0xfff1); // SHN_ABS: defined
        u64b(&mut symtab, *value);
        u64b(&mut symtab, *size);
    }
    let shstrtab = b"\0.symtab\0.strtab\0.shstrtab\0".to_vec();
    let symtab_off = data_off;
    let strtab_off = symtab_off + symtab.len() as u64;
    let shstrtab_off = strtab_off + strtab.len() as u64;
    let shoff = shstrtab_off + shstrtab.len() as u64;

    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    u16b(&mut f, 2); // ET_EXEC
    u16b(&mut f, 183); // EM_AARCH64
    u32b(&mut f, 1);
    u64b(&mut f, segments[0].0);
    u64b(&mut f, phoff);
    u64b(&mut f, shoff);
    u32b(&mut f, 0);
    u16b(&mut f, 64);
    u16b(&mut f, 56);
    u16b(&mut f, segments.len() as u16);
    u16b(&mut f, 64);
    u16b(&mut f, 4);
    u16b(&mut f, 3);
    for ((addr, bytes), off) in segments.iter().zip(&seg_offsets) {
        u32b(&mut f, 1); // PT_LOAD
        u32b(&mut f, 5); // R X
        u64b(&mut f, *off);
        u64b(&mut f, *addr);
        u64b(&mut f, *addr);
        u64b(&mut f, bytes.len() as u64);
        u64b(&mut f, bytes.len() as u64);
        u64b(&mut f, 1);
    }
    for (_, bytes) in segments {
        f.extend_from_slice(bytes);
    }
    f.extend_from_slice(&symtab);
    f.extend_from_slice(&strtab);
    f.extend_from_slice(&shstrtab);
    // Section headers: null, .symtab, .strtab, .shstrtab.
    f.extend_from_slice(&[0u8; 64]);
    let mut section = |name: u32, ty: u32, off: u64, size: u64, link: u32, info: u32, entsize: u64| {
        u32b(&mut f, name);
        u32b(&mut f, ty);
        u64b(&mut f, 0);
        u64b(&mut f, 0);
        u64b(&mut f, off);
        u64b(&mut f, size);
        u32b(&mut f, link);
        u32b(&mut f, info);
        u64b(&mut f, 8);
        u64b(&mut f, entsize);
    };
    let first_global = 1 + syms.iter().filter(|s| s.3 >> 4 == 0).count() as u32;
    section(1, 2, symtab_off, symtab.len() as u64, 2, first_global, 24);
    section(9, 3, strtab_off, strtab.len() as u64, 0, 0, 0);
    section(17, 3, shstrtab_off, shstrtab.len() as u64, 0, 0, 0);
    std::fs::write(path, f).unwrap();
}

/// The symbols of the test program: a C function, a C++ and a Rust one
/// (mangled), an assembler label and a mapping symbol (never a name).
const SYMS: &[Sym] = &[
    ("$x", 0x400000, 0, NOTYPE_LOCAL),
    ("main", 0x400000, 0x138, FUNC_GLOBAL),
    ("_ZN3foo3barEv", 0x400138, 0x200, FUNC_GLOBAL),
    ("handler_label", 0x400400, 0, NOTYPE_GLOBAL),
    (
        "_ZN4core3fmt5write17h0123456789abcdefE",
        0xffff000000100000,
        0x58,
        FUNC_GLOBAL,
    ),
];

/// The line of the instruction range starting at `start`.
fn range_line<'a>(out: &'a str, start: &str) -> &'a str {
    let key = format!("exec range={start}:");
    out.lines()
        .find(|l| l.contains(&key))
        .unwrap_or_else(|| panic!("no range at {start} in:\n{out}"))
}

#[test]
fn symbols_name_the_function_of_each_range_demangled() {
    let ss = snapshot("etmv4-a64-unformatted");
    let reference = run(&[&ss]);
    let dir = scratch("elf");
    let elf = dir.join("prog.elf");
    let code0 = std::fs::read(format!("{ss}/code0.bin")).unwrap();
    let code1 = std::fs::read(format!("{ss}/code1.bin")).unwrap();
    write_elf(&elf, &[(0x400000, code0.clone()), (0xffff000000100000, code1)], SYMS);
    let elf = elf.to_str().unwrap();

    // The ELF file as the memory image, no symbols: the default output.
    let mut args = unformatted_options(&ss);
    args.extend(["--id".into(), "0x2e".into(), "--elf".into(), elf.into()]);
    let plain = run(&strs(&args));
    assert_eq!(plain.code, Some(0), "{}", plain.stderr);
    assert_eq!(plain.stdout, reference.stdout);

    args.push("--symbols".into());
    let named = run(&strs(&args));
    assert_eq!(named.code, Some(0), "{}", named.stderr);
    let out = &named.stdout;
    assert_eq!(
        range_line(out, "0x400000"),
        "Idx:33; ID:2e; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x400000:[0x400008] num_i(2) last_sz(4) (ISA=A64) E iBR A64:ret ) <main>"
    );
    assert!(range_line(out, "0x400138").ends_with(" <foo::bar()>"));
    assert!(range_line(out, "0x40016c").ends_with(" <foo::bar()+0x34>"));
    assert!(range_line(out, "0x40037c").ends_with(" <?>"), "between functions");
    assert!(range_line(out, "0x400404").ends_with(" <handler_label+0x4>"));
    assert!(range_line(out, "0xffff000000100010").ends_with(" <core::fmt::write+0x10>"));
    // Only instruction ranges change, by their suffix.
    let stripped: String = out
        .lines()
        .map(|l| match l.rfind(" <") {
            Some(i) if l.contains("INSTR_RANGE") => format!("{}\n", &l[..i]),
            _ => format!("{l}\n"),
        })
        .collect();
    assert_eq!(stripped, reference.stdout);

    // JSON: a `symbol` field.
    args.extend(["--format".into(), "json".into()]);
    let json = run(&strs(&args));
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let first = json.stdout.lines().find(|l| l.contains("\"instr_range\"")).unwrap();
    assert!(
        first.starts_with('{') && first.ends_with(",\"symbol\":\"main\"}"),
        "{first}"
    );
    let v: serde_json::Value = serde_json::from_str(first).unwrap();
    assert_eq!(v["start"], "0x400000");

    // An ELF file linked at 0 and loaded at 0x400000: memory and symbols move.
    let low = dir.join("low.elf");
    let moved: Vec<Sym> = SYMS[..3].iter().map(|&(n, a, s, i)| (n, a - 0x400000, s, i)).collect();
    write_elf(&low, &[(0, code0)], &moved);
    let mut args = unformatted_options(&ss);
    args.extend(["--id".into(), "0x2e".into(), "--symbols".into()]);
    args.extend(["--elf".into(), format!("{}@0x400000", low.display())]);
    args.extend(["--memory".into(), format!("0xFFFF000000100000:{ss}/code1.bin")]);
    let o = run(&strs(&args));
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(range_line(&o.stdout, "0x400000").ends_with(" <main>"));
    assert!(range_line(&o.stdout, "0x40016c").ends_with(" <foo::bar()+0x34>"));

    let o = run(&[&ss, "--elf", elf, "--symbols", "--format", "tarmac"]);
    assert_eq!(o.code, Some(2));
    assert_eq!(
        o.stderr,
        "trc_decode: --symbols names functions in text and json output, not in tarmac\n"
    );
    // --symbols without an ELF file.
    let o = run(&[&ss, "--symbols"]);
    assert_eq!(o.code, Some(2));
    assert_eq!(
        o.stderr,
        "trc_decode: --symbols needs an ELF file with symbols: give it with --elf FILE\n"
    );
}

#[test]
fn raw_buffer_of_three_sources_on_threads() {
    // PTM and two ETMv3 sources in one formatted buffer, each core's
    // memory dumps as `memory` lines of the file.
    let ss = snapshot("ptm-etmv3-shared-buffer");
    let mut cfg = String::new();
    for core in ["cpu_0", "cpu_1", "cpu_2"] {
        let ini = std::fs::read_to_string(format!("{ss}/{core}.ini")).unwrap();
        let mut file = "";
        for line in ini.lines() {
            if let Some(f) = line.strip_prefix("file=") {
                file = f;
            }
            if let Some(a) = line.strip_prefix("address=") {
                cfg.push_str(&format!("memory = {a}:{ss}/{file}\n"));
            }
        }
    }
    cfg.push_str(
        "[source]\nprotocol = ptm\ncore = Cortex-A15\nETMCR=0x30004000\nETMIDR=0x411CF312\nETMCCER=0x34C01AC2\n\
         ETMTRACEIDR=0x17\n\
         [source]\nprotocol = etmv3\ncore = Cortex-A7\nETMCR=0x5000C860\nETMIDR=0x410CF250\nETMCCER=0x144008F2\n\
         ETMTRACEIDR=0x11\n\
         [source]\nprotocol = etmv3\ncore = Cortex-A7\nETMCR=0x40009860\nETMIDR=0x410CF250\nETMCCER=0x344008F2\n\
         ETMTRACEIDR=0x29\n",
    );
    let path = scratch("tc2").join("tc2.cfg");
    std::fs::write(&path, cfg).unwrap();
    let cfg = path.to_str().unwrap();
    let trace = format!("{ss}/trace.bin");
    let reference = run(&[&ss, "--threads", "1"]);
    assert_eq!(reference.code, Some(0), "{}", reference.stderr);
    assert!(reference.stdout.contains("ID:17;") && reference.stdout.contains("ID:29;"));
    for threads in ["1", "2"] {
        let o = run(&["--raw", &trace, "--config", cfg, "--threads", threads]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        assert_eq!(o.stdout, reference.stdout, "--threads {threads}");
    }
    let two = run(&["--raw", &trace, "--config", cfg, "--id", "0x11", "--id", "0x29"]);
    assert_eq!(two.stdout, run(&[&ss, "--id", "0x11", "--id", "0x29"]).stdout);
    assert!(!two.stdout.contains("ID:17;"));
    // --core and --reg belong to one source.
    let o = run(&["--raw", &trace, "--config", cfg, "--reg", "ETMCR=0"]);
    assert_eq!(o.code, Some(2));
    assert_eq!(
        o.stderr,
        "trc_decode: --core and --reg describe the source given by --protocol (or the one source of --config)\n"
    );
}
