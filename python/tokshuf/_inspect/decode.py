"""Token ids back to text, for excerpts.

:class:`tokshuf.Tokenizer` encodes only (the Rust core has no decoder), so excerpts are decoded
here: the byte tokenizer directly, tiktoken encodings with the ``tiktoken`` package and
``tokenizer.json`` files with the ``tokenizers`` package when installed. Anything else gets the ids
and a note saying why there is no text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["decode"]


def decode(spec: str, ids: Sequence[int]) -> tuple[str | None, str | None]:
    """``(text, None)``, or ``(None, why it could not be decoded)``."""
    if spec == "byte":
        # The byte tokenizer is UTF-8 byte + 1 with eod 0; other ids cannot come from it.
        raw = bytes(i - 1 for i in ids if 1 <= i <= 256)
        return raw.decode("utf-8", errors="replace"), None
    try:
        if spec.startswith("tiktoken:"):
            from tokshuf.tokenizer import tiktoken_encoding

            return tiktoken_encoding(spec.split(":", 1)[1]).decode(list(ids)), None
        path = spec
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        if path.endswith(".json") and os.path.isfile(path):
            from tokenizers import Tokenizer as HfTokenizer

            return HfTokenizer.from_file(path).decode(list(ids), skip_special_tokens=False), None
    except ImportError as e:
        return None, f"decoding {spec!r} needs the {e.name} package (tokshuf.Tokenizer has no decoder)"
    except Exception as e:
        # A decoder's complaint is a note in the report, not a failure: tiktoken raises KeyError
        # for an id outside its vocabulary, tokenizers its own errors (most often the data was
        # made with another tokenizer).
        return None, (
            f"cannot decode these ids with {spec!r} ({type(e).__name__}: {e}): was the data tokenized "
            "with another tokenizer?"
        )
    return None, (
        f"tokshuf.Tokenizer has no decoder and {spec!r} is not byte, tiktoken:NAME or a tokenizer.json; "
        "showing ids only"
    )
