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
