//! Architecture-level vocabulary shared by every decoder: instruction set,
//! architecture version and profile, exception level and security state,
//! and the instruction classification the program-flow walkers need.

use std::fmt;

/// Instruction set of the traced PE at a point in the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Isa {
    /// A32 (Armv7 Arm, Armv8 AArch32 A32).
    Arm,
    /// T32 (Thumb-2: 16 and 32 bit instructions).
    Thumb2,
    /// A64 (AArch64).
    Aarch64,
    /// ThumbEE (not decoded).
    Tee,
    /// Jazelle (not decoded).
    Jazelle,
    /// A custom instruction set.
    Custom,
    /// RISC-V (RV32 or RV64, with or without the C extension; the width
    /// is in the PE context's `bits64`). Decoded by plug-ins: the built-in
    /// Arm classifier refuses it.
    RiscV,
    /// Not yet known.
    #[default]
    Unknown,
}

impl Isa {
    /// The three-letter name OpenCSD prints (`A32`, `T32`, `A64`, ...).
    pub fn short_name(self) -> &'static str {
        match self {
            Isa::Arm => "A32",
            Isa::Thumb2 => "T32",
            Isa::Aarch64 => "A64",
            Isa::Tee => "TEE",
            Isa::Jazelle => "Jaz",
            Isa::Custom => "Cst",
            Isa::RiscV => "RV",
            Isa::Unknown => "Unk",
        }
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// Architecture version of a core, as far as trace decode cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[non_exhaustive]
#[repr(u8)]
pub enum ArchVersion {
    /// Not known (from a snapshot that does not name the core, for example).
    #[default]
    Unknown,
    /// A custom architecture.
    Custom,
    /// Armv7 (and earlier).
    V7,
    /// Armv8.0 to Armv8.2.
    V8,
    /// Armv8.3 (adds the pointer-authentication return forms).
    V8r3,
    /// Armv8.4 and later AArch64 (Armv9 included).
    Aa64,
}

/// Core profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
#[repr(u8)]
pub enum CoreProfile {
    /// Not known.
    #[default]
    Unknown,
    /// Application profile.
    CortexA,
    /// Real-time profile.
    CortexR,
    /// Microcontroller profile.
    CortexM,
    /// Custom.
    Custom,
}

/// Architecture version and profile together (OpenCSD's `ocsd_arch_profile_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ArchProfile {
    /// Architecture version.
    pub arch: ArchVersion,
    /// Core profile (A, R or M).
    pub profile: CoreProfile,
}

impl ArchProfile {
    /// Joins a version and a profile.
    pub const fn new(arch: ArchVersion, profile: CoreProfile) -> Self {
        ArchProfile { arch, profile }
    }

