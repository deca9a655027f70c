"""Synthetic token corpora for the loader benchmarks, written straight in the MMIDIDX layout
(header, int32 lengths, int64 byte pointers, int64 document indices) with numpy, so a multi-GB
corpus takes seconds, not a Python call per document."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"


def write_indexed(
    prefix: Path, n_tokens: int, mean_doc: int = 1500, seed: int = 0, vocab: int = 50000
) -> int:
    """``prefix.bin/.idx`` with about ``n_tokens`` uint16 tokens in log-normal documents;
    returns the number of documents."""
    rng = np.random.default_rng(seed)
    lengths = []
    total = 0
    while total < n_tokens:
        block = np.maximum(1, rng.lognormal(np.log(mean_doc) - 0.5, 1.0, 100_000)).astype(np.int64)
        lengths.append(block)
        total += int(block.sum())
    lens = np.concatenate(lengths)
    lens = lens[: int(np.searchsorted(np.cumsum(lens), n_tokens)) + 1]
    n = len(lens)
    with open(f"{prefix}.bin", "wb") as f:
        left = int(lens.sum())
        while left:
            k = min(left, 1 << 26)
            rng.integers(2, vocab, k, dtype=np.uint16).tofile(f)
            left -= k
    pointers = np.zeros(n, np.int64)
    np.cumsum(lens[:-1] * 2, out=pointers[1:])
    with open(f"{prefix}.idx", "wb") as f:
        f.write(
            MAGIC
            + struct.pack("<Q", 1)
            + struct.pack("<B", 8)
            + struct.pack("<Q", n)
            + struct.pack("<Q", n + 1)
        )
        lens.astype(np.int32).tofile(f)
        pointers.tofile(f)
        np.arange(n + 1, dtype=np.int64).tofile(f)
    return n
