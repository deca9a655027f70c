"""``torch.utils.data`` adapters for the instance datasets (the only module that imports torch).

>>> loader = torch.utils.data.DataLoader(                        # doctest: +SKIP
...     TorchInstances(ds), batch_size=8, shuffle=True, collate_fn=collate, num_workers=2)

With ``TorchInstances``, the DataLoader fetches each batch with one ``get_batch`` call (through
``__getitems__``), filled in Rust; ``collate`` passes such batches through and collates lists of
items as OLMo-core's ``DataCollator`` does (right padding, zero-padded ``doc_lens``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tokshuf.instances._base import Batch, InstanceDataset

__all__ = ["TorchInstances", "collate", "to_torch"]


def to_torch(batch: Batch) -> dict[str, Any]:
    """numpy arrays → tensors (zero-copy); lists such as ``max_doc_lens`` stay lists."""
    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in batch.items()}


class TorchInstances(torch.utils.data.Dataset[dict[str, Any]]):
    """A torch map-style dataset over an instance dataset (picklable for worker processes)."""

    def __init__(self, dataset: InstanceDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return to_torch(self.dataset[index])

    def __getitems__(self, indices: Sequence[int]) -> dict[str, Any]:
        return to_torch(self.dataset.get_batch(np.asarray(indices, dtype=np.int64)))


def collate(items: dict[str, Any] | Sequence[dict[str, Any]], pad_token_id: int = 0) -> dict[str, Any]:
    """A batch from ``__getitems__`` as is; a list of items stacked like OLMo's ``DataCollator``."""
    if isinstance(items, dict):
        return items
    width = max(len(x["input_ids"]) for x in items)
    out: dict[str, Any] = {
        "input_ids": torch.stack(
            [
                torch.nn.functional.pad(x["input_ids"], (0, width - len(x["input_ids"])), value=pad_token_id)
                for x in items
            ]
        )
    }
    if "label_mask" in items[0]:
        out["label_mask"] = torch.stack(
            [
                torch.nn.functional.pad(x["label_mask"], (0, width - len(x["label_mask"])), value=False)
                for x in items
            ]
        )
    if "doc_lens" in items[0]:
        docs = max(len(x["doc_lens"]) for x in items)
        out["doc_lens"] = torch.stack(
            [torch.nn.functional.pad(x["doc_lens"], (0, docs - len(x["doc_lens"])), value=0) for x in items]
        )
        out["max_doc_lens"] = [int(x["doc_lens"].max()) for x in items]
    if "metadata" in items[0]:
        out["metadata"] = [x["metadata"] for x in items]
    return out
