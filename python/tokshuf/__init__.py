"""tokshuf: raw text corpora to training-ready tokens, with a Rust core.

* :func:`preprocess` — JSON lines to Megatron-compatible ``.bin/.idx``;
* :class:`IndexedDataset`, :class:`IndexedDatasetWriter`, :func:`merge` — the indexed format;
* the ``tokshuf`` command line (``tokshuf --help``).
"""

from tokshuf._core import __version__
from tokshuf.errors import BadInputError, ConfigError, FormatError, TokshufError
from tokshuf.indexed import IndexedDataset, IndexedDatasetWriter, merge
from tokshuf.preprocess import preprocess

__all__ = [
    "BadInputError",
    "ConfigError",
    "FormatError",
    "IndexedDataset",
    "IndexedDatasetWriter",
    "TokshufError",
    "__version__",
    "merge",
    "preprocess",
]
