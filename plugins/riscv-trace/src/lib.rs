//! # riscv-trace
//!
//! A decoder for the Trace Module of the RISC-V debug specification (the
//! draft appendix "Trace Module", `trace.tex` and `trace_registers.tex` of
//! `riscv/riscv-debug-spec`), plugged into a
//! [`coresight_decode`] decode tree from outside: this
//! crate uses only the core's public API and registers itself through its
//! decoder registry.
//!
//! - [`config`]: the `trace` register, buffer bounds, XLEN and C from the
//!   core name;
//! - [`processor`]: trace words to [`packet::RvPacket`]s (nibbles, Value
//!   Sequences and their fill rules, synchronisation points, wrapped
//!   buffers, resync after a bad header);
//! - [`decoder`]: packets to generic elements, walking the program image
//!   with the [`instr`] classifier;
//! - [`encoder`]: an executed instruction stream to a trace buffer, for
//!   tests and generators.
//!
//! ## Use
//!
//! ```
//! use std::sync::Arc;
//! use coresight_decode::decoder::DecoderRegistry;
//!
//! let mut registry = DecoderRegistry::builtin();
//! riscv_trace::register(&mut registry).unwrap();
//! assert!(registry.for_device_type("RISCV_TRACE").is_some());
//! // Then: TreeBuilder::with_registry(&snapshot, Arc::new(registry)), or
//! // DecodeTree::with_registry(..) and create_decoder("RISCV", &cfg).
//! # let _ = Arc::new(registry);
//! ```
//!
//! A snapshot source is a device of type `RISCV_TRACE` with registers
//! `trace`, `tbufstart`, `tbufend` and `tbufwrite` (and optionally
//! `traceid`), traced core named like `RV64GC` or `RV32IMAC`, and a trace
//! buffer of format `source_data` holding the buffer from `tbufstart` to
//! `tbufend`. See `README.md` in this crate for a worked snapshot and for
//! how the crate was built, step by step.
//!
//! ## Choices
//!
//! The draft says it "needs work before it's ready to be implemented".
//! Where it is silent or ambiguous this crate chooses as follows; the
//! encoder and the decoder keep to the same choices.
//!
//! 1. **Sync points.** The buffer must be word aligned and at least 24
//!    words. The eight synchronisation points are at `k * (words / 8)`
//!    words from the start (k = 0..7); the last segment takes any
//!    remainder. No sequence straddles a sync point: Nops pad up to it.
//! 2. **Full values after a sync point.** The first PC, Load Address,
//!    Store Address and Timestamp written at or after a sync point are
//!    full width (PC: XLEN-1 or XLEN-2 bits; addresses: XLEN; timestamp:
//!    64 bits), and after each sync point the next instruction begins with
//!    a **Trace Enabled group**: Trace Enabled (version 0), Change Hart
//!    (once any hart other than 0 has been traced), Privilege Level (if
//!    emitpriv), PC of that instruction (if emitpc). A decoder starting at
//!    a sync point ignores everything up to the first Trace Enabled.
//! 3. **Values.** Load/Store Data are XLEN-bit values (the register loaded
//!    or stored), written in the fewest nibbles whose sign extension gives
//!    them back; Change Hart in the fewest nibbles (zero fill).
//! 4. **`jalr` with emitbranch.** The draft's "if emitstoredata is enabled
//!    emit just the destination PC" is read as emitpc.
//! 5. **Traps** (`ecall`, `ebreak`, `c.ebreak`) and **trap returns**
//!    (`mret`, `sret`, `uret`, `dret`) are indirect jumps: without
//!    emitbranch, a PC pair (the instruction, then the target) with the
//!    Privilege Level packet between the two; with emitbranch, Privilege
//!    Level then the target PC.
//! 6. **Interrupts** emit the PC of the *next instruction that would have
//!    run* (the preferred return address, what `mepc` gets) rather than
//!    the last one executed — the last one is ambiguous when it was itself
//!    a traced branch — then Privilege Level with the interrupt bit, then
//!    the handler's PC. When emitpc is set the Privilege Level packet is
//!    written even without emitpriv: it is what tells an interrupt's PCs
//!    from a jump's. The decoder reports an exception element (number 0:
//!    the trace does not carry the cause) with that return address.
//! 7. **Stopping.** At the end of trace, and before a Change Hart, the PC
//!    of the next instruction the hart would run is written (if emitpc),
//!    then Trace Disabled or Change Hart, so the decoder knows how far the
//!    hart ran after its last traced branch. After a Change Hart group
//!    (Change Hart, Privilege Level, PC) the decoder takes that PC as where
//!    the new hart is.
//! 8. **Timestamps** are written before the instruction they were taken
//!    at. Data-access and timestamp elements come in trace order, ahead of
//!    the instruction range holding their instruction (ranges close at the
//!    next branch).
//! 9. **Privilege changes** are reported as PE context elements when a
//!    hart's mode or interrupt enable changes (or first becomes known);
//!    PRV is carried in the element's exception level (0 U, 1 S, 3 M) and
//!    printed by name.
//! 10. **Trace Disabled** is reported as a `NO_SYNC [discard]`
//!     discontinuity; the next PC starts trace again (Trace Enabled is not
//!     needed after dropped data, as the draft says).
//! 11. **Custom headers** (14, 15) have no known length, so like the
//!     reserved header (13) they are bad packets: the processor skips to
//!     the next sync point and the decoder waits for Trace Enabled.
//! 12. **Wrapped buffer.** `wrapped` (bit 24 of `trace`) set: decoding
//!     starts at the first sync point at or after `tbufwrite`, runs to
//!     `tbufend` and continues from `tbufstart` to `tbufwrite`. Not set:
//!     from `tbufstart` to `tbufwrite`. `tbufwrite` is where the next word
//!     would go (word aligned); the encoder pads the last word with Nops.
//!
//! One limit comes with the format itself: with emitbranch, a loop closed
//! only by direct jumps (`j .`, or straight-line code and `jal`) writes no
//! packets, so how many times it ran before an interrupt, a Change Hart or
//! the end is not in the trace; the decoder stops at the first arrival.

