//! Python bindings of coresight-decode: the extension module
//! `coresight_decode._native`. The Python package `coresight_decode`
//! (in `python/`) wraps it; see the package README.
//!
//! Every decode runs with the GIL released: elements are decoded in
//! chunks on the calling thread (or, for perf.data, on a decode thread
//! behind a bounded channel) and turned into Python objects afterwards.
//! Arrow batches of a snapshot or raw buffer are filled by the decode
//! tree's element sink as it decodes (`push`); those of perf.data from
//! its elements.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use arrow_array::ffi::{FFI_ArrowSchema, to_ffi};
use arrow_array::{Array, RecordBatch, StructArray};
use pyo3::IntoPyObjectExt;
use pyo3::create_exception;
use pyo3::exceptions::{PyAttributeError, PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

mod batches;
mod branch_list;
mod fields;
mod profile;
mod push;
mod stream;

use batches::{Batcher, Kind};
use fields::Val;
use push::PushBatches;
use stream::{Fed, Item, RawSource, Spec, Stream};

create_exception!(
    coresight_decode,
    CoreSightError,
    PyException,
    "Base class of the errors of coresight_decode."
);
create_exception!(
    coresight_decode,
    OpenError,
    CoreSightError,
    "A capture could not be opened: a snapshot, configuration or perf.data file that cannot be read or used."
);
create_exception!(
    coresight_decode,
    DecodeError,
    CoreSightError,
    "A decode stopped on an error (the elements before it were delivered)."
);

/// Elements decoded per release of the GIL when iterating elements.
const ELEMENT_CHUNK: usize = 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A capture to decode: a snapshot's trace buffer, a raw trace buffer with
/// its configuration, or a perf.data recording.
///
/// Made by `Trace.snapshot`, `Trace.raw` or `Trace.perf`. Each call of
/// `elements()`, `batches()`, `profile()` or `count()` decodes the capture
/// from the start, with the GIL released.
#[pyclass(module = "coresight_decode._native", frozen)]
struct Trace {
    spec: Spec,
    /// The decode opened by the constructor (to report errors early),
    /// used by the first decode.
    ready: Mutex<Option<Box<dyn Stream>>>,
    description: String,
}

impl Trace {
    fn opened(py: Python<'_>, spec: Spec, description: String) -> PyResult<Trace> {
        let s = spec.clone();
        let stream = py.detach(move || s.open()).map_err(OpenError::new_err)?;
        Ok(Trace {
            spec,
            ready: Mutex::new(Some(stream)),
            description,
        })
    }

    fn stream(&self, py: Python<'_>) -> PyResult<Box<dyn Stream>> {
        if let Some(s) = lock(&self.ready).take() {
            return Ok(s);
        }
        let spec = self.spec.clone();
        py.detach(move || spec.open()).map_err(OpenError::new_err)
    }
}

fn dict_str(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<String>> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
        _ => Ok(None),
    }
}

#[pymethods]
impl Trace {
    /// Opens the snapshot directory `path` and its trace buffer `buffer`
    /// (default: the first).
    #[staticmethod]
    #[pyo3(signature = (path, buffer=None))]
    fn snapshot(py: Python<'_>, path: PathBuf, buffer: Option<String>) -> PyResult<Trace> {
        let description = format!(
            "snapshot {}{}",
            path.display(),
            buffer.as_deref().map(|b| format!(" buffer {b}")).unwrap_or_default()
        );
        Trace::opened(py, Spec::Snapshot { dir: path, buffer }, description)
    }

    /// Opens the perf.data recording `path`; binaries are looked for by
    /// build id, path and name under the folders `symdirs`, then at their
    /// recorded paths.
    #[staticmethod]
    #[pyo3(signature = (path, symdirs=Vec::new()))]
    fn perf(py: Python<'_>, path: PathBuf, symdirs: Vec<PathBuf>) -> PyResult<Trace> {
        let description = format!("perf.data {}", path.display());
        Trace::opened(py, Spec::Perf { path, symdirs }, description)
    }

