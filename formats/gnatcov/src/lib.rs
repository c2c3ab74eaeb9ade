//! Code coverage from hardware trace, in the terms of AdaCore's
//! GNATcoverage.
//!
//! - [`format`](mod@format): reader and writer of gnatcov's binary ("QEMU") trace
//!   files: Info, Flat and History sections, 32- and 64-bit PCs, both byte
//!   orders, every info entry kind, special entries.
//! - [`dump`]: a trace file as `gnatcov dump-trace` prints it.
//! - [`export`]: a [`TrcGenElemIn`](coresight_decode::TrcGenElemIn) sink turning
//!   decoded instruction ranges into flat traces, and the executable's
//!   signature (size, time stamp, CRC32) gnatcov checks.
//! - [`coverage`]: object coverage (instructions and conditional branches)
//!   of routines, from traces, with gnatcov's annotated disassembly and
//!   summary.

#![deny(missing_docs)]

pub mod coverage;
pub mod dump;
pub mod export;
pub mod format;
#[cfg(test)]
mod tests;

pub use format::{Endian, Entry, Header, InfoEntry, InfoKind, Op, PcSize, Record, TraceFile, TraceKind};
