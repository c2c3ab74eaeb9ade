//! The traced processes' memory, rebuilt from the recording: the MMAP/MMAP2 maps of each
//! process (with their page offsets), the threads of each process, and the binaries found for
//! the maps. The decoder reads code through [`RecordingMemory`], which serves the process of
//! the thread currently traced on each CPU.
//!
//! Which thread that is comes from the trace (the context ID in PE_CONTEXT elements: Linux
//! writes the thread id to CONTEXTIDR) or, when context IDs are not traced, from the
//! recording's ITRACE_START and SWITCH records for the CPU. The element sink of the decode
//! ([`crate::decode`]) sets it in [`Streams`] as elements arrive.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use coresight_decode::error::ErrCode;
use coresight_decode::interfaces::TargetMemAccess;
use coresight_decode::memory::MemSpace;

use crate::binaries::{Binaries, Binary, KERNEL_PREFIX, Kallsyms, ModuleAnchor, SymbolSearch};
use crate::elf::ElfImage;
use crate::recording::{MapEvent, Recording, ThreadEventKind};

/// One executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Map {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub pgoff: u64,
    /// Index in [`Model::binaries`].
    pub binary: usize,
    /// File offset of the MMAP record (its place in time).
    pub order: u64,
    /// The process (-1: the kernel).
    pub pid: i32,
}

impl Map {
    /// The file offset of `addr` (which the map must contain).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }
}

/// Processes, threads, maps and binaries of a recording.
#[derive(Debug)]
pub struct Model {
    /// Where binaries are looked for.
    pub search: SymbolSearch,
    /// The binaries named by the maps.
    pub binaries: Binaries,
    /// Every executable map.
    pub maps: Vec<Map>,
    /// Map indexes of each process, by start address.
    by_pid: HashMap<i32, Vec<usize>>,
    /// Kernel maps (pid -1, or in kernel address space), by start address.
    kernel: Vec<usize>,
    /// Parent process of a forked one (it inherits the parent's maps).
    parent: HashMap<i32, i32>,
    /// The process of each thread seen.
    tid_pid: HashMap<i32, i32>,
    /// The last name of each thread (COMM).
    comm: HashMap<i32, String>,
}

/// A kernel address: the upper half of the AArch64 address space.
fn is_kernel_addr(a: u64) -> bool {
    a >> 63 == 1
}

impl Model {
    /// Builds the model of `rec`; binaries are looked for with `search` when first needed.
    pub fn new(rec: &Recording<'_>, search: SymbolSearch) -> Model {
        let mut m = Model {
            search,
            binaries: Binaries::default(),
            maps: Vec::new(),
            by_pid: HashMap::new(),
            kernel: Vec::new(),
            parent: HashMap::new(),
            tid_pid: HashMap::new(),
            comm: HashMap::new(),
        };
        for ev in &rec.maps {
            m.add_map(ev);
        }
        // simpleperf says where each module was: a text address of the file and its distance
        // from the module's start (the loader grows `.plt` before the text by what the module
        // needs, which its file does not say).
        let files = rec.file.simpleperf_files().unwrap_or_default();
        for f in files
            .iter()
            .filter(|f| f.dso_type == crate::features::DSO_KERNEL_MODULE)
        {
            if let Some(off) = f.memory_offset_of_min_vaddr {
                let anchor = ModuleAnchor {
                    memory_offset: off,
                    min_vaddr: f.min_vaddr,
                };
                m.binaries.set_module_anchor(&f.path, anchor);
            }
        }
        for e in &rec.thread_events {
            if e.tid >= 0 && e.pid >= 0 {
                m.tid_pid.insert(e.tid, e.pid);
            }
            match &e.kind {
                ThreadEventKind::Fork { ppid, .. } if *ppid != e.pid && *ppid >= 0 => {
                    m.parent.insert(e.pid, *ppid);
                }
                ThreadEventKind::Comm { name, .. } => {
                    m.comm.insert(e.tid, name.clone());
                }
                _ => {}
            }
        }
        for ev in &rec.maps {
            if ev.tid >= 0 && ev.pid >= 0 {
                m.tid_pid.entry(ev.tid).or_insert(ev.pid);
            }
        }
        let maps = &m.maps;
        for list in m.by_pid.values_mut() {
            list.sort_by_key(|&i| (maps[i].start, maps[i].order));
        }
        m.kernel.sort_by_key(|&i| (maps[i].start, maps[i].order));
        m
    }

