//! The recorded binaries: an ELF file's loadable segments (to turn a file offset into the
//! virtual address a profile names), its build id and its function symbols.
//!
//! A relocatable kernel module (`.ko`) has no program headers, and all its sections are at
//! address 0. Its allocated sections are laid out as the kernel's module loader lays them
//! out ([`ModuleSection`]): addresses count from the module's first byte (where its map in a
//! recording starts), and its function symbols are moved with their sections. Sections with
//! file bytes become the segments; sections without (`.plt`, `.text.ftrace_trampoline`, `.bss`)
//! take room but hold no code the file can give.

use std::path::{Path, PathBuf};

use goblin::elf::{Elf, program_header, section_header, sym};

/// A problem with a binary file.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    /// The file could not be opened or mapped.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Not an ELF file, or its headers are damaged.
    #[error("{path}: at file offset {offset:#x}: not a usable ELF file: {detail}")]
    NotElf {
        /// The file.
        path: PathBuf,
        /// Where the problem is (0: the header).
        offset: u64,
        /// What goblin said.
        detail: String,
    },
}

/// One loadable piece of the file: `file_size` bytes at `file_offset` appear at `vaddr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Virtual address in the file's own address space.
    pub vaddr: u64,
    /// Offset in the file.
    pub file_offset: u64,
    /// Bytes present in the file.
    pub file_size: u64,
    /// Executable.
    pub executable: bool,
}

/// A function symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Start (virtual address in the file).
    pub start: u64,
    /// One past the end: the symbol's size, or the next symbol's start when it has none.
    pub end: u64,
    /// Name as in the symbol table (not demangled).
    pub name: String,
}

/// An ELF file, mapped.
pub struct ElfImage {
    path: PathBuf,
    data: Data,
    /// The GNU build id note, if any.
    pub build_id: Option<Vec<u8>>,
    /// PT_LOAD segments in file order (or a module's executable sections).
    pub segments: Vec<Segment>,
    /// 64-bit ELF.
    pub is_64: bool,
    /// A relocatable file (kernel module).
    pub relocatable: bool,
    /// A relocatable file's allocated sections where the module loader puts them (empty for
    /// other files).
    pub module_sections: Vec<ModuleSection>,
    symbols: Vec<Symbol>,
    /// `_text` and `_stext` (any symbol type): where a kernel image is relocated from.
    anchors: Vec<(String, u64)>,
}

enum Data {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Mapped(m) => m,
            Data::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for ElfImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfImage")
            .field("path", &self.path)
            .field("segments", &self.segments)
            .field("symbols", &self.symbols.len())
            .finish()
    }
}

/// The build id of the ELF file at `path` without keeping the file: `None` for a file that is
/// not ELF or has no build id note.
pub fn read_build_id(path: &Path) -> Option<Vec<u8>> {
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: the map is read-only and dropped before returning; a file changed under it
    // can only give wrong bytes, which the ELF parser checks like any other input.
    let m = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    if m.len() < 4 || &m[..4] != b"\x7fELF" {
        return None;
    }
    let elf = Elf::parse(&m).ok()?;
    build_id_of(&elf, &m)
}

fn build_id_of(elf: &Elf, bytes: &[u8]) -> Option<Vec<u8>> {
    let from = |notes: Option<goblin::elf::note::NoteIterator>| -> Option<Vec<u8>> {
        for n in notes?.flatten() {
            if n.n_type == goblin::elf::note::NT_GNU_BUILD_ID && n.name == "GNU" {
                return Some(n.desc.to_vec());
            }
        }
        None
    };
    from(elf.iter_note_headers(bytes)).or_else(|| from(elf.iter_note_sections(bytes, Some(".note.gnu.build-id"))))
}

impl ElfImage {
    /// Maps and parses the ELF file at `path`.
    pub fn open(path: &Path) -> Result<ElfImage, BinaryError> {
        let io = |source| BinaryError::Io {
            path: path.to_path_buf(),
            source,
        };
        let f = std::fs::File::open(path).map_err(io)?;
        // SAFETY: read-only map of a file this process does not write; see read_build_id.
        let m = unsafe { memmap2::Mmap::map(&f) }.map_err(io)?;
        Self::parse(path, Data::Mapped(m))
    }

