//! Writes snapshot directories: `snapshot.ini`, one `.ini` per device,
//! `trace.ini`, the trace buffers and the memory dumps. What
//! [`coresight_decode::snapshot::Snapshot::load`] reads, this writes.

use std::fmt::Write as _;
use std::path::Path;

use coresight_decode::error::{Error, Result};

/// A memory dump of a core.
#[derive(Clone, Debug)]
pub struct DumpSpec {
    /// File name of the dump, relative to the snapshot directory.
    pub file: String,
    /// Address of the dump's first byte in the core's memory.
    pub address: u64,
    /// The bytes.
    pub data: Vec<u8>,
    /// Memory space name (`EL1N`, `S`...), empty for any.
    pub space: String,
}

/// A device to write.
#[derive(Clone, Debug)]
pub struct DeviceSpec {
    /// Device name (`cpu_0`, `ETM_0`...), as other entries refer to it.
    pub name: String,
    /// Device class: `core` or `trace_source`.
    pub class: String,
    /// Device type: the core's name (`Cortex-A53`) or the source's protocol type (`ETM4`,
    /// `PTM1`, `STM`...).
    pub device_type: String,
    /// Registers as (name with any decoration, value).
    pub regs: Vec<(String, u64)>,
    /// Memory dumps (cores only).
    pub dumps: Vec<DumpSpec>,
}

impl DeviceSpec {
    /// A core named `name` of type `core_type`, with no registers or dumps.
    pub fn core(name: &str, core_type: &str) -> Self {
        DeviceSpec {
            name: name.into(),
            class: "core".into(),
            device_type: core_type.into(),
            regs: Vec::new(),
            dumps: Vec::new(),
        }
    }
    /// A trace source named `name` of type `source_type` with registers `regs`.
    pub fn trace_source(name: &str, source_type: &str, regs: Vec<(String, u64)>) -> Self {
        DeviceSpec {
            name: name.into(),
            class: "trace_source".into(),
            device_type: source_type.into(),
            regs,
            dumps: Vec::new(),
        }
    }
}

/// A trace buffer to write.
#[derive(Clone, Debug)]
pub struct BufferSpec {
    /// Buffer name, as `trace.ini` refers to it.
    pub name: String,
    /// File name of the buffer, relative to the snapshot directory.
    pub file: String,
    /// `coresight`, `dstream_coresight` or `source_data`.
    pub format: String,
    /// The trace bytes.
    pub data: Vec<u8>,
}

/// A whole snapshot.
#[derive(Clone, Debug, Default)]
pub struct SnapshotSpec {
    /// Free text written to `snapshot.ini`.
    pub description: String,
    /// Devices (cores and trace sources).
    pub devices: Vec<DeviceSpec>,
    /// Trace buffers.
    pub buffers: Vec<BufferSpec>,
    /// (source, buffer)
    pub source_buffers: Vec<(String, String)>,
    /// (core, source)
    pub core_trace_sources: Vec<(String, String)>,
}

fn write(dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, data).map_err(|e| Error::Io { path, source: e })
}

impl SnapshotSpec {
    /// Writes the snapshot into `dir` (created if needed).
    pub fn write_to(&self, dir: &Path) -> Result<()> {
        self.write_files(dir, true)
    }

    /// [`SnapshotSpec::write_to`] but for the buffers' files, written
    /// apart (as they are made, for a long trace).
    pub fn write_all_but_buffers(&self, dir: &Path) -> Result<()> {
        self.write_files(dir, false)
    }

    fn write_files(&self, dir: &Path, buffers: bool) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        let mut ss = String::from("[snapshot]\nversion=1.0\n");
        if !self.description.is_empty() {
            let _ = writeln!(ss, "description={}", self.description);
        }
        ss.push_str("\n[device_list]\n");
        for (i, d) in self.devices.iter().enumerate() {
            let _ = writeln!(ss, "device{i}={}.ini", d.name);
        }
        ss.push_str("\n[trace]\nmetadata=trace.ini\n");
        write(dir, "snapshot.ini", ss.as_bytes())?;

        for d in &self.devices {
            let mut s = format!("[device]\nname={}\nclass={}\ntype={}\n", d.name, d.class, d.device_type);
            if !d.regs.is_empty() {
                s.push_str("\n[regs]\n");
                for (n, v) in &d.regs {
                    let _ = writeln!(s, "{n}=0x{v:08X}");
                }
            }
            for (i, m) in d.dumps.iter().enumerate() {
                let _ = write!(
                    s,
                    "\n[dump{}]\nfile={}\naddress=0x{:X}\nlength=0x{:X}\n",
                    i + 1,
                    m.file,
                    m.address,
                    m.data.len()
                );
                if !m.space.is_empty() {
                    let _ = writeln!(s, "space={}", m.space);
                }
                write(dir, &m.file, &m.data)?;
            }
            write(dir, &format!("{}.ini", d.name), s.as_bytes())?;
        }

        let mut t = String::from("[trace_buffers]\nbuffers=");
        t.push_str(
            &(0..self.buffers.len())
                .map(|i| format!("buffer{i}"))
                .collect::<Vec<_>>()
                .join(","),
        );
        t.push('\n');
        for (i, b) in self.buffers.iter().enumerate() {
            let _ = write!(
                t,
                "\n[buffer{i}]\nname={}\nfile={}\nformat={}\n",
                b.name, b.file, b.format
            );
            if buffers {
                write(dir, &b.file, &b.data)?;
            }
        }
        t.push_str("\n[source_buffers]\n");
        for (s, b) in &self.source_buffers {
            let _ = writeln!(t, "{s}={b}");
        }
        t.push_str("\n[core_trace_sources]\n");
        for (c, s) in &self.core_trace_sources {
            let _ = writeln!(t, "{c}={s}");
        }
        write(dir, "trace.ini", t.as_bytes())
    }
}
