"""A small, slow, independent model of OLMo-core's instance strategies, written from the spec
(`olmo-and-peers.md` A.3, A.7): the reference the Rust builders are tested against.

Only numpy's own `Generator` supplies randomness here, as it does in OLMo-core.
"""

from __future__ import annotations

import math

import numpy as np


def eos_documents(tokens: list[int], eos: int, bos: int | None = None) -> list[tuple[int, int]]:
    """A document ends with each EOS (with `bos`: each EOS followed by BOS, or the last token)."""
    out, start = [], 0
    for i, t in enumerate(tokens):
        if t != eos:
            continue
        if bos is not None and i + 1 < len(tokens) and tokens[i + 1] != bos:
            continue
        out.append((start, i + 1))
        start = i + 1
    return out


def olmo_doc_lens(ids: list[int], eos: int, bos: int | None = None) -> list[int]:
    """OLMo-core's `get_document_lengths` (`olmo_core/data/utils.py`) on one instance: boundaries
    at -1, at every EOS (with `bos`: every EOS followed by BOS) and at the last token (without
    `bos`: unless it is an EOS, which is already one); lengths are the gaps."""
    a = np.asarray(ids)
    if bos is None:
        ends = np.flatnonzero(a == eos)
        if a[-1] != eos:
            ends = np.append(ends, a.size - 1)
    else:
        ends = np.append(np.flatnonzero((a[:-1] == eos) & (a[1:] == bos)), a.size - 1)
    return np.diff(np.concatenate([[-1], ends])).tolist()


def olmo_recorded_doc_lens(ids: list[int], docs: list[int], eos: int, bos: int | None = None) -> list[int]:
    """OLMo-core's packed `doc_lens` when packing read the documents from the metadata
    (`NumpyPackedFSLDataset.__getitem__`, `use_array_if_local=False`): the lengths `docs` of the
    loaded documents; then, if there is padding, `get_document_lengths` of the padding alone
    (without `bos`), or of the last document's last token and the padding (with `bos`), whose
    first length, less that token, is added to the last document."""
    out = list(docs)
    padding = len(ids) - sum(docs)
    if padding > 0:
        if bos is None:
            out += olmo_doc_lens(ids[-padding:], eos)
        else:
            tail = olmo_doc_lens(ids[-padding - 1 :], eos, bos)
            out[-1] += tail[0] - 1
            out += tail[1:]
    return out


