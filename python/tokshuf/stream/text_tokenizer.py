"""The small tokenizer interface the on-the-fly text handlers use.

Anything with ``encode(text) -> ids`` works. A string spec resolves to ``tokshuf.Tokenizer`` when
the package provides it, else to the byte tokenizer (``"byte"``: UTF-8 byte + 1, the scheme of
the Megatron fixtures and of ``tokshuf preprocess --tokenizer byte``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from tokshuf.errors import ConfigError

__all__ = ["ByteTokenizer", "TextTokenizer", "resolve_tokenizer"]


@runtime_checkable
class TextTokenizer(Protocol):
    def encode(self, text: str) -> Sequence[int] | npt.NDArray[Any]: ...


class ByteTokenizer:
    """``ids = [b + 1 for b in text.encode("utf-8")]`` (eod = 0, 257 ids)."""

    def encode(self, text: str) -> npt.NDArray[np.uint32]:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint32) + 1

    def __repr__(self) -> str:
        return "ByteTokenizer()"


def resolve_tokenizer(spec: Any) -> Any:
    """A tokenizer object for ``spec`` (an object with ``encode`` is returned as is)."""
    if not isinstance(spec, str):
        if not callable(getattr(spec, "encode", None)):
            raise ConfigError(f"tokenizer {spec!r} has no encode(text) method")
        return spec
    import tokshuf

    factory = getattr(tokshuf, "Tokenizer", None)
    if factory is not None:
        return factory(spec)
    if spec == "byte":
        return ByteTokenizer()
    raise ConfigError(f"unknown tokenizer {spec!r} (expected 'byte' or an object with encode(text))")
