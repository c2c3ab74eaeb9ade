//! simpleperf's branch list files: written and read back, merged, refused with a reason when
//! damaged, and the AutoFDO text they give equal to the direct route's on generated
//! recordings of every kind.

use coresight_generator::BufferLayout;
use coresight_generator::perf_data::{PerfOptions, generate_perf_data};
use coresight_perf_data::Recording;
use coresight_perf_data::autofdo::{AutoFdoProfile, add_recording};
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::branch_list::{self, BinaryKind, BranchList, BranchListError, EtmBinary};
use coresight_perf_data::decode::DecodeOptions;

fn sample() -> BranchList {
    let mut l = BranchList::default();
    let mut b = EtmBinary {
        path: "/data/local/tmp/prog".into(),
        build_id: "0c9a20bf9c009d0e4e8bbf9fad0300ae00000000".into(),
        kind: BinaryKind::Elf,
        ..Default::default()
    };
    b.branches.entry(0x1000).or_default().insert(vec![true, false, true], 7);
    // Nine bits: two bytes, the last one partly used.
    b.branches
        .entry(0x1041)
        .or_default()
        .insert(vec![false; 8].into_iter().chain([true]).collect(), 1);
    l.binaries.insert((b.path.clone(), b.build_id.clone(), 0), b);
    l
}

#[test]
fn round_trip_and_merge() {
    let l = sample();
    let bytes = l.to_bytes();
    assert!(BranchList::sniff(&bytes).is_some());
    assert_eq!(BranchList::parse(&bytes).unwrap(), l);
    // Field 1 (magic), length-delimited, comes first.
    assert_eq!(bytes[0], 0x0a);
    assert_eq!(&bytes[2..2 + branch_list::MAGIC.len()], branch_list::MAGIC.as_bytes());

    let mut m = l.clone();
    m.merge(&l);
    let b = m.binaries.values().next().unwrap();
    assert_eq!(b.branches[&0x1000][&vec![true, false, true]], 14);
    // Counts saturate rather than wrap.
    let mut big = l.clone();
    for b in big.binaries.values_mut() {
        for lists in b.branches.values_mut() {
            for c in lists.values_mut() {
                *c = u64::MAX - 1;
            }
        }
    }
    big.merge(&l);
    assert_eq!(
        big.binaries.values().next().unwrap().branches[&0x1000][&vec![true, false, true]],
        u64::MAX
    );
    // (u64::MAX - 1) + 7 saturates; (u64::MAX - 1) + 1 does not.
    assert_eq!(big.overflows, 1);
}

#[test]
fn damaged_files_are_refused_with_a_reason() {
    let bytes = sample().to_bytes();
    // A perf.data is not a branch list.
    assert!(BranchList::sniff(b"PERFILE2\x68\0\0\0\0\0\0\0").is_none());
    // Another magic.
    let mut other = bytes.clone();
    other[2] = b'X';
    let e = BranchList::parse(&other).unwrap_err();
    assert!(matches!(e, BranchListError::Magic { .. }), "{e}");
    assert!(e.to_string().contains("Ximpleperf:EtmBranchList"), "{e}");
    // Every truncation and every byte changed: an error or a list, never a panic.
    for n in 0..bytes.len() {
        let _ = BranchList::parse(&bytes[..n]);
    }
    for i in 0..bytes.len() {
        for v in [0u8, 0x7f, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            if let Ok(l) = BranchList::parse(&b) {
                let _ = l.to_bytes();
            }
        }
    }
}

/// On generated recordings of every kind, AutoFDO text through branch lists (written,
/// read back, walked through the ELF) equals the direct route's.
#[test]
fn branch_lists_give_the_direct_profile() {
    let dir = std::env::temp_dir().join(format!("branch-list-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut compared = 0;
    for (seed, layout, cpus, per_thread, untimed) in [
        (1, BufferLayout::Formatted, 1, false, false),
        (2, BufferLayout::Formatted, 2, false, false),
        (3, BufferLayout::Unformatted, 2, false, false),
        (4, BufferLayout::Formatted, 1, true, false),
        (5, BufferLayout::Formatted, 2, false, true),
    ] {
        let r = generate_perf_data(&PerfOptions {
            seed,
            layout,
            cpus,
            per_thread,
            untimed,
            elf_path: "/tmp/branch_list_prog".into(),
            ..Default::default()
        })
        .unwrap();
        std::fs::write(dir.join("prog"), &r.elf.bytes).unwrap();
        let search = || {
            let mut s = SymbolSearch::new();
            s.recorded_paths = false;
            s.add_symdir(&dir).unwrap();
            s
        };
        let rec = Recording::parse(&r.perf_data).unwrap();
        let mut direct = AutoFdoProfile::new(None);
        add_recording(&rec, search(), DecodeOptions::default(), &mut direct, &mut |_| {}).unwrap();
        let mut lists = BranchList::default();
        branch_list::add_recording(
            &rec,
            search(),
            DecodeOptions::default(),
            &mut lists,
            |_| true,
            &mut |_| {},
        )
        .unwrap();
        let lists = BranchList::parse(&lists.to_bytes()).unwrap();
        let mut via = AutoFdoProfile::new(None);
        assert!(lists.add_to_profile(&search(), &mut via).is_empty());
        let text = direct.to_text();
        assert!(text.lines().count() > 10, "{text}");
        assert_eq!(via.to_text(), text, "seed {seed}");
        compared += 1;
    }
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(compared, 5);
}
