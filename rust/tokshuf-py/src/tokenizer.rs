//! Binding of the tokenizers: `tokshuf.Tokenizer` wraps [`PyTokenizer`].

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use tokshuf_core::megatron::{IndexArray, Owned};
use tokshuf_core::tokenize::bpe::encodings::embedded;
use tokshuf_core::tokenize::{self, build, encode_many, resolve, EncodedTexts, Tokenizer, TokenizerSpec};
use tokshuf_core::{Cancel, Error};

use crate::errors::IntoPyResult;
use crate::index_array::PyIndexArray;
use crate::long_call::run_detached;

/// A loaded tokenizer shared by every thread that uses it.
#[pyclass(frozen, module = "tokshuf._core", name = "Tokenizer")]
pub(crate) struct PyTokenizer {
    inner: Arc<dyn Tokenizer>,
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
    #[pyo3(signature = (spec, eos_token_id=None, special_tokens=None))]
    fn new(
        py: Python<'_>,
        spec: &str,
        eos_token_id: Option<u32>,
        special_tokens: Option<Vec<(String, u32)>>,
    ) -> PyResult<Self> {
        let inner =
            py.detach(|| TokenizerSpec::parse(spec).and_then(|s| load(s, eos_token_id, special_tokens))).into_py(py)?;
        Ok(Self { inner })
    }

    /// A Hugging Face tokenizer from its JSON (`tokenizers.Tokenizer.to_str()`).
    #[staticmethod]
    #[pyo3(signature = (json, origin="tokenizers.Tokenizer", eos_token_id=None))]
    fn from_hf_json(py: Python<'_>, json: String, origin: &str, eos_token_id: Option<u32>) -> PyResult<Self> {
        let spec = TokenizerSpec::HfJson { json, origin: origin.to_string() };
        let inner = py.detach(|| load(spec, eos_token_id, None)).into_py(py)?;
        Ok(Self { inner })
    }

    #[getter]
    fn eos_token_id(&self) -> Option<u32> {
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
        let encode = || encode_many(self.inner.as_ref(), &[text], Some(1), &Cancel::new());
        // Short texts are not worth releasing the GIL for.
        let out = if text.len() < DETACH_BYTES { encode() } else { py.detach(encode) };
        Ok(out.into_py(py)?.ids)
    }

    /// Ids of every text as a list of lists, encoded in parallel with the GIL released.
    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let out = encode_texts(py, self.inner.as_ref(), &texts, num_threads)?;
        let lists = out.offsets.windows(2).map(|w| &out.ids[w[0] as usize..w[1] as usize]);
        PyList::new(py, lists)
    }

    /// `(ids, offsets)`: every text's ids as one uint32 array and `len(texts) + 1` int64
    /// offsets, handed to numpy without a copy.
    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch_flat<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        num_threads: Option<usize>,
    ) -> PyResult<(PyIndexArray, PyIndexArray)> {
        Ok(flat_arrays(encode_texts(py, self.inner.as_ref(), &texts, num_threads)?))
    }
}

/// Texts shorter than this are encoded without releasing the GIL.
pub const DETACH_BYTES: usize = 4096;
/// Batches up to this size are encoded on the calling thread with the GIL released (a fraction of
/// a second: Ctrl-C is seen once it returns); larger ones through [`run_detached`], which polls
/// for Ctrl-C while another thread works.
const INLINE_MAX_BYTES: usize = 8 << 20;

/// Encode Python strings with the GIL released: their UTF-8 is borrowed, not copied (the
/// `Bound`s keep the strings alive whatever other threads do to the sequence they came from).
pub(crate) fn encode_texts(
    py: Python<'_>,
    tokenizer: &dyn Tokenizer,
    texts: &[Bound<'_, PyString>],
    threads: Option<usize>,
) -> PyResult<EncodedTexts> {
    let strs: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
    let bytes: usize = strs.iter().map(|s| s.len()).sum();
    if bytes < DETACH_BYTES {
        return encode_many(tokenizer, &strs, Some(1), &Cancel::new()).into_py(py);
    }
    if bytes <= INLINE_MAX_BYTES {
        return py.detach(|| encode_many(tokenizer, &strs, threads, &Cancel::new())).into_py(py);
    }
    run_detached(py, move |cancel| encode_many(tokenizer, &strs, threads, cancel))
}

/// `(ids, offsets)` as arrays numpy views in place: uint32 ids, int64 offsets.
pub(crate) fn flat_arrays(out: EncodedTexts) -> (PyIndexArray, PyIndexArray) {
    let offsets = out.offsets.into_iter().map(|o| o as i64).collect();
    (
        PyIndexArray::new(IndexArray::from_owned(Owned::U32(out.ids))),
        PyIndexArray::new(IndexArray::from_owned(Owned::I64(offsets))),
    )
}

/// The data of an OpenAI encoding as embedded here: `.tiktoken` file bytes, split pattern and
/// special tokens (to build a `tiktoken.Encoding` offline).
#[pyfunction]
pub(crate) fn tiktoken_encoding_data<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let (enc, ranks) = py.detach(|| embedded(name)).map_err(Error::from).into_py(py)?;
    let file = py.detach(|| ranks.to_tiktoken_file());
    let d = PyDict::new(py);
    d.set_item("name", enc.name)?;
    d.set_item("pat_str", enc.pattern.regex())?;
    d.set_item("special_tokens", enc.specials())?;
    d.set_item("tiktoken_file", PyBytes::new(py, &file))?;
    d.set_item("sha256", &ranks.sha256)?;
    Ok(d)
}
