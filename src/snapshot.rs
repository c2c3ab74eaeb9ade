//! Arm (DS-5) trace snapshots: reading the directory, and building a decode
//! tree from it.
//!
//! A snapshot is `snapshot.ini` (device list, trace metadata file), one
//! `.ini` file per device (class, type, registers, memory dumps) and the
//! trace metadata (`trace.ini`: buffers, which source writes to which
//! buffer, which core each source traces). Malformed or incomplete files
//! give a [`SnapshotError`] naming the file, the line and what was
//! expected; problems that leave the snapshot usable are
//! [`SnapshotWarning`]s.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::deformatter::DeformatterConfig;
use crate::fileio::{FileProblem, check_regular_file, read_regular_file};
use crate::memory::MemSpace;

/// Why a snapshot could not be loaded: the file, the line where the
/// problem is (when it is in a line), and what was expected, in words.
///
/// Displayed as `path:line: message` (or `path: message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotError {
    /// The file at fault (an `.ini` file, or a file one of them names).
    pub path: PathBuf,
    /// Line (1-based) in `path`, when the problem is on one line.
    pub line: Option<usize>,
    /// What is wrong and what was expected.
    pub message: String,
    /// The kind of I/O error, when the file could not be read.
    pub io: Option<std::io::ErrorKind>,
}

impl SnapshotError {
    fn file(path: &Path, p: FileProblem) -> SnapshotError {
        SnapshotError {
            path: path.to_path_buf(),
            line: None,
            message: p.message,
            io: Some(p.kind),
        }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// What a [`SnapshotWarning`] is about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarningKind {
    /// A `[section]` header repeats the name of an earlier one (on
    /// `first_line`): its entries are read as part of the first.
    DuplicateSection {
        /// The section name as written on the repeated header.
        section: String,
        /// Line of the first header of that name.
        first_line: usize,
    },
    /// A key repeats in its section (first given on `first_line`): the
    /// first value is used, this line is ignored.
    DuplicateKey {
        /// The section holding the key.
        section: String,
        /// The key as written on the repeated line.
        key: String,
        /// Line of the first `key=`.
        first_line: usize,
    },
    /// A `key=value` line before the first `[section]` header: it belongs
    /// to no section and is ignored.
    OutsideSection {
        /// The key as written.
        key: String,
    },
    /// A memory dump file cannot be read: the memory it holds is not
    /// mapped, and decoding stops where the program runs into it.
    MissingDump {
        /// The dump file, relative to the snapshot directory.
        file: String,
        /// Its path as the snapshot forms it.
        path: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// A memory dump section maps more bytes than its file holds from its
    /// offset: the dump is not mapped.
    DumpOutsideFile {
        /// The dump file, relative to the snapshot directory.
        file: String,
        /// `offset=` of the section.
        offset: u64,
        /// `length=` of the section.
        length: u64,
        /// Bytes the file holds (rounded down to an even number, as
        /// OpenCSD reads it).
        file_len: u64,
    },
    /// A dump section's `space=` names no memory space known: it is mapped
    /// for any space.
    UnknownMemorySpace {
        /// The dump section.
        section: String,
        /// The value as written.
        space: String,
    },
    /// A formatted (`coresight`, memory-aligned) trace buffer does not end
    /// on a 16-byte frame boundary: its whole frames are decoded, the
    /// `length` bytes at byte `offset` of the buffer (its files read one
    /// after another) are not.
    PartialFrame {
        /// The buffer name (`ETB_0`).
        buffer: String,
        /// Offset of the incomplete frame in the buffer.
        offset: u64,
        /// Bytes of the incomplete frame.
        length: u64,
    },
    /// A device file of `[device_list]` cannot be read: the device is left
    /// out, and the sources it describes (or traces) are not decoded.
    UnreadableDevice {
        /// The device file, relative to the snapshot directory.
        file: String,
        /// Its path as the snapshot forms it.
        path: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },
    /// A device file is malformed (the warning's line is where): the
    /// device is left out, as with [`WarningKind::UnreadableDevice`].
    InvalidDevice {
        /// The device file, relative to the snapshot directory.
        file: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// Two device files describe a device of the same name: the later one
    /// is used (OpenCSD keeps the last), in the place of the first.
    DuplicateDevice {
        /// The device name.
        name: String,
        /// The file that gave it first.
        first_file: String,
        /// The file that gives it again.
        file: String,
    },
    /// A buffer's `format=` is missing or names no known format: the
    /// buffer is decoded as `coresight` (16-byte frames), as OpenCSD does.
    BufferFormat {
        /// The buffer section (`buffer0`).
        section: String,
        /// The value as written; `None` when there is no `format=`.
        format: Option<String>,
    },
    /// A register's value is not a number: it is read as C's `strtoul`
    /// reads it (the number its text starts with, else 0), as OpenCSD does.
    UnparsableRegister {
        /// The register name (`TRCIDR0`).
        register: String,
        /// The value as written.
        value: String,
        /// The value used.
        read_as: u64,
    },
}

/// A problem in a snapshot that does not stop it loading, with the file
/// and line it is in. [`Snapshot::load`] returns them in
/// [`Snapshot::warnings`] and also logs them (`log::warn!`).
///
/// Displayed as `path:line: warning: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotWarning {
    /// The file the warning is about: the `.ini` file, or for
    /// [`WarningKind::PartialFrame`] the buffer's (last) data file.
    pub path: PathBuf,
    /// Line (1-based) in `path`, where there is one.
    pub line: Option<usize>,
    /// What was found.
    pub kind: WarningKind,
}

impl fmt::Display for SnapshotWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: warning: ", self.path.display())?,
            None => write!(f, "{}: warning: ", self.path.display())?,
        }
        match &self.kind {
            WarningKind::DuplicateSection { section, first_line } => write!(
                f,
                "section [{section}] appears again (first on line {first_line}); its entries are read as part of the first"
            ),
            WarningKind::DuplicateKey {
                section,
                key,
                first_line,
            } => write!(
                f,
                "key '{key}' appears again in [{section}] (first on line {first_line}); the first value is used and this line is ignored"
            ),
            WarningKind::OutsideSection { key } => {
                write!(
                    f,
                    "'{key}=' comes before any [section] header; it is ignored (expected it inside a section)"
                )
            }
            WarningKind::MissingDump { file, path, reason } => write!(
                f,
                "memory dump file '{file}' cannot be read ({}: {reason}); the memory it holds is not mapped",
                path.display()
            ),
            WarningKind::DumpOutsideFile {
                file,
                offset,
                length,
                file_len,
            } => write!(
                f,
                "memory dump '{file}': {length} bytes from offset {offset} run past the end of the file ({file_len} bytes); the dump is not mapped"
            ),
            WarningKind::UnknownMemorySpace { section, space } => {
                write!(
                    f,
                    "[{section}] space={space}: unknown memory space (expected a name such as EL1N, EL2, S, N or ANY); mapped for any space"
                )
            }
            WarningKind::PartialFrame { buffer, offset, length } => write!(
                f,
                "trace buffer {buffer} ends with {length} bytes at byte {offset} that are not a whole 16-byte frame; the frames before them are decoded, these bytes are not"
            ),
            WarningKind::UnreadableDevice { file, path, reason } => write!(
                f,
                "device file '{file}' cannot be read ({}: {reason}); its device is left out and the sources it describes are not decoded",
                path.display()
            ),
            WarningKind::InvalidDevice { file, reason } => write!(
                f,
                "{reason}; device file '{file}' is left out and the sources it describes are not decoded"
            ),
            WarningKind::DuplicateDevice { name, first_file, file } if first_file == file => write!(
                f,
                "device file '{file}' is listed again; its device '{name}' is read once (expected each device once)"
            ),
            WarningKind::DuplicateDevice { name, first_file, file } => write!(
                f,
                "device '{name}' of '{file}' was already given by '{first_file}'; the later one is used (expected each device once)"
            ),
            WarningKind::BufferFormat { section, format } => match format {
                None => write!(
                    f,
                    "[{section}] has no 'format=' (expected coresight, dstream_coresight or source_data); the buffer is decoded as coresight"
                ),
                Some(v) => write!(
                    f,
                    "[{section}] format={v}: unknown buffer format (expected coresight, dstream_coresight or source_data); the buffer is decoded as coresight"
                ),
            },
            WarningKind::UnparsableRegister {
                register,
                value,
                read_as,
            } => write!(
                f,
                "register {register}: expected a number (decimal or 0x hex), found '{value}'; read as 0x{read_as:x}"
            ),
        }
    }
}

