//! Typed trace elements: one enum variant per kind of generic element,
//! carrying only the fields that kind defines.
//!
//! The decoders produce OpenCSD-shaped [`TraceElement`]s: one flat record
//! whose fields are valid or stale depending on its type, which is what
//! the listing prints. [`Element`] is the same information as a Rust user
//! wants it: a value OpenCSD pairs with a "valid" flag is an `Option`, and
//! a field that does not belong to a kind is not there.
//! [`Element::from_generic`] converts (no allocation; `Element` is `Copy`)
//! and [`Element::to_generic`] goes back, so a typed element can still be
//! printed in OpenCSD's form ([`Element`]'s `Display` is that form).
//!
//! The pull API ([`crate::pull`]) yields [`Decoded`] items: an element with
//! the trace index and trace ID it came from.

use std::fmt;

use crate::arch::{ExceptionLevel, InstrSubType, InstrType, Isa, SecurityState};
use crate::datapath::TrcIndex;
use crate::element::{
    DataAccess, ElemType, EventType, ItmInfo, ItmPktKind, MemTrans, PeContext, SwTraceInfo, TraceElement,
    TraceOnReason, UnsyncInfo,
};
use crate::memory::MemSpace;

/// One decoded element with where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Trace index: the byte offset in the trace buffer of the packet (or,
    /// for formatted trace, of the frame) the element was decoded from.
    pub index: TrcIndex,
    /// Trace ID of the source that produced the element (0 for an
    /// unformatted single source).
    pub trace_id: u8,
    /// The element.
    pub element: Element,
}

impl fmt::Display for Decoded {
    /// `Idx:<index>; ID:<trace id in hex>; <element as OpenCSD prints it>`,
    /// the form of a `trc_pkt_lister` decode line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Idx:{}; ID:{:x}; {}", self.index, self.trace_id, self.element)
    }
}

/// A generic trace element, typed by kind (OpenCSD's
/// `ocsd_gen_trc_elem_t` with its per-type fields).
///
/// `cycle_count` fields are the cycle count a cycle-accurate trace
/// attached to the element (`None` when it attached none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Element {
    /// An element of no known kind (never produced by the built-in
    /// decoders).
    Unknown,
    /// The decoder is not synchronised: the trace that follows cannot be
    /// decoded until a synchronisation point.
    NoSync {
        /// Why synchronisation was lost (or not yet found).
        reason: UnsyncInfo,
    },
    /// Tracing started or restarted: the elements that follow are not
    /// contiguous with those before.
    TraceOn {
        /// Why trace (re)started.
        reason: TraceOnReason,
        /// Cycle count attached to the element.
        cycle_count: Option<u32>,
    },
    /// End of the trace for this source.
    EoTrace {
        /// Why trace ended (normally [`UnsyncInfo::Eot`]).
        reason: UnsyncInfo,
    },
    /// The PE's context: instruction set, exception level, security state,
    /// context ID, VMID. Applies to the elements that follow.
    PeContext {
        /// Instruction set the PE runs at the next instruction.
        isa: Isa,
        /// The context.
        context: Context,
        /// Cycle count attached to the element.
        cycle_count: Option<u32>,
    },
    /// A range of instructions executed (the last one may have been a
    /// conditional instruction that failed its condition: see
    /// [`LastInstr::executed`]).
    InstrRange {
        /// Instruction set of the range.
        isa: Isa,
        /// Address of the first instruction.
        start: u64,
        /// Address one past the last instruction of the range.
        end: u64,
        /// Number of instructions in the range.
        num_instr: u32,
        /// The instruction that ended the range (a waypoint).
        last: LastInstr,
        /// Cycle count attached to the element.
        cycle_count: Option<u32>,
    },
    /// Instructions executed whose path is not traced (an ETMv4/ETE Q
    /// element, or a range the decoder could not follow through memory):
    /// how many, from where, and where execution went next.
    IRangeNoPath {
        /// Instruction set at the start of the range.
        isa: Isa,
        /// Address of the first instruction.
        start: u64,
        /// Address of the next instruction executed after the range.
        next: u64,
        /// Number of instructions executed.
        num_instr: u32,
    },
    /// The decoder could not read the program's memory at an address: the
    /// memory image does not cover it. Decode resumes at the next address
    /// the trace gives.
    AddrNacc {
        /// The address that could not be read.
        addr: u64,
        /// The memory space the read was made in.
        mem_space: MemSpace,
        /// Cycle count, on cycle-accurate ETMv3 (the listing's `[CC=n]`).
        cycle_count: Option<u32>,
    },
    /// Instructions executed at an address the decoder does not know
    /// (ETMv3 atoms while it waits for an address): reported once, and
    /// those instructions are not traced.
    AddrUnknown {
        /// Cycle count attached to the element.
        cycle_count: Option<u32>,
    },
    /// An exception was taken.
    Exception {
        /// Exception number as the protocol encodes it: for ETMv4 and ETE
        /// the exception type of the Exception packet (A-profile: 0x0 PE
        /// reset, 0x1 debug halt, 0x2 call, 0x3 trap, 0x4 system error,
        /// 0x6 instruction debug, 0x7 data debug, 0xa alignment, 0xb
        /// instruction fault, 0xc data fault, 0xe IRQ, 0xf FIQ; M-profile:
        /// the exception number), for PTM and ETMv3 the exception number of
        /// the branch address packet.
        number: u32,
        /// Preferred return address (the address the exception returns to,
        /// where the instructions before it ended), when the trace gives it.
        preferred_return: Option<u64>,
        /// The preferred return address is also the target of the branch
        /// before the exception (the range up to it was not executed).
        return_is_branch_target: bool,
        /// Cycle count attached to the element.
        cycle_count: Option<u32>,
    },
    /// Return from an exception, where the protocol traces it (an
    /// exception return packet: ETMv4, PTM, ETMv3).
    ExceptionRet {
        /// Cycle count attached to the element.
        cycle_count: Option<u32>,
    },
    /// A timestamp.
    Timestamp {
        /// The timestamp value.
        timestamp: u64,
        /// Cycle count attached to the element.
        cycle_count: Option<u32>,
    },
    /// Cycles counted with no other element to attach them to.
    CycleCount {
        /// Number of cycles (`None` only for ETMv3 trace, which can report
        /// that cycles passed without a count).
        cycle_count: Option<u32>,
    },
    /// A trace event: a trigger, or a numbered ETMv4/ETE event.
    Event(Event),
    /// A software trace message (STM).
    SwTrace(SwTrace),
    /// A timestamp marker packet (ETE): `value` is the marker's payload.
    SyncMarker {
        /// The marker's value.
        value: u32,
    },
    /// Transactional memory: start, commit or failure of a transaction.
    MemTrans {
        /// What happened to the transaction.
        op: MemTrans,
    },
    /// An instrumentation packet (ETE: the ITE instruction traced a value).
    Instrumentation {
        /// The exception level field of the packet (0 to 3 as written by
        /// the PE).
        el: u8,
        /// The value the program wrote.
        value: u64,
    },
    /// An ITM packet: a software message, a hardware (DWT) packet or a
    /// timestamp.
    ItmTrace(ItmTrace),
    /// An element from a custom (user-registered) decoder.
    Custom {
        /// What kind of record it is, as the custom decoder numbers them.
        kind: u32,
        /// The record's value (its meaning is the decoder's, by `kind`).
        value: u64,
        /// Text the decoder gave for the listing, if any.
        text: Option<&'static str>,
    },
    /// A data access: a load or store address and/or value (RISC-V trace).
    DataAccess(DataAccess),
}

