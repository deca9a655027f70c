"""The loader state: topology-independent tables plus per-worker sections.

A state is a plain dict (no pickled objects)::

    {"format": "tokshuf.stream.state", "version": 1,
     "manifest": {...},     # what the state belongs to: seed, shards, datasets, document rules
     "topology": {"world_size", "num_workers", "workers", "ranks"},
     "rows":    uint64 [R, 7]  sub, shard, epoch, pos, offset, tokens, docs
     "workers": uint64 [K, 3 + D]  worker, rng_counter, batches, mixer tokens per sub-dataset
     "buffer":  uint64 [M, 8]  worker, slot, sub, shard, epoch, doc, start, len}

``rows`` has one row per (sub-dataset, logical shard) and is all a rescale needs, with the
shuffle buffers pooled from ``buffer`` (lines as references into the data, re-read on load).
``workers`` and the per-worker buffer order are used only when the number of global workers is
the same, which makes such a resume bit-exact. See ``docs/stream-checkpoint.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf.errors import ConfigError, FormatError

__all__ = [
    "FORMAT",
    "VERSION",
    "check_compatible",
    "make_state",
    "merge_states",
    "worker_shards",
    "worker_tables",
]

FORMAT = "tokshuf.stream.state"
VERSION = 1
ROW_COLUMNS = ("sub", "shard", "epoch", "pos", "offset", "tokens", "docs")
BUFFER_COLUMNS = ("worker", "slot", "sub", "shard", "epoch", "doc", "start", "len")
U64 = npt.NDArray[np.uint64]


def worker_shards(n_shards: int, n_workers: int, worker: int) -> range:
    """The logical shards of global worker ``worker`` (the core's exact integer blocks)."""
    return range(worker * n_shards // n_workers, (worker + 1) * n_shards // n_workers)


def shard_docs(n_docs: int, n_shards: int, shard: int) -> range:
    """The documents of logical shard ``shard``."""
    return range(shard * n_docs // n_shards, (shard + 1) * n_docs // n_shards)


def _table(a: Any, cols: int, what: str) -> U64:
    arr = np.asarray(a if a is not None and len(a) else np.zeros((0, cols)), dtype=np.uint64)
    if arr.ndim != 2 or arr.shape[1] != cols:
        raise FormatError(f"state table {what!r} must have shape [n, {cols}], got {list(arr.shape)}")
    return np.ascontiguousarray(arr)


def make_state(
    manifest: Mapping[str, Any], topology: Mapping[str, Any], sections: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any]:
    """A state from per-worker tables as the core returns them (``rows``, ``buffer``, ``mixer``
    as little-endian u64 bytes or arrays, ``rng_counter``, ``batches``)."""
    n_sub = len(manifest["datasets"])
    rows, workers, buffer = [], [], []
    for g in sorted(sections):
        t = sections[g]
        rows.append(_words(t["rows"]).reshape(-1, 7))
        mixer = _words(t["mixer"])
        workers.append(np.concatenate([np.array([g, t["rng_counter"], t["batches"]], np.uint64), mixer]))
        b = _words(t["buffer"]).reshape(-1, 7)
        buffer.append(np.concatenate([np.full((len(b), 1), g, np.uint64), b], axis=1))
    return {
        "format": FORMAT,
        "version": VERSION,
        "manifest": dict(manifest),
        "topology": dict(topology),
        "rows": _table(np.concatenate(rows) if rows else None, 7, "rows"),
        "workers": _table(np.stack(workers) if workers else None, 3 + n_sub, "workers"),
        "buffer": _table(np.concatenate(buffer) if buffer else None, 8, "buffer"),
    }


def _words(x: Any) -> U64:
    if isinstance(x, bytes | bytearray | memoryview):
        return np.frombuffer(x, dtype="<u8").astype(np.uint64)
    return np.asarray(x, dtype=np.uint64).reshape(-1)


def validate_state(state: Mapping[str, Any]) -> None:
    """Check the envelope and table shapes; raise :class:`FormatError` naming the fault."""
    if not isinstance(state, Mapping) or state.get("format") != FORMAT:
        got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise FormatError(f"not a tokshuf stream state (format {got!r}, expected {FORMAT!r})")
    if state.get("version") != VERSION:
        raise FormatError(
            f"stream state version {state.get('version')!r} is not supported (this tokshuf reads {VERSION})"
        )
    for key in ("manifest", "topology", "rows", "workers", "buffer"):
        if key not in state:
            raise FormatError(f"stream state lacks {key!r}")
    try:
        man, topo = state["manifest"], state["topology"]
        n_sub, n_shards, n_workers = len(man["datasets"]), int(man["logical_shards"]), int(topo["workers"])
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"stream state: malformed manifest or topology ({type(e).__name__}: {e})") from e
    rows = _table(state["rows"], 7, "rows")
    workers = _table(state["workers"], 3 + n_sub, "workers")
    buffer = _table(state["buffer"], 8, "buffer")
    _check_tables(rows, workers, buffer, man, n_sub, n_shards, n_workers)


def _check_tables(
    rows: U64, workers: U64, buffer: U64, man: Any, n_sub: int, n_shards: int, n_workers: int
) -> None:
    """The tables against the manifest: each global worker saved has exactly one row per
    (sub-dataset, logical shard) it owns, and nothing else; buffered lines name real
    sub-datasets and shards. A state that breaks these was not written by a loader (edited,
    or pieced together), and resuming from it would silently give other batches."""
    ids = workers[:, 0]
    if len(ids) == 0:
        raise FormatError("the stream state holds no worker: it is empty, not a state to resume from")
    if int(ids.max()) >= n_workers or len(np.unique(ids)) != len(ids):
        raise FormatError(
            f"the stream state's workers table lists workers {sorted(int(x) for x in ids)}; the topology "
            f"has {n_workers} global workers (0..{n_workers - 1}), each at most once"
        )
    for col, limit, what in ((0, n_sub, "sub-dataset"), (1, n_shards, "logical shard")):
        bad = np.flatnonzero(rows[:, col] >= limit)
        if len(bad):
            unit = f"{n_sub} sub-datasets" if col == 0 else f"{n_shards} logical shards"
            raise FormatError(
                f"the stream state has a row for {what} {int(rows[bad[0], col])}, but the manifest has {unit}"
            )
    keys = rows[:, 0] * np.uint64(n_shards) + rows[:, 1]
    uniq, counts = np.unique(keys, return_counts=True)
    if len(uniq) != len(keys):
        twice = int(uniq[counts > 1][0])
        raise FormatError(
            f"the stream state lists sub-dataset {twice // n_shards}, logical shard {twice % n_shards} twice"
        )
    owned = np.concatenate(
        [
            np.arange(r.start, r.stop, dtype=np.uint64)
            for g in ids
            for r in [worker_shards(n_shards, n_workers, int(g))]
        ]
    )
    expected = (np.arange(n_sub, dtype=np.uint64)[:, None] * np.uint64(n_shards) + owned[None, :]).ravel()
    missing = np.setdiff1d(expected, uniq)
    if len(missing):
        k = int(missing[0])
        raise FormatError(
            f"the stream state has no row for sub-dataset {k // n_shards}, logical shard {k % n_shards} "
            f"({len(missing)} of the {len(expected)} rows its {len(ids)} worker(s) own are missing)"
        )
    extra = np.setdiff1d(uniq, expected)
    if len(extra):
        k = int(extra[0])
        raise FormatError(
            f"the stream state has a row for sub-dataset {k // n_shards}, logical shard {k % n_shards}, "
            "which none of its workers owns"
        )
    for col, limit, what in ((2, n_sub, "sub-dataset"), (3, n_shards, "logical shard")):
        bad = np.flatnonzero(buffer[:, col] >= limit)
        if len(bad):
            raise FormatError(
                f"the stream state's shuffle buffer holds a line of {what} {int(buffer[bad[0], col])}, "
                f"but the manifest has {n_sub if col == 2 else n_shards}"
            )
    # Tokens still buffered were read first: per sub-dataset, buffered <= read (else inspect
    # would report negative consumption). Only a whole state holds both sides of the count: a
    # rank's part after a rescale may buffer lines of shards another rank owns.
    if len(ids) == n_workers:
        read, held = np.zeros(n_sub, np.uint64), np.zeros(n_sub, np.uint64)
        np.add.at(read, rows[:, 0].astype(np.intp), rows[:, 5])
        np.add.at(held, buffer[:, 2].astype(np.intp), buffer[:, 7])
        over = np.flatnonzero(held > read)
        if len(over):
            i = int(over[0])
            raise FormatError(
                f"the stream state's shuffle buffers hold {int(held[i])} tokens of sub-dataset {i} "
                f"({man['datasets'][i].get('name', i)!r}) but only {int(read[i])} were read from it"
            )


def merge_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One state from the states of several ranks (all saved at the same step)."""
    if not states:
        raise FormatError("no states to merge")
    for s in states:
        validate_state(s)
    first = states[0]
    for s in states[1:]:
        if s["manifest"] != first["manifest"]:
            raise FormatError("the states to merge belong to different streams (their manifests differ)")
        t, f = s["topology"], first["topology"]
        if (t["world_size"], t["num_workers"]) != (f["world_size"], f["num_workers"]):
            raise FormatError(f"the states to merge were saved by different topologies: {t} vs {f}")
    rows = np.concatenate([_table(s["rows"], 7, "rows") for s in states])
    keys = rows[:, 0] * np.uint64(1 << 32) + rows[:, 1]
    if len(np.unique(keys)) != len(keys):
        raise FormatError("the states to merge list the same logical shard twice")
    n_sub = len(first["manifest"]["datasets"])
    workers = np.concatenate([_table(s["workers"], 3 + n_sub, "workers") for s in states])
    if len(np.unique(workers[:, 0])) != len(workers):
        raise FormatError("the states to merge list the same worker twice")
    ranks = sorted({r for s in states for r in s["topology"].get("ranks", [])})
    return {
        "format": FORMAT,
        "version": VERSION,
        "manifest": first["manifest"],
        "topology": {**first["topology"], "ranks": ranks},
        "rows": rows,
        "workers": workers,
        "buffer": np.concatenate([_table(s["buffer"], 8, "buffer") for s in states]),
    }


def check_compatible(saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` if a state saved under ``saved`` cannot continue ``current``."""
    for key in ("seed", "logical_shards"):
        if saved[key] != current[key]:
            raise ConfigError(f"the checkpoint has {key}={saved[key]}, the loader {key}={current[key]}")
    names_s = [d["name"] for d in saved["datasets"]]
    names_c = [d["name"] for d in current["datasets"]]
    if names_s != names_c:
        raise ConfigError(
            f"the checkpoint's sub-datasets are {names_s}, the loader's {names_c} "
            "(names and order must match)"
        )
    for s, c in zip(saved["datasets"], current["datasets"], strict=True):
        if (s["num_docs"], s["files_sha256"]) != (c["num_docs"], c["files_sha256"]):
            raise ConfigError(
                f"sub-dataset {s['name']!r} changed since the checkpoint: it had {s['num_files']} files / "
                f"{s['num_docs']} documents (files sha256 {s['files_sha256'][:12]}), now {c['num_files']} / "
                f"{c['num_docs']} ({c['files_sha256'][:12]})"
            )
    if saved["document"] != current["document"]:
        raise ConfigError(
            f"document rules changed since the checkpoint: {saved['document']} -> {current['document']} "
            "(bos/eos/strip/min_length/chunk_size define the positions the state records)"
        )


def _lines(buffer: U64) -> list[U64]:
    """Buffered lines in (worker, slot) order, each as its segment rows."""
    if len(buffer) == 0:
        return []
    order = np.lexsort((np.arange(len(buffer)), buffer[:, 1], buffer[:, 0]))
    b = buffer[order]
    key = b[:, 0] * np.uint64(1 << 32) + b[:, 1]
    cuts = np.flatnonzero(np.diff(key)) + 1
    return list(np.split(b, cuts))


def worker_tables(state: Mapping[str, Any] | None, worker: int, n_workers: int) -> dict[str, Any] | None:
    """The core's tables for global worker ``worker`` of ``n_workers`` (None: fresh start).

    Same worker count as at save: the worker's own section (bit-exact). Otherwise (rescale):
    its logical shards' rows, zeroed mixer and random counters, and a contiguous share of the
    pooled shuffle buffers."""
    if state is None:
        return None
    validate_state(state)
    man, topo = state["manifest"], state["topology"]
    n_sub, n_shards = len(man["datasets"]), man["logical_shards"]
    rows = _table(state["rows"], 7, "rows")
    if len(rows) == 0:
        return None
    owned = worker_shards(n_shards, n_workers, worker)
    mine = rows[(rows[:, 1] >= owned.start) & (rows[:, 1] < owned.stop)]
    if len(mine) != n_sub * len(owned):
        have = sorted({int(x) for x in rows[:, 1]})
        span = f"{have[0]}..{have[-1]}" if have else "none"
        raise ConfigError(
            f"global worker {worker} of {n_workers} needs logical shards {owned.start}..{owned.stop - 1} but "
            f"the state covers shards {span} ({len(have)} of {n_shards}): this is one rank's part of a "
            "checkpoint saved with another topology; load every rank's state (the whole checkpoint "
            "directory)"
        )
    workers = _table(state["workers"], 3 + n_sub, "workers")
    buffer = _table(state["buffer"], 8, "buffer")
    own = workers[workers[:, 0] == worker]
    if topo["workers"] == n_workers and len(own) == 1:
        b = buffer[buffer[:, 0] == worker][:, 1:]
        b = b[np.argsort(b[:, 0], kind="stable")]
        return {
            "rows": np.ascontiguousarray(mine),
            "mixer": np.ascontiguousarray(own[0, 3:]),
            "rng_counter": int(own[0, 1]),
            "batches": int(own[0, 2]),
            "buffer": np.ascontiguousarray(b),
        }
    if len(np.unique(workers[:, 0])) != topo["workers"]:
        raise ConfigError(
            f"changing the number of workers ({topo['workers']} -> {n_workers}) pools every worker's shuffle "
            f"buffer, but the state holds {len(workers)} of {topo['workers']}: load every rank's state"
        )
    lines = _lines(buffer)
    p = len(lines)
    share = lines[worker * p // n_workers : (worker + 1) * p // n_workers]
    out = [
        np.concatenate([np.full((len(ln), 1), i, np.uint64), ln[:, 2:]], axis=1) for i, ln in enumerate(share)
    ]
    return {
        "rows": np.ascontiguousarray(mine),
        "mixer": np.zeros(n_sub, np.uint64),
        "rng_counter": 0,
        "batches": 0,
        "buffer": _table(np.concatenate(out) if out else None, 7, "buffer"),
    }
