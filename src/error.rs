//! The crate's one error: [`Error`] is what every API call above the
//! decode tree returns (loading a snapshot into a tree, the pull API,
//! indexes). Its variants hold the detail of the layer that failed:
//! [`TraceError`] (decoding and tree setup, with OpenCSD's [`ErrCode`],
//! trace index and trace ID), [`MemoryError`] (memory images: file,
//! range), [`SnapshotError`] (snapshot files: file, line, what was
//! expected) and [`IndexFileError`] (index files: byte offset). The
//! components below the tree answer with their layer's detail, which `?`
//! turns into an [`Error`]; [`Error::code`] gives OpenCSD's code for any
//! of them.

use std::path::PathBuf;

use crate::datapath::{DatapathResp, TrcIndex};
#[cfg(feature = "disasm")]
pub use crate::disasm::DisasmError;
pub use crate::errcode::{ErrCode, Severity, TraceError};
pub use crate::memory::MemoryError;
pub use crate::snapshot::{SnapshotError, SnapshotWarning};

/// The crate's error: one variant per way a call can fail, each saying
/// where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A decoder or the decode tree refused a request, or reported an
    /// error (OpenCSD's code, with the trace index and ID where known).
    #[error("{}", trace_words(.0))]
    Trace(#[from] TraceError),
    /// An index file could not be used (byte offset, what was expected).
    #[error(transparent)]
    IndexFile(#[from] IndexFileError),
    /// The disassembler could not be set up.
    #[cfg(feature = "disasm")]
    #[error(transparent)]
    Disasm(#[from] DisasmError),
    /// The snapshot has no trace buffer of that name.
    #[error("no trace buffer named '{name}' in the snapshot (it has: {available})")]
    NoSuchBuffer {
        /// The name asked for.
        name: String,
        /// The buffers the snapshot has, comma separated.
        available: String,
    },
    /// A decoder builder was given no trace source.
    #[error("no trace source to decode: add one with DecoderBuilder::source")]
    NoSource,
    /// The snapshot describes no trace buffer at all.
    #[error("the snapshot has no trace buffer (no [trace_buffers] in its trace metadata)")]
    NoBuffer,
    /// No decoder could be made for any source of the buffer.
    #[error("no decodable trace source in buffer '{buffer}'{}", if log.is_empty() { String::new() } else { format!(": {}", log.trim_end()) })]
    NoDecoder {
        /// The buffer.
        buffer: String,
        /// What the tree builder reported, one line a problem.
        log: String,
    },
    /// A component of the tree reported a fatal error: the decode stopped.
    #[error("decode stopped at trace index {index}: {}{}", response_text(*response), error.as_ref().map(|e| format!(" ({})", e.to_string().trim_end())).unwrap_or_default())]
    Fatal {
        /// Trace index of the block being decoded when it stopped.
        index: TrcIndex,
        /// The tree's response.
        response: DatapathResp,
        /// The last error the tree logged, if any.
        error: Option<TraceError>,
    },
    /// The tree kept answering WAIT with nothing to hand out (its element
    /// output was replaced by one that waits): nothing more can be read.
    #[error("decode stalled at trace index {index}: the element output keeps answering WAIT")]
    Stalled {
        /// Trace index where it stalled.
        index: TrcIndex,
    },
}

impl Error {
    /// A [`Error::Trace`] with OpenCSD's `code` and what was being done.
    pub fn code(code: ErrCode, context: impl Into<String>) -> Self {
        Error::Trace(TraceError::new(Severity::Error, code).with_message(context))
    }

    /// OpenCSD's code for this error (what its C API would return).
    pub fn err_code(&self) -> ErrCode {
        match self {
            Error::Io { .. } => ErrCode::FileError,
            Error::Snapshot(_) => ErrCode::TestSnapshotRead,
            Error::Memory(e) => e.code(),
            Error::Trace(e) => e.code,
            Error::IndexFile(_) => ErrCode::FileError,
            #[cfg(feature = "disasm")]
            Error::Disasm(_) => ErrCode::Fail,
            Error::NoSuchBuffer { .. } | Error::NoBuffer => ErrCode::TestSnapshotRead,
            Error::NoSource | Error::NoDecoder { .. } => ErrCode::TestSsToDecoder,
            Error::Fatal { error: Some(e), .. } => e.code,
            Error::Fatal { .. } | Error::Stalled { .. } => ErrCode::Fail,
        }
    }
}

impl From<ErrCode> for Error {
    fn from(code: ErrCode) -> Error {
        Error::Trace(TraceError::new(Severity::Error, code))
    }
}

/// A trace error as a sentence: its message first (what was being done,
/// on what), then OpenCSD's code and where in the trace.
fn trace_words(e: &TraceError) -> String {
    if e.message.is_empty() {
        return e.to_string();
    }
    let mut place = String::new();
    if let Some(idx) = e.index {
        place.push_str(&format!("; trace index {idx}"));
    }
    if let Some(id) = e.trace_id {
        place.push_str(&format!("; trace ID 0x{id:02x}"));
    }
    format!("{} ({}{place})", e.message.trim_end(), e.code)
}

/// Plain words for a fatal response.
fn response_text(r: DatapathResp) -> &'static str {
    match r {
        DatapathResp::FatalNotInit => "a component was not initialised",
        DatapathResp::FatalInvalidOp => "invalid operation",
        DatapathResp::FatalInvalidParam => "invalid parameter",
        DatapathResp::FatalInvalidData => "invalid trace data",
        DatapathResp::FatalSysErr => "system error",
        _ => "the data path did not accept the data",
    }
}

/// Why an index file was refused: where in the file, and what was wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexFileError {
    #[error("not a trace index (bad magic at byte 0)")]
    /// The file does not start with the index magic.
    BadMagic,
    #[error("index version {found} not supported (this library reads version {supported})")]
    /// A version this library does not read.
    Version {
        /// The file's version.
        found: u32,
        /// The version this library reads.
        supported: u32,
    },
    #[error("index truncated: {needed} bytes of {what} needed at byte {offset}, {left} left")]
    /// The file ends inside a field.
    Truncated {
        /// The field.
        what: &'static str,
        /// Where it starts.
        offset: usize,
        /// Bytes it needs.
        needed: usize,
        /// Bytes left in the file.
        left: usize,
    },
    #[error("index corrupt at byte {offset}: {what}")]
    /// A field holds what it cannot.
    Corrupt {
        /// Where.
        offset: usize,
        /// What is wrong.
        what: String,
    },
    #[error("index corrupt: checksum {found:#018x} does not match its contents ({expected:#018x})")]
    /// The checksum does not match the contents.
    Checksum {
        /// The checksum in the file.
        found: u64,
        /// The checksum of the contents.
        expected: u64,
    },
    #[error(
        "stale index: built for a capture of {indexed_size} bytes (hash {indexed_hash:#018x}), the capture now has {size} bytes (hash {hash:#018x})"
    )]
    /// The capture is not the one indexed.
    Stale {
        /// Size of the capture indexed.
        indexed_size: u64,
        /// Its hash.
        indexed_hash: u64,
        /// Size of the capture now.
        size: u64,
        /// Its hash.
        hash: u64,
    },
    #[error(
        "stale index: built with another configuration of the capture (hash {indexed:#018x}, now {now:#018x}): the buffer's format or its sources' registers changed; build the index again"
    )]
    /// The capture is the one indexed, but its configuration (buffer
    /// format, trace sources and their registers) is not.
    ConfigChanged {
        /// Configuration hash recorded in the index.
        indexed: u64,
        /// Configuration hash now.
        now: u64,
    },
    #[error("{path}: {msg}")]
    /// Reading or writing the file failed.
    Io {
        /// The file.
        path: String,
        /// What the system said.
        msg: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
