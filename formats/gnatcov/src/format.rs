//! The binary ("QEMU") trace file format: reader and writer.
//!
//! A file is an Info section (a header of kind [`TraceKind::Info`], info
//! entries, an `Info_End` entry) followed by a Flat or History section (a
//! second header, then execution entries to the end of the file). Files
//! without an Info section (a single Flat, History or Decision_Map header)
//! are read too. Every multi-byte field is in the byte order the header's
//! `big_endian` byte names; execution entries are 8 bytes with 32-bit PCs
//! and 16 bytes with 64-bit PCs.
//!
//! [`TraceFile::parse`] borrows the file's bytes: info entries keep slices
//! of them. [`TraceFile::to_bytes`] writes a file back; a file read and
//! written again is byte for byte the same (padding bytes, which the reader
//! requires to be zero, are written as zero). One exception: the Info
//! header's pc-size byte, which gnatcov does not read, is accepted whatever
//! it holds and written as the execution section's size (4 or 8), as
//! gnatcov writes it.

use std::fmt;
use std::path::{Path, PathBuf};

/// The magic string every header starts with.
pub const MAGIC: &[u8; 12] = b"#QEMU-Traces";
/// The only format version.
pub const VERSION: u8 = 1;
/// Header size in bytes.
pub const HEADER_SIZE: usize = 20;

/// ELF machine numbers gnatcov knows traces for (and that we write).
pub const EM_ARM: u16 = 40;
/// ELF machine number of AArch64.
pub const EM_AARCH64: u16 = 183;
/// ELF machine number of RISC-V.
pub const EM_RISCV: u16 = 243;

/// What a section holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceKind {
    /// Executed blocks, merged (at most an entry per block and outcome).
    Flat,
    /// Executed blocks in execution order.
    History,
    /// Information entries about the run and the executable.
    Info,
    /// Addresses of conditional branches to trace in history mode.
    DecisionMap,
}

impl TraceKind {
    /// The kind with code `v` in a header (0 to 3).
    pub fn from_u8(v: u8) -> Option<TraceKind> {
        Some(match v {
            0 => TraceKind::Flat,
            1 => TraceKind::History,
            2 => TraceKind::Info,
            3 => TraceKind::DecisionMap,
            _ => return None,
        })
    }
    /// The kind's code in a header.
    pub fn to_u8(self) -> u8 {
        match self {
            TraceKind::Flat => 0,
            TraceKind::History => 1,
            TraceKind::Info => 2,
            TraceKind::DecisionMap => 3,
        }
    }
    /// The name gnatcov prints (Ada's image of its enumeration).
    pub fn image(self) -> &'static str {
        match self {
            TraceKind::Flat => "FLAT",
            TraceKind::History => "HISTORY",
            TraceKind::Info => "INFO",
            TraceKind::DecisionMap => "DECISION_MAP",
        }
    }
}

/// Byte order of a file's multi-byte fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Endian {
    /// Least significant byte first.
    #[default]
    Little,
    /// Most significant byte first.
    Big,
}

impl Endian {
    fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }
    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }
    fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }
    fn put_u16(self, out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        });
    }
    fn put_u32(self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        });
    }
    fn put_u64(self, out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        });
    }
}

/// Size of the target's program counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PcSize {
    /// 32-bit program counter (4-byte addresses, 8-byte entries).
    #[default]
    Bits32,
    /// 64-bit program counter (8-byte addresses, 16-byte entries).
    Bits64,
}

impl PcSize {
    /// Size of an address in bytes: 4 or 8.
    pub fn bytes(self) -> u8 {
        match self {
            PcSize::Bits32 => 4,
            PcSize::Bits64 => 8,
        }
    }
    /// Size of one execution entry.
    pub fn entry_size(self) -> usize {
        match self {
            PcSize::Bits32 => 8,
            PcSize::Bits64 => 16,
        }
    }
    /// Hex digits gnatcov prints for an address.
    pub fn hex_digits(self) -> usize {
        self.bytes() as usize * 2
    }
}

/// One header (20 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// What the section holds.
    pub kind: TraceKind,
    /// Size of an address.
    pub pc_size: PcSize,
    /// Byte order of the section's fields.
    pub endian: Endian,
    /// ELF `e_machine`; stored big endian whatever the file's byte order.
    pub machine: u16,
}

