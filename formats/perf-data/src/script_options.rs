//! The options of `trc_perf script` and `inject` in perf's spelling: `--itrace` (which
//! samples to make) and `-F` (which fields to print), parsed and settled as perf 6.1 does.

use std::str::FromStr;

/// perf's default instruction sample period (`PERF_ITRACE_DEFAULT_PERIOD`).
pub const DEFAULT_PERIOD: u64 = 100_000;

/// What samples to make: perf's `--itrace` letters `i` and `b` (others are accepted and have
/// no effect on ETM trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Itrace {
    /// Instruction samples, with their period in instructions.
    pub instructions: Option<u64>,
    /// Branch samples.
    pub branches: bool,
    /// `Z`: decode without time even when the trace has timestamps (perf's "timeless"
    /// decoding: each AUX queue in file order, no time in the samples).
    pub timeless: bool,
    /// `l[N]`: instruction samples carry the last N taken branches (a branch stack, as
    /// hardware LBR gives; what `perf inject --itrace=il64` writes for AutoFDO).
    pub last_branch: Option<usize>,
}

/// perf's default branch stack size for `--itrace=l`.
pub const DEFAULT_LAST_BRANCH: usize = 64;
/// perf's largest `--itrace=lN`.
pub const MAX_LAST_BRANCH: usize = 1024;

impl Default for Itrace {
    /// perf's default for `perf script` on an AUX trace: `ib` with the default period.
    fn default() -> Self {
        Itrace {
            instructions: Some(DEFAULT_PERIOD),
            branches: true,
            timeless: false,
            last_branch: None,
        }
    }
}

impl FromStr for Itrace {
    type Err = String;

    /// Parses perf's spelling: `i100`, `i1000i`, `b`, `ib`, `i10ib`, `i100il64`...; a number
    /// must be followed by its unit (`i` instructions, `t` ticks, `ms`, `us`, `ns`) unless it
    /// ends the string, as perf requires. Time periods are taken as instruction counts in
    /// nanoseconds, as perf's cs_etm does.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("Bad Instruction Tracing options '{s}'");
        let mut it = Itrace {
            instructions: None,
            branches: false,
            timeless: false,
            last_branch: None,
        };
        let b = s.as_bytes();
        let digits = |i: &mut usize| {
            let st = *i;
            while *i < b.len() && b[*i].is_ascii_digit() {
                *i += 1;
            }
            (st != *i).then(|| s[st..*i].parse::<u64>().map_err(|_| bad()))
        };
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            i += 1;
            match c {
                b'i' => {
                    let mut period = DEFAULT_PERIOD;
                    if let Some(n) = digits(&mut i) {
                        period = n?;
                        let scale: u64 = match &s[i..] {
                            "" => 1,
                            r if r.starts_with('i') || r.starts_with('t') => {
                                i += 1;
                                1
                            }
                            r if r.starts_with("ns") => {
                                i += 2;
                                1
                            }
                            r if r.starts_with("us") => {
                                i += 2;
                                1_000
                            }
                            r if r.starts_with("ms") => {
                                i += 2;
                                1_000_000
                            }
                            _ => return Err(bad()),
                        };
                        period = period.saturating_mul(scale);
                    }
                    if period == 0 {
                        return Err(format!("--itrace={s}: the period must be at least 1"));
                    }
                    it.instructions = Some(period);
                }
                // `c` (calls) gives perf's cs_etm branch samples too: it has no call-only
                // samples.
                b'b' | b'c' => it.branches = true,
                b'Z' => it.timeless = true,
                b'l' => {
                    let n = match digits(&mut i) {
                        Some(n) => usize::try_from(n?).map_err(|_| bad())?,
                        None => DEFAULT_LAST_BRANCH,
                    };
                    if n == 0 || n > MAX_LAST_BRANCH {
                        return Err(bad());
                    }
                    it.last_branch = Some(n);
                }
                // Accepted, and nothing to do with ETM instruction trace.
                b'r' | b'x' | b'w' | b'p' | b'e' | b'd' | b'f' | b'm' | b't' | b'a' | b'g' | b's' | b'q' | b'o'
                | b'A' | b'I' | b'L' | b'M' | b'T' | b'E' => {
                    let _ = digits(&mut i);
                }
                c => return Err(format!("unknown --itrace option '{}' in {s}", c as char)),
            }
        }
        Ok(it)
    }
}

/// The `-F` fields this writer knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    /// Thread name.
    pub comm: bool,
    /// Process id.
    pub pid: bool,
    /// Thread id.
    pub tid: bool,
    /// CPU.
    pub cpu: bool,
    /// Time.
    pub time: bool,
    /// Sample period.
    pub period: bool,
    /// Event name.
    pub event: bool,
    /// Sample flags (`call`, `return`, `jcc`, `tr strt`...).
    pub flags: bool,
    /// Address.
    pub ip: bool,
    /// Symbol.
    pub sym: bool,
    /// Offset in the symbol.
    pub symoff: bool,
    /// Binary.
    pub dso: bool,
    /// The sample's address field: a branch's target, 0 in an instruction sample.
    pub addr: bool,
    /// The instruction bytes at `ip` (`insn: c0 03 5f d6`).
    pub insn: bool,
    /// The sample's branch stack (`--itrace=l`): ` 0xFROM/0xTO/P/-/-/0/ ` for each branch,
    /// the newest first.
    pub brstack: bool,
    /// The source file and line of `ip`, on a line of its own (`  prog.c:13`).
    pub srcline: bool,
    /// Branch samples: the function called (or started in), returned from (or ended in),
    /// padded to a column.
    pub callindent: bool,
    /// The fields named in `-F` (other than `flags`): perf then prints a branch's target
    /// only when `addr` is among them, and refuses a named `time` or `cpu` the samples lack.
    named: u32,
}

