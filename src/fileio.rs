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

/// A trace buffer's data files read one after another as one stream of
/// trace bytes, DSTREAM footers left out: what the pull API and the index
/// builder decode in fixed-size chunks, so a capture of any size is never
/// held in memory. A DSTREAM block may continue into the next file, as
/// when the files are concatenated.
///
/// Read it with [`std::io::Read`] (an error names the file it came from);
/// [`CaptureReader::rewind`] starts again from the first byte.
#[derive(Debug)]
pub struct CaptureReader {
    paths: Vec<PathBuf>,
    /// The file being read (`paths[current]`), if open.
    file: Option<std::fs::File>,
    current: usize,
    dstream: bool,
    /// Position in the current DSTREAM block (file bytes, footer
    /// included).
    at: usize,
    /// Trace bytes in all the files, as their sizes were when opened.
    len: u64,
}

impl CaptureReader {
    /// Reads `paths` in order (a snapshot's `Snapshot::buffer_paths`);
    /// `dstream`: leave out DSTREAM footers (`BufferInfo::has_dstream_footers`).
    /// Each must be a regular file now: the error's message begins with
    /// the path of the first that is not.
    pub fn open(paths: Vec<PathBuf>, dstream: bool) -> std::io::Result<CaptureReader> {
        CaptureReader::open_named(paths, dstream)
            .map_err(|(path, e)| std::io::Error::new(e.kind(), format!("{}: {}", path.display(), io_words(&e))))
    }

    /// [`CaptureReader::open`], the error with the file apart.
    pub(crate) fn open_named(paths: Vec<PathBuf>, dstream: bool) -> Result<CaptureReader, (PathBuf, std::io::Error)> {
        let mut raw = 0u64;
        for p in &paths {
            let len = check_regular_file(p).map_err(|e| (p.clone(), std::io::Error::new(e.kind, e.message)))?;
            raw = raw.saturating_add(len);
        }
        let len = if dstream {
            let full = raw / dstream::BLOCK as u64;
            let tail = raw % dstream::BLOCK as u64;
            full * dstream::DATA as u64 + tail.min(dstream::DATA as u64)
        } else {
            raw
        };
        Ok(CaptureReader {
            paths,
            file: None,
            current: 0,
            dstream,
            at: 0,
            len,
        })
    }

    /// Trace bytes in the capture (footers left out), from the files'
    /// sizes when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the capture has no trace bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The files, in order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Whether DSTREAM footers are left out.
    pub fn strips_dstream_footers(&self) -> bool {
        self.dstream
    }

    /// Starts again from the first byte of the first file.
    pub fn rewind(&mut self) {
        self.file = None;
        self.current = 0;
        self.at = 0;
    }

    /// The file being read (or last read, at the end).
    fn current_path(&self) -> PathBuf {
        let i = self.current.min(self.paths.len().saturating_sub(1));
        self.paths.get(i).cloned().unwrap_or_default()
    }

    /// File bytes, footers included: the files one after another.
    fn read_raw(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::Read;
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let Some(f) = self.file.as_mut() else {
                let Some(p) = self.paths.get(self.current) else {
                    return Ok(0);
                };
                self.file = Some(std::fs::File::open(p)?);
                continue;
            };
            let n = f.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            self.file = None;
            self.current += 1;
        }
    }

    /// Trace bytes: [`Self::read_raw`] with the footers skipped.
    fn read_trace(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use dstream::{BLOCK, DATA, FOOTER};
        if !self.dstream {
            return self.read_raw(buf);
        }
        loop {
            if self.at >= DATA {
                // What is left of the footer; the end of input inside it
                // is the end of the trace.
                let mut skip = [0u8; FOOTER];
                let n = self.read_raw(&mut skip[..BLOCK - self.at])?;
                if n == 0 {
                    return Ok(0);
                }
                self.at = (self.at + n) % BLOCK;
                continue;
            }
            let want = buf.len().min(DATA - self.at);
            let n = self.read_raw(&mut buf[..want])?;
            self.at += n;
            return Ok(n);
        }
    }

    /// Fills `buf` as far as the capture goes: fewer bytes only at its
    /// end. The error names the file that could not be read.
    pub(crate) fn fill(&mut self, buf: &mut [u8]) -> Result<usize, (PathBuf, std::io::Error)> {
        let mut got = 0;
        while got < buf.len() {
            match self.read_trace(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err((self.current_path(), e)),
            }
        }
        Ok(got)
    }

    /// Reads the rest of the capture into memory.
    pub(crate) fn read_all(&mut self) -> Result<Vec<u8>, (PathBuf, std::io::Error)> {
        let mut data = Vec::new();
        let want = usize::try_from(self.len).unwrap_or(usize::MAX);
        data.try_reserve_exact(want)
            .map_err(|e| (self.current_path(), std::io::Error::other(e)))?;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = self.fill(&mut chunk)?;
            if n == 0 {
                return Ok(data);
            }
            data.extend_from_slice(&chunk[..n]);
        }
    }
}

impl std::io::Read for CaptureReader {
    /// Trace bytes; an error's message begins with the file's path.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.read_trace(buf)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {}", self.current_path().display(), io_words(&e))))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A folder of its own under the system's temporary one.
    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("csd-fileio-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_capture_in_several_files_reads_as_their_concatenation_footers_left_out() {
        let dir = temp("chain");
        // 3 files whose boundaries fall inside blocks and inside a footer.
        let raw: Vec<u8> = (0..3 * dstream::BLOCK + 300).map(|i| (i * 13 % 251) as u8).collect();
        let cuts = [0, 100, dstream::BLOCK + dstream::DATA + 3, raw.len()];
        let paths: Vec<PathBuf> = (0..3)
            .map(|i| {
                let p = dir.join(format!("p{i}.bin"));
                std::fs::write(&p, &raw[cuts[i]..cuts[i + 1]]).unwrap();
                p
            })
            .collect();
        for dstream in [false, true] {
            let mut want = raw.clone();
            if dstream {
                dstream::strip_footers(&mut want);
            }
            let mut r = CaptureReader::open_named(paths.clone(), dstream).unwrap();
            assert_eq!(r.len(), want.len() as u64);
            for chunk in [1, 5, 504, 4096] {
                r.rewind();
                let mut got = Vec::new();
                let mut buf = vec![0u8; chunk];
                loop {
                    let n = r.fill(&mut buf).unwrap();
                    got.extend_from_slice(&buf[..n]);
                    if n < chunk {
                        break;
                    }
                }
                assert_eq!(got, want, "dstream {dstream}, chunks of {chunk}");
            }
            r.rewind();
            assert_eq!(r.read_all().unwrap(), want);
            r.rewind();
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            assert_eq!(got, want);
        }
        // A file gone after opening is named when it is reached.
        let mut r = CaptureReader::open_named(paths.clone(), false).unwrap();
        std::fs::remove_file(&paths[1]).unwrap();
        let (path, e) = r.read_all().unwrap_err();
        assert_eq!((path, e.kind()), (paths[1].clone(), std::io::ErrorKind::NotFound));
        // ... and before opening, by `open`.
        let (path, e) = CaptureReader::open_named(paths.clone(), false).unwrap_err();
        assert_eq!((path, io_words(&e)), (paths[1].clone(), "no such file".to_string()));
        let e = CaptureReader::open(paths.clone(), false).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: no such file", paths[1].display()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
