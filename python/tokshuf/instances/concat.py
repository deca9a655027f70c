"""Concatenate and chunk: OLMo-core's ``NumpyFSLDataset``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tokshuf import _core, _limits
from tokshuf._deprecation import renamed_parameters
from tokshuf.instances._base import InstanceDataset, PathLike
from tokshuf.olmo_tokens import Boundaries

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
        OLMo token files (``dtype`` or ``vocab_size`` needed) or ``.bin/.idx`` prefixes.
    sequence_length, pad_token_id, eos_token_id, bos_token_id, vocab_size, dtype
        As in OLMo-core. ``bos_token_id`` switches the EOS scan to OLMo's EOS-followed-by-BOS
        rule.
    document_boundaries
        For token files: ``"auto"`` (Dolma metadata if present, else EOS scan), ``"eos"`` or
        ``"metadata"``. ``.bin/.idx`` documents always come from the index. OLMo-core's default
        is the EOS scan; ``"auto"`` warns when the metadata it takes disagrees with one (see
        ``docs/olmo-instances.md``).
    cache_dir
        Root of the caches; the index arrays go to ``<cache_dir>/instances/`` (default:
        ``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``).
    num_threads
        Threads for scans and batch reads (default: ``$TOKSHUF_NUM_THREADS`` or all CPUs).
    """

    _label_mask = False

    @renamed_parameters(work_dir="cache_dir", threads="num_threads")
    def __init__(
        self,
        *paths: PathLike,
        sequence_length: int,
        pad_token_id: int,
        eos_token_id: int,
        bos_token_id: int | None = None,
        vocab_size: int | None = None,
        dtype: npt.DTypeLike | None = None,
        generate_doc_lengths: bool = False,
        max_target_sequence_length: int | None = None,
        document_boundaries: Boundaries = "auto",
        label_mask_paths: Sequence[PathLike] | None = None,
        metadata: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        cache_dir: PathLike | None = None,
        num_threads: int | None = None,
    ) -> None:
        self.generate_doc_lengths = generate_doc_lengths
        self.max_target_sequence_length = _limits.integer(
            max_target_sequence_length,
            "max_target_sequence_length",
            1,
            _limits.MAX_SEQUENCE_LENGTH,
            optional=True,
        )
        super().__init__(
            *paths,
            sequence_length=sequence_length,
            pad_token_id=pad_token_id,
            eos_token_id=eos_token_id,
            bos_token_id=bos_token_id,
            vocab_size=vocab_size,
            dtype=dtype,
            document_boundaries=document_boundaries,
            label_mask_paths=label_mask_paths,
            metadata=metadata,
            cache_dir=cache_dir,
            num_threads=num_threads,
            generate_doc_lengths=generate_doc_lengths,
            max_target_sequence_length=self.max_target_sequence_length,
        )

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
