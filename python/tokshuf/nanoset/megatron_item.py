"""Megatron's ``GPTDataset.__getitem__`` dict (tokens, labels, loss_mask, position_ids,
attention_mask) computed from a sample's raw tokens, in numpy, value for value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from tokshuf.nanoset.config import NanosetConfig

__all__ = ["megatron_item"]


def megatron_item(
    text: npt.NDArray[np.int64], config: NanosetConfig, padding: bool = False
) -> dict[str, Any]:
    """The dict Megatron returns for a sample whose raw tokens (pad = ``pad_token_id``) are ``text``.

    ``padding=True`` is Megatron's ``idx=None`` (a batch-padding sample): all-zero loss mask.
    """
    pad = config.pad_token_id
    text = np.array(text, dtype=np.int64)
    if config.add_extra_token_to_sequence:
        tokens, labels = text[:-1].copy(), text[1:].copy()
    else:
        tokens, labels = text, np.roll(text, -1)
        labels[-1] = pad
    n = tokens.shape[0]
    loss_mask = np.ones(n, dtype=np.float32)
    position_ids = np.arange(n, dtype=np.int64)
    mask = np.tril(np.ones((n, n), dtype=np.float32))[None] if config.create_attention_mask else None
    eod = config.eos_token_id
    if config.eod_mask_loss:
        loss_mask[tokens == eod] = 0.0
    if config.reset_position_ids or config.reset_attention_mask:
        prev = 0
        for i in np.flatnonzero(tokens == eod).tolist():
            if config.reset_attention_mask and mask is not None:
                mask[0, i + 1 :, : i + 1] = 0
            if config.reset_position_ids:
                position_ids[i + 1 :] -= i + 1 - prev
                prev = i + 1
    loss_mask[labels == pad] = 0.0
    tokens[tokens == pad] = 0
    labels[labels == pad] = 0
    if padding:
        loss_mask = np.zeros_like(loss_mask)
    out: dict[str, Any] = {"tokens": tokens, "labels": labels}
    if mask is not None:
        out["attention_mask"] = mask < 0.5
    out["loss_mask"] = loss_mask
    out["position_ids"] = position_ids
    return out