    /// Adds a map (executable ones only: the trace only runs code).
    pub fn add_map(&mut self, ev: &MapEvent) {
        if !ev.executable || ev.len == 0 {
            return;
        }
        let binary = self.binaries.intern(&ev.filename, ev.build_id);
        let map = Map {
            start: ev.start,
            end: ev.start.saturating_add(ev.len),
            pgoff: ev.pgoff,
            binary,
            order: ev.offset,
            pid: ev.pid,
        };
        let i = self.maps.len();
        let kernel = ev.pid == -1 || self.binaries.get(binary).is_some_and(Binary::is_kernel);
        self.maps.push(map);
        if kernel {
            self.kernel.push(i);
        } else {
            self.by_pid.entry(ev.pid).or_default().push(i);
        }
    }

    /// The process of thread `tid` (the thread itself if never seen: a main thread).
    pub fn pid_of(&self, tid: i32) -> i32 {
        self.tid_pid.get(&tid).copied().unwrap_or(tid)
    }

    /// The name of thread `tid`, else of its process.
    pub fn comm(&self, tid: i32) -> Option<&str> {
        self.comm
            .get(&tid)
            .or_else(|| self.comm.get(&self.pid_of(tid)))
            .map(String::as_str)
    }

    /// The map of process `pid` holding `addr` as it was at file position `at`: a kernel map
    /// (pid -1, or the kernel's image) holding it, whatever the process; else the latest map
    /// of the process recorded before `at` that holds it, else the first recorded after; then
    /// the parent's (forked processes share their parent's maps); then, for a kernel address,
    /// the last kernel map starting below it.
    pub fn find_map(&self, pid: i32, addr: u64, at: u64) -> Option<usize> {
        if let Some(i) = self.pick(&self.kernel, addr, at) {
            return Some(i);
        }
        let mut p = pid;
        for _ in 0..8 {
            if let Some(list) = self.by_pid.get(&p)
                && let Some(i) = self.pick(list, addr, at)
            {
                return Some(i);
            }
            match self.parent.get(&p) {
                Some(&q) if q != p => p = q,
                _ => break,
            }
        }
        // A kernel map recorded with an end short of the code (simpleperf does not know
        // the kernel's end): the last kernel map starting below a kernel address.
        if !is_kernel_addr(addr) {
            return None;
        }
        let k = self.kernel.partition_point(|&i| self.maps[i].start <= addr);
        k.checked_sub(1).map(|j| self.kernel[j])
    }

    /// Whether map `i` is in the kernel's address space (pid -1, or the kernel's image).
    pub fn is_kernel_map(&self, i: usize) -> bool {
        self.kernel.contains(&i)
    }

    fn pick(&self, list: &[usize], addr: u64, at: u64) -> Option<usize> {
        // Maps starting at or below addr; they are few per address, so a scan back suffices.
        let n = list.partition_point(|&i| self.maps[i].start <= addr);
        let mut before: Option<usize> = None;
        let mut after: Option<usize> = None;
        for &i in list[..n].iter().rev() {
            let m = &self.maps[i];
            if addr >= m.end {
                continue;
            }
            if m.order <= at {
                if before.is_none_or(|b| self.maps[b].order < m.order) {
                    before = Some(i);
                }
            } else if after.is_none_or(|a| self.maps[a].order > m.order) {
                after = Some(i);
            }
        }
        before.or(after)
    }

    /// Map `i`.
    pub fn map(&self, i: usize) -> Option<&Map> {
        self.maps.get(i)
    }

    /// Binary `i`.
    pub fn binary(&self, i: usize) -> Option<&Binary> {
        self.binaries.get(i)
    }

    /// The virtual address in its ELF file of `addr` in map `map`, as simpleperf's
    /// `GetVaddrInFile` gives it (needs the binary's file; `None` without it).
    pub fn vaddr_in_file(&self, map: usize, addr: u64) -> Option<u64> {
        let m = self.maps.get(map)?;
        let bin = self.binaries.get(m.binary)?;
        let img = bin.image(&self.search)?;
        Some(vaddr_of(m, bin, img, self.search.kallsyms.as_deref(), addr))
    }

