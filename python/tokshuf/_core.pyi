# Stub of the native module, kept honest by `python -m mypy.stubtest tokshuf._core` (tests/test_stubs.py).
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Literal, TypeAlias, final

import numpy as np

# Anything that exports a C-contiguous buffer of the expected item type.
_Buffer: TypeAlias = np.ndarray[Any, Any] | memoryview | bytes

__all__ = [
    "TIKTOKEN_ENCODINGS",
    "BpeEncoder",
    "IndexArray",
    "IndexReader",
    "IndexWriter",
    "InstanceReader",
    "MappedBuffer",
    "SampleReader",
    "StagedSet",
    "StreamWorker",
    "TokenWriter",
    "Tokenizer",
    "__version__",
    "_fail_writes_after",
    "build_blending_indices",
    "build_exhaustive_blending_indices",
    "build_gpt_indices",
    "build_profile",
    "build_sample_index",
    "checksum_file",
    "convert_indexed",
    "defaults",
    "expand_input_paths",
    "identity",
    "indexed_documents",
    "instances_per_file",
    "interleave_plan",
    "is_remote",
    "limit_documents",
    "list_object_sizes",
    "list_objects",
    "list_prefixes",
    "local_copy",
    "local_pair",
    "merge",
    "normalize",
    "numpy_random_words",
    "numpy_shuffled",
    "numpy_shuffled_aranges",
    "numpy_sum",
    "pack_documents",
    "padded_instances",
    "parse_split",
    "parse_task",
    "preprocess",
    "publish_remote",
    "read_metadata",
    "redact",
    "remote_exists",
    "scan_documents",
    "shuffle",
    "size_per_split_per_dataset",
    "split_pattern_regex",
    "split_ranges",
    "storage_counters",
    "tiktoken_encoding_data",
    "upload",
    "vsl_batch_order",
    "vsl_batches_per_bucket",
    "vsl_buckets",
    "vsl_decompose",
    "write_index",
    "write_metadata",
    "write_summary",
]

__version__: str
build_profile: str

def defaults(command: Literal["preprocess", "shuffle"]) -> dict[str, Any]: ...

@final
class MappedBuffer:
    def __len__(self) -> int: ...
    # The buffer protocol (bf_getbuffer); not visible as methods at runtime on 3.11.
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...