/// The instruction that ended an instruction range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LastInstr {
    /// The instruction executed (false: a conditional instruction that
    /// failed its condition, e.g. a branch not taken).
    pub executed: bool,
    /// Its size in bytes (2 or 4).
    pub size: u8,
    /// What kind of instruction it is, as far as program flow goes.
    pub kind: InstrType,
    /// Finer kind: call, return...
    pub subtype: InstrSubType,
    /// It is conditional.
    pub conditional: bool,
}

/// A PE context (the fields of a PE_CONTEXT element).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Context {
    /// Security state.
    pub security: SecurityState,
    /// Exception level (for RISC-V, the privilege mode: 0 user,
    /// 1 supervisor, 3 machine), when the trace gives it.
    pub exception_level: Option<ExceptionLevel>,
    /// The PE is in a 64-bit state (AArch64, RV64).
    pub bits64: bool,
    /// Context ID (CONTEXTIDR), when traced.
    pub context_id: Option<u32>,
    /// Virtual machine ID, when traced.
    pub vmid: Option<u32>,
    /// The hardware thread the trace that follows comes from, where the
    /// protocol says (RISC-V).
    pub hart: Option<u64>,
    /// Whether interrupts are enabled, where the protocol says (RISC-V).
    pub interrupts_enabled: Option<bool>,
}

/// A trace event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Event {
    /// An event of no known kind.
    Unknown,
    /// A trigger.
    Trigger,
    /// A numbered event (ETMv4/ETE event packet: the event's number).
    Numbered(u16),
}

/// The master and channel a software message was written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwChannel {
    /// Master ID.
    pub master: u16,
    /// Channel ID.
    pub channel: u16,
}

/// The data of a software message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwPayload {
    /// Size in bits: 4, 8, 16, 32 or 64.
    pub bits: u8,
    /// The value (little endian; only the low `bits` bits are the
    /// message's).
    pub value: u64,
    /// Number of packets the payload came in.
    pub packets: u8,
}

/// A software trace (STM) message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwTrace {
    /// Master and channel, when the trace has said which (a global error
    /// leaves them unknown).
    pub source: Option<SwChannel>,
    /// The message's data, if it carried any.
    pub payload: Option<SwPayload>,
    /// The write was a marker (the `M` forms of the data packets, or FLAG).
    pub marker: bool,
    /// A trigger write (TRIG).
    pub trigger: bool,
    /// A frequency packet (FREQ): the payload is the timestamp frequency.
    pub frequency: bool,
    /// A global error packet (GERR).
    pub global_error: bool,
    /// A master error packet (MERR).
    pub master_error: bool,
    /// Timestamp the packet carried.
    pub timestamp: Option<u64>,
}