impl Header {
    /// A header of the given kind, address size, byte order and ELF machine.
    pub fn new(kind: TraceKind, pc_size: PcSize, endian: Endian, machine: u16) -> Header {
        Header {
            kind,
            pc_size,
            endian,
            machine,
        }
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(self.kind.to_u8());
        out.push(self.pc_size.bytes());
        out.push(matches!(self.endian, Endian::Big) as u8);
        out.extend_from_slice(&self.machine.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
}

/// Kind of an info entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InfoKind {
    /// Ends the info entries (never stored in [`TraceFile::infos`]).
    InfoEnd,
    /// The executable's file name.
    ExecFileName,
    /// The coverage options of the run.
    CoverageOptions,
    /// Free-form data the user attached to the run (gnatcov's `--tag`).
    UserData,
    /// When the trace was produced (a [`DateTime`] field).
    DateTime,
    /// The kernel's file name, for a program run on a kernel.
    KernelFileName,
    /// Size of the executable in bytes (ASCII decimal).
    ExecFileSize,
    /// The executable's modification time (`YYYY-MM-DD HH:MM:SS`).
    ExecFileTimeStamp,
    /// CRC32 of the executable (ASCII decimal).
    ExecFileCrc32,
    /// Context of the run (command line and the like), as gnatcov records it.
    CoverageContext,
    /// Size of the executable's code in bytes (ASCII decimal).
    ExecCodeSize,
}

impl InfoKind {
    /// The kind with code `v` (0 to 10).
    pub fn from_u32(v: u32) -> Option<InfoKind> {
        Some(match v {
            0 => InfoKind::InfoEnd,
            1 => InfoKind::ExecFileName,
            2 => InfoKind::CoverageOptions,
            3 => InfoKind::UserData,
            4 => InfoKind::DateTime,
            5 => InfoKind::KernelFileName,
            6 => InfoKind::ExecFileSize,
            7 => InfoKind::ExecFileTimeStamp,
            8 => InfoKind::ExecFileCrc32,
            9 => InfoKind::CoverageContext,
            10 => InfoKind::ExecCodeSize,
            _ => return None,
        })
    }
    /// The kind's code in the file.
    pub fn to_u32(self) -> u32 {
        match self {
            InfoKind::InfoEnd => 0,
            InfoKind::ExecFileName => 1,
            InfoKind::CoverageOptions => 2,
            InfoKind::UserData => 3,
            InfoKind::DateTime => 4,
            InfoKind::KernelFileName => 5,
            InfoKind::ExecFileSize => 6,
            InfoKind::ExecFileTimeStamp => 7,
            InfoKind::ExecFileCrc32 => 8,
            InfoKind::CoverageContext => 9,
            InfoKind::ExecCodeSize => 10,
        }
    }
    /// The name gnatcov prints.
    pub fn image(self) -> &'static str {
        match self {
            InfoKind::InfoEnd => "INFO_END",
            InfoKind::ExecFileName => "EXEC_FILE_NAME",
            InfoKind::CoverageOptions => "COVERAGE_OPTIONS",
            InfoKind::UserData => "USER_DATA",
            InfoKind::DateTime => "DATE_TIME",
            InfoKind::KernelFileName => "KERNEL_FILE_NAME",
            InfoKind::ExecFileSize => "EXEC_FILE_SIZE",
            InfoKind::ExecFileTimeStamp => "EXEC_FILE_TIME_STAMP",
            InfoKind::ExecFileCrc32 => "EXEC_FILE_CRC32",
            InfoKind::CoverageContext => "COVERAGE_CONTEXT",
            InfoKind::ExecCodeSize => "EXEC_CODE_SIZE",
        }
    }
}

/// A `Date_Time` value: year, month, day, hour, minute, second (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DateTime {
    /// Year.
    pub year: u16,
    /// Month, 1 to 12.
    pub month: u8,
    /// Day of the month, 1 to 31.
    pub day: u8,
    /// Hour, 0 to 23.
    pub hour: u8,
    /// Minute, 0 to 59.
    pub min: u8,
    /// Second, 0 to 59.
    pub sec: u8,
}