@final
class IndexReader:
    def __new__(
        cls,
        prefix: str | PathLike[str],
        multimodal: bool | None = None,
        validate: bool = True,
        remote: Literal["ranges", "copy"] = "copy",
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
    @property
    def ranged(self) -> bool: ...
    @property
    def bin_len(self) -> int: ...
    def read_bin(self, start: int, end: int) -> bytes: ...
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

def merge(
    prefixes: list[str],
    output_prefix: str | PathLike[str],
    summary_path: str | PathLike[str] | None = None,
) -> dict[str, int]: ...
def local_pair(prefix: str) -> str: ...
def checksum_file(path: str | PathLike[str]) -> tuple[int, str]: ...
def publish_remote(
    record: str,
    command: str,
    run: Any,
    inputs: Any,
    files: list[tuple[str, str]],
    summary: tuple[str, Mapping[str, Any]] | None = None,
) -> None: ...

@final
class StagedSet:
    def __new__(cls) -> StagedSet: ...
    def merge(self, prefixes: list[str], output: str | PathLike[str]) -> dict[str, int]: ...
    def commit(
        self,
        record: str | PathLike[str],
        command: str,
        run: Any,
        inputs: Any,
        summary: tuple[str | PathLike[str], Mapping[str, Any]] | None = None,
    ) -> None: ...

def write_index(
    path: str | PathLike[str],
    dtype: str,
    sequence_lengths: memoryview,
    document_indices: memoryview,
    sequence_modes: memoryview | None = None,
) -> int: ...
def list_prefixes(directory: str | PathLike[str]) -> list[Path]: ...
def local_copy(url: str) -> str: ...
def is_remote(path: str) -> bool: ...
def remote_exists(url: str) -> bool: ...
def list_objects(url: str, suffixes: list[str]) -> list[str]: ...
def list_object_sizes(url: str, suffixes: list[str]) -> list[tuple[str, int]]: ...
def upload(path: str | PathLike[str], url: str) -> None: ...
def identity(path: str | PathLike[str]) -> str: ...
def storage_counters() -> tuple[int, int]: ...
def redact(text: str) -> str: ...
def write_summary(summary: Mapping[str, Any] | list[Any], target: str | PathLike[str]) -> None: ...
def expand_input_paths(inputs: list[str]) -> list[Path]: ...
def parse_task(text: str) -> tuple[int, int]: ...
def preprocess(
    inputs: list[str],
    output_prefix: str | PathLike[str],
    tokenizer: Tokenizer,
    json_keys: list[str],
    *,
    append_eod: bool,
    dtype: str | None,
    num_threads: int | None,
    on_error: str,
    partitions: int,
    batch_bytes: int,
    max_line_bytes: int,
    sentence_lists: bool,
    progress: str,
    summary: bool | str | PathLike[str],
    shard: str | None,
) -> dict[str, Any]: ...

# -- OLMo token files (tokens.rs) ---------------------------------------------------------------
def scan_documents(
    path: str | PathLike[str],
    dtype: str,
    eos_token_id: int,
    bos_token_id: int | None = None,
    num_threads: int | None = None,
) -> MappedBuffer: ...
def indexed_documents(prefix: str | PathLike[str]) -> tuple[MappedBuffer, str, int]: ...
def read_metadata(path: str | PathLike[str], num_tokens: int) -> MappedBuffer: ...
def write_metadata(path: str | PathLike[str], spans: _Buffer, src: str) -> None: ...
def convert_indexed(
    prefix: str | PathLike[str],
    output: str | PathLike[str],
    dtype: str,
    append_eos: int | None = None,
    metadata_path: str | PathLike[str] | None = None,
    summary_path: str | PathLike[str] | None = None,
) -> MappedBuffer: ...
def _fail_writes_after(n: int | None, crash: bool = False) -> int: ...

@final
class TokenWriter:
    def __new__(cls, path: str | PathLike[str], dtype: str) -> TokenWriter: ...
    def write(self, tokens: _Buffer) -> None: ...
    @property
    def tokens(self) -> int: ...
    def finish(self) -> int: ...
    def abort(self) -> None: ...

# -- instance strategies (instances.rs) ---------------------------------------------------------
def instances_per_file(
    tokens_per_file: list[int], sequence_length: int, max_target_sequence_length: int | None = None
) -> list[int]: ...
def limit_documents(spans: _Buffer, max_length: int, long_doc_strategy: str) -> MappedBuffer: ...
def padded_instances(
    spans: _Buffer, sequence_length: int, long_doc_strategy: str = "truncate"
) -> MappedBuffer: ...
def pack_documents(
    groups: Sequence[_Buffer], sequence_length: int, num_threads: int | None = None
) -> tuple[MappedBuffer, MappedBuffer, MappedBuffer]: ...
def vsl_decompose(spans: _Buffer, min_length: int, max_length: int) -> MappedBuffer: ...
def vsl_buckets(pieces: _Buffer, min_length: int, max_length: int) -> list[MappedBuffer]: ...
def vsl_batches_per_bucket(
    instances_per_bucket: Sequence[tuple[int, int]],
    global_batch_tokens: int,
    curriculum_name: str = "natural",
    num_cycles: int | None = None,
    balanced: bool = False,
) -> list[tuple[int, int]]: ...
def vsl_batch_order(
    batches_per_bucket: Sequence[tuple[int, int]],
    entropy: list[int],
    curriculum_name: str = "natural",
    num_cycles: int | None = None,
    balanced: bool = False,
) -> MappedBuffer: ...
def interleave_plan(
    exempt: _Buffer, sequence_length: int, docs_per_instance: int, entropy: list[int]
) -> tuple[MappedBuffer, MappedBuffer]: ...
def numpy_shuffled(values: _Buffer, entropy: list[int]) -> MappedBuffer: ...

@final
class InstanceReader:
    def __new__(
        cls,
        sources: Sequence[tuple[str | PathLike[str], str | None]],
        kind: str,
        sequence_length: int,
        pad_token_id: int,
        eos_token_id: int,
        bos_token_id: int | None = None,
        *,
        files: Mapping[str, str | PathLike[str]] = ...,
        instances_per_file: Sequence[int] = ...,
        doc_files: Sequence[str | PathLike[str]] = ...,
        docs_per_instance: int = 1,
        chunks_per_doc: int = 1,
        label_masks: Sequence[str | PathLike[str]] = ...,
        olmo_doc_lens: bool = True,
        recorded_boundaries: Sequence[bool] = ...,
    ) -> InstanceReader: ...
    def __len__(self) -> int: ...
    def fill(
        self,
        indices: _Buffer,
        input_ids: _Buffer,
        label_mask: _Buffer | None = None,
        doc_lens: bool = False,
        num_threads: int | None = None,
    ) -> tuple[MappedBuffer, MappedBuffer] | None: ...

@final
class Tokenizer:
    def __new__(
        cls,
        spec: str,
        eos_token_id: int | None = None,
        special_tokens: list[tuple[str, int]] | None = None,
    ) -> Tokenizer: ...
    @staticmethod
    def from_hf_json(
        json: str, origin: str = "tokenizers.Tokenizer", eos_token_id: int | None = None
    ) -> Tokenizer: ...
    @property
    def eos_token_id(self) -> int | None: ...
    @property
    def vocab_size(self) -> int: ...
    def identity_json(self) -> str: ...
    def encode(self, text: str) -> list[int]: ...
    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]: ...
    def encode_batch_flat(
        self, texts: Sequence[str], num_threads: int | None = None
    ) -> tuple[IndexArray, IndexArray]: ...

