//! Conventions shared by the programs: exit statuses, trace ID and
//! memory image arguments, the options renamed from the single-dash style,
//! the progress bar.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;

use coresight_decode::memory::{MemAccMapper, MemSpace, MemoryError};

/// Exit status: done.
pub const EXIT_OK: u8 = 0;
/// Exit status: failed (a file that could not be read, a missing
/// snapshot, a fatal decode error).
pub const EXIT_FAILURE: u8 = 1;
/// Exit status: bad command line.
pub const EXIT_USAGE: u8 = 2;

/// Reports `msg` on standard error as `PROGRAM: MSG` and returns
/// exit status 1.
pub fn fail(program: &str, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("{program}: {msg}");
    ExitCode::from(EXIT_FAILURE)
}

/// Reports a usage problem on standard error and returns exit status 2.
pub fn usage_error(program: &str, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("{program}: error: {msg}\n\nFor more information, try '--help'.");
    ExitCode::from(EXIT_USAGE)
}

/// Sets up `log` output on standard error as `PROGRAM: MESSAGE`, at
/// `default_level` unless `RUST_LOG` says otherwise. Programs that load
/// snapshots through the library's helpers use "warn", so that the
/// snapshot's warnings (a missing memory dump, a duplicate key...) are seen.
pub fn init_logging(program: &'static str, default_level: &str) {
    use std::io::Write as _;
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level))
        .format(move |buf, record| writeln!(buf, "{program}: {}", record.args()))
        .try_init();
}

/// A number as written on command lines: `0x` hex, decimal.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    r.map_err(|_| format!("'{s}' is not a number (decimal, or hex with 0x)"))
}

/// A trace ID to select in decoded output: 0x00 to 0x6f. 0 is the ID of
/// a source with no trace ID register set, alone in an unformatted buffer
/// (OpenCSD lists its elements under ID 0).
pub fn parse_selected_id(s: &str) -> Result<u8, String> {
    let n = parse_u64(s)?;
    match n {
        0..=0x6f => Ok(n as u8),
        _ => Err(format!("trace ID {s} is out of range: trace IDs are 0x0 to 0x6f")),
    }
}

/// A CoreSight trace ID (`--id`): 7 bits, 0x01 to 0x6f (0x00 and 0x70 to
/// 0x7f are reserved).
pub fn parse_trace_id(s: &str) -> Result<u8, String> {
    let n = parse_u64(s)?;
    match n {
        1..=0x6f => Ok(n as u8),
        _ => Err(format!("trace ID {s} is out of range: trace IDs are 0x1 to 0x6f")),
    }
}

/// A memory image given on the command line: `FILE` (an ELF file, whose
/// loadable segments are mapped at their addresses) or `FILE@ADDR` (a raw
/// binary mapped at ADDR, or an ELF file loaded with its lowest loadable
/// segment at ADDR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageArg {
    /// The file.
    pub path: PathBuf,
    /// Load address of a raw binary or of an ELF file's lowest segment;
    /// `None`: an ELF file at its link addresses.
    pub addr: Option<u64>,
}

impl FromStr for ImageArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("an empty file name".into());
        }
        // `@` may be part of a file name: only a number after the last one
        // is an address.
        if let Some((path, addr)) = s.rsplit_once('@')
            && !path.is_empty()
        {
            if let Ok(a) = parse_u64(addr) {
                return Ok(ImageArg {
                    path: PathBuf::from(path),
                    addr: Some(a),
                });
            }
            if addr.starts_with("0x") || addr.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "'{addr}' in '{s}' is not a load address (decimal, or hex with 0x)"
                ));
            }
        }
        Ok(ImageArg {
            path: PathBuf::from(s),
            addr: None,
        })
    }
}

