"""``tokshuf preprocess``: JSON lines or Parquet/Arrow files into Megatron ``.bin/.idx``."""

from __future__ import annotations

import argparse
from typing import Any

from tokshuf import _core
from tokshuf._preprocess import DEFAULTS
from tokshuf._summaries import PreprocessSummary
from tokshuf.cli import _args, _megatron
from tokshuf.errors import ConfigError

__all__ = ["add_parser", "report_lines", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "preprocess",
        help="tokenize JSON lines into Megatron .bin/.idx datasets",
        description="Tokenize JSON lines (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet/Arrow files (files, "
        "directories, globs, storage URLs, - for stdin) into {output_prefix}_{key}_document.bin/.idx, "
        "byte-compatible with Megatron-LM.",
    )
    _args.add_input_flag(p, stdin=True)
    p.add_argument(
        "--output-prefix",
        required=True,
        help="outputs are {prefix}_{key}_document.bin/.idx; a storage URL uploads them when complete",
    )
    p.add_argument(
        "--tokenizer",
        metavar="SPEC",
        help="required (or Megatron's --tokenizer-type below): "
        f"byte | tiktoken:NAME ({', '.join(_core.TIKTOKEN_ENCODINGS)}) "
        "| a rank file FILE[@PATTERN] (PATTERN: r50k, p50k, cl100k, cl100k_classic, "
        "llama3, o200k, qwen2, tekken) | a tokenizer.json, SentencePiece .model or tekken.json, or "
        "their directory",
    )
    p.add_argument(
        "--special-tokens-file",
        dest="special_tokens",
        metavar="JSON",
        help='special tokens of a tiktoken rank file, as a JSON object {"<|end_of_text|>": 128001, ...}',
    )
    p.add_argument(
        "--json-keys",
        nargs="+",
        default=list(DEFAULTS["json_keys"]),
        metavar="KEY",
        help="keys to tokenize (columns of a Parquet/Arrow input; default: %(default)s)",
    )
    p.add_argument("--append-eod", action="store_true", help="end every non-empty document with the eod id")
    p.add_argument(
        "--eos-token-id",
        "--eod-id",
        dest="eos_token_id",
        type=_args.TOKEN_ID,
        metavar="ID",
        help="override the tokenizer's end-of-document id",
    )
    p.add_argument(
        "--dtype",
        type=_args.dtype("auto", integers_only=False),
        default=DEFAULTS["dtype"],
        help="output dtype: auto (the default: Megatron's rule), uint16, int32, ...",
    )
    p.add_argument(
        "--workers",
        "--num-threads",
        dest="num_threads",
        type=_args.integer(1, _args.MAX_THREADS),
        default=None,
        metavar="N",
        help="tokenizer threads (default: all CPUs; the output is identical for any value)",
    )
    _args.add_on_error_flag(p, DEFAULTS["on_error"])
    p.add_argument(
        "--partitions",
        type=_args.integer(1),
        default=DEFAULTS["partitions"],
        help="document order of Megatron's --partitions P (round-robin); default %(default)s: input order",
    )
    p.add_argument(
        "--no-sentence-lists",
        dest="sentence_lists",
        action="store_false",
        help="a JSON list value is bad input (not_string) instead of a list of sentences",
    )
    p.add_argument(
        "--max-line-bytes",
        type=_args.integer(1),
        default=DEFAULTS["max_line_bytes"],
        help="longer lines are bad input (line_too_long); a line is held whole with its tokens, "
        "so peak memory grows by about twice the longest line",
    )
    _args.add_progress_flag(p, "")
    _args.add_summary_flag(p, "{prefix}_summary.json")
    p.add_argument(
        "--shard",
        metavar="I/N",
        type=_args.task,
        help="run task I (0-based) of N: a contiguous slice of the inputs, balanced by bytes, into "
        "{prefix}-part-IIIII-of-NNNNN_*; 'auto': this Slurm array task. Then: tokshuf merge --parts PREFIX",
    )
    _args.add_output_flags(p)
    _megatron.add_megatron_tokenizer_flags(p)
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    from tokshuf._preprocess import check_outputs, preprocess

    try:
        # Usage errors (exit 2): an empty prefix, an output that would replace an input.
        check_outputs(args.input, args.output_prefix, args.json_keys, _args.summary_option(args), args.shard)
    except ConfigError as e:
        args.subparser.error(str(e))
    tokenizer = _megatron.megatron_tokenizer(args, args.subparser.error)
    megatron = _megatron.megatron_options(args)
    progress = _args.progress_option(args)
    options: dict[str, Any] = {
        "append_eod": args.append_eod,
        "eos_token_id": args.eos_token_id,
        "special_tokens": args.special_tokens,
        "dtype": args.dtype,
        "on_error": args.on_error,
        "partitions": megatron["partitions"],
        "sentence_lists": args.sentence_lists,
        "summary": _args.summary_option(args),
        "max_line_bytes": args.max_line_bytes,
    }
    if getattr(args, "ray", False):
        if args.shard:
            args.subparser.error("tokshuf ray preprocess cuts the job into tasks itself: drop --shard")
        import tokshuf.ray as tray

        merged = tray.preprocess(
            args.input,
            args.output_prefix,
            tokenizer,
            args.json_keys,
            tasks=args.tasks,
            cpus_per_task=args.cpus_per_task,
            address=args.address,
            progress=progress != "none",
            **options,
        )
        _args.emit(args, merged, [f"merged {merged['parts']} task parts into {args.output_prefix}_*"])
        return 0
    summary = preprocess(
        args.input,
        args.output_prefix,
        tokenizer,
        args.json_keys,
        num_threads=args.num_threads,
        progress=progress,
        shard=args.shard,
        **options,
    )
    _args.emit(args, summary, report_lines(summary))
    return 0


def report_lines(summary: PreprocessSummary) -> list[str]:
    lines = [
        f"{out['prefix']}.{{bin,idx}}: {out['documents']:,} documents, "
        f"{out['sequences']:,} sequences, {out['tokens']:,} tokens ({summary['dtype']})"
        for out in summary["outputs"]
    ]
    mb = summary["decompressed_bytes"] / 1e6
    secs = max(summary["seconds"], 1e-9)
    lines.append(
        f"{summary['lines']:,} lines, {mb:,.1f} MB of text in {secs:.2f} s "
        f"({mb / secs:,.1f} MB/s, {summary['tokens'] / secs / 1e6:,.2f} M tokens/s, "
        f"{summary['workers']} worker{'s' if summary['workers'] != 1 else ''})"
    )
    return lines
