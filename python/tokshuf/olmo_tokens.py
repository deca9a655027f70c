"""OLMo's token files: headerless ``.npy`` arrays of token ids, plus Dolma's ``.csv.gz`` metadata.

An OLMo token file is what ``np.memmap(path, dtype, mode="w+")`` writes: every document's tokens
(EOS, and BOS if used, included; never padding) concatenated, with no NPY header, so ``np.load``
rejects it. Its dtype is not recorded: it is the smallest unsigned type holding ``vocab_size - 1``
(uint16 for GPT-NeoX-OLMo, uint32 for dolma2) unless configured.

Documents are found by scanning for EOS (with OLMo's BOS rule when ``bos_token_id`` is set) or
read from ``<stem>.csv.gz`` (``start,end,id,src,loc`` rows). The scan runs in Rust, in parallel.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tokshuf import _arrays, _core
from tokshuf._deprecation import renamed_parameters
from tokshuf._limits import integer_dtype
from tokshuf._summary_file import check_summary, summary_target, write_summary
from tokshuf._writer import FinishOnExit
from tokshuf.errors import ConfigError

__all__ = [
    "TokenFileWriter",
    "document_spans",
    "from_indexed",
    "metadata_path",
    "read_tokens",
    "token_dtype",
    "write_metadata",
    "write_tokens",
]

PathLike = str | os.PathLike[str]
Boundaries = Literal["auto", "eos", "metadata"]
BOUNDARIES: tuple[Boundaries, ...] = ("auto", "eos", "metadata")

_UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)


def token_dtype(vocab_size: int) -> np.dtype[Any]:
    """The smallest unsigned dtype that holds ``vocab_size - 1`` (OLMo's and Dolma's rule)."""
    if vocab_size <= 0:
        raise ConfigError(f"vocab_size must be positive, got {vocab_size}")
    return next(np.dtype(t) for t in _UNSIGNED if vocab_size - 1 <= np.iinfo(t).max)


def _dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    d: np.dtype[Any] = integer_dtype(dtype, "token dtype")
    return d


def metadata_path(path: PathLike) -> Path:
    """``part-0.npy`` → ``part-0.csv.gz`` (Dolma's metadata next to a token file)."""
    s = os.fspath(path)
    return Path(s[: -len(".npy")] + ".csv.gz" if s.endswith(".npy") else s + ".csv.gz")


def read_tokens(path: PathLike, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """A read-only memory map of a token file (empty files give an empty array)."""
    d = _dtype(dtype)
    size = os.path.getsize(path)
    if size % d.itemsize:
        raise ConfigError(
            f"{os.fspath(path)}: size {size} is not a multiple of {d.name}'s {d.itemsize} bytes"
        )
    if size == 0:
        return np.empty(0, d)
    return np.memmap(path, dtype=d, mode="r")


@renamed_parameters(threads="num_threads")
def document_spans(
    path: PathLike,
    dtype: npt.DTypeLike,
    eos_token_id: int | None = None,
    bos_token_id: int | None = None,
    boundaries: Boundaries = "auto",
    num_threads: int | None = None,
) -> npt.NDArray[np.uint64]:
    """``(n, 2)`` uint64 ``[start, end)`` of every document of a token file.

    ``boundaries``: ``"eos"`` scans for ``eos_token_id`` (a document ends with each EOS; with
    ``bos_token_id``, only with an EOS followed by a BOS, or the file's last EOS); tokens after the
    last boundary belong to no document. ``"metadata"`` reads ``<stem>.csv.gz``. ``"auto"`` uses the
    metadata when it exists, which keeps documents whose EOS a producer dropped, and scans otherwise.
    """
    d = _dtype(dtype)
    meta = metadata_path(path)
    if boundaries not in BOUNDARIES:
        raise ConfigError(f"boundaries must be one of {list(BOUNDARIES)}, got {boundaries!r}")
    if boundaries == "metadata" or (boundaries == "auto" and meta.is_file()):
        n = os.path.getsize(path) // d.itemsize
        buf = _core.read_metadata(os.fspath(meta), n)
    else:
        if eos_token_id is None:
            raise ConfigError(
                f"eos_token_id is needed to find the documents of {os.fspath(path)} (no metadata)"
            )
        buf = _core.scan_documents(os.fspath(path), d.name, eos_token_id, bos_token_id, num_threads)
    return _arrays.spans(buf)


class TokenFileWriter(FinishOnExit):
    """Write one OLMo token file, document by document; it appears only when finished.

    >>> with TokenFileWriter("part-0.npy", np.uint32) as w:   # doctest: +SKIP
    ...     w.write([1, 2, 3, 0])
    """

    def __init__(self, path: PathLike, dtype: npt.DTypeLike) -> None:
        self.path = Path(path)
        self.dtype = _dtype(dtype)
        self._writer = _core.TokenWriter(os.fspath(path), self.dtype.name)

    def write(self, tokens: npt.ArrayLike) -> None:
        """Append tokens (ids the dtype cannot hold are an error)."""
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            raise ValueError(f"tokens must be 1-D, got shape {arr.shape}")
        if arr.size and arr.dtype.kind == "i" and int(arr.min()) < 0:
            raise ConfigError(f"token id {int(arr.min())} is negative")
        self._writer.write(np.ascontiguousarray(arr, dtype=np.uint64).data)

    @property
    def tokens(self) -> int:
        return self._writer.tokens

    def finish(self) -> int:
        """Move the file into place; returns the number of tokens."""
        return self._writer.finish()

    def abort(self) -> None:
        self._writer.abort()


def write_tokens(
    path: PathLike,
    documents: npt.ArrayLike | Iterable[npt.ArrayLike],
    dtype: npt.DTypeLike,
    metadata: bool = False,
) -> npt.NDArray[np.uint64]:
    """Write documents (a list of token arrays, or one flat array) to an OLMo token file.

    Returns the ``(n, 2)`` spans of the documents; with ``metadata`` also writes Dolma's
    ``<stem>.csv.gz`` for them.
    """
    if isinstance(documents, np.ndarray) and documents.ndim == 1:
        documents = [documents]
    spans: list[tuple[int, int]] = []
    with TokenFileWriter(path, dtype) as w:
        for doc in documents:  # type: ignore[union-attr]
            start = w.tokens
            w.write(doc)
            spans.append((start, w.tokens))
    out = np.array(spans, dtype=np.uint64).reshape(-1, 2)
    if metadata:
        write_metadata(metadata_path(path), out, os.fspath(path))
    return out


def write_metadata(path: PathLike, spans: npt.ArrayLike, src: str = "") -> None:
    """Write Dolma metadata (``start,end,id,src,loc`` rows) for ``(n, 2)`` spans, atomically."""
    arr = np.require(np.asarray(spans).reshape(-1, 2), np.uint64, ["C"])
    _core.write_metadata(os.fspath(path), arr.data, src)


def from_indexed(
    prefix: PathLike,
    output: PathLike,
    dtype: npt.DTypeLike | None = None,
    append_eos: int | None = None,
    metadata: bool = True,
    *,
    summary: bool | PathLike = True,
) -> npt.NDArray[np.uint64]:
    """Convert a Megatron ``.bin/.idx`` dataset into an OLMo token file.

    Documents are copied in order; ``append_eos`` adds that id to documents that do not already
    end with it (OLMo finds documents by EOS). ``dtype`` defaults to the smallest unsigned type
    that holds the ``.bin``'s dtype range (int32 → uint32). With ``metadata`` (default) the exact
    document boundaries are also written to ``<stem>.csv.gz``. A summary (``output``,
    ``documents``, ``tokens``) is written as JSON as :func:`tokshuf.preprocess` writes its own
    (``summary``: ``True`` → ``<stem>_summary.json``, a path → there, ``False`` → nowhere).
    Returns the ``(n, 2)`` spans.
    """
    from tokshuf.indexed import IndexedDataset, _prefix

    check_summary(summary)
    p = _prefix(prefix)
    if dtype is None:
        src = IndexedDataset(p, validate=False).dtype
        dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[src.itemsize]
    d = _dtype(dtype)
    # The token file and its metadata are committed together: both new or both as before.
    meta = os.fspath(metadata_path(output)) if metadata else None
    out = os.fspath(output)
    stem = out[: -len(".npy")] if out.endswith(".npy") else out
    target = summary_target(summary, f"{stem}_summary.json")
    # A local summary is committed with the token file and its metadata (one set).
    local = target if target is not None and not _core.is_remote(target) else None
    spans = _arrays.spans(_core.convert_indexed(p, out, d.name, append_eos, meta, local))
    if target is not None and local is None:
        tokens = int(spans[-1, 1]) if len(spans) else 0
        write_summary({"output": out, "documents": len(spans), "tokens": tokens}, target)
    return spans
