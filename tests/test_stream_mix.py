"""Mix schedules of the streaming loader: every phase's weights govern the tokens drawn in it,
within the mixing bound, in every topology and across resumes and rescales; a resume on the
same topology continues the uninterrupted stream; a change of weights on resume applies from the
resume step on (the redteam case: 90/10, then 50/50).

Ranks and DataLoader workers are simulated in one process through the loader's own pieces
(``StreamingDataset._open`` places each worker on the steps as torch's round robin serves it);
test_stream_dataloader.py runs real DataLoader workers."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stream_helpers import disk_round_trip, make_stream, scratch, simple_corpus

from tokshuf.errors import ConfigError, FormatError
from tokshuf.stream import MixPhase, TokenStream, merge_states

pytest.importorskip("torch")
from tokshuf.stream import StreamingDataLoader, StreamingDataset

CHUNK = 5
SHARDS = 12  # >= the largest topology (4 ranks x 3 workers): every worker owns documents of each source
BATCH = 2
SEQ = 8
# Three sources, 48 documents each, none empty: every logical shard holds text of every source.
SIZES = [[[3 + (7 * d + 5 * s) % 17 for d in range(48)]] for s in range(3)]
NAMES = ["sub0", "sub1", "sub2"]


def stream_for(
    root: Path, schedule: Sequence[MixPhase] = (), weights: Sequence[float] = (1, 1, 1), **kw: Any
) -> TokenStream:
    kw.setdefault("shuffle_window", 0)
    return make_stream(
        root,
        simple_corpus(SIZES),
        weights=list(weights),
        sequence_length=SEQ,
        batch_size=BATCH,
        chunk_size=CHUNK,
        logical_shards=SHARDS,
        mix_schedule=list(schedule),
        **kw,
    )


class Run:
    """``world_size`` ranks of ``num_workers`` DataLoader workers each (0: the main process),
    consuming batches step by step as a StreamingDataLoader's training loop would."""

    def __init__(self, stream: TokenStream, world_size: int, num_workers: int, state: Any = None) -> None:
        self.loaders = []
        self.workers: list[list[Any]] = []
        for r in range(world_size):
            ds = StreamingDataset(stream, rank=r, world_size=world_size, output="numpy")
            with warnings.catch_warnings():  # torch's note that 3 workers exceed this machine's 2 cores
                warnings.simplefilter("ignore", UserWarning)
                dl = StreamingDataLoader(ds, num_workers=num_workers)
            if state is not None:
                dl.load_state_dict(state)
            nw = max(num_workers, 1)
            ds._rotation = dl._next_worker(dl._base)
            # torch worker i plays local worker (i + rotation) % nw, and torch serves worker 0 first.
            self.workers.append([ds._open(r * nw + (i + ds._rotation) % nw, nw, dl._base) for i in range(nw)])
            self.loaders.append(dl)
        self.steps = 0

    def step(self) -> list[dict[str, Any]]:
        """One training step: every rank's next batch."""
        out = [ws[self.steps % len(ws)].next_batch() for ws in self.workers]
        self.steps += 1
        return out

    def state(self) -> dict[str, Any]:
        parts = []
        for dl, ws in zip(self.loaders, self.workers, strict=True):
            sections = {w.worker: w.tables() for w in ws}
            parts.append(dl.stream.state(sections, dl._topology(), dl._run_mix()))
        return merge_states(parts)


def drawn(batches: Sequence[dict[str, Any]]) -> np.ndarray[Any, Any]:
    """Tokens per source in these batches, from their document runs."""
    out = np.zeros(len(NAMES), np.int64)
    for b in batches:
        seg = np.asarray(b["segments"])
        np.add.at(out, seg[:, 2], seg[:, 7])
    return out


def phase_at(starts: Sequence[int], step: int) -> int:
    return max(i for i, s in enumerate(starts) if s <= step)


def check_shares(
    per_step: list[np.ndarray[Any, Any]], starts: list[int], weights: list[list[int]], bound: list[int]
) -> None:
    """Tokens drawn in each phase within ``bound[phase]`` tokens of the phase's weights."""
    for k, w in enumerate(weights):
        end = starts[k + 1] if k + 1 < len(starts) else len(per_step)
        t = sum(
            (per_step[s] for s in range(starts[k], min(end, len(per_step)))), np.zeros(len(NAMES), np.int64)
        )
        w_arr = np.asarray(w, np.int64)
        dev = np.abs(t * w_arr.sum() - w_arr * t.sum())
        assert (dev <= bound[k] * w_arr.sum()).all(), (
            f"phase {k} (weights {w}): drew {t.tolist()}, bound {bound[k]}"
        )


