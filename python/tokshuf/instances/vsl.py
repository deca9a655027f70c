"""Variable sequence length with curricula: OLMo-core's ``NumpyVSLDataset`` and
``VSLCurriculum``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, Unpack

import numpy as np
import numpy.typing as npt

from tokshuf import _arrays, _core, _limits
from tokshuf._cache import cached
from tokshuf.errors import ConfigError
from tokshuf.instances._base import InstanceDataset
from tokshuf.instances._options import MIN_SEQUENCE_LENGTH, InstanceOptions, PathLike
from tokshuf.instances._seeds import check_seed, seed_entropy

__all__ = ["VSLCurriculum", "VSLDataset", "VSLEpoch"]

SeedMode = Literal["hashed", "olmo"]


@dataclass(frozen=True)
class VSLCurriculum:
    """A sequence-length curriculum, by OLMo-core's names.

    * ``natural``: every bucket's batches shuffled together (a batch of the longest bucket first,
      so out-of-memory errors show at once);
    * ``grow_p2`` / ``grow_linear``: the epoch in ``num_cycles`` cycles of one sub-cycle per
      bucket, the odds of longer buckets growing in powers of two / linearly within a cycle;
      ``balanced`` cuts every bucket to the smallest one's batch count.

    Every bucket's batch count is rounded down to a multiple of ``num_cycles`` for the growth
    curricula, as in OLMo-core.
    """

    name: Literal["natural", "grow_p2", "grow_linear"] = "natural"
    num_cycles: int | None = None
    balanced: bool = False

    def __post_init__(self) -> None:
        if self.name not in ("natural", "grow_p2", "grow_linear"):
            raise ConfigError(f"unknown curriculum {self.name!r} (expected natural, grow_p2 or grow_linear)")
        if self.name != "natural" and (self.num_cycles is None or self.num_cycles < 1):
            raise ConfigError(f"the {self.name} curriculum needs num_cycles >= 1")

    def _args(self) -> tuple[str, int | None, bool]:
        return self.name, self.num_cycles, self.balanced


class VSLEpoch:
    """One epoch of VSL batches: the curriculum's batch order and each bucket's permuted
    instances. Global batch ``b`` is ``global_batch_size // L`` instances of one length ``L``."""

    def __init__(
        self, dataset: VSLDataset, global_batch_size: int, seed: int, epoch: int, mode: SeedMode
    ) -> None:
        c = dataset.curriculum
        self.global_batch_size = global_batch_size
        self.batches_per_bucket: list[tuple[int, int]] = _core.vsl_batches_per_bucket(
            dataset.instances_per_bucket, global_batch_size, *c._args()
        )
        seeds = [seed + epoch] if mode == "olmo" else [seed, epoch]
        self.order = _arrays.u64(
            _core.vsl_batch_order(self.batches_per_bucket, seed_entropy(*seeds), *c._args())
        ).astype(np.int64)
        self._buckets = []
        for length, ids in dataset.buckets:
            seeds = [seed + epoch + length] if mode == "olmo" else [seed, epoch, length]
            self._buckets.append(
                _arrays.u64(_core.numpy_shuffled(ids, seed_entropy(*seeds))).astype(np.int64)
            )
        self._first_batch = np.cumsum([0] + [n for _, n in self.batches_per_bucket])

    def __len__(self) -> int:
        return int(self.order.size)

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> npt.NDArray[np.int64]:
        """Instance indices of global batch ``step`` (in curriculum order), or rank ``rank``'s
        contiguous share of it, as OLMo-core slices it."""
        if isinstance(world_size, bool) or not isinstance(world_size, int | np.integer) or world_size < 1:
            raise ConfigError(f"world_size must be a positive integer, got {world_size!r}")
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or not 0 <= rank < world_size:
            raise ConfigError(f"rank must be an integer in [0, world_size) = [0, {world_size}), got {rank!r}")
        b = int(self.order[step])
        k = int(np.searchsorted(self._first_batch, b, side="right")) - 1
        length = self.batches_per_bucket[k][0]
        per_batch = self.global_batch_size // length
        if per_batch % world_size:
            raise ConfigError(
                f"{per_batch} instances of length {length} do not split over {world_size} ranks"
            )
        per_rank = per_batch // world_size
        start = (b - int(self._first_batch[k])) * per_batch + rank * per_rank
        return self._buckets[k][start : start + per_rank]


