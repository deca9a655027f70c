"""Padded and packed (OBFD) datasets against the model: instance contents, lengths, masks,
packing validity, determinism."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from instance_data import EOS, PAD, common, files, write_files
from olmo_model import eos_documents, limit, obfd

from tokshuf import ConfigError
from tokshuf.instances import PackedFSLDataset, PaddedFSLDataset


def global_docs(tokens: list[list[int]]) -> list[tuple[int, int]]:
    out, base = [], 0
    for toks in tokens:
        out += [(base + s, base + e) for s, e in eos_documents(toks, EOS)]
        base += len(toks)
    return out


@given(corpus=files, seq=st.integers(1, 24), strategy=st.sampled_from(["truncate", "fragment"]))
def test_padded_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory, corpus: list, seq: int, strategy: str
) -> None:
    d = tmp_path_factory.mktemp("pad")
    paths, tokens = write_files(d, corpus)
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    ds = PaddedFSLDataset(*paths, sequence_length=seq, long_doc_strategy=strategy, **common(d / "w"))
    spans = limit(global_docs(tokens), seq, strategy)
    assert len(ds) == len(spans)  # one instance per (non-empty) document piece
    b = ds.get_batch(np.arange(len(ds)))
    for i, (s, e) in enumerate(spans):
        n = e - s
        assert b["input_ids"][i].tolist() == flat[s:e].tolist() + [PAD] * (seq - n)
        assert b["label_mask"][i].tolist() == [True] * n + [False] * (seq - n)


@given(
    corpus=files,
    seq=st.integers(1, 40),
    strategy=st.sampled_from(["truncate", "fragment"]),
    group=st.integers(1, 3),
)
def test_packing_is_valid_and_equals_best_fit_decreasing(
    tmp_path_factory: pytest.TempPathFactory, corpus: list, seq: int, strategy: str, group: int
) -> None:
    d = tmp_path_factory.mktemp("pack")
    paths, tokens = write_files(d, corpus)
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    ds = PackedFSLDataset(
        *paths,
        sequence_length=seq,
        long_doc_strategy=strategy,
        source_group_size=group,
        generate_doc_lengths=True,
        **common(d / "w"),
    )
    # The model, group by group.
    sizes = np.cumsum([0] + [len(t) for t in tokens])
    expect_bins: list[list[int]] = []
    expect_docs: Counter = Counter()
    for g in range(0, len(tokens), group):
        docs = [
            x
            for x in limit(global_docs(tokens), seq, strategy)
            if sizes[g] <= x[0] < sizes[min(g + group, len(tokens))]
        ]
        lengths = sorted((e - s for s, e in docs), reverse=True)
        expect_bins += [[lengths[t] for t in b] for b in obfd([e - s for s, e in docs], seq)]
        expect_docs.update(tuple(flat[s:e]) for s, e in docs)
    assert len(ds) == len(expect_bins)
    b = ds.get_batch(np.arange(len(ds)))
    got_docs: Counter = Counter()
    for i, bins in enumerate(expect_bins):
        spans = ds.instance_documents(i)
        assert [int(e - s) for s, e in spans] == bins  # same bins as OBFD, in the same order
        n = sum(bins)
        assert n <= seq  # no instance over capacity
        content = np.concatenate([flat[s:e] for s, e in spans])
        assert b["input_ids"][i].tolist() == content.tolist() + [PAD] * (seq - n)
        assert b["label_mask"][i].tolist() == [True] * n + [False] * (seq - n)
        lens = bins + ([seq - n] if n < seq else [])
        row = b["doc_lens"][i]
        assert row[: len(lens)].tolist() == lens
        assert not row[len(lens) :].any()
        got_docs.update(tuple(flat[s:e]) for s, e in spans)
    assert got_docs == expect_docs  # every document placed exactly once


def test_packing_is_deterministic_across_threads_and_rebuilds(tmp_path) -> None:
    rng = np.random.default_rng(1)
    corpus = [[rng.integers(2, 40, int(rng.integers(0, 90))).tolist() for _ in range(400)] for _ in range(3)]
    paths, _ = write_files(tmp_path, corpus)
    a = PackedFSLDataset(*paths, sequence_length=64, num_threads=1, **common(tmp_path / "a"))
    b = PackedFSLDataset(*paths, sequence_length=64, num_threads=2, **common(tmp_path / "b"))
    assert a.cache_path != b.cache_path
    for name in ("documents", "instance_offsets", "documents_by_instance"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    idx = np.arange(len(a))
    assert np.array_equal(a.get_batch(idx)["input_ids"], b.get_batch(idx)["input_ids"])
    fill = 1 - a.get_batch(idx)["label_mask"].mean()
    assert fill < 0.05  # OBFD packs compactly


def test_small_known_packing(tmp_path) -> None:
    # Lengths (with EOS) 3, 8, 5, 1, 4 into 8: [8], [5, 3], [4, 1].
    corpus = [[[2, 3], [4] * 7, [5] * 4, [], [6] * 3]]
    paths, _ = write_files(tmp_path, corpus)
    ds = PackedFSLDataset(*paths, sequence_length=8, generate_doc_lengths=True, **common(tmp_path / "w"))
    assert [[int(e - s) for s, e in ds.instance_documents(i)] for i in range(len(ds))] == [
        [8],
        [5, 3],
        [4, 1],
    ]
    assert ds[2]["input_ids"].tolist() == [6, 6, 6, EOS, EOS, PAD, PAD, PAD]
    assert ds[2]["doc_lens"].tolist() == [4, 1, 3]
    with pytest.raises(ConfigError):
        PackedFSLDataset(*paths, sequence_length=8, source_group_size=0, **common(tmp_path / "w"))
