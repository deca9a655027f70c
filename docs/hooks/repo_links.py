"""The changelog page is the repository's CHANGELOG.md, whose links point into docs/ as seen from
the root (``docs/names.md``): on the site the page is inside docs/ already, so that prefix goes,
and a link to another file of the repository becomes a link to it on GitHub."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGES = {"changelog.md": "CHANGELOG.md"}  # page: the file of the repository it shows
LINK = re.compile(r"\]\((?!https?://|#)([^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    source = PAGES.get(page.file.src_uri)
    if source is None:
        return markdown
    repo = str(config.repo_url).rstrip("/")

    def fix(m: re.Match[str]) -> str:
        target = m.group(1)
        if target.startswith("docs/"):
            return f"]({target[len('docs/') :]})"
        return f"]({repo}/blob/main/{target})"

    return LINK.sub(fix, (REPO / source).read_text(encoding="utf-8"))