    /// A raw trace buffer `data` with its configuration: `sources`, a list
    /// of dicts `{"protocol": "ETMV4I", "registers": {"TRCCONFIGR": 0x1,
    /// ...}, "core": "Cortex-A53", "name": "etm0"}` (core for PE trace);
    /// `formatted`: CoreSight frames (memory aligned, as ETB/ETR write
    /// them) or one unformatted source; `memory`: `(address, bytes)`
    /// images; `elfs`: ELF files mapped at their addresses.
    #[staticmethod]
    #[pyo3(signature = (data, sources, formatted=true, memory=Vec::new(), elfs=Vec::new()))]
    fn raw(
        py: Python<'_>,
        data: PyBackedBytes,
        sources: Vec<Bound<'_, PyDict>>,
        formatted: bool,
        memory: Vec<(u64, PyBackedBytes)>,
        elfs: Vec<PathBuf>,
    ) -> PyResult<Trace> {
        let mut srcs = Vec::new();
        for (n, d) in sources.iter().enumerate() {
            let protocol =
                dict_str(d, "protocol")?.ok_or_else(|| PyValueError::new_err("a source needs a 'protocol'"))?;
            let name = dict_str(d, "name")?.unwrap_or_else(|| format!("source_{n}"));
            let core = dict_str(d, "core")?;
            let regs: Vec<(String, u64)> = match d.get_item("registers")? {
                Some(r) => r.extract::<HashMap<String, u64>>()?.into_iter().collect(),
                None => Vec::new(),
            };
            let config = stream::source_config(&name, &protocol, regs, core.as_deref()).map_err(OpenError::new_err)?;
            srcs.push(RawSource { protocol, config });
        }
        let description = format!("raw buffer of {} bytes", data.len());
        let spec = Spec::Raw {
            data: Arc::new(data.to_vec()),
            formatted,
            sources: srcs,
            memory: memory.into_iter().map(|(a, b)| (a, Arc::new(b.to_vec()))).collect(),
            elfs,
        };
        Trace::opened(py, spec, description)
    }

    /// The elements, as `Element` objects (decoded in chunks with the GIL
    /// released). The last step raises `DecodeError` if the decode
    /// stopped on an error.
    fn elements(&self, py: Python<'_>) -> PyResult<ElementIter> {
        Ok(ElementIter {
            state: Mutex::new(IterState {
                stream: self.stream(py)?,
                pending: VecDeque::new(),
                error: None,
                done: false,
            }),
        })
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<ElementIter> {
        self.elements(py)
    }

    /// The elements as Arrow record batches of at most `batch_size` rows:
    /// `(kind, ArrowBatch)` pairs, one schema per kind (see `KINDS`);
    /// `kinds` limits them to those kinds.
    #[pyo3(signature = (kinds=None, batch_size=65536))]
    fn batches(&self, py: Python<'_>, kinds: Option<Vec<String>>, batch_size: usize) -> PyResult<BatchIter> {
        let mut ks = Vec::new();
        for k in kinds.unwrap_or_default() {
            ks.push(Kind::from_name(&k).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "no element kind '{k}' (kinds: {})",
                    Kind::ALL.map(|k| k.name()).join(", ")
                ))
            })?);
        }
        let batcher = Batcher::new(&ks, batch_size);
        let source = match self.stream(py)?.into_parts() {
            Ok((decoder, data)) => Batches::Pushed(Box::new(PushBatches::new(decoder, data, batcher))),
            Err(stream) => Batches::Pulled(Box::new(BatchState {
                stream,
                batcher,
                ready: VecDeque::new(),
                error: None,
                done: false,
            })),
        };
        Ok(BatchIter {
            state: Mutex::new(source),
        })
    }

    /// Decodes the whole capture into mergeable counts: a dict with
    /// `ranges` (`{(start, end): times executed}`), `branches`
    /// (`{(from, to): times taken}`), `instructions` and `elements`.
    /// Raises `DecodeError` if the decode stops on an error.
    fn profile<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut stream = self.stream(py)?;
        let r = py.detach(move || {
            let mut p = profile::Profile::default();
            while let Some(i) = stream.next_item() {
                p.add(&i?);
            }
            Ok::<_, String>(p)
        });
        let p = r.map_err(DecodeError::new_err)?;
        let d = PyDict::new(py);
        d.set_item("ranges", p.ranges)?;
        d.set_item("branches", p.branches)?;
        d.set_item("instructions", p.instructions)?;
        d.set_item("elements", p.elements)?;
        Ok(d)
    }

    /// Decodes the whole capture and counts its elements by kind name
    /// (`Element.kind`), without making Python objects.
    fn count(&self, py: Python<'_>) -> PyResult<HashMap<&'static str, u64>> {
        let mut stream = self.stream(py)?;
        let r = py.detach(move || {
            let mut counts: HashMap<&'static str, u64> = HashMap::new();
            while let Some(i) = stream.next_item() {
                *counts.entry(i?.element.kind_name()).or_default() += 1;
            }
            Ok::<_, String>(counts)
        });
        r.map_err(DecodeError::new_err)
    }

    fn __repr__(&self) -> String {
        format!("Trace({})", self.description)
    }
}

