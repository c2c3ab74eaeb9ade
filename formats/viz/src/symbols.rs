//! Function names for addresses: ELF symbol tables, DWARF inline frames
//! (through `addr2line`) where the image has them, names demangled for
//! C++ and Rust. Each address is looked up once; the answers are kept as
//! interned frame ids, so a hot call costs a hash lookup.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::rc::Rc;

use gimli;
use gimli::Reader as _;
use gimli::Section as _;
use goblin::elf::Elf;
use goblin::elf::section_header::{SHF_COMPRESSED, SHT_NOBITS};
use goblin::elf::sym::{STT_FUNC, STT_NOTYPE};

use crate::profile::{FrameId, Frames};

type Reader = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// One ELF image: its function symbols and, when it has DWARF, the
/// context that finds inline frames.
struct Image {
    /// (address, size, name), by address; names demangled.
    syms: Vec<(u64, u64, String)>,
    /// Added to the image's addresses to get the traced ones.
    offset: u64,
    dwarf: Option<addr2line::Context<Reader>>,
    /// The lowest and one past the highest address the image names.
    span: (u64, u64),
}

/// Demangles a C++ (Itanium) or Rust symbol name; other names are kept.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the hash suffix of legacy Rust names.
        return Cow::Owned(format!("{d:#}"));
    }
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default())
    {
        return Cow::Owned(d);
    }
    Cow::Borrowed(name)
}

/// Names an address in an address space (a process) when the images do
/// not: perf.data's maps, say.
pub type Resolver = Box<dyn FnMut(u64, u64) -> Option<String>>;

/// Names addresses from the ELF images given (and a resolver).
#[derive(Default)]
pub struct Symbolizer {
    images: Vec<Image>,
    resolver: Option<Resolver>,
    /// The address space of the addresses looked up next (a process).
    space: u64,
    /// (space, address) → (first frame in `flat`, count), for functions entered.
    entry_cache: HashMap<(u64, u64), (u32, u32)>,
    /// Call site → its inline frames.
    inline_cache: HashMap<u64, (u32, u32)>,
    flat: Vec<FrameId>,
    text: String,
}

impl Symbolizer {
    /// No images: every address is named in hex.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names what the images do not with `r(space, address)`.
    pub fn set_resolver(&mut self, r: Resolver) {
        self.resolver = Some(r);
    }

    /// The address space (process) of the addresses looked up next.
    pub fn set_space(&mut self, space: u64) {
        self.space = space;
    }

    /// Whether any image was added.
    pub fn has_images(&self) -> bool {
        !self.images.is_empty()
    }

