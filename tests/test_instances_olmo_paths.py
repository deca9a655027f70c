"""OLMo instances off OLMo-core's default path, against values measured with OLMo-core 3.0.0
(``../shared/redteam/turn3/olmo/``; test_instances_olmo_parity.py runs OLMo-core itself where it
is installed): Dolma metadata that disagrees with an EOS scan, ranks and world sizes out of range,
seeds beyond 64 bits, ``metadata={}`` and numpy indices."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from instance_data import EOS, common, write_files, write_indexed
from olmo_model import natural_batches, natural_order

from tokshuf import ConfigError
from tokshuf import olmo_tokens as ot
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLDataset,
    _sources,
)

KW: dict[str, Any] = {"pad_token_id": 0, "eos_token_id": 2, "vocab_size": 1000}


def dolma_part(d: Path) -> Path:
    """r_auto_boundaries.py's file: seven documents in the metadata, three of them without EOS."""
    rng = np.random.default_rng(0)
    toks: list[int] = []
    spans = []
    for n, eos in [(5, True), (7, False), (3, True), (20, False), (1, True), (9, True), (4, False)]:
        s = len(toks)
        toks += rng.integers(10, 900, n).tolist() + ([2] if eos else [])
        spans.append((s, len(toks)))
    part = d / "part.npy"
    np.array(toks, np.uint16).tofile(part)
    with gzip.open(d / "part.csv.gz", "wt") as f:
        for i, (s, e) in enumerate(spans):
            f.write(f"{s},{e},{i},src,{i}\n")
    return part


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has warned about no file yet."""
    monkeypatch.setattr(_sources, "_WARNED", set(), raising=False)


def boundary_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "EOS scan" in r.getMessage()]


def test_auto_warns_once_per_file_when_metadata_and_eos_scan_disagree(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = dolma_part(tmp_path)
    kw = {**KW, "cache_dir": tmp_path / "cache"}
    with caplog.at_level(logging.WARNING, logger="tokshuf"):
        padded = PaddedFSLDataset(part, sequence_length=16, **kw)
        vsl = VSLDataset(part, min_sequence_length=1, max_sequence_length=8, **kw)
        fsl = FSLDataset(part, sequence_length=8, generate_doc_lengths=True, **kw)
    (message,) = boundary_warnings(caplog)  # three datasets, one file: one warning
    assert "part.npy: its Dolma metadata part.csv.gz gives 7 documents" in message
    assert "an EOS scan (eos_token_id 2, bos_token_id None) 4" in message
    assert "document 1: metadata [6, 13), EOS scan [6, 17)" in message
    assert "document_boundaries='eos'" in message
    # "auto" took the metadata; OLMo-core's defaults (padded 4, VSL 11, FSL[1] doc_lens [8]) come
    # from "eos", as the warning says.
    assert (len(padded), len(vsl), fsl[1]["doc_lens"].tolist()) == (7, 13, [5, 3])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tokshuf"):
        padded = PaddedFSLDataset(part, sequence_length=16, document_boundaries="eos", **kw)
        vsl = VSLDataset(part, min_sequence_length=1, max_sequence_length=8, document_boundaries="eos", **kw)
        fsl = FSLDataset(part, sequence_length=8, generate_doc_lengths=True, document_boundaries="eos", **kw)
        PaddedFSLDataset(part, sequence_length=16, document_boundaries="metadata", **kw)
    assert (len(padded), len(vsl), fsl[1]["doc_lens"].tolist()) == (4, 11, [8])
    assert boundary_warnings(caplog) == []  # an explicit choice is not warned about
    # A new process (here: the record cleared) warns again, from the cached comparison.
    monkeypatch.setattr(_sources, "_WARNED", set(), raising=False)
    with caplog.at_level(logging.WARNING, logger="tokshuf"):
        PaddedFSLDataset(part, sequence_length=16, **kw)
    assert len(boundary_warnings(caplog)) == 1


def test_auto_is_silent_when_metadata_agrees(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    docs = [np.array([5, 6, EOS]), np.array([7, EOS]), np.array([8, 9, 10, EOS])]
    path = tmp_path / "part.npy"
    ot.write_tokens(path, docs, np.uint16, metadata=True)
    with caplog.at_level(logging.WARNING, logger="tokshuf"):
        ds = PaddedFSLDataset(path, sequence_length=4, **common(tmp_path / "w", document_boundaries="auto"))
    assert len(ds) == 3
    assert boundary_warnings(caplog) == []


#: olmo D3 (r_vsl_rank_out_of_range.py): OLMo-core's NumpyVSLDataLoader gives [439, 364] and
#: [85, 119] for step 1, ranks 0 and 1 of 2, and fails for every other probe.
def test_vsl_batch_refuses_ranks_outside_the_world(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    toks: list[int] = []
    for _ in range(200):
        toks += [*rng.integers(10, 900, int(rng.integers(1, 40))).tolist(), 2]
    np.array(toks, np.uint16).tofile(tmp_path / "a.npy")
    ds = VSLDataset(
        tmp_path / "a.npy", max_sequence_length=16, min_sequence_length=2, cache_dir=tmp_path / "c", **KW
    )
    ep = ds.epoch(global_batch_size=64, seed=0, epoch=1, seed_mode="olmo")
    assert ep.batch(1, rank=0, world_size=2).tolist() == [439, 364]
    assert ep.batch(1, rank=np.int64(1), world_size=np.int32(2)).tolist() == [85, 119]
    for rank, world_size in [(2, 2), (3, 2), (-1, 2), (5, 4)]:
        with pytest.raises(ConfigError, match=rf"rank must be .* \[0, {world_size}\), got {rank}"):
            ep.batch(1, rank=rank, world_size=world_size)
    for world_size in (0, -2):
        with pytest.raises(ConfigError, match=f"world_size must be a positive integer, got {world_size}"):
            ep.batch(1, rank=0, world_size=world_size)
    with pytest.raises(ConfigError, match="rank"):
        ep.batch(1, rank=0.0, world_size=2)  # type: ignore[arg-type]


def seed_corpus(d: Path) -> Path:
    rng = np.random.default_rng(0)
    toks: list[int] = []
    for _ in range(100):
        toks += [*rng.integers(10, 900, int(rng.integers(1, 40))).tolist(), 2]
    np.array(toks, np.uint16).tofile(d / "a.npy")
    return d / "a.npy"


#: olmo D4 (r_seed_overflow.py): OLMo-core accepts both seeds (50 instances; 29 batches).
@pytest.mark.parametrize("seed", [2**64 - 1, 2**64, 2**64 + 5, 2**200 + 3])
def test_seeds_beyond_64_bits_are_read_as_numpy_reads_them(tmp_path: Path, seed: int) -> None:
    path = seed_corpus(tmp_path)
    kw = {**KW, "cache_dir": tmp_path / "c"}
    ids = InterleavedFSLDataset(
        path, sequence_length=16, docs_per_instance=2, chunks_per_doc=2, seed=seed, **kw
    )
    assert len(ids) == 50
    # OLMo-core permutes the padded instances with numpy's default_rng(seed).
    assert ids._order.tolist() == np.random.default_rng(seed).permutation(len(ids._order)).tolist()
    vsl = VSLDataset(path, min_sequence_length=2, max_sequence_length=16, **kw)
    ep = vsl.epoch(64, seed=seed, epoch=1, seed_mode="olmo")
    assert len(ep) == 29
    assert (
        ep.order.tolist() == natural_order(natural_batches(vsl.instances_per_bucket, 64), seed + 1).tolist()
    )
    # Bucket L's instances are numpy's default_rng(seed + epoch + L).permutation, batch by batch.
    first = np.cumsum([0] + [n for _, n in ep.batches_per_bucket])
    for k, (length, bucket) in enumerate(vsl.buckets):
        steps = sorted(range(len(ep)), key=lambda s: int(ep.order[s]))
        steps = [s for s in steps if first[k] <= ep.order[s] < first[k + 1]]
        got = [i for s in steps for i in ep.batch(s).tolist()]
        assert got == np.random.default_rng(seed + 1 + length).permutation(bucket)[: len(got)].tolist()
    assert len(vsl.epoch(64, seed=seed, epoch=3)) == 29  # hashed seeds take them too


def test_seed_errors_name_the_parameter(tmp_path: Path) -> None:
    path = seed_corpus(tmp_path)
    kw = {**KW, "cache_dir": tmp_path / "c"}
    for bad in (-1, 1.5, "7"):
        with pytest.raises(ConfigError, match="seed must be a non-negative integer"):
            InterleavedFSLDataset(
                path, sequence_length=16, docs_per_instance=2, chunks_per_doc=2, seed=bad, **kw
            )
    vsl = VSLDataset(path, min_sequence_length=2, max_sequence_length=16, **kw)
    with pytest.raises(ConfigError, match="seed must be a non-negative integer, got -1"):
        vsl.epoch(64, seed=-1, epoch=1, seed_mode="olmo")
    with pytest.raises(ConfigError, match="epoch must be a non-negative integer, got -2"):
        vsl.epoch(64, seed=0, epoch=-2)
    # numpy integers are integers
    assert len(vsl.epoch(64, seed=np.uint64(3), epoch=np.int32(1), seed_mode="olmo")) == 29


def test_empty_metadata_is_no_metadata_as_in_olmo_core(tmp_path: Path) -> None:
    paths, _ = write_files(tmp_path, [[[3] * 9, [4] * 5]])
    for cls, kw in [
        (FSLDataset, {"sequence_length": 4}),
        (PaddedFSLDataset, {"sequence_length": 16}),
        (PackedFSLDataset, {"sequence_length": 16}),
    ]:
        ds = cls(*paths, metadata={}, **kw, **common(tmp_path / "w"))
        assert "metadata" not in ds[0]
        assert "metadata" not in ds.get_batch([0])
        assert ds[0].keys() == cls(*paths, **kw, **common(tmp_path / "w"))[0].keys()
    ds = FSLDataset(*paths, sequence_length=4, metadata=[{}], **common(tmp_path / "w"))
    assert ds[0]["metadata"] == {}  # a list of dicts is metadata, as in OLMo-core


def test_numpy_and_zero_d_indices_are_integers_floats_are_not(tmp_path: Path) -> None:
    paths, _ = write_files(tmp_path, [[[3] * 9, [4] * 5]])
    ds = FSLDataset(*paths, sequence_length=4, **common(tmp_path / "w"))
    want = ds[3]["input_ids"].tolist()
    for index in (np.int64(3), np.uint8(3), np.array(3), np.array(-1)):
        assert ds[index]["input_ids"].tolist() == want
    for bad in (3.0, np.float64(3), np.array(3.0), True, np.bool_(True), "3", np.array([3])):
        with pytest.raises(TypeError, match="dataset indices must be integers"):
            ds[bad]  # type: ignore[index]


def test_indexed_documents_without_eos_stay_apart_in_packed_doc_lens(tmp_path: Path) -> None:
    # A .idx records its documents as metadata does: OLMo's rule keeps them apart.
    (prefix,) = write_indexed(tmp_path, [[[5, 6, 7]]])
    from tokshuf import IndexedDatasetWriter

    with IndexedDatasetWriter(tmp_path / "noeos", np.uint16) as w:
        for doc in ([5, 6, 7], [8, 9], [3, EOS]):  # the first two without EOS
            w.add_document(doc, [len(doc)])
    kw = common(tmp_path / "w", generate_doc_lengths=True)
    ds = PackedFSLDataset(tmp_path / "noeos", sequence_length=8, **kw)
    assert ds[0]["input_ids"].tolist()[:7] == [5, 6, 7, 8, 9, 3, EOS]
    assert ds[0]["doc_lens"].tolist() == [3, 2, 2, 1]
    assert PackedFSLDataset(prefix, sequence_length=8, **kw)[0]["doc_lens"].tolist() == [4, 4]
