"""OLMo token files (headerless ``.npy`` of ids) with their Dolma ``.csv.gz`` metadata."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf import olmo_tokens
from tokshuf._inspect._excerpt import Excerpt, check_document, excerpt
from tokshuf._inspect._report import HIDDEN, Report
from tokshuf._inspect._stats import IdStats, LengthStats, id_stats, length_stats, scans
from tokshuf._limits import integer_dtype
from tokshuf.errors import ConfigError, TokshufError

__all__ = ["TokenFileReport", "inspect_token_file"]


@dataclasses.dataclass(frozen=True)
class TokenFileReport(Report):
    path: str
    dtype: str
    #: ``"metadata"`` (the ``.csv.gz``) or ``"eos"`` (a scan for the EOS id).
    boundaries: str
    documents: int
    tokens: int
    #: Tokens after the last boundary (or outside every metadata span): in no document.
    tokens_outside_documents: int
    empty_documents: int
    document_lengths: LengthStats
    ids: IdStats | None
    excerpt: Excerpt | None
    kind: str = "olmo"
    lengths: npt.NDArray[np.int64] | None = dataclasses.field(
        default=None, repr=False, compare=False, metadata=HIDDEN
    )


def _infer_dtype(path: str) -> np.dtype[Any]:
    """The dtype the metadata implies: the widest one whose token count still holds every span,
    which must then end exactly at the file's end (OLMo records no dtype)."""
    meta = olmo_tokens.metadata_path(path)
    size = os.path.getsize(path)
    if meta.is_file():
        for t in (np.uint64, np.uint32, np.uint16, np.uint8):
            d = np.dtype(t)
            if size % d.itemsize:
                continue
            try:
                spans = olmo_tokens.document_spans(path, d, boundaries="metadata")
            except TokshufError:
                continue
            if len(spans) and int(spans[:, 1].max()) == size // d.itemsize:
                return d
            break
    raise ConfigError(
        f"cannot tell the token dtype of {path} (OLMo records none): pass dtype "
        "(--dtype uint16 | uint32 | ...) or a tokenizer (--tokenizer SPEC; its vocabulary size decides)"
    )


def inspect_token_file(
    path: str | os.PathLike[str],
    *,
    dtype: npt.DTypeLike | None = None,
    eos_token_id: int | None = None,
    bos_token_id: int | None = None,
    vocab_size: int | None = None,
    scan: bool | None = None,
    top: int = 10,
    doc: int | None = None,
    tokenizer: str | None = None,
    excerpt_tokens: int = 64,
) -> TokenFileReport:
    """Summarize one OLMo token file: documents from its metadata when present, else an EOS scan
    (``eos_token_id`` needed). ``dtype`` defaults to the tokenizer's rule (``vocab_size``) or to what the
    metadata implies."""
    p = os.fspath(path)
    if dtype is not None:
        d = integer_dtype(dtype)
    elif vocab_size is not None:
        d = olmo_tokens.token_dtype(vocab_size)
    else:
        d = _infer_dtype(p)
    tokens = olmo_tokens.read_tokens(p, d)
    has_meta = olmo_tokens.metadata_path(p).is_file()
    spans = olmo_tokens.document_spans(p, d, eos_token_id, bos_token_id)
    lengths = (spans[:, 1] - spans[:, 0]).astype(np.int64)
    ex = None
    if doc is not None:
        check_document(doc, len(spans), p)
        ex = excerpt(doc, tokens[int(spans[doc, 0]) : int(spans[doc, 1])], tokenizer, excerpt_tokens)
    return TokenFileReport(
        path=p,
        dtype=d.name,
        boundaries="metadata" if has_meta else "eos",
        documents=len(spans),
        tokens=len(tokens),
        tokens_outside_documents=len(tokens) - int(lengths.sum()),
        empty_documents=int((lengths == 0).sum()),
        document_lengths=length_stats(lengths),
        ids=id_stats(tokens, top) if scans(scan, len(tokens)) else None,
        excerpt=ex,
        lengths=lengths,
    )
