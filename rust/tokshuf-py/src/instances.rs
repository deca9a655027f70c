//! Bindings of the instance strategies (index builders) and of the batch reader.

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tokshuf_core::indexed::{IndexedDataset, Validate};
use tokshuf_core::instances::{
    concat, curriculum::Curriculum, interleaved, limit_spans, packed, padded, vsl, Layout, LongDocStrategy,
    PackedDocLens, Reader, TokenStore, U64s,
};
use tokshuf_core::rng::{NumpyGenerator, SeedSequence};
use tokshuf_core::tokens::{TokenArray, TokenType};
use tokshuf_core::{Error, Result};

use crate::arrays::{le_out, spans_in, spans_out, u64_out, Writable};
use crate::buffer::PyMappedBuffer;
use crate::errors::IntoPyResult;
use crate::long_call::run_detached;

/// numpy's `default_rng(seed)` from the seed's entropy words (`tokshuf.instances._seeds`).
fn generator(entropy: &[u32]) -> NumpyGenerator {
    NumpyGenerator::from_seed_sequence(&SeedSequence::new(entropy))
}

/// Instances each file contributes to a concatenate-and-chunk dataset.
#[pyfunction]
#[pyo3(signature = (tokens_per_file, sequence_length, max_target_sequence_length=None))]
pub(crate) fn instances_per_file(
    py: Python<'_>,
    tokens_per_file: Vec<u64>,
    sequence_length: u64,
    max_target_sequence_length: Option<u64>,
) -> PyResult<Vec<u64>> {
    concat::instances_per_file(&tokens_per_file, sequence_length, max_target_sequence_length).into_py(py)
}

/// Documents longer than `max_length` truncated or fragmented; empty ones dropped.
#[pyfunction]
pub(crate) fn limit_documents(
    py: Python<'_>,
    spans: PyBuffer<u64>,
    max_length: u64,
    long_doc_strategy: &str,
) -> PyResult<PyMappedBuffer> {
    let strategy: LongDocStrategy = long_doc_strategy.parse().into_py(py)?;
    let spans = spans_in(py, &spans)?;
    let out = py.detach(|| limit_spans(&spans, max_length, strategy));
    Ok(spans_out(&out))
}

/// One span per document, truncated (or fragmented) to `sequence_length`.
#[pyfunction]
#[pyo3(signature = (spans, sequence_length, long_doc_strategy="truncate"))]
pub(crate) fn padded_instances(
    py: Python<'_>,
    spans: PyBuffer<u64>,
    sequence_length: u64,
    long_doc_strategy: &str,
) -> PyResult<PyMappedBuffer> {
    let strategy: LongDocStrategy = long_doc_strategy.parse().into_py(py)?;
    let spans = spans_in(py, &spans)?;
    let out = py.detach(|| padded::padded_spans(&spans, sequence_length, strategy)).into_py(py)?;
    Ok(spans_out(&out))
}

/// OBFD-pack each group of document spans; returns (documents, offsets, document ids).
#[pyfunction]
#[pyo3(signature = (groups, sequence_length, num_threads=None))]
pub(crate) fn pack_documents(
    py: Python<'_>,
    groups: Vec<PyBuffer<u64>>,
    sequence_length: u64,
    num_threads: Option<usize>,
) -> PyResult<(PyMappedBuffer, PyMappedBuffer, PyMappedBuffer)> {
    let groups = groups.iter().map(|g| spans_in(py, g)).collect::<PyResult<Vec<_>>>()?;
    let p = run_detached(py, |cancel| packed::pack_groups(&groups, sequence_length, num_threads, cancel))?;
    Ok((spans_out(&p.docs), u64_out(&p.offsets), u64_out(&p.doc_ids)))
}

/// Power-of-two pieces of every document (VSL dataset decomposition).
#[pyfunction]
pub(crate) fn vsl_decompose(
    py: Python<'_>,
    spans: PyBuffer<u64>,
    min_length: u64,
    max_length: u64,
) -> PyResult<PyMappedBuffer> {
    let spans = spans_in(py, &spans)?;
    let out = py.detach(|| vsl::decompose(&spans, min_length, max_length)).into_py(py)?;
    Ok(spans_out(&out))
}

/// Instance ids per bucket length (`min, 2 min, ..., max`).
#[pyfunction]
pub(crate) fn vsl_buckets(
    py: Python<'_>,
    pieces: PyBuffer<u64>,
    min_length: u64,
    max_length: u64,
) -> PyResult<Vec<PyMappedBuffer>> {
    let pieces = spans_in(py, &pieces)?;
    let out = py.detach(|| vsl::buckets(&pieces, min_length, max_length)).into_py(py)?;
    Ok(out.iter().map(|b| u64_out(b)).collect())
}

