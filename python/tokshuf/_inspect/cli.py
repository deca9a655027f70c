"""``tokshuf inspect``: the handler behind :mod:`tokshuf.cli`'s parser."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tokshuf._inspect import inspect
from tokshuf.errors import FormatError, TokshufError

__all__ = ["options", "run"]


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
