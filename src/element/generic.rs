//! Generic trace elements: the decoders' output, protocol independent.
//!
//! [`TraceElement`] carries what OpenCSD's generic element carries; its
//! `Display` form is OpenCSD's, character for character, so listings made
//! with it compare line by line with OpenCSD's.

use std::fmt;

use crate::arch::{ExceptionLevel, InstrSubType, InstrType, Isa, SecurityState};
use crate::memory::MemSpace;
use crate::text::{Pad, TextBuf, TextOut};

/// Element type (OpenCSD's `ocsd_gen_trc_elem_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ElemType {
    /// Not set.
    #[default]
    Unknown,
    /// The decoder is not synchronised (start of trace, or lost sync); `unsync_info` says
    /// why.
    NoSync,
    /// Trace starts, or restarts after a gap; `trace_on_reason` says why.
    TraceOn,
    /// End of the trace data; `unsync_info` says how it ended.
    EoTrace,
    /// The PE's context: security state, exception level, AArch64, context ID, VMID (in
    /// `context`, with `isa`).
    PeContext,
    /// A range of instructions executed from `st_addr` up to `en_addr` (exclusive), ending
    /// with the `last_i_*` instruction.
    InstrRange,
    /// `num_instr_range` instructions executed from `st_addr` (a Q element) whose path the
    /// decoder could not follow; execution goes on at `en_addr`.
    IRangeNoPath,
    /// The decoder could not read the memory at `st_addr` (in `mem_space`) to follow the
    /// program.
    AddrNacc,
    /// The address of the next instruction is not known (waiting for an address packet).
    AddrUnknown,
    /// An exception: `exception_number`, with the preferred return address in `en_addr` when
    /// `excep_ret_addr`.
    Exception,
    /// Return from an exception.
    ExceptionRet,
    /// A timestamp (`timestamp`, in units of the global timestamp counter).
    Timestamp,
    /// A cycle count (`cycle_count`) with no other element to carry it.
    CycleCount,
    /// An event: the trigger, or a numbered trace unit event (`event_type`, `event_number`).
    Event,
    /// Software trace (STM): `sw_trace` and `sw_payload`.
    SwTrace,
    /// A synchronisation marker (ETE timestamp marker; `sync_marker_value`).
    SyncMarker,
    /// A transactional memory operation (`mem_trans`).
    MemTrans,
    /// ETE instrumentation: `ite_el` and `ite_value` from a TRCIT instruction.
    Instrumentation,
    /// ITM trace: `itm`.
    ItmTrace,
    /// An element from a custom decoder (`custom_text`).
    Custom,
    /// A data access: load or store address and/or data (RISC-V trace).
    DataAccess,
}

impl ElemType {
    /// The name OpenCSD prints.
    pub fn name(self) -> &'static str {
        match self {
            ElemType::Unknown => "OCSD_GEN_TRC_ELEM_UNKNOWN",
            ElemType::NoSync => "OCSD_GEN_TRC_ELEM_NO_SYNC",
            ElemType::TraceOn => "OCSD_GEN_TRC_ELEM_TRACE_ON",
            ElemType::EoTrace => "OCSD_GEN_TRC_ELEM_EO_TRACE",
            ElemType::PeContext => "OCSD_GEN_TRC_ELEM_PE_CONTEXT",
            ElemType::InstrRange => "OCSD_GEN_TRC_ELEM_INSTR_RANGE",
            ElemType::IRangeNoPath => "OCSD_GEN_TRC_ELEM_I_RANGE_NOPATH",
            ElemType::AddrNacc => "OCSD_GEN_TRC_ELEM_ADDR_NACC",
            ElemType::AddrUnknown => "OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN",
            ElemType::Exception => "OCSD_GEN_TRC_ELEM_EXCEPTION",
            ElemType::ExceptionRet => "OCSD_GEN_TRC_ELEM_EXCEPTION_RET",
            ElemType::Timestamp => "OCSD_GEN_TRC_ELEM_TIMESTAMP",
            ElemType::CycleCount => "OCSD_GEN_TRC_ELEM_CYCLE_COUNT",
            ElemType::Event => "OCSD_GEN_TRC_ELEM_EVENT",
            ElemType::SwTrace => "OCSD_GEN_TRC_ELEM_SWTRACE",
            ElemType::SyncMarker => "OCSD_GEN_TRC_ELEM_SYNC_MARKER",
            ElemType::MemTrans => "OCSD_GEN_TRC_ELEM_MEMTRANS",
            ElemType::Instrumentation => "OCSD_GEN_TRC_ELEM_INSTRUMENTATION",
            ElemType::ItmTrace => "OCSD_GEN_TRC_ELEM_ITMTRACE",
            ElemType::Custom => "OCSD_GEN_TRC_ELEM_CUSTOM",
            ElemType::DataAccess => "OCSD_GEN_TRC_ELEM_DATA_ACCESS",
        }
    }
}

