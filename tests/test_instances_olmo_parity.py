"""Parity with OLMo-core itself: every field of every instance of every strategy, on edge-case
corpora, against OLMo-core's own ``Numpy*Dataset`` classes.

OLMo-core pins an older torch than tokshuf's tests use, so it runs in its own interpreter:
``OLMO_PYTHON=/path/to/venv/bin/python`` (a venv where ``pip install ai2-olmo-core`` worked), or
this interpreter if it imports ``olmo_core``. Without either the test is skipped.

Known, documented differences are left out: padded and interleaved with a BOS on BOS = EOS data
or on a file ending without EOS (OLMo-core's padded documents ignore the BOS). OLMo-core's
packing sort is made stable in the peer (its default ``argsort`` orders equal lengths
arbitrarily); tokshuf takes them in file order.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tokshuf import olmo_tokens as ot
from tokshuf.instances import (
    FSLDataset,
    InterleavedFSLDataset,
    PackedFSLDataset,
    PaddedFSLDataset,
    VSLDataset,
)


def olmo_python() -> str | None:
    if os.environ.get("OLMO_PYTHON"):
        return os.environ["OLMO_PYTHON"]
    return sys.executable if importlib.util.find_spec("olmo_core") is not None else None


pytestmark = pytest.mark.skipif(
    olmo_python() is None, reason="OLMo-core not installed (set OLMO_PYTHON to a venv with ai2-olmo-core)"
)

#: name: dtype, vocab, eos, pad, bos (None: no BOS), label masks, a tail without EOS.
CORPORA: dict[str, tuple[str, int, int, int, int | None, bool, bool]] = {
    "dolma2": ("uint32", 100278, 100257, 100277, None, False, True),
    "neox_pad1": ("uint16", 50280, 50279, 1, None, False, False),
    "gpt2_pad_is_eos": ("uint16", 50257, 50256, 50256, None, False, True),
    "bos_is_eos": ("uint32", 100278, 100257, 100277, 100257, False, False),
    "distinct_bos": ("uint16", 1000, 2, 0, 3, False, False),
    "distinct_bos_tail": ("uint16", 1000, 2, 0, 3, False, True),
    "label_masks": ("uint32", 100278, 100257, 100277, None, True, False),
}
SEQ = 64


def write_corpus(d: Path, name: str, seed: int) -> tuple[list[Path], list[Path] | None]:
    dtype, vocab, eos, pad, bos, masks, tail = CORPORA[name]
    rng = np.random.default_rng(seed)
    special = {eos, pad} | ({bos} if bos is not None else set())
    paths, mask_paths = [], []
    for f in range(2):
        docs = []
        for n in np.minimum(rng.geometric(1 / 30, 40), 3 * SEQ):  # some longer than SEQ
            body = rng.integers(4, vocab, int(n))
            body = body[~np.isin(body, list(special))]
            docs.append([*([bos] if bos is not None else []), *body.tolist(), eos])
        toks = [t for doc in docs for t in doc]
        if tail and f == 1:
            toks += rng.integers(4, 200, 7).tolist()  # a last document without EOS: no document
        p = d / f"{name}-{f}.npy"
        ot.write_tokens(p, [np.array(toks, dtype=np.int64)], np.dtype(dtype))
        paths.append(p)
        if masks:
            m = d / f"{name}-mask-{f}.npy"
            (rng.random(len(toks)) < 0.8).tofile(m)
            mask_paths.append(m)
    return paths, mask_paths or None


def cases(d: Path) -> list[dict[str, Any]]:
    """Per corpus and strategy: the same arguments for OLMo-core and tokshuf."""
    out = []
    for k, name in enumerate(CORPORA):
        dtype, vocab, eos, pad, bos, _, tail = CORPORA[name]
        paths, masks = write_corpus(d, name, k)
        base: dict[str, Any] = {
            "pad_token_id": pad,
            "eos_token_id": eos,
            "vocab_size": vocab,
            "dtype": dtype,
        }
        if masks is not None:
            base["label_mask_paths"] = [str(m) for m in masks]
        with_bos = {**base, "bos_token_id": bos} if bos is not None else base
        strategies: dict[str, dict[str, Any]] = {
            "fsl": {**with_bos, "sequence_length": SEQ, "generate_doc_lengths": True},
            "packed_truncate": {**with_bos, "sequence_length": SEQ, "generate_doc_lengths": True},
            "packed_fragment": {
                **with_bos,
                "sequence_length": SEQ,
                "generate_doc_lengths": True,
                "long_doc_strategy": "fragment",
            },
        }
        # Documented difference: OLMo-core's padded dataset ignores the BOS, so it cuts BOS = EOS
        # data at every BOS and keeps the last document before a tail without EOS.
        if bos is None or (bos != eos and not tail):
            strategies["padded"] = {**with_bos, "sequence_length": SEQ}
            strategies["interleaved"] = {
                **with_bos,
                "sequence_length": SEQ,
                "seed": 7,
                "docs_per_instance": 2,
                "chunks_per_doc": 4,
            }
        if bos is None and masks is None:  # OLMo-core's VSL takes neither
            strategies["vsl"] = {**base, "max_sequence_length": SEQ, "min_sequence_length": 8}
        for strategy, kw in strategies.items():
            out.append(
                {
                    "name": f"{name}-{strategy}",
                    "strategy": strategy.split("_")[0],
                    "paths": [str(p) for p in paths],
                    "kwargs": kw,
                    "work_dir": str(d / "olmo-work" / f"{name}-{strategy}"),
                }
            )
    return out


MAKERS = {
    "fsl": FSLDataset,
    "padded": PaddedFSLDataset,
    "packed": PackedFSLDataset,
    "interleaved": InterleavedFSLDataset,
    "vsl": VSLDataset,
}


def test_every_field_of_every_instance_equals_olmo_core(tmp_path: Path) -> None:
    all_cases = cases(tmp_path)
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(all_cases))
    (tmp_path / "olmo").mkdir()
    peer = Path(__file__).with_name("olmo_parity_peer.py")
    python = olmo_python()
    assert python is not None
    r = subprocess.run(
        [python, os.fspath(peer), os.fspath(spec), os.fspath(tmp_path / "olmo")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    for case in all_cases:
        theirs = np.load(tmp_path / "olmo" / f"{case['name']}.npz")
        ds = MAKERS[case["strategy"]](
            *case["paths"],
            **case["kwargs"],
            document_boundaries="eos",  # OLMo-core scans local arrays for EOS
            cache_dir=tmp_path / "ours",
        )
        assert len(ds) == int(theirs["count"]), case["name"]
        keys = {k for k in theirs.files if k != "count" and not k.endswith("_len")}
        ours: dict[str, list[np.ndarray]] = {}
        for i in range(len(ds)):
            item = ds[i]
            assert set(item) - {"metadata"} == keys, (case["name"], i)
            for key in keys:
                ours.setdefault(key, []).append(np.asarray(item[key]).reshape(-1))
        for key in keys:
            lens = theirs[f"{key}_len"]
            assert [v.size for v in ours[key]] == lens.tolist(), (case["name"], key)
            flat = np.concatenate(ours[key]).astype(np.int64) if ours[key] else np.zeros(0, np.int64)
            assert np.array_equal(flat, theirs[key]), (case["name"], key)
