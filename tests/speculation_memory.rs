//! Issue 15, defect 2: with TRCIDR8 (MAXSPEC) at its largest, nothing in
//! the trace forces a commit, and the decoder kept every atom: about 70
//! bytes per trace byte. The speculation stack is now bounded
//! (`etmv4::SPEC_DEPTH_LIMIT`), so the peak heap stays the same
//! whatever the trace length, and the elements are those decoded with no
//! speculation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::TraceElement;
use coresight_decode::etmv4::SPEC_DEPTH_LIMIT;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::snapshot::Snapshot;
use coresight_generator::check::decode;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Generated, generate};

/// Tracks live heap bytes and their peak.
struct Peak;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let live = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            grew(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Peak = Peak;

struct CountElems(u64);

impl TrcGenElemIn for CountElems {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, _elem: &TraceElement) -> DatapathResp {
        self.0 += 1;
        DatapathResp::Cont
    }
}

fn generated(protocol: GenProtocol, length: usize, maxspec: Option<u64>) -> Generated {
    let mut g = generate(&GenOptions {
        seed: 5,
        protocol,
        layout: BufferLayout::Formatted,
        length,
    });
    if let Some(v) = maxspec {
        for d in &mut g.spec.devices {
            if d.regs.iter().any(|(n, _)| n.starts_with("TRCIDR0")) {
                d.regs.retain(|(n, _)| !n.starts_with("TRCIDR8"));
                d.regs.push(("TRCIDR8".to_string(), v));
            }
        }
    }
    g
}

/// Peak heap growth while decoding `g` (elements counted, not kept), and
/// the trace length.
fn decode_peak(g: &Generated, dir: &str) -> (usize, usize) {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let _ = std::fs::remove_dir_all(&path);
    g.spec.write_to(&path).unwrap();
    let ss = Snapshot::load(&path).unwrap();
    let data = std::fs::read(path.join("trace.bin")).unwrap();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut tree = ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).unwrap();
    tree.set_gen_elem_out(Box::new(CountElems(0)));
    let mut idx = 0;
    for block in data.chunks(4096) {
        let (r, used) = tree.trace_data_in(DatapathOp::Data, idx, block);
        assert!(r.is_cont() && used == block.len());
        idx += used as TrcIndex;
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    drop(tree);
    (PEAK.load(Ordering::Relaxed) - base, data.len())
}

fn decoded_items(g: &Generated) -> Vec<String> {
    decode(g).expect("decodes").iter().map(|t| t.to_string()).collect()
}

#[test]
fn maximal_speculation_depth_keeps_memory_bounded() {
    for (protocol, name) in [
        (GenProtocol::Etmv4, "etmv4"),
        (GenProtocol::Ete(Default::default()), "ete"),
    ] {
        // Far more atoms than the decoder holds: uncommitted elements must
        // be committed as the limit is passed, not piled up.
        let (peak_short, _) = decode_peak(
            &generated(protocol, 20_000, Some(0xFFFF_FFFF)),
            &format!("spec_{name}_short"),
        );
        let long = generated(protocol, 200_000, Some(0xFFFF_FFFF));
        let (peak_long, trace_len) = decode_peak(&long, &format!("spec_{name}_long"));
        assert!(
            trace_len > 400_000,
            "{name}: trace of {trace_len} bytes is too short to show growth"
        );
        // Ten times the trace, the same peak: the stack is full (at the
        // limit) in both runs.
        eprintln!("{name}: peak heap {peak_long} bytes for {trace_len} trace bytes (short run: {peak_short})");
        assert!(
            peak_long < peak_short + peak_short / 4,
            "{name}: peak heap {peak_long} bytes for {trace_len} trace bytes (short run: {peak_short})"
        );
        let items = decoded_items(&long);
        let plain = decoded_items(&generated(protocol, 200_000, None));
        // Elements still uncommitted at the end of the trace are dropped
        // (their outcome is unknown): at most the limit's worth of atoms.
        let limit = SPEC_DEPTH_LIMIT as usize;
        assert!(
            items.len() < plain.len() && items.len() + 2 * limit > plain.len(),
            "{name}: {} of {} elements",
            items.len(),
            plain.len()
        );
        if let Some(i) = (0..items.len()).find(|&i| items[i] != plain[i]) {
            panic!("{name}: item {i} is {:?} instead of {:?}", items[i], plain[i]);
        }
    }
}