def tiktoken_encoding_data(name: str) -> dict[str, Any]: ...

# -- Megatron indices (nanoset.rs, index_array.rs) -------------------------------------------
# Per split (train, valid, test): its [start, end) share of a dataset, None for no share.
_Bookends: TypeAlias = list[tuple[float, float] | None]

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
        origin: str | None = None,
        remote: Literal["ranges", "copy"] = "copy",
    ) -> SampleReader: ...
    @staticmethod
    def blend(
        datasets: list[SampleReader | None], dataset_index: IndexArray, dataset_sample_index: IndexArray
    ) -> SampleReader: ...
    def __len__(self) -> int: ...
    @property
    def width(self) -> int: ...
    def get_batch(self, ks: object, out: object, num_threads: int | None = None) -> None: ...

def numpy_random_words(seed: int, n: int) -> list[int]: ...
def numpy_shuffled_aranges(seed: int, lengths: list[int]) -> list[list[int]]: ...
def numpy_sum(values: list[float]) -> float: ...
def normalize(weights: list[float]) -> list[float]: ...
def parse_split(split: str) -> tuple[list[float], _Bookends]: ...
def split_ranges(matrix: Sequence[tuple[float, float] | None], n: int) -> list[tuple[int, int] | None]: ...
def size_per_split_per_dataset(
    weights: list[float], sizes: Sequence[int | None], surplus: float
) -> list[list[int | None]]: ...
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
def shuffle(
    inputs: list[str],
    local_cell_dir: str | PathLike[str],
    output: str | PathLike[str],
    tokenizer: Tokenizer | None,
    *,
    context_length: int,
    wds_chunk_size: int,
    num_local_cells: int,
    seed: int,
    num_threads: int | None,
    ext: list[str] | None,
    shuffle_only: bool,
    special_tokens: str,
    eos_token_id: int | None,
    pad_token_id: int | None,
    bos_token_id: int | None,
    content_key: str,
    on_error: str,
    member_format: str,
    gzip_level: int,
    all_pad_context: bool,
    buffer_bytes: int,
    batch_bytes: int,
    max_line_bytes: int,
    progress: str,
    stage: str | None,
    task: str | None,
    summary_path: str | PathLike[str] | None,
) -> dict[str, Any]: ...

# -- fast byte-level BPE (bpe.rs) ---------------------------------------------------------------
TIKTOKEN_ENCODINGS: list[str]

def split_pattern_regex(name: str) -> str: ...

@final
class BpeEncoder:
    @staticmethod
    def from_tiktoken(name: str, special_tokens_in_text: bool = False) -> BpeEncoder: ...
    @staticmethod
    def from_hf_file(path: str | PathLike[str], special_tokens_in_text: bool = False) -> BpeEncoder: ...
    def encode(self, text: str) -> list[int]: ...
    def encode_batch(
        self, texts: Sequence[str], num_threads: int | None = None
    ) -> tuple[IndexArray, IndexArray]: ...
    def mergeable_ranks(self) -> dict[bytes, int]: ...
    @property
    def pattern(self) -> str: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def eod_id(self) -> int | None: ...
    @property
    def identity(self) -> str: ...

@final
class StreamWorker:
    def __new__(
        cls,
        config: str,
        sources: list[Any],
        worker: int,
        n_workers: int,
        state: dict[str, Any] | None = None,
        step: int | None = None,
        step_stride: int | None = None,
    ) -> StreamWorker: ...
    @property
    def batches(self) -> int: ...
    @property
    def step(self) -> int: ...
    @property
    def num_docs(self) -> list[int]: ...
    def next_batch(
        self, batch: int, input: Any, label: Any | None = None, positions: Any | None = None
    ) -> bytes: ...
    def skip_batches(self, n: int, batch: int) -> None: ...
    def state(self) -> dict[str, Any]: ...