    /// Parses ELF bytes held in memory (tests, and images made on the fly).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<ElfImage, BinaryError> {
        Self::parse(path, Data::Owned(bytes))
    }

    fn parse(path: &Path, data: Data) -> Result<ElfImage, BinaryError> {
        let bytes = data.bytes();
        let elf = Elf::parse(bytes).map_err(|e| BinaryError::NotElf {
            path: path.to_path_buf(),
            offset: 0,
            detail: e.to_string(),
        })?;
        let relocatable = elf.header.e_type == goblin::elf::header::ET_REL;
        let module_sections = if relocatable { module_layout(&elf) } else { Vec::new() };
        let mut segments: Vec<Segment> = if relocatable {
            module_sections
                .iter()
                .filter(|s| !s.nobits && s.size > 0)
                .map(|s| Segment {
                    vaddr: s.addr,
                    file_offset: s.file_offset,
                    file_size: s.size,
                    executable: s.executable,
                })
                .collect()
        } else {
            elf.program_headers
                .iter()
                .filter(|p| p.p_type == program_header::PT_LOAD)
                .map(|p| Segment {
                    vaddr: p.p_vaddr,
                    file_offset: p.p_offset,
                    file_size: p.p_filesz,
                    executable: p.p_flags & program_header::PF_X != 0,
                })
                .collect()
        };
        // Segments whose bytes lie past the end of the file would make reads fail later.
        let len = bytes.len() as u64;
        segments.retain(|s| s.file_offset <= len);
        let build_id = build_id_of(&elf, bytes);
        let placed: Vec<(usize, u64)> = module_sections.iter().map(|s| (s.index, s.addr)).collect();
        let symbols = symbols_of(&elf, relocatable.then_some(placed.as_slice()));
        let anchors = elf
            .syms
            .iter()
            .filter(|s| s.st_shndx != 0)
            .filter_map(|s| {
                let name = elf.strtab.get_at(s.st_name)?;
                matches!(name, "_text" | "_stext").then(|| (name.to_string(), s.st_value))
            })
            .collect();
        let is_64 = elf.is_64;
        Ok(ElfImage {
            path: path.to_path_buf(),
            build_id,
            segments,
            is_64,
            relocatable,
            module_sections,
            symbols,
            anchors,
            data,
        })
    }

    /// Where the file is on this machine.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.data.bytes()
    }

    /// Copies file bytes from `offset` into `buf`; returns how many there were.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let b = self.bytes();
        let Ok(off) = usize::try_from(offset) else {
            return 0;
        };
        if off >= b.len() {
            return 0;
        }
        let n = buf.len().min(b.len() - off);
        buf[..n].copy_from_slice(&b[off..off + n]);
        n
    }

    /// The virtual address of the first loadable segment: AutoFDO's text profile counts
    /// addresses from it.
    ///
    /// A module's profile counts, as simpleperf's does, in its `.text`'s own addresses: the
    /// layout address of `.text` less its file address.
    pub fn first_load_vaddr(&self) -> u64 {
        if self.relocatable {
            return self.module_text().map_or(0, |t| t.addr.wrapping_sub(t.file_addr));
        }
        self.segments.first().map_or(0, |s| s.vaddr)
    }

    /// The segment whose file bytes hold file offset `offset`: its file offset, file size and
    /// virtual address.
    pub fn segment_at_offset(&self, offset: u64) -> Option<(u64, u64, u64)> {
        self.segments
            .iter()
            .find(|s| offset >= s.file_offset && offset - s.file_offset < s.file_size)
            .map(|s| (s.file_offset, s.file_size, s.vaddr))
    }

    /// The virtual address (in the file) of the byte at file offset `offset`: through the
    /// segment holding it, else as if it followed the first segment.
    pub fn offset_to_vaddr(&self, offset: u64) -> u64 {
        for s in &self.segments {
            if offset >= s.file_offset && offset - s.file_offset < s.file_size {
                return s.vaddr.wrapping_add(offset - s.file_offset);
            }
        }
        match self.segments.first() {
            Some(s) => offset.wrapping_sub(s.file_offset).wrapping_add(s.vaddr),
            None => offset,
        }
    }

    /// The file offset of virtual address `vaddr`, through the segment whose file bytes hold
    /// it, with the bytes left in that segment.
    pub fn vaddr_to_offset(&self, vaddr: u64) -> Option<(u64, u64)> {
        self.segments.iter().find_map(|s| {
            let d = vaddr.checked_sub(s.vaddr)?;
            if d < s.file_size {
                Some((s.file_offset.checked_add(d)?, s.file_size - d))
            } else {
                None
            }
        })
    }

    /// Copies the bytes at virtual address `vaddr` (not past the end of their segment's file
    /// bytes) into `buf`; returns how many there were.
    pub fn read_vaddr(&self, vaddr: u64, buf: &mut [u8]) -> usize {
        let Some((off, left)) = self.vaddr_to_offset(vaddr) else {
            return 0;
        };
        let n = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
        self.read_at(off, &mut buf[..n])
    }

    /// A module's first byte (0 when its sections are laid out here; the lowest section
    /// address when the file placed them); 0 for other files.
    pub fn module_base(&self) -> u64 {
        self.module_sections.iter().map(|s| s.addr).min().unwrap_or(0)
    }

    /// A module's `.text` (else its first core executable section with file bytes): the
    /// section whose addresses simpleperf's `min_vaddr` and AutoFDO profiles give.
    pub fn module_text(&self) -> Option<&ModuleSection> {
        let core_text = || {
            self.module_sections
                .iter()
                .filter(|s| s.executable && !s.nobits && !s.init && s.size > 0)
        };
        core_text().find(|s| s.name == ".text").or_else(|| core_text().next())
    }

    /// The lowest address of an executable segment (a module's first text section).
    pub fn first_exec_vaddr(&self) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.executable)
            .map(|s| s.vaddr)
            .min()
            .unwrap_or(0)
    }

    /// The value of the symbol `_text` or `_stext` (whatever its type): a kernel image's
    /// reference for its relocation (KASLR).
    pub fn anchor(&self, name: &str) -> Option<u64> {
        self.anchors.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// The function symbol holding `vaddr`, with the offset into it.
    pub fn symbol_at(&self, vaddr: u64) -> Option<(&Symbol, u64)> {
        let i = self.symbols.partition_point(|s| s.start <= vaddr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (vaddr < s.end).then(|| (s, vaddr - s.start))
    }

    /// The function symbols, by address.
    pub fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }
}

