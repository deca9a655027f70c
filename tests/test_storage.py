"""Object storage: preprocess and shuffle reading from and writing to a real S3-compatible server
(moto, on 127.0.0.1), byte-identical to the same run on local files, through a proxy that drops
connections, answers 503/500 and cuts bodies short; and with a fault that never clears, a clear
error naming the object and nothing under the final output keys.
"""

from __future__ import annotations

import dataclasses
import email.utils
import functools
import http.server
import json
import multiprocessing as mp
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import write_jsonl

import tokshuf
from tokshuf.nanoset.builder import Dataset

FIXTURES = Path(__file__).parent / "fixtures" / "bpe"
CL100K = "tiktoken:cl100k_base"


def corpus(tmp_path: Path) -> list[Path]:
    """Four inputs in three formats, in key order."""
    files = [FIXTURES / "corpus-mixed.jsonl.zst", FIXTURES / "corpus-i18n.jsonl.zst"]
    docs = [{"text": f"document {i} " + "word " * (i % 50)} for i in range(500)]
    files.append(write_jsonl(tmp_path / "c-plain.jsonl", docs))
    files.append(write_jsonl(tmp_path / "d-gzip.jsonl.gz", docs[::-1], compress="gz"))
    return files


def upload(s3: Any, bucket: str, prefix: str, files: list[Path]) -> list[str]:
    names = ["a-mixed.jsonl.zst", "b-i18n.jsonl.zst", "c-plain.jsonl", "d-gzip.jsonl.gz"]
    return [s3.put(bucket, f"{prefix}/{n}", f.read_bytes()) for n, f in zip(names, files, strict=True)]


def outputs(prefix: Path) -> dict[str, bytes]:
    return {ext: Path(f"{prefix}_text_document.{ext}").read_bytes() for ext in ("bin", "idx")}


