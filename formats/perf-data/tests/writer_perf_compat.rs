//! What the writer adds so that Linux perf reads its files: the feature strings perf prints
//! in its header, per-thread sample ids (no CPU or time), and auxtrace index entries the size
//! of the AUXTRACE record's header, which perf checks before it queues a buffer.

use coresight_perf_data::features::feature;
use coresight_perf_data::{
    CpuConfig, CsEtmInfo, Etmv4Config, PerfFile, Record, Recording, SampleFields, Writer, WriterOptions,
};

fn info() -> CsEtmInfo {
    let e = Etmv4Config {
        trcconfigr: 0x841,
        trctraceidr: 0x10,
        trcidr0: 0x2800_0ea1,
        trcidr1: 0x4100_f422,
        trcidr2: 0x2000_1088,
        trcidr8: 0,
        trcauthstatus: 0xcc,
        trcdevarch: None,
        ts_source: None,
    };
    let mut i = CsEtmInfo {
        version: 1,
        pmu_type: 10,
        num_cpus: 1,
        snapshot: false,
        cpus: vec![CpuConfig::etmv4(0, e)],
        raw: Vec::new(),
    };
    i.raw = i.to_words();
    i
}

fn file(opts: WriterOptions) -> Vec<u8> {
    let mut w = Writer::new(opts);
    let at = SampleFields {
        pid: 7,
        tid: 8,
        time: 99,
        cpu: 0,
    };
    w.auxtrace_info(&info());
    w.comm(7, 8, "prog", true, at);
    w.itrace_start(7, 8, at);
    w.aux(0, 24, 0, at);
    w.auxtrace(0, 1, 0, 8, u32::MAX, &[0x55; 24]);
    w.aux(24, 16, 0, at);
    w.auxtrace(24, 2, 0, 8, u32::MAX, &[0x66; 16]);
    w.finish()
}

#[test]
fn header_strings_read_back() {
    let bytes = file(WriterOptions {
        hostname: "board".into(),
        osrelease: "6.1.0-arm64".into(),
        perf_version: "6.1.99".into(),
        cmdline: vec!["perf".into(), "record".into(), "-e".into(), "cs_etm//u".into()],
        event_name: "cs_etm//u".into(),
        ..WriterOptions::default()
    });
    let f = PerfFile::parse(&bytes).unwrap();
    assert_eq!(f.feature_string(feature::HOSTNAME).unwrap().as_deref(), Some("board"));
    assert_eq!(
        f.feature_string(feature::OSRELEASE).unwrap().as_deref(),
        Some("6.1.0-arm64")
    );
    assert_eq!(f.feature_string(feature::VERSION).unwrap().as_deref(), Some("6.1.99"));
    assert_eq!(f.feature_string(feature::ARCH).unwrap().as_deref(), Some("aarch64"));
    assert_eq!(
        f.cmdline().unwrap(),
        Some(vec![
            "perf".to_string(),
            "record".into(),
            "-e".into(),
            "cs_etm//u".into()
        ])
    );
    assert_eq!(f.event_desc().unwrap().unwrap()[0].name, "cs_etm//u");
    assert_eq!(f.pmu_mappings().unwrap(), Some(vec![(8, "cs_etm".to_string())]));
}

#[test]
fn auxtrace_index_entries_are_record_headers() {
    let bytes = file(WriterOptions::default());
    let rec = Recording::parse(&bytes).unwrap();
    assert_eq!(rec.auxtrace_index.len(), 2);
    for (e, b) in rec.auxtrace_index.iter().zip(&rec.buffers) {
        assert_eq!((e.file_offset, e.size), (b.record_offset, 48));
        assert_eq!(b.data_offset, b.record_offset + 48);
    }
}

#[test]
fn per_thread_sample_ids_have_no_cpu_or_time() {
    let bytes = file(WriterOptions {
        sample_time: false,
        sample_cpu: false,
        ..WriterOptions::default()
    });
    let f = PerfFile::parse(&bytes).unwrap();
    assert_eq!(f.attrs[0].sample_type, 0x1 | 0x2 | 0x1_0000);
    let rec = Recording::parse(&bytes).unwrap();
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert_eq!(rec.aux_records.len(), 2);
    for (_, a) in &rec.aux_records {
        assert_eq!((a.sample_id.pid, a.sample_id.tid), (Some(7), Some(8)));
        assert_eq!((a.sample_id.time, a.sample_id.cpu), (None, None));
        assert_eq!(a.sample_id.id, Some(100));
    }
    // The buffers are the thread's (CPU -1).
    assert!(rec.buffers.iter().all(|b| b.cpu.is_none() && b.tid == Some(8)));
    let n_itrace = f
        .records()
        .filter(|r| matches!(r.as_ref().map(|e| &e.record), Ok(Record::ItraceStart(_))))
        .count();
    assert_eq!(n_itrace, 1);
}
