"""A griffe extension for the API reference, which reads the docstrings as Markdown: their
doctest blocks (``>>>`` lines and their output) become fenced Python code without the
``# doctest:`` flags (Markdown would read ``>>>`` as nested quotes and ``x[0]["k"]`` as a
reference link), and Sphinx roles (``:class:`Nanoset```, ``:func:`~tokshuf.merge```) become code."""

from __future__ import annotations

import re
from typing import Any

import griffe

FLAG = re.compile(r"\s*#\s*doctest:.*$")
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def _role(m: re.Match[str]) -> str:
    target = m.group(2)
    return f"`{target.rsplit('.', 1)[-1] if m.group(1) else target}`"


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
    return ROLE.sub(_role, "\n".join(out))


class Doctests(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence(obj.docstring.value)
