//! A capture is held once: the pull API's `Trace` and the index's
//! `Capture` read a buffer's data files (one or several) into one buffer
//! allocated at their total size, not a buffer that grows and is copied
//! as each file is appended. Measured as the most bytes live at once while
//! loading, with a counting allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};

use coresight_decode::Trace;
use coresight_decode::index::Capture;
use coresight_decode::snapshot::Snapshot;
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, generate};

struct Counting;

thread_local! {
    /// Bytes this thread has allocated and not freed, and the most at once
    /// since the last `reset_peak` (per thread: the harness's threads do
    /// not count).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn add(n: isize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + n;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as the allocator may do it: the new block before the old
        // one is freed.
        add(new_size as isize);
        add(-(layout.size() as isize));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The most bytes live at once while `f` runs, above those live before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (isize, T) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let r = f();
    (PEAK.with(Cell::get) - before, r)
}

const MIB: usize = 1 << 20;

/// A generated ETMv4 snapshot whose buffer is `files` data files of
/// `each` bytes (the generated trace repeated; whole frames).
fn snapshot(name: &str, files: usize, each: usize) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capture_memory").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let g = generate(&GenOptions {
        seed: 3,
        protocol: GenProtocol::Etmv4,
        layout: BufferLayout::Formatted,
        length: 50,
    });
    g.spec.write_to(&dir).unwrap();
    let trace = std::fs::read(dir.join("trace.bin")).unwrap();
    let names: Vec<String> = (0..files).map(|i| format!("part{i}.bin")).collect();
    for n in &names {
        let data: Vec<u8> = trace.iter().copied().cycle().take(each).collect();
        std::fs::write(dir.join(n), data).unwrap();
    }
    let ini = std::fs::read_to_string(dir.join("trace.ini")).unwrap();
    let ini = ini.replace("file=trace.bin", &format!("file={}", names.join(",")));
    assert!(ini.contains("part0.bin"), "{ini}");
    std::fs::write(dir.join("trace.ini"), ini).unwrap();
    dir
}

#[test]
fn a_capture_in_several_files_is_held_once() {
    // The same snapshot with 48 bytes of trace and with 3 MiB in three
    // files: what loading the larger costs beyond the smaller is its data,
    // once (the decoder built is the same).
    let small = snapshot("small", 3, 16);
    let large = snapshot("large", 3, MIB);
    let ss_small = Snapshot::load(&small).unwrap();
    let ss_large = Snapshot::load(&large).unwrap();

    let (base, t) = peak_of(|| Trace::from_snapshot(&ss_small, None).unwrap());
    assert_eq!(t.data().len(), 48);
    drop(t);
    let (peak, t) = peak_of(|| Trace::from_snapshot(&ss_large, None).unwrap());
    assert_eq!(t.data().len(), 3 * MIB);
    let extra = peak - base;
    assert!(
        extra > 3 * MIB as isize - 16 * 1024 && extra < 3 * MIB as isize + 64 * 1024,
        "Trace: {extra} bytes at most at once for a 3 MiB capture"
    );
    // What the trace keeps is its one copy.
    let (_, parts) = peak_of(|| t.into_parts());
    assert_eq!(parts.1.capacity(), 3 * MIB);
    drop(parts);

    let (base, c) = peak_of(|| Capture::load(&small, None).unwrap());
    drop(c);
    let (peak, c) = peak_of(|| Capture::load(&large, None).unwrap());
    assert_eq!(c.data.len(), 3 * MIB);
    assert_eq!(c.data.capacity(), 3 * MIB);
    let extra = peak - base;
    assert!(
        extra > 3 * MIB as isize - 16 * 1024 && extra < 3 * MIB as isize + 64 * 1024,
        "Capture: {extra} bytes at most at once for a 3 MiB capture"
    );
}

#[test]
fn a_missing_part_is_named() {
    let dir = snapshot("missing", 2, 64);
    std::fs::remove_file(dir.join("part1.bin")).unwrap();
    let e = Trace::open(&dir).unwrap_err().to_string();
    assert!(e.contains("part1.bin") && e.contains("no such file"), "{e}");
    let e = match Capture::load(&dir, None) {
        Ok(_) => panic!("a capture with a missing file loaded"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("part1.bin") && e.contains("no such file"), "{e}");
}
