"""Mix schedules: the weights of the sub-datasets, phase by phase.

A phase starts at a training step (the number of steps before it; or at a token count, turned
into a step) and its weights apply to every token the workers draw for batches of that step
onwards, until the next phase. The checkpoint records the schedule as it ran (``manifest["mix"]``:
integer weights per phase); a resume continues it. A schedule given on resume that differs from
the recorded one from the resume step on takes over **from that step**: what was drawn before
keeps its mix, and a change of the weights in force is a new phase at the resume step (logged).
See ``docs/mixes.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import lcm
from typing import Any

import numpy as np

from tokshuf.errors import ConfigError

__all__ = ["MixPhase", "Phase", "effective_mix", "integer_weights", "phase_at", "resolve_schedule"]

#: A resolved phase: (first step, integer weights per sub-dataset).
Phase = tuple[int, tuple[int, ...]]


def integer_weights(weights: Sequence[float]) -> list[int]:
    """Exact integer ratios for the mixer: ``[0.6, 0.4] -> [3, 2]``, ``[1456, 1835] -> same``.

    Decimals are taken as written (``Fraction(str(w))``); if the common denominator gets too
    large, weights are rounded to 2^-40 of the total."""
    if not weights or any((not np.isfinite(w)) or w < 0 for w in weights) or not any(w > 0 for w in weights):
        raise ConfigError(f"weights {list(weights)}: need non-negative numbers, at least one positive")
    fr = [Fraction(str(w)) if isinstance(w, float) else Fraction(w) for w in weights]
    den = 1
    for f in fr:
        den = lcm(den, f.denominator)
    ints = [int(f * den) for f in fr]
    g = np.gcd.reduce([i for i in ints if i]) if any(ints) else 1
    ints = [i // int(g) for i in ints]
    if max(ints) <= 1 << 40:
        return ints
    total = sum(fr)
    return [round(f / total * (1 << 40)) for f in fr]


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or int(v) < 0:
        raise ConfigError(f"{what} must be a non-negative integer, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class MixPhase:
    """One phase of a mix schedule.

    Parameters
    ----------
    weights
        ``{name: weight}`` naming every sub-dataset (0 leaves one out), or one weight per
        sub-dataset in the stream's order, or a comma-separated string of those.
    start_step
        The phase starts after this many training steps (0: from the start).
    start_tokens
        Or: the phase starts at the first step that begins with at least this many tokens
        consumed, counting ``world_size x batch_size x sequence_length`` per step at the current
        topology (keep the global batch fixed for the whole run, or give steps).
    """

    weights: Mapping[str, float] | Sequence[float] | str
    start_step: int | None = None
    start_tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.start_step is None) == (self.start_tokens is None):
            raise ConfigError(
                f"a mix phase starts at a step or at a token count: give exactly one of start_step and "
                f"start_tokens (got start_step={self.start_step!r}, start_tokens={self.start_tokens!r})"
            )
        if self.start_step is not None:
            _int(self.start_step, "start_step")
        if self.start_tokens is not None:
            _int(self.start_tokens, "start_tokens")

    @classmethod
    def of(cls, value: MixPhase | Mapping[str, Any]) -> MixPhase:
        """A phase from itself or from a mapping with its field names (a config file's form)."""
        if isinstance(value, MixPhase):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"a mix phase must be a MixPhase or a mapping with weights and start_step or start_tokens, "
                f"got {value!r}"
            )
        unknown = sorted(set(value) - {"weights", "start_step", "start_tokens"})
        if unknown or "weights" not in value:
            raise ConfigError(
                f"mix phase {dict(value)!r}: the keys are weights and start_step or start_tokens"
                + (f" (unknown: {unknown})" if unknown else "")
            )
        return cls(value["weights"], value.get("start_step"), value.get("start_tokens"))

    def weights_for(self, names: Sequence[str]) -> list[int]:
        """The integer weights of sub-datasets ``names``, in that order."""
        w = self.weights
        if isinstance(w, str):
            w = [float(x) for x in w.split(",") if x.strip()]
        if isinstance(w, Mapping):
            unknown = sorted(set(w) - set(names))
            missing = [n for n in names if n not in w]
            if unknown or missing:
                raise ConfigError(
                    f"mix phase weights {dict(w)!r} must name every sub-dataset of {list(names)} "
                    "(0 leaves one out)"
                    + (f"; unknown: {unknown}" if unknown else "")
                    + (f"; missing: {missing}" if missing else "")
                )
            values = [float(w[n]) for n in names]
        else:
            values = [float(x) for x in w]
            if len(values) != len(names):
                raise ConfigError(f"mix phase has {len(values)} weights for the sub-datasets {list(names)}")
        return integer_weights(values)


