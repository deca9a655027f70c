"""Resuming a run where it stopped, the way nanotron does, without importing torch.

The dataset order is already shuffled, so the sampler walks it in order: rank ``r`` of ``R`` takes
indices ``r, r + R, r + 2R, ...`` (torch's ``DistributedSampler(shuffle=False, drop_last=True)``) and,
after ``consumed_samples`` samples were trained on, skips its first ``consumed_samples // R``
(nanotron's ``SkipBatchSampler``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sized
from typing import Protocol

from tokshuf.errors import ConfigError

__all__ = ["SkipSampler", "resume_sampler"]


class _SizedIterable(Iterable[int], Sized, Protocol):
    pass


class SkipSampler:
    """Any sampler (e.g. torch's ``DistributedSampler``) without its first ``skip`` indices."""

    def __init__(self, sampler: _SizedIterable, skip: int) -> None:
        if skip < 0:
            raise ConfigError(f"skip must be non-negative, got {skip}")
        self.sampler = sampler
        self.skip = skip

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(iter(self.sampler), self.skip, None)

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.skip)


class _Strided:
    """``DistributedSampler(shuffle=False)``: the same indices, without torch."""

    def __init__(self, length: int, num_replicas: int, rank: int, drop_last: bool) -> None:
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ConfigError(f"need 0 <= rank < num_replicas, got rank {rank} of {num_replicas}")
        if drop_last and length % num_replicas:
            self.per_rank = (length - num_replicas) // num_replicas + 1 if length >= num_replicas else 0
        else:
            self.per_rank = -(-length // num_replicas)
        self.length, self.num_replicas, self.rank = length, num_replicas, rank

    def __iter__(self) -> Iterator[int]:
        total = self.per_rank * self.num_replicas
        for j in range(self.rank, total, self.num_replicas):
            yield j % self.length  # wraps only when padding (drop_last=False), as torch does

    def __len__(self) -> int:
        return self.per_rank


def resume_sampler(
    dataset: Sized,
    consumed_samples: int = 0,
    *,
    num_replicas: int = 1,
    rank: int = 0,
    drop_last: bool = True,
) -> SkipSampler:
    """The sampler for data-parallel rank ``rank`` of ``num_replicas`` resuming after
    ``consumed_samples`` samples (counted over all ranks), as nanotron does.

    Pass it as ``DataLoader(dataset, sampler=..., batch_size=micro_batch_size)``.
    """
    if consumed_samples < 0:
        raise ConfigError(f"consumed_samples must be non-negative, got {consumed_samples}")
    return SkipSampler(
        _Strided(len(dataset), num_replicas, rank, drop_last), consumed_samples // num_replicas
    )
