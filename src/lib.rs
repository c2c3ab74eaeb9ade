//! # coresight-decode
//!
//! Decodes Arm CoreSight trace: splits formatted frames by trace ID, parses
//! each protocol's packets, follows the program through its memory image,
//! and produces generic trace elements.
//!
//! The library is a decode tree of components joined through the traits in
//! [`interfaces`], with OpenCSD's flow control ([`datapath`]).

pub mod arch;
pub mod datapath;
pub mod elem;
pub mod error;
pub mod instr;
pub mod interfaces;
pub mod memory;

pub use datapath::{DatapathOp, DatapathResp, TrcIndex};
pub use elem::{ElemType, TraceElement};
pub use error::{ErrCode, Error, Result, TraceError};
pub use interfaces::{InstrDecode, PktDataIn, PktRawDataMon, TargetMemAccess, TrcDataIn, TrcGenElemIn};