/// Relation of an ITM local timestamp to the packets around it (its TC
/// bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TsRelation {
    /// Synchronous with the packet before it.
    Sync,
    /// The timestamp was delayed.
    TimestampDelayed,
    /// The packet before it was delayed.
    PacketDelayed,
    /// Both were delayed.
    BothDelayed,
}

impl TsRelation {
    /// From the two TC bits.
    pub(crate) fn from_bits(bits: u8) -> TsRelation {
        match bits & 3 {
            0 => TsRelation::Sync,
            1 => TsRelation::TimestampDelayed,
            2 => TsRelation::PacketDelayed,
            _ => TsRelation::BothDelayed,
        }
    }

    /// The two TC bits.
    pub fn bits(self) -> u8 {
        match self {
            TsRelation::Sync => 0,
            TsRelation::TimestampDelayed => 1,
            TsRelation::PacketDelayed => 2,
            TsRelation::BothDelayed => 3,
        }
    }
}

/// What an ITM packet said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ItmMessage {
    /// A software write to a stimulus port.
    Software {
        /// Stimulus port (0 to 31).
        port: u8,
        /// Payload size in bytes (1, 2 or 4).
        size: u8,
        /// The value written.
        value: u32,
    },
    /// A hardware source (DWT) packet.
    Hardware {
        /// The packet's discriminator (which DWT packet kind).
        discriminator: u8,
        /// Payload size in bytes (1, 2 or 4).
        size: u8,
        /// The payload.
        value: u32,
    },
    /// A local timestamp.
    LocalTimestamp {
        /// The delta the packet carried.
        delta: u32,
        /// Its relation to the packets around it.
        relation: TsRelation,
        /// Payload size in bytes the delta came in.
        size: u8,
        /// The local time so far: the deltas summed (scaled by the
        /// prescaler).
        timestamp: u64,
    },
    /// A global timestamp.
    GlobalTimestamp {
        /// The global timestamp value.
        timestamp: u64,
    },
}

/// An ITM element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ItmTrace {
    /// The packet.
    pub message: ItmMessage,
    /// An overflow packet came before it (packets were lost).
    pub overflow: bool,
}

fn cc(e: &TraceElement) -> Option<u32> {
    e.has_cc.then_some(e.cycle_count)
}

impl Element {
    /// The typed form of `e`: only the fields valid for its type are read.
    pub fn from_generic(e: &TraceElement) -> Element {
        match e.elem_type {
            ElemType::Unknown => Element::Unknown,
            ElemType::NoSync => Element::NoSync { reason: e.unsync_info },
            ElemType::TraceOn => Element::TraceOn {
                reason: e.trace_on_reason,
                cycle_count: cc(e),
            },
            ElemType::EoTrace => Element::EoTrace { reason: e.unsync_info },
            ElemType::PeContext => {
                let c = &e.context;
                Element::PeContext {
                    isa: e.isa,
                    context: Context {
                        security: c.security,
                        exception_level: c.el_valid.then_some(c.exception_level),
                        bits64: c.bits64,
                        context_id: c.ctxt_id_valid.then_some(c.context_id),
                        vmid: c.vmid_valid.then_some(c.vmid),
                        hart: c.hart,
                        interrupts_enabled: c.interrupts_enabled,
                    },
                    cycle_count: cc(e),
                }
            }
            ElemType::InstrRange => Element::InstrRange {
                isa: e.isa,
                start: e.st_addr,
                end: e.en_addr,
                num_instr: e.num_instr_range,
                last: LastInstr {
                    executed: e.last_instr_exec,
                    size: e.last_instr_sz,
                    kind: e.last_i_type,
                    subtype: e.last_i_subtype,
                    conditional: e.last_instr_cond,
                },
                cycle_count: cc(e),
            },
            ElemType::IRangeNoPath => Element::IRangeNoPath {
                isa: e.isa,
                start: e.st_addr,
                next: e.en_addr,
                num_instr: e.num_instr_range,
            },
            ElemType::AddrNacc => Element::AddrNacc {
                addr: e.st_addr,
                mem_space: e.mem_space,
                cycle_count: cc(e),
            },
            ElemType::AddrUnknown => Element::AddrUnknown { cycle_count: cc(e) },
            ElemType::Exception => Element::Exception {
                number: e.exception_number,
                preferred_return: e.excep_ret_addr.then_some(e.en_addr),
                return_is_branch_target: e.excep_ret_addr && e.excep_ret_addr_br_tgt,
                cycle_count: cc(e),
            },
            ElemType::ExceptionRet => Element::ExceptionRet { cycle_count: cc(e) },
            ElemType::Timestamp => Element::Timestamp {
                timestamp: e.timestamp,
                cycle_count: cc(e),
            },
            ElemType::CycleCount => Element::CycleCount { cycle_count: cc(e) },
            ElemType::Event => Element::Event(match e.event_type {
                EventType::Unknown => Event::Unknown,
                EventType::Trigger => Event::Trigger,
                EventType::Numbered => Event::Numbered(e.event_number),
            }),
            ElemType::SwTrace => {
                let s = &e.sw_trace;
                let mask = match s.payload_bits {
                    b @ 1..=63 => (1u64 << b) - 1,
                    _ => u64::MAX,
                };
                Element::SwTrace(SwTrace {
                    source: s.id_valid.then_some(SwChannel {
                        master: s.master_id,
                        channel: s.channel_id,
                    }),
                    payload: (s.payload_bits > 0).then_some(SwPayload {
                        bits: s.payload_bits,
                        value: e.sw_payload & mask,
                        packets: s.payload_num_packets,
                    }),
                    marker: s.marker,
                    trigger: s.trigger,
                    frequency: s.frequency,
                    global_error: s.global_err,
                    master_error: s.master_err,
                    timestamp: s.has_timestamp.then_some(e.timestamp),
                })
            }
            ElemType::SyncMarker => Element::SyncMarker {
                value: e.sync_marker_value,
            },
            ElemType::MemTrans => Element::MemTrans { op: e.mem_trans },
            ElemType::Instrumentation => Element::Instrumentation {
                el: e.ite_el,
                value: e.ite_value,
            },
            ElemType::ItmTrace => {
                let i = &e.itm;
                let message = match i.kind {
                    ItmPktKind::Swit => ItmMessage::Software {
                        port: i.channel_or_desc,
                        size: i.payload_size,
                        value: i.value,
                    },
                    ItmPktKind::Dwt => ItmMessage::Hardware {
                        discriminator: i.channel_or_desc,
                        size: i.payload_size,
                        value: i.value,
                    },
                    ItmPktKind::TsLocal => ItmMessage::LocalTimestamp {
                        delta: i.value,
                        relation: TsRelation::from_bits(i.ts_relation),
                        size: i.payload_size,
                        timestamp: e.timestamp,
                    },
                    ItmPktKind::TsGlobal => ItmMessage::GlobalTimestamp { timestamp: e.timestamp },
                };
                Element::ItmTrace(ItmTrace {
                    message,
                    overflow: i.overflow,
                })
            }
            ElemType::Custom => Element::Custom {
                kind: e.custom_kind,
                value: e.custom_value,
                text: e.custom_text,
            },
            ElemType::DataAccess => Element::DataAccess(e.data),
        }
    }

