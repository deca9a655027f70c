"""Seeds as numpy (and so OLMo-core) reads them: any non-negative integer, however large.

numpy's ``default_rng(seed)`` feeds ``SeedSequence`` the seed's 32-bit words, least significant
first (``[0]`` for 0), and a list of integers as the concatenation of each one's words. The Rust
generators take those words, so a seed of 2**64 or more gives numpy's permutation too.
"""

from __future__ import annotations

import operator
from typing import Any

from tokshuf.errors import ConfigError

__all__ = ["check_seed", "seed_entropy"]

_WORD = 0xFFFF_FFFF


def check_seed(name: str, value: Any) -> int:
    """``value`` as a Python int: an integer (numpy's included) that is not negative."""
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    try:
        seed = operator.index(value)
    except TypeError:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}") from None
    if seed < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {seed}")
    return seed


def seed_entropy(*values: int) -> list[int]:
    """The uint32 words numpy's ``SeedSequence`` makes of ``values`` (each non-negative)."""
    words = []
    for v in values:
        if v < 0:
            raise ConfigError(f"a seed must be non-negative, got {v}")
        words.append(v & _WORD)
        v >>= 32
        while v:
            words.append(v & _WORD)
            v >>= 32
    return words
