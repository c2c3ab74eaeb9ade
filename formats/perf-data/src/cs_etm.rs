//! CoreSight's AUXTRACE_INFO (`PERF_AUXTRACE_CS_ETM`): the trace configuration of every CPU.
//!
//! The private words start with a header of three words: the format version, the cs_etm PMU
//! type and CPU count (`type << 32 | cpus`), and snapshot mode. One block per CPU follows, each
//! starting with a magic number that says which trace unit it describes, then the CPU number.
//! From version 1 on, a third word gives the number of parameters that follow, so that readers
//! can skip blocks longer than they know; version 0 blocks have a fixed length per magic.

use crate::error::{Error, Result};

/// Block magic of an ETMv3 or PTM trace unit.
pub const ETMV3_MAGIC: u64 = 0x3030_3030_3030_3030;
/// Block magic of an ETMv4 trace unit.
pub const ETMV4_MAGIC: u64 = 0x4040_4040_4040_4040;
/// Block magic of an ETE trace unit.
pub const ETE_MAGIC: u64 = 0x5050_5050_5050_5050;

/// Number of header words.
const HEADER_WORDS: usize = 3;
/// Version-0 parameter counts (after magic and CPU): ETMv3 has 4, ETMv4 7.
const V0_ETMV3_PARAMS: usize = 4;
const V0_ETMV4_PARAMS: usize = 7;
/// No sane recording has more CPUs or parameters than this.
const MAX_PARAMS: u64 = 1024;

/// ETMv3 / PTM registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Etmv3Config {
    /// ETMCR: main control.
    pub etmcr: u64,
    /// ETMTRACEIDR: trace ID.
    pub etmtraceidr: u64,
    /// ETMCCER: configuration code extension.
    pub etmccer: u64,
    /// ETMIDR: ID register.
    pub etmidr: u64,
}

/// ETMv4 registers (and the ETE's, which add TRCDEVARCH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Etmv4Config {
    /// TRCCONFIGR: trace configuration (context ID, timestamps, cycle counts, ...).
    pub trcconfigr: u64,
    /// TRCTRACEIDR: trace ID.
    pub trctraceidr: u64,
    /// TRCIDR0.
    pub trcidr0: u64,
    /// TRCIDR1.
    pub trcidr1: u64,
    /// TRCIDR2.
    pub trcidr2: u64,
    /// TRCIDR8.
    pub trcidr8: u64,
    /// TRCAUTHSTATUS.
    pub trcauthstatus: u64,
    /// TRCDEVARCH (ETE only).
    pub trcdevarch: Option<u64>,
    /// Timestamp source (perf's v1 extra parameter; simpleperf does not write it).
    pub ts_source: Option<u64>,
}

/// The trace unit of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceUnit {
    /// ETMv3 or PTM.
    Etmv3(Etmv3Config),
    /// ETMv4.
    Etmv4(Etmv4Config),
    /// ETE (its `trcdevarch` is set).
    Ete(Etmv4Config),
}

/// The configuration of one CPU's trace unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuConfig {
    /// The CPU.
    pub cpu: u32,
    /// The block's magic.
    pub magic: u64,
    /// The typed registers.
    pub unit: TraceUnit,
    /// The parameter words as written (after magic, CPU and, from version 1, the count).
    pub params: Vec<u64>,
}

impl CpuConfig {
    /// The CoreSight trace ID (7 bits) the unit's packets carry in formatted trace.
    pub fn trace_id(&self) -> u8 {
        let r = match &self.unit {
            TraceUnit::Etmv3(c) => c.etmtraceidr,
            TraceUnit::Etmv4(c) | TraceUnit::Ete(c) => c.trctraceidr,
        };
        (r & 0x7f) as u8
    }
}

/// The CoreSight AUXTRACE_INFO, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsEtmInfo {
    /// Format version (0, 1, or 2 where trace IDs may come from AUX_OUTPUT_HW_ID records).
    pub version: u64,
    /// The cs_etm PMU type (matches the attribute's type).
    pub pmu_type: u32,
    /// Number of CPU blocks.
    pub num_cpus: u32,
    /// Snapshot mode.
    pub snapshot: bool,
    /// One entry per CPU block, in file order.
    pub cpus: Vec<CpuConfig>,
    /// All private words, as written.
    pub raw: Vec<u64>,
}

