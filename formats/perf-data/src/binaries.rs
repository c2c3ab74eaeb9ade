//! Finding the recorded binaries on this machine, as simpleperf's `--symdir` and perf's
//! build-id cache do: by build id first, then by the recorded path.
//!
//! A symbol directory is searched recursively for ELF files; each is indexed by its build id
//! and by its file name. A file found by name whose build id differs from the recorded one is
//! not used (its code would not be the traced code).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::elf::{ElfImage, read_build_id};
use crate::record::BuildId;

/// How perf and simpleperf name the kernel's maps.
pub const KERNEL_PREFIX: &str = "[kernel.kallsyms]";

/// No folder tree holds more files worth looking at than this; the scan stops there.
const MAX_SCANNED_FILES: usize = 200_000;
/// Nor is it deeper than this (symbolic-link loops end here too).
const MAX_DEPTH: usize = 32;

/// Whether two build ids name the same file: equal, or equal but for zero padding (simpleperf
/// records 16-byte ids padded to 20 bytes).
pub fn build_ids_match(a: &[u8], b: &[u8]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    long.starts_with(short) && long[short.len()..].iter().all(|&x| x == 0)
}

/// `a` without trailing zero bytes (the key of the build-id index).
fn trimmed(a: &[u8]) -> Vec<u8> {
    let n = a.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    a[..n].to_vec()
}

/// Where binaries are looked for.
#[derive(Debug, Default, Clone)]
pub struct SymbolSearch {
    dirs: Vec<PathBuf>,
    by_build_id: HashMap<Vec<u8>, PathBuf>,
    by_name: HashMap<OsString, Vec<PathBuf>>,
    build_id_caches: Vec<PathBuf>,
    /// Also try the recorded path itself on this machine.
    pub recorded_paths: bool,
    /// Files skipped because the scan limit was reached.
    pub truncated_scan: bool,
    /// The kernel image (`--vmlinux`): used for the `[kernel.kallsyms]` maps unless its build
    /// id differs from the recorded one.
    pub vmlinux: Option<PathBuf>,
    /// The kernel's symbols from `/proc/kallsyms` text (`--kallsyms`), for kernel addresses
    /// whose image is not available.
    pub kallsyms: Option<Arc<Kallsyms>>,
    /// The kernel's memory as `perf record --kcore` copied it (`kcore_dir/kcore`): the code of
    /// the kernel and its modules at their run-time addresses.
    pub kcore: Option<Arc<ElfImage>>,
}

/// The kernel-code files of a `perf record --kcore` folder (`kcore_dir`).
#[derive(Debug, Clone)]
pub struct KcoreDir {
    /// `kcore`: an ELF core file whose loadable segments hold kernel memory at its addresses.
    pub kcore: Arc<ElfImage>,
    /// `kallsyms`, when the folder has it.
    pub kallsyms: Option<Kallsyms>,
    /// `modules` (`/proc/modules`): each module's name, size and address.
    pub modules: Vec<LoadedModule>,
}

/// A module of `/proc/modules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedModule {
    /// Its name (as kallsyms writes it in brackets).
    pub name: String,
    /// Its first address.
    pub start: u64,
    /// Bytes from there.
    pub size: u64,
}

/// Reads `/proc/modules` text: `NAME SIZE REFS DEPS STATE ADDRESS` lines; lines that do not
/// parse, and modules at address 0 (hidden), are skipped.
pub fn parse_modules(text: &str) -> Vec<LoadedModule> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let name = f.first()?;
            let size = f.get(1)?.parse().ok()?;
            let addr = f.get(5)?;
            let start = u64::from_str_radix(addr.trim_start_matches("0x"), 16).ok()?;
            (start != 0).then(|| LoadedModule {
                name: name.to_string(),
                start,
                size,
            })
        })
        .collect()
}

