"""``--plot``: each plot type drawn into a valid PNG and an HTML file whose series are the
numbers recomputed here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from megatron_model import blending_indices, size_per_dataset
from nanoset_helpers import lognormal_lengths, write_dataset
from shuffle_helpers import random_docs, read_manifest, write_corpus

import tokshuf
from tokshuf.cli import main
from tokshuf.errors import ConfigError

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SEQ = 16


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import random

    root = tmp_path_factory.mktemp("plot")
    tokens = {}
    for i, n in enumerate((80, 50)):
        prefix = root / f"s{i}_text_document"
        tokens[str(prefix)] = write_dataset(prefix, lognormal_lengths(n, 60.0, seed=i), seed=i)
    blend = root / "blend.yaml"
    blend.write_text(
        yaml.safe_dump(
            {
                "data_path": [0.4, str(root / "s0_text_document"), 0.6, str(root / "s1_text_document")],
                "seq_length": SEQ,
                "split": "100,0,0",
                "train_samples": 200,
                "global_batch_size": 8,
            }
        )
    )
    files = [random_docs(random.Random(3), 80, max_len=200)]
    tokshuf.shuffle(
        write_corpus(root, files), root / "cells", root / "out", "byte", context_length=33, wds_chunk_size=7
    )
    return {"tokens": tokens, "blend": blend, "shards": root / "out"}


def _series(html: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="tokshuf-series">(.*?)</script>', html, re.S)
    assert m is not None
    return {p["title"]: p for p in json.loads(m.group(1))}


def test_every_plot_type_in_png_and_html(artifacts: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    prefixes = list(artifacts["tokens"])
    paths = [*prefixes, str(artifacts["blend"]), str(artifacts["shards"])]
    png = tmp_path / "all.png"
    assert main(["inspect", *paths, "--plot", str(png)]) == 0
    assert "document length, tokens per source, shard size" in capsys.readouterr().out
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000

    page = tmp_path / "all.html"
    assert main(["inspect", *paths, "--plot", str(page), "--json"]) == 0
    html = page.read_text()
    assert "<svg" in html
    panels = _series(html)
    assert set(panels) == {"document length", "tokens per source", "shard size"}
    for p in panels.values():  # the labels are text in the SVG (svg.fonttype none)
        assert p["xlabel"] in html
        assert p["ylabel"] in html

    lengths = panels["document length"]
    assert set(lengths["series"]) == set(prefixes)
    for prefix, toks in artifacts["tokens"].items():
        s = lengths["series"][prefix]
        assert sum(s["y"]) == sum(1 for t in toks if len(t))  # every non-empty document in a bin
        x = np.array(s["x"])
        assert np.all(np.diff(np.log(x)) == pytest.approx(np.log(x[1] / x[0])))  # log bins

    # The realized mixture: tokens drawn per source after each step of 8 samples, next to target.
    mix = panels["tokens per source"]
    assert mix["xlabel"] == "training step"
    weights = [0.4, 0.6]
    di, _ = blending_indices(weights, sum(size_per_dataset(weights, 200, 0.0)))
    steps = len(di) // 8
    for d, prefix in enumerate(prefixes):
        realized = mix["series"][f"{prefix} (realized)"]
        target = mix["series"][f"{prefix} (target)"]
        want = [int((di[: 8 * n] == d).sum()) * SEQ for n in range(1, steps + 1)]
        assert realized["x"] == list(range(1, steps + 1))
        assert realized["y"] == want
        assert target["y"] == pytest.approx([n * 8 * SEQ * weights[d] for n in range(1, steps + 1)])

    shards = panels["shard size"]["series"][str(artifacts["shards"])]
    out = artifacts["shards"]
    sizes = [(out / f"{r['shard']}.tar").stat().st_size for r in read_manifest(out)]
    assert sum(shards["y"]) == len(sizes)
    assert shards["x"][0] == min(sizes)


def test_plot_errors(artifacts: dict[str, Any], tmp_path: Path) -> None:
    from tokshuf._inspect.plot import plot

    report = tokshuf.inspect(next(iter(artifacts["tokens"])))
    with pytest.raises(ConfigError, match=r"must end with \.png or \.html"):
        plot([report], tmp_path / "x.jpg")


def test_packing_efficiency(tmp_path: Path, capsys: Any) -> None:
    from instance_data import EOS, PAD, write_files
    from olmo_model import eos_documents, limit, obfd

    rng = np.random.default_rng(2)
    corpus = [[rng.integers(2, 41, size=int(n)).tolist() for n in rng.integers(1, 40, size=30)]]
    paths, tokens = write_files(tmp_path, corpus)
    work = tmp_path / "work"
    files = {}
    for strategy in ("padded", "packed"):
        args = ["instances", str(paths[0]), "--strategy", strategy, "--sequence-length", str(SEQ)]
        args += ["--eos-token-id", str(EOS), "--pad-token-id", str(PAD), "--dtype", "uint16", "--json"]
        assert main([*args, "--boundaries", "eos", "--work-dir", str(work)]) == 0
        fingerprint = json.loads(capsys.readouterr().out)["fingerprint"]
        files[strategy] = str(work / "instances" / f"instances-{strategy}-{fingerprint}_summary.json")

    png = tmp_path / "eff.png"
    assert main(["inspect", *files.values(), "--plot", str(png)]) == 0
    assert "plots (packing efficiency)" in capsys.readouterr().out
    assert png.read_bytes()[:8] == PNG_MAGIC

    page = tmp_path / "eff.html"
    assert main(["inspect", *files.values(), "--plot", str(page), "--json"]) == 0
    html = page.read_text()
    panel = _series(html)["packing efficiency"]
    assert panel["xlabel"] in html
    assert panel["ylabel"] in html
    # Data tokens per instance from the model: one truncated document each, or OBFD's bins.
    lengths = [e - s for s, e in limit(eos_documents(tokens[0], EOS), SEQ, "truncate")]
    decreasing = sorted(lengths, key=lambda n: -n)  # obfd's bins hold positions in this order
    per_instance = {"padded": lengths, "packed": [sum(decreasing[t] for t in b) for b in obfd(lengths, SEQ)]}
    edges = np.linspace(0, 1, 21)
    for strategy, used in per_instance.items():
        name = f"{Path(files[strategy]).name}: {strategy}, {sum(used) / (len(used) * SEQ):.1%} efficiency"
        s = panel["series"][name]
        assert s["x"] == pytest.approx(edges[:-1].tolist())
        assert s["y"] == np.histogram(np.array(used) / SEQ, edges)[0].tolist()
        assert sum(s["y"]) == len(used)
