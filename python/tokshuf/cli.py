"""The ``tokshuf`` command line: one subcommand per pipeline stage."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tokshuf import __version__, cli_args, cli_instances, cli_shuffle, cli_tokenizer
from tokshuf._preprocess import DEFAULTS
from tokshuf._storage import redact
from tokshuf._summaries import PreprocessSummary
from tokshuf.errors import BadInputError, ConfigError, TokshufError

Handler = Callable[[argparse.Namespace], int]


def _add_preprocess(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "preprocess",
        help="tokenize JSON lines into Megatron .bin/.idx datasets",
        description="Tokenize JSON lines (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet/Arrow files (files, "
        "directories, globs, storage URLs, - for stdin) into {output_prefix}_{key}_document.bin/.idx, "
        "byte-compatible with Megatron-LM.",
    )
    p.add_argument(
        "--input",
        action="extend",
        nargs="+",
        required=True,
        metavar="PATH",
        help="files, directories, globs, s3:// gs:// az:// https:// URLs, - for stdin (repeatable)",
    )
    p.add_argument(
        "--output-prefix",
        required=True,
        help="outputs are {prefix}_{key}_document.bin/.idx; a storage URL uploads them when complete",
    )
    p.add_argument(
        "--tokenizer",
        metavar="SPEC",
        help="required (or Megatron's --tokenizer-type below): "
        "byte | tiktoken:NAME (r50k_base, gpt2, p50k_base, p50k_edit, cl100k_base, o200k_base, "
        "o200k_harmony) | a rank file FILE[@PATTERN] (PATTERN: r50k, p50k, cl100k, cl100k_classic, "
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
        type=cli_args.TOKEN_ID,
        metavar="ID",
        help="override the tokenizer's end-of-document id",
    )
    p.add_argument(
        "--dtype",
        type=cli_args.dtype("auto", integers_only=False),
        default=DEFAULTS["dtype"],
        help="output dtype: auto (the default: Megatron's rule), uint16, int32, ...",
    )
    p.add_argument(
        "--workers",
        "--num-threads",
        dest="num_threads",
        type=cli_args.integer(1, cli_args.MAX_THREADS),
        default=None,
        metavar="N",
        help="tokenizer threads (default: all CPUs; the output is identical for any value)",
    )
    cli_args.add_on_error_flag(p, DEFAULTS["on_error"])
    p.add_argument(
        "--partitions",
        type=cli_args.integer(1),
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
        type=cli_args.integer(1),
        default=DEFAULTS["max_line_bytes"],
        help="longer lines are bad input (line_too_long); a line is held whole with its tokens, "
        "so peak memory grows by about twice the longest line",
    )
    cli_args.add_progress_flag(p, "")
    cli_args.add_summary_flag(p, "{prefix}_summary.json")
    p.add_argument(
        "--shard",
        metavar="I/N",
        type=cli_args.task,
        help="run task I (0-based) of N: a contiguous slice of the inputs, balanced by bytes, into "
        "{prefix}-part-IIIII-of-NNNNN_*; 'auto': this Slurm array task. Then: tokshuf merge --parts PREFIX",
    )
    cli_args.add_output_flags(p)
    cli_args.add_megatron_tokenizer_flags(p)
    p.set_defaults(handler=_preprocess)
    return p


def _preprocess(args: argparse.Namespace) -> int:
    from tokshuf._preprocess import check_outputs, preprocess

    try:
        # Usage errors (exit 2): an empty prefix, an output that would replace an input.
        check_outputs(
            args.input, args.output_prefix, args.json_keys, cli_args.summary_option(args), args.shard
        )
    except ConfigError as e:
        args.subparser.error(str(e))
    tokenizer = cli_args.megatron_tokenizer(args, args.subparser.error)
    megatron = cli_args.megatron_options(args)
    progress = cli_args.progress_option(args)
    options: dict[str, Any] = {
        "append_eod": args.append_eod,
        "eos_token_id": args.eos_token_id,
        "special_tokens": args.special_tokens,
        "dtype": args.dtype,
        "on_error": args.on_error,
        "partitions": megatron["partitions"],
        "sentence_lists": args.sentence_lists,
        "summary": cli_args.summary_option(args),
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
        cli_args.emit(args, merged, [f"merged {merged['parts']} task parts into {args.output_prefix}_*"])
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
    cli_args.emit(args, summary, _preprocess_lines(summary))
    return 0


def _preprocess_lines(summary: PreprocessSummary) -> list[str]:
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


def _add_merge(sub: Any) -> None:
    p = sub.add_parser(
        "merge",
        help="concatenate indexed datasets",
        description="Merge .bin/.idx datasets into one, as Megatron's tools/merge_datasets.py: "
        "a directory contributes its pairs sorted by name; explicit prefixes keep their order.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--input", action="extend", nargs="+", metavar="DIR_OR_PREFIX")
    what.add_argument(
        "--parts",
        metavar="PREFIX",
        help="the parts of `tokshuf preprocess --output-prefix PREFIX --shard I/N`: writes "
        "PREFIX_{key}_document.bin/.idx and PREFIX_summary.json, as one run over all inputs",
    )
    p.add_argument("--output-prefix")
    cli_args.add_summary_flag(p, "{prefix}_summary.json, PREFIX_summary.json with --parts")
    cli_args.add_output_flags(p)
    p.set_defaults(handler=_merge)


def _merge(args: argparse.Namespace) -> int:
    from tokshuf.indexed import merge
    from tokshuf.parts import merge_parts

    if args.parts is not None:
        if args.output_prefix is not None:
            print("tokshuf: error: --parts writes to its own PREFIX; drop --output-prefix", file=sys.stderr)
            return 2
        parts = merge_parts(args.parts, summary=cli_args.summary_option(args))
        cli_args.emit(
            args,
            parts,
            [
                f"{o['prefix']}.{{bin,idx}}: {o['documents']:,} documents, {o['tokens']:,} tokens"
                for o in parts["outputs"]
            ]
            + [
                f"merged {parts['parts']} parts of {parts['files']:,} input files in {parts['seconds']:.2f} s"
            ],
        )
        return 0
    if args.output_prefix is None:
        print("tokshuf: error: merge --input needs --output-prefix", file=sys.stderr)
        return 2
    if not args.output_prefix:
        args.subparser.error("--output-prefix must not be empty")
    summary = merge(args.input, args.output_prefix, summary=cli_args.summary_option(args))
    line = (
        f"{args.output_prefix}.{{bin,idx}}: {summary['documents']:,} documents, {summary['tokens']:,} tokens"
    )
    cli_args.emit(args, summary, [line])
    return 0


def _add_inspect(sub: Any) -> None:
    p = sub.add_parser(
        "inspect",
        help="summarize any tokshuf artifact: .bin/.idx, .npy token files, shards, a blend, instances, "
        "a checkpoint",
        description="Recognize each PATH and summarize it: a Megatron .bin/.idx prefix (or either file), "
        "an OLMo .npy token file, a shuffle output directory (manifest.jsonl + shard_*.tar), a Nanoset / "
        "blend YAML (nanotron's or Megatron-LM's argument names), OLMo-style instances (the "
        "instances-STRATEGY-FINGERPRINT_summary.json that `tokshuf instances` writes into its work "
        "directory, or the index directory beside it), or a streaming-loader checkpoint (a directory, "
        "or one part-*.json).",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="what to inspect (several: one report each)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (a list for several PATHs)")
    p.add_argument(
        "--summary",
        metavar="PATH",
        help="also write the JSON report to PATH ('none': no file, as without the flag)",
    )
    p.add_argument(
        "--plot", metavar="FILE", help="also draw the plots into FILE.png or FILE.html (needs matplotlib)"
    )
    g = p.add_argument_group(".bin/.idx and .npy token files")
    g.add_argument(
        "--tokenizer", metavar="SPEC", help="decode excerpts (byte, tiktoken:NAME or a tokenizer.json)"
    )
    g.add_argument(
        "--doc", type=cli_args.integer(0), metavar="K", help="show document K (decoded with --tokenizer)"
    )
    g.add_argument(
        "--top",
        type=cli_args.integer(0),
        default=10,
        metavar="N",
        help="most frequent ids to list (default 10)",
    )
    scan = g.add_mutually_exclusive_group()
    scan.add_argument(
        "--scan", dest="scan", action="store_true", default=None, help="count ids of any size of file"
    )
    scan.add_argument("--no-scan", dest="scan", action="store_false", help="answer from the index only")
    g.add_argument(
        "--dtype",
        type=cli_args.dtype(),
        help="token dtype of .npy files (default: from the metadata or --tokenizer)",
    )
    g.add_argument(
        "--eos-id",
        type=cli_args.TOKEN_ID,
        help="EOS id that ends .npy documents without metadata",
    )
    g = p.add_argument_group("shuffle output")
    g.add_argument("--verify", action="store_true", help="decode every member of every shard")
    g.add_argument(
        "--eot-id",
        type=cli_args.TOKEN_ID,
        help="EOT id to count (default: the tokenizer's end-of-text id)",
    )
    g.add_argument(
        "--pad-id",
        type=cli_args.TOKEN_ID,
        help="PAD id: the padding fraction (default: the EOT id)",
    )
    g.add_argument(
        "--bos-id",
        type=cli_args.TOKEN_ID,
        help="BOS id to count (also the BOS of .npy documents)",
    )
    g = p.add_argument_group("blend (.yaml)")
    g.add_argument(
        "--step", type=cli_args.integer(0), metavar="N", help="show where each sample of step N comes from"
    )
    g.add_argument(
        "--batch-size",
        type=cli_args.integer(1),
        metavar="B",
        help="global batch size, in samples (default: the YAML's)",
    )
    g.add_argument(
        "--dp-rank", type=cli_args.integer(0), metavar="R", help="only data-parallel rank R's samples"
    )
    g.add_argument(
        "--dp-size", type=cli_args.integer(1), default=1, metavar="D", help="data-parallel ranks (default 1)"
    )
    g.add_argument("--split", default="train", choices=["train", "valid", "test"], help="split of --step")
    p.set_defaults(handler=_inspect)


def _inspect(args: argparse.Namespace) -> int:
    from tokshuf._inspect.cli import run

    return run(args)


def _add_ray(sub: Any) -> None:
    p = sub.add_parser(
        "ray",
        help="preprocess or shuffle as tasks on a Ray cluster (pip install 'tokshuf[ray]')",
        description="The same commands, cut into deterministic tasks that a Ray cluster runs: the "
        "outputs are byte-identical to the one-node command. Paths must be shared by the nodes.",
    )
    jobs = p.add_subparsers(title="jobs", metavar="JOB", required=True)
    for job in (_add_preprocess(jobs), cli_shuffle.add_parser(jobs)):
        g = job.add_argument_group("Ray")
        g.add_argument(
            "--address", help="the cluster to connect to (ray.init's address; default: auto/local)"
        )
        g.add_argument(
            "--cpus-per-task", type=cli_args.integer(1, cli_args.MAX_THREADS), default=1, help="CPUs per task"
        )
        job.set_defaults(ray=True)
    preprocess_job, shuffle_job = jobs.choices["preprocess"], jobs.choices["shuffle"]
    preprocess_job.add_argument(
        "--tasks", type=cli_args.integer(1), help="tasks (default: the cluster's CPUs / --cpus-per-task)"
    )
    shuffle_job.add_argument("--cells-tasks", type=cli_args.integer(1), help="stage 1 tasks (default: CPUs)")
    shuffle_job.add_argument("--shards-tasks", type=cli_args.integer(1), help="stage 2 tasks (default: CPUs)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokshuf", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tokshuf {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    _add_preprocess(sub)
    _add_merge(sub)
    cli_instances.add_commands(sub)
    cli_shuffle.add_parser(sub)
    cli_tokenizer.add_parser(sub)
    _add_inspect(sub)
    _add_ray(sub)
    cli_args.name_subparsers(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tokshuf`` console script; returns the exit status."""
    args = cli_args.parse_args(build_parser(), argv)
    cli_args.setup_logging(bool(getattr(args, "quiet", False)))
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("tokshuf: interrupted; no partial output was kept", file=sys.stderr)
        return 130
    except BadInputError as e:
        print(f"tokshuf: bad input: {redact(str(e))}", file=sys.stderr)
        print("  (use --on-error skip to skip and count bad lines)", file=sys.stderr)
        return 1
    except (TokshufError, OSError) as e:
        print(f"tokshuf: error: {redact(str(e))}", file=sys.stderr)
        return 1
    except Exception as e:
        # A bug: its traceback, with any credential a message quotes masked.
        import traceback

        print(redact("".join(traceback.format_exception(e))), end="", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
