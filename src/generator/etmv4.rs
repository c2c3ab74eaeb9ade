//! ETMv4 instruction trace encoder for generated executions.
//!
//! Encodes a walk through an A64 program as an ETMv4 trace unit would with
//! instruction trace only (no cycle counting, no return stack, no branch
//! broadcast): alignment sync and Trace Info at the start and periodically,
//! Trace On with an address and context where trace starts or restarts, an
//! atom per branch (packed into the largest atom format that fits), and an
//! address packet after each taken indirect branch, compressed against the
//! previous address.

use super::a64::{walk, Program};
use super::{layout_buffer, GenOptions, Generated, Rng, Truth};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, DumpSpec, SnapshotSpec};

/// Trace unit configuration used for generated snapshots.
pub const TRCCONFIGR: u64 = 0xC1; // context ID and VMID tracing
pub const TRCIDR0: u64 = 0x2800_0EA1;
pub const TRCIDR1: u64 = 0x4100_F403;
pub const TRCIDR2: u64 = 0x0000_0488; // 64-bit addresses, 32-bit CID, 8-bit VMID

/// Emits ETMv4 packets.
pub struct Encoder {
    pub out: Vec<u8>,
    atoms: Vec<bool>,
    last_addr: Option<u64>,
    since_sync: usize,
    sync_period: usize,
}

impl Encoder {
    pub fn new(sync_period: usize) -> Self {
        Encoder { out: Vec::new(), atoms: Vec::new(), last_addr: None, since_sync: 0, sync_period }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
        self.since_sync += bytes.len();
    }

    /// Alignment synchronisation and Trace Info; forgets the address.
    pub fn sync(&mut self) {
        self.flush_atoms();
        let mut a = [0u8; 12];
        a[11] = 0x80;
        self.put(&a);
        self.put(&[0x01, 0x01, 0x00]);
        self.last_addr = None;
        self.since_sync = 0;
    }

    /// Whether a periodic sync is due.
    pub fn sync_due(&self) -> bool {
        self.since_sync >= self.sync_period
    }

    pub fn trace_on(&mut self) {
        self.flush_atoms();
        self.put(&[0x04]);
    }

    /// Address with context (long, 64-bit, IS0): AArch64, EL1, non-secure,
    /// with VMID and context ID.
    pub fn addr_with_context(&mut self, addr: u64) {
        self.flush_atoms();
        let mut p = vec![0x85, ((addr >> 2) & 0x7f) as u8, ((addr >> 9) & 0x7f) as u8];
        p.extend_from_slice(&addr.to_le_bytes()[2..]);
        p.push(0xf1); // EL1, SF (AArch64), NS, VMID and CID follow
        p.push(0x00); // VMID
        p.extend_from_slice(&[0, 0, 0, 0]); // CONTEXTID
        self.put(&p);
        self.last_addr = Some(addr);
    }

    /// An address packet, compressed against the last address sent.
    pub fn address(&mut self, addr: u64) {
        self.flush_atoms();
        let last = self.last_addr;
        let b0 = ((addr >> 2) & 0x7f) as u8;
        let p: Vec<u8> = match last {
            Some(l) if l >> 9 == addr >> 9 => vec![0x95, b0],
            Some(l) if l >> 17 == addr >> 17 => vec![0x95, 0x80 | b0, (addr >> 9) as u8],
            Some(l) if l >> 32 == addr >> 32 => {
                let mut v = vec![0x9a, b0, ((addr >> 9) & 0x7f) as u8];
                v.extend_from_slice(&addr.to_le_bytes()[2..4]);
                v
            }
            _ => {
                let mut v = vec![0x9d, b0, ((addr >> 9) & 0x7f) as u8];
                v.extend_from_slice(&addr.to_le_bytes()[2..]);
                v
            }
        };
        self.put(&p);
        self.last_addr = Some(addr);
    }

    /// Queues an atom (true: E, taken).
    pub fn atom(&mut self, taken: bool) {
        self.atoms.push(taken);
    }

    /// Writes the queued atoms, each packet the largest format that fits.
    pub fn flush_atoms(&mut self) {
        let atoms = std::mem::take(&mut self.atoms);
        let mut i = 0;
        while i < atoms.len() {
            let rest = &atoms[i..];
            let lead_e = rest.iter().take_while(|&&a| a).count();
            if lead_e >= 3 && rest.len() > 3 {
                // Format 6: 3..=23 E atoms then one more atom.
                let k = lead_e.min(23).min(rest.len() - 1);
                if k >= 3 {
                    let last_n = !rest[k];
                    self.put(&[0xc0 | (last_n as u8) << 5 | (k - 3) as u8]);
                    i += k + 1;
                    continue;
                }
            }
            let bits = |n: usize| rest[..n].iter().enumerate().fold(0u8, |acc, (j, &e)| acc | (e as u8) << j);
            match rest.len() {
                1 => {
                    self.put(&[0xf6 | bits(1)]);
                    i += 1;
                }
                2 => {
                    self.put(&[0xd8 | bits(2)]);
                    i += 2;
                }
                _ => {
                    self.put(&[0xf8 | bits(3)]);
                    i += 3;
                }
            }
        }
    }
}

