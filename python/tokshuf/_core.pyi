# Stub of the native module, kept honest by `python -m mypy.stubtest tokshuf._core` (tests/test_stubs.py).
from os import PathLike
from pathlib import Path
from typing import Any, final

__all__ = [
    "IndexArray",
    "IndexReader",
    "IndexWriter",
    "MappedBuffer",
    "SampleReader",
    "__version__",
    "build_blending_indices",
    "build_exhaustive_blending_indices",
    "build_gpt_indices",
    "build_profile",
    "build_sample_index",
    "expand_input_paths",
    "list_prefixes",
    "merge",
    "normalize",
    "numpy_random_words",
    "numpy_shuffled_aranges",
    "numpy_sum",
    "parse_split",
    "preprocess",
    "size_per_split_per_dataset",
    "split_ranges",
]

__version__: str
build_profile: str

@final
class MappedBuffer:
    def __len__(self) -> int: ...
    # The buffer protocol (bf_getbuffer); not visible as methods at runtime on 3.11.
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...

@final
class IndexReader:
    def __new__(
        cls, prefix: str | PathLike[str], multimodal: bool | None = None, validate: bool = True
    ) -> IndexReader: ...
    @property
    def prefix(self) -> Path: ...
    @property
    def dtype(self) -> str: ...
    @property
    def dtype_code(self) -> int: ...
    @property
    def sequence_count(self) -> int: ...
    @property
    def document_count(self) -> int: ...
    @property
    def multimodal(self) -> bool: ...
    @property
    def offsets(self) -> tuple[int, int, int, int]: ...
    def idx_buffer(self) -> MappedBuffer: ...
    def bin_buffer(self) -> MappedBuffer: ...

@final
class IndexWriter:
    def __new__(cls, prefix: str | PathLike[str], dtype: str, multimodal: bool = False) -> IndexWriter: ...
    def add_sequence_bytes(self, data: memoryview | bytes, mode: int | None = None) -> None: ...
    def end_document(self) -> None: ...
    def append(self, prefix: str | PathLike[str]) -> None: ...
    def finish(self) -> dict[str, int]: ...
    def abort(self) -> None: ...

def merge(prefixes: list[str], output: str | PathLike[str]) -> dict[str, int]: ...
def list_prefixes(directory: str | PathLike[str]) -> list[Path]: ...
def expand_input_paths(inputs: list[str]) -> list[Path]: ...
def preprocess(
    inputs: list[str],
    output_prefix: str | PathLike[str],
    tokenizer: str,
    json_keys: list[str],
    *,
    append_eod: bool = False,
    dtype: str | None = None,
    workers: int = 1,
    on_error: str = "fail",
    partitions: int = 1,
    batch_bytes: int = 1048576,
    max_line_bytes: int = 1073741824,
) -> str: ...

# -- Megatron indices (nanoset.rs, index_array.rs) -------------------------------------------
_Bookends = tuple[tuple[float, float] | None, tuple[float, float] | None, tuple[float, float] | None]
_Counts = tuple[int | None, int | None, int | None]

@final
class IndexArray:
    @staticmethod
    def load(path: str | PathLike[str]) -> IndexArray: ...
    @staticmethod
    def from_bytes(data: bytes, dtype: str, shape: list[int]) -> IndexArray: ...
    def save(self, path: str | PathLike[str], fsync: bool = True) -> None: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> list[int]: ...
    @property
    def is_mapped(self) -> bool: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...

@final
class SampleReader:
    @staticmethod
    def gpt(
        prefix: str | PathLike[str],
        document_index: IndexArray,
        sample_index: IndexArray,
        shuffle_index: IndexArray,
        *,
        sequence_length: int,
        add_extra_token: bool,
        pad: int,
    ) -> SampleReader: ...
    @staticmethod
    def blend(
        datasets: list[SampleReader | None], dataset_index: IndexArray, dataset_sample_index: IndexArray
    ) -> SampleReader: ...
    def __len__(self) -> int: ...
    @property
    def width(self) -> int: ...
    def get_batch(self, ks: object, out: object, threads: int | None = None) -> None: ...

def numpy_random_words(seed: int, n: int) -> list[int]: ...
def numpy_shuffled_aranges(seed: int, lengths: list[int]) -> list[list[int]]: ...
def numpy_sum(values: list[float]) -> float: ...
def normalize(weights: list[float]) -> list[float]: ...
def parse_split(split: str) -> tuple[tuple[float, float, float], _Bookends]: ...
def split_ranges(
    matrix: _Bookends | list[tuple[float, float] | None], n: int
) -> tuple[tuple[int, int] | None, tuple[int, int] | None, tuple[int, int] | None]: ...
def size_per_split_per_dataset(
    weights: list[float], sizes: _Counts | list[int | None], surplus: float
) -> list[_Counts]: ...
def build_sample_index(
    sizes: list[int],
    document_index: list[int],
    sequence_length: int,
    num_epochs: int,
    tokens_per_epoch: int,
    drop_last_partial_sequence: bool = True,
    add_extra_token_to_sequence: bool = True,
) -> IndexArray: ...
def build_blending_indices(weights: list[float], size: int) -> tuple[IndexArray, IndexArray]: ...
def build_exhaustive_blending_indices(sizes: list[int]) -> tuple[IndexArray, IndexArray]: ...
def build_gpt_indices(
    prefix: str | PathLike[str],
    beg: int,
    end: int,
    num_samples: int | None,
    *,
    sequence_length: int,
    add_extra_token: bool,
    seed: int,
    drop_last_partial_sequence: bool,
    scheme: str = "megatron",
) -> dict[str, Any]: ...