impl DateTime {
    /// From seconds since the Unix epoch (UTC).
    pub fn from_unix(secs: u64) -> DateTime {
        let days = (secs / 86400) as i64;
        let rem = secs % 86400;
        // Days to civil date (proleptic Gregorian).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
        DateTime {
            year,
            month,
            day,
            hour: (rem / 3600) as u8,
            min: (rem % 3600 / 60) as u8,
            sec: (rem % 60) as u8,
        }
    }
    /// The 8-byte field: year in the file's byte order, then the rest, then a pad byte.
    pub fn to_bytes(self, endian: Endian) -> [u8; 8] {
        let y = match endian {
            Endian::Little => self.year.to_le_bytes(),
            Endian::Big => self.year.to_be_bytes(),
        };
        [y[0], y[1], self.month, self.day, self.hour, self.min, self.sec, 0]
    }
    /// From the 8-byte field (see [`DateTime::to_bytes`]); `None` when it is not 8 bytes.
    pub fn from_bytes(b: &[u8], endian: Endian) -> Option<DateTime> {
        let b: &[u8; 8] = b.try_into().ok()?;
        Some(DateTime {
            year: endian.u16([b[0], b[1]]),
            month: b[2],
            day: b[3],
            hour: b[4],
            min: b[5],
            sec: b[6],
        })
    }
}

impl fmt::Display for DateTime {
    /// `YYYY-MM-DD HH:MM:SS`, the form of gnatcov's time stamps.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.min, self.sec
        )
    }
}

/// One info entry; `data` borrows the file's bytes (or the caller's).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InfoEntry<'a> {
    /// What the entry says.
    pub kind: InfoKind,
    /// The entry's bytes as stored (no padding).
    pub data: std::borrow::Cow<'a, [u8]>,
}

/// An info entry's value, typed by its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InfoValue<'a> {
    /// File names, options, user data, coverage context: text (not
    /// necessarily UTF-8).
    Text(&'a [u8]),
    /// A `DATE_TIME` value.
    DateTime(DateTime),
    /// Numbers gnatcov writes in ASCII decimal (size, CRC32, code size).
    Number(u64),
    /// A time stamp `YYYY-MM-DD HH:MM:SS`.
    TimeStamp(DateTime),
    /// Data that does not have its kind's form.
    Malformed(&'a [u8]),
}

impl<'a> InfoEntry<'a> {
    /// An entry of kind `kind` holding `data`.
    pub fn new(kind: InfoKind, data: impl Into<std::borrow::Cow<'a, [u8]>>) -> InfoEntry<'a> {
        InfoEntry {
            kind,
            data: data.into(),
        }
    }
    /// A number as gnatcov writes it (Ada's `'Image`: a leading space).
    pub fn number(kind: InfoKind, v: u64) -> InfoEntry<'static> {
        InfoEntry {
            kind,
            data: format!(" {v}").into_bytes().into(),
        }
    }
    /// Interprets the data by its kind.
    pub fn value(&self, endian: Endian) -> InfoValue<'_> {
        let d: &[u8] = &self.data;
        match self.kind {
            InfoKind::DateTime => DateTime::from_bytes(d, endian).map_or(InfoValue::Malformed(d), InfoValue::DateTime),
            InfoKind::ExecFileSize | InfoKind::ExecFileCrc32 | InfoKind::ExecCodeSize => {
                parse_ascii_number(d).map_or(InfoValue::Malformed(d), InfoValue::Number)
            }
            InfoKind::ExecFileTimeStamp => parse_time_stamp(d).map_or(InfoValue::Malformed(d), InfoValue::TimeStamp),
            _ => InfoValue::Text(d),
        }
    }
    /// Copies borrowed data, so the entry outlives its source.
    pub fn into_owned(self) -> InfoEntry<'static> {
        InfoEntry {
            kind: self.kind,
            data: self.data.into_owned().into(),
        }
    }
}

