"""tokshuf: raw text corpora to training-ready tokens, with a Rust core.

* :func:`preprocess` — JSON lines to Megatron-compatible ``.bin/.idx``;
* :class:`Tokenizer` — Hugging Face / tiktoken / byte tokenizers from the Rust core;
* :class:`IndexedDataset`, :class:`IndexedDatasetWriter`, :func:`merge` — the indexed format;
* :class:`NanosetConfig`, :func:`build_nanosets`, :class:`Nanoset`, :class:`BlendedNanoset` —
  Megatron-identical training datasets;
* :func:`shuffle` — JSON lines to globally shuffled webdataset shards (open_lm / DCLM);
* :func:`inspect` — a typed report on any of these artifacts (``tokshuf inspect``);
* the ``tokshuf`` command line (``tokshuf --help``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tokshuf._core import __version__
from tokshuf.errors import BadInputError, ConfigError, FormatError, TokshufError

# Eager: light, and `inspect` / `preprocess` / `shuffle` share their names with submodules, whose
# import would otherwise shadow a lazily resolved function.
from tokshuf.inspect import inspect
from tokshuf.preprocess import preprocess
from tokshuf.shuffle import shuffle
from tokshuf.tokenizer import Tokenizer

if TYPE_CHECKING:
    from tokshuf.indexed import IndexedDataset, IndexedDatasetWriter, merge
    from tokshuf.nanoset import BlendedNanoset, Nanoset, NanosetConfig, build_nanosets

# Imported on first use, so that the command line (`tokshuf preprocess ...`) starts without
# numpy and the dataset modules.
_LAZY = {
    "IndexedDataset": "tokshuf.indexed",
    "IndexedDatasetWriter": "tokshuf.indexed",
    "merge": "tokshuf.indexed",
    "BlendedNanoset": "tokshuf.nanoset",
    "Nanoset": "tokshuf.nanoset",
    "NanosetConfig": "tokshuf.nanoset",
    "build_nanosets": "tokshuf.nanoset",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tokshuf' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BadInputError",
    "BlendedNanoset",
    "ConfigError",
    "FormatError",
    "IndexedDataset",
    "IndexedDatasetWriter",
    "Nanoset",
    "NanosetConfig",
    "Tokenizer",
    "TokshufError",
    "__version__",
    "build_nanosets",
    "inspect",
    "merge",
    "preprocess",
    "shuffle",
]