/// Where the module loader puts one allocated section of a relocatable file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSection {
    /// Index in the section header table.
    pub index: usize,
    /// Name (empty when the name table does not give one).
    pub name: String,
    /// Address counted from the module's first byte (its core text).
    pub addr: u64,
    /// Its address in the file (`sh_addr`: 0 in a `.ko`), which symbol values and simpleperf's
    /// addresses count from.
    pub file_addr: u64,
    /// Bytes it takes in memory.
    pub size: u64,
    /// Offset of its bytes in the file (meaningless for `nobits`).
    pub file_offset: u64,
    /// `SHT_NOBITS`: room without file bytes.
    pub nobits: bool,
    /// Executable (`SHF_EXECINSTR`).
    pub executable: bool,
    /// In the init allocation (`.init*`), which the loader frees after the module's init: laid
    /// out here after the core, at no address a recording gives.
    pub init: bool,
}

/// `SHF_RO_AFTER_INIT`, the flag the loader gives `.data..ro_after_init`.
const SHF_RO_AFTER_INIT: u64 = 0x0020_0000;
/// The page size the loader rounds each group of a module's memory to.
const MODULE_PAGE: u64 = 4096;

/// A relocatable file's allocated sections as the kernel's module loader lays them out.
///
/// The loader makes two allocations, core and init (the sections named `.init*`). Each is
/// filled in groups: executable sections, then read-only ones, then read-only-after-init
/// (`.data..ro_after_init`), then writable ones; within a group, sections follow the section
/// header order, each at its `sh_addralign`, `SHT_NOBITS` ones (`.plt`,
/// `.text.ftrace_trampoline`, `.bss`) taking their room as the others do. The sections the
/// loader does not keep as such (`.modinfo`, `__versions`, `.data..percpu`, whose
/// `SHF_ALLOC` it clears) are left out.
///
/// The core's text group starts at 0: the module's address (`/proc/modules`, and so its map in
/// a recording). Each later group starts on a new page, as kernels with strict module memory
/// protection place them before 6.4; from 6.4 on, those groups are separate allocations, but
/// they hold no code, so only the text group's offsets matter to a trace. The init allocation
/// comes after the core here: its run-time address is in no recording.
///
/// The sizes are the file's: the arm64 loader grows `.plt` (and sets the size of
/// `.text.ftrace_trampoline`) for the veneers it needs, which only the recording knows (see
/// simpleperf's `memory_offset_of_min_vaddr`, used by [`crate::memory::Model`]).
///
/// When the sections already have distinct addresses (a linked or pre-placed file), those are
/// kept.
fn module_layout(elf: &Elf) -> Vec<ModuleSection> {
    let name_of = |s: &section_header::SectionHeader| elf.shdr_strtab.get_at(s.sh_name).unwrap_or("").to_string();
    let alloc = u64::from(section_header::SHF_ALLOC);
    let exec = u64::from(section_header::SHF_EXECINSTR);
    let write = u64::from(section_header::SHF_WRITE);
    let mut kept: Vec<ModuleSection> = elf
        .section_headers
        .iter()
        .enumerate()
        .filter(|(_, s)| s.sh_flags & alloc != 0 && s.sh_type != section_header::SHT_NULL)
        .map(|(index, s)| {
            let name = name_of(s);
            ModuleSection {
                index,
                init: name.starts_with(".init"),
                name,
                addr: s.sh_addr,
                file_addr: s.sh_addr,
                size: s.sh_size,
                file_offset: s.sh_offset,
                nobits: s.sh_type == section_header::SHT_NOBITS,
                executable: s.sh_flags & exec != 0,
            }
        })
        .filter(|s| !matches!(s.name.as_str(), ".modinfo" | "__versions" | ".data..percpu"))
        .collect();
    let mut addrs: Vec<u64> = kept.iter().map(|s| s.addr).collect();
    addrs.sort_unstable();
    addrs.dedup();
    if addrs.len() == kept.len() {
        return kept;
    }
    let group = |i: usize| -> u8 {
        let flags = elf.section_headers.get(i).map_or(0, |s| s.sh_flags);
        let name = elf.section_headers.get(i).map(name_of).unwrap_or_default();
        if flags & exec != 0 {
            0
        } else if flags & write == 0 {
            1
        } else if flags & SHF_RO_AFTER_INIT != 0 || name == ".data..ro_after_init" {
            2
        } else {
            3
        }
    };
    let groups: Vec<u8> = kept.iter().map(|s| group(s.index)).collect();
    let mut at = 0u64;
    for init in [false, true] {
        for g in 0..4u8 {
            if (init || g > 0) && at > 0 {
                at = at.checked_next_multiple_of(MODULE_PAGE).unwrap_or(at);
            }
            for (s, _) in kept.iter_mut().zip(&groups).filter(|(s, k)| s.init == init && **k == g) {
                let align = elf.section_headers.get(s.index).map_or(1, |h| h.sh_addralign.max(1));
                at = at.checked_next_multiple_of(align).unwrap_or(at);
                s.addr = at;
                at = at.saturating_add(s.size);
            }
        }
    }
    kept.sort_by_key(|s| s.addr);
    kept
}

