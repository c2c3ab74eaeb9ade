//! ITM encoder for generated software messages.
//!
//! Writes what an ITM emits: a synchronisation packet, software stimulus
//! writes of 1, 2 or 4 bytes on ports 0 to 31, and between them local
//! timestamps (one-byte and continuation forms), global timestamps and
//! hardware-source (DWT) packets, which carry no software message.

use super::{GenOptions, Generated, Rng, Truth, layout_buffer};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, SnapshotSpec};

fn sync(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0x80]);
}

/// Continuation-coded payload: 7 bits a byte, bit 7 set while more follow.
fn continued(out: &mut Vec<u8>, mut v: u64, max_bytes: usize) {
    for i in 0..max_bytes {
        let more = v >> 7 != 0 && i + 1 < max_bytes;
        out.push((v & 0x7f) as u8 | if more { 0x80 } else { 0 });
        v >>= 7;
        if !more {
            break;
        }
    }
}

/// Generates an ITM snapshot with random stimulus-port writes.
pub fn generate(opts: &GenOptions) -> Generated {
    let mut rng = Rng::new(opts.seed ^ 0x4954_4d00);
    let mut out = Vec::new();
    let mut truth = Vec::new();
    sync(&mut out);
    for _ in 0..opts.length.max(1) {
        match rng.below(10) {
            0 => {
                // Local timestamp, one-byte form: delta 1..=6 in bits 6:4.
                out.push((rng.range(1, 6) as u8) << 4);
            }
            1 => {
                // Local timestamp with continuation bytes; TC in bits 5:4.
                out.push(0xc0 | (rng.below(4) as u8) << 4);
                let delta = rng.below(1 << 20) + 1;
                continued(&mut out, delta, 4);
            }
            2 => {
                // Hardware source: DWT event counter wrap (discriminator 0).
                out.push(0x05);
                out.push(rng.below(64) as u8);
            }
            3 if rng.chance(1, 4) => {
                // Global timestamp 1.
                out.push(0x94);
                continued(&mut out, rng.below(1 << 26), 4);
            }
            _ => {}
        }
        let port = rng.below(32) as u8;
        let (code, size) = match rng.below(3) {
            0 => (1u8, 1usize),
            1 => (2, 2),
            _ => (3, 4),
        };
        let value = rng.next_u64() & ((1u64 << (8 * size)) - 1);
        out.push(port << 3 | code);
        out.extend_from_slice(&value.to_le_bytes()[..size]);
        truth.push(Truth::Message {
            master: 0,
            channel: port as u16,
            bits: (8 * size) as u8,
            payload: value,
            marker: false,
            timestamp: None,
        });
        if rng.chance(1, 30) {
            sync(&mut out);
        }
    }
    let trace_id = 0x20 + rng.below(0x20) as u8;
    let (data, format) = layout_buffer(opts.layout, trace_id, &out, &mut rng);
    let itm = DeviceSpec::trace_source("ITM_0", "ITM", vec![("ITMTCR".into(), (trace_id as u64) << 16 | 0x9)]);
    let spec = SnapshotSpec {
        description: format!("trc_gen itm seed {}", opts.seed),
        devices: vec![itm],
        buffers: vec![BufferSpec {
            name: "ETB_0".into(),
            file: "trace.bin".into(),
            format: format.into(),
            data,
        }],
        source_buffers: vec![("ITM_0".into(), "ETB_0".into())],
        core_trace_sources: Vec::new(),
    };
    Generated { spec, truth }
}
