"""tokshuf: raw text corpora to training-ready tokens, with a Rust core.

* :func:`preprocess` — JSON lines to Megatron-compatible ``.bin/.idx``;
* :class:`Tokenizer` — Hugging Face / tiktoken / byte tokenizers from the Rust core;
* :class:`IndexedDataset`, :class:`IndexedDatasetWriter`, :func:`merge` — the indexed format;
  :func:`merge_parts` — the outputs of a ``preprocess`` cut into tasks (``shard``);
* :class:`NanosetConfig`, :func:`build_nanosets`, :class:`Nanoset`, :class:`BlendedNanoset` —
  Megatron-identical training datasets;
* :func:`shuffle` — JSON lines to globally shuffled webdataset shards (open_lm / DCLM);
* the types of their options and summaries (:data:`OnError`, :class:`PreprocessSummary`, ...);
* :func:`inspect` — a typed report on any of these artifacts (``tokshuf inspect``);
* the ``tokshuf`` command line (``tokshuf --help``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokshuf import _preprocess, _shuffle
from tokshuf._core import __version__
from tokshuf._deprecation import moved_module
from tokshuf._inspect import inspect
from tokshuf._lazy import lazy_attributes
from tokshuf._preprocess import preprocess
from tokshuf._shuffle import SPECIAL_TOKEN_PRESETS, shuffle
from tokshuf._summaries import (
    MemberFormat,
    MergeSummary,
    OnError,
    PreprocessSummary,
    Progress,
    ShuffleSummary,
    SpecialTokenPreset,
)
from tokshuf.errors import BadInputError, ConfigError, FormatError, TokshufError
from tokshuf.tokenizer import Tokenizer

# `tokshuf.preprocess` and `tokshuf.shuffle` are the functions; their modules are private, and
# everything public in them is exported here (as `polars.concat` is a function and its module
# private). The modules' old names still import, deprecated.
moved_module("tokshuf.preprocess", _preprocess, "tokshuf")
moved_module("tokshuf.shuffle", _shuffle, "tokshuf")

if TYPE_CHECKING:
    from tokshuf.indexed import IndexedDataset, IndexedDatasetWriter, merge
    from tokshuf.nanoset import BlendedNanoset, Nanoset, NanosetConfig, build_nanosets
    from tokshuf.parts import merge_parts

# Imported on first use, so that the command line (`tokshuf preprocess ...`) starts without
# numpy and the dataset modules.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "IndexedDataset": "tokshuf.indexed",
        "IndexedDatasetWriter": "tokshuf.indexed",
        "merge": "tokshuf.indexed",
        "merge_parts": "tokshuf.parts",
        "BlendedNanoset": "tokshuf.nanoset",
        "Nanoset": "tokshuf.nanoset",
        "NanosetConfig": "tokshuf.nanoset",
        "build_nanosets": "tokshuf.nanoset",
    },
)


__all__ = [
    "SPECIAL_TOKEN_PRESETS",
    "BadInputError",
    "BlendedNanoset",
    "ConfigError",
    "FormatError",
    "IndexedDataset",
    "IndexedDatasetWriter",
    "MemberFormat",
    "MergeSummary",
    "Nanoset",
    "NanosetConfig",
    "OnError",
    "PreprocessSummary",
    "Progress",
    "ShuffleSummary",
    "SpecialTokenPreset",
    "Tokenizer",
    "TokshufError",
    "__version__",
    "build_nanosets",
    "inspect",
    "merge",
    "merge_parts",
    "preprocess",
    "shuffle",
]
