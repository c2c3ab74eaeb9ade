//! Memory does not grow with the capture: the pull API's `Trace` and the
//! index's `Capture` read a buffer's data files (one or several) a chunk
//! at a time as they decode or index, never the whole capture at once.
//! Measured as the most bytes live at once, with a counting allocator, on
//! the same snapshot with a small and a large buffer.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};

use coresight_decode::DecodeMode;
use coresight_decode::Trace;
use coresight_decode::index::{Capture, IndexOptions, SourceBlock, StreamEntry, build_index};
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

/// Bytes of a large capture: several chunks of the pull API's.
const LARGE: usize = 3 * 2 * MIB;

#[test]
fn a_trace_is_decoded_from_its_files_a_chunk_at_a_time() {
    // The same snapshot with 768 KiB of trace (less than a chunk) and with
    // 6 MiB in three files: decoding the larger costs no more memory than
    // the smaller (the decoder's caches are the same: the same program).
    let small = snapshot("pull-small", 3, 256 * 1024);
    let large = snapshot("pull-large", 3, LARGE / 3);
    let decode_all = |dir: &Path| {
        let ss = Snapshot::load(dir).unwrap();
        let mut t = Trace::from_snapshot(&ss, None).unwrap();
        let mut n = 0;
        for d in t.elements() {
            d.unwrap();
            n += 1;
        }
        (t.size(), n)
    };
    let (base, (size, n_small)) = peak_of(|| decode_all(&small));
    assert_eq!(size, 3 * 256 * 1024);
    let (peak, (size, n_large)) = peak_of(|| decode_all(&large));
    assert_eq!(size, LARGE as u64);
    assert!(
        n_large > 7 * n_small && n_large < 9 * n_small,
        "{n_large} elements from 6 MiB, {n_small} from 768 KiB"
    );
    assert!(
        peak - base < 16 * 1024,
        "Trace: {peak} bytes at most at once for a 6 MiB capture, {base} for 768 KiB"
    );

    // The elements are those of the capture decoded whole in memory: the
    // chunks' edges (and the files') change nothing.
    let mut whole = Vec::new();
    for i in 0..3 {
        whole.extend(std::fs::read(large.join(format!("part{i}.bin"))).unwrap());
    }
    let ss = Snapshot::load(&large).unwrap();
    let mut t = Trace::from_snapshot(&ss, None).unwrap();
    assert!(t.data().is_none());
    let streamed: Vec<_> = t.elements().map(|d| d.unwrap()).collect();
    let mut dec = coresight_decode::Decoder::from_snapshot(&ss, &ss.buffers[0].name).unwrap();
    let held: Vec<_> = dec.decode(&whole).map(|d| d.unwrap()).collect();
    assert_eq!(streamed.len(), held.len());
    assert!(
        streamed == held,
        "elements differ between the streamed and the whole decode"
    );
    // A second decode starts again from the first file.
    assert_eq!(t.elements().count(), held.len());

    // Apart, the data is a reader of the files from their start.
    let (_, data) = t.into_parts();
    let coresight_decode::TraceData::Files(mut reader) = data else {
        panic!("a snapshot's trace came apart as bytes in memory")
    };
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut reader, &mut back).unwrap();
    assert!(back == whole);
}

