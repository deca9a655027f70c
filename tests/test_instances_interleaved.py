"""Interleaved instances against the model (numpy permutation, array_split chunks)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from instance_data import BOS, EOS, PAD, common, files_with_documents, write_files
from olmo_model import eos_documents, interleave

from tokshuf import ConfigError
from tokshuf import olmo_tokens as ot
from tokshuf.instances import InterleavedFSLDataset


@given(
    corpus=files_with_documents,
    k=st.integers(1, 3),
    per_doc=st.integers(1, 8),
    chunks=st.integers(1, 4),
    seed=st.integers(0, 2**40),
    exempt_first=st.booleans(),
    bos=st.sampled_from([None, BOS]),
)
def test_interleaving_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory,
    corpus: list,
    k: int,
    per_doc: int,
    chunks: int,
    seed: int,
    exempt_first: bool,
    bos: int | None,
) -> None:
    d = tmp_path_factory.mktemp("il")
    paths, tokens = write_files(d, corpus)
    seq = k * per_doc * chunks  # a multiple of both, as OLMo-core requires
    exempt = [paths[0]] if exempt_first and len(paths) > 1 else None
    ds = InterleavedFSLDataset(
        *paths,
        sequence_length=seq,
        seed=seed,
        docs_per_instance=k,
        chunks_per_doc=chunks,
        interleaving_exempt_paths=exempt,
        **common(d / "w", bos_token_id=bos),
    )
    flat = np.array([t for f in tokens for t in f], dtype=np.int64)
    base, ex, base_off = [], [], 0
    for f, toks in enumerate(tokens):
        for s, e in eos_documents(toks, EOS, bos):
            base.append((base_off + s, base_off + min(e, s + seq)))
            ex.append(exempt is not None and f == 0)
        base_off += len(toks)
    exempt_ids = [i for i, x in enumerate(ex) if x]
    order = np.random.default_rng(seed).permutation([i for i, x in enumerate(ex) if not x])
    expected = []
    for i in exempt_ids:
        s, e = base[i]
        expected.append(flat[s:e].tolist() + [PAD] * (seq - (e - s)))
    for j in range(len(order) // k):
        docs = [flat[base[i][0] : base[i][1]] for i in order[j * k : (j + 1) * k]]
        expected.append(interleave(docs, seq, chunks, PAD, EOS, bos).tolist())
    assert len(ds) == len(expected)
    b = ds.get_batch(np.arange(len(ds)))
    assert b["input_ids"].tolist() == expected
    assert np.array_equal(b["label_mask"], b["input_ids"] != PAD)


def test_validation(tmp_path) -> None:
    paths, _ = write_files(tmp_path, [[[3, 4]]])
    with pytest.raises(ConfigError, match="multiple"):
        InterleavedFSLDataset(
            *paths, sequence_length=9, seed=0, docs_per_instance=2, chunks_per_doc=1, **common(tmp_path)
        )
    with pytest.raises(ConfigError, match="not among"):
        InterleavedFSLDataset(
            *paths,
            sequence_length=8,
            seed=0,
            docs_per_instance=2,
            chunks_per_doc=1,
            interleaving_exempt_paths=[tmp_path / "other.npy"],
            **common(tmp_path),
        )


def test_olmo_core_refusals_are_config_errors(tmp_path) -> None:
    paths, _ = write_files(tmp_path, [[[3, 4], [5]]])
    kw = {"seed": 0, "docs_per_instance": 2, **common(tmp_path / "w")}
    # 8 is a multiple of docs_per_instance 2 but not of chunks_per_doc 3: OLMo-core raises.
    with pytest.raises(
        ConfigError, match=r"sequence_length \(8\) must be a multiple of chunks_per_doc \(3\)"
    ):
        InterleavedFSLDataset(*paths, sequence_length=8, chunks_per_doc=3, **kw)
    with pytest.raises(ConfigError, match=r"chunks_per_doc must be >= 1, got 0"):
        InterleavedFSLDataset(*paths, sequence_length=8, chunks_per_doc=0, **kw)
    # A file without EOS has no document: an error naming the file and the EOS, not 0 instances.
    no_eos = tmp_path / "no-eos.npy"
    ot.write_tokens(no_eos, [np.array([3, 4, 5], dtype=np.int64)], np.uint16)
    with pytest.raises(ConfigError, match=r"no-eos.npy: no document .* no eos_token_id 0 among its 3 tokens"):
        InterleavedFSLDataset(paths[0], no_eos, sequence_length=8, chunks_per_doc=2, **kw)


def test_bos_equal_to_eos_ends_documents_only_at_eos_then_bos(tmp_path) -> None:
    # dolma2_sigdig-style: BOS = EOS = 1, documents [1, 5, 6, 1] and [1, 7, 1]. OLMo-core's
    # interleaved dataset (every EOS a boundary) would see 4 documents, two of them a lone BOS.
    p = tmp_path / "a.npy"
    ot.write_tokens(p, [np.array([1, 5, 6, 1, 1, 7, 1], dtype=np.int64)], np.uint16)
    ds = InterleavedFSLDataset(
        p,
        sequence_length=8,
        seed=0,
        docs_per_instance=2,
        chunks_per_doc=1,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
        dtype=np.uint16,
        cache_dir=tmp_path / "w",
    )
    bodies = [[5, 6], [7]]
    first, second = np.random.default_rng(0).permutation(2)
    assert len(ds) == 1
    assert ds[0]["input_ids"].tolist() == [1, *bodies[first], *bodies[second], 1, 0, 0, 0]
