"""File handlers: how a sub-dataset's files become documents.

A handler is any object with the five methods of :class:`FileHandler` (the protocol of Bamba's
loader, so handlers written for fms-fsdp work unchanged). tokshuf reads ``.bin/.idx`` and raw
``.npy`` token files natively in Rust (:class:`IndexedHandler`, :class:`NpyHandler`); the other
built-in handlers (Arrow, Parquet, tars) and user handlers run in Python, one call per document.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from tokshuf._deprecation import deprecated_parameters, renamed_attribute, renamed_parameters
from tokshuf._limits import token_id
from tokshuf.errors import ConfigError, FormatError

__all__ = [
    "FileHandler",
    "HandlerReader",
    "IndexedHandler",
    "NpyHandler",
    "as_token_array",
    "handler_for",
    "register_handler",
]


@runtime_checkable
class FileHandler(Protocol):
    """What the loader needs from a file format."""

    def is_legal(self, path: str) -> bool:
        """Whether ``path`` is a data file of this format (decided from the name alone)."""

    def open(self, path: str) -> Any:
        """A reader object for ``path``."""

    def length(self, path: str) -> int:
        """Number of documents in ``path``."""

    def get(self, reader: Any, index: int, drop_tokens: AbstractSet[int]) -> Any:
        """Document ``index`` of an opened file, minus its first/last token if in ``drop_tokens``."""

    def slice(self, doc: Any, start: int, n: int) -> Sequence[int] | npt.NDArray[Any]:
        """Tokens ``start:start + n`` of a document returned by :meth:`get`."""


class _NativeHandler:
    """A format read by the Rust core; the Python methods exist for inspection and tests."""

    native = ""

    def open(self, path: str) -> Any:
        raise NotImplementedError

    def length(self, path: str) -> int:
        raise NotImplementedError

    def get(self, reader: Any, index: int, drop_tokens: AbstractSet[int]) -> Any:
        doc = reader[index]
        return strip_ends(np.asarray(doc), drop_tokens)

    def slice(self, doc: Any, start: int, n: int) -> npt.NDArray[Any]:
        return np.asarray(doc[start : start + n])


class IndexedHandler(_NativeHandler):
    """Megatron/tokshuf ``.bin/.idx`` pairs (a file is named by its ``.idx``); read in Rust."""

    native = "indexed"

    def is_legal(self, path: str) -> bool:
        return path.endswith(".idx") and os.path.exists(path[:-4] + ".bin")

    def open(self, path: str) -> Any:
        from tokshuf.indexed import IndexedDataset

        ds = IndexedDataset(path[:-4])
        return _IndexedDocs(ds)

    def length(self, path: str) -> int:
        from tokshuf.indexed import IndexedDataset

        return IndexedDataset(path[:-4]).num_documents


class _IndexedDocs:
    def __init__(self, ds: Any) -> None:
        self.ds = ds

    def __getitem__(self, d: int) -> npt.NDArray[Any]:
        a, b = int(self.ds.document_indices[d]), int(self.ds.document_indices[d + 1])
        parts = [self.ds[i] for i in range(a, b)]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint32)


class NpyHandler(_NativeHandler):
    """OLMo-style raw token files (headerless little-endian ``dtype``), documents separated by
    ``eos_token_id`` (the boundary, not part of a document); read in Rust.

    The stream's own ``eos_token_id`` setting adds it back at every document end."""

    eos_token = renamed_attribute[int]("eos_token_id")

    native = "npy"

    @renamed_parameters(eos_token="eos_token_id")
    def __init__(self, dtype: str = "uint32", eos_token_id: int = 0) -> None:
        if dtype not in ("uint8", "uint16", "uint32", "uint64"):
            raise ConfigError(f"npy dtype {dtype!r}: expected uint8, uint16, uint32 or uint64")
        self.dtype = dtype
        self.eos_token_id = token_id(eos_token_id, "eos_token_id")

    def is_legal(self, path: str) -> bool:
        return path.endswith(".npy")

    def _tokens(self, path: str) -> npt.NDArray[Any]:
        size = np.dtype(self.dtype).itemsize
        if os.path.getsize(path) % size:
            raise FormatError(f"{path}: size is not a multiple of {size} bytes ({self.dtype})")
        if os.path.getsize(path) == 0:
            return np.zeros(0, self.dtype)
        return np.memmap(path, dtype=self.dtype, mode="r")

    def open(self, path: str) -> Any:
        a = self._tokens(path)
        ends = np.flatnonzero(a == self.eos_token_id)
        if len(a) and (len(ends) == 0 or ends[-1] + 1 < len(a)):
            ends = np.append(ends, len(a))
        starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else ends
        return [a[s:e] for s, e in zip(starts, ends, strict=True)]

    def length(self, path: str) -> int:
        return len(self.open(path))


