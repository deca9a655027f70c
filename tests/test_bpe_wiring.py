"""Tokenizer specs take the fast BPE encoder when it supports them, and the results are exactly
those of the reference encoders (``tiktoken-rs``, the ``tokenizers`` crate) that
``TOKSHUF_FAST_BPE=0`` selects: the same ids, eod, vocabulary size and preprocess output bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tokshuf

FIXTURES = Path(__file__).parent / "fixtures" / "bpe"
GPT2_JSON = Path(__file__).parent / "fixtures" / "gpt2" / "tokenizer.json"
TEXTS = [
    "",
    "Hello, world! It's <|endoftext|> time.\n\n  indented\tcode(x) // 12345",
    "中文 русский e\u0301 👩\u200d👩\u200d👧 x\n ",
    "a" * 5000,
]


def run_in_subprocess(code: str, fast: bool) -> Any:
    env = dict(os.environ, TOKSHUF_FAST_BPE="1" if fast else "0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


PROBE = """
import json, sys, tokshuf
t = tokshuf.Tokenizer({spec!r})
texts = json.loads({texts!r})
print(json.dumps({{"identity": t.identity, "eod": t.eos_token_id, "vocab": t.vocab_size,
                  "ids": [t.encode(x) for x in texts], "batch": t.encode_batch(texts)}}))
"""


@pytest.mark.parametrize(
    "spec", ["tiktoken:r50k_base", "tiktoken:cl100k_base", "tiktoken:o200k_base", str(GPT2_JSON)]
)
def test_specs_use_the_fast_encoder_with_identical_results(spec: str) -> None:
    code = PROBE.format(spec=spec, texts=json.dumps(TEXTS))
    fast = run_in_subprocess(code, fast=True)
    slow = run_in_subprocess(code, fast=False)
    # The identities differ only in saying which encoder ran (and, for a file, why not the fast).
    assert fast["identity"].pop("encoder") == "fast_bpe"
    assert slow["identity"].pop("encoder") in ("tiktoken-rs", "tokenizers")
    assert slow["identity"].pop("fast_bpe_unsupported", "TOKSHUF_FAST_BPE=0") == "TOKSHUF_FAST_BPE=0"
    assert fast["identity"] == slow["identity"]
    assert (fast["eod"], fast["vocab"]) == (slow["eod"], slow["vocab"])
    assert fast["ids"] == slow["ids"]
    assert fast["batch"] == slow["ids"]


def test_hf_specs_match_special_tokens_like_tokenizers() -> None:
    # The tokenizer.json path recognises added tokens in the text, as `tokenizers` does.
    ids = tokshuf.Tokenizer(str(GPT2_JSON)).encode("a<|endoftext|>b")
    assert ids == [64, 50256, 65]
    # tiktoken specs keep them as text (encode_ordinary).
    assert 100257 not in tokshuf.Tokenizer("tiktoken:cl100k_base").encode("a<|endoftext|>b")


PREPROCESS = """
import json, sys, tokshuf
s = tokshuf.preprocess({corpus!r}, {out!r}, {spec!r}, append_eod=True, num_threads=2, summary=False)
print(json.dumps(s["tokenizer"]))
"""


@pytest.mark.parametrize("spec", ["tiktoken:cl100k_base", str(GPT2_JSON)])
def test_preprocess_output_is_byte_identical(tmp_path: Path, spec: str) -> None:
    corpus = str(FIXTURES / "corpus-i18n.jsonl.zst")
    outputs = {}
    for fast in (True, False):
        prefix = tmp_path / ("fast" if fast else "slow")
        ident = run_in_subprocess(PREPROCESS.format(corpus=corpus, out=str(prefix), spec=spec), fast=fast)
        assert (ident["encoder"] == "fast_bpe") == fast
        outputs[fast] = {
            p.name.removeprefix(prefix.name): p.read_bytes() for p in tmp_path.glob(f"{prefix.name}_*")
        }
    assert outputs[True].keys() == outputs[False].keys()
    assert {".bin", ".idx"} <= {Path(n).suffix for n in outputs[True]}
    for name, data in outputs[True].items():
        assert data == outputs[False][name], name
