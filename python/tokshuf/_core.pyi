# Stub of the native module, kept honest by `python -m mypy.stubtest tokshuf._core` (tests/test_stubs.py).
from os import PathLike
from pathlib import Path
from typing import final

__all__ = [
    "IndexReader",
    "IndexWriter",
    "MappedBuffer",
    "__version__",
    "build_profile",
    "expand_input_paths",
    "list_prefixes",
    "merge",
    "preprocess",
    "write_index",
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
def write_index(
    path: str | PathLike[str],
    dtype: str,
    sequence_lengths: memoryview,
    document_indices: memoryview,
    sequence_modes: memoryview | None = None,
) -> int: ...
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
