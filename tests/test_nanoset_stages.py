"""Staged Nanosets: a nanotron YAML with several data_stages builds the whole run, step for step
the samples of nanotron's staged run (against a pure-Python model of its rules), resumable at any
step from the consumed samples."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nanoset_helpers import lognormal_lengths, write_dataset
from nanotron_stages_model import greedy_blend, staged_run

from tokshuf import _core
from tokshuf._arrays import as_numpy
from tokshuf.cli import main
from tokshuf.errors import ConfigError
from tokshuf.nanoset import NanosetConfig, NanosetStage, StagedNanoset, build_nanosets, resume_sampler

SEQ = 16
YAML = """
data_stages:
- name: stable
  start_training_step: 1
  data:
    seed: 42
    dataset:
      dataset_folder: [{a}, {b}]
      dataset_weights: [0.7, 0.3]
      split: "1,0,0"
      tokenizer_name: gpt2
      token_size_in_bytes: 2
- name: anneal
  start_training_step: {start2}
  data:
    seed: 42
    dataset:
      dataset_folder: [{b}, {c}]
      dataset_weights: [0.5, 0.5]
      split: "1,0,0"
      tokenizer_name: gpt2
      token_size_in_bytes: 2
parallelism: {{dp: 2, pp: 1, tp: 1}}
tokens:
  micro_batch_size: 2
  batch_accumulation_per_replica: 3
  sequence_length: 16
  train_steps: {steps}
