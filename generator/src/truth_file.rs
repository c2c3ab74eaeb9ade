//! A snapshot's truth file: `truth.txt`, one item a line, or the same
//! text gzip-compressed as `truth.txt.gz` (a long trace's truth is some
//! twenty times its size).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;

/// The truth file of a snapshot directory.
pub const TRUTH_FILE: &str = "truth.txt";
/// [`TRUTH_FILE`] compressed.
pub const TRUTH_FILE_GZ: &str = "truth.txt.gz";

/// A truth file being written.
pub enum TruthFile {
    Plain(BufWriter<File>),
    /// (The buffer in front: the encoder compresses on every write, and
    /// lines come in pieces of a few bytes.)
    Gz(BufWriter<GzEncoder<BufWriter<File>>>),
}

impl TruthFile {
    /// Creates `dir`'s truth file, compressed if `gz`, and removes the other
    /// form if there was one (it would describe another trace).
    pub fn create(dir: &Path, gz: bool) -> io::Result<TruthFile> {
        let (name, other) = if gz {
            (TRUTH_FILE_GZ, TRUTH_FILE)
        } else {
            (TRUTH_FILE, TRUTH_FILE_GZ)
        };
        remove(dir, other)?;
        let f = BufWriter::with_capacity(1 << 16, File::create(dir.join(name))?);
        Ok(if gz {
            // The fastest level: the text is repetitive enough that it
            // still shrinks several times, at the speed of the generator.
            TruthFile::Gz(BufWriter::with_capacity(
                1 << 16,
                GzEncoder::new(f, Compression::fast()),
            ))
        } else {
            TruthFile::Plain(f)
        })
    }

    /// Writes out what is buffered (and the gzip trailer).
    pub fn finish(self) -> io::Result<()> {
        match self {
            TruthFile::Plain(mut f) => f.flush(),
            TruthFile::Gz(z) => z.into_inner().map_err(|e| e.into_error())?.finish()?.flush(),
        }
    }
}

impl Write for TruthFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            TruthFile::Plain(f) => f.write(buf),
            TruthFile::Gz(z) => z.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            TruthFile::Plain(f) => f.write_all(buf),
            TruthFile::Gz(z) => z.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            TruthFile::Plain(f) => f.flush(),
            TruthFile::Gz(z) => z.flush(),
        }
    }
}

/// Removes `dir`'s truth files (a snapshot written without one must not
/// keep an earlier trace's).
pub fn remove_truth(dir: &Path) -> io::Result<()> {
    remove(dir, TRUTH_FILE)?;
    remove(dir, TRUTH_FILE_GZ)
}

fn remove(dir: &Path, name: &str) -> io::Result<()> {
    match std::fs::remove_file(dir.join(name)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The truth text of snapshot directory `dir`, from `truth.txt` or else
/// `truth.txt.gz`, read as it is used (NotFound when there is neither).
pub fn open_truth(dir: &Path) -> io::Result<Box<dyn BufRead>> {
    match File::open(dir.join(TRUTH_FILE)) {
        Ok(f) => Ok(Box::new(BufReader::new(f))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let f = File::open(dir.join(TRUTH_FILE_GZ))?;
            Ok(Box::new(BufReader::new(MultiGzDecoder::new(BufReader::new(f)))))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn compressed_truth_reads_back_and_replaces_the_plain_one() {
        let dir = std::env::temp_dir().join(format!("trc_gen_truth_file_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text: String = (0..5000)
            .map(|i| format!("range 0x{:x} 0x{:x} 3 E\n", i * 16, i * 16 + 12))
            .collect();
        for gz in [false, true] {
            let mut t = TruthFile::create(&dir, gz).unwrap();
            t.write_all(text.as_bytes()).unwrap();
            t.finish().unwrap();
            // Only one form is left.
            assert_eq!(dir.join(TRUTH_FILE).exists(), !gz);
            assert_eq!(dir.join(TRUTH_FILE_GZ).exists(), gz);
            let mut back = String::new();
            open_truth(&dir).unwrap().read_to_string(&mut back).unwrap();
            assert_eq!(back, text);
        }
        let gz_len = std::fs::metadata(dir.join(TRUTH_FILE_GZ)).unwrap().len();
        assert!(
            gz_len * 4 < text.len() as u64,
            "{gz_len} bytes compressed of {}",
            text.len()
        );
        remove_truth(&dir).unwrap();
        assert_eq!(open_truth(&dir).err().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
