"""Data sources of instance datasets: OLMo token files and Megatron ``.bin/.idx`` datasets, with
their documents (cached per file)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf import _arrays, _cache, _core, _storage
from tokshuf._log import log
from tokshuf.errors import ConfigError
from tokshuf.olmo_tokens import Boundaries, metadata_path, token_dtype

__all__ = ["DocumentRule", "Source", "resolve_sources"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class DocumentRule:
    """How a dataset finds the documents of its files (``boundaries``, with the EOS/BOS ids of a
    scan on ``num_threads`` threads) and where it caches them."""

    cache_dir: Path
    eos_token_id: int
    bos_token_id: int | None
    boundaries: Boundaries
    num_threads: int | None


@dataclass(frozen=True)
class Source:
    """One file of tokens: an OLMo token file (``dtype`` set) or an indexed dataset (``dtype``
    None, ``path`` is the prefix)."""

    path: str
    dtype: str | None
    num_tokens: int

    @property
    def is_indexed(self) -> bool:
        return self.dtype is None

    def identity(self) -> dict[str, Any]:
        if self.dtype is None:
            return _cache.prefix_identity(self.path)
        return {"npy": _cache.file_identity(self.path), "dtype": self.dtype}

    def reader_spec(self) -> tuple[str, str | None]:
        return (self.path, self.dtype)

    def boundary_source(self, rule: DocumentRule) -> Any:
        """Where this file's documents come from, as part of cache keys: the index, the Dolma
        metadata (with its identity) or an EOS/BOS scan."""
        if self.dtype is None:
            return "index"
        meta = metadata_path(self.path)
        if rule.boundaries == "metadata" or (rule.boundaries == "auto" and meta.is_file()):
            return {"metadata": _cache.file_identity(meta)}
        return {"eos": rule.eos_token_id, "bos": rule.bos_token_id}

    @staticmethod
    def boundaries_recorded(origin: Any) -> bool:
        """Whether documents of ``origin`` (from :meth:`boundary_source`) were recorded (Dolma
        metadata, an index) rather than found by an EOS scan."""
        return not (isinstance(origin, dict) and "eos" in origin)

    def documents(self, rule: DocumentRule) -> tuple[Path, npt.NDArray[np.uint64]]:
        """The ``(n, 2)`` local spans of this file's documents, cached; returns (file, array)."""
        origin = self.boundary_source(rule)
        dtype = self.dtype

        def build() -> dict[str, Any]:
            if dtype is None:
                buf, _, _ = _core.indexed_documents(self.path)
            elif isinstance(origin, dict) and "metadata" in origin:
                buf = _core.read_metadata(os.fspath(metadata_path(self.path)), self.num_tokens)
            else:
                buf = _core.scan_documents(
                    self.path, dtype, rule.eos_token_id, rule.bos_token_id, rule.num_threads
                )
            return {"spans": _arrays.spans(buf)}

        fields = {"source": self.identity(), "boundaries": origin}
        entry = _cache.cached(rule.cache_dir, "instances", "documents", fields, build)
        return entry.file("spans"), entry.array("spans")

    def warn_if_metadata_disagrees(self, rule: DocumentRule) -> None:
        """Under ``"auto"``, warn (once per file and process) when the Dolma metadata taken
        differs from the EOS scan OLMo-core runs on local files by default, whose instances then
        differ. The comparison is cached beside the documents."""
        eos_token_id, bos_token_id = rule.eos_token_id, rule.bos_token_id
        origin = self.boundary_source(rule)
        key = (self.path, eos_token_id, bos_token_id)
        if (
            rule.boundaries != "auto"
            or not (isinstance(origin, dict) and "metadata" in origin)
            or key in _WARNED
        ):
            return
        dtype = self.dtype
        assert dtype is not None

        def build() -> dict[str, Any]:
            _, meta = self.documents(rule)
            buf = _core.scan_documents(self.path, dtype, eos_token_id, bos_token_id, rule.num_threads)
            return {"difference": _first_difference(meta, _arrays.spans(buf))}

        fields = {"source": self.identity(), "boundaries": origin, "eos": eos_token_id, "bos": bos_token_id}
        diff = _cache.cached(rule.cache_dir, "instances", "boundary-check", fields, build).array("difference")
        if diff.size == 0:
            return
        _WARNED.add(key)
        n_meta, n_scan, k, ms, me, ss, se = (int(x) for x in diff)
        meta = f"[{ms}, {me})" if ms >= 0 else "none"
        scan = f"[{ss}, {se})" if ss >= 0 else "none"
        log.warning(
            "%s: its Dolma metadata %s gives %d documents, an EOS scan (eos_token_id %s, bos_token_id %s) "
            "%d; document %d: metadata %s, EOS scan %s. document_boundaries='auto' takes the metadata, "
            "but OLMo-core scans local files for EOS by default, so these instances differ from its "
            "default ones: pass document_boundaries='eos' to get them, or 'metadata' to keep these "
            "(OLMo-core's use_array_if_local=False) without this warning",
            self.path,
            metadata_path(self.path).name,
            n_meta,
            eos_token_id,
            bos_token_id,
            n_scan,
            k,
            meta,
            scan,
        )


