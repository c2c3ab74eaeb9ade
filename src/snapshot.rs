//! Arm (DS-5) trace snapshots: reading the directory, and building a decode
//! tree from it.
//!
//! A snapshot is `snapshot.ini` (device list, trace metadata file), one
//! `.ini` file per device (class, type, registers, memory dumps) and the
//! trace metadata (`trace.ini`: buffers, which source writes to which
//! buffer, which core each source traces). Malformed or incomplete files
//! give an [`Error::Snapshot`] naming the file, the line and what was
//! expected.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ini::{Ini, ParseOption};

use crate::decoder::{CoreConfig, DecodeMode, DecoderFactory, DecoderRegistry, SourceConfig};
use crate::error::{ErrCode, Error, Result, Severity, TraceError};
use crate::logger::ErrLink;
use crate::memory::MemSpace;
use crate::tree::{DecodeTree, SourceFormat};
use crate::deformatter::DeformatterConfig;

/// An `.ini` file, parsed once and indexed: sections in file order with
/// their entries, the first section of each name (case-insensitive), and
/// the line of each section header, so that every lookup is a hash probe
/// and loading stays linear in the file (24,000 dump sections used to
/// take 22 s when each lookup rescanned the file).
struct IniText {
    path: PathBuf,
    text: String,
    /// Sections in file order (the general section skipped), keys trimmed
    /// and values trimmed.
    sections: Vec<(String, Vec<(String, String)>)>,
    /// Lower-case name -> index of the first section so named.
    by_name: HashMap<String, usize>,
    /// Lower-case name -> line (1-based) and byte offset of its first
    /// `[section]` header.
    headers: HashMap<String, (usize, usize)>,
}

impl IniText {
    fn load(path: PathBuf) -> Result<IniText> {
        let bytes = read_regular_file(&path)?;
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        // A UTF-8 byte-order mark (written by some Windows editors) is not
        // part of the first section name.
        if text.starts_with('\u{feff}') {
            text.drain(..'\u{feff}'.len_utf8());
        }
        let opt = ParseOption { enabled_quote: false, enabled_escape: false, ..ParseOption::default() };
        let ini = Ini::load_from_str_opt(&protect_key_colons(&text), opt).map_err(|e| Error::Snapshot {
            path: path.clone(),
            line: Some(e.line),
            message: format!("not a valid .ini file: {}", e.msg),
        })?;
        let mut sections = Vec::new();
        let mut by_name = HashMap::new();
        for (name, props) in ini.iter() {
            let Some(name) = name else { continue };
            let name = name.trim().to_string();
            by_name.entry(name.to_ascii_lowercase()).or_insert(sections.len());
            let entries = props.iter().map(|(k, v)| (k.trim().replace(KEY_COLON, ":"), v.trim().to_string())).collect();
            sections.push((name, entries));
        }
        let mut headers = HashMap::new();
        let mut offset = 0;
        for (i, l) in text.split_inclusive('\n').enumerate() {
            let t = l.trim();
            if let Some(n) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                headers.entry(n.trim().to_ascii_lowercase()).or_insert((i + 1, offset + l.len()));
            }
            offset += l.len();
        }
        Ok(IniText { path, text, sections, by_name, headers })
    }

    /// Line (1-based) of the first `[section]` header matching `section`.
    fn section_line(&self, section: &str) -> Option<usize> {
        self.headers.get(&section.to_ascii_lowercase()).map(|&(line, _)| line)
    }

    /// Line of `key=` inside `section` (first occurrence). Scans only that
    /// section's lines, and is only asked for when reporting an error.
    fn key_line(&self, section: &str, key: &str) -> Option<usize> {
        let &(start, offset) = self.headers.get(&section.to_ascii_lowercase())?;
        for (i, l) in self.text[offset..].lines().enumerate() {
            let t = l.trim();
            if t.starts_with('[') {
                break;
            }
            if let Some((k, _)) = t.split_once('=')
                && k.trim().eq_ignore_ascii_case(key) {
                    return Some(start + i + 1);
                }
        }
        None
    }

    fn err(&self, line: Option<usize>, message: impl Into<String>) -> Error {
        Error::Snapshot { path: self.path.clone(), line, message: message.into() }
    }

    /// Sections as (name, entries) in file order; the general section skipped.
    fn sections(&self) -> impl Iterator<Item = (&str, &[(String, String)])> {
        self.sections.iter().map(|(n, e)| (n.as_str(), e.as_slice()))
    }

    fn section(&self, name: &str) -> Option<&[(String, String)]> {
        self.by_name.get(&name.to_ascii_lowercase()).map(|&i| self.sections[i].1.as_slice())
    }

    fn value<'a>(entries: &'a [(String, String)], key: &str) -> Option<&'a str> {
        entries.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
    }
}

