"""``Nanoset``: one prefix's split, with Megatron's document / sample / shuffle indices.

A map-style dataset (``len``, ``ds[k]``) that torch's ``DataLoader`` and ``DistributedSampler``
use as is; torch itself is never imported. ``ds.get_batch(ks)`` reads many samples in one native
call with the GIL released.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf import _cache, _core
from tokshuf._arrays import as_numpy
from tokshuf._deprecation import renamed_parameters
from tokshuf._limits import position
from tokshuf._storage import local_prefix
from tokshuf.nanoset.config import NanosetConfig
from tokshuf.nanoset.megatron_item import megatron_item

__all__ = ["Nanoset", "SampleDataset"]

GPT_ARRAYS = ("document_index", "sample_index", "shuffle_index")


def from_numpy(a: npt.NDArray[Any]) -> _core.IndexArray:
    """A native copy of a numpy index array."""
    a = np.ascontiguousarray(a)
    return _core.IndexArray.from_bytes(a.tobytes(), a.dtype.name, list(a.shape))


def _index(k: Any, n: int) -> int:
    """Sample ``k`` of ``n`` as Python sequences take it (tokshuf._limits.position): negative from
    the end, a bool or a float a TypeError."""
    return position(k, n, "sample")


class SampleDataset:
    """What :class:`Nanoset` and :class:`BlendedNanoset` share: reading samples, and pickling by
    path (the cached index files are mapped again; arrays built without a cache are shipped)."""

    config: NanosetConfig
    split: str
    _reader: _core.SampleReader
    _paths: dict[str, str] | None
    _arrays: dict[str, _core.IndexArray]
    _pickled: tuple[str, ...] = ()  # the subclass's own fields, besides split and config

    def _open(self) -> None:
        raise NotImplementedError

    def description(self) -> dict[str, Any]:
        """Everything the index arrays depend on (the cache key)."""
        raise NotImplementedError

    def _build_arrays(self) -> dict[str, _core.IndexArray]:
        raise NotImplementedError

    def _attach(
        self,
        split: str,
        config: NanosetConfig,
        arrays: dict[str, _core.IndexArray] | None,
        paths: dict[str, str] | None,
    ) -> None:
        """The end of every constructor: the index arrays given, else built (or read from the
        cache), then the reader over them."""
        self.split = split
        self.config = config
        if arrays is None:
            arrays, paths = self._build()
        self._arrays = arrays
        self._paths = paths
        self._open()

    def _build(self) -> tuple[dict[str, _core.IndexArray], dict[str, str] | None]:
        """The index arrays, from the cache (built there if missing) and their files; built in
        memory with ``cache_dir=False``."""
        if self.config.cache_dir is False:
            return self._build_arrays(), None
        kind = type(self).__name__
        entry = _cache.cached(
            self.config.cache_dir, "nanoset", f"{kind}-{self.split}", self.description(), self._build_arrays
        )
        paths = {n: os.fspath(entry.file(n)) for n in entry.meta["arrays"]}
        return {n: _core.IndexArray.load(p) for n, p in paths.items()}, paths

    @property
    def cache_paths(self) -> dict[str, str] | None:
        """The cache files of the index arrays (``None`` with ``cache_dir=False``)."""
        return None if self._paths is None else dict(self._paths)

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in (*self._pickled, "split", "config")}
        if self._paths is not None:
            state["paths"] = self._paths
        else:  # nothing on disk to point at: ship the arrays
            state["arrays"] = {n: as_numpy(a) for n, a in self._arrays.items()}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in (*self._pickled, "split", "config"):
            setattr(self, name, state[name])
        self._paths = state.get("paths")
        if self._paths is not None:
            self._arrays = {n: _core.IndexArray.load(p) for n, p in self._paths.items()}
        else:
            self._arrays = {n: from_numpy(a) for n, a in state["arrays"].items()}
        self._open()

    def __len__(self) -> int:
        return len(self._reader)

    @property
    def sample_width(self) -> int:
        """Tokens per sample: ``sequence_length + add_extra_token_to_sequence``."""
        return self._reader.width

    def get(self, k: int) -> npt.NDArray[np.int64]:
        """The raw tokens of sample ``k`` (int64; padding, if any, is ``pad_token_id``)."""
        out = np.empty((1, self._reader.width), dtype=np.int64)
        self._reader.get_batch([_index(k, len(self))], out, 1)
        return out[0]

    def __getitem__(self, k: int) -> dict[str, npt.NDArray[np.int64]]:
        """``{"input_ids": int64 array of sample_width tokens}`` (nanotron's sample)."""
        return {"input_ids": self.get(k)}

    def __getitems__(self, ks: Sequence[int]) -> list[dict[str, npt.NDArray[np.int64]]]:
        # torch's DataLoader fetches whole batches through this when it exists. Workers already
        # run in parallel, so one thread each.
        batch = self.get_batch(ks, num_threads=1)
        return [{"input_ids": row} for row in batch]

    @renamed_parameters(threads="num_threads")
    def get_batch(
        self,
        ks: Sequence[int] | npt.NDArray[np.integer[Any]],
        out: npt.NDArray[np.int64] | None = None,
        num_threads: int | None = None,
    ) -> npt.NDArray[np.int64]:
        """Samples ``ks`` as one ``[len(ks), sample_width]`` int64 array, filled natively with the
        GIL released (in parallel on ``num_threads`` threads; default ``TOKSHUF_NUM_THREADS`` or all
        CPUs). With ``out`` (a writable C-contiguous int64 array of that shape, e.g. a view of
        pinned memory) the samples are written there and ``out`` is returned.

        Why an array and not a dict like the OLMo-style instances' ``get_batch``: a Megatron
        sample is only its ``sequence_length + 1`` token ids (the trainer shifts them into inputs
        and labels and builds its masks itself), so there is nothing to key; the array is what
        ``self[k]["input_ids"]`` holds, row by row, and it can be written into ``out``. The
        instances carry per-token masks and document lengths, hence their dict (with the same
        ``input_ids`` name for the ids)."""
        ks_arr = np.asarray(ks)
        if ks_arr.ndim != 1 or (ks_arr.size and ks_arr.dtype.kind not in "iu"):
            raise TypeError(
                f"ks must be a 1-D sequence of integers, got {ks_arr.dtype} of shape {ks_arr.shape}"
            )
        ks_arr = ks_arr.astype(np.int64, copy=False)
        n = len(self)
        if ks_arr.size and (int(ks_arr.min()) < -n or int(ks_arr.max()) >= n):
            bad = int(ks_arr.min()) if int(ks_arr.min()) < -n else int(ks_arr.max())
            raise IndexError(f"sample index {bad} is out of range for a dataset of {n} samples")
        if out is None:
            out = np.empty((len(ks_arr), self._reader.width), dtype=np.int64)
        self._reader.get_batch(ks_arr, out, num_threads)
        return out

    def megatron_item(self, k: int | None) -> dict[str, Any]:
        """Megatron's ``GPTDataset.__getitem__`` dict for sample ``k`` as numpy arrays: ``tokens``,
        ``labels`` (int64), ``attention_mask`` (bool ``[1, S, S]``, True = masked; only with
        ``create_attention_mask``), ``loss_mask`` (float32), ``position_ids`` (int64).
        ``k=None`` is Megatron's batch-padding sample (sample 0, loss mask all zero)."""
        return megatron_item(self.get(0 if k is None else k), self.config, padding=k is None)


class Nanoset(SampleDataset):
    """The samples of sequences ``index_range`` of one indexed dataset, in Megatron's order.

    Built by :func:`tokshuf.build_nanosets`. Index arrays (read-only numpy): ``document_index``
    (int32), ``sample_index`` (``[len + 1, 2]``, int32 or int64), ``shuffle_index`` (uint32 or
    int64).
    """

    _pickled = ("prefix", "index_range", "num_samples")
    _data: dict[str, Any] | None = None  # the identity of the data files, once read

    def __init__(
        self,
        prefix: str,
        index_range: tuple[int, int],
        num_samples: int | None,
        split: str,
        config: NanosetConfig,
        *,
        arrays: dict[str, _core.IndexArray] | None = None,
        paths: dict[str, str] | None = None,
    ) -> None:
        self.prefix = local_prefix(prefix) if config.remote == "copy" else prefix
        self.index_range = (int(index_range[0]), int(index_range[1]))
        self.num_samples = num_samples
        self._attach(split, config, arrays, paths)

    # -- building ---------------------------------------------------------------------------
    @property
    def drop_last_partial_sequence(self) -> bool:
        return self.split != "valid" or self.config.drop_last_partial_validation_sequence

    def description(self) -> dict[str, Any]:
        """Everything the arrays depend on (the cache key). The data files are read for their
        identity once per dataset (blends ask again for each of theirs)."""
        if self._data is None:
            self._data = _cache.prefix_identity(self.prefix)
        c = self.config
        return {
            "class": "Nanoset",
            "data": self._data,
            "split": self.split,
            "index_range": list(self.index_range),
            "num_samples": self.num_samples,
            "sequence_length": c.sequence_length,
            "add_extra_token_to_sequence": c.add_extra_token_to_sequence,
            "drop_last_partial_sequence": self.drop_last_partial_sequence,
            "seed": c.seed,
            "index_scheme": c.index_scheme,
        }

    def _build_arrays(self) -> dict[str, _core.IndexArray]:
        c = self.config
        built = _core.build_gpt_indices(
            self.prefix,
            self.index_range[0],
            self.index_range[1],
            self.num_samples,
            sequence_length=c.sequence_length,
            add_extra_token=c.add_extra_token_to_sequence,
            seed=c.seed,
            drop_last_partial_sequence=self.drop_last_partial_sequence,
            scheme=c.index_scheme,
        )
        return {n: built[n] for n in GPT_ARRAYS}

    def _open(self) -> None:
        c = self.config
        a = self._arrays
        self._reader = _core.SampleReader.gpt(
            self.prefix,
            a["document_index"],
            a["sample_index"],
            a["shuffle_index"],
            sequence_length=c.sequence_length,
            add_extra_token=c.add_extra_token_to_sequence,
            pad=c.pad_token_id,
            origin=self._origin(),
            remote=c.remote,
        )
        self.document_index = as_numpy(a["document_index"])
        self.sample_index = as_numpy(a["sample_index"])
        self.shuffle_index = as_numpy(a["shuffle_index"])

    def _origin(self) -> str | None:
        """Where cached arrays came from and how to rebuild them: said by the reader when they
        do not fit the data (an edited or damaged entry that still passed its header checks)."""
        if not self._paths:
            return None
        entry = os.path.dirname(next(iter(self._paths.values())))
        return (
            f"they come from the Nanoset cache entry {entry}, which does not fit the data; delete "
            "that directory and it is rebuilt on the next open"
        )

    @property
    def num_epochs(self) -> int:
        """Epochs in the document index."""
        per_epoch = self.index_range[1] - self.index_range[0]
        return len(self.document_index) // per_epoch if per_epoch else 1

    def __repr__(self) -> str:
        built = f", samples={len(self)}, epochs={self.num_epochs}" if hasattr(self, "_reader") else ""
        return (
            f"Nanoset({os.fspath(self.prefix)!r}, split={self.split!r}, sequences={self.index_range}{built})"
        )
