//! Decode trees from snapshots: one decoder per source of a trace buffer,
//! configured from the snapshot's registers, with its core's memory dumps
//! mapped, as OpenCSD's snapshot-to-tree builder makes them.

use std::sync::Arc;

use crate::decoder::{CoreConfig, DecodeMode, DecoderFactory, DecoderRegistry, SourceConfig};
use crate::deformatter::DeformatterConfig;
use crate::errcode::{ErrCode, Severity, TraceError};
use crate::error::{Error, Result};
use crate::logger::ErrLink;
use crate::memory::MemSpace;
use crate::snapshot::{Device, Snapshot};
use crate::tree::{DecodeTree, SourceFormat};

impl Snapshot {
    /// Builds a decode tree for `buffer_name` (see [`TreeBuilder`]).
    pub fn build_tree(
        &self,
        buffer_name: &str,
        mode: DecodeMode,
        tree_setup: impl FnOnce(&mut DecodeTree),
    ) -> Result<DecodeTree> {
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
    /// Protocols chosen for trace IDs instead of the one the device
    /// type names (see [`TreeBuilder::decoder_for_id`]).
    by_id: Vec<(u8, String)>,
}

impl<'a> TreeBuilder<'a> {
    /// A builder using the built-in protocols.
    pub fn new(ss: &'a Snapshot) -> Self {
        TreeBuilder {
            ss,
            registry: Arc::new(DecoderRegistry::builtin()),
            by_id: Vec::new(),
        }
    }

    /// A builder using the protocols in `registry` (with user decoders).
    pub fn with_registry(ss: &'a Snapshot, registry: Arc<DecoderRegistry>) -> Self {
        TreeBuilder {
            ss,
            registry,
            by_id: Vec::new(),
        }
    }

    /// Decodes the source whose registers give trace ID `trace_id` with the
    /// registered protocol `protocol` (a custom decoder in the registry)
    /// instead of the one its device type names. The source is otherwise
    /// made as a built-in's: its registers (those `protocol` asks for,
    /// with its defaults), its core's architecture, and its core's memory
    /// dumps mapped. Building fails with [`ErrCode::DcdregNameUnknown`]
    /// when no protocol of that name is registered.
    pub fn decoder_for_id(mut self, trace_id: u8, protocol: impl Into<String>) -> Self {
        self.by_id.retain(|(id, _)| *id != trace_id);
        self.by_id.push((trace_id, protocol.into()));
        self
    }

    /// Fails with [`Error::NoDecoder`] when no decoder could be created
    /// (the reasons went to the tree's error logger). `tree_setup` runs on the new tree before decoders are created (to
    /// set the registry's options, error output, ...).
    pub fn build(
        &self,
        buffer_name: &str,
        mode: DecodeMode,
        tree_setup: impl FnOnce(&mut DecodeTree),
    ) -> Result<DecodeTree> {
        let buf = self.ss.buffer(buffer_name).ok_or_else(|| Error::NoSuchBuffer {
            name: buffer_name.to_string(),
            available: self.ss.buffer_names().join(", "),
        })?;
        let format = match buf.format.as_str() {
            "source_data" => SourceFormat::Single,
            "dstream_coresight" => SourceFormat::Formatted(DeformatterConfig::fsync_stream()),
            _ => SourceFormat::Formatted(DeformatterConfig::mem_aligned()),
        };
        for (id, name) in &self.by_id {
            if self.registry.find(name).is_none() {
                return Err(Error::code(
                    ErrCode::DcdregNameUnknown,
                    format!("trace ID 0x{id:02x}: no decoder registered as '{name}'"),
                ));
            }
        }
        let mut tree = DecodeTree::with_registry(format, mode, self.registry.clone());
        // A frame's empty block for a trace ID is dropped, as in any tree:
        // OpenCSD's fatal stop on it is an artefact of its packet
        // processors, which only its lister's users (and the C API) want
        // reproduced; `tree_setup` turns it on for them.
        tree_setup(&mut tree);
        let log = ErrLink::new(tree.error_logger(), "ss2_dcdtree");
        let log_err = |code: ErrCode, msg: String| log.log(&TraceError::new(Severity::Error, code).with_message(msg));

        let mut created = 0;
        // Why a decoder refused its source, one line a source, for the error.
        let mut refused = String::new();
        for (src, core) in self.ss.sources_of(buffer_name) {
            match self.ss.device(src) {
                None => log_err(
                    ErrCode::TestSsToDecoder,
                    format!("Failed to find device data for source {src}.\n"),
                ),
                Some(dev) => match core {
                    Some(core_name) => match self.ss.device(core_name) {
                        None => log_err(
                            ErrCode::TestSsToDecoder,
                            format!("Failed to get device data for source {src}.\n"),
                        ),
                        Some(core_dev) => {
                            if self.create(&mut tree, &log, dev, Some(core_dev), &mut refused) {
                                created += 1;
                                if mode == DecodeMode::FullDecode {
                                    self.map_dumps(&mut tree, &log, core_dev);
                                }
                            } else {
                                log_err(
                                    ErrCode::TestSsToDecoder,
                                    format!("Failed to create decoder for source {src}.\n"),
                                );
                            }
                        }
                    },
                    None => {
                        if self.create(&mut tree, &log, dev, None, &mut refused) {
                            created += 1;
                        } else {
                            log_err(
                                ErrCode::TestSsToDecoder,
                                format!("Failed to create decoder for none core source {src}.\n"),
                            );
                        }
                    }
                },
            }
            if format == SourceFormat::Single {
                break;
            }
        }
        if created == 0 {
            return Err(Error::NoDecoder {
                buffer: buffer_name.to_string(),
                log: refused,
            });
        }
        Ok(tree)
    }

