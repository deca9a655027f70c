"""Loader checkpoints on disk: JSON plus ``.npy`` tables, a manifest, and a commit marker.

Layout of a checkpoint directory (format ``tokshuf.stream.checkpoint`` version 2; version 1,
which had no ``history`` table, is read too; the full description is
``docs/stream-checkpoint.md``)::

    part-00000.json           one per saving rank: state envelope, manifest, topology and,
    part-00000.rows.npy       for each table, {"file", "shape", "sha256"} (or the rows inline)
    part-00000.workers.npy
    part-00000.buffer.npy
    part-00000.history.npy
    manifest.json             written last but one by rank 0: stream manifest, topology, and
                              the sha256 of every part file
    COMMITTED                 written last: the sha256 of manifest.json

Every file is written to a temporary name and renamed. A directory without ``COMMITTED``, with a
part missing or altered, or whose parts do not cover every rank is rejected with a
:class:`~tokshuf.errors.FormatError` that says which. Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tokshuf.errors import FormatError
from tokshuf.stream.state import FORMAT, TABLES, VERSION, checked, merge_states, table_width

__all__ = ["commit", "load_state", "save_state"]

CHECKPOINT_FORMAT = "tokshuf.stream.checkpoint"
COMMITTED = "COMMITTED"
MANIFEST = "manifest.json"
# When a commit waiting for other ranks' parts first says so, then how often it repeats.
_WAIT_LOG_FIRST_S = 1.0
_WAIT_LOG_EVERY_S = 30.0
_log = logging.getLogger("tokshuf")


def _ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5`` (a world of thousands of ranks stays one line)."""
    out: list[str] = []
    for r in ranks:
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _read_json(path: Path, what: str, kind: type, keys: tuple[str, ...] = ()) -> Any:
    """``path``'s JSON, which must be a ``kind`` holding ``keys``: anything else (unreadable,
    truncated, another shape, a key missing) is a :class:`FormatError` naming the file, never a
    raw JSON or key error from deep inside a load."""
    try:
        obj = json.loads(path.read_bytes())
    except FileNotFoundError as e:
        raise FormatError(f"{path}: the {what} is missing") from e
    except OSError as e:
        raise FormatError(f"{path}: cannot read the {what} ({e.strerror or e})") from e
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise FormatError(f"{path}: the {what} is not valid JSON (truncated or damaged: {e})") from e
    if not isinstance(obj, kind):
        raise FormatError(f"{path}: the {what} must be a JSON {kind.__name__}, got {type(obj).__name__}")
    if isinstance(obj, dict):
        absent = [k for k in keys if k not in obj]
        if absent:
            raise FormatError(f"{path}: the {what} lacks {', '.join(map(repr, absent))}")
    return obj


def _write(path: Path, data: bytes) -> None:
    _write_all([(path, data)])


def _write_all(files: list[tuple[Path, bytes]]) -> None:
    """Write each file under a temporary name, make them all durable, then rename them in order.
    Written first and synced after, the first fsync flushes them together (one journal commit
    instead of one per file: a part's five files cost about one disk flush)."""
    tmps = []
    try:
        for path, data in files:
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            f = open(tmp, "wb")  # noqa: SIM115 (closed below, after the sync)
            tmps.append((f, tmp, path))
            f.write(data)
            f.flush()
        for f, _, _ in tmps:
            os.fsync(f.fileno())
    finally:
        for f, _, _ in tmps:
            f.close()
    for _, tmp, path in tmps:
        os.replace(tmp, path)


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()


