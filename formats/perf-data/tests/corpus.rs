//! Real simpleperf recordings from ../shared/corpus/simpleperf (not in the repository).

use std::path::PathBuf;

use coresight_perf_data::{AuxFormat, MappedFile, Recording, TraceUnit};

fn corpus(name: &str) -> MappedFile {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/simpleperf")
        .join(name);
    MappedFile::open(&p).unwrap_or_else(|e| panic!("{e}"))
}

const ETM_TEST_LOOP: &str = "/data/local/tmp/etm_test_loop";
const ETM_TEST_LOOP_BUILD_ID: &str = "0c9a20bf9c009d0e4e8bbf9fad0300ae";

#[test]
#[ignore = "needs ../shared/corpus/simpleperf (run by .ci/run with --ignored)"]
fn formatted_etr_recording() {
    let f = corpus("perf_etm.data");
    let rec = Recording::parse(f.bytes()).unwrap();
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert!(rec.file.is_simpleperf());
    assert_eq!(rec.attrs().len(), 1);
    let attr = &rec.attrs()[0];
    assert_eq!((attr.kind, attr.config, attr.sample_type), (8, 0x4000, 0x1c7));
    assert_eq!(attr.ids, (71..=78).collect::<Vec<u64>>());
    assert!(attr.sample_id_all());

    let cs = rec.cs_etm.as_ref().unwrap();
    assert_eq!((cs.version, cs.pmu_type, cs.num_cpus, cs.snapshot), (1, 8, 8, false));
    assert_eq!(cs.cpus.len(), 8);
    for (i, c) in cs.cpus.iter().enumerate() {
        assert_eq!(c.cpu, i as u32);
        assert_eq!(c.trace_id(), 0x10 + 2 * i as u8);
        let TraceUnit::Etmv4(e) = c.unit else {
            panic!("cpu {i} is not ETMv4: {:?}", c.unit)
        };
        assert_eq!(e.trcconfigr, 0x40);
        assert_eq!(e.trctraceidr, 0x10 + 2 * i as u64);
        assert_eq!(e.trcidr0, 0x2800_0ea1);
        assert_eq!(e.trcidr1, if i < 6 { 0x4100_f422 } else { 0x4100_f423 });
        assert_eq!(e.trcidr2, 0x2000_1088);
        assert_eq!(e.trcidr8, 0);
        assert_eq!(e.trcauthstatus, 0x8c);
        assert_eq!(e.ts_source, None);
        assert_eq!(c.params.len(), 7);
    }

    assert_eq!(rec.buffers.len(), 1);
    let b = &rec.buffers[0];
    assert_eq!((b.cpu, b.idx, b.aux_offset, b.size), (Some(7), 7, 0, 384));
    assert_eq!(b.data.len(), 384);
    assert_eq!(b.data_offset, 9896 + 48);
    assert_eq!(b.format, AuxFormat::Formatted);
    assert!(!b.discontinuous);
    assert_eq!(rec.aux_records.len(), 4);
    assert_eq!(rec.aux_records.iter().map(|(_, a)| a.aux_size).sum::<u64>(), 384);
    assert!(
        rec.aux_records
            .iter()
            .all(|(_, a)| !a.flags.coresight_raw() && a.sample_id.cpu == Some(7))
    );
    assert_eq!((rec.truncated_aux, rec.lost), (0, 0));

    // simpleperf's auxtrace index: {offset, size} pairs without perf's leading count.
    assert_eq!(rec.auxtrace_index.len(), 1);
    assert_eq!(
        (rec.auxtrace_index[0].file_offset, rec.auxtrace_index[0].size),
        (9896, 48)
    );

    let build_id = rec.build_id_for(ETM_TEST_LOOP).unwrap();
    assert_eq!(build_id.to_hex(), ETM_TEST_LOOP_BUILD_ID);
    let exec: Vec<_> = rec
        .maps
        .iter()
        .filter(|m| m.filename == ETM_TEST_LOOP && m.executable)
        .collect();
    assert_eq!(exec.len(), 1);
    assert_eq!(
        (exec[0].pid, exec[0].start, exec[0].len, exec[0].pgoff),
        (17235, 378_681_364_480, 0x1000, 0x1000)
    );
    assert_eq!(
        exec[0].build_id.map(|b| b.to_hex()).as_deref(),
        Some(ETM_TEST_LOOP_BUILD_ID)
    );
    assert_eq!(rec.maps.len(), 59);

    assert_eq!(
        rec.thread_events
            .iter()
            .filter(|e| matches!(e.kind, coresight_perf_data::ThreadEventKind::ItraceStart))
            .count(),
        2
    );
    assert!(rec.thread_events.iter().any(|e| matches!(&e.kind, coresight_perf_data::ThreadEventKind::Comm { name, exec: true } if name == "etm_test_loop")));
    assert!(rec.thread_events.windows(2).all(|w| w[0].time <= w[1].time));
    assert!(
        rec.meta_info
            .iter()
            .any(|(k, v)| k == "event_type_info" && v == "cs-etm,8,0")
    );
    assert_eq!(rec.file.feature_string(6).unwrap().as_deref(), Some("aarch64"));
}

