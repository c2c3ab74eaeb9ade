//! An ordinary snapshot directory with a RISC-V trace source: loaded into a
//! decode tree with the plug-in registered, listed and decoded by the lister,
//! and refused with clear messages when its device file is wrong.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use coresight_decode::builder::TreeBuilder;
use coresight_decode::decoder::DecodeMode;
use coresight_decode::logger::MsgLogger;
use coresight_decode::shared::shared;
use coresight_decode::snapshot::Snapshot;
use riscv_trace::config::TraceReg;
use riscv_trace::encoder::{Encoded, Executed, Mode};

fn qemu_program() -> (Program, Vec<Executed>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let p = program_from_elf(&std::fs::read(dir.join("calls.elf")).unwrap());
    let mut text = String::new();
    use std::io::Read;
    lzma_rust2::XzReader::new(std::fs::File::open(dir.join("calls.pcs.xz")).unwrap(), false)
        .read_to_string(&mut text)
        .unwrap();
    let pcs: Vec<u64> = text.lines().map(|l| u64::from_str_radix(l, 16).unwrap()).collect();
    let user = Mode { prv: 0, ie: false };
    let steps = pcs
        .iter()
        .enumerate()
        .map(|(i, &pc)| Executed {
            hart: 0,
            pc,
            next_pc: pcs.get(i + 1).copied().unwrap_or(pc + 4),
            mode: user,
            next_mode: user,
            interrupt: None,
            timestamp: (i % 500 == 0).then_some(i as u64),
            access: None,
        })
        .collect();
    (p, steps)
}

fn temp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes a snapshot of `enc` with `p` as the core's memory dump;
/// `source_regs` is the `[regs]` section of the trace source.
fn write_snapshot(dir: &Path, p: &Program, enc: &Encoded, core_type: &str, source_regs: &str) {
    let files: [(&str, Vec<u8>); 6] = [
        (
            "snapshot.ini",
            b"[snapshot]\nversion=1.0\n[device_list]\ndevice0=cpu_0.ini\ndevice1=rvtrace_0.ini\n[trace]\nmetadata=trace.ini\n".to_vec(),
        ),
        (
            "cpu_0.ini",
            format!("[device]\nname=cpu_0\nclass=core\ntype={core_type}\n[dump1]\nfile=text.bin\naddress=0x{:x}\n", p.base).into_bytes(),
        ),
        ("rvtrace_0.ini", format!("[device]\nname=rvtrace_0\nclass=trace_source\ntype=RISCV_TRACE\n[regs]\n{source_regs}").into_bytes()),
        (
            "trace.ini",
            b"[trace_buffers]\nbuffers=buffer0\n[buffer0]\nname=tbuf\nfile=trace.bin\nformat=source_data\n\
              [source_buffers]\nrvtrace_0=tbuf\n[core_trace_sources]\ncpu_0=rvtrace_0\n"
                .to_vec(),
        ),
        ("trace.bin", enc.data.clone()),
        ("text.bin", p.bytes.clone()),
    ];
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
    }
}

fn regs_of(enc: &Encoded) -> String {
    let c = &enc.config;
    format!(
        "trace=0x{:x}\ntbufstart=0x{:x}\ntbufend=0x{:x}\ntbufwrite=0x{:x}\n",
        c.trace.0, c.tbufstart, c.tbufend, c.tbufwrite
    )
}

const TRACE: u32 =
    TraceReg::SUPPORTED | TraceReg::EMIT_PC | TraceReg::EMIT_BRANCH | TraceReg::EMIT_PRIV | TraceReg::EMIT_TIMESTAMP;