/// Why trace was (re)started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TraceOnReason {
    /// Start of trace or a trace filter turning on.
    #[default]
    Normal,
    /// Restart after the trace unit's buffer overflowed.
    Overflow,
    /// Restart after the PE left Debug state.
    ExDebug,
}

/// Why the decoder is not synchronised, or why trace ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum UnsyncInfo {
    /// Not known.
    #[default]
    Unknown,
    /// The decoder has just been created.
    InitDecoder,
    /// The decoder has been reset.
    ResetDecoder,
    /// Trace was lost to an overflow.
    Overflow,
    /// Speculative trace was discarded.
    Discard,
    /// A bad packet broke the decode.
    BadPacket,
    /// The trace did not fit the program image (a consistency check
    /// failed).
    BadImage,
    /// The end of the trace was reached.
    Eot,
}

/// Kind of event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum EventType {
    /// Not set.
    #[default]
    Unknown,
    /// The trigger event.
    Trigger,
    /// A numbered event (`event_number` holds the event bits).
    Numbered,
}

/// Transactional memory operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MemTrans {
    /// The trace starts inside a transaction (ETE).
    #[default]
    TraceInit,
    /// A transaction starts (TSTART).
    Start,
    /// The transaction commits.
    Commit,
    /// The transaction fails: its effects are discarded.
    Fail,
}

/// PE context: what a PE_CONTEXT element reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PeContext {
    /// Security state.
    pub security: SecurityState,
    /// Exception level, where known.
    pub exception_level: ExceptionLevel,
    /// `exception_level` is valid.
    pub el_valid: bool,
    /// AArch64 (64-bit) state.
    pub bits64: bool,
    /// Context ID (CONTEXTIDR), where `ctxt_id_valid`.
    pub context_id: u32,
    /// `context_id` is valid.
    pub ctxt_id_valid: bool,
    /// VMID, where `vmid_valid`.
    pub vmid: u32,
    /// `vmid` is valid.
    pub vmid_valid: bool,
    /// The hardware thread the trace that follows comes from, where the
    /// protocol says (RISC-V: the Change Hart packet).
    pub hart: Option<u64>,
    /// Whether interrupts are enabled, where the protocol says (RISC-V:
    /// the IE bit of the Privilege Level packet).
    pub interrupts_enabled: Option<bool>,
}

/// Load or store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DataAccessKind {
    /// A load.
    #[default]
    Load,
    /// A store.
    Store,
}

/// What a DATA_ACCESS element reports: an address, a value, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DataAccess {
    /// Load or store.
    pub kind: DataAccessKind,
    /// The address accessed, when traced.
    pub addr: Option<u64>,
    /// The value loaded or stored, when traced.
    pub value: Option<u64>,
}

/// Software trace (STM) message details.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SwTraceInfo {
    /// STM master.
    pub master_id: u16,
    /// STM channel.
    pub channel_id: u16,
    /// Payload size in bits (0: no payload).
    pub payload_bits: u8,
    /// Number of payload packets.
    pub payload_num_packets: u8,
    /// The message was a marker packet.
    pub marker: bool,
    /// The message carried a timestamp (in the element's `timestamp`).
    pub has_timestamp: bool,
    /// A TRIG packet.
    pub trigger: bool,
    /// A FREQ packet (the frequency in the payload).
    pub frequency: bool,
    /// `master_id` and `channel_id` are known.
    pub id_valid: bool,
    /// A GERR packet: some master lost trace.
    pub global_err: bool,
    /// A MERR packet: this master lost trace.
    pub master_err: bool,
}

