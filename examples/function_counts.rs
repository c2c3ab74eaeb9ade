//! `function_counts`: how many instructions each function of a program
//! executed, from a trace snapshot of it and the program's ELF file.
//!
//! ```text
//! cargo run --example function_counts -- SNAPSHOT_DIR PROGRAM.elf
//! ```
//!
//! The trace is decoded with the pull API; each executed instruction range
//! is attributed to the ELF's function symbols (`STT_FUNC` with a size).
//! Prints one line per function, most executed first, then the
//! instructions outside any function:
//!
//! ```text
//!       43  main
//!       18  sum_to
//!      ...
//!        0  never_called
//! ```
//!
//! A range that crosses a function boundary (code falling through into
//! the next function) is split by address: exactly for A64 and A32, whose
//! instructions are all 4 bytes; for T32, by bytes, in proportion.

use std::process::ExitCode;

use coresight_decode::arch::Isa;
use coresight_decode::{Decoded, Element, Error};
use goblin::elf::Elf;
use goblin::elf::sym::STT_FUNC;

/// A function of the program: `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

/// The function symbols of an ELF file, sorted by address (the Thumb bit
/// of T32 function addresses cleared).
pub fn functions(elf_bytes: &[u8]) -> Result<Vec<Function>, goblin::error::Error> {
    let elf = Elf::parse(elf_bytes)?;
    let mut v: Vec<Function> = elf
        .syms
        .iter()
        .filter(|s| s.st_type() == STT_FUNC && s.st_size > 0)
        .map(|s| {
            let start = s.st_value & !1;
            Function {
                name: elf.strtab.get_at(s.st_name).unwrap_or("?").to_string(),
                start,
                end: start + s.st_size,
            }
        })
        .collect();
    v.sort_by_key(|f| f.start);
    Ok(v)
}

/// Instructions executed per function (in the order of `funcs`), and
/// outside all of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub per_function: Vec<u64>,
    pub outside: u64,
}

/// Adds up the instruction ranges of a decode.
pub fn count(elements: impl IntoIterator<Item = Result<Decoded, Error>>, funcs: &[Function]) -> Result<Counts, Error> {
    let mut c = Counts {
        per_function: vec![0; funcs.len()],
        outside: 0,
    };
    for item in elements {
        let Element::InstrRange {
            isa,
            start,
            end,
            num_instr,
            ..
        } = item?.element
        else {
            continue;
        };
        let num = num_instr as u64;
        // The function holding the first instruction.
        let first = funcs.partition_point(|f| f.end <= start);
        match funcs.get(first) {
            Some(f) if f.start <= start && end <= f.end => c.per_function[first] += num,
            _ => {
                // Crosses a boundary, or outside the functions: by address.
                let unit = match isa {
                    Isa::Aarch64 | Isa::Arm => 4,
                    _ => 0,
                };
                let len = end.saturating_sub(start).max(1);
                let mut counted = 0;
                for (i, f) in funcs.iter().enumerate().skip(first) {
                    if f.start >= end {
                        break;
                    }
                    let bytes = end.min(f.end).saturating_sub(start.max(f.start));
                    let n = bytes.checked_div(unit).unwrap_or(num * bytes / len);
                    c.per_function[i] += n;
                    counted += n;
                }
                c.outside += num.saturating_sub(counted);
            }
        }
    }
    Ok(c)
}

/// The printed table: functions by count (most first, then by name).
pub fn table(funcs: &[Function], counts: &Counts) -> String {
    let mut rows: Vec<(u64, &str)> = funcs
        .iter()
        .zip(&counts.per_function)
        .map(|(f, n)| (*n, f.name.as_str()))
        .collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut s = String::new();
    for (n, name) in rows {
        s.push_str(&format!("{n:>9}  {name}\n"));
    }
    s.push_str(&format!("{:>9}  (outside any function)\n", counts.outside));
    s
}

