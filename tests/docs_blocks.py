"""The code blocks of the README and of docs/, and a runner that executes a page's blocks in order.

A fenced block is run according to its language: ``python`` and ``bash`` blocks run, ``yaml``,
``json`` and ``toml`` blocks are parsed, others (``text``, ...) are shown only. An HTML comment
on the line before the fence changes that, invisibly on GitHub and on the site:

* ``<!-- docs-test: skip (REASON) -->``: not run (it needs S3, Ray, Slurm, a GPU, the network, or
  is a step of CI itself); a Python block is still type-checked;
* ``<!-- docs-test: sketch (REASON) -->``: an outline with placeholders (``...``, paths of the
  reader's data): neither run nor type-checked;
* ``<!-- docs-test: file NAME -->``: the block's text is written to NAME in the page's directory
  before the blocks after it run (a YAML config the next command reads).

A page states what it starts from with ``<!-- docs-test: needs tok, shards -->`` anywhere in it
(see :data:`PREPARED`). Every page runs in a directory of its own holding the inputs a newcomer
would have: ``corpus/{web,code}/*.jsonl.zst``, Llama 3's ``Meta-Llama-3-8B/original/tokenizer.model``
and GPT-NeoX-20B's ``gpt-neox-20b/tokenizer.json``.

``python tests/docs_blocks.py`` (the runner) reads a JSON list of blocks on stdin and runs them in
order, the Python blocks of a page in one namespace (as a reader runs them one after the other).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN = {"python", "bash"}
PARSE = {"yaml", "json", "toml"}
SHOW = {"text", "pycon", "console", "mermaid"}
#: What a page may start from, beside the inputs: made once per test session.
PREPARED = {
    "tok": "tok/{web,code}/llama3_text_document.bin/.idx: the README's preprocess, Llama 3's tokenizer",
    "shards": "shards/: a shuffle of corpus/ with GPT-NeoX-20B's tokenizer and --special-tokens dclm",
    "ckpt": "ckpt/step_3/loader: a streaming-loader checkpoint over tok/ (needs torch)",
}

FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(\w+)\s*(.*?)\s*-->\s*$")
NEEDS = re.compile(r"<!--\s*docs-test:\s*needs\s+(.*?)\s*-->")


@dataclasses.dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None  # "skip", "sketch", "file", or None
    argument: str  # the skip reason, or the file name

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.marker not in ("skip", "sketch")

    @property
    def typechecked(self) -> bool:
        return self.lang == "python" and self.marker != "sketch"


def pages() -> list[Path]:
    """The Markdown files whose blocks are checked: README, CHANGELOG, every page of docs/."""
    docs = sorted(p for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.relative_to(REPO).parts)
    return [REPO / "README.md", REPO / "CHANGELOG.md", *docs]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise ValueError(f"{path}:{i + 1}: a code block that never closes")
        code = "\n".join(line[len(indent) :] for line in lines[i + 1 : j]) + "\n"
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARKER.match(lines[k]) if k >= 0 else None
        out.append(
            Block(
                path,
                i + 1,
                lang,
                code,
                marker.group(1) if marker else None,
                marker.group(2).strip("() ") if marker else "",
            )
        )
        i = j + 1
    return out


def needs(path: Path) -> list[str]:
    """The prepared artifacts a page says it starts from."""
    found = NEEDS.findall(path.read_text(encoding="utf-8"))
    return sorted({n.strip() for group in found for n in group.split(",") if n.strip()})


def run(specs: list[dict[str, str]]) -> int:
    """Run the blocks in order in the current directory; report the first that fails."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    for spec in specs:
        where, lang, code = spec["where"], spec["lang"], spec["code"]
        print(f"--- {where} ({lang})", flush=True)
        if lang == "file":
            Path(spec["name"]).write_text(code, encoding="utf-8")
            continue
        if lang == "bash":
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], check=False)
            if done.returncode != 0:
                print(f"FAILED: the bash block at {where} exited with {done.returncode}", flush=True)
                return 1
            continue
        try:
            exec(compile(code, where, "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            print(f"FAILED: the python block at {where}", flush=True)
            return 1
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(run(json.loads(sys.stdin.read())))
