"""The ``tokshuf shuffle`` subcommand (flags follow DCLM's tokshuf-rust where it has them)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, get_args

from tokshuf._shuffle import DEFAULTS, SPECIAL_TOKEN_PRESETS
from tokshuf._summaries import MemberFormat, ShuffleSummary
from tokshuf.cli import _args

DESCRIPTION = """\
Tokenize JSON lines (.jsonl, .jsonl.gz, .jsonl.zst) or Parquet/Arrow files (files, directories,
globs, storage URLs), cut them into
contexts of --context-length tokens per input file (EOT after every document, the file's last
context padded with PAD), shuffle them globally through --num-local-cells cells on local disk, and
write webdataset shards shard_%08d.tar + manifest.jsonl that open_lm / DCLM read unchanged.

The output is the same for any --threads. If the run is interrupted, run the same command again
to resume it (same output); a --local-cell-dir left by a different command is refused.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "shuffle",
        help="tokenize, cut into contexts and globally shuffle into webdataset shards (DCLM/open_lm)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _args.add_input_flag(p, stdin=False)
    p.add_argument(
        "--local-cell-dir", required=True, help="local scratch dir for the cells and the resume state"
    )
    p.add_argument(
        "--output",
        required=True,
        help="output dir or storage URL for shard_%%08d.tar and manifest.jsonl (the manifest last)",
    )
    p.add_argument(
        "--tokenizer",
        metavar="SPEC",
        help="byte | tiktoken:NAME | a rank file FILE[@PATTERN] | a tokenizer.json, SentencePiece .model or "
        "tekken.json, or their directory, as for preprocess (not used with --shuffle-only)",
    )
    p.add_argument(
        "--special-tokens-file",
        dest="tokenizer_special_tokens",
        metavar="JSON",
        help='special tokens of a tiktoken rank file, as a JSON object {"<|end_of_text|>": 128001, ...}',
    )
    p.add_argument(
        "--use-tiktoken",
        action="store_true",
        help="tokshuf-rust's flag: --tokenizer is a tiktoken encoding (tiktoken:NAME, a .tiktoken file)",
    )
    p.add_argument(
        "--context-length",
        "--seqlen",
        dest="context_length",
        type=_args.SEQUENCE_LENGTH,
        default=DEFAULTS["context_length"],
        metavar="N",
        help="tokens per context, INCLUDING the +1 target: the model's sequence length + 1 "
        "(default: %(default)s); --seqlen is DCLM's spelling",
    )
    p.add_argument(
        "--wds-chunk-size",
        type=_args.integer(1),
        default=DEFAULTS["wds_chunk_size"],
        help="contexts per shard (default: %(default)s)",
    )
    p.add_argument(
        "--num-local-cells",
        type=_args.integer(1),
        default=DEFAULTS["num_local_cells"],
        help="local cells: threads + 1 cells (output size / cells each) must fit in RAM "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--seed",
        type=_args.integer(0, 2**64 - 1),
        default=DEFAULTS["seed"],
        help="seed of the shuffle (default: %(default)s)",
    )
    _args.add_threads_flag(p, "worker threads")
    p.add_argument(
        "--ext",
        action="append",
        help="only pick up files with this extension in directories (repeatable; default: "
        ".jsonl .jsonl.gz .jsonl.zst .jsonl.zstd, or .tar with --shuffle-only)",
    )
    p.add_argument(
        "--shuffle-only", action="store_true", help="inputs are webdataset tars: re-shuffle samples"
    )
    p.add_argument(
        "--special-tokens",
        choices=SPECIAL_TOKEN_PRESETS,
        default=None,
        help="native (default): EOT = the tokenizer's end-of-text id, PAD = the EOT id, no BOS; "
        "dclm / dclm-neox: tokshuf-rust's GPT-NeoX ids (EOT 0, PAD 50256, no BOS); "
        "dclm-llama3: tokshuf-rust's Llama-3 ids (BOS 128000, EOT 0, PAD 128258). Without the flag, "
        "a note says which ids the run used",
    )
    for name, what in (
        ("eos", "end-of-text id after every document"),
        ("pad", "id filling each file's last context"),
        ("bos", "id before every document"),
    ):
        p.add_argument(
            f"--{name}-token-id",
            f"--{'eot' if name == 'eos' else name}-id",
            dest=f"{name}_token_id",
            type=_args.TOKEN_ID,
            metavar="ID",
            help=f"{what} (overrides the preset)",
        )
    p.add_argument(
        "--content-key", default=DEFAULTS["content_key"], help="JSON key of the text (default: %(default)s)"
    )
    _args.add_on_error_flag(p, DEFAULTS["on_error"])
    p.add_argument(
        "--member-format",
        choices=get_args(MemberFormat),
        default=DEFAULTS["member_format"],
        help="json.gz (open_lm) or npy (compact: uint16 when ids fit, else uint32); default: %(default)s",
    )
    p.add_argument(
        "--gzip-level",
        type=_args.integer(0, 12),
        default=DEFAULTS["gzip_level"],
        help="json.gz level 0-12 (default: %(default)s; 1 is a token-level deflate, the others "
        "libdeflate's levels)",
    )
    p.add_argument(
        "--all-pad-context",
        action="store_true",
        help="tokshuf-rust quirk: files whose tokens fill whole contexts still emit an all-PAD context",
    )
    p.add_argument(
        "--buffer-mb",
        type=_args.integer(0, _args.COUNT_MAX >> 20),
        default=DEFAULTS["buffer_bytes"] >> 20,
        help="MB of contexts buffered before a cell run is written (default: %(default)s)",
    )
    _args.add_progress_flag(p, ", per stage")
    p.add_argument(
        "--s3-retries",
        type=_args.integer(0),
        metavar="N",
        help="tokshuf-rust's flag, accepted and ignored (as there): failed requests are retried for "
        "$TOKSHUF_STORAGE_RETRY_SECONDS (default 180)",
    )
    p.add_argument("--input-json", help="DCLM dataset reference JSON to update (with --output-json)")
    p.add_argument("--output-json", help="where to write the updated DCLM dataset reference JSON")
    p.add_argument(
        "--stage",
        choices=["cells", "shards", "manifest"],
        help="run one step of the shuffle cut into tasks (shared --local-cell-dir and --output): "
        "cells --task I/N, then shards --task J/M, then manifest; the same bytes as one run",
    )
    p.add_argument(
        "--task",
        metavar="I/N",
        type=_args.task,
        help="the task of --stage cells|shards (0-based I); auto: Slurm array",
    )
    _args.add_summary_flag(p, "OUTPUT/summary.json, beside manifest.jsonl")
    _args.add_output_flags(p)
    p.set_defaults(handler=run)
    return p


