"""JSON lines → contexts → two-stage disk shuffle → webdataset shards (``tokshuf shuffle``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast, get_args

from tokshuf import _core
from tokshuf._deprecation import renamed_parameters
from tokshuf._limits import MAX_SEQUENCE_LENGTH, check_num_threads, integer
from tokshuf._log import log_run
from tokshuf._summaries import MemberFormat, OnError, Progress, ShuffleSummary, SpecialTokenPreset
from tokshuf._summary_file import summary_target
from tokshuf.errors import ConfigError
from tokshuf.tokenizer import as_tokenizer

__all__ = ["SPECIAL_TOKEN_PRESETS", "shuffle"]

#: The defaults of the options, by name: declared once, in the Rust core's config (the command
#: line reads them here too).
DEFAULTS: dict[str, Any] = _core.defaults("shuffle")

#: Accepted values of ``special_tokens``.
SPECIAL_TOKEN_PRESETS: tuple[SpecialTokenPreset, ...] = get_args(SpecialTokenPreset)

#: The longest context: the core holds a context whole, as u32 ids (4 GiB).
MAX_CONTEXT_LENGTH = MAX_SEQUENCE_LENGTH

PathLike = str | os.PathLike[str]

#: Why ``sequence_length`` was renamed: everywhere else in tokshuf it is the model's length,
#: the extra target token added on top; here it counted that token.
_CONTEXT_LENGTH_NOTE = (
    "the same value: tokens per written context, the model's sequence length + 1, e.g. 2049 for "
    "2048; elsewhere in tokshuf sequence_length is the model's length, without the +1"
)


#: The old spellings of :func:`shuffle`'s parameters (also accepted by ``tokshuf.ray.shuffle``).
RENAMED_PARAMETERS: dict[str, str | tuple[str, str]] = {
    "seqlen": ("context_length", _CONTEXT_LENGTH_NOTE),
    "sequence_length": ("context_length", _CONTEXT_LENGTH_NOTE),
    "threads": "num_threads",
    "eot_id": "eos_token_id",
    "pad_id": "pad_token_id",
    "bos_id": "bos_token_id",
}


@renamed_parameters(**RENAMED_PARAMETERS)
def shuffle(
    inputs: PathLike | Sequence[PathLike],
    local_cell_dir: PathLike,
    output: PathLike,
    tokenizer: Any = None,
    *,
    context_length: int = DEFAULTS["context_length"],
    wds_chunk_size: int = DEFAULTS["wds_chunk_size"],
    num_local_cells: int = DEFAULTS["num_local_cells"],
    seed: int = DEFAULTS["seed"],
    num_threads: int | None = None,
    ext: Sequence[str] | None = None,
    shuffle_only: bool = DEFAULTS["shuffle_only"],
    special_tokens: SpecialTokenPreset = DEFAULTS["special_tokens"],
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    bos_token_id: int | None = None,
    content_key: str = DEFAULTS["content_key"],
    on_error: OnError = DEFAULTS["on_error"],
    member_format: MemberFormat = DEFAULTS["member_format"],
    gzip_level: int = DEFAULTS["gzip_level"],
    all_pad_context: bool = DEFAULTS["all_pad_context"],
    buffer_bytes: int = DEFAULTS["buffer_bytes"],
    batch_bytes: int = DEFAULTS["batch_bytes"],
    max_line_bytes: int = DEFAULTS["max_line_bytes"],
    progress: Progress | None = None,
    tokenizer_special_tokens: Mapping[str, int] | PathLike | None = None,
    stage: str | None = None,
    task: str | tuple[int, int] | None = None,
    summary: bool | PathLike = True,
) -> ShuffleSummary:
    """Tokenize JSON lines, cut them into contexts and write a globally shuffled webdataset.

    The output directory receives ``shard_%08d.tar`` files of ``wds_chunk_size`` contexts (only
    the last one partial) whose members are ``{shard:08}_{index:08}.json.gz`` (gzipped JSON list
    of exactly ``context_length`` ids), plus ``manifest.jsonl``: what open_lm / DCLM read unchanged.

    Contexts are formed per input file as DCLM's tokshuf-rust forms them: ``[BOS] + ids + [EOT]``
    per document, concatenated and cut every ``context_length`` tokens, the file's last partial
    context padded with PAD. Stage 1 scatters contexts over ``num_local_cells`` cells on disk; stage 2
    shuffles one cell at a time into shards, so memory holds about ``num_threads + 1`` cells.

    The shards and manifest are a pure function of (inputs, tokenizer, options, seed): the same
    for any ``num_threads``. If a run is interrupted (Ctrl-C, kill, crash), calling again with the same
    arguments resumes it and produces the same bytes; a ``local_cell_dir`` holding another run's
    state is refused.

    Parameters
    ----------
    inputs
        Files, directories (searched recursively for ``ext``; hidden names and other files are
        passed over and listed in ``summary["scan_skipped"]`` and ``summary["first_scan_skipped"]``)
        or globs. Their order is part of the result.
    local_cell_dir
        Scratch directory for the cells and the resume state (needs about the output's size).
    output
        Output directory (created if needed; must not already hold shards on a fresh run).
    tokenizer
        As for :func:`tokshuf.preprocess`: a spec string or path (``"byte"``,
        ``"tiktoken:NAME"``, a ``.tiktoken`` file, a ``tokenizer.json`` or its directory), a
        :class:`tokshuf.Tokenizer` (its special tokens and ``eos_token_id`` are used; the latter is
        the EOT of ``special_tokens="native"``) or a ``tokenizers.Tokenizer`` built in memory.
        Loaded once and shared by the workers. Required, unless ``shuffle_only`` (which does not
        tokenize).
    context_length
        Tokens per written context **including** the +1 target token: the model's sequence
        length + 1 (2049 for a 2048 model), as open_lm reads it. (Elsewhere in tokshuf,
        ``sequence_length`` is the model's length; ``sequence_length=`` and ``seqlen=`` are
        deprecated spellings of this parameter, with this meaning.)
    wds_chunk_size
        Contexts per shard.
    num_local_cells
        Local cells; choose it so a cell (output size / cells) fits ``num_threads + 1`` times in RAM.
    seed
        Seed of the cell choice and of every cell's order.
    num_threads
        Worker threads (default: the CPUs available, or ``TOKSHUF_NUM_THREADS``).
    ext
        Extensions picked up in directories, case-sensitively (default: ``.jsonl .jsonl.gz
        .jsonl.zst .jsonl.zstd .parquet .arrow``, or ``.tar`` with ``shuffle_only``).
    shuffle_only
        Inputs are webdataset tars; their samples are re-shuffled verbatim.
    special_tokens
        ``"native"``: EOT = the tokenizer's end-of-text id, PAD = EOT, no BOS. ``"dclm"`` /
        ``"dclm-neox"``: tokshuf-rust's GPT-NeoX convention (EOT 0, PAD 50256, no BOS).
        ``"dclm-llama3"``: tokshuf-rust's Llama-3 convention (BOS 128000, EOT 0, PAD 128258).
    eos_token_id, pad_token_id, bos_token_id
        Override the preset's end-of-text (EOT), PAD and BOS ids.
    tokenizer_special_tokens
        Special tokens of a tiktoken rank file (``{token: id}`` or a JSON file holding it; see
        :class:`tokshuf.Tokenizer`), e.g. to give a custom file the end-of-text id ``native`` uses.
    content_key
        JSON key holding the text.
    on_error
        ``"fail"``: stop at the first bad line or file (:class:`tokshuf.BadInputError`, naming
        file and line). ``"skip"``: skip bad lines, counted by reason in the summary; empty files
        and the lost end of truncated files are listed in ``skipped_files`` (the same policy as
        :func:`tokshuf.preprocess`).
    member_format
        ``"json.gz"`` (open_lm) or ``"npy"`` (uint16 when every id fits, else uint32).
    gzip_level
        0-12. 1 (the default) is tokshuf's token-level deflate, made for lists of ids: about
        3x as fast as libdeflate's level 1 and a little smaller. The others are libdeflate's
        levels (0 stores, 12 is the smallest and slowest).
    all_pad_context
        Reproduce tokshuf-rust's quirk: a file whose tokens fill whole contexts (or an empty
        file) still adds a context made only of PAD.
    buffer_bytes
        Encoded contexts held in memory before stage 1 writes a run of cells (a checkpoint);
        the next run fills while one is written, reusing its memory once its bytes are out.
    progress
        ``"bar"``, ``"json"`` (JSON lines) or ``"none"``, on stderr, one per stage; ``None``: a
        bar when stderr is a terminal, else nothing.
    stage, task
        Run one step of the shuffle cut into tasks (for Slurm arrays, Ray, any scheduler; the
        ``local_cell_dir`` and ``output`` shared by the tasks): ``stage="cells"`` with
        ``task=(i, n)`` runs stage 1 over the ``i``-th of ``n`` contiguous slices of the inputs
        (balanced by bytes); once every cells task is done, ``stage="shards"`` with
        ``task=(j, m)`` writes the ``j``-th of ``m`` shares of the shards; then
        ``stage="manifest"`` writes ``manifest.jsonl`` and returns the run's summary. The shards
        and manifest are byte-identical to one call without ``stage`` (which runs the three
        steps with one task each), for any ``n`` and ``m``, ``shuffle_only`` included. A killed
        step goes on where it stopped; any step of a complete run returns the run's summary
        with ``already_complete``. ``task="auto"``: the task of this Slurm array job
        (``SLURM_ARRAY_TASK_ID``, counted from ``SLURM_ARRAY_TASK_MIN`` by
        ``SLURM_ARRAY_TASK_STEP``).
    summary
        Write the run's summary as JSON: ``True`` → ``{output}/summary.json`` beside the manifest
        (uploaded for a storage URL), a path → there, ``False`` → nowhere. It is written after
        the manifest, which alone marks the dataset complete (readers and the refusal of a fresh
        run into a used output look at ``manifest.jsonl`` and ``shard_*.tar`` only). Only a whole
        run writes it (no ``stage``, or ``stage="manifest"``), and a rerun of a complete run
        keeps the file its first run wrote.

    Returns
    -------
    ShuffleSummary
        The run summary: files, lines, documents, tokens, pad_tokens, contexts, shards,
        padding_fraction, skipped lines by reason, bytes, seconds per stage, warnings.
    """
    if tokenizer is None and not shuffle_only:
        raise ConfigError(
            "shuffle needs a tokenizer (e.g. 'tiktoken:r50k_base', a tokenizer.json or its directory); "
            "only shuffle_only=True, which re-shuffles tokenized tars, runs without one"
        )
    # The EOT of the "native" preset is the tokenizer's end-of-document id; eos_token_id overrides
    # the preset's EOT, not the tokenizer's id (which would have to be in its vocabulary).
    tok = None
    if tokenizer is not None and not shuffle_only:
        tok = as_tokenizer(tokenizer, None, tokenizer_special_tokens)
    _check_context_length(context_length)
    check_num_threads(num_threads)
    items = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    # The one-node run and the manifest step write the summary, as a member of the output's set.
    summary_path = (
        summary_target(summary, os.fspath(output).rstrip("/") + "/summary.json")
        if stage in (None, "manifest")
        else None
    )
    if progress is None:
        progress = "bar" if sys.stderr.isatty() else "none"
    result: dict[str, Any] = _core.shuffle(
        [os.fspath(i) for i in items],
        os.fspath(local_cell_dir),
        os.fspath(output),
        None if tok is None else tok._native(),
        context_length=context_length,
        wds_chunk_size=wds_chunk_size,
        num_local_cells=num_local_cells,
        seed=seed,
        num_threads=num_threads,
        ext=list(ext) if ext is not None else None,
        shuffle_only=shuffle_only,
        special_tokens=special_tokens,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        content_key=content_key,
        on_error=on_error,
        member_format=member_format,
        gzip_level=gzip_level,
        all_pad_context=all_pad_context,
        buffer_bytes=buffer_bytes,
        batch_bytes=batch_bytes,
        max_line_bytes=max_line_bytes,
        progress=progress,
        stage=stage,
        task=f"{task[0]}/{task[1]}" if isinstance(task, tuple) else task,
        summary_path=summary_path,
    )
    log_run("shuffle", result)
    return cast(ShuffleSummary, result)


def _check_context_length(value: int) -> None:
    name = "context_length (--context-length/--seqlen)"
    value = integer(value, name, 1, None)
    if value > MAX_CONTEXT_LENGTH:
        raise ConfigError(
            f"{name} {value} is too long: a context is held whole in memory, and at most "
            f"{MAX_CONTEXT_LENGTH} tokens (4 GiB of ids) are allowed"
        )