weights_st = st.lists(st.integers(0, 5), min_size=3, max_size=3).filter(any)
topology_st = st.tuples(st.integers(1, 4), st.integers(0, 3))


@st.composite
def schedules(draw: st.DrawFn, horizon: int) -> tuple[list[int], list[list[int]]]:
    n = draw(st.integers(2, 4))
    starts = sorted(draw(st.sets(st.integers(1, horizon - 1), min_size=n - 1, max_size=n - 1)))
    return [0, *starts], [draw(weights_st) for _ in range(n)]


HORIZON = 16


@given(
    sched=schedules(HORIZON),
    first=topology_st,
    second=topology_st,
    cut=st.integers(0, HORIZON),
    at_boundary=st.booleans(),
    window=st.sampled_from([0, 2]),
)
@settings(max_examples=30, deadline=None)
def test_phases_hold_their_weights_and_resumes_continue_the_stream(
    sched: tuple[list[int], list[list[int]]],
    first: tuple[int, int],
    second: tuple[int, int],
    cut: int,
    at_boundary: bool,
    window: int,
) -> None:
    starts, weights = sched
    if at_boundary:  # resume exactly at a phase boundary
        cut = starts[1 + cut % (len(starts) - 1)]
    phases = [
        MixPhase({n: w[i] for i, n in enumerate(NAMES)}, start_step=s)
        for s, w in zip(starts, weights, strict=True)
    ]
    with scratch() as tmp:
        stream = stream_for(Path(tmp), phases[1:], weights[0], shuffle_window=window)
        # Uninterrupted, on the first topology.
        ref_run = Run(stream, *first)
        ref = [ref_run.step() for _ in range(HORIZON)]
        # Interrupted at `cut`: the same topology continues the very same stream ...
        a = Run(stream, *first)
        got = [a.step() for _ in range(cut)]
        state = disk_round_trip(a.state(), Path(tmp) / "ck")
        b = Run(stream, *first, state=state)
        got += [b.step() for _ in range(HORIZON - cut)]
        for s, (x, y) in enumerate(zip(ref, got, strict=True)):
            for r, (bx, by) in enumerate(zip(x, y, strict=True)):
                assert all(np.array_equal(bx[k], by[k]) for k in bx), (
                    f"step {s}, rank {r} differs after a resume at {cut}"
                )
        # ... and another topology (a rescale inside a phase) keeps every phase's weights.
        c = Run(stream, *second, state=state)
        rescaled = got[:cut] + [c.step() for _ in range(HORIZON - cut)]
    if window:
        return  # with a shuffle buffer, lines drawn in one phase leave it in the next
    w1 = first[0] * max(first[1], 1)
    w2 = second[0] * max(second[1], 1)
    # One chunk per worker that drew in the phase (a rescale: the old and the new workers).
    bound_same = [CHUNK * w1] * len(starts)
    bound_rescaled = [
        CHUNK * (w1 * (s < cut) + w2 * (e > cut)) for s, e in zip(starts, [*starts[1:], HORIZON], strict=True)
    ]
    check_shares([drawn(x) for x in ref], starts, weights, bound_same)
    check_shares([drawn(x) for x in rescaled], starts, weights, bound_rescaled)


