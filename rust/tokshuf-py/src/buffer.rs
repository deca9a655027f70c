//! Read-only memory maps exposed through the buffer protocol, so numpy can view them without a
//! copy (`numpy.frombuffer`) while the view's `base` keeps the mapping alive.

use std::ffi::{c_int, c_void};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use tokshuf_core::indexed::Mapping;

/// A read-only, memory-mapped file (numpy: `np.frombuffer(buf, dtype, count, offset)`).
#[pyclass(frozen, module = "tokshuf._core", name = "MappedBuffer")]
pub struct PyMappedBuffer {
    map: Mapping,
}

impl PyMappedBuffer {
    pub fn new(map: Mapping) -> Self {
        Self { map }
    }
}

#[pymethods]
impl PyMappedBuffer {
    fn __len__(&self) -> usize {
        self.map.bytes().len()
    }

    /// # Safety
    /// `view` is the `Py_buffer` CPython hands to `bf_getbuffer` (see [`export_read_only`]).
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let bytes = slf.get().map.bytes();
        // SAFETY: the mapping is immutable and lives as long as `slf`.
        unsafe { export_read_only(slf.as_any(), bytes, view, flags, "the mapping is read-only") }
    }
}

/// Fill `view` with `bytes`, read-only, for `bf_getbuffer`: the one export of the native arrays
/// (mapped files, index arrays) to numpy. A writable request is refused with `read_only`.
///
/// # Safety
/// `view` is the `Py_buffer` CPython hands to `bf_getbuffer`, and `bytes` stay valid and unchanged
/// while `owner` lives: `PyBuffer_FillInfo` stores a strong reference to `owner` in `view.obj`,
/// which CPython releases with the view.
pub unsafe fn export_read_only(
    owner: &Bound<'_, PyAny>,
    bytes: &[u8],
    view: *mut ffi::Py_buffer,
    flags: c_int,
    read_only: &'static str,
) -> PyResult<()> {
    if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
        return Err(PyBufferError::new_err(read_only));
    }
    // SAFETY: see the function's safety section; the buffer is exported read-only (readonly = 1).
    let rc = unsafe {
        ffi::PyBuffer_FillInfo(
            view,
            owner.as_ptr(),
            bytes.as_ptr() as *mut c_void,
            bytes.len() as ffi::Py_ssize_t,
            1,
            flags,
        )
    };
    if rc == -1 {
        return Err(PyErr::fetch(owner.py()));
    }
    Ok(())
}
