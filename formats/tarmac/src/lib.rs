//! Tarmac instruction traces: read, analyse, write and compare.
//!
//! Arm Fast Models, gem5 and RTL simulations write Tarmac text traces; the
//! Trace Matcher tool compares traces in a Tarmac-like form. This module
//! reads every record kind of the format into typed [`Record`]s
//! ([`Reader`]), finds calls and returns with the heuristic of Arm's
//! Tarmac Trace Utilities ([`calls`]) for profiles, call trees and flame
//! graphs, lists every execution of a function ([`callinfo`]), writes a
//! trace as a Value Change Dump for waveform viewers ([`vcd`]), compares
//! instruction streams ([`compare`]), and gives the instructions as a
//! decoder's trace elements ([`ranges`]), for coverage. A persistent
//! [`index`] lets tools jump to a line, time or call without reading the
//! trace again; [`regstate`] gives the registers as they stand at a point,
//! [`memstate`] a window of memory.

#![deny(missing_docs)]

pub mod callinfo;
pub mod calls;
pub mod compare;
pub mod events;
pub mod index;
pub mod memstate;
pub mod ranges;

pub mod reader;
pub mod record;
pub mod regstate;
pub mod symbols;
pub mod vcd;
pub mod writer;

pub use reader::{LineParser, Reader, ReaderOptions, TarmacError};
pub use record::*;