#[test]
#[ignore = "needs ../shared/corpus/simpleperf (run by .ci/run with --ignored)"]
fn unformatted_trbe_recording() {
    let f = corpus("perf_with_unformatted_trace.data");
    let rec = Recording::parse(f.bytes()).unwrap();
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert_eq!(rec.attrs().len(), 1);
    assert_eq!((rec.attrs()[0].kind, rec.attrs()[0].config), (8, 0x8000));
    assert_eq!(rec.attrs()[0].ids, vec![4, 5]);

    let cs = rec.cs_etm.as_ref().unwrap();
    assert_eq!((cs.version, cs.pmu_type, cs.num_cpus), (1, 8, 2));
    for (i, c) in cs.cpus.iter().enumerate() {
        assert_eq!(c.cpu, i as u32);
        assert_eq!(c.trace_id(), 0x10 + 2 * i as u8);
        // Recorded through TRBE from ETE units: simpleperf writes ETE blocks (8 parameters).
        let TraceUnit::Ete(e) = c.unit else {
            panic!("cpu {i} is not ETE: {:?}", c.unit)
        };
        assert_eq!(e.trcconfigr, 0x8080);
        assert_eq!(e.trcidr0, 0x2880_06a1);
        assert_eq!(e.trcidr1, 0x4100_fff0);
        assert_eq!(e.trcidr2, 0xc000_1088);
        assert_eq!(e.trcauthstatus, 0xcc);
        assert_eq!(e.trcdevarch, Some(0x4771_5a13));
        assert_eq!(c.params.len(), 8);
    }

    assert_eq!(rec.buffers.len(), 1);
    let b = &rec.buffers[0];
    assert_eq!(
        (b.cpu, b.idx, b.aux_offset, b.size, b.data.len()),
        (Some(0), 0, 0, 80, 80)
    );
    assert_eq!(b.data_offset, 18704 + 48);
    assert_eq!(b.format, AuxFormat::Raw);
    assert_eq!(rec.aux_records.len(), 7);
    assert!(rec.aux_records.iter().all(|(_, a)| a.flags.coresight_raw()));

    let build_id = rec.build_id_for(ETM_TEST_LOOP).unwrap();
    assert_eq!(build_id.to_hex(), ETM_TEST_LOOP_BUILD_ID);
    let exec: Vec<_> = rec
        .maps
        .iter()
        .filter(|m| m.filename == ETM_TEST_LOOP && m.executable)
        .collect();
    assert_eq!(exec.len(), 1);
    assert_eq!(
        (exec[0].pid, exec[0].start, exec[0].len, exec[0].pgoff),
        (319, 423_509_962_752, 0x1000, 0x1000)
    );
    assert_eq!(
        exec[0].build_id.map(|b| b.to_hex()).as_deref(),
        Some(ETM_TEST_LOOP_BUILD_ID)
    );
    assert_eq!(rec.maps.len(), 124);
}
