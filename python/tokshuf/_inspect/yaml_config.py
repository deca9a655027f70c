"""Blend configs from YAML: nanotron's (``data.dataset`` / ``data_stages``, via
:meth:`NanosetConfig.from_yaml`) or Megatron-LM's argument names (``data_path``, ``seq_length``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from tokshuf._limits import integer
from tokshuf.errors import ConfigError
from tokshuf.nanoset import NanosetConfig

__all__ = ["load_blend_yaml"]


def _megatron_data_path(value: Any) -> Any:
    """``[0.3, a, 0.7, b]`` (``--data-path 0.3 a 0.7 b``) → ``{a: 0.3, b: 0.7}``; prefixes alone
    stay a list (an unweighted blend), one prefix a string."""
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not value:
        raise ConfigError(f"data_path must be a prefix or a list such as [0.3, a, 0.7, b], got {value!r}")
    if len(value) == 1:
        return str(value[0])
    if len(value) % 2 == 0 and all(_is_number(w) for w in value[::2]):
        return {str(p): float(w) for w, p in zip(value[::2], value[1::2], strict=True)}
    return [str(p) for p in value]


def _is_number(x: Any) -> bool:
    if isinstance(x, int | float) and not isinstance(x, bool):
        return True
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def _optional(root: dict[str, Any], key: str, minimum: int = 0) -> int | None:
    """``root[key]`` as a count (``None`` when absent or null), else a :class:`ConfigError`
    naming the key."""
    value = root.get(key)
    return None if value is None else integer(value, key, minimum)


def _count(root: dict[str, Any], key: str, default: int, minimum: int = 0) -> int:
    found = _optional(root, key, minimum)
    return default if found is None else found


def _megatron(root: dict[str, Any]) -> tuple[NanosetConfig, int | None]:
    gbs = _optional(root, "global_batch_size", minimum=1)
    train_iters = _optional(root, "train_iters")
    train = _optional(root, "train_samples")
    if train is not None:
        if train_iters is None and gbs:
            train_iters = train // gbs
    elif train_iters is not None and gbs:
        train = train_iters * gbs
    valid = test = None
    if train_iters is not None and gbs:
        # Megatron's get_train_valid_test_num_samples (defaults eval_interval 1000, eval_iters 100).
        eval_iters = _count(root, "eval_iters", 100)
        eval_interval = _count(root, "eval_interval", 1000, minimum=1)
        valid = (train_iters // eval_interval + 1) * eval_iters * gbs
        test = eval_iters * gbs
    fields: dict[str, Any] = {
        "data_path": _megatron_data_path(root["data_path"]),
        "sequence_length": root["seq_length"],
        "split": str(root.get("split", "969, 30, 1")),
        "seed": root.get("seed", 1234),
        "num_samples": (train, valid, test),
    }
    if root.get("data_cache_path"):
        fields["cache_dir"] = str(root["data_cache_path"])
    return NanosetConfig.from_dict(fields), gbs


def load_blend_yaml(path: Path, *, stage: int | str | None = None) -> tuple[NanosetConfig, int | None]:
    """The config (several nanotron ``data_stages``: the staged run, unless ``stage`` picks one),
    and the global batch size the file implies (``None`` if it says nothing). A value of the wrong
    kind is a :class:`ConfigError` naming the file and the key."""
    try:
        root = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not YAML: {e}") from None
    if not isinstance(root, dict):
        raise ConfigError(f"{path}: the YAML document must be a mapping")
    try:
        if "seq_length" in root and "data_path" in root:
            return _megatron(root)
        tokens = _section(root, "tokens")
        gbs = None
        if "micro_batch_size" in tokens:
            gbs = math.prod(
                (
                    _count(tokens, "micro_batch_size", 1, minimum=1),
                    _count(tokens, "batch_accumulation_per_replica", 1, minimum=1),
                    _count(_section(root, "parallelism"), "dp", 1, minimum=1),
                )
            )
        return NanosetConfig.from_yaml(path, stage=stage), gbs
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def _section(root: dict[str, Any], key: str) -> dict[str, Any]:
    value = root.get(key) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{key} must be a mapping, got {value!r}")
    return value
