"""tokshuf: raw text corpora to training-ready tokens, with a Rust core.

* :func:`preprocess` — JSON lines to Megatron-compatible ``.bin/.idx``;
* :class:`Tokenizer` — Hugging Face / tiktoken / byte tokenizers from the Rust core;
* :class:`IndexedDataset`, :class:`IndexedDatasetWriter`, :func:`merge` — the indexed format;
* :class:`NanosetConfig`, :func:`build_nanosets`, :class:`Nanoset`, :class:`BlendedNanoset` —
  Megatron-identical training datasets;
* :func:`shuffle` — JSON lines to globally shuffled webdataset shards (open_lm / DCLM);
* the ``tokshuf`` command line (``tokshuf --help``).
"""

from tokshuf._core import __version__
from tokshuf.errors import BadInputError, ConfigError, FormatError, TokshufError
from tokshuf.indexed import IndexedDataset, IndexedDatasetWriter, merge
from tokshuf.nanoset import BlendedNanoset, Nanoset, NanosetConfig, build_nanosets
from tokshuf.preprocess import preprocess
from tokshuf.shuffle import shuffle
from tokshuf.tokenizer import Tokenizer

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
    "merge",
    "preprocess",
    "shuffle",
]
