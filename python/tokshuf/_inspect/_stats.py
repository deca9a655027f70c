"""Length and token-id statistics shared by the ``.bin/.idx`` and OLMo token-file views."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["AUTO_SCAN_TOKENS", "QUANTILES", "IdStats", "LengthStats", "id_stats", "length_stats", "scans"]

#: Reported quantiles of a length distribution (numpy's default linear interpolation).
QUANTILES = (0.01, 0.1, 0.5, 0.9, 0.99)

#: ``scan=None`` counts token ids only up to this many tokens, so a large file answers from its
#: index or metadata alone in well under a second.
AUTO_SCAN_TOKENS = 1 << 27

# Token ids are counted this many at a time, so a scan never holds more than a chunk's widening.
_CHUNK = 1 << 24


@dataclasses.dataclass(frozen=True)
class LengthStats:
    """A distribution of counts (tokens per document, documents per instance): how many, the
    zeros among them, their total, mean, extremes and quantiles."""

    count: int
    empty: int
    total: int
    mean: float
    min: int
    max: int
    #: ``{"p1": ..., "p10": ..., "p50": ..., "p90": ..., "p99": ...}``
    quantiles: dict[str, float]


@dataclasses.dataclass(frozen=True)
class IdStats:
    """What a pass over the tokens found: the most frequent ids and the id range."""

    tokens: int
    distinct: int
    min_id: int | None
    max_id: int | None
    #: ``[(id, count), ...]``, most frequent first (ties: smaller id first).
    top: list[tuple[int, int]]


def scans(scan: bool | None, tokens: int) -> bool:
    """Whether to count the ids of a file of ``tokens`` tokens: ``scan``, or with ``None`` whether
    it holds at most :data:`AUTO_SCAN_TOKENS`."""
    return tokens <= AUTO_SCAN_TOKENS if scan is None else scan


def _pct(q: float) -> str:
    return f"p{q * 100:g}"


def length_stats(lengths: npt.NDArray[Any]) -> LengthStats:
    a = np.asarray(lengths, dtype=np.int64)
    if len(a) == 0:
        return LengthStats(0, 0, 0, 0.0, 0, 0, {_pct(q): 0.0 for q in QUANTILES})
    qs = np.quantile(a, QUANTILES)
    return LengthStats(
        count=len(a),
        empty=int((a == 0).sum()),
        total=int(a.sum()),
        mean=float(a.mean()),
        min=int(a.min()),
        max=int(a.max()),
        quantiles={_pct(q): float(v) for q, v in zip(QUANTILES, qs, strict=True)},
    )


def id_stats(tokens: npt.NDArray[Any], top: int = 10) -> IdStats:
    """Count every id of ``tokens`` (a memory map is read chunk by chunk)."""
    n = len(tokens)
    if n == 0:
        return IdStats(0, 0, None, None, [])
    lo = min(int(tokens[i : i + _CHUNK].min()) for i in range(0, n, _CHUNK))
    hi = max(int(tokens[i : i + _CHUNK].max()) for i in range(0, n, _CHUNK))
    if lo >= 0 and hi < (1 << 26):
        # A dense count is fastest while the vocabulary fits in a few hundred MB of counters.
        counts = np.zeros(hi + 1, dtype=np.int64)
        for i in range(0, n, _CHUNK):
            counts += np.bincount(np.asarray(tokens[i : i + _CHUNK]), minlength=hi + 1)
        ids = np.flatnonzero(counts)
        freq = counts[ids]
    else:
        merged: dict[int, int] = {}
        for i in range(0, n, _CHUNK):
            u, c = np.unique(np.asarray(tokens[i : i + _CHUNK]), return_counts=True)
            for k, v in zip(u.tolist(), c.tolist(), strict=True):
                merged[k] = merged.get(k, 0) + v
        ids = np.array(sorted(merged), dtype=np.int64)
        freq = np.array([merged[k] for k in ids.tolist()], dtype=np.int64)
    order = np.lexsort((ids, -freq))[:top]
    return IdStats(
        tokens=n,
        distinct=len(ids),
        min_id=lo,
        max_id=hi,
        top=[(int(ids[j]), int(freq[j])) for j in order],
    )
