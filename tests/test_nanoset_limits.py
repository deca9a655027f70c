"""Sizes from users that no machine can hold become a ConfigError naming the value, never an
abort of the interpreter (issue 30, item 6): a sequence length or sample count whose indices
would not fit, under an address-space limit so the outcome does not depend on the machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_jsonl

import tokshuf

SCRIPT = """
import resource, sys, tokshuf
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
seq, cache = int(sys.argv[2]), sys.argv[3]
cfg = tokshuf.NanosetConfig(sys.argv[1], sequence_length=seq, split="1,0,0", cache_dir=cache)
try:
    tokshuf.build_nanosets(cfg, num_samples=(int(sys.argv[4]), 0, 0))
except tokshuf.ConfigError as e:
    print(e)
    sys.exit(3)
"""


@pytest.mark.parametrize(("sequence_length", "samples"), [(2**29, 10**4), (64, 10**15)])
def test_indices_that_cannot_fit_are_a_config_error(
    tmp_path: Path, sequence_length: int, samples: int
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "hello world " * (i % 20 + 1)} for i in range(300)])
    tokshuf.preprocess(src, tmp_path / "d", "byte")
    args = [str(tmp_path / "d_text_document"), str(sequence_length), str(tmp_path / "cache"), str(samples)]
    run = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, check=False)
    assert run.returncode == 3, run.stderr[-2000:]
    assert "more than this machine can allocate" in run.stdout
    assert "sequence_length" in run.stdout


def test_a_sequence_length_past_the_bound_is_refused_before_anything_is_built() -> None:
    with pytest.raises(tokshuf.ConfigError, match=r"sequence_length must be between 1 and 1073741824"):
        tokshuf.NanosetConfig("x", sequence_length=2**40, cache_dir=False)
