//! The generator's output stays what it was: digests of snapshots and truths made by the
//! in-memory API (before generation was streamed), and the streamed snapshot writer gives the
//! same files as the in-memory one.

use coresight_generator::etmv4::{self, Choice, Etmv4Options};
use coresight_generator::perf_data::{PerfOptions, PerfProtocol, generate_perf_data};
use coresight_generator::{BufferLayout, GenOptions, GenProtocol, Generated, generate};

/// FNV-1a, 64 bits: a digest stable across Rust releases.
fn fnv(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Digest of everything a snapshot holds and its truth text.
fn digest(g: &Generated) -> u64 {
    let s = &g.spec;
    let mut h = fnv(FNV_OFFSET, s.description.as_bytes());
    for d in &s.devices {
        h = fnv(
            h,
            format!("{}/{}/{}/{:?}", d.name, d.class, d.device_type, d.regs).as_bytes(),
        );
        for m in &d.dumps {
            h = fnv(h, format!("{}/{:x}/{}", m.file, m.address, m.space).as_bytes());
            h = fnv(h, &m.data);
        }
    }
    for b in &s.buffers {
        h = fnv(h, format!("{}/{}/{}", b.name, b.file, b.format).as_bytes());
        h = fnv(h, &b.data);
    }
    h = fnv(
        h,
        format!("{:?}{:?}", s.source_buffers, s.core_trace_sources).as_bytes(),
    );
    fnv(h, g.truth_text().as_bytes())
}

/// The cases pinned: (name, options, ETMv4 options).
fn cases() -> Vec<(String, GenOptions, Etmv4Options)> {
    let mut v = Vec::new();
    let all = Etmv4Options::all(Choice::On);
    for (pname, protocol) in [
        ("etmv4", GenProtocol::Etmv4),
        ("etmv4m", GenProtocol::Etmv4M),
        ("ete", GenProtocol::from_name("ete").unwrap()),
        ("ptm", GenProtocol::from_name("ptm").unwrap()),
        ("etmv3", GenProtocol::from_name("etmv3").unwrap()),
        ("stm", GenProtocol::Stm),
        ("itm", GenProtocol::Itm),
        ("tc2", GenProtocol::Tc2),
    ] {
        for seed in [1u64, 7, 23] {
            for (lname, layout) in [("f", BufferLayout::Formatted), ("u", BufferLayout::Unformatted)] {
                if protocol == GenProtocol::Tc2 && layout == BufferLayout::Unformatted {
                    continue;
                }
                let o = GenOptions {
                    seed,
                    protocol,
                    layout,
                    length: 300,
                };
                v.push((format!("{pname} {seed} {lname}"), o, Etmv4Options::default()));
                if matches!(protocol, GenProtocol::Etmv4 | GenProtocol::Etmv4M) {
                    v.push((format!("{pname} {seed} {lname} all"), o, all));
                }
            }
        }
    }
    let mut ete = GenProtocol::from_name("ete").unwrap();
    ete.set_option("all", "1").unwrap();
    ete.set_option("sessions", "3").unwrap();
    v.push((
        "ete all sessions=3".into(),
        GenOptions {
            seed: 5,
            protocol: ete,
            layout: BufferLayout::Formatted,
            length: 400,
        },
        Etmv4Options::default(),
    ));
    v
}

fn generated(o: &GenOptions, e: &Etmv4Options) -> Generated {
    match o.protocol {
        GenProtocol::Etmv4 | GenProtocol::Etmv4M => etmv4::generate_with(o, e),
        _ => generate(o),
    }
}

/// Digests of the output of the in-memory API before generation was streamed (and for
/// perf.data, of two recordings and their truths).
const DIGESTS: &[(&str, u64)] = &[
    ("etmv4 1 f", 0x0c95058c5640a696),
    ("etmv4 1 f all", 0x83cd9420868e06b5),
    ("etmv4 1 u", 0x3950bdc6b6ae69ac),
    ("etmv4 1 u all", 0xc1058078acb1e9e0),
    ("etmv4 7 f", 0x7b20f097aa42285b),
    ("etmv4 7 f all", 0x376a000a71d96f88),
    ("etmv4 7 u", 0x95697c393e3fed13),
    ("etmv4 7 u all", 0x37e083a3b9348ec5),
    ("etmv4 23 f", 0xf652fdc6ae41fe80),
    ("etmv4 23 f all", 0x0026e250076d12b3),
    ("etmv4 23 u", 0x05c666d04a1cc20e),
    ("etmv4 23 u all", 0x94bcbf8f6a4b3c62),
    ("etmv4m 1 f", 0x3b760206730a30ae),
    ("etmv4m 1 f all", 0xa4a54e4282a01253),
    ("etmv4m 1 u", 0x4f8ec9ca09a2c19f),
    ("etmv4m 1 u all", 0xf74d01a2d7087ff9),
    ("etmv4m 7 f", 0x274363fa97e3ca45),
    ("etmv4m 7 f all", 0xe3c81f0a94849d26),
    ("etmv4m 7 u", 0x3e7471aee42d51cb),
    ("etmv4m 7 u all", 0xd12c57bc261a23be),
    ("etmv4m 23 f", 0x1b068e3d7d83c341),
    ("etmv4m 23 f all", 0x34ecca5dd06fef49),
    ("etmv4m 23 u", 0x9b9126a6af44e099),
    ("etmv4m 23 u all", 0xe2b21c46563d8643),
    ("ete 1 f", 0x741d4dda6290bcd3),
    ("ete 1 u", 0x9cd457a74cc766cc),
    ("ete 7 f", 0x3d1d20a03412fa7d),
    ("ete 7 u", 0x353c524b335b24b8),
    ("ete 23 f", 0x573234252bfbe1a6),
    ("ete 23 u", 0xa87061d851cc7491),
    ("ptm 1 f", 0x5cef7f29c1de1c9d),
    ("ptm 1 u", 0x9bf288ccfbb0a7f6),
    ("ptm 7 f", 0x214fd35abda08280),
    ("ptm 7 u", 0xfc427af74e45b9fc),
    ("ptm 23 f", 0xf8e7633f1f09f15a),
    ("ptm 23 u", 0xeea55add3711c8e0),
    ("etmv3 1 f", 0x697f6d4d82e05442),
    ("etmv3 1 u", 0x23c5477870da3111),
    ("etmv3 7 f", 0xa2707398f3c1b4f8),
    ("etmv3 7 u", 0x849e94f8c2855cd8),
    ("etmv3 23 f", 0x6e5dfd5f6ffb3858),
    ("etmv3 23 u", 0x1e52c70f412bcfb0),
    ("stm 1 f", 0x2bf5dee24c140d31),
    ("stm 1 u", 0x6ff0d001cc04008f),
    ("stm 7 f", 0x84fcbde80b3a40cf),
    ("stm 7 u", 0x071ca4588091e64a),
    ("stm 23 f", 0x5bb60bca8a2ab2e2),
    ("stm 23 u", 0xdacedbcc2169e972),
    ("itm 1 f", 0xa28489de99ab991e),
    ("itm 1 u", 0x3967d2a1283712dc),
    ("itm 7 f", 0x09e585eaf2722a11),
    ("itm 7 u", 0x443bc7c399514e37),
    ("itm 23 f", 0x942f54716f16dd4c),
    ("itm 23 u", 0xd82d7454b2234739),
    ("tc2 1 f", 0x1d74ae1e8e478996),
    ("tc2 7 f", 0x749b38b690122595),
    ("tc2 23 f", 0x10a9c6fd15e7b777),
    ("ete all sessions=3", 0x7f282e8c3a4b0604),
];
const PERF_DIGEST: u64 = 0xcba06528b81f484a;

#[test]
fn output_is_what_it_was() {
    let mut wrong = Vec::new();
    let cases = cases();
    assert_eq!(cases.len(), DIGESTS.len());
    for ((name, o, e), (want_name, want)) in cases.iter().zip(DIGESTS) {
        assert_eq!(name, want_name);
        let got = digest(&generated(o, e));
        if got != *want {
            wrong.push(format!("{name}: 0x{got:016x}, was 0x{want:016x}"));
        }
    }
    assert!(wrong.is_empty(), "output changed:\n{}", wrong.join("\n"));
    let mut h = FNV_OFFSET;
    for (protocol, layout) in [
        (PerfProtocol::Etmv4, BufferLayout::Formatted),
        (PerfProtocol::Ete, BufferLayout::Unformatted),
    ] {
        let r = generate_perf_data(&PerfOptions {
            seed: 3,
            protocol,
            layout,
            cpus: 2,
            length: 300,
            elf_path: "/tmp/x".into(),
            ..PerfOptions::default()
        })
        .unwrap();
        h = fnv(h, &r.perf_data);
        for c in &r.cpus {
            for t in &c.truth {
                h = fnv(h, format!("{t}\n").as_bytes());
            }
        }
    }
    assert_eq!(h, PERF_DIGEST, "perf.data output changed: 0x{h:016x}");
}

/// A fresh directory under the system's temporary one.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("trc_gen_stream_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Every file of `dir`, by name.
fn files(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn streamed(
    o: &GenOptions,
    e: &Etmv4Options,
    dir: &std::path::Path,
    truth: Option<&mut dyn std::io::Write>,
) -> std::io::Result<coresight_generator::stream::Streamed> {
    match o.protocol {
        GenProtocol::Ete(ete) => coresight_generator::stream::write_ete(o, &ete, dir, truth),
        _ => coresight_generator::stream::write_etmv4(o, e, dir, truth),
    }
}

#[test]
fn streamed_snapshots_are_the_in_memory_ones() {
    let mut cases: Vec<_> = cases()
        .into_iter()
        .filter(|(_, o, _)| matches!(o.protocol, GenProtocol::Etmv4 | GenProtocol::Etmv4M))
        .collect();
    // Long enough to be written in several pieces.
    for (seed, layout) in [(2, BufferLayout::Formatted), (3, BufferLayout::Unformatted)] {
        let o = GenOptions {
            seed,
            protocol: GenProtocol::Etmv4,
            layout,
            length: 60_000,
        };
        cases.push((format!("etmv4 {seed} long"), o, Etmv4Options::all(Choice::On)));
    }
    // ETE: one session or several, starting inside transactions or not.
    for (seed, opt, layout) in [
        (1, "tme", BufferLayout::Formatted),
        (2, "tme", BufferLayout::Unformatted),
        (3, "all", BufferLayout::Formatted),
        (4, "multi", BufferLayout::Formatted),
        (5, "multi", BufferLayout::Unformatted),
        (6, "all", BufferLayout::Unformatted),
    ] {
        for sessions in ["1", "3"] {
            let mut protocol = GenProtocol::from_name("ete").unwrap();
            protocol.set_option(opt, "1").unwrap();
            if opt != "multi" {
                protocol.set_option("tme", "1").unwrap();
                if sessions != "1" {
                    protocol.set_option("sessions", sessions).unwrap();
                }
            }
            let o = GenOptions {
                seed,
                protocol,
                layout,
                length: 3000,
            };
            cases.push((format!("ete {seed} {opt} {sessions}"), o, Etmv4Options::default()));
        }
    }
    cases.extend(
        self::cases()
            .into_iter()
            .filter(|(_, o, _)| matches!(o.protocol, GenProtocol::Ete(_))),
    );
    let (want_dir, got_dir) = (temp_dir("want"), temp_dir("got"));
    for (name, o, e) in &cases {
        let g = generated(o, e);
        g.spec.write_to(&want_dir).unwrap();
        let mut truth = Vec::new();
        let s = streamed(o, e, &got_dir, Some(&mut truth)).unwrap();
        assert!(files(&want_dir) == files(&got_dir), "{name}: the files differ");
        assert!(truth == g.truth_text().as_bytes(), "{name}: the truths differ");
        assert_eq!(s.truth_items, g.truth.len() as u64, "{name}");
        assert_eq!(s.description, g.spec.description, "{name}");
        // Without a truth, the same snapshot.
        std::fs::remove_dir_all(&got_dir).unwrap();
        streamed(o, e, &got_dir, None).unwrap();
        assert!(
            files(&want_dir) == files(&got_dir),
            "{name}: the files differ without a truth"
        );
        std::fs::remove_dir_all(&want_dir).unwrap();
        std::fs::remove_dir_all(&got_dir).unwrap();
    }
}
