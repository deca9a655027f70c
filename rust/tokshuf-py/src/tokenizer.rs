//! Binding of the tokenizers: `tokshuf.Tokenizer` wraps [`PyTokenizer`].

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tokshuf_core::tokenize::tiktoken_files::{embedded_ranks, known_encoding, KNOWN_ENCODINGS};
use tokshuf_core::tokenize::{self, build, encode_many, resolve, Tokenizer, TokenizerSpec};
use tokshuf_core::{Cancel, Error};

use crate::errors::IntoPyResult;
use crate::long_call::run_detached;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTokenizer>()?;
    m.add_function(wrap_pyfunction!(tiktoken_encoding_data, m)?)?;
    Ok(())
}

/// A loaded tokenizer shared by every thread that uses it.
#[pyclass(frozen, module = "tokshuf._core", name = "Tokenizer")]
pub struct PyTokenizer {
    inner: Arc<dyn Tokenizer>,
    spec: String,
}

impl PyTokenizer {
    /// The shared tokenizer, for other bindings (preprocess).
    pub fn shared(&self) -> Arc<dyn Tokenizer> {
        Arc::clone(&self.inner)
    }
}

fn load(
    spec: TokenizerSpec,
    eod_id: Option<u32>,
    special_tokens: Option<Vec<(String, u32)>>,
) -> Result<Arc<dyn Tokenizer>, Error> {
    let mut model = resolve(&spec)?;
    if let Some(specials) = special_tokens {
        model = tokenize::with_special_tokens(model, specials)?;
    }
    let tok = build(&model)?;
    match eod_id {
        Some(id) => tokenize::with_eod(tok, id),
        None => Ok(tok),
    }
}

#[pymethods]
impl PyTokenizer {
    #[new]
    #[pyo3(signature = (spec, eod_id=None, special_tokens=None))]
    fn new(
        py: Python<'_>,
        spec: &str,
        eod_id: Option<u32>,
        special_tokens: Option<Vec<(String, u32)>>,
    ) -> PyResult<Self> {
        let spec = spec.to_string();
        let inner =
            py.detach(|| TokenizerSpec::parse(&spec).and_then(|s| load(s, eod_id, special_tokens))).into_py(py)?;
        Ok(Self { inner, spec })
    }

    /// A Hugging Face tokenizer from its JSON (`tokenizers.Tokenizer.to_str()`).
    #[staticmethod]
    #[pyo3(signature = (json, origin="tokenizers.Tokenizer", eod_id=None))]
    fn from_hf_json(py: Python<'_>, json: String, origin: &str, eod_id: Option<u32>) -> PyResult<Self> {
        let origin = origin.to_string();
        let spec = TokenizerSpec::HfJson { json, origin: origin.clone() };
        let inner = py.detach(|| load(spec, eod_id, None)).into_py(py)?;
        Ok(Self { inner, spec: origin })
    }

    #[getter]
    fn spec(&self) -> &str {
        &self.spec
    }

    #[getter]
    fn eod_id(&self) -> Option<u32> {
        self.inner.eod_id()
    }

    #[getter]
    fn vocab_size(&self) -> u64 {
        self.inner.vocab_size()
    }

    /// The identity record (JSON text).
    fn identity_json(&self) -> String {
        self.inner.identity().to_string()
    }

    fn encode(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        let out = py.detach(|| encode_many(self.inner.as_ref(), &[text], Some(1), &Cancel::new())).into_py(py)?;
        Ok(out.ids)
    }

    /// Ids of every text as a list of lists, encoded in parallel with the GIL released.
    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tok = Arc::clone(&self.inner);
        let out = run_detached(py, move |cancel| encode_many(tok.as_ref(), &texts, num_threads, cancel))?;
        let lists = out.offsets.windows(2).map(|w| &out.ids[w[0] as usize..w[1] as usize]);
        PyList::new(py, lists)
    }

    /// (ids as little-endian uint32 bytes, offsets as little-endian int64 bytes), for numpy.
    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch_flat<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        num_threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let tok = Arc::clone(&self.inner);
        let out = run_detached(py, move |cancel| encode_many(tok.as_ref(), &texts, num_threads, cancel))?;
        let ids: Vec<u8> = out.ids.iter().flat_map(|i| i.to_le_bytes()).collect();
        let offsets: Vec<u8> = out.offsets.iter().flat_map(|&o| (o as i64).to_le_bytes()).collect();
        Ok((PyBytes::new(py, &ids), PyBytes::new(py, &offsets)))
    }
}

/// The data of an OpenAI encoding as embedded here: `.tiktoken` file bytes, split pattern and
/// special tokens (to build a `tiktoken.Encoding` offline).
#[pyfunction]
fn tiktoken_encoding_data<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let enc = known_encoding(name)
        .ok_or_else(|| {
            let names: Vec<&str> = KNOWN_ENCODINGS.iter().map(|e| e.name).collect();
            Error::invalid(format!("unknown encoding {name:?} (expected one of: {}, gpt2)", names.join(", ")))
        })
        .into_py(py)?;
    let ranks = py.detach(|| embedded_ranks(enc)).into_py(py)?;
    let file = py.detach(|| ranks.to_tiktoken_file());
    let d = PyDict::new(py);
    d.set_item("name", enc.name)?;
    d.set_item("pat_str", enc.pattern.regex())?;
    d.set_item("special_tokens", enc.specials())?;
    d.set_item("tiktoken_file", PyBytes::new(py, &file))?;
    d.set_item("sha256", &ranks.sha256)?;
    Ok(d)
}