    /// The OpenCSD-shaped element with this element's fields set (the
    /// others at their defaults): what the listing prints.
    pub fn to_generic(&self) -> TraceElement {
        let mut g = TraceElement::new(self.kind());
        if let Some(c) = self.cycle_count() {
            g.set_cycle_count(c);
        }
        match *self {
            Element::Unknown
            | Element::AddrUnknown { .. }
            | Element::ExceptionRet { .. }
            | Element::CycleCount { .. } => {}
            Element::NoSync { reason } | Element::EoTrace { reason } => g.unsync_info = reason,
            Element::TraceOn { reason, .. } => g.trace_on_reason = reason,
            Element::PeContext { isa, context: c, .. } => {
                g.isa = isa;
                g.context = PeContext {
                    security: c.security,
                    exception_level: c.exception_level.unwrap_or_default(),
                    el_valid: c.exception_level.is_some(),
                    bits64: c.bits64,
                    context_id: c.context_id.unwrap_or(0),
                    ctxt_id_valid: c.context_id.is_some(),
                    vmid: c.vmid.unwrap_or(0),
                    vmid_valid: c.vmid.is_some(),
                    hart: c.hart,
                    interrupts_enabled: c.interrupts_enabled,
                };
            }
            Element::InstrRange {
                isa,
                start,
                end,
                num_instr,
                last,
                ..
            } => {
                g.isa = isa;
                g.st_addr = start;
                g.en_addr = end;
                g.num_instr_range = num_instr;
                g.last_instr_exec = last.executed;
                g.last_instr_sz = last.size;
                g.last_i_type = last.kind;
                g.last_i_subtype = last.subtype;
                g.last_instr_cond = last.conditional;
            }
            Element::IRangeNoPath {
                isa,
                start,
                next,
                num_instr,
            } => {
                g.isa = isa;
                g.st_addr = start;
                g.en_addr = next;
                g.num_instr_range = num_instr;
            }
            Element::AddrNacc { addr, mem_space, .. } => {
                g.st_addr = addr;
                g.mem_space = mem_space;
            }
            Element::Exception {
                number,
                preferred_return,
                return_is_branch_target,
                ..
            } => {
                g.exception_number = number;
                g.excep_ret_addr = preferred_return.is_some();
                g.en_addr = preferred_return.unwrap_or(0);
                g.excep_ret_addr_br_tgt = return_is_branch_target;
            }
            Element::Timestamp { timestamp, .. } => g.timestamp = timestamp,
            Element::Event(ev) => {
                (g.event_type, g.event_number) = match ev {
                    Event::Unknown => (EventType::Unknown, 0),
                    Event::Trigger => (EventType::Trigger, 0),
                    Event::Numbered(n) => (EventType::Numbered, n),
                };
            }
            Element::SwTrace(s) => {
                let src = s.source.unwrap_or(SwChannel { master: 0, channel: 0 });
                let p = s.payload.unwrap_or(SwPayload {
                    bits: 0,
                    value: 0,
                    packets: 0,
                });
                g.sw_trace = SwTraceInfo {
                    master_id: src.master,
                    channel_id: src.channel,
                    payload_bits: p.bits,
                    payload_num_packets: p.packets,
                    marker: s.marker,
                    has_timestamp: s.timestamp.is_some(),
                    trigger: s.trigger,
                    frequency: s.frequency,
                    id_valid: s.source.is_some(),
                    global_err: s.global_error,
                    master_err: s.master_error,
                };
                g.sw_payload = p.value;
                if let Some(t) = s.timestamp {
                    g.timestamp = t;
                    g.has_ts = true;
                }
            }
            Element::SyncMarker { value } => g.sync_marker_value = value,
            Element::MemTrans { op } => g.mem_trans = op,
            Element::Instrumentation { el, value } => {
                g.ite_el = el;
                g.ite_value = value;
            }
            Element::ItmTrace(t) => {
                let mut i = ItmInfo {
                    overflow: t.overflow,
                    ..ItmInfo::default()
                };
                match t.message {
                    ItmMessage::Software { port, size, value } => {
                        (i.kind, i.channel_or_desc, i.payload_size, i.value) = (ItmPktKind::Swit, port, size, value);
                    }
                    ItmMessage::Hardware {
                        discriminator,
                        size,
                        value,
                    } => {
                        (i.kind, i.channel_or_desc, i.payload_size, i.value) =
                            (ItmPktKind::Dwt, discriminator, size, value);
                    }
                    ItmMessage::LocalTimestamp {
                        delta,
                        relation,
                        size,
                        timestamp,
                    } => {
                        (i.kind, i.ts_relation, i.payload_size, i.value) =
                            (ItmPktKind::TsLocal, relation.bits(), size, delta);
                        g.timestamp = timestamp;
                        g.has_ts = true;
                    }
                    ItmMessage::GlobalTimestamp { timestamp } => {
                        i.kind = ItmPktKind::TsGlobal;
                        g.timestamp = timestamp;
                        g.has_ts = true;
                    }
                }
                g.itm = i;
            }
            Element::Custom { kind, value, text } => {
                g.custom_kind = kind;
                g.custom_value = value;
                g.custom_text = text;
            }
            Element::DataAccess(d) => g.data = d,
        }
        g
    }

