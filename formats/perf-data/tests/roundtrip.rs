//! Files made by the writer read back the same; damaged ones give errors or warnings, never panics.

use coresight_perf_data::{
    AuxFlags, AuxFormat, BuildId, CpuConfig, CsEtmInfo, Error, Etmv4Config, PerfFile, Record, Recording, SampleFields,
    ThreadEventKind, TraceUnit, Writer, WriterOptions,
};

const LOOP: &str = "/data/local/tmp/etm_test_loop";

fn etm(cpu: u32) -> Etmv4Config {
    Etmv4Config {
        trcconfigr: 0x40,
        trctraceidr: 0x10 + 2 * u64::from(cpu),
        trcidr0: 0x2800_0ea1,
        trcidr1: 0x4100_f422,
        trcidr2: 0x2000_1088,
        trcidr8: 0,
        trcauthstatus: 0x8c,
        trcdevarch: None,
        ts_source: Some(1),
    }
}

fn info() -> CsEtmInfo {
    let cpus = vec![
        CpuConfig::etmv4(0, etm(0)),
        CpuConfig::ete(
            1,
            Etmv4Config {
                trcdevarch: Some(0x4771_5a13),
                ts_source: None,
                ..etm(1)
            },
        ),
    ];
    let mut i = CsEtmInfo {
        version: 1,
        pmu_type: 9,
        num_cpus: 2,
        snapshot: false,
        cpus,
        raw: Vec::new(),
    };
    i.raw = i.to_words();
    i
}

fn build_id() -> BuildId {
    BuildId::new(&[
        0x0c, 0x9a, 0x20, 0xbf, 0x9c, 0x00, 0x9d, 0x0e, 0x4e, 0x8b, 0xbf, 0x9f, 0xad, 0x03, 0x00, 0xae,
    ])
}

/// A small two-CPU recording: formatted trace on CPU 0 (two buffers with a gap between them),
/// raw trace on CPU 1.
/// A writer of a two-CPU recording with PMU type 9.
fn two_cpu_writer() -> Writer {
    Writer::new(WriterOptions {
        pmu_type: 9,
        cpus: vec![0, 1],
        nr_cpus: 2,
        ..Default::default()
    })
}

/// The sample id fields of process 42, thread 43, on `cpu` at `time`.
fn s(cpu: u32, time: u64) -> SampleFields {
    SampleFields {
        pid: 42,
        tid: 43,
        time,
        cpu,
    }
}

fn sample_file() -> Vec<u8> {
    let mut w = two_cpu_writer();
    w.auxtrace_info(&info());
    w.comm(42, 43, "etm_test_loop", true, s(0, 10));
    w.mmap2(42, 43, 0x5000_1000, 0x1000, 0x1000, LOOP, Some(build_id()), s(0, 11));
    w.mmap2(42, 43, 0x7000_0000, 0x2000, 0, "/system/lib64/libc.so", None, s(0, 12));
    w.itrace_start(42, 43, s(0, 13));
    w.itrace_start(42, 43, s(1, 14));
    w.aux(0, 32, 0, s(0, 20));
    w.aux(0, 16, AuxFlags::CORESIGHT_FORMAT_RAW, s(1, 21));
    w.finished_round();
    w.auxtrace(0, 20, 0, 43, 0, &[0xaa; 32]);
    w.auxtrace(0, 21, 1, 43, 1, &[0xbb; 16]);
    w.aux(64, 8, AuxFlags::TRUNCATED, s(0, 30));
    w.auxtrace(64, 30, 0, 43, 0, &[0xcc; 8]);
    w.finished_round();
    w.build_id(-1, LOOP, build_id());
    w.finish()
}