/// A decimal number with optional surrounding spaces.
pub fn parse_ascii_number(d: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(d).ok()?.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `YYYY-MM-DD HH:MM:SS`.
pub fn parse_time_stamp(d: &[u8]) -> Option<DateTime> {
    let s = std::str::from_utf8(d).ok()?.trim();
    let (date, time) = s.split_once(' ')?;
    let mut dp = date.split('-').map(|x| x.parse::<u16>().ok());
    let mut tp = time.split(':').map(|x| x.parse::<u8>().ok());
    let dt = DateTime {
        year: dp.next()??,
        month: dp.next()?? as u8,
        day: dp.next()?? as u8,
        hour: tp.next()??,
        min: tp.next()??,
        sec: tp.next()??,
    };
    (dp.next().is_none() && tp.next().is_none()).then_some(dt)
}

/// Operation bits of an execution entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Op(pub u8);

impl Op {
    /// Branch 0 (taken) at the block's last instruction.
    pub const BR0: u8 = 0x01;
    /// Branch 1 (fall-through) at the block's last instruction.
    pub const BR1: u8 = 0x02;
    /// Branch 2 (not used by gnatcov's Arm and RISC-V targets).
    pub const BR2: u8 = 0x04;
    /// Branch 3 (not used by gnatcov's Arm and RISC-V targets).
    pub const BR3: u8 = 0x08;
    /// `pc .. pc+size-1` was executed.
    pub const BLOCK: u8 = 0x10;
    /// An exception was taken in the block after `size` bytes.
    pub const FAULT: u8 = 0x20;
    /// A special entry: `size` says which.
    pub const SPECIAL: u8 = 0x80;

    /// Any of `bits` is set.
    pub fn has(self, bits: u8) -> bool {
        self.0 & bits != 0
    }
    /// The block `pc .. pc+size-1` was executed.
    pub fn block(self) -> bool {
        self.has(Op::BLOCK)
    }
    /// An exception was taken in the block.
    pub fn fault(self) -> bool {
        self.has(Op::FAULT)
    }
    /// The branch ending the block was taken.
    pub fn taken(self) -> bool {
        self.has(Op::BR0)
    }
    /// The branch ending the block fell through.
    pub fn fallthrough(self) -> bool {
        self.has(Op::BR1)
    }
    /// A special entry (only the SPECIAL bit).
    pub fn special(self) -> bool {
        self.0 == Op::SPECIAL
    }
}

/// One execution entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Start address of the block.
    pub pc: u64,
    /// Size of the block in bytes (for a special entry: which special it is).
    pub size: u16,
    /// What happened.
    pub op: Op,
}

impl Entry {
    /// An entry with operation bits `op`.
    pub fn new(pc: u64, size: u16, op: u8) -> Entry {
        Entry { pc, size, op: Op(op) }
    }
    /// Last byte of the block (`pc - 1` for an empty one, as gnatcov prints).
    pub fn last(&self, pc_size: PcSize) -> u64 {
        let l = self.pc.wrapping_add(self.size as u64).wrapping_sub(1);
        match pc_size {
            PcSize::Bits32 => l & 0xffff_ffff,
            PcSize::Bits64 => l,
        }
    }
}

/// What a special entry's `size` field says.
pub const SPECIAL_LOADADDR: u16 = 1;
/// Special: a shared object was loaded (its info entries follow).
pub const SPECIAL_LOAD_SHARED_OBJECT: u16 = 2;
/// Special: a shared object was unloaded.
pub const SPECIAL_UNLOAD_SHARED_OBJECT: u16 = 3;

/// One record of the execution section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// An executed block (or fault, or branch outcome).
    Exec(Entry),
    /// The kernel (or module) was loaded at `offset`.
    LoadAddr {
        /// Load offset of the executable.
        offset: u64,
    },
    /// A shared object was loaded at `base`; its info entries (file name,
    /// signature, code size) follow the special entry in the file.
    LoadSharedObject {
        /// Load address of the shared object.
        base: u64,
        /// Its info entries.
        infos: Vec<InfoEntry<'a>>,
    },
    /// The shared object loaded at `base` was unloaded.
    UnloadSharedObject {
        /// Load address of the shared object.
        base: u64,
    },
}

/// A whole trace file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceFile<'a> {
    /// The Info section's header, when the file has one.
    pub info_header: Option<Header>,
    /// Information entries of the Info section, in file order (without the end marker).
    pub infos: Vec<InfoEntry<'a>>,
    /// The execution section's header.
    pub header: Header,
    /// The execution section's records, in file order.
    pub records: Vec<Record<'a>>,
}

