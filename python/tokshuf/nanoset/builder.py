"""``build_nanosets``: Megatron's ``BlendedMegatronDatasetBuilder`` decisions (which splits exist,
single dataset or blend, how many samples each dataset is built for)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, NamedTuple

from tokshuf import _core
from tokshuf._storage import local_prefix
from tokshuf.errors import ConfigError
from tokshuf.indexed import IndexedDataset
from tokshuf.nanoset.blended import BlendedNanoset
from tokshuf.nanoset.config import NanosetConfig, SampleCounts, check_counts
from tokshuf.nanoset.dataset import Nanoset

__all__ = ["NanosetSplits", "build_nanosets"]

SPLITS = ("train", "valid", "test")

Dataset = Nanoset | BlendedNanoset


class NanosetSplits(NamedTuple):
    """The train, valid and test datasets of :func:`build_nanosets` (``None`` for a split the
    split string gives no share); unpacks as ``train, valid, test``."""

    train: Dataset | None
    valid: Dataset | None
    test: Dataset | None

    def require(self, split: Literal["train", "valid", "test"]) -> Dataset:
        """The dataset of ``split``, which the configuration must enable (for type checkers: a
        requested split is never ``None``)."""
        # getattr alone would also answer tuple methods ("index", "count") and raise
        # AttributeError for a misspelled name.
        if split not in SPLITS:
            raise ConfigError(f"split must be one of {list(SPLITS)}, got {split!r}")
        ds: Dataset | None = getattr(self, split)
        if ds is None:
            raise ConfigError(
                f"the {split} split has no share in the split string; enable it or do not ask for it"
            )
        return ds


Job = tuple[str, tuple[int, int], int | None, str]


def _build_all(jobs: list[Job], config: NanosetConfig) -> list[Nanoset]:
    """Build Nanosets in parallel threads (the native builders release the GIL)."""

    def one(job: Job) -> Nanoset:
        prefix, rng, n, split = job
        return Nanoset(prefix, rng, n, split, config)

    workers = min(len(jobs), os.cpu_count() or 1, 8)
    if workers <= 1:
        return [one(j) for j in jobs]
    with ThreadPoolExecutor(workers, thread_name_prefix="tokshuf-nanoset") as pool:
        return list(pool.map(one, jobs))


def _ranges(prefix: str, matrix: Sequence[tuple[float, float] | None]) -> list[tuple[int, int] | None]:
    n = len(IndexedDataset(prefix, validate=False))
    return list(_core.split_ranges(list(matrix), n))


def build_nanosets(config: NanosetConfig, num_samples: Sequence[int | None] | None = None) -> NanosetSplits:
    """Build the train, valid and test datasets of ``config``, as Megatron's builder would.

    Parameters
    ----------
    config
        What to read and how.
    num_samples
        Samples per split (train, valid, test), overriding ``config.num_samples``; ``None`` for a
        split means one full pass (for weighted blends every enabled split needs a count).

    Returns
    -------
    NanosetSplits
        ``(train, valid, test)``, each a :class:`Nanoset` (one prefix), a :class:`BlendedNanoset`
        (a list of prefixes, or a ``{prefix: weight}`` mapping, even of one prefix), or ``None``
        when the split string gives the split no share; ``.require("train")`` gives a split that
        must be there, typed without ``None``.

    Raises
    ------
    tokshuf.ConfigError
        Samples requested from a split with no tokens, a blend that would draw more samples from a
        dataset than it holds, a weighted blend without a sample count, bad weights or split.
    FileNotFoundError, tokshuf.FormatError
        A missing or corrupt ``.bin/.idx``.
    """
    sizes: SampleCounts = check_counts(tuple(num_samples) if num_samples is not None else config.num_samples)
    _, matrix = _core.parse_split(config.split)
    prefixes, weights = config.blend
    if config.remote == "copy":  # storage URLs: their local copies
        prefixes = [local_prefix(p) for p in prefixes]
    enabled = [i for i in range(3) if matrix[i] is not None]
    out: list[Dataset | None] = [None, None, None]
    if config.stages and 0 in enabled:  # a staged run: the train split follows the stages
        from tokshuf.nanoset.staged import build_staged

        def train_range(prefix: str) -> tuple[int, int]:
            r = _ranges(local_prefix(prefix) if config.remote == "copy" else prefix, matrix)[0]
            assert r is not None
            return r

        out[0] = build_staged(config, sizes[0], train_range, lambda jobs: _build_all(jobs, config))
        enabled.remove(0)

    if len(prefixes) == 1 and weights is None:
        rng = _ranges(prefixes[0], matrix)
        jobs: list[Job] = []
        for i in enabled:
            r = rng[i]
            assert r is not None
            jobs.append((prefixes[0], r, sizes[i], SPLITS[i]))
        for i, ds in zip(enabled, _build_all(jobs, config), strict=True):
            out[i] = ds
        return NanosetSplits(out[0], out[1], out[2])

    if weights is not None:
        missing = [SPLITS[i] for i in enabled if sizes[i] is None]
        if missing:
            raise ConfigError(
                f"a weighted blend needs a sample count for every split it builds; missing: {missing} "
                f"(pass num_samples=(train, valid, test), or give those splits no share in split)"
            )
        weights = _core.normalize(weights)
        target = _core.size_per_split_per_dataset(weights, list(sizes), 0.0)
        buffer = _core.size_per_split_per_dataset(weights, list(sizes), config.mid_level_dataset_surplus)
    active = [d for d in range(len(prefixes)) if weights is None or weights[d] > 0]
    ranges = {d: _ranges(prefixes[d], matrix) for d in active}
    jobs = []
    for i in enabled:
        for d in active:
            r = ranges[d][i]
            assert r is not None
            jobs.append((prefixes[d], r, None if weights is None else buffer[d][i], SPLITS[i]))
    built = iter(_build_all(jobs, config))
    for i in enabled:
        parts: list[Nanoset | None] = [next(built) if d in ranges else None for d in range(len(prefixes))]
        if weights is not None:
            size: int | None = sum(t[i] or 0 for t in target)
            blend_weights: list[float] | list[int] = weights
        else:
            lengths = [0 if p is None else len(p) for p in parts]
            blend_weights = lengths
            if sum(lengths) == 0 and sizes[i]:
                raise ConfigError(
                    f"{sizes[i]} samples were requested from the {SPLITS[i]} split, but it holds no complete "
                    f"sample in any dataset of the blend"
                )
            size = None if sizes[i] is None or sum(lengths) == 0 else min(sizes[i] or 0, sum(lengths))
        out[i] = BlendedNanoset(parts, blend_weights, size, SPLITS[i], config)
    return NanosetSplits(out[0], out[1], out[2])