#[test]
fn a_capture_is_indexed_from_its_files_a_chunk_at_a_time() {
    let small = snapshot("index-small", 3, 16);
    let large = snapshot("index-large", 3, LARGE / 3);
    // Loading reads no trace.
    let (base, c) = peak_of(|| Capture::load(&small, None).unwrap());
    drop(c);
    let (peak, c) = peak_of(|| Capture::load(&large, None).unwrap());
    assert_eq!(c.size(), LARGE as u64);
    assert!(
        peak - base < 16 * 1024,
        "Capture::load: {peak} bytes at most at once, {base} for 48 bytes"
    );

    // Indexing holds a chunk and what the index records, not the capture.
    let (peak, ix) = peak_of(|| c.index(&IndexOptions::default()).unwrap());
    let entries: usize = ix.streams.iter().map(|s| s.entries.capacity()).sum();
    let recorded = entries * size_of::<StreamEntry>()
        + ix.source
            .as_ref()
            .map_or(0, |s| s.blocks.capacity() * size_of::<SourceBlock>());
    assert!(ix.is_complete());
    assert!(
        (peak as usize) < 2 * MIB + 2 * recorded,
        "index: {peak} bytes at most at once, the index {recorded} bytes, for a 6 MiB capture"
    );
    // The index is the one built from the capture in memory.
    let whole = c.data().unwrap();
    assert_eq!(whole.len(), LARGE);
    let mut tree = c.tree(DecodeMode::PacketsOnly, |_| {}).unwrap();
    let mut held = build_index(&mut tree, whole, &IndexOptions::default()).unwrap();
    held.config = ix.config;
    assert!(held == ix, "the streamed index differs from the one built in memory");

    // Checking an index against the capture reads it a chunk at a time.
    let path = large.join("trace.csidx");
    ix.save(&path).unwrap();
    let c = Capture::load(&large, None).unwrap();
    let (peak, back) = peak_of(|| c.load_index(&path).unwrap());
    assert!(back == ix);
    assert!(
        (peak as usize) < 3 * MIB / 2 + 2 * recorded,
        "load_index: {peak} bytes at most at once for a 6 MiB capture"
    );
    // A capture changed since is refused.
    let mut bytes = std::fs::read(large.join("part1.bin")).unwrap();
    bytes[100] ^= 1;
    std::fs::write(large.join("part1.bin"), bytes).unwrap();
    let e = Capture::load(&large, None)
        .unwrap()
        .load_index(&path)
        .unwrap_err()
        .to_string();
    assert!(e.contains("stale") || e.contains("changed"), "{e}");
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

/// A generated snapshot of `protocol` as the generator writes it.
fn generated(name: &str, protocol: &str, seed: u64) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capture_memory").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    generate(&GenOptions {
        seed,
        protocol: GenProtocol::from_name(protocol).unwrap(),
        layout: BufferLayout::Formatted,
        length: 400,
    })
    .spec
    .write_to(&dir)
    .unwrap();
    dir
}

#[test]
fn an_index_is_written_as_it_is_built() {
    // The file is the one the index built in memory saves, whatever is
    // spilled: entries of several streams, source blocks (a fine
    // granularity makes many), a partial index.
    let mut several = false;
    for (protocol, seed) in [
        ("etmv4", 1),
        ("tc2", 2),
        ("tc2", 5),
        ("etmv4", 9),
        ("stm", 4),
        ("ete", 6),
    ] {
        let dir = generated(&format!("to-file-{protocol}-{seed}"), protocol, seed);
        let c = Capture::load(&dir, None).unwrap();
        for opts in [
            IndexOptions::default(),
            IndexOptions {
                granularity: 16,
                ..IndexOptions::default()
            },
            IndexOptions {
                limit: Some(c.size() / 2),
                ..IndexOptions::default()
            },
        ] {
            let held = c.index(&opts).unwrap();
            several |= held.streams.len() > 1;
            let path = dir.join("trace.csidx");
            let w = c.index_to_file(&opts, &path).unwrap();
            let want = coresight_decode::index::to_bytes(&held);
            assert!(std::fs::read(&path).unwrap() == want, "{protocol} seed {seed} {opts:?}");
            assert_eq!(w.capture, held.capture);
            assert_eq!(w.indexed, held.indexed);
            assert_eq!(w.streams, held.streams.len());
            assert_eq!(
                w.entries as usize,
                held.streams.iter().map(|s| s.entries.len()).sum::<usize>()
            );
            // The temporary files are gone.
            let left: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".part"))
                .collect();
            assert!(left.is_empty(), "{left:?}");
        }
    }
    assert!(several, "no capture with several trace IDs");

    // Its memory does not grow with the capture: the same program's trace,
    // 768 KiB and 6 MiB of it, indexed to a file with blocks of 16 bytes
    // (the index holds 48 K and 384 K source blocks, and the entries).
    let small = snapshot("to-file-small", 3, 256 * 1024);
    let large = snapshot("to-file-large", 3, LARGE / 3);
    let fine = IndexOptions {
        granularity: 16,
        ..IndexOptions::default()
    };
    let index_to_file = |dir: &Path| {
        let c = Capture::load(dir, None).unwrap();
        c.index_to_file(&fine, &dir.join("trace.csidx")).unwrap()
    };
    let (base, w_small) = peak_of(|| index_to_file(&small));
    let (peak, w_large) = peak_of(|| index_to_file(&large));
    assert!(w_large.entries > 7 * w_small.entries, "{w_large:?} {w_small:?}");
    assert!(
        peak - base < 16 * 1024,
        "index_to_file: {peak} bytes at most at once for a 6 MiB capture, {base} for 768 KiB"
    );
    // The file reads back as the index built in memory.
    let c = Capture::load(&large, None).unwrap();
    let back = c.load_index(&large.join("trace.csidx")).unwrap();
    assert!(back == c.index(&fine).unwrap());
}
