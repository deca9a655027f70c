"""The index cache (keys, atomic entries, concurrent builders), pickling, fork, the GIL."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from instance_data import common, write_files

from tokshuf import ConfigError, FormatError
from tokshuf._cache import cached
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLCurriculum,
    VSLDataset,
)


def corpus(seed: int = 0, files: int = 2, docs: int = 300) -> list:
    rng = np.random.default_rng(seed)
    return [
        [rng.integers(2, 40, int(rng.integers(0, 120))).tolist() for _ in range(docs)] for _ in range(files)
    ]


def _build_in_child(args: tuple[list[str], str, Any]) -> tuple[str, bytes]:
    paths, work_dir, barrier = args
    barrier.wait()
    ds = PackedFSLDataset(*paths, sequence_length=64, generate_doc_lengths=True, **common(Path(work_dir)))
    b = ds.get_batch(np.arange(len(ds)))
    return os.fspath(ds.cache_path), b["input_ids"].tobytes() + b["doc_lens"].tobytes()


def test_concurrent_builders_build_once_and_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths, _ = write_files(tmp_path, corpus())
    log = tmp_path / "builds.log"
    original = PackedFSLDataset._build

    def counting_build(self: PackedFSLDataset) -> Any:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.2)  # widen the race window
        return original(self)

    monkeypatch.setattr(PackedFSLDataset, "_build", counting_build)
    ctx = mp.get_context("fork")
    n = 4
    barrier = ctx.Manager().Barrier(n)
    with ctx.Pool(n) as pool:
        results = pool.map(
            _build_in_child, [([os.fspath(p) for p in paths], os.fspath(tmp_path / "w"), barrier)] * n
        )
    assert len({r for r in results}) == 1  # same entry, same bytes everywhere
    assert len(log.read_text().split()) == 1  # built once; the others waited on the lock
    entries = [p.name for p in (tmp_path / "w" / "instances").iterdir() if p.name.startswith("packed-")]
    assert len(entries) == 1
    assert not [p for p in (tmp_path / "w" / "instances").iterdir() if ".tmp-" in p.name]


def test_a_failed_build_leaves_no_entry(tmp_path: Path) -> None:
    def boom() -> dict[str, Any]:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        cached(tmp_path, "k", "x", {"a": 1}, boom)
    assert [p.name for p in (tmp_path / "k").iterdir()] == [".locks"]
    entry = cached(tmp_path, "k", "x", {"a": 1}, lambda: {"v": np.arange(3, dtype=np.uint64)})
    assert entry.array("v").tolist() == [0, 1, 2]
    again = cached(tmp_path, "k", "x", {"a": 1}, boom)  # reused, not rebuilt
    assert again.path == entry.path


def test_a_damaged_entry_is_rebuilt(tmp_path: Path) -> None:
    entry = cached(tmp_path, "k", "x", {"a": 1}, lambda: {"v": np.arange(5, dtype=np.uint64)})
    entry.file("v").write_bytes(b"\0" * 8)  # e.g. a partial copy of the cache_dir
    again = cached(tmp_path, "k", "x", {"a": 1}, lambda: {"v": np.arange(5, dtype=np.uint64)})
    assert again.path == entry.path
    assert again.array("v").tolist() == [0, 1, 2, 3, 4]


def test_corrupt_index_contents_raise_a_format_error(tmp_path: Path) -> None:
    paths, _ = write_files(tmp_path, corpus(files=1, docs=50))
    ds = PackedFSLDataset(*paths, sequence_length=64, **common(tmp_path / "w"))
    assert ds.cache_path is not None
    ids = ds.cache_path / "doc_ids.bin"
    ids.write_bytes(np.full(len(ds.documents_by_instance), 2**40, np.uint64).tobytes())  # same size
    again = PackedFSLDataset(*paths, sequence_length=64, **common(tmp_path / "w"))
    with pytest.raises(FormatError, match=r"packed-.*damaged"):
        again.get_batch([0])


def test_keys_cover_content_and_parameters(tmp_path: Path) -> None:
    c = corpus(files=1, docs=50)
    paths, tokens = write_files(tmp_path, c)
    a = PaddedFSLDataset(*paths, sequence_length=32, **common(tmp_path / "w"))
    b = PaddedFSLDataset(*paths, sequence_length=32, **common(tmp_path / "w"))
    assert a.cache_path == b.cache_path
    assert a.fingerprint == b.fingerprint
    assert PaddedFSLDataset(*paths, sequence_length=16, **common(tmp_path / "w")).cache_path != a.cache_path
    frag = PaddedFSLDataset(
        *paths, sequence_length=32, long_doc_strategy="fragment", **common(tmp_path / "w")
    )
    assert frag.cache_path != a.cache_path
    # Rewrite the file in place with the same size but documents cut elsewhere: OLMo-core's
    # path+size key would reuse the stale index.
    toks = np.array(tokens[0], dtype=np.uint16)
    moved = np.roll(toks, 7)
    assert moved.nbytes == toks.nbytes
    paths[0].write_bytes(moved.tobytes())
    c2 = PaddedFSLDataset(*paths, sequence_length=32, **common(tmp_path / "w"))
    assert c2.cache_path != a.cache_path
    starts = np.nonzero(moved == 0)[0]
    assert int(c2.spans[0][1]) == min(int(starts[0]) + 1, 32)


def test_metadata_appearing_later_changes_the_index(tmp_path: Path) -> None:
    from tokshuf import olmo_tokens as ot

    docs = [np.array([5, 6, 0]), np.array([7, 8]), np.array([9, 0])]  # the 2nd lost its EOS
    ot.write_tokens(tmp_path / "a.npy", docs, np.uint16)
    kw = {**common(tmp_path / "w"), "document_boundaries": "auto"}
    before = PaddedFSLDataset(tmp_path / "a.npy", sequence_length=8, **kw)
    assert before.spans.tolist() == [[0, 3], [3, 7]]  # EOS scan
    ot.write_metadata(ot.metadata_path(tmp_path / "a.npy"), [[0, 3], [3, 5], [5, 7]])
    after = PaddedFSLDataset(tmp_path / "a.npy", sequence_length=8, **kw)
    assert after.cache_path != before.cache_path
    assert after.spans.tolist() == [[0, 3], [3, 5], [5, 7]]


def test_pickles_by_arguments(tmp_path: Path) -> None:
    paths, _ = write_files(tmp_path, corpus())
    ds = PackedFSLDataset(*paths, sequence_length=64, generate_doc_lengths=True, **common(tmp_path / "w"))
    blob = pickle.dumps(ds)
    assert len(blob) < 4096  # paths and parameters, not arrays
    copy = pickle.loads(blob)
    assert copy.cache_path == ds.cache_path
    assert len(copy) == len(ds)
    idx = np.arange(len(ds))
    for key in ("input_ids", "label_mask", "doc_lens"):
        assert np.array_equal(copy.get_batch(idx)[key], ds.get_batch(idx)[key])


EVERY_DATASET = [
    (FSLDataset, {"sequence_length": 16, "generate_doc_lengths": True, "max_target_sequence_length": 32}),
    (PaddedFSLDataset, {"sequence_length": 16, "long_doc_strategy": "fragment"}),
    (PackedFSLDataset, {"sequence_length": 16, "source_group_size": 2}),
    (InterleavedFSLDataset, {"sequence_length": 16, "seed": 3, "docs_per_instance": 2, "chunks_per_doc": 2}),
    (
        VSLDataset,
        {"max_sequence_length": 16, "min_sequence_length": 4, "curriculum": VSLCurriculum("grow_p2", 2)},
    ),
]


@pytest.mark.parametrize(("cls", "kwargs"), EVERY_DATASET)
def test_bad_boundaries_and_cache_dir_are_config_errors(
    tmp_path: Path, cls: type, kwargs: dict[str, Any]
) -> None:
    paths, _ = write_files(tmp_path, corpus(files=1, docs=20))
    with pytest.raises(
        ConfigError, match=r"document_boundaries must be one of \['auto', 'eos', 'metadata'\], got 'metadta'"
    ):
        cls(*paths, **kwargs, **common(tmp_path / "w", document_boundaries="metadta"))
    for bad in (False, True, 3):
        with pytest.raises(ConfigError, match=rf"cache_dir must be a directory or None .*, got {bad!r}"):
            cls(*paths, **kwargs, **common(tmp_path / "w", cache_dir=bad))
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(("cls", "kwargs"), EVERY_DATASET)
def test_every_dataset_round_trips_through_pickle(tmp_path: Path, cls: type, kwargs: dict[str, Any]) -> None:
    paths, _ = write_files(tmp_path, corpus(files=2, docs=40))
    ds = cls(*paths, **kwargs, **common(tmp_path / "w", metadata={"src": "x"}))
    copy = pickle.loads(pickle.dumps(ds))
    assert type(copy) is cls
    assert len(copy) == len(ds)
    assert copy.fingerprint == ds.fingerprint
    idx = np.arange(len(ds))
    a, b = ds.get_batch(idx), copy.get_batch(idx)
    assert a.keys() == b.keys()
    assert all(np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a)


def _read_in_child(ds: FSLDataset, q: Any) -> None:
    q.put(ds.get_batch(np.arange(len(ds)))["input_ids"].tobytes())


def test_forked_workers_read_the_same_batches(tmp_path: Path) -> None:
    paths, _ = write_files(tmp_path, corpus())
    ds = FSLDataset(*paths, sequence_length=32, num_threads=2, **common(tmp_path / "w"))
    expect = ds.get_batch(np.arange(len(ds)))["input_ids"].tobytes()  # starts the thread pool
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_read_in_child, args=(ds, q)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert got == [expect, expect]


def test_batch_reads_release_the_gil(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    big = [[rng.integers(2, 40, 2000).tolist() for _ in range(500)]]
    paths, _ = write_files(tmp_path, big)
    ds = FSLDataset(
        *paths, sequence_length=1024, generate_doc_lengths=True, num_threads=1, **common(tmp_path / "w")
    )
    idx = np.tile(np.arange(len(ds)), 40).astype(np.uint64)
    ids = np.empty((idx.size, 1024), np.int64)
    reader = ds._reader
    reader.fill(idx[:1000], ids[:1000], None, True, 1)  # warm the page cache
    took: list[float] = []

    def work() -> None:
        t = time.perf_counter()
        reader.fill(idx, ids, None, True, 1)
        took.append(time.perf_counter() - t)

    th = threading.Thread(target=work)
    gaps, last = [], time.perf_counter()
    th.start()
    while th.is_alive():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    th.join()
    # Had the call held the GIL, this loop would have stalled for the whole call.
    assert took[0] > 0.05, "the batch is too small to tell"
    assert max(gaps) < 0.5 * took[0]
