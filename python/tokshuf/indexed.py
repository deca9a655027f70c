"""Megatron-LM indexed datasets (``.bin/.idx``, MMIDIDX v1): read, write, merge.

Reading maps both files once; every array handed out is a zero-copy numpy view whose ``base``
keeps the mapping alive. Instances pickle by path, so DataLoader workers reopen the files
instead of copying them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from tokshuf import _core
from tokshuf._limits import as_index, position
from tokshuf._storage import local_prefix
from tokshuf._summaries import MergeSummary
from tokshuf._summary_file import check_summary, summary_target, write_summary
from tokshuf._writer import FinishOnExit
from tokshuf.errors import ConfigError, FormatError

__all__ = ["REMOTE_READS", "IndexedDataset", "IndexedDatasetWriter", "RemoteRead", "merge", "write_index"]

PathLike = str | os.PathLike[str]

#: How the ``.bin`` of a dataset in a store is read: ``"ranges"`` requests the bytes each read
#: needs (a batch's in few coalesced requests); ``"copy"`` downloads the whole ``.bin`` once into
#: ``remote/`` of the cache root and maps it.
RemoteRead = Literal["ranges", "copy"]
REMOTE_READS: tuple[RemoteRead, ...] = ("ranges", "copy")


def check_remote(remote: object) -> None:
    """Raise :class:`ConfigError` unless ``remote`` is one of :data:`REMOTE_READS`."""
    if remote not in REMOTE_READS:
        raise ConfigError(f"remote must be one of {list(REMOTE_READS)}, got {remote!r}")


#: Megatron's dtype codes.
DTYPE_CODES: dict[int, np.dtype[Any]] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype(np.int16),
    4: np.dtype(np.int32),
    5: np.dtype(np.int64),
    6: np.dtype(np.float64),
    7: np.dtype(np.float32),
    8: np.dtype(np.uint16),
}


def _view(buffer: _core.MappedBuffer, dtype: npt.DTypeLike, count: int, offset: int = 0) -> npt.NDArray[Any]:
    """A read-only numpy view of ``buffer`` (zero-copy; the view's base keeps the mapping alive)."""
    return np.frombuffer(buffer, dtype, count=count, offset=offset)  # type: ignore[call-overload]


def _prefix(path: PathLike) -> str:
    """Accept ``data/x``, ``data/x.bin`` or ``data/x.idx``."""
    s = os.fspath(path)
    for suffix in (".bin", ".idx"):
        if s.endswith(suffix):
            return s[: -len(suffix)]
    return s


class IndexedDataset:
    """A Megatron indexed dataset, memory-mapped.

    Parameters
    ----------
    prefix : str or PathLike
        ``data/corpus_text_document`` for ``data/corpus_text_document.{bin,idx}``, or a storage
        URL (``s3://bucket/corpus_text_document``). Of a dataset in a store, the ``.idx`` is
        always a local copy, downloaded once under ``remote/`` of the cache root
        (``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``) and
        again only when the object changes; the ``.bin`` is read as ``remote`` says.
    multimodal : bool, optional
        Whether the index carries ``sequence_modes``. ``None`` (default) detects it from the
        file size; Megatron does not record it, so pass it when you know.
    validate : bool
        Check at open (O(sequences)) that every length is non-negative, every pointer is the
        running sum of the lengths before it (times the dtype's size, as Megatron writes them), the
        lengths add up to the ``.bin``'s size, and document indices never decrease. Always
        checked, in O(1): the header, the array sizes, and that the last sequence ends exactly
        where the ``.bin`` does. Without full validation a read outside the ``.bin`` still raises
        :class:`tokshuf.FormatError`.
    remote : {"ranges", "copy"}
        For a ``.bin`` in a store: ``"ranges"`` (default) requests the bytes each read needs
        (one request per :meth:`get`; a Nanoset's batch in few coalesced requests), so nothing
        is stored and the first read comes at once; ``"copy"`` downloads the whole ``.bin``
        once beside the ``.idx``'s copy and maps it, the better choice for reading it through
        many times. Ignored for local files.

    Raises
    ------
    tokshuf.FormatError
        The index is truncated, has the wrong magic, version or dtype code, does not match the
        ``.bin`` (a ``.bin`` of another run beside this ``.idx``), has pointers that are not the
        running sum of the lengths, or has decreasing document indices. The message names the
        file and the fault.
    FileNotFoundError
        ``.idx`` or ``.bin`` is missing.

    Examples
    --------
    >>> ds = IndexedDataset("data/corpus_text_document")     # doctest: +SKIP
    >>> ds[0], ds.get(0, offset=10, length=5), len(ds)       # doctest: +SKIP
    """

    def __init__(
        self,
        prefix: PathLike,
        multimodal: bool | None = None,
        validate: bool = True,
        *,
        remote: RemoteRead = "ranges",
    ) -> None:
        check_remote(remote)
        s = _prefix(prefix)
        self._init(local_prefix(s) if remote == "copy" else s, multimodal, validate, remote)

    def _init(self, prefix: str, multimodal: bool | None, validate: bool, remote: RemoteRead) -> None:
        reader = _core.IndexReader(prefix, multimodal, validate, remote)
        self._reader = reader
        self._prefix = prefix
        self._remote = remote
        self._multimodal = reader.multimodal
        self._dtype = DTYPE_CODES[reader.dtype_code]
        n, d = reader.sequence_count, reader.document_count
        lengths_at, pointers_at, docs_at, modes_at = reader.offsets
        idx = reader.idx_buffer()
        self._lengths: npt.NDArray[np.int32] = _view(idx, np.int32, n, lengths_at)
        self._pointers: npt.NDArray[np.int64] = _view(idx, np.int64, n, pointers_at)
        self._documents: npt.NDArray[np.int64] = _view(idx, np.int64, d, docs_at)
        self._modes: npt.NDArray[np.int8] | None = (
            _view(idx, np.int8, n, modes_at) if reader.multimodal else None
        )
        self._bin_len = reader.bin_len
        # One typed view of the whole .bin: reads become slices (no per-call buffer export).
        # A .bin read by ranges has none.
        self._bin: _core.MappedBuffer | None = None
        self._tokens: npt.NDArray[Any] | None = None
        if not reader.ranged:
            self._bin = reader.bin_buffer()
            self._tokens = _view(self._bin, self._dtype, self._bin_len // self._dtype.itemsize)

    # -- pickling by path (DataLoader workers reopen the mapping) ---------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"prefix": self._prefix, "multimodal": self._multimodal, "remote": self._remote}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Already validated in the process that pickled it: check the header and sizes only.
        self._init(state["prefix"], state["multimodal"], False, state.get("remote", "copy"))

    def __repr__(self) -> str:
        ranged = ", remote='ranges'" if self._tokens is None else ""
        return (
            f"IndexedDataset({self._prefix!r}, sequences={len(self)}, "
            f"documents={self.num_documents}, dtype={self._dtype.name}{ranged})"
        )

    # -- sizes and arrays -----------------------------------------------------------------
    def __len__(self) -> int:
        """Number of sequences (Megatron's unit for GPT datasets)."""
        return int(self._lengths.shape[0])

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def dtype(self) -> np.dtype[Any]:
        """Token dtype of the ``.bin``."""
        return self._dtype

    @property
    def sequence_lengths(self) -> npt.NDArray[np.int32]:
        """Tokens per sequence (int32 view of the ``.idx``)."""
        return self._lengths

    @property
    def sequence_pointers(self) -> npt.NDArray[np.int64]:
        """Byte offset of each sequence in the ``.bin`` (int64 view)."""
        return self._pointers

    @property
    def document_indices(self) -> npt.NDArray[np.int64]:
        """``[0, e_1, ..., e_D]``: document d is sequences ``[e_{d-1}, e_d)`` (int64 view)."""
        return self._documents

    @property
    def sequence_modes(self) -> npt.NDArray[np.int8] | None:
        """Per-sequence modes of multimodal datasets, else ``None``."""
        return self._modes

    @property
    def num_documents(self) -> int:
        return int(self._documents.shape[0]) - 1

    @property
    def num_tokens(self) -> int:
        return int(self._lengths.sum(dtype=np.int64))

    # -- reading --------------------------------------------------------------------------
    def get(self, idx: int, offset: int = 0, length: int | None = None) -> npt.NDArray[Any]:
        """``length`` tokens of sequence ``idx`` from token ``offset`` (default: to its end).

        ``idx`` counts from the end when negative, as Python sequences do. Unlike Megatron,
        reading past the end of the sequence raises instead of returning the next sequence's
        tokens. Indices, offsets and lengths are integers (numpy's too): anything else is a
        :class:`TypeError`.
        """
        i = position(idx, len(self), "sequence", self._prefix)
        size = int(self._lengths[i])
        offset = as_index(offset)
        length = size - offset if length is None else as_index(length)
        if offset < 0 or length < 0 or offset + length > size:
            raise IndexError(f"offset {offset} + length {length} exceeds sequence {i}'s {size} tokens")
        ptr = int(self._pointers[i])
        item = self._dtype.itemsize
        at = ptr + offset * item
        # Opened with validate=False (DataLoader workers reopen that way), a pointer may point
        # anywhere: a slice past the end would come back short instead of failing.
        if ptr < 0 or at + length * item > self._bin_len:
            raise FormatError(
                f"{self._prefix}.idx: sequence {i} ({size} tokens at byte {ptr}) lies outside the "
                f"{self._bin_len}-byte .bin; open with validate=True to check the whole index"
            )
        if self._bin is None or self._tokens is None:
            return np.frombuffer(self._reader.read_bin(at, at + length * item), self._dtype)
        if ptr % item:
            return _view(self._bin, self._dtype, length, at)
        start = ptr // item + offset
        return self._tokens[start : start + length]

    @overload
    def __getitem__(self, idx: int) -> npt.NDArray[Any]: ...
    @overload
    def __getitem__(self, idx: slice) -> list[npt.NDArray[Any]]: ...
    def __getitem__(self, idx: int | slice) -> npt.NDArray[Any] | list[npt.NDArray[Any]]:
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            if step != 1:
                raise ValueError(f"slices must have step 1, got {step}")
            return [self.get(i) for i in range(start, stop)]
        return self.get(idx)

    def document(self, d: int) -> list[npt.NDArray[Any]]:
        """The sequences of document ``d`` (negative: counted from the end)."""
        k = position(d, self.num_documents, "document", self._prefix)
        lo, hi = int(self._documents[k]), int(self._documents[k + 1])
        return [self.get(i) for i in range(lo, hi)]


class IndexedDatasetWriter(FinishOnExit):
    """Write an indexed dataset byte-identical to Megatron's ``IndexedDatasetBuilder``.

    Files are written under temporary names and appear only when :meth:`finish` succeeds;
    used as a context manager, an exception discards them. Memory does not grow with the
    dataset: until :meth:`finish`, the index arrays wait in unnamed temporary files beside the
    output (4 bytes a sequence and 8 a document, and 1 a sequence if multimodal).

    Parameters
    ----------
    prefix : str or PathLike
        Output prefix (``.bin`` and ``.idx`` are appended).
    dtype : numpy dtype or str
        Token dtype: one of uint8, int8, int16, int32, int64, float32, float64, uint16.
    multimodal : bool
        Also record a mode per sequence (``sequence_modes``).
    """

    def __init__(self, prefix: PathLike, dtype: npt.DTypeLike = np.int32, multimodal: bool = False) -> None:
        self._dtype = np.dtype(dtype)
        if self._dtype not in DTYPE_CODES.values():
            names = ", ".join(d.name for d in DTYPE_CODES.values())
            raise ConfigError(f"dtype {self._dtype.name} has no Megatron code (expected one of: {names})")
        self.prefix = _prefix(prefix)
        self._writer = _core.IndexWriter(self.prefix, self._dtype.name, multimodal)

    def _encode(self, tokens: npt.ArrayLike) -> npt.NDArray[Any]:
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            raise ValueError(f"a sequence must be 1-D, got shape {arr.shape}")
        if arr.size and arr.dtype != self._dtype and arr.dtype.kind in "iub" and self._dtype.kind in "iu":
            lo, hi = np.iinfo(self._dtype).min, np.iinfo(self._dtype).max
            amin, amax = int(arr.min()), int(arr.max())
            if amin < lo or amax > hi:
                bad = amin if amin < lo else amax
                raise ConfigError(f"token id {bad} does not fit dtype {self._dtype.name} ([{lo}, {hi}])")
        return np.ascontiguousarray(arr, dtype=self._dtype)

    def add_sequence(self, tokens: npt.ArrayLike, mode: int | None = None) -> None:
        """Append one sequence (it joins the current document)."""
        self._writer.add_sequence_bytes(self._encode(tokens).data.cast("B"), mode)

    def end_document(self) -> None:
        """Close the current document; with no sequence since the last one, an empty document."""
        self._writer.end_document()

    def add_document(
        self, tokens: npt.ArrayLike, lengths: Sequence[int], modes: Sequence[int] | None = None
    ) -> None:
        """Megatron's ``add_document``: ``tokens`` cut into sequences of ``lengths``, then a boundary."""
        arr = self._encode(tokens)
        if sum(lengths) != arr.shape[0]:
            raise ValueError(f"lengths sum to {sum(lengths)} but there are {arr.shape[0]} tokens")
        start = 0
        for k, n in enumerate(lengths):
            mode = None if modes is None else modes[k]
            self._writer.add_sequence_bytes(arr[start : start + n].data.cast("B"), mode)
            start += n
        self._writer.end_document()

    def add_index(self, prefix: PathLike) -> None:
        """Append every document of another dataset (Megatron's ``add_index``)."""
        self._writer.append(_prefix(prefix))

    def finish(self) -> dict[str, int]:
        """Write the index and move both files into place; returns the counts written."""
        return self._writer.finish()

    def abort(self) -> None:
        """Discard the output."""
        self._writer.abort()


def merge(
    inputs: PathLike | Iterable[PathLike], output_prefix: PathLike, *, summary: bool | PathLike = True
) -> MergeSummary:
    """Concatenate datasets into ``output_prefix``, as Megatron's ``tools/merge_datasets.py``.

    ``inputs`` is a directory (every ``.bin/.idx`` pair in it, sorted by name as Megatron sorts
    them) or a list of prefixes and directories (kept in the given order, directories expanded).
    Every input must have the same dtype. The result is byte-identical to preprocessing the
    concatenated corpus once. The returned summary is also written as JSON as
    :func:`tokshuf.preprocess` writes its own (``summary``: ``True`` →
    ``{output_prefix}_summary.json``, a path → there, ``False`` → nowhere).
    """
    check_summary(summary)
    items = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    prefixes: list[str] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            prefixes.extend(os.fspath(p) for p in _core.list_prefixes(os.fspath(path)))
        else:
            prefixes.append(_prefix(item))
    if not prefixes:
        raise ConfigError(f"no .bin/.idx pairs found in {[os.fspath(i) for i in items]}")
    out = _prefix(output_prefix)
    if not out:
        raise ConfigError("output_prefix must not be empty")
    target = summary_target(summary, f"{out}_summary.json")
    # A local summary is committed with the pair (one set); one in a store is uploaded after.
    local = target if target is not None and not _core.is_remote(target) else None
    sizes = _core.merge(prefixes, out, local)
    result = MergeSummary(
        documents=sizes["documents"],
        sequences=sizes["sequences"],
        tokens=sizes["tokens"],
        bin_bytes=sizes["bin_bytes"],
        idx_bytes=sizes["idx_bytes"],
    )
    if target is not None and local is None:
        write_summary(result, target)
    return result


def write_index(
    prefix: PathLike,
    dtype: npt.DTypeLike,
    sequence_lengths: npt.ArrayLike,
    document_indices: npt.ArrayLike,
    sequence_modes: npt.ArrayLike | None = None,
) -> int:
    """Write ``{prefix}.idx`` for an existing ``.bin`` from its arrays (Megatron's ``_IndexWriter``).

    Pointers are derived from the lengths, as Megatron does. ``document_indices`` is
    ``[0, e_1, ..., e_D]`` ending at the number of sequences. Returns the size of the index.
    """
    lengths = np.require(sequence_lengths, np.int32, ["C", "A"])
    docs = np.require(document_indices, np.int64, ["C", "A"])
    modes = None if sequence_modes is None else np.require(sequence_modes, np.int8, ["C", "A"])
    path = _prefix(prefix) + ".idx"
    return _core.write_index(
        path, np.dtype(dtype).name, lengths.data, docs.data, None if modes is None else modes.data
    )