@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 0), (1, 2), (2, 3), (3, 1)])
def test_new_weights_on_resume_apply_from_the_resume_step(
    world_size: int, num_workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The redteam case (r_mix_change_on_resume.py): 90/10, then resumed at 50/50 without a
    schedule. The new phase gets 50/50 on the same topology and after a rescale, and a log line
    says so."""
    with scratch() as tmp:
        old = stream_for(Path(tmp) / "a", weights=(9, 1, 0))
        a = Run(old, 1, 0)
        for _ in range(30):
            a.step()
        state = a.state()
        new = stream_for(Path(tmp) / "a", weights=(1, 1, 0))
        for topo in ((1, 0), (world_size, num_workers)):
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="tokshuf"):
                b = Run(new, *topo, state=state)
            # Once per rank's loader (each rank is a process of its own), at WARNING: the weights
            # in force change at the resume step, which no phase of the schedule says.
            said = [r.levelname for r in caplog.records if "applies from there" in r.message]
            assert said == ["WARNING"] * topo[0]
            assert "from step 30" in caplog.text
            assert "sub0 50%" in caplog.text
            phase2 = sum((drawn(b.step()) for _ in range(40)), np.zeros(3, np.int64))
            share = phase2[0] / phase2.sum()
            bound = CHUNK * (1 + topo[0] * max(topo[1], 1))  # the old worker's carried chunk, the new ones'
            assert abs(phase2[0] - phase2[1]) <= 2 * bound, (topo, phase2, share)
            # The checkpoint records both phases, and the tokens each drew.
            saved = b.state()
            assert saved["manifest"]["mix"] == [
                {"start_step": 0, "weights": [9, 1, 0]},
                {"start_step": 30, "weights": [1, 1, 0]},
            ]
            from tokshuf.stream import summarize

            mix = summarize(saved)["mix"]
            assert [p["status"] for p in mix] == ["done", "running"]
            assert mix[0]["sources"][0]["share"] == pytest.approx(0.9, abs=0.01)
            assert mix[1]["sources"][0]["share"] == pytest.approx(0.5, abs=0.05)


def test_a_schedule_given_on_resume_takes_over_from_the_resume_step() -> None:
    """Phases of a schedule that start before the resume step are history: the checkpoint's
    weights ran then; from the resume step on, the schedule in force applies."""
    with scratch() as tmp:
        plain = stream_for(Path(tmp), weights=(1, 0, 0))
        a = Run(plain, 2, 1)
        for _ in range(10):
            a.step()
        state = a.state()
        sched = stream_for(
            Path(tmp), [MixPhase("0,1,0", start_step=5), MixPhase("0,0,1", start_step=14)], weights=(1, 0, 0)
        )
        b = Run(sched, 2, 1, state=state)
        after = [drawn(b.step()) for _ in range(10)]
        mix = b.state()["manifest"]["mix"]
        assert [(p["start_step"], p["weights"]) for p in mix] == [
            (0, [1, 0, 0]),
            (10, [0, 1, 0]),
            (14, [0, 0, 1]),
        ]
        # Steps 10-13: only sub1, but for the end of a chunk carried over per worker; then only sub2.
        assert sum(after[:4])[1] >= sum(after[:4]).sum() - 2 * CHUNK
        assert sum(after[4:])[2] >= sum(after[4:]).sum() - 2 * CHUNK


def test_start_tokens_become_steps_at_the_global_batch() -> None:
    with scratch() as tmp:
        s = stream_for(Path(tmp), [MixPhase([0, 1, 0], start_tokens=5 * 2 * BATCH * SEQ + 1)])
        # 2 ranks: a step consumes 2 x batch x sequence tokens; the phase starts at the first step
        # that begins with that many consumed.
        assert s.schedule(world_size=2) == [(0, (1, 1, 1)), (6, (0, 1, 0))]
        assert s.schedule(world_size=1)[1][0] == 11


def test_schedules_are_checked_where_they_are_given() -> None:
    with scratch() as tmp:
        with pytest.raises(ConfigError, match="missing: \\['sub2'\\]"):
            stream_for(Path(tmp) / "a", [MixPhase({"sub0": 1, "sub1": 1}, start_step=3)])
        with pytest.raises(ConfigError, match="unknown: \\['web'\\]"):
            stream_for(Path(tmp) / "b", [MixPhase({"sub0": 1, "sub1": 1, "sub2": 0, "web": 1}, start_step=3)])
        with pytest.raises(ConfigError, match="exactly one of start_step and start_tokens"):
            MixPhase([1, 1, 1])
        with pytest.raises(ConfigError, match="two mix phases start at step 3"):
            stream_for(Path(tmp) / "c", [MixPhase("1,1,1", start_step=3), MixPhase("1,0,1", start_step=3)])
        with pytest.raises(ConfigError, match="at least one positive"):
            stream_for(Path(tmp) / "d", [MixPhase("0,0,0", start_step=3)])
        with pytest.raises(ConfigError, match="start_step must be a non-negative integer"):
            MixPhase("1,1,1", start_step=-1)


def test_version_1_states_load_as_one_phase() -> None:
    """A state written before schedules (v1: no mix, no steps, no history) resumes bit-exactly,
    its weights as the first phase and its step taken from the batches it consumed."""
    with scratch() as tmp:
        stream = stream_for(Path(tmp), weights=(3, 1, 1), shuffle_window=2)
        a = Run(stream, 2, 2)
        for _ in range(7):
            a.step()
        v2 = a.state()
        ref = [a.step() for _ in range(5)]
        n = len(NAMES)
        v1 = {k: v for k, v in v2.items() if k != "history"}
        v1["version"] = 1
        v1["manifest"] = {k: v for k, v in v2["manifest"].items() if k != "mix"}
        v1["workers"] = np.delete(v2["workers"], [3, 4], axis=1)  # no step, no phase
        assert v1["workers"].shape[1] == 3 + n
        b = Run(stream, 2, 2, state=v1)
        got = [b.step() for _ in range(5)]
        for x, y in zip(ref, got, strict=True):
            for bx, by in zip(x, y, strict=True):
                assert all(np.array_equal(bx[k], by[k]) for k in bx)
        assert b.state()["manifest"]["mix"] == [{"start_step": 0, "weights": [3, 1, 1]}]
        with pytest.raises(FormatError, match="version 3 is not supported"):
            stream.worker(0, 1, {**v2, "version": 3})


def test_a_worker_never_reads_another_phase_of_the_state() -> None:
    with scratch() as tmp:
        stream = stream_for(Path(tmp), [MixPhase("1,0,0", start_step=2)])
        a = Run(stream, 1, 0)
        for _ in range(4):
            a.step()
        state = a.state()
        bad = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in state.items()}
        bad["workers"][:, 4] = 7
        with pytest.raises(FormatError, match="mix phase 7"):
            stream.worker(0, 1, bad)
        bad["manifest"] = {**state["manifest"], "mix": [{"start_step": 3, "weights": [1, 1, 1]}]}
        with pytest.raises(FormatError, match="steps increasing from 0"):
            stream.worker(0, 1, bad)


def test_inspect_shows_each_phase_target_and_realized(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    import json
    import re

    from tokshuf.cli import main
    from tokshuf.stream import save_state

    with scratch() as tmp:
        stream = stream_for(
            Path(tmp), [MixPhase("1,0,1", start_step=6), MixPhase("1,1,1", start_step=40)], (3, 1, 0)
        )
        a = Run(stream, 2, 1)
        per_step = [drawn(a.step()) for _ in range(12)]
        ck = tmp_path / "ck"
        save_state(ck, a.state())
    assert main(["inspect", str(ck), "--json", "--plot", str(tmp_path / "mix.html")]) == 0
    report = json.loads(capsys.readouterr().out.split("\nplots")[0])
    assert report["step"] == 12
    mix = report["mix"]
    assert [(p["start_step"], p["end_step"], p["status"]) for p in mix] == [
        (0, 6, "done"),
        (6, 40, "running"),
        (40, None, "scheduled"),
    ]
    # What each phase drew, counted from the batches themselves (no shuffle buffer: drawn = consumed).
    for p, (lo, hi) in zip(mix, [(0, 6), (6, 12), (12, 12)], strict=True):
        want = sum(per_step[lo:hi], np.zeros(3, np.int64)).tolist()
        assert [s["tokens"] for s in p["sources"]] == want
    assert [s["target"] for s in mix[1]["sources"]] == [0.5, 0.0, 0.5]
    html = (tmp_path / "mix.html").read_text()
    data = re.search(r'id="tokshuf-series">(.*?)</script>', html, re.S)
    assert data is not None
    panel = {p["title"]: p for p in json.loads(data.group(1))}["tokens drawn per source, by mix phase"]
    assert panel["series"]["phase starts"] == {"x": [6], "style": "boundary"}
    assert panel["series"]["sub2 (realized)"]["x"] == [0, 6, 12]
    assert main(["inspect", str(ck)]) == 0
    text = capsys.readouterr().out
    assert "phase 1: steps 6-39 (running)" in text
