"""A Megatron ``.bin/.idx`` dataset: sizes from the index alone, ids from a pass over the ``.bin``."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf._inspect._excerpt import Excerpt, check_document, excerpt
from tokshuf._inspect._report import HIDDEN, Report
from tokshuf._inspect._stats import IdStats, LengthStats, id_stats, length_stats, scans
from tokshuf.indexed import IndexedDataset

__all__ = ["IndexedReport", "document_lengths", "inspect_indexed"]


@dataclasses.dataclass(frozen=True)
class IndexedReport(Report):
    path: str
    dtype: str
    documents: int
    sequences: int
    tokens: int
    bin_bytes: int
    empty_documents: int
    document_lengths: LengthStats
    #: ``None`` when the ``.bin`` was not scanned (``scan=False``, or large with ``scan=None``).
    ids: IdStats | None
    excerpt: Excerpt | None
    kind: str = "indexed"
    #: Tokens per document, for plots.
    lengths: npt.NDArray[np.int64] | None = dataclasses.field(
        default=None, repr=False, compare=False, metadata=HIDDEN
    )


def document_lengths(ds: IndexedDataset) -> npt.NDArray[np.int64]:
    """Tokens per document: sums of its sequences' lengths, from the index only."""
    ends = np.concatenate(([0], np.cumsum(ds.sequence_lengths, dtype=np.int64)))
    docs = ds.document_indices
    return ends[docs[1:]] - ends[docs[:-1]]


def inspect_indexed(
    path: str | os.PathLike[str],
    *,
    scan: bool | None = None,
    top: int = 10,
    doc: int | None = None,
    tokenizer: str | None = None,
    excerpt_tokens: int = 64,
) -> IndexedReport:
    """Summarize ``path`` (a prefix, or its ``.bin`` or ``.idx``)."""
    ds = IndexedDataset(path)
    lengths = document_lengths(ds)
    tokens = ds.num_tokens
    ex = None
    if doc is not None:
        docs = ds.document_indices
        check_document(doc, ds.num_documents, ds.prefix)
        parts = [ds[int(s)] for s in range(int(docs[doc]), int(docs[doc + 1]))]
        ids: npt.NDArray[Any] = np.concatenate(parts) if parts else np.empty(0, ds.dtype)
        ex = excerpt(doc, ids, tokenizer, excerpt_tokens)
    return IndexedReport(
        path=ds.prefix,
        dtype=ds.dtype.name,
        documents=ds.num_documents,
        sequences=len(ds),
        tokens=tokens,
        bin_bytes=ds._reader.bin_len,  # a .bin in a store read by ranges has no local file
        empty_documents=int((lengths == 0).sum()),
        document_lengths=length_stats(lengths),
        ids=id_stats(_all_tokens(ds), top) if scans(scan, tokens) else None,
        excerpt=ex,
        lengths=lengths,
    )


def _all_tokens(ds: IndexedDataset) -> npt.NDArray[Any]:
    # Sequences are contiguous in a .bin written by Megatron or tokshuf: the whole data region is
    # [first pointer, first pointer + num_tokens * itemsize).
    if len(ds) == 0:
        return np.empty(0, ds.dtype)
    item = ds.dtype.itemsize
    ptr, lengths = ds.sequence_pointers, ds.sequence_lengths
    first, n = int(ptr[0]), ds.num_tokens
    if int(ptr[-1]) + int(lengths[-1]) * item == first + n * item and first % item == 0:
        if ds._tokens is None:  # a .bin in a store, read by ranges: one request
            return np.frombuffer(ds._reader.read_bin(first, first + n * item), ds.dtype)
        return ds._tokens[first // item : first // item + n]
    return np.concatenate([ds[i] for i in range(len(ds))])  # a hand-made .bin with gaps
