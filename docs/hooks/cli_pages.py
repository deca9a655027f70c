"""A page per ``tokshuf`` command, generated from its ``--help`` when the site is built.

MkDocs runs this hook (``hooks:`` in mkdocs.yml): the pages exist only in the build, so they
cannot go stale. ``python docs/hooks/cli_pages.py OUT_DIR`` writes the same pages as files.

The help is that of the tree being documented (``python/`` goes first on ``sys.path``), formatted
at a fixed width so that the pages do not depend on the terminal that built them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
WIDTH = "100"

# The guide each command belongs to (relative to docs/cli/).
GUIDES = {
    "preprocess": ("Preprocess", "../preprocess.md"),
    "merge": ("Scale out", "../scale-out.md"),
    "olmo-convert": ("OLMo-style instances", "../instances.md"),
    "instances": ("OLMo-style instances", "../instances.md"),
    "shuffle": ("Shuffle", "../shuffle.md"),
    "tokenizer check": ("Tokenizers", "../tokenizers.md"),
    "inspect": ("Inspect", "../inspect.md"),
    "ray preprocess": ("Scale out", "../scale-out.md"),
    "ray shuffle": ("Scale out", "../scale-out.md"),
}


def _parser() -> argparse.ArgumentParser:
    sys.path.insert(0, str(REPO / "python"))
    from tokshuf.cli import build_parser

    return build_parser()


def _leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[str, Any, str]]:
    """``(command words, parser, one-line help)`` of every command that runs something."""
    out: list[tuple[str, Any, str]] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                out += _leaves(sub, (*words, name))
            else:
                out.append((" ".join((*words, name)), sub, helps.get(name, "")))
    return out


def pages() -> dict[str, str]:
    """``{path under docs/: markdown}`` of every command's page."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        out = {}
        for command, parser, summary in _leaves(_parser()):
            if command not in GUIDES:
                raise SystemExit(
                    f"docs/hooks/cli_pages.py: no guide for the command {command!r}; add it to GUIDES "
                    "and a page to mkdocs.yml's nav"
                )
            title, guide = GUIDES[command]
            text = parser.format_help().rstrip()
            out[f"cli/{command.replace(' ', '-')}.md"] = (
                f"# tokshuf {command}\n\n"
                f"{summary[:1].upper() + summary[1:]}. Guide: [{title}]({guide}).\n\n"
                "Generated from `tokshuf " + command + " --help` when the site is built.\n\n"
                f"```text\n{text}\n```\n"
            )
        return out
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python docs/hooks/cli_pages.py OUT_DIR")
    root = Path(sys.argv[1])
    for path, content in pages().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content, encoding="utf-8")
        print(root / path)