/// One `key=value` line of an `.ini` file.
struct IniEntry {
    /// The key then the value, in one allocation (a device file has
    /// hundreds of registers).
    text: String,
    key_len: usize,
    /// Line (1-based).
    line: usize,
}

impl IniEntry {
    fn new(key: &str, value: &str, line: usize) -> IniEntry {
        let mut text = String::with_capacity(key.len() + value.len());
        text.push_str(key);
        text.push_str(value);
        IniEntry {
            text,
            key_len: key.len(),
            line,
        }
    }

    fn key(&self) -> &str {
        &self.text[..self.key_len]
    }

    fn value(&self) -> &str {
        &self.text[self.key_len..]
    }
}

/// `str::trim`, with the usual case (nothing to trim) decided from the
/// first and last bytes.
fn trim(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(&a), Some(&b)) if a.is_ascii_graphic() && b.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

/// `s` split at the first `c` (an ASCII character), without it.
fn split_at_byte(s: &str, c: u8) -> Option<(&str, &str)> {
    let i = s.as_bytes().iter().position(|&b| b == c)?;
    Some((&s[..i], &s[i + 1..]))
}

/// The lines of `text`, split at each `\n` (a `\r` before it stays, for
/// [`trim`] to drop).
fn ini_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let r = rest?;
        match split_at_byte(r, b'\n') {
            Some((line, more)) => {
                rest = Some(more);
                Some(line)
            }
            None => {
                rest = None;
                (!r.is_empty()).then_some(r)
            }
        }
    })
}

/// A key's hash, ignoring ASCII case, under the file's random hash keys:
/// the keys seen in a section are found by it, without a lower-case copy
/// of each.
fn key_hash(state: &std::hash::RandomState, key: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = state.build_hasher();
    let mut buf = [0u8; 32];
    for chunk in key.as_bytes().chunks(buf.len()) {
        let low = &mut buf[..chunk.len()];
        low.copy_from_slice(chunk);
        low.make_ascii_lowercase();
        h.write(low);
    }
    h.finish()
}