"""
GBS = 2 * 3 * 2


@pytest.fixture(scope="module")
def prefixes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("stages")
    out = {}
    for i, name in enumerate("abc"):
        write_dataset(root / name, lognormal_lengths(200, mean=60, seed=i), seed=i)
        out[name] = str(root / name)
    return out


def _run(ds: StagedNanoset) -> list[tuple[str, int]]:
    """(prefix, sample of the prefix) of every sample of the run."""
    return [
        (ds.datasets[int(d)].prefix, int(s))  # type: ignore[union-attr]
        for d, s in zip(ds.dataset_index, ds.dataset_sample_index, strict=True)
    ]


def test_two_data_stages_give_nanotrons_samples_step_for_step(
    prefixes: dict[str, str], tmp_path: Path
) -> None:
    text = YAML.format(**prefixes, start2=16, steps=40)
    cfg = NanosetConfig.from_yaml(text)
    assert cfg.global_batch_size == GBS
    assert [(s.name, s.start_step) for s in cfg.stages] == [("stable", 0), ("anneal", 15)]
    assert cfg.num_samples[0] == 40 * GBS
    train = build_nanosets(cfg).require("train")
    assert isinstance(train, StagedNanoset)
    assert len(train) == 40 * GBS
    model = staged_run(
        [(1, {prefixes["a"]: 0.7, prefixes["b"]: 0.3}), (16, {prefixes["b"]: 0.5, prefixes["c"]: 0.5})],
        train_steps=40,
        global_batch=GBS,
        seq_len=SEQ,
    )
    got = _run(train)
    for step, want in enumerate(model):
        assert got[step * GBS : (step + 1) * GBS] == want, f"step {step + 1} (nanotron's count)"
    # b continues in the anneal where the stable stage left it: no sample read twice, none skipped.
    b = [s for p, s in got if p == prefixes["b"]]
    assert b == list(range(len(b)))
    # The samples themselves: each prefix's own Nanoset, read through the run's index.
    for k in (0, 15 * GBS - 1, 15 * GBS, 40 * GBS - 1):
        d, s = int(train.dataset_index[k]), int(train.dataset_sample_index[k])
        sub = train.datasets[d]
        assert sub is not None
        assert np.array_equal(train.get(k), sub.get(s))
    # Each stage's share is its weights' share (Megatron's greedy blend, restarted per stage).
    for stage, lo, hi in ((0, 0, 15 * GBS), (1, 15 * GBS, 40 * GBS)):
        counts = np.bincount(train.dataset_index[lo:hi], minlength=3) / (hi - lo)
        target = np.asarray(train.stages[stage].share(3))
        assert np.abs(counts - target).max() <= 1 / (hi - lo) + 1e-12


@pytest.mark.parametrize("resume_step", [1, 7, 14, 15, 16, 39])
def test_a_resume_at_any_step_reads_the_stage_that_owns_it(
    prefixes: dict[str, str], resume_step: int
) -> None:
    """Resumed after ``resume_step`` steps (nanotron's consumed samples), every rank reads what the
    uninterrupted run reads next, exactly at the boundary (after step 15) too: the stage that owns
    the next step (nanotron's run_train built the last stage's loader whatever the step, and its
    PR #380 picks the earlier stage when the resume falls on the boundary)."""
    train = build_nanosets(NanosetConfig.from_yaml(YAML.format(**prefixes, start2=16, steps=40))).require(
        "train"
    )
    assert isinstance(train, StagedNanoset)
    consumed = resume_step * GBS
    for rank in range(2):
        full = list(resume_sampler(train, 0, num_replicas=2, rank=rank))
        resumed = list(resume_sampler(train, consumed, num_replicas=2, rank=rank))
        assert resumed == full[consumed // 2 :]
        assert train.stage_of_sample(resumed[0]).name == ("stable" if resume_step < 15 else "anneal")
    # nanotron's checkpoint holds the consumed samples of the current stage: the run's count.
    if resume_step >= 15:
        assert train.samples_before("anneal") + (resume_step - 15) * GBS == consumed


@pytest.mark.parametrize(
    ("starts", "weights", "gbs", "steps"),
    [
        ((1, 9, 21), ((1, 1, 0), (0, 3, 1), (2, 0, 1)), GBS, 30),
        ((1, 4, 7), ((1, 1, 0), (0, 1, 1), (1, 0, 1)), 3, 12),
    ],
)
def test_three_stages_and_a_returning_prefix(
    prefixes: dict[str, str],
    starts: tuple[int, ...],
    weights: tuple[tuple[int, ...], ...],
    gbs: int,
    steps: int,
) -> None:
    """A prefix left out of a stage and read again later continues where it stopped. tokshuf
    numbers the samples each stage served. nanotron counts the blend positions of the global
    steps instead, the same only for the stage that starts at step 1 (so two stages agree
    exactly); from the third stage on it may read a sample twice or skip one (the second case)."""
    names = [prefixes[x] for x in "abc"]
    # Each stage lists its prefixes in its own order (the blend breaks ties by it): the second
    # stage puts c before b.
    order = ((0, 1), (2, 1), (0, 2))
    stages = [
        (st, {names[d]: float(w[d]) for d in o if w[d]})
        for st, w, o in zip(starts, weights, order, strict=True)
    ]
    cfg = NanosetConfig(
        names[0],
        sequence_length=SEQ,
        split="1,0,0",
        num_samples=(steps * gbs, None, None),
        global_batch_size=gbs,
        stages=tuple(NanosetStage(f"s{i}", st - 1, w) for i, (st, w) in enumerate(stages)),
        cache_dir=False,
    )
    train = build_nanosets(cfg).require("train")
    assert isinstance(train, StagedNanoset)
    got = _run(train)
    served = staged_run(stages, steps, gbs, SEQ, count="served")
    assert got == [x for step in served for x in step]
    for p in names:
        assert [s for q, s in got if q == p] == list(range(sum(q == p for q, _ in got)))
    nanotron = staged_run(stages, steps, gbs, SEQ)
    assert nanotron[: starts[2] - 1] == served[: starts[2] - 1]  # the first two stages agree
    if gbs == 3:
        c = [s for step in nanotron for q, s in step if q == names[2]]
        assert len(set(c)) < len(c)  # nanotron's third stage reads one of c's samples again


@given(weights=st.lists(st.integers(0, 9), min_size=2, max_size=4).filter(any), size=st.integers(0, 200))
@settings(max_examples=50, deadline=None)
def test_the_native_greedy_blend_is_the_models(weights: list[int], size: int) -> None:
    used = [i for i, w in enumerate(weights) if w]
    # The native blend takes normalized weights (BlendedNanoset and the stages normalize first).
    di, si = _core.build_blending_indices(_core.normalize([float(weights[i]) for i in used]), size)
    want_di, want_si = greedy_blend([weights[i] for i in used], size)
    assert as_numpy(di).tolist() == want_di
    assert as_numpy(si).tolist() == want_si


def test_staged_configs_are_checked(prefixes: dict[str, str]) -> None:
    a = prefixes["a"]
    ok = {"sequence_length": SEQ, "num_samples": (10, None, None), "global_batch_size": 2}
    with pytest.raises(ConfigError, match="global_batch_size"):
        NanosetConfig(a, sequence_length=SEQ, stages=(NanosetStage("x", 0, a),))
    with pytest.raises(ConfigError, match="the first at step 0"):
        NanosetConfig(a, **ok, stages=(NanosetStage("x", 3, a),))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="increasing steps"):
        NanosetConfig(a, **ok, stages=(NanosetStage("x", 0, a), NanosetStage("y", 0, a)))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unique"):
        NanosetConfig(a, **ok, stages=(NanosetStage("x", 0, a), NanosetStage("x", 4, a)))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="weights must be non-negative"):
        NanosetStage("x", 0, {a: -1.0})
    with pytest.raises(ConfigError, match="train sample count"):
        build_nanosets(
            NanosetConfig(
                a,
                sequence_length=SEQ,
                global_batch_size=2,
                split="1,0,0",
                stages=({"name": "x", "start_step": 0, "data_path": a},),
            )
        )
    text = YAML.format(**prefixes, start2=16, steps=40)
    i = text.rindex("seed: 42")  # the anneal's seed
    with pytest.raises(ConfigError, match="'anneal' has seed=43, stage 'stable' 42"):
        NanosetConfig.from_yaml(text[:i] + "seed: 43" + text[i + len("seed: 42") :])
    with pytest.raises(ConfigError, match="start_training_step must be >= 1, got 0"):
        NanosetConfig.from_yaml(text.replace("start_training_step: 1\n", "start_training_step: 0\n"))
    one = NanosetConfig.from_yaml(text, stage="anneal")  # one stage alone, as before
    assert (one.stages, one.data_path) == ((), {prefixes["b"]: 0.5, prefixes["c"]: 0.5})


def _series(html: str) -> dict[str, Any]:
    data = re.search(r'<script type="application/json" id="tokshuf-series">(.*?)</script>', html, re.S)
    assert data is not None
    return {p["title"]: p for p in json.loads(data.group(1))}


def test_inspect_reports_each_stage_and_marks_them_on_the_plot(
    prefixes: dict[str, str], tmp_path: Path, capsys: Any
) -> None:
    pytest.importorskip("matplotlib")
    f = tmp_path / "run.yaml"
    f.write_text(YAML.format(**prefixes, start2=16, steps=40))
    page = tmp_path / "mix.html"
    assert main(["inspect", str(f), "--json", "--plot", str(page)]) == 0
    report = json.loads(capsys.readouterr().out.split("\nplots")[0])
    stages = report["stages"]
    assert [(s["name"], s["start_step"], s["first_sample"], s["samples"]) for s in stages] == [
        ("stable", 0, 0, 15 * GBS),
        ("anneal", 15, 15 * GBS, 25 * GBS),
    ]
    a, c = prefixes["a"], prefixes["c"]
    shares = {s["name"]: {src["name"]: (src["target"], src["share"]) for src in s["sources"]} for s in stages}
    assert shares["stable"][a][0] == pytest.approx(0.7)
    assert shares["anneal"][c][0] == pytest.approx(0.5)
    assert shares["anneal"][a] == (0.0, 0.0)
    for s in shares.values():
        for target, share in s.values():
            assert abs(target - share) <= 1 / (15 * GBS)
    mix = _series(page.read_text())["tokens per source"]["series"]
    assert mix["stage starts"] == {"x": [15.0], "style": "boundary"}
    # The target follows each stage's weights: c is only in the anneal, half of its samples.
    target_c = mix[f"{c} (target)"]["y"]
    assert target_c[14] == 0
    assert target_c[-1] == pytest.approx(25 * GBS * 0.5 * SEQ)
    assert main(["inspect", str(f)]) == 0
    text = capsys.readouterr().out
    assert "stage 'anneal': from step 15" in text


def test_a_staged_run_pickles_for_dataloader_workers(prefixes: dict[str, str]) -> None:
    train = build_nanosets(NanosetConfig.from_yaml(YAML.format(**prefixes, start2=16, steps=40))).require(
        "train"
    )
    back = pickle.loads(pickle.dumps(train))
    assert isinstance(back, StagedNanoset)
    assert back.stages == train.stages
    assert np.array_equal(back.get_batch(range(len(train))), train.get_batch(range(len(train))))
