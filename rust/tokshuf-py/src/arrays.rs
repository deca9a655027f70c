//! Moving index arrays across the boundary: numpy buffers in (copied), owned little-endian
//! buffers out (viewed by numpy without a copy), and writable numpy buffers filled in place.

use std::ptr::NonNull;

use pyo3::buffer::{Element, PyBuffer};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tokshuf_core::indexed::Mapping;
use tokshuf_core::instances::Span;

use crate::buffer::PyMappedBuffer;

/// An owned array of the values of `v`, as `f` writes each (`u32::to_le_bytes`…).
pub fn le_out<T, const N: usize>(v: impl IntoIterator<Item = T>, f: fn(T) -> [u8; N]) -> PyMappedBuffer {
    PyMappedBuffer::new(Mapping::from_bytes(v.into_iter().flat_map(f).collect::<Vec<u8>>()))
}

/// An owned `u64` array for `np.frombuffer(buf, np.uint64)`.
pub fn u64_out(v: &[u64]) -> PyMappedBuffer {
    le_out(v.iter().copied(), u64::to_le_bytes)
}

/// `(n, 2)` spans as a flat `u64` buffer.
pub fn spans_out(v: &[Span]) -> PyMappedBuffer {
    le_out(v.iter().flatten().copied(), u64::to_le_bytes)
}

/// A flat `u64` buffer (e.g. an `(n, 2)` array) read as spans.
pub fn spans_in(py: Python<'_>, buf: &PyBuffer<u64>) -> PyResult<Vec<Span>> {
    let v = buf.to_vec(py)?;
    if v.len() % 2 != 0 {
        return Err(PyValueError::new_err(format!("spans must be (n, 2) pairs, got {} values", v.len())));
    }
    Ok(v.chunks_exact(2).map(|c| [c[0], c[1]]).collect())
}

/// A C-contiguous, writable buffer that may be filled without the GIL.
pub struct Writable<T>(NonNull<[T]>);

// SAFETY: the pointer is only dereferenced while the `PyBuffer` it came from is held by the
// caller (which keeps the exporter alive and its memory from being resized), by one thread.
unsafe impl<T: Send> Send for Writable<T> {}

impl<T: Element> Writable<T> {
    /// Check `buf` is writable and C-contiguous.
    pub fn new(buf: &PyBuffer<T>, name: &str) -> PyResult<Self> {
        if buf.readonly() {
            return Err(PyValueError::new_err(format!("{name} must be writable")));
        }
        buf.as_slice_ptr().map(Writable).ok_or_else(|| PyValueError::new_err(format!("{name} must be C-contiguous")))
    }

    /// The memory as a slice.
    ///
    /// # Safety
    /// The `PyBuffer` this came from must outlive the slice, and no one else may access the
    /// memory meanwhile (the caller passes distinct arrays and holds them).
    pub unsafe fn slice<'a>(self) -> &'a mut [T] {
        // SAFETY: see above; the pointer is valid for the buffer's length.
        unsafe { &mut *self.0.as_ptr() }
    }
}
