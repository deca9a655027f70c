"""``tokshuf inspect`` of a Nanoset / blend: samples, tokens and epochs per source and split, and
the origin of every sample of a step, against the pure-Python model of Megatron's indices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from megatron_model import (
    GptModel,
    blending_indices,
    gpt_indices,
    normalize,
    parse_split,
    sample_tokens,
    size_per_dataset,
    split_matrix,
    split_ranges,
)
from nanoset_helpers import lognormal_lengths, write_dataset

import tokshuf
from tokshuf import NanosetConfig
from tokshuf._inspect import detect
from tokshuf._inspect.blend import inspect_blend
from tokshuf.cli import main
from tokshuf.errors import ConfigError

SEQ, SEED, SPLIT = 24, 11, "90,10,0"
WEIGHTS = [0.25, 0.75]
TRAIN, VALID = 600, 20
MBS, ACC, DP = 2, 2, 2  # global batch 8


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, list[np.ndarray]]]:
    root = tmp_path_factory.mktemp("blend")
    out = []
    for i, (n, mean) in enumerate(((120, 40.0), (60, 90.0))):
        prefix = root / f"src{i}_text_document"
        out.append((str(prefix), write_dataset(prefix, lognormal_lengths(n, mean, seed=i), seed=i)))
    return out


def _yaml(tmp: Path, sources: list[tuple[str, list[np.ndarray]]]) -> Path:
    doc = {
        "data_stages": [
            {
                "name": "stable",
                "data": {
                    "seed": SEED,
                    "dataset": {
                        "data_path": {p: w for (p, _), w in zip(sources, WEIGHTS, strict=True)},
                        "split": SPLIT,
                        "num_samples": [TRAIN, VALID, None],
                    },
                },
            }
        ],
        "tokens": {"sequence_length": SEQ, "micro_batch_size": MBS, "batch_accumulation_per_replica": ACC},
        "parallelism": {"dp": DP},
    }
    path = tmp / "nanotron.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _model(sources: list[tuple[str, list[np.ndarray]]], split: int, size: int) -> dict[str, Any]:
    """Megatron's builder for one split of the weighted blend, from the spec."""
    weights = normalize(WEIGHTS)
    matrix = split_matrix(parse_split(SPLIT))
    blend_size = sum(size_per_dataset(weights, size, 0.0))
    per_source = size_per_dataset(weights, size, 0.005)
    models: list[GptModel] = []
    ranges = []
    for (_, tokens), n in zip(sources, per_source, strict=True):
        sizes = np.array([len(t) for t in tokens])
        rng = split_ranges(matrix, len(tokens))[split]
        assert rng is not None
        ranges.append(rng)
        models.append(gpt_indices(sizes, rng[0], rng[1], n, SEQ, SEED))
    di, dsi = blending_indices(weights, blend_size)
    return {"size": blend_size, "models": models, "ranges": ranges, "di": di, "dsi": dsi}


def test_samples_tokens_and_epochs_per_source_and_split(
    sources: list[tuple[str, list[np.ndarray]]], tmp_path: Path
) -> None:
    path = _yaml(tmp_path, sources)
    assert detect(path) == "blend"
    r = inspect_blend(path)
    assert r.batch_size == MBS * ACC * DP
    assert [s.split for s in r.splits] == ["train", "valid"]
    for split, size in ((0, TRAIN), (1, VALID)):
        m = _model(sources, split, size)
        got = r.splits[split]
        assert (got.samples, got.tokens) == (m["size"], m["size"] * SEQ)
        drawn = np.bincount(m["di"], minlength=2)
        for d, src in enumerate(got.sources):
            lo, hi = m["ranges"][d]
            assert src.name == sources[d][0]
            assert src.target_weight == pytest.approx(WEIGHTS[d] / sum(WEIGHTS))
            assert (src.samples, src.tokens) == (drawn[d], drawn[d] * SEQ)
            assert src.share == pytest.approx(drawn[d] / m["size"])
            assert src.epochs == m["models"][d].num_epochs
            assert (src.documents, src.document_tokens) == (
                hi - lo,
                sum(len(t) for t in sources[d][1][lo:hi]),
            )
    assert max(s.epochs for s in r.splits[0].sources) > 1  # the small source is repeated


