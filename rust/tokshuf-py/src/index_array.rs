//! Index arrays (owned or mapped from `.npy`) exposed to numpy without a copy:
//! `np.frombuffer(arr, arr.dtype).reshape(arr.shape)`; the view's `base` keeps the array alive.

use std::ffi::c_int;
use std::path::PathBuf;

use pyo3::ffi;
use pyo3::prelude::*;
use tokshuf_core::megatron::{npy, ElemType, IndexArray, Owned};
use tokshuf_core::Error;

use crate::buffer::export_read_only;
use crate::errors::IntoPyResult;

/// A read-only int16/int32/uint32/int64 array held by the native module.
#[pyclass(frozen, module = "tokshuf._core", name = "IndexArray")]
pub struct PyIndexArray {
    pub inner: IndexArray,
}

impl PyIndexArray {
    pub fn new(inner: IndexArray) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl PyIndexArray {
    /// Map a `.npy` file (O(1): nothing is read until used).
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        py.detach(|| npy::load(&path)).into_py(py).map(Self::new)
    }

    /// A copy of raw little-endian bytes as an array of `dtype` (int16, int32, uint32, int64).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8], dtype: &str, shape: Vec<usize>) -> PyResult<Self> {
        let elem = ElemType::ALL.into_iter().find(|t| t.name() == dtype).ok_or_else(|| {
            Error::invalid(format!("dtype {dtype:?} is not an index dtype (int16, int32, uint32, int64)"))
        });
        let elem = elem.into_py(py)?;
        let count = shape.iter().product::<usize>();
        if data.len() != count * elem.itemsize() {
            return Err(Error::invalid(format!("{} bytes cannot hold {shape:?} {dtype} elements", data.len())))
                .into_py(py);
        }
        fn le<T, const N: usize>(data: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
            data.chunks_exact(N).map(|c| from(c.try_into().expect("N bytes"))).collect()
        }
        let owned = match elem {
            ElemType::I16 => Owned::I16(le(data, i16::from_le_bytes)),
            ElemType::I32 => Owned::I32(le(data, i32::from_le_bytes)),
            ElemType::U32 => Owned::U32(le(data, u32::from_le_bytes)),
            ElemType::I64 => Owned::I64(le(data, i64::from_le_bytes)),
        };
        Ok(Self::new(IndexArray::with_shape(owned, shape).expect("length checked against the shape")))
    }

    /// Write as `.npy` (byte-identical to `numpy.save`) under a temporary name, then rename;
    /// `fsync` makes it durable before the rename.
    #[pyo3(signature = (path, fsync=true))]
    fn save(&self, py: Python<'_>, path: PathBuf, fsync: bool) -> PyResult<()> {
        py.detach(|| npy::save(&self.inner, &path, fsync)).into_py(py)
    }

    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.elem().name()
    }

    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.shape().to_vec()
    }

    fn __len__(&self) -> usize {
        self.inner.bytes().len()
    }

    /// # Safety
    /// `view` is the `Py_buffer` CPython hands to `bf_getbuffer` (see [`export_read_only`]).
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let bytes = slf.get().inner.bytes();
        // SAFETY: the array is immutable and lives as long as `slf`.
        unsafe { export_read_only(slf.as_any(), bytes, view, flags, "index arrays are read-only") }
    }
}
