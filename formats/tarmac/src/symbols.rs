//! ELF symbols for naming functions, looked up the way Arm's Tarmac Trace
//! Utilities look them up, so that profiles and call trees name the same
//! functions theirs do.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use goblin::elf::Elf;
use goblin::elf::sym::{STB_GLOBAL, STB_LOCAL, STB_WEAK, STT_FUNC, STT_NOTYPE, STT_OBJECT};

/// One symbol: address, size (0 = a label) and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Address (the symbol's value).
    pub addr: u64,
    /// Size in bytes (0 for a label).
    pub size: u64,
    /// Symbol name.
    pub name: String,
}

/// Symbols of an ELF image, by address.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    syms: Vec<Symbol>,
    by_addr: BTreeMap<u64, Vec<usize>>,
    /// How many symbols have each name: a name held by two symbols (static
    /// functions of two files) is printed with its address to tell them apart.
    name_count: HashMap<String, u32>,
    machine: Option<u16>,
    big_endian: Option<bool>,
}

/// Arm mapping symbols (`$a`, `$t`, `$x`, `$d`, and their `$a.N` forms)
/// mark where code of one instruction set or data begins; many share one
/// name, so they never name a function.
pub fn is_mapping_symbol(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2 && b[0] == b'$' && matches!(b[1], b'a' | b't' | b'x' | b'd')
}

/// The demangled form of a Rust (legacy or v0) or C++ (Itanium ABI)
/// symbol name; `None` when it is neither. Rust's hash is left out, as
/// `rustc` prints paths. Rust is tried first: a legacy Rust name is also a
/// valid C++ name, which would show the hash as a path element.
pub fn demangle(name: &str) -> Option<String> {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return Some(format!("{d:#}"));
    }
    if !name.starts_with("_Z") {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    sym.demangle(&cpp_demangle::DemangleOptions::new()).ok()
}

/// The ELF machine numbers of the architectures a Tarmac trace can hold.
pub const EM_ARM: u16 = 40;
/// AArch64.
pub const EM_AARCH64: u16 = 183;

impl Symbols {
    /// Reads `.symtab`: local, global and weak symbols of no type, objects
    /// and functions, with a name.
    pub fn from_elf_bytes(data: &[u8]) -> Result<Self, String> {
        let elf = Elf::parse(data).map_err(|e| format!("not a readable ELF file ({e})"))?;
        let mut s = Symbols {
            machine: Some(elf.header.e_machine),
            big_endian: Some(!elf.little_endian),
            ..Default::default()
        };
        for sym in elf.syms.iter() {
            if !matches!(sym.st_bind(), STB_LOCAL | STB_GLOBAL | STB_WEAK)
                || !matches!(sym.st_type(), STT_NOTYPE | STT_OBJECT | STT_FUNC)
            {
                continue;
            }
            let Some(name) = elf.strtab.get_at(sym.st_name) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            s.add(Symbol {
                addr: sym.st_value,
                size: sym.st_size,
                name: name.to_string(),
            });
        }
        Ok(s)
    }

    /// Reads `.symtab` of the ELF file at `path`; errors name the file.
    pub fn from_elf_file(path: &Path) -> Result<Self, String> {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_elf_bytes(&data).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Adds a symbol; mapping symbols and nameless ones are left out, as
    /// they name no function.
    pub fn add(&mut self, sym: Symbol) {
        if sym.name.is_empty() || is_mapping_symbol(&sym.name) {
            return;
        }
        *self.name_count.entry(sym.name.clone()).or_default() += 1;
        self.by_addr.entry(sym.addr).or_default().push(self.syms.len());
        self.syms.push(sym);
    }

    /// The ELF machine (`e_machine`) of the file read, if from a file.
    pub fn machine(&self) -> Option<u16> {
        self.machine
    }

    /// Whether the file read is big-endian (`EI_DATA`), if from a file:
    /// the byte order the upstream tools assume for the trace's memory
    /// unless told otherwise.
    pub fn big_endian(&self) -> Option<bool> {
        self.big_endian
    }

    /// Number of symbols kept (mapping symbols and nameless ones left out).
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// The symbol called `name`, as the upstream tools look names up: of
    /// several symbols of that name, the first in the symbol table, or
    /// with `name#N` the one at index `N` (from 0) among them.
    pub fn find_by_name(&self, name: &str) -> Option<&Symbol> {
        let (name, index) = match name.rsplit_once('#') {
            Some((n, i)) => (n, i.parse::<usize>().ok()?),
            None => (name, 0),
        };
        self.syms.iter().filter(|s| s.name == name).nth(index)
    }

    /// Replaces each C++ (Itanium ABI) or Rust name by its demangled
    /// form; names that are neither stay as they are. Names that become
    /// equal (a Rust function's instances differ only in their hash) are
    /// then told apart by address, as any shared name is.
    pub fn demangle(&mut self) {
        self.name_count.clear();
        for s in &mut self.syms {
            if let Some(d) = demangle(&s.name) {
                s.name = d;
            }
            *self.name_count.entry(s.name.clone()).or_default() += 1;
        }
    }

    /// Adds `offset` to every address (an image loaded elsewhere than its
    /// link address: position-independent code, shared libraries).
    pub fn relocate(&mut self, offset: u64) {
        for s in &mut self.syms {
            s.addr = s.addr.wrapping_add(offset);
        }
        let old = std::mem::take(&mut self.by_addr);
        for (a, v) in old {
            self.by_addr.insert(a.wrapping_add(offset), v);
        }
    }

    /// No symbols.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol naming `addr`: walking down from the nearest symbol at or
    /// below it, the first sized symbol that contains it, else the nearest
    /// label. As in the upstream tools, the lowest-addressed entry is never
    /// examined (its symbols name nothing), which is why a program's
    /// lowest symbol (often `_start`) appears unnamed in their outputs.
    pub fn find(&self, addr: u64) -> Option<&Symbol> {
        let lowest = *self.by_addr.keys().next()?;
        let mut backup = None;
        for (&a, idxs) in self.by_addr.range(..=addr).rev() {
            if a == lowest {
                break;
            }
            for &i in idxs {
                let s = &self.syms[i];
                if s.size != 0 && addr.wrapping_sub(s.addr) < s.size {
                    return Some(s);
                }
                if backup.is_none() {
                    backup = Some(s);
                }
            }
        }
        backup
    }

    /// The symbol's name, or "" when no symbol names `addr`.
    pub fn name(&self, addr: u64) -> &str {
        self.find(addr).map_or("", |s| s.name.as_str())
    }

    /// Writes the function name for `addr` as the upstream tools print
    /// it: the symbol's name, `name@0xADDR` when two symbols share the
    /// name, and with `offsets`, ` + 0xPC` when `addr` is past the
    /// symbol's start (upstream prints the address there, not the
    /// distance from the start). Writes nothing when no symbol names it;
    /// returns whether it wrote.
    pub fn write_function_name<W: std::fmt::Write + ?Sized>(
        &self,
        out: &mut W,
        addr: u64,
        offsets: bool,
    ) -> Result<bool, std::fmt::Error> {
        let Some(s) = self.find(addr) else { return Ok(false) };
        out.write_str(&s.name)?;
        if self.name_count.get(&s.name).is_some_and(|&n| n > 1) {
            write!(out, "@0x{:x}", s.addr)?;
        }
        if offsets && addr != s.addr {
            write!(out, " + 0x{addr:x}")?;
        }
        Ok(true)
    }
}
