//! Errors and warnings. Every error names the byte offset in the file where the problem is.

use std::path::PathBuf;

/// A fatal problem with a perf.data file, or with one record of it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or mapped.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The first eight bytes are not `PERFILE2` (either byte order).
    #[error("not a perf.data file: the magic at offset 0 is {found:02x?}, expected \"PERFILE2\" or \"2ELIFREP\"")]
    BadMagic {
        /// The bytes found (fewer than eight if the file is that short).
        found: Vec<u8>,
    },
    /// Something needs more bytes than the file (or the enclosing section or record) has.
    #[error("at file offset {offset:#x}: {what} needs {needed} bytes, only {available} are there")]
    Truncated {
        /// Where the missing bytes should start.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// How many bytes were needed.
        needed: u64,
        /// How many there are.
        available: u64,
    },
    /// A size, offset, count or value that cannot be right.
    #[error("at file offset {offset:#x}: {what}: {detail}")]
    Malformed {
        /// Where the bad value is.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// What is wrong with it, and what was expected.
        detail: String,
    },
}

impl Error {
    /// The file offset the error is about (0 for I/O errors).
    pub fn offset(&self) -> u64 {
        match self {
            Error::Io { .. } | Error::BadMagic { .. } => 0,
            Error::Truncated { offset, .. } | Error::Malformed { offset, .. } => *offset,
        }
    }

    /// The same error with its offset mapped by `f` (from one byte stream to another).
    pub(crate) fn map_offset(self, f: impl Fn(u64) -> u64) -> Self {
        match self {
            Error::Truncated {
                offset,
                what,
                needed,
                available,
            } => Error::Truncated {
                offset: f(offset),
                what,
                needed,
                available,
            },
            Error::Malformed { offset, what, detail } => Error::Malformed {
                offset: f(offset),
                what,
                detail,
            },
            other => other,
        }
    }

    pub(crate) fn malformed(offset: u64, what: &'static str, detail: impl Into<String>) -> Self {
        Error::Malformed {
            offset,
            what,
            detail: detail.into(),
        }
    }
}

/// A problem that did not stop the reading: the rest of the file was still read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The file offset it is about.
    pub offset: u64,
    /// What happened.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at file offset {:#x}: {}", self.offset, self.message)
    }
}

impl From<Error> for Warning {
    fn from(e: Error) -> Self {
        let offset = e.offset();
        let text = e.to_string();
        // The warning's own display names the offset: not twice.
        let prefix = format!("at file offset {offset:#x}: ");
        let message = text.strip_prefix(&prefix).map(str::to_string).unwrap_or(text);
        Warning { offset, message }
    }
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
