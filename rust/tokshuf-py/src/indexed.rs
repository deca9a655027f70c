//! Bindings of the indexed-dataset reader, writer and merge.

use std::path::PathBuf;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tokshuf_core::indexed::{self, IndexedDataset, IndexedDatasetWriter, RemoteBin, Validate, WriteSummary};
use tokshuf_core::{DType, Error};

use crate::buffer::PyMappedBuffer;
use crate::errors::IntoPyResult;
use crate::long_call::run_detached;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyIndexReader>()?;
    m.add_class::<PyIndexWriter>()?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(list_prefixes, m)?)?;
    m.add_function(wrap_pyfunction!(write_index, m)?)?;
    m.add_function(wrap_pyfunction!(_fail_writes_after, m)?)?;
    Ok(())
}

/// Testing only: fail every write or rename of an output file from the `n + 1`-th on with
/// ENOSPC, as a full disk would, or with `crash` end the process there as a kill would (`None`
/// disarms). Returns the points passed since the previous call.
#[pyfunction]
#[pyo3(signature = (n, crash=false))]
fn _fail_writes_after(n: Option<u64>, crash: bool) -> u64 {
    let passed = tokshuf_core::fsutil::fault::passed();
    tokshuf_core::fsutil::fault::arm(n, crash);
    passed
}

fn parse_dtype(name: &str) -> Result<DType, Error> {
    name.parse()
}

/// A validated, memory-mapped `.bin/.idx` pair; `tokshuf.IndexedDataset` builds numpy views on it.
#[pyclass(frozen, module = "tokshuf._core", name = "IndexReader")]
pub struct PyIndexReader {
    inner: IndexedDataset,
}

#[pymethods]
impl PyIndexReader {
    #[new]
    #[pyo3(signature = (prefix, multimodal=None, validate=true, remote="copy"))]
    fn new(py: Python<'_>, prefix: PathBuf, multimodal: Option<bool>, validate: bool, remote: &str) -> PyResult<Self> {
        let level = if validate { Validate::Full } else { Validate::Header };
        let remote: RemoteBin = remote.parse().into_py(py)?;
        let inner = run_detached(py, |_| IndexedDataset::open_with(&prefix, multimodal, level, remote))?;
        Ok(Self { inner })
    }

    /// Whether the `.bin` is an object read by ranged requests (no `bin_buffer`).
    #[getter]
    fn ranged(&self) -> bool {
        self.inner.is_ranged()
    }

    /// Size of the `.bin` in bytes.
    #[getter]
    fn bin_len(&self) -> u64 {
        self.inner.bin_len()
    }

    /// Bytes `start..end` of the `.bin` (one ranged request for a `.bin` read by ranges).
    fn read_bin<'py>(&self, py: Python<'py>, start: u64, end: u64) -> PyResult<Bound<'py, PyBytes>> {
        let ds = &self.inner;
        let bytes = run_detached(py, |_| {
            if start > end {
                return Err(Error::invalid(format!("bytes {start}..{end}: the start is past the end")));
            }
            ds.read_range(start..end)
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[getter]
    fn prefix(&self) -> PathBuf {
        self.inner.prefix().to_path_buf()
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.dtype().name()
    }

    #[getter]
    fn dtype_code(&self) -> u8 {
        self.inner.dtype().code()
    }

    #[getter]
    fn sequence_count(&self) -> usize {
        self.inner.len()
    }

    #[getter]
    fn document_count(&self) -> usize {
        self.inner.num_documents() + 1
    }

    #[getter]
    fn multimodal(&self) -> bool {
        self.inner.multimodal()
    }

    /// Byte offsets of (sequence_lengths, sequence_pointers, document_indices, sequence_modes) in the `.idx`.
    #[getter]
    fn offsets(&self) -> (usize, usize, usize, usize) {
        let l = self.inner.layout();
        (l.lengths, l.pointers, l.document_indices, l.modes)
    }

    fn idx_buffer(&self) -> PyMappedBuffer {
        PyMappedBuffer::new(self.inner.idx_mapping().clone())
    }

    fn bin_buffer(&self, py: Python<'_>) -> PyResult<PyMappedBuffer> {
        Ok(PyMappedBuffer::new(self.inner.bin_mapping().into_py(py)?.clone()))
    }
}

fn summary_dict<'py>(py: Python<'py>, s: &WriteSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("documents", s.documents)?;
    d.set_item("sequences", s.sequences)?;
    d.set_item("tokens", s.tokens)?;
    d.set_item("bin_bytes", s.bin_bytes)?;
    d.set_item("idx_bytes", s.idx_bytes)?;
    Ok(d)
}