def save_state(
    directory: str | os.PathLike[str], state: Mapping[str, Any], *, commit_timeout: float | None = 600.0
) -> str:
    """Write ``state`` (one rank's, or a merged one) into ``directory``.

    The process holding rank 0 then waits until the parts of every rank are present (polling,
    up to ``commit_timeout`` seconds; ``None``: do not commit, call :func:`commit` later) and
    commits the checkpoint. Returns the directory."""
    state = checked(state)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ranks = list(state["topology"].get("ranks", [0]))
    name = f"part-{min(ranks):05d}"
    arrays = {}
    files = []
    for key in TABLES:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(state[key], dtype="<u8"), allow_pickle=False)
        data = buf.getvalue()
        fname = f"{name}.{key}.npy"
        files.append((d / fname, data))
        arrays[key] = {"file": fname, "shape": list(np.shape(state[key])), "sha256": _sha(data)}
    part = {
        "format": FORMAT,
        "version": VERSION,
        "manifest": state["manifest"],
        "topology": {**state["topology"], "ranks": ranks},
        "arrays": arrays,
    }
    # The part's JSON names its tables' hashes: it is renamed into place after them.
    files.append((d / f"{name}.json", _json(part)))
    _write_all(files)
    if 0 in ranks and commit_timeout is not None:
        commit(d, state["topology"]["world_size"], timeout=commit_timeout)
    return os.fspath(d)


def _part_ranks(p: Path) -> list[int]:
    topology = _read_json(p, "checkpoint part", dict, ("topology",))["topology"]
    ranks = topology.get("ranks") if isinstance(topology, dict) else None
    if not isinstance(ranks, list) or not all(isinstance(r, int) for r in ranks):
        raise FormatError(f"{p}: the part's topology must list its ranks (a list of integers), got {ranks!r}")
    return ranks


def _parts(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("part-*.json") if not p.name.startswith("."))


def commit(directory: str | os.PathLike[str], world_size: int, timeout: float = 600.0) -> None:
    """Wait until the parts cover ranks ``0..world_size-1``, then write the manifest and the
    commit marker (what a loader looks for)."""
    d = Path(directory)
    start = time.monotonic()
    deadline = start + timeout
    next_log = start + _WAIT_LOG_FIRST_S
    while True:
        covered: set[int] = set()
        parts = _parts(d)
        for p in parts:
            covered.update(_part_ranks(p))
        if covered >= set(range(world_size)):
            break
        now = time.monotonic()
        missing = sorted(set(range(world_size)) - covered)
        if now > deadline:
            raise FormatError(
                f"{d}: ranks {missing} did not write their part within {timeout} s; not committed"
            )
        if now >= next_log:
            # A save by rank 0 blocks until every rank has saved: say so, or a rank that never
            # calls save() (or crashed) looks like a hung training loop.
            # INFO at first (a second's wait is normal), WARNING once it lasts.
            _log.log(
                logging.INFO if now - start < _WAIT_LOG_EVERY_S else logging.WARNING,
                "checkpoint %s: waiting for ranks %s to write their parts (%.0f s so far, up to %s s)",
                d,
                _ranges(missing),
                now - start,
                timeout,
            )
            next_log = now + _WAIT_LOG_EVERY_S
        time.sleep(0.05)
    first = _read_json(parts[0], "checkpoint part", dict, ("manifest", "topology"))
    manifest = {
        "format": CHECKPOINT_FORMAT,
        "version": VERSION,
        "manifest": first["manifest"],
        "topology": {k: v for k, v in first["topology"].items() if k != "ranks"},
        "parts": [{"file": p.name, "sha256": _sha(p.read_bytes())} for p in parts],
        "created_unix": time.time(),
    }
    data = _json(manifest)
    _write(d / MANIFEST, data)
    _write(d / COMMITTED, _json({"manifest_sha256": _sha(data)}))


def _table(d: Path, spec: Any, key: str, part: str) -> np.ndarray[Any, Any]:
    if isinstance(spec, list):  # written inline (hand-made or tiny states)
        return (
            np.asarray(spec, dtype=np.uint64).reshape(len(spec), -1) if spec else np.zeros((0, 0), np.uint64)
        )
    path = d / spec["file"]
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise FormatError(f"{d}: {part} refers to {spec['file']}, which is missing") from e
    if "sha256" in spec and _sha(data) != spec["sha256"]:
        raise FormatError(
            f"{path}: contents do not match the sha256 recorded in {part} (corrupt or replaced)"
        )
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:
        raise FormatError(f"{path}: not a readable .npy table ({e})") from e
    if list(arr.shape) != list(spec.get("shape", arr.shape)):
        raise FormatError(f"{path}: shape {list(arr.shape)} differs from the recorded {spec['shape']}")
    return arr.astype(np.uint64, copy=False)


