"""The instance strategies by their command-line names, so that a dataset recorded as
``(strategy, paths, arguments)`` (``tokshuf instances``'s summary file) can be opened again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokshuf.errors import ConfigError
from tokshuf.instances._base import InstanceDataset
from tokshuf.instances.concat import FSLDataset
from tokshuf.instances.interleaved import InterleavedFSLDataset
from tokshuf.instances.packed import PackedFSLDataset
from tokshuf.instances.padded import PaddedFSLDataset
from tokshuf.instances.vsl import VSLDataset

__all__ = ["STRATEGIES", "open_strategy", "strategy_of"]

STRATEGIES: dict[str, type[InstanceDataset]] = {
    "fsl": FSLDataset,
    "padded": PaddedFSLDataset,
    "packed": PackedFSLDataset,
    "interleaved": InterleavedFSLDataset,
    "vsl": VSLDataset,
}


def strategy_of(dataset: InstanceDataset) -> str:
    """The name of ``dataset``'s strategy (of its class or the nearest base in :data:`STRATEGIES`)."""
    for cls in type(dataset).__mro__:
        for name, known in STRATEGIES.items():
            if cls is known:
                return name
    raise ConfigError(f"{type(dataset).__name__} is not one of the instance strategies {list(STRATEGIES)}")


def open_strategy(strategy: str, paths: Sequence[str], arguments: Mapping[str, Any]) -> InstanceDataset:
    """The dataset of ``strategy`` over ``paths``, with its class's keyword ``arguments``."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown instance strategy {strategy!r}: expected one of {list(STRATEGIES)}")
    # Each class takes its own keywords (and the shared options), which ``arguments`` holds.
    cls: Any = STRATEGIES[strategy]
    dataset: InstanceDataset = cls(*paths, **arguments)
    return dataset