    /// The element's kind (OpenCSD's element type).
    pub fn kind(&self) -> ElemType {
        match self {
            Element::Unknown => ElemType::Unknown,
            Element::NoSync { .. } => ElemType::NoSync,
            Element::TraceOn { .. } => ElemType::TraceOn,
            Element::EoTrace { .. } => ElemType::EoTrace,
            Element::PeContext { .. } => ElemType::PeContext,
            Element::InstrRange { .. } => ElemType::InstrRange,
            Element::IRangeNoPath { .. } => ElemType::IRangeNoPath,
            Element::AddrNacc { .. } => ElemType::AddrNacc,
            Element::AddrUnknown { .. } => ElemType::AddrUnknown,
            Element::Exception { .. } => ElemType::Exception,
            Element::ExceptionRet { .. } => ElemType::ExceptionRet,
            Element::Timestamp { .. } => ElemType::Timestamp,
            Element::CycleCount { .. } => ElemType::CycleCount,
            Element::Event(_) => ElemType::Event,
            Element::SwTrace(_) => ElemType::SwTrace,
            Element::SyncMarker { .. } => ElemType::SyncMarker,
            Element::MemTrans { .. } => ElemType::MemTrans,
            Element::Instrumentation { .. } => ElemType::Instrumentation,
            Element::ItmTrace(_) => ElemType::ItmTrace,
            Element::Custom { .. } => ElemType::Custom,
            Element::DataAccess(_) => ElemType::DataAccess,
        }
    }

    /// A short, stable, lower-case name for the kind (`instr_range`,
    /// `pe_context`...), for machine-readable output.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Element::Unknown => "unknown",
            Element::NoSync { .. } => "no_sync",
            Element::TraceOn { .. } => "trace_on",
            Element::EoTrace { .. } => "eo_trace",
            Element::PeContext { .. } => "pe_context",
            Element::InstrRange { .. } => "instr_range",
            Element::IRangeNoPath { .. } => "i_range_nopath",
            Element::AddrNacc { .. } => "addr_nacc",
            Element::AddrUnknown { .. } => "addr_unknown",
            Element::Exception { .. } => "exception",
            Element::ExceptionRet { .. } => "exception_ret",
            Element::Timestamp { .. } => "timestamp",
            Element::CycleCount { .. } => "cycle_count",
            Element::Event(_) => "event",
            Element::SwTrace(_) => "swtrace",
            Element::SyncMarker { .. } => "sync_marker",
            Element::MemTrans { .. } => "mem_trans",
            Element::Instrumentation { .. } => "instrumentation",
            Element::ItmTrace(_) => "itm_trace",
            Element::Custom { .. } => "custom",
            Element::DataAccess(_) => "data_access",
        }
    }

    /// The cycle count attached to the element, if any.
    pub fn cycle_count(&self) -> Option<u32> {
        match *self {
            Element::TraceOn { cycle_count, .. }
            | Element::PeContext { cycle_count, .. }
            | Element::InstrRange { cycle_count, .. }
            | Element::AddrUnknown { cycle_count }
            | Element::AddrNacc { cycle_count, .. }
            | Element::Exception { cycle_count, .. }
            | Element::ExceptionRet { cycle_count }
            | Element::Timestamp { cycle_count, .. }
            | Element::CycleCount { cycle_count } => cycle_count,
            _ => None,
        }
    }
}

