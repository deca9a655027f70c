"""The flags and helpers the subcommands share: checked integers and ids, the usage of the
subcommand a bad flag belongs to, the output, summary, progress and policy flags."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast, get_args

from tokshuf._limits import COUNT_MAX, ID_MAX, MAX_SEQUENCE_LENGTH, MAX_THREADS, out_of_range
from tokshuf._summaries import OnError, Progress

__all__ = [
    "COUNT_MAX",
    "ID_MAX",
    "MAX_SEQUENCE_LENGTH",
    "MAX_THREADS",
    "SEQUENCE_LENGTH",
    "TOKEN_ID",
    "add_on_error_flag",
    "add_output_flags",
    "add_progress_flag",
    "add_summary_flag",
    "add_threads_flag",
    "dtype",
    "emit",
    "integer",
    "name_subparsers",
    "note",
    "parse_args",
    "progress_option",
    "setup_logging",
    "summary_option",
    "task",
    "write_summary_file",
]


def integer(minimum: int = 0, maximum: int = COUNT_MAX) -> Callable[[str], int]:
    """An argparse ``type=`` accepting decimal integers in ``[minimum, maximum]``: anything else
    exits with status 2 and a message naming the flag, the value and the range (the bounds of
    :mod:`tokshuf._limits`, which the Python API checks with the same words)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        problem = out_of_range(value, minimum, maximum)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = "integer"
    return parse


#: ``--eos-token-id`` and the other token ids.
TOKEN_ID = integer(0, ID_MAX)
#: ``--sequence-length`` and the other lengths held whole in memory.
SEQUENCE_LENGTH = integer(1, MAX_SEQUENCE_LENGTH)


def dtype(*extra: str, integers_only: bool = True) -> Callable[[str], str]:
    """An argparse ``type=`` for ``--dtype``: a numpy integer dtype (or any Megatron dtype with
    ``integers_only=False``), or one of the words in ``extra`` (e.g. ``auto``); anything else is a
    usage error (exit status 2) naming the flag."""

    def parse(text: str) -> str:
        if text in extra:
            return text
        if integers_only:
            from tokshuf._limits import integer_dtype
            from tokshuf.errors import ConfigError

            try:
                return str(integer_dtype(text).name)
            except ConfigError:
                pass
        else:
            from tokshuf.indexed import DTYPE_CODES

            names = [d.name for d in DTYPE_CODES.values()]
            if text in names:
                return text
        words = ", ".join(extra) + ", " if extra else ""
        kinds = "an integer dtype: uint8, uint16, uint32, int32, ..." if integers_only else ", ".join(names)
        raise argparse.ArgumentTypeError(f"expected {words}{kinds}; got {text!r}")

    parse.__name__ = "dtype"
    return parse


#: Flags whose value is a task ``I/N``.
TASK_FLAGS = ("--shard", "--task")


