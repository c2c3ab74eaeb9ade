//! Input files: regular files only, and I/O errors in words.
//!
//! Shared by the snapshot loader and the memory accessors, which report a
//! problem with a file each in their own error type.

use std::path::{Path, PathBuf};

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

/// Reads `paths` one after another into one buffer, allocated once at the
/// files' total size: a capture in several files is held once, not
/// copied as it grows. The error names the file that could not be read.
pub(crate) fn read_concatenated(paths: &[PathBuf]) -> Result<Vec<u8>, (PathBuf, std::io::Error)> {
    use std::io::Read;
    let mut total = 0usize;
    for p in paths {
        let len = std::fs::metadata(p).map_err(|e| (p.clone(), e))?.len();
        total = total.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
    }
    let mut data = Vec::new();
    data.try_reserve_exact(total)
        .map_err(|e| (paths.first().cloned().unwrap_or_default(), std::io::Error::other(e)))?;
    for p in paths {
        let mut f = std::fs::File::open(p).map_err(|e| (p.clone(), e))?;
        f.read_to_end(&mut data).map_err(|e| (p.clone(), e))?;
    }
    Ok(data)
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

/// DSTREAM captures (`format=dstream_coresight`): the probe writes the
/// formatted trace in 512-byte blocks, each ending with an 8-byte footer
/// that is not trace. Trace indexes count the trace bytes only, as
/// OpenCSD's lister does with `-dstream_format`.
pub mod dstream {
    use std::io::Read;

    /// Bytes in a block, footer included.
    pub(crate) const BLOCK: usize = 512;
    /// Bytes of the footer at the end of each block.
    pub(crate) const FOOTER: usize = 8;
    /// Trace bytes in a block.
    pub const DATA: usize = BLOCK - FOOTER;

    /// Removes the footers from a whole capture in place (no copy of the
    /// trace beyond moving it down).
    pub fn strip_footers(data: &mut Vec<u8>) {
        let mut w = 0;
        let mut r = 0;
        while r < data.len() {
            let n = DATA.min(data.len() - r);
            data.copy_within(r..r + n, w);
            w += n;
            r += BLOCK;
        }
        data.truncate(w);
    }

    /// Reads a capture with its footers left out.
    pub struct FooterReader<R> {
        inner: R,
        /// Position in the current block.
        at: usize,
    }

    impl<R: Read> FooterReader<R> {
        /// Reads `inner`, which starts at a block boundary.
        pub fn new(inner: R) -> Self {
            FooterReader { inner, at: 0 }
        }
    }

    impl<R: Read> Read for FooterReader<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            loop {
                if self.at >= DATA {
                    // Skip what is left of the footer; end of input inside
                    // it is the end of the trace.
                    let mut skip = [0u8; FOOTER];
                    let want = BLOCK - self.at;
                    let n = self.inner.read(&mut skip[..want])?;
                    if n == 0 {
                        return Ok(0);
                    }
                    self.at += n;
                    if self.at == BLOCK {
                        self.at = 0;
                    }
                    continue;
                }
                let want = buf.len().min(DATA - self.at);
                let n = self.inner.read(&mut buf[..want])?;
                self.at += n;
                return Ok(n);
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn capture(blocks: usize, tail: usize) -> (Vec<u8>, Vec<u8>) {
            let mut raw = Vec::new();
            let mut trace = Vec::new();
            for i in 0..blocks * BLOCK + tail {
                let b = (i * 7 % 251) as u8;
                if i % BLOCK < DATA {
                    trace.push(b);
                    raw.push(b);
                } else {
                    raw.push(0xEE);
                }
            }
            (raw, trace)
        }

        #[test]
        fn footers_are_left_out_in_place_and_when_read() {
            for (blocks, tail) in [(0, 0), (0, 100), (1, 0), (3, 504), (3, 508), (2, 511)] {
                let (raw, trace) = capture(blocks, tail);
                let mut v = raw.clone();
                strip_footers(&mut v);
                assert_eq!(v, trace, "{blocks} blocks + {tail}");
                for chunk in [1, 7, 504, 4096] {
                    let mut r = FooterReader::new(&raw[..]);
                    let mut got = Vec::new();
                    let mut buf = vec![0u8; chunk];
                    loop {
                        let n = r.read(&mut buf).unwrap();
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    assert_eq!(got, trace, "{blocks} blocks + {tail}, reads of {chunk}");
                }
            }
        }
    }
}