#[test]
fn round_trip() {
    let bytes = sample_file();
    let rec = Recording::parse(&bytes).unwrap();
    let f = &rec.file;
    assert_eq!(f.attrs.len(), 1);
    assert_eq!(f.attrs[0].kind, 9);
    assert_eq!(f.attrs[0].ids.len(), 2);
    assert!(f.attrs[0].sample_id_all());
    assert_eq!(f.attrs[0].aux_watermark, 0x8000);
    assert_eq!(f.feature_string(6).unwrap().as_deref(), Some("aarch64"));
    assert_eq!(f.nr_cpus().unwrap(), Some((2, 2)));
    assert_eq!(f.pmu_mappings().unwrap(), Some(vec![(9, "cs_etm".to_string())]));
    let desc = f.event_desc().unwrap().unwrap();
    assert_eq!(
        (desc[0].name.as_str(), desc[0].kind, desc[0].ids.clone()),
        ("cs_etm//", 9, f.attrs[0].ids.clone())
    );

    assert_eq!(rec.cs_etm.as_ref(), Some(&info()));
    let cs = rec.cs_etm.as_ref().unwrap();
    assert!(matches!(
        cs.cpus[0].unit,
        TraceUnit::Etmv4(Etmv4Config { ts_source: Some(1), .. })
    ));
    assert!(matches!(
        cs.cpus[1].unit,
        TraceUnit::Ete(Etmv4Config {
            trcdevarch: Some(0x4771_5a13),
            ..
        })
    ));
    assert_eq!(cs.cpu(1).unwrap().trace_id(), 0x12);

    assert_eq!(rec.buffers.len(), 3);
    let b: Vec<_> = rec
        .buffers
        .iter()
        .map(|b| (b.cpu, b.aux_offset, b.size, b.data[0], b.format, b.discontinuous))
        .collect();
    assert_eq!(
        b,
        vec![
            (Some(0), 0, 32, 0xaa, AuxFormat::Formatted, false),
            (Some(1), 0, 16, 0xbb, AuxFormat::Raw, false),
            (Some(0), 64, 8, 0xcc, AuxFormat::Formatted, true),
        ]
    );
    for buf in &rec.buffers {
        assert_eq!(&bytes[buf.data_offset as usize..][..buf.size as usize], buf.data);
    }
    assert_eq!(rec.auxtrace_index.len(), 3);
    assert_eq!(rec.auxtrace_index[0].file_offset, rec.buffers[0].record_offset);
    assert_eq!(rec.truncated_aux, 1);
    assert!(rec.warnings.iter().any(|w| w.message.contains("truncated")));

    assert_eq!(rec.maps.len(), 2);
    assert_eq!(
        (rec.maps[0].start, rec.maps[0].len, rec.maps[0].pgoff),
        (0x5000_1000, 0x1000, 0x1000)
    );
    assert_eq!(rec.maps[0].build_id, Some(build_id()));
    assert_eq!(rec.maps[0].time, Some(11));
    assert_eq!(rec.maps[1].build_id, None);
    assert_eq!(rec.build_id_for(LOOP), Some(build_id()));

    let kinds: Vec<_> = rec.thread_events.iter().map(|e| (&e.kind, e.cpu, e.time)).collect();
    assert_eq!(kinds.len(), 3);
    assert!(matches!(
        kinds[0],
        (ThreadEventKind::Comm { exec: true, .. }, Some(0), Some(10))
    ));
    assert!(matches!(kinds[2], (ThreadEventKind::ItraceStart, Some(1), Some(14))));

    // The streaming iterator sees the same records, borrowing payloads from the file.
    let file = PerfFile::parse(&bytes).unwrap();
    let mut auxtrace = 0;
    for r in file.records() {
        let r = r.unwrap();
        if let Record::Auxtrace(t) = r.record {
            assert_eq!(t.data.as_ptr(), bytes[t.data_offset as usize..].as_ptr());
            auxtrace += 1;
        }
    }
    assert_eq!(auxtrace, 3);
}

/// AUX records that announce trace no AUXTRACE record holds (a recording cut short, or
/// written without its AUX data) are named with the bytes missing, per CPU; a complete
/// recording has no such warning.
#[test]
fn aux_data_announced_and_missing_is_warned_of() {
    let bytes = sample_file();
    let complete = Recording::parse(&bytes).unwrap();
    assert!(!complete.warnings.iter().any(|w| w.message.contains("missing")));

    let mut w = two_cpu_writer();
    w.auxtrace_info(&info());
    w.aux(0, 1_500_000, 0, s(0, 20));
    w.aux(0, 4096, 0, s(1, 21));
    w.auxtrace(0, 21, 1, 43, 1, &[0xbb; 4096]);
    w.finished_round();
    let bytes = w.finish();
    let rec = Recording::parse(&bytes).unwrap();
    let missing: Vec<String> = rec
        .warnings
        .iter()
        .filter(|w| w.message.contains("missing"))
        .map(|w| w.to_string())
        .collect();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(
        missing[0].contains(
            "AUX records announce 1500000 bytes of trace for CPU 0, AUXTRACE records hold 0: 1500000 bytes are missing"
        ),
        "{}",
        missing[0]
    );
    assert!(missing[0].starts_with("at file offset 0x"), "{}", missing[0]);
}