#[test]
fn a_tree_built_from_a_snapshot_with_the_plug_in_registered() {
    let (p, steps) = qemu_program();
    let enc = encode(&p, TRACE, 4096, &steps);
    let dir = temp_dir("rv_snapshot_tree");
    write_snapshot(&dir, &p, &enc, "RV64GC", &regs_of(&enc));
    let ss = Snapshot::load(&dir).unwrap();

    // The built-in protocols know no RISCV_TRACE device: no decoder.
    let plain = TreeBuilder::new(&ss)
        .build("tbuf", DecodeMode::FullDecode, |_| {})
        .unwrap_err();
    assert!(
        matches!(&plain, coresight_decode::Error::NoDecoder { buffer, .. } if buffer == "tbuf"),
        "{plain:?}"
    );

    let log = shared(MsgLogger::capture());
    let mut tree = TreeBuilder::with_registry(&ss, riscv_trace::registry())
        .build("tbuf", DecodeMode::FullDecode, |t| {
            t.set_error_output(Some(log.clone()))
        })
        .expect("a tree with the RISC-V decoder");
    let ids: Vec<(u8, String, String)> = tree
        .elements()
        .map(|(id, e)| (id, e.protocol.clone(), e.source_name.clone()))
        .collect();
    assert_eq!(ids, [(0, "RISCV".to_string(), "rvtrace_0".to_string())]);
    let elems = collect(&mut tree, &enc.data, 1000, 0);
    assert_eq!(trouble(&elems), Vec::<String>::new());
    let got = observe(&elems, &p, true);
    assert_same(&got, &expect(&steps, &p, TRACE), "snapshot decode");
    assert_eq!(got.instrs.len(), steps.len());
    assert_eq!(log.borrow().captured(), "", "nothing logged");
}

