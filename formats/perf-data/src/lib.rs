#![doc = include_str!("../README.md")]

//! Reads (and writes) `perf.data` files holding CoreSight trace, as recorded by Linux
//! `perf record -e cs_etm//` or Android `simpleperf record -e cs-etm`.
//!
//! [`Recording::parse`] reads a whole file in one pass and gives the CoreSight configuration,
//! the AUX trace buffers (borrowed from the file, never copied), memory maps, thread events
//! and build ids. [`PerfFile`] gives lower-level access: header, attributes, feature sections,
//! and a streaming iterator over typed [`Record`]s. [`Writer`] makes files for tests and for the
//! trace generator. See the README for what comes from `linux-perf-data` and what is this crate's.

pub mod autofdo;
pub mod binaries;
pub mod branch_list;
mod bytes;
pub mod cs_etm;
pub mod decode;
pub mod elf;
mod error;
pub mod features;
mod file;
mod header;
pub mod inject;
pub mod memory;
pub mod record;
mod recording;
pub mod script;
mod script_options;
pub mod srcline;
pub mod stream;
mod writer;

pub use bytes::Endian;
pub use cs_etm::{CpuConfig, CsEtmInfo, Etmv3Config, Etmv4Config, TraceUnit};
pub use error::{Error, Result, Warning};
pub use features::{AuxtraceIndexEntry, BuildIdEntry, EventDesc, SimpleperfFile};
pub use file::{FeatureSection, MappedFile, PerfFile};
pub use header::{Attr, FileHeader, Section};
pub use record::{Aux, AuxFlags, Auxtrace, BuildId, Record, RecordEntry, Records, SampleId};
pub use recording::{AuxBuffer, AuxFormat, MapEvent, Recording, ThreadEvent, ThreadEventKind};
pub use writer::{SampleFields, Writer, WriterOptions};
