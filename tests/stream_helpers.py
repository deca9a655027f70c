"""Shared helpers of the streaming-loader tests: corpora with globally unique token ids, stream
construction, state round trips, and the save/load-state check every stateful piece runs."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

import tokshuf
from tokshuf.stream import SubDataset, TokenStream, load_state, save_state

EOS, BOS, STRIP = 1, 2, 3
FIRST_ID = 10  # ids below are special and may repeat; ids from here on are globally unique

Corpus = list[list[list[list[int]]]]  # sub-dataset → file → document → tokens


@st.composite
def corpora(
    draw: st.DrawFn, max_subs: int = 2, max_files: int = 3, max_docs: int = 10, max_len: int = 20
) -> Corpus:
    """Files with 0..max_docs documents of 0..max_len tokens, some empty, some only a strip
    token, some with an internal EOS; every other id appears once in the whole corpus."""
    nxt = FIRST_ID
    out: Corpus = []
    for _ in range(draw(st.integers(1, max_subs))):
        files = []
        for _ in range(draw(st.integers(1, max_files))):
            docs = []
            for _ in range(draw(st.integers(0, max_docs))):
                kind = draw(st.sampled_from(["plain"] * 6 + ["empty", "strip", "inner_eos"]))
                n = draw(st.integers(1, max_len))
                if kind == "empty":
                    docs.append([])
                elif kind == "strip":
                    docs.append([STRIP])
                else:
                    doc = list(range(nxt, nxt + n))
                    nxt += n
                    if kind == "inner_eos":
                        doc.insert(draw(st.integers(0, len(doc))), EOS)
                    docs.append(doc)
            files.append(docs)
        out.append(files)
    return out


def simple_corpus(sizes: Sequence[Sequence[Sequence[int]]]) -> Corpus:
    """Documents of the given lengths, ids unique from FIRST_ID."""
    nxt = FIRST_ID
    out: Corpus = []
    for files in sizes:
        sub = []
        for docs in files:
            fd = []
            for n in docs:
                fd.append(list(range(nxt, nxt + n)))
                nxt += n
            sub.append(fd)
        out.append(sub)
    return out


def write_corpus(root: Path, corpus: Corpus) -> list[Path]:
    """One directory per sub-dataset, one ``.bin/.idx`` per file; returns the directories."""
    dirs = []
    for s, files in enumerate(corpus):
        d = root / f"sub{s}"
        d.mkdir(parents=True, exist_ok=True)
        for f, docs in enumerate(files):
            w = tokshuf.IndexedDatasetWriter(d / f"part{f:03d}", dtype=np.int32)
            for doc in docs:
                if doc:
                    w.add_sequence(np.asarray(doc, dtype=np.int32))
                w.end_document()
            w.finish()
        dirs.append(d)
    return dirs


def flat_docs(corpus: Corpus) -> list[list[list[int]]]:
    """Per sub-dataset, its documents in global order."""
    return [[doc for f in files for doc in f] for files in corpus]


def make_stream(root: Path, corpus: Corpus, weights: Sequence[float] | None = None, **kw: Any) -> TokenStream:
    dirs = write_corpus(root, corpus)
    ws = list(weights) if weights is not None else [1.0] * len(dirs)
    subs = [SubDataset.from_path(d.name, d, file_type="bin", weight=w) for d, w in zip(dirs, ws, strict=True)]
    kw.setdefault("eos_token_id", EOS)
    kw.setdefault("sequence_length", 8)
    kw.setdefault("chunk_size", 5)
    kw.setdefault("logical_shards", 6)
    kw.setdefault("provenance", True)
    return TokenStream(subs, **kw)


def owned_tokens(corpus: Corpus) -> Counter[int]:
    """Every unique id of the corpus (specials excluded)."""
    return Counter(t for sub in corpus for f in sub for d in f for t in d if t >= FIRST_ID)


def unique_tokens(batch: dict[str, Any], epoch: int | None = None) -> list[int]:
    """The unique ids of a batch's lines (optionally only runs read in shard epoch ``epoch``)."""
    lines = np.concatenate([np.asarray(batch["input"]), np.asarray(batch["label"])[:, -1:]], axis=1)
    if epoch is None:
        return [int(t) for t in lines.ravel() if t >= FIRST_ID]
    out = []
    for line, at, _sub, _shard, ep, _doc, _start, n in np.asarray(batch["segments"]):
        if ep == epoch:
            out.extend(int(t) for t in lines[line, at : at + n] if t >= FIRST_ID)
    return out


