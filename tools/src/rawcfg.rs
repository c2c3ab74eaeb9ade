//! The configuration of a raw trace buffer decoded without a snapshot
//! (`trc_decode --raw`): the buffer's layout, each source's protocol, core
//! and registers, and memory images, from command-line options and a small
//! `key = value` file.
//!
//! The file:
//!
//! ```text
//! # comments start with '#'
//! unformatted = false          # true: one source, no CoreSight frames
//! memory = 0x400000:code.bin   # a raw binary at an address (repeatable)
//! [source]                     # starts a source (optional for the first)
//! protocol = etmv4             # etmv4, ete, ptm, etmv3, stm, itm (or ETMV4I...)
//! core = Cortex-A57            # the traced core's type (PE trace)
//! id = 0x10                    # trace ID (or its register below)
//! TRCCONFIGR = 0xc1            # any other key is a register
//! TRCIDR0 = 0x20000861
//! ```
//!
//! Relative file names in it are relative to the file's folder.

use std::path::{Path, PathBuf};

use coresight_decode::decoder::{CoreConfig, DecoderFactory, DecoderRegistry, SourceConfig};

use crate::cli::{parse_trace_id, parse_u64};

/// One trace source as described on the command line or in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawSource {
    /// Protocol as given (`etmv4`, `ETMV4I`, `ETM4.0`...).
    pub protocol: String,
    /// Core type (`Cortex-A53`).
    pub core: Option<String>,
    /// Trace ID, when given apart from the registers.
    pub id: Option<u8>,
    /// Registers by name, in the order given.
    pub regs: Vec<(String, u64)>,
    /// Source name (default `source_N`).
    pub name: Option<String>,
}

/// A raw buffer's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawConfig {
    /// One unformatted source rather than CoreSight frames.
    pub unformatted: bool,
    /// Raw binaries: load address and file.
    pub memory: Vec<(u64, PathBuf)>,
    /// The sources.
    pub sources: Vec<RawSource>,
}

/// A memory image `ADDR:FILE` (`--memory`).
pub fn parse_memory(s: &str) -> Result<(u64, PathBuf), String> {
    let (addr, file) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}' is not ADDR:FILE (a load address, a colon and a file)"))?;
    if file.is_empty() {
        return Err(format!("'{s}' names no file after the colon"));
    }
    Ok((parse_u64(addr)?, PathBuf::from(file)))
}

/// A register setting `NAME=VALUE` (`--reg`).
pub fn parse_reg(s: &str) -> Result<(String, u64), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not NAME=VALUE (a register name, '=' and its value)"))?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("'{name}' is not a register name"));
    }
    Ok((name.to_string(), parse_u64(value)?))
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

impl RawConfig {
    /// Reads the `key = value` text of a configuration file; `dir` is the
    /// folder relative file names are taken from. Errors give the line.
    pub fn parse(text: &str, dir: &Path) -> Result<RawConfig, String> {
        let mut cfg = RawConfig::default();
        let mut current: Option<RawSource> = None;
        for (n, raw) in text.lines().enumerate() {
            let line_no = n + 1;
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |msg: String| format!("line {line_no}: {msg}");
            if line.eq_ignore_ascii_case("[source]") {
                cfg.sources.extend(current.replace(RawSource::default()));
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| at(format!("'{line}' is not KEY = VALUE or [source]")))?;
            let (key, value) = (key.trim(), value.trim());
            match key.to_ascii_lowercase().as_str() {
                "unformatted" => {
                    cfg.unformatted = parse_bool(value).ok_or_else(|| at(format!("'{value}' is not true or false")))?;
                }
                "memory" => {
                    let (a, f) = parse_memory(value).map_err(at)?;
                    cfg.memory.push((a, dir.join(f)));
                }
                k => {
                    let src = current.get_or_insert_with(RawSource::default);
                    match k {
                        "protocol" => src.protocol = value.to_string(),
                        "core" => src.core = Some(value.to_string()),
                        "name" => src.name = Some(value.to_string()),
                        "id" => src.id = Some(parse_trace_id(value).map_err(at)?),
                        _ => src.regs.push(parse_reg(&format!("{key}={value}")).map_err(at)?),
                    }
                }
            }
        }
        cfg.sources.extend(current);
        if let Some(i) = cfg.sources.iter().position(|s| s.protocol.is_empty()) {
            return Err(format!("source {} has no protocol (protocol = etmv4, ...)", i + 1));
        }
        Ok(cfg)
    }