impl ImageArg {
    /// Maps the image into `mapper` (any memory space). Returns the number
    /// of regions mapped; the error names the file and what is wrong.
    ///
    /// A region over memory already mapped (a snapshot's dump of the same
    /// program) is left to that memory: silently when it holds the same
    /// bytes (it is the same image), with a warning through `warn` when
    /// it does not. The image's symbols are then still the ELF file's.
    pub fn map_into(&self, mapper: &mut MemAccMapper, warn: &mut dyn FnMut(String)) -> Result<usize, String> {
        let p = &self.path;
        let meta = std::fs::metadata(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        if !meta.is_file() {
            return Err(format!("cannot read {}: not a regular file", p.display()));
        }
        if let Some(n) = map_elf(mapper, p, self.addr, warn)? {
            return Ok(n);
        }
        let Some(addr) = self.addr else {
            return Err(if is_elf(p) {
                format!("{}: the ELF file has no loadable segment with contents", p.display())
            } else {
                format!(
                    "{} is not an ELF file; for a raw binary give its load address: {}@0xADDRESS",
                    p.display(),
                    p.display()
                )
            });
        };
        if meta.len() == 0 {
            return Err(format!("{}: the file is empty", p.display()));
        }
        let data = std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        map_region(mapper, p, addr, 0, &data, warn)?;
        Ok(1)
    }
}

/// Maps `bytes` (at `offset` in file `p`) at `at`, or leaves them to the
/// memory already mapped there (see [`ImageArg::map_into`]).
fn map_region(
    mapper: &mut MemAccMapper,
    p: &Path,
    at: u64,
    offset: u64,
    bytes: &[u8],
    warn: &mut dyn FnMut(String),
) -> Result<(), String> {
    match mapper.add_file_region(p, at, offset, bytes.len() as u64, MemSpace::ANY) {
        Ok(()) => Ok(()),
        Err(MemoryError::Overlap { .. }) => {
            if let Some(diff) = first_difference(mapper, at, bytes) {
                warn(format!(
                    "{}: {} bytes at 0x{at:x} overlap memory already mapped, which differs at 0x{diff:x}; the memory already mapped is decoded, the file gives symbols only",
                    p.display(),
                    bytes.len()
                ));
            }
            Ok(())
        }
        Err(e) => Err(format!(
            "{}: cannot map {} bytes at 0x{at:x}: {e}",
            p.display(),
            bytes.len()
        )),
    }
}

/// The first address from `at` where the mapped memory differs from
/// `bytes` (or is not mapped); `None` when it holds them all.
fn first_difference(mapper: &mut MemAccMapper, at: u64, bytes: &[u8]) -> Option<u64> {
    let mut buf = [0u8; 4096];
    let mut done = 0;
    while done < bytes.len() {
        let addr = at.checked_add(done as u64)?;
        let want = &bytes[done..(done + buf.len()).min(bytes.len())];
        let n = mapper.read(addr, MemSpace::ANY, &mut buf[..want.len()]);
        if let Some(i) = want[..n].iter().zip(&buf[..n]).position(|(a, b)| a != b) {
            return Some(addr + i as u64);
        }
        if n < want.len() {
            return Some(addr + n as u64);
        }
        done += n;
    }
    None
}

/// Maps the loadable segments of the ELF file `p` at their addresses or,
/// with `load`, moved so that the lowest one starts there
/// (position-independent code, a shared library). `None`: `p` is not an
/// ELF file with loadable segments (a raw memory dump may start with
/// ELF's magic number), to be mapped raw.
fn map_elf(
    mapper: &mut MemAccMapper,
    p: &Path,
    load: Option<u64>,
    warn: &mut dyn FnMut(String),
) -> Result<Option<usize>, String> {
    use goblin::elf::program_header::PT_LOAD;
    if !is_elf(p) {
        return Ok(None);
    }
    let data = std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    let elf = match goblin::elf::Elf::parse(&data) {
        Ok(elf) => elf,
        Err(_) if load.is_some() => return Ok(None),
        Err(e) => return Err(format!("{}: not an ELF file this program can read: {e}", p.display())),
    };
    let segments: Vec<_> = elf
        .program_headers
        .iter()
        .filter(|h| h.p_type == PT_LOAD && h.p_filesz > 0)
        .collect();
    let Some(lowest) = segments.iter().map(|h| h.p_vaddr).min() else {
        return Ok(None);
    };
    for h in &segments {
        let at = match load {
            Some(load) => h.p_vaddr.wrapping_sub(lowest).wrapping_add(load),
            None => h.p_vaddr,
        };
        let bytes = usize::try_from(h.p_offset)
            .ok()
            .zip(usize::try_from(h.p_filesz).ok())
            .and_then(|(o, n)| data.get(o..o.checked_add(n)?))
            .ok_or_else(|| {
                format!(
                    "{}: the segment at 0x{:x} runs past the end of the file",
                    p.display(),
                    h.p_vaddr
                )
            })?;
        map_region(mapper, p, at, h.p_offset, bytes, warn)?;
    }
    Ok(Some(segments.len()))
}

/// Whether the file starts with the ELF magic number.
pub fn is_elf(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// The command line with the single-dash options of earlier versions
/// replaced by their new names (`renames`: old, new), each replacement
/// noted on standard error once.
pub fn renamed_options(
    program: &str,
    args: impl IntoIterator<Item = OsString>,
    renames: &[(&str, &str)],
) -> Vec<OsString> {
    let mut noted: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    let mut after_dashdash = false;
    for a in args {
        if !after_dashdash && let Some(s) = a.to_str() {
            if s == "--" {
                after_dashdash = true;
            } else if let Some((old, new)) = renames.iter().find(|(old, _)| *old == s) {
                if !noted.contains(old) {
                    eprintln!("{program}: note: {old} is now {new}");
                    noted.push(old);
                }
                out.push(OsString::from(*new));
                continue;
            }
        }
        out.push(a);
    }
    out
}

/// Whether to show a progress bar (`--progress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Progress {
    /// When standard error is a terminal and the trace is large (1 MiB or
    /// more).
    #[default]
    Auto,
    /// Whenever standard error is a terminal, whatever the trace's size.
    Always,
    /// Never.
    Never,
}

/// Trace of at least this many bytes takes long enough to decode for a
/// progress bar.
pub const PROGRESS_MIN_BYTES: u64 = 1 << 20;

/// A progress bar for decoding `total` bytes of trace, on standard error;
/// hidden unless `when` (and for `Auto`, a terminal and a large trace)
/// says to show it.
pub fn progress_bar(total: u64, when: Progress) -> indicatif::ProgressBar {
    if !show_progress(total, when, std::io::stderr().is_terminal()) {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
    ) {
        pb.set_style(style);
    }
    pb
}

/// Whether a decode of `total` bytes shows a progress bar: never when
/// standard error is not a terminal (a log file or a pipe gets no
/// animation), else as `when` says.
pub fn show_progress(total: u64, when: Progress, stderr_is_terminal: bool) -> bool {
    stderr_is_terminal
        && match when {
            Progress::Always => true,
            Progress::Never => false,
            Progress::Auto => total >= PROGRESS_MIN_BYTES,
        }
}

/// A reader that advances a progress bar by the bytes read.
pub struct ProgressReader<R> {
    inner: R,
    bar: indicatif::ProgressBar,
}

impl<R> ProgressReader<R> {
    /// Reads `inner`, counting on `bar`.
    pub fn new(inner: R, bar: indicatif::ProgressBar) -> Self {
        ProgressReader { inner, bar }
    }
}

/// What the bar says once the input is all read but decoding threads may
/// still be at work: no time left to guess.
pub const PROGRESS_FINISHING: &str = "input read; finishing the decode";

impl<R: std::io::Read> std::io::Read for ProgressReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        // The end of the input is not the end of the work (worker threads
        // decode behind the reader): the estimate of time left ("0s")
        // gives way to a spinner that says so.
        if n == 0 && !buf.is_empty() && self.bar.message() != PROGRESS_FINISHING {
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bytes}/{total_bytes} {msg}")
            {
                self.bar.set_style(style);
            }
            self.bar.set_message(PROGRESS_FINISHING);
        }
        Ok(n)
    }
}

