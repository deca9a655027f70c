//! Binding of one global worker's stream (`tokshuf.stream` builds everything else in Python).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use tokshuf_core::stream::{
    parse_width, DocSource, IndexedSource, NpySource, Placed, StreamConfig, TokenOut, WorkerState, WorkerStream,
};
use tokshuf_core::Error;

use crate::arrays::Writable;
use crate::errors::IntoPyResult;
use crate::long_call::run_detached;
use crate::stream_source::{take_error, ErrorSlot, PyDocSource};

fn words(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn u64_array(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Vec<u64>> {
    match d.get_item(key)? {
        Some(a) => PyBuffer::<u64>::get(&a)?.to_vec(d.py()),
        None => Ok(vec![]),
    }
}

fn open_source(item: &Bound<'_, PyAny>, slot: &ErrorSlot) -> PyResult<Box<dyn DocSource>> {
    if let Ok(t) = item.cast::<PyTuple>() {
        let kind: String = t.get_item(0)?.extract()?;
        let py = item.py();
        return match kind.as_str() {
            "indexed" => {
                let paths: Vec<PathBuf> = t.get_item(1)?.extract()?;
                let full: bool = t.get_item(2)?.extract()?;
                Ok(Box::new(py.detach(|| IndexedSource::open(&paths, full)).into_py(py)?))
            }
            "npy" => {
                let paths: Vec<PathBuf> = t.get_item(1)?.extract()?;
                let width = parse_width(&t.get_item(2)?.extract::<String>()?).into_py(py)?;
                let eos: u64 = t.get_item(3)?.extract()?;
                Ok(Box::new(py.detach(|| NpySource::open(&paths, width, eos)).into_py(py)?))
            }
            other => {
                Err(Error::invalid(format!("unknown native source {other:?} (expected indexed or npy)"))).into_py(py)
            }
        };
    }
    Ok(Box::new(PyDocSource::new(item, slot.clone())?))
}

/// The stream of one global worker: batches out, state in and out.
#[pyclass(frozen, module = "tokshuf._core", name = "StreamWorker")]
pub(crate) struct PyStreamWorker {
    inner: Mutex<WorkerStream>,
    slot: ErrorSlot,
}

impl PyStreamWorker {
    fn lock(&self) -> MutexGuard<'_, WorkerStream> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fill<T: TokenOut + pyo3::buffer::Element>(
        &self,
        py: Python<'_>,
        batch: usize,
        input: &Bound<'_, PyAny>,
        label: Option<&Bound<'_, PyAny>>,
        positions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Placed>> {
        let input = PyBuffer::<T>::get(input)?;
        let label = label.map(PyBuffer::<T>::get).transpose()?;
        let positions = positions.map(PyBuffer::<i32>::get).transpose()?;
        let inp = Writable::new(&input, "input")?;
        let lab = label.as_ref().map(|l| Writable::new(l, "label")).transpose()?;
        let pos = positions.as_ref().map(|p| Writable::new(p, "positions")).transpose()?;
        if label.as_ref().is_some_and(|l| l.buf_ptr() == input.buf_ptr()) {
            return Err(pyo3::exceptions::PyValueError::new_err("input and label must be distinct arrays"));
        }
        // SAFETY: the buffers are writable, C-contiguous, kept alive by the `PyBuffer`s for the
        // whole call, and distinct (checked above for input/label; positions has another type).
        let (inp, lab, pos) = unsafe { (inp.slice(), lab.map(|l| l.slice()), pos.map(|p| p.slice())) };
        let mut placed = Vec::with_capacity(batch * 4);
        py.detach(|| self.lock().next_batch(batch, inp, lab, pos, &mut placed))
            .map_err(|e| take_error(py, &self.slot, e))?;
        Ok(placed)
    }
}

#[pymethods]
impl PyStreamWorker {
    /// `config`: the stream settings as JSON; `sources`: per sub-dataset, `("indexed", prefixes,
    /// validate)`, `("npy", paths, dtype, eos)` or a reader object (`num_docs`, `get(i)`);
    /// `state`: a dict of the worker's tables (`rows`, `buffer`, `mixer`, `history`, `rng_counter`,
    /// `batches`, `phase`, `step`, `step_stride`), or None for a fresh start; `step` and
    /// `step_stride` (the training step of the next batch, the steps between batches) override.
    #[new]
    #[pyo3(signature = (config, sources, worker, n_workers, state=None, step=None, step_stride=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        config: &str,
        sources: Vec<Bound<'_, PyAny>>,
        worker: u32,
        n_workers: u32,
        state: Option<Bound<'_, PyDict>>,
        step: Option<u64>,
        step_stride: Option<u64>,
    ) -> PyResult<Self> {
        let cfg: StreamConfig =
            serde_json::from_str(config).map_err(|e| Error::invalid(format!("stream config: {e}"))).into_py(py)?;
        let slot: ErrorSlot = Arc::new(Mutex::new(None));
        let srcs = sources.iter().map(|s| open_source(s, &slot)).collect::<PyResult<Vec<_>>>()?;
        let state = match state {
            None => None,
            Some(d) => {
                let int = |key: &str, default: u64| -> PyResult<u64> {
                    Ok(d.get_item(key)?.map(|v| v.extract()).transpose()?.unwrap_or(default))
                };
                let mut st = WorkerState::from_words(
                    &u64_array(&d, "rows")?,
                    &u64_array(&d, "buffer")?,
                    u64_array(&d, "mixer")?,
                    int("rng_counter", 0)?,
                    int("batches", 0)?,
                )
                .into_py(py)?;
                st.history = WorkerState::history_from_words(&u64_array(&d, "history")?, cfg.n_sub()).into_py(py)?;
                st.phase = u32::try_from(int("phase", 0)?)
                    .map_err(|_| Error::invalid("mix phase does not fit 32 bits".to_string()))
                    .into_py(py)?;
                st.step = int("step", 0)?;
                st.step_stride = int("step_stride", 1)?;
                Some(st)
            }
        };
        let mut w = py
            .detach(|| WorkerStream::new(cfg, srcs, worker, n_workers, state))
            .map_err(|e| take_error(py, &slot, e))?;
        if step.is_some() || step_stride.is_some() {
            w.set_clock(step.unwrap_or(w.step()), step_stride.unwrap_or(1)).into_py(py)?;
        }
        Ok(PyStreamWorker { inner: Mutex::new(w), slot })
    }

    #[getter]
    fn batches(&self) -> u64 {
        self.lock().batches()
    }

    /// The training step of the next batch.
    #[getter]
    fn step(&self) -> u64 {
        self.lock().step()
    }

    /// Documents per sub-dataset as the opened sources count them.
    #[getter]
    fn num_docs(&self) -> Vec<u64> {
        self.lock().num_docs()
    }

    /// Fill `input` (and `label`: lines split for next-token prediction) with the next batch;
    /// int64, int32 or uint32 arrays, `positions` int32 shaped like `input`. Returns the
    /// document runs as little-endian u64 rows of `line, at, sub, shard, epoch, doc, start, len`.
    #[pyo3(signature = (batch, input, label=None, positions=None))]
    fn next_batch<'py>(
        &self,
        py: Python<'py>,
        batch: usize,
        input: &Bound<'py, PyAny>,
        label: Option<&Bound<'py, PyAny>>,
        positions: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let placed = if PyBuffer::<i64>::get(input).is_ok() {
            self.fill::<i64>(py, batch, input, label, positions)?
        } else if PyBuffer::<i32>::get(input).is_ok() {
            self.fill::<i32>(py, batch, input, label, positions)?
        } else if PyBuffer::<u32>::get(input).is_ok() {
            self.fill::<u32>(py, batch, input, label, positions)?
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err("input must be an int64, int32 or uint32 array"));
        };
        let mut out = Vec::with_capacity(placed.len() * 8);
        for (line, at, s) in placed {
            out.extend([line.into(), at.into(), s.sub.into(), s.shard.into(), s.epoch, s.doc, s.start, s.len]);
        }
        Ok(PyBytes::new(py, &words(&out)))
    }

    /// Produce and drop `n` batches of `batch` lines (replaying from a snapshot); Ctrl-C stops it.
    fn skip_batches(&self, py: Python<'_>, n: u64, batch: usize) -> PyResult<()> {
        run_detached(py, |cancel| self.lock().skip_batches(n, batch, cancel))
            .map_err(|e| self.slot.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or(e))
    }

    /// The state after the last batch: `rows`, `buffer`, `mixer`, `history` (little-endian u64
    /// tables as bytes), `rng_counter`, `batches`, `phase`, `step`, `step_stride`.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.lock().state();
        let d = PyDict::new(py);
        d.set_item("rows", PyBytes::new(py, &words(&st.row_words())))?;
        d.set_item("buffer", PyBytes::new(py, &words(&st.buffer_words())))?;
        d.set_item("mixer", PyBytes::new(py, &words(&st.mixer)))?;
        d.set_item("history", PyBytes::new(py, &words(&st.history_words())))?;
        d.set_item("phase", st.phase)?;
        d.set_item("step", st.step)?;
        d.set_item("step_stride", st.step_stride)?;
        d.set_item("rng_counter", st.rng_counter)?;
        d.set_item("batches", st.batches)?;
        Ok(d)
    }
}
