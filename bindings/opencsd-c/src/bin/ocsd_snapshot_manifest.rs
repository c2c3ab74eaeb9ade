//! Writes what the C test program needs to decode a snapshot through the
//! C API, one item a line, so that the C side needs no snapshot parser:
//!
//! ```text
//! buffer formatted|single <deformatter flags> <file>...
//! decoder <ETMV4I|ETE|ETMV3|PTM|STM|ITM> <config struct fields, in order>
//! mem <memory space> <address> <file offset> <length> <file>
//! ```
//!
//! The buffer is the snapshot's first, the decoders and memory those the
//! library's snapshot builder (and so `trc_pkt_lister`) would set up.

use std::process::ExitCode;

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile};
use coresight_decode::decoder::DecoderRegistry;
use coresight_decode::memory::MemSpace;
use coresight_decode::snapshot::{Device, Snapshot};

fn arch_c(p: ArchProfile) -> (u32, u32) {
    let arch = match p.arch {
        ArchVersion::Unknown => 0,
        ArchVersion::Custom => 1,
        ArchVersion::V7 => 0x700,
        ArchVersion::V8 => 0x800,
        ArchVersion::V8r3 => 0x803,
        ArchVersion::Aa64 => 0x864,
        _ => 0,
    };
    let prof = match p.profile {
        CoreProfile::Unknown => 0,
        CoreProfile::CortexM => 1,
        CoreProfile::CortexR => 2,
        CoreProfile::CortexA => 3,
        CoreProfile::Custom => 4,
        _ => 0,
    };
    (arch, prof)
}

const USAGE: &str = "usage: ocsd_snapshot_manifest <snapshot directory>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // An option is never a directory: help and version answer, others
    // are usage errors.
    let dir = match args.as_slice() {
        [a] if a == "-h" || a == "--help" => {
            println!("{USAGE}\nWrites what the C API test program needs to decode the snapshot, one item a line.");
            return ExitCode::SUCCESS;
        }
        [a] if a == "-V" || a == "--version" => {
            println!("ocsd_snapshot_manifest {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        [a] if !a.starts_with('-') => a.clone(),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let ss = match Snapshot::load(&dir) {
        Ok(ss) => ss,
        Err(e) => {
            eprintln!("ocsd_snapshot_manifest: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(buf) = ss.buffers.first() else {
        eprintln!("ocsd_snapshot_manifest: no trace buffer in {dir}");
        return ExitCode::FAILURE;
    };
    let (kind, flags) = match buf.format.as_str() {
        "source_data" => ("single", 0),
        "dstream_coresight" => ("formatted", 0x1),
        _ => ("formatted", 0x4),
    };
    let mut out = format!("buffer {kind} 0x{flags:x}");
    for p in ss.buffer_paths(buf) {
        out.push(' ');
        out.push_str(&p.to_string_lossy());
    }
    out.push('\n');
    let registry = DecoderRegistry::builtin();
    for (src, core) in ss.sources_of(&buf.name) {
        let Some(dev) = ss.device(src) else { continue };
        let Some(factory) = registry.for_device_type(&dev.device_type) else {
            continue;
        };
        let reg = |name: &str| -> u64 {
            dev.regs
                .iter()
                .find(|r| r.name.eq_ignore_ascii_case(name))
                .map(|r| r.value)
                .or_else(|| factory.registers().iter().find(|s| s.name == name).map(|s| s.default))
                .unwrap_or(0)
        };
        let core_dev: Option<&Device> = core.and_then(|c| ss.device(c));
        let (arch, prof) = core_dev
            .and_then(|c| factory.core_profile(&c.device_type))
            .map_or((0, 0), arch_c);
        let fields: Vec<u64> = match factory.protocol_name() {
            "ETMV4I" => [
                "TRCIDR0",
                "TRCIDR1",
                "TRCIDR2",
                "TRCIDR8",
                "TRCIDR9",
                "TRCIDR10",
                "TRCIDR11",
                "TRCIDR12",
                "TRCIDR13",
                "TRCCONFIGR",
                "TRCTRACEIDR",
            ]
            .iter()
            .map(|n| reg(n))
            .chain([arch as u64, prof as u64])
            .collect(),
            "ETE" => [
                "TRCIDR0",
                "TRCIDR1",
                "TRCIDR2",
                "TRCIDR8",
                "TRCDEVARCH",
                "TRCCONFIGR",
                "TRCTRACEIDR",
            ]
            .iter()
            .map(|n| reg(n))
            .chain([arch as u64, prof as u64])
            .collect(),
            "ETMV3" | "PTM" => ["ETMIDR", "ETMCR", "ETMCCER", "ETMTRACEIDR"]
                .iter()
                .map(|n| reg(n))
                .chain([arch as u64, prof as u64])
                .collect(),
            "STM" => vec![reg("STMTCSR"), 0, 0, 0, 0, 0],
            "ITM" => vec![reg("ITMTCR")],
            _ => continue,
        };
        out.push_str("decoder ");
        out.push_str(factory.protocol_name());
        for f in fields {
            out.push_str(&format!(" 0x{f:x}"));
        }
        out.push('\n');
        if let Some(c) = core_dev {
            for d in &c.dumps {
                let space = MemSpace::from_snapshot_name(&d.space).unwrap_or(MemSpace::ANY);
                out.push_str(&format!(
                    "mem 0x{:x} 0x{:x} 0x{:x} 0x{:x} {}\n",
                    space.bits(),
                    d.address,
                    d.offset,
                    d.length,
                    ss.path_of(&d.file).to_string_lossy()
                ));
            }
        }
        if kind == "single" {
            break;
        }
    }
    print!("{out}");
    ExitCode::SUCCESS
}
