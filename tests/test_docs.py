"""The README's Python snippets type-check under `mypy --strict` against the package, so what a
user copies from it is what the API declares (a split that must be there is not `| None`, the
options are the documented ones)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_python_snippets() -> None:
    assert len(snippets()) >= 2


@pytest.mark.parametrize("index", range(len(snippets())))
def test_readme_snippet_passes_mypy_strict(tmp_path: Path, index: int) -> None:
    pytest.importorskip("mypy")
    path = tmp_path / f"readme_snippet_{index}.py"
    path.write_text(snippets()[index], encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--config-file",
            "/dev/null",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