def resolve_schedule(
    base: Sequence[int], schedule: Sequence[MixPhase], names: Sequence[str], tokens_per_step: int
) -> list[Phase]:
    """The schedule as (first step, integer weights), sorted, the first at step 0. Until the first
    phase of ``schedule``, the sub-datasets' own weights ``base`` apply."""
    out: dict[int, tuple[int, ...]] = {0: tuple(base)}
    given: dict[int, MixPhase] = {}
    for p in schedule:
        if p.start_step is not None:
            step = p.start_step
        else:
            assert p.start_tokens is not None
            step = math.ceil(p.start_tokens / max(tokens_per_step, 1))
        if step in given:
            raise ConfigError(f"two mix phases start at step {step}: {given[step]} and {p}")
        given[step] = p
        out[step] = tuple(p.weights_for(names))
    return sorted(out.items())


def phase_at(mix: Sequence[Phase], step: int) -> int:
    """The index of the phase in force at ``step``."""
    k = 0
    for i, (start, _) in enumerate(mix):
        if start <= step:
            k = i
    return k


def effective_mix(
    recorded: Sequence[Phase], configured: Sequence[Phase], step: int
) -> tuple[list[Phase], bool]:
    """The schedule of a run resumed at ``step``: the recorded phases before it (what ran), then
    the configured ones from it on; if the configured weights in force at ``step`` differ from
    the recorded ones, a phase starts at ``step``. Returns it and whether anything from ``step``
    on differs from the recording."""
    past = [p for p in recorded if p[0] < step]
    future = [p for p in configured if p[0] >= step]
    current = configured[phase_at(configured, step)]
    if current[0] < step and (not past or past[-1][1] != current[1]):
        future.insert(0, (step, current[1]))
    out = past + future
    # The recording from `step` on, as the same function of it, for the comparison.
    rec_future = [p for p in recorded if p[0] >= step]
    rec_current = recorded[phase_at(recorded, step)] if recorded else None
    if rec_current is not None and rec_current[0] < step and (not past or past[-1][1] != rec_current[1]):
        rec_future.insert(0, (step, rec_current[1]))
    return out, rec_future != out[len(past) :]


def mix_json(mix: Sequence[Phase]) -> list[dict[str, Any]]:
    """The manifest's form of a schedule."""
    return [{"start_step": int(s), "weights": [int(x) for x in w]} for s, w in mix]


def mix_of_json(value: Any, n_sub: int) -> list[Phase]:
    """A schedule from the manifest, checked: a list of ``{start_step, weights}``, steps increasing
    from 0, ``n_sub`` non-negative integer weights each, one positive."""
    from tokshuf.errors import FormatError

    if not isinstance(value, list) or not value:
        raise FormatError(
            f"the stream state's manifest 'mix' must be a non-empty list of phases, got {value!r}"
        )
    out: list[Phase] = []
    for k, p in enumerate(value):
        step: Any = p.get("start_step") if isinstance(p, Mapping) else None
        w: Any = p.get("weights") if isinstance(p, Mapping) else None
        ok = (
            isinstance(p, Mapping)
            and set(p) == {"start_step", "weights"}
            and isinstance(step, int)
            and step >= (out[-1][0] + 1 if out else 0)
            and (k > 0 or step == 0)
            and isinstance(w, list)
            and len(w) == n_sub
            and all(isinstance(x, int) and x >= 0 for x in w)
            and any(w)
        )
        if not ok:
            raise FormatError(
                f"the stream state's mix phase {k} is {p!r}: expected {{start_step, weights}} with steps "
                f"increasing from 0 and {n_sub} non-negative integer weights, one positive"
            )
        out.append((int(step), tuple(int(x) for x in w)))
    return out


def describe(weights: Sequence[int], names: Sequence[str]) -> str:
    """``web 50%, code 50%``."""
    total = sum(weights) or 1
    return ", ".join(f"{n} {100 * w / total:.3g}%" for n, w in zip(names, weights, strict=True))