def strip_ends(doc: npt.NDArray[Any], drop: AbstractSet[int]) -> npt.NDArray[Any]:
    """``doc`` without its first and last token when they are in ``drop`` (Bamba's drop_tokens)."""
    if drop and len(doc) and int(doc[0]) in drop:
        doc = doc[1:]
    if drop and len(doc) and int(doc[-1]) in drop:
        doc = doc[:-1]
    return doc


def as_token_array(tokens: Any, where: str = "") -> npt.NDArray[np.uint32]:
    """``tokens`` as a contiguous uint32 array, rejecting negative, too large or non-integer ids."""
    a = np.asarray(tokens)
    if a.ndim != 1:
        a = a.reshape(-1)
    if a.size == 0:
        return np.zeros(0, np.uint32)
    if a.dtype.kind not in "iub":
        raise FormatError(f"{where}: token ids must be integers, got dtype {a.dtype}")
    if a.dtype.kind == "i" and int(a.min()) < 0:
        raise FormatError(f"{where}: negative token id {int(a.min())}")
    if a.dtype.itemsize > 4 and int(a.max()) > 0xFFFFFFFF:
        raise FormatError(f"{where}: token id {int(a.max())} does not fit 32 bits")
    return np.ascontiguousarray(a, dtype=np.uint32)


class HandlerReader:
    """The documents of a list of files, read through a Python handler: the object the Rust
    core calls (``num_docs``, ``get(i)`` → uint32 array). Keeps a few files open; pickles
    without them, so DataLoader workers reopen their own."""

    def __init__(self, files: Sequence[str], counts: Sequence[int], handler: Any, cache: int = 4) -> None:
        self.files = list(files)
        self.handler = handler
        self.cum = np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))]).astype(np.int64)
        self.num_docs = int(self.cum[-1])
        self._cache_size = cache
        self._open: OrderedDict[int, Any] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_open"] = OrderedDict()
        return state

    def _reader(self, f: int) -> Any:
        if f in self._open:
            self._open.move_to_end(f)
            return self._open[f]
        r = self.handler.open(self.files[f])
        self._open[f] = r
        while len(self._open) > self._cache_size:
            _, old = self._open.popitem(last=False)
            close = getattr(old, "close", None)
            if callable(close):
                close()
        return r

    def get(self, i: int) -> npt.NDArray[np.uint32]:
        if not 0 <= i < self.num_docs:
            raise IndexError(f"document {i} out of range for {self.num_docs} documents")
        f = int(np.searchsorted(self.cum, i, side="right")) - 1
        local = i - int(self.cum[f])
        doc = self.handler.get(self._reader(f), local, frozenset())
        return as_token_array(self.handler.slice(doc, 0, len(doc)), f"{self.files[f]} document {local}")


_REGISTRY: dict[str, Any] = {}


def register_handler(name: str, factory: Any) -> None:
    """Make ``file_type=name`` build a handler with ``factory(**options)``."""
    _REGISTRY[name] = factory


def handler_for(file_type: str | Any, **options: Any) -> Any:
    """The handler for ``file_type`` (a registered name or a handler object, returned as is).

    Options the chosen handler does not take are ignored, so one config can name them all."""
    if not isinstance(file_type, str):
        return file_type
    _builtin_registry()
    if file_type not in _REGISTRY:
        names = ", ".join(sorted(_REGISTRY))
        raise ConfigError(f"unknown file_type {file_type!r} (expected one of: {names}, or a handler object)")
    factory = _REGISTRY[file_type]
    import inspect

    params = {*inspect.signature(factory).parameters, *deprecated_parameters(factory)}
    return factory(**{k: v for k, v in options.items() if k in params})


def _builtin_registry() -> None:
    if _REGISTRY:
        return
    from tokshuf.stream.handlers_arrow import ArrowHandler
    from tokshuf.stream.handlers_parquet import ParquetHandler
    from tokshuf.stream.handlers_tar import TarHandler

    _REGISTRY.update(
        {
            "bin": IndexedHandler,
            "indexed": IndexedHandler,
            "npy": NpyHandler,
            "arrow": ArrowHandler,
            "parquet": ParquetHandler,
            "hf_parquet": ParquetHandler,
            "tar": TarHandler,
        }
    )
