//! Random and truncated input (fixed seeds) into the deformatter, the
//! snapshot loader and the decode tree: errors are fine, panics and hangs
//! are not.

mod common;

use common::{Rng, RngExt, temp_dir, write_files};
use coresight_decode::builder::TreeBuilder;
use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::deformatter::{DeformatterConfig, FrameDeformatter, IdStreamSink};
use coresight_decode::interfaces::TrcDataIn;
use coresight_decode::logger::MsgLogger;
use coresight_decode::printers::{GenElemPrinter, RawFramePrinter};
use coresight_decode::shared::shared;
use coresight_decode::snapshot::Snapshot;

struct Chaos {
    rng: Rng,
    total: usize,
}

impl IdStreamSink for Chaos {
    fn is_attached(&self, id: u8) -> bool {
        !id.is_multiple_of(3)
    }
    fn id_data_in(&mut self, _id: u8, _index: TrcIndex, data: &[u8]) -> (DatapathResp, usize) {
        assert!(data.len() <= 16);
        let used = self.rng.below(data.len() as u64 + 1) as usize;
        self.total += used;
        if used < data.len() || self.rng.below(4) == 0 {
            (DatapathResp::Wait, used)
        } else {
            (DatapathResp::Cont, used)
        }
    }
    fn all_ids_op(&mut self, _op: DatapathOp, _index: TrcIndex) -> DatapathResp {
        if self.rng.below(3) == 0 {
            DatapathResp::Wait
        } else {
            DatapathResp::Cont
        }
    }
}

#[test]
fn deformatter_survives_random_input_and_operations() {
    let configs = [
        DeformatterConfig::mem_aligned(),
        DeformatterConfig {
            reset_on_4x_fsync: true,
            ..DeformatterConfig::mem_aligned()
        },
        DeformatterConfig::fsync_stream(),
        DeformatterConfig {
            fsyncs: true,
            hsyncs: true,
            ..Default::default()
        },
    ];
    for seed in 0..200u64 {
        let mut rng = Rng::new(seed);
        let mut cfg = configs[(seed % 4) as usize];
        cfg.raw_packed = seed % 5 == 0;
        cfg.raw_unpacked = seed % 7 == 0;
        let mut d = FrameDeformatter::new(cfg);
        if cfg.raw_packed || cfg.raw_unpacked {
            d.set_raw_monitor(Some(Box::new(RawFramePrinter::new(shared(MsgLogger::none())))));
        }
        let mut sink = Chaos {
            rng: Rng::new(seed ^ 0xabc),
            total: 0,
        };
        // Bias the bytes towards sync patterns and ID bytes.
        let len = rng.below(3000) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| match rng.below(6) {
                0 => 0xff,
                1 => 0x7f,
                2 => 0x21,
                _ => rng.byte(),
            })
            .collect();
        let mut idx = 0usize;
        let mut steps = 0;
        while idx < data.len() {
            steps += 1;
            assert!(steps < 1_000_000, "seed {seed}: no progress");
            match rng.below(12) {
                0 => {
                    d.trace_data_in(DatapathOp::Flush, 0, &[], &mut sink);
                }
                1 => {
                    d.trace_data_in(DatapathOp::Reset, idx as TrcIndex, &[], &mut sink);
                }
                2 => {
                    d.trace_data_in(DatapathOp::Eot, 0, &[], &mut sink);
                }
                _ => {
                    let n = (1 + rng.below(64) as usize).min(data.len() - idx);
                    let (r, used) = d.trace_data_in(DatapathOp::Data, idx as TrcIndex, &data[idx..idx + n], &mut sink);
                    assert!(used <= n);
                    if r.is_fatal() || used == 0 {
                        // Resynchronise from the next block.
                        d.trace_data_in(DatapathOp::Reset, 0, &[], &mut sink);
                        idx += n;
                    } else {
                        idx += used;
                    }
                }
            }
        }
    }
}

