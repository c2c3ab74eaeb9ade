//! ELF symbols for naming functions, looked up the way Arm's Tarmac Trace
//! Utilities look them up, so that profiles and call trees name the same
//! functions theirs do.

use std::collections::BTreeMap;
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
}

impl Symbols {
    /// Reads `.symtab`: local, global and weak symbols of no type, objects
    /// and functions, with a name.
    pub fn from_elf_bytes(data: &[u8]) -> Result<Self, String> {
        let elf = Elf::parse(data).map_err(|e| format!("not a readable ELF file ({e})"))?;
        let mut s = Symbols::default();
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

    /// Adds a symbol.
    pub fn add(&mut self, sym: Symbol) {
        self.by_addr.entry(sym.addr).or_default().push(self.syms.len());
        self.syms.push(sym);
    }

    /// No symbols.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol naming `addr`: walking down from the nearest symbol at or
    /// below it, the first sized symbol that contains it, else the nearest
    /// label. As in the upstream tools, the lowest-addressed entry is never
    /// examined (its symbols name nothing), which is why a program's
    /// lowest symbol (often `_start` beside a `$a`/`$x` mapping symbol)
    /// appears unnamed in their outputs.
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

    /// The name for `addr`, or "" when no symbol names it.
    pub fn name(&self, addr: u64) -> &str {
        self.find(addr).map_or("", |s| s.name.as_str())
    }
}