fn run(dir: &str, elf: &str) -> Result<String, Box<dyn std::error::Error>> {
    let bytes = std::fs::read(elf).map_err(|e| format!("{elf}: {e}"))?;
    let funcs = functions(&bytes).map_err(|e| format!("{elf}: not a readable ELF file: {e}"))?;
    let trace = coresight_decode::Trace::open(dir)?;
    let counts = count(trace, &funcs)?;
    Ok(table(&funcs, &counts))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, elf] = args.as_slice() else {
        eprintln!("usage: function_counts SNAPSHOT_DIR PROGRAM.elf");
        return ExitCode::from(2);
    };
    match run(dir, elf) {
        Ok(t) => {
            print!("{t}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("function_counts: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    //! A real program (tools/tests/fixtures/cov/prog-a64.elf, a small C
    //! program run under qemu-aarch64; prog-a64.pcs is every instruction
    //! it executed, from qemu's log) traced with ETMv4 by the project's
    //! encoder: the counts must be those of qemu's path.

    use super::*;
    use std::path::{Path, PathBuf};

    use coresight_generator::BufferLayout;
    use coresight_generator::execution::{ExecInsn, ExecProtocol, elf_images, generate_from_execution};

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tools/tests/fixtures/cov")
            .join(name)
    }

    /// Writes an ETMv4 snapshot of the program's path, encoded by the
    /// project's generator; returns its directory.
    fn snapshot(elf: &[u8], pcs: &[u64]) -> PathBuf {
        let images = elf_images(elf).unwrap();
        let opcode = |pc: u64| {
            let (a, d) = images
                .iter()
                .find(|(a, d)| pc >= *a && pc + 4 <= a + d.len() as u64)
                .unwrap();
            let o = (pc - a) as usize;
            u32::from_le_bytes(d[o..o + 4].try_into().unwrap())
        };
        let insns: Vec<ExecInsn> = pcs
            .iter()
            .map(|&pc| ExecInsn {
                addr: pc,
                isa: Isa::Aarch64,
                size: 4,
                opcode: opcode(pc),
                executed: true,
                el: 0,
                secure: false,
            })
            .collect();
        let g = generate_from_execution(&insns, &images, ExecProtocol::Etmv4, 1, BufferLayout::Formatted).unwrap();
        // (Examples have no CARGO_TARGET_TMPDIR.)
        let dir = std::env::temp_dir().join(format!("coresight-example-function-counts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        g.spec.write_to(&dir).unwrap();
        dir
    }

    #[test]
    fn counts_are_those_of_the_programs_path() {
        let elf = std::fs::read(fixture("prog-a64.elf")).unwrap();
        let pcs: Vec<u64> = std::fs::read_to_string(fixture("prog-a64.pcs"))
            .unwrap()
            .lines()
            .map(|l| u64::from_str_radix(l, 16).unwrap())
            .collect();
        let funcs = functions(&elf).unwrap();
        let names: Vec<&str> = funcs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "sys_exit",
                "classify",
                "never_called",
                "sum_to",
                "pick",
                "main",
                "_start"
            ]
        );

        // The truth: qemu's path, instruction by instruction.
        let mut want = Counts {
            per_function: vec![0; funcs.len()],
            outside: 0,
        };
        for pc in &pcs {
            match funcs.iter().position(|f| f.start <= *pc && *pc < f.end) {
                Some(i) => want.per_function[i] += 1,
                None => want.outside += 1,
            }
        }
        assert_eq!(want.per_function.iter().sum::<u64>(), pcs.len() as u64);

        let dir = snapshot(&elf, &pcs);
        let got = count(coresight_decode::Trace::open(&dir).unwrap(), &funcs).unwrap();
        assert_eq!(got, want);
        let t = run(dir.to_str().unwrap(), fixture("prog-a64.elf").to_str().unwrap()).unwrap();
        assert!(
            t.ends_with("        0  never_called\n        0  (outside any function)\n"),
            "{t}"
        );
        assert_eq!(t.lines().count(), funcs.len() + 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_range_across_functions_is_split_by_address() {
        let funcs = [
            Function {
                name: "f".into(),
                start: 0x100,
                end: 0x110,
            },
            Function {
                name: "g".into(),
                start: 0x110,
                end: 0x120,
            },
        ];
        let range = |isa, start, end, num_instr| {
            Ok(Decoded {
                index: 0,
                trace_id: 0,
                element: Element::InstrRange {
                    isa,
                    start,
                    end,
                    num_instr,
                    last: Default::default(),
                    cycle_count: None,
                },
            })
        };
        let items = vec![
            range(Isa::Aarch64, 0x108, 0x118, 4),
            range(Isa::Aarch64, 0xf8, 0x104, 3),
            range(Isa::Thumb2, 0x10c, 0x114, 3),
        ];
        let c = count(items, &funcs).unwrap();
        // A64: 2 + 2 split at 0x110; 2 outside and 1 in f; T32: 8 bytes,
        // half in each function, 3 instructions: 1 + 1 by bytes, 1 left.
        assert_eq!(
            c,
            Counts {
                per_function: vec![2 + 1 + 1, 2 + 1],
                outside: 2 + 1
            }
        );
    }
}