@pytest.mark.parametrize(("step", "rank"), [(0, None), (7, 1), (17, 0)])
def test_step_origins_match_the_model(
    sources: list[tuple[str, list[np.ndarray]]], tmp_path: Path, step: int, rank: int | None
) -> None:
    path = _yaml(tmp_path, sources)
    m = _model(sources, 0, TRAIN)
    gbs = MBS * ACC * DP
    r = inspect_blend(path, step=step, dp_rank=rank, dp_size=DP, tokenizer="byte")
    st = r.step
    assert st is not None
    # nanotron's sampler: rank r reads samples r, r + DP, ... so step N is [N * gbs, (N + 1) * gbs).
    ranks = range(DP) if rank is None else [rank]
    expected_ks = sorted(k for k in range(step * gbs, (step + 1) * gbs) if k % DP in ranks)
    assert [o.sample for o in st.samples] == expected_ks
    for o in st.samples:
        d, s = int(m["di"][o.sample]), int(m["dsi"][o.sample])
        model, tokens = m["models"][d], sources[d][1]
        assert (o.source, o.source_sample, o.dp_rank, o.name) == (d, s, o.sample % DP, sources[d][0])
        # The pieces, read from the written tokens, are the model's sample.
        got = np.concatenate([tokens[p.document][p.offset : p.offset + p.length] for p in o.pieces])
        want = sample_tokens(tokens, model, s, SEQ, 1)
        assert got.tolist() == want.tolist()
        assert o.text == bytes(int(t) - 1 for t in want[:64] if 1 <= t <= 256).decode(errors="replace")


def test_single_prefix_and_python_config(sources: list[tuple[str, list[np.ndarray]]]) -> None:
    prefix, tokens = sources[0]
    cfg = NanosetConfig(prefix, sequence_length=SEQ, split="100,0,0", seed=SEED)
    assert detect(cfg) == "blend"
    r = tokshuf.inspect(cfg, step=2, batch_size=4)
    sizes = np.array([len(t) for t in tokens])
    model = gpt_indices(sizes, 0, len(tokens), None, SEQ, SEED)
    n = len(model.shuffle_index)
    [train] = r.splits
    assert (train.samples, train.sources[0].samples, train.sources[0].target_weight) == (n, n, None)
    assert r.step is not None
    for o in r.step.samples:
        got = np.concatenate([tokens[p.document][p.offset : p.offset + p.length] for p in o.pieces])
        assert got.tolist() == sample_tokens(tokens, model, o.sample, SEQ, 1).tolist()
    with pytest.raises(ConfigError, match="reads samples up to"):
        tokshuf.inspect(cfg, step=n, batch_size=4)
    with pytest.raises(ConfigError, match="multiple of --dp-size 3"):
        tokshuf.inspect(cfg, step=0, batch_size=4, dp_size=3)
    with pytest.raises(ConfigError, match="--step needs --batch-size"):
        tokshuf.inspect(cfg, step=0)


def test_megatron_yaml_and_cli(
    sources: list[tuple[str, list[np.ndarray]]], tmp_path: Path, capsys: Any
) -> None:
    (a, _), (b, _) = sources
    path = tmp_path / "megatron.yaml"
    gbs, iters, eval_iters, eval_interval = 4, 30, 2, 10
    path.write_text(
        yaml.safe_dump(
            {
                "data_path": [0.25, a, 0.75, b],
                "seq_length": SEQ,
                "split": SPLIT,
                "seed": SEED,
                "global_batch_size": gbs,
                "train_iters": iters,
                "eval_iters": eval_iters,
                "eval_interval": eval_interval,
            }
        )
    )
    # Megatron's get_train_valid_test_num_samples.
    valid = (iters // eval_interval + 1) * eval_iters * gbs
    assert main(["inspect", str(path), "--json", "--step", "3"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["kind"] == "blend"
    assert got["batch_size"] == gbs
    assert [s["samples"] for s in got["splits"]] == [
        _model(sources, 0, iters * gbs)["size"],
        _model(sources, 1, valid)["size"],
    ]
    assert [o["sample"] for o in got["step"]["samples"]] == list(range(3 * gbs, 4 * gbs))
    assert main(["inspect", str(path)]) == 0
    assert "75.00%" in capsys.readouterr().out