/// Function symbols from `.symtab` and `.dynsym`, sorted, one per address; a symbol without
/// a size runs to the next one (as perf does). In a module (`sections` given), a symbol's
/// value is an offset in its section, which must be one of the executable ones.
fn symbols_of(elf: &Elf, sections: Option<&[(usize, u64)]>) -> Vec<Symbol> {
    let mut out = Vec::new();
    let mut add = |syms: &goblin::elf::Symtab, strtab: &goblin::strtab::Strtab| {
        for s in syms.iter() {
            let t = s.st_type();
            if (t != sym::STT_FUNC && t != sym::STT_GNU_IFUNC)
                || s.st_shndx == 0
                || (s.st_value == 0 && sections.is_none())
            {
                continue;
            }
            let Some(name) = strtab.get_at(s.st_name) else {
                continue;
            };
            let base = match sections {
                Some(list) => match list.iter().find(|&&(i, _)| i == s.st_shndx) {
                    Some(&(_, a)) => a,
                    None => continue,
                },
                None => 0,
            };
            // A32/T32: bit 0 marks Thumb code, not part of the address.
            let value = if elf.header.e_machine == goblin::elf::header::EM_ARM {
                s.st_value & !1
            } else {
                s.st_value
            };
            let start = value.wrapping_add(base);
            out.push(Symbol {
                start,
                end: start.saturating_add(s.st_size),
                name: name.to_string(),
            });
        }
    };
    add(&elf.syms, &elf.strtab);
    add(&elf.dynsyms, &elf.dynstrtab);
    out.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    out.dedup_by_key(|s| s.start);
    for i in 0..out.len() {
        if out[i].end == out[i].start {
            out[i].end = out.get(i + 1).map_or(u64::MAX, |n| n.start);
        }
    }
    out
}