/// Reads a file that must be a regular file: a FIFO, device or directory
/// given as an ini, dump or trace file would block or read as nothing.
pub(crate) fn read_regular_file(path: &Path) -> Result<Vec<u8>> {
    let io_err = |e| Error::Io { path: path.to_path_buf(), source: e };
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if !meta.is_file() {
        return Err(io_err(std::io::Error::new(std::io::ErrorKind::InvalidInput, not_regular(&meta))));
    }
    std::fs::read(path).map_err(io_err)
}

/// What a non-regular file is, for error messages.
pub(crate) fn not_regular(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "is a directory, not a file"
    } else if t.is_fifo() {
        "is a FIFO (named pipe), not a regular file"
    } else if t.is_socket() {
        "is a socket, not a regular file"
    } else if t.is_block_device() || t.is_char_device() {
        "is a device, not a regular file"
    } else {
        "is not a regular file"
    }
}

/// Stand-in for `:` inside keys while rust-ini parses.
const KEY_COLON: char = '\u{1f}';

/// rust-ini takes `:` as well as `=` to end a key, but snapshot register
/// keys carry colons in their decorations (`PC(size:64)=...`). Colons
/// before a line's first `=` are swapped for a stand-in, and swapped back
/// when the keys are read.
fn protect_key_colons(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        match line.find('=') {
            Some(eq) if !t.starts_with('[') && !t.starts_with(';') && !t.starts_with('#') => {
                out.push_str(&line[..eq].replace(':', &KEY_COLON.to_string()));
                out.push_str(&line[eq..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Parses a number as C's `strtoull(s, 0, 0)` reads a whole field:
/// `0x` hex, leading `0` octal, or decimal.
pub fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
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
    pub value: u64,
}

/// A memory dump section of a core's device file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpDef {
    /// File, relative to the snapshot directory.
    pub file: String,
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
    pub name: String,
    /// `core`, `trace_source`, ...
    pub class: String,
    /// `Cortex-A53`, `ETM4.2`, `STM`...
    pub device_type: String,
    /// The device's file, relative to the snapshot directory.
    pub file: String,
    pub regs: Vec<RegValue>,
    pub dumps: Vec<DumpDef>,
}

impl Device {
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

/// A loaded snapshot.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The directory as given, with a trailing `/` (paths are printed as
    /// this prefix joined with the file names).
    pub dir: String,
    pub version: String,
    pub description: String,
    pub devices: Vec<Device>,
    pub buffers: Vec<BufferInfo>,
    /// (source name, buffer name), in file order.
    pub source_buffers: Vec<(String, String)>,
    /// (core name, source name), in file order.
    pub core_trace_sources: Vec<(String, String)>,
}

impl Snapshot {
    /// Reads the snapshot in `dir`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Snapshot> {
        let dir_str = dir.as_ref().to_string_lossy().into_owned();
        let prefix = if dir_str.ends_with('/') || dir_str.is_empty() { dir_str.clone() } else { format!("{dir_str}/") };
        let mut ss = Snapshot { dir: prefix, ..Default::default() };
        let main = IniText::load(ss.path_of("snapshot.ini"))?;

        if let Some(s) = main.section("snapshot") {
            ss.version = IniText::value(s, "version").unwrap_or("").to_string();
            ss.description = IniText::value(s, "description").unwrap_or("").to_string();
        }
        let devlist = main
            .section("device_list")
            .ok_or_else(|| main.err(None, "missing [device_list] section: expected the list of device files"))?;
        let mut names = std::collections::HashSet::new();
        for (key, file) in devlist {
            if file.is_empty() {
                return Err(main.err(main.key_line("device_list", key), format!("device '{key}' names no file")));
            }
            let dev = ss.load_device(file).map_err(|e| match e {
                Error::Io { source, .. } => main.err(
                    main.key_line("device_list", key),
                    format!("cannot read device file '{file}': {source}"),
                ),
                other => other,
            })?;
            if !names.insert(dev.name.clone()) {
                return Err(main.err(main.key_line("device_list", key), format!("device name '{}' used twice", dev.name)));
            }
            ss.devices.push(dev);
        }

        if let Some(trace) = main.section("trace")
            && let Some(meta) = IniText::value(trace, "metadata") {
                let t = IniText::load(ss.path_of(meta)).map_err(|e| match e {
                    Error::Io { source, .. } => {
                        main.err(main.key_line("trace", "metadata"), format!("cannot read trace metadata '{meta}': {source}"))
                    }
                    other => other,
                })?;
                ss.load_trace_meta(&t)?;
            }
        Ok(ss)
    }

    /// A path inside the snapshot, as OpenCSD forms it (prefix + name).
    pub fn path_of(&self, file: &str) -> PathBuf {
        PathBuf::from(format!("{}{}", self.dir, file))
    }

    fn load_device(&self, file: &str) -> Result<Device> {
        let f = IniText::load(self.path_of(file))?;
        let dev_sec = f.section("device").ok_or_else(|| f.err(None, "missing [device] section: expected name, class and type"))?;
        let need = |k: &str| -> Result<String> {
            IniText::value(dev_sec, k)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| f.err(f.section_line("device"), format!("[device] has no '{k}='")))
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
                for (k, v) in entries {
                    let (name, decoration) = match k.split_once('(') {
                        Some((n, rest)) => (n.trim().to_string(), Some(rest.trim_end_matches(')').to_string())),
                        None => (k.to_string(), None),
                    };
                    let value = parse_number(v).ok_or_else(|| {
                        f.err(f.key_line(sec, k), format!("register {name}: expected a number (decimal or 0x hex), found '{v}'"))
                    })?;
                    dev.regs.push(RegValue { name, decoration, value });
                }
            } else if sec.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("dump")) {
                let line = f.section_line(sec);
                let file = IniText::value(entries, "file")
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| f.err(line, format!("[{sec}] has no 'file='")))?;
                let num = |k: &str, required: bool| -> Result<u64> {
                    match IniText::value(entries, k) {
                        Some(v) => parse_number(v)
                            .ok_or_else(|| f.err(f.key_line(sec, k), format!("[{sec}] {k}: expected a number, found '{v}'"))),
                        None if required => Err(f.err(line, format!("[{sec}] has no '{k}='"))),
                        None => Ok(0),
                    }
                };
                let space = IniText::value(entries, "space").unwrap_or("").to_string();
                if MemSpace::from_snapshot_name(&space).is_none() {
                    log::warn!("{}: [{sec}] unknown memory space '{space}', using any", f.path.display());
                }
                dev.dumps.push(DumpDef { file: file.to_string(), address: num("address", true)?, length: num("length", false)?, offset: num("offset", false)?, space });
            }
        }
        Ok(dev)
    }

    fn load_trace_meta(&mut self, t: &IniText) -> Result<()> {
        let tb = t.section("trace_buffers").ok_or_else(|| t.err(None, "missing [trace_buffers] section"))?;
        let list = IniText::value(tb, "buffers").ok_or_else(|| t.err(t.section_line("trace_buffers"), "[trace_buffers] has no 'buffers='"))?;
        let listed: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        if let Some(missing) = listed.iter().find(|id| t.section(id).is_none()) {
            return Err(t.err(
                t.key_line("trace_buffers", "buffers"),
                format!("buffer '{missing}' is listed but has no [{missing}] section"),
            ));
        }
        // Buffers come in the order of their sections, as OpenCSD reads them.
        let listed: std::collections::HashSet<String> = listed.iter().map(|l| l.to_ascii_lowercase()).collect();
        let sections: Vec<(String, &[(String, String)])> = t
            .sections()
            .filter(|(n, _)| listed.contains(&n.to_ascii_lowercase()))
            .map(|(n, e)| (n.to_string(), e))
            .collect();
        for (id, sec) in &sections {
            let id = id.as_str();
            let line = t.section_line(id);
            let get = |k: &str| {
                IniText::value(sec, k).filter(|v| !v.is_empty()).ok_or_else(|| t.err(line, format!("[{id}] has no '{k}='")))
            };
            let name = get("name")?.to_string();
            let files: Vec<String> = get("file")?.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
            if files.is_empty() {
                return Err(t.err(t.key_line(id, "file"), format!("[{id}] file= names no file: expected one or more file names, separated by commas")));
            }
            let format = get("format")?.to_string();
            if !matches!(format.as_str(), "coresight" | "dstream_coresight" | "source_data") {
                return Err(t.err(
                    t.key_line(id, "format"),
                    format!("buffer format '{format}': expected coresight, dstream_coresight or source_data"),
                ));
            }
            self.buffers.push(BufferInfo { id: id.to_string(), name, files, format });
        }
        if let Some(sb) = t.section("source_buffers") {
            let names: std::collections::HashSet<&str> = self.buffers.iter().map(|b| b.name.as_str()).collect();
            for (src, buf) in sb {
                if !names.contains(buf.as_str()) {
                    return Err(t.err(t.key_line("source_buffers", src), format!("source '{src}' writes to unknown buffer '{buf}'")));
                }
                self.source_buffers.push((src.to_string(), buf.to_string()));
            }
        }
        if let Some(cs) = t.section("core_trace_sources") {
            for (core, src) in cs {
                self.core_trace_sources.push((core.to_string(), src.to_string()));
            }
        }
        Ok(())
    }

    /// Buffer names in metadata order (the first is the default source).
    pub fn buffer_names(&self) -> Vec<&str> {
        self.buffers.iter().map(|b| b.name.as_str()).collect()
    }

    pub fn buffer(&self, name: &str) -> Option<&BufferInfo> {
        self.buffers.iter().find(|b| b.name == name)
    }

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

    /// Builds a decode tree for `buffer_name` (see [`TreeBuilder`]).
    pub fn build_tree(&self, buffer_name: &str, mode: DecodeMode, tree_setup: impl FnOnce(&mut DecodeTree)) -> Result<Option<DecodeTree>> {
        TreeBuilder::new(self).build(buffer_name, mode, tree_setup)
    }
}

