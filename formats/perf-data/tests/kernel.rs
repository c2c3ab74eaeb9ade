//! Kernel code in recordings: a vmlinux given for the `[kernel.kallsyms]_text` map of pid -1
//! (relocated by the KASLR offset the map's page offset gives), read whatever the process;
//! `/proc/kallsyms` text for symbols when there is no image (the code is then missing).

use std::path::PathBuf;
use std::sync::Arc;

use coresight_generator::elf::{Function, write_elf};
use coresight_generator::perf_data::{PerfOptions, PerfRecording, generate_perf_data};
use coresight_perf_data::Recording;
use coresight_perf_data::binaries::{Kallsyms, SymbolSearch};
use coresight_perf_data::decode::{DecodeOptions, RecordingDecoder};
use coresight_perf_data::memory::Model;
use coresight_perf_data::script::{Fields, Itrace, ScriptWriter};

/// The link address of the test's "vmlinux".
const LINK: u64 = 0xffff_8000_0801_0000;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("perf-data-kernel-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn generated(seed: u64) -> PerfRecording {
    generate_perf_data(&PerfOptions {
        seed,
        length: 120,
        elf_path: "/tmp/prog".into(),
        ..Default::default()
    })
    .unwrap()
}

/// The generated program's code as a kernel image linked at [`LINK`], with `_text` there.
fn vmlinux(r: &PerfRecording) -> Vec<u8> {
    let e = &r.elf;
    let text = &e.bytes[e.text_offset as usize..(e.text_offset + e.text_size) as usize];
    let mut fns: Vec<Function> = r.cpus[0]
        .functions
        .iter()
        .map(|f| Function {
            name: f.name.clone(),
            addr: f.addr - e.text_addr + LINK,
            size: f.size,
        })
        .collect();
    fns.push(Function {
        name: "_text".into(),
        addr: LINK,
        size: 0,
    });
    write_elf(LINK, text, &fns, LINK).unwrap().bytes
}

/// perf script lines (`ip,sym,symoff,dso,addr`, branches) of a recording, decoded with `search`.
fn script(rec: &Recording<'_>, search: SymbolSearch) -> (String, Vec<(String, u64, String)>) {
    let model = Arc::new(Model::new(rec, search));
    let mut dec = RecordingDecoder::new(rec, model.clone(), DecodeOptions::default()).unwrap();
    let fields: Fields = "tid,ip,sym,symoff,dso,addr".parse().unwrap();
    let mut sw = ScriptWriter::new(
        &model,
        1,
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

/// The recording with its program's map made the kernel's: pid -1, `[kernel.kallsyms]_text`,
/// at the same (runtime) addresses, its page offset the runtime address of `_text`.
fn as_kernel<'a>(r: &'a PerfRecording) -> Recording<'a> {
    let mut rec = Recording::parse(&r.perf_data).unwrap();
    for m in &mut rec.maps {
        m.pid = -1;
        m.tid = -1;
        m.filename = "[kernel.kallsyms]_text".into();
        m.pgoff = r.elf.text_addr;
        m.build_id = None;
    }
    rec
}

#[test]
fn a_relocated_vmlinux_serves_the_kernel_map_of_every_process() {
    let r = generated(11);
    let dir = scratch("vmlinux");
    std::fs::write(dir.join("prog"), &r.elf.bytes).unwrap();
    let user = Recording::parse(&r.perf_data).unwrap();
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    s.add_symdir(&dir).unwrap();
    let (want, missing) = script(&user, s);
    assert!(missing.is_empty());
    assert!(want.lines().count() > 20, "{want}");
    assert!(want.contains("(/tmp/prog)"));

    // The same trace in "kernel" code: vmlinux linked at LINK, running at the program's
    // addresses (a KASLR offset of text_addr - LINK).
    let path = dir.join("vmlinux");
    std::fs::write(&path, vmlinux(&r)).unwrap();
    let kernel = as_kernel(&r);
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    s.vmlinux = Some(path);
    let (got, missing) = script(&kernel, s);
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(got, want.replace("(/tmp/prog)", "([kernel.kallsyms])"));
}

