"""Checkpoints on disk (spec §16.9, 16.10, 16.14): the documented format, its validation (B4),
its size, a hand-written fixture, and ``tokshuf inspect``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stream_helpers import EOS, make_stream, scratch, simple_corpus
from stream_reference import derive_key, permutation

from tokshuf.cli import main
from tokshuf.errors import ConfigError, FormatError
from tokshuf.stream import commit, load_state, merge_states, render, save_state, summarize

FIXTURE = Path(__file__).parent / "fixtures" / "stream" / "part-00000.json"


def _two_rank_state(stream: Any, steps: int = 3) -> list[dict[str, Any]]:
    parts = []
    for rank in (0, 1):
        w = stream.worker(rank, 2)
        for _ in range(steps):
            w.next_batch()
        parts.append(w.state_dict(world_size=2, rank=rank))
    return parts


@pytest.fixture
def stream(tmp_path: Path) -> Any:
    corpus = simple_corpus([[[5, 9, 2, 7], [3, 8, 4]], [[6, 6, 6, 6, 6]]])
    return make_stream(tmp_path / "data", corpus, weights=[2, 1], shuffle_window=2, logical_shards=4)


def test_ranks_save_then_commit_then_load_merged(stream: Any, tmp_path: Path) -> None:
    p0, p1 = _two_rank_state(stream)
    ck = tmp_path / "ckpt"
    save_state(ck, p1)  # rank 1 first: it does not commit
    assert not (ck / "COMMITTED").exists()
    with pytest.raises(FormatError, match="no COMMITTED marker"):
        load_state(ck)
    save_state(ck, p0)  # rank 0 sees every part and commits
    back = load_state(ck)
    merged = merge_states([p0, p1])
    for k in ("rows", "workers", "buffer"):
        assert np.array_equal(back[k], merged[k])
    assert back["topology"]["ranks"] == [0, 1]
    files = sorted(p.name for p in ck.iterdir())
    assert files == [
        "COMMITTED",
        "manifest.json",
        *[
            f"part-0000{r}.{x}"
            for r in (0, 1)
            for x in ("buffer.npy", "history.npy", "json", "rows.npy", "workers.npy")
        ],
    ]
    for p in ck.glob("*.npy"):  # plain numpy tables, no pickles
        assert np.load(p, allow_pickle=False).dtype == np.uint64


def test_b4_incomplete_or_damaged_checkpoints_are_rejected(stream: Any, tmp_path: Path) -> None:
    p0, p1 = _two_rank_state(stream)
    good = tmp_path / "good"
    save_state(good, p1)
    save_state(good, p0)

    def broken(name: str, damage: Any) -> Path:
        d = tmp_path / name
        shutil.copytree(good, d)
        damage(d)
        return d

    cases = {
        "a part is missing": (lambda d: (d / "part-00001.json").unlink(), "missing"),
        "a table is altered": (lambda d: (d / "part-00000.rows.npy").write_bytes(b"x"), "sha256"),
        "the manifest is altered": (lambda d: (d / "manifest.json").write_text("{}"), "does not match"),
        "a table is gone": (lambda d: (d / "part-00001.buffer.npy").unlink(), "missing"),
    }
    for name, (damage, msg) in cases.items():
        with pytest.raises(FormatError, match=msg):
            load_state(broken(name.replace(" ", "_"), damage))
    # A commit never happens while a rank's part is absent.
    lone = tmp_path / "lone"
    save_state(lone, p1)
    with pytest.raises(FormatError, match=r"ranks \[0\] did not write"):
        commit(lone, 2, timeout=0.1)


def test_mismatched_checkpoints_name_the_difference(stream: Any, tmp_path: Path) -> None:
    state = merge_states(_two_rank_state(stream))
    corpus = simple_corpus([[[5, 9, 2, 7], [3, 8, 4]], [[6, 6, 6, 6, 6]]])
    kw = {"weights": [2, 1], "shuffle_window": 2, "logical_shards": 4}
    cases = [
        ({"seed": 1}, "seed"),
        ({"logical_shards": 5}, "logical_shards"),
        ({"chunk_size": 4}, "document rules"),
        ({"eos_token_id": EOS + 1}, "document rules"),
    ]
    for i, (change, msg) in enumerate(cases):
        other = make_stream(tmp_path / f"d{i}", corpus, **{**kw, **change})
        with pytest.raises(ConfigError, match=msg):
            other.worker(0, 2, state)
    grown = simple_corpus([[[5, 9, 2, 7], [3, 8, 4, 1]], [[6, 6, 6, 6, 6]]])
    with pytest.raises(ConfigError, match="changed since the checkpoint"):
        make_stream(tmp_path / "grown", grown, **kw).worker(0, 2, state)
    swapped = state | {"manifest": state["manifest"] | {"datasets": state["manifest"]["datasets"][::-1]}}
    with pytest.raises(ConfigError, match="names and order"):
        stream.worker(0, 2, swapped)
    with pytest.raises(FormatError, match="version"):
        stream.worker(0, 2, state | {"version": 99})
    resized = make_stream(tmp_path / "seq", corpus, sequence_length=12, **kw)
    with pytest.raises(ConfigError, match="seq_length changed"):
        resized.worker(0, 2, state)


def test_state_size_is_rows_plus_buffer_references(tmp_path: Path) -> None:
    corpus = simple_corpus([[[40] * 50], [[30] * 50]])
    for shards, window in ((16, 0), (64, 0), (64, 8)):
        with scratch() as tmp:
            s = make_stream(
                Path(tmp), corpus, logical_shards=shards, shuffle_window=window, sequence_length=32
            )
            w = s.worker(0, 1)
            for _ in range(20):
                w.next_batch()
            st = w.state_dict()
            d = Path(tmp) / "ck"
            save_state(d, st)
            size = sum(p.stat().st_size for p in d.iterdir())
            rows, segs = len(st["rows"]), len(st["buffer"])
            assert rows == 2 * shards
            buffered = int(st["buffer"][:, 7].sum()) if segs else 0
            assert buffered == window * 33
            # 56 B per shard row, 64 B per buffered run (never more runs than tokens), plus a
            # constant for the JSON envelope and .npy headers.
            assert size <= 56 * rows + 64 * segs + 6000, (shards, window, size)


def test_hand_written_fixture_resumes_where_it_says(tmp_path: Path) -> None:
    corpus = simple_corpus([[[3, 4, 5, 6]]])
    stream = make_stream(tmp_path, corpus, logical_shards=2)
    state = load_state(FIXTURE)
    assert json.loads(FIXTURE.read_text())["arrays"]["rows"][0][3:5] == [1, 2]
    w = stream.worker(0, 1, state)
    b = w.next_batch()
    # Shard 0 = documents 0 and 1; epoch 0's order from the spec's keyed permutation.
    doc = permutation(2, derive_key([0, 0, 0, 0]))[1]
    emitted = [*corpus[0][0][doc], EOS]
    first = b["segments"][0]
    assert first.tolist()[2:] == [0, 0, 0, doc, 2, min(5, len(emitted)) - 2]
    assert b["input"][0, : first[7]].tolist() == emitted[2 : 2 + first[7]]
    assert w.batches == 4  # the worker's counter went on from the fixture's 3


def test_inspect_summarizes_without_the_data(stream: Any, tmp_path: Path, capsys: Any) -> None:
    p0, p1 = _two_rank_state(stream, steps=4)
    ck = tmp_path / "ck"
    save_state(ck, p1)
    save_state(ck, p0)
    s = summarize(load_state(ck))
    consumed = {d["name"]: d["tokens_consumed"] for d in s["datasets"]}
    lines = 2 * 4 * 9  # 2 workers x 4 batches x 1 line of seq_length + 1 tokens
    assert sum(consumed.values()) == lines
    assert s["topology"]["workers"] == 2
    assert all(0 <= d["epoch_min"] <= d["epoch_max"] for d in s["datasets"])
    assert "sub0" in render(s)
    assert main(["inspect", str(ck)]) == 0
    assert "sub0" in capsys.readouterr().out
    assert main(["inspect", str(ck), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["datasets"][1]["name"] == "sub1"
    (ck / "COMMITTED").unlink()
    assert main(["inspect", str(ck)]) == 1
    assert "COMMITTED" in capsys.readouterr().err


def _saved(stream: Any, tmp_path: Path) -> Path:
    p0, p1 = _two_rank_state(stream)
    good = tmp_path / "good"
    save_state(good, p1)
    save_state(good, p0)
    return good


@pytest.mark.parametrize(
    ("file", "content"),
    [
        ("COMMITTED", b'{"manifest_sha'),  # truncated
        ("COMMITTED", b"{}"),
        ("COMMITTED", b"[1, 2]"),
        ("COMMITTED", b"\xff\xfe"),
        ("part-00001.json", None),  # a part without its manifest key (its sha256 re-recorded)
    ],
)
def test_malformed_markers_and_parts_are_format_errors_naming_the_file(
    stream: Any, tmp_path: Path, capsys: Any, file: str, content: bytes | None
) -> None:
    ck = _saved(stream, tmp_path)
    if content is None:
        part = json.loads((ck / file).read_text())
        del part["manifest"]
        (ck / file).write_text(json.dumps(part))
        # Re-record its hash, so only the missing key is wrong (a careless hand edit, say).
        commit(ck, 2, timeout=1)
    else:
        (ck / file).write_bytes(content)
    with pytest.raises(FormatError, match=str(ck / file).replace(".", r"\.")):
        load_state(ck)
    assert main(["inspect", str(ck)]) == 1
    err = capsys.readouterr().err
    assert file in err
    assert "Traceback" not in err


def _doctored(stream: Any, tmp_path: Path, change: Any) -> dict[str, Any]:
    # Loaded and merged tables are read-only (checked once, then trusted): a hand edit copies them.
    merged = merge_states(_two_rank_state(stream))
    state = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in merged.items()}
    change(state)
    return state


@pytest.mark.parametrize(
    ("what", "change", "msg"),
    [
        ("sub-dataset 5 of 2", lambda s: s["rows"].__setitem__((0, 0), 5), "sub-dataset 5.*2 sub-datasets"),
        ("shard 9 of 4", lambda s: s["rows"].__setitem__((0, 1), 9), "logical shard 9.*4"),
        ("no rows", lambda s: s.__setitem__("rows", np.zeros((0, 7), np.uint64)), "no row for"),
        ("a row twice", lambda s: s["rows"].__setitem__(1, s["rows"][0]), "twice"),
        ("negative consumed", lambda s: s["buffer"].__setitem__((slice(None), 7), 10**6), "buffers hold"),
    ],
)
def test_impossible_states_are_refused_on_load_and_by_inspect(
    stream: Any, tmp_path: Path, capsys: Any, what: str, change: Any, msg: str
) -> None:
    state = _doctored(stream, tmp_path, change)
    if what == "negative consumed":
        assert len(state["buffer"])  # the case needs buffered lines
    with pytest.raises(FormatError, match=msg):
        stream.worker(0, 2, state)
    # Written as a checkpoint by hand (save_state refuses it too), then inspected.
    with pytest.raises(FormatError, match=msg):
        save_state(tmp_path / "refused", state)
    from tokshuf.stream import checkpoint

    ck = tmp_path / "ck"
    monkey = checkpoint.checked
    checkpoint.checked = lambda s: dict(s)  # type: ignore[assignment]
    try:
        save_state(ck, state)
    finally:
        checkpoint.checked = monkey
    with pytest.raises(FormatError, match=msg):
        load_state(ck)
    assert main(["inspect", str(ck)]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_a_commit_waiting_for_other_ranks_says_so(
    stream: Any, tmp_path: Path, caplog: Any, monkeypatch: Any
) -> None:
    from tokshuf.stream import checkpoint

    _, p1 = _two_rank_state(stream)
    lone = tmp_path / "lone"
    save_state(lone, p1)
    monkeypatch.setattr(checkpoint, "_WAIT_LOG_FIRST_S", 0.0)
    with caplog.at_level("INFO", logger="tokshuf"), pytest.raises(FormatError, match="did not write"):
        commit(lone, 4, timeout=0.3)
    waits = [r for r in caplog.records if r.name == "tokshuf" and "waiting for ranks" in r.getMessage()]
    assert waits, caplog.records
    assert "waiting for ranks 0, 2-3 to write their parts" in waits[0].getMessage()


def test_a_load_checks_the_state_once(stream: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a checkpoint and opening workers from it checks the tables once (it was five
    times, each with a sort: most of a load's time at 10k logical shards)."""
    from tokshuf.stream import state as state_module

    ck = _saved(stream, tmp_path)
    calls = []
    check = state_module._check_tables
    monkeypatch.setattr(state_module, "_check_tables", lambda *a: calls.append(1) or check(*a))
    loaded = stream.check_state(load_state(ck), 2)
    for g in range(4):  # a rescale to 4 workers: each takes its tables from the whole state
        stream.worker(g, 4, loaded)
    assert len(calls) == 1
    merged = merge_states([loaded])  # a new state (its tables concatenated): checked once more
    stream.worker(0, 2, merged)
    assert len(calls) == 2