fn lister(dir: &Path, extra: &[&str]) -> String {
    let out = shared(MsgLogger::capture());
    let mut argv: Vec<String> = ["trc_pkt_lister", "-ss_dir", dir.to_str().unwrap(), "-no_time_print"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.extend(extra.iter().map(|s| s.to_string()));
    let status = coresight_tools::lister::run_with_registry(&argv, &|_| None, out.clone(), riscv_trace::registry());
    assert_eq!(status, 0);
    out.borrow_mut().take_captured()
}

#[test]
fn the_lister_lists_and_decodes_a_riscv_snapshot() {
    let (p, steps) = qemu_program();
    let enc = encode(&p, TRACE, 4096, &steps[..40]);
    let dir = temp_dir("rv_snapshot_lister");
    write_snapshot(&dir, &p, &enc, "RV64GC", &regs_of(&enc));

    let listing = lister(&dir, &[]);
    assert!(
        listing.contains("Trace Packet Lister : Protocol printer RISCV on Trace ID 0x0\n"),
        "{listing}"
    );
    let packets: Vec<&str> = listing.lines().filter(|l| l.starts_with("Idx:")).collect();
    // Trace Enabled, Privilege Level (U), the first PC in full (63 bits),
    // the timestamp taken at the first instruction.
    assert_eq!(packets[0], "Idx:0; ID:0;\tTRACE_ENABLED : version 0");
    assert_eq!(packets[1], "Idx:1; ID:0;\tPRIVILEGE : U; ID");
    assert_eq!(
        packets[2],
        format!("Idx:2; ID:0;\tPC : 0x{:x}; (16 nibbles)", steps[0].pc)
    );
    assert_eq!(packets[3], "Idx:11; ID:0;\tTIMESTAMP : 0x0; (16 nibbles)");
    assert!(packets.iter().any(|l| l.ends_with("\tBRANCH_NOT_TAKEN")), "{listing}");
    assert!(packets.last().unwrap().ends_with("\tTRACE_DISABLED"), "{listing}");

    let decoded = lister(&dir, &["-decode"]);
    let elems: Vec<&str> = decoded.lines().filter(|l| l.contains("OCSD_GEN_TRC_ELEM")).collect();
    assert_eq!(
        elems[0],
        "Idx:1; ID:0; OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=RV) U; 64-bit; hart=0x0; ID; )"
    );
    assert_eq!(elems[1], "Idx:2; ID:0; OCSD_GEN_TRC_ELEM_TRACE_ON( [begin or filter])");
    assert_eq!(
        elems[3],
        "Idx:11; ID:0; OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x000000000000]; )"
    );
    assert!(
        elems[4].contains(&format!(
            "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x{:x}:",
            steps[0].pc
        )),
        "{decoded}"
    );
    assert!(elems.iter().any(|l| l.contains("(ISA=RV) N BR   <cond>")), "{decoded}");
    assert!(
        elems[elems.len() - 2].ends_with("; ID:0; OCSD_GEN_TRC_ELEM_NO_SYNC( [discard])"),
        "{decoded}"
    );
    assert_eq!(
        elems[elems.len() - 1],
        "Idx:0; ID:0; OCSD_GEN_TRC_ELEM_EO_TRACE( [end-of-trace])"
    );
    // Decoding shows the same instructions as QEMU ran.
    let n: u32 = elems
        .iter()
        .filter_map(|l| l.split("num_i(").nth(1)?.split(')').next()?.parse::<u32>().ok())
        .sum();
    assert_eq!(n, 40);
}

#[test]
fn a_wrong_device_file_is_refused_with_a_clear_message() {
    let (p, steps) = qemu_program();
    let enc = encode(&p, TRACE, 4096, &steps[..40]);
    let cases: [(&str, String, &str); 4] = [
        (
            "RV64GC",
            "trace=0x30001\ntbufstart=0x1000\ntbufend=0x2000\n".into(),
            "Error:Missing tbufwrite",
        ),
        (
            "Cortex-A53",
            regs_of(&enc),
            "Failed to create decoder for source rvtrace_0",
        ),
        (
            "RV64GC",
            "trace=0x30001\ntbufstart=0x1000\ntbufend=0x1010\ntbufwrite=0x1000\n".into(),
            "expected at least 24 words",
        ),
        (
            "RV64GC",
            "trace=0x30001\ntbufstart=0x1000\ntbufend=0x2000\ntbufwrite=0x3000\n".into(),
            "tbufwrite 0x3000 outside the buffer",
        ),
    ];
    for (i, (core, regs, message)) in cases.iter().enumerate() {
        let dir = temp_dir(&format!("rv_snapshot_bad{i}"));
        write_snapshot(&dir, &p, &enc, core, regs);
        let ss = Snapshot::load(&dir).unwrap();
        let log = shared(MsgLogger::capture());
        let tree = TreeBuilder::with_registry(&ss, riscv_trace::registry())
            .build("tbuf", DecodeMode::FullDecode, |t| {
                t.set_error_output(Some(log.clone()))
            })
            .unwrap_err();
        assert!(
            matches!(tree, coresight_decode::Error::NoDecoder { .. }),
            "case {i}: {tree:?}"
        );
        let text = log.borrow().captured().to_string();
        assert!(text.contains(message), "case {i}: {text}");
    }
    // By hand, the configuration error names the source and the problem.
    let mut cfg = source_config(&enc.config);
    cfg.regs[2].1 = cfg.regs[1].1 + 8;
    let e = riscv_trace::RiscvTraceConfig::from_source(&cfg)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("RVTRACE_0: trace buffer 0x90000000..0x90000008: expected at least 24 words"),
        "{e}"
    );
}

