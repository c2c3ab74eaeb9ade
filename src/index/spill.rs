//! Records set aside in temporary files while an index is built straight
//! to its file ([`super::Capture::index_to_file`]): an index has an entry
//! per sync point, context, timestamp... of the capture and a source block
//! per `granularity` bytes, so held in memory it grows with the capture.
//! Spilled, building holds a write buffer per list, whatever the size.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Records of one list, in the index file's encoding, in a temporary file
/// beside the index (removed when dropped).
pub(crate) struct Spill {
    out: BufWriter<File>,
    path: PathBuf,
    count: u64,
    err: Option<std::io::Error>,
}

impl Spill {
    /// A new temporary file beside `index_path`; `n` tells the lists of
    /// one build apart.
    pub(crate) fn beside(index_path: &Path, n: usize) -> Result<Spill, (PathBuf, std::io::Error)> {
        let name = index_path.file_name().map(|s| s.to_string_lossy()).unwrap_or_default();
        let path = index_path.with_file_name(format!(".{name}.{}.{n}.part", std::process::id()));
        let file = File::create(&path).map_err(|e| (path.clone(), e))?;
        Ok(Spill {
            out: BufWriter::with_capacity(16 * 1024, file),
            path,
            count: 0,
            err: None,
        })
    }

    /// Appends one record (a write error is kept for [`replay`](Self::replay)).
    pub(crate) fn push(&mut self, record: &[u8]) {
        if self.err.is_none()
            && let Err(e) = self.out.write_all(record)
        {
            self.err = Some(e);
        }
        self.count += 1;
    }

    /// Records pushed.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Hands the bytes pushed, in order, to `f` a piece at a time.
    pub(crate) fn replay(&mut self, mut f: impl FnMut(&[u8])) -> Result<(), (PathBuf, std::io::Error)> {
        let fail = |e| (self.path.clone(), e);
        if let Some(e) = self.err.take() {
            return Err(fail(e));
        }
        self.out.flush().map_err(fail)?;
        let mut file = File::open(&self.path).map_err(fail)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = file.read(&mut buf).map_err(fail)?;
            if n == 0 {
                return Ok(());
            }
            f(&buf[..n]);
        }
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The spilled lists of a source index; blocks before `blocks.count()`
/// are in the file, the later ones still in the [`super::SourceIndex`].
pub(crate) struct SourceSpill {
    pub(crate) blocks: Spill,
    pub(crate) frame_syncs: Spill,
    pub(crate) triggers: Spill,
}

/// What a build to a file spilled: the entries of each stream (in the
/// order of the index's streams) and the source index's lists.
pub(crate) struct Spilled {
    pub(crate) streams: Vec<Spill>,
    pub(crate) source: Option<SourceSpill>,
}
