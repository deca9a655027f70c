"""The on-disk index cache.

One entry = a few ``.npy`` arrays + a ``description.json`` naming everything that determined them
(every parameter that changes the arrays, and the identity of the data: size and mtime of each
``.idx``/``.bin``). The file names start with a hash of that description, so a changed parameter,
option or re-tokenized dataset is a different entry, never a stale one.

Writers take an exclusive ``flock`` on the entry's lock file, re-check, build, write each array to a
temporary name and rename it, and write the description last: an entry whose description exists
is complete. Readers that find it map the arrays (O(1)) without locking; the description is
compared with the expected one, and a missing, truncated or mismatched entry is rebuilt. The
arrays are derived data, so they are not fsynced (that costs seconds on a busy disk); a file cut
short by a power loss fails the size check against its header and is rebuilt.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tokshuf import _core
from tokshuf.errors import FormatError

__all__ = ["IndexCache", "data_identity"]

#: Bump when the arrays of the same description would change (a fixed bug, a new layout).
CACHE_VERSION = 1

Arrays = dict[str, _core.IndexArray]


def data_identity(prefix: str) -> dict[str, Any]:
    """What identifies a dataset's contents cheaply: its absolute path, and the size and
    modification time of its ``.idx`` and ``.bin``; in a store, its URL and the size and ETag
    of both objects."""
    if _core.is_remote(prefix):
        return {"prefix": prefix} | {ext: json.loads(_core.identity(f"{prefix}.{ext}")) for ext in ("idx", "bin")}
    ident: dict[str, Any] = {"prefix": os.path.abspath(prefix)}
    for ext in ("idx", "bin"):
        st = os.stat(f"{prefix}.{ext}")
        ident[f"{ext}_size"] = st.st_size
        ident[f"{ext}_mtime_ns"] = st.st_mtime_ns
    return ident


def _canonical(description: dict[str, Any]) -> str:
    return json.dumps(description, sort_keys=True, indent=2, ensure_ascii=True)


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


class IndexCache:
    """Index arrays cached under ``directory`` (created on first use)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        # Absolute, so datasets pickled by path still find their files from another directory.
        self.directory = Path(os.path.abspath(directory))

    def _base(self, kind: str, split: str, description: dict[str, Any]) -> str:
        text = _canonical({"cache_version": CACHE_VERSION, **description})
        digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        return os.fspath(self.directory / f"{digest}-{kind}-{split}")

    def _load(self, base: str, text: str, names: tuple[str, ...]) -> Arrays | None:
        try:
            if Path(f"{base}-description.json").read_text() != text:
                return None
            return {n: _core.IndexArray.load(f"{base}-{n}.npy") for n in names}
        except (OSError, FormatError):
            return None

    def get_or_build(
        self,
        kind: str,
        split: str,
        description: dict[str, Any],
        names: tuple[str, ...],
        build: Callable[[], Arrays],
    ) -> tuple[Arrays, dict[str, str]]:
        """The cached arrays for ``description``, building (once across processes) on a miss.

        Returns the arrays and their file paths.
        """
        base = self._base(kind, split, description)
        text = _canonical({"cache_version": CACHE_VERSION, **description})
        paths = {n: f"{base}-{n}.npy" for n in names}
        hit = self._load(base, text, names)
        if hit is not None:
            return hit, paths
        self.directory.mkdir(parents=True, exist_ok=True)
        with _locked(Path(f"{base}.lock")):
            hit = self._load(base, text, names)
            if hit is not None:
                return hit, paths
            # Holding the lock, no one else writes this entry: leftovers of a killed builder go.
            for stale in glob.glob(glob.escape(base) + "-*.tmp-*"):
                with contextlib.suppress(OSError):
                    os.remove(stale)
            with contextlib.suppress(FileNotFoundError):
                os.remove(f"{base}-description.json")
            arrays = build()
            for n in names:
                arrays[n].save(paths[n], fsync=False)
            tmp = f"{base}-description.json.tmp-{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, f"{base}-description.json")
            return arrays, paths
