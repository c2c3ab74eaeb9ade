//! `raw_buffer`: decode trace bytes with a configuration given in code, no
//! snapshot.
//!
//! ```text
//! cargo run --example raw_buffer
//! ```
//!
//! The bytes are the shipped `snapshots/etmv4-a64/trace.bin` (an ETB's
//! formatted frames), and the configuration is what its `etm_0.ini` and
//! `cpu_0.ini` say: an ETMv4 on trace ID 0x15 tracing a Cortex-A72, whose
//! code is two memory images. A program that reads trace from a device
//! would fill these in from the device's registers.

use coresight_decode::arch::ArchProfile;
use coresight_decode::decoder::{CoreConfig, SourceConfig};
use coresight_decode::tree::SourceFormat;
use coresight_decode::{DecoderBuilder, Element};

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/etmv4-a64");

/// The ETMv4's registers, as the trace unit reported them.
fn etm_config() -> SourceConfig {
    let regs = [
        ("TRCCONFIGR", 0x0000_1081),
        ("TRCTRACEIDR", 0x15),
        ("TRCIDR0", 0x2000_0EC1),
        ("TRCIDR1", 0x4100_F411),
        ("TRCIDR2", 0x0400_1088),
        ("TRCIDR8", 0),
        ("TRCIDR9", 0),
        ("TRCIDR10", 0),
        ("TRCIDR11", 0),
        ("TRCIDR12", 0),
        ("TRCIDR13", 0),
    ];
    SourceConfig {
        name: "etm_0".to_string(),
        device_type: "ETM4.0".to_string(),
        regs: regs.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
        core: Some(CoreConfig {
            name: "cpu_0".to_string(),
            core_type: "Cortex-A72".to_string(),
            profile: ArchProfile::from_core_name("Cortex-A72").expect("a known core"),
        }),
    }
}

/// Instruction ranges and instructions in `trace` (formatted frames).
pub fn count(trace: &[u8]) -> coresight_decode::Result<(u64, u64)> {
    let mut decoder = DecoderBuilder::new(SourceFormat::Formatted(Default::default()))
        .source("ETMV4I", etm_config())
        .memory_file(format!("{SNAPSHOT}/code0.bin"), 0xFFFF_FFC0_0008_0000, 0, 0x3B4)
        .memory_file(format!("{SNAPSHOT}/code1.bin"), 0xFFFF_FFC0_0001_0800, 0, 0x30)
        .build()?;
    let (mut ranges, mut instructions) = (0, 0);
    for d in decoder.decode(trace) {
        if let Element::InstrRange { num_instr, .. } = d?.element {
            ranges += 1;
            instructions += u64::from(num_instr);
        }
    }
    Ok((ranges, instructions))
}

fn main() {
    let trace = match std::fs::read(format!("{SNAPSHOT}/trace.bin")) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("raw_buffer: {SNAPSHOT}/trace.bin: {e}");
            std::process::exit(1);
        }
    };
    match count(&trace) {
        Ok((ranges, instructions)) => println!("{ranges} instruction ranges, {instructions} instructions"),
        Err(e) => {
            eprintln!("raw_buffer: {e}");
            std::process::exit(1);
        }
    }
}

#[test]
fn decodes_as_the_snapshot_does() {
    let trace = std::fs::read(format!("{SNAPSHOT}/trace.bin")).unwrap();
    let (ranges, instructions) = count(&trace).unwrap();
    let (mut want_ranges, mut want_instructions) = (0, 0);
    for d in coresight_decode::Trace::open(SNAPSHOT).unwrap().elements() {
        if let Element::InstrRange { num_instr, .. } = d.unwrap().element {
            want_ranges += 1;
            want_instructions += u64::from(num_instr);
        }
    }
    assert_eq!((ranges, instructions), (want_ranges, want_instructions));
    assert!(ranges > 0);
}