/// Hashes that are already (random-keyed) hashes, used as they are.
#[derive(Default)]
struct PreHashed(u64);

impl std::hash::Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// Keys seen in one section: key hash -> index of the first entry with it.
type SeenKeys = HashMap<u64, usize, std::hash::BuildHasherDefault<PreHashed>>;

/// One `[section]` of an `.ini` file, with the entries of any later
/// section of the same name.
struct IniSection {
    name: String,
    /// Line (1-based) of its header.
    line: usize,
    entries: Vec<IniEntry>,
}

/// Sections whose keys may repeat: a core traced by several sources
/// (multi-session captures) has one `core=source` line per source.
const MULTI_VALUE_SECTIONS: [&str; 1] = ["core_trace_sources"];

/// An `.ini` file, parsed once and indexed by section name
/// (case-insensitive), so that every lookup is a hash probe and loading
/// stays linear in the file (24,000 dump sections used to take 22 s when
/// each lookup rescanned the file).
///
/// The syntax is the one DS-5 snapshots use: `[section]` headers,
/// `key=value` lines (keys may hold `:` and `(`, as `PC(size:64)`),
/// comment lines starting with `;` or `#`, blank lines. Anything else is
/// an error naming the line. A repeated section is read as part of the
/// first one, and a repeated key keeps its first value; each is a
/// warning naming both lines, as is an entry before any section.
struct IniText {
    path: PathBuf,
    /// Sections in file order (entries before the first header are ignored).
    sections: Vec<IniSection>,
    /// Lower-case name -> index in `sections`, once there are more than
    /// [`SCAN_LIMIT`] sections; empty until then, while sections are
    /// looked for by scanning.
    by_name: HashMap<String, usize>,
}

/// Sections, or keys in a section, found by scanning rather than by hash
/// up to this many: most files have a handful, and a hash map costs more
/// to build than the scans it saves. Past it, lookups are hashed, so that
/// loading stays linear in the file.
const SCAN_LIMIT: usize = 16;

impl IniText {
    fn load(path: PathBuf, warnings: &mut Vec<SnapshotWarning>) -> Result<IniText, SnapshotError> {
        let bytes = read_regular_file(&path).map_err(|p| SnapshotError::file(&path, p))?;
        // Checked as UTF-8 first: `from_utf8_lossy` takes longer over
        // text that is valid.
        match std::str::from_utf8(&bytes) {
            Ok(text) => IniText::parse(path, text, warnings),
            Err(_) => IniText::parse(path, &String::from_utf8_lossy(&bytes), warnings),
        }
    }

