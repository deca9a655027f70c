"""The ``tokshuf`` command line: one subcommand per pipeline stage, one module per subcommand.

Each module (``preprocess``, ``merge``, ``olmo_convert``, ``instances``, ``shuffle``,
``tokenizer``, ``inspect``, ``ray``) has ``add_parser(subparsers)``, which declares its flags and
sets its handler; ``_args`` holds the flags and helpers they share, ``_megatron`` Megatron-LM's
flags of ``preprocess``. A flag's destination is the Python parameter it sets, and its default is
that parameter's (``tests/test_contract.py``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tokshuf import __version__
from tokshuf._storage import redact
from tokshuf.cli import (
    _args,
    inspect,
    instances,
    merge,
    olmo_convert,
    preprocess,
    ray,
    shuffle,
    tokenizer,
)
from tokshuf.errors import BadInputError, TokshufError

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]

#: What ``tokshuf --help`` says above the commands.
DESCRIPTION = "The ``tokshuf`` command line: one subcommand per pipeline stage."

#: The subcommands, in the order ``tokshuf --help`` lists them.
COMMANDS = (preprocess, merge, olmo_convert, instances, shuffle, tokenizer, inspect, ray)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokshuf", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"tokshuf {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    _args.name_subparsers(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tokshuf`` console script; returns the exit status."""
    args = _args.parse_args(build_parser(), argv)
    _args.setup_logging(bool(getattr(args, "quiet", False)))
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