    /// Copies the code at `addr` of map `map` into `buf` (not past the map's end); returns
    /// how many bytes there were, counting a read that found none as missing for the binary.
    pub fn read(&self, map: usize, addr: u64, buf: &mut [u8]) -> usize {
        let Some(m) = self.maps.get(map) else { return 0 };
        let Some(bin) = self.binaries.get(m.binary) else {
            return 0;
        };
        let room = m.end.saturating_sub(addr).min(buf.len() as u64) as usize;
        let mut n = self.read_kcore(m, bin, addr, &mut buf[..room]);
        if n == 0 {
            n = match bin.image(&self.search) {
                Some(img) => read_code(m, bin, img, self.search.kallsyms.as_deref(), addr, &mut buf[..room]),
                None => 0,
            };
        }
        if n == 0 && room > 0 {
            bin.count_missing();
        }
        n
    }

    /// Like [`Model::read`], from images already loaded only, counting nothing (for the
    /// writers of results, after the decode).
    pub fn read_loaded(&self, map: usize, addr: u64, buf: &mut [u8]) -> usize {
        let Some(m) = self.maps.get(map) else { return 0 };
        let Some(bin) = self.binaries.get(m.binary) else {
            return 0;
        };
        let room = m.end.saturating_sub(addr).min(buf.len() as u64) as usize;
        match self.read_kcore(m, bin, addr, &mut buf[..room]) {
            0 => bin.loaded().map_or(0, |img| {
                read_code(m, bin, img, self.search.kallsyms.as_deref(), addr, &mut buf[..room])
            }),
            n => n,
        }
    }

    /// Kernel code (a map of pid -1, or the kernel's image) from `kcore`, when given: the
    /// memory as it ran (a module's veneers filled in), as perf prefers it.
    fn read_kcore(&self, m: &Map, bin: &Binary, addr: u64, buf: &mut [u8]) -> usize {
        match &self.search.kcore {
            Some(k) if m.pid == -1 || bin.is_kernel() => k.read_vaddr(addr, buf),
            _ => 0,
        }
    }

    /// The function symbol at `addr` in process `pid` (as at file position `at`), with the
    /// offset into it, and the name of the binary (perf's dso): from the binary's symbols,
    /// else, for a kernel address or map, from `--kallsyms`.
    pub fn symbolize(&self, pid: i32, addr: u64, at: u64) -> (Option<(&str, u64)>, Option<&str>) {
        let map = if pid >= 0 || is_kernel_addr(addr) {
            self.find_map(pid, addr, at)
        } else {
            self.pick(&self.kernel, addr, at)
        };
        let bin = map.and_then(|i| self.binary(self.maps[i].binary));
        let sym = map.zip(bin).and_then(|(i, b)| {
            let img = b.image(&self.search)?;
            img.symbol_at(vaddr_of(&self.maps[i], b, img, self.search.kallsyms.as_deref(), addr))
                .map(|(s, off)| (s.name.as_str(), off))
        });
        if sym.is_some() {
            return (sym, bin.map(Binary::dso_name));
        }
        let kernel_space = map.map_or(is_kernel_addr(addr), |i| self.is_kernel_map(i));
        if kernel_space
            && let Some(k) = &self.search.kallsyms
            && let Some((s, off)) = k.lookup(addr)
        {
            let dso = match (&s.module, bin) {
                (Some(m), _) => Some(m.as_str()),
                (None, Some(b)) => Some(b.dso_name()),
                (None, None) => Some(KERNEL_PREFIX),
            };
            return (Some((s.name.as_str(), off)), dso);
        }
        (None, bin.map(Binary::dso_name))
    }
}

/// The KASLR offset of a kernel map: its page offset is the runtime address of the symbol its
/// name gives (`[kernel.kallsyms]_text`), which the image has at its link address.
fn kernel_slide(m: &Map, bin: &Binary, img: &ElfImage) -> u64 {
    match bin.kernel_anchor().and_then(|a| img.anchor(a)) {
        Some(link) if m.pgoff != 0 => m.pgoff.wrapping_sub(link),
        _ => 0,
    }
}

/// Whether `addr` of map `m` is found by virtual address (a kernel image, a module) rather
/// than by file offset.
fn by_vaddr(bin: &Binary, img: &ElfImage) -> bool {
    img.relocatable || bin.is_kernel()
}

