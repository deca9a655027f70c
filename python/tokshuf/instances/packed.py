"""Documents packed into instances by Optimized Best-Fit Decreasing: OLMo-core's
``NumpyPackedFSLDataset``."""

from __future__ import annotations

import copy
import os
from typing import Any, Literal, Unpack

import numpy as np
import numpy.typing as npt

from tokshuf import _arrays, _core, _limits
from tokshuf._cache import cached
from tokshuf.errors import ConfigError
from tokshuf.instances._base import InstanceDataset
from tokshuf.instances._options import (
    LONG_DOC_STRATEGY,
    SOURCE_GROUP_SIZE,
    InstanceOptions,
    LongDocStrategy,
    PathLike,
)

__all__ = ["PackedFSLDataset"]

DocLensRule = Literal["olmo", "packing"]


class PackedFSLDataset(InstanceDataset):
    """Whole documents packed into instances of at most ``sequence_length`` tokens, right-padded.

    Packing is OLMo-core's OBFD: per group of ``source_group_size`` consecutive files (default
    one file), documents sorted longest first go into the open instance with the least room that
    fits them (the oldest such instance first), or a new one. The instances, as lists of
    document lengths, equal OLMo-core's; documents of equal length are taken in file order (OLMo's
    unstable sort leaves that order machine-dependent). Groups are packed in parallel in Rust, and
    ``sequence_length`` need not be a power of two.

    Documents longer than ``sequence_length`` are truncated or fragmented
    (``long_doc_strategy``). Instances keep bin-creation order (long documents first within a
    group), as in OLMo-core; shuffle them in the loader.

    With ``generate_doc_lengths``, ``doc_lens`` follows ``doc_lens_rule``:

    - ``"olmo"`` (default): OLMo-core's, so that attention masks built from ``doc_lens`` equal an
      OLMo-core run's. Where the documents came from an EOS scan, its ``get_document_lengths`` on
      the padded instance: a document ends at each EOS and at the instance's last token; with
      ``bos_token_id`` set, only at an EOS followed by BOS. Hence with a BOS the padding joins the
      last document (``[2,5,6,1,2,7,1,0]``, EOS 1, BOS 2: ``[4, 4]``), and with
      ``pad_token_id == eos_token_id`` every padding token is a one-token document
      (``[5,6,1,7,1,1,1,1]``: ``[3, 2, 1, 1, 1]``). Where they came from recorded boundaries
      (Dolma metadata, as OLMo-core's ``use_array_if_local=False``, or a ``.bin/.idx`` index): each
      packed document's length, so a document without EOS stays apart from the next, then the
      padding segmented by the same scan (one entry; one per token when pad == EOS; with a BOS,
      joined to the last document).
    - ``"packing"``: each packed document's length from the packing itself, then the padding as
      one last entry (``[4, 3, 1]`` and ``[3, 2, 3]`` above): documents are never merged, nor
      split at EOS tokens inside them, whatever the special tokens are.
    """

    def __init__(
        self,
        *paths: PathLike,
        sequence_length: int,
        generate_doc_lengths: bool = False,
        doc_lens_rule: DocLensRule = "olmo",
        long_doc_strategy: LongDocStrategy = LONG_DOC_STRATEGY,
        source_group_size: int = SOURCE_GROUP_SIZE,
        **options: Unpack[InstanceOptions],
    ) -> None:
        source_group_size = _limits.integer(source_group_size, "source_group_size", 1)
        if doc_lens_rule not in ("olmo", "packing"):
            raise ConfigError(f"doc_lens_rule must be 'olmo' or 'packing', got {doc_lens_rule!r}")
        self.generate_doc_lengths = generate_doc_lengths
        self.doc_lens_rule: DocLensRule = doc_lens_rule
        self.long_doc_strategy: LongDocStrategy = long_doc_strategy
        self.source_group_size = source_group_size
        strategy = {
            "generate_doc_lengths": generate_doc_lengths,
            "doc_lens_rule": doc_lens_rule,
            "long_doc_strategy": long_doc_strategy,
            "source_group_size": source_group_size,
        }
        super().__init__(paths, sequence_length, strategy, options)

    def _source_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        first_doc = self.documents_by_instance[self.instance_offsets[idx].astype(np.int64)].astype(np.int64)
        return self._source_of_tokens(self.documents[first_doc, 0])

    def _metadata_of(self, idx: npt.NDArray[np.int64]) -> list[Any]:
        """Per instance, the metadata dicts of its source group (a list, as in OLMo-core)."""
        assert self.metadata is not None
        g = self.source_group_size
        return [
            copy.deepcopy(self.metadata[s - s % g : s - s % g + g]) for s in self._source_of(idx).tolist()
        ]

    def _strategy_fields(self) -> dict[str, Any]:
        return {"long_doc_strategy": self.long_doc_strategy, "source_group_size": self.source_group_size}

    def _wants_doc_lens(self) -> bool:
        return self.generate_doc_lengths

    def _build(self) -> dict[str, npt.NDArray[np.uint64]]:
        spans = self._global_spans()
        g = self.source_group_size
        groups = []
        for k in range(0, len(spans), g):
            docs = np.concatenate(spans[k : k + g])
            limited = _core.limit_documents(docs, self.sequence_length, self.long_doc_strategy)
            groups.append(_arrays.u64(limited))
        packed, offsets, ids = _core.pack_documents(groups, self.sequence_length, self.num_threads)
        return {
            "docs": _arrays.spans(packed),
            "offsets": _arrays.u64(offsets),
            "doc_ids": _arrays.u64(ids),
        }

    def _open(self) -> _core.InstanceReader:
        entry = cached(self.cache_dir, "instances", "packed", self._fields(), self._build)
        self.cache_path = entry.path
        self.documents = entry.array("docs")
        self.instance_offsets = entry.array("offsets")
        self.documents_by_instance = entry.array("doc_ids")
        files = {name: os.fspath(entry.file(name)) for name in ("docs", "offsets", "doc_ids")}
        # OLMo-core rescans a row for EOS only where packing scanned for them too (per group).
        recorded = [
            s.boundaries_recorded(origin) for s, origin in zip(self.sources, self._origins, strict=True)
        ]
        g = self.source_group_size
        in_group = [any(recorded[f - f % g : f - f % g + g]) for f in range(len(recorded))]
        return self._make_reader(
            "packed",
            files=files,
            olmo_doc_lens=self.doc_lens_rule == "olmo",
            recorded_boundaries=in_group,
        )

    def instance_documents(self, index: int) -> npt.NDArray[np.uint64]:
        """The ``(k, 2)`` global token spans of the documents packed into instance ``index``."""
        i = int(self._check([index])[0])
        a, b = int(self.instance_offsets[i]), int(self.instance_offsets[i + 1])
        return np.asarray(self.documents[self.documents_by_instance[a:b].astype(np.int64)])
