//! Generated executions as a Linux `perf.data`, laid out as `perf record -e
//! cs_etm//u -a` writes it on an Arm64 machine, with the ELF executable the
//! trace ran in: so that Linux perf (and our own perf.data reader) can decode
//! them and the result be checked against the truth.
//!
//! Each traced CPU runs its own generated A64 program, a process of its own
//! (pid [`PID_BASE`] + CPU) at EL0, with an ETMv4 or an ETE tracing it with
//! context IDs (the PID, as a kernel with `CONFIG_PID_IN_CONTEXTIDR` writes
//! it) and, by default, timestamps. All programs are laid out in one ELF
//! ([`crate::elf`]), which every process maps. The trace is:
//!
//! - formatted (an ETR): one CoreSight frame stream interleaving every CPU's
//!   trace ID, in the first CPU's AUX buffer, as a sink shared by all CPUs
//!   hands its data to whichever event is active;
//! - unformatted (TRBE): each CPU's raw stream in its own AUX buffer, the AUX
//!   records flagged `PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW`.
//!
//! Linux perf resets its decoder at every AUXTRACE buffer, so a buffer holds
//! whole copies of a CPU's trace (or of the frame stream): [`PerfOptions::min_aux_bytes`]
//! repeats them to make a large file for benchmarks without generating (and
//! keeping the truth of) a huge execution. Each buffer decodes to its copies'
//! truth.

use std::collections::BTreeMap;

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile, Isa};
use coresight_perf_data::{
    AuxFlags, AuxFormat, BuildId, CpuConfig, CsEtmInfo, Etmv4Config, Recording, SampleFields, TraceUnit, Writer,
    WriterOptions,
};

use crate::elf::{self, ElfImage, Function};
use crate::ete::{self, EteOptions};
use crate::etmv4::{self, Choice, Config, Encoder, Etmv4Options, Gen};
use crate::execution::ExecInsn;
use crate::flow::{self, Ctx, WalkCfg};
use crate::formatter::{FormatterConfig, FrameFormatter};
use crate::snapshot_writer::{BufferSpec, DeviceSpec, DumpSpec, SnapshotSpec};
use crate::{BufferLayout, Generated, Rng, Truth, a64};

/// The first traced process's id; CPU `n` runs process `PID_BASE + n`.
pub const PID_BASE: u32 = 4000;
/// Where the code of the first program is loaded.
pub const TEXT_ADDR: u64 = 0x40_0000;
/// The cs_etm PMU type written (any dynamic PMU number works; this is a common one).
pub const PMU_TYPE: u32 = 10;
/// The process name in COMM records.
pub const COMM: &str = "trc_gen_prog";
/// The largest AUXTRACE buffer written when copies are repeated (a typical AUX area size).
const CHUNK: usize = 4 << 20;
/// cs_etm attribute config bits (`ETM_OPT_*`): cycle counts, context ID, timestamps, return stack.
const ETM_OPT_BRANCH_BROADCAST: u64 = 1 << 8;
const ETM_OPT_CYCACC: u64 = 1 << 12;
const ETM_OPT_CTXTID: u64 = 1 << 14;
const ETM_OPT_TS: u64 = 1 << 28;
const ETM_OPT_RETSTK: u64 = 1 << 29;
/// TRCAUTHSTATUS of a trace unit with non-secure invasive and non-invasive debug enabled.
const TRCAUTHSTATUS: u64 = 0xcc;

/// The trace unit of every CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerfProtocol {
    Etmv4,
    Ete,
}

impl PerfProtocol {
    pub fn from_name(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "etmv4" | "etm4" | "etmv4i" => Some(PerfProtocol::Etmv4),
            "ete" => Some(PerfProtocol::Ete),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PerfProtocol::Etmv4 => "etmv4",
            PerfProtocol::Ete => "ete",
        }
    }
}

/// Where the kernel's image is linked and runs (no KASLR offset) in kernel recordings.
pub const KERNEL_TEXT: u64 = 0xffff_8000_0801_0000;
/// Where the module of module recordings is loaded (its first byte).
pub const MODULE_BASE: u64 = 0xffff_8000_7a00_0000;
/// Where the module's `.text` is from its first byte: after its NOBITS `.plt` (0x28 bytes) and
/// `.text.ftrace_trampoline` (0xc), at `.text`'s 64-byte alignment, as the module loader lays
/// them out.
pub const MODULE_TEXT_OFFSET: u64 = 0x40;
/// The module's name (`/proc/modules`, kallsyms' `[kgen]`).
pub const MODULE_NAME: &str = "kgen";

/// Where the traced code runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PerfSpace {
    /// Processes at EL0, each mapping the executable (`cs_etm//u`).
    #[default]
    User,
    /// The kernel at EL1: the programs are the kernel image's code, mapped as
    /// `[kernel.kallsyms]_text` for pid -1 (`cs_etm//k`).
    Kernel,
    /// A loadable module at EL1: the programs are the `.text` of a relocatable module
    /// ([`KernelFiles::module`]), mapped for pid -1 at [`MODULE_BASE`] under
    /// [`PerfOptions::elf_path`].
    Module,
}