pub mod config;
pub mod decoder;
pub mod encoder;
pub mod instr;
pub mod packet;
pub mod processor;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use coresight_decode::arch::{ArchProfile, ArchVersion, CoreProfile};
use coresight_decode::decoder::{
    DecodeContext, DecoderFactory, DecoderRegistry, Pipeline, RegSpec, SourceConfig, TraceComponent,
};
use coresight_decode::error::{ErrCode, Error, Severity, TraceError};
use coresight_decode::logger::ErrLink;

pub use config::{CoreIsa, RiscvTraceConfig, TraceReg};
pub use decoder::RvDecoder;
pub use encoder::{Encoder, Executed};
pub use packet::RvPacket;
pub use processor::RvProcessor;

/// Protocol name in the registry and in listings.
pub const PROTOCOL_NAME: &str = "RISCV";
/// Snapshot device type (a `.N` version suffix is allowed).
pub const DEVICE_TYPE: &str = "RISCV_TRACE";

/// The decoder factory of RISC-V trace.
pub struct RiscvTraceFactory;

impl DecoderFactory for RiscvTraceFactory {
    fn protocol_name(&self) -> &str {
        PROTOCOL_NAME
    }
    fn device_types(&self) -> &[&str] {
        &[DEVICE_TYPE]
    }
    fn registers(&self) -> &[RegSpec] {
        config::REGISTERS
    }
    fn core_profile(&self, core_type: &str) -> Option<ArchProfile> {
        CoreIsa::from_core_name(core_type).map(|_| ArchProfile::new(ArchVersion::Custom, CoreProfile::Custom))
    }
    fn trace_id(&self, cfg: &SourceConfig) -> u8 {
        (cfg.reg_or("traceid", 0) & 0x7f) as u8
    }
    fn create(&self, cfg: &SourceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, TraceError> {
        let invalid = |e: Error| TraceError::new(Severity::Error, ErrCode::InvalidParamVal).with_message(e.to_string());
        match RiscvTraceConfig::from_source(cfg) {
            Ok(c) => create_component(c, ctx).map_err(invalid),
            Err(e) => {
                // The tree builder logs only that creation failed: say why.
                let err = invalid(e);
                ErrLink::new(&ctx.err_log, "RISCV").log(&err);
                Err(err)
            }
        }
    }
}

/// A source's component for a configuration made by hand (checked with
/// [`RiscvTraceConfig::validate`] first).
pub fn create_component(cfg: RiscvTraceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, Error> {
    cfg.validate()?;
    let decoder = ctx.decoder_for_mode(|| RvDecoder::new(cfg, ctx));
    Ok(Box::new(Pipeline::new(PROTOCOL_NAME, RvProcessor::new(cfg), decoder)))
}

/// The factory, ready to register.
pub fn factory() -> Arc<dyn DecoderFactory> {
    Arc::new(RiscvTraceFactory)
}

/// Registers RISC-V trace in `registry`.
pub fn register(registry: &mut DecoderRegistry) -> Result<(), ErrCode> {
    registry.register(factory())
}

/// The built-in protocols plus RISC-V trace.
pub fn registry() -> Arc<DecoderRegistry> {
    let mut r = DecoderRegistry::builtin();
    // A fresh built-in registry has no protocol of this name.
    let _ = register(&mut r);
    Arc::new(r)
}
