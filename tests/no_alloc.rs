//! The decode path allocates nothing per packet or per element: decoding
//! ten times more trace must not make more allocations (caches and buffers
//! are sized once, then reused).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use coresight_decode::datapath::{DatapathOp, DatapathResp, TrcIndex};
use coresight_decode::decoder::DecodeMode;
use coresight_decode::element::TraceElement;
use coresight_decode::interfaces::{TrcDataIn, TrcGenElemIn};
use coresight_decode::snapshot::Snapshot;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};

struct Counting;

thread_local! {
    /// Allocations made by this thread. Per thread: the test harness's
    /// own threads (reporting other tests as they finish) allocate at
    /// times that depend on the machine's load, and must not count. The
    /// decode paths measured here run on the calling thread.
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // A const-initialised Cell needs no destructor: usable at any time.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

/// Allocations this thread has made so far.
fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests measure one at a time (the generator and loader they share
/// write the same temporary folders).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct CountElems(u64);

impl TrcGenElemIn for CountElems {
    fn trace_elem_in(&mut self, _index: TrcIndex, _trace_id: u8, _elem: &TraceElement) -> DatapathResp {
        self.0 += 1;
        DatapathResp::Cont
    }
}

/// Allocations made while decoding a generated snapshot of `length` steps.
fn decode_allocations(protocol: GenProtocol, length: usize, dir: &str) -> usize {
    let g = generate(&GenOptions {
        seed: 9,
        protocol,
        layout: BufferLayout::Formatted,
        length,
    });
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let _ = std::fs::remove_dir_all(&path);
    g.spec.write_to(&path).unwrap();
    let ss = Snapshot::load(&path).unwrap();
    let mut tree = ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {}).unwrap();
    tree.set_gen_elem_out(Box::new(CountElems(0)));
    let data = std::fs::read(path.join("trace.bin")).unwrap();
    let before = allocs();
    let mut idx = 0;
    for block in data.chunks(1024) {
        let (r, used) = tree.trace_data_in(DatapathOp::Data, idx, block);
        assert!(r.is_cont() && used == block.len());
        idx += used as TrcIndex;
    }
    tree.trace_data_in(DatapathOp::Eot, 0, &[]);
    allocs() - before
}

#[test]
fn decoding_more_trace_makes_no_more_allocations() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let protocols = [
        (GenProtocol::Etmv4, "etmv4"),
        (GenProtocol::Stm, "stm"),
        (GenProtocol::Itm, "itm"),
        (GenProtocol::Ptm(Default::default()), "ptm"),
        (GenProtocol::Etmv3(Default::default()), "etmv3"),
        (GenProtocol::Ete(Default::default()), "ete"),
    ];
    for (p, name) in protocols {
        // Warm-up (caches filling, stacks reaching their depth) allocates a
        // little; ten times more trace after that must allocate nothing.
        let long = decode_allocations(p, 3000, &format!("noalloc_{name}_long"));
        let longer = decode_allocations(p, 30000, &format!("noalloc_{name}_longer"));
        assert!(long < 64, "{name}: {long} allocations for 3000 steps");
        assert!(
            longer <= long + 4,
            "{name}: {long} allocations for 3000 steps, {longer} for 30000"
        );
    }
}

/// Allocations made while pulling every element of a generated snapshot
/// of `length` steps through the pull API, and how many elements.
fn pull_allocations(protocol: GenProtocol, length: usize, dir: &str) -> (usize, usize) {
    let g = generate(&GenOptions {
        seed: 9,
        protocol,
        layout: BufferLayout::Formatted,
        length,
    });
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let _ = std::fs::remove_dir_all(&path);
    g.spec.write_to(&path).unwrap();
    let ss = Snapshot::load(&path).unwrap();
    let mut decoder = coresight_decode::Decoder::from_snapshot(&ss, "ETB_0").unwrap();
    let data = std::fs::read(path.join("trace.bin")).unwrap();
    let before = allocs();
    let mut n = 0;
    for item in decoder.decode(&data) {
        item.unwrap();
        n += 1;
    }
    (allocs() - before, n)
}

#[test]
fn pulling_ten_times_more_elements_makes_no_more_allocations() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (p, name) in [(GenProtocol::Etmv4, "etmv4"), (GenProtocol::Stm, "stm")] {
        let (long, n_long) = pull_allocations(p, 3000, &format!("noalloc_pull_{name}_long"));
        let (longer, n_longer) = pull_allocations(p, 30000, &format!("noalloc_pull_{name}_longer"));
        assert!(n_longer > 5 * n_long, "{name}: {n_long} then {n_longer} elements");
        assert!(long < 64, "{name}: {long} allocations for {n_long} elements");
        assert!(
            longer <= long + 4,
            "{name}: {long} allocations for {n_long} elements, {longer} for {n_longer}"
        );
    }
}

/// Allocations made while indexing a generated snapshot of `length` steps
/// (packet level, as `coresight_decode::index` builds an index), and the
/// entries made.
fn index_allocations(protocol: GenProtocol, length: usize, dir: &str) -> (usize, usize) {
    use coresight_decode::index::{IndexOptions, build_index};
    let g = generate(&GenOptions {
        seed: 9,
        protocol,
        layout: BufferLayout::Formatted,
        length,
    });
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let _ = std::fs::remove_dir_all(&path);
    g.spec.write_to(&path).unwrap();
    let ss = Snapshot::load(&path).unwrap();
    let mut tree = ss.build_tree("ETB_0", DecodeMode::PacketsOnly, |_| {}).unwrap();
    let data = std::fs::read(path.join("trace.bin")).unwrap();
    let before = allocs();
    let ix = build_index(&mut tree, &data, &IndexOptions::default()).unwrap();
    let entries = ix.streams.iter().map(|s| s.entries.len()).sum();
    (allocs() - before, entries)
}

#[test]
fn indexing_allocates_only_to_grow_the_index() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (p, name) in [
        (GenProtocol::Etmv4, "etmv4"),
        (GenProtocol::Stm, "stm"),
        (GenProtocol::Ptm(Default::default()), "ptm"),
    ] {
        let (long, e1) = index_allocations(p, 3000, &format!("noalloc_index_{name}_long"));
        let (longer, e2) = index_allocations(p, 30000, &format!("noalloc_index_{name}_longer"));
        assert!(e2 > 5 * e1, "{name}: {e1} then {e2} entries");
        // Ten times the packets: only the entry and block vectors grow
        // (doubling: a few more reallocations), never one per packet.
        assert!(
            longer <= long + 24,
            "{name}: {long} allocations, then {longer} for ten times the trace"
        );
    }
}

#[test]
fn the_counter_sees_this_threads_allocations_only() {
    let before = allocs();
    let v = std::hint::black_box(vec![1u8; 100]);
    assert_eq!(allocs(), before + 1);
    drop(v);
    // Another thread's allocations do not count here (spawning and
    // joining it allocate a few times on this thread).
    let was = allocs();
    let other = std::thread::spawn(|| {
        (0..1000)
            .map(|i| std::hint::black_box(vec![i as u8; 8]).len())
            .sum::<usize>()
    });
    assert_eq!(other.join().unwrap(), 8000);
    assert!(allocs() - was < 100, "{} allocations counted here", allocs() - was);
}