#[test]
fn without_vmlinux_kernel_code_is_missing_and_kallsyms_names_it() {
    let r = generated(12);
    let kernel = as_kernel(&r);
    let f = &r.cpus[0].functions[0];
    let text = format!(
        "{:016x} t {}\n{:016x} W weak_fn\n{:016x} D some_data\n{:016x} t mod_fn\t[mymod]\nnot a line\n",
        f.addr,
        f.name,
        f.addr + f.size,
        f.addr + 2,
        f.addr + f.size + 0x40,
    );
    let k = Kallsyms::parse(&text).unwrap();
    assert_eq!(k.symbols().len(), 3);
    let mut s = SymbolSearch::new();
    s.recorded_paths = false;
    s.kallsyms = Some(Arc::new(k));
    let (lines, missing) = script(&kernel, s.clone());
    assert_eq!(lines, "");
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0].0, "[kernel.kallsyms]_text");
    assert_eq!(missing[0].2, "not found");

    let model = Model::new(&kernel, s);
    // Any process, the kernel's map.
    for pid in [-1, 7, 123] {
        assert_eq!(
            model.symbolize(pid, f.addr + 4, u64::MAX),
            (Some((f.name.as_str(), 4)), Some("[kernel.kallsyms]"))
        );
    }
    assert_eq!(
        model.symbolize(7, f.addr + f.size + 8, u64::MAX),
        (Some(("weak_fn", 8)), Some("[kernel.kallsyms]"))
    );
    assert_eq!(
        model.symbolize(7, f.addr + f.size + 0x44, u64::MAX),
        (Some(("mod_fn", 4)), Some("[mymod]"))
    );
    // Below the first symbol, and a user address no map holds.
    assert_eq!(model.symbolize(7, r.elf.text_addr - 4, u64::MAX), (None, None));
    // A kernel address outside every map: kallsyms alone, with the kernel's name.
    let high = Kallsyms::parse("ffff800008010000 T start_kernel\nffff800008010100 t rest_init [other]\n").unwrap();
    let mut s = SymbolSearch::new();
    s.kallsyms = Some(Arc::new(high));
    let model = Model::new(&kernel, s);
    assert_eq!(
        model.symbolize(7, 0xffff_8000_0801_0010, 0),
        (Some(("start_kernel", 0x10)), Some("[kernel.kallsyms]"))
    );
    assert_eq!(
        model.symbolize(7, 0xffff_8000_0801_0104, 0),
        (Some(("rest_init", 4)), Some("[other]"))
    );
    // The last symbol ends a page after its own.
    assert_eq!(
        model.symbolize(7, 0xffff_8000_0801_2000, 0),
        (None, Some("[kernel.kallsyms]"))
    );
}

#[test]
fn kallsyms_text_that_hides_addresses_or_has_no_code_is_refused() {
    assert_eq!(
        Kallsyms::parse("0000000000000000 T _text\n0000000000000000 t foo\n").unwrap_err(),
        "2 text symbols, all at address 0 (the kernel hid them: read it as root, or with kptr_restrict 0)"
    );
    assert_eq!(
        Kallsyms::parse("ffff000000000000 D data\nrubbish\n\n").unwrap_err(),
        "no text symbol (lines `ADDRESS TYPE NAME`, types t, T, w or W)"
    );
    // One address, several names: a global one, else the first.
    let k = Kallsyms::parse("1000 t local_a\n1000 T global_b\n1000 T global_c\n2000 t x\n").unwrap();
    let names: Vec<_> = k.symbols().iter().map(|s| (s.name.as_str(), s.start, s.end)).collect();
    assert_eq!(names, [("global_b", 0x1000, 0x2000), ("x", 0x2000, 0x3000)]);
}