const NAMES: [&str; 17] = [
    "comm",
    "pid",
    "tid",
    "cpu",
    "time",
    "period",
    "event",
    "flags",
    "ip",
    "sym",
    "symoff",
    "dso",
    "addr",
    "insn",
    "brstack",
    "srcline",
    "callindent",
];
const NAMED_TIME: u32 = 1 << 4;
const NAMED_CPU: u32 = 1 << 3;
const NAMED_REMOVED: u32 = 1 << 31;
const NAMED_ANY_BUT_FLAGS: u32 = !(1 << 7);

impl Fields {
    fn slot(&mut self, i: usize) -> &mut bool {
        match i {
            0 => &mut self.comm,
            1 => &mut self.pid,
            2 => &mut self.tid,
            3 => &mut self.cpu,
            4 => &mut self.time,
            5 => &mut self.period,
            6 => &mut self.event,
            7 => &mut self.flags,
            8 => &mut self.ip,
            9 => &mut self.sym,
            10 => &mut self.symoff,
            11 => &mut self.dso,
            12 => &mut self.addr,
            13 => &mut self.insn,
            14 => &mut self.brstack,
            15 => &mut self.srcline,
            _ => &mut self.callindent,
        }
    }

    const NONE: Fields = Fields {
        comm: false,
        pid: false,
        tid: false,
        cpu: false,
        time: false,
        period: false,
        event: false,
        flags: false,
        ip: false,
        sym: false,
        symoff: false,
        dso: false,
        addr: false,
        insn: false,
        brstack: false,
        srcline: false,
        callindent: false,
        named: 0,
    };

    /// Whether a branch sample prints `=> target`: asked for, or no field named.
    pub fn branch_target(&self) -> bool {
        self.addr || self.named & NAMED_ANY_BUT_FLAGS == 0
    }

    /// The fields for samples that lack a time or a CPU, as perf settles them: a default
    /// field the samples lack is dropped; a named one is refused with perf's message, which
    /// names the first event without it (`no_time`, `no_cpu`: that event, None when the
    /// samples have the field).
    pub fn for_samples(mut self, no_time: Option<&str>, no_cpu: Option<&str>) -> Result<Fields, String> {
        if self.srcline && !self.ip {
            return Err("Display of source line number requested but sample IP is not\n\
                        selected. Hence, no address to lookup the source line number."
                .into());
        }
        for (missing, bit, field, attr) in [(no_time, NAMED_TIME, "time", "TIME"), (no_cpu, NAMED_CPU, "cpu", "CPU")] {
            let Some(event) = missing else { continue };
            if self.named & bit != 0 {
                return Err(format!(
                    "Samples for '{event}' event do not have {attr} attribute set. Cannot print '{field}' field."
                ));
            }
            let i = bit.trailing_zeros() as usize;
            *self.slot(i) = false;
        }
        Ok(self)
    }
}

impl Default for Fields {
    /// perf's defaults for the hardware events cs_etm synthesises.
    fn default() -> Self {
        Fields {
            comm: true,
            tid: true,
            cpu: true,
            time: true,
            period: true,
            event: true,
            ip: true,
            sym: true,
            symoff: true,
            dso: true,
            ..Fields::NONE
        }
    }
}

impl FromStr for Fields {
    type Err = String;

    /// perf's `-F` spelling: `comm,tid,ip,sym` replaces the defaults; `+field` and `-field`
    /// change them. `event` may be written `evname`; a `TYPE:` prefix is ignored (the
    /// fields apply to the synthesised samples).
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.split_once(':').map_or(s, |(_, f)| f);
        let modify = s.starts_with('+') || s.starts_with('-');
        let mut f = if modify { Fields::default() } else { Fields::NONE };
        let mut on = true;
        for tok in s.split(',').filter(|t| !t.is_empty()) {
            let name = if let Some(n) = tok.strip_prefix('+') {
                on = true;
                n
            } else if let Some(n) = tok.strip_prefix('-') {
                on = false;
                n
            } else {
                tok
            };
            let name = if name == "evname" { "event" } else { name };
            let Some(i) = NAMES.iter().position(|&n| n == name) else {
                return Err(format!(
                    "-F field '{name}' is not supported (known: {})",
                    NAMES.join(", ")
                ));
            };
            *f.slot(i) = on;
            if on {
                f.named |= 1 << i;
            } else if i != 7 {
                // Removing a field (but flags) is a choice of fields too.
                f.named |= NAMED_REMOVED;
            }
        }
        Ok(f)
    }
}