impl CsEtmInfo {
    /// Decodes the private words of a CoreSight AUXTRACE_INFO; `offset` is the file offset of
    /// the first word (for error messages).
    pub fn parse(words: &[u64], offset: u64) -> Result<Self> {
        let at = |i: usize| offset + 8 * i as u64;
        if words.len() < HEADER_WORDS {
            return Err(Error::Truncated {
                offset,
                what: "cs_etm AUXTRACE_INFO header",
                needed: 8 * HEADER_WORDS as u64,
                available: 8 * words.len() as u64,
            });
        }
        let version = words[0];
        if version > 2 {
            return Err(Error::malformed(
                offset,
                "cs_etm header version",
                format!("{version}, expected 0, 1 or 2"),
            ));
        }
        let pmu_type = (words[1] >> 32) as u32;
        let num_cpus = words[1] as u32;
        let snapshot = words[2] != 0;
        // Each block has at least three words, so the count cannot claim more than that.
        let room = (words.len() - HEADER_WORDS) / 3;
        if num_cpus as usize > room {
            return Err(Error::malformed(
                at(1),
                "cs_etm CPU count",
                format!("{num_cpus}, but the record has room for at most {room} CPU blocks"),
            ));
        }
        let mut cpus = Vec::with_capacity(num_cpus as usize);
        let mut i = HEADER_WORDS;
        for _ in 0..num_cpus {
            let need = |i: usize, n: usize, what| -> Result<()> {
                if i + n > words.len() {
                    Err(Error::Truncated {
                        offset: at(i),
                        what,
                        needed: 8 * n as u64,
                        available: 8 * (words.len() - i) as u64,
                    })
                } else {
                    Ok(())
                }
            };
            need(i, 2, "cs_etm CPU block")?;
            let magic = words[i];
            let cpu = words[i + 1];
            if cpu > u64::from(u32::MAX) {
                return Err(Error::malformed(at(i + 1), "cs_etm CPU number", format!("{cpu:#x}")));
            }
            let (n, first) = if version == 0 {
                let n = match magic {
                    ETMV3_MAGIC => V0_ETMV3_PARAMS,
                    ETMV4_MAGIC => V0_ETMV4_PARAMS,
                    _ => return Err(bad_magic(at(i), magic)),
                };
                (n, i + 2)
            } else {
                need(i, 3, "cs_etm CPU block")?;
                let n = words[i + 2];
                if n > MAX_PARAMS {
                    return Err(Error::malformed(
                        at(i + 2),
                        "cs_etm parameter count",
                        format!("{n}, expected at most {MAX_PARAMS}"),
                    ));
                }
                (n as usize, i + 3)
            };
            need(first, n, "cs_etm CPU parameters")?;
            let params = words[first..first + n].to_vec();
            let p = |k: usize| params.get(k).copied();
            let min = |k: usize, what| -> Result<()> {
                if n < k {
                    Err(Error::malformed(
                        at(i + 2),
                        what,
                        format!("{n} parameters, expected at least {k}"),
                    ))
                } else {
                    Ok(())
                }
            };
            let v4 = |devarch: bool| Etmv4Config {
                trcconfigr: params[0],
                trctraceidr: params[1],
                trcidr0: params[2],
                trcidr1: params[3],
                trcidr2: params[4],
                trcidr8: params[5],
                trcauthstatus: params[6],
                trcdevarch: if devarch { p(7) } else { None },
                ts_source: if devarch { p(8) } else { p(7) },
            };
            let unit = match magic {
                ETMV3_MAGIC => {
                    min(4, "ETMv3 parameters")?;
                    TraceUnit::Etmv3(Etmv3Config {
                        etmcr: params[0],
                        etmtraceidr: params[1],
                        etmccer: params[2],
                        etmidr: params[3],
                    })
                }
                ETMV4_MAGIC => {
                    min(7, "ETMv4 parameters")?;
                    TraceUnit::Etmv4(v4(false))
                }
                ETE_MAGIC => {
                    min(8, "ETE parameters")?;
                    TraceUnit::Ete(v4(true))
                }
                _ => return Err(bad_magic(at(i), magic)),
            };
            cpus.push(CpuConfig {
                cpu: cpu as u32,
                magic,
                unit,
                params,
            });
            i = first + n;
        }
        Ok(CsEtmInfo {
            version,
            pmu_type,
            num_cpus,
            snapshot,
            cpus,
            raw: words.to_vec(),
        })
    }