def _read_part(d: Path, path: Path) -> dict[str, Any]:
    """One part file's state, its tables read and hash-checked (not validated: the caller
    checks the whole once)."""
    part = _read_json(path, "checkpoint part", dict, ("format", "version", "manifest", "topology", "arrays"))
    try:
        n_sub = len(part["manifest"]["datasets"])
        state = {k: part[k] for k in ("format", "version", "manifest", "topology")}
        v1 = part["version"] == 1  # no history table, and narrower workers rows
        for key in [k for k in TABLES if not (v1 and k == "history")]:
            arr = _table(d, part["arrays"][key], key, path.name)
            width = 3 + n_sub if v1 and key == "workers" else table_width(key, n_sub)
            state[key] = arr.reshape(0, width) if arr.size == 0 else arr
            state[key].flags.writeable = False
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{path}: malformed checkpoint part ({type(e).__name__}: {e})") from e
    return state


def load_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a committed checkpoint directory (every rank's part, merged), or one part file
    (``part-*.json``: that rank's state only, enough to resume on the same topology)."""
    p = Path(path)
    if p.is_file():
        try:
            return checked(_read_part(p.parent, p))
        except FormatError as e:
            raise FormatError(f"{p}: {e}") from e
    if not p.is_dir():
        raise FileNotFoundError(2, "no such checkpoint directory", os.fspath(p))
    marker = p / COMMITTED
    if not marker.exists():
        parts = [q.name for q in _parts(p)]
        raise FormatError(
            f"{p}: no {COMMITTED} marker, so the save did not finish (parts present: {parts or 'none'}); "
            "resume from an earlier checkpoint"
        )
    recorded = _read_json(marker, f"{COMMITTED} marker", dict, ("manifest_sha256",))["manifest_sha256"]
    data = (p / MANIFEST).read_bytes() if (p / MANIFEST).exists() else b""
    if _sha(data) != recorded:
        raise FormatError(f"{p}: {MANIFEST} is missing or does not match {COMMITTED}")
    manifest = _read_json(p / MANIFEST, "checkpoint manifest", dict, ("parts", "topology"))
    if manifest.get("format") != CHECKPOINT_FORMAT or manifest.get("version") not in (1, VERSION):
        raise FormatError(
            f"{p}: unsupported checkpoint {manifest.get('format')!r} v{manifest.get('version')!r}"
        )
    entries = manifest["parts"]
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("file"), str) and "sha256" in e for e in entries
    ):
        raise FormatError(f"{p / MANIFEST}: 'parts' must be a list of {{file, sha256}}")
    world = manifest["topology"].get("world_size") if isinstance(manifest["topology"], dict) else None
    if not isinstance(world, int):
        raise FormatError(f"{p / MANIFEST}: the topology lacks an integer world_size")
    states = []
    missing = []
    for entry in entries:
        q = p / entry["file"]
        if not q.exists():
            missing.append(entry["file"])
            continue
        if _sha(q.read_bytes()) != entry["sha256"]:
            raise FormatError(f"{q}: contents do not match the sha256 in {MANIFEST} (corrupt or replaced)")
        states.append(_read_part(p, q))
    if missing:
        raise FormatError(
            f"{p}: parts {missing} listed in {MANIFEST} are missing; the checkpoint is incomplete"
        )
    try:
        # Checked once, as a whole: every worker's rows, buffers no larger than what was read.
        state = merge_states(states)
    except FormatError as e:
        raise FormatError(f"{p}: {e}") from e
    if set(state["topology"]["ranks"]) != set(range(world)):
        raise FormatError(f"{p}: the parts cover ranks {state['topology']['ranks']} of a world of {world}")
    return state
