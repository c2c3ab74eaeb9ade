//! OpenCSD's C API (`libopencsd_c_api.so.1`) on coresight-decode.
//!
//! Programs built against OpenCSD's `opencsd_c_api.h` (Linux `perf`
//! among them) run on this library with no change but the library the
//! loader finds. By default the structs, element kinds and printer text
//! are those of OpenCSD 1.3.x (what Debian ships and builds perf against);
//! the `opencsd-1-8` feature switches to 1.8.x's.
//!
//! Every exported function catches panics: none crosses into C. A null
//! or unknown tree handle gives `OCSD_ERR_BAD_HANDLE` (or the fatal
//! data-path response), as OpenCSD's code for it.

#![allow(clippy::missing_safety_doc)]

pub mod abi;
mod api;
pub mod convert;
mod custom;
pub mod packets;
mod pktcb;
mod tree;

pub use api::*;
