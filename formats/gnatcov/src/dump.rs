//! Text dump of a trace file in the form of `gnatcov dump-trace`.
//!
//! ```text
//! Kind: FLAT
//!
//! Tag  : EXEC_FILE_NAME
//! Len  : 10
//! Data : obj/main_1
//!
//! Traces:
//! 080003c8-080003cb ?: 11 ---t block
//! ```
//!
//! Each info entry shows its tag, length and data (as text when every byte
//! is printable, else as hex bytes; a date also as `YYYY-MM-DD HH:MM:SS
//! UTC`). Each execution entry shows its first and last address, the
//! instruction state (`?`: not computed), the op in hex, op bits 3..0 as
//! `t` or `-`, then `block` and/or `fault`. Addresses have as many digits
//! as the trace's PCs. By default entries inside a loaded shared object
//! are shown relative to its base, as gnatcov does; `raw` shows them as
//! recorded.

use std::fmt::Write as _;

use super::format::{DateTime, Endian, Entry, InfoEntry, InfoKind, PcSize, Record, TraceFile};

/// Ada's `Is_Graphic` on Latin-1 characters.
fn is_graphic(b: u8) -> bool {
    (0x20..0x7f).contains(&b) || b >= 0xa0
}

fn hex(v: u64, pc: PcSize) -> String {
    format!("{:0w$x}", v, w = pc.hex_digits())
}

fn dump_infos(out: &mut String, infos: &[InfoEntry<'_>], endian: Endian) {
    for i in infos {
        out.push_str("Tag  : ");
        out.push_str(i.kind.image());
        match i.kind {
            InfoKind::UserData => out.push_str(" (User_Tag)"),
            InfoKind::DateTime => out.push_str(" (Date)"),
            _ => {}
        }
        let _ = writeln!(out, "\nLen  : {}", i.data.len());
        out.push_str("Data :");
        if i.data.iter().all(|&b| is_graphic(b)) {
            out.push(' ');
            // Latin-1 bytes shown as the characters they stand for.
            out.extend(i.data.iter().map(|&b| b as char));
        } else {
            for b in i.data.iter() {
                let _ = write!(out, " {b:02x}");
            }
        }
        out.push('\n');
        if i.kind == InfoKind::DateTime {
            out.push_str("       ");
            match DateTime::from_bytes(&i.data, endian) {
                Some(d) => {
                    let _ = write!(out, "{d} UTC");
                }
                None => out.push_str("!Bad Format!"),
            }
            out.push('\n');
        }
        out.push('\n');
    }
}

/// One entry line.
pub fn entry_line(out: &mut String, e: &Entry, pc: PcSize, offset: u64) {
    let first = e.pc.wrapping_sub(offset);
    let shifted = Entry { pc: first, ..*e };
    let _ = write!(
        out,
        "{}-{} ?: {:02x} ",
        hex(first, pc),
        hex(shifted.last(pc), pc),
        e.op.0
    );
    for bit in (0..4).rev() {
        out.push(if e.op.0 >> bit & 1 != 0 { 't' } else { '-' });
    }
    if e.op.block() {
        out.push_str(" block");
    }
    if e.op.fault() {
        out.push_str(" fault");
    }
    out.push('\n');
}

/// The whole dump.
pub fn dump(t: &TraceFile<'_>, raw: bool) -> String {
    let mut out = String::new();
    let pc = t.header.pc_size;
    let _ = writeln!(out, "Kind: {}\n", t.header.kind.image());
    dump_infos(&mut out, &t.infos, t.header.endian);
    out.push_str("Traces:\n");
    let has_kernel = t.info(InfoKind::KernelFileName).is_some_and(|i| !i.data.is_empty());
    let mut kernel_offset = 0u64;
    let mut loaded = false;
    // Loaded shared objects: (first, last).
    let mut objects: Vec<(u64, u64)> = Vec::new();
    for r in &t.records {
        match r {
            Record::Exec(e) => {
                // With a kernel, entries before its load address (and below
                // it) are outside it: gnatcov leaves them out unless raw.
                if !raw && has_kernel && (!loaded || e.pc < kernel_offset) {
                    continue;
                }
                let off = objects
                    .iter()
                    .find(|(f, l)| (*f..=*l).contains(&e.pc))
                    .map(|(f, _)| if raw { 0 } else { *f })
                    .unwrap_or(if raw { 0 } else { kernel_offset });
                entry_line(&mut out, e, pc, off);
            }
            Record::LoadAddr { offset } => {
                if has_kernel {
                    let _ = writeln!(out, "Kernel was loaded at: {}", hex(*offset, pc));
                    kernel_offset = *offset;
                    loaded = true;
                }
            }
            Record::LoadSharedObject { base, infos } => {
                let name = infos
                    .iter()
                    .find(|i| i.kind == InfoKind::ExecFileName)
                    .map(|i| String::from_utf8_lossy(&i.data).into_owned())
                    .unwrap_or_default();
                let size = infos
                    .iter()
                    .find(|i| i.kind == InfoKind::ExecCodeSize)
                    .and_then(|i| super::format::parse_ascii_number(&i.data))
                    .unwrap_or(0);
                let last = base.wrapping_add(size).wrapping_sub(1);
                let _ = writeln!(
                    out,
                    "Loading shared object {name}\n   at {} .. {}",
                    hex(*base, pc),
                    hex(last, pc)
                );
                objects.push((*base, last));
            }
            Record::UnloadSharedObject { base } => objects.retain(|(f, l)| !(*f..=*l).contains(base)),
        }
    }
    out
}