/// What went wrong reading a trace file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The file ends inside an item.
    #[error("file truncated: {what} needs {need} bytes, {have} left")]
    Truncated {
        /// The item being read (`header`, `info entry`...).
        what: &'static str,
        /// Bytes the item needs.
        need: usize,
        /// Bytes left in the file.
        have: usize,
    },
    /// The file does not start with `#QEMU-Traces`.
    #[error("bad magic (expected \"#QEMU-Traces\")")]
    BadMagic,
    /// A header's version is not 1.
    #[error("bad version {0} (expected 1)")]
    BadVersion(u8),
    /// A header's trace kind is not 0 to 3.
    #[error("bad trace kind {0} (expected 0 to 3)")]
    BadKind(u8),
    /// A header's endianness byte is not 0 or 1.
    #[error("bad endianness byte {0} (expected 0 or 1)")]
    BadEndian(u8),
    /// A header's PC size is not 4 or 8.
    #[error("bad pc size {0} (expected 4 or 8)")]
    BadPcSize(u8),
    /// The header after the Info section is not FLAT or HISTORY.
    #[error("invalid second header kind {0} (expected FLAT or HISTORY)")]
    BadSecondKind(&'static str),
    /// An info entry of an unknown kind.
    #[error("unknown trace info kind 0x{0:x}")]
    BadInfoKind(u32),
    /// An info entry's data runs past the end of the file.
    #[error("info entry of {len} bytes runs past the end of the file ({have} bytes left)")]
    InfoPastEnd {
        /// The entry's length field.
        len: u32,
        /// Bytes left in the file.
        have: usize,
    },
    /// The end marker of the info entries has a non-zero length.
    #[error("bad end info length {0} (expected 0)")]
    BadEndLength(u32),
    /// Padding after an info entry is not zero.
    #[error("bad info padding (expected zero bytes)")]
    BadPadding,
    /// An execution entry is cut short by the end of the file.
    #[error("execution entry runs past the end of the file ({have} of {need} bytes)")]
    EntryPastEnd {
        /// Bytes of an entry.
        need: usize,
        /// Bytes left in the file.
        have: usize,
    },
    /// A special entry with an unknown code.
    #[error("unknown special trace entry 0x{0:x}")]
    BadSpecial(u16),
}

/// A [`FormatError`] with where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file, when known.
    pub file: Option<PathBuf>,
    /// Byte offset in the file of the item that is wrong.
    pub offset: usize,
    /// What is wrong.
    pub kind: FormatError,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "{}: byte {}: {}", p.display(), self.offset, self.kind),
            None => write!(f, "byte {}: {}", self.offset, self.kind),
        }
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// The same error, naming `file`.
    pub fn in_file(mut self, file: impl AsRef<Path>) -> ParseError {
        self.file = Some(file.as_ref().to_path_buf());
        self
    }
}

/// Reading cursor over borrowed bytes.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn err(&self, at: usize, kind: FormatError) -> ParseError {
        ParseError {
            file: None,
            offset: at,
            kind,
        }
    }
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ParseError> {
        let have = self.data.len() - self.pos;
        if have < n {
            return Err(self.err(self.pos, FormatError::Truncated { what, need: n, have }));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }
}

fn read_header(c: &mut Cursor<'_>) -> Result<Header, ParseError> {
    let at = c.pos;
    let have = c.left();
    // Check the magic on what there is, so a short non-trace file says "bad magic".
    let n = have.min(MAGIC.len());
    if c.data[at..at + n] != MAGIC[..n] {
        return Err(c.err(at, FormatError::BadMagic));
    }
    let h = c.take(HEADER_SIZE, "header")?;
    if h[12] != VERSION {
        return Err(c.err(at + 12, FormatError::BadVersion(h[12])));
    }
    let kind = TraceKind::from_u8(h[13]).ok_or_else(|| c.err(at + 13, FormatError::BadKind(h[13])))?;
    let pc_size = match h[14] {
        4 => PcSize::Bits32,
        8 => PcSize::Bits64,
        // The Info header's pc size is not used: gnatcov only checks the second one.
        _ if kind == TraceKind::Info => PcSize::Bits32,
        v => return Err(c.err(at + 14, FormatError::BadPcSize(v))),
    };
    let endian = match h[15] {
        0 => Endian::Little,
        1 => Endian::Big,
        v => return Err(c.err(at + 15, FormatError::BadEndian(v))),
    };
    Ok(Header {
        kind,
        pc_size,
        endian,
        machine: u16::from_be_bytes([h[16], h[17]]),
    })
}