/// `(length, batches)` per bucket for a curriculum and a global batch of `global_batch_tokens`.
#[pyfunction]
#[pyo3(signature = (instances_per_bucket, global_batch_tokens, curriculum_name="natural", num_cycles=None, balanced=false))]
pub(crate) fn vsl_batches_per_bucket(
    py: Python<'_>,
    instances_per_bucket: Vec<(u64, u64)>,
    global_batch_tokens: u64,
    curriculum_name: &str,
    num_cycles: Option<u64>,
    balanced: bool,
) -> PyResult<Vec<(u64, u64)>> {
    Curriculum::new(curriculum_name, num_cycles, balanced)
        .and_then(|c| c.batches_per_bucket(&instances_per_bucket, global_batch_tokens))
        .into_py(py)
}

/// The order of the global batches under a curriculum, drawn from numpy's `default_rng(seed)`,
/// `entropy` being the seed's words.
#[pyfunction]
#[pyo3(signature = (batches_per_bucket, entropy, curriculum_name="natural", num_cycles=None, balanced=false))]
pub(crate) fn vsl_batch_order(
    py: Python<'_>,
    batches_per_bucket: Vec<(u64, u64)>,
    entropy: Vec<u32>,
    curriculum_name: &str,
    num_cycles: Option<u64>,
    balanced: bool,
) -> PyResult<PyMappedBuffer> {
    let c = Curriculum::new(curriculum_name, num_cycles, balanced).into_py(py)?;
    let order = py.detach(|| c.batch_indices(&batches_per_bucket, &mut generator(&entropy))).into_py(py)?;
    Ok(u64_out(&order))
}

/// Exempt base ids and the seeded permutation of the others; `exempt` is a uint8 mask,
/// `entropy` the seed's words.
#[pyfunction]
pub(crate) fn interleave_plan(
    py: Python<'_>,
    exempt: PyBuffer<u8>,
    sequence_length: u64,
    docs_per_instance: u64,
    entropy: Vec<u32>,
) -> PyResult<(PyMappedBuffer, PyMappedBuffer)> {
    let mask: Vec<bool> = exempt.to_vec(py)?.into_iter().map(|b| b != 0).collect();
    let seed = SeedSequence::new(&entropy);
    let p = py.detach(|| interleaved::plan(&mask, sequence_length, docs_per_instance, &seed)).into_py(py)?;
    Ok((u64_out(&p.exempt), u64_out(&p.order)))
}

/// numpy's `default_rng(seed).permutation(values)` for a uint64 array, `entropy` being the
/// seed's words.
#[pyfunction]
pub(crate) fn numpy_shuffled(py: Python<'_>, values: PyBuffer<u64>, entropy: Vec<u32>) -> PyResult<PyMappedBuffer> {
    let mut v = values.to_vec(py)?;
    py.detach(|| generator(&entropy).shuffle(&mut v));
    Ok(u64_out(&v))
}

fn open_source(path: &PathBuf, dtype: Option<&str>) -> Result<TokenArray> {
    match dtype {
        Some(d) => TokenArray::open(path, d.parse::<TokenType>()?),
        None => TokenArray::from_indexed(&IndexedDataset::open(path, None, Validate::Header)?),
    }
}

fn array(files: &HashMap<String, PathBuf>, name: &str) -> Result<U64s> {
    let path = files.get(name).ok_or_else(|| Error::invalid(format!("missing index array {name:?}")))?;
    U64s::open(path)
}

/// Reads instances of a dataset into caller-provided numpy buffers, without the GIL.
#[pyclass(frozen, module = "tokshuf._core", name = "InstanceReader")]
pub(crate) struct PyInstanceReader {
    inner: Reader,
}

