//! A minimal AArch64 ELF executable for generated code, so that tools that
//! find code through files (Linux perf, objdump, addr2line) can read it: one
//! `PT_LOAD` segment holding the code, a `.text` section over it, a GNU
//! build-id note, and a `.symtab` naming the generated functions.
//!
//! Layout (offsets in the file):
//!
//! ```text
//! 0x0000  ELF header, program headers (PT_LOAD, PT_NOTE), the build-id note
//! 0x1000  .text: the code, loaded at its address (the file offset and the
//!         address agree modulo the page size, as the loader needs)
//! ...     .symtab, .strtab, .shstrtab, then the section headers
//! ```

/// A named function of the code: `[addr, addr + size)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub addr: u64,
    pub size: u64,
}

/// An ELF image made by [`write_elf`].
#[derive(Clone, Debug)]
pub struct ElfImage {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// The GNU build id (20 bytes).
    pub build_id: [u8; 20],
    /// File offset of the first byte of code (the `PT_LOAD` segment's offset).
    pub text_offset: u64,
    /// Address of the first byte of code.
    pub text_addr: u64,
    /// Bytes of code.
    pub text_size: u64,
}

/// Where the code starts in the file: one page in, after the headers.
pub const TEXT_OFFSET: u64 = 0x1000;
const PAGE: u64 = 0x1000;
const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const SHDR_SIZE: usize = 64;
const SYM_SIZE: usize = 24;
const EM_AARCH64: u16 = 183;
const NT_GNU_BUILD_ID: u32 = 3;