/// Builds a decode tree from a snapshot, as OpenCSD's snapshot-to-tree
/// builder does: one decoder per source of the buffer (only the first for
/// an unformatted buffer), configured from its registers and its core's
/// architecture, with the core's memory dumps mapped. Problems with single
/// sources are logged (component `ss2_dcdtree`) and the source is skipped.
pub struct TreeBuilder<'a> {
    ss: &'a Snapshot,
    registry: Arc<DecoderRegistry>,
}

impl<'a> TreeBuilder<'a> {
    /// A builder using the built-in protocols.
    pub fn new(ss: &'a Snapshot) -> Self {
        TreeBuilder { ss, registry: Arc::new(DecoderRegistry::builtin()) }
    }

    /// A builder using the protocols in `registry` (with user decoders).
    pub fn with_registry(ss: &'a Snapshot, registry: Arc<DecoderRegistry>) -> Self {
        TreeBuilder { ss, registry }
    }

    /// Returns `Ok(None)` when no decoder could be created.
    /// `tree_setup` runs on the new tree before decoders are created (to
    /// set the registry's options, error output, ...).
    pub fn build(&self, buffer_name: &str, mode: DecodeMode, tree_setup: impl FnOnce(&mut DecodeTree)) -> Result<Option<DecodeTree>> {
        let buf = self
            .ss
            .buffer(buffer_name)
            .ok_or_else(|| Error::code(ErrCode::TestSnapshotRead, format!("no trace buffer named '{buffer_name}' in the snapshot")))?;
        let format = match buf.format.as_str() {
            "source_data" => SourceFormat::Single,
            "dstream_coresight" => SourceFormat::Formatted(DeformatterConfig::fsync_stream()),
            _ => SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        };
        let mut tree = DecodeTree::with_registry(format, mode, self.registry.clone());
        tree_setup(&mut tree);
        let log = ErrLink::new(tree.error_logger(), "ss2_dcdtree");
        let log_err = |code: ErrCode, msg: String| log.log(&TraceError::new(Severity::Error, code).with_message(msg));

        let mut created = 0;
        for (src, core) in self.ss.sources_of(buffer_name) {
            match self.ss.device(src) {
                None => log_err(ErrCode::TestSsToDecoder, format!("Failed to find device data for source {src}.\n")),
                Some(dev) => match core {
                    Some(core_name) => match self.ss.device(core_name) {
                        None => log_err(ErrCode::TestSsToDecoder, format!("Failed to get device data for source {src}.\n")),
                        Some(core_dev) => {
                            if self.create(&mut tree, &log, dev, Some(core_dev)) {
                                created += 1;
                                if mode == DecodeMode::FullDecode {
                                    self.map_dumps(&mut tree, &log, core_dev);
                                }
                            } else {
                                log_err(ErrCode::TestSsToDecoder, format!("Failed to create decoder for source {src}.\n"));
                            }
                        }
                    },
                    None => {
                        if self.create(&mut tree, &log, dev, None) {
                            created += 1;
                        } else {
                            log_err(ErrCode::TestSsToDecoder, format!("Failed to create decoder for none core source {src}.\n"));
                        }
                    }
                },
            }
            if format == SourceFormat::Single {
                break;
            }
        }
        Ok((created > 0).then_some(tree))
    }

