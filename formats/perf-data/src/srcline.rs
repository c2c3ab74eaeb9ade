//! `perf script -F srcline`: the source file and line of an address, from its binary's DWARF
//! line table (through the `addr2line` crate, as perf runs binutils' addr2line). perf shows
//! the file's base name and the line (`prog.c:13`), and nothing where the binary has no line
//! for the address.

use std::collections::HashMap;
use std::rc::Rc;

use goblin::elf::Elf;
use goblin::elf::section_header::{SHF_COMPRESSED, SHT_NOBITS};

use crate::memory::Model;

type Reader = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// Source lines looked up once per binary and address (a writer's hot loop asks for the
/// same few addresses again and again).
#[derive(Default)]
pub struct SourceLines {
    /// By binary index: its DWARF, None when it has none (or no file).
    dwarf: HashMap<usize, Option<addr2line::Context<Reader>>>,
    /// By (binary, virtual address in its file): `file:line`, None when unknown.
    lines: HashMap<(usize, u64), Option<Box<str>>>,
}

impl SourceLines {
    /// `file:line` of `addr` in process `pid` (as at file position `at`), None when unknown.
    pub fn get(&mut self, model: &Model, pid: i32, addr: u64, at: u64) -> Option<&str> {
        let map = model.find_map(pid, addr, at)?;
        let bin = model.map(map)?.binary;
        let vaddr = model.vaddr_in_file(map, addr)?;
        let dwarf = &mut self.dwarf;
        self.lines
            .entry((bin, vaddr))
            .or_insert_with(|| {
                let ctx = dwarf
                    .entry(bin)
                    .or_insert_with(|| model.binary(bin)?.loaded().and_then(|img| load_dwarf(img.bytes())))
                    .as_ref()?;
                let loc = ctx.find_location(vaddr).ok()??;
                let (file, line) = (loc.file?, loc.line?);
                if line == 0 {
                    return None;
                }
                let base = file.rsplit('/').next().unwrap_or(file);
                Some(format!("{base}:{line}").into_boxed_str())
            })
            .as_deref()
    }
}

/// The DWARF of an ELF file, when it has uncompressed debug sections with units.
fn load_dwarf(data: &[u8]) -> Option<addr2line::Context<Reader>> {
    let elf = Elf::parse(data).ok()?;
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
                    && sh.sh_flags & u64::from(SHF_COMPRESSED) == 0
            })
            .and_then(|sh| data.get(sh.sh_offset as usize..(sh.sh_offset.checked_add(sh.sh_size)?) as usize))
            .unwrap_or(&[]);
        Ok(gimli::EndianRcSlice::new(Rc::from(bytes), endian))
    };
    let dwarf = gimli::Dwarf::load(section).ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}
