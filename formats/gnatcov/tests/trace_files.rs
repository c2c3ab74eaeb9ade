//! gnatcov trace files: the real traces in ../shared (when present) read,
//! dumped and written back; damaged traces never panic.

use std::path::PathBuf;

use coresight_generator::Rng;
use coresight_gnatcov::dump::dump;
use coresight_gnatcov::format::{EM_AARCH64, EM_ARM, InfoKind, InfoValue, PcSize, TraceFile, TraceKind, read_file};

/// A corpus trace; the tests using it are `#[ignore]`d, so it must be there.
fn corpus(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/gnatcov")
        .join(name);
    assert!(p.exists(), "{}: not present (these tests need ../shared)", p.display());
    p
}

/// Dump of bin-main_1.trace: the info entries, the first and the last entries.
#[test]
#[ignore = "needs ../shared/corpus/gnatcov (real gnatcov traces); .ci/run runs it with --ignored"]
fn corpus_main_1_dump_and_write_back() {
    let p = corpus("bin-main_1.trace");
    let bytes = std::fs::read(&p).unwrap();
    let t = TraceFile::parse(&bytes).unwrap();
    assert_eq!(t.header.kind, TraceKind::Flat);
    assert_eq!((t.header.machine, t.header.pc_size), (EM_ARM, PcSize::Bits32));
    assert_eq!(t.to_bytes(), bytes, "written back byte for byte");
    let d = dump(&t, false);
    let head = "Kind: FLAT\n\n\
Tag  : DATE_TIME (Date)\nLen  : 8\nData : ea 07 03 18 0e 3b 26 00\n       2026-03-24 14:59:38 UTC\n\n\
Tag  : EXEC_FILE_NAME\nLen  : 10\nData : obj/main_1\n\n\
Tag  : EXEC_FILE_SIZE\nLen  : 6\nData :  19104\n\n\
Tag  : EXEC_FILE_TIME_STAMP\nLen  : 19\nData : 2026-03-24 14:59:38\n\n\
Tag  : EXEC_FILE_CRC32\nLen  : 11\nData :  3643145681\n\n\
Traces:\n\
080003c8-080003cb ?: 11 ---t block\n\
08000970-08000971 ?: 20 ---- fault\n";
    assert!(d.starts_with(head), "{d}");
    assert!(
        d.ends_with("\n08000532-08000537 ?: 20 ---- fault\n08000538-0800053b ?: 12 --t- block\n"),
        "{d}"
    );
    assert!(
        d.contains("\n080005cc-080005cb ?: 20 ---- fault\n"),
        "empty fault entries print last = first - 1"
    );
    assert_eq!(d.lines().filter(|l| l.contains(" ?: ")).count(), 194);
    assert_eq!(
        t.info(InfoKind::ExecFileCrc32).unwrap().value(t.header.endian),
        InfoValue::Number(3_643_145_681)
    );
    // Read through the file API too.
    assert_eq!(read_file(&p).unwrap(), t.clone().into_owned());
}

/// bin-main_2.trace is an AArch64 trace with 64-bit PCs.
#[test]
#[ignore = "needs ../shared/corpus/gnatcov (real gnatcov traces); .ci/run runs it with --ignored"]
fn corpus_main_2_dump_and_write_back() {
    let p = corpus("bin-main_2.trace");
    let bytes = std::fs::read(&p).unwrap();
    let t = TraceFile::parse(&bytes).unwrap();
    assert_eq!((t.header.machine, t.header.pc_size), (EM_AARCH64, PcSize::Bits64));
    assert_eq!(t.to_bytes(), bytes, "written back byte for byte");
    let d = dump(&t, false);
    let head = "Kind: FLAT\n\n\
Tag  : DATE_TIME (Date)\nLen  : 8\nData : ea 07 03 18 0e 3b 28 00\n       2026-03-24 14:59:40 UTC\n\n\
Tag  : EXEC_FILE_NAME\nLen  : 10\nData : obj/main_2\n\n\
Tag  : EXEC_FILE_SIZE\nLen  : 8\nData :  4303232\n\n\
Tag  : EXEC_FILE_TIME_STAMP\nLen  : 19\nData : 2026-03-24 14:59:40\n\n\
Tag  : EXEC_FILE_CRC32\nLen  : 11\nData :  3855874399\n\n\
Traces:\n\
0000000000000000-0000000000000003 ?: 11 ---t block\n\
0000000000000584-0000000000000603 ?: 11 ---t block\n";
    assert!(d.starts_with(head), "{d}");
    assert_eq!(d.lines().filter(|l| l.contains(" ?: ")).count(), 175);
}

fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        if data.is_empty() {
            data.push(0);
        }
        let at = rng.below(data.len() as u64) as usize;
        match rng.below(5) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data[at] = rng.next_u64() as u8,
            2 => data.truncate(at),
            3 => {
                let n = (1 + rng.below(8) as usize).min(data.len() - at);
                data.drain(at..at + n);
            }
            _ => {
                let run = data[at..(at + 1 + rng.below(12) as usize).min(data.len())].to_vec();
                data.splice(at..at, run);
            }
        }
    }
}

/// Damaged traces (ours, and the corpus's when present) give errors that
/// name a byte inside the file, or parse; they never panic.
#[test]
fn mutated_traces_never_panic() {
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for name in ["bin-main_1.trace", "bin-main_2.trace"] {
        // Not `corpus`: this test runs without ../shared too, on our seeds only.
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/corpus/gnatcov")
            .join(name);
        if p.exists() {
            seeds.push(std::fs::read(p).unwrap());
        }
    }
    // Our own: every info kind, special entries, both byte orders and PC sizes.
    use coresight_gnatcov::format::*;
    for pc in [PcSize::Bits32, PcSize::Bits64] {
        for endian in [Endian::Little, Endian::Big] {
            let mut t = TraceFile::new_flat(pc, endian, EM_ARM);
            t.infos.push(InfoEntry::new(InfoKind::ExecFileName, b"a.out".to_vec()));
            t.infos.push(InfoEntry::new(
                InfoKind::DateTime,
                DateTime::from_unix(1).to_bytes(endian).to_vec(),
            ));
            t.records.push(Record::Exec(Entry::new(0x100, 4, 0x11)));
            t.records.push(Record::LoadSharedObject {
                base: 0x8000,
                infos: vec![InfoEntry::number(InfoKind::ExecCodeSize, 64)],
            });
            t.records.push(Record::Exec(Entry::new(0x8004, 8, 0x12)));
            seeds.push(t.to_bytes());
        }
    }
    let mut rng = Rng::new(11);
    let mut errors = 0;
    for round in 0..3000 {
        let mut d = seeds[round % seeds.len()].clone();
        mutate(&mut rng, &mut d);
        match TraceFile::parse(&d) {
            Ok(t) => {
                let _ = dump(&t, round % 2 == 0);
                let _ = t.to_bytes();
            }
            Err(e) => {
                errors += 1;
                assert!(e.offset <= d.len(), "offset {} past {} bytes: {e}", e.offset, d.len());
                assert!(!e.to_string().is_empty());
            }
        }
    }
    assert!(errors > 100, "mutations should mostly be caught ({errors})");
}

/// Damaged ELF files (the committed coverage fixtures, mutated) are
/// rejected or read; coverage over them never panics.
#[test]
fn mutated_elves_never_panic() {
    use coresight_gnatcov::coverage::{CodeImage, Coverage, Execution};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/tests/fixtures/cov");
    let mut rng = Rng::new(5);
    let (mut ok, mut rejected) = (0, 0);
    for arch in ["a64", "t32"] {
        let elf = std::fs::read(dir.join(format!("prog-{arch}.elf"))).unwrap();
        let trace = read_file(dir.join(format!("prog-{arch}.trace"))).unwrap();
        let entries: Vec<_> = trace.entries().copied().collect();
        for _ in 0..600 {
            let mut d = elf.clone();
            // Mostly small damage, so that many mutants still parse.
            let at = rng.below(d.len() as u64) as usize;
            match rng.below(4) {
                0 => d[at] ^= 1 << rng.below(8),
                1 => d[at] = rng.next_u64() as u8,
                2 => d.truncate(at),
                _ => mutate(&mut rng, &mut d),
            }
            match CodeImage::from_elf(&d) {
                Ok(img) => {
                    ok += 1;
                    let c = Coverage::compute(&img, &Execution::from_entries(&img, &entries));
                    let _ = c.report(8, &mut |_| String::new());
                }
                Err(e) => {
                    rejected += 1;
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
    assert!(ok > 100 && rejected > 10, "{ok} read, {rejected} rejected");
    assert!(
        CodeImage::from_elf(b"not an ELF at all")
            .unwrap_err()
            .to_string()
            .starts_with("not an ELF file")
    );
}
