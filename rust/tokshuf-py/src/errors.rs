//! Core errors → Python exceptions. The hierarchy is defined in `tokshuf/errors.py`;
//! file errors become the built-in `OSError` subclasses with `filename` set.

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use tokshuf_core::{storage, Error};

fn exception_type<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
) -> PyResult<Bound<'py, PyType>> {
    cell.get_or_try_init(py, || {
        let module = py.import("tokshuf.errors")?;
        Ok::<_, PyErr>(module.getattr(name)?.cast_into::<PyType>()?.unbind())
    })
    .map(|t| t.bind(py).clone())
}

macro_rules! py_exception {
    ($py:expr, $name:literal, $args:expr) => {{
        static CELL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
        match exception_type($py, &CELL, $name) {
            Ok(t) => PyErr::from_type(t, $args),
            Err(e) => e,
        }
    }};
}

fn io_errno(kind: std::io::ErrorKind) -> Option<i32> {
    use std::io::ErrorKind::*;
    Some(match kind {
        NotFound => libc::ENOENT,
        PermissionDenied => libc::EACCES,
        AlreadyExists => libc::EEXIST,
        IsADirectory => libc::EISDIR,
        NotADirectory => libc::ENOTDIR,
        TimedOut => libc::ETIMEDOUT,
        _ => return None,
    })
}

/// Convert a core error into the matching Python exception.
pub fn to_py_err(py: Python<'_>, err: Error) -> PyErr {
    match err {
        Error::Io { path, source } => {
            // A path may be a URL with a password; a store's error may quote its answer.
            let filename = storage::redact(&path.to_string_lossy()).into_owned();
            let errno = source.raw_os_error().or_else(|| io_errno(source.kind()));
            let strerror = match source.raw_os_error() {
                // CPython's own text for OS errors; ours (e.g. "input does not exist") otherwise.
                Some(_) => source.to_string().split(" (os error").next().unwrap_or_default().to_string(),
                None => source.to_string(),
            };
            let strerror = storage::redact(&strerror).into_owned();
            match errno {
                // OSError(errno, strerror, filename) picks the subclass (FileNotFoundError, ...).
                Some(errno) => PyOSError::new_err((errno, strerror, filename)),
                // A failed request to a store names its object itself.
                None if storage::is_store_error(&source) => PyOSError::new_err(strerror),
                None => PyOSError::new_err(format!("{filename}: {strerror}")),
            }
        }
        Error::Format { .. } => py_exception!(py, "FormatError", (err.to_string(),)),
        Error::BadInput { ref path, line, reason, .. } => {
            let path = path.to_string_lossy().into_owned();
            py_exception!(py, "BadInputError", (err.to_string(), path, line, reason.as_str()))
        }
        Error::InvalidArgument(msg) => py_exception!(py, "ConfigError", (msg,)),
        Error::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
    }
}

/// `Result<T, Error>` → `PyResult<T>`.
pub trait IntoPyResult<T> {
    /// Convert the error side.
    fn into_py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn into_py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py_err(py, e))
    }
}

/// A panic in worker code: a bug, reported as such rather than crashing the interpreter.
pub fn panic_to_py_err(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let msg = tokshuf_core::error::panic_message(&*payload, "unknown panic");
    PyRuntimeError::new_err(format!("internal error in tokshuf (please report it): {msg}"))
}
