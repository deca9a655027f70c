//! Documents served by a Python object (file handlers for Arrow, Parquet, tars, user formats).
//!
//! The object has a `num_docs` attribute and a `get(i)` method returning a C-contiguous uint32
//! array; `tokshuf.stream.handlers` builds such readers from handler classes. One call per
//! document (the document is cached while its chunks are read), never one per token.

use std::sync::{Arc, Mutex};

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use tokshuf_core::stream::DocSource;
use tokshuf_core::{Error, Result};

/// Where a Python exception raised inside a handler waits to be re-raised to the caller.
pub type ErrorSlot = Arc<Mutex<Option<PyErr>>>;

/// Re-raise the handler's own exception if there is one, else convert the core error.
pub fn take_error(py: Python<'_>, slot: &ErrorSlot, err: Error) -> PyErr {
    match slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
        Some(e) => e,
        None => crate::errors::to_py_err(py, err),
    }
}

pub struct PyDocSource {
    reader: Py<PyAny>,
    n: u64,
    cached: Option<u64>,
    tokens: Vec<u32>,
    slot: ErrorSlot,
}

impl PyDocSource {
    pub fn new(obj: &Bound<'_, PyAny>, slot: ErrorSlot) -> PyResult<Self> {
        let n: u64 = obj.getattr("num_docs")?.extract()?;
        Ok(PyDocSource { reader: obj.clone().unbind(), n, cached: None, tokens: vec![], slot })
    }

    fn load(&mut self, doc: u64) -> Result<()> {
        if self.cached == Some(doc) {
            return Ok(());
        }
        let got = Python::attach(|py| -> PyResult<Vec<u32>> {
            let arr = self.reader.bind(py).call_method1("get", (doc,))?;
            PyBuffer::<u32>::get(&arr)?.to_vec(py)
        });
        match got {
            Ok(v) => {
                self.tokens = v;
                self.cached = Some(doc);
                Ok(())
            }
            Err(e) => {
                *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                Err(Error::invalid(format!("the file handler failed on document {doc}")))
            }
        }
    }
}

impl DocSource for PyDocSource {
    fn num_docs(&self) -> u64 {
        self.n
    }

    fn doc_len(&mut self, doc: u64) -> Result<u64> {
        self.load(doc)?;
        Ok(self.tokens.len() as u64)
    }

    fn read(&mut self, doc: u64, start: u64, len: u64, out: &mut Vec<u32>) -> Result<()> {
        self.load(doc)?;
        let (a, b) = (start as usize, (start + len) as usize);
        let part = self
            .tokens
            .get(a..b)
            .ok_or_else(|| Error::invalid(format!("tokens {a}..{b} lie past the end of document {doc}")))?;
        out.extend_from_slice(part);
        Ok(())
    }
}