/// Info entries up to and including `Info_End`.
fn read_infos<'a>(c: &mut Cursor<'a>, endian: Endian) -> Result<Vec<InfoEntry<'a>>, ParseError> {
    let mut infos = Vec::new();
    loop {
        let at = c.pos;
        let h = c.take(8, "info entry header")?;
        let kind_raw = endian.u32([h[0], h[1], h[2], h[3]]);
        let len = endian.u32([h[4], h[5], h[6], h[7]]);
        let kind = InfoKind::from_u32(kind_raw).ok_or_else(|| c.err(at, FormatError::BadInfoKind(kind_raw)))?;
        if kind == InfoKind::InfoEnd {
            if len != 0 {
                return Err(c.err(at + 4, FormatError::BadEndLength(len)));
            }
            return Ok(infos);
        }
        let pad = (4 - (len as usize) % 4) % 4;
        if c.left() < len as usize + pad {
            return Err(c.err(at, FormatError::InfoPastEnd { len, have: c.left() }));
        }
        let data = c.take(len as usize, "info data")?;
        let pad_at = c.pos;
        if c.take(pad, "info padding")?.iter().any(|&b| b != 0) {
            return Err(c.err(pad_at, FormatError::BadPadding));
        }
        infos.push(InfoEntry {
            kind,
            data: data.into(),
        });
    }
}

fn read_entry(c: &mut Cursor<'_>, h: &Header) -> Result<Entry, ParseError> {
    let at = c.pos;
    let need = h.pc_size.entry_size();
    if c.left() < need {
        return Err(c.err(at, FormatError::EntryPastEnd { need, have: c.left() }));
    }
    let b = c.take(need, "execution entry")?;
    let e = h.endian;
    Ok(match h.pc_size {
        PcSize::Bits32 => Entry {
            pc: e.u32([b[0], b[1], b[2], b[3]]) as u64,
            size: e.u16([b[4], b[5]]),
            op: Op(b[6]),
        },
        PcSize::Bits64 => Entry {
            pc: e.u64([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            size: e.u16([b[8], b[9]]),
            op: Op(b[10]),
        },
    })
}

impl<'a> TraceFile<'a> {
    /// Parses a whole file. Errors give the byte offset of what is wrong
    /// (add the file name with [`ParseError::in_file`], or use [`read_file`]).
    pub fn parse(data: &'a [u8]) -> Result<TraceFile<'a>, ParseError> {
        let mut c = Cursor { data, pos: 0 };
        let first = read_header(&mut c)?;
        let (info_header, infos, header) = if first.kind == TraceKind::Info {
            let infos = read_infos(&mut c, first.endian)?;
            let at = c.pos;
            let second = read_header(&mut c)?;
            if !matches!(second.kind, TraceKind::Flat | TraceKind::History) {
                return Err(c.err(at + 13, FormatError::BadSecondKind(second.kind.image())));
            }
            (Some(first), infos, second)
        } else {
            (None, Vec::new(), first)
        };
        let mut records = Vec::with_capacity(c.left() / header.pc_size.entry_size());
        while c.left() > 0 {
            let at = c.pos;
            let e = read_entry(&mut c, &header)?;
            if !e.op.special() {
                records.push(Record::Exec(e));
                continue;
            }
            records.push(match e.size {
                SPECIAL_LOADADDR => Record::LoadAddr { offset: e.pc },
                SPECIAL_LOAD_SHARED_OBJECT => Record::LoadSharedObject {
                    base: e.pc,
                    infos: read_infos(&mut c, header.endian)?,
                },
                SPECIAL_UNLOAD_SHARED_OBJECT => Record::UnloadSharedObject { base: e.pc },
                s => return Err(c.err(at, FormatError::BadSpecial(s))),
            });
        }
        Ok(TraceFile {
            info_header,
            infos,
            header,
            records,
        })
    }

    /// A new flat trace file with an Info section.
    pub fn new_flat(pc_size: PcSize, endian: Endian, machine: u16) -> TraceFile<'static> {
        TraceFile {
            info_header: Some(Header::new(TraceKind::Info, pc_size, endian, machine)),
            infos: Vec::new(),
            header: Header::new(TraceKind::Flat, pc_size, endian, machine),
            records: Vec::new(),
        }
    }

    /// The first info entry of `kind`.
    pub fn info(&self, kind: InfoKind) -> Option<&InfoEntry<'a>> {
        self.infos.iter().find(|i| i.kind == kind)
    }

    /// The execution entries (special entries left out).
    pub fn entries(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.records.iter().filter_map(|r| match r {
            Record::Exec(e) => Some(e),
            _ => None,
        })
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.records.len() * self.header.pc_size.entry_size());
        if let Some(ih) = &self.info_header {
            Header {
                pc_size: self.header.pc_size,
                ..*ih
            }
            .write(&mut out);
            write_infos(&mut out, ih.endian, &self.infos);
        }
        self.header.write(&mut out);
        let h = &self.header;
        for r in &self.records {
            match r {
                Record::Exec(e) => write_entry(&mut out, h, e),
                Record::LoadAddr { offset } => {
                    write_entry(&mut out, h, &Entry::new(*offset, SPECIAL_LOADADDR, Op::SPECIAL))
                }
                Record::LoadSharedObject { base, infos } => {
                    write_entry(&mut out, h, &Entry::new(*base, SPECIAL_LOAD_SHARED_OBJECT, Op::SPECIAL));
                    write_infos(&mut out, h.endian, infos);
                }
                Record::UnloadSharedObject { base } => write_entry(
                    &mut out,
                    h,
                    &Entry::new(*base, SPECIAL_UNLOAD_SHARED_OBJECT, Op::SPECIAL),
                ),
            }
        }
        out
    }

    /// Copies borrowed data, so the trace file outlives its source.
    pub fn into_owned(self) -> TraceFile<'static> {
        TraceFile {
            info_header: self.info_header,
            infos: self.infos.into_iter().map(InfoEntry::into_owned).collect(),
            header: self.header,
            records: self
                .records
                .into_iter()
                .map(|r| match r {
                    Record::Exec(e) => Record::Exec(e),
                    Record::LoadAddr { offset } => Record::LoadAddr { offset },
                    Record::LoadSharedObject { base, infos } => Record::LoadSharedObject {
                        base,
                        infos: infos.into_iter().map(InfoEntry::into_owned).collect(),
                    },
                    Record::UnloadSharedObject { base } => Record::UnloadSharedObject { base },
                })
                .collect(),
        }
    }
}

