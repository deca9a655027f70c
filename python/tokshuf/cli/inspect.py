"""``tokshuf inspect``: a report on each artifact given (:func:`tokshuf.inspect`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tokshuf._inspect import inspect
from tokshuf.cli import _args
from tokshuf.errors import FormatError, TokshufError

__all__ = ["add_parser", "options", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
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
        "--doc", type=_args.integer(0), metavar="K", help="show document K (decoded with --tokenizer)"
    )
    g.add_argument(
        "--top",
        type=_args.integer(0),
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
        type=_args.dtype(),
        help="token dtype of .npy files (default: from the metadata or --tokenizer)",
    )
    g.add_argument(
        "--eos-id",
        type=_args.TOKEN_ID,
        help="EOS id that ends .npy documents without metadata",
    )
    g = p.add_argument_group("shuffle output")
    g.add_argument("--verify", action="store_true", help="decode every member of every shard")
    for flag, what in (
        ("--eot-id", "EOT id to count (default: the tokenizer's end-of-text id)"),
        ("--pad-id", "PAD id: the padding fraction (default: the EOT id)"),
        ("--bos-id", "BOS id to count (also the BOS of .npy documents)"),
    ):
        g.add_argument(flag, type=_args.TOKEN_ID, help=what)
    g = p.add_argument_group("blend (.yaml)")
    g.add_argument(
        "--step", type=_args.integer(0), metavar="N", help="show where each sample of step N comes from"
    )
    g.add_argument(
        "--batch-size",
        type=_args.integer(1),
        metavar="B",
        help="global batch size, in samples (default: the YAML's)",
    )
    g.add_argument(
        "--dp-rank", type=_args.integer(0), metavar="R", help="only data-parallel rank R's samples"
    )
    g.add_argument(
        "--dp-size", type=_args.integer(1), default=1, metavar="D", help="data-parallel ranks (default 1)"
    )
    g.add_argument("--split", default="train", choices=["train", "valid", "test"], help="split of --step")
    p.set_defaults(handler=run)
    return p


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`tokshuf._inspect.inspect` that the flags give."""
    opts: dict[str, Any] = {
        "tokenizer": args.tokenizer,
        "doc": args.doc,
        "top": args.top,
        "scan": args.scan,
        "dtype": args.dtype,
        # --eot-id (shards) and --eos-id (.npy documents) name one concept: the end-of-document id.
        "eos_token_id": args.eot_id if args.eot_id is not None else args.eos_id,
        "verify": args.verify,
        "pad_token_id": args.pad_id,
        "bos_token_id": args.bos_id,
        "step": args.step,
        "batch_size": args.batch_size,
        "dp_rank": args.dp_rank,
        "dp_size": args.dp_size,
        "split": args.split,
    }
    if args.tokenizer is not None:
        from tokshuf.tokenizer import Tokenizer

        tok = Tokenizer(args.tokenizer)
        opts["vocab_size"] = tok.vocab_size
        if opts["eos_token_id"] is None:
            opts["eos_token_id"] = tok.eos_token_id  # tokshuf shuffle's "native" preset: EOT = PAD = eod
    return opts


def _inspect(path: str, opts: dict[str, Any]) -> Any:
    """:func:`inspect`, with a damaged artifact's surprise (a field of the wrong type deep in a
    file) reported as a :class:`FormatError` naming the path instead of a traceback."""
    try:
        return inspect(path, **opts)
    except TokshufError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, EOFError) as e:
        raise FormatError(f"{path}: cannot be read ({type(e).__name__}: {e})") from e


def run(args: argparse.Namespace) -> int:
    opts = options(args)
    reports = [_inspect(p, opts) for p in args.paths]
    dicts = [r.to_dict() for r in reports]
    data = dicts[0] if len(dicts) == 1 else dicts
    # As for every other command, ``--summary none`` writes no file (inspect's default too).
    if args.summary is not None and args.summary != "none":
        from tokshuf._summary_file import write_summary

        write_summary(data, args.summary)
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        from tokshuf._inspect.render import render

        print("\n\n".join(render(r) for r in reports))
    if args.plot:
        from tokshuf._inspect.plot import plot

        drawn = plot(reports, args.plot)
        if not args.json:
            print(f"\nplots ({', '.join(p.title for p in drawn.panels)}) -> {drawn.path}")
    if args.verify:
        # As for a faulty checkpoint: a verification that found problems fails the command.
        failed = [
            (p, r.problems) for p, r in zip(args.paths, reports, strict=True) if getattr(r, "problems", None)
        ]
        for path, problems in failed:
            print(f"tokshuf: error: {path}: verification failed: {len(problems)} problem(s)", file=sys.stderr)
        if failed:
            return 1
    return 0