impl KcoreDir {
    /// Reads the folder `dir`: `kcore` must be there and be an ELF file with loadable
    /// segments; `kallsyms` and `modules` are read when present. Errors name the file and
    /// what was wrong.
    pub fn open(dir: &Path) -> Result<KcoreDir, String> {
        let path = dir.join("kcore");
        let kcore = ElfImage::open(&path).map_err(|e| e.to_string())?;
        if kcore.segments.is_empty() {
            return Err(format!(
                "{}: no loadable segment (expected an ELF core file holding kernel memory)",
                path.display()
            ));
        }
        let kallsyms = match std::fs::read_to_string(dir.join("kallsyms")) {
            Ok(text) => Some(Kallsyms::parse(&text).map_err(|e| format!("{}: {e}", dir.join("kallsyms").display()))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read {}: {e}", dir.join("kallsyms").display())),
        };
        let modules = std::fs::read_to_string(dir.join("modules"))
            .map(|t| parse_modules(&t))
            .unwrap_or_default();
        Ok(KcoreDir {
            kcore: Arc::new(kcore),
            kallsyms,
            modules,
        })
    }

    /// The folder perf leaves for the recording at `recording`: `DIR/kcore_dir` when the
    /// recording is `DIR/data` (perf's directory output, which `--kcore` makes), else
    /// `RECORDING.kcore_dir`; `None` when neither holds a `kcore`.
    pub fn beside(recording: &Path) -> Option<PathBuf> {
        let mut candidates = Vec::new();
        if recording.is_dir() {
            candidates.push(recording.join("kcore_dir"));
        }
        if recording.file_name().is_some_and(|n| n == "data")
            && let Some(d) = recording.parent()
        {
            candidates.push(d.join("kcore_dir"));
        }
        let mut s = recording.as_os_str().to_owned();
        s.push(".kcore_dir");
        candidates.push(PathBuf::from(s));
        candidates.into_iter().find(|d| d.join("kcore").is_file())
    }
}

impl SymbolSearch {
    /// Takes kernel code from `dir`'s `kcore`, and its symbols from its `kallsyms` unless
    /// some were given.
    pub fn use_kcore(&mut self, dir: &KcoreDir) {
        self.kcore = Some(dir.kcore.clone());
        if self.kallsyms.is_none()
            && let Some(k) = &dir.kallsyms
        {
            self.kallsyms = Some(Arc::new(k.clone()));
        }
    }

    /// No folders; recorded paths are tried.
    pub fn new() -> Self {
        SymbolSearch {
            recorded_paths: true,
            ..Default::default()
        }
    }

    /// Adds a symbol directory (simpleperf's `--symdir`), indexing the ELF files under it.
    pub fn add_symdir(&mut self, dir: &Path) -> std::io::Result<()> {
        let meta = std::fs::metadata(dir)?;
        if !meta.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        self.dirs.push(dir.to_path_buf());
        let mut stack = vec![(dir.to_path_buf(), 0usize)];
        let mut seen = 0usize;
        while let Some((d, depth)) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            for entry in rd.flatten() {
                let p = entry.path();
                let Ok(ft) = entry.file_type() else { continue };
                let is_dir = ft.is_dir() || (ft.is_symlink() && p.is_dir());
                if is_dir {
                    if depth < MAX_DEPTH {
                        stack.push((p, depth + 1));
                    }
                    continue;
                }
                seen += 1;
                if seen > MAX_SCANNED_FILES {
                    self.truncated_scan = true;
                    return Ok(());
                }
                if let Some(id) = read_build_id(&p) {
                    self.by_build_id.entry(trimmed(&id)).or_insert_with(|| p.clone());
                    if let Some(name) = p.file_name() {
                        self.by_name.entry(name.to_os_string()).or_default().push(p);
                    }
                } else if let Some(name) = p.file_name() {
                    // Not ELF or no build id: still a candidate by name (checked on use).
                    self.by_name.entry(name.to_os_string()).or_default().push(p);
                }
            }
        }
        Ok(())
    }

    /// Adds a perf build-id cache (`~/.debug`): `.build-id/xx/yyyy…/elf` and
    /// `<recorded path>/<build id>/elf` under it.
    pub fn add_build_id_cache(&mut self, dir: &Path) {
        self.build_id_caches.push(dir.to_path_buf());
    }

