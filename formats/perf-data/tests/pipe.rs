//! Pipe mode (`perf record -o -`): the generator's pipe form of a recording reads back as the
//! same recording as its file form, and damaged or cut streams give errors or warnings that
//! name offsets, never a panic.

use coresight_generator::BufferLayout;
use coresight_generator::perf_data::{PerfOptions, generate_perf_data};
use coresight_perf_data::{FileHeader, PerfFile, Recording};

fn pair(o: &PerfOptions) -> (Vec<u8>, Vec<u8>) {
    let file = generate_perf_data(o).unwrap().perf_data;
    let pipe = generate_perf_data(&PerfOptions {
        pipe: true,
        ..o.clone()
    })
    .unwrap()
    .perf_data;
    (file, pipe)
}

fn cases() -> Vec<PerfOptions> {
    let base = PerfOptions {
        seed: 9,
        length: 150,
        elf_path: "/tmp/pipe_test_prog".into(),
        ..PerfOptions::default()
    };
    vec![
        base.clone(),
        PerfOptions {
            cpus: 3,
            min_aux_bytes: 300_000,
            ..base.clone()
        },
        PerfOptions {
            layout: BufferLayout::Unformatted,
            cpus: 2,
            ..base.clone()
        },
        PerfOptions {
            per_thread: true,
            ..base.clone()
        },
        PerfOptions {
            untimed: true,
            cpus: 2,
            ..base
        },
    ]
}

#[test]
fn pipe_form_reads_as_the_file_form() {
    for o in cases() {
        let (file, pipe) = pair(&o);
        assert!(FileHeader::parse(&pipe).unwrap().pipe);
        assert!(!FileHeader::parse(&file).unwrap().pipe);
        let f = Recording::parse(&file).unwrap();
        let p = Recording::parse(&pipe).unwrap();
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
        // Attributes: everything but where they are.
        assert_eq!(f.attrs().len(), p.attrs().len());
        for (a, b) in f.attrs().iter().zip(p.attrs()) {
            assert_eq!(
                (
                    a.kind,
                    a.size,
                    a.config,
                    a.sample_type,
                    a.flags,
                    a.aux_watermark,
                    &a.ids
                ),
                (
                    b.kind,
                    b.size,
                    b.config,
                    b.sample_type,
                    b.flags,
                    b.aux_watermark,
                    &b.ids
                )
            );
        }
        assert_eq!(f.cs_etm, p.cs_etm);
        assert_eq!(
            f.auxtrace_info,
            p.auxtrace_info
                .iter()
                .map(|i| {
                    let mut i = i.clone();
                    i.priv_offset = f.auxtrace_info[0].priv_offset;
                    i
                })
                .collect::<Vec<_>>()
        );
        assert!(!p.buffers.is_empty());
        assert_eq!(f.buffers.len(), p.buffers.len());
        for (a, b) in f.buffers.iter().zip(&p.buffers) {
            let (mut a, mut b) = (*a, *b);
            (a.record_offset, a.data_offset, b.record_offset, b.data_offset) = (0, 0, 0, 0);
            assert_eq!(a, b);
        }
        let strip = |v: &[coresight_perf_data::MapEvent]| {
            v.iter()
                .map(|m| coresight_perf_data::MapEvent { offset: 0, ..m.clone() })
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&f.maps), strip(&p.maps));
        let strip_t = |v: &[coresight_perf_data::ThreadEvent]| {
            v.iter()
                .map(|m| coresight_perf_data::ThreadEvent { offset: 0, ..m.clone() })
                .collect::<Vec<_>>()
        };
        assert_eq!(strip_t(&f.thread_events), strip_t(&p.thread_events));
        let ids = |r: &Recording<'_>| {
            r.build_ids
                .iter()
                .map(|b| (b.pid, b.misc, b.build_id, b.filename.clone()))
                .collect::<Vec<_>>()
        };
        assert!(!p.build_ids.is_empty());
        assert_eq!(ids(&f), ids(&p));
        assert_eq!(f.aux_records.len(), p.aux_records.len());
        assert_eq!(f.records, p.records);
        assert_eq!(f.unknown_records, p.unknown_records);
        assert_eq!(f.file.event_desc().unwrap(), p.file.event_desc().unwrap());
        assert_eq!(f.file.cmdline().unwrap(), p.file.cmdline().unwrap());
        assert_eq!(f.file.pmu_mappings().unwrap(), p.file.pmu_mappings().unwrap());
        assert!(p.file.event_desc().unwrap().is_some());
    }
}

