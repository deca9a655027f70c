"""The on-disk cache of index arrays: one directory per (what, every parameter, data identity).

A cache entry is a directory ``<cache_dir>/<name>-<key>/`` of raw little-endian arrays plus a
``meta.json`` that records their dtypes and shapes and the parameters that made them. It is
built in a temporary sibling directory and renamed into place, so readers see a complete entry
or none; builders of the same entry serialize on a file lock, so concurrent ranks or jobs build
it once and the others reuse it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["CacheEntry", "cached", "default_cache_dir", "file_identity", "key_of"]

FORMAT = 1
#: Bytes hashed from each sampled block of a file, and the number of blocks (cheap enough for
#: thousands of files at startup).
_BLOCK, _BLOCKS = 1 << 12, 9


def default_cache_dir() -> Path:
    """``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``."""
    env = os.environ.get("TOKSHUF_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tokshuf"


def file_identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What identifies a data file's content for caching: its size, modification time and a
    SHA-256 of 9 blocks of 4 KiB spread over it (head and tail included).

    Unlike OLMo-core's path-and-size key, a file rewritten in place with the same size gets a new
    identity, while a moved or renamed file keeps its caches.
    """
    st = os.stat(path)
    h = hashlib.sha256(str(st.st_size).encode())
    with open(path, "rb") as f:
        if st.st_size <= _BLOCK * _BLOCKS:
            h.update(f.read())
        else:
            step = (st.st_size - _BLOCK) // (_BLOCKS - 1)
            for k in range(_BLOCKS):
                f.seek(k * step)
                h.update(f.read(_BLOCK))
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sample_sha256": h.hexdigest()}


def key_of(fields: Mapping[str, Any]) -> str:
    """A stable hash of JSON-serializable parameters."""
    blob = json.dumps({"format": FORMAT, **fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class CacheEntry:
    """A complete cache directory: its arrays as read-only memory maps and their paths."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta: dict[str, Any] = json.loads((path / "meta.json").read_text())

    @classmethod
    def load(cls, path: Path) -> CacheEntry | None:
        """The entry at ``path`` if it is complete: ``meta.json`` readable and every array file
        of the recorded size (a damaged entry, e.g. a partial copy of a cache_dir, is None)."""
        try:
            entry = cls(path)
            for name, spec in entry.meta["arrays"].items():
                size = int(np.prod(spec["shape"])) * np.dtype(spec["dtype"]).itemsize
                if entry.file(name).stat().st_size != size:
                    return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return entry

    def file(self, name: str) -> Path:
        return self.path / f"{name}.bin"

    def names(self) -> list[str]:
        return list(self.meta["arrays"])

    def array(self, name: str) -> npt.NDArray[Any]:
        spec = self.meta["arrays"][name]
        dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
        if int(np.prod(shape)) == 0:
            return np.empty(shape, dtype)
        return np.memmap(self.file(name), dtype=dtype, mode="r", shape=shape)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _write(tmp: Path, arrays: Mapping[str, npt.ArrayLike], fields: Mapping[str, Any]) -> None:
    spec = {}
    for name, value in arrays.items():
        arr = np.ascontiguousarray(value)
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        with open(tmp / f"{name}.bin", "wb") as f:
            f.write(arr.reshape(-1).view(np.uint8).data)
            f.flush()
            os.fsync(f.fileno())
        spec[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape)}
    meta = tmp / "meta.json"
    meta.write_text(
        json.dumps({"format": FORMAT, "arrays": spec, "fields": dict(fields)}, indent=1, sort_keys=True)
    )
    with open(meta, "rb") as f:
        os.fsync(f.fileno())


def cached(
    cache_dir: str | os.PathLike[str],
    name: str,
    fields: Mapping[str, Any],
    build: Callable[[], Mapping[str, npt.ArrayLike]],
) -> CacheEntry:
    """The entry for ``(name, fields)`` in ``cache_dir``, built by ``build()`` if absent.

    ``fields`` must hold every parameter that changes the arrays and the identity of the data.
    """
    root = Path(cache_dir)
    final = root / f"{name}-{key_of({'name': name, **fields})}"
    entry = CacheEntry.load(final)
    if entry is not None:
        return entry
    root.mkdir(parents=True, exist_ok=True)
    locks = root / ".locks"
    locks.mkdir(exist_ok=True)
    with _locked(locks / f"{final.name}.lock"):
        entry = CacheEntry.load(final)
        if entry is not None:  # built by whoever held the lock before us
            return entry
        if final.exists():  # damaged: move it out of the way (open maps stay valid) and rebuild
            damaged = root / f".{final.name}.damaged-{os.getpid()}-{secrets.token_hex(4)}"
            os.rename(final, damaged)
            shutil.rmtree(damaged, ignore_errors=True)
        tmp = root / f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        tmp.mkdir()
        try:
            _write(tmp, build(), fields)
            try:
                os.rename(tmp, final)
            except OSError:
                # A builder on another host (where the lock is not shared) won the race.
                if CacheEntry.load(final) is None:
                    raise
                shutil.rmtree(tmp)
            else:
                _fsync_dir(root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    entry = CacheEntry.load(final)
    if entry is None:
        raise OSError(f"cache entry {final} is incomplete right after it was written")
    return entry
