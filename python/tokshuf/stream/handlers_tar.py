"""tokshuf webdataset tars (``tokshuf shuffle`` output, open_lm's format): every member
``<key>.json.gz`` (a gzipped JSON list of ids) or ``<key>.npy`` is one document, in tar order.

The member table is read once per file (headers only); documents are then read by offset from
a memory map, so random access costs one decompression.
"""

from __future__ import annotations

import gzip
import io
import json
import mmap
import os
import tarfile
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf.errors import FormatError
from tokshuf.stream.handlers import strip_ends

__all__ = ["TarHandler"]

_SUFFIXES = (".json.gz", ".npy")


class _TarReader:
    def __init__(self, path: str) -> None:
        self.path = path
        try:
            with tarfile.open(path, mode="r:") as tf:
                self.members = [
                    (m.offset_data, m.size, m.name)
                    for m in tf.getmembers()
                    if m.isfile() and m.name.endswith(_SUFFIXES)
                ]
        except tarfile.TarError as e:
            raise FormatError(f"{path}: not a readable tar ({e})") from e
        self._map = None
        if os.path.getsize(path):
            with open(path, "rb") as f:  # the map outlives the descriptor
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()

    def doc(self, i: int) -> npt.NDArray[Any]:
        offset, size, name = self.members[i]
        if self._map is None or offset + size > len(self._map):
            raise FormatError(f"{self.path}: member {name} is truncated")
        raw = self._map[offset : offset + size]
        try:
            if name.endswith(".npy"):
                return np.load(io.BytesIO(raw), allow_pickle=False)
            return np.asarray(json.loads(gzip.decompress(raw)), dtype=np.int64)
        except (OSError, ValueError, EOFError) as e:
            raise FormatError(f"{self.path}: member {name} is corrupt ({e})") from e


class TarHandler:
    """``*.tar`` of ``<key>.json.gz`` / ``<key>.npy`` token lists."""

    def is_legal(self, path: str) -> bool:
        return path.endswith(".tar")

    def open(self, path: str) -> _TarReader:
        return _TarReader(path)

    def length(self, path: str) -> int:
        r = _TarReader(path)
        try:
            return len(r.members)
        finally:
            r.close()

    def get(self, reader: _TarReader, index: int, drop_tokens: AbstractSet[int]) -> npt.NDArray[Any]:
        doc = reader.doc(index)
        return strip_ends(doc, drop_tokens)

    def slice(self, doc: Any, start: int, n: int) -> npt.NDArray[Any]:
        return np.asarray(doc[start : start + n])
