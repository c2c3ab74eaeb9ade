//! STM (STPv2) encoder for generated software messages.
//!
//! Writes the nibble stream an STM emits: ASYNC and VERSION at the start,
//! master and channel changes (M8, C8, C16), data packets of 4 to 64 bits
//! with and without marker and timestamp (timestamps compressed to the
//! nibbles that changed, in natural binary or Gray code as the VERSION
//! says), and the odd NULL, FLAG and TRIG packet, which carry no message.

use super::{GenOptions, Generated, Rng, Truth, layout_buffer};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, SnapshotSpec};

/// Nibbles packed into bytes, low nibble first.
#[derive(Default)]
pub struct Nibbles {
    pub bytes: Vec<u8>,
    half: bool,
}

impl Nibbles {
    pub fn push(&mut self, n: u8) {
        let n = n & 0xf;
        if self.half {
            *self.bytes.last_mut().expect("a half byte") |= n << 4;
        } else {
            self.bytes.push(n);
        }
        self.half = !self.half;
    }
    /// `count` nibbles of `v`, most significant first.
    pub fn value(&mut self, v: u64, count: u32) {
        for i in (0..count).rev() {
            self.push((v >> (4 * i)) as u8);
        }
    }
    /// Pads to a whole byte with a NULL packet.
    pub fn finish(mut self) -> Vec<u8> {
        if self.half {
            self.push(0);
        }
        self.bytes
    }
}

fn gray(v: u64) -> u64 {
    v ^ (v >> 1)
}

/// STM timestamps: the encoding and the last value sent.
struct TsState {
    gray: bool,
    last: u64,
}

impl TsState {
    /// Appends a timestamp field for `ts`: the size nibble and the nibbles
    /// that changed.
    fn encode(&mut self, out: &mut Nibbles, ts: u64) {
        let (new, old) = if self.gray {
            (gray(ts), gray(self.last))
        } else {
            (ts, self.last)
        };
        let mut n = (1..=16u32)
            .find(|&n| n == 16 || new >> (4 * n) == old >> (4 * n))
            .unwrap_or(16);
        if n == 13 {
            n = 14;
        } else if n == 15 {
            n = 16;
        }
        out.push(match n {
            14 => 0xd,
            16 => 0xe,
            n => n as u8,
        });
        out.value(new, n);
        self.last = ts;
    }
}

/// Generates an STM snapshot with random software messages.
pub fn generate(opts: &GenOptions) -> Generated {
    let mut rng = Rng::new(opts.seed ^ 0x5754_4d00);
    let mut out = Nibbles::default();
    let mut truth = Vec::new();
    // ASYNC then VERSION.
    for _ in 0..21 {
        out.push(0xf);
    }
    out.push(0x0);
    let mut ts = TsState {
        gray: rng.chance(1, 2),
        last: 0,
    };
    out.value(0xf00, 3);
    out.push(if ts.gray { 4 } else { 3 });

    let mut master: Option<u8> = None;
    let mut channel: u16 = 0;
    let mut now: u64 = rng.below(1 << 20);
    for _ in 0..opts.length.max(1) {
        if master.is_none() || rng.chance(1, 8) {
            let m = rng.below(256) as u8;
            out.push(0x1);
            out.value(m as u64, 2);
            master = Some(m);
            channel = 0;
        }
        if rng.chance(1, 3) {
            if rng.chance(1, 4) {
                channel = rng.below(0x1_0000) as u16;
                out.value(0xf3, 2);
                out.value(channel as u64, 4);
            } else {
                channel = (channel & 0xff00) | rng.below(256) as u16;
                out.push(0x3);
                out.value((channel & 0xff) as u64, 2);
            }
        }
        match rng.below(12) {
            0 => {
                out.push(0x0); // NULL
                continue;
            }
            1 => {
                out.value(0xfe, 2); // FLAG
                continue;
            }
            2 => {
                out.value(0xf06, 3); // TRIG
                out.value(rng.below(256), 2);
                continue;
            }
            _ => {}
        }
        let size = rng.below(5) as u8; // D4, D8, D16, D32, D64
        let (bits, nibbles) = match size {
            0 => (4u8, 1u32),
            1 => (8, 2),
            2 => (16, 4),
            3 => (32, 8),
            _ => (64, 16),
        };
        let payload = rng.next_u64() & if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let (marker, with_ts) = (rng.chance(1, 3), rng.chance(1, 3));
        // Header: plain, marker+timestamp (one nibble), or F-prefixed
        // timestamp-only / marker-only forms.
        let hdr: &[u8] = match (size, marker, with_ts) {
            (0, false, false) => &[0xc],
            (0, true, true) => &[0xd],
            (0, false, true) => &[0xf, 0xc],
            (0, true, false) => &[0xf, 0xd],
            (s, false, false) => &[[0x4, 0x5, 0x6, 0x7][s as usize - 1]],
            (s, true, true) => &[[0x8, 0x9, 0xa, 0xb][s as usize - 1]],
            (s, false, true) => &[[0xf, 0x4], [0xf, 0x5], [0xf, 0x6], [0xf, 0x7]][s as usize - 1],
            (s, true, false) => &[[0xf, 0x8], [0xf, 0x9], [0xf, 0xa], [0xf, 0xb]][s as usize - 1],
        };
        for &h in hdr {
            out.push(h);
        }
        out.value(payload, nibbles);
        let timestamp = if with_ts {
            let step = if rng.chance(1, 10) { 1 << 40 } else { 5000 };
            now += 1 + rng.below(step);
            ts.encode(&mut out, now);
            Some(now)
        } else {
            None
        };
        truth.push(Truth::Message {
            master: master.unwrap_or(0) as u16,
            channel,
            bits,
            payload,
            marker,
            timestamp,
        });
    }
    let bytes = out.finish();

    let trace_id = 0x20 + rng.below(0x20) as u8;
    let (data, format) = layout_buffer(opts.layout, trace_id, &bytes, &mut rng);
    let stm = DeviceSpec::trace_source("STM_0", "STM", vec![("STMTCSR".into(), (trace_id as u64) << 16 | 0x7)]);
    let spec = SnapshotSpec {
        description: format!("trc_gen stm seed {}", opts.seed),
        devices: vec![stm],
        buffers: vec![BufferSpec {
            name: "ETB_0".into(),
            file: "trace.bin".into(),
            format: format.into(),
            data,
        }],
        source_buffers: vec![("STM_0".into(), "ETB_0".into())],
        core_trace_sources: Vec::new(),
    };
    Generated { spec, truth }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_pack_low_first() {
        let mut n = Nibbles::default();
        n.push(0x1);
        n.value(0xab, 2);
        assert_eq!(n.finish(), vec![0xa1, 0x0b]);
    }

    #[test]
    fn timestamps_send_only_changed_nibbles() {
        let mut t = TsState {
            gray: false,
            last: 0x1234_5678,
        };
        let mut n = Nibbles::default();
        t.encode(&mut n, 0x1234_5699);
        // Size 2, then 0x99.
        assert_eq!(n.finish(), vec![0x92, 0x09]);
        let mut t = TsState { gray: false, last: 0 };
        let mut n = Nibbles::default();
        t.encode(&mut n, 0x1_0000_0000_0000);
        // 13 nibbles needed: sent as 14 (size code 0xd).
        let b = n.finish();
        assert_eq!(b[0] & 0xf, 0xd);
    }
}