/// The virtual address in the file of `addr` of map `m`: a kernel image's less the KASLR
/// offset; a module's in its layout, counted from a point whose place the recording gives
/// (else from its first byte, the map's start plus its page offset); else through the file
/// offset.
fn vaddr_of(m: &Map, bin: &Binary, img: &ElfImage, kallsyms: Option<&Kallsyms>, addr: u64) -> u64 {
    if img.relocatable {
        let in_module = addr.wrapping_sub(m.start).wrapping_add(m.pgoff);
        match module_anchor(m, bin, img, kallsyms) {
            Some((memory_offset, laid_at)) => in_module.wrapping_sub(memory_offset).wrapping_add(laid_at),
            None => in_module.wrapping_add(img.module_base()),
        }
    } else if bin.is_kernel() {
        addr.wrapping_sub(kernel_slide(m, bin, img))
    } else {
        img.offset_to_vaddr(m.file_offset(addr))
    }
}

/// A point of a module whose place the recording gives: (its distance from the start of the
/// module's map, its address in the layout). From simpleperf's FILE2 record (`min_vaddr`, a
/// `.text` address, at `memory_offset_of_min_vaddr`), else from kallsyms (perf's `--kcore`
/// copy, or `--kallsyms`): the first of the module's text functions it lists. `None`: the
/// file's layout is all there is.
fn module_anchor(m: &Map, bin: &Binary, img: &ElfImage, kallsyms: Option<&Kallsyms>) -> Option<(u64, u64)> {
    let text = img.module_text()?;
    if let Some(a) = bin.module_anchor {
        let laid_at = text.addr.wrapping_add(a.min_vaddr.wrapping_sub(text.file_addr));
        return Some((a.memory_offset, laid_at));
    }
    let k = kallsyms?;
    *bin.kallsyms_anchor.get_or_init(|| {
        let module = format!("[{}]", bin.module_name()?);
        let at: HashMap<&str, u64> = k
            .symbols()
            .iter()
            .filter(|s| s.module.as_deref() == Some(module.as_str()))
            .map(|s| (s.name.as_str(), s.start))
            .collect();
        let end = text.addr.saturating_add(text.size);
        img.symbols()
            .iter()
            .filter(|s| s.start >= text.addr && s.start < end)
            .find_map(|s| {
                let run = *at.get(s.name.as_str())?;
                Some((run.wrapping_sub(m.start).wrapping_add(m.pgoff), s.start))
            })
    })
}

fn read_code(m: &Map, bin: &Binary, img: &ElfImage, kallsyms: Option<&Kallsyms>, addr: u64, buf: &mut [u8]) -> usize {
    if by_vaddr(bin, img) {
        img.read_vaddr(vaddr_of(m, bin, img, kallsyms, addr), buf)
    } else {
        img.read_at(m.file_offset(addr), buf)
    }
}

/// The thread traced on each stream (a CPU's trace unit), shared by the decoder's memory and
/// its element sink without locks.
#[derive(Debug)]
pub struct Streams {
    slots: Vec<StreamSlot>,
    /// File offset of the buffer being decoded (orders the maps in time).
    pub position: AtomicU64,
}

#[derive(Debug)]
struct StreamSlot {
    tid: AtomicI32,
    pid: AtomicI32,
    generation: AtomicU64,
    /// Context IDs name the thread (else the recording's thread events do).
    from_context: AtomicBool,
}

impl Streams {
    /// `n` streams, no thread known.
    pub fn new(n: usize) -> Streams {
        Streams {
            slots: (0..n)
                .map(|_| StreamSlot {
                    tid: AtomicI32::new(-1),
                    pid: AtomicI32::new(-1),
                    generation: AtomicU64::new(0),
                    from_context: AtomicBool::new(false),
                })
                .collect(),
            position: AtomicU64::new(0),
        }
    }

    /// Number of streams.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// No streams.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The thread and process on stream `s` (-1: unknown).
    pub fn thread(&self, s: usize) -> (i32, i32) {
        match self.slots.get(s) {
            Some(x) => (x.pid.load(Ordering::Relaxed), x.tid.load(Ordering::Relaxed)),
            None => (-1, -1),
        }
    }

