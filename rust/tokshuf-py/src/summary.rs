//! Run summaries across the boundary: returned to Python as objects (dicts in the order of the
//! core's fields), and written as files by the core's one writer whichever side made them
//! ([`fsutil::json_file_bytes`] then [`fsutil::write_whole`]). Both mask credentials: a summary
//! lists its inputs, and an input URL may carry a password or a signature.

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::ser::{Error as _, Serialize, SerializeMap, SerializeSeq, Serializer};
use tokshuf_core::fsutil;
use tokshuf_core::storage::redact;

use crate::long_call::run_detached;

/// `value` as Python objects (structs and maps as dicts, in order; sequences as lists, tuples as
/// tuples), every string and key with credentials masked.
pub(crate) fn to_python<'py>(py: Python<'py>, value: &impl Serialize) -> PyResult<Bound<'py, PyAny>> {
    masked(pythonize::pythonize(py, value)?)
}

fn masked(obj: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    if let Ok(text) = obj.cast::<PyString>() {
        if let Cow::Owned(m) = redact(&text.to_cow()?) {
            return Ok(PyString::new(obj.py(), &m).into_any());
        }
    } else if let Ok(list) = obj.cast::<PyList>() {
        for i in 0..list.len() {
            list.set_item(i, masked(list.get_item(i)?)?)?;
        }
    } else if let Ok(dict) = obj.cast::<PyDict>() {
        let out = PyDict::new(obj.py());
        for (k, v) in dict.iter() {
            out.set_item(masked(k)?, masked(v)?)?;
        }
        return Ok(out.into_any());
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        let items = tuple.iter().map(masked).collect::<PyResult<Vec<_>>>()?;
        return Ok(PyTuple::new(obj.py(), items)?.into_any());
    }
    Ok(obj)
}

/// A Python value made of dicts, lists, tuples, strings, numbers, booleans and `None`, serialized
/// as `json.dumps` reads it (dicts in their order; int keys as strings).
pub(crate) struct PyJson<'a, 'py>(pub &'a Bound<'py, PyAny>);

impl Serialize for PyJson<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (o, err) = (self.0, |e: PyErr| S::Error::custom(e));
        if o.is_none() {
            s.serialize_unit()
        } else if let Ok(b) = o.cast::<PyBool>() {
            s.serialize_bool(b.is_true())
        } else if o.is_instance_of::<PyInt>() {
            match o.extract::<i64>() {
                Ok(v) => s.serialize_i64(v),
                Err(_) => s.serialize_u64(o.extract().map_err(err)?),
            }
        } else if let Ok(f) = o.cast::<PyFloat>() {
            s.serialize_f64(f.value())
        } else if let Ok(text) = o.cast::<PyString>() {
            s.serialize_str(&text.to_cow().map_err(err)?)
        } else if let Ok(dict) = o.cast::<PyDict>() {
            let mut map = s.serialize_map(Some(dict.len()))?;
            for (k, v) in dict.iter() {
                let key = match k.cast::<PyString>() {
                    Ok(text) => text.to_cow().map_err(err)?.into_owned(),
                    Err(_) if k.is_instance_of::<PyInt>() && !k.is_instance_of::<PyBool>() => k.to_string(),
                    Err(_) => return Err(S::Error::custom(format!("keys must be str or int, not {}", type_name(&k)))),
                };
                map.serialize_entry(&key, &PyJson(&v))?;
            }
            map.end()
        } else if o.is_instance_of::<PyList>() || o.is_instance_of::<PyTuple>() {
            let mut seq = s.serialize_seq(None)?;
            for item in o.try_iter().map_err(err)? {
                seq.serialize_element(&PyJson(&item.map_err(err)?))?;
            }
            seq.end()
        } else {
            Err(S::Error::custom(format!("Object of type {} is not JSON serializable", type_name(o))))
        }
    }
}

fn type_name(o: &Bound<'_, PyAny>) -> String {
    o.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
}

/// The bytes of the summary file of `summary` (pretty JSON and a newline, credentials masked); a
/// value JSON cannot hold is a `TypeError`, as for `json.dumps`.
pub(crate) fn file_bytes(summary: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    fsutil::json_file_bytes(&PyJson(summary)).map_err(|e| PyTypeError::new_err(e.to_string()))
}

/// Write `summary` (a dict, or a list of them) as the summary file `target`: a local file is
/// replaced atomically, an object in a store appears whole; the same bytes as the summaries the
/// commands write themselves.
#[pyfunction]
pub(crate) fn write_summary(py: Python<'_>, summary: &Bound<'_, PyAny>, target: PathBuf) -> PyResult<()> {
    let bytes = file_bytes(summary)?;
    run_detached(py, move |_| fsutil::write_whole(&target, bytes))
}
