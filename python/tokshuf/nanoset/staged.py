"""The train split of a staged run (see :mod:`tokshuf.nanoset.stages`): one blend per stage,
each stage's draws from a prefix numbered after those of the stages before it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from tokshuf import _core
from tokshuf._arrays import as_numpy
from tokshuf.errors import ConfigError
from tokshuf.nanoset.blended import BlendedNanoset
from tokshuf.nanoset.dataset import Nanoset, from_numpy
from tokshuf.nanoset.stages import NanosetStage, stage_weights

__all__ = ["StagePlan", "StagedNanoset", "blend_stages", "plan"]


@dataclasses.dataclass(frozen=True)
class StagePlan:
    """A stage as built: its samples ``[first_sample, first_sample + samples)`` of the run, its
    prefixes (indices into the run's, in the stage's order: the blend breaks ties by it) and
    their normalized weights."""

    name: str
    start_step: int
    first_sample: int
    samples: int
    datasets: tuple[int, ...]
    weights: tuple[float, ...]

    def share(self, n_datasets: int) -> list[float]:
        """The weight of each of the run's ``n_datasets`` prefixes in this stage (0: not in it)."""
        out = [0.0] * n_datasets
        for d, w in zip(self.datasets, self.weights, strict=True):
            out[d] = w
        return out


def plan(
    stages: Sequence[NanosetStage], global_batch_size: int, total: int
) -> tuple[list[str], list[StagePlan]]:
    """The run's prefixes (in order of first use) and each stage's share of its ``total`` samples."""
    prefixes: list[str] = []
    for s in stages:
        prefixes += [p for p in stage_weights(s.data_path) if p not in prefixes]
    out = []
    for k, s in enumerate(stages):
        first = min(s.start_step * global_batch_size, total)
        end = total if k + 1 == len(stages) else min(stages[k + 1].start_step * global_batch_size, total)
        w = {p: x for p, x in stage_weights(s.data_path).items() if x > 0}
        norm = _core.normalize(list(w.values()))
        order = tuple(prefixes.index(p) for p in w)
        out.append(StagePlan(s.name, s.start_step, first, end - first, order, tuple(norm)))
    return prefixes, out


def blend_stages(
    plans: Sequence[StagePlan], n_datasets: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``(dataset_index, dataset_sample_index)`` of the whole run: each stage's greedy blend over its
    prefixes of positive weight, in its order, its draws numbered after those of the earlier
    stages."""
    di_parts, si_parts = [], []
    drawn = np.zeros(n_datasets, np.int64)
    for p in plans:
        if p.samples == 0:
            continue
        di, si = _core.build_blending_indices(list(p.weights), p.samples)
        d = np.asarray(p.datasets, np.int64)[as_numpy(di).astype(np.int64)]
        di_parts.append(d.astype(np.int16))
        si_parts.append(as_numpy(si) + drawn[d])
        drawn += np.bincount(d, minlength=n_datasets)
    if not di_parts:
        return np.zeros(0, np.int16), np.zeros(0, np.int64)
    return np.concatenate(di_parts), np.concatenate(si_parts)


class StagedNanoset(BlendedNanoset):
    """The train samples of a staged run: sample ``k`` is read by the stage owning it, from the
    run's :class:`Nanoset` of a prefix, after the samples earlier stages drew from that prefix.

    ``datasets`` (one per prefix of the run, in order of first use: ``prefixes``), ``stages``
    (the :class:`StagePlan` of each), ``dataset_index`` / ``dataset_sample_index`` as in
    :class:`BlendedNanoset`.
    """

    _pickled: tuple[str, ...] = ("datasets", "prefixes", "weights", "size", "stages")

    def __init__(
        self,
        datasets: list[Nanoset | None],
        stages: list[StagePlan],
        size: int,
        config: Any,
        *,
        prefixes: list[str] | None = None,
        arrays: dict[str, _core.IndexArray] | None = None,
        paths: dict[str, str] | None = None,
    ) -> None:
        self.datasets = datasets
        #: The run's prefixes, in order of first use (``datasets[d]`` is ``None`` for one no
        #: stage draws from).
        if prefixes is None:
            prefixes = [d.prefix for d in datasets if d is not None]
        self.prefixes = list(prefixes)
        self.stages = list(stages)
        self.size = size
        drawn = [sum(s.samples * s.share(len(datasets))[d] for s in stages) for d in range(len(datasets))]
        #: The share of the run's samples each prefix is meant to serve (for reports).
        self.weights = [x / size if size else 0.0 for x in drawn]
        self._attach("train", config, arrays, paths)
        self._check_oversampling()

    def description(self) -> dict[str, Any]:
        stages = [dataclasses.asdict(s) for s in self.stages]
        return self._blend_description("StagedNanoset", stages=stages, size=self.size)

    def _build_arrays(self) -> dict[str, _core.IndexArray]:
        di, si = blend_stages(self.stages, len(self.datasets))
        return {"dataset_index": from_numpy(di), "dataset_sample_index": from_numpy(si)}

    def stage_of_sample(self, k: int) -> StagePlan:
        """The stage that serves sample ``k`` of the run."""
        if not 0 <= k < len(self):
            raise IndexError(f"sample {k} is out of range for a run of {len(self)} samples")
        return [s for s in self.stages if s.first_sample <= k and s.samples][-1]

    def samples_before(self, stage: int | str) -> int:
        """Samples of the run before stage ``stage`` (index or name) starts: with nanotron's
        per-stage ``consumed_train_samples`` of that stage added, the run's consumed samples
        (what :func:`~tokshuf.nanoset.resume_sampler` takes)."""
        found = [s for i, s in enumerate(self.stages) if stage in (i, s.name)]
        if not found:
            raise ConfigError(f"no stage {stage!r}; the stages are {[s.name for s in self.stages]}")
        return found[0].first_sample

    def __repr__(self) -> str:
        names = [s.name for s in self.stages]
        return f"StagedNanoset(stages={names}, samples={len(self)})"


def build_staged(
    config: Any,
    total: int | None,
    train_range: Any,
    build_all: Any,
) -> StagedNanoset:
    """The train split of ``config``'s stages: ``total`` samples; ``train_range(prefix)`` is a
    prefix's train sequence range, ``build_all(jobs)`` builds Nanosets (the builder's)."""
    if total is None:
        raise ConfigError(
            "a staged run needs the train sample count (num_samples[0]: train_steps x global_batch_size)"
        )
    gbs = config.global_batch_size
    stages: Sequence[NanosetStage] = config.stages
    prefixes, plans = plan(stages, gbs, total)
    di, _ = blend_stages(plans, len(prefixes))
    drawn = np.bincount(di.astype(np.int64), minlength=len(prefixes)).tolist()
    jobs = [(p, train_range(p), int(n), "train") for p, n in zip(prefixes, drawn, strict=True) if n]
    built = iter(build_all(jobs))
    datasets: list[Nanoset | None] = [next(built) if n else None for n in drawn]
    return StagedNanoset(datasets, plans, total, config, prefixes=prefixes)