def task(text: str) -> str:
    """An argparse ``type=`` for a task flag (``--shard``, ``--task``): ``I/N`` (task ``I``,
    0-based, of ``N``) or ``auto`` (this Slurm array task, numbered from its array's
    ``SLURM_ARRAY_TASK_MIN`` by ``SLURM_ARRAY_TASK_STEP``), returned as ``I/N``; anything else
    exits with status 2 and a message naming the flag."""
    from tokshuf import _core
    from tokshuf.errors import ConfigError

    try:
        index, count = _core.parse_task(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return f"{index}/{count}"


def name_subparsers(parser: argparse.ArgumentParser) -> None:
    """Record in the namespace which (sub)parser handled the command line, for :func:`parse_args`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(subparser=sub)
                name_subparsers(sub)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that an unknown flag is reported with the usage of the
    subcommand it was given to (argparse reports it with the top-level usage). A task flag's
    value that begins with ``-`` (``--shard -1/3``) is its value, not a flag, and is refused by
    the flag's own check."""
    given = list(sys.argv[1:] if argv is None else argv)
    argv, i = [], 0
    while i < len(given):
        value = given[i + 1] if i + 1 < len(given) else ""
        if given[i] in TASK_FLAGS and value[:1] == "-" and value[1:2].isdigit():
            argv.append(f"{given[i]}={value}")
            i += 2
        else:
            argv.append(given[i])
            i += 1
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub: argparse.ArgumentParser = getattr(args, "subparser", parser)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def note(args: argparse.Namespace, message: str) -> None:
    """A line on stderr about how a flag was taken (nothing with ``--quiet``)."""
    if not getattr(args, "quiet", False):
        print(f"tokshuf: note: {message}", file=sys.stderr)


def add_input_flag(p: argparse.ArgumentParser, *, stdin: bool) -> None:
    """``--input PATH...`` (repeatable): the inputs of a command that reads documents."""
    where = "files, directories, globs, s3:// gs:// az:// https:// URLs"
    p.add_argument(
        "--input",
        action="extend",
        nargs="+",
        required=True,
        metavar="PATH",
        help=f"{where}, - for stdin (repeatable)" if stdin else f"{where} (repeatable)",
    )


def add_output_flags(p: argparse.ArgumentParser) -> None:
    """The flags every long command shares: ``--json`` (the run summary as one JSON object on
    stdout instead of the human lines) and ``--quiet`` (nothing but errors)."""
    p.add_argument("--json", action="store_true", help="print the run summary as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")


def add_summary_flag(p: argparse.ArgumentParser, default: str) -> None:
    """``--summary PATH``: where the run summary file goes (``default`` describes where it goes
    without the flag; ``none`` writes none)."""
    p.add_argument(
        "--summary",
        default=None,
        metavar="PATH",
        help=f"where to write the run summary as JSON (default: {default}; 'none' to skip)",
    )


def summary_option(args: argparse.Namespace) -> bool | str:
    """``--summary`` as the ``summary`` argument of the Python functions: ``True`` (the default
    place beside the outputs), ``False`` (``none``) or the path given."""
    value: str | None = args.summary
    if value is None:
        return True
    return False if value == "none" else value


def add_threads_flag(p: argparse.ArgumentParser, what: str) -> None:
    """``--threads``/``--num-threads N`` (``num_threads``): unset (or 0) is every CPU."""
    p.add_argument(
        "--threads",
        "--num-threads",
        dest="num_threads",
        type=integer(0, MAX_THREADS),
        metavar="N",
        help=f"{what}, at most {MAX_THREADS} (default, or 0: all CPUs; the output is the same for any value)",
    )


def add_on_error_flag(p: argparse.ArgumentParser, default: str) -> None:
    """``--on-error fail|skip`` (``on_error``), the bad-input policy of the commands that read
    text."""
    p.add_argument(
        "--on-error",
        choices=get_args(OnError),
        default=default,
        help="bad lines and files: fail (exit 1 naming the file and line) or skip, count and report "
        "them (default: %(default)s)",
    )


def add_progress_flag(p: argparse.ArgumentParser, per: str) -> None:
    """``--progress``; :func:`progress_option` reads it. Unlike the Python functions' default
    (a bar on a terminal, else nothing), ``auto`` prints JSON lines off a terminal, for job logs."""
    p.add_argument(
        "--progress",
        choices=["auto", *get_args(Progress)],
        default="auto",
        help=f"on stderr{per}: a bar, JSON lines or nothing (auto: a bar on a terminal, else JSON lines)",
    )


def progress_option(args: argparse.Namespace) -> Progress:
    """``--progress`` as the ``progress`` argument of the Python functions (``none`` with
    ``--quiet``)."""
    if args.quiet:
        return "none"
    if args.progress == "auto":
        return "bar" if sys.stderr.isatty() else "json"
    return cast(Progress, args.progress)


def write_summary_file(args: argparse.Namespace, summary: Mapping[str, Any], default: str) -> None:
    """Write a finished run's summary where ``--summary`` says (``default``: beside its outputs),
    for the commands whose Python function writes none itself."""
    from tokshuf._summary_file import summary_target, write_summary

    target = summary_target(summary_option(args), default)
    if target is not None:
        write_summary(summary, target)


def emit(args: argparse.Namespace, summary: Mapping[str, Any], lines: Sequence[str]) -> None:
    """Print a finished run's summary as ``--json``/``--quiet`` say: JSON, or the human
    ``lines`` (skips and warnings went to the ``tokshuf`` logger, on stderr)."""
    from tokshuf._storage import redact

    if args.quiet:
        return
    if args.json:
        print(redact(json.dumps(summary, default=str)))
        return
    for line in lines:
        print(redact(line))


def setup_logging(quiet: bool) -> None:
    """The ``tokshuf`` logger on stderr for the command line: warnings (skips, problems), and
    nothing but errors with ``--quiet``."""
    import logging

    logger = logging.getLogger("tokshuf")
    ours = [h for h in logger.handlers if getattr(h, "_tokshuf_cli", False)]
    if ours:
        # The stderr of this call (main() run again in one process, e.g. under a test's capture;
        # not setStream, which flushes the old stream, perhaps closed by now).
        cast(logging.StreamHandler[Any], ours[0]).stream = sys.stderr
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("tokshuf: %(levelname)s: %(message)s"))
        from tokshuf._log import RedactFilter

        handler.addFilter(RedactFilter())  # the loggers below tokshuf's too
        handler._tokshuf_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(logging.ERROR if quiet else logging.WARNING)
