"""Concatenate and chunk: OLMo-core's ``NumpyFSLDataset``."""

from __future__ import annotations

import os
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt

from tokshuf import _core, _limits
from tokshuf.instances._base import InstanceDataset
from tokshuf.instances._options import InstanceOptions, PathLike

__all__ = ["FSLDataset"]


class FSLDataset(InstanceDataset):
    """Fixed-length windows of ``sequence_length`` tokens, cut from each file in order.

    As in OLMo-core, windows never span two files and a file's remainder is dropped; no index
    is needed. With ``generate_doc_lengths`` each instance carries ``doc_lens``: the lengths of
    the document pieces inside the window (boundaries after each document end, from the EOS scan,
    the Dolma metadata or the ``.idx``), which sum to ``sequence_length``, for intra-document
    masking.

    ``max_target_sequence_length`` (a multiple of ``sequence_length``) counts instances in units
    of the larger window, so a sequence-length warm-up (e.g. 2048 then 4096) sees the same tokens
    in the same order: instances ``2k`` and ``2k + 1`` at 2048 are instance ``k`` at 4096.

    Parameters
    ----------
    *paths
        OLMo token files or ``.bin/.idx`` prefixes (as for every dataset here).
    sequence_length
        Tokens per instance, as in OLMo-core.
    generate_doc_lengths, max_target_sequence_length
        See above.
    """

    _label_mask = False

    def __init__(
        self,
        *paths: PathLike,
        sequence_length: int,
        generate_doc_lengths: bool = False,
        max_target_sequence_length: int | None = None,
        **options: Unpack[InstanceOptions],
    ) -> None:
        self.generate_doc_lengths = generate_doc_lengths
        self.max_target_sequence_length = _limits.integer(
            max_target_sequence_length,
            "max_target_sequence_length",
            1,
            _limits.MAX_SEQUENCE_LENGTH,
            optional=True,
        )
        strategy = {
            "generate_doc_lengths": generate_doc_lengths,
            "max_target_sequence_length": self.max_target_sequence_length,
        }
        super().__init__(paths, sequence_length, strategy, options)

    def _source_of(self, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.searchsorted(np.cumsum(self.instances_per_file), idx, side="right").astype(np.int64)

    def _strategy_fields(self) -> dict[str, Any]:
        return {"max_target_sequence_length": self.max_target_sequence_length}

    def _wants_doc_lens(self) -> bool:
        return self.generate_doc_lengths

    def _uses_documents(self) -> bool:
        return self.generate_doc_lengths

    def _open(self) -> _core.InstanceReader:
        self.instances_per_file: list[int] = _core.instances_per_file(
            [s.num_tokens for s in self.sources], self.sequence_length, self.max_target_sequence_length
        )
        doc_files = [os.fspath(f) for f, _ in self._documents()] if self.generate_doc_lengths else []
        return self._make_reader(
            "chunks",
            instances_per_file=self.instances_per_file,
            doc_files=doc_files,
        )