fn write_infos(out: &mut Vec<u8>, endian: Endian, infos: &[InfoEntry<'_>]) {
    for i in infos.iter().filter(|i| i.kind != InfoKind::InfoEnd) {
        endian.put_u32(out, i.kind.to_u32());
        endian.put_u32(out, i.data.len() as u32);
        out.extend_from_slice(&i.data);
        out.resize(out.len() + (4 - i.data.len() % 4) % 4, 0);
    }
    endian.put_u32(out, 0);
    endian.put_u32(out, 0);
}

fn write_entry(out: &mut Vec<u8>, h: &Header, e: &Entry) {
    match h.pc_size {
        PcSize::Bits32 => {
            h.endian.put_u32(out, e.pc as u32);
            h.endian.put_u16(out, e.size);
            out.extend_from_slice(&[e.op.0, 0]);
        }
        PcSize::Bits64 => {
            h.endian.put_u64(out, e.pc);
            h.endian.put_u16(out, e.size);
            out.extend_from_slice(&[e.op.0, 0, 0, 0, 0, 0]);
        }
    }
}

/// Reads and parses a file; errors name it.
pub fn read_file(path: impl AsRef<Path>) -> Result<TraceFile<'static>, ReadError> {
    let path = path.as_ref();
    let data = std::fs::read(path).map_err(|e| ReadError::Io {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    let t = TraceFile::parse(&data).map_err(|e| ReadError::Format(e.in_file(path)))?;
    Ok(t.into_owned())
}

/// Reading a trace file failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("{}: {msg}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's message.
        msg: String,
    },
    /// The file's contents are not a valid trace file.
    #[error("{0}")]
    Format(ParseError),
}
