"""Small synthetic indexed datasets for the Nanoset tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokshuf import IndexedDatasetWriter


def write_dataset(prefix: Path, lengths: list[int], dtype: str = "uint16", seed: int = 0) -> list[np.ndarray]:
    """One single-sequence document per length, random token ids ≥ 1; returns the tokens."""
    rng = np.random.default_rng(seed)
    tokens = [rng.integers(1, 30000, size=n).astype(np.int64) for n in lengths]
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with IndexedDatasetWriter(prefix, dtype=dtype) as w:
        for t in tokens:
            w.add_document(t, [len(t)])
    return tokens


def lognormal_lengths(n: int, mean: float = 300.0, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    return np.maximum(1, np.round(rng.lognormal(np.log(mean) - 0.5, 1.0, n))).astype(int).tolist()