#[test]
fn every_truncation_is_an_error_or_warning() {
    let bytes = sample_file();
    for len in 0..bytes.len() {
        match Recording::parse(&bytes[..len]) {
            Ok(rec) => assert!(!rec.warnings.is_empty(), "cut at {len}: no warning"),
            Err(e) => assert!(
                e.to_string().contains("offset") || matches!(e, Error::BadMagic { .. }),
                "{e}"
            ),
        }
    }
}

#[test]
fn single_byte_mutations_never_panic() {
    let bytes = sample_file();
    let mut copy = bytes.clone();
    for pos in 0..bytes.len() {
        for v in [0x00, 0x01, 0x7f, 0x80, 0xff, bytes[pos] ^ 0x10] {
            copy[pos] = v;
            if let Ok(rec) = Recording::parse(&copy) {
                // Touch everything so lazy parts run too.
                let _ = (
                    rec.buffers.len(),
                    rec.maps.len(),
                    rec.file.event_desc(),
                    rec.file.pmu_mappings(),
                );
                let _ = (rec.file.cmdline(), rec.file.simpleperf_files(), rec.file.nr_cpus());
            }
            copy[pos] = bytes[pos];
        }
    }
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn record_offset(bytes: &[u8], kind: u32) -> usize {
    let f = PerfFile::parse(bytes).unwrap();
    f.records().map(|r| r.unwrap()).find(|r| r.kind == kind).unwrap().offset as usize
}

#[test]
fn malformed_sizes_offsets_and_counts() {
    let good = sample_file();

    // A record of size 0: an error naming the offset of its size field, not a hang.
    let mut b = good.clone();
    let at = record_offset(&b, 3);
    b[at + 6..at + 8].copy_from_slice(&0u16.to_le_bytes());
    let rec = Recording::parse(&b).unwrap();
    assert!(
        rec.warnings
            .iter()
            .any(|w| w.offset == at as u64 + 6 && w.message.contains("record size")),
        "{:?}",
        rec.warnings
    );

    // An AUXTRACE payload size far past the end.
    let mut b = good.clone();
    let at = record_offset(&b, 71);
    put_u64(&mut b, at + 8, u64::MAX / 2);
    let rec = Recording::parse(&b).unwrap();
    assert!(
        rec.warnings.iter().any(|w| w.message.contains("AUXTRACE payload")),
        "{:?}",
        rec.warnings
    );

    // A cs_etm CPU count of 2^32-1: rejected before allocating anything for it.
    let mut b = good.clone();
    let at = record_offset(&b, 70);
    put_u64(&mut b, at + 16 + 8, 9 << 32 | 0xffff_ffff);
    let rec = Recording::parse(&b).unwrap();
    assert!(rec.cs_etm.is_none());
    assert!(
        rec.warnings
            .iter()
            .any(|w| w.offset == at as u64 + 24 && w.message.contains("CPU count")),
        "{:?}",
        rec.warnings
    );

    // Attribute ids pointing outside the file.
    let mut b = good.clone();
    let attrs_at = u64::from_le_bytes(b[24..32].try_into().unwrap()) as usize;
    put_u64(&mut b, attrs_at + 128, 1 << 40);
    assert!(matches!(Recording::parse(&b), Err(Error::Malformed { .. })));

    // Data section size and offset swapped.
    let mut b = good.clone();
    let (off, size) = (b[40..48].to_vec(), b[48..56].to_vec());
    b[40..48].copy_from_slice(&size);
    b[48..56].copy_from_slice(&off);
    let _ = Recording::parse(&b);

    // A feature section pointing past the end: that feature is skipped with a warning.
    let mut b = good.clone();
    let f = PerfFile::parse(&good).unwrap();
    let table = f.header.data.end() as usize;
    put_u64(&mut b, table, u64::MAX - 4);
    let rec = Recording::parse(&b).unwrap();
    assert!(rec.warnings.iter().any(|w| w.offset == table as u64));

    // Unknown record kinds are counted, not errors.
    let mut b = good.clone();
    let at = record_offset(&b, 68);
    b[at..at + 4].copy_from_slice(&1234u32.to_le_bytes());
    let rec = Recording::parse(&b).unwrap();
    assert_eq!(rec.unknown_records.get(&1234), Some(&1));

    // Not a perf.data file at all.
    assert!(matches!(Recording::parse(b"hello"), Err(Error::BadMagic { .. })));
}
