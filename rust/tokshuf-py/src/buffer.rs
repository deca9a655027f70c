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
    /// `view` is the `Py_buffer` CPython hands to `bf_getbuffer`. The exported pointer stays valid
    /// as long as `slf` lives: the mapping is immutable and `PyBuffer_FillInfo` stores a strong
    /// reference to `slf` in `view.obj`, released by CPython with the view.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("the mapping is read-only"));
        }
        let bytes = slf.get().map.bytes();
        // SAFETY: see the method's safety section; the buffer is read-only (readonly = 1).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr() as *mut c_void,
                bytes.len() as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}