    /// The symbol directories given.
    pub fn symdirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Finds the file for a binary recorded at `recorded` with build id `build_id`.
    pub fn find(&self, recorded: &str, build_id: Option<&BuildId>) -> Option<PathBuf> {
        let want = build_id.map(|b| b.as_bytes()).filter(|b| b.iter().any(|&x| x != 0));
        let accept = |p: &Path| -> bool {
            match want {
                Some(w) => read_build_id(p).is_some_and(|id| build_ids_match(&id, w)),
                None => p.is_file(),
            }
        };
        if recorded.starts_with(KERNEL_PREFIX)
            && let Some(v) = &self.vmlinux
        {
            // The image given: refused only when both build ids are known and differ.
            let ok = match (want, read_build_id(v)) {
                (Some(w), Some(id)) => build_ids_match(&id, w),
                _ => v.is_file(),
            };
            if ok {
                return Some(v.clone());
            }
        }
        if let Some(w) = want
            && let Some(p) = self.by_build_id.get(&trimmed(w))
        {
            return Some(p.clone());
        }
        // A module perf names `[name]` when it did not know its file: `name.ko` (the kernel
        // writes `-` in module file names as `_` in module names).
        if let Some(m) = recorded.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
            && !recorded.starts_with(KERNEL_PREFIX)
            && !m.is_empty()
        {
            for name in [format!("{m}.ko"), format!("{}.ko", m.replace('_', "-"))] {
                if let Some(list) = self.by_name.get(std::ffi::OsStr::new(&name))
                    && let Some(p) = list.iter().find(|p| accept(p))
                {
                    return Some(p.clone());
                }
            }
        }
        let rel = recorded.trim_start_matches('/');
        for d in &self.dirs {
            let p = d.join(rel);
            if !rel.is_empty() && accept(&p) {
                return Some(p);
            }
        }
        if let Some(name) = Path::new(recorded).file_name()
            && let Some(list) = self.by_name.get(name)
            && let Some(p) = list.iter().find(|p| accept(p))
        {
            return Some(p.clone());
        }
        if let Some(w) = want {
            let hex: String = w.iter().map(|b| format!("{b:02x}")).collect();
            for c in &self.build_id_caches {
                let (head, tail) = hex.split_at(2.min(hex.len()));
                for p in [
                    c.join(".build-id").join(head).join(tail).join("elf"),
                    c.join(".build-id").join(head).join(tail),
                    c.join(rel).join(&hex).join("elf"),
                ] {
                    if accept(&p) {
                        return Some(p);
                    }
                }
            }
        }
        if self.recorded_paths && recorded.starts_with('/') && accept(Path::new(recorded)) {
            return Some(PathBuf::from(recorded));
        }
        None
    }
}

/// Where a module ran, as simpleperf records it: file address `min_vaddr` was
/// `memory_offset` bytes from the module's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleAnchor {
    /// Distance from the module's first byte in memory.
    pub memory_offset: u64,
    /// The file's virtual address there (a `.text` address: section offset plus `sh_addr`).
    pub min_vaddr: u64,
}

/// One binary of the recording: its recorded path and build id, the file found for it (loaded
/// on first use) and how often its code was wanted but not there.
#[derive(Debug)]
pub struct Binary {
    /// The path recorded (on the device).
    pub path: String,
    /// The build id recorded, if any.
    pub build_id: Option<BuildId>,
    image: OnceLock<Option<Arc<ElfImage>>>,
    /// Memory reads into it that found no file (or no bytes).
    pub missing_reads: AtomicU64,
    /// Why its file could not be used, once tried.
    problem: OnceLock<String>,
    /// A kernel module's anchor as the recording gives it (simpleperf's FILE2): the byte
    /// `memory_offset_of_min_vaddr` bytes from the module's start held the file's virtual
    /// address `min_vaddr` (a text symbol's, in `.text`'s addresses).
    pub module_anchor: Option<ModuleAnchor>,
    /// A kernel module's anchor as kallsyms shows it, found on first use.
    pub(crate) kallsyms_anchor: OnceLock<Option<(u64, u64)>>,
}