/// Streaming writer of one indexed dataset (temporary files until `finish`).
#[pyclass(module = "tokshuf._core", name = "IndexWriter")]
pub struct PyIndexWriter {
    inner: Option<IndexedDatasetWriter>,
}

impl PyIndexWriter {
    fn writer(&mut self) -> Result<&mut IndexedDatasetWriter, Error> {
        self.inner.as_mut().ok_or_else(|| Error::invalid("the writer is already finished or aborted"))
    }
}

#[pymethods]
impl PyIndexWriter {
    #[new]
    #[pyo3(signature = (prefix, dtype, multimodal=false))]
    fn new(py: Python<'_>, prefix: PathBuf, dtype: &str, multimodal: bool) -> PyResult<Self> {
        let dtype = parse_dtype(dtype).into_py(py)?;
        let inner = IndexedDatasetWriter::create(prefix, dtype, multimodal).into_py(py)?;
        Ok(Self { inner: Some(inner) })
    }

    /// Append one sequence given as the raw little-endian bytes of the writer's dtype.
    #[pyo3(signature = (data, mode=None))]
    fn add_sequence_bytes(&mut self, py: Python<'_>, data: PyBuffer<u8>, mode: Option<i8>) -> PyResult<()> {
        let bytes = data.to_vec(py)?;
        self.writer().and_then(|w| w.add_sequence_bytes(&bytes, mode)).into_py(py)
    }

    fn end_document(&mut self, py: Python<'_>) -> PyResult<()> {
        self.writer().and_then(|w| w.end_document()).into_py(py)
    }

    /// Append every document of the dataset at `prefix` (Megatron's `add_index`).
    fn append(&mut self, py: Python<'_>, prefix: PathBuf) -> PyResult<()> {
        let writer = self.writer().into_py(py)?;
        py.detach(|| {
            let other = IndexedDataset::open(&prefix, None, Validate::Full)?;
            writer.append(&other)
        })
        .into_py(py)
    }

    /// Write the `.idx` and move both files into place; returns counts.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let writer = self.inner.take().ok_or_else(|| Error::invalid("the writer is already finished or aborted"));
        let summary = py.detach(|| writer?.finish()).into_py(py)?;
        summary_dict(py, &summary)
    }

    /// Discard everything written (temporary files are removed).
    fn abort(&mut self) {
        self.inner = None;
    }
}

/// Concatenate datasets into `output_prefix` (every input must share one dtype).
#[pyfunction]
fn merge<'py>(py: Python<'py>, prefixes: Vec<PathBuf>, output_prefix: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let summary = run_detached(py, |_| indexed::merge(&prefixes, &output_prefix))?;
    summary_dict(py, &summary)
}

/// Prefixes of the `.bin/.idx` pairs in a directory, sorted as Megatron's merge tool sorts them.
#[pyfunction]
fn list_prefixes(py: Python<'_>, directory: PathBuf) -> PyResult<Vec<PathBuf>> {
    indexed::list_prefixes(&directory).into_py(py)
}

/// Write an `.idx` from int32 lengths, int64 document indices and optional int8 modes (any
/// C-contiguous buffers of those types, e.g. numpy arrays), atomically; returns its size.
#[pyfunction]
#[pyo3(signature = (path, dtype, sequence_lengths, document_indices, sequence_modes=None))]
fn write_index(
    py: Python<'_>,
    path: PathBuf,
    dtype: &str,
    sequence_lengths: PyBuffer<i32>,
    document_indices: PyBuffer<i64>,
    sequence_modes: Option<PyBuffer<i8>>,
) -> PyResult<u64> {
    let dtype = parse_dtype(dtype).into_py(py)?;
    let lengths = sequence_lengths.to_vec(py)?;
    let docs = document_indices
        .to_vec(py)?
        .into_iter()
        .map(|d| u64::try_from(d).map_err(|_| Error::invalid(format!("negative document index {d}"))))
        .collect::<Result<Vec<u64>, Error>>()
        .into_py(py)?;
    let modes = sequence_modes.map(|m| m.to_vec(py)).transpose()?;
    run_detached(py, |_| indexed::write_index_file(&path, dtype, &lengths, &docs, modes.as_deref()))
}