/// ITM packet kinds carried by an ITMTRACE element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ItmPktKind {
    #[default]
    /// Software instrumentation (stimulus port write).
    Swit,
    /// Hardware source (DWT) packet.
    Dwt,
    /// Local timestamp.
    TsLocal,
    /// Global timestamp.
    TsGlobal,
}

/// ITM element details.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ItmInfo {
    /// The ITM packet kind.
    pub kind: ItmPktKind,
    /// Stimulus port / DWT discriminator.
    pub channel_or_desc: u8,
    /// Payload size in bytes.
    pub payload_size: u8,
    /// Overflow preceded this packet.
    pub overflow: bool,
    /// Local timestamp relation (TC bits): 0 sync, 1 TS delayed, 2 packet delayed, 3 both.
    pub ts_relation: u8,
    /// Payload value (or the timestamp for timestamp packets).
    pub value: u32,
}

/// One generic trace element (OpenCSD's `OcsdTraceElement`).
///
/// Fields are valid according to [`TraceElement::elem_type`]; the rest keep
/// their last values, as the decoders reuse one element per stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
// Laid out in this order (largest alignment first, no padding) so that
// a range's fields copy from an `InstrInfo` in one move, and those a new
// element clears are stored together.
#[repr(C)]
pub struct TraceElement {
    /// PE context (PE_CONTEXT elements; kept from element to element).
    pub context: PeContext,
    /// Data access (DATA_ACCESS elements).
    pub data: DataAccess,
    /// Start address (ranges, ADDR_NACC, ...).
    pub st_addr: u64,
    /// End address: one past the last instruction of a range, or the
    /// preferred return address of an exception.
    pub en_addr: u64,
    /// Timestamp (TIMESTAMP elements, and others where `has_ts`).
    pub timestamp: u64,
    /// Software trace payload (little endian), valid for `sw_trace.payload_bits`.
    pub sw_payload: u64,
    /// Value written by the instrumentation instruction (INSTRUMENTATION elements).
    pub ite_value: u64,
    /// Custom element payload text (custom decoders).
    pub custom_text: Option<&'static str>,
    /// Custom element payload: the record's value (its meaning is the
    /// custom decoder's, by `custom_kind`).
    pub custom_value: u64,
    /// ITM details (ITMTRACE elements).
    pub itm: ItmInfo,
    /// Cycle count, where `has_cc`.
    pub cycle_count: u32,
    /// Number of instructions in a range.
    pub num_instr_range: u32,
    /// Exception number, as the protocol gives it.
    pub exception_number: u32,
    /// Value of a sync marker (SYNC_MARKER elements).
    pub sync_marker_value: u32,
    /// Custom element payload: what kind of record it is, as the custom
    /// decoder numbers its records.
    pub custom_kind: u32,
    /// Software trace details (SWTRACE elements).
    pub sw_trace: SwTraceInfo,
    /// Event bits of a numbered event (EVENT elements).
    pub event_number: u16,
    /// What the element is; says which fields are valid.
    pub elem_type: ElemType,
    /// `cycle_count` is valid.
    pub has_cc: bool,
    /// An exception carries its preferred return address in `en_addr`.
    pub excep_ret_addr: bool,
    /// That return address is also the target of the branch just traced.
    pub excep_ret_addr_br_tgt: bool,
    /// `timestamp` is valid for this element.
    pub has_ts: bool,
    /// A range's last instruction was executed (E); false for a conditional one that failed
    /// (N).
    pub last_instr_exec: bool,
    /// Instruction set (of a range, or of the context).
    pub isa: Isa,
    /// Program flow class of a range's last instruction.
    pub last_i_type: InstrType,
    /// Refinement of `last_i_type` (call, return).
    pub last_i_subtype: InstrSubType,
    /// Size in bytes of a range's last instruction.
    pub last_instr_sz: u8,
    /// A range's last instruction is conditional.
    pub last_instr_cond: bool,
    /// Why trace turned on (TRACE_ON elements).
    pub trace_on_reason: TraceOnReason,
    /// Why the decoder is not synchronised (NO_SYNC, EO_TRACE elements).
    pub unsync_info: UnsyncInfo,
    /// Kind of event (EVENT elements).
    pub event_type: EventType,
    /// Transactional memory operation (MEMTRANS elements).
    pub mem_trans: MemTrans,
    /// Memory space of an ADDR_NACC.
    pub mem_space: MemSpace,
    /// Exception level of the software writing instrumentation (INSTRUMENTATION elements).
    pub ite_el: u8,
}

