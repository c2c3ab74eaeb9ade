//! Pictures of decoded trace: call stacks from CoreSight elements
//! (snapshots, raw buffers, perf.data), RISC-V trace and Tarmac; folded
//! stacks and flame/icicle graph SVGs (drawn by `inferno`); timelines in
//! the Trace Event Format and speedscope's format; a one-file HTML report.
//!
//! Every input becomes a [`Profile`]: the distinct call stacks as a trie
//! with their own weights on three clocks (instructions, cycles, time), one
//! stack per context, and a bounded timeline of calls and returns. The
//! outputs are made from it:
//!
//! - [`folded`]: folded stacks and the SVGs;
//! - [`timeline`]: Trace Event Format and speedscope JSON;
//! - [`report`]: the HTML report.
//!
//! Inputs: [`elements::ElementStacks`] takes trace elements (and
//! [`input::decode_snapshot`] decodes a snapshot into it);
//! [`tarmac::profile_from_calltree`] replays the calls that
//! `coresight-tarmac` finds in a Tarmac trace.

#![deny(missing_docs)]

pub mod elements;
pub mod folded;
pub mod input;
pub mod profile;
pub mod report;
pub mod symbols;
pub mod tarmac;
pub mod timeline;

pub use profile::{Axis, Limits, Profile};
