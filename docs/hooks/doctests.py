"""A griffe extension for the API reference: the docstrings' doctest blocks (``>>>`` lines and
their output) become fenced Python code, their ``# doctest:`` flags removed. Markdown would
otherwise read ``>>>`` as nested quotes and ``x[0]["k"]`` as a reference link."""

from __future__ import annotations

import re
from typing import Any

import griffe

FLAG = re.compile(r"\s*#\s*doctest:.*$")


def fence(text: str) -> str:
    out: list[str] = []
    block: list[str] = []
    indent = ""

    def close() -> None:
        if block:
            out.extend([f"{indent}```pycon", *block, f"{indent}```"])
            block.clear()

    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith((">>>", "...")) and (block or stripped.startswith(">>>")):
            if not block:
                indent = line[: len(line) - len(stripped)]
            block.append(FLAG.sub("", line))
        elif block and stripped:  # the expected output, up to a blank line
            block.append(line)
        else:
            close()
            out.append(line)
    close()
    return "\n".join(out)


class Doctests(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence(obj.docstring.value)
