"""The README's benchmark table: the headline of docs/benchmarks.md (which benches/bench_peers.py
writes), copied between the README's ``benchmarks:begin`` and ``benchmarks:end`` markers, so that
its numbers are always those of the last run.

    python docs/hooks/bench_table.py           # rewrite README.md (make docs, make bench)
    python docs/hooks/bench_table.py --check   # exit 1 if README.md is stale

The headline is the page's first corpus table, cut to tokshuf, the tokenizer libraries people
use most and tokshuf's end-to-end column; the page has every peer, corpus and tokenizer.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BEGIN = "<!-- benchmarks:begin (copied from docs/benchmarks.md by `make docs`; do not edit) -->"
END = "<!-- benchmarks:end -->"
COLUMNS = ("tokenizer", "threads", "tokshuf", "fastokens", "tiktoken", "tokenizers")
PLACEHOLDER = (
    "`make bench` measures tokshuf beside its peers and writes [docs/benchmarks.md](docs/benchmarks.md); "
    "its\nheadline table is copied here by `make docs`."
)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def headline(page: str) -> str:
    """The README's text for the benchmarks page ``page``."""
    lines = page.splitlines()
    date = next((line[len("- Date:") :].strip() for line in lines if line.startswith("- Date:")), None)
    machine = next((line[len("- Machine:") :].strip() for line in lines if line.startswith("- Machine:")), "")
    for i, line in enumerate(lines):
        m = re.match(r"## (.+) corpus\s*$", line)
        if not m:
            continue
        table = []
        for row in lines[i + 1 :]:
            if row.startswith("## "):
                break
            if row.startswith("|"):
                table.append(row)
            elif table:
                break
        if len(table) < 3:
            continue
        head = _cells(table[0])
        keep = [j for j, h in enumerate(head) if h in COLUMNS or h.startswith("tokshuf `preprocess`")]
        if "tokshuf" not in head:
            continue
        rows = [_cells(r) for r in table[:1] + table[2:]]
        out = ["| " + " | ".join(r[j] for j in keep) + " |" for r in rows]
        out.insert(1, "|" + " --- |" * len(keep))
        when = f" ({date}; {machine.split(';')[0]})" if date else ""
        return (
            f"Tokenizing the {m.group(1)} corpus: MB of text per second (and the ratio to fastokens on "
            f"the same work){when}. Every peer, corpus and tokenizer, the method and the command: "
            "[docs/benchmarks.md](docs/benchmarks.md).\n\n" + "\n".join(out)
        )
    return PLACEHOLDER


def updated(readme: str, page: str) -> str:
    """``readme`` with its benchmark block made from ``page``."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n" + headline(page) + "\n" + readme[end:]


def main(argv: list[str]) -> int:
    readme_path, page_path = REPO / "README.md", REPO / "docs" / "benchmarks.md"
    readme = readme_path.read_text(encoding="utf-8")
    new = updated(readme, page_path.read_text(encoding="utf-8"))
    if argv == ["--check"]:
        if new != readme:
            print("README.md: the benchmark table differs from docs/benchmarks.md; run `make docs`")
            return 1
        return 0
    if new != readme:
        readme_path.write_text(new, encoding="utf-8")
        print("README.md: benchmark table updated from docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
