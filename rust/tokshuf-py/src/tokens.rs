//! Bindings of flat token files (OLMo's `.npy`): document scans, Dolma metadata, writing.

use std::path::PathBuf;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use tokshuf_core::fsutil::{check_outputs_are_not_inputs, record, RecordSpec};
use tokshuf_core::indexed::{self, IndexedDataset, Validate};
use tokshuf_core::tokens::{self, TokenArray, TokenFileWriter, TokenType};

use crate::arrays::{spans_in, spans_out};
use crate::buffer::PyMappedBuffer;
use crate::errors::IntoPyResult;
use crate::long_call::run_detached;
use crate::open::{Open, WRITER_GONE};

/// `(start, end)` of every document of an OLMo token file, by scanning for EOS (and BOS).
#[pyfunction]
#[pyo3(signature = (path, dtype, eos_token_id, bos_token_id=None, num_threads=None))]
pub(crate) fn scan_documents(
    py: Python<'_>,
    path: PathBuf,
    dtype: &str,
    eos_token_id: u64,
    bos_token_id: Option<u64>,
    num_threads: Option<usize>,
) -> PyResult<PyMappedBuffer> {
    let ty: TokenType = dtype.parse().into_py(py)?;
    let spans = run_detached(py, |cancel| {
        let arr = TokenArray::open(&path, ty)?;
        tokens::document_spans(&arr, eos_token_id, bos_token_id, num_threads, cancel)
    })?;
    Ok(spans_out(&spans))
}

/// Documents of an indexed dataset as spans of its `.bin`; returns (spans, token dtype, tokens).
#[pyfunction]
pub(crate) fn indexed_documents(py: Python<'_>, prefix: PathBuf) -> PyResult<(PyMappedBuffer, &'static str, u64)> {
    let (spans, ty, n) = run_detached(py, |_| {
        let ds = IndexedDataset::open(&prefix, None, Validate::Full)?;
        let arr = TokenArray::from_indexed(&ds)?;
        Ok((tokens::indexed_document_spans(&ds)?, arr.token_type(), arr.len()))
    })?;
    Ok((spans_out(&spans), ty.name(), n))
}

/// Spans from a Dolma `.csv.gz`, checked against `num_tokens`.
#[pyfunction]
pub(crate) fn read_metadata(py: Python<'_>, path: PathBuf, num_tokens: u64) -> PyResult<PyMappedBuffer> {
    let spans = run_detached(py, |_| tokens::read_metadata(&path, num_tokens))?;
    Ok(spans_out(&spans))
}

/// Write Dolma metadata rows for `spans` (an `(n, 2)` uint64 array).
#[pyfunction]
pub(crate) fn write_metadata(py: Python<'_>, path: PathBuf, spans: PyBuffer<u64>, src: &str) -> PyResult<()> {
    let spans = spans_in(py, &spans)?;
    run_detached(py, |_| tokens::write_metadata(&path, &spans, src))
}

/// Copy an indexed dataset into an OLMo token file (and, given paths, its Dolma metadata and the
/// run's summary), published as one set by `{output}.commit.json`; returns the documents' spans.
#[pyfunction]
#[pyo3(signature = (prefix, output, dtype, append_eos=None, metadata_path=None, summary_path=None))]
pub(crate) fn convert_indexed(
    py: Python<'_>,
    prefix: PathBuf,
    output: PathBuf,
    dtype: &str,
    append_eos: Option<u64>,
    metadata_path: Option<PathBuf>,
    summary_path: Option<PathBuf>,
) -> PyResult<PyMappedBuffer> {
    let ty: TokenType = dtype.parse().into_py(py)?;
    let src = prefix.to_string_lossy().into_owned();
    let spans = run_detached(py, |cancel| {
        let inputs = [indexed::bin_path(&prefix), indexed::idx_path(&prefix)];
        let record_path = record::record_path(&output);
        let mut outputs = vec![output.clone(), record_path.clone()];
        outputs.extend(metadata_path.iter().chain(summary_path.iter()).cloned());
        check_outputs_are_not_inputs(&outputs, &inputs)?;
        if let Some(dir) = output.parent() {
            record::recover_dir(dir)?;
        }
        let identity = record::listing_identity(&inputs)?;
        let ds = IndexedDataset::open(&prefix, None, Validate::Full)?;
        let also = tokens::ConvertOutputs {
            metadata: metadata_path.as_deref().map(|m| (m, src.as_str())),
            summary: summary_path.as_deref(),
            record: Some(RecordSpec {
                path: record_path,
                command: "olmo-convert".into(),
                run: serde_json::Value::Null,
                inputs: identity,
            }),
        };
        tokens::convert_indexed(&ds, &output, ty, append_eos, also, cancel)
    })?;
    Ok(spans_out(&spans))
}

/// Streaming writer of one OLMo token file (a temporary file until `finish`).
#[pyclass(module = "tokshuf._core", name = "TokenWriter")]
pub(crate) struct PyTokenWriter {
    inner: Open<TokenFileWriter>,
}

#[pymethods]
impl PyTokenWriter {
    #[new]
    fn new(py: Python<'_>, path: PathBuf, dtype: &str) -> PyResult<Self> {
        let ty: TokenType = dtype.parse().into_py(py)?;
        let inner = TokenFileWriter::create(path, ty).into_py(py)?;
        Ok(Self { inner: Open::new(inner, WRITER_GONE) })
    }

    /// Append tokens (a uint64 buffer).
    fn write(&mut self, py: Python<'_>, tokens: PyBuffer<u64>) -> PyResult<()> {
        let v = tokens.to_vec(py)?;
        self.inner.get().and_then(|w| w.write(&v)).into_py(py)
    }

    /// Tokens written so far.
    #[getter]
    fn tokens(&self) -> u64 {
        self.inner.peek().map_or(0, TokenFileWriter::tokens)
    }

    /// Move the file into place; returns the number of tokens.
    fn finish(&mut self, py: Python<'_>) -> PyResult<u64> {
        let w = self.inner.take();
        py.detach(|| w?.finish()).into_py(py)
    }

    /// Discard the file.
    fn abort(&mut self) {
        self.inner.abort();
    }
}