/// What `perf record --kcore` leaves beside a kernel recording (its `kcore_dir`), and the
/// module's file.
#[derive(Clone, Debug)]
pub struct KernelFiles {
    /// `kcore`: an ELF core file whose `PT_LOAD` segments hold the code at its addresses.
    pub kcore: Vec<u8>,
    /// `kallsyms`: `/proc/kallsyms` text naming the functions (a module's with `[kgen]`).
    pub kallsyms: String,
    /// `modules`: `/proc/modules` text (the module's name, size and address).
    pub modules: String,
    /// The module (ET_REL) for [`PerfSpace::Module`].
    pub module: Option<crate::elf::ModuleImage>,
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct PerfOptions {
    pub seed: u64,
    pub protocol: PerfProtocol,
    /// Formatted (ETR) or unformatted (TRBE).
    pub layout: BufferLayout,
    /// CPUs traced (at least 1).
    pub cpus: u32,
    /// Approximate number of waypoints per CPU.
    pub length: usize,
    /// Trace unit options. Exceptions and context changes are always off (user space
    /// traced, one process per CPU); context ID tracing is always on; timestamps are forced
    /// on unless `per_thread`.
    pub etmv4: Etmv4Options,
    /// At least this many bytes of AUX data in all: each CPU's trace (or the frame stream)
    /// is repeated in whole copies until there are.
    pub min_aux_bytes: u64,
    /// The ELF's file name as the MMAP2 records and the build-id table give it (where perf
    /// looks for it, under `--symfs` if given).
    pub elf_path: String,
    /// A per-thread recording (`perf record -e cs_etm//u -- PROG`, one CPU only): no CPU or
    /// time in the samples, the AUXTRACE buffer belongs to the thread (CPU -1). Linux perf
    /// then decodes "timeless", in file order.
    pub per_thread: bool,
    /// A per-CPU recording whose trace units have timestamps off (as simpleperf's are): the
    /// samples still carry a time, but the trace has none, so perf decodes "timeless".
    pub untimed: bool,
    /// Write pipe mode (what `perf record -o -` writes) instead of file mode: the same
    /// records, with the attribute, features and build ids as records at the start.
    pub pipe: bool,
    /// Where the code runs: user space, the kernel or a module.
    pub space: PerfSpace,
}

impl Default for PerfOptions {
    fn default() -> Self {
        PerfOptions {
            seed: 1,
            protocol: PerfProtocol::Etmv4,
            layout: BufferLayout::Formatted,
            cpus: 1,
            length: 200,
            etmv4: Etmv4Options::default(),
            min_aux_bytes: 0,
            elf_path: "/tmp/trc_gen_prog".into(),
            per_thread: false,
            untimed: false,
            pipe: false,
            space: PerfSpace::User,
        }
    }
}

/// One traced CPU.
#[derive(Clone, Debug)]
pub struct PerfCpu {
    pub cpu: u32,
    /// Its process (and thread) id: what its context ID packets carry.
    pub pid: u32,
    pub trace_id: u8,
    /// The trace unit registers as AUXTRACE_INFO gives them.
    pub config: CpuConfig,
    /// One copy of its trace, unformatted.
    pub trace: Vec<u8>,
    /// The truth of one copy of its trace.
    pub truth: Vec<Truth>,
    /// The program's functions.
    pub functions: Vec<Function>,
    /// The trace unit options used (as the snapshot description gives them).
    pub description: String,
}

/// One AUXTRACE buffer written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfBuffer {
    /// The CPU whose AUX area it came from (None: per-thread).
    pub cpu: Option<u32>,
    /// Offset in that AUX area.
    pub aux_offset: u64,
    /// Bytes.
    pub size: u64,
    /// Whole copies of the trace it holds.
    pub copies: usize,
}

/// A generated recording.
#[derive(Clone, Debug)]
pub struct PerfRecording {
    /// The perf.data file.
    pub perf_data: Vec<u8>,
    /// The ELF executable (write it where [`PerfOptions::elf_path`] says); in kernel
    /// recordings, the kernel image (a vmlinux) or the module's memory as an executable.
    pub elf: ElfImage,
    /// Kernel recordings: the kcore folder's files and the module.
    pub kernel: Option<KernelFiles>,
    pub cpus: Vec<PerfCpu>,
    pub buffers: Vec<PerfBuffer>,
    pub layout: BufferLayout,
    pub protocol: PerfProtocol,
}

impl PerfRecording {
    /// The truth a buffer of `cpu` decodes to, for the CPU (trace ID) `of` ([`PerfBuffer`]s
    /// of formatted trace hold every CPU's trace).
    pub fn buffer_truth(&self, b: &PerfBuffer, of: u32) -> Vec<Truth> {
        let Some(c) = self.cpus.iter().find(|c| c.cpu == of) else {
            return Vec::new();
        };
        let mut v = Vec::with_capacity(c.truth.len() * b.copies);
        for _ in 0..b.copies {
            v.extend_from_slice(&c.truth);
        }
        v
    }

    /// Total AUX bytes.
    pub fn aux_bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.size).sum()
    }
}