    fn create(&self, tree: &mut DecodeTree, log: &ErrLink, dev: &Device, core: Option<&Device>) -> bool {
        let Some(factory) = tree.registry().for_device_type(&dev.device_type) else { return false };
        if factory.is_pe_trace() != core.is_some() {
            return false;
        }
        let Some(mut cfg) = self.resolve_regs(log, dev, factory.as_ref()) else { return false };
        if let Some(core) = core {
            match factory.core_profile(&core.device_type) {
                Some(profile) => {
                    cfg.core = Some(CoreConfig { name: core.name.clone(), core_type: core.device_type.clone(), profile });
                }
                None => {
                    log.log(&TraceError::new(Severity::Error, ErrCode::TestSsToDecoder).with_message(format!(
                        "Unrecognized Core name {}. Cannot evaluate profile or architecture.",
                        core.device_type
                    )));
                    return false;
                }
            }
        }
        match tree.create_decoder(factory.protocol_name(), &cfg) {
            Ok(_) => true,
            Err(e) => {
                let code = match &e {
                    Error::Code { code, .. } => *code,
                    _ => ErrCode::Fail,
                };
                log.log(&TraceError::new(Severity::Error, code).with_message(format!(
                    "Snapshot processor : failed to create {} decoder on decode tree.",
                    factory.protocol_name()
                )));
                false
            }
        }
    }

