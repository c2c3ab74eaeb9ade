//! # coresight-decode
//!
//! Decodes Arm CoreSight trace: splits formatted frames by trace ID, parses
//! each protocol's packets, follows the program through its memory image,
//! and produces generic trace elements.
//!
//! The library is a decode tree ([`tree::DecodeTree`]) of components joined
//! through the traits in [`interfaces`], with OpenCSD's flow control
//! ([`datapath`]). A tree is built from an Arm snapshot directory
//! ([`snapshot::Snapshot`]) or by hand; protocols are created through a
//! [`decoder::DecoderRegistry`], to which users can add their own.

#![deny(missing_docs)]

// The modules in their layers, bottom first: a module imports only from
// its own layer and the layers below (ARCHITECTURE.md; tests/layers.rs
// checks it).

// Foundation.
pub mod arch;
pub mod datapath;
pub mod errcode;
mod fileio;
pub mod logger;
pub mod shared;
pub mod text;

// Memory images, instruction classification, the instruction walk.
#[cfg(feature = "disasm")]
pub mod disasm;
pub mod instr;
pub mod memory;
mod walk;

// Trace elements.
pub mod element;

// The interfaces between components.
pub mod interfaces;

// Components: deformatter, packet-processor base, printers, decoder
// pipeline and registry, protocol factories, observer hooks.
pub mod decoder;
pub mod deformatter;
pub mod factory;
pub mod format_pool;
pub mod hooks;
pub(crate) mod pktproc;
pub mod printers;

// Protocols.
pub mod ete;
pub mod etmv3;
pub mod etmv4;
pub mod itm;
pub mod protocols;
pub mod ptm;
pub mod stm;
#[cfg(test)]
pub(crate) mod test_rig;

// The decode tree.
pub mod tree;

// Snapshot loading.
pub mod snapshot;

// The aggregate error.
pub mod error;

// Trees built from snapshots.
pub mod builder;

// Pull API, parallel decode, indexes.
pub mod index;
pub mod parallel;
pub mod pull;

pub use datapath::{DatapathOp, DatapathResp, TrcIndex};
pub use decoder::DecodeMode;
pub use element::{Decoded, Element};
pub use element::{ElemType, TraceElement};
pub use error::{ErrCode, Error, Result, TraceError};
pub use fileio::dstream;
pub use interfaces::{InstrDecode, PktDataIn, PktRawDataMon, TargetMemAccess, TrcDataIn, TrcGenElemIn};
pub use pull::{Decoder, DecoderBuilder, Trace, decode_buffer};
pub use snapshot::Snapshot;
pub use tree::DecodeTree;

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
