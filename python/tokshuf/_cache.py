"""The on-disk cache of index arrays, for the Nanosets and the OLMo-style instances alike: one
location rule, one key rule, one way to write and check an entry.

**Where.** :func:`cache_root`: the ``cache_dir`` argument, else ``$TOKSHUF_CACHE_DIR``, else
``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``. Without ``cache_dir`` it is the root the
Rust side copies remote data into (``remote/``, ``storage/cache.rs``), so a node's caches live in
one tree. Each kind of entry has its subdirectory: ``nanoset/``, ``instances/``.

**Key.** An entry is named ``<name>-<key>``, the key a hash of its fields: every parameter that
changes the arrays, and :func:`file_identity` of every data file they are computed from (its size,
modification time and a SHA-256 of a few blocks: a few reads whatever the file's size).

**Entry.** A directory of array files and ``meta.json`` (the fields, and each file's dtype, shape
and size). It is written in a temporary sibling and renamed into place, so a reader sees a whole
entry or none; builders of one entry take a lock, so concurrent processes build it once. An entry
that fails its checks (unreadable ``meta.json``, a file of the wrong size or header, e.g. a partial
copy or one cut short by a power loss) is rebuilt. The files are derived data and not fsynced
(that costs seconds on a busy disk): a crash leaves them short, which the checks catch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf import _core

__all__ = ["Entry", "cache_root", "cached", "file_identity", "key_of", "prefix_identity"]

#: Bump when the files of the same fields would change (a fixed bug, a new layout).
FORMAT = 2
#: Bytes hashed from each sampled block of a file, and the number of blocks: 36 KiB read per file,
#: cheap enough for thousands of files at startup; smaller files are hashed whole.
_BLOCK, _BLOCKS = 1 << 12, 9
#: A temporary left by a builder on another host (whose liveness this host cannot see) is dead
#: when it is this old.
_FOREIGN_TEMPORARY_S = 24 * 3600

Array = npt.NDArray[Any] | _core.IndexArray
PathLike = str | os.PathLike[str]


def cache_root(cache_dir: PathLike | None = None) -> Path:
    """The cache root, absolute (pickled datasets find their files from any directory)."""
    if cache_dir is not None:
        return Path(os.path.abspath(cache_dir))
    env = os.environ.get("TOKSHUF_CACHE_DIR")
    if env:
        return Path(os.path.abspath(env))
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        # As Rust's cache_root: $HOME even when empty, the temporary directory when unset.
        home = os.environ.get("HOME")
        base = os.path.join(home if home is not None else os.environ.get("TMPDIR", "/tmp"), ".cache")
    return Path(os.path.abspath(os.path.join(base, "tokshuf")))


def file_identity(path: PathLike) -> dict[str, Any]:
    """What identifies a data file's content: its size, modification time and a SHA-256 of 9
    blocks of 4 KiB spread over it (head and tail included).

    The path is left out, so moved data keeps its entries. The hash catches a rewrite that keeps
    the size and the time (``cp -p``, ``rsync -a``, a rewrite within the clock's tick), which a
    size-and-time key would take for the old file. An object in a store is identified by its size
    and ETag (one HEAD request; a store gives a new ETag to every rewrite), or by its size and
    modification time where the server gives no ETag.
    """
    if _core.is_remote(os.fspath(path)):
        ident = json.loads(_core.identity(os.fspath(path)))
        key = {"size": ident["bytes"], "etag": ident["etag"]}
        if ident["etag"] is None:  # a server without ETags: its modification time tells versions apart
            key["version"] = ident["version"]
        return key
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


def prefix_identity(prefix: PathLike) -> dict[str, Any]:
    """:func:`file_identity` of a ``.bin/.idx`` dataset's two files."""
    p = os.fspath(prefix)
    return {"idx": file_identity(p + ".idx"), "bin": file_identity(p + ".bin")}


def _canonical(fields: Mapping[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def key_of(fields: Mapping[str, Any]) -> str:
    """A stable hash of JSON-serializable fields."""
    return hashlib.sha256(_canonical({"format": FORMAT, **fields}).encode()).hexdigest()[:32]


def _npy_header(path: Path) -> tuple[list[int], str]:
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(f)
    return list(shape), dtype.str


class Entry:
    """A complete cache entry: its directory, ``meta.json`` and array files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta: dict[str, Any] = json.loads((path / "meta.json").read_text())

    @classmethod
    def load(cls, path: Path, fields: Mapping[str, Any]) -> Entry | None:
        """The entry at ``path`` if it is whole and made from ``fields``, else None."""
        try:
            entry = cls(path)
            if entry.meta["format"] != FORMAT or _canonical(entry.meta["fields"]) != _canonical(fields):
                return None
            for spec in entry.meta["arrays"].values():
                file = path / spec["file"]
                if file.stat().st_size != spec["bytes"]:
                    return None
                if file.suffix == ".npy" and _npy_header(file) != (spec["shape"], spec["dtype"]):
                    return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return entry

    def file(self, name: str) -> Path:
        return self.path / self.meta["arrays"][name]["file"]

    def array(self, name: str) -> npt.NDArray[Any]:
        """Array ``name`` as a read-only memory map."""
        spec = self.meta["arrays"][name]
        if spec["file"].endswith(".npy"):
            return np.load(self.file(name), mmap_mode="r")
        dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
        if int(np.prod(shape)) == 0:
            return np.empty(shape, dtype)
        return np.memmap(self.file(name), dtype=dtype, mode="r", shape=shape)


def _write(directory: Path, arrays: Mapping[str, Array], fields: Mapping[str, Any]) -> None:
    """Native index arrays as ``.npy`` (numpy's format, mapped by ``IndexArray.load``); numpy
    arrays as raw little-endian ``.bin`` (mapped by the Rust instance reader)."""
    specs = {}
    for name, value in arrays.items():
        if isinstance(value, _core.IndexArray):
            file = directory / f"{name}.npy"
            value.save(file, fsync=False)
            dtype, shape = np.dtype(value.dtype), list(value.shape)
        else:
            arr = np.ascontiguousarray(value)
            arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
            file = directory / f"{name}.bin"
            with open(file, "wb") as f:
                f.write(arr.reshape(-1).view(np.uint8).data)
            dtype, shape = arr.dtype, list(arr.shape)
        specs[name] = {"file": file.name, "bytes": file.stat().st_size, "dtype": dtype.str, "shape": shape}
    meta = {"format": FORMAT, "fields": dict(fields), "arrays": specs}
    (directory / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (and threads, each opening the file anew)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if sys.platform == "win32":  # pragma: no cover - the project targets POSIX; stays importable
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _scratch(final: Path, what: str) -> Path:
    """A hidden sibling of ``final`` that names its owner: ``.<entry>.<what>-<host>-<pid>-<rand>``."""
    return final.with_name(
        f".{final.name}.{what}-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _clear_dead_scratch(final: Path) -> None:
    """Remove the temporaries of ``final`` whose builders died (killed mid-build). Called under the
    entry's lock, so no live builder on this host owns one."""
    here, lead = socket.gethostname(), f".{final.name}."
    for scratch in final.parent.glob(lead + "*"):
        try:
            owner, pid, _ = scratch.name[len(lead) :].rsplit("-", 2)
            host = owner.split("-", 1)[1]
            if host == here:
                if _alive(int(pid)):  # a reused pid at worst: removed once that process ends
                    continue
            elif time.time() - scratch.stat().st_mtime < _FOREIGN_TEMPORARY_S:
                continue
        except (ValueError, IndexError, OSError):
            continue
        shutil.rmtree(scratch, ignore_errors=True)


def cached(
    cache_dir: PathLike | None,
    kind: str,
    name: str,
    fields: Mapping[str, Any],
    build: Callable[[], Mapping[str, Array]],
) -> Entry:
    """The entry for ``(name, fields)`` under ``cache_root(cache_dir)/kind``, built by ``build()``
    (once across processes) if it is missing or damaged.

    ``fields`` must hold every parameter that changes the arrays and the identity of the data.
    """
    root = cache_root(cache_dir) / kind
    final = root / f"{name}-{key_of({'name': name, **fields})}"
    entry = Entry.load(final, fields)
    if entry is not None:
        return entry
    locks = root / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with _locked(locks / f"{final.name}.lock"):
        entry = Entry.load(final, fields)
        if entry is not None:  # built by whoever held the lock before us
            return entry
        _clear_dead_scratch(final)
        if final.exists():  # damaged: out of the way (maps of its files stay valid), then rebuilt
            damaged = _scratch(final, "damaged")
            os.rename(final, damaged)
            shutil.rmtree(damaged, ignore_errors=True)
        tmp = _scratch(final, "tmp")
        tmp.mkdir()
        try:
            _write(tmp, build(), fields)
            try:
                os.rename(tmp, final)
            except OSError:
                # A builder on another host (where the lock is not shared) won the race.
                if Entry.load(final, fields) is None:
                    raise
                shutil.rmtree(tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    entry = Entry.load(final, fields)
    if entry is None:
        raise OSError(f"cache entry {final} is incomplete right after it was written")
    return entry