struct IterState {
    stream: Box<dyn Stream>,
    pending: VecDeque<Item>,
    error: Option<String>,
    done: bool,
}

impl IterState {
    /// Decodes up to a chunk of elements (no GIL needed).
    fn fill(&mut self) {
        while !self.done && self.pending.len() < ELEMENT_CHUNK {
            match self.stream.next_item() {
                Some(Ok(i)) => self.pending.push_back(i),
                Some(Err(e)) => {
                    self.error = Some(e);
                    self.done = true;
                }
                None => self.done = true,
            }
        }
    }
}

/// An iterator over a capture's elements.
#[pyclass(module = "coresight_decode._native", frozen)]
struct ElementIter {
    state: Mutex<IterState>,
}

#[pymethods]
impl ElementIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Element>> {
        // Taken without blocking while attached; blocking only when
        // detached, so a thread holding the lock never waits for the GIL
        // held by one waiting for the lock.
        if let Ok(mut s) = self.state.try_lock()
            && let Some(i) = s.pending.pop_front()
        {
            return Ok(Some(Element(i)));
        }
        let next = py.detach(|| {
            let mut s = lock(&self.state);
            if s.pending.is_empty() {
                s.fill();
            }
            match s.pending.pop_front() {
                Some(i) => Ok(Some(i)),
                None => s.error.take().map_or(Ok(None), Err),
            }
        });
        match next {
            Ok(i) => Ok(i.map(Element)),
            Err(e) => Err(DecodeError::new_err(e)),
        }
    }
}

fn to_py<'py>(py: Python<'py>, v: &Val) -> PyResult<Bound<'py, PyAny>> {
    match v {
        Val::U(u) => u.into_bound_py_any(py),
        Val::B(b) => b.into_bound_py_any(py),
        Val::S(s) => s.into_bound_py_any(py),
        Val::Text(s) => s.into_bound_py_any(py),
        Val::Map(m) => {
            let d = PyDict::new(py);
            for (k, v) in m {
                d.set_item(k, to_py(py, v)?)?;
            }
            Ok(d.into_any())
        }
    }
}

/// One decoded element: where it came from (`index`, `trace_id`, and for
/// perf.data `cpu`, `pid`, `tid`), its `kind` and that kind's fields as
/// attributes (`e.start`, `e.last["kind"]`...; see `fields`).
#[pyclass(module = "coresight_decode._native", frozen, name = "Element")]
struct Element(Item);

#[pymethods]
impl Element {
    /// Trace index: byte offset in the buffer of the packet (or frame) the
    /// element was decoded from.
    #[getter]
    fn index(&self) -> u64 {
        self.0.index
    }

    /// Trace ID of the source (0 for an unformatted single source).
    #[getter]
    fn trace_id(&self) -> u8 {
        self.0.trace_id
    }

