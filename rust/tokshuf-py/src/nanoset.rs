//! Bindings of the Megatron index builders and the sample reader behind `tokshuf.Nanoset`.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokshuf_core::indexed::{IndexedDataset, RemoteBin, Validate};
use tokshuf_core::megatron::{
    self, blend, reader, sample_index, BlendSampleSource, GptConfig, GptSampleSource, IndexArray, IndexView,
    RandomState, SampleSource, Scheme,
};
use tokshuf_core::{Cancel, Error};

use crate::errors::IntoPyResult;
use crate::index_array::PyIndexArray;
use crate::long_call::run_detached;

type Bookends = [Option<(f64, f64)>; 3];

/// The first `n` raw 32-bit words of `numpy.random.RandomState(seed)`.
#[pyfunction]
pub(crate) fn numpy_random_words(seed: u32, n: usize) -> Vec<u32> {
    let mut rs = RandomState::new(seed);
    (0..n).map(|_| rs.next_u32()).collect()
}

/// `rs = RandomState(seed)`, then `rs.shuffle(arange(n))` for each n in turn.
#[pyfunction]
pub(crate) fn numpy_shuffled_aranges(seed: u32, lengths: Vec<usize>) -> Vec<Vec<i64>> {
    let mut rs = RandomState::new(seed);
    lengths
        .into_iter()
        .map(|n| {
            let mut v: Vec<i64> = (0..n as i64).collect();
            rs.shuffle(&mut v);
            v
        })
        .collect()
}

/// `numpy.sum` of a float64 vector (pairwise summation).
#[pyfunction]
pub(crate) fn numpy_sum(values: Vec<f64>) -> f64 {
    megatron::numpy_sum(&values)
}

/// Megatron's `normalize(weights)`.
#[pyfunction]
pub(crate) fn normalize(py: Python<'_>, weights: Vec<f64>) -> PyResult<Vec<f64>> {
    megatron::normalize(&weights).into_py(py)
}

/// `"949,50,1"` → (normalized vector, bookend matrix with `None` for disabled splits).
#[pyfunction]
pub(crate) fn parse_split(py: Python<'_>, split: &str) -> PyResult<([f64; 3], Bookends)> {
    let v = megatron::parse_split(split).into_py(py)?;
    Ok((v, megatron::split_matrix(&v)))
}

/// The `[beg, end)` sequence range of each split over `n` sequences.
#[pyfunction]
pub(crate) fn split_ranges(matrix: Bookends, n: u64) -> [Option<(u64, u64)>; 3] {
    megatron::split_ranges(&matrix, n)
}

/// Per-dataset sample counts per split, `ceil(ceil(n × w) × (1 + surplus))`.
#[pyfunction]
pub(crate) fn size_per_split_per_dataset(
    weights: Vec<f64>,
    sizes: [Option<u64>; 3],
    surplus: f64,
) -> Vec<[Option<u64>; 3]> {
    megatron::size_per_split_per_dataset(&weights, &sizes, surplus)
}

/// `helpers.build_sample_idx` on explicit inputs (the samples count is derived as Megatron does).
#[pyfunction]
#[pyo3(signature = (sizes, document_index, sequence_length, num_epochs, tokens_per_epoch, drop_last_partial_sequence=true, add_extra_token_to_sequence=true))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_sample_index(
    py: Python<'_>,
    sizes: Vec<i32>,
    document_index: Vec<i64>,
    sequence_length: u64,
    num_epochs: u64,
    tokens_per_epoch: u64,
    drop_last_partial_sequence: bool,
    add_extra_token_to_sequence: bool,
) -> PyResult<PyIndexArray> {
    let extra = u64::from(add_extra_token_to_sequence);
    run_detached(py, |cancel| {
        let n = sample_index::num_samples(
            num_epochs,
            tokens_per_epoch,
            sequence_length,
            extra,
            drop_last_partial_sequence,
        )?;
        sample_index::build_sample_index(&sizes, IndexView::I64(&document_index), sequence_length, extra, n, cancel)
    })
    .map(PyIndexArray::new)
}

fn blend_pair(b: megatron::Blend) -> (PyIndexArray, PyIndexArray) {
    (PyIndexArray::new(b.dataset_index), PyIndexArray::new(b.dataset_sample_index))
}

/// Greedy blending over `size` samples → (dataset_index int16, dataset_sample_index int64).
#[pyfunction]
pub(crate) fn build_blending_indices(
    py: Python<'_>,
    weights: Vec<f64>,
    size: u64,
) -> PyResult<(PyIndexArray, PyIndexArray)> {
    run_detached(py, |cancel| blend::build_blending_indices(&weights, size, cancel)).map(blend_pair)
}

/// Exhaustive blending: exactly `sizes[d]` samples of each dataset.
#[pyfunction]
pub(crate) fn build_exhaustive_blending_indices(
    py: Python<'_>,
    sizes: Vec<u64>,
) -> PyResult<(PyIndexArray, PyIndexArray)> {
    run_detached(py, |cancel| blend::build_exhaustive_blending_indices(&sizes, cancel)).map(blend_pair)
}