    /// Sets the thread on stream `s`; a change of process changes the stream's memory
    /// generation so that the decoder drops code it walked in the other process.
    pub fn set_thread(&self, s: usize, pid: i32, tid: i32) {
        let Some(x) = self.slots.get(s) else { return };
        x.tid.store(tid, Ordering::Relaxed);
        if x.pid.swap(pid, Ordering::Relaxed) != pid {
            x.generation.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Marks that context IDs name stream `s`'s thread.
    pub fn set_from_context(&self, s: usize, on: bool) {
        if let Some(x) = self.slots.get(s) {
            x.from_context.store(on, Ordering::Relaxed);
        }
    }

    /// Whether context IDs name stream `s`'s thread.
    pub fn from_context(&self, s: usize) -> bool {
        self.slots
            .get(s)
            .is_some_and(|x| x.from_context.load(Ordering::Relaxed))
    }

    /// Stream `s`'s memory generation.
    pub fn generation(&self, s: usize) -> u64 {
        self.slots.get(s).map_or(0, |x| x.generation.load(Ordering::Relaxed))
    }

    /// Changes every stream's generation (a new buffer: maps may have changed).
    pub fn bump_all(&self) {
        for x in &self.slots {
            x.generation.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Which stream a memory read is for: every trace ID of a formatted tree maps to one; a
/// single-source tree serves one stream.
#[derive(Debug, Clone)]
pub enum StreamOf {
    /// Trace ID → stream.
    ById(Box<[Option<u16>; 128]>),
    /// One stream.
    Fixed(usize),
}

impl StreamOf {
    /// The stream of `trace_id`.
    pub fn get(&self, trace_id: u8) -> Option<usize> {
        match self {
            StreamOf::ById(t) => t[trace_id as usize & 0x7f].map(usize::from),
            StreamOf::Fixed(s) => Some(*s),
        }
    }
}

/// The decoder's view of target memory: code of the current process of each stream, read
/// from the binaries found for its maps.
pub struct RecordingMemory {
    model: Arc<Model>,
    streams: Arc<Streams>,
    stream_of: StreamOf,
    /// The last map used per stream, with the process and file position it was found for
    /// (most reads fall in it).
    last: Vec<Option<(i32, u64, usize)>>,
}

impl RecordingMemory {
    /// Memory for the streams `stream_of` names.
    pub fn new(model: Arc<Model>, streams: Arc<Streams>, stream_of: StreamOf) -> Self {
        let n = streams.len();
        RecordingMemory {
            model,
            streams,
            stream_of,
            last: vec![None; n],
        }
    }
}

impl TargetMemAccess for RecordingMemory {
    fn read_target_memory(
        &mut self,
        address: u64,
        trace_id: u8,
        _mem_space: MemSpace,
        buf: &mut [u8],
    ) -> Result<usize, ErrCode> {
        let Some(s) = self.stream_of.get(trace_id) else {
            return Ok(0);
        };
        let (pid, _) = self.streams.thread(s);
        let at = self.streams.position.load(Ordering::Relaxed);
        let model = &self.model;
        let cached = self.last.get(s).copied().flatten().filter(|&(p, a, i)| {
            let m = &model.maps[i];
            p == pid && a == at && address >= m.start && address < m.end
        });
        let Some(i) = cached.map(|(_, _, i)| i).or_else(|| model.find_map(pid, address, at)) else {
            return Ok(0);
        };
        if let Some(slot) = self.last.get_mut(s) {
            *slot = Some((pid, at, i));
        }
        Ok(model.read(i, address, buf))
    }

    fn generation(&self, trace_id: u8) -> u64 {
        self.stream_of.get(trace_id).map_or(0, |s| self.streams.generation(s))
    }
}

/// The code of one process as the recording's maps give it, for what writes results after
/// the decode (a Tarmac writer's opcodes): the process and the file position (of the buffer)
/// are set before each element with [`ProcessMemory::set`], on any clone. Reads only images
/// the decode loaded, and counts no missing code.
#[derive(Debug, Clone)]
pub struct ProcessMemory {
    model: Arc<Model>,
    pid: Arc<AtomicI32>,
    position: Arc<AtomicU64>,
}

impl ProcessMemory {
    /// Memory of no process yet (kernel maps only).
    pub fn new(model: Arc<Model>) -> Self {
        ProcessMemory {
            model,
            pid: Arc::new(AtomicI32::new(-1)),
            position: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    /// The process whose memory is read next, as at file position `position`.
    pub fn set(&self, pid: i32, position: u64) {
        self.pid.store(pid, Ordering::Relaxed);
        self.position.store(position, Ordering::Relaxed);
    }
}

impl TargetMemAccess for ProcessMemory {
    fn read_target_memory(
        &mut self,
        address: u64,
        _trace_id: u8,
        _mem_space: MemSpace,
        buf: &mut [u8],
    ) -> Result<usize, ErrCode> {
        let pid = self.pid.load(Ordering::Relaxed);
        let at = self.position.load(Ordering::Relaxed);
        Ok(self
            .model
            .find_map(pid, address, at)
            .map_or(0, |i| self.model.read_loaded(i, address, buf)))
    }
}
