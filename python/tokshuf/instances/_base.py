"""What every instance dataset shares: sources, the index cache, batches filled in Rust,
pickling by path."""

from __future__ import annotations

import copy
import inspect
import operator
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from tokshuf import _arrays, _cache, _core, _limits
from tokshuf._deprecation import renamed_attribute, renamed_parameters
from tokshuf.errors import ConfigError
from tokshuf.instances._options import (
    OPTIONS_DOC,
    InstanceOptions,
    PathLike,
    signature_with_options,
    with_defaults,
)
from tokshuf.instances._sources import DocumentRule, Source, resolve_sources
from tokshuf.olmo_tokens import BOUNDARIES, Boundaries

__all__ = ["InstanceDataset"]

Batch = dict[str, Any]


class InstanceDataset:
    """Base of the map-style instance datasets (``len(ds)``, ``ds[i] -> dict``, ``get_batch``).

    Subclasses build their index arrays in ``_open`` and return the Rust reader. Their
    ``__init__`` takes its own keywords and the shared ``**options`` (:class:`InstanceOptions`);
    each subclass gets the options' documentation, their old names and a signature that spells
    them out here. Instances pickle by their arguments: a DataLoader worker reopens the memory
    maps and finds the index in the cache instead of rebuilding it.
    """

    #: Whether instances carry a ``label_mask`` (False on padding).
    _label_mask: ClassVar[bool] = True

    work_dir = renamed_attribute[Path]("cache_dir")
    threads = renamed_attribute[int | None]("num_threads")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__doc__:
            cls.__doc__ = f"{inspect.cleandoc(cls.__doc__)}\n\n{OPTIONS_DOC}"
        init = cls.__dict__.get("__init__")
        if init is not None:
            wrapped = renamed_parameters(work_dir="cache_dir", threads="num_threads")(init)
            wrapped.__signature__ = signature_with_options(init)  # type: ignore[attr-defined]
            cls.__init__ = wrapped  # type: ignore[method-assign]

    def __init__(
        self,
        paths: tuple[PathLike, ...],
        sequence_length: int,
        strategy: Mapping[str, Any],
        options: InstanceOptions,
    ) -> None:
        """A subclass's ``paths``, window length, own arguments (kept to pickle it by, with the
        rest) and ``**options``."""
        o = with_defaults(options, type(self).__name__)
        pad_token_id, eos_token_id, bos_token_id = o["pad_token_id"], o["eos_token_id"], o["bos_token_id"]
        vocab_size, dtype, num_threads = o["vocab_size"], o["dtype"], o["num_threads"]
        document_boundaries, cache_dir = o["document_boundaries"], o["cache_dir"]
        label_mask_paths, metadata = o["label_mask_paths"], o["metadata"]
        # The command line's rules (tokshuf._limits), checked before anything is read or
        # allocated; numpy integers become Python ints (they go into the cache key's JSON).
        sequence_length = _limits.sequence_length(sequence_length)
        pad_token_id = _limits.token_id(pad_token_id, "pad_token_id")
        eos_token_id = _limits.token_id(eos_token_id, "eos_token_id")
        bos_token_id = _limits.token_id(bos_token_id, "bos_token_id", optional=True)
        vocab_size = _limits.integer(vocab_size, "vocab_size", 1, 2**64, optional=True)
        if dtype is not None:
            dtype = _limits.integer_dtype(dtype)
        _limits.check_num_threads(num_threads)
        if document_boundaries not in BOUNDARIES:
            raise ConfigError(
                f"document_boundaries must be one of {list(BOUNDARIES)}, got {document_boundaries!r}"
            )
        # The Rust reader maps the index arrays from their cache files: there is no in-memory build.
        if not (cache_dir is None or isinstance(cache_dir, str | os.PathLike)):
            raise ConfigError(
                f"cache_dir must be a directory or None (the default cache root), got {cache_dir!r}; "
                "instance datasets always keep their index arrays in the cache"
            )
        self._args: dict[str, Any] = {
            "paths": tuple(os.fspath(p) for p in paths),
            "sequence_length": sequence_length,
            "pad_token_id": pad_token_id,
            "eos_token_id": eos_token_id,
            "bos_token_id": bos_token_id,
            "vocab_size": vocab_size,
            "dtype": None if dtype is None else np.dtype(dtype).name,
            "document_boundaries": document_boundaries,
            "label_mask_paths": None
            if label_mask_paths is None
            else [os.fspath(p) for p in label_mask_paths],
            "metadata": metadata,
            "cache_dir": None if cache_dir is None else os.fspath(cache_dir),
            "num_threads": num_threads,
            **strategy,
        }
        if vocab_size is not None:
            for name, tok in (("pad", pad_token_id), ("eos", eos_token_id), ("bos", bos_token_id)):
                if tok is not None and not 0 <= tok < vocab_size:
                    raise ConfigError(f"{name}_token_id {tok} is outside the vocabulary [0, {vocab_size})")
        self.sequence_length = sequence_length
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id
        self.bos_token_id = bos_token_id
        self.vocab_size = vocab_size
        self.document_boundaries: Boundaries = document_boundaries
        self.num_threads = num_threads
        self.cache_dir = _cache.cache_root(cache_dir)
        self.sources: list[Source] = resolve_sources(tuple(paths), dtype, vocab_size)
        self._identities = [s.identity() for s in self.sources]
        self._origins = [s.boundary_source(self._document_rule()) for s in self.sources]
        self.label_mask_paths = [str(Path(p).resolve()) for p in label_mask_paths or ()]
        if label_mask_paths is not None and len(self.label_mask_paths) != len(self.sources):
            raise ConfigError(
                f"{len(self.label_mask_paths)} label_mask_paths for {len(self.sources)} paths; "
                "give one per path"
            )
        if metadata is None or isinstance(metadata, dict):
            # As OLMo-core: an empty dict means no metadata (items have no "metadata" key).
            self.metadata: list[dict[str, Any]] | None = [metadata] * len(paths) if metadata else None
        else:
            self.metadata = list(metadata)
            if len(self.metadata) != len(paths):
                raise ConfigError(
                    f"{len(self.metadata)} metadata dicts for {len(paths)} paths; give one per path"
                )
        self.cache_path: Path | None = None
        self._reader: _core.InstanceReader = self._open()
        if self._uses_documents():
            for s in self.sources:
                s.warn_if_metadata_disagrees(self._document_rule())

    # -- subclass hooks -----------------------------------------------------------------------
    def _open(self) -> _core.InstanceReader:
        raise NotImplementedError

    def _strategy_fields(self) -> dict[str, Any]:
        """Parameters of the strategy that change its index arrays."""
        return {}

    def _wants_doc_lens(self) -> bool:
        return False

    def _uses_documents(self) -> bool:
        """Whether the instances depend on where documents start and end."""
        return True

    # -- helpers for subclasses ---------------------------------------------------------------
    def _fields(self) -> dict[str, Any]:
        """Everything the index depends on: the data's identity and the strategy's parameters."""
        return {
            "class": type(self).__name__,
            "sources": self._identities,
            "documents": self._origins,
            "sequence_length": self.sequence_length,
            "eos": self.eos_token_id,
            "bos": self.bos_token_id,
            **self._strategy_fields(),
        }

    @property
    def fingerprint(self) -> str:
        """A hash of the data's identity and every parameter that shapes the instances."""
        masks = [_cache.file_identity(p) for p in self.label_mask_paths]
        return _cache.key_of({**self._fields(), "pad": self.pad_token_id, "label_masks": masks})

    def _documents(self) -> list[tuple[Path, npt.NDArray[np.uint64]]]:
        """Per source: (cache file, local ``(n, 2)`` document spans)."""
        return [s.documents(self._document_rule()) for s in self.sources]

    def _document_rule(self) -> DocumentRule:
        """How the sources find and cache their documents: this dataset's options."""
        return DocumentRule(
            self.cache_dir, self.eos_token_id, self.bos_token_id, self.document_boundaries, self.num_threads
        )

    def _global_spans(self) -> list[npt.NDArray[np.uint64]]:
        """Per source: its document spans in the dataset's global token space."""
        offsets = np.cumsum([0] + [s.num_tokens for s in self.sources], dtype=np.uint64)
        return [spans + offsets[i] for i, (_, spans) in enumerate(self._documents())]

    def _make_reader(self, kind: str, *, label_masks: bool = True, **layout: Any) -> _core.InstanceReader:
        """The Rust reader; without ``label_masks`` its masks are False on padding only."""
        return _core.InstanceReader(
            [s.reader_spec() for s in self.sources],
            kind,
            self.sequence_length,
            self.pad_token_id,
            self.eos_token_id,
            self.bos_token_id,
            label_masks=self.label_mask_paths if label_masks else [],
            **layout,
        )

    # -- pickling by arguments ----------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return dict(self._args)

    def __setstate__(self, state: dict[str, Any]) -> None:
        args = dict(state)
        paths = args.pop("paths")
        type(self).__init__(self, *paths, **args)

    def __repr__(self) -> str:
        name, n = type(self).__name__, len(self.sources)
        return f"{name}({n} sources, {len(self)} instances, fingerprint={self.fingerprint[:12]})"

    # -- the map-style interface --------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._reader)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(s.path for s in self.sources)

    def _width(self, idx: npt.NDArray[np.int64]) -> int:
        return self.sequence_length

    def _check(self, indices: npt.ArrayLike) -> npt.NDArray[np.int64]:
        idx = np.asarray(indices)
        if idx.size == 0:
            idx = idx.astype(np.int64)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got {idx.dtype}")
        idx = idx.astype(np.int64).reshape(-1)
        n = len(self)
        idx = np.where(idx < 0, idx + n, idx)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            bad = next(int(i) for i in np.asarray(indices).reshape(-1) if not -n <= int(i) < n)
            raise IndexError(f"index {bad} is out of range for {n} instances")
        return idx

    def get_batch(self, indices: npt.ArrayLike) -> Batch:
        """The instances ``indices`` as one batch, filled in Rust with the GIL released.

        Keys follow OLMo-core's collated batches: ``input_ids`` (int64 ``[B, S]``, right-padded with
        ``pad_token_id``), ``label_mask`` (bool, False on padding; padded, packed and interleaved
        datasets), ``doc_lens`` (int32 ``[B, max_docs]``, zero-padded) and ``max_doc_lens``
        (``list[int]``) with ``generate_doc_lengths``, and ``index`` (int64 ``[B]``).
        """
        idx = self._check(indices)
        width = self._width(idx)
        ids = np.empty((idx.size, width), np.int64)
        want_mask = self._label_mask or bool(self.label_mask_paths) or self._needs_mask(idx, width)
        mask = np.empty((idx.size, width), np.bool_) if want_mask else None
        lens = self._reader.fill(
            idx.astype(np.uint64),
            ids,
            None if mask is None else mask.view(np.uint8),
            self._wants_doc_lens(),
            self.num_threads,
        )
        out: Batch = {"input_ids": ids}
        if mask is not None:
            out["label_mask"] = mask
        if lens is not None:
            flat = _arrays.view(lens[0], np.int32)
            counts = _arrays.view(lens[1], np.uint32).astype(np.int64)
            doc_lens = np.zeros((idx.size, int(counts.max(initial=0))), np.int32)
            rows = np.repeat(np.arange(idx.size), counts)
            cols = np.arange(flat.size) - np.repeat(np.cumsum(counts) - counts, counts)
            doc_lens[rows, cols] = flat
            out["doc_lens"] = doc_lens
            out["max_doc_lens"] = [int(m) for m in doc_lens.max(axis=1, initial=0)]
        out["index"] = idx
        if self.metadata is not None:
            out["metadata"] = self._metadata_of(idx)
        return out

    def _source_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The source (path) index of each instance."""
        raise NotImplementedError

    def _source_of_tokens(self, starts: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """The source holding each global token position."""
        bounds = np.cumsum([s.num_tokens for s in self.sources], dtype=np.uint64)
        return np.searchsorted(bounds, np.asarray(starts, np.uint64), side="right").astype(np.int64)

    def _metadata_of(self, idx: npt.NDArray[np.int64]) -> list[Any]:
        """Per instance, a copy of its source's metadata dict (as OLMo-core's ``metadata``)."""
        assert self.metadata is not None
        return [copy.deepcopy(self.metadata[int(s)]) for s in self._source_of(idx)]

    def _needs_mask(self, idx: npt.NDArray[np.int64], width: int) -> bool:
        return False

    def __getitem__(self, index: int) -> Batch:
        """Instance ``index`` as a dict of numpy arrays: ``input_ids`` (int64), ``label_mask``
        and ``doc_lens`` (int32, unpadded) where the dataset has them."""
        # operator.index, as a Python sequence: numpy integers and 0-d integer arrays (OLMo-core
        # takes int(index)), never floats or bools.
        if isinstance(index, bool | np.bool_):
            raise TypeError(f"dataset indices must be integers, got {type(index).__name__}")
        try:
            index = operator.index(index)
        except TypeError:
            raise TypeError(f"dataset indices must be integers, got {type(index).__name__}") from None
        b = self.get_batch([index])
        item: Batch = {"input_ids": b["input_ids"][0]}
        if "label_mask" in b:
            item["label_mask"] = b["label_mask"][0]
        if "doc_lens" in b:
            row = b["doc_lens"][0]
            item["doc_lens"] = row[: int(np.count_nonzero(row))] if row.size else row
        if "metadata" in b:
            item["metadata"] = b["metadata"][0]
        return item