    /// Looks a core up by its snapshot name (`Cortex-A53`, `ARMv8.2-A`,
    /// `ARM-AA64`, ...). Returns `None` for a name it does not know.
    pub fn from_core_name(name: &str) -> Option<ArchProfile> {
        use ArchVersion::*;
        use CoreProfile::*;
        const KNOWN: &[(&str, ArchVersion, CoreProfile)] = &[
            ("Cortex-X4", Aa64, CortexA),
            ("Cortex-X3", Aa64, CortexA),
            ("Cortex-X2", Aa64, CortexA),
            ("Cortex-X1", V8r3, CortexA),
            ("Cortex-A725", Aa64, CortexA),
            ("Cortex-A720", Aa64, CortexA),
            ("Cortex-A715", Aa64, CortexA),
            ("Cortex-A710", Aa64, CortexA),
            ("Cortex-A520", Aa64, CortexA),
            ("Cortex-A510", Aa64, CortexA),
            ("Cortex-A78", V8r3, CortexA),
            ("Cortex-A77", V8r3, CortexA),
            ("Cortex-A76", V8r3, CortexA),
            ("Cortex-A75", V8r3, CortexA),
            ("Cortex-A73", V8, CortexA),
            ("Cortex-A72", V8, CortexA),
            ("Cortex-A65", V8r3, CortexA),
            ("Cortex-A57", V8, CortexA),
            ("Cortex-A55", V8r3, CortexA),
            ("Cortex-A53", V8, CortexA),
            ("Cortex-A35", V8, CortexA),
            ("Cortex-A32", V8, CortexA),
            ("Cortex-A17", V7, CortexA),
            ("Cortex-A15", V7, CortexA),
            ("Cortex-A12", V7, CortexA),
            ("Cortex-A9", V7, CortexA),
            ("Cortex-A8", V7, CortexA),
            ("Cortex-A7", V7, CortexA),
            ("Cortex-A5", V7, CortexA),
            ("Neoverse-N1", V8r3, CortexA),
            ("Neoverse-N2", Aa64, CortexA),
            ("Neoverse-V1", Aa64, CortexA),
            ("Neoverse-V2", Aa64, CortexA),
            ("Cortex-R52", V8, CortexR),
            ("Cortex-R8", V7, CortexR),
            ("Cortex-R7", V7, CortexR),
            ("Cortex-R5", V7, CortexR),
            ("Cortex-R4", V7, CortexR),
            ("Cortex-M85", V8r3, CortexM),
            ("Cortex-M55", V8r3, CortexM),
            ("Cortex-M33", V8, CortexM),
            ("Cortex-M23", V8, CortexM),
            ("Cortex-M0", V7, CortexM),
            ("Cortex-M0+", V7, CortexM),
            ("Cortex-M3", V7, CortexM),
            ("Cortex-M4", V7, CortexM),
        ];
        if let Some(&(_, a, p)) = KNOWN.iter().find(|(n, _, _)| *n == name) {
            return Some(ArchProfile::new(a, p));
        }
        Self::from_pattern(name)
    }

    /// `ARMv<maj>[.<min>]-<P>` and `ARM-{AA|aa}64[-<P>]` names.
    fn from_pattern(name: &str) -> Option<ArchProfile> {
        let profile_of = |c: Option<char>| match c {
            Some('A') => Some(CoreProfile::CortexA),
            Some('R') => Some(CoreProfile::CortexR),
            Some('M') => Some(CoreProfile::CortexM),
            _ => None,
        };
        if let Some(rest) = name.strip_prefix("ARMv") {
            let (ver, prof) = rest.split_once('-')?;
            let (maj, min) = match ver.split_once('.') {
                Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
                None => (ver.parse::<u32>().ok()?, 0),
            };
            let arch = match (maj, min) {
                (7, _) => ArchVersion::V7,
                (8, m) if m < 3 => ArchVersion::V8,
                (8, 3) => ArchVersion::V8r3,
                (m, _) if m >= 8 => ArchVersion::Aa64,
                _ => return None,
            };
            let profile = profile_of(prof.chars().next())?;
            return Some(ArchProfile::new(arch, profile));
        }
        if let Some(rest) = name.strip_prefix("ARM-") {
            let rest = rest.strip_prefix("AA64").or_else(|| rest.strip_prefix("aa64"))?;
            let profile = match rest.strip_prefix('-') {
                Some(p) => profile_of(p.chars().next()).unwrap_or(CoreProfile::CortexA),
                None => CoreProfile::CortexA,
            };
            return Some(ArchProfile::new(ArchVersion::Aa64, profile));
        }
        None
    }
}

/// Security state of the PE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SecurityState {
    /// Secure state.
    #[default]
    Secure,
    /// Non-secure state.
    NonSecure,
    /// Root state (Realm Management Extension, EL3).
    Root,
    /// Realm state (Realm Management Extension).
    Realm,
}

/// Exception level, where known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ExceptionLevel {
    /// Exception level not known (not traced, or before the first context).
    #[default]
    Unknown,
    /// EL0: applications.
    El0,
    /// EL1: operating system kernel.
    El1,
    /// EL2: hypervisor.
    El2,
    /// EL3: secure monitor.
    El3,
}