    fn create(
        &self,
        tree: &mut DecodeTree,
        log: &ErrLink,
        dev: &Device,
        core: Option<&Device>,
        refused: &mut String,
    ) -> bool {
        let Some(mut factory) = tree.registry().for_device_type(&dev.device_type) else {
            return false;
        };
        // A protocol chosen for this source's trace ID replaces the one its
        // device type names (the ID read with the device type's registers).
        if !self.by_id.is_empty()
            && let Some(cfg) = self.resolve_regs(
                &ErrLink::new(&crate::shared::shared(Default::default()), ""),
                dev,
                factory.as_ref(),
            )
            && let Some((_, name)) = self.by_id.iter().find(|(id, _)| *id == factory.trace_id(&cfg))
            && let Some(f) = tree.registry().find(name)
        {
            factory = f;
        }
        if factory.is_pe_trace() != core.is_some() {
            return false;
        }
        let Some(mut cfg) = self.resolve_regs(log, dev, factory.as_ref()) else {
            return false;
        };
        if let Some(core) = core {
            match factory.core_profile(&core.device_type) {
                Some(profile) => {
                    cfg.core = Some(CoreConfig {
                        name: core.name.clone(),
                        core_type: core.device_type.clone(),
                        profile,
                    });
                }
                None => {
                    log.log(
                        &TraceError::new(Severity::Error, ErrCode::TestSsToDecoder).with_message(format!(
                            "Unrecognized Core name {}. Cannot evaluate profile or architecture.",
                            core.device_type
                        )),
                    );
                    return false;
                }
            }
        }
        match tree.create_decoder(factory.protocol_name(), &cfg) {
            Ok(_) => true,
            Err(e) => {
                if e.code == ErrCode::HwCfgUnsupp {
                    refused.push_str(&format!("{}: {}\n", dev.name, e.message));
                }
                log.log(&TraceError::new(Severity::Error, e.code).with_message(format!(
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
                log.message(
                    Severity::Warn,
                    &format!("Warning: Default set for register. Missing {}\n", spec.name),
                );
                cfg.regs.push((spec.name.to_string(), spec.default));
            }
        }
        ok.then_some(cfg)
    }

    fn map_dumps(&self, tree: &mut DecodeTree, log: &ErrLink, core: &Device) {
        for d in &core.dumps {
            let path = self.ss.path_of(&d.file);
            let space = MemSpace::from_snapshot_name(&d.space).unwrap_or(MemSpace::ANY);
            if let Err(e) = tree.add_file_region(&path, d.address, d.offset, d.length, space) {
                // The listing shows OpenCSD's message; library users have
                // the reason in the snapshot's warnings.
                log::debug!("{e}");
                log.log(
                    &TraceError::new(Severity::Error, e.code())
                        .with_message(format!("Failed to create memory accessor for file {}.", path.display())),
                );
            }
        }
    }
}
