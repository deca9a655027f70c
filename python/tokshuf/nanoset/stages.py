"""Staged runs: the train samples of several data stages, one after the other, as nanotron runs
its ``data_stages``.

Each stage owns the training steps from its ``start_step`` to the next stage's, and blends its own
prefixes by its own weights (Megatron's greedy blending, restarted at the stage's first sample).
A prefix read by several stages continues where the earlier stages left it: its samples are
numbered once for the whole run (one :class:`Nanoset` per prefix), and a stage's k-th draw from it
is sample ``k + (samples drawn from it by the earlier stages)``, nanotron's
``offsets_in_samples``. Global step ``s`` reads samples ``[s·B, (s+1)·B)`` of the run (``B`` the
global batch), so a resume after ``consumed_samples`` samples, at any step, even at a stage
boundary, continues with the stage that owns the next step.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tokshuf.errors import ConfigError

__all__ = ["NanosetStage", "check_stages", "stage_weights"]

DataPath = str | list[str] | dict[str, float]


@dataclasses.dataclass(frozen=True)
class NanosetStage:
    """One data stage of a staged run.

    Parameters
    ----------
    name
        The stage's name (nanotron's ``data_stages[].name``), unique in the run.
    start_step
        Training steps before the stage starts: 0 for the first stage (nanotron's
        ``start_training_step`` counts from 1, so it is ``start_training_step - 1``).
    data_path
        The stage's blend: one prefix, a list of prefixes (equal weights, as nanotron's staged
        runs read a list of folders), or ``{prefix: weight}``.
    """

    name: str
    start_step: int
    data_path: DataPath

    def __post_init__(self) -> None:
        path = self.data_path
        if isinstance(path, Mapping):
            object.__setattr__(self, "data_path", {str(k): v for k, v in path.items()})
        elif isinstance(path, Sequence) and not isinstance(path, str):
            object.__setattr__(self, "data_path", [str(p) for p in path])
        if isinstance(self.start_step, bool) or not isinstance(self.start_step, int | np.integer):
            raise ConfigError(f"stage {self.name!r}: start_step must be an integer, got {self.start_step!r}")
        object.__setattr__(self, "start_step", int(self.start_step))
        if self.start_step < 0:
            raise ConfigError(f"stage {self.name!r}: start_step must be non-negative, got {self.start_step}")
        if not stage_weights(self.data_path):
            raise ConfigError(f"stage {self.name!r}: its data_path {self.data_path!r} names no prefix")

    @classmethod
    def of(cls, value: NanosetStage | Mapping[str, Any]) -> NanosetStage:
        if isinstance(value, NanosetStage):
            return value
        if not isinstance(value, Mapping) or set(value) != {"name", "start_step", "data_path"}:
            raise ConfigError(
                f"a stage is a NanosetStage or a mapping of name, start_step, data_path; got {value!r}"
            )
        return cls(value["name"], value["start_step"], value["data_path"])


def stage_weights(data_path: DataPath) -> dict[str, float]:
    """``{prefix: weight}`` of a stage (normalized later, as nanotron does)."""
    if isinstance(data_path, str):
        return {data_path: 1.0}
    if isinstance(data_path, Mapping):
        out: dict[str, float] = {}
        for k, w in data_path.items():
            if isinstance(w, bool) or not isinstance(w, int | float) or not np.isfinite(w) or w < 0:
                raise ConfigError(f"the weight of {k!r} is {w!r}; weights must be non-negative numbers")
            out[k] = float(w)
        if out and not any(out.values()):
            raise ConfigError(f"the weights {out} are all zero")
        return out
    return dict.fromkeys(data_path, 1.0)


def check_stages(stages: Sequence[NanosetStage], global_batch_size: int | None) -> None:
    """Stages in order of their start, the first at step 0, distinct names and starts, and the
    global batch that turns steps into samples."""
    if not stages:
        return
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) or global_batch_size < 1:
        raise ConfigError(
            f"a staged run needs global_batch_size (samples per training step), got {global_batch_size!r}"
        )
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ConfigError(f"stage names must be unique, got {names}")
    starts = [s.start_step for s in stages]
    if starts[0] != 0 or any(b <= a for a, b in itertools.pairwise(starts)):
        raise ConfigError(
            f"stages must start at increasing steps, the first at step 0 (nanotron's start_training_step 1); "
            f"got {dict(zip(names, starts, strict=True))}"
        )
