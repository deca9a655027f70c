"""A small, slow, pure-Python model of Megatron's GPTDataset / BlendedDataset index building,
written from the spec (megatron-spec.md §3-5) with numpy's real ``RandomState`` as the RNG.

The property tests compare the native builders against it on random inputs. Keep it obviously
correct rather than fast: plain loops, Python floats, numpy only where Megatron uses numpy.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np


def normalize(weights: list[float]) -> list[float]:
    w = np.array(weights, dtype=np.float64)
    return (w / np.sum(w)).tolist()


def parse_split(split: str) -> list[float]:
    parts = [float(s) for s in re.findall(r"[.0-9]+", split)]
    parts += [0.0] * (3 - len(parts))
    return normalize(parts)


def split_matrix(vector: list[float]) -> list[tuple[float, float] | None]:
    ends: list[float] = [0]
    for v in vector:
        ends.append(ends[-1] + v)
    return [None if ends[i + 1] - ends[i] == 0 else (ends[i], ends[i + 1]) for i in range(3)]


def split_ranges(matrix: list[tuple[float, float] | None], n: int) -> list[tuple[int, int] | None]:
    return [None if b is None else (round(b[0] * float(n)), round(b[1] * float(n))) for b in matrix]


@dataclass
class GptModel:
    document_index: np.ndarray
    sample_index: np.ndarray
    shuffle_index: np.ndarray
    num_epochs: int
    separate_final_epoch: bool


def _document_index(
    documents: np.ndarray, epochs: int, rs: np.random.RandomState, separate: bool
) -> np.ndarray:
    if not separate or epochs == 1:
        di = np.mgrid[0:epochs, 0 : len(documents)][1]
        di[:] = documents
        di = di.reshape(-1).astype(np.int32)
        rs.shuffle(di)
        return di
    return np.concatenate(
        (_document_index(documents, epochs - 1, rs, False), _document_index(documents, 1, rs, False))
    )


def _sample_index(sizes, doc_idx, seq, epochs, tokens_per_epoch, drop_last, extra) -> np.ndarray:
    total = epochs * tokens_per_epoch - extra
    if drop_last:
        n = int(total / seq) if total < 0 else total // seq  # C++ division truncates toward zero
    else:
        n = math.ceil(float(np.float32(total) / np.float32(seq)))
    rows = [(0, 0)]
    d, off = 0, 0
    while len(rows) <= n:
        remaining = seq + extra
        while remaining != 0:
            doc_len = int(sizes[doc_idx[d]]) - off
            remaining -= doc_len
            if remaining <= 0:
                off += remaining + doc_len - extra
                remaining = 0
            else:
                if d == len(doc_idx) - 1:
                    off = int(sizes[doc_idx[d]]) - extra
                    break
                d += 1
                off = 0
        rows.append((d, off))
    dtype = np.int32 if max(len(doc_idx), int(sizes.max())) <= np.iinfo(np.int32).max else np.int64
    out = np.array(rows, dtype=dtype).reshape(-1, 2)
    assert out.min() >= 0, "Megatron's helpers.build_sample_idx asserts this"
    return out


def _shuffle_index(first: int, total: int, rs: np.random.RandomState) -> np.ndarray:
    dtype = np.int64 if total >= np.iinfo(np.uint32).max - 1 else np.uint32
    a = np.arange(first, dtype=dtype)
    rs.shuffle(a)
    if first == total:
        return a
    b = np.arange(first, total, dtype=dtype)
    rs.shuffle(b)
    return np.concatenate((a, b))


def gpt_indices(
    sizes: np.ndarray,
    beg: int,
    end: int,
    num_samples: int | None,
    seq: int,
    seed: int,
    extra: int = 1,
    drop_last: bool = True,
) -> GptModel:
    documents = np.arange(beg, end, dtype=np.int32)
    tokens_per_epoch = int(np.sum(sizes[documents]))
    epochs = 1
    # 0 samples of an empty split: tokshuf builds an empty dataset (Megatron loops forever).
    if num_samples is not None and (num_samples or tokens_per_epoch):
        assert tokens_per_epoch > 0, "Megatron loops forever here"
        tokens = tokens_per_epoch
        while tokens < num_samples * seq + extra:
            tokens += tokens_per_epoch
            epochs += 1
    separate = False
    if epochs > 1:
        assert num_samples is not None
        sans = ((epochs - 1) * tokens_per_epoch - extra) // seq
        per_epoch = (tokens_per_epoch - extra) // seq
        separate = num_samples - sans < int(0.80 * per_epoch)
    rs = np.random.RandomState(seed)
    doc_idx = _document_index(documents, epochs, rs, separate)
    sample_idx = _sample_index(sizes, doc_idx, seq, epochs, tokens_per_epoch, drop_last, extra)
    total = sample_idx.shape[0] - 1
    first = ((epochs - 1) * tokens_per_epoch - extra) // seq if separate else total
    return GptModel(doc_idx, sample_idx, _shuffle_index(first, total, rs), epochs, separate)


def sample_tokens(
    tokens_of: list[np.ndarray], model: GptModel, k: int, seq: int, extra: int, pad: int = -1
) -> np.ndarray:
    j = int(model.shuffle_index[k])
    (b, bo), (e, eo) = model.sample_index[j], model.sample_index[j + 1]
    di = model.document_index
    if b == e:
        parts = [tokens_of[di[b]][bo : eo + extra]]
    else:
        parts = [tokens_of[di[b]][bo:]]
        parts += [tokens_of[di[i]] for i in range(b + 1, e)]
        parts.append(tokens_of[di[e]][: eo + extra])
    text = np.concatenate(parts).astype(np.int64)
    return np.concatenate([text, np.full(seq + extra - len(text), pad, dtype=np.int64)])


def blending_indices(weights: list[float], size: int) -> tuple[np.ndarray, np.ndarray]:
    counts = [0] * len(weights)
    di = np.zeros(size, dtype=np.int16)
    dsi = np.zeros(size, dtype=np.int64)
    for s in range(size):
        x = max(float(s), 1.0)
        errors = [w * x - c for w, c in zip(weights, counts, strict=True)]
        d = max(range(len(weights)), key=lambda i: (errors[i], -i))
        di[s], dsi[s] = d, counts[d]
        counts[d] += 1
    return di, dsi


def exhaustive_blending_indices(sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    total = sum(sizes)
    weights = [s / total if total else 0.0 for s in sizes]
    counts = [0] * len(sizes)
    unspent = [d for d in range(len(sizes)) if sizes[d] > 0]
    di, dsi = [], []
    s = 0
    while unspent:
        x = max(float(s), 1.0)
        d = max(unspent, key=lambda i: (weights[i] * x - counts[i], -i))
        di.append(d)
        dsi.append(counts[d])
        counts[d] += 1
        if counts[d] == sizes[d]:
            unspent.remove(d)
        s += 1
    return np.array(di, dtype=np.int16), np.array(dsi, dtype=np.int64)


def size_per_dataset(weights: list[float], size: int, surplus: float) -> list[int]:
    return [math.ceil(math.ceil(size * w) * (1 + surplus)) for w in weights]