#: Files whose metadata/EOS disagreement this process has warned about.
_WARNED: set[tuple[str, int, int | None]] = set()


def _first_difference(meta: npt.NDArray[np.uint64], scan: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Empty if the two document lists are equal, else ``[documents in meta, documents in scan,
    first differing document k, meta's span k, scan's span k]`` (-1 for a missing span)."""
    n = min(len(meta), len(scan))
    neq = np.flatnonzero((meta[:n] != scan[:n]).any(axis=1))
    if len(meta) == len(scan) and neq.size == 0:
        return np.empty(0, np.int64)
    k = int(neq[0]) if neq.size else n
    pick = [-1, -1]
    out = [len(meta), len(scan), k]
    for arr in (meta, scan):
        out += [int(x) for x in arr[k]] if k < len(arr) else pick
    return np.array(out, np.int64)


def _indexed_prefix(p: str) -> str | None:
    for suffix in (".bin", ".idx"):
        if p.endswith(suffix) and os.path.isfile(p[: -len(suffix)] + ".idx"):
            return p[: -len(suffix)]
    if os.path.isfile(p + ".idx") and os.path.isfile(p + ".bin"):
        return p
    return None


def resolve_sources(
    paths: tuple[PathLike, ...], dtype: npt.DTypeLike | None, vocab_size: int | None
) -> list[Source]:
    """Sources for ``paths``: ``.bin/.idx`` prefixes (or either file) are indexed datasets,
    everything else an OLMo token file of ``dtype`` (default: from ``vocab_size``)."""
    if not paths:
        raise ConfigError("at least one data path is needed")
    out = []
    for raw in paths:
        p = _storage.localize(raw)
        prefix = _indexed_prefix(p)
        if prefix is not None:
            out.append(_indexed_source(prefix))
            continue
        if not os.path.isfile(p):
            raise FileNotFoundError(2, "no such token file or .bin/.idx prefix", p)
        if dtype is None and vocab_size is None:
            raise ConfigError(f"{p}: OLMo token files record no dtype; pass the dtype or the vocab_size")
        d = np.dtype(dtype) if dtype is not None else token_dtype(vocab_size)  # type: ignore[arg-type]
        size = os.path.getsize(p)
        if size % d.itemsize:
            raise ConfigError(
                f"{p}: size {size} is not a multiple of {d.itemsize} ({d.name}); "
                "wrong dtype or a truncated file"
            )
        out.append(Source(str(Path(p).resolve()), d.name, size // d.itemsize))
    return out


def _indexed_source(prefix: str) -> Source:
    from tokshuf.indexed import IndexedDataset

    ds = IndexedDataset(prefix, validate=False)
    return Source(
        str(Path(prefix).resolve()), None, int(os.path.getsize(prefix + ".bin")) // ds.dtype.itemsize
    )