/// The files of a trace buffer read one after the other. A file that
/// cannot be opened or read is an error naming it.
pub struct FileSequence {
    files: Vec<PathBuf>,
    next: usize,
    current: Option<(std::fs::File, usize)>,
}

impl FileSequence {
    /// Reads `files` in order.
    pub fn new(files: Vec<PathBuf>) -> Self {
        FileSequence {
            files,
            next: 0,
            current: None,
        }
    }

    /// Total size of the files (those that can be read).
    pub fn total_len(&self) -> u64 {
        self.files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum()
    }

    /// The first file that is missing or not a regular file, and why.
    pub fn problem(&self) -> Option<String> {
        self.files.iter().find_map(|f| match std::fs::metadata(f) {
            Ok(m) if m.is_file() => None,
            Ok(_) => Some(format!("cannot read trace file {}: not a regular file", f.display())),
            Err(e) => Some(format!("cannot read trace file {}: {e}", f.display())),
        })
    }
}

impl std::io::Read for FileSequence {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some((f, i)) = self.current.as_mut() {
                let n = f
                    .read(buf)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", self.files[*i].display())))?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.current = None;
            }
            let Some(path) = self.files.get(self.next) else {
                return Ok(0);
            };
            let f = std::fs::File::open(path)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            self.current = Some((f, self.next));
            self.next += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_on_a_terminal_and_for_large_traces() {
        assert!(show_progress(PROGRESS_MIN_BYTES, Progress::Auto, true));
        assert!(!show_progress(PROGRESS_MIN_BYTES - 1, Progress::Auto, true));
        assert!(!show_progress(u64::MAX, Progress::Auto, false));
        assert!(show_progress(10, Progress::Always, true));
        assert!(!show_progress(10, Progress::Always, false));
        assert!(!show_progress(u64::MAX, Progress::Never, true));
    }