impl From<&TraceElement> for Element {
    fn from(e: &TraceElement) -> Element {
        Element::from_generic(e)
    }
}

impl From<Element> for TraceElement {
    fn from(e: Element) -> TraceElement {
        e.to_generic()
    }
}

impl fmt::Display for Element {
    /// The element as OpenCSD prints it (see [`TraceElement`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_generic(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::DataAccessKind;

    /// A generic element of `t` with every field set to a non-default
    /// value, as a decoder reusing one element leaves stale fields.
    fn stale(t: ElemType) -> TraceElement {
        let mut e = TraceElement {
            elem_type: t,
            isa: Isa::Thumb2,
            st_addr: 0x1000,
            en_addr: 0x1010,
            context: PeContext {
                security: SecurityState::NonSecure,
                exception_level: ExceptionLevel::El1,
                el_valid: true,
                bits64: true,
                context_id: 0x55,
                ctxt_id_valid: true,
                vmid: 7,
                vmid_valid: false,
                hart: None,
                interrupts_enabled: None,
            },
            timestamp: 0x1234_5678_9abc,
            cycle_count: 99,
            has_cc: false,
            last_i_type: InstrType::Branch,
            last_i_subtype: InstrSubType::BranchLink,
            last_instr_exec: true,
            last_instr_sz: 2,
            last_instr_cond: true,
            num_instr_range: 4,
            excep_ret_addr: true,
            excep_ret_addr_br_tgt: true,
            exception_number: 0xe,
            trace_on_reason: TraceOnReason::Overflow,
            unsync_info: UnsyncInfo::Discard,
            event_type: EventType::Numbered,
            event_number: 3,
            sw_trace: SwTraceInfo {
                master_id: 0x41,
                channel_id: 0x23,
                payload_bits: 16,
                payload_num_packets: 1,
                marker: true,
                has_timestamp: true,
                trigger: false,
                frequency: false,
                id_valid: true,
                global_err: false,
                master_err: false,
            },
            sw_payload: 0xffff_0000_dead_beef,
            sync_marker_value: 0x77,
            mem_trans: MemTrans::Commit,
            mem_space: MemSpace::EL2,
            ite_el: 2,
            ite_value: 0xfeed,
            itm: ItmInfo {
                kind: ItmPktKind::Dwt,
                channel_or_desc: 0x12,
                payload_size: 2,
                overflow: true,
                ts_relation: 1,
                value: 0x4455,
            },
            has_ts: false,
            data: DataAccess {
                kind: DataAccessKind::Store,
                addr: Some(0x8000),
                value: None,
            },
            custom_text: Some("custom words"),
            custom_kind: 7,
            custom_value: 0x1234_5678_9abc,
        };
        e.set_type(t);
        // What a decoder sets after starting the element (set_type clears them).
        e.last_instr_exec = true;
        e.last_instr_sz = 2;
        e.num_instr_range = 4;
        e.exception_number = 0xe;
        e
    }