    /// Resolves the factory's registers from the device, logging missing
    /// ones as OpenCSD does. `None` if a required register is missing.
    fn resolve_regs(&self, log: &ErrLink, dev: &Device, factory: &dyn DecoderFactory) -> Option<SourceConfig> {
        let mut cfg = SourceConfig {
            name: dev.name.clone(),
            device_type: dev.device_type.clone(),
            regs: dev.regs.iter().map(|r| (r.name.clone(), r.value)).collect(),
            core: None,
        };
        let mut ok = true;
        for spec in factory.registers() {
            if cfg.reg(spec.name).is_some() {
                continue;
            }
            if spec.required {
                log.message(Severity::Error, &format!("Error:Missing {}\n", spec.name));
                ok = false;
            } else {
                log.message(Severity::Warn, &format!("Warning: Default set for register. Missing {}\n", spec.name));
                cfg.regs.push((spec.name.to_string(), spec.default));
            }
        }
        ok.then_some(cfg)
    }

    fn map_dumps(&self, tree: &mut DecodeTree, log: &ErrLink, core: &Device) {
        for d in &core.dumps {
            let path = self.ss.path_of(&d.file);
            let space = MemSpace::from_snapshot_name(&d.space).unwrap_or(MemSpace::ANY);
            if let Err(code) = tree.add_file_region(&path, d.address, d.offset, d.length, space) {
                log.log(
                    &TraceError::new(Severity::Error, code)
                        .with_message(format!("Failed to create memory accessor for file {}.", path.display())),
                );
            }
        }
    }
}
