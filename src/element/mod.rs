//! Trace elements: what the decoders produce.
//!
//! - [`generic`]: [`TraceElement`], the flat, OpenCSD-shaped element that
//!   the decoders write and the listing prints.
//! - [`typed`]: [`Element`], one enum variant per kind with only that
//!   kind's fields, and [`Decoded`], an element with where it came from.

pub mod generic;
pub mod typed;

pub use generic::*;
pub use typed::*;