def test_a_version_1_checkpoint_directory_still_loads(tmp_path: Path) -> None:
    """A checkpoint written before mix schedules (manifest and part v1, no history table) loads
    as one phase with its weights; a version this tokshuf does not know is refused, named."""
    import hashlib

    corpus = simple_corpus([[[3, 4, 5, 6]]])
    stream = make_stream(tmp_path / "data", corpus, logical_shards=2)
    ck = tmp_path / "v1"
    ck.mkdir()
    shutil.copy(FIXTURE, ck / "part-00000.json")
    commit(ck, 1, timeout=1)
    manifest = json.loads((ck / "manifest.json").read_text())
    manifest["version"] = 1
    data = (json.dumps(manifest) + "\n").encode()
    (ck / "manifest.json").write_bytes(data)
    (ck / "COMMITTED").write_text(json.dumps({"manifest_sha256": hashlib.sha256(data).hexdigest()}))
    state = load_state(ck)
    assert state["version"] == 2
    assert state["manifest"]["mix"] == [{"start_step": 0, "weights": [1]}]
    assert state["workers"].tolist() == [[0, 0, 3, 3, 0, 26]]  # step: the 3 batches it produced
    assert stream.worker(0, 1, state).next_batch()["input"].shape == (1, 8)
    manifest["version"] = 3
    data = (json.dumps(manifest) + "\n").encode()
    (ck / "manifest.json").write_bytes(data)
    (ck / "COMMITTED").write_text(json.dumps({"manifest_sha256": hashlib.sha256(data).hexdigest()}))
    with pytest.raises(FormatError, match=r"unsupported checkpoint 'tokshuf\.stream\.checkpoint' v3"):
        load_state(ck)
