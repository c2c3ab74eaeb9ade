//! Input files: regular files only, and I/O errors in words.
//!
//! Shared by the snapshot loader and the memory accessors, which report a
//! problem with a file each in their own error type.

use std::path::Path;

/// Why a file could not be read: in words, with the kind of I/O error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileProblem {
    /// What is wrong, without the path.
    pub message: String,
    /// The kind of I/O error (`InvalidInput` for a file that is not a
    /// regular file).
    pub kind: std::io::ErrorKind,
}

impl FileProblem {
    fn io(e: &std::io::Error) -> FileProblem {
        FileProblem {
            message: io_words(e),
            kind: e.kind(),
        }
    }
}

/// An I/O error in words, without Rust's `(os error N)` suffix.
pub(crate) fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => "no such file".to_string(),
        ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}

/// Reads a file that must be a regular file: a FIFO, device or directory
/// given as an ini, dump or trace file would block or read as nothing.
pub(crate) fn read_regular_file(path: &Path) -> Result<Vec<u8>, FileProblem> {
    check_regular_file(path)?;
    std::fs::read(path).map_err(|e| FileProblem::io(&e))
}

/// Checks that `path` names a regular file, without reading it; returns
/// its length.
pub(crate) fn check_regular_file(path: &Path) -> Result<u64, FileProblem> {
    let meta = std::fs::metadata(path).map_err(|e| FileProblem::io(&e))?;
    if !meta.is_file() {
        return Err(FileProblem {
            message: not_regular(&meta).to_string(),
            kind: std::io::ErrorKind::InvalidInput,
        });
    }
    Ok(meta.len())
}

/// What a non-regular file is, for error messages.
pub(crate) fn not_regular(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "is a directory, not a file";
    }
    #[cfg(unix)]
    {
        if let Some(kind) = unix_kind(&t) {
            return kind;
        }
    }
    "is not a regular file"
}

/// FIFOs, sockets and devices: Unix file types.
#[cfg(unix)]
fn unix_kind(t: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    Some(if t.is_fifo() {
        "is a FIFO (named pipe), not a regular file"
    } else if t.is_socket() {
        "is a socket, not a regular file"
    } else if t.is_block_device() || t.is_char_device() {
        "is a device, not a regular file"
    } else {
        return None;
    })
}