impl TraceElement {
    /// A fresh element of type `elem_type`, everything else at its default.
    pub fn new(elem_type: ElemType) -> Self {
        TraceElement {
            elem_type,
            ..Default::default()
        }
    }

    /// Starts a new element of `elem_type`, clearing the per-element flags
    /// (and the instruction count and exception number, which OpenCSD keeps
    /// in one word it clears) and keeping the rest, as OpenCSD's `setType`
    /// does: a range never filled in (an ETMv3 atom with no instruction
    /// followed) shows the addresses of the element last in its slot with
    /// `num_i(0) last_sz(0)` and `N`.
    pub fn set_type(&mut self, elem_type: ElemType) {
        self.elem_type = elem_type;
        self.has_cc = false;
        self.last_instr_exec = false;
        self.last_instr_sz = 0;
        self.last_instr_cond = false;
        self.excep_ret_addr = false;
        self.excep_ret_addr_br_tgt = false;
        self.has_ts = false;
        self.num_instr_range = 0;
        self.exception_number = 0;
    }

    /// Sets the cycle count and marks it valid.
    pub fn set_cycle_count(&mut self, cc: u32) {
        self.cycle_count = cc;
        self.has_cc = true;
    }

    /// Writes the element as OpenCSD prints it into `out`.
    pub fn write_to(&self, out: &mut String) {
        let mut t = TextBuf::with_capacity(128);
        self.write_text(&mut t);
        out.push_str(t.as_str());
    }

    /// Writes the element as OpenCSD prints it into `o`: the listing's
    /// path, with the frequent kinds written without the formatting
    /// machinery.
    #[inline]
    pub(crate) fn write_text<W: TextOut>(&self, o: &mut W) {
        if self.elem_type == ElemType::InstrRange {
            self.write_instr_range(o);
        } else {
            let _ = self.write_other(o);
        }
        if self.has_cc {
            o.put(b" [CC=");
            o.dec(self.cycle_count as u64);
            o.put(b"]; ");
        }
        o.ascii(b')');
    }

    /// The most frequent line of a decode listing.
    #[inline]
    fn write_instr_range<W: TextOut>(&self, o: &mut W) {
        const ISA: [Pad<4>; 8] = [
            Pad::new("A32"),
            Pad::new("T32"),
            Pad::new("A64"),
            Pad::new("TEE"),
            Pad::new("Jaz"),
            Pad::new("Cst"),
            Pad::new("RV"),
            Pad::new("Unk"),
        ];
        const TYPE: [Pad<8>; 7] = [
            Pad::new("--- "),
            Pad::new("BR  "),
            Pad::new("iBR "),
            Pad::new("ISB "),
            Pad::new("DSB.DMB"),
            Pad::new("WFI.WFE"),
            Pad::new("TSTART"),
        ];
        const SUBTYPE: [Pad<16>; 5] = [
            Pad::new(""),
            Pad::new("b+link "),
            Pad::new("A64:ret "),
            Pad::new("A64:eret "),
            Pad::new("V7:impl ret"),
        ];
        o.put(b"OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x");
        o.hex(self.st_addr);
        o.put(b":[0x");
        o.hex(self.en_addr);
        o.put(b"] num_i(");
        o.dec(self.num_instr_range as u64);
        o.put(b") last_sz(");
        o.dec(self.last_instr_sz as u64);
        o.put(b") (ISA=");
        let isa = match self.isa {
            Isa::Arm => 0,
            Isa::Thumb2 => 1,
            Isa::Aarch64 => 2,
            Isa::Tee => 3,
            Isa::Jazelle => 4,
            Isa::Custom => 5,
            Isa::RiscV => 6,
            Isa::Unknown => 7,
        };
        o.put_pad(&ISA[isa]);
        o.put(if self.last_instr_exec { b") E " } else { b") N " });
        let ty = match self.last_i_type {
            InstrType::Other => 0,
            InstrType::Branch => 1,
            InstrType::BranchIndirect => 2,
            InstrType::Isb => 3,
            InstrType::DsbDmb => 4,
            InstrType::WfiWfe => 5,
            InstrType::Tstart => 6,
        };
        o.put_pad(&TYPE[ty]);
        let sub = match self.last_i_subtype {
            InstrSubType::None => 0,
            InstrSubType::BranchLink => 1,
            InstrSubType::V8Ret => 2,
            InstrSubType::V8Eret => 3,
            InstrSubType::V7ImpliedRet => 4,
        };
        o.put_pad(&SUBTYPE[sub]);
        if self.last_instr_cond {
            o.put(b" <cond>");
        }
    }