    #[test]
    fn every_kind_converts_with_exactly_its_fields() {
        let all = [
            (ElemType::Unknown, Element::Unknown),
            (
                ElemType::NoSync,
                Element::NoSync {
                    reason: UnsyncInfo::Discard,
                },
            ),
            (
                ElemType::TraceOn,
                Element::TraceOn {
                    reason: TraceOnReason::Overflow,
                    cycle_count: None,
                },
            ),
            (
                ElemType::EoTrace,
                Element::EoTrace {
                    reason: UnsyncInfo::Discard,
                },
            ),
            (
                ElemType::PeContext,
                Element::PeContext {
                    isa: Isa::Thumb2,
                    context: Context {
                        security: SecurityState::NonSecure,
                        exception_level: Some(ExceptionLevel::El1),
                        bits64: true,
                        context_id: Some(0x55),
                        vmid: None,
                        hart: None,
                        interrupts_enabled: None,
                    },
                    cycle_count: None,
                },
            ),
            (
                ElemType::InstrRange,
                Element::InstrRange {
                    isa: Isa::Thumb2,
                    start: 0x1000,
                    end: 0x1010,
                    num_instr: 4,
                    last: LastInstr {
                        executed: true,
                        size: 2,
                        kind: InstrType::Branch,
                        subtype: InstrSubType::BranchLink,
                        // set_type clears the condition flag.
                        conditional: false,
                    },
                    cycle_count: None,
                },
            ),
            (
                ElemType::IRangeNoPath,
                Element::IRangeNoPath {
                    isa: Isa::Thumb2,
                    start: 0x1000,
                    next: 0x1010,
                    num_instr: 4,
                },
            ),
            (
                ElemType::AddrNacc,
                Element::AddrNacc {
                    addr: 0x1000,
                    mem_space: MemSpace::EL2,
                    cycle_count: None,
                },
            ),
            (ElemType::AddrUnknown, Element::AddrUnknown { cycle_count: None }),
            // set_type clears the return-address flags.
            (
                ElemType::Exception,
                Element::Exception {
                    number: 0xe,
                    preferred_return: None,
                    return_is_branch_target: false,
                    cycle_count: None,
                },
            ),
            (ElemType::ExceptionRet, Element::ExceptionRet { cycle_count: None }),
            (
                ElemType::Timestamp,
                Element::Timestamp {
                    timestamp: 0x1234_5678_9abc,
                    cycle_count: None,
                },
            ),
            (ElemType::CycleCount, Element::CycleCount { cycle_count: None }),
            (ElemType::Event, Element::Event(Event::Numbered(3))),
            (
                ElemType::SwTrace,
                Element::SwTrace(SwTrace {
                    source: Some(SwChannel {
                        master: 0x41,
                        channel: 0x23,
                    }),
                    payload: Some(SwPayload {
                        bits: 16,
                        value: 0xbeef,
                        packets: 1,
                    }),
                    marker: true,
                    trigger: false,
                    frequency: false,
                    global_error: false,
                    master_error: false,
                    timestamp: Some(0x1234_5678_9abc),
                }),
            ),
            (ElemType::SyncMarker, Element::SyncMarker { value: 0x77 }),
            (ElemType::MemTrans, Element::MemTrans { op: MemTrans::Commit }),
            (
                ElemType::Instrumentation,
                Element::Instrumentation { el: 2, value: 0xfeed },
            ),
            (
                ElemType::ItmTrace,
                Element::ItmTrace(ItmTrace {
                    message: ItmMessage::Hardware {
                        discriminator: 0x12,
                        size: 2,
                        value: 0x4455,
                    },
                    overflow: true,
                }),
            ),
            (
                ElemType::Custom,
                Element::Custom {
                    kind: 7,
                    value: 0x1234_5678_9abc,
                    text: Some("custom words"),
                },
            ),
            (
                ElemType::DataAccess,
                Element::DataAccess(DataAccess {
                    kind: DataAccessKind::Store,
                    addr: Some(0x8000),
                    value: None,
                }),
            ),
        ];
        assert_eq!(all.len(), 21, "one case per element type");
        for (t, want) in all {
            let g = stale(t);
            let got = Element::from_generic(&g);
            assert_eq!(got, want, "{t:?}");
            assert_eq!(got.kind(), t);
            // Back to the generic form: the same element again, printed as
            // the original prints.
            let back = got.to_generic();
            assert_eq!(Element::from_generic(&back), got, "{t:?} round trip");
            assert_eq!(back.to_string(), g.to_string(), "{t:?} printed");
        }
    }