    fn parse(path: PathBuf, text: &str, warnings: &mut Vec<SnapshotWarning>) -> Result<IniText, SnapshotError> {
        // A UTF-8 byte-order mark (written by some Windows editors) is not
        // part of the first section name.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut ini = IniText {
            path,
            sections: Vec::new(),
            by_name: HashMap::new(),
        };
        // The section entries go to, and its keys seen so far (lower case
        // -> line), unless its keys may repeat.
        let mut current: Option<usize> = None;
        let mut keys: Vec<SeenKeys> = Vec::new();
        let key_state = std::hash::RandomState::new();
        for (i, raw) in ini_lines(text).enumerate() {
            let line = i + 1;
            let t = trim(raw);
            if t.is_empty() || t.starts_with(';') || t.starts_with('#') {
                continue;
            }
            if let Some(rest) = t.strip_prefix('[') {
                let Some((name, after)) = rest.split_once(']') else {
                    return Err(ini.err(
                        Some(line),
                        format!("expected a section header '[name]', found '{t}' (no closing ']')"),
                    ));
                };
                let after = after.trim();
                if !(after.is_empty() || after.starts_with(';') || after.starts_with('#')) {
                    return Err(ini.err(
                        Some(line),
                        format!("expected nothing after the section header [{name}], found '{after}'"),
                    ));
                }
                let name = name.trim();
                if name.is_empty() {
                    return Err(ini.err(Some(line), "expected a section name between '[' and ']'"));
                }
                match ini.section_index(name) {
                    Some(first) => {
                        warnings.push(ini.warning(
                            Some(line),
                            WarningKind::DuplicateSection {
                                section: name.to_string(),
                                first_line: ini.sections[first].line,
                            },
                        ));
                        current = Some(first);
                    }
                    None => {
                        if ini.sections.len() >= SCAN_LIMIT {
                            if ini.by_name.is_empty() {
                                // From here on sections are hashed.
                                for (i, s) in ini.sections.iter().enumerate() {
                                    ini.by_name.insert(s.name.to_ascii_lowercase(), i);
                                }
                            }
                            ini.by_name.insert(name.to_ascii_lowercase(), ini.sections.len());
                        }
                        current = Some(ini.sections.len());
                        ini.sections.push(IniSection {
                            name: name.to_string(),
                            line,
                            entries: Vec::new(),
                        });
                        keys.push(SeenKeys::default());
                    }
                }
                continue;
            }
            let Some((key, value)) = split_at_byte(t, b'=') else {
                return Err(ini.err(
                    Some(line),
                    format!("expected 'key=value', a '[section]' header or a comment (';' or '#'), found '{t}'"),
                ));
            };
            let key = trim(key);
            if key.is_empty() {
                return Err(ini.err(Some(line), format!("expected a key before '=', found '{t}'")));
            }
            // Entries before the first section belong to no section that a
            // snapshot defines.
            let Some(s) = current else {
                warnings.push(ini.warning(Some(line), WarningKind::OutsideSection { key: key.to_string() }));
                continue;
            };
            let section = &ini.sections[s];
            if !MULTI_VALUE_SECTIONS
                .iter()
                .any(|m| section.name.eq_ignore_ascii_case(m))
            {
                let entries = &section.entries;
                let seen = &mut keys[s];
                if seen.is_empty() && entries.len() >= SCAN_LIMIT {
                    // From here on the section's keys are hashed. (Its
                    // entries' keys are all different.)
                    for (i, e) in entries.iter().enumerate() {
                        seen.entry(key_hash(&key_state, e.key())).or_insert(i);
                    }
                }
                let scan = || {
                    entries
                        .iter()
                        .find(|e| e.key().eq_ignore_ascii_case(key))
                        .map(|e| e.line)
                };
                let first = if seen.is_empty() {
                    scan()
                } else {
                    match seen.entry(key_hash(&key_state, key)) {
                        std::collections::hash_map::Entry::Occupied(o) => {
                            let at = *o.get();
                            // Another key with the same hash (no file makes
                            // one on purpose: the hash keys are random):
                            // look at them all.
                            let same = entries[at].key().eq_ignore_ascii_case(key);
                            if same { Some(entries[at].line) } else { scan() }
                        }
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(entries.len());
                            None
                        }
                    }
                };
                if let Some(first_line) = first {
                    let kind = WarningKind::DuplicateKey {
                        section: section.name.clone(),
                        key: key.to_string(),
                        first_line,
                    };
                    warnings.push(ini.warning(Some(line), kind));
                    continue;
                }
            }
            ini.sections[s].entries.push(IniEntry::new(key, trim(value), line));
        }
        Ok(ini)
    }

    /// Index in `sections` of the section named `name` (any case).
    fn section_index(&self, name: &str) -> Option<usize> {
        if self.by_name.is_empty() {
            self.sections.iter().position(|s| s.name.eq_ignore_ascii_case(name))
        } else {
            self.by_name.get(&name.to_ascii_lowercase()).copied()
        }
    }

    /// Line (1-based) of the `[section]` header.
    fn section_line(&self, section: &str) -> Option<usize> {
        self.section_index(section).map(|i| self.sections[i].line)
    }

    /// Line of `key=` inside `section`.
    fn key_line(&self, section: &str, key: &str) -> Option<usize> {
        let entries = self.section(section)?;
        entries
            .iter()
            .find(|e| e.key().eq_ignore_ascii_case(key))
            .map(|e| e.line)
    }

    fn err(&self, line: Option<usize>, message: impl Into<String>) -> SnapshotError {
        SnapshotError {
            path: self.path.clone(),
            line,
            message: message.into(),
            io: None,
        }
    }

    fn warning(&self, line: Option<usize>, kind: WarningKind) -> SnapshotWarning {
        SnapshotWarning {
            path: self.path.clone(),
            line,
            kind,
        }
    }

    /// Sections as (name, entries) in file order.
    fn sections(&self) -> impl Iterator<Item = (&str, &[IniEntry])> {
        self.sections.iter().map(|s| (s.name.as_str(), s.entries.as_slice()))
    }

    fn section(&self, name: &str) -> Option<&[IniEntry]> {
        self.section_index(name).map(|i| self.sections[i].entries.as_slice())
    }

    fn value<'a>(entries: &'a [IniEntry], key: &str) -> Option<&'a str> {
        entries
            .iter()
            .find(|e| e.key().eq_ignore_ascii_case(key))
            .map(|e| e.value())
    }
}

/// The number C's `strtoul(s, 0, 0)` reads from the start of `s` (the
/// longest run of digits after an optional sign and `0x`/`0` prefix; 0
/// when there is none; `u64::MAX` on overflow), as OpenCSD reads
/// register values.
fn strtoul(s: &str) -> u64 {
    let s = s.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let b = s.as_bytes();
    let (radix, digits) = if b.len() > 2 && b[0] == b'0' && (b[1] | 0x20) == b'x' && b[2].is_ascii_hexdigit() {
        (16, &s[2..])
    } else if b.first() == Some(&b'0') {
        (8, s)
    } else {
        (10, s)
    };
    let mut n: u64 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        match n
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => n = v,
            None => return u64::MAX,
        }
    }
    if neg { n.wrapping_neg() } else { n }
}

/// Parses a number as C's `strtoull(s, 0, 0)` reads a whole field:
/// `0x` hex, leading `0` octal, or decimal.
pub fn parse_number(s: &str) -> Option<u64> {
    let s = trim(s);
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// A register value from a device file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegValue {
    /// Name without decorations (`TRCIDR0`).
    pub name: String,
    /// The decoration as written (`id:0x78`, `size:64`...), if any.
    pub decoration: Option<String>,
    /// The value.
    pub value: u64,
}

