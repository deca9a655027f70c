"""The option values and the run summaries of :func:`tokshuf.preprocess`, :func:`tokshuf.shuffle`
and :func:`tokshuf.merge`, as types.

The summaries are the JSON objects the runs also write to disk; their keys are part of that file
format and stay as they are (``workers``, ``seqlen``, ``eod``), even where the Python parameters
that set them are now spelled ``num_threads``, ``context_length``, ``eos_token_id``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "BatchOutput",
    "InstancesSummary",
    "MemberFormat",
    "MergeSummary",
    "OnError",
    "OutputSummary",
    "PreprocessSummary",
    "Progress",
    "ScanSkip",
    "ShuffleSummary",
    "SkippedFile",
    "SkippedLine",
    "SpecialTokenIds",
    "SpecialTokenPreset",
    "TokenDtype",
]

#: What a run does with a bad line or file: stop with :class:`tokshuf.BadInputError`, or skip,
#: count and report it in the summary.
OnError = Literal["fail", "skip"]
#: Progress on stderr: a bar, JSON lines, or nothing.
Progress = Literal["bar", "json", "none"]
#: Members of :func:`tokshuf.shuffle`'s tars: gzipped JSON lists (open_lm) or ``.npy`` arrays.
MemberFormat = Literal["json.gz", "npy"]
#: BOS/EOT/PAD conventions of :func:`tokshuf.shuffle` (see ``SPECIAL_TOKEN_PRESETS``).
SpecialTokenPreset = Literal["native", "dclm", "dclm-neox", "dclm-llama3"]
#: The dtype of the streaming loader's token arrays.
TokenDtype = Literal["int64", "int32", "uint32"]
#: What the streaming loader's batches hold: torch tensors or numpy arrays.
BatchOutput = Literal["torch", "numpy"]


class SkippedLine(TypedDict):
    """One of the first bad lines skipped under ``on_error="skip"``."""

    path: str
    line: int
    reason: str
    message: str


class SkippedFile(TypedDict):
    """An empty or truncated input file skipped (wholly or its lost end)."""

    path: str
    reason: str
    first_lost_line: int | None
    decompressed_bytes_read: int | None
    message: str


class ScanSkip(TypedDict):
    """A path a directory scan of the inputs passed over: ``hidden`` (its name begins with ``.``;
    nothing below a hidden directory is looked at), ``extension`` (its name ends in none of the
    input extensions, compared case-sensitively), ``link_loop`` (a directory link back to a
    directory being scanned) or ``invalid_key`` (an object key the store client cannot name: a
    control character, an empty part as in ``a//b``)."""

    path: str
    reason: Literal["hidden", "extension", "link_loop", "invalid_key"]


class OutputSummary(TypedDict):
    """One JSON key's ``.bin/.idx`` pair written by :func:`tokshuf.preprocess`."""

    key: str
    prefix: str
    documents: int
    sequences: int
    tokens: int
    bin_bytes: int
    idx_bytes: int


class PreprocessSummary(TypedDict):
    """What :func:`tokshuf.preprocess` returns (and writes to ``{output_prefix}_summary.json``)."""

    tokshuf_version: str
    inputs: list[str]
    files: int
    lines: int
    documents: int
    sequences: int
    tokens: int
    input_bytes: int
    decompressed_bytes: int
    #: Skipped lines by reason.
    skipped: dict[str, int]
    first_skipped: list[SkippedLine]
    skipped_files: list[SkippedFile]
    #: Paths the scans of input directories passed over, by reason (exact counts).
    scan_skipped: dict[str, int]
    #: The first 100 of them, in scan order.
    first_scan_skipped: list[ScanSkip]
    dtype: str
    #: The tokenizer's identity (kind, source, SHA-256 of its data, eod, vocab size).
    tokenizer: dict[str, Any]
    #: The options that shape the output.
    config: dict[str, Any]
    outputs: list[OutputSummary]
    #: Tokenizer threads used (``num_threads``).
    workers: int
    seconds: float
    #: For a task's part (``shard=``): ``{"index": i, "count": n}``.
    task: NotRequired[dict[str, int]]


class SpecialTokenIds(TypedDict):
    """The BOS, EOT and PAD ids a shuffle used."""

    bos: int | None
    eot: int | None
    pad: int | None


class ShuffleSummary(TypedDict):
    """What :func:`tokshuf.shuffle` returns."""

    files: int
    lines: int
    documents: int
    tokens: int
    pad_tokens: int
    contexts: int
    #: Tokens per context, the +1 target included (``context_length``).
    seqlen: int
    padding_fraction: float
    shards: int
    wds_chunk_size: int
    skipped: dict[str, int]
    first_skipped: list[SkippedLine]
    skipped_files: list[SkippedFile]
    #: Paths the scans of input directories passed over, by reason (exact counts).
    scan_skipped: dict[str, int]
    #: The first 100 of them, in scan order.
    first_scan_skipped: list[ScanSkip]
    input_bytes: int
    decompressed_bytes: int
    cell_bytes: int
    output_bytes: int
    tokenizer: dict[str, Any] | None
    special_tokens: SpecialTokenIds | None
    member_format: str
    output: str
    manifest: str
    resumed: bool
    already_complete: bool
    stage1_seconds: float
    stage2_seconds: float
    seconds: float
    warnings: list[str]
    #: For one step of a shuffle cut into tasks (``stage=``): the step, the task, its shards.
    task: NotRequired[dict[str, Any]]


class MergeSummary(TypedDict):
    """What :func:`tokshuf.merge` returns: the merged dataset's sizes."""

    documents: int
    sequences: int
    tokens: int
    bin_bytes: int
    idx_bytes: int


class InstancesSummary(TypedDict):
    """What ``tokshuf instances`` prints with ``--json`` and writes to its summary file
    (``{work_dir}/instances/instances-{strategy}-{fingerprint}_summary.json``, beside the index
    entries; ``--summary`` elsewhere)."""

    #: ``fsl``, ``padded``, ``packed``, ``interleaved`` or ``vsl``.
    strategy: str
    #: The data files, absolute (storage URLs as given).
    paths: list[str]
    #: The strategy class's keyword arguments: with ``strategy`` and ``paths``, what opens the
    #: same dataset again (``tokshuf inspect`` of this file does).
    arguments: dict[str, Any]
    instances: int
    fingerprint: str
    #: The index's cache entry (``None`` for ``fsl``, which needs no index).
    cache: str | None
    seconds: float
    #: Packed: padding tokens / (instances x sequence_length).
    padding_fraction: NotRequired[float]
    #: VSL: ``[[length, instances], ...]`` and the tokens of all instances.
    instances_per_bucket: NotRequired[list[list[int]]]
    tokens: NotRequired[int]
