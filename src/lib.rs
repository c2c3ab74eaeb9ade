//! # coresight-decode
//!
//! Decodes Arm CoreSight trace (ETMv4, ETE, PTM, ETMv3, STM, ITM): splits
//! formatted frames by trace ID, parses each protocol's packets, follows
//! the program through its memory image, and gives trace elements:
//! instruction ranges, exceptions, contexts, timestamps, software
//! messages. Its listing is OpenCSD's, line for line.
//!
//! ## Four ways in
//!
//! **Pull**: open an Arm (DS-5) snapshot and iterate over its elements
//! ([`Trace`], [`Decoder`]; `examples/pull.rs`).
//!
//! ```
//! use coresight_decode::{Element, Trace};
//!
//! let mut trace = Trace::open("snapshots/etmv4-a64")?;
//! let mut instructions = 0;
//! for item in trace.elements() {
//!     if let Element::InstrRange { num_instr, .. } = item?.element {
//!         instructions += u64::from(num_instr);
//!     }
//! }
//! assert_eq!(instructions, 240);
//! # Ok::<(), coresight_decode::Error>(())
//! ```
//!
//! **Push**: build the decode tree and give it a sink ([`ElementSink`]);
//! [`DecodeTree::push_all`] feeds a whole buffer, or write the data-path
//! loop yourself to act on each WAIT (`examples/push_sink.rs`).
//!
//! ```
//! use coresight_decode::datapath::{DatapathResp, TrcIndex};
//! use coresight_decode::shared::shared;
//! use coresight_decode::{DecodeMode, Element, ElementSink, Snapshot};
//!
//! struct Ranges(coresight_decode::shared::Shared<u64>);
//! impl ElementSink for Ranges {
//!     fn element(&mut self, _: TrcIndex, _: u8, e: &Element) -> DatapathResp {
//!         if matches!(e, Element::InstrRange { .. }) {
//!             *self.0.borrow_mut() += 1;
//!         }
//!         DatapathResp::Cont
//!     }
//! }
//!
//! let ss = Snapshot::load("snapshots/etmv4-a64")?;
//! let mut tree = ss.build_tree("ETB_0", DecodeMode::FullDecode, |_| {})?;
//! let ranges = shared(0);
//! tree.set_element_sink(Ranges(ranges.clone()));
//! tree.push_all(&std::fs::read("snapshots/etmv4-a64/trace.bin").unwrap())?;
//! assert_eq!(*ranges.borrow(), 72);
//! # Ok::<(), coresight_decode::Error>(())
//! ```
//!
//! **Raw bytes with a configuration**, no snapshot: [`DecoderBuilder`]
//! takes each source's protocol and registers ([`decoder::SourceConfig`])
//! and the memory images (`examples/raw_buffer.rs`).
//!
//! **Your own decoder**: implement [`decoder::DecoderFactory`], register it
//! in a [`decoder::DecoderRegistry`] beside the built-in protocols, and
//! build trees with it; [`builder::TreeBuilder::decoder_for_id`] puts it in
//! place of a snapshot source's built-in decoder, with that source's core
//! memory (`examples/custom_decoder.rs`).
//!
//! ## The pieces
//!
//! The library is a decode tree ([`tree::DecodeTree`]) of components joined
//! through the traits in [`interfaces`], named after OpenCSD's, with its
//! flow control ([`datapath`]: DATA, WAIT, FLUSH, EOT). Elements come as
//! the typed [`Element`]; the flat [`TraceElement`] is OpenCSD's form, for
//! its listing and C API. Every call above the components returns the one
//! [`Error`], whose variants carry the failing layer's detail and
//! [`Error::err_code`] OpenCSD's code. [`index`] makes and reads indexes
//! for random access; [`parallel`] decodes trace IDs on several threads.
//! The [`readme`] has the tools and the rest.

#![deny(missing_docs)]
#![warn(unreachable_pub)]

// The modules in their layers, bottom first: a module imports only from
// its own layer and the layers below (ARCHITECTURE.md; tests/layers.rs
// checks it).

// Foundation.
pub mod arch;
pub mod datapath;
pub(crate) mod errcode;
mod fileio;
pub mod logger;
pub mod shared;
pub(crate) mod text;

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
pub(crate) mod factory;
#[doc(hidden)] // for the project's lister only; not part of the API
pub mod format_pool;
pub(crate) mod hooks;
pub(crate) mod pktproc;
pub mod printers;

// Protocols.
pub mod ete;
pub mod etmv3;
pub mod etmv4;
pub mod itm;
pub(crate) mod protocols;
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
pub use fileio::{CaptureReader, dstream};
pub use interfaces::{ElementSink, InstrDecode, PktDataIn, PktRawDataMon, TargetMemAccess, TrcDataIn, TrcGenElemIn};
pub use pull::{Decoder, DecoderBuilder, Trace, TraceData, decode_buffer};
pub use snapshot::Snapshot;
pub use tree::DecodeTree;

/// The project's README: the command-line tools, file formats, bindings,
/// and how the pieces fit (its examples run as doctests).
#[doc = include_str!("../README.md")]
pub mod readme {}