def test_preprocess_from_and_to_s3_is_byte_identical(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("pre")
    files = corpus(tmp_path)
    upload(s3, bucket, "corpus", files)
    local = tokshuf.preprocess(files, tmp_path / "local", CL100K, append_eod=True, num_threads=2)
    expected = outputs(tmp_path / "local")
    for source in ["s3://pre/corpus", "s3://pre/corpus/", "s3://pre/corpus/*.jsonl*"]:
        out = f"s3://pre/out-{len(s3.keys(bucket, 'out'))}/ds"
        summary = tokshuf.preprocess(source, out, CL100K, append_eod=True, num_threads=2)
        assert summary["documents"] == local["documents"]
        assert summary["outputs"][0]["prefix"] == f"{out}_text_document"
        key = out.removeprefix("s3://pre/")
        for ext, data in expected.items():
            assert s3.get(bucket, f"{key}_text_document.{ext}") == data, (source, ext)
        written = json.loads(s3.get(bucket, f"{key}_summary.json"))
        assert written["tokens"] == local["tokens"]
    # One object, and local inputs with a remote output.
    one = tokshuf.preprocess("s3://pre/corpus/c-plain.jsonl", tmp_path / "one", "byte", append_eod=True)
    assert one["documents"] == 500
    tokshuf.preprocess(files[2], "s3://pre/mixed/ds", "byte", append_eod=True)
    assert s3.get(bucket, "mixed/ds_text_document.bin") == outputs(tmp_path / "one")["bin"]


def test_a_prefix_is_scanned_as_a_directory_is(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("scan")
    for key in ["a.jsonl", ".b.jsonl", ".cache/c.jsonl", "D.JSONL", "notes.txt", "sub/e.jsonl"]:
        s3.put(bucket, f"data/{key}", b'{"text": "read"}\n')
    summary = tokshuf.preprocess("s3://scan/data/", tmp_path / "o", "byte")
    assert summary["inputs"] == ["s3://scan/data/a.jsonl", "s3://scan/data/sub/e.jsonl"]
    assert summary["scan_skipped"] == {"extension": 2, "hidden": 2}
    assert summary["first_scan_skipped"] == [
        {"path": "s3://scan/data/.b.jsonl", "reason": "hidden"},
        {"path": "s3://scan/data/.cache/c.jsonl", "reason": "hidden"},
        {"path": "s3://scan/data/D.JSONL", "reason": "extension"},
        {"path": "s3://scan/data/notes.txt", "reason": "extension"},
    ]


def test_listed_keys_with_percent_signs_and_spaces_are_read(s3: Any, tmp_path: Path) -> None:
    """A listed key is opened as listed, though a URL's ``%XX`` is an escape when a user gives it."""
    bucket = s3.bucket("odd-names")
    names = ["a%20b.jsonl", "c d.jsonl", "e%.jsonl", "f+g.jsonl"]
    for i, name in enumerate(names):
        s3.put(bucket, f"data/{name}", json.dumps({"text": f"document {i}"}).encode() + b"\n")
    summary = tokshuf.preprocess("s3://odd-names/data/", tmp_path / "o", "byte")
    assert summary["documents"] == len(names)
    assert len(summary["inputs"]) == len(names)
    # A listed URL given back as an input names the same object.
    again = tokshuf.preprocess(summary["inputs"], tmp_path / "p", "byte")
    assert again["documents"] == len(names)


def test_missing_inputs_name_the_url(s3: Any, tmp_path: Path) -> None:
    s3.bucket("empty")
    for spec in ["s3://empty/nothing-here", "s3://empty/x/*.jsonl"]:
        with pytest.raises((FileNotFoundError, tokshuf.ConfigError), match=spec.split("*")[0]):
            tokshuf.preprocess(spec, tmp_path / "o", "byte")


def test_shuffle_from_and_to_s3_is_byte_identical(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("shuf")
    files = corpus(tmp_path)
    upload(s3, bucket, "corpus", files)
    args: dict[str, Any] = {"context_length": 513, "wds_chunk_size": 64, "num_local_cells": 4}
    local = tokshuf.shuffle(files, tmp_path / "cells-l", tmp_path / "out", CL100K, **args)
    remote = tokshuf.shuffle("s3://shuf/corpus/", tmp_path / "cells-r", "s3://shuf/shards", CL100K, **args)
    assert (remote["contexts"], remote["shards"]) == (local["contexts"], local["shards"])
    assert remote["manifest"] == "s3://shuf/shards/manifest.jsonl"
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert s3.keys(bucket, "shards/") == [f"shards/{n}" for n in names]
    for n in names:
        # The summary records timings; the commit record, the input listing and ETags in a store.
        if n not in ("summary.json", "commit.json"):
            assert s3.get(bucket, f"shards/{n}") == (tmp_path / "out" / n).read_bytes(), n
    # The summary beside the manifest, uploaded after it.
    assert json.loads(s3.get(bucket, "shards/summary.json")) == remote
    # Rerun: already complete. Another run into the same output: refused.
    again = tokshuf.shuffle("s3://shuf/corpus/", tmp_path / "cells-r", "s3://shuf/shards", CL100K, **args)
    assert again["already_complete"]
    assert json.loads(s3.get(bucket, "shards/summary.json")) == remote  # the run's, kept
    # Another run (another seed) into the same output is refused.
    with pytest.raises(tokshuf.ConfigError, match="already holds a dataset"):
        tokshuf.shuffle("s3://shuf/corpus/", tmp_path / "cells-x", "s3://shuf/shards", CL100K, seed=7, **args)


@pytest.mark.parametrize("seed", [1, 2])
def test_faults_do_not_change_the_output(s3: Any, tmp_path: Path, seed: int) -> None:
    bucket = s3.bucket(f"faulty{seed}")
    files = corpus(tmp_path)
    upload(s3, bucket, "corpus", files)
    tokshuf.preprocess(files, tmp_path / "local", CL100K, append_eod=True, num_threads=2)
    with s3.faults(rate=0.3, seed=seed) as faults:
        tokshuf.preprocess(f"s3://{bucket}/corpus", f"s3://{bucket}/out/ds", CL100K, append_eod=True)
    assert faults.injected > 0
    for ext, data in outputs(tmp_path / "local").items():
        assert s3.get(bucket, f"out/ds_text_document.{ext}") == data, ext


def test_a_fault_that_never_clears(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("broken")
    upload(s3, bucket, "corpus", corpus(tmp_path))
    env = {**os.environ, "TOKSHUF_STORAGE_RETRY_SECONDS": "1"}
    cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", "s3://broken/corpus"]
    cmd += ["--output-prefix", "s3://broken/out/ds", "--tokenizer", "byte", "--quiet"]
    with s3.faults(rate=1.0, kinds=("503",), only="b-i18n"):
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "s3://broken/corpus/b-i18n.jsonl.zst" in run.stderr, run.stderr
    assert s3.keys(bucket, "out/") == []


def test_a_failing_store_is_not_a_missing_object(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only "not found" means missing: a store that keeps failing is an error naming the object
    (an OLMo token file opened by prefix would otherwise be taken for a plain object)."""
    bucket = s3.bucket("flaky")
    s3.put(bucket, "tok/ds.idx", b"x")
    monkeypatch.setenv("TOKSHUF_STORAGE_RETRY_SECONDS", "1")
    assert tokshuf._core.remote_exists("s3://flaky/tok/ds.idx")
    assert not tokshuf._core.remote_exists("s3://flaky/tok/other.idx")
    with (
        s3.faults(rate=1.0, kinds=("503",), only="ds.idx"),
        pytest.raises(OSError, match=re.escape("s3://flaky/tok/ds.idx")),
    ):
        tokshuf._core.remote_exists("s3://flaky/tok/ds.idx")


# -- readers on remote data: local copies in the cache root, or a .bin read by ranges ------------
def _dataset(tmp_path: Path) -> Path:
    docs = [{"text": f"document {i} " + "word " * (i % 40)} for i in range(400)]
    src = write_jsonl(tmp_path / "src.jsonl", docs)
    tokshuf.preprocess(src, tmp_path / "local", CL100K, append_eod=True)
    return tmp_path / "local_text_document"


def _upload_prefix(s3: Any, bucket: str, key: str, prefix: Path) -> str:
    for ext in ("idx", "bin"):
        s3.put(bucket, f"{key}.{ext}", Path(f"{prefix}.{ext}").read_bytes())
    return f"s3://{bucket}/{key}"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("TOKSHUF_CACHE_DIR", str(d))
    return d


def test_indexed_dataset_from_s3_copy_is_cached_and_refreshed(
    s3: Any, tmp_path: Path, cache_dir: Path
) -> None:
    local = _dataset(tmp_path)
    bucket = s3.bucket("readers")
    url = _upload_prefix(s3, bucket, "tok/c4_text_document", local)
    expected = tokshuf.IndexedDataset(local)
    ds = tokshuf.IndexedDataset(url, remote="copy")
    assert len(ds) == len(expected)
    assert all(np.array_equal(ds[i], expected[i]) for i in range(len(ds)))
    copy = cache_dir / "remote" / "s3" / "readers" / "tok" / "c4_text_document.bin"
    assert copy.read_bytes() == Path(f"{local}.bin").read_bytes()
    # Opened again: not downloaded again (same file, same inode).
    inode = copy.stat().st_ino
    tokshuf.IndexedDataset(url, remote="copy")
    assert copy.stat().st_ino == inode
    # Pickled into a worker: reads the same.
    again = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(again[7], expected[7])
    # The objects change: the next open sees the new data; the open dataset keeps its map.
    other = tmp_path / "other"
    tokshuf.preprocess(write_jsonl(tmp_path / "o.jsonl", [{"text": "brand new"}] * 3), other, CL100K)
    _upload_prefix(s3, bucket, "tok/c4_text_document", Path(f"{other}_text_document"))
    # A download killed earlier left a full-size temporary: the next download removes it.
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    left = copy.with_name(f"{copy.name}.tmp-{int(dead.stdout)}-0")
    left.write_bytes(b"\0" * 4096)
    fresh = tokshuf.IndexedDataset(url, remote="copy")
    assert len(fresh) == 3
    assert np.array_equal(ds[7], expected[7])
    assert not left.exists()


def test_indexed_dataset_from_s3_reads_ranges(s3: Any, tmp_path: Path, cache_dir: Path) -> None:
    local = _dataset(tmp_path)
    bucket = s3.bucket("ranged")
    url = _upload_prefix(s3, bucket, "tok/ds", local)
    expected = tokshuf.IndexedDataset(local)
    ds = tokshuf.IndexedDataset(url)
    assert "remote='ranges'" in repr(ds)
    for i in (0, 1, len(ds) // 2, len(ds) - 1):
        assert np.array_equal(ds[i], expected[i])
        assert np.array_equal(ds.get(i, offset=1, length=2), expected.get(i, offset=1, length=2))
    assert np.array_equal(ds.sequence_lengths, expected.sequence_lengths)
    # Only the index is stored.
    names = sorted(p.name for p in (cache_dir / "remote" / "s3" / "ranged" / "tok").iterdir())
    assert names == ["ds.idx", "ds.idx.lock", "ds.idx.source.json"]
    # Pickled (a spawned DataLoader worker): still read by ranges, still nothing but the index stored.
    again = pickle.loads(pickle.dumps(ds))
    assert "remote='ranges'" in repr(again)
    assert again._reader.ranged
    assert np.array_equal(again[3], expected[3])
    assert sorted(p.name for p in (cache_dir / "remote" / "s3" / "ranged" / "tok").iterdir()) == names
    # Under faults the bytes are the same.
    with s3.faults(0.3, seed=4):
        assert all(np.array_equal(ds[i], expected[i]) for i in range(0, len(ds), 7))
    # The .bin is rewritten under the open dataset: a read says so instead of mixing versions.
    s3.put(bucket, "tok/ds.bin", b"\0" * Path(f"{local}.bin").stat().st_size)
    with pytest.raises(OSError, match="changed while it was read"):
        ds[5]


def _gpt_readers(prefix: Path, url: str, arrays: tuple[np.ndarray, ...], **kw: Any) -> list[Any]:
    arrays = tuple(
        tokshuf._core.IndexArray.from_bytes(a.tobytes(), a.dtype.name, list(a.shape)) for a in arrays
    )
    return [
        tokshuf._core.SampleReader.gpt(str(prefix), *arrays, pad=-1, **kw),
        tokshuf._core.SampleReader.gpt(url, *arrays, pad=-1, remote="ranges", **kw),
    ]


def test_ranged_batches_equal_mapped_ones_at_document_boundaries(
    s3: Any, tmp_path: Path, cache_dir: Path
) -> None:
    """Megatron's arrays without the extra token give a sample that ends exactly at a document's
    end an empty piece of the next document; in the batch's last row that piece's place is the
    end of the output, which a ranged read must not take for the start of a row."""
    prefix = tmp_path / "docs"
    with tokshuf.IndexedDatasetWriter(prefix, np.uint16) as w:
        for doc in ([0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [10, 11, 12, 13, 14, 15]):
            w.add_document(doc, [len(doc)])
    url = _upload_prefix(s3, s3.bucket("bounds"), "docs", prefix)
    i64 = functools.partial(np.array, dtype=np.int64)
    arrays = (i64([0, 1]), i64([[0, 0], [1, 0]]), i64([0]))
    for reader in _gpt_readers(prefix, url, arrays, sequence_length=4, add_extra_token=False):
        out = np.full((1, 4), 99, np.int64)
        reader.get_batch(i64([0]), out)
        assert out.tolist() == [[0, 1, 2, 3]]
    # Every way of cutting the documents into samples of 1..5 tokens, with and without the extra
    # token, in random batch orders: the ranged reader gives the mapped reader's rows.
    rng = np.random.default_rng(0)
    docs, lengths = i64([0, 1, 2, 3, 0, 2]), [4, 4, 2, 6, 4, 2]
    for seq in range(1, 6):
        for extra in (False, True):
            total = sum(lengths) - int(extra)
            n = total // seq
            starts = [(seq * i) for i in range(n + 1)]
            ends = np.cumsum([0, *lengths])
            # A cut at a document's end is (next document, 0), as in the case above; the last
            # one (the end of the data) is (last document, its length).
            doc_of = [min(int(np.searchsorted(ends, p, side="right") - 1), len(docs) - 1) for p in starts]
            sample_index = i64([[d, p - ends[d]] for d, p in zip(doc_of, starts, strict=True)])
            arrays = (docs, sample_index, rng.permutation(n).astype(np.int64))
            mapped, ranged = _gpt_readers(prefix, url, arrays, sequence_length=seq, add_extra_token=extra)
            ks = rng.integers(0, n, size=2 * n).astype(np.int64)
            want = np.zeros((len(ks), mapped.width), np.int64)
            got = np.ones_like(want)
            mapped.get_batch(ks, want)
            ranged.get_batch(ks, got)
            assert np.array_equal(got, want), (seq, extra)


def test_inspect_a_dataset_in_a_store(s3: Any, tmp_path: Path, cache_dir: Path, capsys: Any) -> None:
    from tokshuf._inspect import inspect
    from tokshuf.cli import main

    local = _dataset(tmp_path)
    url = _upload_prefix(s3, s3.bucket("inspected"), "tok/ds_text_document", local)
    expected = inspect(str(local), doc=3).to_dict()
    got = inspect(url, doc=3).to_dict()
    assert got["path"] == url
    assert got["bin_bytes"] == Path(f"{local}.bin").stat().st_size
    assert {**got, "path": None} == {**expected, "path": None}
    assert main(["inspect", url + ".bin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == expected["tokens"]
    # The .bin was read by ranges, never copied.
    stored = sorted(p.name for p in (cache_dir / "remote" / "s3" / "inspected" / "tok").iterdir())
    assert not [n for n in stored if n.endswith(".bin")], stored


def _open_in_child(url: str) -> int:
    return int(tokshuf.IndexedDataset(url, remote="copy").num_tokens)


def test_processes_share_one_download(s3: Any, tmp_path: Path, cache_dir: Path) -> None:
    local = _dataset(tmp_path)
    url = _upload_prefix(s3, s3.bucket("shared"), "x/ds", local)
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        counts = pool.map(_open_in_child, [url] * 4)
    assert counts == [tokshuf.IndexedDataset(local).num_tokens] * 4
    left = sorted(p.name for p in (cache_dir / "remote" / "s3" / "shared" / "x").iterdir())
    assert left == [
        "ds.bin",
        "ds.bin.lock",
        "ds.bin.source.json",
        "ds.idx",
        "ds.idx.lock",
        "ds.idx.source.json",
    ]


@pytest.mark.parametrize("remote", ["ranges", "copy"])
def test_nanosets_and_instances_from_s3(s3: Any, tmp_path: Path, cache_dir: Path, remote: str) -> None:
    from tokshuf.instances import PackedFSLDataset

    local = _dataset(tmp_path)
    url = _upload_prefix(s3, s3.bucket(f"sets-{remote}"), "d/ds", local)
    cfg: dict[str, Any] = {"sequence_length": 64, "split": "98,2,0", "cache_dir": str(tmp_path / "nc")}
    train_l, *_ = tokshuf.build_nanosets(tokshuf.NanosetConfig(str(local), **cfg), num_samples=(50, 5, 0))
    train_r, *_ = tokshuf.build_nanosets(
        tokshuf.NanosetConfig(url, remote=remote, **cfg),  # type: ignore[arg-type]
        num_samples=(50, 5, 0),
    )
    assert train_l is not None
    assert train_r is not None
    assert len(train_r) == len(train_l)
    assert all(np.array_equal(train_r[i]["input_ids"], train_l[i]["input_ids"]) for i in range(len(train_l)))
    ks = np.arange(len(train_l))[::-1]
    assert np.array_equal(train_r.get_batch(ks), train_l.get_batch(ks))
    stored = cache_dir / "remote" / "s3" / f"sets-{remote}" / "d" / "ds.bin"
    assert stored.exists() == (remote == "copy")
    common: dict[str, Any] = {"sequence_length": 64, "pad_token_id": 0, "eos_token_id": 100257}
    common["cache_dir"] = tmp_path / "iw"
    a = PackedFSLDataset(str(local), **common)
    b = PackedFSLDataset(url, **common)
    assert len(a) == len(b)
    assert all(np.array_equal(a[i]["input_ids"], b[i]["input_ids"]) for i in range(len(a)))


def _used_bytes(ds: tokshuf.IndexedDataset, nanoset: Any, ks: np.ndarray) -> tuple[int, int]:
    """Distinct bytes of the .bin the samples ks hold, from the Megatron arrays (Megatron's
    reading rule, written out here): sample j spans document-index positions sample_index[j]
    (from offset bo) to sample_index[j + 1] (to offset eo, plus the extra token). Also the
    number of pieces (runs of one document) they are made of."""
    item = ds.dtype.itemsize
    needed = np.zeros(int(ds.sequence_pointers[-1]) + int(ds.sequence_lengths[-1]) * item, dtype=bool)

    def mark(pos: int, first: int, end: int | None) -> None:
        seq = int(nanoset.document_index[pos])
        n = int(ds.sequence_lengths[seq])
        start = int(ds.sequence_pointers[seq])
        needed[start + first * item : start + (n if end is None else end) * item] = True

    pieces = 0
    for k in ks:
        j = int(nanoset.shuffle_index[k])
        b, bo = (int(x) for x in nanoset.sample_index[j])
        e, eo = (int(x) for x in nanoset.sample_index[j + 1])
        pieces += e - b + 1
        if b == e:
            mark(b, bo, eo + 1)
            continue
        mark(b, bo, None)
        for p in range(b + 1, e):
            mark(p, 0, None)
        mark(e, 0, eo + 1)
    return int(needed.sum()), pieces


def _train_splits(local: Path, url: str, sequence_length: int) -> tuple[Dataset, Dataset]:
    """One train-only Nanoset over the local dataset and one over its copy in the store."""
    cfg = tokshuf.NanosetConfig(str(local), sequence_length=sequence_length, split="100,0,0")
    on_disk = tokshuf.build_nanosets(cfg).require("train")
    in_store = tokshuf.build_nanosets(dataclasses.replace(cfg, data_path=url)).require("train")
    return on_disk, in_store


def test_a_ranged_batch_is_few_requests_with_little_amplification(
    s3: Any, tmp_path: Path, cache_dir: Path
) -> None:
    docs = [{"text": f"document {i} " + "word " * (i % 300)} for i in range(3000)]
    tokshuf.preprocess(write_jsonl(tmp_path / "big.jsonl", docs), tmp_path / "big", CL100K, append_eod=True)
    local = tmp_path / "big_text_document"
    url = _upload_prefix(s3, s3.bucket("amp"), "big", local)
    ref, ranged = _train_splits(local, url, sequence_length=128)
    ks = np.random.default_rng(0).choice(len(ref), size=256, replace=False)
    before = tokshuf._core.storage_counters()
    batch = ranged.get_batch(ks)
    requests, fetched = (a - b for a, b in zip(tokshuf._core.storage_counters(), before, strict=True))
    assert np.array_equal(batch, ref.get_batch(ks))
    used, pieces = _used_bytes(tokshuf.IndexedDataset(local), ref, ks)
    assert used <= fetched <= 1.1 * used
    # Pieces that touch or overlap (a sample's last token is the next one's first) share a request.
    assert 0 < requests < pieces
    # The same samples asked for three times cost what they cost once.
    before = tokshuf._core.storage_counters()
    ranged.get_batch(ks[:16])
    once = [a - b for a, b in zip(tokshuf._core.storage_counters(), before, strict=True)]
    before = tokshuf._core.storage_counters()
    assert np.array_equal(ranged.get_batch(np.tile(ks[:16], 3)), ref.get_batch(np.tile(ks[:16], 3)))
    assert [a - b for a, b in zip(tokshuf._core.storage_counters(), before, strict=True)] == once


def test_a_blend_of_local_and_remote_datasets(s3: Any, tmp_path: Path, cache_dir: Path) -> None:
    local = _dataset(tmp_path)
    url = _upload_prefix(s3, s3.bucket("blend"), "r/ds", local)
    cfg: dict[str, Any] = {"sequence_length": 32, "split": "100,0,0"}
    both_local = tokshuf.NanosetConfig({str(local): 0.3, str(tmp_path / "copy"): 0.7}, **cfg)
    for ext in ("bin", "idx"):
        (tmp_path / f"copy.{ext}").write_bytes(Path(f"{local}.{ext}").read_bytes())
    mixed = tokshuf.NanosetConfig({str(local): 0.3, url: 0.7}, **cfg)
    (a, *_) = tokshuf.build_nanosets(both_local, num_samples=(300, 0, 0))
    (b, *_) = tokshuf.build_nanosets(mixed, num_samples=(300, 0, 0))
    assert a is not None
    assert b is not None
    ks = np.arange(len(a))
    with s3.faults(0.2, seed=9):
        assert np.array_equal(b.get_batch(ks), a.get_batch(ks))


def test_missing_remote_prefix_is_a_clear_error(s3: Any, cache_dir: Path) -> None:
    s3.bucket("nothing")
    with pytest.raises(FileNotFoundError, match=r"s3://nothing/ds\.idx"):
        tokshuf.IndexedDataset("s3://nothing/ds")


def test_stream_loader_from_s3(s3: Any, tmp_path: Path, cache_dir: Path) -> None:
    from tokshuf.stream import SubDataset, TokenStream

    local = _dataset(tmp_path)
    url = _upload_prefix(s3, s3.bucket("stream"), "s/ds_text_document", local)
    kw: dict[str, Any] = {"eos_token_id": 100257, "sequence_length": 16, "chunk_size": 4, "logical_shards": 3}
    batches = []
    for source in (str(local), url):
        stream = TokenStream([SubDataset.from_path("a", source, file_type="bin")], **kw)
        worker = stream.worker(0, 1)
        batches.append([worker.next_batch()["input"].copy() for _ in range(20)])
    assert all(np.array_equal(a, b) for a, b in zip(*batches, strict=True))


def test_dataloader_workers_read_ranges(s3: Any, tmp_path: Path, cache_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    local = _dataset(tmp_path)
    url = _upload_prefix(s3, s3.bucket("loader"), "l/ds", local)
    expected, ranged = _train_splits(local, url, sequence_length=32)
    ranged.get_batch([0, 1])  # the parent's runtime and connections exist before the workers fork
    loader = torch.utils.data.DataLoader(
        ranged, batch_size=16, num_workers=2, multiprocessing_context="fork", shuffle=False
    )
    t0 = time.monotonic()
    got = torch.cat([b["input_ids"] for b in loader]).numpy()
    # Workers that reused the parent's pooled connections waited minutes for them (170 s here).
    assert time.monotonic() - t0 < 60
    ks = np.arange(len(expected))
    assert np.array_equal(got, expected.get_batch(ks))
    # What a spawned worker gets: the dataset pickled, reopened by ranges.
    assert np.array_equal(pickle.loads(pickle.dumps(ranged)).get_batch(ks), got)


def test_azure_urls_name_container_and_account(monkeypatch: pytest.MonkeyPatch) -> None:
    """``az://container/key`` and Hadoop's ``abfss://container@account.dfs.core.windows.net/key``
    reach that account's container (seen at a local server standing in for Azurite)."""
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            paths.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AZURE_STORAGE_USE_EMULATOR", "true")
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", f"http://127.0.0.1:{server.server_port}")
    try:
        for url in ("abfss://fs@acct.dfs.core.windows.net/dir/x.bin", "az://box/dir/x.bin"):
            with pytest.raises(FileNotFoundError, match=re.escape(url)):
                tokshuf._core.identity(url)
    finally:
        server.shutdown()
        server.server_close()
    # The emulator's URLs are /ACCOUNT/CONTAINER/KEY (devstoreaccount1 unless the URL names one).
    assert paths == ["/acct/fs/dir/x.bin", "/devstoreaccount1/box/dir/x.bin"]


class _FileServer(http.server.BaseHTTPRequestHandler):
    """Static files with ranges and ``Last-Modified``, as a plain web server serves them: no ETag,
    or a weak one (``etag = "weak"``), with nginx's answers to ``If-Match`` and
    ``If-Unmodified-Since`` (a weak ETag never satisfies ``If-Match``)."""

    root = Path()
    etag = "none"

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data, mtime = path.read_bytes(), int(path.stat().st_mtime)
        since = self.headers.get("If-Unmodified-Since")
        changed = since is not None and email.utils.parsedate_to_datetime(since).timestamp() < mtime
        if changed or self.headers.get("If-Match"):
            self.send_error(412)
            return
        start, end = 0, len(data)
        ranged = self.headers.get("Range")
        if ranged:
            a, b = ranged.removeprefix("bytes=").split("-")
            start, end = int(a), min(int(b) + 1, len(data))
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        if self.etag == "weak":
            self.send_header("ETag", f'W/"{mtime:x}-{len(data):x}"')
        self.end_headers()
        if body:
            self.wfile.write(data[start:end])

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("etag", ["none", "weak"])
def test_a_server_without_strong_etags_pins_reads_by_time(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, etag: str
) -> None:
    """Without a strong ETag (none, or a weak one that never matches ``If-Match``) ranged reads
    work, and are pinned by the modification time: a rewrite says so instead of mixing versions."""
    local = _dataset(tmp_path)
    served = tmp_path / "www"
    served.mkdir()
    for ext in ("idx", "bin"):
        shutil.copy(f"{local}.{ext}", served / f"ds.{ext}")
    handler = type("Handler", (_FileServer,), {"root": served, "etag": etag})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TOKSHUF_STORAGE_RETRY_SECONDS", "2")
    try:
        url = f"http://127.0.0.1:{server.server_port}/ds"
        expected, ds = tokshuf.IndexedDataset(local), tokshuf.IndexedDataset(url)
        assert all(np.array_equal(ds[i], expected[i]) for i in range(0, len(ds), 13))
        assert np.array_equal(ds.get(7, offset=1, length=2), expected.get(7, offset=1, length=2))
        bin_ = served / "ds.bin"
        bin_.write_bytes(bin_.read_bytes()[::-1])
        os.utime(bin_, (time.time() + 5, time.time() + 5))
        with pytest.raises(OSError, match="changed while it was read"):
            ds[3]
    finally:
        server.shutdown()
        server.server_close()
