//! Bindings of the indexed-dataset reader, writer and merge.

use std::path::PathBuf;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokshuf_core::indexed::{self, IndexedDataset, IndexedDatasetWriter, RemoteBin, Validate};
use tokshuf_core::{DType, Error};

use crate::buffer::PyMappedBuffer;
use crate::errors::IntoPyResult;
use crate::long_call::run_detached;
use crate::open::{Open, WRITER_GONE};
use crate::summary::{file_bytes, to_python, PyJson};

/// The size and CRC32C (8 hex digits) of the file at `path`, as commit records list them.
#[pyfunction]
pub(crate) fn checksum_file(py: Python<'_>, path: PathBuf) -> PyResult<(u64, String)> {
    run_detached(py, move |_| {
        let sum = tokshuf_core::fsutil::record::Checksum::of_file(&path)?;
        Ok((sum.bytes, sum.hex()))
    })
}

/// A commit record's `run` or `inputs` (any JSON-like Python value).
fn record_field(py: Python<'_>, what: &str, value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    serde_json::to_value(PyJson(value)).map_err(|e| Error::invalid(format!("{what}: {e}"))).into_py(py)
}

/// Outputs staged under temporary names, committed together as one set by a commit record
/// (`tokshuf merge --parts`: every key's merged pair and the summary).
#[pyclass(module = "tokshuf._core", name = "StagedSet")]
pub(crate) struct PyStagedSet {
    inner: Open<tokshuf_core::fsutil::Staging>,
}

#[pymethods]
impl PyStagedSet {
    #[new]
    fn new() -> Self {
        Self { inner: Open::new(tokshuf_core::fsutil::Staging::new(), "the set is already committed") }
    }

    /// Merge `prefixes` into `output`, staged in this set; returns the counts.
    fn merge<'py>(&mut self, py: Python<'py>, prefixes: Vec<PathBuf>, output: PathBuf) -> PyResult<Bound<'py, PyAny>> {
        let staging = self.inner.get().into_py(py)?;
        let (written, staged) = run_detached(py, |_| {
            indexed::check_merge_outputs(&prefixes, &output, &[])?;
            indexed::merge_staged(&prefixes, &output)
        })?;
        staging.extend(staged);
        to_python(py, &written)
    }

    /// Add the summary file `summary` (its path and the summary), then move everything into
    /// place, published by the record at `record`.
    #[pyo3(signature = (record, command, run, inputs, summary=None))]
    fn commit(
        &mut self,
        py: Python<'_>,
        record: PathBuf,
        command: String,
        run: &Bound<'_, PyAny>,
        inputs: &Bound<'_, PyAny>,
        summary: Option<(PathBuf, Bound<'_, PyAny>)>,
    ) -> PyResult<()> {
        let (run, inputs) = (record_field(py, "run", run)?, record_field(py, "inputs", inputs)?);
        let summary = summary.map(|(path, s)| file_bytes(&s).map(|data| (path, data))).transpose()?;
        let mut staging = self.inner.take().into_py(py)?;
        run_detached(py, move |_| {
            if let Some((path, data)) = &summary {
                staging.add_index_bytes(path, data)?;
            }
            staging.set_record(tokshuf_core::fsutil::RecordSpec { path: record, command, run, inputs });
            staging.commit()
        })
    }
}

