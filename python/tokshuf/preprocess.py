"""JSON lines → Megatron ``.bin/.idx``: the Python face of the Rust pipeline."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from tokshuf import _core

__all__ = ["preprocess"]


def preprocess(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output_prefix: str | os.PathLike[str],
    tokenizer: str = "byte",
    json_keys: Sequence[str] = ("text",),
    *,
    append_eod: bool = False,
    dtype: str | None = None,
    workers: int = 1,
    on_error: str = "fail",
    partitions: int = 1,
    batch_bytes: int = 1 << 20,
    max_line_bytes: int = 1 << 30,
) -> dict[str, Any]:
    """Tokenize JSON lines into one Megatron indexed dataset per key.

    Parameters
    ----------
    inputs
        Files, directories (searched recursively for ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``)
        or globs. Documents are written in input order: file by file, line by line.
    output_prefix
        Outputs are ``{output_prefix}_{key}_document.bin/.idx`` (Megatron's names).
    tokenizer
        ``"byte"`` (UTF-8 byte + 1, eod 0).
    json_keys
        Keys to tokenize. A string value is one sequence; a list of strings is one sequence per
        non-empty element.
    append_eod
        Append the tokenizer's end-of-document id to every document with at least one token.
    dtype
        Output dtype; ``None``/``"auto"`` picks uint16 below 65500 ids, else int32.
    workers
        Tokenizer threads. The output is byte-identical for any value.
    on_error
        ``"fail"`` stops at the first bad line (:class:`tokshuf.BadInputError`); ``"skip"``
        skips bad lines and counts them by reason in the returned summary.
    partitions
        ``1``: input order. ``P > 1``: the document order of Megatron's ``--partitions P``
        (line k goes to partition k mod P, partitions concatenated).

    Returns
    -------
    dict
        The run summary (documents, tokens, skipped lines by reason, outputs, seconds).
    """
    items = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    summary: dict[str, Any] = json.loads(
        _core.preprocess(
            [os.fspath(i) for i in items],
            os.fspath(output_prefix),
            tokenizer,
            list(json_keys),
            append_eod=append_eod,
            dtype=dtype,
            workers=workers,
            on_error=on_error,
            partitions=partitions,
            batch_bytes=batch_bytes,
            max_line_bytes=max_line_bytes,
        )
    )
    return summary