#[test]
fn forced_waits_leave_the_listings_unchanged() {
    let (p, steps) = qemu_program();
    // A wrapped buffer too: its held part is listed at the end of trace,
    // where waits must also be honoured.
    for (words, n) in [(4096u64, steps.len()), (24, steps.len())] {
        let enc = encode(&p, TraceReg::SUPPORTED | TraceReg::EMIT_ALL, words, &steps[..n]);
        assert_eq!(enc.config.trace.wrapped(), words == 24);
        let dir = temp_dir(&format!("rv_snapshot_waits{words}"));
        write_snapshot(&dir, &p, &enc, "RV64GC", &regs_of(&enc));
        let body = |s: String| {
            s.lines()
                .filter(|l| l.starts_with("Idx:") || l.starts_with("ID:"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for extra in [&[][..], &["-decode"][..]] {
            let reference = body(lister(&dir, extra));
            assert!(reference.lines().count() > 20, "{reference}");
            for waits in ["1", "7", "100000"] {
                let mut args = extra.to_vec();
                args.extend(["-test_waits", waits]);
                assert_eq!(body(lister(&dir, &args)), reference, "words={words} {args:?}");
            }
        }
    }
}

/// The shipped example, `snapshots/qemu-calls`: the `calls` QEMU fixture
/// traced with every emit option, and its decode listing
/// (`expected.ppl`). `scripts/make_example_snapshot.sh` rewrites it; this
/// test checks it is what the code makes now.
#[test]
fn the_shipped_example_snapshot_is_current() {
    let (p, steps) = qemu_program();
    let enc = encode(&p, TraceReg::SUPPORTED | TraceReg::EMIT_ALL, 2048, &steps);
    let work = temp_dir("rv_example_snapshot");
    let dir = work.join("qemu-calls");
    std::fs::create_dir_all(&dir).unwrap();
    write_snapshot(&dir, &p, &enc, "RV64GC", &regs_of(&enc));
    let listing = lister(&dir, &["-decode"]).replace(dir.to_str().unwrap(), "./qemu-calls");
    std::fs::write(dir.join("expected.ppl"), listing).unwrap();

    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/qemu-calls");
    let names = [
        "snapshot.ini",
        "cpu_0.ini",
        "rvtrace_0.ini",
        "trace.ini",
        "trace.bin",
        "text.bin",
        "expected.ppl",
    ];
    if std::env::var_os("RISCV_TRACE_BLESS").is_some() {
        std::fs::create_dir_all(&shipped).unwrap();
        for n in names {
            std::fs::copy(dir.join(n), shipped.join(n)).unwrap();
        }
    }
    for n in names {
        let made = std::fs::read(dir.join(n)).unwrap();
        let have = std::fs::read(shipped.join(n)).unwrap_or_default();
        assert!(
            made == have,
            "snapshots/qemu-calls/{n} is out of date: run scripts/make_example_snapshot.sh"
        );
    }
}

#[test]
fn by_hand_without_a_snapshot_or_registry() {
    use coresight_decode::memory::{BufferAccessor, MemSpace};
    use coresight_decode::tree::{DecodeTree, SourceFormat};
    let (p, steps) = qemu_program();
    let enc = encode(&p, TRACE, 4096, &steps);
    // A tree with only the built-in protocols; the component is made
    // directly from a configuration and placed on trace ID 0.
    let mut tree = DecodeTree::new(SourceFormat::Single, DecodeMode::FullDecode);
    tree.mem_mapper()
        .unwrap()
        .borrow_mut()
        .add_accessor(Box::new(
            BufferAccessor::new(p.base, p.bytes.clone(), MemSpace::ANY).unwrap(),
        ))
        .unwrap();
    let c = &enc.config;
    let cfg = riscv_trace::RiscvTraceConfig::new(c.trace, c.tbufstart, c.tbufend, c.tbufwrite, p.isa).unwrap();
    let component = riscv_trace::create_component(cfg, &tree.decode_context()).unwrap();
    tree.add_decoder(0, riscv_trace::PROTOCOL_NAME, component).unwrap();
    let got = observe(&collect(&mut tree, &enc.data, 64, 0), &p, true);
    assert_same(&got, &expect(&steps, &p, TRACE), "by hand");
    // An inconsistent configuration is refused.
    let mut bad = cfg;
    bad.tbufwrite = bad.tbufend + 4;
    assert!(riscv_trace::create_component(bad, &tree.decode_context()).is_err());
}
