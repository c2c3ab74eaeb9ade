//! Trace elements: what the decoders produce.
//!
//! - [`TraceElement`], the flat, OpenCSD-shaped element that the decoders
//!   write and the listing prints (defined in `generic.rs`).
//! - [`Element`], one enum variant per kind with only that kind's fields,
//!   and [`Decoded`], an element with where it came from (`typed.rs`).

mod generic;
mod typed;

pub use generic::*;
pub use typed::*;