/// A memory dump section of a core's device file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpDef {
    /// File, relative to the snapshot directory.
    pub file: String,
    /// Address the dump is mapped at.
    pub address: u64,
    /// Bytes to map (0: the whole file from `offset`).
    pub length: u64,
    /// Offset into the file.
    pub offset: u64,
    /// Memory space name as written (empty: any).
    pub space: String,
}

/// One device of the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Device name (`cpu_0`, `ETM_0`), unique in the snapshot.
    pub name: String,
    /// `core`, `trace_source`, ...
    pub class: String,
    /// `Cortex-A53`, `ETM4.2`, `STM`...
    pub device_type: String,
    /// The device's file, relative to the snapshot directory.
    pub file: String,
    /// Registers of `[regs]`, in file order.
    pub regs: Vec<RegValue>,
    /// Memory dumps (`[dump...]` sections of a core), in file order.
    pub dumps: Vec<DumpDef>,
}

impl Device {
    /// Whether the device is a core (class `core`).
    pub fn is_core(&self) -> bool {
        self.class.eq_ignore_ascii_case("core")
    }
}

/// A trace buffer from the trace metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    /// Section name (`buffer0`).
    pub id: String,
    /// Buffer name (`ETB_0`).
    pub name: String,
    /// Data files, relative to the snapshot directory, concatenated in order.
    pub files: Vec<String>,
    /// `coresight`, `dstream_coresight` or `source_data`.
    pub format: String,
}

impl BufferInfo {
    /// A DSTREAM capture: its files have an 8-byte footer in every
    /// 512-byte block, which readers leave out (see [`crate::dstream`]).
    pub fn has_dstream_footers(&self) -> bool {
        self.format == "dstream_coresight"
    }
}

/// A loaded snapshot.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The directory as given, with a trailing `/` (paths are printed as
    /// this prefix joined with the file names).
    pub dir: String,
    /// `[snapshot] version=`.
    pub version: String,
    /// `[snapshot] description=`.
    pub description: String,
    /// The devices of `[device_list]`, in file order.
    pub devices: Vec<Device>,
    /// The trace buffers, in the order of their sections.
    pub buffers: Vec<BufferInfo>,
    /// (source name, buffer name), in file order.
    pub source_buffers: Vec<(String, String)>,
    /// (core name, source name), in file order.
    pub core_trace_sources: Vec<(String, String)>,
    /// Problems found while loading that did not stop it, in the order
    /// they were found.
    pub warnings: Vec<SnapshotWarning>,
}

impl Snapshot {
    /// Reads the snapshot in `dir`.
    ///
    /// Fails with a [`SnapshotError`] naming the file, the line and what
    /// was expected when `snapshot.ini` or the trace metadata cannot be
    /// read or is malformed. Problems that leave the rest usable are kept
    /// in [`Snapshot::warnings`] and logged with `log::warn!`: repeated
    /// sections, keys or devices, a device file that cannot be read or is
    /// malformed (the device is left out), a register that is not a
    /// number, a buffer format missing or unknown (decoded as
    /// `coresight`), a memory dump that cannot be read, a trace buffer
    /// that ends inside a frame. OpenCSD's reader decodes these snapshots
    /// too.
    pub fn load(dir: impl AsRef<Path>) -> Result<Snapshot, SnapshotError> {
        let dir_str = dir.as_ref().to_string_lossy().into_owned();
        let prefix = if dir_str.ends_with('/') || dir_str.is_empty() {
            dir_str.clone()
        } else {
            format!("{dir_str}/")
        };
        let mut ss = Snapshot {
            dir: prefix,
            ..Default::default()
        };
        let mut warnings = Vec::new();
        let result = ss.load_files(&mut warnings);
        for w in &warnings {
            log::warn!("{w}");
        }
        ss.warnings = warnings;
        result.map(|()| ss)
    }

    /// The warnings [`Snapshot::load`] found (see [`SnapshotWarning`]).
    pub fn warnings(&self) -> &[SnapshotWarning] {
        &self.warnings
    }