/// A relocatable AArch64 module: `.text` (16 bytes: `mod_a`, `mod_b`) and `.init.text`
/// (8 bytes: `mod_init`), both at address 0 as in a `.ko`.
fn module_ko() -> Vec<u8> {
    let text: Vec<u8> = (0u8..16).collect();
    let init: Vec<u8> = (0x80u8..0x88).collect();
    let shstr = b"\0.text\0.init.text\0.symtab\0.strtab\0.shstrtab\0";
    let strtab = b"\0mod_a\0mod_b\0mod_init\0";
    let sym = |name: u32, shndx: u16, value: u64, size: u64| {
        let mut v = Vec::new();
        v.extend_from_slice(&name.to_le_bytes());
        v.push(if name == 0 { 0 } else { 0x12 }); // GLOBAL FUNC
        v.push(0);
        v.extend_from_slice(&shndx.to_le_bytes());
        v.extend_from_slice(&value.to_le_bytes());
        v.extend_from_slice(&size.to_le_bytes());
        v
    };
    let mut symtab = sym(0, 0, 0, 0);
    symtab.extend(sym(1, 1, 0, 8));
    symtab.extend(sym(7, 1, 8, 8));
    symtab.extend(sym(13, 2, 0, 8));
    // Layout: header, .text, .init.text, .symtab, .strtab, .shstrtab, section headers.
    let mut body = vec![0u8; 64];
    let place = |b: &mut Vec<u8>, data: &[u8]| {
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
        let at = b.len() as u64;
        b.extend_from_slice(data);
        at
    };
    let o_text = place(&mut body, &text);
    let o_init = place(&mut body, &init);
    let o_sym = place(&mut body, &symtab);
    let o_str = place(&mut body, strtab);
    let o_shs = place(&mut body, shstr);
    let shoff = place(&mut body, &[]);
    let sh = |name: u32, kind: u32, flags: u64, off: u64, size: u64, link: u32, info: u32, align: u64, ent: u64| {
        let mut v = Vec::new();
        for x in [name, kind] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for x in [flags, 0, off, size] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for x in [link, info] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for x in [align, ent] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    };
    body.extend(sh(0, 0, 0, 0, 0, 0, 0, 0, 0));
    body.extend(sh(1, 1, 6, o_text, 16, 0, 0, 4, 0));
    body.extend(sh(7, 1, 6, o_init, 8, 0, 0, 8, 0));
    body.extend(sh(18, 2, 0, o_sym, symtab.len() as u64, 4, 1, 8, 24));
    body.extend(sh(26, 3, 0, o_str, strtab.len() as u64, 0, 0, 1, 0));
    body.extend(sh(34, 3, 0, o_shs, shstr.len() as u64, 0, 0, 1, 0));
    let mut h = Vec::new();
    h.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    h.extend_from_slice(&1u16.to_le_bytes()); // ET_REL
    h.extend_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&0u64.to_le_bytes()); // entry
    h.extend_from_slice(&0u64.to_le_bytes()); // phoff
    h.extend_from_slice(&shoff.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    for x in [64u16, 0, 0, 64, 6, 5] {
        h.extend_from_slice(&x.to_le_bytes());
    }
    body[..64].copy_from_slice(&h);
    body
}

#[test]
fn a_module_of_the_kernel_serves_every_process_from_its_sections() {
    use coresight_perf_data::elf::ElfImage;
    use coresight_perf_data::{SampleFields, Writer, WriterOptions};
    let dir = scratch("module");
    std::fs::write(dir.join("foo_bar.ko"), module_ko()).unwrap();
    let img = ElfImage::open(&dir.join("foo_bar.ko")).unwrap();
    assert!(img.relocatable);
    let laid: Vec<(u64, u64)> = img.segments.iter().map(|s| (s.vaddr, s.file_size)).collect();
    // The init text is in the init allocation, laid out after the core on a page of its own.
    assert_eq!(laid, [(0, 16), (0x1000, 8)]);
    let syms: Vec<(&str, u64, u64)> = img
        .symbols()
        .iter()
        .map(|s| (s.name.as_str(), s.start, s.end))
        .collect();
    assert_eq!(syms, [("mod_a", 0, 8), ("mod_b", 8, 16), ("mod_init", 0x1000, 0x1008)]);

    const BASE: u64 = 0xffff_8000_7a00_0000;
    for recorded in ["/lib/modules/6.1.0/extra/foo_bar.ko", "[foo_bar]"] {
        let mut w = Writer::new(WriterOptions::default());
        let at = SampleFields {
            pid: u32::MAX,
            tid: u32::MAX,
            time: 1,
            cpu: 0,
        };
        w.mmap2(u32::MAX, u32::MAX, BASE, 0x1000, 0, recorded, None, at);
        let bytes = w.finish();
        let rec = Recording::parse(&bytes).unwrap();
        let mut s = SymbolSearch::new();
        s.recorded_paths = false;
        s.add_symdir(&dir).unwrap();
        let model = Model::new(&rec, s);
        for pid in [-1, 42] {
            let m = model.find_map(pid, BASE + 4, u64::MAX).unwrap();
            assert!(model.is_kernel_map(m));
            let mut buf = [0u8; 32];
            // Not past the end of .text: the init text is elsewhere at run time.
            assert_eq!(model.read(m, BASE + 4, &mut buf), 12);
            assert_eq!(&buf[..12], &(4u8..16).collect::<Vec<_>>()[..]);
            assert_eq!(
                model.symbolize(pid, BASE + 0xc, 0),
                (Some(("mod_b", 4)), Some(recorded))
            );
        }
    }
}
