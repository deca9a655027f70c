"""Concatenate and chunk (FSLDataset) against the model: windows, doc_lens, warm-up units."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from instance_data import EOS, PAD, bodies, common, files, write_files, write_indexed
from olmo_model import eos_documents, fsl_windows, window_doc_lens

from tokshuf.instances import FSLDataset


@given(corpus=files, tail=bodies, seq=st.integers(1, 24))
def test_windows_and_doc_lens_match_the_model(
    tmp_path_factory: pytest.TempPathFactory, corpus: list, tail: list, seq: int
) -> None:
    d = tmp_path_factory.mktemp("fsl")
    paths, tokens = write_files(d, corpus, tail)
    ds = FSLDataset(*paths, sequence_length=seq, generate_doc_lengths=True, **common(d / "work"))
    sizes = [len(t) for t in tokens]
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    ends: set[int] = set()
    for f, toks in enumerate(tokens):
        ends |= {sum(sizes[:f]) + e for _, e in eos_documents(toks, EOS)}
    windows = fsl_windows(sizes, seq)
    assert len(ds) == len(windows)
    batch = ds.get_batch(np.arange(len(ds)))
    assert batch["input_ids"].shape == (len(ds), seq)
    assert batch["input_ids"].dtype == np.int64
    assert "label_mask" not in batch
    assert batch["index"].tolist() == list(range(len(ds)))
    for i, (s, e) in enumerate(windows):
        assert np.array_equal(batch["input_ids"][i], flat[s:e])
        lens = window_doc_lens(ends, s, e)
        assert batch["doc_lens"][i].tolist() == lens + [0] * (batch["doc_lens"].shape[1] - len(lens))
        assert batch["max_doc_lens"][i] == max(lens)
        item = ds[i]
        assert np.array_equal(item["input_ids"], flat[s:e])
        assert item["doc_lens"].tolist() == lens
    # Every token of each file's whole windows is used exactly once, in order.
    used = np.concatenate(
        [flat[sum(sizes[:f]) : sum(sizes[:f]) + n // seq * seq] for f, n in enumerate(sizes)]
    )
    assert np.array_equal(batch["input_ids"].reshape(-1), used)


def test_olmo_per_file_count() -> None:
    # The spec's verified case: a 29 964-token file gives 117 instances at 256.
    from tokshuf import _core

    assert _core.instances_per_file([29964], 256, None) == [117]


@given(corpus=files)
def test_warm_up_units_keep_token_order(tmp_path_factory: pytest.TempPathFactory, corpus: list) -> None:
    d = tmp_path_factory.mktemp("warm")
    paths, _ = write_files(d, corpus)
    short = FSLDataset(*paths, sequence_length=4, max_target_sequence_length=8, **common(d / "w"))
    long = FSLDataset(*paths, sequence_length=8, **common(d / "w"))
    assert len(short) == 2 * len(long)
    if len(long):
        assert np.array_equal(
            short.get_batch(np.arange(len(short)))["input_ids"].reshape(-1, 8),
            long.get_batch(np.arange(len(long)))["input_ids"],
        )


@given(corpus=files, seq=st.integers(1, 16))
def test_indexed_sources_give_the_same_instances(
    tmp_path_factory: pytest.TempPathFactory, corpus: list, seq: int
) -> None:
    d = tmp_path_factory.mktemp("idx")
    paths, _ = write_files(d, corpus)
    prefixes = write_indexed(d, corpus)
    a = FSLDataset(*paths, sequence_length=seq, generate_doc_lengths=True, **common(d / "w"))
    b = FSLDataset(*prefixes, sequence_length=seq, generate_doc_lengths=True, **common(d / "w"))
    assert len(a) == len(b)
    if len(a):
        x, y = a.get_batch(np.arange(len(a))), b.get_batch(np.arange(len(b)))
        assert np.array_equal(x["input_ids"], y["input_ids"])
        assert np.array_equal(x["doc_lens"], y["doc_lens"])


def test_index_bounds_and_negative_indices(tmp_path) -> None:
    paths, tokens = write_files(tmp_path, [[[5, 6, 7], [8]]])
    ds = FSLDataset(*paths, sequence_length=2, **common(tmp_path / "w"))
    assert len(ds) == 3
    assert ds[-1]["input_ids"].tolist() == tokens[0][4:6]
    with pytest.raises(IndexError, match="3"):
        ds[3]
    with pytest.raises(IndexError):
        ds.get_batch([0, -4])
    with pytest.raises(TypeError):
        ds[1.5]  # type: ignore[index]
    assert ds.get_batch([])["input_ids"].shape == (0, 2)
    assert PAD not in tokens[0]