#: tokshuf-rust's tokenizers with --use-tiktoken: the rank file it compiles in, its split pattern
#: in tokshuf's names, and the preset of its special ids.
_RUST_TIKTOKEN = {
    "EleutherAI/gpt-neox-20b": ("EleutherAI_gpt-neox-20b.tiktoken", "r50k", "dclm-neox"),
    "meta-llama/Meta-Llama-3-8B": ("meta-llama-3-8B.tiktoken", "llama3", "dclm-llama3"),
}


def tiktoken_only(tokenizer: str, error: Any) -> None:
    """With ``--use-tiktoken`` the tokenizer must be a tiktoken encoding; tokshuf-rust's two hub
    names are told which of its compiled-in rank files to fetch (tokshuf never downloads)."""
    if tokenizer in _RUST_TIKTOKEN:
        file, pattern, preset = _RUST_TIKTOKEN[tokenizer]
        error(
            f"--use-tiktoken --tokenizer {tokenizer}: tokshuf does not download. tokshuf-rust reads "
            f"{file}, compiled into its binary: fetch it from the revbucket/tokshuf-rust repository and "
            f"pass --tokenizer {file}@{pattern} --special-tokens {preset} (tokshuf-rust's ids), or give "
            f"the model's own tokenizer.json directory (no downloads) with --special-tokens {preset}"
        )
    if not (tokenizer.startswith("tiktoken:") or tokenizer.split("@")[0].endswith(".tiktoken")):
        error(
            f"--use-tiktoken needs a tiktoken encoding: tiktoken:NAME or a .tiktoken rank file[@PATTERN], "
            f"got {tokenizer!r}"
        )


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def update_dataset_json(src: str, dst: str, summary: ShuffleSummary, tokenizer: str | None) -> None:
    """Fill a DCLM ``exp_data`` dataset reference with this output, as tokshuf-rust does."""
    ref = json.loads(Path(src).read_text())
    out = Path(summary["output"])
    ref["dataset_url"] = str(out).rstrip("/") + "/"
    ref["manifest_url"] = str(out / "manifest.jsonl")
    ref["tokenized"] = True
    if "tokenizer" not in ref:
        print(f"tokshuf: note: setting the dataset's tokenizer to {tokenizer!r}", file=sys.stderr)
        ref["tokenizer"] = tokenizer
    num_tokens = summary["contexts"] * summary["seqlen"]
    if "num_tokens" in ref and ref["num_tokens"] != num_tokens:
        print(
            f"tokshuf: warning: num_tokens is {ref['num_tokens']}, the output has {num_tokens}",
            file=sys.stderr,
        )
    ref.setdefault("num_tokens", num_tokens)
    ref.setdefault("size", _dir_bytes(out))
    Path(dst).write_text(json.dumps(ref, indent=4) + "\n")


