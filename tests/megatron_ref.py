"""Megatron's ``preprocess_data.py`` document rules, written from the spec, over ids computed by
another library: the reference our outputs are compared with byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from megatron_idx import write_idx_bytes

EncodeBatch = Callable[[list[str]], Sequence[Sequence[int]]]


def read_values(path: Path, key: str = "text") -> list[Any]:
    """The value of ``key`` on every line (the corpus must have no bad lines)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)[key] for line in f]


def reference_dataset(
    values: Sequence[str | list[str]], encode_batch: EncodeBatch, eod: int | None, dtype: Any
) -> tuple[bytes, bytes]:
    """(.bin, .idx) bytes: a string is one sentence, a list several; zero-token sentences are
    dropped; ``eod`` is appended to the last sentence of every document with a token."""
    sentences = [s for v in values for s in ([v] if isinstance(v, str) else v)]
    ids = encode_batch(sentences)
    tokens: list[np.ndarray[Any, Any]] = []
    lengths: list[int] = []
    doc_indices = [0]
    k = 0
    for v in values:
        n = 1 if isinstance(v, str) else len(v)
        doc = [list(x) for x in ids[k : k + n] if len(x) > 0]
        k += n
        if doc and eod is not None:
            doc[-1].append(eod)
        for seq in doc:
            tokens.append(np.asarray(seq, dtype=dtype))
            lengths.append(len(seq))
        doc_indices.append(len(lengths))
    binary = np.concatenate(tokens).tobytes() if tokens else b""
    return binary, write_idx_bytes(np.dtype(dtype), lengths, doc_indices)


def assert_dataset_equals(prefix: Path, expected: tuple[bytes, bytes]) -> None:
    """Byte comparison with a helpful message (first differing token) on failure."""
    got_bin = Path(f"{prefix}.bin").read_bytes()
    got_idx = Path(f"{prefix}.idx").read_bytes()
    if got_bin != expected[0]:
        n = min(len(got_bin), len(expected[0]))
        first = next((i for i in range(n) if got_bin[i] != expected[0][i]), n)
        raise AssertionError(f".bin differs at byte {first} (sizes {len(got_bin)} vs {len(expected[0])})")
    assert got_idx == expected[1], ".idx differs"