    /// Every kind but INSTR_RANGE, up to the cycle count.
    #[inline(never)]
    fn write_other<W: TextOut>(&self, o: &mut W) -> fmt::Result {
        o.put_str(self.elem_type.name());
        o.ascii(b'(');
        match self.elem_type {
            ElemType::InstrRange => {}
            ElemType::AddrNacc => {
                write!(
                    o,
                    " 0x{:x}; Memspace [0x{:x}:{}] ",
                    self.st_addr,
                    self.mem_space.bits(),
                    self.mem_space
                )?;
            }
            ElemType::IRangeNoPath => {
                write!(o, "first 0x{:x}:[next 0x{:x}] ", self.st_addr, self.en_addr)?;
                write!(o, "num_i({}) ", self.num_instr_range)?;
            }
            ElemType::Exception => {
                if self.excep_ret_addr {
                    write!(o, "pref ret addr:0x{:x}", self.en_addr)?;
                    if self.excep_ret_addr_br_tgt {
                        o.put_str(" [addr also prev br tgt]");
                    }
                    o.put_str("; ");
                }
                write!(o, "excep num (0x{:02x}) ", self.exception_number)?;
            }
            ElemType::PeContext if self.isa == Isa::RiscV => {
                // RISC-V: privilege mode by name (U, S, M; 2 is reserved),
                // no security state.
                o.put_str("(ISA=RV) ");
                if self.context.el_valid
                    && let Some(n) = self.context.exception_level.number()
                {
                    o.put_str(["U; ", "S; ", "H; ", "M; "][n as usize & 3]);
                }
                o.put_str(if self.context.bits64 { "64-bit; " } else { "32-bit; " });
                self.write_hart_ie(o)?;
            }
            ElemType::PeContext => {
                write!(o, "(ISA={}) ", self.isa)?;
                if self.context.el_valid
                    && let Some(n) = self.context.exception_level.number()
                {
                    write!(o, "EL{n}")?;
                }
                o.put_str(match self.context.security {
                    SecurityState::Secure => "S; ",
                    SecurityState::NonSecure => "N; ",
                    SecurityState::Root => "Root; ",
                    SecurityState::Realm => "Realm; ",
                });
                o.put_str(if self.context.bits64 { "64-bit; " } else { "32-bit; " });
                if self.context.vmid_valid {
                    write!(o, "VMID=0x{:x}; ", self.context.vmid)?;
                }
                if self.context.ctxt_id_valid {
                    write!(o, "CTXTID=0x{:x}; ", self.context.context_id)?;
                }
                self.write_hart_ie(o)?;
            }
            ElemType::DataAccess => {
                let d = &self.data;
                o.put_str(match d.kind {
                    DataAccessKind::Load => "load",
                    DataAccessKind::Store => "store",
                });
                if let Some(a) = d.addr {
                    write!(o, " addr=0x{a:x}")?;
                }
                if let Some(v) = d.value {
                    write!(o, " data=0x{v:x}")?;
                }
                o.put_str("; ");
            }
            ElemType::TraceOn => {
                o.put_str(match self.trace_on_reason {
                    TraceOnReason::Normal => " [begin or filter]",
                    TraceOnReason::Overflow => " [overflow]",
                    TraceOnReason::ExDebug => " [debug restart]",
                });
            }
            ElemType::Timestamp => {
                write!(o, " [ TS=0x{:012x}]; ", self.timestamp)?;
            }
            ElemType::SwTrace => self.write_sw_trace(o)?,
            ElemType::Event => match self.event_type {
                EventType::Trigger => o.put_str(" Trigger; "),
                EventType::Numbered => write!(o, " Numbered:{}; ", self.event_number)?,
                EventType::Unknown => {}
            },
            ElemType::EoTrace | ElemType::NoSync => {
                o.put_str(match self.unsync_info {
                    UnsyncInfo::Unknown => " [undefined]",
                    UnsyncInfo::InitDecoder => " [init-decoder]",
                    UnsyncInfo::ResetDecoder => " [reset-decoder]",
                    UnsyncInfo::Overflow => " [overflow]",
                    UnsyncInfo::Discard => " [discard]",
                    UnsyncInfo::BadPacket => " [bad-packet]",
                    UnsyncInfo::BadImage => " [bad-program-image]",
                    UnsyncInfo::Eot => " [end-of-trace]",
                });
            }
            ElemType::SyncMarker => {
                write!(o, " [Timestamp marker(0x{:08x})]", self.sync_marker_value)?;
            }
            ElemType::MemTrans => {
                o.put_str(match self.mem_trans {
                    MemTrans::TraceInit => "Init",
                    MemTrans::Start => "Start",
                    MemTrans::Commit => "Commit",
                    MemTrans::Fail => "Fail",
                });
            }
            ElemType::Instrumentation => {
                write!(o, "EL{}; 0x{:016x}", self.ite_el, self.ite_value)?;
            }
            ElemType::ItmTrace => self.write_itm(o)?,
            ElemType::Custom => {
                if let Some(t) = self.custom_text {
                    o.put_str(t);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The hart and interrupt-enable parts of a PE context, where known.
    fn write_hart_ie<W: TextOut>(&self, o: &mut W) -> fmt::Result {
        if let Some(h) = self.context.hart {
            write!(o, "hart=0x{h:x}; ")?;
        }
        if let Some(ie) = self.context.interrupts_enabled {
            o.put_str(if ie { "IE; " } else { "ID; " });
        }
        Ok(())
    }

    fn write_sw_trace<W: TextOut>(&self, o: &mut W) -> fmt::Result {
        let sw = &self.sw_trace;
        if sw.global_err {
            o.put_str("{Global Error.}");
            return Ok(());
        }
        if sw.id_valid {
            write!(o, " (Ma:0x{:02x}; Ch:0x{:02x}) ", sw.master_id, sw.channel_id)?;
        } else {
            o.put_str("(Ma:0x??; Ch:0x??) ");
        }
        if sw.payload_bits > 0 {
            let v = self.sw_payload;
            match sw.payload_bits {
                4 => write!(o, "0x{:01x}", v & 0xf)?,
                8 => write!(o, "0x{:02x}", v & 0xff)?,
                16 => write!(o, "0x{:04x}", v & 0xffff)?,
                32 => write!(o, "0x{:08x}", v & 0xffff_ffff)?,
                64 => write!(o, "0x{:016x}", v)?,
                _ => o.put_str("0x{Data Error : unsupported bit width.}"),
            }
            o.put_str("; ");
        }
        if sw.marker {
            o.put_str("+Mrk ");
        }
        if sw.trigger {
            o.put_str("Trig ");
        }
        if sw.has_timestamp {
            write!(o, " [ TS=0x{:012x}]; ", self.timestamp)?;
        }
        if sw.frequency {
            o.put_str("Freq");
        }
        if sw.master_err {
            o.put_str("{Master Error.}");
        }
        Ok(())
    }

    fn write_itm<W: TextOut>(&self, o: &mut W) -> fmt::Result {
        let itm = &self.itm;
        if itm.overflow {
            o.put_str("ITM_OVERFLOW; ");
        }
        // The payload is zero-padded to its size in bytes.
        let width = itm.payload_size as usize * 2;
        match itm.kind {
            ItmPktKind::Swit => {
                write!(
                    o,
                    "ITM_SWIT (ch: 0x{:x}; Data: 0x{:0w$x}) ",
                    itm.channel_or_desc,
                    itm.value,
                    w = width
                )?;
            }
            ItmPktKind::Dwt => {
                write!(
                    o,
                    "ITM_DWT (desc: 0x{:x}; Data: 0x{:0w$x}) ",
                    itm.channel_or_desc,
                    itm.value,
                    w = width
                )?;
            }
            ItmPktKind::TsLocal => {
                let rel = match itm.ts_relation & 3 {
                    0 => "TS Sync",
                    1 => "TS Delay",
                    2 => "Packet Delay",
                    _ => "TS and Packet Delay",
                };
                write!(
                    o,
                    "ITM_TS_LOCAL ( TS delta: 0x{:08x}, {{ {rel}}}; TS cumulative: 0x{:016x}) ",
                    itm.value, self.timestamp
                )?;
            }
            ItmPktKind::TsGlobal => {
                write!(o, "ITM_TS_GLOBAL ( TS: 0x{:016x}) ", self.timestamp)?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for TraceElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(96);
        self.write_to(&mut s);
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(e: &TraceElement) -> String {
        e.to_string()
    }

    #[test]
    fn instr_range_forms() {
        let mut e = TraceElement::new(ElemType::InstrRange);
        e.st_addr = 0xffffffc000096a00;
        e.en_addr = 0xffffffc000096a10;
        e.num_instr_range = 4;
        e.last_instr_sz = 4;
        e.isa = Isa::Aarch64;
        e.last_instr_exec = true;
        e.last_i_type = InstrType::BranchIndirect;
        e.last_i_subtype = InstrSubType::V8Ret;
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xffffffc000096a00:[0xffffffc000096a10] num_i(4) last_sz(4) (ISA=A64) E iBR A64:ret )"
        );
        e.last_i_type = InstrType::Branch;
        e.last_i_subtype = InstrSubType::None;
        e.last_instr_exec = false;
        e.last_instr_cond = true;
        e.set_cycle_count(12);
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0xffffffc000096a00:[0xffffffc000096a10] num_i(4) last_sz(4) (ISA=A64) N BR   <cond> [CC=12]; )"
        );
    }

    #[test]
    fn context_exception_and_markers() {
        let mut e = TraceElement::new(ElemType::PeContext);
        e.isa = Isa::Aarch64;
        e.context = PeContext {
            security: SecurityState::NonSecure,
            exception_level: ExceptionLevel::El1,
            el_valid: true,
            bits64: true,
            vmid: 0,
            vmid_valid: true,
            context_id: 0x2a,
            ctxt_id_valid: true,
            hart: None,
            interrupts_enabled: None,
        };
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=A64) EL1N; 64-bit; VMID=0x0; CTXTID=0x2a; )"
        );

        let mut x = TraceElement::new(ElemType::Exception);
        x.excep_ret_addr = true;
        x.en_addr = 0x2caa4;
        x.exception_number = 2;
        assert_eq!(
            text(&x),
            "OCSD_GEN_TRC_ELEM_EXCEPTION(pref ret addr:0x2caa4; excep num (0x02) )"
        );

        let mut n = TraceElement::new(ElemType::AddrNacc);
        n.st_addr = 0xc0076a4c;
        n.mem_space = MemSpace::N;
        assert_eq!(
            text(&n),
            "OCSD_GEN_TRC_ELEM_ADDR_NACC( 0xc0076a4c; Memspace [0x6:Any NS] )"
        );

        let mut t = TraceElement::new(ElemType::Timestamp);
        t.timestamp = 0x58e90bb867;
        t.set_cycle_count(3);
        assert_eq!(
            text(&t),
            "OCSD_GEN_TRC_ELEM_TIMESTAMP( [ TS=0x0058e90bb867];  [CC=3]; )"
        );

        let mut s = TraceElement::new(ElemType::NoSync);
        s.unsync_info = UnsyncInfo::InitDecoder;
        assert_eq!(text(&s), "OCSD_GEN_TRC_ELEM_NO_SYNC( [init-decoder])");
        let mut m = TraceElement::new(ElemType::SyncMarker);
        m.sync_marker_value = 0;
        assert_eq!(
            text(&m),
            "OCSD_GEN_TRC_ELEM_SYNC_MARKER( [Timestamp marker(0x00000000)])"
        );
        assert_eq!(
            text(&TraceElement::new(ElemType::ExceptionRet)),
            "OCSD_GEN_TRC_ELEM_EXCEPTION_RET()"
        );
    }

