//! `tokshuf._core`: the thin PyO3 layer over `tokshuf-core`.
//!
//! Inputs are converted while attached, long work runs detached through
//! [`long_call::run_detached`], and every core error becomes a Python exception in
//! [`errors`]. The public API lives in the `tokshuf` Python package.

mod arrays;
mod bpe;
mod buffer;
mod errors;
mod index_array;
mod indexed;
mod instances;
mod long_call;
mod nanoset;
mod open;
mod preprocess;
mod shuffle;
mod storage;
mod stream;
mod stream_source;
mod summary;
mod tokenizer;
mod tokens;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::IntoPyResult;

/// Rust allocations of the extension: large blocks straight from the OS, so that the RSS of a
/// long job does not creep up (`tokshuf_core::alloc`). Python keeps its own allocator.
#[global_allocator]
static ALLOCATOR: tokshuf_core::alloc::LargeFromOs = tokshuf_core::alloc::LargeFromOs;

/// The defaults of `command`'s options (`preprocess`, `shuffle`), by their public names. Their one
/// declaration is the core's config; the Python API, the command line and the tests read them here.
#[pyfunction]
fn defaults<'py>(py: Python<'py>, command: &str) -> PyResult<Bound<'py, PyDict>> {
    match command {
        "preprocess" => preprocess::defaults(py),
        "shuffle" => shuffle::defaults(py),
        other => Err(tokshuf_core::Error::invalid(format!(
            "no defaults for command {other:?} (expected one of: preprocess, shuffle)"
        )))
        .into_py(py),
    }
}

/// The module: every class and function of the layer, named by the file that defines it.
#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("build_profile", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_class::<buffer::PyMappedBuffer>()?;
    m.add_class::<indexed::PyIndexReader>()?;
    m.add_class::<indexed::PyIndexWriter>()?;
    m.add_function(wrap_pyfunction!(indexed::merge, m)?)?;
    m.add_function(wrap_pyfunction!(indexed::list_prefixes, m)?)?;
    m.add_function(wrap_pyfunction!(indexed::write_index, m)?)?;
    m.add_function(wrap_pyfunction!(indexed::_fail_writes_after, m)?)?;
    m.add_function(wrap_pyfunction!(indexed::local_pair, m)?)?;
    m.add_function(wrap_pyfunction!(indexed::publish_remote, m)?)?;
    m.add_function(wrap_pyfunction!(indexed::checksum_file, m)?)?;
    m.add_class::<indexed::PyStagedSet>()?;
    m.add_class::<bpe::PyBpeEncoder>()?;
    m.add_function(wrap_pyfunction!(bpe::split_pattern_regex, m)?)?;
    m.add("TIKTOKEN_ENCODINGS", tokshuf_core::tokenize::bpe::encodings::encoding_names())?;
    m.add_function(wrap_pyfunction!(preprocess::preprocess, m)?)?;
    m.add_function(wrap_pyfunction!(preprocess::expand_input_paths, m)?)?;
    m.add_function(wrap_pyfunction!(preprocess::parse_task, m)?)?;
    m.add_class::<tokens::PyTokenWriter>()?;
    m.add_function(wrap_pyfunction!(tokens::scan_documents, m)?)?;
    m.add_function(wrap_pyfunction!(tokens::indexed_documents, m)?)?;
    m.add_function(wrap_pyfunction!(tokens::read_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(tokens::write_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(tokens::convert_indexed, m)?)?;
    m.add_class::<instances::PyInstanceReader>()?;
    m.add_function(wrap_pyfunction!(instances::instances_per_file, m)?)?;
    m.add_function(wrap_pyfunction!(instances::limit_documents, m)?)?;
    m.add_function(wrap_pyfunction!(instances::padded_instances, m)?)?;
    m.add_function(wrap_pyfunction!(instances::pack_documents, m)?)?;
    m.add_function(wrap_pyfunction!(instances::vsl_decompose, m)?)?;
    m.add_function(wrap_pyfunction!(instances::vsl_buckets, m)?)?;
    m.add_function(wrap_pyfunction!(instances::vsl_batches_per_bucket, m)?)?;
    m.add_function(wrap_pyfunction!(instances::vsl_batch_order, m)?)?;
    m.add_function(wrap_pyfunction!(instances::interleave_plan, m)?)?;
    m.add_function(wrap_pyfunction!(instances::numpy_shuffled, m)?)?;
    m.add_class::<stream::PyStreamWorker>()?;
    m.add_class::<tokenizer::PyTokenizer>()?;
    m.add_function(wrap_pyfunction!(tokenizer::tiktoken_encoding_data, m)?)?;
    m.add_class::<index_array::PyIndexArray>()?;
    m.add_class::<nanoset::PySampleReader>()?;
    m.add_function(wrap_pyfunction!(nanoset::numpy_random_words, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::numpy_shuffled_aranges, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::numpy_sum, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::normalize, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::parse_split, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::split_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::size_per_split_per_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::build_sample_index, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::build_blending_indices, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::build_exhaustive_blending_indices, m)?)?;
    m.add_function(wrap_pyfunction!(nanoset::build_gpt_indices, m)?)?;
    m.add_function(wrap_pyfunction!(shuffle::shuffle, m)?)?;
    m.add_function(wrap_pyfunction!(storage::local_copy, m)?)?;
    m.add_function(wrap_pyfunction!(storage::is_remote, m)?)?;
    m.add_function(wrap_pyfunction!(storage::remote_exists, m)?)?;
    m.add_function(wrap_pyfunction!(storage::list_objects, m)?)?;
    m.add_function(wrap_pyfunction!(storage::list_object_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(storage::upload, m)?)?;
    m.add_function(wrap_pyfunction!(storage::identity, m)?)?;
    m.add_function(wrap_pyfunction!(storage::storage_counters, m)?)?;
    m.add_function(wrap_pyfunction!(storage::redact, m)?)?;
    m.add_function(wrap_pyfunction!(summary::write_summary, m)?)?;
    Ok(())
}