    #[test]
    fn valid_flags_become_options() {
        let mut g = stale(ElemType::PeContext);
        g.context.el_valid = false;
        g.context.vmid_valid = true;
        g.context.ctxt_id_valid = false;
        g.context.hart = Some(3);
        g.context.interrupts_enabled = Some(true);
        g.set_cycle_count(17);
        let Element::PeContext {
            context, cycle_count, ..
        } = Element::from_generic(&g)
        else {
            panic!("not a context")
        };
        assert_eq!(
            context,
            Context {
                security: SecurityState::NonSecure,
                exception_level: None,
                bits64: true,
                context_id: None,
                vmid: Some(7),
                hart: Some(3),
                interrupts_enabled: Some(true),
            }
        );
        assert_eq!(cycle_count, Some(17));

        let mut x = stale(ElemType::Exception);
        x.excep_ret_addr = true;
        x.excep_ret_addr_br_tgt = true;
        x.en_addr = 0x2caa4;
        x.set_cycle_count(5);
        let e = Element::from_generic(&x);
        assert_eq!(
            e,
            Element::Exception {
                number: 0xe,
                preferred_return: Some(0x2caa4),
                return_is_branch_target: true,
                cycle_count: Some(5)
            }
        );
        assert_eq!(
            e.to_string(),
            "OCSD_GEN_TRC_ELEM_EXCEPTION(pref ret addr:0x2caa4 [addr also prev br tgt]; excep num (0x0e)  [CC=5]; )"
        );

        let mut r = stale(ElemType::InstrRange);
        r.last_instr_cond = true;
        r.set_cycle_count(12);
        let e = Element::from_generic(&r);
        assert_eq!(e.cycle_count(), Some(12));
        assert!(matches!(
            e,
            Element::InstrRange {
                last: LastInstr { conditional: true, .. },
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x1000:[0x1010] num_i(4) last_sz(2) (ISA=T32) E BR  b+link  <cond> [CC=12]; )"
        );
    }

    #[test]
    fn software_and_itm_messages() {
        // A global error: no master/channel; the payload is still kept.
        let mut g = stale(ElemType::SwTrace);
        g.sw_trace = SwTraceInfo {
            global_err: true,
            payload_bits: 8,
            payload_num_packets: 1,
            ..SwTraceInfo::default()
        };
        g.sw_payload = 0x1_0000_0003;
        let e = Element::from_generic(&g);
        assert_eq!(
            e,
            Element::SwTrace(SwTrace {
                source: None,
                payload: Some(SwPayload {
                    bits: 8,
                    value: 3,
                    packets: 1
                }),
                marker: false,
                trigger: false,
                frequency: false,
                global_error: true,
                master_error: false,
                timestamp: None,
            })
        );
        assert_eq!(e.to_string(), "OCSD_GEN_TRC_ELEM_SWTRACE({Global Error.})");
        // No payload (a FLAG): no payload at all, whatever is in the buffer.
        g.sw_trace = SwTraceInfo {
            marker: true,
            id_valid: true,
            master_id: 1,
            channel_id: 2,
            ..SwTraceInfo::default()
        };
        let Element::SwTrace(s) = Element::from_generic(&g) else {
            panic!()
        };
        assert_eq!(
            (s.source, s.payload, s.marker),
            (Some(SwChannel { master: 1, channel: 2 }), None, true)
        );

        let mut i = stale(ElemType::ItmTrace);
        i.itm = ItmInfo {
            kind: ItmPktKind::TsLocal,
            channel_or_desc: 9,
            payload_size: 4,
            overflow: false,
            ts_relation: 3,
            value: 0x07543f5e,
        };
        i.timestamp = 0x1_0754_3f5e;
        let e = Element::from_generic(&i);
        assert_eq!(
            e,
            Element::ItmTrace(ItmTrace {
                message: ItmMessage::LocalTimestamp {
                    delta: 0x07543f5e,
                    relation: TsRelation::BothDelayed,
                    size: 4,
                    timestamp: 0x1_0754_3f5e
                },
                overflow: false,
            })
        );
        assert_eq!(Element::from_generic(&e.to_generic()), e);
        i.itm = ItmInfo {
            kind: ItmPktKind::Swit,
            channel_or_desc: 0x4a,
            payload_size: 2,
            value: 0x2345,
            ..ItmInfo::default()
        };
        let e = Element::from_generic(&i);
        assert_eq!(
            e,
            Element::ItmTrace(ItmTrace {
                message: ItmMessage::Software {
                    port: 0x4a,
                    size: 2,
                    value: 0x2345
                },
                overflow: false
            })
        );
        assert_eq!(
            e.to_string(),
            "OCSD_GEN_TRC_ELEM_ITMTRACE(ITM_SWIT (ch: 0x4a; Data: 0x2345) )"
        );
        i.itm.kind = ItmPktKind::TsGlobal;
        i.timestamp = 0x1020304cf23456;
        assert_eq!(
            Element::from_generic(&i),
            Element::ItmTrace(ItmTrace {
                message: ItmMessage::GlobalTimestamp {
                    timestamp: 0x1020304cf23456
                },
                overflow: false
            })
        );
        for b in 0..4 {
            assert_eq!(TsRelation::from_bits(b).bits(), b);
        }
    }

    #[test]
    fn events_and_small_kinds() {
        let mut g = stale(ElemType::Event);
        g.event_type = EventType::Trigger;
        assert_eq!(Element::from_generic(&g), Element::Event(Event::Trigger));
        assert_eq!(
            Element::from_generic(&g).to_string(),
            "OCSD_GEN_TRC_ELEM_EVENT( Trigger; )"
        );
        g.event_type = EventType::Unknown;
        assert_eq!(Element::from_generic(&g), Element::Event(Event::Unknown));
        let mut c = stale(ElemType::CycleCount);
        c.set_cycle_count(40);
        assert_eq!(Element::from_generic(&c), Element::CycleCount { cycle_count: Some(40) });
        assert_eq!(
            Element::from_generic(&c).to_string(),
            "OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=40]; )"
        );
        let d = Decoded {
            index: 0x40,
            trace_id: 0x1a,
            element: Element::from_generic(&c),
        };
        assert_eq!(
            d.to_string(),
            "Idx:64; ID:1a; OCSD_GEN_TRC_ELEM_CYCLE_COUNT( [CC=40]; )"
        );
        assert_eq!(d.element.kind_name(), "cycle_count");
        // Small and copyable: an element is a value of at most a cache
        // line, well under the flat generic record.
        assert!(
            std::mem::size_of::<Element>() <= 64,
            "{}",
            std::mem::size_of::<Element>()
        );
        assert!(std::mem::size_of::<Element>() < std::mem::size_of::<TraceElement>());
    }
}