/// A small xorshift: damage that is the same on every run.
fn rng(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

#[test]
fn cut_pipe_streams_give_offsets_and_what_came_before() {
    let (_, pipe) = pair(&PerfOptions {
        cpus: 2,
        length: 60,
        elf_path: "/tmp/pipe_test_prog".into(),
        ..PerfOptions::default()
    });
    let whole = Recording::parse(&pipe).unwrap();
    let mut cuts: Vec<usize> = (0..pipe.len().min(4096)).collect();
    cuts.extend((4096..pipe.len()).step_by(97));
    let mut warned = 0;
    for cut in cuts {
        let b = &pipe[..cut];
        match Recording::parse(b) {
            Err(e) => {
                // Only the header (or an attribute record) can be fatal.
                assert!(cut < 16 || e.offset() <= cut as u64, "cut {cut}: {e}");
                assert!(e.to_string().contains("offset"), "cut {cut}: {e}");
            }
            Ok(r) => {
                assert!(r.buffers.len() <= whole.buffers.len());
                for w in &r.warnings {
                    assert!(w.offset <= cut as u64, "cut {cut}: {w}");
                    warned += 1;
                }
                // A stream cut between records reads without complaint; one cut inside a
                // record says where.
                let at_boundary = cut == pipe.len();
                if !at_boundary && r.buffers.len() < whole.buffers.len() && r.warnings.is_empty() {
                    assert!(r.records < whole.records, "cut {cut}");
                }
            }
        }
    }
    assert!(warned > 100);
}

#[test]
fn damaged_pipe_streams_never_panic() {
    let (_, pipe) = pair(&PerfOptions {
        cpus: 2,
        length: 60,
        elf_path: "/tmp/pipe_test_prog".into(),
        ..PerfOptions::default()
    });
    let mut next = rng(0x9e37_79b9_7f4a_7c15);
    // Damage the first few kilobytes (the header records and the first records) most.
    let head = pipe.len().min(3000);
    for round in 0..3000 {
        let mut b = pipe.clone();
        let n = 1 + (next() % 8) as usize;
        for _ in 0..n {
            let at = if round % 2 == 0 {
                next() as usize % head
            } else {
                next() as usize % b.len()
            };
            b[at] = next() as u8;
        }
        if round % 5 == 0 {
            b.truncate(next() as usize % b.len());
        }
        match Recording::parse(&b) {
            Err(e) => assert!(e.offset() <= b.len() as u64, "{e}"),
            Ok(r) => {
                for w in &r.warnings {
                    assert!(w.offset <= b.len() as u64 + 64, "{w}");
                }
                let _ = PerfFile::parse(&b).map(|f| (f.build_ids(), f.event_desc(), f.cmdline()));
            }
        }
    }
}

/// A reader that gives at most `step` bytes a call, as a pipe does.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.step).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn segments(bytes: &[u8], step: usize) -> (Vec<(coresight_perf_data::AuxBuffer<'static>, Vec<u8>)>, Vec<String>) {
    use coresight_perf_data::stream::{Opened, open_stream};
    let Opened::Pipe(mut s) = open_stream(Trickle { data: bytes, step }).unwrap() else {
        panic!("not pipe mode");
    };
    let mut out = Vec::new();
    while let Some(seg) = s.next_segment() {
        let seg = seg.unwrap();
        let mut rec = Recording::parse(&seg.bytes).unwrap();
        seg.to_stream_offsets(&mut rec);
        assert_eq!(rec.buffers.len(), 1);
        let b = rec.buffers[0];
        out.push((coresight_perf_data::AuxBuffer { data: &[], ..b }, b.data.to_vec()));
    }
    (out, s.warnings.iter().map(|w| w.to_string()).collect())
}

#[test]
fn streamed_segments_are_the_buffers_one_at_a_time() {
    for o in cases() {
        let (_, pipe) = pair(&o);
        let whole = Recording::parse(&pipe).unwrap();
        for step in [1, 7, 4096, usize::MAX] {
            if step == 1 && pipe.len() > 200_000 {
                continue;
            }
            let (segs, warnings) = segments(&pipe, step);
            assert!(warnings.is_empty(), "{warnings:?}");
            assert_eq!(segs.len(), whole.buffers.len());
            for ((b, data), w) in segs.iter().zip(&whole.buffers) {
                // Offsets are the stream's; the format comes from the AUX records so far.
                assert_eq!(*b, coresight_perf_data::AuxBuffer { data: &[], ..*w });
                assert_eq!(data.as_slice(), w.data);
            }
        }
    }
    // A file-mode recording on a stream is read whole.
    let (file, _) = pair(&cases()[0]);
    let opened = coresight_perf_data::stream::open_stream(Trickle { data: &file, step: 5 }).unwrap();
    assert!(matches!(opened, coresight_perf_data::stream::Opened::File(ref b) if *b == file));
}

#[test]
fn cut_and_damaged_streams_never_panic() {
    use coresight_perf_data::stream::{Opened, open_stream};
    let (_, pipe) = pair(&PerfOptions {
        cpus: 2,
        length: 60,
        elf_path: "/tmp/pipe_test_prog".into(),
        ..PerfOptions::default()
    });
    let n_buffers = Recording::parse(&pipe).unwrap().buffers.len();
    let mut next = rng(7);
    for round in 0..1500 {
        let mut b = pipe.clone();
        if round % 2 == 0 {
            b.truncate(next() as usize % (b.len() + 1));
        } else {
            for _ in 0..1 + next() % 6 {
                let at = next() as usize % b.len().min(2500);
                b[at] = next() as u8;
            }
        }
        let opened = match open_stream(Trickle {
            data: &b,
            step: 1 + next() as usize % 5000,
        }) {
            Err(e) => {
                assert!(e.offset() <= 16, "{e}");
                continue;
            }
            Ok(o) => o,
        };
        let Opened::Pipe(mut s) = opened else { continue };
        let mut got = 0;
        while let Some(seg) = s.next_segment() {
            match seg {
                Ok(seg) => {
                    got += 1;
                    if let Ok(mut r) = Recording::parse(&seg.bytes) {
                        seg.to_stream_offsets(&mut r);
                        for w in &r.warnings {
                            assert!(w.offset <= b.len() as u64 + 64, "{w}");
                        }
                    }
                }
                Err(e) => {
                    assert!(e.offset() <= b.len() as u64, "{e}");
                    break;
                }
            }
        }
        for w in &s.warnings {
            assert!(w.offset <= b.len() as u64, "{w}");
        }
        if round % 2 == 0 {
            assert!(got <= n_buffers);
            if b.len() < pipe.len() && got < n_buffers {
                // Cut: said where, unless the cut fell between records.
                assert!(s.warnings.len() <= 1);
            }
        }
    }
}
