//! Function names for addresses, from the symbol tables of ELF files
//! (`trc_decode --elf FILE --symbols`): `function+0xOFFSET`, C++ and Rust
//! names demangled.

use std::path::Path;

use goblin::elf::Elf;
use goblin::elf::program_header::PT_LOAD;
use goblin::elf::sym::{STB_LOCAL, STT_FUNC, STT_NOTYPE};

/// ELF machine number of 32-bit Arm, whose function symbols have bit 0
/// set for T32 code.
const EM_ARM: u16 = 40;

/// One function: where it starts, its size (0: unknown) and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Function {
    start: u64,
    size: u64,
    name: String,
}

/// The functions of one or more ELF files, by address.
#[derive(Clone, Debug, Default)]
pub struct SymbolTable {
    /// Sorted by start address.
    functions: Vec<Function>,
}

/// The lowest address of the loadable segments of `elf`.
pub fn lowest_load_address(elf: &Elf) -> Option<u64> {
    elf.program_headers
        .iter()
        .filter(|p| p.p_type == PT_LOAD)
        .map(|p| p.p_vaddr)
        .min()
}

impl SymbolTable {
    /// Adds the functions of the ELF image `data` (named `what` in errors):
    /// function symbols, and untyped ones (assembler labels) other than
    /// Arm's mapping symbols (`$x`, `$t.1`...). With `load`, the image is
    /// taken as loaded with its lowest segment at `load`. Returns how many
    /// were added.
    pub fn add_elf_bytes(&mut self, data: &[u8], what: &str, load: Option<u64>) -> Result<usize, String> {
        let elf = Elf::parse(data).map_err(|e| format!("{what}: not a readable ELF file ({e})"))?;
        let delta = match load {
            Some(a) => a.wrapping_sub(lowest_load_address(&elf).unwrap_or(0)),
            None => 0,
        };
        let before = self.functions.len();
        for sym in elf.syms.iter() {
            let ty = sym.st_type();
            if !(ty == STT_FUNC || ty == STT_NOTYPE) || sym.st_shndx == 0 {
                continue;
            }
            let Some(name) = elf.strtab.get_at(sym.st_name) else {
                continue;
            };
            let b = name.as_bytes();
            if name.is_empty() || (b[0] == b'$' && b.len() >= 2) || (ty == STT_NOTYPE && sym.st_bind() == STB_LOCAL) {
                continue;
            }
            let mut start = sym.st_value;
            if elf.header.e_machine == EM_ARM && ty == STT_FUNC {
                start &= !1;
            }
            let name = coresight_tarmac::symbols::demangle(name).unwrap_or_else(|| name.to_string());
            self.functions.push(Function {
                start: start.wrapping_add(delta),
                size: sym.st_size,
                name,
            });
        }
        let added = self.functions.len() - before;
        // Sized symbols first at one address, so that a function wins over
        // a label at its start.
        self.functions
            .sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
        Ok(added)
    }

    /// Adds the functions of the ELF file at `path` (see
    /// [`SymbolTable::add_elf_bytes`]).
    pub fn add_elf_file(&mut self, path: &Path, load: Option<u64>) -> Result<usize, String> {
        let data = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        self.add_elf_bytes(&data, &path.display().to_string(), load)
    }

    /// No functions.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// The function holding `addr` and the offset in it: the sized
    /// function containing it, else the nearest label (size 0) at or below
    /// it when no sized function lies between.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let end = self.functions.partition_point(|f| f.start <= addr);
        let mut label = None;
        // Functions rarely nest; a few steps back find an enclosing one.
        for f in self.functions[..end].iter().rev().take(8) {
            if f.size == 0 {
                if label.is_none() {
                    label = Some(f);
                }
            } else if addr - f.start < f.size {
                return Some((&f.name, addr - f.start));
            } else if label.is_none() {
                // A sized function ended below `addr`: nothing names it.
                return None;
            }
        }
        label.map(|f| (f.name.as_str(), addr - f.start))
    }

    /// Appends `name+0xOFF` (`name` at offset 0) for `addr`, or `?` when
    /// no function holds it.
    pub fn write_location(&self, addr: u64, out: &mut String) {
        use std::fmt::Write as _;
        match self.lookup(addr) {
            Some((name, 0)) => out.push_str(name),
            Some((name, off)) => {
                let _ = write!(out, "{name}+0x{off:x}");
            }
            None => out.push('?'),
        }
    }
}
