"""One document per instance: OLMo-core's ``NumpyPaddedFSLDataset``."""

from __future__ import annotations

import os
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt

from tokshuf import _arrays, _core
from tokshuf._cache import cached
from tokshuf.errors import ConfigError
from tokshuf.instances._base import InstanceDataset
from tokshuf.instances._options import LONG_DOC_STRATEGY, InstanceOptions, LongDocStrategy, PathLike

__all__ = ["PaddedFSLDataset"]


def padded_spans(
    dataset: InstanceDataset, strategy: LongDocStrategy
) -> tuple[npt.NDArray[np.uint64], list[int]]:
    """All instances' spans and the number of instances from each source.

    A source without a single (non-empty) document is an error, as in OLMo-core: it is almost
    always a wrong ``eos_token_id`` or dtype, and 0 instances from it would go unnoticed."""
    per_source = [
        _arrays.spans(_core.padded_instances(s, dataset.sequence_length, strategy))
        for s in dataset._global_spans()
    ]
    for source, p in zip(dataset.sources, per_source, strict=True):
        if len(p) == 0:
            raise ConfigError(
                f"{source.path}: no document to make an instance from: no eos_token_id "
                f"{dataset.eos_token_id} among its {source.num_tokens} tokens (or no rows in its "
                "metadata or index)"
            )
    spans = np.concatenate(per_source) if per_source else np.empty((0, 2), np.uint64)
    return spans, [len(p) for p in per_source]


class PaddedFSLDataset(InstanceDataset):
    """Each document is one instance of ``sequence_length`` tokens, right-padded with
    ``pad_token_id``; ``label_mask`` is False on the padding.

    Documents longer than ``sequence_length`` are truncated (what OLMo-core does, although its
    documentation says they are fragmented); ``long_doc_strategy="fragment"`` splits them into
    several instances instead. Empty documents make no instance. Documents come from the same
    boundaries as every other dataset here (OLMo-core's padded dataset ignores ``bos_token_id``
    and therefore cuts ``dolma2_sigdig`` data at every BOS, and keeps the last document of a file
    that ends without EOS, which the BOS rule leaves out). A file without a document (no EOS)
    raises :class:`~tokshuf.ConfigError`, as in OLMo-core.

    ``paths`` and ``sequence_length`` as in :class:`~tokshuf.instances.FSLDataset`.
    """

    def __init__(
        self,
        *paths: PathLike,
        sequence_length: int,
        long_doc_strategy: LongDocStrategy = LONG_DOC_STRATEGY,
        **options: Unpack[InstanceOptions],
    ) -> None:
        self.long_doc_strategy: LongDocStrategy = long_doc_strategy
        super().__init__(paths, sequence_length, {"long_doc_strategy": long_doc_strategy}, options)

    def _source_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self._source_of_tokens(self.spans[idx, 0])

    def _strategy_fields(self) -> dict[str, Any]:
        return {"long_doc_strategy": self.long_doc_strategy}

    def _open(self) -> _core.InstanceReader:
        entry = cached(
            self.cache_dir,
            "instances",
            "padded",
            self._fields(),
            lambda: {"spans": padded_spans(self, self.long_doc_strategy)[0]},
        )
        self.cache_path = entry.path
        self.spans = entry.array("spans")
        return self._make_reader("spans", files={"spans": os.fspath(entry.file("spans"))})