impl ExceptionLevel {
    /// The level for a number 0 to 3; `Unknown` for anything else.
    pub fn from_number(n: u8) -> ExceptionLevel {
        match n {
            0 => ExceptionLevel::El0,
            1 => ExceptionLevel::El1,
            2 => ExceptionLevel::El2,
            3 => ExceptionLevel::El3,
            _ => ExceptionLevel::Unknown,
        }
    }

    /// 0..=3, or `None` when unknown.
    pub fn number(self) -> Option<u8> {
        match self {
            ExceptionLevel::Unknown => None,
            ExceptionLevel::El0 => Some(0),
            ExceptionLevel::El1 => Some(1),
            ExceptionLevel::El2 => Some(2),
            ExceptionLevel::El3 => Some(3),
        }
    }
}

/// What kind of instruction, as far as program flow goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
#[repr(u8)]
pub enum InstrType {
    /// Not a waypoint: execution continues at the next instruction.
    #[default]
    Other,
    /// Direct branch (target encoded in the instruction).
    Branch,
    /// Indirect branch (target from a register or memory).
    BranchIndirect,
    /// Instruction synchronisation barrier (a waypoint in ETMv4/ETE).
    Isb,
    /// DSB or DMB (a waypoint only where configured).
    DsbDmb,
    /// WFI / WFE (a waypoint only where configured, e.g. ETE).
    WfiWfe,
    /// TSTART (transactional memory start).
    Tstart,
}

/// Refinement of the instruction type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
#[repr(u8)]
pub enum InstrSubType {
    /// No refinement.
    #[default]
    None,
    /// Branch with link (a call).
    BranchLink,
    /// A64 RET (and its pointer-authentication forms).
    V8Ret,
    /// A64 ERET (and its pointer-authentication forms).
    V8Eret,
    /// An A32/T32 instruction that acts as a return (e.g. `BX LR`, `POP {..,PC}`).
    V7ImpliedRet,
}

/// Input and output of one instruction decode (OpenCSD's `ocsd_instr_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
// Laid out in this order so that `isa` and the outputs a range's last
// instruction gives a trace element (type, subtype, size, condition)
// sit together, in `TraceElement`'s order: they copy in one move.
#[repr(C)]
pub struct InstrInfo {
    // ---- inputs ----
    /// Address of the instruction.
    pub instr_addr: u64,
    /// The opcode, as read little-endian from memory. For T32 the first
    /// halfword is in bits 15:0 and, for a 32-bit instruction, the second
    /// halfword in bits 31:16.
    pub opcode: u32,
    /// Architecture and profile of the PE.
    pub pe_type: ArchProfile,
    /// DSB and DMB count as waypoints.
    pub dsb_dmb_waypoints: bool,
    /// WFI and WFE count as branches (waypoints).
    pub wfi_wfe_branch: bool,
    /// Track T32 IT blocks (conditions set in `thumb_it_conditions`).
    pub track_it_block: bool,
    /// Instruction set the opcode is in.
    pub isa: Isa,

    // ---- outputs ----
    /// Program flow class of the instruction (the decoder's output).
    pub instr_type: InstrType,
    /// Refinement of `instr_type`: call, return, exception return.
    pub sub_type: InstrSubType,
    /// Size in bytes: 2 or 4.
    pub instr_size: u8,
    /// Conditional instruction (including CBZ/CBNZ, TBZ/TBNZ, B.cond).
    pub is_conditional: bool,
    /// Instruction set after this instruction (changes for BLX imm).
    pub next_isa: Isa,
    /// Branch with link.
    pub is_link: bool,
    /// Number of instructions still covered by a T32 IT block after this one.
    pub thumb_it_conditions: u8,
    /// Branch target for direct branches.
    pub branch_addr: u64,
}