impl Binary {
    fn new(path: String, build_id: Option<BuildId>) -> Self {
        Binary {
            path,
            build_id,
            image: OnceLock::new(),
            missing_reads: AtomicU64::new(0),
            problem: OnceLock::new(),
            module_anchor: None,
            kallsyms_anchor: OnceLock::new(),
        }
    }

    /// The file's image, loaded from where `search` finds it the first time it is asked for.
    pub fn image(&self, search: &SymbolSearch) -> Option<&Arc<ElfImage>> {
        self.image
            .get_or_init(|| {
                let Some(p) = search.find(&self.path, self.build_id.as_ref()) else {
                    let _ = self.problem.set("not found".into());
                    return None;
                };
                match ElfImage::open(&p) {
                    Ok(img) => Some(Arc::new(img)),
                    Err(e) => {
                        let _ = self.problem.set(e.to_string());
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The image if it was loaded already (no search).
    pub fn loaded(&self) -> Option<&Arc<ElfImage>> {
        self.image.get().and_then(Option::as_ref)
    }

    /// Gives the binary an image made elsewhere (tests, or a file the caller chose); false if
    /// it was looked up already.
    pub fn set_image(&self, img: ElfImage) -> bool {
        self.image.set(Some(Arc::new(img))).is_ok()
    }

    /// Why the file could not be used, if it was looked for and not found or not readable.
    pub fn problem(&self) -> Option<&str> {
        self.problem.get().map(String::as_str)
    }

    pub(crate) fn count_missing(&self) {
        self.missing_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// simpleperf's `build_id.ToString()`: `0x` and 20 bytes of hex, zero padded.
    pub fn build_id_string(&self) -> String {
        let mut b = [0u8; 20];
        if let Some(id) = &self.build_id {
            let s = id.as_bytes();
            b[..s.len()].copy_from_slice(s);
        }
        let mut out = String::with_capacity(42);
        out.push_str("0x");
        for x in b {
            out.push_str(&format!("{x:02x}"));
        }
        out
    }

    /// The module name kallsyms gives a module recorded at this path: `name` of `[name]`, or
    /// the file name less `.ko` (and compression suffixes) with `-` written `_`.
    pub fn module_name(&self) -> Option<String> {
        if let Some(m) = self.path.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            return (!m.is_empty() && !self.is_kernel()).then(|| m.to_string());
        }
        let file = Path::new(&self.path).file_name()?.to_str()?;
        let stem = [".ko.xz", ".ko.gz", ".ko.zst", ".ko"]
            .iter()
            .find_map(|s| file.strip_suffix(s))?;
        (!stem.is_empty()).then(|| stem.replace('-', "_"))
    }

    /// A kernel image (perf's `[kernel.kallsyms]` maps, simpleperf's `[kernel.kallsyms]`).
    pub fn is_kernel(&self) -> bool {
        self.path.starts_with(KERNEL_PREFIX)
    }

    /// The name perf script gives its dso: `[kernel.kallsyms]` for the kernel (whose maps
    /// perf names `[kernel.kallsyms]_text`), else the recorded path.
    pub fn dso_name(&self) -> &str {
        if self.is_kernel() { KERNEL_PREFIX } else { &self.path }
    }

    /// The symbol a kernel map's page offset is the runtime address of (perf writes
    /// `[kernel.kallsyms]_text`: `_text`), if any.
    pub fn kernel_anchor(&self) -> Option<&str> {
        self.path.strip_prefix(KERNEL_PREFIX).filter(|s| !s.is_empty())
    }
}

/// The binaries of a recording, one per (path, build id).
#[derive(Debug, Default)]
pub struct Binaries {
    list: Vec<Binary>,
    index: HashMap<(String, Option<Vec<u8>>), usize>,
}

impl Binaries {
    /// The number for (`path`, `build_id`), added if new.
    pub fn intern(&mut self, path: &str, build_id: Option<BuildId>) -> usize {
        let key = (path.to_string(), build_id.map(|b| trimmed(b.as_bytes())));
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        self.list.push(Binary::new(path.to_string(), build_id));
        self.index.insert(key, self.list.len() - 1);
        self.list.len() - 1
    }

    /// Records where the modules recorded at `path` were (see [`Binary::module_anchor`]).
    pub fn set_module_anchor(&mut self, path: &str, anchor: ModuleAnchor) {
        for b in self.list.iter_mut().filter(|b| b.path == path) {
            b.module_anchor = Some(anchor);
        }
    }

    /// Binary `i`.
    pub fn get(&self, i: usize) -> Option<&Binary> {
        self.list.get(i)
    }

    /// All of them.
    pub fn iter(&self) -> impl Iterator<Item = &Binary> {
        self.list.iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// None.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// A kernel symbol of `/proc/kallsyms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSymbol {
    /// Its (runtime) address.
    pub start: u64,
    /// The next symbol's address (kallsyms gives no sizes).
    pub end: u64,
    /// Its name.
    pub name: String,
    /// The module holding it, as the line and perf's dso name write it (`[name]`), if any.
    pub module: Option<String>,
}

/// The text symbols of a `/proc/kallsyms` file, by address.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    symbols: Vec<KernelSymbol>,
}

impl Kallsyms {
    /// Reads `/proc/kallsyms` text: `ADDRESS TYPE NAME [MODULE]` lines. Text symbols (types
    /// `t`, `T`, `w`, `W`) are kept; at one address a global symbol is preferred, then the
    /// first. Lines that do not parse are skipped; all-zero addresses (a kernel hiding them,
    /// `kptr_restrict`) are an error, as is a file without one text symbol.
    pub fn parse(text: &str) -> Result<Kallsyms, String> {
        let mut syms: Vec<(KernelSymbol, bool)> = Vec::new();
        let mut zero = 0usize;
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(a), Some(t), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(a, 16) else { continue };
            if !matches!(t, "t" | "T" | "w" | "W") {
                continue;
            }
            if addr == 0 {
                zero += 1;
                continue;
            }
            let module = f
                .next()
                .filter(|m| m.len() > 2 && m.starts_with('[') && m.ends_with(']'))
                .map(str::to_string);
            let global = t == "T" || t == "W";
            syms.push((
                KernelSymbol {
                    start: addr,
                    end: addr,
                    name: name.to_string(),
                    module,
                },
                global,
            ));
        }
        if syms.is_empty() {
            return Err(if zero > 0 {
                format!(
                    "{zero} text symbols, all at address 0 (the kernel hid them: read it as root, or with kptr_restrict 0)"
                )
            } else {
                "no text symbol (lines `ADDRESS TYPE NAME`, types t, T, w or W)".to_string()
            });
        }
        // Stable: the first of a kind wins at an address.
        syms.sort_by(|a, b| a.0.start.cmp(&b.0.start).then(b.1.cmp(&a.1)));
        syms.dedup_by_key(|s| s.0.start);
        let mut symbols: Vec<KernelSymbol> = syms.into_iter().map(|s| s.0).collect();
        for i in 0..symbols.len() {
            // The last one: to the page after its own, as perf ends it.
            let s = symbols[i].start;
            let last = s
                .checked_next_multiple_of(4096)
                .and_then(|x| x.checked_add(4096))
                .unwrap_or(u64::MAX);
            symbols[i].end = symbols.get(i + 1).map_or(last, |n| n.start);
        }
        Ok(Kallsyms { symbols })
    }

    /// The symbol holding `addr`, with the offset into it (none below the first symbol, and
    /// the last one ends a page after its own page).
    pub fn lookup(&self, addr: u64) -> Option<(&KernelSymbol, u64)> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (addr < s.end).then(|| (s, addr - s.start))
    }

    /// The symbols, by address.
    pub fn symbols(&self) -> &[KernelSymbol] {
        &self.symbols
    }
}