    #[test]
    fn riscv_context_and_data_access_forms() {
        let mut e = TraceElement::new(ElemType::PeContext);
        e.isa = Isa::RiscV;
        e.context.el_valid = true;
        e.context.exception_level = ExceptionLevel::El3;
        e.context.bits64 = true;
        e.context.hart = Some(2);
        e.context.interrupts_enabled = Some(false);
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=RV) M; 64-bit; hart=0x2; ID; )"
        );
        e.context.exception_level = ExceptionLevel::El0;
        e.context.bits64 = false;
        e.context.hart = None;
        e.context.interrupts_enabled = Some(true);
        assert_eq!(text(&e), "OCSD_GEN_TRC_ELEM_PE_CONTEXT((ISA=RV) U; 32-bit; IE; )");

        let mut d = TraceElement::new(ElemType::DataAccess);
        d.data = DataAccess {
            kind: DataAccessKind::Store,
            addr: Some(0x8000_1000),
            value: None,
        };
        assert_eq!(text(&d), "OCSD_GEN_TRC_ELEM_DATA_ACCESS(store addr=0x80001000; )");
        d.data = DataAccess {
            kind: DataAccessKind::Load,
            addr: None,
            value: Some(0xff),
        };
        assert_eq!(text(&d), "OCSD_GEN_TRC_ELEM_DATA_ACCESS(load data=0xff; )");
    }

    #[test]
    fn software_trace_forms() {
        let mut e = TraceElement::new(ElemType::SwTrace);
        e.sw_trace = SwTraceInfo {
            master_id: 0x20,
            channel_id: 3,
            payload_bits: 32,
            id_valid: true,
            ..Default::default()
        };
        e.sw_payload = 0x1234;
        assert_eq!(text(&e), "OCSD_GEN_TRC_ELEM_SWTRACE( (Ma:0x20; Ch:0x03) 0x00001234; )");
        e.sw_trace.id_valid = false;
        e.sw_trace.frequency = true;
        e.sw_payload = 0x0124f800;
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_SWTRACE((Ma:0x??; Ch:0x??) 0x0124f800; Freq)"
        );
    }

    #[test]
    fn itm_trace_forms() {
        let mut e = TraceElement::new(ElemType::ItmTrace);
        e.itm = ItmInfo {
            kind: ItmPktKind::Swit,
            channel_or_desc: 0x4a,
            payload_size: 2,
            value: 0x2345,
            ..Default::default()
        };
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x4a; Data: 0x2345) )"
        );
        e.itm = ItmInfo {
            kind: ItmPktKind::Dwt,
            channel_or_desc: 0x12,
            payload_size: 1,
            value: 0x44,
            overflow: true,
            ..Default::default()
        };
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_OVERFLOW; ITM_DWT (desc: 0x12; Data: 0x44) )"
        );
        e.itm = ItmInfo {
            kind: ItmPktKind::TsLocal,
            ts_relation: 3,
            value: 0x07543f5e,
            payload_size: 4,
            ..Default::default()
        };
        e.timestamp = 0x07543f5e;
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_LOCAL ( TS delta: 0x07543f5e, { TS and Packet Delay}; TS cumulative: 0x0000000007543f5e) )"
        );
        e.itm = ItmInfo {
            kind: ItmPktKind::TsGlobal,
            ..Default::default()
        };
        e.timestamp = 0x1020304cf23456;
        assert_eq!(
            text(&e),
            "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_TS_GLOBAL ( TS: 0x001020304cf23456) )"
        );
    }
}
