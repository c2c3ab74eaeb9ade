//! simpleperf's ETM branch lists in Python: made from perf.data
//! recordings, read, written, merged, and turned into an AutoFDO profile,
//! through `coresight_perf_data::branch_list` (the same code as
//! `trc_perf autofdo`). A fleet's devices each send one; merged at home
//! they give the profile of all their recordings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use coresight_perf_data::autofdo::{AutoFdoProfile, Regex};
use coresight_perf_data::binaries::SymbolSearch;
use coresight_perf_data::branch_list::{self, BinaryKind, BranchList};
use coresight_perf_data::decode::DecodeOptions;
use coresight_perf_data::{MappedFile, Recording};
use pyo3::exceptions::{PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::OpenError;

fn symbol_search(symdirs: &[PathBuf]) -> Result<SymbolSearch, String> {
    let mut search = SymbolSearch::new();
    for d in symdirs {
        search
            .add_symdir(d)
            .map_err(|e| format!("symbol directory {}: {e}", d.display()))?;
    }
    Ok(search)
}

fn filter(binary: Option<&str>) -> PyResult<Option<Regex>> {
    binary
        .map(|r| Regex::new(r).map_err(|e| PyValueError::new_err(format!("binary {r:?}: {e}"))))
        .transpose()
}

/// Decodes the recording `path` and adds its branch lists to `out`;
/// returns the decode's warnings as text.
fn add_recording(
    path: &Path,
    symdirs: &[PathBuf],
    filter: Option<&Regex>,
    out: &mut BranchList,
) -> Result<Vec<String>, String> {
    let f = MappedFile::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let rec = Recording::parse(f.bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    let keep = |p: &str| filter.is_none_or(|r| r.is_match(p));
    let report = branch_list::add_recording(
        &rec,
        symbol_search(symdirs)?,
        DecodeOptions::default(),
        out,
        keep,
        &mut |_| {},
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut warnings: Vec<String> = rec
        .warnings
        .iter()
        .chain(&report.warnings)
        .map(|w| format!("{}: {w}", path.display()))
        .collect();
    for (bin, _, why) in &report.missing {
        warnings.push(format!("{}: code of {bin} not found ({why})", path.display()));
    }
    out.retain(keep);
    Ok(warnings)
}

/// simpleperf's ETM branch list file (`simpleperf inject --output
/// branch-list`, `trc_perf autofdo --output branch-list`): per binary,
/// start addresses and the taken/not-taken outcomes of the branches met
/// from each, with counts. Compact and mergeable; `to_autofdo` turns it
/// into the AutoFDO text profile the recordings give directly.
#[pyclass(module = "coresight_decode._native", name = "BranchList")]
#[derive(Default)]
pub struct PyBranchList {
    inner: BranchList,
    /// What the decodes that made it reported (not kept in the file).
    warnings: Vec<String>,
}

#[pymethods]
impl PyBranchList {
    /// An empty branch list.
    #[new]
    fn new() -> Self {
        PyBranchList::default()
    }

    /// Reads a branch list file's bytes; raises `OpenError` if they are
    /// not one.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<PyBranchList> {
        let inner = BranchList::parse(data).map_err(|e| OpenError::new_err(e.to_string()))?;
        Ok(PyBranchList {
            inner,
            warnings: Vec::new(),
        })
    }

    /// Reads the branch list file `path`; raises `OpenError` naming it if
    /// it cannot be read or is not one.
    #[staticmethod]
    fn read(path: PathBuf) -> PyResult<PyBranchList> {
        let bytes = std::fs::read(&path).map_err(|e| OpenError::new_err(format!("{}: {e}", path.display())))?;
        let inner = BranchList::parse(&bytes).map_err(|e| OpenError::new_err(format!("{}: {e}", path.display())))?;
        Ok(PyBranchList {
            inner,
            warnings: Vec::new(),
        })
    }

    /// Decodes the perf.data recordings `paths` (binaries looked for under
    /// `symdirs`, then at their recorded paths) into one branch list,
    /// keeping the binaries whose path the regular expression `binary`
    /// matches (default: all), as `trc_perf autofdo --output branch-list`
    /// does. Raises `OpenError` naming the recording that cannot be read
    /// or decoded. The GIL is released meanwhile.
    #[staticmethod]
    #[pyo3(signature = (paths, symdirs=Vec::new(), binary=None))]
    fn from_perf(
        py: Python<'_>,
        paths: Vec<PathBuf>,
        symdirs: Vec<PathBuf>,
        binary: Option<&str>,
    ) -> PyResult<PyBranchList> {
        let filter = filter(binary)?;
        py.detach(move || {
            let mut out = PyBranchList::default();
            for p in &paths {
                let w = add_recording(p, &symdirs, filter.as_ref(), &mut out.inner)?;
                out.warnings.extend(w);
            }
            Ok::<_, String>(out)
        })
        .map_err(OpenError::new_err)
    }

    /// The file's bytes (simpleperf's `BranchList` protocol buffer).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// Writes the file `path`.
    fn write(&self, path: PathBuf) -> PyResult<()> {
        std::fs::write(&path, self.inner.to_bytes())
            .map_err(|e| OpenError::new_err(format!("cannot write {}: {e}", path.display())))
    }

    /// Adds `other`'s counts into this list (same binary, start and
    /// outcomes: counts add up, saturating at 2^64-1).
    fn merge(&mut self, other: PyRef<'_, PyBranchList>) {
        self.inner.merge(&other.inner);
        self.warnings.extend(other.warnings.iter().cloned());
    }

    /// The AutoFDO text profile of the lists, as `trc_perf autofdo` writes
    /// it: each binary's code (found by build id and path under `symdirs`,
    /// then at its recorded path) is walked along its lists. A binary
    /// whose code is not found is left out with a `UserWarning`.
    #[pyo3(signature = (symdirs=Vec::new(), binary=None))]
    fn to_autofdo(&self, py: Python<'_>, symdirs: Vec<PathBuf>, binary: Option<&str>) -> PyResult<String> {
        let filter = filter(binary)?;
        let (text, missing) = py
            .detach(|| {
                let search = symbol_search(&symdirs)?;
                let mut profile = AutoFdoProfile::new(filter);
                let missing = self.inner.add_to_profile(&search, &mut profile);
                Ok::<_, String>((profile.to_text(), missing))
            })
            .map_err(OpenError::new_err)?;
        for (bin, why) in missing {
            let msg = format!("branch lists of {bin} not used: its code is needed ({why})");
            PyErr::warn(py, &py.get_type::<PyUserWarning>(), &std::ffi::CString::new(msg)?, 1)?;
        }
        Ok(text)
    }

    /// The binaries: a list of dicts `{"path", "build_id", "kind"
    /// ("elf", "kernel" or "kernel_module"), "branches": {start address:
    /// {outcomes as a string of 1 (taken) and 0: count}}}`.
    fn binaries<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let mut out = Vec::with_capacity(self.inner.binaries.len());
        for b in self.inner.binaries.values() {
            let d = PyDict::new(py);
            d.set_item("path", &b.path)?;
            d.set_item("build_id", &b.build_id)?;
            d.set_item(
                "kind",
                match b.kind {
                    BinaryKind::Elf => "elf",
                    BinaryKind::Kernel => "kernel",
                    BinaryKind::KernelModule => "kernel_module",
                },
            )?;
            let mut starts = BTreeMap::new();
            for (addr, lists) in &b.branches {
                let l: BTreeMap<String, u64> = lists
                    .iter()
                    .map(|(bits, n)| (bits.iter().map(|t| if *t { '1' } else { '0' }).collect(), *n))
                    .collect();
                starts.insert(*addr, l);
            }
            d.set_item("branches", starts)?;
            out.push(d);
        }
        Ok(out)
    }

    /// Counts that reached 2^64-1 and were kept there.
    #[getter]
    fn overflows(&self) -> u64 {
        self.inner.overflows
    }

    /// What the decodes that made the list reported (warnings, binaries
    /// whose code was not found).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    fn __len__(&self) -> usize {
        self.inner.binaries.len()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyBranchList>()
            .is_ok_and(|o| o.borrow().inner.binaries == self.inner.binaries)
    }

    /// Pickled as its file's bytes (Dask sends lists between processes).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let py = slf.py();
        let from_bytes = py.get_type::<PyBranchList>().getattr("from_bytes")?;
        Ok((from_bytes, (slf.borrow().to_bytes(py),)))
    }

    fn __repr__(&self) -> String {
        let starts: usize = self.inner.binaries.values().map(|b| b.branches.len()).sum();
        format!(
            "BranchList({} binaries, {starts} start addresses)",
            self.inner.binaries.len()
        )
    }
}