fn u16le(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u32le(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn u64le(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// A 20-byte build id from the content: four FNV-1a-style 64-bit lanes with
/// different seeds, folded. Not a cryptographic hash: it only has to change
/// when the code or its symbols change, as a linker's SHA-1 would.
fn content_id(parts: &[&[u8]]) -> [u8; 20] {
    let mut lanes = [
        0xcbf2_9ce4_8422_2325u64,
        0x9e37_79b9_7f4a_7c15,
        0x2545_f491_4f6c_dd1d,
        0x6c62_272e_07bb_0142,
    ];
    for p in parts {
        for &b in *p {
            for (k, l) in lanes.iter_mut().enumerate() {
                *l ^= u64::from(b) + k as u64;
                *l = l.wrapping_mul(0x0000_0100_0000_01b3 + 2 * k as u64);
            }
        }
        // Part boundaries count: ("ab", "c") differs from ("a", "bc").
        for l in &mut lanes {
            *l = l.rotate_left(29) ^ 0xff;
        }
    }
    let mut out = [0u8; 20];
    let mut all = Vec::with_capacity(32);
    for l in lanes {
        all.extend_from_slice(&l.to_le_bytes());
    }
    out.copy_from_slice(&all[..20]);
    out
}

/// Section header.
#[allow(clippy::too_many_arguments)]
fn shdr(
    v: &mut Vec<u8>,
    name: u32,
    kind: u32,
    flags: u64,
    addr: u64,
    off: u64,
    size: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
) {
    u32le(v, name);
    u32le(v, kind);
    u64le(v, flags);
    u64le(v, addr);
    u64le(v, off);
    u64le(v, size);
    u32le(v, link);
    u32le(v, info);
    u64le(v, align);
    u64le(v, entsize);
}

/// Writes an executable whose code `text` is loaded at `text_addr` (page
/// aligned: the caller lays code out from a page boundary), with `functions`
/// (inside the code) in its symbol table and `entry` as its entry point.
/// Errors if the address is not page aligned or a function lies outside
/// the code.
pub fn write_elf(text_addr: u64, text: &[u8], functions: &[Function], entry: u64) -> Result<ElfImage, String> {
    if !text_addr.is_multiple_of(PAGE) {
        return Err(format!("code address {text_addr:#x} is not page aligned"));
    }
    let text_end = text_addr
        .checked_add(text.len() as u64)
        .ok_or_else(|| format!("code at {text_addr:#x} runs past the end of the address space"))?;
    for f in functions {
        if f.addr < text_addr || f.addr.saturating_add(f.size) > text_end {
            return Err(format!(
                "function {} at {:#x}+{:#x} is outside the code {text_addr:#x}..{text_end:#x}",
                f.name, f.addr, f.size
            ));
        }
    }

    // String tables.
    let mut strtab = vec![0u8];
    let mut name_at = Vec::with_capacity(functions.len());
    for f in functions {
        name_at.push(strtab.len() as u32);
        strtab.extend_from_slice(f.name.as_bytes());
        strtab.push(0);
    }
    let mut shstrtab = vec![0u8];
    let mut sh_name = |s: &str| {
        let at = shstrtab.len() as u32;
        shstrtab.extend_from_slice(s.as_bytes());
        shstrtab.push(0);
        at
    };
    let n_text = sh_name(".text");
    let n_note = sh_name(".note.gnu.build-id");
    let n_symtab = sh_name(".symtab");
    let n_strtab = sh_name(".strtab");
    let n_shstrtab = sh_name(".shstrtab");

    let build_id = content_id(&[&text_addr.to_le_bytes(), text, &strtab]);

    // Symbols: the null symbol, then one global function each, in section 1 (.text).
    let mut symtab = vec![0u8; SYM_SIZE];
    for (f, &name) in functions.iter().zip(&name_at) {
        u32le(&mut symtab, name);
        symtab.push(0x12); // STB_GLOBAL << 4 | STT_FUNC
        symtab.push(0); // STV_DEFAULT
        u16le(&mut symtab, 1);
        u64le(&mut symtab, f.addr);
        u64le(&mut symtab, f.size);
    }

    // The note: namesz, descsz, type, "GNU\0", the id.
    let mut note = Vec::with_capacity(36);
    u32le(&mut note, 4);
    u32le(&mut note, 20);
    u32le(&mut note, NT_GNU_BUILD_ID);
    note.extend_from_slice(b"GNU\0");
    note.extend_from_slice(&build_id);

    let phnum = 2u16;
    let note_off = (EHDR_SIZE + PHDR_SIZE * phnum as usize) as u64;
    let text_off = TEXT_OFFSET;
    let symtab_off = (text_off + text.len() as u64).next_multiple_of(8);
    let strtab_off = symtab_off + symtab.len() as u64;
    let shstrtab_off = strtab_off + strtab.len() as u64;
    let shoff = (shstrtab_off + shstrtab.len() as u64).next_multiple_of(8);
    let shnum = 6u16;

    let mut v = Vec::with_capacity(shoff as usize + SHDR_SIZE * shnum as usize);
    // ELF header.
    v.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    v.extend_from_slice(&[0; 8]);
    u16le(&mut v, 2); // ET_EXEC
    u16le(&mut v, EM_AARCH64);
    u32le(&mut v, 1);
    u64le(&mut v, entry);
    u64le(&mut v, EHDR_SIZE as u64);
    u64le(&mut v, shoff);
    u32le(&mut v, 0);
    u16le(&mut v, EHDR_SIZE as u16);
    u16le(&mut v, PHDR_SIZE as u16);
    u16le(&mut v, phnum);
    u16le(&mut v, SHDR_SIZE as u16);
    u16le(&mut v, shnum);
    u16le(&mut v, shnum - 1); // .shstrtab
    // PT_LOAD: the code, read and execute.
    u32le(&mut v, 1);
    u32le(&mut v, 5);
    u64le(&mut v, text_off);
    u64le(&mut v, text_addr);
    u64le(&mut v, text_addr);
    u64le(&mut v, text.len() as u64);
    u64le(&mut v, text.len() as u64);
    u64le(&mut v, PAGE);
    // PT_NOTE: the build id.
    u32le(&mut v, 4);
    u32le(&mut v, 4);
    u64le(&mut v, note_off);
    u64le(&mut v, 0);
    u64le(&mut v, 0);
    u64le(&mut v, note.len() as u64);
    u64le(&mut v, note.len() as u64);
    u64le(&mut v, 4);
    v.extend_from_slice(&note);
    v.resize(text_off as usize, 0);
    v.extend_from_slice(text);
    v.resize(symtab_off as usize, 0);
    v.extend_from_slice(&symtab);
    v.extend_from_slice(&strtab);
    v.extend_from_slice(&shstrtab);
    v.resize(shoff as usize, 0);
    // Section headers: null, .text, .note.gnu.build-id, .symtab, .strtab, .shstrtab.
    v.extend_from_slice(&[0; SHDR_SIZE]);
    let (alloc, exec) = (0x2u64, 0x4u64);
    shdr(
        &mut v,
        n_text,
        1,
        alloc | exec,
        text_addr,
        text_off,
        text.len() as u64,
        0,
        0,
        4,
        0,
    );
    shdr(&mut v, n_note, 7, 0, 0, note_off, note.len() as u64, 0, 0, 4, 0);
    // sh_info of a symbol table: index of the first global symbol (all but the null one).
    shdr(
        &mut v,
        n_symtab,
        2,
        0,
        0,
        symtab_off,
        symtab.len() as u64,
        4,
        1,
        8,
        SYM_SIZE as u64,
    );
    shdr(&mut v, n_strtab, 3, 0, 0, strtab_off, strtab.len() as u64, 0, 0, 1, 0);
    shdr(
        &mut v,
        n_shstrtab,
        3,
        0,
        0,
        shstrtab_off,
        shstrtab.len() as u64,
        0,
        0,
        1,
        0,
    );
    Ok(ElfImage {
        bytes: v,
        build_id,
        text_offset: text_off,
        text_addr,
        text_size: text.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use goblin::elf::Elf;

    #[test]
    fn goblin_reads_what_is_written() {
        let code: Vec<u8> = (0..64u8).collect();
        let f = vec![
            Function {
                name: "main".into(),
                addr: 0x40_1000,
                size: 32,
            },
            Function {
                name: "helper".into(),
                addr: 0x40_1020,
                size: 32,
            },
        ];
        let img = write_elf(0x40_1000, &code, &f, 0x40_1000).unwrap();
        let elf = Elf::parse(&img.bytes).unwrap();
        assert_eq!(elf.header.e_machine, EM_AARCH64);
        assert_eq!(elf.entry, 0x40_1000);
        let load = elf.program_headers.iter().find(|p| p.p_type == 1).unwrap();
        assert_eq!(
            (load.p_vaddr, load.p_offset, load.p_filesz),
            (0x40_1000, TEXT_OFFSET, 64)
        );
        let names: Vec<(String, u64, u64)> = elf
            .syms
            .iter()
            .skip(1)
            .map(|s| (elf.strtab.get_at(s.st_name).unwrap().to_string(), s.st_value, s.st_size))
            .collect();
        assert_eq!(
            names,
            vec![("main".into(), 0x40_1000, 32), ("helper".into(), 0x40_1020, 32)]
        );
        let notes: Vec<_> = elf.iter_note_headers(&img.bytes).unwrap().map(|n| n.unwrap()).collect();
        assert_eq!(notes[0].n_type, NT_GNU_BUILD_ID);
        assert_eq!(notes[0].desc, &img.build_id);
        let text = &img.bytes[TEXT_OFFSET as usize..TEXT_OFFSET as usize + 64];
        assert_eq!(text, &code[..]);
        assert!(write_elf(0x40_1004, &code, &f, 0).is_err());
        assert!(
            write_elf(
                0x40_1000,
                &code,
                &[Function {
                    name: "x".into(),
                    addr: 0x40_1030,
                    size: 64
                }],
                0
            )
            .is_err()
        );
    }
}

/// A section of a relocatable module written by [`write_module`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModSection {
    pub name: String,
    /// `SHF_EXECINSTR`.
    pub exec: bool,
    /// `SHF_WRITE`.
    pub write: bool,
    /// `sh_addralign` (0 or a power of two).
    pub align: u64,
    /// The section's bytes; `None`: `SHT_NOBITS` of `size` bytes.
    pub bytes: Option<Vec<u8>>,
    /// Size of a `SHT_NOBITS` section (ignored when `bytes` is given).
    pub size: u64,
}

/// A function of a module: `size` bytes at `offset` in section `section` (an index into the
/// sections given to [`write_module`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModFunction {
    pub name: String,
    pub section: usize,
    pub offset: u64,
    pub size: u64,
}

/// A relocatable file made by [`write_module`].
#[derive(Clone, Debug)]
pub struct ModuleImage {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// Its GNU build id (20 bytes).
    pub build_id: [u8; 20],
}

/// Writes an AArch64 relocatable file (`ET_REL`, as a kernel module's `.ko` is): the
/// `sections` in that order (all allocated, at address 0), a GNU build-id note, then a
/// `.symtab` with the `functions`, `.strtab` and `.shstrtab`. Errors if a function lies
/// outside its section.
pub fn write_module(sections: &[ModSection], functions: &[ModFunction]) -> Result<ModuleImage, String> {
    const SHT_PROGBITS: u32 = 1;
    const SHT_SYMTAB: u32 = 2;
    const SHT_STRTAB: u32 = 3;
    const SHT_NOTE: u32 = 7;
    const SHT_NOBITS: u32 = 8;
    const SHF_WRITE: u64 = 1;
    const SHF_ALLOC: u64 = 2;
    const SHF_EXECINSTR: u64 = 4;
    let size_of = |s: &ModSection| s.bytes.as_ref().map_or(s.size, |b| b.len() as u64);
    for f in functions {
        let s = sections
            .get(f.section)
            .ok_or_else(|| format!("function {} is in section {}, of {}", f.name, f.section, sections.len()))?;
        if f.offset.saturating_add(f.size) > size_of(s) {
            return Err(format!(
                "function {} at {:#x}+{:#x} is outside section {} ({:#x} bytes)",
                f.name,
                f.offset,
                f.size,
                s.name,
                size_of(s)
            ));
        }
    }
    // Names: section names, then the fixed ones.
    let mut shstr = vec![0u8];
    let name_at = |n: &str, t: &mut Vec<u8>| {
        let at = t.len() as u32;
        t.extend_from_slice(n.as_bytes());
        t.push(0);
        at
    };
    let sec_names: Vec<u32> = sections.iter().map(|s| name_at(&s.name, &mut shstr)).collect();
    let note_name = name_at(".note.gnu.build-id", &mut shstr);
    let symtab_name = name_at(".symtab", &mut shstr);
    let strtab_name = name_at(".strtab", &mut shstr);
    let shstrtab_name = name_at(".shstrtab", &mut shstr);
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; SYM_SIZE];
    for f in functions {
        let n = name_at(&f.name, &mut strtab);
        u32le(&mut symtab, n);
        symtab.push(0x12); // global function
        symtab.push(0);
        u16le(&mut symtab, (f.section + 1) as u16);
        u64le(&mut symtab, f.offset);
        u64le(&mut symtab, f.size);
    }
    // The build id: from the sections' bytes and the symbols.
    let mut content = Vec::new();
    for s in sections {
        content.extend_from_slice(s.name.as_bytes());
        content.extend_from_slice(s.bytes.as_deref().unwrap_or(&[]));
        content.extend_from_slice(&size_of(s).to_le_bytes());
    }
    content.extend_from_slice(&symtab);
    content.extend_from_slice(&strtab);
    let build_id = content_id(&[&content]);
    let mut note = Vec::new();
    u32le(&mut note, 4);
    u32le(&mut note, 20);
    u32le(&mut note, NT_GNU_BUILD_ID);
    note.extend_from_slice(b"GNU\0");
    note.extend_from_slice(&build_id);

    let mut out = vec![0u8; EHDR_SIZE];
    let place = |out: &mut Vec<u8>, data: &[u8], align: u64| {
        let a = align.max(1) as usize;
        while !out.len().is_multiple_of(a) {
            out.push(0);
        }
        let at = out.len() as u64;
        out.extend_from_slice(data);
        at
    };
    // (name, type, flags, offset, size, link, info, align, entsize)
    type Shdr = (u32, u32, u64, u64, u64, u32, u32, u64, u64);
    let mut shdrs: Vec<Shdr> = vec![(0, 0, 0, 0, 0, 0, 0, 0, 0)];
    for (s, &n) in sections.iter().zip(&sec_names) {
        let flags = SHF_ALLOC | if s.exec { SHF_EXECINSTR } else { 0 } | if s.write { SHF_WRITE } else { 0 };
        match &s.bytes {
            Some(b) => {
                let at = place(&mut out, b, s.align);
                shdrs.push((n, SHT_PROGBITS, flags, at, b.len() as u64, 0, 0, s.align, 0));
            }
            None => {
                let at = out.len() as u64;
                shdrs.push((n, SHT_NOBITS, flags, at, s.size, 0, 0, s.align, 0));
            }
        }
    }
    let at = place(&mut out, &note, 4);
    shdrs.push((note_name, SHT_NOTE, SHF_ALLOC, at, note.len() as u64, 0, 0, 4, 0));
    let strtab_index = shdrs.len() as u32 + 1;
    let at = place(&mut out, &symtab, 8);
    // sh_info: one past the last local symbol (only the null one is local).
    shdrs.push((
        symtab_name,
        SHT_SYMTAB,
        0,
        at,
        symtab.len() as u64,
        strtab_index,
        1,
        8,
        SYM_SIZE as u64,
    ));
    let at = place(&mut out, &strtab, 1);
    shdrs.push((strtab_name, SHT_STRTAB, 0, at, strtab.len() as u64, 0, 0, 1, 0));
    let at = place(&mut out, &shstr, 1);
    shdrs.push((shstrtab_name, SHT_STRTAB, 0, at, shstr.len() as u64, 0, 0, 1, 0));
    let shoff = place(&mut out, &[], 8);
    for &(name, kind, flags, off, size, link, info, align, ent) in &shdrs {
        u32le(&mut out, name);
        u32le(&mut out, kind);
        u64le(&mut out, flags);
        u64le(&mut out, 0);
        u64le(&mut out, off);
        u64le(&mut out, size);
        u32le(&mut out, link);
        u32le(&mut out, info);
        u64le(&mut out, align);
        u64le(&mut out, ent);
    }
    let mut h = Vec::with_capacity(EHDR_SIZE);
    h.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    u16le(&mut h, 1); // ET_REL
    u16le(&mut h, EM_AARCH64);
    u32le(&mut h, 1);
    u64le(&mut h, 0); // entry
    u64le(&mut h, 0); // phoff
    u64le(&mut h, shoff);
    u32le(&mut h, 0);
    for x in [
        EHDR_SIZE as u16,
        0,
        0,
        SHDR_SIZE as u16,
        shdrs.len() as u16,
        shdrs.len() as u16 - 1,
    ] {
        u16le(&mut h, x);
    }
    out[..EHDR_SIZE].copy_from_slice(&h);
    Ok(ModuleImage { bytes: out, build_id })
}

/// Writes an ELF core file as the kernel's `/proc/kcore` reads (and as `perf record --kcore`
/// copies it): one `PT_LOAD` program header for each `(address, bytes)` piece of memory, its
/// bytes at their virtual address, and no sections.
pub fn write_core(pieces: &[(u64, &[u8])]) -> Vec<u8> {
    const PT_LOAD: u32 = 1;
    const PF_R: u32 = 4;
    const PF_W: u32 = 2;
    const PF_X: u32 = 1;
    let headers = EHDR_SIZE + PHDR_SIZE * pieces.len();
    let mut offsets = Vec::with_capacity(pieces.len());
    let mut at = (headers as u64).next_multiple_of(PAGE);
    for (_, b) in pieces {
        offsets.push(at);
        at = (at + b.len() as u64).next_multiple_of(PAGE);
    }
    let mut out = Vec::with_capacity(at as usize);
    out.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    u16le(&mut out, 4); // ET_CORE
    u16le(&mut out, EM_AARCH64);
    u32le(&mut out, 1);
    u64le(&mut out, 0); // entry
    u64le(&mut out, EHDR_SIZE as u64); // phoff
    u64le(&mut out, 0); // shoff
    u32le(&mut out, 0);
    for x in [
        EHDR_SIZE as u16,
        PHDR_SIZE as u16,
        pieces.len() as u16,
        SHDR_SIZE as u16,
        0,
        0,
    ] {
        u16le(&mut out, x);
    }
    for ((addr, b), &off) in pieces.iter().zip(&offsets) {
        u32le(&mut out, PT_LOAD);
        u32le(&mut out, PF_R | PF_W | PF_X);
        u64le(&mut out, off);
        u64le(&mut out, *addr);
        u64le(&mut out, 0); // paddr
        u64le(&mut out, b.len() as u64);
        u64le(&mut out, b.len() as u64);
        u64le(&mut out, PAGE);
    }
    for ((_, b), &off) in pieces.iter().zip(&offsets) {
        out.resize(off as usize, 0);
        out.extend_from_slice(b);
    }
    out
}
