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

pub mod arch;
pub mod datapath;
pub mod decoder;
pub mod deformatter;
#[cfg(feature = "disasm")]
pub mod disasm;

pub mod element;
pub mod ete;
pub mod etmv3;
pub mod etmv4;

pub mod itm;
pub mod error;
pub mod instr;
pub mod index;
pub mod interfaces;
pub mod logger;
pub mod memory;
pub mod parallel;
pub mod printers;
pub mod protocols;
pub(crate) mod pktproc;
pub mod ptm;
pub mod pull;
pub mod shared;
pub mod snapshot;
pub mod stm;

#[cfg(test)]
pub(crate) mod test_rig;
pub mod tree;
mod walk;

pub use datapath::{DatapathOp, DatapathResp, TrcIndex};
pub use element::{ElemType, TraceElement};
pub use element::{Decoded, Element};
pub use pull::{decode_buffer, DecodeError, Decoder, DecoderBuilder, Trace};
pub use decoder::DecodeMode;
pub use snapshot::Snapshot;
pub use tree::DecodeTree;
pub use error::{ErrCode, Error, Result, TraceError};
pub use interfaces::{InstrDecode, PktDataIn, PktRawDataMon, TargetMemAccess, TrcDataIn, TrcGenElemIn};

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