def fsl_windows(file_sizes: list[int], seq: int, max_target: int | None = None) -> list[tuple[int, int]]:
    """Global (start, end) of each instance: windows per file, remainder dropped."""
    unit = max_target or seq
    out, base = [], 0
    for n in file_sizes:
        for k in range((n // unit) * (unit // seq)):
            out.append((base + k * seq, base + (k + 1) * seq))
        base += n
    return out


def window_doc_lens(doc_ends: set[int], start: int, end: int) -> list[int]:
    cuts = [*sorted(e for e in doc_ends if start < e < end), end]
    lens, prev = [], start
    for c in cuts:
        lens.append(c - prev)
        prev = c
    return lens


def limit(docs: list[tuple[int, int]], max_len: int, strategy: str) -> list[tuple[int, int]]:
    out = []
    for s, e in docs:
        if e <= s:
            continue
        if e - s <= max_len:
            out.append((s, e))
        elif strategy == "truncate":
            out.append((s, s + max_len))
        else:
            out.extend((a, min(e, a + max_len)) for a in range(s, e, max_len))
    return out


def obfd(lengths: list[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing, quadratic: bins as lists of positions in the stable length-sorted
    order; the tightest bin that fits, the one that reached that free space first."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    bins: list[list[int]] = []
    free: list[int] = []
    since: list[int] = []
    for t, i in enumerate(order):
        n = lengths[i]
        fits = [b for b in range(len(bins)) if free[b] >= n]
        if fits:
            b = min(fits, key=lambda b: (free[b], since[b]))
        else:
            bins.append([])
            free.append(capacity)
            since.append(t)
            b = len(bins) - 1
        bins[b].append(t)
        free[b] -= n
        since[b] = t
    return bins


def vsl_pieces(docs: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    out = []
    for s, e in docs:
        n = e - s
        powers = [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]
        capped: list[int] = []
        for p in powers:
            capped.extend([hi] * (p // hi) if p > hi else [p])
        at = s
        for p in capped:
            if p < lo:
                break
            out.append((at, at + p))
            at += p
    return out


def natural_batches(instances: list[tuple[int, int]], gbs: int) -> list[tuple[int, int]]:
    return [(length, n // (gbs // length)) for length, n in instances]


def growth_batches(
    instances: list[tuple[int, int]], gbs: int, cycles: int, balanced: bool
) -> list[tuple[int, int]]:
    nat = natural_batches(instances, gbs)
    if balanced:
        m = min(n for _, n in nat)
        return [(length, cycles * (m // cycles)) for length, _ in nat]
    return [(length, cycles * (n // cycles)) for length, n in nat]


def natural_order(batches: list[tuple[int, int]], seed: int) -> np.ndarray:
    total = sum(n for _, n in batches)
    order = np.arange(total)
    rng = np.random.default_rng(seed)
    i = rng.integers(total - batches[-1][1], total)
    order[[0, i]] = order[[i, 0]]
    rng.shuffle(order[1:])
    return order


def growth_order(batches: list[tuple[int, int]], cycles: int, p2: bool, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    nb = len(batches)

    def odds(b: int) -> list[float]:
        start = nb - b
        es = [start + k if start + k <= nb else start - (start + k) % nb for k in range(nb)]
        return [float(2 ** (e - 1)) if p2 else float(e) for e in es]

    def split(n: int, b: int) -> list[int]:
        out = []
        for left in range(b, 0, -1):
            c = math.ceil(n / left)
            n -= c
            out.append(c)
        return out

    offsets = np.cumsum([0] + [n for _, n in batches])
    cycle_arrays = []
    for cycle in range(cycles):
        per_bucket = []
        for b, (_, n) in enumerate(batches):
            counts = split(n, cycles)
            first = offsets[b] + sum(counts[:cycle])
            o = odds(b)
            sub = [round(x / sum(o) * counts[cycle]) for x in o]
            excess = sum(sub) - counts[cycle]
            if excess <= 0:
                sub[-1] -= excess
            for k in range(nb - 1, -1, -1):  # an overshoot (OLMo-core fails) comes off the end
                take = min(max(excess, 0), sub[k])
                sub[k] -= take
                excess -= take
            ids = np.arange(first, first + counts[cycle])
            per_bucket.append(np.split(ids, np.cumsum(sub)[:-1]))
        for s in range(nb):
            chunk = np.concatenate([per_bucket[b][s] for b in range(nb)])
            rng.shuffle(chunk)
            cycle_arrays.append(chunk)
    order = np.concatenate(cycle_arrays)
    hits = np.nonzero(order >= offsets[-2])[0]
    if hits.size:
        order[[0, hits[0]]] = order[[hits[0], 0]]
    return order


def interleave(
    docs: list[np.ndarray], seq: int, chunks: int, pad: int, eos: int, bos: int | None
) -> np.ndarray:
    special = {pad, eos} | ({bos} if bos is not None else set())
    per = seq // len(docs)
    kept = [np.array([t for t in d[:per] if t not in special], dtype=np.int64) for d in docs]
    parts = [np.array_split(k, chunks) for k in kept]
    body = np.concatenate([parts[d][c] for c in range(chunks) for d in range(len(docs))])
    out = list(body)
    if bos is not None and len(out) < seq:
        out.insert(0, bos)
    if len(out) < seq:
        out.append(eos)
    return np.array(out + [pad] * (seq - len(out)), dtype=np.int64)