    /// The kind: `instr_range`, `pe_context`, `exception`, `timestamp`...
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.element.kind_name()
    }

    /// The element as OpenCSD's listing prints it.
    #[getter]
    fn text(&self) -> String {
        self.0.element.to_string()
    }

    /// The CPU (perf.data only).
    #[getter]
    fn cpu(&self) -> Option<u32> {
        self.0.origin.map(|o| o.cpu)
    }

    /// Index of the AUX buffer in the recording (perf.data only).
    #[getter]
    fn buffer(&self) -> Option<u32> {
        self.0.origin.map(|o| o.buffer)
    }

    /// The process, -1 when unknown (perf.data only).
    #[getter]
    fn pid(&self) -> Option<i32> {
        self.0.origin.map(|o| o.pid)
    }

    /// The thread, -1 when unknown (perf.data only).
    #[getter]
    fn tid(&self) -> Option<i32> {
        self.0.origin.map(|o| o.tid)
    }

    /// The kind's fields (optional ones only when the trace gave them).
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in fields::fields(&self.0.element) {
            d.set_item(k, to_py(py, &v)?)?;
        }
        Ok(d)
    }

    /// `{"index", "trace_id", "type", fields...}`: the object
    /// `trc_decode --format json` writes, with integers for its hex
    /// strings.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("index", self.0.index)?;
        d.set_item("trace_id", self.0.trace_id)?;
        d.set_item("type", self.0.element.kind_name())?;
        for (k, v) in fields::fields(&self.0.element) {
            d.set_item(k, to_py(py, &v)?)?;
        }
        Ok(d)
    }

    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        match fields::fields(&self.0.element).iter().find(|(k, _)| *k == name) {
            Some((_, v)) => to_py(py, v),
            None => Err(PyAttributeError::new_err(format!(
                "a {} element has no field '{name}'",
                self.0.element.kind_name()
            ))),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Element(index={}, trace_id=0x{:x}, {})",
            self.0.index, self.0.trace_id, self.0.element
        )
    }
}

struct BatchState {
    stream: Box<dyn Stream>,
    batcher: Batcher,
    ready: VecDeque<(Kind, RecordBatch)>,
    error: Option<String>,
    done: bool,
}

impl BatchState {
    /// Decodes until a batch is full or the decode ends.
    fn fill(&mut self) -> Result<(), String> {
        while self.ready.is_empty() && !self.done {
            let (batcher, ready) = (&mut self.batcher, &mut self.ready);
            let mut failed = None;
            let fed = self.stream.feed(&mut |i| match batcher.push(&i) {
                Ok(None) => false,
                Ok(Some(b)) => {
                    ready.push_back(b);
                    true
                }
                Err(e) => {
                    failed = Some(e);
                    true
                }
            });
            if let Some(e) = failed {
                return Err(e);
            }
            match fed {
                Fed::Stopped => {}
                Fed::End => self.done = true,
                Fed::Failed(e) => {
                    self.error = Some(e);
                    self.done = true;
                }
            }
            if self.done {
                self.ready.extend(self.batcher.flush()?);
            }
        }
        Ok(())
    }
}

/// Where batches come from: a decode tree filling the columns itself, or
/// elements pulled from a stream (perf.data).
enum Batches {
    Pushed(Box<PushBatches>),
    Pulled(Box<BatchState>),
}

impl Batches {
    fn next_batch(&mut self) -> Result<Option<(Kind, RecordBatch)>, String> {
        match self {
            Batches::Pushed(p) => p.next_batch(),
            Batches::Pulled(s) => {
                s.fill()?;
                match s.ready.pop_front() {
                    Some(b) => Ok(Some(b)),
                    None => s.error.take().map_or(Ok(None), Err),
                }
            }
        }
    }
}

