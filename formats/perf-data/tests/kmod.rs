//! Loadable kernel modules (relocatable ELF files) laid out as the kernel's module loader lays
//! them out: real AArch64 objects made by `tests/fixtures/kmod/make.sh`, and trace generated
//! through a module written by the generator.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coresight_generator::perf_data::{
    MODULE_BASE, PerfOptions, PerfRecording, PerfSpace, check_perf_data, generate_perf_data,
};
use coresight_perf_data::Recording;
use coresight_perf_data::autofdo::{AutoFdoProfile, add_recording};
use coresight_perf_data::binaries::{Kallsyms, KcoreDir, SymbolSearch};
use coresight_perf_data::decode::{DecodeOptions, RecordingDecoder};
use coresight_perf_data::elf::ElfImage;
use coresight_perf_data::memory::Model;
use coresight_perf_data::script::{Fields, Itrace, ScriptWriter};
use coresight_perf_data::{SampleFields, Writer, WriterOptions};

fn fixture(name: &str) -> ElfImage {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kmod")
        .join(name);
    ElfImage::open(&p).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("perf-data-kmod-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// (name, address, size) of each laid-out section.
type Sections<'a> = Vec<(&'a str, u64, u64)>;

/// The laid-out sections, and (name, start) of the functions.
fn layout(img: &ElfImage) -> (Sections<'_>, Vec<(&str, u64)>) {
    let secs = img
        .module_sections
        .iter()
        .map(|s| (s.name.as_str(), s.addr, s.size))
        .collect();
    let syms = img.symbols().iter().map(|s| (s.name.as_str(), s.start)).collect();
    (secs, syms)
}

#[test]
fn a_module_object_is_laid_out_as_the_loader_lays_it_out() {
    // Hand-checked against `sections.txt` (readelf -S of the objects). kmod_demo.o's core
    // text, in section order: .text (empty, align 1) at 0; .plt (NOBITS 0x28, align 16) at 0;
    // .text.ftrace_trampoline (NOBITS 0xc, align 8) at 0x28; .text.kmod_helper (0x1c, align
    // 16) at 0x40; .text.kmod_work (0x6c, align 64) at 0x80; .exit.text (0xc, align 16) at
    // 0xf0. Read-only on the next page: .rodata (0x20) at 0x1000, .eh_frame (align 8) at
    // 0x1020; .data..ro_after_init on the next; .data, .bss on the next; then the init
    // allocation: .init.text at 0x4000.
    let img = fixture("kmod_demo.o");
    assert!(img.relocatable);
    let (secs, syms) = layout(&img);
    assert_eq!(
        secs,
        [
            (".text", 0, 0),
            (".plt", 0, 0x28),
            (".text.ftrace_trampoline", 0x28, 0xc),
            (".text.kmod_helper", 0x40, 0x1c),
            (".text.kmod_work", 0x80, 0x6c),
            (".exit.text", 0xf0, 0xc),
            (".rodata", 0x1000, 0x20),
            (".eh_frame", 0x1020, 0x70),
            (".data..ro_after_init", 0x2000, 4),
            (".data", 0x3000, 4),
            (".bss", 0x3004, 0),
            (".init.text", 0x4000, 8),
        ]
    );
    assert_eq!(
        syms,
        [
            ("kmod_helper", 0x40),
            ("kmod_work", 0x80),
            ("kmod_exit", 0xf0),
            ("kmod_init", 0x4000)
        ]
    );
    // The code at a function's address is its section's bytes in the file.
    let mut got = [0u8; 0x1c];
    assert_eq!(img.read_vaddr(0x40, &mut got), 0x1c);
    assert_eq!(&got[..], &img.bytes()[0x50..0x50 + 0x1c]);
    // The NOBITS text has no bytes to give.
    assert_eq!(img.read_vaddr(0x10, &mut got), 0);
    assert_eq!(img.module_text().map(|s| s.name.as_str()), Some(".text.kmod_helper"));

    // kmod_small.o: .plt (0x18, align 8) at 0, .text.ftrace_trampoline (0xc, align 4) at
    // 0x18, the functions at their 32-byte alignment: 0x40 and 0x60.
    let img = fixture("kmod_small.o");
    let (secs, syms) = layout(&img);
    assert_eq!(
        secs,
        [
            (".text", 0, 0),
            (".plt", 0, 0x18),
            (".text.ftrace_trampoline", 0x18, 0xc),
            (".text.small_one", 0x40, 8),
            (".text.small_two", 0x60, 0x18),
            (".rodata", 0x1000, 0xb),
            (".eh_frame", 0x1010, 0x48),
            (".data", 0x2000, 0),
            (".bss", 0x2000, 0),
        ]
    );
    assert_eq!(syms, [("small_one", 0x40), ("small_two", 0x60)]);
}

/// A recording holding one map of the kernel (pid -1) for `path` at `start`, and simpleperf's
/// (min_vaddr, memory offset) for it if given.
fn module_recording(path: &str, start: u64, anchor: Option<(u64, u64)>) -> Vec<u8> {
    let mut w = Writer::new(WriterOptions::default());
    let at = SampleFields {
        pid: u32::MAX,
        tid: u32::MAX,
        time: 1,
        cpu: 0,
    };
    w.mmap2(u32::MAX, u32::MAX, start, 0x1000, 0, path, None, at);
    if let Some((min_vaddr, off)) = anchor {
        w.simpleperf_module(path, min_vaddr, off);
    }
    w.finish()
}

#[test]
fn a_module_map_names_the_functions_where_the_loader_put_them() {
    const BASE: u64 = 0xffff_8000_7b00_0000;
    let dir = scratch("fixture");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kmod/kmod_demo.o");
    std::fs::copy(src, dir.join("kmod_demo.ko")).unwrap();
    let search = || {
        let mut s = SymbolSearch::new();
        s.recorded_paths = false;
        s.add_symdir(&dir).unwrap();
        s
    };
    // As the file's sizes say.
    let bytes = module_recording("[kmod_demo]", BASE, None);
    let rec = Recording::parse(&bytes).unwrap();
    let model = Model::new(&rec, search());
    assert_eq!(
        model.symbolize(-1, BASE + 0x84, 0),
        (Some(("kmod_work", 4)), Some("[kmod_demo]"))
    );
    assert_eq!(
        model.symbolize(9, BASE + 0x48, 0),
        (Some(("kmod_helper", 8)), Some("[kmod_demo]"))
    );
    // simpleperf says the loader grew .plt: the text (kmod_helper's section, the first one
    // with code: its addresses are the "file" ones) was 0x100 bytes in, not 0x40; everything
    // follows it. Said of its start, or of a point 8 bytes in.
    for (min_vaddr, offset) in [(0, 0x100), (8, 0x108)] {
        let bytes = module_recording("[kmod_demo]", BASE, Some((min_vaddr, offset)));
        let rec = Recording::parse(&bytes).unwrap();
        let files = rec.file.simpleperf_files().unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(
            (files[0].min_vaddr, files[0].memory_offset_of_min_vaddr),
            (min_vaddr, Some(offset))
        );
        let model = Model::new(&rec, search());
        assert_eq!(
            model.symbolize(-1, BASE + 0x100 + 0x40 + 4, 0),
            (Some(("kmod_work", 4)), Some("[kmod_demo]"))
        );
    }
    let bytes = module_recording("[kmod_demo]", BASE, Some((0, 0x100)));
    let rec = Recording::parse(&bytes).unwrap();
    let model = Model::new(&rec, search());
    let m = model.find_map(-1, BASE + 0x100, 0).unwrap();
    let mut code = [0u8; 8];
    assert_eq!(model.read(m, BASE + 0x100, &mut code), 8);
    assert_eq!(&code[..], &std::fs::read(dir.join("kmod_demo.ko")).unwrap()[0x50..0x58]);

    // perf records no such offset, but kallsyms (its --kcore copy) has the functions where
    // they ran: kmod_helper 0xc0 bytes in, kmod_work 0x40 after it as in the file.
    let text = format!(
        "{:016x} t kmod_helper\t[kmod_demo]\n{:016x} T kmod_work\t[kmod_demo]\n{:016x} T other\t[other_mod]\n",
        BASE + 0xc0,
        BASE + 0x100,
        BASE + 0x40,
    );
    for recorded in ["[kmod_demo]", "/lib/modules/6.1/extra/kmod-demo.ko"] {
        if recorded.ends_with(".ko") {
            std::fs::copy(dir.join("kmod_demo.ko"), dir.join("kmod-demo.ko")).unwrap();
        }
        let bytes = module_recording(recorded, BASE, None);
        let rec = Recording::parse(&bytes).unwrap();
        let mut s = search();
        s.kallsyms = Some(Arc::new(Kallsyms::parse(&text).unwrap()));
        let model = Model::new(&rec, s);
        assert_eq!(
            model.symbolize(-1, BASE + 0x104, 0),
            (Some(("kmod_work", 4)), Some(recorded)),
            "{recorded}"
        );
        let m = model.find_map(-1, BASE + 0xc0, 0).unwrap();
        assert_eq!(model.read(m, BASE + 0xc0, &mut code), 8);
        assert_eq!(&code[..], &std::fs::read(dir.join("kmod_demo.ko")).unwrap()[0x50..0x58]);
    }
}

/// perf script lines (`ip,sym,symoff,dso,addr`, branches) of a recording, decoded with
/// `model`.
fn script(rec: &Recording<'_>, model: Model) -> (String, Vec<(String, u64, String)>) {
    let model = Arc::new(model);
    let mut dec = RecordingDecoder::new(rec, model.clone(), DecodeOptions::default()).unwrap();
    let fields: Fields = "tid,ip,sym,symoff,dso,addr".parse().unwrap();
    let mut sw = ScriptWriter::new(
        &model,
        dec.cpus().len(),
        Vec::new(),
        "b".parse::<Itrace>().unwrap(),
        fields,
        "",
        &[],
        None,
    );
    dec.run(&mut |ev| sw.event(&ev).unwrap());
    (String::from_utf8(sw.into_inner()).unwrap(), dec.missing_binaries())
}

/// The generated program's code as a module, laid out as trc_gen's kernel modules are (see
/// `coresight_generator::perf_data::module_of`: the code in `.text.kgen`, at 0x40 of the
/// module), its functions named as in the program.
fn module_of(r: &PerfRecording) -> Vec<u8> {
    let e = &r.elf;
    let text = &e.bytes[e.text_offset as usize..(e.text_offset + e.text_size) as usize];
    coresight_generator::perf_data::module_of(text, &r.cpus[0].functions, e.text_addr)
        .unwrap()
        .bytes
}

#[test]
fn generated_trace_through_a_module_decodes_to_the_users_lines() {
    let r = generate_perf_data(&PerfOptions {
        seed: 21,
        length: 120,
        elf_path: "/tmp/prog".into(),
        ..Default::default()
    })
    .unwrap();
    let dir = scratch("generated");
    std::fs::write(dir.join("prog"), &r.elf.bytes).unwrap();
    std::fs::write(dir.join("kgen.ko"), module_of(&r)).unwrap();
    let search = || {
        let mut s = SymbolSearch::new();
        s.recorded_paths = false;
        s.add_symdir(&dir).unwrap();
        s
    };
    let user = Recording::parse(&r.perf_data).unwrap();
    let (want, missing) = script(&user, Model::new(&user, search()));
    assert!(missing.is_empty());
    assert!(want.lines().count() > 20, "{want}");

    // The same code run from the module: the kernel's map of it starts 0x40 before the code.
    for name in ["/lib/modules/6.1.0/extra/kgen.ko", "[kgen]"] {
        let mut rec = Recording::parse(&r.perf_data).unwrap();
        for m in &mut rec.maps {
            m.pid = -1;
            m.tid = -1;
            m.filename = name.into();
            m.start = r.elf.text_addr - 0x40;
            m.len += 0x40;
            m.pgoff = 0;
            m.build_id = None;
        }
        let (got, missing) = script(&rec, Model::new(&rec, search()));
        assert!(missing.is_empty(), "{missing:?}");
        assert_eq!(got, want.replace("(/tmp/prog)", &format!("({name})")));

        // AutoFDO: the module named, the user profile's counts at the module's addresses
        // (the code at 0x40 of the module rather than at the executable's first address).
        let mut p = AutoFdoProfile::new(None);
        let report = add_recording(&rec, search(), DecodeOptions::default(), &mut p, &mut |_| {}).unwrap();
        assert!(report.missing.is_empty());
        let keys: Vec<&str> = p.binaries.keys().map(|k| k.path.as_str()).collect();
        assert_eq!(keys, [name]);
        let got = p.binaries.values().next().unwrap();
        // Written in `.text.kgen`'s own addresses, as simpleperf counts a module's.
        assert_eq!(got.first_load_vaddr, 0x40);
        let mut u = AutoFdoProfile::new(None);
        add_recording(&user, search(), DecodeOptions::default(), &mut u, &mut |_| {}).unwrap();
        let user_bin = u.binaries.values().next().unwrap();
        // The executable's ranges are at its virtual addresses, its code at text_addr.
        let shift = |a: u64| a - r.elf.text_addr + 0x40;
        let moved: HashMap<(u64, u64), u64> = user_bin
            .ranges
            .iter()
            .map(|(&(s, e), &n)| ((shift(s), shift(e)), n))
            .collect();
        assert!(!moved.is_empty());
        assert_eq!(got.ranges, moved);
        let moved: HashMap<(u64, u64), u64> =
            // A branch whose target the trace does not give goes to 0, in both.
            user_bin.branches.iter().map(|(&(s, e), &n)| ((shift(s), if e == 0 { 0 } else { shift(e) }), n)).collect();
        assert_eq!(got.branches, moved);
    }
}

/// The generator's recording of `space`, its files written to a fresh folder: the kernel
/// image or module memory as `prog`, the module under its recorded name, and `kcore_dir`.
fn kernel_recording(space: PerfSpace, seed: u64, name: &str) -> (PerfRecording, PathBuf) {
    let r = generate_perf_data(&PerfOptions {
        seed,
        length: 150,
        cpus: 2,
        elf_path: "/lib/modules/6.1.0/extra/kgen.ko".into(),
        space,
        ..Default::default()
    })
    .unwrap();
    let dir = scratch(name);
    let k = r.kernel.as_ref().unwrap();
    let kd = dir.join("kcore_dir");
    std::fs::create_dir_all(&kd).unwrap();
    std::fs::write(kd.join("kcore"), &k.kcore).unwrap();
    std::fs::write(kd.join("kallsyms"), &k.kallsyms).unwrap();
    std::fs::write(kd.join("modules"), &k.modules).unwrap();
    (r, dir)
}

/// How many script lines (branches) were written.
fn decoded_pairs(lines: &str) -> usize {
    lines.lines().filter(|l| !l.trim().is_empty()).count()
}

#[test]
fn kernel_trace_decodes_through_vmlinux_and_through_kcore_alike() {
    let (r, dir) = kernel_recording(PerfSpace::Kernel, 41, "kcore-kernel");
    check_perf_data(&r).unwrap();
    let rec = Recording::parse(&r.perf_data).unwrap();
    let vmlinux = dir.join("vmlinux");
    std::fs::write(&vmlinux, &r.elf.bytes).unwrap();
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    s.vmlinux = Some(vmlinux);
    let (want, missing) = script(&rec, Model::new(&rec, s));
    assert!(missing.is_empty(), "{missing:?}");
    assert!(decoded_pairs(&want) > 40, "{want}");
    assert!(want.contains("([kernel.kallsyms])"));
    assert!(want.contains(" cpu0_") && want.contains(" cpu1_"), "{want}");

    // No image: kcore's code, kallsyms' names.
    let kd = KcoreDir::open(&dir.join("kcore_dir")).unwrap();
    assert!(kd.modules.is_empty());
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    s.use_kcore(&kd);
    let (got, missing) = script(&rec, Model::new(&rec, s));
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(got, want);

    // Without either, the code is missing.
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    let (none, missing) = script(&rec, Model::new(&rec, s));
    assert_eq!(none, "");
    assert_eq!(missing.len(), 1);
}

#[test]
fn module_trace_decodes_through_its_file_and_through_kcore() {
    let (r, dir) = kernel_recording(PerfSpace::Module, 43, "kcore-module");
    check_perf_data(&r).unwrap();
    let k = r.kernel.as_ref().unwrap();
    let m = k.module.as_ref().unwrap();
    let symdir = dir.join("sym");
    std::fs::create_dir_all(&symdir).unwrap();
    std::fs::write(symdir.join("kgen.ko"), &m.bytes).unwrap();
    let rec = Recording::parse(&r.perf_data).unwrap();
    let search = || {
        let mut s = SymbolSearch::new();
        s.recorded_paths = false;
        s.add_symdir(&symdir).unwrap();
        s
    };
    // The module's file: its layout puts the code where it ran.
    let (want, missing) = script(&rec, Model::new(&rec, search()));
    assert!(missing.is_empty(), "{missing:?}");
    assert!(decoded_pairs(&want) > 40, "{want}");
    assert!(want.contains("(/lib/modules/6.1.0/extra/kgen.ko)"));
    assert!(want.contains(" cpu0_") && want.contains(" cpu1_"), "{want}");

    // kcore's code with the module's symbols: the same.
    let kd = KcoreDir::open(&dir.join("kcore_dir")).unwrap();
    assert_eq!(kd.modules.len(), 1);
    assert_eq!(
        (kd.modules[0].name.as_str(), kd.modules[0].start),
        ("kgen", MODULE_BASE)
    );
    let mut s = search();
    s.use_kcore(&kd);
    let (got, missing) = script(&rec, Model::new(&rec, s));
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(got, want);

    // kcore alone: kallsyms names the functions and the module.
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    s.use_kcore(&kd);
    let (got, missing) = script(&rec, Model::new(&rec, s));
    assert!(missing.is_empty(), "kcore gave the code: {missing:?}");
    assert_eq!(got, want.replace("(/lib/modules/6.1.0/extra/kgen.ko)", "([kgen])"));
}

#[test]
fn damaged_module_files_do_not_panic() {
    // Every truncation, and a byte changed at each place, of a real module object: parsing,
    // laying out, reading and looking up either works or fails with an error.
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kmod/kmod_demo.o");
    let bytes = std::fs::read(p).unwrap();
    let probe = |b: Vec<u8>| {
        if let Ok(img) = ElfImage::from_bytes(Path::new("damaged.ko"), b) {
            let mut buf = [0u8; 16];
            for a in [0u64, 0x40, 0x80, 0x1000, 0x4000, u64::MAX - 4] {
                let _ = img.read_vaddr(a, &mut buf);
                let _ = img.symbol_at(a);
            }
            let _ = img.first_load_vaddr();
            let _ = img.module_base();
        }
    };
    for n in 0..bytes.len() {
        probe(bytes[..n].to_vec());
    }
    for i in 0..bytes.len() {
        for x in [0u8, 0xff, 0x80] {
            let mut b = bytes.clone();
            b[i] = x;
            probe(b);
        }
    }
}

#[test]
fn perfs_directory_output_opens_and_its_kcore_dir_is_found() {
    let (r, dir) = kernel_recording(PerfSpace::Kernel, 47, "directory");
    // As `perf record --kcore -o DIR` leaves it: DIR/data and DIR/kcore_dir.
    std::fs::write(dir.join("data"), &r.perf_data).unwrap();
    let f = coresight_perf_data::MappedFile::open(&dir).unwrap();
    assert_eq!(f.bytes(), &r.perf_data[..]);
    assert_eq!(KcoreDir::beside(&dir), Some(dir.join("kcore_dir")));
    assert_eq!(KcoreDir::beside(&dir.join("data")), Some(dir.join("kcore_dir")));
    // trc_gen's layout: FILE and FILE.kcore_dir.
    let flat = scratch("flat");
    std::fs::write(flat.join("k.data"), &r.perf_data).unwrap();
    assert_eq!(KcoreDir::beside(&flat.join("k.data")), None);
    std::fs::rename(dir.join("kcore_dir"), flat.join("k.data.kcore_dir")).unwrap();
    assert_eq!(
        KcoreDir::beside(&flat.join("k.data")),
        Some(flat.join("k.data.kcore_dir"))
    );
    // A directory without data: the error names what was looked for.
    let empty = scratch("empty");
    let e = coresight_perf_data::MappedFile::open(&empty).unwrap_err().to_string();
    assert!(e.contains(&empty.join("data").display().to_string()), "{e}");
    // A kcore folder without kcore, or with a kcore that is no ELF file.
    let e = KcoreDir::open(&empty).unwrap_err();
    assert!(e.contains(&empty.join("kcore").display().to_string()), "{e}");
    std::fs::write(empty.join("kcore"), b"not an ELF file").unwrap();
    let e = KcoreDir::open(&empty).unwrap_err();
    assert!(e.contains("kcore") && e.contains("ELF"), "{e}");
}