class VSLDataset(InstanceDataset):
    """Dataset decomposition: every document cut into pieces of power-of-two lengths between
    ``min_sequence_length`` and ``max_sequence_length``, one instance per piece.

    A document of ``n`` tokens is cut, from its start, into the binary decomposition of ``n``
    (largest first, with powers above the maximum split into maximum-length pieces); the cut stops
    at the first piece below the minimum and those tokens are dropped, as in OLMo-core. No
    instance crosses a document. Instances are grouped in ``buckets`` by length; :meth:`epoch`
    orders batches by a :class:`VSLCurriculum`. Unlike OLMo-core, a file without any long-enough
    document just contributes nothing, and indices are 64-bit.
    """

    _label_mask = False

    def __init__(
        self,
        *paths: PathLike,
        max_sequence_length: int,
        min_sequence_length: int = MIN_SEQUENCE_LENGTH,
        curriculum: VSLCurriculum | None = None,
        **options: Unpack[InstanceOptions],
    ) -> None:
        min_sequence_length = _limits.sequence_length(min_sequence_length, "min_sequence_length")
        max_sequence_length = _limits.sequence_length(max_sequence_length, "max_sequence_length")
        for name, v in (
            ("min_sequence_length", min_sequence_length),
            ("max_sequence_length", max_sequence_length),
        ):
            if v & (v - 1):
                raise ConfigError(f"{name} must be a power of 2, got {v}")
        if min_sequence_length > max_sequence_length:
            raise ConfigError(
                f"min_sequence_length ({min_sequence_length}) exceeds "
                f"max_sequence_length ({max_sequence_length})"
            )
        self.min_sequence_length = min_sequence_length
        self.max_sequence_length = max_sequence_length
        self.curriculum = curriculum or VSLCurriculum()
        strategy = {"min_sequence_length": min_sequence_length, "curriculum": self.curriculum}
        super().__init__(paths, max_sequence_length, strategy, options)

    def __setstate__(self, state: dict[str, Any]) -> None:
        args = dict(state)
        paths = args.pop("paths")
        args["max_sequence_length"] = args.pop("sequence_length")
        VSLDataset.__init__(self, *paths, **args)

    @property
    def all_sequence_lengths(self) -> list[int]:
        out, length = [], self.min_sequence_length
        while length <= self.max_sequence_length:
            out.append(length)
            length *= 2
        return out

    def _source_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self._source_of_tokens(self.spans[idx, 0])

    def _strategy_fields(self) -> dict[str, Any]:
        return {"min_sequence_length": self.min_sequence_length}

    def _build(self) -> dict[str, npt.NDArray[np.uint64]]:
        spans = self._global_spans()
        docs = np.concatenate(spans) if spans else np.empty((0, 2), np.uint64)
        pieces = _arrays.spans(_core.vsl_decompose(docs, self.min_sequence_length, self.max_sequence_length))
        buckets = _core.vsl_buckets(pieces, self.min_sequence_length, self.max_sequence_length)
        out = {"spans": pieces}
        for length, ids in zip(self.all_sequence_lengths, buckets, strict=True):
            out[f"bucket{length}"] = _arrays.u64(ids)
        return out

    def _open(self) -> _core.InstanceReader:
        entry = cached(self.cache_dir, "instances", "vsl", self._fields(), self._build)
        self.cache_path = entry.path
        self.spans = entry.array("spans")
        self.buckets: list[tuple[int, npt.NDArray[np.uint64]]] = [
            (length, entry.array(f"bucket{length}")) for length in self.all_sequence_lengths
        ]
        if len(self.spans) == 0:
            raise ConfigError(
                f"no document has {self.min_sequence_length} tokens or more, so there are no instances"
            )
        return self._make_reader("spans", files={"spans": os.fspath(entry.file("spans"))})

    @property
    def instance_lengths(self) -> npt.NDArray[np.uint64]:
        """The length of every instance."""
        lengths: npt.NDArray[np.uint64] = self.spans[:, 1] - self.spans[:, 0]
        return lengths

    @property
    def instances_per_bucket(self) -> list[tuple[int, int]]:
        return [(length, len(ids)) for length, ids in self.buckets]

    def epoch(
        self, global_batch_size: int, seed: int, epoch: int = 0, seed_mode: SeedMode = "hashed"
    ) -> VSLEpoch:
        """The batches of ``epoch``: ``global_batch_size`` is in tokens (a multiple of
        ``max_sequence_length``).

        ``seed_mode="olmo"`` seeds numpy's generator with ``seed + epoch`` (and ``seed + epoch + L``
        for bucket ``L``) exactly as OLMo-core's ``NumpyVSLDataLoader`` does, giving its batches;
        the default hashes ``(seed, epoch)`` so that (1, 2) and (2, 1) differ. ``seed`` and
        ``epoch`` are non-negative integers of any size, read as numpy reads them.
        """
        if seed_mode not in ("hashed", "olmo"):
            raise ConfigError(f"seed_mode must be 'hashed' or 'olmo', got {seed_mode!r}")
        seed, epoch = check_seed("seed", seed), check_seed("epoch", epoch)
        return VSLEpoch(self, global_batch_size, seed, epoch, seed_mode)

    def _width(self, idx: npt.NDArray[np.int64]) -> int:
        if idx.size == 0:
            return self.max_sequence_length
        return int((self.spans[idx, 1] - self.spans[idx, 0]).max())

    def _needs_mask(self, idx: npt.NDArray[np.int64], width: int) -> bool:
        # Instances of one batch normally share a bucket; mixed lengths are padded and masked.
        return bool(idx.size) and bool(((self.spans[idx, 1] - self.spans[idx, 0]) != width).any())