def run(args: argparse.Namespace) -> int:
    from tokshuf._shuffle import shuffle

    if (args.input_json is None) != (args.output_json is None):
        print("tokshuf: error: --input-json and --output-json go together", file=sys.stderr)
        return 2
    if not args.shuffle_only and not args.tokenizer:
        print(
            "tokshuf: error: --tokenizer is required (e.g. tiktoken:r50k_base, or a tokenizer.json or its "
            "directory). tokshuf never downloads: for tokshuf-rust's default, EleutherAI/gpt-neox-20b, give "
            "that model's tokenizer.json and --special-tokens dclm (tokshuf-rust's EOT and PAD ids)",
            file=sys.stderr,
        )
        return 2
    if args.s3_retries is not None:
        _args.note(
            args,
            f"--s3-retries {args.s3_retries} is ignored (tokshuf-rust ignores it too): failed storage "
            "requests are retried for $TOKSHUF_STORAGE_RETRY_SECONDS (default 180)",
        )
    if args.use_tiktoken and not args.shuffle_only:
        tiktoken_only(args.tokenizer, args.subparser.error)
    progress = _args.progress_option(args)
    run_job: Any = shuffle
    extra: dict[str, Any] = {"num_threads": args.num_threads or None, "stage": args.stage, "task": args.task}
    if getattr(args, "ray", False):
        if args.stage or args.task:
            args.subparser.error("tokshuf ray shuffle schedules the stages itself: drop --stage and --task")
        import tokshuf.ray as tray

        run_job = tray.shuffle
        extra = {
            "cells_tasks": args.cells_tasks,
            "shards_tasks": args.shards_tasks,
            "cpus_per_task": args.cpus_per_task,
            "address": args.address,
            "progress": progress != "none",
        }
    try:
        summary = run_job(
            args.input,
            args.local_cell_dir,
            args.output,
            args.tokenizer,
            context_length=args.context_length,
            wds_chunk_size=args.wds_chunk_size,
            num_local_cells=args.num_local_cells,
            seed=args.seed,
            ext=args.ext,
            shuffle_only=args.shuffle_only,
            special_tokens=args.special_tokens or DEFAULTS["special_tokens"],
            eos_token_id=args.eos_token_id,
            pad_token_id=args.pad_token_id,
            bos_token_id=args.bos_token_id,
            content_key=args.content_key,
            on_error=args.on_error,
            member_format=args.member_format,
            gzip_level=args.gzip_level,
            all_pad_context=args.all_pad_context,
            buffer_bytes=args.buffer_mb << 20,
            tokenizer_special_tokens=args.tokenizer_special_tokens,
            summary=_args.summary_option(args),
            **({"progress": progress} if run_job is shuffle else {}),
            **extra,
        )
    except KeyboardInterrupt:
        print("tokshuf: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    if args.input_json:
        update_dataset_json(args.input_json, args.output_json, summary, args.tokenizer)
    lines = report_lines(summary)
    if args.special_tokens is None and not args.shuffle_only and args.stage in (None, "manifest"):
        # Said with the summary (stdout: stderr carries --progress json lines); --json has the ids.
        lines.append(padding_note(summary))
    _args.emit(args, summary, lines)
    return 0


def padding_note(summary: ShuffleSummary) -> str:
    """Which ids a run without ``--special-tokens`` used (the ``native`` preset), and how to get
    tokshuf-rust's: a pasted DCLM command line would otherwise pad with other ids than it does."""
    ids = summary.get("special_tokens") or {"bos": None, "eot": None, "pad": None}
    eot, pad, bos = ids.get("eot"), ids.get("pad"), ids.get("bos")
    same = " (the end-of-text id: padding cannot be told from it)" if pad is not None and pad == eot else ""
    return (
        f"ids (--special-tokens native, the default): EOT {eot} after every document, PAD {pad}{same}"
        f"{'' if bos is None else f', BOS {bos}'}; tokshuf-rust's ids: --special-tokens dclm "
        "(GPT-NeoX-20B: EOT 0, PAD 50256) or dclm-llama3 (BOS 128000, EOT 0, PAD 128258)"
    )


def report_lines(summary: ShuffleSummary) -> list[str]:
    """The human summary of a run (skips and warnings go to the ``tokshuf`` logger)."""
    task: dict[str, Any] = dict(summary.get("task") or {})
    if task.get("step") == "cells":
        return [
            f"cells task {task['index']}/{task['count']}: {summary['files']:,} files, "
            f"{summary['documents']:,} documents, {summary['contexts']:,} contexts "
            f"in {summary['seconds']:.1f} s"
        ]
    if task.get("step") == "shards":
        start, end = task["shards"]
        return [
            f"shards task {task['index']}/{task['count']}: shards {start}..{end} of {summary['shards']:,}"
        ]
    lines = []
    if summary.get("already_complete"):
        lines.append(f"already complete: {summary['output']} (nothing to do)")
    lines.append(
        f"{summary['shards']:,} shards, {summary['contexts']:,} contexts of {summary['seqlen']} tokens "
        f"-> {summary['output']} (manifest.jsonl)"
    )
    lines.append(
        f"{summary['files']:,} files, {summary['documents']:,} documents, {summary['tokens']:,} tokens, "
        f"{summary['pad_tokens']:,} PAD ({100 * summary['padding_fraction']:.2f}% padding)"
    )
    secs = max(summary["seconds"], 1e-9)
    resumed = " (resumed)" if summary.get("resumed") and not summary.get("already_complete") else ""
    mb = summary["decompressed_bytes"] / 1e6
    lines.append(
        f"stage 1 {summary['stage1_seconds']:.1f} s, stage 2 {summary['stage2_seconds']:.1f} s, "
        f"total {secs:.1f} s{resumed} ({mb / secs:,.1f} MB/s of text, "
        f"{summary['contexts'] / secs:,.0f} contexts/s)"
    )
    return lines
