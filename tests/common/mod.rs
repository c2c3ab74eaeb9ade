//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Deterministic random numbers: the generator's, so every run sees the
/// same data.
pub use coresight_generator::Rng;

/// Test helpers on top of [`Rng`].
pub trait RngExt {
    fn byte(&mut self) -> u8;
    fn bytes(&mut self, n: usize) -> Vec<u8>;
}

impl RngExt for Rng {
    fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

/// A fresh empty directory under the target dir for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `files` (name, contents) into `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &[u8])]) {
    for (name, data) in files {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, data).unwrap();
    }
}
