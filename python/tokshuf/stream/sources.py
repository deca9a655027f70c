"""Sub-datasets: a name, a weight, and the files of one format that hold its documents."""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokshuf import _storage
from tokshuf.errors import ConfigError
from tokshuf.stream.handlers import HandlerReader, IndexedHandler, NpyHandler, handler_for

__all__ = ["SubDataset", "discover_files"]

# Auto-detection order: the first handler that accepts a file's name claims it.
_AUTO_KINDS = ("bin", "arrow", "parquet", "tar", "npy")


def _expand(spec: str) -> list[str]:
    if _storage.is_remote(spec):  # an object or a .bin/.idx prefix: its local copy
        local = _storage.localize(spec)
        if local.endswith(".bin"):  # a dataset is named by its .idx here
            local = local[: -len(".bin")] + ".idx"
        if os.path.exists(local + ".idx"):
            return [local + ".idx"]
        if os.path.exists(local):
            return [local]
        raise FileNotFoundError(2, "no such object or .bin/.idx prefix (name objects, not directories)", spec)
    if os.path.isdir(spec):
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(spec):
            dirnames.sort()
            out.extend(os.path.join(dirpath, f) for f in filenames)
        return sorted(out, key=lambda p: os.path.relpath(p, spec))
    if os.path.exists(spec):
        return [spec]
    if os.path.exists(spec + ".idx"):
        return [spec + ".idx"]
    hits = sorted(glob.glob(spec, recursive=True))
    if not hits:
        raise FileNotFoundError(2, "no such file, directory or glob match", spec)
    return hits


def discover_files(paths: str | Sequence[str], handler: Any) -> list[str]:
    """The data files under ``paths`` (files, directories walked recursively in sorted order,
    globs, or ``.bin/.idx`` prefixes) that ``handler`` accepts."""
    specs = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files: list[str] = []
    for spec in specs:
        files.extend(f for f in _expand(os.fspath(spec)) if handler.is_legal(f))
    return files


def _auto_handler(paths: str | Sequence[str], options: dict[str, Any]) -> Any:
    found: dict[str, Any] = {}
    for kind in _AUTO_KINDS:
        h = handler_for(kind, **options)
        if discover_files(paths, h):
            found[kind] = h
    if len(found) > 1:
        raise ConfigError(
            f"{paths}: files of several formats ({', '.join(found)}); a sub-dataset holds one format "
            "(set file_type, or split the files into sub-datasets)"
        )
    if not found:
        raise ConfigError(f"{paths}: no data files (.idx/.bin, .arrow, .parquet, .tar or .npy)")
    return next(iter(found.values()))


def _count(handler: Any, path: str) -> int:
    if isinstance(handler, NpyHandler):
        a = handler._tokens(path)
        ends = int(np.count_nonzero(a == handler.eos_token_id))
        return ends + int(len(a) > 0 and int(a[-1]) != handler.eos_token_id)
    return int(handler.length(path))


@dataclass(frozen=True)
class SubDataset:
    """One component of the mix.

    Build it with :meth:`from_path`; ``files`` are in the order that defines global document
    ids, ``counts`` the documents per file.
    """

    name: str
    files: tuple[str, ...]
    counts: tuple[int, ...]
    handler: Any
    weight: float = 1.0
    root: str | None = None
    _hash: str = field(default="", compare=False, repr=False)

    @classmethod
    def from_path(
        cls,
        name: str,
        paths: str | Sequence[str],
        *,
        file_type: str | Any = "auto",
        weight: float = 1.0,
        **handler_options: Any,
    ) -> SubDataset:
        """The files under ``paths`` read with ``file_type`` (``"auto"``, ``"bin"``, ``"arrow"``,
        ``"parquet"``, ``"tar"``, ``"npy"`` or a handler object); ``handler_options`` go to the
        handler (``col_name``, ``tokenizer``, ``dtype``, ``eos_token_id``, ...)."""
        if file_type == "auto":
            handler = _auto_handler(paths, handler_options)
        else:
            handler = handler_for(file_type, **handler_options)
        files = discover_files(paths, handler)
        counts = tuple(_count(handler, f) for f in files)
        root = os.fspath(paths) if isinstance(paths, str | os.PathLike) and os.path.isdir(paths) else None
        return cls(name, tuple(files), counts, handler, float(weight), root)

    @property
    def num_docs(self) -> int:
        return int(sum(self.counts))

    @property
    def files_sha256(self) -> str:
        """Fingerprint of the file list: relative names, sizes and document counts (moving the
        data elsewhere keeps it; adding, removing or resizing a file changes it). No content is
        read, so a same-size in-place rewrite with the same document count is not detected
        (documented in ``docs/stream-checkpoint.md``)."""
        h = hashlib.sha256()
        for f, n in zip(self.files, self.counts, strict=True):
            rel = os.path.relpath(f, self.root) if self.root else os.path.basename(f)
            size = os.path.getsize(f)
            if isinstance(self.handler, IndexedHandler):
                size += os.path.getsize(f[:-4] + ".bin")
            h.update(f"{rel}\t{size}\t{n}\n".encode())
        return h.hexdigest()

    def describe(self) -> dict[str, Any]:
        """The manifest entry."""
        return {
            "name": self.name,
            "weight": self.weight,
            "num_files": len(self.files),
            "num_docs": self.num_docs,
            "files_sha256": self.files_sha256,
        }

    def core_source(self, validate: bool = False) -> Any:
        """What ``tokshuf._core.StreamWorker`` reads: a native spec or a Python reader."""
        if isinstance(self.handler, IndexedHandler):
            return ("indexed", [f[:-4] for f in self.files], validate)
        if isinstance(self.handler, NpyHandler):
            return ("npy", list(self.files), self.handler.dtype, self.handler.eos_token_id)
        return HandlerReader(self.files, self.counts, self.handler)
