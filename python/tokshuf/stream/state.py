"""The loader state: topology-independent tables plus per-worker sections.

A state is a plain dict (no pickled objects)::

    {"format": "tokshuf.stream.state", "version": 2,
     "manifest": {...},     # what the state belongs to: seed, shards, datasets, document rules,
                            # and the mix schedule as it ran ("mix")
     "topology": {"world_size", "num_workers", "workers", "ranks"},
     "rows":    uint64 [R, 7]      sub, shard, epoch, pos, offset, tokens, docs
     "workers": uint64 [K, 5 + D]  worker, rng_counter, batches, step, phase, mixer tokens per sub-dataset
     "buffer":  uint64 [M, 8]      worker, slot, sub, shard, epoch, doc, start, len
     "history": uint64 [H, 2 + D]  worker, phase, tokens drawn per sub-dataset in a phase it left}

``rows`` has one row per (sub-dataset, logical shard) and is all a rescale needs, with the
shuffle buffers pooled from ``buffer`` (lines as references into the data, re-read on load).
``workers`` and the per-worker buffer order are used only when the number of global workers is
the same, which makes such a resume bit-exact. ``history`` and the ``workers`` mixer counters
say how many tokens of each sub-dataset were drawn in each phase of the mix. Version 1 states
(no schedule, no step) are read and upgraded. See ``docs/stream-checkpoint.md``.

A state is validated once: :func:`checked` returns it with its tables as read-only arrays and
remembers them, so the loader's later steps (merge, load, worker tables) do not check again.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf.errors import ConfigError, FormatError
from tokshuf.stream.mix import Phase, integer_weights, mix_json, mix_of_json, phase_at

__all__ = [
    "FORMAT",
    "VERSION",
    "check_compatible",
    "checked",
    "make_state",
    "merge_states",
    "state_step",
    "worker_shards",
    "worker_tables",
]

FORMAT = "tokshuf.stream.state"
VERSION = 2
ROW_COLUMNS = ("sub", "shard", "epoch", "pos", "offset", "tokens", "docs")
#: Then one mixer counter per sub-dataset.
WORKER_COLUMNS = ("worker", "rng_counter", "batches", "step", "phase")
BUFFER_COLUMNS = ("worker", "slot", "sub", "shard", "epoch", "doc", "start", "len")
#: Then one counter per sub-dataset.
HISTORY_COLUMNS = ("worker", "phase")
TABLES = ("rows", "workers", "buffer", "history")
U64 = npt.NDArray[np.uint64]


def table_width(key: str, n_sub: int) -> int:
    return {"rows": 7, "workers": 5 + n_sub, "buffer": 8, "history": 2 + n_sub}[key]


def worker_shards(n_shards: int, n_workers: int, worker: int) -> range:
    """The logical shards of global worker ``worker`` (the core's exact integer blocks)."""
    return range(worker * n_shards // n_workers, (worker + 1) * n_shards // n_workers)


def shard_docs(n_docs: int, n_shards: int, shard: int) -> range:
    """The documents of logical shard ``shard``."""
    return range(shard * n_docs // n_shards, (shard + 1) * n_docs // n_shards)


def _table(a: Any, cols: int, what: str) -> U64:
    """``a`` as a C-contiguous ``[n, cols]`` uint64 array: itself when it already is one (the
    identity is what marks it as checked)."""
    arr = np.zeros((0, cols), np.uint64) if a is None else np.asarray(a, dtype=np.uint64)
    if arr.size == 0 and arr.shape != (0, cols):
        arr = arr.reshape(0, cols)
    if arr.ndim != 2 or arr.shape[1] != cols:
        raise FormatError(f"state table {what!r} must have shape [n, {cols}], got {list(arr.shape)}")
    return np.ascontiguousarray(arr)


def _frozen(a: U64) -> U64:
    a.flags.writeable = False
    return a


def _words(x: Any) -> U64:
    if isinstance(x, bytes | bytearray | memoryview):
        return np.frombuffer(x, dtype="<u8").astype(np.uint64)
    return np.asarray(x, dtype=np.uint64).reshape(-1)


def make_state(
    manifest: Mapping[str, Any], topology: Mapping[str, Any], sections: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any]:
    """A state from per-worker tables as the core returns them (``rows``, ``buffer``, ``mixer``,
    ``history`` as little-endian u64 bytes or arrays, ``rng_counter``, ``batches``, ``step``,
    ``phase``). ``manifest`` includes the schedule the workers ran (``mix``)."""
    n_sub = len(manifest["datasets"])
    rows, workers, buffer, history = [], [], [], []
    for g in sorted(sections):
        t = sections[g]
        rows.append(_words(t["rows"]).reshape(-1, 7))
        head = [g, t["rng_counter"], t["batches"], t.get("step", 0), t.get("phase", 0)]
        workers.append(np.concatenate([np.array(head, np.uint64), _words(t["mixer"])]))
        b = _words(t["buffer"]).reshape(-1, 7)
        buffer.append(np.concatenate([np.full((len(b), 1), g, np.uint64), b], axis=1))
        h = _words(t.get("history", b"")).reshape(-1, 1 + n_sub)
        history.append(np.concatenate([np.full((len(h), 1), g, np.uint64), h], axis=1))
    return {
        "format": FORMAT,
        "version": VERSION,
        "manifest": dict(manifest),
        "topology": dict(topology),
        "rows": _frozen(_table(np.concatenate(rows) if rows else None, 7, "rows")),
        "workers": _frozen(_table(np.stack(workers) if workers else None, 5 + n_sub, "workers")),
        "buffer": _frozen(_table(np.concatenate(buffer) if buffer else None, 8, "buffer")),
        "history": _frozen(_table(np.concatenate(history) if history else None, 2 + n_sub, "history")),
    }


# -- validation ------------------------------------------------------------------------------
class _IdentityCache:
    """Values kept per live object, by identity (numpy arrays are not hashable); an entry goes
    when its object does."""

    def __init__(self) -> None:
        self._d: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def get(self, obj: Any) -> Any:
        hit = self._d.get(id(obj))
        return hit[1] if hit is not None and hit[0]() is obj else None

    def put(self, obj: Any, value: Any) -> None:
        key = id(obj)

        def gone(_: weakref.ref[Any]) -> None:
            self._d.pop(key, None)

        self._d[key] = (weakref.ref(obj, gone), value)


# Tables already checked, by identity: the rows array -> the other tables (weakly) and the counts
# they were checked against. Only read-only arrays are remembered (nobody changed them since).
_CHECKED = _IdentityCache()


def _envelope(state: Any) -> tuple[Mapping[str, Any], Mapping[str, Any], int, int, int]:
    if not isinstance(state, Mapping) or state.get("format") != FORMAT:
        got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        raise FormatError(f"not a tokshuf stream state (format {got!r}, expected {FORMAT!r})")
    if state.get("version") not in (1, VERSION):
        raise FormatError(
            f"stream state version {state.get('version')!r} is not supported (this tokshuf reads 1 and "
            f"{VERSION}); a newer tokshuf wrote it"
        )
    keys = ("manifest", "topology", "rows", "workers", "buffer") + (
        ("history",) if state["version"] > 1 else ()
    )
    for key in keys:
        if key not in state:
            raise FormatError(f"stream state lacks {key!r}")
    try:
        man, topo = state["manifest"], state["topology"]
        n_sub, n_shards, n_workers = len(man["datasets"]), int(man["logical_shards"]), int(topo["workers"])
        if n_shards < 1 or n_workers < 1:
            raise ValueError(f"logical_shards {n_shards} and workers {n_workers} must be positive")
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"stream state: malformed manifest or topology ({type(e).__name__}: {e})") from e
    return man, topo, n_sub, n_shards, n_workers


def _upgrade(state: Mapping[str, Any], n_sub: int) -> dict[str, Any]:
    """A version 1 state as version 2: one phase with the manifest's weights, and the step of
    each worker's next batch as the batches its rank consumed (v1 did not record steps; after a
    change of worker count its batch counters started again from 0)."""
    man = dict(state["manifest"])
    try:
        base = integer_weights([float(d["weight"]) for d in man["datasets"]])
    except (KeyError, TypeError, ValueError, ConfigError) as e:
        raise FormatError(f"stream state v1: the manifest's weights are unusable ({e})") from e
    man["mix"] = mix_json([(0, tuple(base))])
    old = _table(state["workers"], 3 + n_sub, "workers")
    nw = max(int(state["topology"].get("num_workers", 1) or 1), 1)
    g, batches = old[:, 0].astype(np.int64), old[:, 2].astype(np.int64)
    rank, wid = g // nw, g % nw
    per_rank = np.zeros(int(rank.max()) + 1 if len(rank) else 0, np.int64)
    np.add.at(per_rank, rank, batches)
    consumed = per_rank[rank] if len(rank) else rank
    step = consumed + (wid - consumed % nw) % nw
    head = np.stack(
        [old[:, 0], old[:, 1], old[:, 2], step.astype(np.uint64), np.zeros(len(old), np.uint64)], axis=1
    )
    out = {k: v for k, v in state.items() if k not in ("workers",)}
    out.update(
        version=VERSION,
        manifest=man,
        workers=np.concatenate([head, old[:, 3:]], axis=1),
        history=np.zeros((0, 2 + n_sub), np.uint64),
    )
    return out


def checked(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` validated (once) and as version 2, its tables as uint64 arrays; raises
    :class:`FormatError` naming the fault. A state passed again (the returned dict, or any
    state whose tables are the same read-only arrays) is not checked again."""
    man, _, n_sub, n_shards, n_workers = _envelope(state)
    if state["version"] == 1:
        state = _upgrade(state, n_sub)
        man = state["manifest"]
    tables = {k: _table(state[k], table_width(k, n_sub), k) for k in TABLES}
    mix = man.get("mix")
    counts = (n_sub, n_shards, n_workers, len(mix) if isinstance(mix, list) else -1)
    rows = tables["rows"]
    seen = _CHECKED.get(rows) if not rows.flags.writeable else None
    if (
        seen is not None
        and seen[0] == counts
        and all(r() is tables[k] for r, k in zip(seen[1:], TABLES[1:], strict=True))
    ):
        return {**state, **tables}
    _check_tables(tables, man, n_sub, n_shards, n_workers)
    if not any(t.flags.writeable for t in tables.values()):
        _CHECKED.put(rows, (counts, *(weakref.ref(tables[k]) for k in TABLES[1:])))
    return {**state, **tables}


def validate_state(state: Mapping[str, Any]) -> None:
    """Check the envelope, the table shapes and their agreement with the manifest."""
    checked(state)


def _check_tables(t: Mapping[str, U64], man: Any, n_sub: int, n_shards: int, n_workers: int) -> None:
    """The tables against the manifest: each global worker saved has exactly one row per
    (sub-dataset, logical shard) it owns, and nothing else; buffered lines name real
    sub-datasets and shards; phases exist in the schedule. A state that breaks these was not
    written by a loader (edited, or pieced together), and resuming from it would silently give
    other batches. Linear in the tables and the shard count (no sorting)."""
    rows, workers, buffer, history = t["rows"], t["workers"], t["buffer"], t["history"]
    mix = mix_of_json(man.get("mix"), n_sub)
    ids = workers[:, 0]
    if len(ids) == 0:
        raise FormatError("the stream state holds no worker: it is empty, not a state to resume from")
    if int(ids.max()) >= n_workers or int(np.bincount(ids.astype(np.intp), minlength=1).max()) > 1:
        raise FormatError(
            f"the stream state's workers table lists workers {sorted(int(x) for x in ids)}; the topology "
            f"has {n_workers} global workers (0..{n_workers - 1}), each at most once"
        )
    for table, phases in (("workers", workers[:, 4]), ("history", history[:, 1])):
        if len(phases) and int(phases.max()) >= len(mix):
            raise FormatError(
                f"the stream state's {table} table refers to mix phase {int(phases.max())}, but the "
                f"manifest's schedule has {len(mix)} phases"
            )
    saved = np.zeros(n_workers, bool)
    saved[ids.astype(np.intp)] = True
    owners = history[:, 0]
    if len(owners) and (int(owners.max()) >= n_workers or not saved[owners.astype(np.intp)].all()):
        raise FormatError("the stream state's history table names a worker its workers table does not list")
    for col, limit, what in ((0, n_sub, "sub-dataset"), (1, n_shards, "logical shard")):
        bad_rows = np.flatnonzero(rows[:, col] >= limit)
        if len(bad_rows):
            unit = f"{n_sub} sub-datasets" if col == 0 else f"{n_shards} logical shards"
            raise FormatError(
                f"the stream state has a row for {what} {int(rows[bad_rows[0], col])}, but the manifest "
                f"has {unit}"
            )
    keys = rows[:, 0].astype(np.intp) * n_shards + rows[:, 1].astype(np.intp)
    per_key = np.bincount(keys, minlength=n_sub * n_shards).reshape(n_sub, n_shards)
    twice = np.flatnonzero(per_key.ravel() > 1)
    if len(twice):
        k = int(twice[0])
        raise FormatError(
            f"the stream state lists sub-dataset {k // n_shards}, logical shard {k % n_shards} twice"
        )
    # The owner of shard l is the largest g with floor(g·L/W) <= l.
    shard = np.arange(n_shards, dtype=np.int64)
    owner = ((shard + 1) * n_workers + n_shards - 1) // n_shards - 1
    owned = saved[owner]
    missing = np.flatnonzero(((per_key == 0) & owned[None, :]).ravel())
    if len(missing):
        k = int(missing[0])
        raise FormatError(
            f"the stream state has no row for sub-dataset {k // n_shards}, logical shard {k % n_shards} "
            f"({len(missing)} of the {n_sub * int(owned.sum())} rows its {len(ids)} worker(s) own are "
            "missing)"
        )
    extra = np.flatnonzero(((per_key > 0) & ~owned[None, :]).ravel())
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


def state_step(state: Mapping[str, Any]) -> int:
    """The training step a (checked) state was saved at: the earliest next step of its workers
    (a rank's workers take turns, so theirs are that step and the ones after it)."""
    steps = state["workers"][:, 3]
    return int(steps.min()) if len(steps) else 0


def state_mix(state: Mapping[str, Any]) -> list[Phase]:
    """The schedule a (checked) state recorded."""
    return mix_of_json(state["manifest"]["mix"], len(state["manifest"]["datasets"]))


def merge_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One state from the states of several ranks (all saved at the same step)."""
    if not states:
        raise FormatError("no states to merge")
    parts = []
    for s in states:
        _, _, n_sub, _, _ = _envelope(s)
        parts.append(_upgrade(s, n_sub) if s["version"] == 1 else s)
    first = parts[0]
    for s in parts[1:]:
        if s["manifest"] != first["manifest"]:
            raise FormatError("the states to merge belong to different streams (their manifests differ)")
        t, f = s["topology"], first["topology"]
        if (t["world_size"], t["num_workers"]) != (f["world_size"], f["num_workers"]):
            raise FormatError(f"the states to merge were saved by different topologies: {t} vs {f}")
    n_sub = len(first["manifest"]["datasets"])
    ranks = sorted({r for s in parts for r in s["topology"].get("ranks", [])})
    merged = {
        "format": FORMAT,
        "version": VERSION,
        "manifest": first["manifest"],
        "topology": {**first["topology"], "ranks": ranks},
    }
    for key in TABLES:
        w = table_width(key, n_sub)
        merged[key] = _frozen(np.concatenate([_table(s[key], w, key) for s in parts]))
    try:
        return checked(merged)
    except FormatError as e:
        if "twice" in str(e) or "at most once" in str(e):
            raise FormatError(f"the states to merge overlap: {e}") from e
        raise


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


def _pooled_history(state: Mapping[str, Any], n_sub: int) -> U64:
    """Every worker's tokens per phase (phases left, and the live counters), summed per phase:
    the history a rescale carries over (to new worker 0, so that a merge counts it once)."""
    workers, history = state["workers"], state["history"]
    phases = np.concatenate([history[:, 1], workers[:, 4]]).astype(np.intp)
    counts = np.concatenate([history[:, 2:], workers[:, 5:]])
    if not len(phases):
        return np.zeros((0, 1 + n_sub), np.uint64)
    n = int(phases.max()) + 1
    total = np.zeros((n, n_sub), np.uint64)
    np.add.at(total, phases, counts)
    keep = np.flatnonzero(total.any(axis=1))
    return np.ascontiguousarray(np.concatenate([keep[:, None].astype(np.uint64), total[keep]], axis=1))


def worker_tables(
    state: Mapping[str, Any] | None,
    worker: int,
    n_workers: int,
    *,
    step: int | None = None,
    step_stride: int = 1,
    mix: Sequence[Phase] | None = None,
) -> dict[str, Any] | None:
    """The core's tables for global worker ``worker`` of ``n_workers`` (None: fresh start).

    Same worker count as at save: the worker's own section (bit-exact). Otherwise (rescale):
    its logical shards' rows, zeroed mixer and random counters, and a contiguous share of the
    pooled shuffle buffers; new worker 0 carries the tokens drawn per phase so far.

    ``step`` is the training step of the worker's next batch (default: its own recorded one,
    or after a rescale the state's step), ``step_stride`` the steps between its batches, ``mix``
    the schedule it runs (default: the recorded one; its phases before the state's step must be
    the recorded ones)."""
    if state is None:
        return None
    state = checked(state)
    man, topo = state["manifest"], state["topology"]
    n_sub, n_shards = len(man["datasets"]), man["logical_shards"]
    if mix is None:
        mix = state_mix(state)
    rows = state["rows"]
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
    workers, buffer, history = state["workers"], state["buffer"], state["history"]
    own = workers[workers[:, 0] == worker]
    if topo["workers"] == n_workers and len(own) == 1:
        b = buffer[buffer[:, 0] == worker][:, 1:]
        b = b[np.argsort(b[:, 0], kind="stable")]
        h = history[history[:, 0] == worker][:, 1:]
        return {
            "rows": np.ascontiguousarray(mine),
            "mixer": np.ascontiguousarray(own[0, 5:]),
            "buffer": np.ascontiguousarray(b),
            "history": np.ascontiguousarray(h),
            "rng_counter": int(own[0, 1]),
            "batches": int(own[0, 2]),
            "step": int(own[0, 3]) if step is None else int(step),
            "step_stride": int(step_stride),
            "phase": int(own[0, 4]),
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
    step = state_step(state) if step is None else int(step)
    return {
        "rows": np.ascontiguousarray(mine),
        "mixer": np.zeros(n_sub, np.uint64),
        "buffer": _table(np.concatenate(out) if out else None, 7, "buffer"),
        "history": _pooled_history(state, n_sub) if worker == 0 else np.zeros((0, 1 + n_sub), np.uint64),
        "rng_counter": 0,
        "batches": 0,
        "step": step,
        "step_stride": int(step_stride),
        "phase": phase_at(mix, step),
    }
