"""`tokshuf shuffle` is a pure function of (inputs, options, seed), and a uniform shuffle."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from shuffle_helpers import chi2_sf, random_docs, read_contexts, tree_digest, write_corpus

import tokshuf


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    rng = random.Random(11)
    files = [random_docs(rng, n, max_len=400) for n in (300, 5, 0, 250, 120, 80)]
    return write_corpus(tmp_path_factory.mktemp("corpus"), files)


def run(paths: list[Path], work: Path, **kw: object) -> Path:
    # The corpus has an empty file (bad input): skipped.
    opts: dict[str, object] = {
        "context_length": 17,
        "wds_chunk_size": 101,
        "num_local_cells": 8,
        "on_error": "skip",
    }
    opts.update(kw)
    tokshuf.shuffle(paths, work / "cells", work / "out", "byte", **opts)  # type: ignore[arg-type]
    return work / "out"


def test_identical_bytes_for_any_threads_and_buffering(corpus: list[Path], tmp_path: Path) -> None:
    variants = [
        {"num_threads": 1},
        {"num_threads": 2, "buffer_bytes": 3000, "batch_bytes": 700},
        {"num_threads": 4, "buffer_bytes": 1 << 14, "batch_bytes": 64},
    ]
    digests = [tree_digest(run(corpus, tmp_path / f"v{i}", **v)) for i, v in enumerate(variants)]
    assert len(digests[0]) > 5
    assert digests[0] == digests[1] == digests[2]
    # The seed matters (same multiset, different order).
    other = run(corpus, tmp_path / "seed", seed=99)
    assert tree_digest(other) != digests[0]
    assert Counter(read_contexts(other)) == Counter(read_contexts(tmp_path / "v0" / "out"))


def test_cell_count_changes_order_not_content(corpus: list[Path], tmp_path: Path) -> None:
    a = run(corpus, tmp_path / "a", num_local_cells=1)
    b = run(corpus, tmp_path / "b", num_local_cells=64)
    assert Counter(read_contexts(a)) == Counter(read_contexts(b))
    assert read_contexts(a) != read_contexts(b)


# Uniformity: every context is exactly one document that names its file and index, so the
# output order can be compared with what a uniform random permutation would give.
SIZES = [400, 800, 1200, 1600, 1000, 1000]
SEQ = 16
CHUNK = 100


def labelled_corpus(root: Path) -> list[Path]:
    files = [[f"{f}{i:05d}".ljust(SEQ - 1, "-") for i in range(n)] for f, n in enumerate(SIZES)]
    return write_corpus(root, files)


def labels(contexts: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray]:
    files = np.array([c[0] - 1 - ord("0") for c in contexts])
    index = np.array([int(bytes(t - 1 for t in c[1:6]).decode()) for c in contexts])
    return files, index


def uniformity_pvalues(files: np.ndarray, index: np.ndarray) -> dict[str, float]:
    total = len(files)
    shard = np.arange(total) // CHUNK
    pos = (np.arange(total) % CHUNK) // 10
    out = {}
    for name, col in (("file x shard", shard), ("file x position in shard", pos)):
        table = np.zeros((len(SIZES), col.max() + 1))
        np.add.at(table, (files, col), 1)
        expected = np.outer(table.sum(1), table.sum(0)) / total
        stat = float(((table - expected) ** 2 / expected).sum())
        out[name] = chi2_sf(stat, (table.shape[0] - 1) * (table.shape[1] - 1))
    # Order within a file: the index of a file's contexts should not trend with output position
    # (Spearman correlation is ~N(0, 1/(n-1)) under a uniform permutation).
    worst = 1.0
    for f in range(len(SIZES)):
        ranks = np.argsort(np.argsort(index[files == f]))
        r = float(np.corrcoef(ranks, np.arange(len(ranks)))[0, 1])
        z = abs(r) * np.sqrt(len(ranks) - 1)
        worst = min(worst, float(np.exp(-(z**2) / 2)))  # a generous bound on the two-sided p
    out["index order"] = worst
    return out


@pytest.mark.parametrize("seed", [1234, 7])
def test_contexts_are_spread_like_a_uniform_permutation(tmp_path: Path, seed: int) -> None:
    paths = labelled_corpus(tmp_path / "in")
    out = run(paths, tmp_path, context_length=SEQ, wds_chunk_size=CHUNK, num_local_cells=16, seed=seed)
    contexts = read_contexts(out)
    files, index = labels(contexts)
    assert sorted(Counter(files.tolist()).values()) == sorted(SIZES)
    pvalues = uniformity_pvalues(files, index)
    assert all(p > 1e-3 for p in pvalues.values()), pvalues


def test_the_uniformity_test_has_power(tmp_path: Path) -> None:
    # Input order, and a shuffle that stays within blocks of 2 cells' worth: both must fail.
    files = np.repeat(np.arange(len(SIZES)), SIZES)
    index = np.concatenate([np.arange(n) for n in SIZES])
    assert min(uniformity_pvalues(files, index).values()) < 1e-6
    rng = np.random.default_rng(0)
    perm = np.concatenate([rng.permutation(b) for b in np.array_split(np.arange(len(files)), 3)])
    assert min(uniformity_pvalues(files[perm], index[perm]).values()) < 1e-6