    #[test]
    fn image_arguments() {
        assert_eq!(
            "a.elf".parse::<ImageArg>(),
            Ok(ImageArg {
                path: "a.elf".into(),
                addr: None
            })
        );
        assert_eq!(
            "a.bin@0x8000".parse::<ImageArg>(),
            Ok(ImageArg {
                path: "a.bin".into(),
                addr: Some(0x8000)
            })
        );
        assert_eq!(
            "a.bin@4096".parse::<ImageArg>(),
            Ok(ImageArg {
                path: "a.bin".into(),
                addr: Some(4096)
            })
        );
        // An `@` that is not followed by an address is part of the name.
        assert_eq!(
            "me@host/a.elf".parse::<ImageArg>(),
            Ok(ImageArg {
                path: "me@host/a.elf".into(),
                addr: None
            })
        );
        assert_eq!(
            "a@b@0x10".parse::<ImageArg>(),
            Ok(ImageArg {
                path: "a@b".into(),
                addr: Some(0x10)
            })
        );
        let e = "a.bin@0x8zz".parse::<ImageArg>().unwrap_err();
        assert!(e.contains("'0x8zz' in 'a.bin@0x8zz' is not a load address"), "{e}");
        assert!("".parse::<ImageArg>().is_err());
    }

    #[test]
    fn trace_ids_are_seven_bit_and_not_reserved() {
        assert_eq!(parse_trace_id("0x10"), Ok(0x10));
        assert_eq!(parse_trace_id("111"), Ok(0x6f));
        for bad in ["0", "0x70", "0x7f", "0x105", "256"] {
            assert!(
                parse_trace_id(bad).unwrap_err().contains("trace IDs are 0x1 to 0x6f"),
                "{bad}"
            );
        }
        assert!(parse_trace_id("zz").unwrap_err().contains("'zz' is not a number"));
    }

    #[test]
    fn progress_says_finishing_once_the_input_is_read_not_zero_seconds_left() {
        use std::io::Read as _;
        let bar = indicatif::ProgressBar::hidden();
        bar.set_length(6);
        let mut r = ProgressReader::new(&b"abcdef"[..], bar.clone());
        let mut buf = [0u8; 4];
        assert_eq!(r.read(&mut buf).unwrap(), 4);
        assert_eq!(bar.message(), "");
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert_eq!((bar.position(), bar.message().as_ref()), (6, PROGRESS_FINISHING));
    }

    #[test]
    fn selected_ids_take_zero_and_not_reserved() {
        assert_eq!(parse_selected_id("0"), Ok(0));
        assert_eq!(parse_selected_id("0x6f"), Ok(0x6f));
        for bad in ["0x70", "0x7f", "256"] {
            assert_eq!(
                parse_selected_id(bad).unwrap_err(),
                format!("trace ID {bad} is out of range: trace IDs are 0x0 to 0x6f")
            );
        }
    }

    #[test]
    fn renamed_options_are_replaced_outside_values_after_dashdash() {
        let args = ["prog", "-ss_dir", "d", "-id", "5", "--", "-id"].map(OsString::from);
        let got = renamed_options("prog", args, &[("-ss_dir", "--snapshot"), ("-id", "--id")]);
        assert_eq!(
            got,
            ["prog", "--snapshot", "d", "--id", "5", "--", "-id"].map(OsString::from)
        );
    }
}