    fn load_files(&mut self, warnings: &mut Vec<SnapshotWarning>) -> Result<(), SnapshotError> {
        let main = IniText::load(self.path_of("snapshot.ini"), warnings)?;

        if let Some(s) = main.section("snapshot") {
            self.version = IniText::value(s, "version").unwrap_or("").to_string();
            self.description = IniText::value(s, "description").unwrap_or("").to_string();
        }
        let devlist = main
            .section("device_list")
            .ok_or_else(|| main.err(None, "missing [device_list] section: expected the list of device files"))?;
        // Device name -> index in `self.devices`.
        let mut names: HashMap<String, usize> = HashMap::new();
        for e in devlist {
            let (key, file) = (e.key(), e.value());
            // A device that cannot be read is left out, as OpenCSD leaves
            // it out: the other sources still decode.
            if file.is_empty() {
                warnings.push(main.warning(
                    Some(e.line),
                    WarningKind::InvalidDevice {
                        file: String::new(),
                        reason: format!("device '{key}' names no file (expected '{key}=FILE.ini')"),
                    },
                ));
                continue;
            }
            let dev = match self.load_device(file, warnings) {
                Ok(dev) => dev,
                Err(err) if err.io.is_some() && err.path == self.path_of(file) => {
                    warnings.push(main.warning(
                        Some(e.line),
                        WarningKind::UnreadableDevice {
                            file: file.to_string(),
                            path: err.path,
                            reason: err.message,
                        },
                    ));
                    continue;
                }
                Err(err) => {
                    warnings.push(SnapshotWarning {
                        path: err.path,
                        line: err.line,
                        kind: WarningKind::InvalidDevice {
                            file: file.to_string(),
                            reason: err.message,
                        },
                    });
                    continue;
                }
            };
            match names.get(&dev.name) {
                Some(&i) => {
                    warnings.push(main.warning(
                        Some(e.line),
                        WarningKind::DuplicateDevice {
                            name: dev.name.clone(),
                            first_file: self.devices[i].file.clone(),
                            file: file.to_string(),
                        },
                    ));
                    self.devices[i] = dev;
                }
                None => {
                    names.insert(dev.name.clone(), self.devices.len());
                    self.devices.push(dev);
                }
            }
        }

        if let Some(trace) = main.section("trace")
            && let Some(meta) = IniText::value(trace, "metadata")
        {
            let t = IniText::load(self.path_of(meta), warnings).map_err(|err| match err.io {
                Some(_) if err.path == self.path_of(meta) => main.err(
                    main.key_line("trace", "metadata"),
                    format!("cannot read trace metadata '{meta}': {}", err.message),
                ),
                _ => err,
            })?;
            self.load_trace_meta(&t, warnings)?;
        }
        Ok(())
    }

    /// A path inside the snapshot, as OpenCSD forms it (prefix + name).
    pub fn path_of(&self, file: &str) -> PathBuf {
        PathBuf::from(format!("{}{}", self.dir, file))
    }

