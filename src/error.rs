//! The crate's error: [`Error`] is the `Result` error for API calls that
//! fail outright. It wraps the error of each layer: [`TraceError`]
//! (decoding and decode-tree setup: OpenCSD's code, trace index, trace ID),
//! [`MemoryError`] (memory images: file, range) and [`SnapshotError`]
//! (snapshot loading: file, line, what was expected). It sits above every
//! layer whose error it wraps; the foundation's codes and records are in
//! [`crate::errcode`] and re-exported here.

use std::path::PathBuf;

pub use crate::errcode::{ErrCode, Severity, TraceError};
pub use crate::memory::MemoryError;
pub use crate::snapshot::{SnapshotError, SnapshotWarning};

/// Errors returned by the crate's API: one variant per layer, each with
/// its own error type saying where the problem is.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {}", path.display(), crate::fileio::io_words(source))]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A snapshot could not be loaded (file, line, what was expected).
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A memory image could not be mapped.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A decode library error.
    #[error("{0}")]
    Decode(#[from] TraceError),
    /// An error code with context.
    #[error("{context}: {code}")]
    Code {
        /// What went wrong.
        code: ErrCode,
        /// What was being done, and on what.
        context: String,
    },
}

impl Error {
    /// An [`Error::Code`].
    pub fn code(code: ErrCode, context: impl Into<String>) -> Self {
        Error::Code {
            code,
            context: context.into(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