def lines_of(batch: dict[str, Any]) -> np.ndarray[Any, Any]:
    """The full lines (input plus the last label token)."""
    return np.concatenate([np.asarray(batch["input"]), np.asarray(batch["label"])[:, -1:]], axis=1)


def disk_round_trip(state: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Save a state as a checkpoint directory and read it back (what a restart does)."""
    ranks = state["topology"]["ranks"]
    if sorted(ranks) != list(range(state["topology"]["world_size"])):  # one rank's part
        save_state(directory, state, commit_timeout=None)
        return load_state(directory / f"part-{min(ranks):05d}.json")
    save_state(directory, state)
    return load_state(directory)


def batches_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def check_save_load_state(
    make: Callable[[dict[str, Any] | None], Any],
    next_batch: Callable[[Any], dict[str, Any]],
    state_of: Callable[[Any], dict[str, Any]],
    steps: Sequence[int],
    tail: int,
    tmp: Path,
) -> None:
    """The shared save/load-state check (torchdata's ``run_test_save_load_state`` idea, chained):
    an uninterrupted run of ``sum(steps) + tail`` batches must equal a run that saves after
    each segment of ``steps`` batches, writes the state to disk, and continues in a fresh object."""
    ref_obj = make(None)
    ref = [next_batch(ref_obj) for _ in range(sum(steps) + tail)]
    got: list[dict[str, Any]] = []
    state: dict[str, Any] | None = None
    for i, k in enumerate([*steps, tail]):
        obj = make(state)
        got.extend(next_batch(obj) for _ in range(k))
        if i < len(steps):
            state = disk_round_trip(state_of(obj), tmp / f"ckpt{i}")
    assert len(got) == len(ref)
    for i, (a, b) in enumerate(zip(ref, got, strict=True)):
        assert batches_equal(a, b), f"batch {i} differs after resuming at {list(np.cumsum(steps))}"


def take(it: Iterator[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    return [next(it) for _ in range(n)]


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A temporary directory in RAM when the machine has one (the corpora are tiny; fsync and
    unlink on a real disk would dominate the property tests)."""
    shm = "/dev/shm"
    return tempfile.TemporaryDirectory(dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)


def tmpdir_for(base: Path, name: str) -> Path:
    p = base / name
    p.mkdir(parents=True, exist_ok=True)
    return p


__all__ = [
    "BOS",
    "EOS",
    "FIRST_ID",
    "STRIP",
    "batches_equal",
    "check_save_load_state",
    "corpora",
    "disk_round_trip",
    "flat_docs",
    "lines_of",
    "make_stream",
    "os",
    "owned_tokens",
    "scratch",
    "simple_corpus",
    "take",
    "unique_tokens",
    "write_corpus",
]


def tables(w: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A worker's (rows, buffer) tables as [n, 7] uint64 arrays."""
    t = w.tables()
    rows = np.frombuffer(t["rows"], "<u8").reshape(-1, 7)
    buf = np.frombuffer(t["buffer"], "<u8").reshape(-1, 7)
    return rows, buf


def epoch_done(w: Any, epoch: int = 0) -> bool:
    """Every non-empty owned shard is past ``epoch`` and no buffered line holds its runs."""
    from tokshuf.stream.state import shard_docs

    rows, buf = tables(w)
    n_shards = w.stream.logical_shards
    for sub, shard, ep, *_ in rows:
        n = w.stream.datasets[int(sub)].num_docs
        if ep <= epoch and len(shard_docs(n, n_shards, int(shard))):
            return False
    return not bool((buf[:, 3] <= epoch).any())


def read_epoch(w: Any, limit: int = 2000, epoch: int = 0) -> list[dict[str, Any]]:
    """Batches until :func:`epoch_done` (a worker with no text yields nothing)."""
    from tokshuf.errors import ConfigError

    out: list[dict[str, Any]] = []
    while not epoch_done(w, epoch):
        assert len(out) < limit, "epoch did not finish"
        try:
            out.append(w.next_batch())
        except ConfigError as e:
            if "no document to emit" not in str(e):
                raise
            break
    return out


def epoch_tokens(batches: Sequence[dict[str, Any]], epoch: int = 0) -> Counter[int]:
    c: Counter[int] = Counter()
    for b in batches:
        c.update(unique_tokens(b, epoch))
    return c
