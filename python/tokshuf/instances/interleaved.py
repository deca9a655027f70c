"""Interleaved documents: OLMo-core's ``NumpyInterleavedFSLDataset``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt

from tokshuf import _arrays, _core, _limits
from tokshuf._cache import cached
from tokshuf.errors import ConfigError
from tokshuf.instances._base import InstanceDataset
from tokshuf.instances._options import InstanceOptions, PathLike
from tokshuf.instances._seeds import check_seed, seed_entropy
from tokshuf.instances.padded import padded_spans

__all__ = ["InterleavedFSLDataset"]


class InterleavedFSLDataset(InstanceDataset):
    """Instances that interleave chunks of ``docs_per_instance`` documents (LongSkywork-style), to
    make the model attend over long distances.

    As in OLMo-core: the padded dataset's one-document instances are permuted with ``seed``
    (numpy's ``default_rng(seed).permutation``, so the order equals OLMo-core's, for any
    non-negative integer seed); each instance
    takes the next ``docs_per_instance`` documents, keeps at most ``sequence_length /
    docs_per_instance`` tokens of each, drops their EOS, BOS and padding tokens, splits each into
    ``chunks_per_doc`` near-equal chunks and emits chunk 0 of every document, then chunk 1, and so
    on; BOS is prepended and EOS appended when there is room, and the rest is padding
    (``label_mask`` False). Documents from ``interleaving_exempt_paths`` come first, un-interleaved,
    as padded instances. ``doc_lens`` is not available (it would defeat the interleaving).

    Documents come from the same boundaries as every other dataset here. OLMo-core's interleaved
    dataset takes its documents from its padded one, which ignores ``bos_token_id``: with
    BOS = EOS (``dolma2_sigdig``) OLMo-core cuts at every BOS, so each document's leading BOS
    becomes a one-token document that is empty once special tokens are dropped, yet takes one of
    an instance's ``docs_per_instance`` slots (and about twice as many documents get permuted).
    Here a document ends only at an EOS followed by BOS (or at the file's last token, an EOS), so
    such data interleaves real documents. Without a BOS, or with a BOS distinct from EOS in files
    that end with EOS, the documents and instances equal OLMo-core's.

    Raises :class:`~tokshuf.ConfigError`, as OLMo-core does, when ``sequence_length`` is not a
    multiple of ``docs_per_instance`` or of ``chunks_per_doc``, or when a file has no document.
    """

    def __init__(
        self,
        *paths: PathLike,
        sequence_length: int,
        seed: int,
        docs_per_instance: int,
        chunks_per_doc: int,
        interleaving_exempt_paths: Sequence[PathLike] | None = None,
        **options: Unpack[InstanceOptions],
    ) -> None:
        sequence_length = _limits.sequence_length(sequence_length)
        docs_per_instance = _limits.integer(docs_per_instance, "docs_per_instance", 1)
        chunks_per_doc = _limits.integer(chunks_per_doc, "chunks_per_doc", 1)
        if sequence_length % docs_per_instance:
            raise ConfigError(
                f"sequence_length ({sequence_length}) must be a multiple of "
                f"docs_per_instance ({docs_per_instance})"
            )
        if sequence_length % chunks_per_doc:
            # OLMo-core refuses this too; accepting it would build instances OLMo-core never does.
            raise ConfigError(
                f"sequence_length ({sequence_length}) must be a multiple of chunks_per_doc ({chunks_per_doc})"
            )
        seed = check_seed("seed", seed)
        self.seed = seed
        self.docs_per_instance = docs_per_instance
        self.chunks_per_doc = chunks_per_doc
        exempt = [os.fspath(p) for p in interleaving_exempt_paths or ()]
        self.interleaving_exempt_paths = exempt
        strategy = {
            "seed": seed,
            "docs_per_instance": docs_per_instance,
            "chunks_per_doc": chunks_per_doc,
            "interleaving_exempt_paths": exempt or None,
        }
        super().__init__(paths, sequence_length, strategy, options)

    def _exempt_sources(self) -> list[bool]:
        wanted = {str(Path(p).resolve()) for p in self.interleaving_exempt_paths}
        flags = [s.path in wanted for s in self.sources]
        missing = wanted - {s.path for s in self.sources}
        if missing:
            raise ConfigError(f"interleaving_exempt_paths not among the dataset's paths: {sorted(missing)}")
        return flags

    def _source_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        n_ex = len(self._exempt)
        base_ids = np.empty(idx.size, np.int64)
        exempt = idx < n_ex
        base_ids[exempt] = self._exempt[idx[exempt]]
        base_ids[~exempt] = self._order[(idx[~exempt] - n_ex) * self.docs_per_instance]
        return self._source_of_tokens(self._base[base_ids, 0])

    def _strategy_fields(self) -> dict[str, Any]:
        return {
            # Hex beyond 64 bits: JSON would refuse to print an integer of thousands of digits.
            "seed": self.seed if self.seed < 1 << 64 else hex(self.seed),
            "docs_per_instance": self.docs_per_instance,
            "exempt": self._exempt_sources(),
        }

    def _build(self) -> dict[str, npt.NDArray[np.uint64]]:
        base, counts = padded_spans(self, "truncate")
        mask = np.repeat(np.array(self._exempt_sources(), np.uint8), counts)
        exempt, order = _core.interleave_plan(
            mask, self.sequence_length, self.docs_per_instance, seed_entropy(self.seed)
        )
        return {
            "base": base,
            "exempt": _arrays.u64(exempt),
            "order": _arrays.u64(order),
        }

    def _open(self) -> _core.InstanceReader:
        entry = cached(self.cache_dir, "instances", "interleaved", self._fields(), self._build)
        self.cache_path = entry.path
        self._base, self._exempt, self._order = (entry.array(n) for n in ("base", "exempt", "order"))
        self._layout: dict[str, Any] = {
            "files": {name: os.fspath(entry.file(name)) for name in ("base", "exempt", "order")},
            "docs_per_instance": self.docs_per_instance,
            "chunks_per_doc": self.chunks_per_doc,
        }
        return self._make_reader("interleaved", **self._layout)

    def instance_token_counts(self, batch_size: int = 256) -> npt.NDArray[np.int64]:
        """Tokens before the padding of every instance. Every instance is read: how many of its
        documents' tokens are special (and dropped) decides it."""
        reader = self._make_reader("interleaved", label_masks=False, **self._layout)
        n, seq = len(self), self.sequence_length
        out = np.empty(n, np.int64)
        ids = np.empty((min(batch_size, n), seq), np.int64)
        mask = np.empty((min(batch_size, n), seq), np.uint8)
        for start in range(0, n, batch_size):
            idx = np.arange(start, min(start + batch_size, n), dtype=np.uint64)
            b = idx.size
            reader.fill(idx, ids[:b], mask[:b], False, self.num_threads)
            out[start : start + b] = mask[:b].sum(axis=1)
        return out
