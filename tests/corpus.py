"""Generated corpora for tests: the vendored offline generator (``fixtures/make_corpus.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import FIXTURES

MAKE_CORPUS = FIXTURES / "make_corpus.py"
GPT2 = FIXTURES / "gpt2"


class CorpusFactory:
    """Generates corpora into one directory, each once per test session.

    The generator's source pool (Debian files) is built once into ``cache`` and reused.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache = root / "pool-cache"
        self._made: dict[tuple[str, ...], tuple[Path, dict[str, Any]]] = {}

    def __call__(self, name: str, *args: str) -> tuple[Path, dict[str, Any]]:
        """``make_corpus.py ROOT/name ARGS...`` → (path, manifest)."""
        key = (name, *args)
        if key not in self._made:
            out = self.root / name
            subprocess.run(
                [sys.executable, str(MAKE_CORPUS), str(out), *args, "--cache-dir", str(self.cache)],
                check=True,
                capture_output=True,
            )
            manifest = json.loads(Path(f"{out}.manifest.json").read_text())
            self._made[key] = (out, manifest)
        return self._made[key]
