"""The package's top level: its public names, and what importing it costs."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tokshuf


def test_every_public_name_resolves() -> None:
    for name in tokshuf.__all__:
        assert getattr(tokshuf, name) is not None, name
    assert set(tokshuf.__all__) <= set(dir(tokshuf))
    assert tokshuf.Tokenizer.__module__ == "tokshuf.tokenizer"
    assert tokshuf.preprocess.__module__ == "tokshuf._preprocess"
    assert tokshuf.shuffle.__module__ == "tokshuf._shuffle"


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        tokshuf.no_such_name  # noqa: B018


def test_the_command_line_starts_without_numpy() -> None:
    # numpy (and its BLAS threads) cost a tenth of a second at every `tokshuf` start.
    code = (
        "import sys, tokshuf, tokshuf.cli, tokshuf.preprocess, tokshuf.shuffle;"
        "tokshuf.cli.build_parser();"
        "tokshuf.Tokenizer('byte').encode('abc');"
        "print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_functions_named_like_submodules_stay_functions() -> None:
    code = (
        "import tokshuf.shuffle, tokshuf.preprocess, tokshuf.cli, tokshuf.indexed, tokshuf.nanoset;"
        "import tokshuf;"
        "print(callable(tokshuf.shuffle), callable(tokshuf.preprocess), callable(tokshuf.merge))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"], out.stderr


def test_star_import_gives_the_public_api() -> None:
    namespace: dict[str, object] = {}
    exec("from tokshuf import *", namespace)
    assert {"preprocess", "shuffle", "Nanoset", "IndexedDataset", "Tokenizer"} <= set(namespace)