    /// Adds the ELF file at `path`, loaded `offset` bytes above its link
    /// addresses. Errors name the file.
    pub fn add_elf_file(&mut self, path: &Path, offset: u64) -> Result<(), String> {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        self.add_elf(&data, offset)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Adds an ELF image from its bytes.
    pub fn add_elf(&mut self, data: &[u8], offset: u64) -> Result<(), String> {
        let elf = Elf::parse(data).map_err(|e| format!("not a readable ELF file ({e})"))?;
        let mut syms = Vec::new();
        for (tab, strtab) in [(&elf.syms, &elf.strtab), (&elf.dynsyms, &elf.dynstrtab)] {
            for s in tab.iter() {
                if !matches!(s.st_type(), STT_FUNC | STT_NOTYPE) || s.st_shndx == 0 {
                    continue;
                }
                let Some(name) = strtab.get_at(s.st_name) else { continue };
                // Arm mapping symbols ($a, $t, $x, $d...) name no function.
                if name.is_empty() || name.starts_with('$') || name.starts_with(".L") {
                    continue;
                }
                // Thumb functions have bit 0 set in their value.
                let addr = if elf.header.e_machine == goblin::elf::header::EM_ARM {
                    s.st_value & !1
                } else {
                    s.st_value
                };
                syms.push((addr, s.st_size, demangle(name).into_owned()));
            }
        }
        // Sized functions before labels at one address, so that lookups prefer them.
        syms.sort_by(|a, b| a.0.cmp(&b.0).then((b.1 != 0).cmp(&(a.1 != 0))).then(a.2.cmp(&b.2)));
        syms.dedup_by(|a, b| a.0 == b.0);
        let span = (
            syms.first().map_or(0, |s| s.0),
            syms.iter().map(|s| s.0 + s.1.max(1)).max().unwrap_or(0),
        );
        let dwarf = load_dwarf(&elf, data);
        self.images.push(Image {
            syms,
            offset,
            dwarf,
            span,
        });
        self.entry_cache.clear();
        self.inline_cache.clear();
        self.flat.clear();
        Ok(())
    }

    /// The image and its address for a traced address.
    fn image_of(&self, addr: u64) -> Option<(&Image, u64)> {
        self.images.iter().find_map(|img| {
            let a = addr.wrapping_sub(img.offset);
            (a >= img.span.0 && a < img.span.1).then_some((img, a))
        })
    }

    /// The name of the function holding `addr`, or its address in hex.
    fn function_name(&mut self, addr: u64) {
        let mut text = std::mem::take(&mut self.text);
        text.clear();
        let named = self.image_of(addr).and_then(|(img, a)| {
            let i = img.syms.partition_point(|s| s.0 <= a);
            let s = img.syms.get(i.checked_sub(1)?)?;
            (s.1 == 0 || a - s.0 < s.1).then_some(s.2.as_str())
        });
        match named {
            Some(n) => text.push_str(n),
            None => match self.resolver.as_mut().and_then(|r| r(self.space, addr)) {
                Some(n) => text.push_str(&demangle(&n)),
                None => {
                    let _ = write!(text, "0x{addr:x}");
                }
            },
        }
        self.text = text;
    }

    /// The frames of the function at `addr` (entered by a call, or where
    /// a context's trace begins): its name.
    pub fn function(&mut self, addr: u64, frames: &mut Frames) -> &[FrameId] {
        let (start, n) = match self.entry_cache.get(&(self.space, addr)) {
            Some(&v) => v,
            None => {
                self.function_name(addr);
                let id = frames.intern(&self.text);
                let v = (self.flat.len() as u32, 1);
                self.flat.push(id);
                self.entry_cache.insert((self.space, addr), v);
                v
            }
        };
        &self.flat[start as usize..(start + n) as usize]
    }

    /// The inline frames at call site `addr` (outermost first, without the
    /// function that holds them): the functions inlined there that made
    /// the call. Empty without DWARF.
    pub fn inline_frames(&mut self, addr: u64, frames: &mut Frames) -> &[FrameId] {
        let (start, n) = match self.inline_cache.get(&addr) {
            Some(&v) => v,
            None => {
                let mut names: Vec<String> = Vec::new();
                if let Some((img, a)) = self.image_of(addr)
                    && let Some(ctx) = &img.dwarf
                    && let Ok(mut it) = ctx.find_frames(a).skip_all_loads()
                {
                    while let Ok(Some(f)) = it.next() {
                        let name = f
                            .function
                            .as_ref()
                            .and_then(|n| n.raw_name().ok().map(|r| demangle(r.as_ref()).into_owned()));
                        names.push(name.unwrap_or_else(|| "[inlined]".to_string()));
                        if names.len() > 64 {
                            break;
                        }
                    }
                }
                // Innermost first, the physical function last: keep the
                // inlined ones, outermost first.
                names.pop();
                names.reverse();
                let v = (self.flat.len() as u32, names.len() as u32);
                for n in &names {
                    let id = frames.intern(n);
                    self.flat.push(id);
                }
                self.inline_cache.insert(addr, v);
                v
            }
        };
        &self.flat[start as usize..(start + n) as usize]
    }
}

/// The DWARF of an image, when it has uncompressed debug sections.
fn load_dwarf(elf: &Elf, data: &[u8]) -> Option<addr2line::Context<Reader>> {
    let endian = if elf.little_endian {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let section = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let bytes: &[u8] = elf
            .section_headers
            .iter()
            .find(|sh| {
                elf.shdr_strtab.get_at(sh.sh_name) == Some(id.name())
                    && sh.sh_type != SHT_NOBITS
                    && sh.sh_flags & SHF_COMPRESSED as u64 == 0
            })
            .and_then(|sh| data.get(sh.sh_offset as usize..(sh.sh_offset.checked_add(sh.sh_size)?) as usize))
            .unwrap_or(&[]);
        Ok(gimli::EndianRcSlice::new(Rc::from(bytes), endian))
    };
    let dwarf = gimli::Dwarf::load(section).ok()?;
    if dwarf.debug_info.reader().is_empty() {
        return None;
    }
    addr2line::Context::from_dwarf(dwarf).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_cpp_and_rust() {
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
        assert_eq!(demangle("_RNvCs1234_5crate4main"), "crate::main");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Z"), "_Z");
    }
}
