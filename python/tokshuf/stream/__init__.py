"""The stateful, distributed, rescalable streaming loader.

Pieces, from the data up:

* :class:`SubDataset` — the files of one format behind a :class:`FileHandler`;
* :class:`TokenStream` — sub-datasets + settings; ``stream.worker(g, W, state)`` is the batch
  iterator of global worker ``g`` of ``W`` (the hot path runs in Rust);
* :class:`StreamingDataset` / :class:`StreamingDataLoader` — the torch integration, with
  ``state_dict()`` matching consumed batches (import needs torch);
* :func:`save_state` / :func:`load_state` — checkpoints (JSON + ``.npy``, manifest, commit marker);
* :class:`LoaderConfig` / :func:`build_dataloader` — config → DataLoader, Bamba-style;
* :class:`MixPhase` — a phase of a mix schedule (``docs/mixes.md``).
"""

from typing import Any

from tokshuf._deprecation import moved_module
from tokshuf._inspect import checkpoint as _checkpoint
from tokshuf._inspect.checkpoint import render, summarize
from tokshuf.stream.checkpoint import commit, load_state, save_state
from tokshuf.stream.config import LoaderConfig, build_dataloader, build_stream
from tokshuf.stream.handlers import FileHandler, HandlerReader, IndexedHandler, NpyHandler, register_handler
from tokshuf.stream.handlers_arrow import ArrowHandler
from tokshuf.stream.handlers_parquet import ParquetHandler
from tokshuf.stream.handlers_tar import TarHandler
from tokshuf.stream.mix import MixPhase
from tokshuf.stream.sources import SubDataset
from tokshuf.stream.state import merge_states, worker_tables
from tokshuf.stream.stream import TokenStream, WorkerStream
from tokshuf.stream.text_tokenizer import ByteTokenizer, resolve_tokenizer

__all__ = [
    "ArrowHandler",
    "ByteTokenizer",
    "FileHandler",
    "HandlerReader",
    "IndexedHandler",
    "LoaderConfig",
    "MixPhase",
    "NpyHandler",
    "ParquetHandler",
    "StreamingDataLoader",
    "StreamingDataset",
    "SubDataset",
    "TarHandler",
    "TokenStream",
    "WorkerStream",
    "build_dataloader",
    "build_stream",
    "commit",
    "load_state",
    "merge_states",
    "register_handler",
    "render",
    "resolve_tokenizer",
    "save_state",
    "summarize",
    "worker_tables",
]

# Checkpoint summaries live with the other inspect reports; their old module still imports.
moved_module("tokshuf.stream.inspect", _checkpoint, "tokshuf.stream")


def __getattr__(name: str) -> Any:
    # The torch classes load on first use, so `import tokshuf.stream` works without torch.
    if name in ("StreamingDataLoader", "StreamingDataset"):
        from tokshuf.stream import loader

        return getattr(loader, name)
    raise AttributeError(name)