    /// The configuration of `cpu`.
    pub fn cpu(&self, cpu: u32) -> Option<&CpuConfig> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }

    /// The private words for this configuration, in the version-1 layout (what the writer uses).
    pub fn to_words(&self) -> Vec<u64> {
        let mut w = vec![
            1,
            u64::from(self.pmu_type) << 32 | self.cpus.len() as u64,
            u64::from(self.snapshot),
        ];
        for c in &self.cpus {
            w.extend([c.magic, u64::from(c.cpu), c.params.len() as u64]);
            w.extend(&c.params);
        }
        w
    }
}

impl CpuConfig {
    /// An ETMv4 block in perf's version-1 layout (with a timestamp source word).
    pub fn etmv4(cpu: u32, c: Etmv4Config) -> Self {
        let mut params = vec![
            c.trcconfigr,
            c.trctraceidr,
            c.trcidr0,
            c.trcidr1,
            c.trcidr2,
            c.trcidr8,
            c.trcauthstatus,
        ];
        params.extend(c.ts_source);
        CpuConfig {
            cpu,
            magic: ETMV4_MAGIC,
            unit: TraceUnit::Etmv4(Etmv4Config { trcdevarch: None, ..c }),
            params,
        }
    }

    /// An ETE block in perf's version-1 layout.
    pub fn ete(cpu: u32, c: Etmv4Config) -> Self {
        let devarch = c.trcdevarch.unwrap_or(0);
        let mut params = vec![
            c.trcconfigr,
            c.trctraceidr,
            c.trcidr0,
            c.trcidr1,
            c.trcidr2,
            c.trcidr8,
            c.trcauthstatus,
            devarch,
        ];
        params.extend(c.ts_source);
        CpuConfig {
            cpu,
            magic: ETE_MAGIC,
            unit: TraceUnit::Ete(Etmv4Config {
                trcdevarch: Some(devarch),
                ..c
            }),
            params,
        }
    }
}

fn bad_magic(offset: u64, magic: u64) -> Error {
    Error::malformed(
        offset,
        "cs_etm CPU block magic",
        format!(
            "{magic:#018x}, expected {ETMV3_MAGIC:#x} (ETMv3/PTM), {ETMV4_MAGIC:#x} (ETMv4) or {ETE_MAGIC:#x} (ETE)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_0_fixed_blocks() {
        let words = [
            0,
            7 << 32 | 2,
            0,
            ETMV3_MAGIC,
            0,
            0x1000,
            0x12,
            0x8000_0000,
            0x4100_f250,
            ETMV4_MAGIC,
            1,
            0x40,
            0x14,
            1,
            2,
            3,
            4,
            5,
        ];
        let info = CsEtmInfo::parse(&words, 0x100).unwrap();
        assert_eq!((info.version, info.pmu_type, info.num_cpus), (0, 7, 2));
        assert_eq!(
            info.cpus[0].unit,
            TraceUnit::Etmv3(Etmv3Config {
                etmcr: 0x1000,
                etmtraceidr: 0x12,
                etmccer: 0x8000_0000,
                etmidr: 0x4100_f250
            })
        );
        assert_eq!(info.cpus[1].trace_id(), 0x14);
        assert!(matches!(
            info.cpus[1].unit,
            TraceUnit::Etmv4(Etmv4Config {
                trcauthstatus: 5,
                ts_source: None,
                ..
            })
        ));
        // A bad magic names the offset of the block.
        let mut bad = words;
        bad[9] = 0x1234;
        let e = CsEtmInfo::parse(&bad, 0x100).unwrap_err();
        assert_eq!(e.offset(), 0x100 + 9 * 8);
    }
}
