"""JSON lines → Megatron ``.bin/.idx``: the Python face of the Rust pipeline."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast

from tokshuf import _core
from tokshuf._deprecation import renamed_parameters
from tokshuf._limits import check_num_threads, check_open_files
from tokshuf._log import log_run
from tokshuf._summaries import OnError, PreprocessSummary, Progress
from tokshuf._summary_file import check_summary
from tokshuf.errors import ConfigError, TokshufError
from tokshuf.tokenizer import as_tokenizer

__all__ = ["check_outputs", "preprocess"]

#: The defaults of the options, by name: declared once, in the Rust core's config (the command
#: line reads them here too).
DEFAULTS: dict[str, Any] = _core.defaults("preprocess")

#: Files each output (one JSON key in one partition) holds open: its ``.bin``, and the two index
#: columns once they spill to disk.
_FILES_PER_OUTPUT = 3


@renamed_parameters(eod_id="eos_token_id", workers="num_threads")
def preprocess(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output_prefix: str | os.PathLike[str],
    tokenizer: Any,
    json_keys: str | Sequence[str] = tuple(DEFAULTS["json_keys"]),
    *,
    append_eod: bool = DEFAULTS["append_eod"],
    eos_token_id: int | None = None,
    special_tokens: Mapping[str, int] | str | os.PathLike[str] | None = None,
    dtype: str | None = DEFAULTS["dtype"],
    num_threads: int | None = None,
    on_error: OnError = DEFAULTS["on_error"],
    partitions: int = DEFAULTS["partitions"],
    sentence_lists: bool = DEFAULTS["sentence_lists"],
    progress: Progress | None = None,
    summary: bool | str | os.PathLike[str] = True,
    batch_bytes: int = DEFAULTS["batch_bytes"],
    max_line_bytes: int = DEFAULTS["max_line_bytes"],
    shard: str | tuple[int, int] | None = None,
) -> PreprocessSummary:
    """Tokenize JSON lines into one Megatron indexed dataset per key.

    The work runs in Rust with the GIL released: a reader thread decompresses and splits lines,
    ``num_threads`` threads tokenize, and one writer keeps input order, so the output is
    byte-identical for any ``num_threads``. Memory is bounded by a few batches and the longest line
    (held whole with its tokens: about twice its size), whatever the input size; the index
    arrays wait on disk until the end. Ctrl-C stops it and removes every partial output
    (``KeyboardInterrupt``).

    Parameters
    ----------
    inputs
        Files, directories (searched recursively for ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``,
        ``.jsonl.zstd``, ``.parquet``, ``.arrow``; hidden names and other files are passed over
        and listed in ``summary["scan_skipped"]`` and ``summary["first_scan_skipped"]``) or
        globs. Documents are written in input order: file by file, line by line.
    output_prefix
        Outputs are ``{output_prefix}_{key}_document.bin/.idx`` (Megatron's names).
    tokenizer
        A spec string or path (``"byte"``, ``"tiktoken:cl100k_base"``, a ``tokenizer.json`` or
        its directory, a ``.tiktoken`` file; see :mod:`tokshuf.tokenizer`), a
        :class:`tokshuf.Tokenizer` or a ``tokenizers.Tokenizer``. Required: there is no default,
        since the ids of every output depend on it (``"byte"`` is Megatron's test tokenizer).
    json_keys
        Keys to tokenize; a single key may be given as a string. A string value is one sequence;
        a list of strings is one sequence per non-empty element (Megatron's rule).
    append_eod
        Append the end-of-document id to every document with at least one token.
    eos_token_id
        Override the tokenizer's end-of-document id (what ``append_eod`` appends).
    special_tokens
        Special tokens of a tiktoken rank file (``{token: id}`` or a JSON file holding it; see
        :class:`tokshuf.Tokenizer`): a token named ``<|endoftext|>``, ``<|end_of_text|>`` or
        ``</s>`` is the end-of-document id.
    dtype
        Output dtype; ``None``/``"auto"`` picks uint16 below 65500 ids, else int32.
    num_threads
        Tokenizer threads (default: ``TOKSHUF_NUM_THREADS`` or the number of CPUs).
    on_error
        ``"fail"`` stops at the first bad line or file (:class:`tokshuf.BadInputError` naming the
        file, line and reason); ``"skip"`` skips it, counts skipped lines by reason
        (``summary["skipped"]``), lists the first ones (``summary["first_skipped"]``) and every
        empty or truncated file with what was lost (``summary["skipped_files"]``).
    partitions
        ``1``: input order. ``P > 1``: the document order of Megatron's ``--partitions P``
        (line k goes to partition k mod P, partitions concatenated).
    sentence_lists
        Accept a list of strings as a list of sentences (Megatron). ``False``: a list is bad
        input (``not_string``), for corpora whose values must be strings.
    progress
        ``"bar"``, ``"json"`` (JSON lines) or ``"none"``, on stderr. Default: a bar when stderr
        is a terminal, else nothing.
    summary
        Write the summary as JSON: ``True`` → ``{output_prefix}_summary.json``, a path → there,
        ``False`` → nowhere. (Megatron's ``merge_datasets.py`` refuses directories holding files
        other than ``.bin/.idx`` pairs; ``tokshuf merge`` ignores them.)
    batch_bytes, max_line_bytes
        Input bytes per batch of work; lines longer than ``max_line_bytes`` are bad input
        (``line_too_long``) and are never held in memory.
    shard
        ``(i, n)`` or ``"i/n"``: run task ``i`` (0-based) of ``n`` only. The input listing is cut
        into ``n`` contiguous slices balanced by bytes; this task tokenizes its slice into
        ``{output_prefix}-part-IIIII-of-NNNNN_{key}_document.bin/.idx`` (empty when the slice
        is). ``"auto"``: the task of this Slurm array job (``SLURM_ARRAY_TASK_ID``, counted from
        ``SLURM_ARRAY_TASK_MIN`` by ``SLURM_ARRAY_TASK_STEP``).
        :func:`tokshuf.merge_parts` then writes the outputs of the one-task run, byte for byte.

    Returns
    -------
    PreprocessSummary
        The run summary: documents, sequences, tokens, skipped lines by reason, skipped files,
        input bytes, seconds, the tokenizer's identity, the outputs.
    """
    check_num_threads(num_threads)
    check_summary(summary)
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigError(f"partitions must be a positive integer, got {partitions!r}")
    # A str is a Sequence[str] too: "text" is one key, not the keys "t", "e", "x", "t".
    keys = [json_keys] if isinstance(json_keys, str) else list(json_keys)
    check_open_files(
        partitions * len(keys) * _FILES_PER_OUTPUT, f"partitions={partitions} with {len(keys)} JSON key(s)"
    )
    items = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    check_outputs(items, output_prefix, keys, summary, shard)
    tok = as_tokenizer(tokenizer, eos_token_id, special_tokens)
    if progress is None:
        progress = "bar" if sys.stderr.isatty() else "none"
    result = _core.preprocess(
        [os.fspath(i) for i in items],
        os.fspath(output_prefix),
        tok._native(),
        keys,
        append_eod=append_eod,
        dtype=dtype,
        num_threads=num_threads,
        on_error=on_error,
        partitions=partitions,
        batch_bytes=batch_bytes,
        max_line_bytes=max_line_bytes,
        sentence_lists=sentence_lists,
        progress=progress,
        summary=summary if isinstance(summary, bool) else os.fspath(summary),
        shard=f"{shard[0]}/{shard[1]}" if isinstance(shard, tuple) else shard,
    )
    log_run("preprocess", result)
    return cast(PreprocessSummary, result)


def check_outputs(
    inputs: Sequence[str | os.PathLike[str]],
    output_prefix: str | os.PathLike[str],
    json_keys: Sequence[str],
    summary: bool | str | os.PathLike[str],
    shard: str | tuple[int, int] | None = None,
) -> None:
    """Raise :class:`ConfigError` for an empty ``output_prefix`` or when a file the run would write
    (a key's ``.bin``/``.idx``, the summary, the commit record) is one of the inputs: an output
    never replaces an input. (The native run checks again once the inputs are listed.)"""
    prefix = os.fspath(output_prefix)
    if not prefix:
        raise ConfigError("output_prefix (--output-prefix) must not be empty")
    if shard is not None:
        # Parts are named -part-IIIII-of-NNNNN; only the name's shape matters here.
        prefix += "-part-"
    outputs = [f"{prefix}_{k}_document.{ext}" for k in json_keys for ext in ("bin", "idx")]
    outputs.append(f"{prefix}.commit.json")
    if summary is True:
        outputs.append(f"{prefix}_summary.json")
    elif summary is not False:
        outputs.append(os.fspath(summary))
    try:
        listed = [os.fspath(p) for p in _core.expand_input_paths([os.fspath(i) for i in inputs])]
    except (OSError, TokshufError):
        return  # the run itself reports inputs it cannot list
    for out in outputs:
        for item in listed:
            if out == item or _same_file(out, item):
                raise ConfigError(
                    f"the output {out} is also an input ({item}): an output never replaces an input; "
                    "choose another output prefix or summary path"
                )


def _same_file(a: str, b: str) -> bool:
    """Whether the local paths ``a`` and ``b`` name one existing file (links and relative paths
    included)."""
    if _core.is_remote(a) or _core.is_remote(b):
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
