//! Factories for protocols described by data: a [`ProtocolInfo`] says
//! which snapshot device types a protocol decodes, which registers it
//! reads and how its trace ID is found; [`ProtocolFactory`] joins that to
//! the function creating a source's component.

use crate::decoder::{DecodeContext, DecoderFactory, RegSpec, SourceConfig, TraceComponent};
use crate::errcode::TraceError;

/// A protocol's identity: name, device types, registers and trace ID rule.
pub(crate) struct ProtocolInfo {
    /// Protocol name, as the decoder registry and listings know it (`ETMV4I`, `PTM`...).
    pub name: &'static str,
    /// Snapshot device types (the `type` of a device in an Arm snapshot) this protocol
    /// decodes.
    pub device_types: &'static [&'static str],
    /// Registers the protocol reads from a snapshot's device file, with defaults for the
    /// optional ones.
    pub registers: &'static [RegSpec],
    /// Register holding the trace ID, and the shift of the 7-bit ID in it.
    pub trace_id_reg: (&'static str, u32),
    /// The source traces a processing element (its decoder needs a core and memory image),
    /// rather than software or hardware events (STM, ITM).
    pub pe_trace: bool,
}

impl ProtocolInfo {
    /// The source's trace ID, read from `trace_id_reg` (0 when the register is missing).
    pub(crate) fn trace_id(&self, cfg: &SourceConfig) -> u8 {
        let (reg, shift) = self.trace_id_reg;
        ((cfg.reg_or(reg, 0) >> shift) & 0x7f) as u8
    }
}

/// Creates one source's component for a protocol: its identity, the
/// source's registers and the decode context.
pub(crate) type CreateFn =
    fn(&'static ProtocolInfo, &SourceConfig, &DecodeContext) -> Result<Box<dyn TraceComponent>, TraceError>;

/// The factory of a built-in protocol: the protocol's [`ProtocolInfo`]
/// answers for its name, device types, registers and trace ID, and a
/// [`CreateFn`] builds each source's component.
pub(crate) struct ProtocolFactory {
    info: &'static ProtocolInfo,
    create: CreateFn,
}

impl ProtocolFactory {
    /// A factory for the protocol `info`, creating components with `create`.
    pub(crate) fn new(info: &'static ProtocolInfo, create: CreateFn) -> Self {
        ProtocolFactory { info, create }
    }
}

impl DecoderFactory for ProtocolFactory {
    fn protocol_name(&self) -> &str {
        self.info.name
    }
    fn device_types(&self) -> &[&str] {
        self.info.device_types
    }
    fn is_pe_trace(&self) -> bool {
        self.info.pe_trace
    }
    fn registers(&self) -> &[RegSpec] {
        self.info.registers
    }
    fn trace_id(&self, cfg: &SourceConfig) -> u8 {
        self.info.trace_id(cfg)
    }
    fn create(&self, cfg: &SourceConfig, ctx: &DecodeContext) -> Result<Box<dyn TraceComponent>, TraceError> {
        (self.create)(self.info, cfg, ctx)
    }
}
