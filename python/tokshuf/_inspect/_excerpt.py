"""A document's first tokens, decoded when the tokenizer allows it."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy.typing as npt

from tokshuf._inspect.decode import decode

__all__ = ["Excerpt", "documents_named", "excerpt"]


@dataclasses.dataclass(frozen=True)
class Excerpt:
    document: int
    length: int
    #: The first ``max_tokens`` ids of the document.
    ids: list[int]
    text: str | None
    #: Why ``text`` is missing (no tokenizer given, or it cannot decode).
    note: str | None


def documents_named(n: int) -> str:
    """``"4 documents (0..3)"`` for error messages naming the valid ``--doc`` values."""
    return f"{n} documents (0..{n - 1})" if n else "no documents"


def excerpt(document: int, tokens: npt.NDArray[Any], tokenizer: str | None, max_tokens: int) -> Excerpt:
    ids = [int(t) for t in tokens[:max_tokens]]
    if tokenizer is None:
        return Excerpt(document, len(tokens), ids, None, "no tokenizer given (--tokenizer SPEC)")
    text, note = decode(tokenizer, ids)
    return Excerpt(document, len(tokens), ids, text, note)
