"""The hand-written `_core.pyi` matches the compiled module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ALLOWLIST = Path(__file__).parent.parent / ".stubtest-allowlist"


def test_stubtest() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "tokshuf._core", "--allowlist", str(ALLOWLIST)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_release_build() -> None:
    from tokshuf import _core

    assert _core.build_profile == "release"


def test_split_helpers_return_what_the_stub_says() -> None:
    # stubtest checks names and signatures, not return types: these are lists, not tuples.
    from tokshuf import _core

    vector, matrix = _core.parse_split("949,50,1")
    assert (type(vector), type(matrix)) == (list, list)
    assert type(_core.split_ranges(matrix, 10)) is list
    counts = _core.size_per_split_per_dataset([0.5, 0.5], [4, None, 2], 0.0)
    assert type(counts) is list
    assert all(type(c) is list for c in counts)