/// Generates an ETMv4 snapshot of a random A64 program.
pub fn generate(opts: &GenOptions) -> Generated {
    let mut rng = Rng::new(opts.seed);
    let base = match rng.below(3) {
        0 => 0x0000_0000_0040_0000,
        1 => 0xffff_ffc0_0008_0000,
        _ => 0x0000_007f_9d80_0000,
    };
    let n_blocks = 20 + rng.below(60) as usize;
    let prog = Program::random(&mut rng, base, n_blocks);
    let steps = walk(&mut rng, &prog, opts.length.max(1));

    let mut enc = Encoder::new(256 + rng.below(1024) as usize);
    let mut truth = Vec::with_capacity(steps.len());
    enc.sync();
    enc.trace_on();
    enc.addr_with_context(prog.blocks[0].addr);
    let mut tracing = true;
    let mut need_addr = false;
    for step in &steps {
        let b = &prog.blocks[step.block];
        if !tracing {
            // Trace restarts at a block start.
            if rng.chance(1, 3) {
                tracing = true;
                enc.trace_on();
                enc.addr_with_context(b.addr);
                need_addr = false;
            } else {
                continue;
            }
        } else if need_addr {
            enc.address(b.addr);
            need_addr = false;
        }
        if enc.sync_due() {
            enc.sync();
            enc.addr_with_context(b.addr);
        }
        truth.push(Truth::Range { start: b.addr, end: b.end(), count: b.count(), exec: step.taken });
        enc.atom(step.taken);
        if b.term.is_indirect() {
            need_addr = true;
        }
        // Now and then, trace is filtered off for a while.
        if rng.chance(1, 40) {
            enc.flush_atoms();
            tracing = false;
        }
    }
    enc.flush_atoms();

    let trace_id = 0x10 + rng.below(0x20) as u8;
    let (data, format) = layout_buffer(opts.layout, trace_id, &enc.out, &mut rng);
    let mut core = DeviceSpec::core("cpu_0", "Cortex-A53");
    core.dumps.push(DumpSpec { file: "code.bin".into(), address: prog.base, data: prog.code.clone(), space: String::new() });
    let etm = DeviceSpec::trace_source(
        "etm_0",
        "ETM4.0",
        vec![
            ("TRCCONFIGR".into(), TRCCONFIGR),
            ("TRCTRACEIDR".into(), trace_id as u64),
            ("TRCIDR0".into(), TRCIDR0),
            ("TRCIDR1".into(), TRCIDR1),
            ("TRCIDR2".into(), TRCIDR2),
            ("TRCIDR8".into(), 0),
            ("TRCIDR9".into(), 0),
            ("TRCIDR10".into(), 0),
            ("TRCIDR11".into(), 0),
            ("TRCIDR12".into(), 0),
            ("TRCIDR13".into(), 0),
        ],
    );
    let spec = SnapshotSpec {
        description: format!("trc_gen etmv4 seed {}", opts.seed),
        devices: vec![core, etm],
        buffers: vec![BufferSpec { name: "ETB_0".into(), file: "trace.bin".into(), format: format.into(), data }],
        source_buffers: vec![("etm_0".into(), "ETB_0".into())],
        core_trace_sources: vec![("cpu_0".into(), "etm_0".into())],
    };
    Generated { spec, truth }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoms_pack_into_the_largest_formats() {
        let mut e = Encoder::new(1 << 20);
        for a in [true, true, true, true, true, false] {
            e.atom(a);
        }
        e.flush_atoms();
        // Five E then N: format 6, final atom N.
        assert_eq!(e.out, vec![0xc0 | 0x20 | 2]);
        let mut e = Encoder::new(1 << 20);
        for a in [false, true] {
            e.atom(a);
        }
        e.flush_atoms();
        assert_eq!(e.out, vec![0xda]);
        let mut e = Encoder::new(1 << 20);
        for a in [true, true, false, true] {
            e.atom(a);
        }
        e.flush_atoms();
        assert_eq!(e.out, vec![0xfb, 0xf7]);
        let mut e = Encoder::new(1 << 20);
        for _ in 0..24 {
            e.atom(true);
        }
        e.flush_atoms();
        assert_eq!(e.out, vec![0xd4]);
    }

    #[test]
    fn addresses_compress_against_the_last_one() {
        let mut e = Encoder::new(1 << 20);
        let sent = |e: &mut Encoder, addr: u64| {
            e.out.clear();
            e.address(addr);
            e.out.clone()
        };
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_0059_4AC0), vec![0x9d, 0x30, 0x25, 0x59, 0x00, 0xc0, 0xff, 0xff, 0xff]);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_0059_2B58), vec![0x95, 0xd6, 0x95]);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_0059_2B64), vec![0x95, 0x59]);
        assert_eq!(sent(&mut e, 0xFFFF_FFC0_005A_C4C8), vec![0x9a, 0x32, 0x62, 0x5a, 0x00]);
    }
}