#[pymethods]
impl PyInstanceReader {
    /// `sources`: `(path, dtype)` of OLMo token files, or `(prefix, None)` of indexed datasets;
    /// `label_masks`: optional per-source bool arrays (one byte per token).
    /// `kind`: `chunks` (with `instances_per_file` and optional per-file `doc_files`), `spans`
    /// (`files["spans"]`), `packed` (`docs`, `offsets`, `doc_ids`; `olmo_doc_lens` picks OLMo-core's
    /// `doc_lens` over the packing's, `recorded_boundaries` says per source whether its group's
    /// documents came from recorded boundaries rather than an EOS scan) or `interleaved` (`base`,
    /// `exempt`, `order`).
    #[new]
    #[pyo3(signature = (sources, kind, sequence_length, pad_token_id, eos_token_id, bos_token_id=None, *,
                        files=HashMap::new(), instances_per_file=Vec::new(), doc_files=Vec::new(),
                        docs_per_instance=1, chunks_per_doc=1, label_masks=Vec::new(), olmo_doc_lens=true,
                        recorded_boundaries=Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        sources: Vec<(PathBuf, Option<String>)>,
        kind: &str,
        sequence_length: u64,
        pad_token_id: i64,
        eos_token_id: i64,
        bos_token_id: Option<i64>,
        files: HashMap<String, PathBuf>,
        instances_per_file: Vec<u64>,
        doc_files: Vec<PathBuf>,
        docs_per_instance: u64,
        chunks_per_doc: u64,
        label_masks: Vec<PathBuf>,
        olmo_doc_lens: bool,
        recorded_boundaries: Vec<bool>,
    ) -> PyResult<Self> {
        let kind = kind.to_string();
        let inner = py
            .detach(|| -> Result<Reader> {
                let arrays = sources.iter().map(|(p, d)| open_source(p, d.as_deref())).collect::<Result<Vec<_>>>()?;
                let layout = match kind.as_str() {
                    "chunks" => {
                        let mut first = vec![0u64];
                        for n in &instances_per_file {
                            first.push(first.last().copied().unwrap_or(0) + n);
                        }
                        let docs = doc_files.iter().map(|p| U64s::open(p)).collect::<Result<Vec<_>>>()?;
                        Layout::Chunks { first, docs }
                    }
                    "spans" => Layout::Spans(array(&files, "spans")?),
                    "packed" => Layout::Packed {
                        docs: array(&files, "docs")?,
                        offsets: array(&files, "offsets")?,
                        doc_ids: array(&files, "doc_ids")?,
                        doc_lens: if olmo_doc_lens {
                            PackedDocLens::Olmo { recorded: recorded_boundaries }
                        } else {
                            PackedDocLens::Packing
                        },
                    },
                    "interleaved" => Layout::Interleaved {
                        base: array(&files, "base")?,
                        exempt: array(&files, "exempt")?,
                        order: array(&files, "order")?,
                        docs_per_instance,
                        chunks_per_doc,
                    },
                    other => {
                        return Err(Error::invalid(format!(
                            "unknown layout {other:?} (expected chunks, spans, packed or interleaved)"
                        )))
                    }
                };
                let reader = Reader::new(
                    TokenStore::new(arrays),
                    layout,
                    sequence_length,
                    pad_token_id,
                    eos_token_id,
                    bos_token_id,
                )?;
                if label_masks.is_empty() {
                    return Ok(reader);
                }
                let masks =
                    label_masks.iter().map(|p| TokenArray::open(p, TokenType::U8)).collect::<Result<Vec<_>>>()?;
                reader.with_label_masks(TokenStore::new(masks))
            })
            .into_py(py)?;
        Ok(Self { inner })
    }

    fn __len__(&self) -> usize {
        self.inner.len() as usize
    }

    /// Fill `input_ids` (int64, `len(indices) × width`) and `label_mask` (uint8 view of a bool
    /// array, same shape) for `indices` (uint64); returns `(doc_lens int32, counts uint32)`
    /// buffers when `doc_lens`, else None.
    #[pyo3(signature = (indices, input_ids, label_mask=None, doc_lens=false, num_threads=None))]
    fn fill(
        &self,
        py: Python<'_>,
        indices: PyBuffer<u64>,
        input_ids: PyBuffer<i64>,
        label_mask: Option<PyBuffer<u8>>,
        doc_lens: bool,
        num_threads: Option<usize>,
    ) -> PyResult<Option<(PyMappedBuffer, PyMappedBuffer)>> {
        let idx = indices.to_vec(py)?;
        if input_ids.dimensions() != 2 {
            return Err(PyValueError::new_err("input_ids must be 2-dimensional"));
        }
        let width = input_ids.shape()[1];
        let ids = Writable::new(&input_ids, "input_ids")?;
        let mask = label_mask.as_ref().map(|m| Writable::new(m, "label_mask")).transpose()?;
        let lens = py
            .detach(|| {
                // SAFETY: `input_ids` and `label_mask` are held until this returns; they are
                // distinct arrays (different dtypes) written by this call only.
                let (ids, mask) = unsafe { (ids.slice(), mask.map(|m| m.slice())) };
                self.inner.fill(&idx, width, ids, mask, doc_lens, num_threads)
            })
            .into_py(py)?;
        Ok(doc_lens.then(|| {
            (le_out(lens.lens.iter().copied(), i32::to_le_bytes), le_out(lens.counts.iter().copied(), u32::to_le_bytes))
        }))
    }
}