    /// Reads a configuration file.
    pub fn load(path: &Path) -> Result<RawConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        RawConfig::parse(&text, dir).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// The register holding a built-in protocol's trace ID, and the ID's shift
/// in it.
fn trace_id_reg(protocol: &str) -> Option<(&'static str, u32)> {
    Some(match protocol {
        "ETMV4I" | "ETE" => ("TRCTRACEIDR", 0),
        "PTM" | "ETMV3" => ("ETMTRACEIDR", 0),
        "STM" => ("STMTCSR", 16),
        "ITM" => ("ITMTCR", 16),
        _ => return None,
    })
}

/// The registered protocol a `--protocol` value names: a short name
/// (`etmv4`, `ete`, `ptm`, `etmv3`, `stm`, `itm`), a registered name
/// (`ETMV4I`) or a snapshot device type (`ETM4.2`), in any case.
pub fn find_protocol(registry: &DecoderRegistry, name: &str) -> Result<std::sync::Arc<dyn DecoderFactory>, String> {
    let upper = name.to_ascii_uppercase();
    let alias = match upper.as_str() {
        "ETMV4" | "ETM4" => "ETMV4I",
        "ETM3" => "ETMV3",
        "PFT" => "PTM",
        other => other,
    };
    registry
        .find(alias)
        .or_else(|| registry.for_device_type(&upper))
        .ok_or_else(|| {
            let known: Vec<String> = registry.names().map(str::to_ascii_lowercase).collect();
            format!("unknown protocol '{name}' (known: {})", known.join(", "))
        })
}

impl RawSource {
    /// The source's configuration for `factory`: optional registers not
    /// given take their defaults, the trace ID comes from `id` (or `--id`,
    /// `default_id`) unless a register gives it, and the core's profile
    /// from its type. Errors name what is missing and how to give it.
    pub fn resolve(
        &self,
        index: usize,
        factory: &dyn DecoderFactory,
        default_id: Option<u8>,
    ) -> Result<SourceConfig, String> {
        let protocol = factory.protocol_name();
        let mut cfg = SourceConfig {
            name: self.name.clone().unwrap_or_else(|| format!("source_{index}")),
            device_type: protocol.to_string(),
            regs: self.regs.clone(),
            core: None,
        };
        if let Some((reg, shift)) = trace_id_reg(protocol)
            && cfg.reg(reg).is_none()
        {
            let id = self.id.or(default_id).ok_or_else(|| {
                format!(
                    "{}: no trace ID: give --id ID (or the register, --reg {reg}=VALUE)",
                    cfg.name
                )
            })?;
            cfg.regs.push((reg.to_string(), u64::from(id) << shift));
        }
        let missing: Vec<&str> = factory
            .registers()
            .iter()
            .filter(|r| r.required && cfg.reg(r.name).is_none())
            .map(|r| r.name)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "{}: protocol {protocol} needs the register{} {} (--reg NAME=VALUE)",
                cfg.name,
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", ")
            ));
        }
        for r in factory.registers() {
            if cfg.reg(r.name).is_none() {
                cfg.regs.push((r.name.to_string(), r.default));
            }
        }
        match (&self.core, factory.is_pe_trace()) {
            (Some(core), true) => {
                let profile = factory
                    .core_profile(core)
                    .ok_or_else(|| format!("{}: unknown core type '{core}' (e.g. Cortex-A53)", cfg.name))?;
                cfg.core = Some(CoreConfig {
                    name: format!("cpu_{index}"),
                    core_type: core.clone(),
                    profile,
                });
            }
            (None, true) => {
                return Err(format!(
                    "{}: protocol {protocol} traces a core: give its type with --core (e.g. Cortex-A53)",
                    cfg.name
                ));
            }
            (Some(_), false) => {
                return Err(format!(
                    "{}: protocol {protocol} traces no core: --core is not for it",
                    cfg.name
                ));
            }
            (None, false) => {}
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_with_sources_and_memory() {
        let text = "# two sources\nunformatted = no\nmemory = 0x400000:code.bin\n\
                    protocol = etmv4\ncore = Cortex-A57\nTRCIDR0 = 0x20000861 # comment\n\
                    [source]\nprotocol = stm\nid = 0x20\n";
        let cfg = RawConfig::parse(text, Path::new("/cfg")).unwrap();
        assert_eq!(cfg.memory, vec![(0x400000, PathBuf::from("/cfg/code.bin"))]);
        assert!(!cfg.unformatted);
        assert_eq!(cfg.sources.len(), 2);
        assert_eq!(cfg.sources[0].protocol, "etmv4");
        assert_eq!(cfg.sources[0].core.as_deref(), Some("Cortex-A57"));
        assert_eq!(cfg.sources[0].regs, vec![("TRCIDR0".to_string(), 0x20000861)]);
        assert_eq!(cfg.sources[1].id, Some(0x20));
    }

    #[test]
    fn file_errors_give_the_line() {
        let e = RawConfig::parse("protocol = etmv4\nTRCIDR0 = zz\n", Path::new(".")).unwrap_err();
        assert_eq!(e, "line 2: 'zz' is not a number (decimal, or hex with 0x)");
        let e = RawConfig::parse("protocol etmv4\n", Path::new(".")).unwrap_err();
        assert_eq!(e, "line 1: 'protocol etmv4' is not KEY = VALUE or [source]");
        let e = RawConfig::parse("core = Cortex-A53\n", Path::new(".")).unwrap_err();
        assert_eq!(e, "source 1 has no protocol (protocol = etmv4, ...)");
    }

    #[test]
    fn resolve_fills_id_defaults_and_core() {
        let reg = DecoderRegistry::builtin();
        let f = find_protocol(&reg, "etmv4").unwrap();
        assert_eq!(f.protocol_name(), "ETMV4I");
        let src = RawSource {
            protocol: "etmv4".into(),
            core: Some("Cortex-A53".into()),
            regs: vec![
                ("TRCCONFIGR".into(), 1),
                ("TRCIDR0".into(), 0x28000ea1),
                ("TRCIDR2".into(), 0x88),
            ],
            ..Default::default()
        };
        let cfg = src.resolve(0, f.as_ref(), Some(0x10)).unwrap();
        assert_eq!(f.trace_id(&cfg), 0x10);
        assert_eq!(cfg.reg("TRCIDR1"), Some(0x4100_F403));
        assert_eq!(cfg.core.as_ref().map(|c| c.core_type.as_str()), Some("Cortex-A53"));
        let e = src.resolve(0, f.as_ref(), None).unwrap_err();
        assert_eq!(
            e,
            "source_0: no trace ID: give --id ID (or the register, --reg TRCTRACEIDR=VALUE)"
        );
        let bare = RawSource {
            protocol: "etmv4".into(),
            id: Some(0x10),
            ..Default::default()
        };
        let e = bare.resolve(1, f.as_ref(), None).unwrap_err();
        assert_eq!(
            e,
            "source_1: protocol ETMV4I needs the registers TRCCONFIGR, TRCIDR0, TRCIDR2 (--reg NAME=VALUE)"
        );
        let stm = find_protocol(&reg, "STM").unwrap();
        let s = RawSource {
            protocol: "stm".into(),
            id: Some(0x20),
            ..Default::default()
        };
        let cfg = s.resolve(0, stm.as_ref(), None).unwrap();
        assert_eq!(cfg.reg("STMTCSR"), Some(0x20 << 16));
        let e = find_protocol(&reg, "xyz").err().unwrap();
        assert_eq!(e, "unknown protocol 'xyz' (known: etmv4i, ete, ptm, etmv3, stm, itm)");
    }

    #[test]
    fn memory_and_reg_arguments() {
        assert_eq!(
            parse_memory("0x80000000:a.bin").unwrap(),
            (0x8000_0000, PathBuf::from("a.bin"))
        );
        assert_eq!(
            parse_memory("a.bin").unwrap_err(),
            "'a.bin' is not ADDR:FILE (a load address, a colon and a file)"
        );
        assert_eq!(parse_reg("TRCIDR0=0x10").unwrap(), ("TRCIDR0".to_string(), 0x10));
        assert_eq!(parse_reg("TRC IDR=1").unwrap_err(), "'TRC IDR' is not a register name");
    }
}