    fn load_device(&self, file: &str, warnings: &mut Vec<SnapshotWarning>) -> Result<Device, SnapshotError> {
        let f = IniText::load(self.path_of(file), warnings)?;
        let dev_sec = f
            .section("device")
            .ok_or_else(|| f.err(None, "missing [device] section: expected name, class and type"))?;
        let need = |k: &str| -> Result<String, SnapshotError> {
            IniText::value(dev_sec, k)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    f.err(
                        f.section_line("device"),
                        format!("[device] has no '{k}=': expected the device's {k}"),
                    )
                })
        };
        let mut dev = Device {
            name: need("name")?,
            class: need("class")?,
            device_type: need("type")?,
            file: file.to_string(),
            regs: Vec::new(),
            dumps: Vec::new(),
        };
        for (sec, entries) in f.sections() {
            if sec.eq_ignore_ascii_case("regs") {
                dev.regs.reserve(entries.len());
                for e in entries {
                    let (k, v) = (e.key(), e.value());
                    let (name, decoration) = match split_at_byte(k, b'(') {
                        Some((n, rest)) => (n.trim().to_string(), Some(rest.trim_end_matches(')').to_string())),
                        None => (k.to_string(), None),
                    };
                    let value = match parse_number(v) {
                        Some(n) => n,
                        None => {
                            let read_as = strtoul(v);
                            warnings.push(f.warning(
                                Some(e.line),
                                WarningKind::UnparsableRegister {
                                    register: name.clone(),
                                    value: v.to_string(),
                                    read_as,
                                },
                            ));
                            read_as
                        }
                    };
                    dev.regs.push(RegValue {
                        name,
                        decoration,
                        value,
                    });
                }
            } else if sec.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("dump")) {
                let line = f.section_line(sec);
                let file = IniText::value(entries, "file")
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| f.err(line, format!("[{sec}] has no 'file=': expected the dump's file name")))?;
                let num = |k: &str, required: bool| -> Result<u64, SnapshotError> {
                    match IniText::value(entries, k) {
                        Some(v) => parse_number(v).ok_or_else(|| {
                            f.err(
                                f.key_line(sec, k),
                                format!("[{sec}] {k}: expected a number (decimal or 0x hex), found '{v}'"),
                            )
                        }),
                        None if required => Err(f.err(line, format!("[{sec}] has no '{k}=': expected the dump's {k}"))),
                        None => Ok(0),
                    }
                };
                let space = IniText::value(entries, "space").unwrap_or("").to_string();
                if MemSpace::from_snapshot_name(&space).is_none() {
                    warnings.push(f.warning(
                        f.key_line(sec, "space"),
                        WarningKind::UnknownMemorySpace {
                            section: sec.to_string(),
                            space: space.clone(),
                        },
                    ));
                }
                let dump = DumpDef {
                    file: file.to_string(),
                    address: num("address", true)?,
                    length: num("length", false)?,
                    offset: num("offset", false)?,
                    space,
                };
                if let Some(kind) = self.check_dump(&dump) {
                    warnings.push(f.warning(f.key_line(sec, "file"), kind));
                }
                dev.dumps.push(dump);
            }
        }
        Ok(dev)
    }

    /// Whether a dump's file can be mapped as the section says (checked
    /// from the file's metadata, without reading it).
    fn check_dump(&self, dump: &DumpDef) -> Option<WarningKind> {
        let path = self.path_of(&dump.file);
        match check_regular_file(&path) {
            Err(e) => Some(WarningKind::MissingDump {
                file: dump.file.clone(),
                path,
                reason: e.message,
            }),
            Ok(len) => {
                // Mapped as OpenCSD maps it: an even number of bytes.
                let usable = len & !1;
                let fits = if dump.offset == 0 && dump.length == 0 {
                    usable > 0
                } else {
                    dump.length > 0 && dump.offset.checked_add(dump.length).is_some_and(|end| end <= usable)
                };
                (!fits).then(|| WarningKind::DumpOutsideFile {
                    file: dump.file.clone(),
                    offset: dump.offset,
                    length: dump.length,
                    file_len: usable,
                })
            }
        }
    }

    fn load_trace_meta(&mut self, t: &IniText, warnings: &mut Vec<SnapshotWarning>) -> Result<(), SnapshotError> {
        let tb = t.section("trace_buffers").ok_or_else(|| {
            t.err(
                None,
                "missing [trace_buffers] section: expected 'buffers=' listing the buffer sections",
            )
        })?;
        let list = IniText::value(tb, "buffers").ok_or_else(|| {
            t.err(
                t.section_line("trace_buffers"),
                "[trace_buffers] has no 'buffers=': expected the buffer sections, separated by commas",
            )
        })?;
        let listed: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        if let Some(missing) = listed.iter().find(|id| t.section(id).is_none()) {
            return Err(t.err(
                t.key_line("trace_buffers", "buffers"),
                format!("buffer '{missing}' is listed but has no [{missing}] section"),
            ));
        }
        // Buffers come in the order of their sections, as OpenCSD reads them.
        let listed: std::collections::HashSet<String> = listed.iter().map(|l| l.to_ascii_lowercase()).collect();
        let sections: Vec<(String, &[IniEntry])> = t
            .sections()
            .filter(|(n, _)| listed.contains(&n.to_ascii_lowercase()))
            .map(|(n, e)| (n.to_string(), e))
            .collect();
        for (id, sec) in &sections {
            let id = id.as_str();
            let line = t.section_line(id);
            let get = |k: &str, what: &str| {
                IniText::value(sec, k)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| t.err(line, format!("[{id}] has no '{k}=': expected {what}")))
            };
            let name = get("name", "the buffer's name")?.to_string();
            let files: Vec<String> = get("file", "the buffer's data files")?
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if files.is_empty() {
                return Err(t.err(
                    t.key_line(id, "file"),
                    format!("[{id}] file= names no file: expected one or more file names, separated by commas"),
                ));
            }
            // OpenCSD decodes any other format, or none, as coresight.
            let format = match IniText::value(sec, "format") {
                Some(v @ ("coresight" | "dstream_coresight" | "source_data")) => v.to_string(),
                other => {
                    let line = other.and(t.key_line(id, "format")).or(line);
                    warnings.push(t.warning(
                        line,
                        WarningKind::BufferFormat {
                            section: id.to_string(),
                            format: other.map(str::to_string),
                        },
                    ));
                    "coresight".to_string()
                }
            };
            let buffer = BufferInfo {
                id: id.to_string(),
                name,
                files,
                format,
            };
            if let Some(w) = self.check_buffer_frames(&buffer) {
                warnings.push(w);
            }
            self.buffers.push(buffer);
        }
        if let Some(sb) = t.section("source_buffers") {
            let names: std::collections::HashSet<&str> = self.buffers.iter().map(|b| b.name.as_str()).collect();
            for e in sb {
                let (src, buf) = (e.key(), e.value());
                if !names.contains(buf) {
                    return Err(t.err(
                        Some(e.line),
                        format!(
                            "source '{src}' writes to unknown buffer '{buf}': expected the name= of a listed buffer"
                        ),
                    ));
                }
                self.source_buffers.push((src.to_string(), buf.to_string()));
            }
        }
        if let Some(cs) = t.section("core_trace_sources") {
            for e in cs {
                self.core_trace_sources
                    .push((e.key().to_string(), e.value().to_string()));
            }
        }
        Ok(())
    }

    /// A warning when a memory-aligned buffer's files do not add up to
    /// whole frames (the deformatter decodes the whole frames and leaves
    /// the tail). Files that cannot be read are left to the reader to
    /// report. (A DSTREAM capture is a stream cut into blocks, not frames
    /// laid end to end: its length says nothing of its last frame.)
    fn check_buffer_frames(&self, buffer: &BufferInfo) -> Option<SnapshotWarning> {
        if buffer.format != "coresight" {
            return None;
        }
        let frame = DeformatterConfig::mem_aligned().alignment() as u64;
        let mut total = 0u64;
        for f in &buffer.files {
            total += std::fs::metadata(self.path_of(f)).ok().filter(|m| m.is_file())?.len();
        }
        let tail = total % frame;
        let last = buffer.files.last()?;
        (tail != 0).then(|| SnapshotWarning {
            path: self.path_of(last),
            line: None,
            kind: WarningKind::PartialFrame {
                buffer: buffer.name.clone(),
                offset: total - tail,
                length: tail,
            },
        })
    }

    /// Buffer names in metadata order (the first is the default source).
    pub fn buffer_names(&self) -> Vec<&str> {
        self.buffers.iter().map(|b| b.name.as_str()).collect()
    }

    /// The buffer called `name` (its `name=`).
    pub fn buffer(&self, name: &str) -> Option<&BufferInfo> {
        self.buffers.iter().find(|b| b.name == name)
    }

    /// The device called `name`.
    pub fn device(&self, name: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// The sources writing to `buffer`, sorted by name, each with the core
    /// it traces (`None` for software sources).
    pub fn sources_of(&self, buffer: &str) -> Vec<(&str, Option<&str>)> {
        let mut cores: HashMap<&str, &str> = HashMap::new();
        for (c, src) in &self.core_trace_sources {
            cores.entry(src.as_str()).or_insert(c.as_str());
        }
        let mut v: Vec<(&str, Option<&str>)> = self
            .source_buffers
            .iter()
            .filter(|(_, b)| b == buffer)
            .map(|(s, _)| (s.as_str(), cores.get(s.as_str()).copied()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        v
    }

    /// Full paths of a buffer's data files.
    pub fn buffer_paths(&self, buffer: &BufferInfo) -> Vec<PathBuf> {
        buffer.files.iter().map(|f| self.path_of(f)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_lines_split_as_str_lines_does_once_trimmed() {
        for text in ["", "a", "a\n", "a\r\nb", "a\n\nb\n", "\n", "x=1\r\n[s]\r\n", "é=ü\nz"] {
            let ours: Vec<&str> = ini_lines(text).map(trim).collect();
            let std: Vec<&str> = text.lines().map(str::trim).collect();
            assert_eq!(ours, std, "{text:?}");
        }
    }

    #[test]
    fn trim_is_str_trim() {
        for s in [
            "",
            " ",
            "a",
            " a",
            "a ",
            "\ta\r",
            "\u{a0}a",
            "a\u{3000}",
            "é",
            " é ",
            "a b",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
    }

    #[test]
    fn key_hash_ignores_ascii_case_only() {
        let st = std::hash::RandomState::new();
        let long = "Key_".repeat(20);
        assert_eq!(key_hash(&st, "TRCIDR0"), key_hash(&st, "trcidr0"));
        assert_eq!(key_hash(&st, &long), key_hash(&st, &long.to_ascii_lowercase()));
        assert_ne!(key_hash(&st, "TRCIDR0"), key_hash(&st, "TRCIDR1"));
        assert_ne!(key_hash(&st, "É"), key_hash(&st, "é"));
    }

    #[test]
    fn repeated_keys_in_a_repeated_section_warn_with_the_first_line() {
        let mut warnings = Vec::new();
        let text = "[Regs]\nA=1\nb=2\n[regs]\nB=3\na=4\nc=5\n";
        let ini = IniText::parse(PathBuf::from("x.ini"), text, &mut warnings).unwrap();
        let regs = ini.section("REGS").unwrap();
        let kv: Vec<(&str, &str)> = regs.iter().map(|e| (e.key(), e.value())).collect();
        assert_eq!(kv, [("A", "1"), ("b", "2"), ("c", "5")]);
        let firsts: Vec<(Option<usize>, usize)> = warnings
            .iter()
            .filter_map(|w| match &w.kind {
                WarningKind::DuplicateKey { first_line, .. } => Some((w.line, *first_line)),
                _ => None,
            })
            .collect();
        assert_eq!(firsts, [(Some(5), 3), (Some(6), 2)]);
    }

    /// Past [`SCAN_LIMIT`] sections and keys, when lookups switch from
    /// scanning to hashing, repeats are still found (any case, with the
    /// first line) and every section and key still looked up.
    #[test]
    fn repeats_are_found_past_the_scan_limit() {
        let n = 3 * SCAN_LIMIT;
        let mut text = String::from("[Big]\n");
        for k in 0..n {
            text.push_str(&format!("key{k}={k}\n"));
        }
        // Repeats of the first and last keys, in another case.
        text.push_str(&format!("KEY0=x\nKey{}=y\n", n - 1));
        for k in 0..n {
            text.push_str(&format!("[s{k}]\nv={k}\n"));
        }
        // Repeats of the first and a late section: their entries join it.
        text.push_str(&format!("[S0]\nw=a\n[s{}]\nv=again\n", n - 2));
        let mut warnings = Vec::new();
        let ini = IniText::parse(PathBuf::from("x.ini"), &text, &mut warnings).unwrap();
        let big = ini.section("big").unwrap();
        assert_eq!(big.len(), n);
        assert_eq!(IniText::value(big, "KEY7"), Some("7"));
        for k in 0..n {
            let entries = ini.section(&format!("S{k}")).unwrap();
            assert_eq!(IniText::value(entries, "v"), Some(k.to_string().as_str()));
        }
        assert_eq!(IniText::value(ini.section("s0").unwrap(), "w"), Some("a"));
        let seen: Vec<(Option<usize>, usize)> = warnings
            .iter()
            .filter_map(|w| match &w.kind {
                WarningKind::DuplicateKey { first_line, .. } | WarningKind::DuplicateSection { first_line, .. } => {
                    Some((w.line, *first_line))
                }
                _ => None,
            })
            .collect();
        let header = |k: usize| n + 4 + 2 * k;
        let last = header(n);
        assert_eq!(
            seen,
            [
                (Some(n + 2), 2),
                (Some(n + 3), n + 1),
                (Some(last), header(0)),
                (Some(last + 2), header(n - 2)),
                (Some(last + 3), header(n - 2) + 1),
            ]
        );
    }
}