/// Build one GPTDataset's document, sample and shuffle indices for sequences `[beg, end)` of the
/// dataset at `prefix`.
#[pyfunction]
#[pyo3(signature = (prefix, beg, end, num_samples, *, sequence_length, add_extra_token, seed, drop_last_partial_sequence, scheme="megatron"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_gpt_indices<'py>(
    py: Python<'py>,
    prefix: PathBuf,
    beg: u64,
    end: u64,
    num_samples: Option<u64>,
    sequence_length: u64,
    add_extra_token: bool,
    seed: u32,
    drop_last_partial_sequence: bool,
    scheme: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let scheme: Scheme = scheme.parse().into_py(py)?;
    let cfg = GptConfig { sequence_length, add_extra_token, seed, drop_last_partial_sequence, scheme };
    let g = run_detached(py, |cancel: &Cancel| {
        // Only the index is read: a .bin in a store is not fetched.
        let ds = IndexedDataset::open_with(&prefix, None, Validate::Header, RemoteBin::Ranges)?;
        let sizes = ds.sequence_lengths();
        cancel.check()?;
        megatron::build_gpt_indices(&sizes, (beg, end), num_samples, &cfg, cancel).map_err(|e| with_prefix(e, &prefix))
    })?;
    let d = PyDict::new(py);
    d.set_item("document_index", PyIndexArray::new(g.document_index))?;
    d.set_item("sample_index", PyIndexArray::new(g.sample_index))?;
    d.set_item("shuffle_index", PyIndexArray::new(g.shuffle_index))?;
    d.set_item("num_epochs", g.plan.num_epochs)?;
    d.set_item("separate_final_epoch", g.plan.separate_final_epoch)?;
    d.set_item("tokens_per_epoch", g.plan.tokens_per_epoch)?;
    Ok(d)
}

fn with_prefix(e: Error, prefix: &std::path::Path) -> Error {
    match e {
        Error::InvalidArgument(msg) => Error::InvalidArgument(format!("{}: {msg}", prefix.display())),
        other => other,
    }
}

/// Reads samples (one, or a batch into one array) with the GIL released.
#[pyclass(frozen, module = "tokshuf._core", name = "SampleReader")]
pub(crate) struct PySampleReader {
    inner: Arc<dyn SampleSource>,
}

fn indices(obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if let Ok(buf) = PyBuffer::<i64>::get(obj) {
        if buf.dimensions() <= 1 {
            return buf.to_vec(obj.py());
        }
    }
    obj.extract::<Vec<i64>>()
}

#[pymethods]
impl PySampleReader {
    /// A GPTDataset's samples: `sequence_length + add_extra_token` tokens, padded with `pad`.
    #[staticmethod]
    #[pyo3(signature = (prefix, document_index, sample_index, shuffle_index, *, sequence_length, add_extra_token, pad, origin=None, remote="copy"))]
    #[allow(clippy::too_many_arguments)]
    fn gpt(
        py: Python<'_>,
        prefix: PathBuf,
        document_index: PyRef<'_, PyIndexArray>,
        sample_index: PyRef<'_, PyIndexArray>,
        shuffle_index: PyRef<'_, PyIndexArray>,
        sequence_length: u64,
        add_extra_token: bool,
        pad: i64,
        origin: Option<String>,
        remote: &str,
    ) -> PyResult<Self> {
        let arrays: [IndexArray; 3] =
            [document_index.inner.clone(), sample_index.inner.clone(), shuffle_index.inner.clone()];
        let remote: RemoteBin = remote.parse().into_py(py)?;
        let src = py
            .detach(|| {
                let ds = IndexedDataset::open_with(&prefix, None, Validate::Header, remote)?;
                let [d, s, sh] = arrays;
                let src = GptSampleSource::new(ds, d, s, sh, sequence_length, add_extra_token, pad)?;
                Ok::<_, Error>(match origin {
                    Some(o) => src.with_origin(o),
                    None => src,
                })
            })
            .into_py(py)?;
        Ok(Self { inner: Arc::new(src) })
    }

    /// A blend of readers (`None` for datasets that serve no sample).
    #[staticmethod]
    fn blend(
        py: Python<'_>,
        datasets: Vec<Option<PyRef<'_, PySampleReader>>>,
        dataset_index: PyRef<'_, PyIndexArray>,
        dataset_sample_index: PyRef<'_, PyIndexArray>,
    ) -> PyResult<Self> {
        let sources = datasets.iter().map(|d| d.as_ref().map(|r| Arc::clone(&r.inner))).collect();
        let src = BlendSampleSource::new(sources, dataset_index.inner.clone(), dataset_sample_index.inner.clone())
            .into_py(py)?;
        Ok(Self { inner: Arc::new(src) })
    }

    fn __len__(&self) -> usize {
        self.inner.len() as usize
    }

    /// Tokens per sample.
    #[getter]
    fn width(&self) -> usize {
        self.inner.width()
    }

    /// Fill `out` (a writable, C-contiguous int64 buffer of `len(ks) × width` elements) with
    /// samples `ks` (negative counts from the end), in parallel with the GIL released.
    #[pyo3(signature = (ks, out, num_threads=None))]
    fn get_batch(
        &self,
        py: Python<'_>,
        ks: &Bound<'_, PyAny>,
        out: PyBuffer<i64>,
        num_threads: Option<usize>,
    ) -> PyResult<()> {
        let ks = indices(ks)?;
        let src = &*self.inner;
        let w = src.width();
        if out.readonly() || !out.is_c_contiguous() || out.item_count() != ks.len() * w {
            return Err(Error::invalid(format!(
                "out must be a writable, C-contiguous int64 array of {} × {w} elements",
                ks.len()
            )))
            .into_py(py);
        }
        let addr = out.buf_ptr() as usize;
        let n = out.item_count();
        py.detach(|| {
            // SAFETY: `out` holds the exporter's buffer for this whole call: writable, C-contiguous
            // int64 of exactly `n` elements (checked above). Nothing else in this call touches it;
            // concurrent writers from other Python threads would be the caller's data race, as
            // with any buffer-filling C extension.
            let dst = unsafe { std::slice::from_raw_parts_mut(addr as *mut i64, n) };
            reader::read_batch(src, &ks, dst, num_threads)
        })
        .into_py(py)
    }
}