/// Publish local files as one set in an object store: a `writing` record at `record` first, then
/// every `(local path, URL)` of `files` uploaded in order, then the summary file `summary` (URL,
/// summary), then the committed record listing each with its size, checksum and ETag.
#[pyfunction]
#[pyo3(signature = (record, command, run, inputs, files, summary=None))]
pub(crate) fn publish_remote(
    py: Python<'_>,
    record: String,
    command: String,
    run: &Bound<'_, PyAny>,
    inputs: &Bound<'_, PyAny>,
    files: Vec<(PathBuf, String)>,
    summary: Option<(String, Bound<'_, PyAny>)>,
) -> PyResult<()> {
    use tokshuf_core::fsutil::record::{self as rec, Checksum, RemoteFile};
    let (run, inputs) = (record_field(py, "run", run)?, record_field(py, "inputs", inputs)?);
    let summary = summary.map(|(to, s)| file_bytes(&s).map(|bytes| (to, bytes))).transpose()?;
    run_detached(py, move |cancel| {
        let mut uploads = Vec::new();
        for (from, to) in files {
            let sum = Checksum::of_file(&from)?;
            uploads.push(RemoteFile::upload(from, PathBuf::from(to), sum));
        }
        if let Some((to, bytes)) = summary {
            let sum = Checksum::of(&bytes);
            uploads.push(RemoteFile::bytes(bytes, PathBuf::from(to), sum));
        }
        let spec = tokshuf_core::fsutil::RecordSpec { path: PathBuf::from(record), command, run, inputs };
        rec::publish_remote(&spec, uploads, cancel)
    })
}

/// The local prefix of copies of the `.bin/.idx` pair `prefix` in a store, both of one committed
/// version (downloaded as needed, GIL released, and checked against the set's commit record).
#[pyfunction]
pub(crate) fn local_pair(py: Python<'_>, prefix: String) -> PyResult<String> {
    run_detached(py, move |_| indexed::local_pair(&prefix).map(|p| p.to_string_lossy().into_owned()))
}

/// Testing only: fail every write or rename of an output file from the `n + 1`-th on with
/// ENOSPC, as a full disk would, or with `crash` end the process there as a kill would (`None`
/// disarms). Returns the points passed since the previous call.
#[pyfunction]
#[pyo3(signature = (n, crash=false))]
pub(crate) fn _fail_writes_after(n: Option<u64>, crash: bool) -> u64 {
    let passed = tokshuf_core::fsutil::fault::passed();
    tokshuf_core::fsutil::fault::arm(n, crash);
    passed
}

/// A validated, memory-mapped `.bin/.idx` pair; `tokshuf.IndexedDataset` builds numpy views on it.
#[pyclass(frozen, module = "tokshuf._core", name = "IndexReader")]
pub(crate) struct PyIndexReader {
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

/// Streaming writer of one indexed dataset (temporary files until `finish`).
#[pyclass(module = "tokshuf._core", name = "IndexWriter")]
pub(crate) struct PyIndexWriter {
    inner: Open<IndexedDatasetWriter>,
}

#[pymethods]
impl PyIndexWriter {
    #[new]
    #[pyo3(signature = (prefix, dtype, multimodal=false))]
    fn new(py: Python<'_>, prefix: PathBuf, dtype: &str, multimodal: bool) -> PyResult<Self> {
        let dtype: DType = dtype.parse().into_py(py)?;
        let inner = IndexedDatasetWriter::create(prefix, dtype, multimodal).into_py(py)?;
        Ok(Self { inner: Open::new(inner, WRITER_GONE) })
    }

    /// Append one sequence given as the raw little-endian bytes of the writer's dtype.
    #[pyo3(signature = (data, mode=None))]
    fn add_sequence_bytes(&mut self, py: Python<'_>, data: PyBuffer<u8>, mode: Option<i8>) -> PyResult<()> {
        let bytes = data.to_vec(py)?;
        self.inner.get().and_then(|w| w.add_sequence_bytes(&bytes, mode)).into_py(py)
    }

    fn end_document(&mut self, py: Python<'_>) -> PyResult<()> {
        self.inner.get().and_then(|w| w.end_document()).into_py(py)
    }

    /// Append every document of the dataset at `prefix` (Megatron's `add_index`).
    fn append(&mut self, py: Python<'_>, prefix: PathBuf) -> PyResult<()> {
        let writer = self.inner.get().into_py(py)?;
        py.detach(|| {
            let other = IndexedDataset::open(&prefix, None, Validate::Full)?;
            writer.append(&other)
        })
        .into_py(py)
    }

    /// Write the `.idx` and move both files into place, published by the pair's commit record;
    /// returns counts.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let writer = self.inner.take();
        let summary =
            py.detach(|| writer?.finish_as_set("IndexedDatasetWriter", serde_json::Value::Null)).into_py(py)?;
        to_python(py, &summary)
    }

    /// Discard everything written (temporary files are removed).
    fn abort(&mut self) {
        self.inner.abort();
    }
}

/// Concatenate datasets into `output_prefix` (every input must share one dtype); with
/// `summary_path`, the counts are also written there as JSON, committed with the pair.
#[pyfunction]
#[pyo3(signature = (prefixes, output_prefix, summary_path=None))]
pub(crate) fn merge<'py>(
    py: Python<'py>,
    prefixes: Vec<PathBuf>,
    output_prefix: PathBuf,
    summary_path: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let summary = run_detached(py, |_| indexed::merge(&prefixes, &output_prefix, summary_path.as_deref()))?;
    to_python(py, &summary)
}

/// Prefixes of the `.bin/.idx` pairs in a directory, sorted as Megatron's merge tool sorts them.
#[pyfunction]
pub(crate) fn list_prefixes(py: Python<'_>, directory: PathBuf) -> PyResult<Vec<PathBuf>> {
    indexed::list_prefixes(&directory).into_py(py)
}

/// Write an `.idx` from int32 lengths, int64 document indices and optional int8 modes (any
/// C-contiguous buffers of those types, e.g. numpy arrays), atomically; returns its size.
#[pyfunction]
#[pyo3(signature = (path, dtype, sequence_lengths, document_indices, sequence_modes=None))]
pub(crate) fn write_index(
    py: Python<'_>,
    path: PathBuf,
    dtype: &str,
    sequence_lengths: PyBuffer<i32>,
    document_indices: PyBuffer<i64>,
    sequence_modes: Option<PyBuffer<i8>>,
) -> PyResult<u64> {
    let dtype: DType = dtype.parse().into_py(py)?;
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
