"""A document's first tokens, decoded when the tokenizer allows it."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy.typing as npt

from tokshuf._inspect.decode import decode
from tokshuf.errors import ConfigError

__all__ = ["Excerpt", "check_document", "excerpt"]


@dataclasses.dataclass(frozen=True)
class Excerpt:
    document: int
    length: int
    #: The first ``max_tokens`` ids of the document.
    ids: list[int]
    text: str | None
    #: Why ``text`` is missing (no tokenizer given, or it cannot decode).
    note: str | None


def check_document(doc: int, n: int, path: str) -> None:
    """Refuse ``--doc`` ``doc`` unless ``path`` (of ``n`` documents) has it, naming the valid values."""
    if not 0 <= doc < n:
        valid = f"{n} documents (0..{n - 1})" if n else "no documents"
        raise ConfigError(f"--doc {doc} does not exist: {path} has {valid}")


def excerpt(document: int, tokens: npt.NDArray[Any], tokenizer: str | None, max_tokens: int) -> Excerpt:
    ids = [int(t) for t in tokens[:max_tokens]]
    if tokenizer is None:
        return Excerpt(document, len(tokens), ids, None, "no tokenizer given (--tokenizer SPEC)")
    text, note = decode(tokenizer, ids)
    return Excerpt(document, len(tokens), ids, text, note)
