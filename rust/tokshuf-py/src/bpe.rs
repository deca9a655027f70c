//! Binding of the fast byte-level BPE encoder (`tokshuf._core.BpeEncoder`).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use tokshuf_core::tokenize::bpe::{FastBpe, Pattern};
use tokshuf_core::Error;

use crate::errors::IntoPyResult;
use crate::index_array::PyIndexArray;
use crate::tokenizer::{encode_texts, flat_arrays, DETACH_BYTES};

/// The regex of a split pattern, by any of its names (`cl100k`, `llama3`, `qwen2`, ...).
#[pyfunction]
pub(crate) fn split_pattern_regex(py: Python<'_>, name: &str) -> PyResult<&'static str> {
    let pattern: Pattern = name.parse().map_err(Error::from).into_py(py)?;
    Ok(pattern.regex())
}

/// Exact byte-level BPE: the OpenAI encodings, rank files, and the `tokenizer.json` files whose
/// pipeline it reproduces.
#[pyclass(frozen, module = "tokshuf._core", name = "BpeEncoder")]
pub(crate) struct PyBpeEncoder {
    inner: Arc<FastBpe>,
}

fn wrap(inner: FastBpe, specials_in_text: bool) -> PyBpeEncoder {
    let inner = tokshuf_core::tokenize::with_caches(inner).with_special_tokens_in_text(specials_in_text);
    PyBpeEncoder { inner: Arc::new(inner) }
}

#[pymethods]
impl PyBpeEncoder {
    /// An OpenAI encoding embedded in the extension (`cl100k_base`, ...).
    #[staticmethod]
    #[pyo3(signature = (name, special_tokens_in_text=false))]
    fn from_tiktoken(py: Python<'_>, name: String, special_tokens_in_text: bool) -> PyResult<Self> {
        let inner = py.detach(|| FastBpe::from_tiktoken(&name)).map_err(Error::from).into_py(py)?;
        Ok(wrap(inner, special_tokens_in_text))
    }

    /// A Hugging Face `tokenizer.json`; `ConfigError` names what the fast path does not support.
    #[staticmethod]
    #[pyo3(signature = (path, special_tokens_in_text=false))]
    fn from_hf_file(py: Python<'_>, path: PathBuf, special_tokens_in_text: bool) -> PyResult<Self> {
        let inner = py
            .detach(|| {
                let json = std::fs::read_to_string(&path).map_err(|e| Error::Io { path: path.clone(), source: e })?;
                FastBpe::from_hf_json(&json).map_err(|e| Error::invalid(format!("{}: {e}", path.display())))
            })
            .into_py(py)?;
        Ok(wrap(inner, special_tokens_in_text))
    }

    /// The ids of one text.
    fn encode(&self, py: Python<'_>, text: &str) -> Vec<u32> {
        if text.len() < DETACH_BYTES {
            self.inner.encode(text)
        } else {
            py.detach(|| self.inner.encode(text))
        }
    }

    /// `(ids, offsets)` of many texts as arrays numpy views in place (uint32 ids, int64 offsets),
    /// encoded on `num_threads` threads.
    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch(
        &self,
        py: Python<'_>,
        texts: Vec<Bound<'_, PyString>>,
        num_threads: Option<usize>,
    ) -> PyResult<(PyIndexArray, PyIndexArray)> {
        Ok(flat_arrays(encode_texts(py, self.inner.as_ref(), &texts, num_threads)?))
    }

    /// `{token bytes: id}` of the BPE tokens (tiktoken's `mergeable_ranks` for its encodings).
    fn mergeable_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, bytes) in self.inner.tokens() {
            d.set_item(PyBytes::new(py, bytes), id)?;
        }
        Ok(d)
    }

    /// How text is split into pieces: a split pattern's name (`cl100k`), or `regex`, ...
    #[getter]
    fn pattern(&self) -> String {
        self.inner.pre_tokenizer()
    }

    #[getter]
    fn vocab_size(&self) -> u64 {
        self.inner.vocab_size()
    }

    #[getter]
    fn eod_id(&self) -> Option<u32> {
        self.inner.eod_id()
    }

    /// The tokenizer's identity as a JSON string.
    #[getter]
    fn identity(&self) -> String {
        self.inner.identity().to_string()
    }
}