/// An iterator over a capture's elements as `(kind, ArrowBatch)` pairs.
#[pyclass(module = "coresight_decode._native", frozen)]
struct BatchIter {
    state: Mutex<Batches>,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = py.detach(|| lock(&self.state).next_batch());
        match next {
            Ok(Some((k, b))) => {
                let batch = Bound::new(py, ArrowBatch { kind: k, batch: b })?;
                Ok(Some(PyTuple::new(
                    py,
                    [k.name().into_bound_py_any(py)?, batch.into_any()],
                )?))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(DecodeError::new_err(e)),
        }
    }
}

fn arrow_err(e: arrow_schema::ArrowError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A record batch exported through the Arrow PyCapsule interface
/// (`pyarrow.record_batch(b)` imports it without a copy).
#[pyclass(module = "coresight_decode._native", frozen)]
struct ArrowBatch {
    kind: Kind,
    batch: RecordBatch,
}

#[pymethods]
impl ArrowBatch {
    /// The element kind of its rows.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    /// Its number of rows.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let array = StructArray::from(self.batch.clone());
        let (array, _) = to_ffi(&array.to_data()).map_err(arrow_err)?;
        let schema = FFI_ArrowSchema::try_from(self.batch.schema().as_ref()).map_err(arrow_err)?;
        Ok((
            PyCapsule::new_with_value(py, schema, c"arrow_schema")?,
            PyCapsule::new_with_value(py, array, c"arrow_array")?,
        ))
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, self.kind)
    }

    fn __repr__(&self) -> String {
        format!(
            "ArrowBatch(kind={}, num_rows={})",
            self.kind.name(),
            self.batch.num_rows()
        )
    }
}

fn schema_capsule(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyCapsule>> {
    let schema = FFI_ArrowSchema::try_from(kind.schema().as_ref()).map_err(arrow_err)?;
    PyCapsule::new_with_value(py, schema, c"arrow_schema")
}

/// The Arrow schema of a kind's batches, exported through the Arrow
/// PyCapsule interface (`pyarrow.schema(s)`).
#[pyclass(module = "coresight_decode._native", frozen)]
struct ArrowSchema {
    kind: Kind,
}

#[pymethods]
impl ArrowSchema {
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, self.kind)
    }
}

/// The Arrow schema of the batches of element kind `kind` (one of
/// `KINDS`).
#[pyfunction]
fn schema(kind: &str) -> PyResult<ArrowSchema> {
    Kind::from_name(kind)
        .map(|kind| ArrowSchema { kind })
        .ok_or_else(|| PyValueError::new_err(format!("no element kind '{kind}'")))
}

/// A benchmark reference: opens the snapshot `path` (buffer `buffer`)
/// with the Rust pull API (`coresight_decode::pull::Trace`) and counts its
/// elements, with no Python object per element and the GIL released.
/// Returns `(elements, seconds)`, the time from opening the snapshot to
/// the last element.
#[pyfunction]
#[pyo3(signature = (path, buffer=None))]
fn pull_count(py: Python<'_>, path: PathBuf, buffer: Option<String>) -> PyResult<(u64, f64)> {
    py.detach(move || {
        let start = std::time::Instant::now();
        let t = match &buffer {
            Some(b) => coresight_decode::pull::Trace::open_buffer(&path, b),
            None => coresight_decode::pull::Trace::open(&path),
        }
        .map_err(|e| OpenError::new_err(format!("{}: {e}", path.display())))?;
        let mut n = 0u64;
        for d in t {
            d.map_err(|e| DecodeError::new_err(e.to_string()))?;
            n += 1;
        }
        Ok((n, start.elapsed().as_secs_f64()))
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Trace>()?;
    m.add_class::<Element>()?;
    m.add_class::<ElementIter>()?;
    m.add_class::<BatchIter>()?;
    m.add_class::<ArrowBatch>()?;
    m.add_class::<ArrowSchema>()?;
    m.add_class::<branch_list::PyBranchList>()?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(pull_count, m)?)?;
    m.add("KINDS", Kind::ALL.map(|k| k.name()).to_vec())?;
    m.add("CoreSightError", py.get_type::<CoreSightError>())?;
    m.add("OpenError", py.get_type::<OpenError>())?;
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    Ok(())
}