const GOOD: [(&str, &str); 5] = [
    (
        "snapshot.ini",
        "[snapshot]\nversion=1.0\n[device_list]\ndevice0=cpu.ini\ndevice1=etm.ini\ndevice2=stm.ini\n[trace]\nmetadata=trace.ini\n",
    ),
    (
        "cpu.ini",
        "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A53\n[regs]\nPC(size:64)=0x1000\n[dump]\nfile=mem.bin\naddress=0x1000\nlength=0x40\n",
    ),
    (
        "etm.ini",
        "[device]\nname=etm_0\nclass=trace_source\ntype=ETM4\n[regs]\nTRCCONFIGR=1\nTRCTRACEIDR=0x10\nTRCIDR0=0x28000EA1\nTRCIDR2=0x20001088\n",
    ),
    (
        "stm.ini",
        "[device]\nname=stm_0\nclass=trace_source\ntype=STM\n[regs]\nSTMTCSR=0x00200007\n",
    ),
    (
        "trace.ini",
        "[trace_buffers]\nbuffers=buffer0,buffer1\n[buffer0]\nname=ETB_0\nfile=trace.bin\nformat=coresight\n[buffer1]\nname=ETB_1\nfile=trace.bin\nformat=source_data\n[source_buffers]\netm_0=ETB_0\nstm_0=ETB_0\n[core_trace_sources]\ncpu_0=etm_0\n",
    ),
];

fn mangle(rng: &mut Rng, text: &str) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    match rng.below(5) {
        0 => b.truncate(rng.below(b.len() as u64 + 1) as usize),
        1 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.byte();
            }
        }
        2 => {
            let i = rng.below(b.len() as u64) as usize;
            let junk = [b"[".as_slice(), b"]", b"=", b"\n", b"(", b":", b"0x", b"\xff\xfe", b";"];
            b.splice(i..i, junk[rng.below(junk.len() as u64) as usize].iter().copied());
        }
        3 => {
            let n = rng.below(200) as usize;
            b = rng.bytes(n);
        }
        _ => {}
    }
    b
}

#[test]
fn snapshot_loader_and_tree_survive_corrupt_files() {
    let dir = temp_dir("robust_snapshot");
    let mut loaded = 0;
    for seed in 0..300u64 {
        let mut rng = Rng::new(seed);
        let victim = rng.below(GOOD.len() as u64) as usize;
        for (i, (name, text)) in GOOD.iter().enumerate() {
            let contents = if i == victim {
                mangle(&mut rng, text)
            } else {
                text.as_bytes().to_vec()
            };
            write_files(&dir, &[(name, &contents)]);
        }
        let n = rng.below(300) as usize;
        let trace = rng.bytes(n);
        let mem = rng.bytes(64);
        write_files(&dir, &[("trace.bin", &trace), ("mem.bin", &mem)]);
        let Ok(ss) = Snapshot::load(&dir) else { continue };
        loaded += 1;
        for name in ss.buffer_names() {
            for mode in [DecodeMode::PacketsOnly, DecodeMode::FullDecode] {
                let out = shared(MsgLogger::none());
                let Ok(mut tree) = TreeBuilder::new(&ss).build(name, mode, |t| t.set_error_output(Some(out.clone())))
                else {
                    continue;
                };
                let ids: Vec<u8> = tree.elements().map(|(id, _)| id).collect();
                for id in ids {
                    tree.attach_packet_printer(id, out.clone(), mode == DecodeMode::FullDecode, 0)
                        .unwrap();
                }
                tree.set_gen_elem_out(Box::new(GenElemPrinter::new(out.clone())));
                let mut idx = 0;
                while idx + 16 <= trace.len() {
                    let (r, used) = tree.trace_data_in(DatapathOp::Data, idx as TrcIndex, &trace[idx..idx + 16]);
                    if r.is_fatal() || used == 0 {
                        break;
                    }
                    idx += used;
                }
                tree.trace_data_in(DatapathOp::Eot, 0, &[]);
            }
        }
    }
    assert!(
        loaded > 50,
        "the mangling should leave many snapshots readable ({loaded})"
    );
}