/// The generated functions of a program: its first block and every direct call's target
/// start one, which runs to the next one's start (or the end of the code).
fn functions(prog: &flow::Program, cpu: u32, end: u64) -> Vec<Function> {
    let mut starts: Vec<usize> = vec![prog.main.start];
    for b in &prog.blocks[prog.main.clone()] {
        if let flow::Term::Bl(t) = b.term {
            starts.push(t);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    let addrs: Vec<u64> = starts.iter().map(|&i| prog.blocks[i].addr).collect();
    addrs
        .iter()
        .enumerate()
        .map(|(k, &a)| {
            let next = addrs.get(k + 1).copied().unwrap_or(end);
            let name = if k == 0 {
                format!("cpu{cpu}_main")
            } else {
                format!("cpu{cpu}_func{}", starts[k])
            };
            Function {
                name,
                addr: a,
                size: next - a,
            }
        })
        .collect()
}

fn reg(regs: &[(String, u64)], name: &str) -> u64 {
    regs.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v)
}

/// One CPU's program, execution and trace; `base` is where its code goes.
fn generate_cpu(o: &PerfOptions, cpu: u32, base: u64) -> (PerfCpu, flow::Program, u64) {
    let mut rng = cpu_rng(o, cpu);
    let unit = pick_unit(o, &mut rng);
    let pid = PID_BASE + cpu;
    let n_blocks = 20 + rng.below(60) as usize;
    let prog = a64::flow_program(&mut rng, base, n_blocks, None, false);
    let start = Ctx {
        el: if o.space == PerfSpace::User { 0 } else { 1 },
        secure: false,
        nse: false,
        aarch64: true,
        cid: pid,
        vmid: 0,
    };
    let wcfg = WalkCfg::basic(false, false, false, 2, start);
    let segs = flow::walk(&mut rng, &prog, &wcfg, o.length.max(1));
    let end = prog
        .images
        .iter()
        .map(|(a, c)| a + c.len() as u64)
        .max()
        .unwrap_or(base);
    let c = encode_cpu(o, cpu, &mut rng, &unit, &segs, functions(&prog, cpu, end));
    (c, prog, end)
}

/// The random source of CPU `cpu`'s program and trace.
fn cpu_rng(o: &PerfOptions, cpu: u32) -> Rng {
    Rng::new(o.seed.wrapping_add(u64::from(cpu).wrapping_mul(0x1_0000_0001)) ^ 0x9e2f_da7a)
}

/// A CPU's trace unit: its configuration, ETE revision and core name.
struct Unit {
    cfg: Config,
    revision: u32,
    core: &'static str,
}

/// Picks a CPU's trace unit as perf would find it set up.
fn pick_unit(o: &PerfOptions, rng: &mut Rng) -> Unit {
    let mut etm = o.etmv4;
    // User space of one process: no exceptions or context changes to trace.
    etm.exceptions = Choice::Off;
    etm.context_changes = Choice::Off;
    // Linux perf 6.1 orders the CPUs' trace by its timestamps (and needs one to start
    // decoding) unless the recording is per-thread or untimed.
    if o.untimed {
        etm.timestamps = Choice::Off;
    } else if !o.per_thread {
        etm.timestamps = Choice::On;
    }
    let (mut cfg, revision, core) = match o.protocol {
        PerfProtocol::Etmv4 => {
            let cfg = Config::pick(rng, &etm, false);
            let core = ["Cortex-A53", "Cortex-A57", "Cortex-A72"][rng.below(3) as usize];
            (cfg, 0, core)
        }
        PerfProtocol::Ete => {
            // ETE's Armv9 extras stay off: perf traces plain user code here.
            let eo = EteOptions {
                etmv4: etm,
                ts_marker: Choice::Off,
                tme: Choice::Off,
                ite: Choice::Off,
                rme: Choice::Off,
                wfx: Choice::Off,
                multi_session: Choice::Off,
                sessions: None,
            };
            let (cfg, revision) = ete::pick_config(rng, &eo);
            let core = ete::CORES[rng.below(ete::CORES.len() as u64) as usize];
            (cfg, revision, core)
        }
    };
    // Context IDs carry the PID; no VMID, which perf would read as the PID instead.
    cfg.cid = true;
    cfg.vmid_bits = 0;
    // Trace is never filtered off: the truth does not say where trace comes back on, which
    // perf reports as a gap, so a comparison with perf's branches could not tell a periodic
    // context (no gap) from a trace-on (a gap).
    cfg.continuous = true;
    Unit { cfg, revision, core }
}

/// Encodes a CPU's execution `segs` with its trace unit `unit`.
fn encode_cpu(
    o: &PerfOptions,
    cpu: u32,
    rng: &mut Rng,
    unit: &Unit,
    segs: &[flow::Seg],
    functions: Vec<Function>,
) -> PerfCpu {
    let cfg = &unit.cfg;
    let pid = PID_BASE + cpu;
    let mut enc = Encoder::new(256 + rng.below(1024) as usize);
    enc.f45 = cfg.f45;
    enc.exact = cfg.exact;
    enc.is64 = true;
    enc.vary = Some(Rng::new(rng.next_u64()));
    // CPUs' timestamps start close together, as one system counter's would.
    let ts = 0x10_0000_0000 + u64::from(cpu) * 0x100 + rng.below(0x100);
    let (trace, truth, _, _) = Gen::new(cfg, enc, ts, segs.len() * 2).run(rng, segs);
    // Linux's legacy CPU trace IDs: 0x10 + 2 * CPU.
    let trace_id = (0x10 + 2 * cpu) as u8;
    let regs = match o.protocol {
        PerfProtocol::Etmv4 => etmv4::registers(rng, cfg, trace_id),
        PerfProtocol::Ete => ete::registers(rng, cfg, unit.revision, trace_id),
    };
    let e = Etmv4Config {
        trcconfigr: reg(&regs, "TRCCONFIGR"),
        trctraceidr: reg(&regs, "TRCTRACEIDR"),
        trcidr0: reg(&regs, "TRCIDR0"),
        trcidr1: reg(&regs, "TRCIDR1"),
        trcidr2: reg(&regs, "TRCIDR2"),
        trcidr8: reg(&regs, "TRCIDR8"),
        trcauthstatus: TRCAUTHSTATUS,
        trcdevarch: None,
        ts_source: None,
    };
    let config = match o.protocol {
        PerfProtocol::Etmv4 => CpuConfig::etmv4(cpu, e),
        PerfProtocol::Ete => CpuConfig::ete(
            cpu,
            Etmv4Config {
                trcdevarch: Some(reg(&regs, "TRCDEVARCH")),
                ..e
            },
        ),
    };
    let description = format!("{} {}", unit.core, cfg.describe());
    PerfCpu {
        cpu,
        pid,
        trace_id,
        config,
        trace,
        truth,
        functions,
        description,
    }
}

/// Interleaves the CPUs' streams into one frame stream, in uneven pieces as a funnel would.
fn format_streams(cpus: &[PerfCpu], rng: &mut Rng) -> Vec<u8> {
    let mut f = FrameFormatter::new(FormatterConfig::default());
    let mut at = vec![0usize; cpus.len()];
    loop {
        let left: Vec<usize> = (0..cpus.len()).filter(|&i| at[i] < cpus[i].trace.len()).collect();
        if left.is_empty() {
            break;
        }
        let i = left[rng.below(left.len() as u64) as usize];
        let t = &cpus[i].trace;
        let n = (1 + rng.below(48) as usize).min(t.len() - at[i]);
        f.push(cpus[i].trace_id, &t[at[i]..at[i] + n]);
        at[i] += n;
    }
    f.finish()
}

/// Generates a recording: the programs, their executions and trace, the ELF and the
/// perf.data. Errors only when the options cannot make one (no CPUs, a per-thread recording
/// of several CPUs, more CPUs than trace IDs).
pub fn generate_perf_data(o: &PerfOptions) -> Result<PerfRecording, String> {
    if o.cpus == 0 {
        return Err("no CPUs to trace".into());
    }
    if o.per_thread && o.cpus > 1 {
        return Err("a per-thread recording traces one CPU".into());
    }
    // Trace IDs 0x10 + 2n must stay below 0x70.
    if o.cpus > 47 {
        return Err(format!("{} CPUs: at most 47 have trace IDs", o.cpus));
    }
    let code_base = match o.space {
        PerfSpace::User => TEXT_ADDR,
        PerfSpace::Kernel => KERNEL_TEXT,
        PerfSpace::Module => MODULE_BASE + MODULE_TEXT_OFFSET,
    };
    let mut cpus = Vec::new();
    let mut text = Vec::new();
    let mut base = code_base;
    for cpu in 0..o.cpus {
        let (c, prog, end) = generate_cpu(o, cpu, base);
        for (addr, code) in &prog.images {
            let off = (addr - code_base) as usize;
            if text.len() < off + code.len() {
                text.resize(off + code.len(), 0);
            }
            text[off..off + code.len()].copy_from_slice(code);
        }
        // The next program a page on.
        base = (end + 0x1000).next_multiple_of(0x1000);
        cpus.push(c);
    }
    let funcs: Vec<Function> = cpus.iter().flat_map(|c| c.functions.iter().cloned()).collect();
    let (elf, kernel) = match o.space {
        PerfSpace::User => (elf::write_elf(TEXT_ADDR, &text, &funcs, TEXT_ADDR)?, None),
        PerfSpace::Kernel => {
            let mut with_text = funcs.clone();
            with_text.push(Function {
                name: "_text".into(),
                addr: KERNEL_TEXT,
                size: 0,
            });
            let image = elf::write_elf(KERNEL_TEXT, &text, &with_text, KERNEL_TEXT)?;
            // The first function is at `_text`: listed first, so that it names the address.
            let mut kallsyms = String::new();
            for f in &funcs {
                kallsyms.push_str(&format!("{:016x} T {}\n", f.addr, f.name));
            }
            kallsyms.push_str(&format!("{KERNEL_TEXT:016x} T _text\n"));
            let files = KernelFiles {
                kcore: elf::write_core(&[(KERNEL_TEXT, &text)]),
                kallsyms,
                modules: String::new(),
                module: None,
            };
            (image, Some(files))
        }
        PerfSpace::Module => {
            let module = module_of(&text, &funcs, MODULE_BASE + MODULE_TEXT_OFFSET)?;
            // The module's memory: the loader's veneers (never run here) then the text.
            let mut memory = vec![0u8; MODULE_TEXT_OFFSET as usize];
            memory.extend_from_slice(&text);
            let image = elf::write_elf(MODULE_BASE, &memory, &funcs, MODULE_BASE)?;
            let mut kallsyms = format!("{KERNEL_TEXT:016x} T _text\n{KERNEL_TEXT:016x} T _stext\n");
            for f in &funcs {
                kallsyms.push_str(&format!("{:016x} t {}\t[{MODULE_NAME}]\n", f.addr, f.name));
            }
            let modules = format!(
                "{MODULE_NAME} {} 0 - Live 0x{MODULE_BASE:016x}\n",
                (memory.len() as u64).next_multiple_of(0x1000)
            );
            let files = KernelFiles {
                kcore: elf::write_core(&[(KERNEL_TEXT, &[0u8; 0x1000]), (MODULE_BASE, &memory)]),
                kallsyms,
                modules,
                module: Some(module),
            };
            (image, Some(files))
        }
    };
    let mut r = record(o, cpus, elf, kernel.as_ref().and_then(|k| k.module.as_ref()));
    r.kernel = kernel;
    Ok(r)
}

/// A module holding `text` as [`PerfSpace::Module`] writes it: an empty `.text` first (as a
/// compiler leaves it), a NOBITS `.plt` (0x28 bytes, 16-aligned) and
/// `.text.ftrace_trampoline` (0xc, 8-aligned), then the code in `.text.kgen` (64-aligned: at
/// [`MODULE_TEXT_OFFSET`] of the module), with `funcs` named at their addresses less
/// `text_base`, the address `text` was generated at.
pub fn module_of(text: &[u8], funcs: &[Function], text_base: u64) -> Result<crate::elf::ModuleImage, String> {
    use crate::elf::{ModFunction, ModSection};
    let sec = |name: &str, align: u64, bytes: Option<Vec<u8>>, size: u64| ModSection {
        name: name.into(),
        exec: true,
        write: false,
        align,
        bytes,
        size,
    };
    let sections = [
        sec(".text", 1, Some(Vec::new()), 0),
        sec(".plt", 16, None, 0x28),
        sec(".text.ftrace_trampoline", 8, None, 0xc),
        sec(".text.kgen", 64, Some(text.to_vec()), 0),
    ];
    let fns: Vec<ModFunction> = funcs
        .iter()
        .map(|f| ModFunction {
            name: f.name.clone(),
            section: 3,
            offset: f.addr - text_base,
            size: f.size,
        })
        .collect();
    elf::write_module(&sections, &fns)
}

/// A recording of a real execution: `insns` (A64 code, from
/// [`crate::execution::insns_from_tarmac`]) run by one process on CPU 0, in the executable
/// whose file is `elf` (it needs a 20-byte GNU build id, `-Wl,--build-id`). The trace unit
/// is picked from `o.seed` as for generated programs (`o.cpus` must be 1; `o.length` is not
/// used); the process maps the ELF's executable segment. The CPU's functions are the ELF's
/// function symbols.
pub fn generate_perf_data_from_execution(
    o: &PerfOptions,
    insns: &[ExecInsn],
    elf: &[u8],
) -> Result<PerfRecording, String> {
    if o.cpus != 1 {
        return Err(format!("an execution runs on one CPU, not {}", o.cpus));
    }
    if insns.is_empty() {
        return Err("no instructions to encode".into());
    }
    if let Some(i) = insns.iter().find(|i| i.isa != Isa::Aarch64) {
        return Err(format!(
            "{:#x}: not A64 code: perf recordings here trace AArch64",
            i.addr
        ));
    }
    let image = real_elf(elf)?;
    let pid = PID_BASE;
    let pe = ArchProfile::new(ArchVersion::V8, CoreProfile::CortexA);
    let mut segs = crate::execution::segments(insns, pe);
    for s in &mut segs {
        // The process's thread id is its context ID.
        s.ctx.cid = pid;
        s.ctx.vmid = 0;
    }
    let mut rng = cpu_rng(o, 0);
    let unit = pick_unit(o, &mut rng);
    let c = encode_cpu(o, 0, &mut rng, &unit, &segs, image.1);
    Ok(record(o, vec![c], image.0, None))
}

/// A real executable as [`ElfImage`] (its executable segment as the code, page aligned) and
/// its function symbols.
fn real_elf(data: &[u8]) -> Result<(ElfImage, Vec<Function>), String> {
    use goblin::elf::Elf;
    use goblin::elf::program_header::{PF_X, PT_LOAD};
    use goblin::elf::sym::STT_FUNC;
    const PAGE: u64 = 0x1000;
    let elf = Elf::parse(data).map_err(|e| format!("not a readable ELF file ({e})"))?;
    let text = elf
        .program_headers
        .iter()
        .find(|p| p.p_type == PT_LOAD && p.p_flags & PF_X != 0)
        .ok_or("no executable loadable segment")?;
    let build_id = elf
        .iter_note_headers(data)
        .into_iter()
        .flatten()
        .flatten()
        .find(|n| n.n_type == goblin::elf::note::NT_GNU_BUILD_ID && n.name == "GNU")
        .map(|n| n.desc.to_vec())
        .ok_or("no GNU build id note (link with -Wl,--build-id)")?;
    let build_id: [u8; 20] = build_id
        .as_slice()
        .try_into()
        .map_err(|_| format!("a {}-byte build id: a 20-byte one (SHA-1) is needed", build_id.len()))?;
    let text_addr = text.p_vaddr & !(PAGE - 1);
    let text_offset = text.p_offset & !(PAGE - 1);
    let mut functions: Vec<Function> = elf
        .syms
        .iter()
        .filter(|s| s.st_type() == STT_FUNC && s.st_size > 0)
        .filter_map(|s| {
            Some(Function {
                name: elf.strtab.get_at(s.st_name)?.to_string(),
                addr: s.st_value,
                size: s.st_size,
            })
        })
        .collect();
    functions.sort_by_key(|f| f.addr);
    let image = ElfImage {
        bytes: data.to_vec(),
        build_id,
        text_offset,
        text_addr,
        text_size: text.p_vaddr + text.p_memsz - text_addr,
    };
    Ok((image, functions))
}

/// The perf.data of the CPUs' traces, all running in `elf` (mapped at its code's page), or in
/// the kernel (`elf` its image) or in `module` (`elf` its memory), as `o.space` says.
fn record(
    o: &PerfOptions,
    cpus: Vec<PerfCpu>,
    elf: ElfImage,
    module: Option<&crate::elf::ModuleImage>,
) -> PerfRecording {
    let mut rng = Rng::new(o.seed ^ 0x9e2f_0f0f);
    // What goes in the AUX areas: (cpu, one copy's bytes).
    let per_cpu: Vec<(u32, Vec<u8>)> = match o.layout {
        BufferLayout::Formatted => vec![(cpus[0].cpu, format_streams(&cpus, &mut rng))],
        BufferLayout::Unformatted => cpus.iter().map(|c| (c.cpu, c.trace.clone())).collect(),
    };

    let config = cpus.iter().fold(ETM_OPT_CTXTID, |acc, c| {
        let r = match c.config.unit {
            TraceUnit::Etmv4(e) | TraceUnit::Ete(e) => e.trcconfigr,
            TraceUnit::Etmv3(_) => 0,
        };
        acc | if r & 1 << 3 != 0 { ETM_OPT_BRANCH_BROADCAST } else { 0 }
            | if r & 1 << 4 != 0 { ETM_OPT_CYCACC } else { 0 }
            | if r & 1 << 11 != 0 { ETM_OPT_TS } else { 0 }
            | if r & 1 << 12 != 0 { ETM_OPT_RETSTK } else { 0 }
    });
    let event = if o.space == PerfSpace::User {
        "cs_etm//u"
    } else {
        "cs_etm//k"
    };
    let cmdline: Vec<String> = if o.per_thread {
        ["perf", "record", "-e", event, "--", COMM]
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        ["perf", "record", "-e", event, "-a"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let mut w = Writer::new(WriterOptions {
        pmu_type: PMU_TYPE,
        cpus: cpus.iter().map(|c| c.cpu).collect(),
        config,
        nr_cpus: cpus.len() as u32,
        cpudesc: match o.protocol {
            PerfProtocol::Etmv4 => "ARM Cortex-A72".into(),
            PerfProtocol::Ete => "ARM Neoverse-N2".into(),
        },
        cpuid: match o.protocol {
            PerfProtocol::Etmv4 => "0x00000000410fd083".into(),
            PerfProtocol::Ete => "0x00000000410fd490".into(),
        },
        sample_time: !o.per_thread,
        sample_cpu: !o.per_thread,
        cmdline,
        event_name: event.into(),
        ..WriterOptions::default()
    });
    let mut info = CsEtmInfo {
        version: 1,
        pmu_type: PMU_TYPE,
        num_cpus: cpus.len() as u32,
        snapshot: false,
        cpus: cpus.iter().map(|c| c.config.clone()).collect(),
        raw: Vec::new(),
    };
    info.raw = info.to_words();
    w.auxtrace_info(&info);
    let build_id = BuildId::new(&elf.build_id);
    let map_len = (elf.text_size).next_multiple_of(0x1000);
    let mut time = 1_000_000u64;
    // The kernel's map, for every process (pid -1), recorded before the trace.
    let kernel_at = SampleFields {
        pid: u32::MAX,
        tid: u32::MAX,
        time: time - 1,
        cpu: cpus[0].cpu,
    };
    match (o.space, module) {
        (PerfSpace::Kernel, _) => {
            // Its page offset is the runtime address of `_text`.
            w.mmap2(
                u32::MAX,
                u32::MAX,
                elf.text_addr,
                map_len,
                KERNEL_TEXT,
                "[kernel.kallsyms]_text",
                Some(build_id),
                kernel_at,
            );
            w.build_id(-1, "[kernel.kallsyms]", build_id);
        }
        (PerfSpace::Module, Some(m)) => {
            let id = BuildId::new(&m.build_id);
            w.mmap2(
                u32::MAX,
                u32::MAX,
                MODULE_BASE,
                map_len,
                0,
                &o.elf_path,
                Some(id),
                kernel_at,
            );
            w.build_id(-1, &o.elf_path, id);
        }
        _ => {}
    }
    for c in &cpus {
        let at = SampleFields {
            pid: c.pid,
            tid: c.pid,
            time,
            cpu: c.cpu,
        };
        w.comm(c.pid, c.pid, COMM, true, at);
        if o.space == PerfSpace::User {
            w.mmap2(
                c.pid,
                c.pid,
                elf.text_addr,
                map_len,
                elf.text_offset,
                &o.elf_path,
                Some(build_id),
                SampleFields { time: time + 1, ..at },
            );
            w.build_id(c.pid as i32, &o.elf_path, build_id);
        }
        w.itrace_start(c.pid, c.pid, SampleFields { time: time + 2, ..at });
        time += 10;
    }
    w.finished_round();

    // The buffers: whole copies, up to CHUNK bytes each, until each area has its share.
    let share = o.min_aux_bytes.div_ceil(per_cpu.len() as u64);
    let raw = o.layout == BufferLayout::Unformatted;
    let mut buffers = Vec::new();
    let mut reference = 0x1_0000u64;
    for (idx, (cpu, copy)) in per_cpu.iter().enumerate() {
        let c = cpus.iter().find(|c| c.cpu == *cpu).expect("a generated CPU");
        let per_chunk = (CHUNK / copy.len().max(1)).max(1);
        let mut left = share.div_ceil(copy.len().max(1) as u64).max(1) as usize;
        let mut aux_offset = 0u64;
        while left > 0 {
            let copies = left.min(per_chunk);
            left -= copies;
            let mut data = Vec::with_capacity(copy.len() * copies);
            for _ in 0..copies {
                data.extend_from_slice(copy);
            }
            let at = SampleFields {
                pid: c.pid,
                tid: c.pid,
                time,
                cpu: *cpu,
            };
            w.aux(
                aux_offset,
                data.len() as u64,
                if raw { AuxFlags::CORESIGHT_FORMAT_RAW } else { 0 },
                at,
            );
            let (buf_cpu, aux_cpu) = if o.per_thread {
                (None, u32::MAX)
            } else {
                (Some(*cpu), *cpu)
            };
            w.auxtrace(aux_offset, reference, idx as u32, c.pid, aux_cpu, &data);
            reference += 1;
            time += 1000;
            buffers.push(PerfBuffer {
                cpu: buf_cpu,
                aux_offset,
                size: data.len() as u64,
                copies,
            });
            aux_offset += data.len() as u64;
            w.finished_round();
        }
    }
    PerfRecording {
        perf_data: if o.pipe { w.finish_pipe() } else { w.finish() },
        elf,
        kernel: None,
        cpus,
        buffers,
        layout: o.layout,
        protocol: o.protocol,
    }
}

/// One AUXTRACE buffer decoded: its CPU (None: per-thread) and the truth items of each
/// trace ID's elements.
pub type DecodedBuffer = (Option<u32>, BTreeMap<u8, Vec<Truth>>);

/// What a perf.data's trace decodes to with this project's decoder: for each AUXTRACE
/// buffer in file order, its CPU and the truth items of each trace ID's elements (each
/// buffer decoded from a reset, as Linux perf does). `elf` supplies the memory: the
/// loadable segments of the executable the recording maps.
pub fn decode_perf_data(perf_data: &[u8], elf: &[u8]) -> Result<Vec<DecodedBuffer>, String> {
    let rec = Recording::parse(perf_data).map_err(|e| e.to_string())?;
    let cs = rec.cs_etm.as_ref().ok_or("no cs_etm AUXTRACE_INFO")?;
    let images = crate::execution::elf_images(elf)?;
    let mut devices = Vec::new();
    let mut source_buffers = Vec::new();
    let mut core_trace_sources = Vec::new();
    for c in &cs.cpus {
        let (e, kind) = match c.unit {
            TraceUnit::Etmv4(e) => (e, "ETM4.0"),
            TraceUnit::Ete(e) => (e, "ETE"),
            TraceUnit::Etmv3(_) => return Err(format!("CPU {}: an ETMv3/PTM: not generated here", c.cpu)),
        };
        // The memory goes to the core of a buffer's first source (see below).
        let core = DeviceSpec::core(&format!("cpu_{}", c.cpu), "Cortex-A72");
        let mut regs = vec![
            ("TRCCONFIGR".to_string(), e.trcconfigr),
            ("TRCTRACEIDR".to_string(), e.trctraceidr),
            ("TRCIDR0".to_string(), e.trcidr0),
            ("TRCIDR1".to_string(), e.trcidr1),
            ("TRCIDR2".to_string(), e.trcidr2),
            ("TRCIDR8".to_string(), e.trcidr8),
        ];
        if let Some(d) = e.trcdevarch {
            regs.push(("TRCDEVARCH".to_string(), d));
        }
        let src = format!("etm_{}", c.cpu);
        devices.push(core);
        devices.push(DeviceSpec::trace_source(&src, kind, regs));
        source_buffers.push((src.clone(), "AUX".to_string()));
        core_trace_sources.push((format!("cpu_{}", c.cpu), src));
    }
    let mut out = Vec::new();
    for b in &rec.buffers {
        let format = match b.format {
            AuxFormat::Raw => "source_data",
            _ => "coresight",
        };
        // A raw buffer holds one CPU's trace: only its trace unit decodes it.
        let only = (b.format == AuxFormat::Raw).then_some(b.cpu).flatten();
        let sources: Vec<(String, String)> = source_buffers
            .iter()
            .filter(|(s, _)| only.is_none_or(|cpu| *s == format!("etm_{cpu}")))
            .cloned()
            .collect();
        if sources.is_empty() {
            return Err(format!(
                "AUXTRACE at file offset {:#x}: CPU {:?} has no trace unit in AUXTRACE_INFO",
                b.record_offset, b.cpu
            ));
        }
        // One memory map serves every core of a tree: the image goes in once, with the core
        // of the first source decoded.
        let mut devices = devices.clone();
        let first_core = format!("cpu_{}", sources[0].0.trim_start_matches("etm_"));
        if let Some(core) = devices.iter_mut().find(|d| d.name == first_core) {
            for (i, (addr, data)) in images.iter().enumerate() {
                core.dumps.push(DumpSpec {
                    file: format!("mem{i}.bin"),
                    address: *addr,
                    data: data.clone(),
                    space: String::new(),
                });
            }
        }
        let g = Generated {
            spec: SnapshotSpec {
                description: String::new(),
                devices,
                buffers: vec![BufferSpec {
                    name: "AUX".into(),
                    file: "aux.bin".into(),
                    format: format.into(),
                    data: b.data.to_vec(),
                }],
                source_buffers: sources,
                core_trace_sources: core_trace_sources.clone(),
            },
            truth: Vec::new(),
        };
        let got = coresight_decode::shared::shared(BTreeMap::<u8, Vec<Truth>>::new());
        crate::check::decode_with(&g, Box::new(ById(got.clone())))
            .map_err(|e| format!("AUXTRACE at file offset {:#x}: {e}", b.record_offset))?;
        let v = got.borrow().clone();
        out.push((b.cpu, v));
    }
    Ok(out)
}

/// Collects truth items per trace ID.
struct ById(coresight_decode::shared::Shared<BTreeMap<u8, Vec<Truth>>>);

impl coresight_decode::interfaces::TrcGenElemIn for ById {
    fn trace_elem_in(
        &mut self,
        _index: coresight_decode::datapath::TrcIndex,
        trace_id: u8,
        elem: &coresight_decode::element::TraceElement,
    ) -> coresight_decode::datapath::DatapathResp {
        if let Some(t) = Truth::from_element(elem) {
            self.0.borrow_mut().entry(trace_id).or_default().push(t);
        }
        coresight_decode::datapath::DatapathResp::Cont
    }
}

/// Checks a generated recording against its truth with this project's decoder: every
/// buffer, every CPU whose trace it holds. The error names the buffer, CPU and first
/// differing item.
pub fn check_perf_data(r: &PerfRecording) -> Result<usize, String> {
    let decoded = decode_perf_data(&r.perf_data, &r.elf.bytes)?;
    if decoded.len() != r.buffers.len() {
        return Err(format!(
            "{} AUXTRACE buffers read back, {} written",
            decoded.len(),
            r.buffers.len()
        ));
    }
    let mut items = 0;
    for (n, (b, (_, got))) in r.buffers.iter().zip(&decoded).enumerate() {
        let holds: Vec<&PerfCpu> = match (r.layout, b.cpu) {
            (BufferLayout::Unformatted, Some(cpu)) => r.cpus.iter().filter(|c| c.cpu == cpu).collect(),
            _ => r.cpus.iter().collect(),
        };
        for c in holds {
            let want = r.buffer_truth(b, c.cpu);
            let have = crate::check::comparable(
                got.get(&c.trace_id).cloned().unwrap_or_default(),
                want.iter().any(Truth::is_detail),
            );
            if let Some(i) = (0..want.len().max(have.len())).find(|&i| want.get(i) != have.get(i)) {
                let show = |t: Option<&Truth>| t.map_or("nothing".to_string(), |t| format!("`{t}`"));
                return Err(format!(
                    "buffer {n} (CPU {:?}), CPU {} trace ID {:#x}: item {i}: expected {}, decoded {}",
                    b.cpu,
                    c.cpu,
                    c.trace_id,
                    show(want.get(i)),
                    show(have.get(i))
                ));
            }
            items += have.len();
        }
    }
    Ok(items)
}
